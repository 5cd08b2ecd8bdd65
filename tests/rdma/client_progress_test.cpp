// The client's progress modes (client.hpp Progress) end to end against the real daemon (re-executed from this
// binary as "daemon"): PUT, GET (every byte checked) and DELETE of 10 B .. 2 MiB values in kCaller (one test
// sleeping on event_fd() between turns), kThread and kEalLcores. This process starts no EAL of its own: the
// kCaller and kThread tests check that none is up, and the kEalLcores test, last, brings up the client's.
#include <gtest/gtest.h>
#include <poll.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.hpp"
#include "dataplane/eal_runtime.hpp"
#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tests/rdma/rdma_test_support.hpp"

int rdmagate_main(int argc, char** argv);

namespace {

using namespace rdmagate;
using client::Client;
using client::ClientConfig;
using client::Progress;
using client::Result;
using client::Status;
using testfix::proc::Child;
using testfix::proc::read_file;
using testfix::proc::spawn;
using testfix::proc::write_file;
using namespace std::chrono_literals;

std::string g_self;
std::string g_device;
int g_rdma_port = 7700;
int g_http_port = 19500;

// 10 B to 2 MiB: inline both ways, inline PUT with a chunked GET, chunked both ways.
const std::vector<std::size_t> kSizes = {10, 100, 1000, 3000, 4000, 5000, 64u << 10, 1u << 20, 2u << 20};

std::uint8_t pattern(std::uint64_t seed, std::size_t j) {
  const std::uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (j * 0xff51afd7ed558ccdull);
  return static_cast<std::uint8_t>(x >> 29 ^ x >> 7 ^ j);
}
void fill(std::vector<std::uint8_t>& v, std::uint64_t seed) {
  for (std::size_t j = 0; j < v.size(); ++j) v[j] = pattern(seed, j);
}
std::size_t first_mismatch(const std::vector<std::uint8_t>& v, std::size_t n, std::uint64_t seed) {
  for (std::size_t j = 0; j < n; ++j) {
    if (v[j] != pattern(seed, j)) return j;
  }
  return n;
}

bool eal_up() {
  return dataplane::EalRuntime::initialised_in_process() || rte_lcore_count() > 0;
}

class ClientProgress : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tag = std::to_string(getpid());
    yaml_ = "/tmp/cpt_" + tag + ".yaml";
    log_ = "/tmp/cpt_" + tag + ".log";
    // The gateway polls on lcore 1 (CPU 1), its control on CPU 0: the shipped default placement.
    ASSERT_TRUE(testfix::proc::start_test_gateway(
        &daemon_, g_self, yaml_,
        testfix::proc::test_gateway_yaml(testfix::rxe_addr(), g_rdma_port, g_http_port,
                                         "  max_value_bytes: 4194304\n"),
        log_, g_http_port))
        << read_file(log_);
  }
  void TearDown() override {
    if (cl_) {
      const client::ClientStats s = cl_->stats();
      EXPECT_EQ(s.submitted, s.completed) << "requests accepted but never completed";
      EXPECT_EQ(s.protocol_errors, 0u);
      cl_.reset();
    }
    if (daemon_.pid > 0) {
      kill(daemon_.pid, SIGTERM);
      daemon_.wait_exit(15s);  // else the destructor's SIGKILL
    }
    std::remove(yaml_.c_str());
    if (!HasFailure()) std::remove(log_.c_str());
  }

  ClientConfig config(Progress p) {
    ClientConfig c;
    c.progress = p;
    c.gateways.push_back(client::Endpoint{testfix::rxe_addr(), static_cast<std::uint16_t>(g_rdma_port)});
    c.device = g_device;
    c.pool_bytes = 8u << 20;
    c.yield_when_idle = true;  // kEalLcores: 2 vCPUs shared with the gateway
    c.request_timeout = 20s;
    return c;
  }
  void start(const ClientConfig& c) {
    std::string err;
    cl_ = Client::create(c, &err);
    ASSERT_TRUE(cl_) << err;
    ASSERT_TRUE(cl_->wait_connected(30s)) << "client connections did not come up";
  }

  // Sync PUT, GET (every byte), DELETE, GET (not found) of every size from heap buffers.
  void sync_round_trips(const char* tag) {
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      const std::size_t n = kSizes[i];
      const std::string key = std::string(tag) + "-" + std::to_string(n);
      std::vector<std::uint8_t> val(n), dst(n + 16);
      fill(val, i + 7);
      const Result p = cl_->put(key, val.data(), n);
      ASSERT_EQ(p.status, Status::kOk) << key << ": " << client::status_name(p.status);
      EXPECT_EQ(p.size, n);
      const Result g = cl_->get(key, dst.data(), dst.size());
      ASSERT_EQ(g.status, Status::kOk) << key << ": " << client::status_name(g.status);
      ASSERT_EQ(g.size, n) << key;
      EXPECT_EQ(first_mismatch(dst, n, i + 7), n) << key;
      EXPECT_EQ(cl_->del(key).status, Status::kOk) << key;
      EXPECT_EQ(cl_->get(key, dst.data(), dst.size()).status, Status::kNotFound) << key;
      // Before the vectors go: a later buffer at the same address must not find these registrations.
      cl_->release_buffer(val.data());
      cl_->release_buffer(dst.data());
    }
  }

  Child daemon_;
  std::string yaml_, log_;
  std::unique_ptr<Client> cl_;
};

struct Done {
  bool done = false;
  Result r;
};
void on_done(void* arg, const Result& r) {
  auto* d = static_cast<Done*>(arg);
  d->r = r;
  d->done = true;
}

// The UCX pattern, as an application's event loop runs it: after each async submission, arm(); kBusy means
// progress() first; kOk means sleep in poll() on event_fd() until it is readable, then progress(). Every
// sleep must end by the fd (never by poll's 10 s limit): whatever completes a request makes the fd readable.
TEST_F(ClientProgress, CallerModeSleepsOnTheEventFdBetweenOperations) {
  ASSERT_FALSE(eal_up()) << "this process must not have EAL before the kEalLcores test";
  ClientConfig c = config(Progress::kCaller);
  ASSERT_EQ(c.progress, ClientConfig{}.progress) << "kCaller is the default";
  ASSERT_NO_FATAL_FAILURE(start(c));
  const int efd = cl_->event_fd();
  ASSERT_GE(efd, 0);
  std::uint64_t sleeps = 0, woken = 0, busy = 0;
  // One operation to its callback, sleeping whenever arm() allows.
  auto await = [&](Done& d) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!d.done && std::chrono::steady_clock::now() < deadline) {
      const Status a = cl_->arm();
      if (a == Status::kBusy) {
        ++busy;
        cl_->progress();
        continue;
      }
      ASSERT_EQ(a, Status::kOk);
      ++sleeps;
      pollfd p{efd, POLLIN, 0};
      const int r = poll(&p, 1, 10000);
      ASSERT_EQ(r, 1) << "armed with a request open, the event fd stayed quiet for 10 s";
      ++woken;
      cl_->progress();
    }
    ASSERT_TRUE(d.done);
  };
  for (std::size_t i = 0; i < kSizes.size(); ++i) {
    const std::size_t n = kSizes[i];
    const std::string key = "caller-efd-" + std::to_string(n);
    std::vector<std::uint8_t> val(n), dst(n);
    fill(val, i + 100);
    Done put, get, del;
    ASSERT_EQ(cl_->put_async(key, val.data(), n, on_done, &put), Status::kOk);
    ASSERT_NO_FATAL_FAILURE(await(put));
    ASSERT_EQ(put.r.status, Status::kOk) << key << ": " << client::status_name(put.r.status);
    ASSERT_EQ(cl_->get_async(key, dst.data(), n, on_done, &get), Status::kOk);
    ASSERT_NO_FATAL_FAILURE(await(get));
    ASSERT_EQ(get.r.status, Status::kOk) << key << ": " << client::status_name(get.r.status);
    ASSERT_EQ(get.r.size, n);
    EXPECT_EQ(first_mismatch(dst, n, i + 100), n) << key;
    ASSERT_EQ(cl_->del_async(key, on_done, &del), Status::kOk);
    ASSERT_NO_FATAL_FAILURE(await(del));
    EXPECT_EQ(del.r.status, Status::kOk) << key;
    cl_->release_buffer(val.data());
    cl_->release_buffer(dst.data());
  }
  std::printf(
      "[ caller efd ] %zu sizes x 3 ops: %llu sleeps on the event fd (all woken by it), %llu kBusy arms\n",
      kSizes.size(), static_cast<unsigned long long>(sleeps), static_cast<unsigned long long>(busy));
  // The 2 MiB transfers alone take milliseconds: the loop must have slept, and the fd woke every sleep.
  EXPECT_GT(sleeps, 0u);
  EXPECT_EQ(woken, sleeps);
  EXPECT_FALSE(eal_up()) << "kCaller brought EAL up";
}

// Sync calls in kCaller: they turn the core themselves (no thread of the client's runs it).
TEST_F(ClientProgress, CallerModeSyncCalls) {
  ASSERT_FALSE(eal_up());
  ASSERT_NO_FATAL_FAILURE(start(config(Progress::kCaller)));
  ASSERT_NO_FATAL_FAILURE(sync_round_trips("caller-sync"));
  // A pool buffer (ordinary pages without EAL) as the destination of a chunked GET.
  std::span<std::byte> buf = cl_->alloc_buffer(1u << 20);
  ASSERT_EQ(buf.size(), 1u << 20);
  std::vector<std::uint8_t> val(1u << 20);
  fill(val, 55);
  ASSERT_EQ(cl_->put("caller-pool", val.data(), val.size()).status, Status::kOk);
  const Result g = cl_->get("caller-pool", buf.data(), buf.size());
  ASSERT_EQ(g.status, Status::kOk);
  ASSERT_EQ(g.size, val.size());
  std::vector<std::uint8_t> got(reinterpret_cast<const std::uint8_t*>(buf.data()),
                                reinterpret_cast<const std::uint8_t*>(buf.data()) + buf.size());
  EXPECT_EQ(first_mismatch(got, got.size(), 55), got.size());
  cl_->free_buffer(buf);
  cl_->release_buffer(val.data());
  EXPECT_EQ(cl_->del("caller-pool").status, Status::kOk);
  EXPECT_FALSE(eal_up());
}

// kThread: the client's own unpinned thread runs the core; callers use sync calls from two threads at once
// and async ones whose callbacks run on that thread. No event fd, nothing to progress.
TEST_F(ClientProgress, ThreadModeFromTwoThreads) {
  ASSERT_FALSE(eal_up());
  ASSERT_NO_FATAL_FAILURE(start(config(Progress::kThread)));
  EXPECT_EQ(cl_->event_fd(), -1);
  EXPECT_EQ(cl_->progress(), 0u);
  EXPECT_EQ(cl_->arm(), Status::kOk);
  std::thread other([&] { sync_round_trips("thread-b"); });
  sync_round_trips("thread-a");
  other.join();
  std::atomic<unsigned> done{0};
  std::vector<std::uint8_t> val(3000);
  fill(val, 9);
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(cl_->put_async(
                  "thread-async-" + std::to_string(i), val.data(), val.size(),
                  [](void* a, const Result& r) {
                    if (r.status == Status::kOk) static_cast<std::atomic<unsigned>*>(a)->fetch_add(1);
                  },
                  &done),
              Status::kOk);
  }
  ASSERT_TRUE(testfix::proc::wait_for([&] { return done.load() == 16; }, 20s));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(cl_->del("thread-async-" + std::to_string(i)).status, Status::kOk);
  EXPECT_FALSE(eal_up());
}

// kEalLcores (last: it brings EAL up for the rest of the process): the client's derived EAL, one pinned core.
TEST_F(ClientProgress, EalLcoresMode) {
  ASSERT_NO_FATAL_FAILURE(start(config(Progress::kEalLcores)));
  EXPECT_TRUE(eal_up());
  EXPECT_EQ(cl_->event_fd(), -1);
  EXPECT_EQ(cl_->progress(), 0u);
  ASSERT_NO_FATAL_FAILURE(sync_round_trips("eal"));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  // No EAL here: the daemon starts its own, and so does the kEalLcores client, last.
  return rdmagate::testfix::rdma_test_main(argc, argv, "client_progress_test", /*eal_lcores=*/nullptr,
                                           [](const rdmagate::control::RdmaProbe& probe) {
                                             g_self = rdmagate::testfix::self_exe("client_progress_test");
                                             if (g_self.empty()) return 1;
                                             g_device = probe.device;
                                             g_rdma_port = 7700 + static_cast<int>(getpid() % 200) * 2;
                                             g_http_port = 19500 + static_cast<int>(getpid() % 400);
                                             return 0;
                                           });
}

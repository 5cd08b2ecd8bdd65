// Keepalive timing a client can learn (protocol 1.1, docs/protocol.md §3.8), end to end against the real
// daemon (re-executed from this binary as "daemon") configured with protocol.keepalive_ms 200 and
// protocol.dead_peer_timeout_ms 900: its accept announces both, and a client that keeps running its progress
// is not dropped however long it is idle. 900 ms is below the 1 s a client uses when nothing is announced, so
// these pass only if the negotiated interval reaches the client's credit machine.
//   - kCaller, the application asleep in poll() on event_fd() for 5 s: the client's own keepalive timer wakes
//     it, the gateway counts no dead peer, and a GET afterwards works without a reconnect.
//   - kThread, the application doing nothing for 5 s: the same.
//   - The control: kCaller with no progress() at all for 5 s: the gateway closes the connection as a dead
//     peer (so the first two cases would fail if keepalives did not go out), and the client reconnects.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.hpp"
#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tests/rdma/rdma_test_support.hpp"

int rdmagate_main(int argc, char** argv);

namespace {

using namespace rdmagate;
using client::Client;
using client::ClientConfig;
using client::Progress;
using client::Status;
using testfix::proc::Child;
using testfix::proc::read_file;
using namespace std::chrono_literals;

std::string g_self;
std::string g_device;
int g_rdma_port = 7900;
int g_http_port = 20100;

constexpr auto kIdle = 5s;  // more than five dead-peer timeouts

// The gateway's rdmagate_connection_failures_total{cause="dead_peer"}, or -1 when /metrics does not say.
long dead_peers(int http_port) {
  const testfix::proc::HttpReply r = testfix::proc::http_get(http_port, "/metrics");
  const std::string key = "rdmagate_connection_failures_total{cause=\"dead_peer\"} ";
  const std::size_t at = r.body.find(key);
  if (r.status != 200 || at == std::string::npos) return -1;
  return std::stol(r.body.substr(at + key.size()));
}

class ClientKeepalive : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tag = std::to_string(getpid());
    yaml_ = "/tmp/ckt_" + tag + ".yaml";
    log_ = "/tmp/ckt_" + tag + ".log";
    ASSERT_TRUE(testfix::proc::start_test_gateway(
        &daemon_, g_self, yaml_,
        testfix::proc::test_gateway_yaml(testfix::rxe_addr(), g_rdma_port, g_http_port,
                                         "  max_value_bytes: 4194304\n"
                                         "protocol:\n  keepalive_ms: 200\n  dead_peer_timeout_ms: 900\n"),
        log_, g_http_port))
        << read_file(log_);
    ASSERT_EQ(dead_peers(g_http_port), 0) << "no dead-peer series on /metrics";
  }
  void TearDown() override {
    if (cl_) {
      const client::ClientStats s = cl_->stats();
      EXPECT_EQ(s.submitted, s.completed) << "requests accepted but never completed";
      cl_.reset();
    }
    if (daemon_.pid > 0) {
      kill(daemon_.pid, SIGTERM);
      daemon_.wait_exit(15s);
    }
    std::remove(yaml_.c_str());
    if (!HasFailure()) std::remove(log_.c_str());
  }

  void start(Progress p) {
    ClientConfig c;
    c.progress = p;
    c.gateways.push_back(client::Endpoint{testfix::rxe_addr(), static_cast<std::uint16_t>(g_rdma_port)});
    c.device = g_device;
    c.pool_bytes = 4u << 20;
    c.request_timeout = 20s;
    std::string err;
    cl_ = Client::create(c, &err);
    ASSERT_TRUE(cl_) << err;
    ASSERT_TRUE(cl_->wait_connected(30s)) << "client connections did not come up";
    const std::string v = "kept alive";
    ASSERT_EQ(cl_->put("ka", v.data(), v.size()).status, Status::kOk);
  }

  // The application's event loop with nothing to do: progress what is ready, arm, sleep on the event fd.
  void sleep_on_event_fd(std::chrono::steady_clock::duration d) {
    const auto end = std::chrono::steady_clock::now() + d;
    for (;;) {
      while (cl_->progress() > 0) {
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      if (cl_->arm() == Status::kBusy) continue;
      pollfd p{cl_->event_fd(), POLLIN, 0};
      poll(&p, 1, static_cast<int>(left.count()));
    }
  }

  void expect_get_works() {
    char buf[32] = {};
    const client::Result r = cl_->get("ka", buf, sizeof(buf));
    ASSERT_EQ(r.status, Status::kOk);
    EXPECT_EQ(std::string(buf, r.size), "kept alive");
  }

  Child daemon_;
  std::string yaml_, log_;
  std::unique_ptr<Client> cl_;
};

TEST_F(ClientKeepalive, CallerModeAsleepOnTheEventFdIsNotDropped) {
  ASSERT_NO_FATAL_FAILURE(start(Progress::kCaller));
  const std::uint64_t reconnects = cl_->stats().reconnects;
  sleep_on_event_fd(kIdle);
  EXPECT_EQ(dead_peers(g_http_port), 0) << read_file(log_);
  EXPECT_EQ(cl_->stats().reconnects, reconnects);
  EXPECT_EQ(cl_->stats().connections_up, 1u);
  ASSERT_NO_FATAL_FAILURE(expect_get_works());
}

TEST_F(ClientKeepalive, ThreadModeIdleIsNotDropped) {
  ASSERT_NO_FATAL_FAILURE(start(Progress::kThread));
  const std::uint64_t reconnects = cl_->stats().reconnects;
  std::this_thread::sleep_for(kIdle);
  EXPECT_EQ(dead_peers(g_http_port), 0) << read_file(log_);
  EXPECT_EQ(cl_->stats().reconnects, reconnects);
  ASSERT_NO_FATAL_FAILURE(expect_get_works());
}

// Without progress nothing goes out: the gateway's dead-peer timeout is real, so the two tests above measure
// the keepalives and not a gateway that never drops anyone.
TEST_F(ClientKeepalive, CallerModeWithoutProgressIsDroppedAsDeadPeer) {
  ASSERT_NO_FATAL_FAILURE(start(Progress::kCaller));
  std::this_thread::sleep_for(kIdle);
  EXPECT_GE(dead_peers(g_http_port), 1) << read_file(log_);
  // The client notices at its next progress and comes back by itself.
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (cl_->stats().reconnects == 0 && std::chrono::steady_clock::now() < end) sleep_on_event_fd(100ms);
  EXPECT_GE(cl_->stats().reconnects, 1u);
  ASSERT_TRUE(cl_->wait_connected(30s));
  ASSERT_NO_FATAL_FAILURE(expect_get_works());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  return rdmagate::testfix::rdma_test_main(argc, argv, "client_keepalive_test", /*eal_lcores=*/nullptr,
                                           [](const rdmagate::control::RdmaProbe& probe) {
                                             g_self = rdmagate::testfix::self_exe("client_keepalive_test");
                                             if (g_self.empty()) return 1;
                                             g_device = probe.device;
                                             g_rdma_port = 7900 + static_cast<int>(getpid() % 200) * 2;
                                             g_http_port = 20100 + static_cast<int>(getpid() % 400);
                                             return 0;
                                           });
}

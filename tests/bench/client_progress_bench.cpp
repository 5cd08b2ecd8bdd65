// The client's progress modes side by side in one process and one boot (issue 16's acceptance figures; run in
// the guest, never a timed test): 64 B inline GET round-trip latency (a chain of callbacks, each issuing the
// next, and sync calls: p50, average) and 64 B GET rate (a closed loop of `depth` async GETs, each callback
// issuing the next) in kCaller, kThread and kEalLcores; and what an idle connected client costs in kCaller
// (the caller sleeping on event_fd()) and in kThread: process CPU time over the idle period (/proc/self/stat)
// and context switches per second of each of the client's threads (/proc/self/task/*/status, named rg-control
// and rg-progress).
//
//   client_progress_bench [--addr A] [--device D] [--ops N] [--idle-s S] [--depth D] [--pin-cpu0]
//
// The address defaults to the guest's rxe address (RDMAGATE_RXE_ADDR), so tools/rdma-suite can run it from a
// manifest line.
//
// The program re-executes itself as the gateway ("daemon", the shipped defaults: control on CPU 0, the
// polling core on CPU 1). kEalLcores runs last: it brings EAL up, and the earlier modes prove they need none.
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.hpp"
#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_support.hpp"

int rdmagate_main(int argc, char** argv);

namespace {

using namespace rdmagate;
using client::Client;
using client::Progress;
using client::Result;
using client::Status;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const char* mode_name(Progress p) {
  switch (p) {
    case Progress::kCaller:
      return "kCaller";
    case Progress::kThread:
      return "kThread";
    case Progress::kEalLcores:
      return "kEalLcores";
  }
  return "?";
}

struct Latency {
  double p50_us = 0, avg_us = 0, p99_us = 0, min_us = 0;
};

// The summary of round trips measured after the warm-up (sorts `us`).
Latency summarize(std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  Latency l;
  l.p50_us = us[us.size() / 2];
  l.p99_us = us[us.size() * 99 / 100];
  l.min_us = us.front();
  double sum = 0;
  for (double v : us) sum += v;
  l.avg_us = sum / static_cast<double>(us.size());
  return l;
}

Latency sync_get_latency(Client& cl, const std::string& key, unsigned ops) {
  std::vector<double> us;
  us.reserve(ops);
  char buf[64];
  for (unsigned i = 0; i < ops + ops / 10; ++i) {
    const auto t0 = Clock::now();
    const Result r = cl.get(key, buf, sizeof(buf));
    const auto t1 = Clock::now();
    if (r.status != Status::kOk || r.size != sizeof(buf)) {
      std::fprintf(stderr, "GET failed: %s\n", client::status_name(r.status));
      std::exit(1);
    }
    if (i >= ops / 10)
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());  // warm-up dropped
  }
  return summarize(us);
}

// Round trips as a chain of callbacks (depth 1: each completion issues the next GET), timed on the thread the
// callbacks run on: the transport's latency without a caller thread's wakeup (rdmagate-bench measures so).
struct Chain {
  Client* cl = nullptr;
  std::string key;
  char buf[64] = {};
  std::vector<double>* us = nullptr;
  unsigned left = 0;
  Clock::time_point t0;
  std::atomic<bool> done{false};
  bool failed = false;
};
void chain_done(void* arg, const Result& r) {
  auto* c = static_cast<Chain*>(arg);
  const auto t1 = Clock::now();
  if (r.status != Status::kOk) c->failed = true;
  c->us->push_back(std::chrono::duration<double, std::micro>(t1 - c->t0).count());
  if (c->failed || --c->left == 0) {
    c->done.store(true, std::memory_order_release);
    return;
  }
  c->t0 = Clock::now();
  if (c->cl->get_async(c->key, c->buf, sizeof(c->buf), chain_done, c) != Status::kOk) {
    c->failed = true;
    c->done.store(true, std::memory_order_release);
  }
}

Latency chained_get_latency(Client& cl, Progress mode, const std::string& key, unsigned ops) {
  std::vector<double> us;
  us.reserve(ops + ops / 10);
  Chain c;
  c.cl = &cl;
  c.key = key;
  c.us = &us;
  c.left = ops + ops / 10;
  c.t0 = Clock::now();
  if (cl.get_async(key, c.buf, sizeof(c.buf), chain_done, &c) != Status::kOk) std::exit(1);
  unsigned empty = 0;
  while (!c.done.load(std::memory_order_acquire)) {
    if (mode != Progress::kCaller) {
      std::this_thread::sleep_for(1ms);
    } else if (cl.progress() != 0) {
      empty = 0;
    } else if (++empty >= 64) {
      std::this_thread::yield();
    }
  }
  if (c.failed) {
    std::fprintf(stderr, "chained GET failed\n");
    std::exit(1);
  }
  us.erase(us.begin(), us.begin() + ops / 10);  // warm-up
  return summarize(us);
}

// A closed loop: every completion issues the next GET until the deadline.
struct Loop {
  Client* cl = nullptr;
  std::string key;
  char buf[64] = {};
  std::atomic<std::uint64_t>* done = nullptr;
  std::atomic<unsigned>* live = nullptr;
  Clock::time_point end;
  std::atomic<bool>* failed = nullptr;
};
void loop_done(void* arg, const Result& r) {
  auto* l = static_cast<Loop*>(arg);
  if (r.status != Status::kOk) l->failed->store(true);
  l->done->fetch_add(1, std::memory_order_relaxed);
  if (Clock::now() < l->end && l->cl->get_async(l->key, l->buf, sizeof(l->buf), loop_done, l) == Status::kOk)
    return;
  l->live->fetch_sub(1, std::memory_order_release);
}

double get_rate(Client& cl, Progress mode, const std::string& key, unsigned depth,
                std::chrono::seconds secs) {
  std::atomic<std::uint64_t> done{0};
  std::atomic<unsigned> live{depth};
  std::atomic<bool> failed{false};
  std::vector<Loop> loops(depth);
  const auto t0 = Clock::now();
  for (Loop& l : loops) {
    l.cl = &cl;
    l.key = key;
    l.done = &done;
    l.live = &live;
    l.failed = &failed;
    l.end = t0 + secs;
    if (cl.get_async(key, l.buf, sizeof(l.buf), loop_done, &l) != Status::kOk) live.fetch_sub(1);
  }
  unsigned empty = 0;
  while (live.load(std::memory_order_acquire) != 0) {
    if (mode == Progress::kCaller) {
      // An application's progress loop on a shared CPU: yield after a run of empty turns.
      if (cl.progress() != 0) {
        empty = 0;
      } else if (++empty >= 64) {
        std::this_thread::yield();
      }
    } else {
      std::this_thread::sleep_for(1ms);
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failed.load()) {
    std::fprintf(stderr, "rate loop: a GET failed\n");
    std::exit(1);
  }
  return static_cast<double>(done.load()) / s;
}

// ---- idle cost
// ----------------------------------------------------------------------------------------------

std::uint64_t cpu_ticks(const std::string& stat_path) {
  std::ifstream f(stat_path);
  std::string s((std::istreambuf_iterator<char>(f)), {});
  const auto rp = s.rfind(')');
  std::istringstream in(s.substr(rp + 2));
  std::string field;
  std::uint64_t ut = 0, st = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) ut = std::stoull(field);
    if (i == 15) st = std::stoull(field);
  }
  return ut + st;
}

struct TaskSwitches {
  std::string comm;
  std::uint64_t switches = 0;
};
std::map<int, TaskSwitches> task_switches() {
  std::map<int, TaskSwitches> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    const int tid = std::atoi(e.path().filename().c_str());
    TaskSwitches t;
    std::ifstream c(e.path() / "comm");
    std::getline(c, t.comm);
    std::ifstream st(e.path() / "status");
    std::string line;
    while (std::getline(st, line)) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0 ||
          line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) {
        t.switches += std::stoull(line.substr(line.find(':') + 1));
      }
    }
    out[tid] = t;
  }
  return out;
}

// The idle client for `secs`: kCaller sleeps in poll() on its event fd (arm first, progress when woken),
// kThread's caller just sleeps. Prints CPU % of the whole process and switches/s per client thread.
void idle_cost(Client& cl, Progress mode, int secs) {
  const std::uint64_t hz = static_cast<std::uint64_t>(sysconf(_SC_CLK_TCK));
  const auto sw0 = task_switches();
  const std::uint64_t c0 = cpu_ticks("/proc/self/stat");
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::seconds(secs);
  std::uint64_t wakeups = 0, busy = 0;
  if (mode == Progress::kCaller) {
    const int efd = cl.event_fd();
    while (Clock::now() < end) {
      if (cl.arm() != Status::kOk) {
        ++busy;
        cl.progress();
        continue;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
      pollfd p{efd, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(std::max<long long>(left, 0))) == 1) {
        ++wakeups;
        cl.progress();
      }
    }
  } else {
    std::this_thread::sleep_until(end);
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::uint64_t c1 = cpu_ticks("/proc/self/stat");
  const auto sw1 = task_switches();
  std::printf("idle %-10s %d s: process CPU %.3f %% (%llu ticks of 1/%llu s)", mode_name(mode), secs,
              100.0 * static_cast<double>(c1 - c0) / static_cast<double>(hz) / wall,
              static_cast<unsigned long long>(c1 - c0), static_cast<unsigned long long>(hz));
  if (mode == Progress::kCaller) {
    std::printf(", caller woken by the event fd %.2f /s, arm kBusy %.2f /s", wakeups / wall, busy / wall);
  }
  std::printf("\n");
  for (const auto& [tid, t1] : sw1) {
    const auto it = sw0.find(tid);
    if (it == sw0.end() || (t1.comm != "rg-control" && t1.comm != "rg-progress")) continue;
    std::printf("idle %-10s   thread %-12s context switches %.2f /s\n", mode_name(mode), t1.comm.c_str(),
                static_cast<double>(t1.switches - it->second.switches) / wall);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  std::string addr = testfix::rxe_addr();
  unsigned ops = 20000, depth = 16;
  int idle_s = 5;
  std::string device;
  bool pin = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--pin-cpu0") == 0) pin = true;
  }
  for (int i = 1; i + 1 < argc; ++i) {  // unknown arguments (the guest suite's --gtest_*) are ignored
    if (std::strcmp(argv[i], "--addr") == 0) addr = argv[i + 1];
    if (std::strcmp(argv[i], "--ops") == 0) ops = static_cast<unsigned>(std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--idle-s") == 0) idle_s = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--depth") == 0) depth = static_cast<unsigned>(std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--device") == 0) device = argv[i + 1];
  }
  const int port = 7900 + static_cast<int>(getpid() % 50);
  const std::string yaml = "/tmp/cpb_" + std::to_string(getpid()) + ".yaml";
  const std::string log = "/tmp/cpb_" + std::to_string(getpid()) + ".log";
  testfix::proc::write_file(yaml, "eal:\n  main_lcore: 0\nlisten:\n  addresses: [\"" + addr +
                                      "\"]\n  port: " + std::to_string(port) +
                                      "\ndataplane:\n  cores: [1]\n"
                                      "store:\n  capacity_mib: 64\n"
                                      "telemetry:\n  bind_address: \"127.0.0.1\"\n  port: " +
                                      std::to_string(19800 + getpid() % 100) +
                                      "\nsecurity:\n  authentication: off\nlogging:\n  level: info\n");
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  testfix::proc::Child daemon;
  if (!testfix::proc::spawn(&daemon, {self, "daemon", "--config", yaml}, log)) return 1;
  if (!testfix::proc::wait_for(
          [&] { return testfix::proc::read_file(log).find("listening") != std::string::npos; }, 30s)) {
    std::fprintf(stderr, "gateway did not start:\n%s\n", testfix::proc::read_file(log).c_str());
    return 1;
  }
  std::printf(
      "client_progress_bench: gateway %s:%d (control CPU 0, polling core CPU 1, idle_policy busy), "
      "%u chained and %u sync GETs of 64 B per mode (10%% more as warm-up), rate with %u GETs in flight for "
      "3 s, "
      "idle %d s\n",
      addr.c_str(), port, ops, ops / 4, depth, idle_s);

  // --pin-cpu0: every client thread on CPU 0, where the kEalLcores client's derived lcores run too (made
  // before create() so the client's own threads inherit it). The library pins nothing in kCaller and kThread;
  // by default the scheduler places them. On the 2-vCPU guest pinning made every mode slower (the kernel's
  // RDMA work for this process then shares CPU 0 with it).
  if (pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) std::perror("sched_setaffinity");
  }
  std::printf("client threads: %s\n", pin ? "on CPU 0 (sched_setaffinity before create)" : "unpinned");

  std::map<Progress, Latency> lat;
  std::map<Progress, double> rate;
  for (Progress mode : {Progress::kCaller, Progress::kThread, Progress::kEalLcores}) {
    client::ClientConfig cc;
    cc.progress = mode;
    cc.gateways = {{addr, static_cast<std::uint16_t>(port)}};
    cc.device = device;
    cc.pool_bytes = 4u << 20;
    // kEalLcores: the client's derived lcores (its core on CPU 0, off the gateway's CPU 1), yielding when
    // idle as every client on the 2-vCPU guest must (its main thread shares CPU 0).
    cc.yield_when_idle = true;
    std::string err;
    auto cl = Client::create(cc, &err);
    if (!cl || !cl->wait_connected(30s)) {
      std::fprintf(stderr, "%s: %s\n", mode_name(mode), cl ? "not connected" : err.c_str());
      return 1;
    }
    const std::string key = std::string("bench-") + mode_name(mode);
    char val[64];
    std::memset(val, 0x5a, sizeof(val));
    if (cl->put(key, val, sizeof(val)).status != Status::kOk) return 1;
    lat[mode] = chained_get_latency(*cl, mode, key, ops);
    const Latency sync = sync_get_latency(*cl, key, ops / 4);
    rate[mode] = get_rate(*cl, mode, key, depth, 3s);
    std::printf(
        "%-10s 64 B GET round trip (callback chain): p50 %.1f us, avg %.1f us, p99 %.1f us, min %.1f us; "
        "rate %.0f GET/s\n",
        mode_name(mode), lat[mode].p50_us, lat[mode].avg_us, lat[mode].p99_us, lat[mode].min_us, rate[mode]);
    std::printf("%-10s 64 B GET round trip (sync get): p50 %.1f us, avg %.1f us, p99 %.1f us\n",
                mode_name(mode), sync.p50_us, sync.avg_us, sync.p99_us);
    if (mode != Progress::kEalLcores) idle_cost(*cl, mode, idle_s);
    std::fflush(stdout);
  }
  for (Progress mode : {Progress::kCaller, Progress::kThread}) {
    std::printf("ratio %s / kEalLcores: latency p50 %.2fx, avg %.2fx; rate %.2fx\n", mode_name(mode),
                lat[mode].p50_us / lat[Progress::kEalLcores].p50_us,
                lat[mode].avg_us / lat[Progress::kEalLcores].avg_us, rate[mode] / rate[Progress::kEalLcores]);
  }
  kill(daemon.pid, SIGTERM);
  daemon.wait_exit(15s);
  std::remove(yaml.c_str());
  std::remove(log.c_str());
  return 0;
}

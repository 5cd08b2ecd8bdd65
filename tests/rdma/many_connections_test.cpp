// 1,000 connections to one gateway with two data-plane cores (rxe guest, booted with --smp 3: control on CPU
// 0, the gateway's cores on CPUs 1 and 2), every connection verified by one echo round trip, and the
// gateway's memory per connection measured (a count, not a time). The figure is a benchmark's: its goal,
// 64 KiB (issue 17), is judged met or missed on the printed line and by tools/perf-compare, as every speed
// and memory goal is; the test itself fails only past a guard of 56 KiB (the figure is about 48.6 KiB),
// which a doubled send ring, a second copy of the send buffers or a leak of a few KiB per connection would
// cross, so that the machine's allocator and page rounding do not decide CI.
//
// The parent never starts EAL. It re-executes itself as the daemon ("many_connections_test daemon --config
// ...": daemon/gateway_main.cpp linked in) and as the peer ("... peer --port P --conns N --status FILE": an
// active engine with two cores, each connection running the verifying echo client for one message, then
// held open until SIGTERM). The gateway runs with the shared receive queue (dataplane.srq required: it does
// not start without one), queue depth 8, 512-byte messages and 48-byte inline sends, 500 connections per
// core. What a connection costs there (guest, rxe): its share of the buffer regions, 16 KiB (8 pool buffers
// and 24 send buffers of 512 B); the QP's send ring, which rxe maps into the process whole (slots rounded up
// to a power of two, 64 here for 41 work requests, each rxe's 208-byte send WQE plus max(inline, SGEs)
// rounded up to a power of two, behind a header that takes one more page: 20 KiB with up to 48 inline
// bytes, 36 KiB with 49 to 304, the default 236 among them); and the control plane's objects (rdma_cm id,
// the connection, the verbs backend's staging chain), about 12 KiB.
//
// Memory per connection = (growth of the gateway's VmRSS + HugetlbPages from before the first connection to
// after the last verified exchange + the bytes of the cores' buffer regions, which the gateway allocates at
// start for the connections it admits) / connections. The regions come from the gateway's own sizing
// (CoreResources: the shared pool of connections x queue_depth buffers, and per connection its send
// buffers); /metrics' rdmagate_memory_registered_bytes also holds the store's arena, printed beside it.
// One line carries the figure for perf-compare:
//   many_connections: memory_per_conn_kib=NN.N connections=1000 ...
//
// RDMAGATE_MANY_CONNECTIONS=N changes the count (default 1000); RDMAGATE_MANY_CONNECTIONS_SRQ=disabled runs
// the gateway with a receive queue per connection instead, for comparison.
#include <gtest/gtest.h>
#include <rte_lcore.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "control/engine.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tests/rdma/rdma_test_support.hpp"
#include "tests/rdma/status_file.hpp"
#include "tools/bench/echo_client_service.hpp"

int rdmagate_main(int argc, char** argv);

namespace {

using namespace rdmagate;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testfix::num;
using testfix::read_status;
using testfix::proc::Child;
using testfix::proc::metric;
using testfix::proc::spawn;
using testfix::proc::wait_for;

constexpr std::uint32_t kConnsPerCore = 500;  // the gateway's two cores (kMaxConnsPerCore is 512)
constexpr std::uint32_t kQueueDepth = 8;
constexpr std::uint32_t kBufSize = 512;
constexpr std::uint64_t kGoalBytesPerConn = 64 * 1024;   // issue 17's goal: reported, not asserted
constexpr std::uint64_t kGuardBytesPerConn = 56 * 1024;  // the regression guard CI asserts
constexpr int kRdmaPort = 7610;
constexpr int kHttpPort = 19474;

std::string g_self;

std::uint32_t connections() {
  const char* v = std::getenv("RDMAGATE_MANY_CONNECTIONS");
  const unsigned long n = v != nullptr ? std::strtoul(v, nullptr, 10) : 1000;
  return n == 0 || n > 2 * kConnsPerCore ? 1000 : static_cast<std::uint32_t>(n);
}

// ---- the peer: an active engine holding `conns` connections ----------------------------------------------

std::atomic<bool> g_quit{false};
void on_signal(int) {
  g_quit.store(true);
}

int peer_main(int argc, char** argv) {
  std::string status;
  unsigned port = 0;
  std::uint32_t conns = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--port")
      port = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else if (k == "--conns")
      conns = static_cast<std::uint32_t>(std::atoi(argv[i + 1]));
    else if (k == "--status")
      status = argv[i + 1];
  }
  if (port == 0 || conns == 0 || status.empty()) {
    std::fprintf(stderr, "usage: many_connections_test peer --port P --conns N --status FILE\n");
    return 2;
  }
  control::RdmaProbe probe;
  if (const int rc = testfix::rdma_gate("many_connections peer", &probe); rc != 0) return rc;
  auto eal = testfix::start_eal("many_connections_peer", "0@0,1@1,2@2");
  if (!eal) return 1;
  std::signal(SIGTERM, on_signal);
  control::EngineConfig cfg;
  cfg.name = "peer";
  cfg.device = testfix::rdma_device();
  cfg.passive = false;
  for (unsigned lcore = rte_get_next_lcore(static_cast<unsigned>(-1), 1, 0), n = 0; n < 2;
       lcore = rte_get_next_lcore(lcore, 1, 0), ++n) {
    dataplane::CoreConfig core;
    core.lcore = lcore;
    core.max_conns = (conns + 1) / 2;
    core.rx_per_conn = kQueueDepth;
    core.tx_per_conn = 2 * kQueueDepth;
    core.buf_size = kBufSize;
    core.idle = dataplane::IdlePolicy::kYield;
    core.idle_yield_after = 64;
    cfg.cores.push_back(core);
  }
  cfg.local.params = protocol::ConnParams{kQueueDepth, kBufSize, protocol::kMaxFragments, 1u << 20};
  cfg.local.min_queue_depth = protocol::kMinCreditQueueDepth;
  cfg.signal_interval = 4;
  cfg.handshake_timeout = 60s;
  std::string err;
  auto eng = control::Engine::create(cfg, &err);
  if (!eng) {
    std::fprintf(stderr, "many_connections peer: %s\n", err.c_str());
    return 1;
  }
  dataplane::EchoClientResults results;
  dataplane::EchoClientConfig load;
  load.messages_per_conn = 1;  // one verified exchange per connection
  load.max_payload = 64;
  load.window = 1;
  dataplane::EchoClientService svc0(load, results), svc1(load, results);
  {
    std::vector<std::unique_ptr<control::CoreRunner>> runners;
    runners.push_back(dataplane::make_core_runner(eng->backend_kind(), eng->core(0), svc0));
    runners.push_back(dataplane::make_core_runner(eng->backend_kind(), eng->core(1), svc1));
    if (!eng->launch_cores(std::move(runners), &err)) {
      std::fprintf(stderr, "many_connections peer: %s\n", err.c_str());
      return 1;
    }
  }
  const auto t0 = Clock::now();
  std::uint32_t opened = 0;
  const auto write_status = [&] {
    const std::string tmp = status + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "opened=%u conns=%zu owned=%zu done=%llu verified=%llu mismatches=%llu ms=%lld\n",
                   opened, eng->connection_count(), eng->owned_count(),
                   static_cast<unsigned long long>(results.connections_done.load()),
                   static_cast<unsigned long long>(results.verified.load()),
                   static_cast<unsigned long long>(results.mismatches.load()),
                   static_cast<long long>(
                       std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
      std::fclose(f);
      std::rename(tmp.c_str(), status.c_str());
    }
  };
  auto last_status = Clock::now();
  while (!g_quit.load()) {
    // Opened in batches, so that the gateway's listen backlog and rxe's connection handling keep up.
    for (std::uint32_t k = 0; k < 50 && opened < conns && eng->connection_count() - eng->owned_count() < 200;
         ++k) {
      if (eng->connect(testfix::rxe_addr(), static_cast<std::uint16_t>(port), &err, /*reconnect=*/false) ==
          0) {
        std::fprintf(stderr, "many_connections peer: connect %u: %s\n", opened, err.c_str());
        eng->stop_cores_st();
        return 1;
      }
      ++opened;
    }
    eng->poll_st(5);
    if (Clock::now() - last_status > 200ms) {
      write_status();
      last_status = Clock::now();
    }
  }
  write_status();
  eng->stop_cores_st();
  return 0;
}

// ---- the gateway's memory ------------------------------------------------------------------------------

// VmRSS + HugetlbPages of `pid`, in bytes (kB in /proc).
std::uint64_t process_bytes(pid_t pid) {
  const std::string s = testfix::proc::read_file("/proc/" + std::to_string(pid) + "/status");
  const auto kb = [&](const char* key) -> std::uint64_t {
    const auto at = s.find(key);
    return at == std::string::npos ? 0 : std::strtoull(s.c_str() + at + std::strlen(key), nullptr, 10);
  };
  return (kb("VmRSS:") + kb("HugetlbPages:")) * 1024;
}

// dataplane.srq of the gateway: required, unless RDMAGATE_MANY_CONNECTIONS_SRQ names another value (a
// comparison run with disabled: receive queues per connection, the same buffers).
std::string srq_mode() {
  const char* v = std::getenv("RDMAGATE_MANY_CONNECTIONS_SRQ");
  return v != nullptr && *v != '\0' ? v : "required";
}

std::string gateway_yaml(std::uint32_t conns_per_core) {
  return "eal:\n  main_lcore: 0\nlisten:\n  addresses: [\"" + testfix::rxe_addr() +
         "\"]\n  port: " + std::to_string(kRdmaPort) +
         "\n  backlog: 1024\n"
         "dataplane:\n  cores: [1, 2]\n  idle_policy: yield\n  max_connections_per_core: " +
         std::to_string(conns_per_core) + "\n  queue_depth: " + std::to_string(kQueueDepth) +
         "\n  inline_threshold_bytes: " + std::to_string(kBufSize) +
         "\n  send_inline_bytes: 48\n  signal_interval: 4\n  srq: " + srq_mode() +
         "\n"
         "store:\n  capacity_mib: 16\n"
         "telemetry:\n  bind_address: \"127.0.0.1\"\n  port: " +
         std::to_string(kHttpPort) +
         // Every connection comes from the guest's one address: the per-source admission limits are lifted.
         "\nsecurity:\n  allowed_clients: [\"198.18.0.0/15\"]\n  connections_per_source: 65535\n"
         "  connect_rate: 100000\n  connect_burst: 100000\n  authentication: off\nlogging:\n  level: info\n";
}

// The cores' buffer regions as CoreResources sizes them with the shared receive queue: the pool (every
// admitted connection's queue_depth buffers) and per connection its send buffers (3 x queue_depth, the
// daemon's tx_per_conn).
std::uint64_t core_region_bytes(std::uint32_t conns_per_core) {
  return 2ull * conns_per_core * (kQueueDepth + 3ull * kQueueDepth) * kBufSize;
}

TEST(ManyConnections, ThousandOnTwoCoresEachVerifiedAndTheGatewaysMemoryPerConnectionMeasured) {
  const std::uint32_t n = connections();
  const std::uint32_t per_core = (n + 1) / 2;
  const std::string dir = "/tmp/many_conns_" + std::to_string(getpid());
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  Child gw;
  ASSERT_TRUE(testfix::proc::start_test_gateway(&gw, g_self, dir + "/gw.yaml", gateway_yaml(per_core),
                                                dir + "/gw.log", kHttpPort))
      << testfix::proc::read_file(dir + "/gw.log");
  // Settled: the store's and the cores' memory is all touched by now.
  std::this_thread::sleep_for(1s);
  const std::uint64_t before = process_bytes(gw.pid);
  const double registered =
      metric(testfix::proc::http_get(kHttpPort, "/metrics").body, "rdmagate_memory_registered_bytes");

  Child peer;
  const std::string status = dir + "/peer.status";
  ASSERT_TRUE(spawn(
      &peer,
      {g_self, "peer", "--port", std::to_string(kRdmaPort), "--conns", std::to_string(n), "--status", status},
      dir + "/peer.log"));
  const auto all_done = [&] {
    const auto kv = read_status(status);
    return kv.count("done") != 0 && num(kv, "done") >= n;
  };
  const bool done = wait_for([&] { return !peer.running() || all_done(); }, std::chrono::minutes(8));
  const auto st = read_status(status);
  ASSERT_TRUE(done && peer.running()) << "peer: " << testfix::proc::read_file(status) << "\n"
                                      << testfix::proc::read_file(dir + "/peer.log") << "\ngateway:\n"
                                      << testfix::proc::read_file(dir + "/gw.log");
  EXPECT_EQ(num(st, "verified"), n);
  EXPECT_EQ(num(st, "mismatches"), 0u);
  EXPECT_EQ(num(st, "owned"), n);
  // The gateway holds every one of them, half on each core.
  const std::string m = testfix::proc::http_get(kHttpPort, "/metrics").body;
  EXPECT_EQ(metric(m, "rdmagate_connections", {{"state", "established"}}), static_cast<double>(n)) << m;
  const std::uint64_t after = process_bytes(gw.pid);
  const std::uint64_t regions = core_region_bytes(per_core);
  const std::uint64_t growth = after > before ? after - before : 0;
  const double per_conn = static_cast<double>(growth + regions) / n;
  std::printf(
      "many_connections: memory_per_conn_kib=%.1f goal_64kib=%s connections=%u cores=2 srq=%s "
      "growth_kib_per_conn=%.1f regions_kib_per_conn=%.1f rss_hugetlb_before_mib=%.1f after_mib=%.1f "
      "registered_mib=%.1f setup_ms=%llu\n",
      per_conn / 1024, per_conn <= static_cast<double>(kGoalBytesPerConn) ? "met" : "missed", n,
      srq_mode().c_str(), static_cast<double>(growth) / n / 1024,
      static_cast<double>(regions) / n / 1024, static_cast<double>(before) / (1 << 20),
      static_cast<double>(after) / (1 << 20), registered / (1 << 20),
      static_cast<unsigned long long>(num(st, "ms")));
  EXPECT_LE(per_conn, static_cast<double>(kGuardBytesPerConn));
  kill(peer.pid, SIGTERM);
  EXPECT_EQ(peer.wait_exit(60s), 0) << testfix::proc::read_file(dir + "/peer.log");
  kill(gw.pid, SIGTERM);
  EXPECT_EQ(gw.wait_exit(60s), 0) << testfix::proc::read_file(dir + "/gw.log");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  if (argc > 1 && std::strcmp(argv[1], "peer") == 0) return peer_main(argc - 1, argv + 1);
  return testfix::rdma_test_main(argc, argv, "many_connections_test", /*eal_lcores=*/nullptr,
                                 [](const control::RdmaProbe&) {
                                   g_self = testfix::self_exe("many_connections_test");
                                   return g_self.empty() ? 1 : 0;
                                 });
}

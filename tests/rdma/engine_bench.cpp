// engine_bench: the engine's echo round-trip time and one-way (sink) message rate, in one process (server
// engine + client engine, the same lcore layout as engine_echo_test). A benchmark, not a test: it prints
// figures; tests/rdma/run-engine-bench.sh runs it beside perftest in one guest boot.
//
//   engine_bench echo|sink [--messages N] [--payload BYTES] [--window W] [--busy] [--yield-after N]
//
// echo: window 1 by default, fixed payload; RTT = wall time / round trips (after a 1000-message warm-up
// connection is up). sink: one-way requests, credits back on NOOPs; rate = messages / wall time from the
// first to the last message counted by the server core.
#include <rte_cycles.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "control/engine.hpp"
#include "control/rdma_device.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "dataplane/eal_runtime.hpp"
#include "tests/rdma/rdma_test_support.hpp"
#include "tests/support/test_services.hpp"
#include "tools/bench/echo_client_service.hpp"

namespace {
using namespace rdmagate;
using Clock = std::chrono::steady_clock;

// The control thread shares CPU 0 with the client core: while measuring it wakes every 10 ms only.
int g_control_wait_ms = 1;
std::uint32_t g_yield_after = 8;  // yield soon: ksoftirqd (rxe) shares the CPUs with the pollers


control::EngineConfig config(const char* name, bool passive, unsigned lcore, bool busy, const std::string& dev) {
  control::EngineConfig e;
  e.name = name;
  e.device = dev;
  e.passive = passive;
  dataplane::CoreConfig c;
  c.lcore = lcore;
  c.max_conns = 4;
  c.rx_per_conn = 64;
  c.tx_per_conn = 160;
  c.buf_size = 1024;
  c.idle = busy ? dataplane::IdlePolicy::kBusy : dataplane::IdlePolicy::kYield;
  c.idle_yield_after = g_yield_after;
  e.cores.push_back(c);
  e.local.params = protocol::ConnParams{64, 1024, protocol::kMaxFragments, 1u << 20};
  e.signal_interval = 16;
  return e;
}

template <typename Pred>
bool poll_both(control::Engine& a, control::Engine& b, Pred pred, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    a.poll_st(0);
    b.poll_st(g_control_wait_ms);
  }
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "echo") != 0 && std::strcmp(argv[1], "sink") != 0)) {
    std::fprintf(stderr, "usage: engine_bench echo|sink [--messages N] [--payload BYTES] [--window W] [--busy]\n");
    return 2;
  }
  const bool echo_mode = std::strcmp(argv[1], "echo") == 0;
  std::uint64_t messages = echo_mode ? 20000 : 200000;
  std::uint32_t payload = 64;
  std::uint32_t window = echo_mode ? 1 : 64;
  bool busy = false;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--busy") == 0) busy = true;
    else if (i + 1 < argc && std::strcmp(argv[i], "--messages") == 0) messages = std::strtoull(argv[++i], nullptr, 10);
    else if (i + 1 < argc && std::strcmp(argv[i], "--payload") == 0) payload = static_cast<std::uint32_t>(std::atoi(argv[++i]));
    else if (i + 1 < argc && std::strcmp(argv[i], "--window") == 0) window = static_cast<std::uint32_t>(std::atoi(argv[++i]));
    else if (i + 1 < argc && std::strcmp(argv[i], "--yield-after") == 0) g_yield_after = static_cast<std::uint32_t>(std::atoi(argv[++i]));
  }
  control::RdmaProbe probe;
  if (const int rc = testfix::rdma_gate("engine_bench", &probe); rc != 0) return rc;
  const std::string dev = testfix::rdma_device();
  auto eal = testfix::start_eal("engine_bench", "0@0,1@1,2@0");
  if (!eal) return 1;
  std::string err;
  const char* addr_env = std::getenv("RDMAGATE_RXE_ADDR");
  const std::string addr = addr_env != nullptr && *addr_env != '\0' ? addr_env : "198.18.0.1";
  auto server = control::Engine::create(config("server", true, 1, busy, dev), &err);
  auto client = server ? control::Engine::create(config("client", false, 2, busy, dev), &err) : nullptr;
  if (!server || !client) {
    std::fprintf(stderr, "engine_bench: %s\n", err.c_str());
    return 1;
  }
  dataplane::EchoService echo;
  dataplane::SinkService sink;
  dataplane::EchoClientResults results;
  dataplane::EchoClientConfig ccfg;
  ccfg.messages_per_conn = messages;
  ccfg.min_payload = payload;
  ccfg.max_payload = payload;
  ccfg.window = window;
  ccfg.one_way = !echo_mode;
  ccfg.measure_latency = echo_mode;
  auto svc = std::make_unique<dataplane::EchoClientService>(ccfg, results);
  std::vector<std::unique_ptr<control::CoreRunner>> sr, cr;
  if (echo_mode) {
    sr.push_back(dataplane::make_core_runner(server->backend_kind(), server->core(0), echo));
  } else {
    sr.push_back(dataplane::make_core_runner(server->backend_kind(), server->core(0), sink));
  }
  cr.push_back(dataplane::make_core_runner(client->backend_kind(), client->core(0), *svc));
  if (!server->launch_cores(std::move(sr), &err) || !client->launch_cores(std::move(cr), &err)) {
    std::fprintf(stderr, "engine_bench: %s\n", err.c_str());
    return 1;
  }
  const std::uint16_t port = server->listen(addr, 0, &err);
  if (port == 0 || client->connect(addr, port, &err) == 0) {
    std::fprintf(stderr, "engine_bench: %s\n", err.c_str());
    return 1;
  }
  const auto req = static_cast<std::size_t>(protocol::MessageType::kInlineRequest);
  const volatile std::uint64_t* server_rx = &server->core(0).counters.msgs_rx[req];
  // Start the clock at the first message the server sees (the connection is up and adopted by then).
  if (!poll_both(*server, *client, [&] { return *server_rx != 0; }, std::chrono::seconds(30))) {
    std::fprintf(stderr, "engine_bench: no traffic\n");
    return 1;
  }
  const std::uint64_t rx0 = *server_rx;
  const auto t0 = Clock::now();
  g_control_wait_ms = 10;
  const bool done = poll_both(*server, *client, [&] { return *server_rx >= messages; }, std::chrono::seconds(300));
  g_control_wait_ms = 1;
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::uint64_t n = *server_rx - rx0;
  if (echo_mode) {
    poll_both(*server, *client, [&] { return results.connections_done.load() == 1; }, std::chrono::seconds(30));
  }
  client->begin_shutdown_st();
  server->begin_shutdown_st();
  poll_both(*server, *client, [&] { return client->drained_st() && server->drained_st(); }, std::chrono::seconds(20));
  client->stop_cores_st();
  server->stop_cores_st();
  if (echo_mode) {
    std::printf("engine_bench echo: %llu round trips, payload %u B (message %u B), window %u: avg rtt %.2f us, "
                "median %llu us, p99 %llu us, mismatches %llu%s\n",
                static_cast<unsigned long long>(n), payload, payload + 40, window, secs * 1e6 / static_cast<double>(n),
                static_cast<unsigned long long>(svc->rtt_quantile_us(0.5)),
                static_cast<unsigned long long>(svc->rtt_quantile_us(0.99)),
                static_cast<unsigned long long>(results.mismatches.load()), done ? "" : " (TIMED OUT)");
  } else {
    std::printf("engine_bench sink: %llu messages, payload %u B (message %u B): %.3f Mmsg/s, %.2f MB/s%s\n",
                static_cast<unsigned long long>(n), payload, payload + 40, static_cast<double>(n) / secs / 1e6,
                static_cast<double>(n) * (payload + 40) / secs / 1e6, done ? "" : " (TIMED OUT)");
  }
  return done ? 0 : 1;
}

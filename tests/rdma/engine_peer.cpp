// engine_peer: one engine in its own process, for the multi-process engine tests (engine_process_test).
//
//   engine_peer server --addr A --port P --lcores L --status FILE
//   engine_peer client --addr A --port P --lcores L --status FILE [--messages N] [--window W] [--backoff-min-ms M]
//                      [--backoff-max-ms M]
//   both: [--drain-ms M] (the SIGTERM drain timeout, default 10000); server: [--hold-after N] (requests after
//   the first N per connection are held, never answered)
//
// The server runs the echo service; the client the verifying echo client (N messages; 0: forever) and
// reconnects with backoff. Every 100 ms the control thread rewrites FILE (write + rename) with one line of
// key=value pairs: conns, owned, rx (messages received by the core), mismatches, reconnects, delays_ms; the
// client's requests of closed connections (sent, answered, refused, lost); the server's refusals while
// quiescing (srv_refused) and quiesce_timeouts.
// SIGTERM/SIGINT: stop accepting, quiesce (new requests refused, in-flight ones finish; bounded), close every
// connection, drain the cores (bounded), exit 0 (1 if the close phase timed out). Lcores: the first is the control thread, the second the data-plane core; the cores use the
// yielding idle policy (the guest has 2 vCPUs shared by both processes).
#include <rte_lcore.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "control/engine.hpp"
#include "control/rdma_device.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "dataplane/eal_runtime.hpp"
#include "tests/rdma/rdma_test_support.hpp"
#include "tests/support/test_services.hpp"
#include "tools/bench/echo_client_service.hpp"

namespace {

using namespace rdmagate;

std::atomic<bool> g_quit{false};
void on_signal(int) { g_quit.store(true); }

struct Args {
  std::string mode, addr = "198.18.0.1", lcores = "0@0,1@1", status;
  unsigned port = 0;
  std::uint64_t messages = 0;
  unsigned window = 8;
  std::uint64_t hold_after = UINT64_MAX;  // server: requests after the first N per connection are held
  unsigned drain_ms = 10000;
  unsigned backoff_min_ms = 100, backoff_max_ms = 1600;
};

bool parse(int argc, char** argv, Args* a) {
  if (argc < 2) return false;
  a->mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--addr") a->addr = v;
    else if (k == "--port") a->port = static_cast<unsigned>(std::atoi(v));
    else if (k == "--lcores") a->lcores = v;
    else if (k == "--status") a->status = v;
    else if (k == "--messages") a->messages = std::strtoull(v, nullptr, 10);
    else if (k == "--window") a->window = static_cast<unsigned>(std::atoi(v));
    else if (k == "--hold-after") a->hold_after = std::strtoull(v, nullptr, 10);
    else if (k == "--drain-ms") a->drain_ms = static_cast<unsigned>(std::atoi(v));
    else if (k == "--backoff-min-ms") a->backoff_min_ms = static_cast<unsigned>(std::atoi(v));
    else if (k == "--backoff-max-ms") a->backoff_max_ms = static_cast<unsigned>(std::atoi(v));
    else return false;
  }
  return (a->mode == "server" || a->mode == "client") && a->port != 0 && !a->status.empty();
}

void write_status(const std::string& path, const control::Engine& eng, const dataplane::CoreCounters& cnt,
                  const dataplane::EchoClientResults& res, const std::vector<control::Connection*>& conns) {
  const std::uint64_t mismatches = res.mismatches.load();
  std::string delays;
  for (const control::Connection* c : conns) {
    for (const auto& d : c->reconnect_delays()) {
      if (!delays.empty()) delays += ',';
      delays += std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
    }
  }
  std::uint64_t rx = 0;
  for (std::size_t t = 1; t < cnt.msgs_rx.size(); ++t) rx += cnt.msgs_rx[t];
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  const auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  std::fprintf(f,
               "conns=%zu owned=%zu rx=%llu mismatches=%llu reconnects=%llu delays_ms=%s sent=%llu answered=%llu "
               "refused=%llu lost=%llu srv_refused=%llu quiesce_timeouts=%llu\n",
               eng.connection_count(), eng.owned_count(), u(rx), u(mismatches), u(eng.counters().reconnects),
               delays.empty() ? "-" : delays.c_str(), u(res.closed_sent.load()), u(res.closed_answered.load()),
               u(res.closed_refused.load()), u(res.closed_lost.load()), u(cnt.quiesce_refused),
               u(eng.counters().quiesce_timeouts));
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

// The server's service: echo, except that each connection's requests after the first `hold_after` are held
// (never answered), so a SIGTERM drain has requests in flight that never finish (pending_st counts them).
struct HoldingEchoService : dataplane::EchoService {
  struct ConnState {
    std::uint64_t requests = 0;
    std::uint64_t held = 0;
  };
  std::uint64_t hold_after = UINT64_MAX;
  template <typename Api>
  void on_request_st(Api& api, dataplane::CoreConn& c, const protocol::Message& m) noexcept {
    ConnState& cs = c.svc.as<ConnState>();
    if (++cs.requests > hold_after) {
      ++cs.held;
      return;
    }
    dataplane::EchoService::on_request_st(api, c, m);
  }
  std::uint64_t pending_st(const dataplane::CoreConn& c) const noexcept { return c.svc.as<ConnState>().held; }
  template <typename Api>
  void on_adopt_st(Api&, dataplane::CoreConn& c) noexcept {
    c.svc.reset<ConnState>();
  }
  template <typename Api>
  void on_close_st(Api&, dataplane::CoreConn& c) noexcept {
    c.svc.reset<ConnState>();
  }
};

}  // namespace

// Also linked into engine_process_test (RDMAGATE_ENGINE_PEER_EMBEDDED), which re-executes itself as
// "engine_process_test peer server|client ...": the peer then needs no binary of its own in the guest.
int engine_peer_main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: engine_peer server|client --port P --status FILE [--addr A] [--lcores L] [--messages N] "
                 "[--window W] [--hold-after N] [--drain-ms M] [--backoff-min-ms M] [--backoff-max-ms M]\n");
    return 2;
  }
  control::RdmaProbe probe;
  if (const int rc = testfix::rdma_gate("engine_peer", &probe); rc != 0) return rc;
  const std::string dev = testfix::rdma_device();
  auto eal = testfix::start_eal("engine_peer", a.lcores);
  if (!eal) return 1;
  std::string err;
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);

  const bool server = a.mode == "server";
  control::EngineConfig cfg;
  cfg.name = a.mode;
  cfg.device = dev;
  cfg.passive = server;
  dataplane::CoreConfig core;
  core.lcore = rte_get_next_lcore(static_cast<unsigned>(-1), 1, 0);
  core.max_conns = 8;
  core.rx_per_conn = 32;
  core.tx_per_conn = 96;
  core.buf_size = 1024;
  core.idle = dataplane::IdlePolicy::kYield;
  core.idle_yield_after = 64;
  cfg.cores.push_back(core);
  cfg.local.params = protocol::ConnParams{32, 1024, protocol::kMaxFragments, 1u << 20};
  cfg.backoff.min = std::chrono::milliseconds(a.backoff_min_ms);
  cfg.backoff.max = std::chrono::milliseconds(a.backoff_max_ms);
  auto eng = control::Engine::create(cfg, &err);
  if (!eng) {
    std::fprintf(stderr, "engine_peer: %s\n", err.c_str());
    return 1;
  }

  HoldingEchoService echo;
  echo.hold_after = a.hold_after;
  dataplane::EchoClientResults results;
  dataplane::EchoClientConfig ccfg;
  ccfg.messages_per_conn = a.messages == 0 ? UINT64_MAX : a.messages;
  ccfg.max_payload = 256;
  ccfg.window = a.window;
  auto client_svc = std::make_unique<dataplane::EchoClientService>(ccfg, results);
  std::vector<std::unique_ptr<control::CoreRunner>> runners;
  if (server) {
    runners.push_back(dataplane::make_core_runner(eng->backend_kind(), eng->core(0), echo));
  } else {
    runners.push_back(dataplane::make_core_runner(eng->backend_kind(), eng->core(0), *client_svc));
  }
  if (!eng->launch_cores(std::move(runners), &err)) {
    std::fprintf(stderr, "engine_peer: %s\n", err.c_str());
    return 1;
  }
  if (server) {
    if (eng->listen(a.addr, static_cast<std::uint16_t>(a.port), &err) == 0) {
      std::fprintf(stderr, "engine_peer: %s\n", err.c_str());
      eng->stop_cores_st();
      return 1;
    }
  } else if (eng->connect(a.addr, static_cast<std::uint16_t>(a.port), &err) == 0) {
    std::fprintf(stderr, "engine_peer: %s\n", err.c_str());
    eng->stop_cores_st();
    return 1;
  }
  std::printf("engine_peer %s: up on %s:%u (eal %s)\n", a.mode.c_str(), a.addr.c_str(), a.port,
              eal->args_line().c_str());
  std::fflush(stdout);

  auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  while (!g_quit.load()) {
    eng->poll_st(5);
    if (std::chrono::steady_clock::now() - last >= std::chrono::milliseconds(100)) {
      last = std::chrono::steady_clock::now();
      write_status(a.status, *eng, eng->core(0).counters, results, eng->connections());
    }
  }
  // SIGTERM: stop accepting, close everything, drain the core (bounded), exit 0.
  std::printf("engine_peer %s: signal, draining %zu connection(s)\n", a.mode.c_str(), eng->connection_count());
  std::fflush(stdout);
  const bool drained = eng->shutdown_st(std::chrono::milliseconds(a.drain_ms));
  write_status(a.status, *eng, eng->core(0).counters, results, eng->connections());
  std::printf("engine_peer %s: %s, exiting\n", a.mode.c_str(), drained ? "drained" : "drain timed out");
  eng.reset();
  eal.reset();
  return drained ? 0 : 1;
}

#ifndef RDMAGATE_ENGINE_PEER_EMBEDDED
int main(int argc, char** argv) { return engine_peer_main(argc, argv); }
#endif

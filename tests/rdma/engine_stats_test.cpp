// Issue 6 end to end on real RDMA (rxe in the guest): the engine's plain counters reach /metrics through
// the core's ~1 ms publication (CoreResources::stats) and the control thread's publish_engine_stats, while
// echo traffic runs. Lcore layout as engine_echo_test: EAL --lcores=0@0,1@1,2@0; lcore 0 drives both control
// loops, lcore 1 is the server core, lcore 2 the client core (yielding idle policy).
//
// Without RDMA the binary prints one line and exits 77.
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>
#include <rte_cycles.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>

#include "../telemetry/exposition_util.hpp"
#include "control/engine.hpp"
#include "control/rdma_device.hpp"
#include "daemon/engine_stats_publish.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "dataplane/eal_runtime.hpp"
#include "telemetry/collector.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tests/support/test_services.hpp"
#include "tools/bench/echo_client_service.hpp"

namespace {

using namespace rdmagate;
using control::Engine;
using control::EngineConfig;
using Clock = std::chrono::steady_clock;
using Labels = std::map<std::string, std::string>;

std::string g_device;
constexpr unsigned kServerLcore = 1;
constexpr unsigned kClientLcore = 2;
constexpr std::uint32_t kBufSize = 1024;
constexpr std::uint64_t kMessages = 3000;

using rdmagate::testfix::rxe_addr;

EngineConfig engine_config(const char* name, bool passive, unsigned lcore) {
  EngineConfig e;
  e.name = name;
  e.device = g_device;
  e.passive = passive;
  dataplane::CoreConfig c;
  c.lcore = lcore;
  c.max_conns = 8;
  c.rx_per_conn = 32;
  c.tx_per_conn = 96;
  c.buf_size = kBufSize;
  c.idle = dataplane::IdlePolicy::kYield;
  c.idle_yield_after = 64;
  c.keepalive_us = 20'000;  // the idle phase must produce keepalive NOOPs
  e.cores.push_back(c);
  e.local.params = protocol::ConnParams{32, kBufSize, protocol::kMaxFragments, 1u << 20};
  e.local.min_queue_depth = protocol::kMinCreditQueueDepth;
  e.handshake_timeout = std::chrono::seconds(10);
  return e;
}


telemetry::test::Exposition scrape(const telemetry::StatsCollector& c) {
  std::ostringstream os;
  prometheus::TextSerializer().Serialize(os, c.Collect());
  return telemetry::test::parse_exposition(os.str());
}

double value(const telemetry::test::Exposition& e, const std::string& name, const Labels& labels) {
  const auto* s = telemetry::test::find_sample(e, name, labels);
  return s == nullptr ? -1 : s->value;
}

TEST(EngineStats, CountersReachTheExpositionWhileTrafficRuns) {
  std::string err;
  auto server = Engine::create(engine_config("server", true, kServerLcore), &err);
  ASSERT_TRUE(server) << err;
  auto client = Engine::create(engine_config("client", false, kClientLcore), &err);
  ASSERT_TRUE(client) << err;

  // The server's core publishes into sblock (label core="1", its lcore); control into ctl.
  auto sblock = std::make_unique<telemetry::CoreStats>();
  auto ctl = std::make_unique<telemetry::CoreStats>();
  telemetry::StatsCollector collector("test", rte_get_tsc_hz());
  ASSERT_TRUE(collector.register_core(kServerLcore, *sblock));
  collector.register_control(*ctl);
  server->core(0).stats = sblock.get();

  dataplane::EchoService echo;
  dataplane::EchoClientResults results;
  dataplane::EchoClientConfig load;
  load.messages_per_conn = kMessages;
  load.max_payload = 200;
  load.window = 8;
  dataplane::EchoClientService client_svc(load, results);
  {
    std::vector<std::unique_ptr<control::CoreRunner>> sr, cr;
    sr.push_back(dataplane::make_core_runner(server->backend_kind(), server->core(0), echo));
    cr.push_back(dataplane::make_core_runner(client->backend_kind(), client->core(0), client_svc));
    ASSERT_TRUE(server->launch_cores(std::move(sr), &err)) << err;
    ASSERT_TRUE(client->launch_cores(std::move(cr), &err)) << err;
  }
  const std::uint16_t port = server->listen(rxe_addr(), 0, &err);
  ASSERT_NE(port, 0) << err;
  const auto t0 = Clock::now();
  ASSERT_NE(client->connect(rxe_addr(), port, &err, /*reconnect=*/false), 0u) << err;

  // The control thread publishes every poll turn, as a daemon would on its timer.
  auto poll_until = [&](auto pred, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!pred()) {
      if (Clock::now() >= deadline) return false;
      server->poll_st(1);
      client->poll_st(1);
      control::publish_engine_stats(*server, *ctl);
    }
    return true;
  };

  // Mid-run: the connection shows on its core, and the poll counter moves (what /healthz watches).
  ASSERT_TRUE(poll_until(
      [&] {
        const auto e = scrape(collector);
        return value(e, "rdmagate_connections", {{"core", "1"}, {"state", "established"}}) == 1 &&
               value(e, "rdmagate_poller_polls_total", {{"core", "1"}}) > 0;
      },
      std::chrono::seconds(30)));
  const double polls_mid = value(scrape(collector), "rdmagate_poller_polls_total", {{"core", "1"}});

  ASSERT_TRUE(poll_until([&] { return results.connections_done.load() == 1; }, std::chrono::seconds(90)));
  EXPECT_EQ(results.verified.load(), kMessages);

  // Every request reaches the exposition within a publication period or so, while the core keeps running.
  const auto inline_rx = [&] {
    return value(scrape(collector), "rdmagate_transport_messages_total",
                 {{"type", "inline_request"}, {"direction", "rx"}});
  };
  const auto p0 = Clock::now();
  ASSERT_TRUE(
      poll_until([&] { return inline_rx() == static_cast<double>(kMessages); }, std::chrono::seconds(5)))
      << "inline requests seen " << inline_rx();
  const double lag_ms = std::chrono::duration<double, std::milli>(Clock::now() - p0).count();

  // Idle for 200 ms: ten keepalive intervals.
  poll_until([] { return false; }, std::chrono::milliseconds(200));
  const auto mid = scrape(collector);
  EXPECT_GT(value(mid, "rdmagate_poller_polls_total", {{"core", "1"}}), polls_mid);
  EXPECT_GT(value(mid, "rdmagate_transport_keepalives_total", {}), 0);
  EXPECT_EQ(value(mid, "rdmagate_connection_accepts_total", {}), 1);

  // Orderly teardown; the core's final publication then equals its counters exactly.
  // Both sides close, and every connection must drain.
  client->begin_shutdown_st();
  server->begin_shutdown_st();
  const bool drained =
      poll_until([&] { return client->drained_st() && server->drained_st(); }, std::chrono::seconds(30));
  client->stop_cores_st();
  server->stop_cores_st();
  EXPECT_TRUE(drained) << "teardown did not drain in 30 s; left:\nclient:\n"
                       << client->describe_connections_st() << "server:\n" << server->describe_connections_st();
  const double run_s = std::chrono::duration<double>(Clock::now() - t0).count();
  control::publish_engine_stats(*server, *ctl);

  const auto e = scrape(collector);
  const dataplane::CoreCounters& sc = server->core(0).counters;
  const auto msg = [](protocol::MessageType t) { return static_cast<std::size_t>(t); };
  EXPECT_EQ(value(e, "rdmagate_poller_polls_total", {{"core", "1"}}), static_cast<double>(sc.polls));
  EXPECT_EQ(value(e, "rdmagate_transport_messages_total", {{"type", "inline_response"}, {"direction", "tx"}}),
            static_cast<double>(sc.msgs_tx[msg(protocol::MessageType::kInlineResponse)]));
  EXPECT_EQ(
      value(e, "rdmagate_transport_message_bytes_total", {{"type", "inline_request"}, {"direction", "rx"}}),
      static_cast<double>(sc.bytes_rx[msg(protocol::MessageType::kInlineRequest)]));
  EXPECT_EQ(
      value(e, "rdmagate_transport_messages_total", {{"type", "noop"}, {"direction", "tx"}}),
      value(e, "rdmagate_transport_noops_total", {}) + value(e, "rdmagate_transport_keepalives_total", {}));
  EXPECT_EQ(value(e, "rdmagate_transport_payloads_total", {{"mode", "inline"}}),
            static_cast<double>(kMessages));
  EXPECT_GT(value(e, "rdmagate_poller_completions_total", {{"core", "1"}, {"status", "success"}}), 0);
  EXPECT_GT(value(e, "rdmagate_poller_completions_total", {{"core", "1"}, {"status", "flushed"}}), 0)
      << "teardown flushes the posted receives";
  EXPECT_EQ(value(e, "rdmagate_poller_completions_total", {{"core", "1"}, {"status", "error"}}), 0);
  EXPECT_EQ(value(e, "rdmagate_connections", {{"core", "1"}, {"state", "established"}}), 0);
  const double busy = value(e, "rdmagate_poller_busy_seconds_total", {{"core", "1"}});
  const double idle = value(e, "rdmagate_poller_idle_seconds_total", {{"core", "1"}});
  EXPECT_GT(busy, 0);
  EXPECT_GT(idle, 0);
  EXPECT_LE(busy + idle, run_s + 1.0);  // the core started before t0 by at most the setup time
  std::printf(
      "engine_stats: %llu echoes; all requests visible in /metrics %.1f ms after the last one; server core "
      "busy %.3f s idle %.3f s (run %.2f s); keepalives %.0f noops %.0f; polls %.0f; close re-kicks client %llu "
      "server %llu\n",
      static_cast<unsigned long long>(results.verified.load()), lag_ms, busy, idle, run_s,
      value(e, "rdmagate_transport_keepalives_total", {}), value(e, "rdmagate_transport_noops_total", {}),
      value(e, "rdmagate_poller_polls_total", {{"core", "1"}}),
      static_cast<unsigned long long>(client->counters().close_rekicks),
      static_cast<unsigned long long>(server->counters().close_rekicks));
}

}  // namespace

int main(int argc, char** argv) {
  return rdmagate::testfix::rdma_test_main(argc, argv, "engine_stats_test", "0@0,1@1,2@0",
                                           [](const rdmagate::control::RdmaProbe&) {
                                             g_device = rdmagate::testfix::rdma_device();
                                             return 0;
                                           });
}

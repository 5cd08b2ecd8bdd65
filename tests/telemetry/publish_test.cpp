// The engine's plain counters -> telemetry blocks -> /metrics text (issue 6): every exported series must
// carry the value of the counter it is mapped from, under the right labels. Host only: no verbs call, no EAL.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "daemon/engine_stats_publish.hpp"
#include "dataplane/core_stats_publish.hpp"
#include "exposition_util.hpp"
#include "telemetry/collector.hpp"
#include "telemetry/metrics.hpp"
#include "telemetry/text_format.hpp"

namespace rdmagate::telemetry {
namespace {

using Labels = std::map<std::string, std::string>;
using protocol::MessageType;
using protocol::ObjectOp;
using dataplane::FailureKind;

constexpr std::uint64_t kTscHz = 1'000'000'000;

test::Exposition scrape(const StatsCollector& c) {
  return test::parse_exposition(serialize_text(c.Collect()));
}

// The sample's value, or -1 when the series is missing (every expected value here is >= 0).
double value(const test::Exposition& e, const std::string& name, const Labels& labels) {
  const auto* s = test::find_sample(e, name, labels);
  return s == nullptr ? -1 : s->value;
}

double as_double(std::uint64_t v) {
  return static_cast<double>(v);
}

// Distinct values everywhere, so a slot mapped from the wrong field shows.
dataplane::CoreCounters distinct_core_counters(std::uint64_t seed) {
  std::uint64_t v = seed;
  auto next = [&v] { return v += 7; };
  dataplane::CoreCounters c;
  c.polls = next() * 1000;
  c.idle_polls = next();
  c.yields = next();
  c.completions_recv = next() * 10;
  c.completions_send = next() * 10;
  c.completions_drain = next();
  c.completions_rdma = next();
  c.completions_flushed = next();
  c.completions_error = next();
  for (auto* a : {&c.msgs_rx, &c.bytes_rx, &c.msgs_tx, &c.bytes_tx})
    for (auto& x : *a) x = next();
  c.inline_sends = next();
  c.doorbells_send = next();
  c.doorbells_recv = next();
  c.credit_stalls = next();
  c.noops = next() * 10;
  c.keepalives = next();
  c.early_rx = next();
  c.adopted = next();
  c.closed = next();
  for (auto& x : c.errors) x = next();
  for (auto& x : c.wire_errors) x = next();
  for (auto& x : c.credit_errors) x = next();
  c.read_chunks = next();
  c.read_bytes = next();
  c.write_chunks = next();
  c.write_bytes = next();
  c.chunk_queue_full = next();
  return c;
}

std::uint64_t tx(const dataplane::CoreCounters& c, MessageType t) {
  return c.msgs_tx[static_cast<std::size_t>(t)];
}

// Every series publish_core_counters feeds, checked against `c` (one core, registered as `core`).
void expect_core_series(const test::Exposition& e, const dataplane::CoreCounters& c,
                        const dataplane::PollerTimes& t, const std::string& core) {
  EXPECT_EQ(value(e, "rdmagate_poller_polls_total", {{"core", core}}), as_double(c.polls));
  EXPECT_EQ(value(e, "rdmagate_poller_idle_polls_total", {{"core", core}}), as_double(c.idle_polls));
  EXPECT_DOUBLE_EQ(value(e, "rdmagate_poller_busy_seconds_total", {{"core", core}}),
                   as_double(t.busy_tsc) / 1e9);
  EXPECT_DOUBLE_EQ(value(e, "rdmagate_poller_idle_seconds_total", {{"core", core}}),
                   as_double(t.idle_tsc) / 1e9);
  const std::uint64_t all =
      c.completions_recv + c.completions_send + c.completions_drain + c.completions_rdma;
  EXPECT_EQ(value(e, "rdmagate_poller_completions_total", {{"core", core}, {"status", "success"}}),
            as_double(all - c.completions_flushed - c.completions_error));
  EXPECT_EQ(value(e, "rdmagate_poller_completions_total", {{"core", core}, {"status", "flushed"}}),
            as_double(c.completions_flushed));
  EXPECT_EQ(value(e, "rdmagate_poller_completions_total", {{"core", core}, {"status", "error"}}),
            as_double(c.completions_error));

  for (std::size_t i = 0; i < kMessageTypeNames.size(); ++i) {
    const std::string type(kMessageTypeNames[i]);
    SCOPED_TRACE(type);
    EXPECT_EQ(value(e, "rdmagate_transport_messages_total", {{"type", type}, {"direction", "rx"}}),
              as_double(c.msgs_rx[i + 1]));
    EXPECT_EQ(value(e, "rdmagate_transport_messages_total", {{"type", type}, {"direction", "tx"}}),
              as_double(c.msgs_tx[i + 1]));
    EXPECT_EQ(value(e, "rdmagate_transport_message_bytes_total", {{"type", type}, {"direction", "rx"}}),
              as_double(c.bytes_rx[i + 1]));
    EXPECT_EQ(value(e, "rdmagate_transport_message_bytes_total", {{"type", type}, {"direction", "tx"}}),
              as_double(c.bytes_tx[i + 1]));
  }
  EXPECT_EQ(value(e, "rdmagate_transport_read_chunks_total", {}), as_double(c.read_chunks));
  EXPECT_EQ(value(e, "rdmagate_transport_read_chunk_bytes_total", {}), as_double(c.read_bytes));
  EXPECT_EQ(value(e, "rdmagate_transport_write_chunks_total", {}), as_double(c.write_chunks));
  EXPECT_EQ(value(e, "rdmagate_transport_write_chunk_bytes_total", {}), as_double(c.write_bytes));
  EXPECT_EQ(value(e, "rdmagate_transport_payloads_total", {{"mode", "inline"}}),
            as_double(tx(c, MessageType::kInlineRequest) + tx(c, MessageType::kInlineResponse)));
  EXPECT_EQ(value(e, "rdmagate_transport_payloads_total", {{"mode", "chunked"}}),
            as_double(tx(c, MessageType::kReadChunkRequest) + tx(c, MessageType::kWriteChunkRequest) +
                      c.read_chunks + c.write_chunks));
  EXPECT_EQ(value(e, "rdmagate_core_chunk_queue_full_total", {{"core", core}}), as_double(c.chunk_queue_full));
  EXPECT_EQ(value(e, "rdmagate_transport_credit_stalls_total", {}), as_double(c.credit_stalls));
  EXPECT_EQ(value(e, "rdmagate_transport_noops_total", {}), as_double(c.noops - c.keepalives));
  EXPECT_EQ(value(e, "rdmagate_transport_keepalives_total", {}), as_double(c.keepalives));
  EXPECT_EQ(value(e, "rdmagate_transport_inline_posts_total", {}), as_double(c.inline_sends));
  for (std::size_t i = 0; i < kCoreErrorNames.size(); ++i) {
    EXPECT_EQ(value(e, "rdmagate_core_errors_total", {{"kind", std::string(kCoreErrorNames[i])}}),
              as_double(c.errors[i]))
        << kCoreErrorNames[i];
  }
  // Codes 0..22: WireError 1..23; 23..25: CreditError 1..3.
  for (std::size_t w = 1; w <= protocol::kWireErrorMax; ++w) {
    EXPECT_EQ(
        value(e, "rdmagate_protocol_violations_total", {{"code", std::string(kViolationCodeNames[w - 1])}}),
        as_double(c.wire_errors[w]))
        << protocol::to_string(static_cast<protocol::WireError>(w));
  }
  EXPECT_EQ(value(e, "rdmagate_protocol_violations_total", {{"code", "credit_overrun"}}),
            as_double(c.credit_errors[static_cast<std::size_t>(protocol::CreditError::kCreditOverrun)]));
  EXPECT_EQ(value(e, "rdmagate_protocol_violations_total", {{"code", "reserve_violation"}}),
            as_double(c.credit_errors[static_cast<std::size_t>(protocol::CreditError::kReserveViolation)]));
  EXPECT_EQ(value(e, "rdmagate_protocol_violations_total", {{"code", "returned_too_many"}}),
            as_double(c.credit_errors[static_cast<std::size_t>(protocol::CreditError::kReturnedTooMany)]));
}

TEST(PublishCoreCounters, EverySeriesCarriesItsCounter) {
  StatsCollector collector("t", kTscHz);
  auto block = std::make_unique<CoreStats>();
  ASSERT_TRUE(collector.register_core(3, *block));
  const auto c = distinct_core_counters(100);
  const dataplane::PollerTimes t{2'500'000'000, 7'250'000'000};
  dataplane::publish_core_counters(c, t, *block);
  expect_core_series(scrape(collector), c, t, "3");
}

TEST(PublishCoreCounters, RepublishingOverwritesAndLeavesConnectionGaugesAlone) {
  StatsCollector collector("t", kTscHz);
  auto block = std::make_unique<CoreStats>();
  ASSERT_TRUE(collector.register_core(0, *block));
  block->set(connection_stat(1), 42);  // the control thread's slot
  auto c = distinct_core_counters(1);
  dataplane::publish_core_counters(c, {}, *block);
  c.polls += 5;
  c.msgs_rx[static_cast<std::size_t>(MessageType::kCompletion)] += 9;
  dataplane::publish_core_counters(c, {10, 20}, *block);  // running totals: a store, never an add
  const auto e = scrape(collector);
  expect_core_series(e, c, {10, 20}, "0");
  EXPECT_EQ(value(e, "rdmagate_connections", {{"core", "0"}, {"state", "established"}}), 42);
}

TEST(PublishCoreCounters, UnexportedSlotsStayOut) {
  // msgs_tx[0] holds raw fault-injection sends; CreditError 4 and 5 are engine bugs, not peer violations.
  StatsCollector collector("t", kTscHz);
  auto block = std::make_unique<CoreStats>();
  ASSERT_TRUE(collector.register_core(0, *block));
  dataplane::CoreCounters c;
  c.msgs_tx[0] = 1'000'000;
  c.credit_errors[4] = 77;
  c.credit_errors[5] = 78;
  dataplane::publish_core_counters(c, {}, *block);
  const auto e = scrape(collector);
  for (const auto& s : e.samples) {
    if (s.name == "rdmagate_transport_messages_total" || s.name == "rdmagate_protocol_violations_total") {
      EXPECT_EQ(s.value, 0) << s.name;
    }
  }
}

TEST(PublishCoreCounters, CoresAreLabelledOrSummed) {
  StatsCollector collector("t", kTscHz);
  auto a = std::make_unique<CoreStats>();
  auto b = std::make_unique<CoreStats>();
  ASSERT_TRUE(collector.register_core(1, *a));
  ASSERT_TRUE(collector.register_core(2, *b));
  const auto ca = distinct_core_counters(10);
  const auto cb = distinct_core_counters(5000);
  dataplane::publish_core_counters(ca, {1, 2}, *a);
  dataplane::publish_core_counters(cb, {3, 4}, *b);
  const auto e = scrape(collector);
  EXPECT_EQ(value(e, "rdmagate_poller_polls_total", {{"core", "1"}}), as_double(ca.polls));
  EXPECT_EQ(value(e, "rdmagate_poller_polls_total", {{"core", "2"}}), as_double(cb.polls));
  EXPECT_EQ(value(e, "rdmagate_poller_completions_total", {{"core", "2"}, {"status", "error"}}),
            as_double(cb.completions_error));
  EXPECT_EQ(value(e, "rdmagate_transport_read_chunk_bytes_total", {}),
            as_double(ca.read_bytes + cb.read_bytes));
  EXPECT_EQ(value(e, "rdmagate_transport_messages_total", {{"type", "inline_request"}, {"direction", "tx"}}),
            as_double(tx(ca, MessageType::kInlineRequest) + tx(cb, MessageType::kInlineRequest)));
  EXPECT_EQ(value(e, "rdmagate_protocol_violations_total", {{"code", "bad_checksum"}}),
            as_double(ca.wire_errors[9] + cb.wire_errors[9]));
}

TEST(PublishEngineCounters, ControlSeries) {
  StatsCollector collector("t", kTscHz);
  auto core0 = std::make_unique<CoreStats>();
  auto ctl = std::make_unique<CoreStats>();
  ASSERT_TRUE(collector.register_core(0, *core0));
  collector.register_control(*ctl);

  control::EngineCounters c;
  c.accepts = 11;
  for (std::size_t i = 0; i < c.rejects_sent.size(); ++i) c.rejects_sent[i] = 100 + i;
  for (std::size_t i = 0; i < c.rejects_received.size(); ++i) c.rejects_received[i] = 9000;  // not exported
  c.reconnects = 13;
  c.failures_by_status[3] = 2;      // a WireError
  c.failures_by_status[0x101] = 5;  // a CreditError
  c.dead_peers = 4;
  c.failures_by_kind[static_cast<std::size_t>(FailureKind::kPeerFault)] = 8;
  c.failures_by_kind[static_cast<std::size_t>(FailureKind::kBulkTimeout)] = 9;
  c.failures_by_kind[static_cast<std::size_t>(FailureKind::kCqError)] = 10;
  c.failures_by_kind[static_cast<std::size_t>(FailureKind::kAuthDenied)] = 14;
  c.failures_by_kind[static_cast<std::size_t>(FailureKind::kAuthTimeout)] = 15;
  c.failures_by_kind[static_cast<std::size_t>(FailureKind::kRevoked)] = 16;
  c.core_failures = 2 + 5 + 4 + 8 + 9 + 10 + 14 + 15 + 16 + 6;  // 6 completion errors
  c.revoked_allowed_clients = 17;
  for (std::size_t i = 0; i < c.async_by_kind.size(); ++i) c.async_by_kind[i] = 20 + i;
  c.close_rekicks = 3;
  c.abandoned[static_cast<std::size_t>(control::AbandonReason::kPeerGone)] = 31;
  c.abandoned[static_cast<std::size_t>(control::AbandonReason::kHandshakeTimeout)] = 32;
  c.faults_qp_err = 33;
  control::publish_engine_counters(c, *ctl);

  const auto e = scrape(collector);
  EXPECT_EQ(value(e, "rdmagate_connection_accepts_total", {}), 11);
  for (std::size_t i = 0; i < kRejectReasonNames.size(); ++i) {
    // rejects_sent[0] is RejectReason::kNone and has no series.
    EXPECT_EQ(value(e, "rdmagate_connection_rejects_total", {{"reason", std::string(kRejectReasonNames[i])}}),
              as_double(100 + i + 1))
        << kRejectReasonNames[i];
  }
  EXPECT_EQ(value(e, "rdmagate_connection_rejects_total", {{"reason", "race"}}),
            as_double(c.rejects_sent[static_cast<std::size_t>(protocol::RejectReason::kRace)]));
  EXPECT_EQ(value(e, "rdmagate_connection_rejects_total", {{"reason", "bad_private_data"}}),
            as_double(c.rejects_sent[static_cast<std::size_t>(protocol::RejectReason::kBadPrivateData)]));
  EXPECT_EQ(value(e, "rdmagate_connection_reconnects_total", {}), 13);
  EXPECT_EQ(value(e, "rdmagate_connection_close_rekicks_total", {}), 3);
  EXPECT_EQ(value(e, "rdmagate_connection_failures_total", {{"cause", "protocol_violation"}}), 7);
  EXPECT_EQ(value(e, "rdmagate_connection_failures_total", {{"cause", "dead_peer"}}), 4);
  EXPECT_EQ(value(e, "rdmagate_connection_failures_total", {{"cause", "completion_error"}}), 6);
  EXPECT_EQ(value(e, "rdmagate_connection_failures_total", {{"cause", "peer_fault"}}), 8);
  EXPECT_EQ(value(e, "rdmagate_connection_failures_total", {{"cause", "bulk_timeout"}}), 9);
  EXPECT_EQ(value(e, "rdmagate_connection_failures_total", {{"cause", "cq_error"}}), 10);
  EXPECT_EQ(value(e, "rdmagate_connection_failures_total", {{"cause", "auth_denied"}}), 14);
  EXPECT_EQ(value(e, "rdmagate_connection_failures_total", {{"cause", "auth_timeout"}}), 15);
  EXPECT_EQ(value(e, "rdmagate_connection_failures_total", {{"cause", "revoked"}}), 16);
  // The allowed_clients revocations are control's; the cores publish the other reasons.
  EXPECT_EQ(value(e, "rdmagate_connections_revoked_total", {{"reason", "allowed_clients"}}), 17);
  EXPECT_EQ(value(e, "rdmagate_connections_revoked_total", {{"reason", "principal"}}), 0);
  EXPECT_EQ(value(e, "rdmagate_connection_rejects_total", {{"reason", "auth_required"}}),
            as_double(c.rejects_sent[static_cast<std::size_t>(protocol::RejectReason::kAuthRequired)]));
  EXPECT_EQ(value(e, "rdmagate_connection_requests_abandoned_total", {{"reason", "peer_gone"}}), 31);
  EXPECT_EQ(value(e, "rdmagate_connection_requests_abandoned_total", {{"reason", "handshake_timeout"}}), 32);
  EXPECT_EQ(value(e, "rdmagate_faults_injected_total", {{"action", "qp_err"}, {"dir", "peer"}}), 33);
  EXPECT_EQ(value(e, "rdmagate_connection_rejects_total", {{"reason", "source_limit"}}),
            as_double(c.rejects_sent[static_cast<std::size_t>(protocol::RejectReason::kSourceLimit)]));
  for (std::size_t i = 0; i < kAsyncEventNames.size(); ++i) {
    EXPECT_EQ(value(e, "rdmagate_async_events_total", {{"event", std::string(kAsyncEventNames[i])}}),
              as_double(20 + i))
        << kAsyncEventNames[i];
  }
  // Violations come from the cores only: control's failures_by_status must not add to them.
  EXPECT_EQ(value(e, "rdmagate_protocol_violations_total", {{"code", "bad_version"}}), 0);
}

TEST(PublishFaults, NoRulesNoInjectionsThenRulesCounted) {
  StatsCollector collector("t", kTscHz);
  auto ctl = std::make_unique<CoreStats>();
  collector.register_control(*ctl);
  dataplane::CoreFaults a;
  dataplane::CoreFaults b;
  const std::array<const dataplane::FaultCounters*, 3> cores = {&a.counters(), nullptr, &b.counters()};
  control::publish_fault_counters(cores, 0, *ctl);
  auto e = scrape(collector);
  for (const auto& l : kFaultInjectedLabels) {
    EXPECT_EQ(value(e, "rdmagate_faults_injected_total", {{"action", std::string(l.action)}, {"dir", std::string(l.dir)}}),
              0)
        << l.action << "/" << l.dir;
  }
  EXPECT_EQ(value(e, "rdmagate_fault_rules", {}), 0);
  EXPECT_EQ(value(e, "rdmagate_fault_stall_seconds_total", {}), 0);
  control::publish_fault_counters(cores, 3, *ctl);
  e = scrape(collector);
  EXPECT_EQ(value(e, "rdmagate_fault_rules", {}), 3);
}

TEST(PublishEngineCounters, AsyncEventKindsFollowTheLabelNames) {
  using control::async_event_kind;
  const std::pair<ibv_event_type, std::string_view> cases[] = {
      {IBV_EVENT_QP_FATAL, "qp_fatal"},         {IBV_EVENT_QP_ACCESS_ERR, "qp_access_err"},
      {IBV_EVENT_QP_REQ_ERR, "qp_req_err"},     {IBV_EVENT_CQ_ERR, "cq_err"},
      {IBV_EVENT_PORT_ACTIVE, "port_active"},   {IBV_EVENT_PORT_ERR, "port_err"},
      {IBV_EVENT_DEVICE_FATAL, "device_fatal"}, {IBV_EVENT_LID_CHANGE, "other"},
      {IBV_EVENT_SRQ_LIMIT_REACHED, "other"},
  };
  for (const auto& [ev, name] : cases) {
    EXPECT_EQ(kAsyncEventNames[static_cast<std::size_t>(async_event_kind(ev))], name)
        << ibv_event_type_str(ev);
  }
}

TEST(PublishConnections, StatesMapToTheLabels) {
  using control::State;
  const std::pair<State, std::size_t> cases[] = {
      {State::kIdle, 0},
      {State::kAddrResolving, 0},
      {State::kRouteResolving, 0},
      {State::kConnecting, 0},
      {State::kReqReceived, 0},
      {State::kAccepting, 0},
      {State::kEstablishedPendingAdopt, 0},
      {State::kOwnedByCore, 1},
      {State::kClosing, 2},
      {State::kDrained, 2},
      {State::kBackoff, 3},
      {State::kDestroyed, control::kNoConnState},
  };
  static_assert(std::size(cases) == control::kStateCount);
  for (const auto& [s, want] : cases) EXPECT_EQ(control::conn_state_index(s), want) << static_cast<int>(s);
  EXPECT_EQ(kConnStateNames[0], "handshake");
  EXPECT_EQ(kConnStateNames[1], "established");
  EXPECT_EQ(kConnStateNames[2], "draining");
  EXPECT_EQ(kConnStateNames[3], "failed");
}

TEST(PublishConnections, GaugesPerCoreAndUnplaced) {
  using control::State;
  StatsCollector collector("t", kTscHz);
  auto b0 = std::make_unique<CoreStats>();
  auto b1 = std::make_unique<CoreStats>();
  auto ctl = std::make_unique<CoreStats>();
  ASSERT_TRUE(collector.register_core(4, *b0));  // engine core 0 runs on lcore 4
  ASSERT_TRUE(collector.register_core(5, *b1));
  collector.register_control(*ctl);

  control::ConnectionSnapshot snap;
  snap.reset(2);
  for (int i = 0; i < 3; ++i) snap.add(0, State::kOwnedByCore);
  snap.add(0, State::kAccepting);
  snap.add(1, State::kOwnedByCore);
  snap.add(1, State::kClosing);
  snap.add(1, State::kDrained);
  snap.add(1, State::kBackoff);
  snap.add(1, State::kDestroyed);       // gone: not counted
  snap.add(-1, State::kAddrResolving);  // never placed
  snap.add(-1, State::kIdle);
  snap.add(7, State::kOwnedByCore);  // an index the engine does not have: unplaced, never out of bounds
  CoreStats* blocks[] = {b0.get(), b1.get()};
  control::publish_connections(snap, blocks, *ctl);

  auto e = scrape(collector);
  EXPECT_EQ(value(e, "rdmagate_connections", {{"core", "4"}, {"state", "established"}}), 3);
  EXPECT_EQ(value(e, "rdmagate_connections", {{"core", "4"}, {"state", "handshake"}}), 1);
  EXPECT_EQ(value(e, "rdmagate_connections", {{"core", "4"}, {"state", "draining"}}), 0);
  EXPECT_EQ(value(e, "rdmagate_connections", {{"core", "5"}, {"state", "established"}}), 1);
  EXPECT_EQ(value(e, "rdmagate_connections", {{"core", "5"}, {"state", "draining"}}), 2);
  EXPECT_EQ(value(e, "rdmagate_connections", {{"core", "5"}, {"state", "failed"}}), 1);
  EXPECT_EQ(value(e, "rdmagate_connections_unplaced", {}), 3);
  EXPECT_EQ(e.types.at("rdmagate_connections"), "gauge");

  // A gauge follows the table: connections that left are no longer counted.
  snap.reset(2);
  snap.add(1, State::kOwnedByCore);
  control::publish_connections(snap, blocks, *ctl);
  e = scrape(collector);
  EXPECT_EQ(value(e, "rdmagate_connections", {{"core", "4"}, {"state", "established"}}), 0);
  EXPECT_EQ(value(e, "rdmagate_connections", {{"core", "5"}, {"state", "established"}}), 1);
  EXPECT_EQ(value(e, "rdmagate_connections", {{"core", "5"}, {"state", "draining"}}), 0);
  EXPECT_EQ(value(e, "rdmagate_connections_unplaced", {}), 0);
}

TEST(PublishStore, StatusNamesAreTheStoresOwn) {
  ASSERT_EQ(kStoreStatusNames.size(), store::kStatusCount);
  for (std::uint32_t s = 0; s < store::kStatusCount; ++s) {
    EXPECT_EQ(kStoreStatusNames[s], store::status_name(static_cast<store::Status>(s)));
  }
}

TEST(PublishStore, GaugesAndOperations) {
  StatsCollector collector("t", kTscHz);
  auto ctl = std::make_unique<CoreStats>();
  collector.register_control(*ctl);
  store::StoreStats s;
  s.objects = 321;
  s.value_bytes = 654'321;
  s.used_bytes = 987'654;
  s.capacity_bytes = 1ull << 30;
  s.window_full = 17;
  for (std::uint32_t o = 0; o < protocol::kObjectOpCount; ++o)
    for (std::uint32_t st = 0; st < store::kStatusCount; ++st) s.ops[o][st] = 1000 * (o + 1) + st;
  control::publish_store_stats(s, *ctl);

  const auto e = scrape(collector);
  EXPECT_EQ(value(e, "rdmagate_store_objects", {}), 321);
  EXPECT_EQ(value(e, "rdmagate_store_bytes", {}), 654'321);
  EXPECT_EQ(value(e, "rdmagate_store_allocated_bytes", {}), 987'654);
  EXPECT_EQ(value(e, "rdmagate_store_capacity_bytes", {}), as_double(1ull << 30));
  EXPECT_EQ(value(e, "rdmagate_store_window_full_total", {}), 17);
  for (std::uint32_t o = 0; o < protocol::kObjectOpCount; ++o) {
    for (std::uint32_t st = 0; st < store::kStatusCount; ++st) {
      const Labels l{{"op", std::string(protocol::object_op_name(static_cast<ObjectOp>(o)))},
                     {"status", store::status_name(static_cast<store::Status>(st))}};
      EXPECT_EQ(value(e, "rdmagate_store_operations_total", l), as_double(s.ops[o][st]))
          << l.at("op") << "/" << l.at("status");
    }
  }
  // The five store statuses, nothing else.
  unsigned series = 0;
  for (const auto& x : e.samples) series += x.name == "rdmagate_store_operations_total";
  EXPECT_EQ(series, protocol::kObjectOpCount * store::kStatusCount);
}

// store.backend: rados: its answers replace the cache's operations, and every counter and histogram of the
// RADOS worker reaches its own series.
TEST(PublishRados, CountersGaugesAndLatencyHistograms) {
  StatsCollector collector("t", kTscHz);
  auto ctl = std::make_unique<CoreStats>();
  collector.register_control(*ctl);
  store::StoreStats cache;
  cache.evictions = 77;
  for (auto& row : cache.ops)
    for (auto& v : row) v = 5;  // the cache's own ops: overwritten below
  control::publish_store_stats(cache, *ctl);
  storage::rados::RadosStats s;
  for (std::uint32_t o = 0; o < protocol::kObjectOpCount; ++o)
    for (std::uint32_t st = 0; st < store::kStatusCount; ++st) s.ops[o][st] = 100 * (o + 1) + st;
  s.cache_hits = 11;
  s.cache_misses = 12;
  s.cache_fills = 13;
  s.cache_fill_skipped = 14;
  s.invalidations_received = 15;
  s.notifies_sent = 16;
  s.notify_timeouts = 17;
  s.notify_resends = 23;
  s.cache_resets = 18;
  s.crc_mismatches = 19;
  s.rados_errors = 20;
  s.worker_wakeups = 21;
  s.rados_ops_inflight = 22;
  s.health = storage::rados::Health::kReady;
  s.latency[1].buckets[0] = 3;  // write, le 1.024e-06
  s.latency[1].buckets[2] = 4;  // write, le 4.096e-06
  s.latency[1].sum_ns = 10'000;
  control::publish_rados_stats(s, *ctl);

  const auto e = scrape(collector);
  EXPECT_EQ(value(e, "rdmagate_store_operations_total", {{"op", "put"}, {"status", "unavailable"}}), 205);
  EXPECT_EQ(value(e, "rdmagate_store_operations_total", {{"op", "get"}, {"status", "corrupt"}}), 106);
  EXPECT_EQ(value(e, "rdmagate_store_cache_evictions_total", {}), 77);
  EXPECT_EQ(value(e, "rdmagate_store_cache_hits_total", {}), 11);
  EXPECT_EQ(value(e, "rdmagate_store_cache_misses_total", {}), 12);
  EXPECT_EQ(value(e, "rdmagate_store_cache_fills_total", {}), 13);
  EXPECT_EQ(value(e, "rdmagate_store_cache_fill_skips_total", {}), 14);
  EXPECT_EQ(value(e, "rdmagate_store_cache_invalidations_total", {}), 15);
  EXPECT_EQ(value(e, "rdmagate_rados_notifies_total", {}), 16);
  EXPECT_EQ(value(e, "rdmagate_rados_notify_timeouts_total", {}), 17);
  EXPECT_EQ(value(e, "rdmagate_rados_notify_resends_total", {}), 23);
  EXPECT_EQ(value(e, "rdmagate_store_cache_resets_total", {}), 18);
  EXPECT_EQ(value(e, "rdmagate_store_checksum_failures_total", {}), 19);
  EXPECT_EQ(value(e, "rdmagate_rados_errors_total", {}), 20);
  EXPECT_EQ(value(e, "rdmagate_rados_worker_wakeups_total", {}), 21);
  EXPECT_EQ(value(e, "rdmagate_rados_ops_in_flight", {}), 22);
  EXPECT_EQ(value(e, "rdmagate_rados_ready", {}), 1);
  EXPECT_EQ(e.types.at("rdmagate_rados_op_duration_seconds"), "histogram");
  EXPECT_EQ(value(e, "rdmagate_rados_op_duration_seconds_count", {{"kind", "write"}}), 7);
  EXPECT_EQ(value(e, "rdmagate_rados_op_duration_seconds_bucket", {{"kind", "write"}, {"le", "1.024e-06"}}),
            3);
  EXPECT_NEAR(value(e, "rdmagate_rados_op_duration_seconds_sum", {{"kind", "write"}}), 1e-5, 1e-12);
  EXPECT_EQ(value(e, "rdmagate_rados_op_duration_seconds_count", {{"kind", "read"}}), 0);
  s.health = storage::rados::Health::kProbeFailed;
  control::publish_rados_stats(s, *ctl);
  EXPECT_EQ(value(scrape(collector), "rdmagate_rados_ready", {}), 0);
}

// What ObjectService records on its core (CoreStats::observe_request_ns) comes out as one histogram family
// with an `op` label, merged over cores, in seconds.
TEST(RequestDuration, MergedOverCoresWithOpLabel) {
  StatsCollector collector("t", kTscHz);
  auto a = std::make_unique<CoreStats>();
  auto b = std::make_unique<CoreStats>();
  ASSERT_TRUE(collector.register_core(0, *a));
  ASSERT_TRUE(collector.register_core(1, *b));
  a->observe_request_ns(ObjectOp::kGet, 3'000);  // le 4.096e-06
  b->observe_request_ns(ObjectOp::kGet, 900);    // le 1.024e-06
  b->observe_request_ns(ObjectOp::kDelete, 50'000);
  const auto e = scrape(collector);
  EXPECT_EQ(e.types.at("rdmagate_request_duration_seconds"), "histogram");
  EXPECT_EQ(value(e, "rdmagate_request_duration_seconds_count", {{"op", "get"}}), 2);
  EXPECT_NEAR(value(e, "rdmagate_request_duration_seconds_sum", {{"op", "get"}}), 3.9e-6, 1e-12);
  EXPECT_EQ(value(e, "rdmagate_request_duration_seconds_bucket", {{"op", "get"}, {"le", "1.024e-06"}}), 1);
  EXPECT_EQ(value(e, "rdmagate_request_duration_seconds_bucket", {{"op", "get"}, {"le", "4.096e-06"}}), 2);
  EXPECT_EQ(value(e, "rdmagate_request_duration_seconds_count", {{"op", "put"}}), 0);
  EXPECT_EQ(value(e, "rdmagate_request_duration_seconds_count", {{"op", "delete"}}), 1);
  for (const auto& s : e.samples) {
    if (s.name.rfind("rdmagate_request_duration_seconds", 0) == 0) {
      EXPECT_EQ(s.labels.count("core"), 0u);
    }
  }
}

TEST(BuildInfo, VersionAndCommit) {
  StatsCollector collector("4.5.6", kTscHz);
  const auto e = scrape(collector);
  EXPECT_FALSE(StatsCollector::build_commit().empty());
  EXPECT_EQ(value(e, "rdmagate_build_info",
                  {{"version", "4.5.6"}, {"commit", std::string(StatsCollector::build_commit())}}),
            1);
}

}  // namespace
}  // namespace rdmagate::telemetry

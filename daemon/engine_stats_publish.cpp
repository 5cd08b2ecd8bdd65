#include "daemon/engine_stats_publish.hpp"

#include "protocol/errors.hpp"

namespace rdmagate::control {

static_assert(kAsyncEventKindCount == telemetry::kAsyncEventNames.size());
static_assert(static_cast<std::size_t>(AsyncEventKind::kOther) == kAsyncEventKindCount - 1);
static_assert(protocol::kRejectReasonMax == telemetry::kRejectReasonNames.size());
static_assert(kAbandonReasonCount == telemetry::kAbandonReasonNames.size());
static_assert(telemetry::kFaultInjectedLabels.back().action == "qp_err");
static_assert(telemetry::kFaultInjectedLabels[6].action == "corrupt" && telemetry::kFaultInjectedLabels[7].dir == "tx");
static_assert(telemetry::kFaultInjectedLabels[8].action == "stall");
static_assert(store::kStatusCount == telemetry::kStoreStatusNames.size());
static_assert(telemetry::kFailureCauseNames[8] == "revoked");
static_assert(telemetry::kRevokeReasonNames[1] == "allowed_clients");

std::size_t conn_state_index(State s) noexcept {
  switch (s) {
    case State::kIdle:
    case State::kAddrResolving:
    case State::kRouteResolving:
    case State::kConnecting:
    case State::kReqReceived:
    case State::kAccepting:
    case State::kEstablishedPendingAdopt:  // the core does not serve it until the ADOPT leaves the backlog
      return 0;                            // handshake
    case State::kOwnedByCore:
      return 1;  // established
    case State::kClosing:
    case State::kDrained:
      return 2;  // draining
    case State::kBackoff:
      return 3;  // failed: released, waiting to reconnect
    case State::kDestroyed:
      break;
  }
  return kNoConnState;
}

void ConnectionSnapshot::reset(std::size_t cores) {
  by_core.assign(cores, Counts{});
  unplaced = 0;
}

void ConnectionSnapshot::add(int core, State s) noexcept {
  const std::size_t st = conn_state_index(s);
  if (st == kNoConnState) return;
  if (core < 0 || static_cast<std::size_t>(core) >= by_core.size()) {
    ++unplaced;
    return;
  }
  ++by_core[static_cast<std::size_t>(core)][st];
}

void publish_engine_counters(const EngineCounters& c, telemetry::CoreStats& b) noexcept {
  using telemetry::Stat;
  b.set(Stat::kAccepts, c.accepts);
  for (std::size_t i = 0; i < telemetry::kRejectReasonNames.size(); ++i) {
    b.set(telemetry::reject_stat(i), c.rejects_sent[i + 1]);  // index 0 is RejectReason::kNone
  }
  b.set(Stat::kReconnects, c.reconnects);

  // core_failures counts every FAILED reply; the others only those whose connection was still known. What is
  // none of them is a completion error (or a stale reply).
  std::uint64_t protocol_failures = 0;
  for (const std::uint64_t n : c.failures_by_status) protocol_failures += n;
  const auto by_kind = [&c](FailureKind k) { return c.failures_by_kind[static_cast<std::size_t>(k)]; };
  const std::uint64_t peer = by_kind(FailureKind::kPeerFault);
  const std::uint64_t bulk = by_kind(FailureKind::kBulkTimeout);
  const std::uint64_t cq = by_kind(FailureKind::kCqError);
  const std::uint64_t denied = by_kind(FailureKind::kAuthDenied);
  const std::uint64_t auth_timeout = by_kind(FailureKind::kAuthTimeout);
  const std::uint64_t revoked = by_kind(FailureKind::kRevoked);
  const std::uint64_t classified =
      protocol_failures + c.dead_peers + peer + bulk + cq + denied + auth_timeout + revoked;
  b.set(telemetry::failure_stat(0), protocol_failures);
  b.set(telemetry::failure_stat(1), c.dead_peers);
  b.set(telemetry::failure_stat(2), c.core_failures > classified ? c.core_failures - classified : 0);
  b.set(telemetry::failure_stat(3), peer);
  b.set(telemetry::failure_stat(4), bulk);
  b.set(telemetry::failure_stat(5), cq);
  b.set(telemetry::failure_stat(6), denied);
  b.set(telemetry::failure_stat(7), auth_timeout);
  b.set(telemetry::failure_stat(8), revoked);
  // The cores count the principal and unauthenticated revocations in their own blocks.
  b.set(telemetry::revoked_stat(1), c.revoked_allowed_clients);
  for (std::size_t i = 0; i < kAbandonReasonCount; ++i) b.set(telemetry::abandoned_stat(i), c.abandoned[i]);
  b.set(telemetry::fault_injected_stat(telemetry::kFaultInjectedLabels.size() - 1), c.faults_qp_err);

  for (std::size_t i = 0; i < kAsyncEventKindCount; ++i)
    b.set(telemetry::async_event_stat(i), c.async_by_kind[i]);
  b.set(Stat::kCloseRekicks, c.close_rekicks);
}

void publish_fault_counters(std::span<const dataplane::FaultCounters* const> cores, std::uint32_t rules,
                            telemetry::CoreStats& b) noexcept {
  using dataplane::FaultAction;
  constexpr std::array<FaultAction, 4> kMessageActions = {FaultAction::kDrop, FaultAction::kDelay,
                                                          FaultAction::kDuplicate, FaultAction::kCorrupt};
  std::array<std::uint64_t, telemetry::kFaultInjectedLabels.size()> sums{};
  std::uint64_t stall_us = 0;
  std::uint64_t hold_full = 0;
  for (const dataplane::FaultCounters* f : cores) {
    if (f == nullptr) continue;
    for (std::size_t a = 0; a < kMessageActions.size(); ++a) {
      sums[2 * a] += f->injected(kMessageActions[a], dataplane::kFaultRx);
      sums[2 * a + 1] += f->injected(kMessageActions[a], dataplane::kFaultTx);
    }
    sums[8] += f->stalls();
    stall_us += f->stall_us();
    hold_full += f->hold_full();
  }
  // The last label (qp_err, peer) is control's own count.
  for (std::size_t i = 0; i + 1 < sums.size(); ++i) b.set(telemetry::fault_injected_stat(i), sums[i]);
  b.set(telemetry::Stat::kFaultStallUs, stall_us);
  b.set(telemetry::Stat::kFaultHoldOverflows, hold_full);
  b.set(telemetry::Stat::kFaultRules, rules);
}

void publish_connections(const ConnectionSnapshot& s, std::span<telemetry::CoreStats* const> core_blocks,
                         telemetry::CoreStats& control_block) noexcept {
  for (std::size_t core = 0; core < core_blocks.size(); ++core) {
    telemetry::CoreStats* b = core_blocks[core];
    if (b == nullptr) continue;
    for (std::size_t st = 0; st < telemetry::kConnStateNames.size(); ++st) {
      b->set(telemetry::connection_stat(st), core < s.by_core.size() ? s.by_core[core][st] : 0);
    }
  }
  control_block.set(telemetry::Stat::kConnectionsUnplaced, s.unplaced);
}

void publish_store_stats(const store::StoreStats& s, telemetry::CoreStats& b) noexcept {
  using telemetry::Stat;
  b.set(Stat::kCacheEvictions, s.evictions);
  b.set(Stat::kStoreWindowFull, s.window_full);
  b.set(Stat::kStoreObjects, s.objects);
  b.set(Stat::kStoreBytes, s.value_bytes);
  b.set(Stat::kStoreAllocatedBytes, s.used_bytes);
  b.set(Stat::kStoreCapacityBytes, s.capacity_bytes);
  for (std::size_t op = 0; op < protocol::kObjectOpCount; ++op) {
    for (std::size_t st = 0; st < store::kStatusCount; ++st) {
      b.set(telemetry::store_op_stat(static_cast<protocol::ObjectOp>(op), st), s.ops[op][st]);
    }
  }
}

void publish_rados_stats(const storage::rados::RadosStats& s, telemetry::CoreStats& b) noexcept {
  using telemetry::Stat;
  for (std::size_t op = 0; op < protocol::kObjectOpCount; ++op) {
    for (std::size_t st = 0; st < store::kStatusCount; ++st) {
      b.set(telemetry::store_op_stat(static_cast<protocol::ObjectOp>(op), st), s.ops[op][st]);
    }
  }
  b.set(Stat::kCacheHits, s.cache_hits);
  b.set(Stat::kCacheMisses, s.cache_misses);
  b.set(Stat::kCacheFills, s.cache_fills);
  b.set(Stat::kCacheFillSkips, s.cache_fill_skipped);
  b.set(Stat::kCacheInvalidations, s.invalidations_received);
  b.set(Stat::kCacheResets, s.cache_resets);
  b.set(Stat::kStoreChecksumFailures, s.crc_mismatches);
  b.set(Stat::kRadosNotifies, s.notifies_sent);
  b.set(Stat::kRadosNotifyTimeouts, s.notify_timeouts);
  b.set(Stat::kRadosNotifyResends, s.notify_resends);
  b.set(Stat::kRadosErrors, s.rados_errors);
  b.set(Stat::kRadosOpsInFlight, s.rados_ops_inflight);
  b.set(Stat::kRadosReady, s.health == storage::rados::Health::kReady ? 1 : 0);
  b.set(Stat::kRadosWorkerWakeups, s.worker_wakeups);
  for (std::size_t k = 0; k < s.latency.size(); ++k) {
    telemetry::LatencyHistogram& h = b.request_duration[telemetry::kRadosHistogramFirst + k];
    for (std::size_t i = 0; i < telemetry::LatencyHistogram::kBuckets; ++i) {
      std::atomic_ref<std::uint64_t>(h.buckets[i]).store(s.latency[k].buckets[i], std::memory_order_relaxed);
    }
    std::atomic_ref<std::uint64_t>(h.sum_ns).store(s.latency[k].sum_ns, std::memory_order_relaxed);
  }
}

}  // namespace rdmagate::control

#pragma once
// Copies a core's plain counters into its telemetry block (issue 6). The core counts with plain ++ on
// CoreCounters (no atomics, no prometheus-cpp on the data path); about once per millisecond of TSC, at the
// loop's ring-check point, it calls publish_core_counters, which writes every exported slot of its
// telemetry::CoreStats with one relaxed atomic_ref store. The scrape thread reads only the block, so it never
// reads a plain counter the core is writing, and a scrape costs the core nothing but these stores.
//
// Each published value is a running total the core alone writes, so a store (not an add) is correct and
// the scraped counters never go backwards. The per-core connection gauges are not touched here: the control
// thread owns those slots (daemon/engine_stats_publish.hpp).

#include <cstddef>
#include <cstdint>

#include "dataplane/core_conn.hpp"
#include "dataplane/core_idle.hpp"
#include "protocol/credit_machine.hpp"
#include "protocol/errors.hpp"
#include "protocol/message.hpp"
#include "telemetry/stats.hpp"

namespace rdmagate::dataplane {

// TSC cycles the loop spent in iterations that found work, and the rest of its running time.
struct PollerTimes {
  std::uint64_t busy_tsc = 0;
  std::uint64_t idle_tsc = 0;
};

// Label tables and engine enums must line up (the telemetry header is engine-free, so the checks live here).
static_assert(telemetry::kMessageTypeNames.size() == protocol::kMessageTypeMax);
static_assert(telemetry::kCoreErrorNames.size() == kCoreErrorCount);
static_assert(static_cast<std::size_t>(CoreError::kDeadPeer) == 8);
static_assert(telemetry::kPeerFaultNames.size() == kPeerFaultCount);
static_assert(static_cast<std::size_t>(PeerFault::kRetryExceeded) == kPeerFaultCount - 1);
static_assert(telemetry::kPollerStateNames.size() == kPollerStateCount);
static_assert(static_cast<std::size_t>(PollerState::kSleep) == kPollerStateCount - 1);
static_assert(telemetry::kWakeSourceNames.size() == kWakeSourceCount);
static_assert(static_cast<std::size_t>(WakeSource::kTimer) == kWakeSourceCount - 1);
static_assert(telemetry::kAuthResultNames.size() == kAuthStatusSlots);
static_assert(telemetry::kAuthFailureNames.size() == 2 && telemetry::kRevokeReasonNames.size() == 3);
// kViolationCodeNames: WireError 1..kWireErrorMax, then CreditError 1..3 (4 and 5 are our own bugs, counted
// under rdmagate_core_errors_total{kind="credit"} only).
inline constexpr std::size_t kWireViolations = protocol::kWireErrorMax;
inline constexpr std::size_t kCreditViolations = 3;
static_assert(telemetry::kViolationCodeNames.size() == kWireViolations + kCreditViolations);
static_assert(static_cast<std::size_t>(protocol::CreditError::kReturnedTooMany) == kCreditViolations);

namespace detail {
constexpr std::uint64_t sat_sub(std::uint64_t a, std::uint64_t b) noexcept {
  return a > b ? a - b : 0;
}
}  // namespace detail

// Core thread (or any thread that owns `c`). No allocation, no lock, no syscall: about 90 relaxed stores.
inline void publish_core_counters(const CoreCounters& c, const PollerTimes& t,
                                  telemetry::CoreStats& s) noexcept {
  using telemetry::Direction;
  using telemetry::Stat;
  s.set(Stat::kPolls, c.polls);
  s.set(Stat::kIdlePolls, c.idle_polls);
  s.set(Stat::kBusyTsc, t.busy_tsc);
  s.set(Stat::kIdleTsc, t.idle_tsc);

  // Every completion is counted once by kind; flushed and error ones once more by status.
  const std::uint64_t completions =
      c.completions_recv + c.completions_send + c.completions_drain + c.completions_rdma;
  s.set(telemetry::completion_stat(0),
        detail::sat_sub(completions, c.completions_flushed + c.completions_error));
  s.set(telemetry::completion_stat(1), c.completions_flushed);
  s.set(telemetry::completion_stat(2), c.completions_error);

  // CoreCounters index message arrays by MessageType value (1..kMessageTypeMax); telemetry by value - 1.
  // Index 0 holds raw fault-injection sends (inject_raw_st), which have no protocol type: not exported.
  for (std::size_t i = 0; i < telemetry::kMessageTypeNames.size(); ++i) {
    s.set(telemetry::message_stat(i, Direction::kRx), c.msgs_rx[i + 1]);
    s.set(telemetry::message_stat(i, Direction::kTx), c.msgs_tx[i + 1]);
    s.set(telemetry::bytes_stat(i, Direction::kRx), c.bytes_rx[i + 1]);
    s.set(telemetry::bytes_stat(i, Direction::kTx), c.bytes_tx[i + 1]);
  }

  s.set(Stat::kReadChunks, c.read_chunks);
  s.set(Stat::kReadChunkBytes, c.read_bytes);
  s.set(Stat::kWriteChunks, c.write_chunks);
  s.set(Stat::kWriteChunkBytes, c.write_bytes);
  using protocol::MessageType;
  const auto tx = [&c](MessageType m) { return c.msgs_tx[static_cast<std::size_t>(m)]; };
  s.set(Stat::kInlineSends, tx(MessageType::kInlineRequest) + tx(MessageType::kInlineResponse));
  s.set(Stat::kChunkedSends, tx(MessageType::kReadChunkRequest) + tx(MessageType::kWriteChunkRequest) +
                                 c.read_chunks + c.write_chunks);
  s.set(Stat::kCreditStalls, c.credit_stalls);
  s.set(Stat::kNoops, detail::sat_sub(c.noops, c.keepalives));
  s.set(Stat::kKeepalives, c.keepalives);
  s.set(Stat::kInlinePosts, c.inline_sends);
  s.set(telemetry::doorbell_stat(0), c.doorbells_send);
  s.set(telemetry::doorbell_stat(1), c.doorbells_recv);
  s.set(Stat::kSendWrs, c.send_wrs);
  s.set(Stat::kRecvPosts, c.recv_posts);
  s.set(Stat::kYields, c.yields);
  for (std::size_t i = 0; i < kCoreErrorCount; ++i) s.set(telemetry::core_error_stat(i), c.errors[i]);

  s.set(Stat::kStaleCompletions, c.stale_completions);
  s.set(Stat::kBulkTimeouts, c.bulk_timeouts);
  s.set(Stat::kChunkQueueFull, c.chunk_queue_full);
  for (std::size_t i = 0; i < kPeerFaultCount; ++i) s.set(telemetry::peer_fault_stat(i), c.peer_faults[i]);

  // Authentication: answers by status (auth_denied[0] is never counted: ok is auth_ok), connections closed
  // before authenticating, revocations (revoked_stat(1), allowed_clients, is control's).
  s.set(telemetry::auth_result_stat(0), c.auth_ok);
  for (std::size_t i = 1; i < kAuthStatusSlots; ++i) s.set(telemetry::auth_result_stat(i), c.auth_denied[i]);
  s.set(telemetry::auth_failure_stat(0), c.auth_unauthenticated);
  s.set(telemetry::auth_failure_stat(1), c.auth_timeouts);
  s.set(telemetry::revoked_stat(0), c.revoked_principal);
  s.set(telemetry::revoked_stat(2), c.revoked_unauthenticated);

  for (std::size_t i = 0; i < kWireViolations; ++i) s.set(telemetry::violation_stat(i), c.wire_errors[i + 1]);
  for (std::size_t i = 0; i < kCreditViolations; ++i) {
    s.set(telemetry::violation_stat(kWireViolations + i), c.credit_errors[i + 1]);
  }
}

// The idle policy's share: time in each state (busy and idle from the loop's own split: `idle_tsc` is the
// running time not busy, of which what the policy spent pausing, yielding or asleep is taken out), arms,
// sleeps and wakeups. Same thread and cost rules as publish_core_counters (about 12 stores).
inline void publish_idle_stats(const IdleStats& st, std::uint64_t busy_tsc, std::uint64_t idle_tsc,
                               telemetry::CoreStats& s) noexcept {
  using telemetry::Stat;
  const auto in = [&st](PollerState p) { return st.tsc[static_cast<std::size_t>(p)]; };
  const std::uint64_t away = in(PollerState::kBackoff) + in(PollerState::kYield) + in(PollerState::kSleep);
  s.set(telemetry::poller_state_stat(static_cast<std::size_t>(PollerState::kBusy)), busy_tsc);
  s.set(telemetry::poller_state_stat(static_cast<std::size_t>(PollerState::kIdle)),
        detail::sat_sub(idle_tsc, away));
  for (const PollerState p : {PollerState::kBackoff, PollerState::kYield, PollerState::kSleep}) {
    s.set(telemetry::poller_state_stat(static_cast<std::size_t>(p)), in(p));
  }
  s.set(Stat::kIdleArms, st.arms);
  s.set(Stat::kSleeps, st.sleeps);
  for (std::size_t i = 0; i < kWakeSourceCount; ++i) s.set(telemetry::wakeup_stat(i), st.wakeups[i]);
}

}  // namespace rdmagate::dataplane

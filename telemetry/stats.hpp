#pragma once
// Per-core statistics blocks: the data-path half of telemetry. A core owns one CoreStats; every slot has
// exactly one writer (the core, except the per-core connection gauges, which the control thread sets from
// its connection table); the scrape thread reads concurrently. Every access goes through std::atomic_ref
// with relaxed order: on x86-64 that compiles to the same plain mov/add as an ordinary uint64_t, yet the
// concurrent read is not a data race, and each counter read by the scraper never goes backwards
// (per-object coherence). No allocation, no lock and no prometheus-cpp call happens here.

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "protocol/object_op.hpp"

namespace rdmagate::telemetry {

inline constexpr std::size_t kCacheLine = 64;

// Label value lists. The engine indexes them with its own enums through the helpers below; the values are
// part of the exposition (docs/metrics.md), so keep them stable.
inline constexpr std::array<std::string_view, 8> kMessageTypeNames = {
    "noop",       "inline_request", "inline_response", "read_chunk_request", "write_chunk_request",
    "completion", "auth",           "auth_answer"};
inline constexpr std::array<std::string_view, 2> kDirectionNames = {"rx", "tx"};
inline constexpr std::array<std::string_view, 3> kCompletionStatusNames = {"success", "flushed", "error"};
inline constexpr std::array<std::string_view, 4> kConnStateNames = {"handshake", "established", "draining",
                                                                    "failed"};
// Index i is protocol::RejectReason value i + 1.
inline constexpr std::array<std::string_view, 12> kRejectReasonNames = {
    "race",  "no_resources",         "fatal",           "incompatible_version", "stale",
    "fragments_mismatch", "queue_size_mismatch", "not_allowed", "bad_private_data", "bad_conn_param",
    "source_limit", "auth_required"};
// Connection requests that ended before they were accepted without a reject being sent: the peer was gone
// (it destroyed its id or timed out; the CM refused our QP, accept or reject for it), or it never answered
// our accept within the handshake timeout.
inline constexpr std::array<std::string_view, 2> kAbandonReasonNames = {"peer_gone", "handshake_timeout"};
// Index i < 24 is protocol::WireError value i + 1; the last three are CreditError values 1..3.
inline constexpr std::array<std::string_view, 27> kViolationCodeNames = {
    "truncated_header",   "bad_magic",         "bad_version",          "unknown_type",
    "length_too_small",   "length_exceeds_max", "length_exceeds_received", "trailing_bytes",
    "bad_checksum",       "unexpected_checksum", "stale_source",        "stale_destination",
    "credits_overflow",   "reserved_not_zero",  "no_fragments",         "too_many_fragments",
    "fragments_truncated", "empty_fragment",    "fragment_wraps",       "bulk_too_large",
    "byte_count_too_large", "unexpected_payload", "buffer_too_small",   "bad_auth_field",  "credit_overrun",
    "reserve_violation",  "returned_too_many"};
inline constexpr std::array<std::string_view, 8> kAsyncEventNames = {
    "qp_fatal", "qp_access_err", "qp_req_err", "cq_err", "port_active", "port_err", "device_fatal", "other"};
inline constexpr std::array<std::string_view, protocol::kObjectOpCount> kStoreOpNames =
    protocol::kObjectOpNames;
// Index = store::Status value (services/storage/memory/store.hpp); a publish test checks the names match.
inline constexpr std::array<std::string_view, 7> kStoreStatusNames = {
    "ok", "not_found", "too_large", "no_space", "bad_request", "unavailable", "corrupt"};
// Index = dataplane::CoreError value (dataplane/core_conn.hpp).
inline constexpr std::array<std::string_view, 9> kCoreErrorNames = {
    "wire", "credit", "completion", "post_send", "post_recv", "tx_exhausted", "encode", "unexpected", "dead_peer"};
// Why a core reported a connection FAILED to control (FailureKind, as control counts it).
inline constexpr std::array<std::string_view, 9> kFailureCauseNames = {
    "protocol_violation", "dead_peer",   "completion_error", "peer_fault", "bulk_timeout",
    "cq_error",           "auth_denied", "auth_timeout",     "revoked"};
// Index = dataplane::PeerFault value (dataplane/core_conn.hpp): error completions the peer caused.
inline constexpr std::array<std::string_view, 6> kPeerFaultNames = {
    "remote_access", "remote_invalid_request", "remote_operation", "recv_length", "rnr_retry_exceeded",
    "retry_exceeded"};
// Object requests the object service refused for the connection's tenant (order: Stat::kObjectForbidden,
// kObjectQuotaExceeded).
inline constexpr std::array<std::string_view, 2> kObjectRefusalNames = {"forbidden", "quota_exceeded"};
// Authentication (docs/protocol.md §11). AUTH messages the cores answered, by the status answered (index =
// protocol::auth::AuthStatus value).
inline constexpr std::array<std::string_view, 3> kAuthResultNames = {"ok", "denied", "connection_limit"};
// Connections the cores closed before they authenticated, other than a denied AUTH: a message other than NOOP
// or AUTH (or a second AUTH) while awaiting AUTH, and no AUTH within security.auth_timeout_ms.
inline constexpr std::array<std::string_view, 2> kAuthFailureNames = {"unauthenticated_message",
                                                                      "auth_timeout"};
// Established connections a SIGHUP closed: their principal was removed or lost rights or tenant (the cores),
// their source left security.allowed_clients (control), or authentication became required and they never
// authenticated (the cores).
inline constexpr std::array<std::string_view, 3> kRevokeReasonNames = {"principal", "allowed_clients",
                                                                       "unauthenticated"};
// Answers a peer sent to the gateway, which never sends requests (the object service ignores and counts them).
inline constexpr std::array<std::string_view, 2> kUnsolicitedTypeNames = {"inline_response", "completion"};
// Faults injected by faults.rules (docs/faults.md), as (action, direction) label pairs: the message actions
// in each direction, then a core stall and a peer's QPs forced to ERR.
struct FaultLabels {
  std::string_view action;
  std::string_view dir;
};
inline constexpr std::array<FaultLabels, 10> kFaultInjectedLabels = {{{"drop", "rx"},
                                                                      {"drop", "tx"},
                                                                      {"delay", "rx"},
                                                                      {"delay", "tx"},
                                                                      {"duplicate", "rx"},
                                                                      {"duplicate", "tx"},
                                                                      {"corrupt", "rx"},
                                                                      {"corrupt", "tx"},
                                                                      {"stall", "core"},
                                                                      {"qp_err", "peer"}}};

// Index = dataplane::PollerState value (dataplane/core_idle.hpp): where a core's running time goes.
inline constexpr std::array<std::string_view, 5> kPollerStateNames = {"busy", "idle", "backoff", "yield",
                                                                      "sleep"};
// Index = dataplane::WakeSource value (dataplane/core_sleep.hpp): what woke a sleeping core.
inline constexpr std::array<std::string_view, 4> kWakeSourceNames = {"completion", "command", "storage",
                                                                     "timer"};
// The two doorbells of a QP flush: its send queue's and its receive queue's.
inline constexpr std::array<std::string_view, 2> kDoorbellQueueNames = {"send", "recv"};

enum class Direction : std::uint8_t { kRx = 0, kTx = 1 };

// One slot per exported series. Families with labels take a contiguous run of slots starting at a *First
// value; use the helpers (message_stat, reject_stat, ...) rather than arithmetic in the engine.
enum class Stat : std::uint16_t {
  // poller (per core)
  kPolls = 0,             // every loop iteration; also the liveness signal of /healthz
  kIdlePolls = 1,         // iterations that found no completion
  kBusyTsc = 2,           // TSC cycles spent in iterations that did work
  kIdleTsc = 3,           // TSC cycles spent in idle iterations
  kCompletionsFirst = 4,  // + kCompletionStatusNames index
  kPollerStatesFirst = kCompletionsFirst + kCompletionStatusNames.size(),  // + kPollerStateNames index (TSC)
  kYields = kPollerStatesFirst + kPollerStateNames.size(),                 // sched_yield calls (idle yield)
  kIdleArms,                                            // wakeups armed before a last look (idle event)
  kSleeps,                                              // last looks that found nothing: the core slept
  kWakeupsFirst,                                        // + kWakeSourceNames index
  kSleeping = kWakeupsFirst + kWakeSourceNames.size(),  // gauge: 1 while the core sleeps (live, not stuck)
  // transport (summed over cores)
  kMessagesFirst,  // + type * 2 + direction
  kBytesFirst = kMessagesFirst + kMessageTypeNames.size() * kDirectionNames.size(),
  kReadChunks = kBytesFirst + kMessageTypeNames.size() * kDirectionNames.size(),
  kReadChunkBytes,
  kWriteChunks,
  kWriteChunkBytes,
  kInlineSends,
  kChunkedSends,
  kCreditStalls,
  kNoops,
  kKeepalives,
  kInlinePosts,                                             // sends posted with IBV_SEND_INLINE
  kDoorbellsFirst,                                          // + kDoorbellQueueNames index
  kSendWrs = kDoorbellsFirst + kDoorbellQueueNames.size(),  // send work requests handed to the device
  kRecvPosts,                                               // receives handed to the device by the cores
  kCoreErrorsFirst,                                         // + kCoreErrorNames index
  // connections
  kConnectionsFirst = kCoreErrorsFirst + kCoreErrorNames.size(),  // gauge per core, + kConnStateNames index
  kConnectionsUnplaced = kConnectionsFirst + kConnStateNames.size(),  // gauge: never placed on a core yet
  kAccepts,
  kRejectsFirst,  // + kRejectReasonNames index
  kReconnects = kRejectsFirst + kRejectReasonNames.size(),
  kConnectionFailuresFirst,                                                 // + kFailureCauseNames index
  kViolationsFirst = kConnectionFailuresFirst + kFailureCauseNames.size(),  // + kViolationCodeNames index
  kAsyncEventsFirst = kViolationsFirst + kViolationCodeNames.size(),
  kCloseRekicks = kAsyncEventsFirst + kAsyncEventNames.size(),       // QPs moved to ERR again (slow CLOSED)
  kAbandonedFirst,                                                   // + kAbandonReasonNames index
  kCoreOutOfService = kAbandonedFirst + kAbandonReasonNames.size(),  // gauge per core: its CQ was lost
  // peer and transfer faults the cores count (per core)
  kStaleCompletions,
  kBulkTimeouts,
  kChunkQueueFull,
  kPeerFaultsFirst,  // + kPeerFaultNames index
  // authentication (docs/protocol.md §11; summed over cores, the allowed_clients revocations are control's)
  kAuthResultsFirst = kPeerFaultsFirst + kPeerFaultNames.size(),     // + kAuthResultNames index
  kAuthFailuresFirst = kAuthResultsFirst + kAuthResultNames.size(),  // + kAuthFailureNames index
  kRevokedFirst = kAuthFailuresFirst + kAuthFailureNames.size(),     // + kRevokeReasonNames index
  // fault injection (docs/faults.md)
  kFaultsInjectedFirst = kRevokedFirst + kRevokeReasonNames.size(),    // + kFaultInjectedLabels index
  kFaultStallUs = kFaultsInjectedFirst + kFaultInjectedLabels.size(),  // microseconds, exported in seconds
  kFaultHoldOverflows,
  kFaultRules,  // gauge
  // store
  kStoreObjects,
  kStoreBytes,
  kStoreAllocatedBytes,
  kStoreCapacityBytes,
  kStoreOpsFirst,  // + op * statuses + status
  kStoreWindowFull = kStoreOpsFirst + kStoreOpNames.size() * kStoreStatusNames.size(),
  kUnsolicitedFirst,  // + kUnsolicitedTypeNames index
  kUnsolicitedInlineResponses = kUnsolicitedFirst,
  kUnsolicitedCompletions,
  // object requests refused for the tenant before the store (+ kObjectRefusalNames index)
  kObjectForbidden,
  kObjectQuotaExceeded,
  // the hugepage cache in front of RADOS (store.backend: rados) and the RADOS backend
  kCacheHits,
  kCacheMisses,
  kCacheFills,
  kCacheFillSkips,
  kCacheEvictions,
  kCacheInvalidations,
  kCacheResets,
  kStoreChecksumFailures,
  kRadosNotifies,
  kRadosNotifyTimeouts,
  kRadosNotifyResends,
  kRadosErrors,
  kRadosOpsInFlight,
  kRadosReady,
  kRadosWorkerWakeups,
  kCount,
};
inline constexpr std::size_t kStatCount = static_cast<std::size_t>(Stat::kCount);

constexpr Stat stat_at(Stat first, std::size_t offset) noexcept {
  return static_cast<Stat>(static_cast<std::size_t>(first) + offset);
}
constexpr Stat completion_stat(std::size_t status) noexcept { return stat_at(Stat::kCompletionsFirst, status); }
// type_index: protocol::MessageType value - 1.
constexpr Stat message_stat(std::size_t type_index, Direction d) noexcept {
  return stat_at(Stat::kMessagesFirst, type_index * kDirectionNames.size() + static_cast<std::size_t>(d));
}
constexpr Stat bytes_stat(std::size_t type_index, Direction d) noexcept {
  return stat_at(Stat::kBytesFirst, type_index * kDirectionNames.size() + static_cast<std::size_t>(d));
}
constexpr Stat poller_state_stat(std::size_t state) noexcept {
  return stat_at(Stat::kPollerStatesFirst, state);
}
constexpr Stat wakeup_stat(std::size_t source) noexcept {
  return stat_at(Stat::kWakeupsFirst, source);
}
constexpr Stat doorbell_stat(std::size_t queue) noexcept {
  return stat_at(Stat::kDoorbellsFirst, queue);
}
constexpr Stat core_error_stat(std::size_t kind) noexcept { return stat_at(Stat::kCoreErrorsFirst, kind); }
constexpr Stat connection_stat(std::size_t state) noexcept { return stat_at(Stat::kConnectionsFirst, state); }
constexpr Stat failure_stat(std::size_t cause) noexcept { return stat_at(Stat::kConnectionFailuresFirst, cause); }
constexpr Stat reject_stat(std::size_t reason_index) noexcept { return stat_at(Stat::kRejectsFirst, reason_index); }
constexpr Stat violation_stat(std::size_t code_index) noexcept {
  return stat_at(Stat::kViolationsFirst, code_index);
}
constexpr Stat async_event_stat(std::size_t event) noexcept { return stat_at(Stat::kAsyncEventsFirst, event); }
constexpr Stat abandoned_stat(std::size_t reason) noexcept { return stat_at(Stat::kAbandonedFirst, reason); }
// class_index: dataplane::PeerFault value.
constexpr Stat peer_fault_stat(std::size_t class_index) noexcept {
  return stat_at(Stat::kPeerFaultsFirst, class_index);
}
// status: protocol::auth::AuthStatus value.
constexpr Stat auth_result_stat(std::size_t status) noexcept {
  return stat_at(Stat::kAuthResultsFirst, status);
}
constexpr Stat auth_failure_stat(std::size_t reason) noexcept {
  return stat_at(Stat::kAuthFailuresFirst, reason);
}
constexpr Stat revoked_stat(std::size_t reason) noexcept {
  return stat_at(Stat::kRevokedFirst, reason);
}
constexpr Stat fault_injected_stat(std::size_t label_index) noexcept {
  return stat_at(Stat::kFaultsInjectedFirst, label_index);
}
constexpr Stat store_op_stat(protocol::ObjectOp op, std::size_t status) noexcept {
  return stat_at(Stat::kStoreOpsFirst, static_cast<std::size_t>(op) * kStoreStatusNames.size() + status);
}

// Log-scale latency histogram with fixed power-of-two bounds in nanoseconds: bucket i counts observations
// <= 2^(10+i) ns, i.e. 1.024 us .. 2^34 ns (about 17.2 s); the last bucket is +Inf. Fixed bounds make the
// per-core histograms mergeable by plain addition at scrape.
struct LatencyHistogram {
  static constexpr unsigned kFirstShift = 10;
  static constexpr std::size_t kFiniteBuckets = 25;
  static constexpr std::size_t kBuckets = kFiniteBuckets + 1;

  std::array<std::uint64_t, kBuckets> buckets{};  // non-cumulative counts
  std::uint64_t sum_ns = 0;

  static constexpr std::uint64_t upper_bound_ns(std::size_t i) noexcept { return 1ull << (kFirstShift + i); }
  static constexpr std::size_t bucket_index(std::uint64_t ns) noexcept {
    if (ns <= (1ull << kFirstShift)) return 0;
    const std::size_t i = static_cast<std::size_t>(std::bit_width(ns - 1)) - kFirstShift;
    return i < kFiniteBuckets ? i : kFiniteBuckets;
  }
  void observe_ns(std::uint64_t ns) noexcept {
    bump(buckets[bucket_index(ns)], 1);
    bump(sum_ns, ns);
  }

  // Single writer: a relaxed load + store is enough and avoids a locked RMW.
  static void bump(std::uint64_t& v, std::uint64_t n) noexcept {
    std::atomic_ref<std::uint64_t> r(v);
    r.store(r.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // Reader side. atomic_ref needs a non-const referent; blocks are never const objects, only const views.
  static std::uint64_t read(const std::uint64_t& v) noexcept {
    return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(v)).load(std::memory_order_relaxed);
  }
  // Observations so far, over every bucket (reader side).
  std::uint64_t count() const noexcept {
    std::uint64_t n = 0;
    for (const std::uint64_t& b : buckets) n += read(b);
    return n;
  }
};

// librados op kinds timed by rdmagate_rados_op_duration_seconds.
inline constexpr std::array<std::string_view, 4> kRadosOpKindNames = {"read", "write", "remove", "notify"};
// Duration histograms, one each: requests by op (the cores), then librados ops by kind (the RADOS worker,
// copied into the control block at scrape).
inline constexpr std::size_t kRadosHistogramFirst = kStoreOpNames.size();
inline constexpr std::size_t kHistogramCount = kStoreOpNames.size() + kRadosOpKindNames.size();

// Aligned so two cores' blocks never share a cache line.
struct alignas(kCacheLine) CoreStats {
  std::array<std::uint64_t, kStatCount> values{};
  std::array<LatencyHistogram, kHistogramCount> request_duration{};

  void add(Stat s, std::uint64_t n = 1) noexcept { LatencyHistogram::bump(values[index(s)], n); }
  void sub(Stat s, std::uint64_t n = 1) noexcept { LatencyHistogram::bump(values[index(s)], 0 - n); }
  void set(Stat s, std::uint64_t v) noexcept {
    std::atomic_ref<std::uint64_t>(values[index(s)]).store(v, std::memory_order_relaxed);
  }
  std::uint64_t load(Stat s) const noexcept { return LatencyHistogram::read(values[index(s)]); }
  void observe_request_ns(protocol::ObjectOp op, std::uint64_t ns) noexcept {
    request_duration[static_cast<std::size_t>(op)].observe_ns(ns);
  }

 private:
  static constexpr std::size_t index(Stat s) noexcept { return static_cast<std::size_t>(s); }
};
static_assert(sizeof(CoreStats) % kCacheLine == 0);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);

// Converts TSC deltas to nanoseconds for observe_request_ns without a division on the data path.
class TscToNs {
 public:
  explicit TscToNs(std::uint64_t tsc_hz) noexcept
      : mult_(tsc_hz == 0 ? 0 : static_cast<std::uint64_t>((static_cast<unsigned __int128>(1'000'000'000ull)
                                                            << kShift) / tsc_hz)) {}
  std::uint64_t ns(std::uint64_t tsc_delta) const noexcept {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(tsc_delta) * mult_) >> kShift);
  }

 private:
  static constexpr unsigned kShift = 32;
  std::uint64_t mult_;
};

}  // namespace rdmagate::telemetry

#include "telemetry/metrics.hpp"

namespace rdmagate::telemetry {
namespace {

using Table = std::array<MetricDesc, kStatCount>;

struct Builder {
  Table t{};
  std::size_t next = 0;

  constexpr void row(std::string_view name, MetricKind kind, Unit unit, Scope scope, std::string_view help,
                     LabelPair a = {}, LabelPair b = {}) {
    t[next] = MetricDesc{static_cast<Stat>(next), name, kind, unit, scope, help, {a, b}};
    ++next;
  }
  template <std::size_t N>
  constexpr void rows(std::string_view name, MetricKind kind, Unit unit, Scope scope, std::string_view help,
                      std::string_view label, const std::array<std::string_view, N>& values) {
    for (const auto v : values) row(name, kind, unit, scope, help, {label, v});
  }
};

constexpr Table build_table() {
  constexpr auto kC = MetricKind::kCounter;
  constexpr auto kG = MetricKind::kGauge;
  constexpr auto kSum = Scope::kSummed;
  constexpr auto kCore = Scope::kPerCore;
  Builder b;
  b.row("rdmagate_poller_polls_total", kC, Unit::kNone, kCore, "Poll loop iterations of the data-plane core.");
  b.row("rdmagate_poller_idle_polls_total", kC, Unit::kNone, kCore, "Poll loop iterations that found no work.");
  b.row("rdmagate_poller_busy_seconds_total", kC, Unit::kTscSeconds, kCore,
        "Time the core spent in iterations that did work (from the TSC).");
  b.row("rdmagate_poller_idle_seconds_total", kC, Unit::kTscSeconds, kCore,
        "Time the core spent in idle iterations (from the TSC).");
  b.rows("rdmagate_poller_completions_total", kC, Unit::kNone, kCore, "Work completions polled, by status.",
         "status", kCompletionStatusNames);
  b.rows(
      "rdmagate_poller_state_seconds_total", kC, Unit::kTscSeconds, kCore,
      "Time the core spent in each state: iterations with work, empty polls, pause runs, sched_yield, asleep "
      "(from the TSC; the idle policy decides which occur).",
      "state", kPollerStateNames);
  b.row("rdmagate_poller_yields_total", kC, Unit::kNone, kCore,
        "sched_yield calls of the core (idle policy yield).");
  b.row("rdmagate_poller_arms_total", kC, Unit::kNone, kCore,
        "Times the core armed CQ notification and its doorbell to sleep (idle policy event).");
  b.row("rdmagate_poller_sleeps_total", kC, Unit::kNone, kCore,
        "Times the core went to sleep: its last look after arming found no work (idle policy event).");
  b.rows("rdmagate_poller_wakeups_total", kC, Unit::kNone, kCore,
         "Wakeups of a sleeping core, by what woke it (idle policy event).", "source", kWakeSourceNames);
  b.row("rdmagate_poller_sleeping", kG, Unit::kNone, kCore,
        "1 while the core sleeps waiting for a completion, a command or a deadline (idle policy event).");
  for (const auto type : kMessageTypeNames)
    for (const auto dir : kDirectionNames)
      b.row("rdmagate_transport_messages_total", kC, Unit::kNone, kSum, "Protocol messages by type and direction.",
            {"type", type}, {"direction", dir});
  for (const auto type : kMessageTypeNames)
    for (const auto dir : kDirectionNames)
      b.row("rdmagate_transport_message_bytes_total", kC, Unit::kBytes, kSum,
            "Protocol message bytes (header included) by type and direction.", {"type", type}, {"direction", dir});
  b.row("rdmagate_transport_read_chunks_total", kC, Unit::kNone, kSum, "RDMA READ chunks the gateway pulled.");
  b.row("rdmagate_transport_read_chunk_bytes_total", kC, Unit::kBytes, kSum, "Bytes pulled by RDMA READ chunks.");
  b.row("rdmagate_transport_write_chunks_total", kC, Unit::kNone, kSum, "RDMA WRITE chunks the gateway pushed.");
  b.row("rdmagate_transport_write_chunk_bytes_total", kC, Unit::kBytes, kSum, "Bytes pushed by RDMA WRITE chunks.");
  constexpr std::string_view kPayloadHelp =
      "Payload-carrying requests and answers: inline in the message, or by RDMA chunk (chunk requests sent "
      "plus chunk transfers run).";
  b.row("rdmagate_transport_payloads_total", kC, Unit::kNone, kSum, kPayloadHelp, {"mode", "inline"});
  b.row("rdmagate_transport_payloads_total", kC, Unit::kNone, kSum, kPayloadHelp, {"mode", "chunked"});
  b.row("rdmagate_transport_credit_stalls_total", kC, Unit::kNone, kSum,
        "Messages that had to wait because the peer had granted no credit.");
  b.row("rdmagate_transport_noops_total", kC, Unit::kNone, kSum,
        "NOOP messages sent to return credits (keepalive NOOPs are counted separately).");
  b.row("rdmagate_transport_keepalives_total", kC, Unit::kNone, kSum, "Keepalive NOOPs sent on idle connections.");
  b.row("rdmagate_transport_inline_posts_total", kC, Unit::kNone, kSum,
        "Sends posted with IBV_SEND_INLINE (the message is copied into the work request).");
  b.rows("rdmagate_transport_doorbells_total", kC, Unit::kNone, kSum,
         "Doorbells rung by the cores: one per QP flush that had sends, one per flush that had receives.",
         "queue", kDoorbellQueueNames);
  b.row("rdmagate_transport_send_work_requests_total", kC, Unit::kNone, kSum,
        "Send work requests the cores handed to the device: messages, RDMA READ/WRITE fragments, drain "
        "markers.");
  b.row("rdmagate_transport_receive_posts_total", kC, Unit::kNone, kSum,
        "Receives the cores handed to the device (re-posts; the first receives of a connection are "
        "control's).");
  b.rows("rdmagate_core_errors_total", kC, Unit::kNone, kSum,
         "Errors counted by the data-plane cores, by kind.", "kind", kCoreErrorNames);
  b.rows("rdmagate_connections", kG, Unit::kNone, kCore,
         "Connections by the core that holds (or last held) their slot, by state.", "state", kConnStateNames);
  b.row("rdmagate_connections_unplaced", kG, Unit::kNone, kSum,
        "Connections not placed on any core yet (active side resolving before its first placement).");
  b.row("rdmagate_connection_accepts_total", kC, Unit::kNone, kSum, "Connection requests accepted.");
  b.rows("rdmagate_connection_rejects_total", kC, Unit::kNone, kSum, "Connection requests rejected, by reason.",
         "reason", kRejectReasonNames);
  b.row("rdmagate_connection_reconnects_total", kC, Unit::kNone, kSum,
        "Connections re-established after a failure.");
  b.rows("rdmagate_connection_failures_total", kC, Unit::kNone, kSum,
         "Connections a core reported failed to the control thread, by cause.", "cause", kFailureCauseNames);
  b.rows("rdmagate_protocol_violations_total", kC, Unit::kNone, kSum,
         "Connections failed for a protocol violation by the peer, by code.", "code", kViolationCodeNames);
  b.rows("rdmagate_async_events_total", kC, Unit::kNone, kSum, "QP and device asynchronous events, by event.",
         "event", kAsyncEventNames);
  b.row("rdmagate_connection_close_rekicks_total", kC, Unit::kNone, kSum,
        "Closing QPs moved to the error state again because their core had not finished draining them.");
  b.rows("rdmagate_connection_requests_abandoned_total", kC, Unit::kNone, kSum,
         "Connection requests that ended before they were accepted, with no reject sent: the peer was gone "
         "(peer_gone), or it never answered the gateway's accept (handshake_timeout). Not a capacity signal.",
         "reason", kAbandonReasonNames);
  b.row("rdmagate_core_out_of_service", kG, Unit::kNone, kCore,
        "1 when the core lost its completion queue (IBV_EVENT_CQ_ERR): its connections were closed and it takes "
        "no new ones until the gateway restarts.");
  b.row("rdmagate_core_stale_completions_total", kC, Unit::kNone, kCore,
        "Completions naming an earlier incarnation of their connection (a reused slot): dropped unseen.");
  b.row("rdmagate_core_bulk_timeouts_total", kC, Unit::kNone, kCore,
        "RDMA READ/WRITE chains that passed protocol.bulk_timeout_ms: their connection failed.");
  b.row("rdmagate_core_chunk_queue_full_total", kC, Unit::kNone, kCore,
        "Chunk requests answered no_resources because their connection already had the most chunk requests "
        "waiting (docs/protocol.md §10); the connection stays open.");
  b.rows("rdmagate_core_peer_faults_total", kC, Unit::kNone, kCore,
         "Error completions the peer caused, by class (a local failure is in "
         "rdmagate_core_errors_total{kind=\"completion\"} only).",
         "class", kPeerFaultNames);
  b.rows("rdmagate_auth_total", kC, Unit::kNone, kSum,
         "AUTH messages the gateway answered, by result: ok, denied (unknown principal, wrong proof, "
         "unsupported "
         "mechanism: one answer on purpose), connection_limit (the principal's max_connections).",
         "result", kAuthResultNames);
  b.rows(
      "rdmagate_auth_failures_total", kC, Unit::kNone, kSum,
      "Connections closed before authenticating for another reason than a denied AUTH: a message other than "
      "NOOP or one AUTH while awaiting AUTH, or no AUTH within security.auth_timeout_ms.",
      "reason", kAuthFailureNames);
  b.rows("rdmagate_connections_revoked_total", kC, Unit::kNone, kSum,
         "Established connections a reload closed: principal removed or narrowed, source no longer in "
         "security.allowed_clients, or authentication now required and never done.",
         "reason", kRevokeReasonNames);
  constexpr std::string_view kFaultHelp =
      "Faults injected by the rules in faults.rules (docs/faults.md), by action and direction. 0 unless an "
      "operator installed rules.";
  for (const auto& f : kFaultInjectedLabels)
    b.row("rdmagate_faults_injected_total", kC, Unit::kNone, kSum, kFaultHelp, {"action", f.action},
          {"dir", f.dir});
  b.row("rdmagate_fault_stall_seconds_total", kC, Unit::kMicroSeconds, kSum,
        "Time cores spent stalled by fault-injection stall rules.");
  b.row("rdmagate_fault_hold_overflows_total", kC, Unit::kNone, kSum,
        "Messages a delay rule could not hold (the core's hold queue was full): sent or processed at once.");
  b.row("rdmagate_fault_rules", kG, Unit::kNone, kSum, "Fault-injection rules installed (faults.rules).");
  b.row("rdmagate_store_objects", kG, Unit::kNone, kSum, "Objects held by the store.");
  b.row("rdmagate_store_bytes", kG, Unit::kBytes, kSum, "Bytes of object data held by the store.");
  b.row("rdmagate_store_allocated_bytes", kG, Unit::kBytes, kSum,
        "Capacity charged: size classes plus metadata, including reserved and still-pinned values.");
  b.row("rdmagate_store_capacity_bytes", kG, Unit::kBytes, kSum, "Bytes the store can hold.");
  for (const auto op : kStoreOpNames)
    for (const auto status : kStoreStatusNames)
      b.row("rdmagate_store_operations_total", kC, Unit::kNone, kSum, "Store operations by op and status.",
            {"op", op}, {"status", status});
  b.row("rdmagate_store_window_full_total", kC, Unit::kNone, kSum,
        "PUTs the memory store refused because every slot of the key's probe window was taken (not capacity); "
        "also in rdmagate_store_operations_total{op=\"put\",status=\"no_space\"}. Should stay 0: the slot "
        "hash is keyed per process.");
  b.rows("rdmagate_unsolicited_answers_total", kC, Unit::kNone, kSum,
         "Answers (inline responses, completions) a peer sent to the gateway, which never sends requests: "
         "ignored and counted.",
         "type", kUnsolicitedTypeNames);
  b.rows(
      "rdmagate_object_refusals_total", kC, Unit::kNone, kSum,
      "Object requests refused for the tenant: forbidden = the principal lacks the op's permission (GET "
      "read, "
      "PUT write, DELETE delete; status 0x105), quota_exceeded = a PUT would take the tenant past "
      "security.tenants[].max_bytes or max_objects (status 0x106). Neither reaches the store, so neither is "
      "in rdmagate_store_operations_total.",
      "reason", kObjectRefusalNames);
  b.row("rdmagate_store_cache_hits_total", kC, Unit::kNone, kSum,
        "GETs answered from the hugepage cache in front of RADOS (store.backend: rados).");
  b.row("rdmagate_store_cache_misses_total", kC, Unit::kNone, kSum, "GETs the cache could not answer: sent to RADOS.");
  b.row("rdmagate_store_cache_fills_total", kC, Unit::kNone, kSum, "Values read from RADOS and kept in the cache.");
  b.row("rdmagate_store_cache_fill_skips_total", kC, Unit::kNone, kSum,
        "Values read from RADOS but not cached: the key changed meanwhile, or the cache was not trusted.");
  b.row("rdmagate_store_cache_evictions_total", kC, Unit::kNone, kSum,
        "Values evicted (CLOCK) to make room in the cache.");
  b.row("rdmagate_store_cache_invalidations_total", kC, Unit::kNone, kSum,
        "Invalidations received from gateways of the same pool (watch/notify), this one's included.");
  b.row("rdmagate_store_cache_resets_total", kC, Unit::kNone, kSum,
        "Times the whole cache was dropped: the invalidation watch was lost or re-registered.");
  b.row("rdmagate_store_checksum_failures_total", kC, Unit::kNone, kSum,
        "GETs answered corrupt: the value read does not match its stored CRC32C, or has none.");
  b.row("rdmagate_rados_notifies_total", kC, Unit::kNone, kSum,
        "Invalidation notifies this gateway sent (each names the keys of one or more PUTs and DELETEs).");
  b.row(
      "rdmagate_rados_notify_timeouts_total", kC, Unit::kNone, kSum,
      "Invalidations some gateway did not acknowledge in time: sent again after the commit, or, if that one "
      "too, the request waited out the cache lease.");
  b.row("rdmagate_rados_notify_resends_total", kC, Unit::kNone, kSum,
        "PUTs and DELETEs whose invalidation, sent beside the write, did not cover it (the write committed "
        "after its window, or a gateway did not acknowledge): a second went out after the commit.");
  b.row("rdmagate_rados_errors_total", kC, Unit::kNone, kSum,
        "librados operations that failed with an error other than not-found or timeout.");
  b.row("rdmagate_rados_ops_in_flight", kG, Unit::kNone, kSum, "librados operations submitted and not yet ended.");
  b.row("rdmagate_rados_ready", kG, Unit::kNone, kSum,
        "1 when the RADOS backend is connected, its cache watch registered and its last probe write committed.");
  b.row("rdmagate_rados_worker_wakeups_total", kC, Unit::kNone, kSum,
        "Times a data-plane core woke the parked RADOS worker thread (a futex wake).");
  if (b.next != kStatCount) throw "metric table does not cover every Stat";  // fails constant evaluation
  return b.t;
}

constexpr Table kTable = build_table();

// Spot checks that the enum's block starts line up with the rows.
static_assert(kTable[static_cast<std::size_t>(Stat::kKeepalives)].name == "rdmagate_transport_keepalives_total");
static_assert(kTable[static_cast<std::size_t>(Stat::kAccepts)].name == "rdmagate_connection_accepts_total");
static_assert(kTable[static_cast<std::size_t>(Stat::kStoreCapacityBytes)].name == "rdmagate_store_capacity_bytes");
static_assert(kTable[static_cast<std::size_t>(message_stat(2, Direction::kTx))].labels[0].value ==
              "inline_response");
static_assert(kTable[static_cast<std::size_t>(Stat::kInlineSends)].labels[0].value == "inline");
static_assert(kTable[static_cast<std::size_t>(Stat::kChunkedSends)].labels[0].value == "chunked");
static_assert(kTable[static_cast<std::size_t>(Stat::kReadChunks)].name == "rdmagate_transport_read_chunks_total");
static_assert(kTable[static_cast<std::size_t>(Stat::kInlinePosts)].name ==
              "rdmagate_transport_inline_posts_total");
static_assert(kTable[static_cast<std::size_t>(poller_state_stat(4))].labels[0].value == "sleep");
static_assert(kTable[static_cast<std::size_t>(Stat::kSleeping)].name == "rdmagate_poller_sleeping");
static_assert(kTable[static_cast<std::size_t>(doorbell_stat(1))].labels[0].value == "recv");
static_assert(kTable[static_cast<std::size_t>(Stat::kRecvPosts)].name ==
              "rdmagate_transport_receive_posts_total");
static_assert(kTable[static_cast<std::size_t>(core_error_stat(8))].labels[0].value == "dead_peer");
static_assert(kTable[static_cast<std::size_t>(Stat::kConnectionsUnplaced)].name ==
              "rdmagate_connections_unplaced");
static_assert(kTable[static_cast<std::size_t>(failure_stat(0))].labels[0].value == "protocol_violation");
static_assert(kTable[static_cast<std::size_t>(Stat::kViolationsFirst)].labels[0].value == "truncated_header");
static_assert(kTable[static_cast<std::size_t>(Stat::kFaultRules)].name == "rdmagate_fault_rules");
static_assert(kTable[static_cast<std::size_t>(peer_fault_stat(4))].labels[0].value == "rnr_retry_exceeded");
static_assert(kTable[static_cast<std::size_t>(auth_result_stat(2))].labels[0].value == "connection_limit");
static_assert(kTable[static_cast<std::size_t>(auth_failure_stat(1))].labels[0].value == "auth_timeout");
static_assert(kTable[static_cast<std::size_t>(revoked_stat(1))].labels[0].value == "allowed_clients");
static_assert(kTable[static_cast<std::size_t>(failure_stat(8))].labels[0].value == "revoked");
static_assert(kTable[static_cast<std::size_t>(Stat::kUnsolicitedCompletions)].labels[0].value == "completion");
static_assert(kTable[static_cast<std::size_t>(Stat::kObjectQuotaExceeded)].labels[0].value ==
              "quota_exceeded");
static_assert(kTable[static_cast<std::size_t>(Stat::kCacheHits)].name == "rdmagate_store_cache_hits_total");
static_assert(kTable[static_cast<std::size_t>(Stat::kChunkQueueFull)].name == "rdmagate_core_chunk_queue_full_total");
static_assert(kTable[static_cast<std::size_t>(Stat::kStoreAllocatedBytes)].name ==
              "rdmagate_store_allocated_bytes");
static_assert(
    kTable[static_cast<std::size_t>(store_op_stat(protocol::ObjectOp::kDelete, 4))].labels[1].value ==
    "bad_request");

constexpr std::array<HistogramDesc, kHistogramCount> kHistograms = {{
    {"rdmagate_request_duration_seconds", "Duration of requests from receive to response sent, by op.",
     {"op", kStoreOpNames[0]}},
    {"rdmagate_request_duration_seconds", "Duration of requests from receive to response sent, by op.",
     {"op", kStoreOpNames[1]}},
    {"rdmagate_request_duration_seconds", "Duration of requests from receive to response sent, by op.",
     {"op", kStoreOpNames[2]}},
    {"rdmagate_rados_op_duration_seconds", "Duration of librados operations, submit to callback, by kind.",
     {"kind", kRadosOpKindNames[0]}},
    {"rdmagate_rados_op_duration_seconds", "Duration of librados operations, submit to callback, by kind.",
     {"kind", kRadosOpKindNames[1]}},
    {"rdmagate_rados_op_duration_seconds", "Duration of librados operations, submit to callback, by kind.",
     {"kind", kRadosOpKindNames[2]}},
    {"rdmagate_rados_op_duration_seconds", "Duration of librados operations, submit to callback, by kind.",
     {"kind", kRadosOpKindNames[3]}},
}};

}  // namespace

std::span<const MetricDesc> metric_table() noexcept { return kTable; }
std::span<const HistogramDesc> histogram_table() noexcept { return kHistograms; }

}  // namespace rdmagate::telemetry

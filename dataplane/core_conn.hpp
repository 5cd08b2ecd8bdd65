#pragma once
// One connection as a data-plane core sees it: descriptors, credit machine, the bulk engine's state, and the
// work request id encoding. Control builds it (init_core_conn, core_resources.hpp) before any receive is
// posted; from the first posted receive until the core answers CLOSED, only the owning core writes the
// fields marked "core". What a work request looks like on the device is the backend's business
// (dataplane/backend/): nothing here is a verbs structure.
//
// wr_id encoding (o2iblnd style): the address of the RxDesc/TxDesc/BulkOp (8-byte aligned) with the work
// request kind in the low 3 bits, so a completion finds its descriptor, and through it its connection,
// without a lookup; and the connection's generation in the top 16 bits (kWrGenShift), so that a completion of
// an earlier incarnation of the same CoreConn (an active side reconnects over the same object, control
// rebuilds its descriptors in place) is recognised and dropped instead of being taken for one of the new
// connection's (the shape of SPDK issue 3830). User-space addresses on Linux fit 48 bits: x86-64 with 5-level
// paging and arm64 with 52-bit VAs hand out higher ones only to an mmap whose hint asks for them, which no
// allocator does. A completion may arrive before ADOPT (receives are posted before accept): the core finds
// the connection through the descriptor and parks the message (early rx).
//
// With a shared receive queue (CoreConfig::srq) a receive descriptor belongs to the core's pool, not to a
// connection (RxDesc::conn is null): the connection comes from the completion's QP number through the core's
// ConnTable below, one hash probe, nothing allocated.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "dataplane/auth_table.hpp"
#include "dataplane/backend/backend.hpp"
#include "dataplane/handoff_commands.hpp"
#include "protocol/credit_machine.hpp"
#include "protocol/errors.hpp"
#include "protocol/message.hpp"
#include "protocol/params.hpp"

namespace rdmagate::dataplane {

enum class WrKind : std::uint64_t {
  kRecv = 0,        // a receive buffer (RxDesc)
  kSend = 1,        // a message send (TxDesc)
  kDrain = 2,       // the drain marker posted after CLOSE (TxDesc of the connection's marker)
  kRdma = 3,        // an RDMA READ/WRITE for a bulk chunk (reserved for bulk transfers)
  kRdmaFiller = 4,  // an unsignaled RDMA WRITE of a chunk: completes only in error (flush), and then
                    // accounts for its own SQ FIFO entry, not its op's marker
  kWindowBind = 5,  // an unsignaled bind of a memory window (WindowDesc): completes only in error
  kWindowInv = 6,   // the signaled local invalidation of a memory window (WindowDesc)
};
inline constexpr std::uint64_t kWrKindMask = 0x7;

// Microseconds to TSC ticks, the unit of the credit machine's keepalive and dead-peer times. Split so that
// no configurable time overflows: us * hz would, for a day (8.64e10 us) at 2.25 GHz.
constexpr std::uint64_t us_to_tsc(std::uint64_t us, std::uint64_t hz) noexcept {
  return us / 1'000'000 * hz + us % 1'000'000 * hz / 1'000'000;
}

inline constexpr unsigned kWrGenShift = 48;
inline constexpr std::uint64_t kWrAddrMask = ((std::uint64_t{1} << kWrGenShift) - 1) & ~kWrKindMask;
static_assert(sizeof(void*) == 8, "the wr_id keeps a 48-bit address beside the generation");

// `gen`: the connection's CoreConn::generation; 0 for the buffers of a core's shared receive pool, which
// belong to no connection (their connection comes from the completion's QP number).
inline std::uint64_t make_wr_id(const void* desc, WrKind k, std::uint16_t gen) noexcept {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(desc)) | static_cast<std::uint64_t>(k) |
         std::uint64_t{gen} << kWrGenShift;
}
inline WrKind wr_kind(std::uint64_t wr_id) noexcept { return static_cast<WrKind>(wr_id & kWrKindMask); }
inline std::uint16_t wr_gen(std::uint64_t wr_id) noexcept {
  return static_cast<std::uint16_t>(wr_id >> kWrGenShift);
}
template <typename T>
inline T* wr_desc(std::uint64_t wr_id) noexcept {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(wr_id & kWrAddrMask));
}

struct CoreConn;

struct alignas(8) RxDesc {
  CoreConn* conn = nullptr;  // null: a buffer of the core's shared receive pool
  std::uint8_t* buf = nullptr;
  std::uint32_t byte_len = 0;  // core: of the last completion (early rx parking)
  std::uint32_t index = 0;     // in the connection's rx, or in the core's pool
};

struct alignas(8) TxDesc {
  CoreConn* conn = nullptr;
  std::uint8_t* buf = nullptr;
  std::uint32_t len = 0;
  std::uint16_t index = 0;
  std::uint8_t type = 0;  // protocol::MessageType of what the buffer holds (counters)
};

// SQ FIFO entries that are not tx descriptors: an RDMA READ/WRITE whose completion is reported (marker) and
// an unsignaled RDMA WRITE before it (filler). Both are above any tx descriptor index.
inline constexpr std::uint16_t kRdmaMarker = 0xfff0;
inline constexpr std::uint16_t kRdmaFiller = 0xfff1;
// SQ FIFO entries of a memory window's bind and invalidation (core_windows.hpp): they hold no descriptor.
inline constexpr std::uint16_t kWindowBindEntry = 0xfff2;
inline constexpr std::uint16_t kWindowInvEntry = 0xfff3;
// tx descriptors a connection may have: every index stays below the markers (CoreResources::create refuses
// more).
inline constexpr std::uint32_t kMaxTxPerConn = kRdmaMarker;

// Payload bytes a queued chunk request keeps: the receive buffer is re-posted at once, so the payload (an
// object key prefix, for instance) is copied. Enough for the object service's largest key prefix (251 B)
// plus a byte, so a longer payload is always seen as longer than any valid one.
inline constexpr std::uint32_t kChunkPayloadMax = 256;

// A chunk request waiting for (or being served by) the connection's bulk engine.
struct ChunkRequest {
  protocol::MessageType type = protocol::MessageType::kReadChunkRequest;
  std::uint16_t opcode = 0;
  std::uint64_t cookie = 0;
  protocol::Chunk chunk{};  // copied from the receive buffer, which is re-posted at once
  std::uint32_t payload_len = 0;  // of the message; only min(payload_len, kChunkPayloadMax) bytes are kept
  std::array<std::uint8_t, kChunkPayloadMax> payload_buf{};

  // The kept payload bytes; payload_complete() says whether that is the whole payload.
  std::span<const std::uint8_t> payload() const noexcept {
    return {payload_buf.data(), payload_len < kChunkPayloadMax ? payload_len : kChunkPayloadMax};
  }
  bool payload_complete() const noexcept { return payload_len <= kChunkPayloadMax; }
};

// The one bulk transfer a connection runs at a time (later chunk requests wait in its FIFO).
enum class BulkState : std::uint8_t {
  kIdle = 0,     // nothing in flight
  kReading = 1,  // RDMA READs of a read chunk in flight (at most rd_depth; the rest wait to be posted)
  kWriting = 2,  // RDMA WRITEs of a write chunk posted; waiting for the last (signaled) one
};

struct alignas(8) BulkOp {
  CoreConn* conn = nullptr;  // set by control with the descriptors (a kRdma wr_id names the BulkOp)
  BulkState state = BulkState::kIdle;
  ChunkRequest req{};
  std::uint16_t next_frag = 0;    // next fragment to READ
  std::uint16_t outstanding = 0;  // READs posted, not completed
  std::uint32_t next_off = 0;     // local offset of next_frag
  std::uint32_t bytes = 0;        // bytes of the transfer
  // Local memory of the transfer: the connection's bulk buffer, or any registered memory a service names
  // (the store arena: zero copy). The NIC may use [local, local + bytes) until the op ends.
  std::uint8_t* local = nullptr;
  std::uint32_t local_lkey = 0;
  bool failed = false;  // a READ/WRITE of the op completed in error or flushed, or was never posted
  // Its work requests in the SQ FIFO (posted, or staged and not yet taken back). The op ends only at 0:
  // until then the device may still read or write its local memory (an unsignaled WRITE that ran leaves
  // the FIFO only behind a later signaled completion, the drain marker's at the latest).
  std::uint16_t in_sq = 0;
  // TSC when the op started: the bulk deadline (CoreConfig::bulk_timeout_us) counts from here.
  std::uint64_t start_tsc = 0;
};
inline constexpr std::uint32_t kChunkQueue = 4;  // chunk requests a connection may have waiting

// One type-2 memory window of a connection's QP (a kWindowBind / kWindowInv wr_id names it).
struct alignas(8) WindowDesc {
  CoreConn* conn = nullptr;
  std::uint32_t slot = 0;
};

// Where a connection is, as its core sees it.
enum class CoreConnState : std::uint8_t {
  kPosted = 0,    // receives posted by control, not adopted yet: completions are parked (early rx)
  kOwned = 1,     // ADOPT seen: the core owns the data path
  kFailed = 2,    // the core reported FAILED (completion error, protocol violation, dead peer): no more
                  // sends; waiting for control's CLOSE
  kDraining = 3,  // CLOSE seen: QP is in ERR; waiting for every posted WR to flush
  kClosed = 4,    // CLOSED sent: the core holds no reference any more
};

// Per-connection state of the service the core runs, as bytes: each service declares its own `ConnState`
// and reaches it with svc.as<ConnState>() (svc.reset<ConnState>() in on_adopt_st). Bytes, not a template
// parameter, so that CoreConn stays one type for every service; trivially copyable, so that control may
// zero them in place (reset_core_conn) and no destructor is ever owed.
struct ServiceConnState {
  static constexpr std::size_t kBytes = 40;
  static constexpr std::size_t kAlign = 8;

  template <typename T>
  T& as() noexcept {
    check<T>();
    return *std::launder(reinterpret_cast<T*>(bytes_));
  }
  template <typename T>
  const T& as() const noexcept {
    check<T>();
    return *std::launder(reinterpret_cast<const T*>(bytes_));
  }
  // Starts a fresh T{} in the bytes (value-initialised: every member as its default member initialiser says).
  template <typename T>
  T& reset() noexcept {
    check<T>();
    return *::new (static_cast<void*>(bytes_)) T{};
  }

 private:
  template <typename T>
  static constexpr void check() noexcept {
    static_assert(sizeof(T) <= kBytes, "a service's ConnState must fit ServiceConnState::kBytes");
    static_assert(alignof(T) <= kAlign, "a service's ConnState must not need more than 8-byte alignment");
    static_assert(std::is_trivially_copyable_v<T>, "a service's ConnState must be trivially copyable");
  }
  alignas(kAlign) std::byte bytes_[kBytes] = {};
};

// Where a connection stands in authentication (docs/protocol.md §11). The passive side only: control sets
// kAwaiting before ADOPT when the session says auth_required; every other connection is open from the start,
// so authentication costs it one compare per received message (CoreLoop::dispatch_st).
enum class AuthState : std::uint8_t {
  kOpen = 0,      // authenticated, or no authentication on this connection: messages go to the service
  kAwaiting = 1,  // only NOOP and one AUTH are taken, until auth_deadline_tsc (then FAILED kAuthTimeout)
  kDenied = 2,    // the AUTH was refused and answered so: once the answer's send completed (or at
                  // auth_deadline_tsc) the core reports FAILED kAuthDenied; what the peer sends meanwhile is
                  // dropped
};

struct CoreConn {
  // ---- set by control before the first receive is posted; read-only afterwards ----
  ConnHandle handle{};        // what the core names in CLOSED/FAILED
  BackendQp* qp = nullptr;          // the backend's QP state (owned by control's Connection)
  std::uint32_t qp_num = 0;
  std::uint32_t lkey = 0;
  std::uint32_t max_inline = 0;      // read back from the QP after creation
  std::uint32_t buf_size = 0;        // bytes per rx/tx buffer (>= negotiated max message size)
  std::uint16_t signal_interval = 8; // one signaled send per N (N < SQ depth)
  std::uint32_t sq_depth = 0;        // granted SQ depth
  std::vector<RxDesc> rx;            // one per posted receive buffer
  std::vector<TxDesc> tx;            // message descriptors (buffers in registered memory)
  TxDesc drain{};                    // the drain marker
  std::uint8_t* bulk = nullptr;      // the connection's bulk buffer (registered with the core's region)
  std::uint32_t bulk_size = 0;
  std::uint32_t rkey = 0;            // active side: key of the core's region (requests' chunks)
  std::uint16_t rd_depth = 1;        // RDMA READs in flight at most (initiator depth)
  std::vector<WindowDesc> windows;   // the QP's type-2 memory windows (CoreConfig::windows_per_conn)
  std::array<std::uint8_t, 16>
      peer_ip{};  // the peer's address (IPv4 as ::ffff:a.b.c.d): what fault rules match (ctl sets it)
  // This incarnation's mark in every wr_id of its descriptors (never 0: a core's pool buffers carry 0). A
  // completion that carries another is a stale one of an earlier incarnation: counted and dropped.
  std::uint16_t generation = 0;
  // ---- set by control before ADOPT (the ring's release/acquire publishes them) ----
  protocol::Session session{};
  protocol::CreditConfig credit_cfg{};
  AuthState auth = AuthState::kOpen;  // set with the session (kAwaiting or kOpen); from ADOPT the core's

  // ---- core ----
  CoreConnState state = CoreConnState::kPosted;
  // Authentication (what the service reads; copied at AUTH so its hot path chases no pointer): the
  // principal in the core's current AuthTable (repointed when a new table is applied; null: not
  // authenticated, auth off, or the connection left the owned list, after which its table may be freed),
  // its tenant's namespace id (0: no authentication) and its Permission mask (kPermAll: auth off).
  const PrincipalEntry* principal = nullptr;
  std::uint16_t tenant_id = 0;
  std::uint8_t perms = kPermAll;
  std::uint8_t auth_denied_status = 0;  // kDenied: the protocol::auth::AuthStatus answered
  std::uint64_t auth_deadline_tsc = 0;  // kAwaiting / kDenied: the TSC time the timers end the connection
  // The usage object this connection is counted in (PrincipalUsage::connections): the per-name object of
  // the process, not of a table, so it stays valid after any table swap. Released when the connection
  // leaves the owned list.
  PrincipalUsage* auth_usage = nullptr;
  std::uint32_t rx_posted = 0;  // receives the device holds (set by control when it posts them)
  std::optional<protocol::CreditMachine> credits;
  std::vector<std::uint16_t> links;     // credit machine queue links, one per tx descriptor
  std::vector<std::uint16_t> tx_free;   // free tx descriptor indices (stack)
  std::uint32_t tx_free_top = 0;
  std::vector<std::uint16_t> sq_fifo;   // tx descriptors posted, oldest first (power-of-two ring)
  std::uint32_t sq_head = 0, sq_tail = 0;
  std::uint32_t quiesce_sq_mark = 0;  // sq_tail when the core began to quiesce (CONFIG kQuiesce)
  std::uint32_t unsignaled = 0;         // sends posted since the last signaled one
  bool drain_posted = false;
  bool drain_retry = false;  // draining, and the drain marker could not be posted yet (retried by the timers)
  std::vector<std::uint32_t> early;  // rx (or shared pool) indices completed before ADOPT, in order
  std::uint32_t early_count = 0;
  // Work staged on the backend's QP since the last flush (posted at the end of the burst).
  std::uint32_t staged_recvs = 0;
  std::uint32_t staged_sends = 0;
  bool dirty = false;
  std::uint32_t owned_index = 0;  // position in the core's owned list
  ServiceConnState svc{};
  BulkOp bulk_op{};
  std::array<ChunkRequest, kChunkQueue> chunk_queue{};
  std::uint32_t chunk_head = 0, chunk_count = 0;

  std::uint32_t sq_inflight() const noexcept { return sq_tail - sq_head; }
};

// Errors the core reports, by code (plain per-core counters).
enum class CoreError : std::uint8_t {
  kWire = 0,          // decode_message refused a message (by WireError below)
  kCredit = 1,        // the credit machine refused a message (by CreditError below)
  kCompletion = 2,    // a completion with an error status other than flush
  kPostSend = 3,      // the backend could not post staged sends
  kPostRecv = 4,      // the backend could not post staged receives
  kTxExhausted = 5,   // no free tx descriptor (sizing bug)
  kEncode = 6,        // encode_message refused what a service built
  kUnexpected = 7,    // a message type the service does not take in this direction
  kDeadPeer = 8,      // nothing received for the dead-peer timeout
};
inline constexpr std::size_t kCoreErrorCount = 9;

// Error completions the peer caused, not this gateway or its device (the connection fails with
// FailureKind::kPeerFault, status the device's ibv_wc_status), so that an operator can tell them from local
// failures. Counted by class (CoreCounters::peer_faults).
enum class PeerFault : std::uint8_t {
  kRemoteAccess = 0,  // IBV_WC_REM_ACCESS_ERR: our READ/WRITE named a bad rkey or range of the peer
  kRemoteInvalidRequest =
      1,                  // IBV_WC_REM_INV_REQ_ERR: the peer refused our request (e.g. its receive is short)
  kRemoteOperation = 2,   // IBV_WC_REM_OP_ERR: the peer could not complete it (its receive buffer's fault)
  kRecvLength = 3,        // IBV_WC_LOC_LEN_ERR on a receive: the peer sent more than our receive buffer
  kRnrRetryExceeded = 4,  // IBV_WC_RNR_RETRY_EXC_ERR: the peer posted no receive for our SEND
  kRetryExceeded = 5,     // IBV_WC_RETRY_EXC_ERR: the peer stopped acknowledging (gone, or the path)
};
inline constexpr std::size_t kPeerFaultCount = 6;

// Failure statuses the core reports with FailureKind::kProtocol: a WireError below kCreditStatusBase, a
// CreditError at kCreditStatusBase + code, an unexpected message type at kUnexpectedStatusBase + type.
inline constexpr std::uint32_t kCreditStatusBase = 0x100;
inline constexpr std::uint32_t kUnexpectedStatusBase = 0x200;
inline constexpr std::uint32_t kProtocolStatusEnd = 0x300;  // statuses control counts by value

// CoreCounters::auth_denied slots: one per protocol::auth::AuthStatus value an answer can carry.
inline constexpr std::size_t kAuthStatusSlots = 3;

// Plain per-core counters. Only the owning core writes them; readers tolerate torn/stale values.
struct CoreCounters {
  std::uint64_t polls = 0;
  std::uint64_t idle_polls = 0;
  std::uint64_t yields = 0;
  std::uint64_t completions_recv = 0;
  std::uint64_t completions_send = 0;
  std::uint64_t completions_drain = 0;
  std::uint64_t completions_rdma = 0;
  std::uint64_t completions_flushed = 0;
  std::uint64_t completions_error = 0;
  std::array<std::uint64_t, protocol::kMessageTypeMax + 1> msgs_rx{};   // by MessageType
  std::array<std::uint64_t, protocol::kMessageTypeMax + 1> bytes_rx{};
  std::array<std::uint64_t, protocol::kMessageTypeMax + 1> msgs_tx{};
  std::array<std::uint64_t, protocol::kMessageTypeMax + 1> bytes_tx{};
  std::uint64_t inline_sends = 0;
  std::uint64_t doorbells_send = 0;
  std::uint64_t doorbells_recv = 0;
  std::uint64_t send_wrs = 0;    // send work requests handed to the device (messages, RDMA, drain markers)
  std::uint64_t recv_posts = 0;  // receives handed to the device by the core (control's first ones excluded)
  std::uint64_t credit_stalls = 0;   // a message queued because credits did not allow it now
  std::uint64_t noops = 0;         // every NOOP sent, keepalives included
  std::uint64_t keepalives = 0;    // NOOPs the credit machine sent for NoopReason::kKeepalive
  std::uint64_t early_rx = 0;
  std::uint64_t adopted = 0;
  std::uint64_t closed = 0;
  std::array<std::uint64_t, kCoreErrorCount> errors{};
  std::array<std::uint64_t, protocol::kWireErrorCount> wire_errors{};
  std::array<std::uint64_t, protocol::kCreditErrorCount> credit_errors{};
  std::uint64_t read_chunks = 0, read_bytes = 0, write_chunks = 0, write_bytes = 0;
  std::uint64_t rdma_reads_queued = 0;  // READs that had to wait for an earlier one (initiator depth)
  std::uint64_t chunk_queue_full = 0;   // chunk requests refused with kNoResources
  std::uint64_t quiesce_refused = 0;    // requests that arrived while quiescing, answered kNoResources
  std::uint64_t quiesce_reached = 0;    // quiesce phases that ended with every connection idle
  // Shared receive queue: receives of a QP no connection of this core names (any more: one that ran as its
  // QP went to ERR after CLOSED); the buffer goes back to the pool.
  std::uint64_t srq_stray = 0;
  // Completions whose wr_id names an earlier incarnation of their connection (wr_gen): dropped unseen.
  std::uint64_t stale_completions = 0;
  // Bulk transfers that passed CoreConfig::bulk_timeout_us: their connection failed
  // (FailureKind::kBulkTimeout).
  std::uint64_t bulk_timeouts = 0;
  // Error completions the peer caused, by class (also counted in completions_error).
  std::array<std::uint64_t, kPeerFaultCount> peer_faults{};
  // Authentication (passive side, docs/protocol.md §11): AUTHs answered ok; AUTHs refused, by the status
  // answered (protocol::auth::AuthStatus: [1] denied, [2] connection_limit; [0] stays 0); messages other than
  // NOOP and AUTH before authentication, and second AUTHs (each fails its connection kProtocol); connections
  // with no AUTH before their deadline; authenticated connections a new table revoked (principal gone, tenant
  // changed, permissions narrowed), and unauthenticated ones revoked because the new table requires
  // authentication.
  std::uint64_t auth_ok = 0;
  std::array<std::uint64_t, kAuthStatusSlots> auth_denied{};
  std::uint64_t auth_unauthenticated = 0;
  std::uint64_t auth_timeouts = 0;
  std::uint64_t revoked_principal = 0;
  std::uint64_t revoked_unauthenticated = 0;
};

// QP number -> connection, for the receives of a core's shared receive queue: an open-addressing table of
// single pointers (published with release), fixed capacity (twice the core's connections), a removed entry a
// tombstone so every other probe sequence stays intact (the mlx5 backend's QP table, for connections).
// Control inserts a connection before its QP can receive anything; the entry goes when the core answers
// CLOSED (the core removes it) or control destroys the QP, whichever is first.
class ConnTable {
 public:
  ConnTable() = default;
  explicit ConnTable(std::uint32_t max_conns) {
    std::uint32_t cap = 16;
    while (cap < 2 * max_conns) cap <<= 1;
    slots_ = std::make_unique<std::atomic<CoreConn*>[]>(cap);
    for (std::uint32_t i = 0; i < cap; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
    mask_ = cap - 1;
  }
  // By c->qp_num, which is set before and never changes while c is in the table.
  bool insert(CoreConn* c) noexcept;  // false when full
  void erase(CoreConn* c) noexcept;
  CoreConn* find_st(std::uint32_t qpn) const noexcept;

 private:
  static CoreConn* tombstone() noexcept { return reinterpret_cast<CoreConn*>(std::uintptr_t{8}); }
  std::uint32_t hash(std::uint32_t qpn) const noexcept { return (qpn * 2654435761u >> 8) & mask_; }
  std::unique_ptr<std::atomic<CoreConn*>[]> slots_;
  std::uint32_t mask_ = 0;
};

inline CoreConn* ConnTable::find_st(std::uint32_t qpn) const noexcept {
  for (std::uint32_t i = hash(qpn), n = 0; n <= mask_; i = (i + 1) & mask_, ++n) {
    CoreConn* c = slots_[i].load(std::memory_order_acquire);
    if (c == nullptr) return nullptr;
    if (c != tombstone() && c->qp_num == qpn) return c;
  }
  return nullptr;
}

inline bool ConnTable::insert(CoreConn* c) noexcept {
  for (std::uint32_t i = hash(c->qp_num), n = 0; n <= mask_; i = (i + 1) & mask_, ++n) {
    CoreConn* cur = slots_[i].load(std::memory_order_relaxed);
    if (cur == nullptr || cur == tombstone()) {
      slots_[i].store(c, std::memory_order_release);
      return true;
    }
  }
  return false;
}

inline void ConnTable::erase(CoreConn* c) noexcept {
  for (std::uint32_t i = hash(c->qp_num), n = 0; n <= mask_; i = (i + 1) & mask_, ++n) {
    CoreConn* cur = slots_[i].load(std::memory_order_relaxed);
    if (cur == nullptr) return;
    if (cur == c) {
      slots_[i].store(tombstone(), std::memory_order_release);
      return;
    }
  }
}

}  // namespace rdmagate::dataplane

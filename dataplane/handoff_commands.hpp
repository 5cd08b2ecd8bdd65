#pragma once
// The vocabulary of the per-core handoff rings (design.md "Handoff"): what the control thread tells a
// data-plane core (ADOPT, CLOSE, CONFIG) and what a core answers (CLOSED, FAILED, STATS).
//
// Commands travel BY VALUE as 16-byte PODs in the ring's own slots (rte_ring "elem" API, esize 16), not as
// pointers to separately allocated messages. That is the whole point: neither side allocates, nothing has to
// be freed by the other thread, and a command can never dangle. The only pointer that crosses is the
// connection itself (ConnHandle), whose lifetime the teardown protocol guarantees: control keeps the object
// alive from ADOPT until the core's CLOSED.
//
// This header has no DPDK dependency, so control-side code (the connection lifecycle) can name close reasons
// without pulling in EAL headers.

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace rdmagate::dataplane {

// Opaque reference to a connection object owned by control and borrowed by a core between ADOPT and CLOSED.
// The engine decides the encoding (normally the address of its connection object); 0 is never a valid
// connection.
struct ConnHandle {
  std::uint64_t value = 0;

  static ConnHandle from_ptr(const void* p) noexcept {
    return ConnHandle{static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p))};
  }
  template <typename T>
  T* as_ptr() const noexcept {
    return reinterpret_cast<T*>(static_cast<std::uintptr_t>(value));
  }
  constexpr bool valid() const noexcept { return value != 0; }
  friend constexpr bool operator==(ConnHandle, ConnHandle) = default;
};

// Why a connection is being torn down. Shared by the control-side lifecycle (which picks it) and the core
// (which counts and logs it when it receives CLOSE). The numeric values are stable: they show up in logs and
// counters.
enum class CloseReason : std::uint8_t {
  kNone = 0,               // no teardown in progress (never sent in a CLOSE)
  kLocal = 1,              // an operator or the engine closed this one connection on purpose
  kShutdown = 2,           // process shutdown (SIGTERM): close and never reconnect
  kPeerDisconnected = 3,   // rdma_cm DISCONNECTED: the peer sent a DREQ or the link timed out
  kRejectedByPeer = 4,     // rdma_cm REJECTED: the peer refused our connect (or our accept's REP)
  kRejectedLocally = 5,    // passive side: negotiation refused the request, we sent a reject
  kUnreachable = 6,        // rdma_cm UNREACHABLE: the peer never answered the connect
  kAddrError = 7,          // rdma_cm ADDR_ERROR: address resolution failed
  kRouteError = 8,         // rdma_cm ROUTE_ERROR: route resolution failed
  kConnectError = 9,       // rdma_cm CONNECT_ERROR: the CM exchange failed after it started
  kHandshakeTimeout = 10,  // our own handshake deadline passed before ESTABLISHED
  kSetupFailed = 11,       // a local acquisition (cm_id, QP, rx buffers, core slot, ...) failed
  kDeviceRemoval = 12,     // rdma_cm DEVICE_REMOVAL: the device is being unplugged
  kQpFatal = 13,           // async event: QP fatal / access error / request error on this QP
  kDeviceFatal = 14,       // async event: the device reported a catastrophic error
  kPortDown = 15,          // async event: the port this connection uses went down
  kCompletionError = 16,   // the core saw a non-flush completion error (FAILED kCompletion)
  kProtocolError = 17,     // the core or control saw a protocol violation from the peer
  kKeepaliveTimeout = 18,  // the peer went silent past the dead-peer timeout
  kPeerFault = 19,    // an error completion the peer caused (FAILED kPeerFault: bad rkey, RNR retries...)
  kBulkTimeout = 20,  // an RDMA READ/WRITE chain passed protocol.bulk_timeout_ms (FAILED kBulkTimeout)
  kCqError = 21,      // the core's CQ went to error (IBV_EVENT_CQ_ERR): every connection of the core
  kAuthDenied = 22,   // the peer's AUTH was refused and answered so (FAILED kAuthDenied)
  kAuthTimeout = 23,  // no AUTH within security.auth_timeout_ms of ADOPT (FAILED kAuthTimeout)
  kRevoked = 24,      // a reload took away what the connection was admitted for (its principal's rights, or
                      // its source in allowed_clients)
};
inline constexpr std::uint8_t kCloseReasonCount = 25;

// What went wrong when a core reports FAILED. The core keeps ownership after FAILED; control answers with
// CLOSE.
enum class FailureKind : std::uint8_t {
  kCompletion = 1,   // a work completion with a non-success, non-flush status; status = ibv_wc_status
  kProtocol = 2,     // the peer violated the protocol; status = the protocol core's error code
  kKeepalive = 3,    // the peer stayed silent past the dead-peer timeout; status = 0
  kPeerFault = 4,    // an error completion the peer caused (dataplane::PeerFault); status = ibv_wc_status
  kBulkTimeout = 5,  // an RDMA READ/WRITE chain passed protocol.bulk_timeout_ms; status = its age in ms
  kCqError = 6,      // the core lost its CQ (ToCore kCqLost); status = 0
  kAuthDenied = 7,   // the peer's AUTH was refused, and the answer went out first; status = the
                     // protocol::auth::AuthStatus answered (1 denied, 2 connection_limit), or 0 when an ok
                     // answer could not be sent (an engine fault, counted by the send path)
  kAuthTimeout = 8,  // no AUTH within the auth timeout of ADOPT; status = 0
  kRevoked = 9,      // a new AuthTable (CONFIG kAuthTable) revoked the connection; status = kRevokedPrincipal
                     // or kRevokedUnauthenticated
};

// FAILED kRevoked statuses: the principal is gone, its tenant changed or its rights narrowed; or the table
// requires authentication and the connection was admitted without it.
inline constexpr std::uint32_t kRevokedPrincipal = 0;
inline constexpr std::uint32_t kRevokedUnauthenticated = 1;

// Runtime settings control can change on a running core. Values are plain integers so a CONFIG fits in one
// slot; anything bigger than 64 bits does not belong on this path.
enum class ConfigKey : std::uint16_t {
  kKeepaliveIntervalUs = 1,  // idle time after which a core sends a keepalive NOOP
  kPeerDeadTimeoutUs = 2,    // silence after which a core declares the peer dead (FAILED kKeepalive)
  kQuiesce = 4,        // 1 = stop starting new requests, finish in-flight ones (SIGTERM drain); 0 = resume
  kBulkTimeoutUs = 5,  // protocol.bulk_timeout_ms, in us: the deadline of every RDMA READ/WRITE chain (> 0)
  kFaultTable = 6,     // fault-injection rules (docs/faults.md): the address of an immutable
                    // dataplane::FaultTable control keeps alive until every core applied a later one; 0: none
  kAuthTable = 7,      // principals and tenants (dataplane/auth_table.hpp): the address of an immutable
                       // AuthTable control keeps alive until every core applied a later one (the core stores
                       // its generation in CoreResources::auth_applied); 0: none (every AUTH is denied,
                       // every authenticated connection revoked)
  kAuthTimeoutUs = 8,  // security.auth_timeout_ms, in us (> 0): connections adopted from now on must send
                       // AUTH within it
};

// control -> core.
enum class ToCoreOp : std::uint8_t {
  kInvalid = 0,  // zero-filled slot: never sent; receiving it is a bug and is counted, not acted on
  kAdopt = 1,    // take ownership of an established connection: QP is RTS, rx buffers already posted
  kClose = 2,    // control moved the QP to ERR: fail outstanding requests, drain flushes, then answer CLOSED.
               // Also sent for a connection the core never adopted (a half-built one whose QP already sits on
               // this core's CQ with receives posted): the core takes it only to drain, then answers CLOSED.
  kConfig = 3,  // change a runtime setting (ConfigKey, value)
  kCqLost = 4,  // the core's CQ is in error (IBV_EVENT_CQ_ERR): it reports no flushes, so no drain can end.
                // The core stops polling it, never posts to a QP again, reports FAILED kCqError for every
                // connection it owns and answers kCqLost. From then on a CLOSE means "control has destroyed
                // this connection's QP" (nothing of it can reach memory any more): the core releases
                // everything of the connection at once and answers CLOSED. Control sends that CLOSE (again,
                // if one was sent before) for every connection it placed on the core and has not seen CLOSED
                // for, each after destroying its QP.
};

// core -> control.
enum class ToControlOp : std::uint8_t {
  kInvalid = 0,  // zero-filled slot: never sent; counted as a bug on receipt
  kClosed = 1,  // the core has drained the connection and dropped every reference: control may destroy it now
  kFailed = 2,  // the core hit an error on a connection it still owns; control should answer CLOSE
  kCqLost = 3,  // answer to ToCore kCqLost: the core touches none of its QPs any more (payload: core index)
};

// One control -> core command: 16 bytes, copied into the ring slot.
struct alignas(16) ToCore {
  ToCoreOp op = ToCoreOp::kInvalid;
  std::uint8_t reason = 0;     // kClose: CloseReason
  std::uint16_t key = 0;       // kConfig: ConfigKey
  std::uint32_t reserved = 0;  // zero; keeps payload 8-byte aligned
  std::uint64_t payload = 0;   // kAdopt/kClose: ConnHandle; kConfig: value

  static ToCore adopt(ConnHandle conn) noexcept { return ToCore{ToCoreOp::kAdopt, 0, 0, 0, conn.value}; }
  static ToCore close(ConnHandle conn, CloseReason why) noexcept {
    return ToCore{ToCoreOp::kClose, static_cast<std::uint8_t>(why), 0, 0, conn.value};
  }
  static ToCore config(ConfigKey k, std::uint64_t value) noexcept {
    return ToCore{ToCoreOp::kConfig, 0, static_cast<std::uint16_t>(k), 0, value};
  }
  static ToCore cq_lost() noexcept { return ToCore{ToCoreOp::kCqLost, 0, 0, 0, 0}; }

  ConnHandle conn() const noexcept { return ConnHandle{payload}; }
  CloseReason close_reason() const noexcept { return static_cast<CloseReason>(reason); }
  ConfigKey config_key() const noexcept { return static_cast<ConfigKey>(key); }
  std::uint64_t config_value() const noexcept { return payload; }
  friend bool operator==(const ToCore&, const ToCore&) = default;
};

// One core -> control reply: 16 bytes, copied into the ring slot.
struct alignas(16) ToControl {
  ToControlOp op = ToControlOp::kInvalid;
  std::uint8_t kind = 0;      // kFailed: FailureKind
  std::uint16_t aux16 = 0;    // zero
  std::uint32_t aux32 = 0;    // kFailed: status
  std::uint64_t payload = 0;  // kClosed/kFailed: ConnHandle

  static ToControl closed(ConnHandle conn) noexcept {
    return ToControl{ToControlOp::kClosed, 0, 0, 0, conn.value};
  }
  static ToControl failed(ConnHandle conn, FailureKind k, std::uint32_t status) noexcept {
    return ToControl{ToControlOp::kFailed, static_cast<std::uint8_t>(k), 0, status, conn.value};
  }
  static ToControl cq_lost(unsigned core) noexcept { return ToControl{ToControlOp::kCqLost, 0, 0, 0, core}; }

  ConnHandle conn() const noexcept { return ConnHandle{payload}; }
  FailureKind failure_kind() const noexcept { return static_cast<FailureKind>(kind); }
  std::uint32_t status() const noexcept { return aux32; }
  friend bool operator==(const ToControl&, const ToControl&) = default;
};

// The ring copies slots with 128-bit moves (rte_ring's esize-16 path), so size and alignment are
// load-bearing.
static_assert(sizeof(ToCore) == 16 && alignof(ToCore) == 16);
static_assert(sizeof(ToControl) == 16 && alignof(ToControl) == 16);
static_assert(std::is_trivially_copyable_v<ToCore> && std::is_standard_layout_v<ToCore>);
static_assert(std::is_trivially_copyable_v<ToControl> && std::is_standard_layout_v<ToControl>);
static_assert(sizeof(ConnHandle) == sizeof(std::uint64_t) && sizeof(void*) <= sizeof(std::uint64_t));

// The reason a FAILED turns into when control closes the connection.
constexpr CloseReason close_reason_for(FailureKind k) noexcept {
  switch (k) {
    case FailureKind::kCompletion:
      return CloseReason::kCompletionError;
    case FailureKind::kProtocol:
      return CloseReason::kProtocolError;
    case FailureKind::kKeepalive:
      return CloseReason::kKeepaliveTimeout;
    case FailureKind::kPeerFault:
      return CloseReason::kPeerFault;
    case FailureKind::kBulkTimeout:
      return CloseReason::kBulkTimeout;
    case FailureKind::kCqError:
      return CloseReason::kCqError;
    case FailureKind::kAuthDenied:
      return CloseReason::kAuthDenied;
    case FailureKind::kAuthTimeout:
      return CloseReason::kAuthTimeout;
    case FailureKind::kRevoked:
      return CloseReason::kRevoked;
  }
  return CloseReason::kCompletionError;
}

constexpr std::string_view to_string(CloseReason r) noexcept {
  switch (r) {
    case CloseReason::kNone:
      return "none";
    case CloseReason::kLocal:
      return "local close";
    case CloseReason::kShutdown:
      return "shutdown";
    case CloseReason::kPeerDisconnected:
      return "peer disconnected";
    case CloseReason::kRejectedByPeer:
      return "rejected by peer";
    case CloseReason::kRejectedLocally:
      return "rejected locally";
    case CloseReason::kUnreachable:
      return "unreachable";
    case CloseReason::kAddrError:
      return "address resolution error";
    case CloseReason::kRouteError:
      return "route resolution error";
    case CloseReason::kConnectError:
      return "connect error";
    case CloseReason::kHandshakeTimeout:
      return "handshake timeout";
    case CloseReason::kSetupFailed:
      return "local setup failed";
    case CloseReason::kDeviceRemoval:
      return "device removal";
    case CloseReason::kQpFatal:
      return "qp fatal";
    case CloseReason::kDeviceFatal:
      return "device fatal";
    case CloseReason::kPortDown:
      return "port down";
    case CloseReason::kCompletionError:
      return "completion error";
    case CloseReason::kProtocolError:
      return "protocol error";
    case CloseReason::kKeepaliveTimeout:
      return "keepalive timeout";
    case CloseReason::kPeerFault:
      return "peer fault";
    case CloseReason::kBulkTimeout:
      return "bulk timeout";
    case CloseReason::kCqError:
      return "cq error";
    case CloseReason::kAuthDenied:
      return "auth denied";
    case CloseReason::kAuthTimeout:
      return "auth timeout";
    case CloseReason::kRevoked:
      return "revoked";
  }
  return "unknown";
}

}  // namespace rdmagate::dataplane

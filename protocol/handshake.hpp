#pragma once
// Connection handshake carried in rdma_cm private data: connect request (initiator), accept and
// reject (acceptor). Layouts and rules: docs/protocol.md, "Handshake".
//
// Flow:
//   initiator: body = make_connect_request(...); encode_handshake(body) -> rdma_connect
//   acceptor:  outcome = negotiate_accept(private data, ...); encode outcome.reply;
//              rdma_accept when outcome.reason == kNone, rdma_reject otherwise
//   initiator: ESTABLISHED -> complete_connect(sent body, accept private data, ...)
//              REJECTED    -> decode_handshake(data, kReject, ...) for the reason and peer params

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "protocol/errors.hpp"
#include "protocol/params.hpp"
#include "protocol/wire_constants.hpp"

namespace rdmagate::protocol {

// Which of the three bodies; on the wire so that one can never be mistaken for another.
enum class HandshakeKind : std::uint8_t {
  kRequest = 1,  // initiator -> acceptor, in the connect request
  kAccept = 2,   // acceptor -> initiator, in the accept (CM REP)
  kReject = 3,   // acceptor -> initiator, in the reject (CM REJ)
};

// Decoded form of any of the three bodies.
struct HandshakeBody {
  HandshakeKind kind = HandshakeKind::kRequest;
  std::uint8_t major = kProtocolMajor;
  std::uint8_t minor = kProtocolMinor;             // request/reject: sender's highest; accept: chosen
  std::uint16_t minor_mask = kSupportedMinorMask;  // minors the sender speaks
  std::uint8_t flags = 0;                          // kHandshakeFlag*
  ConnParams params;                               // request: offer; accept: negotiated; reject: own
  std::uint64_t src_incarnation = 0;               // sender's stamp, never zero
  std::uint64_t dst_incarnation = 0;               // request: peer stamp last seen (0: none);
                                                   // accept/reject: the requester's stamp
  RejectReason reason = RejectReason::kNone;       // reject only
  // Minor-1 extension (docs §3.8): on the wire in a request whose minor (the sender's highest) is >= 1 and
  // in an accept whose chosen minor is >= 1; zero otherwise and always in a reject.
  Timers timers{};  // request: the initiator's; accept: the negotiated keepalive, the acceptor's dead-peer
  Limits limits{};  // accept only: the acceptor's
  // Minor-2 extension of an accept (docs §3.9): the acceptor's nonce for the AUTH exchange, nonzero exactly
  // when flags has kHandshakeFlagAuth. Zero in requests and rejects.
  std::array<std::uint8_t, kGatewayNonceSize> gateway_nonce{};

  friend constexpr bool operator==(const HandshakeBody&, const HandshakeBody&) = default;
};

// Our side of a handshake.
struct LocalEndpoint {
  std::uint64_t incarnation = 0;  // process_incarnation() in production
  ConnParams params;              // what we want; an upper bound for negotiation
  // Below this: queue-size mismatch. Values under kMinCreditQueueDepth act as it (the credit rules'
  // floor), so a misconfigured endpoint cannot negotiate a depth the credit machine refuses.
  std::uint16_t min_queue_depth = kMinCreditQueueDepth;
  std::uint16_t min_fragments = 1;      // below this: fragments mismatch
  bool want_checksum = false;           // ask for (or, as acceptor, impose) CRC32C
  std::uint8_t major = kProtocolMajor;  // overridable so tests can model other builds
  std::uint16_t minor_mask = kSupportedMinorMask;
  Timers timers{};  // announced in minor-1 requests and accepts; must be timers_sane()
  Limits limits{};  // announced in minor-1 accepts
  // Acceptor only: require the AUTH exchange (docs §11). A request with no common minor >= 2 is then
  // refused kAuthRequired; an accept of minor >= 2 carries the `auth` flag and gateway_nonce, which the
  // caller draws fresh per connection request (auth::random_nonce) and must not be all zero.
  bool auth_required = false;
  std::array<std::uint8_t, kGatewayNonceSize> gateway_nonce{};
};

// Size of the encoded body of `kind` whose minor field is `minor` (a request's: the sender's highest; an
// accept's: the chosen one). Rejects carry no extension.
constexpr std::size_t handshake_size(HandshakeKind kind, std::uint8_t minor) {
  switch (kind) {
    case HandshakeKind::kRequest:
      return minor >= 1 ? kConnectRequestSizeMinor1 : kConnectRequestSize;
    case HandshakeKind::kAccept:
      return minor >= 2   ? kConnectAcceptSizeMinor2
             : minor >= 1 ? kConnectAcceptSizeMinor1
                          : kConnectAcceptSize;
    case HandshakeKind::kReject:
      break;
  }
  return kConnectRejectSize;
}

// Highest minor in a nonzero mask.
constexpr std::uint8_t highest_minor(std::uint16_t mask) {
  std::uint8_t m = 0;
  for (std::uint8_t i = 0; i <= kMaxMinor; ++i)
    if (mask & (1u << i)) m = i;
  return m;
}

// Writes exactly handshake_size(body.kind, body.minor) bytes; reserved bytes are zero. Fails only with
// kBufferTooSmall.
Encoded<HandshakeError> encode_handshake(const HandshakeBody& body, std::span<std::uint8_t> out) noexcept;

// Syntactic checks: length (the minor-0 body, then the extension its minor field calls for), magic,
// kind == expected, minor within its own mask, nonzero source stamp, known reject reason. Bytes past the
// body are ignored (IB pads private data with zeros, and later minors may append fields). Parameters and
// timers are judged by negotiation, not here.
HandshakeError decode_handshake(std::span<const std::uint8_t> in, HandshakeKind expected,
                                HandshakeBody& out) noexcept;

// Initiator: the request to send. Our parameters are clamped to the device and protocol caps;
// last_peer_incarnation is the acceptor's stamp from our previous connection (0 on first connect).
HandshakeBody make_connect_request(const LocalEndpoint& self, const ConnParams& device,
                                   std::uint64_t last_peer_incarnation) noexcept;

// Acceptor: a reject body carrying our own parameters, for reasons the engine decides itself
// (race, no resources, fatal, not allowed). peer_incarnation: the request's source stamp, or 0.
HandshakeBody make_reject(const LocalEndpoint& self, const ConnParams& device, RejectReason why,
                          std::uint64_t peer_incarnation) noexcept;

struct AcceptOutcome {
  RejectReason reason = RejectReason::kNone;   // kNone: accept with `reply`; otherwise reject with it
  HandshakeError error = HandshakeError::kOk;  // detail behind kBadPrivateData / version rejects
  HandshakeBody reply;                         // the accept or reject body to send
  Session session;                             // valid only when reason == kNone
};

// Acceptor: judge a connect request's private data and decide (see docs: "Negotiation").
AcceptOutcome negotiate_accept(std::span<const std::uint8_t> private_data, const LocalEndpoint& self,
                               const ConnParams& device) noexcept;

// Initiator: check the acceptor's reply against the request we sent and derive the session. Any
// error means the connection must be torn down.
HandshakeError complete_connect(const HandshakeBody& sent, std::span<const std::uint8_t> accept_data,
                                const LocalEndpoint& self, Session& out) noexcept;

}  // namespace rdmagate::protocol

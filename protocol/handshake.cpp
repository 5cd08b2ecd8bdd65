#include "protocol/handshake.hpp"

#include <algorithm>
#include <cstring>

#include "protocol/byte_order.hpp"

namespace rdmagate::protocol {
namespace {

// Byte offsets of the common body (docs/protocol.md, "Handshake bodies"). Offsets 0-9 are frozen
// across majors so that any build can read a peer's magic, kind and version and reject cleanly.
namespace off {
inline constexpr std::size_t kMagic = 0;          // u32
inline constexpr std::size_t kKind = 4;           // u8
inline constexpr std::size_t kMajor = 5;          // u8
inline constexpr std::size_t kMinor = 6;          // u8
inline constexpr std::size_t kFlags = 7;          // u8
inline constexpr std::size_t kMinorMask = 8;      // u16
inline constexpr std::size_t kQueueDepth = 10;    // u16
inline constexpr std::size_t kMaxMessage = 12;    // u32
inline constexpr std::size_t kMaxFragments = 16;  // u16
inline constexpr std::size_t kReserved18 = 18;    // u16, zero
inline constexpr std::size_t kMaxBulk = 20;       // u32
inline constexpr std::size_t kSrcStamp = 24;      // u64
inline constexpr std::size_t kDstStamp = 32;      // u64
inline constexpr std::size_t kReason = 40;        // u8, reject only; 41..43 reserved
// Minor-1 extension of a request (40..47) and of an accept (40..63).
inline constexpr std::size_t kKeepalive = 40;       // u32 ms
inline constexpr std::size_t kDeadPeer = 44;        // u32 ms
inline constexpr std::size_t kBulkDeadline = 48;    // u32 ms, accept only
inline constexpr std::size_t kMaxValue = 52;        // u32 bytes, accept only
inline constexpr std::size_t kChunkQueue = 56;      // u16, accept only
inline constexpr std::size_t kConnsPerSource = 58;  // u16, accept only; 60..63 reserved
// Minor-2 extension of an accept (64..95).
inline constexpr std::size_t kGatewayNonce = 64;  // 32 bytes
}  // namespace off
static_assert(off::kDstStamp + 8 == kConnectRequestSize && kConnectRequestSize == kConnectAcceptSize);
static_assert(off::kReason + 4 == kConnectRejectSize);
static_assert(off::kReserved18 + 2 == off::kMaxBulk, "reserved u16 sits between fragments and bulk size");
static_assert(off::kDeadPeer + 4 == kConnectRequestSizeMinor1);
static_assert(off::kConnsPerSource + 2 + 4 == kConnectAcceptSizeMinor1,
              "4 reserved bytes end the minor-1 accept");
static_assert(off::kGatewayNonce == kConnectAcceptSizeMinor1 &&
              off::kGatewayNonce + kGatewayNonceSize == kConnectAcceptSizeMinor2);

// Which parts of the minor-1 extension a body of `kind` with minor field `minor` carries.
constexpr bool carries_timers(HandshakeKind kind, std::uint8_t minor) {
  return kind != HandshakeKind::kReject && minor >= 1;
}
constexpr bool carries_limits(HandshakeKind kind, std::uint8_t minor) {
  return kind == HandshakeKind::kAccept && minor >= 1;
}
constexpr bool carries_nonce(HandshakeKind kind, std::uint8_t minor) {
  return kind == HandshakeKind::kAccept && minor >= 2;
}

bool all_zero(const std::array<std::uint8_t, kGatewayNonceSize>& n) {
  std::uint8_t acc = 0;
  for (const std::uint8_t b : n) acc |= b;
  return acc == 0;
}

constexpr bool minor_in_mask(std::uint8_t minor, std::uint16_t mask) {
  return minor <= kMaxMinor && (mask & (1u << minor)) != 0;
}

ConnParams own_params(const LocalEndpoint& self, const ConnParams& device) {
  return clamp(clamp(self.params, device), kParamCaps);
}

HandshakeBody base_body(const LocalEndpoint& self, HandshakeKind kind) {
  HandshakeBody b;
  b.kind = kind;
  b.major = self.major;
  b.minor = highest_minor(self.minor_mask);
  b.minor_mask = self.minor_mask;
  b.flags = self.want_checksum ? kHandshakeFlagChecksum : 0;
  b.src_incarnation = self.incarnation;
  return b;
}

HandshakeBody reject_body(const LocalEndpoint& self, const ConnParams& own, RejectReason why,
                          std::uint64_t peer_incarnation) {
  HandshakeBody b = base_body(self, HandshakeKind::kReject);
  b.params = own;
  b.dst_incarnation = peer_incarnation;
  b.reason = why;
  return b;
}

bool any_raised(const ConnParams& got, const ConnParams& offered) {
  return got.queue_depth > offered.queue_depth || got.max_message_size > offered.max_message_size ||
         got.max_fragments > offered.max_fragments || got.max_bulk_size > offered.max_bulk_size;
}

}  // namespace

Encoded<HandshakeError> encode_handshake(const HandshakeBody& b, std::span<std::uint8_t> out) noexcept {
  const std::size_t n = handshake_size(b.kind, b.minor);
  if (out.size() < n) return {0, HandshakeError::kBufferTooSmall};
  std::uint8_t* p = out.data();
  std::memset(p, 0, n);
  le::store<std::uint32_t>(p + off::kMagic, kHandshakeMagic);
  p[off::kKind] = static_cast<std::uint8_t>(b.kind);
  p[off::kMajor] = b.major;
  p[off::kMinor] = b.minor;
  p[off::kFlags] = b.flags;
  le::store<std::uint16_t>(p + off::kMinorMask, b.minor_mask);
  le::store<std::uint16_t>(p + off::kQueueDepth, b.params.queue_depth);
  le::store<std::uint32_t>(p + off::kMaxMessage, b.params.max_message_size);
  le::store<std::uint16_t>(p + off::kMaxFragments, b.params.max_fragments);
  le::store<std::uint32_t>(p + off::kMaxBulk, b.params.max_bulk_size);
  le::store<std::uint64_t>(p + off::kSrcStamp, b.src_incarnation);
  le::store<std::uint64_t>(p + off::kDstStamp, b.dst_incarnation);
  if (b.kind == HandshakeKind::kReject) p[off::kReason] = static_cast<std::uint8_t>(b.reason);
  if (carries_timers(b.kind, b.minor)) {
    le::store<std::uint32_t>(p + off::kKeepalive, b.timers.keepalive_ms);
    le::store<std::uint32_t>(p + off::kDeadPeer, b.timers.dead_peer_ms);
  }
  if (carries_limits(b.kind, b.minor)) {
    le::store<std::uint32_t>(p + off::kBulkDeadline, b.limits.bulk_deadline_ms);
    le::store<std::uint32_t>(p + off::kMaxValue, b.limits.max_value_bytes);
    le::store<std::uint16_t>(p + off::kChunkQueue, b.limits.chunk_queue);
    le::store<std::uint16_t>(p + off::kConnsPerSource, b.limits.max_conns_per_source);
  }
  if (carries_nonce(b.kind, b.minor))
    std::memcpy(p + off::kGatewayNonce, b.gateway_nonce.data(), kGatewayNonceSize);
  return {n, HandshakeError::kOk};
}

HandshakeError decode_handshake(std::span<const std::uint8_t> in, HandshakeKind expected,
                                HandshakeBody& out) noexcept {
  if (in.size() < handshake_size(expected, 0)) return HandshakeError::kTooShort;
  const std::uint8_t* p = in.data();
  if (le::load<std::uint32_t>(p + off::kMagic) != kHandshakeMagic) return HandshakeError::kBadMagic;
  if (p[off::kKind] != static_cast<std::uint8_t>(expected)) return HandshakeError::kWrongKind;
  out.kind = expected;
  out.major = p[off::kMajor];
  out.minor = p[off::kMinor];
  out.flags = p[off::kFlags];
  out.minor_mask = le::load<std::uint16_t>(p + off::kMinorMask);
  if (!minor_in_mask(out.minor, out.minor_mask)) return HandshakeError::kMinorNotInMask;
  const std::size_t n = handshake_size(expected, out.minor);
  if (in.size() < n) return HandshakeError::kTooShort;
  out.params.queue_depth = le::load<std::uint16_t>(p + off::kQueueDepth);
  out.params.max_message_size = le::load<std::uint32_t>(p + off::kMaxMessage);
  out.params.max_fragments = le::load<std::uint16_t>(p + off::kMaxFragments);
  out.params.max_bulk_size = le::load<std::uint32_t>(p + off::kMaxBulk);
  out.src_incarnation = le::load<std::uint64_t>(p + off::kSrcStamp);
  out.dst_incarnation = le::load<std::uint64_t>(p + off::kDstStamp);
  if (out.src_incarnation == 0) return HandshakeError::kZeroIncarnation;
  out.reason = RejectReason::kNone;
  if (expected == HandshakeKind::kReject) {
    const std::uint8_t r = p[off::kReason];
    if (r == 0 || r > kRejectReasonMax) return HandshakeError::kUnknownRejectReason;
    out.reason = static_cast<RejectReason>(r);
  }
  out.timers = Timers{};
  out.limits = Limits{};
  if (carries_timers(expected, out.minor)) {
    out.timers.keepalive_ms = le::load<std::uint32_t>(p + off::kKeepalive);
    out.timers.dead_peer_ms = le::load<std::uint32_t>(p + off::kDeadPeer);
  }
  if (carries_limits(expected, out.minor)) {
    out.limits.bulk_deadline_ms = le::load<std::uint32_t>(p + off::kBulkDeadline);
    out.limits.max_value_bytes = le::load<std::uint32_t>(p + off::kMaxValue);
    out.limits.chunk_queue = le::load<std::uint16_t>(p + off::kChunkQueue);
    out.limits.max_conns_per_source = le::load<std::uint16_t>(p + off::kConnsPerSource);
  }
  out.gateway_nonce = {};
  if (carries_nonce(expected, out.minor))
    std::memcpy(out.gateway_nonce.data(), p + off::kGatewayNonce, kGatewayNonceSize);
  return HandshakeError::kOk;
}

HandshakeBody make_connect_request(const LocalEndpoint& self, const ConnParams& device,
                                   std::uint64_t last_peer_incarnation) noexcept {
  HandshakeBody b = base_body(self, HandshakeKind::kRequest);
  b.params = own_params(self, device);
  b.params.max_fragments = std::min(b.params.max_fragments, fragments_fitting(b.params.max_message_size));
  b.dst_incarnation = last_peer_incarnation;
  if (b.minor >= 1) b.timers = self.timers;
  return b;
}

HandshakeBody make_reject(const LocalEndpoint& self, const ConnParams& device, RejectReason why,
                          std::uint64_t peer_incarnation) noexcept {
  return reject_body(self, own_params(self, device), why, peer_incarnation);
}

AcceptOutcome negotiate_accept(std::span<const std::uint8_t> private_data, const LocalEndpoint& self,
                               const ConnParams& device) noexcept {
  const ConnParams own = own_params(self, device);
  AcceptOutcome o;
  HandshakeBody req;
  auto reject = [&](RejectReason why, HandshakeError detail, std::uint64_t peer) {
    o.reason = why;
    o.error = detail;
    o.reply = reject_body(self, own, why, peer);
    return o;
  };

  if (const HandshakeError e = decode_handshake(private_data, HandshakeKind::kRequest, req);
      e != HandshakeError::kOk)
    return reject(RejectReason::kBadPrivateData, e, 0);
  const std::uint64_t peer = req.src_incarnation;

  const std::uint16_t common = req.minor_mask & self.minor_mask;
  if (req.major != self.major || common == 0)
    return reject(RejectReason::kIncompatibleVersion, HandshakeError::kIncompatibleVersion, peer);
  const std::uint8_t minor = highest_minor(common);
  // An initiator that cannot speak minor 2 cannot authenticate: say so rather than "incompatible version",
  // so that its operator knows what to upgrade.
  if (self.auth_required && minor < 2)
    return reject(RejectReason::kAuthRequired, HandshakeError::kIncompatibleVersion, peer);
  if (req.dst_incarnation != 0 && req.dst_incarnation != self.incarnation)
    return reject(RejectReason::kStale, HandshakeError::kStaleIncarnation, peer);
  if (!params_sane(req.params) || !timers_sane(req.timers))
    return reject(RejectReason::kBadPrivateData, HandshakeError::kBadParameter, peer);
  // Our own side is broken (zero device limit, tiny buffers, a dead-peer timeout without a shorter
  // keepalive): nothing the peer can fix.
  if (!params_sane(own) || !timers_sane(self.timers) || (self.auth_required && all_zero(self.gateway_nonce)))
    return reject(RejectReason::kFatal, HandshakeError::kBadParameter, peer);

  ConnParams p = clamp(own, req.params);
  p.max_fragments = std::min(p.max_fragments, fragments_fitting(p.max_message_size));
  if (p.queue_depth < required_queue_depth(self.min_queue_depth))
    return reject(RejectReason::kQueueSizeMismatch, HandshakeError::kBelowMinimum, peer);
  if (p.max_fragments < std::max<std::uint16_t>(self.min_fragments, 1))
    return reject(RejectReason::kFragmentsMismatch, HandshakeError::kBelowMinimum, peer);
  // The AUTH message must fit: a connection that could never authenticate is refused now, not later.
  if (self.auth_required && p.max_message_size < kAuthMaxSize)
    return reject(RejectReason::kAuthRequired, HandshakeError::kBelowMinimum, peer);

  const bool checksum = (req.flags & kHandshakeFlagChecksum) != 0 || self.want_checksum;
  HandshakeBody& a = o.reply;
  a = base_body(self, HandshakeKind::kAccept);
  a.minor = minor;
  a.flags = checksum ? kHandshakeFlagChecksum : 0;
  a.params = p;
  a.dst_incarnation = peer;
  o.session = Session{pack_version(self.major, minor), checksum, p, self.incarnation, peer};
  if (minor >= 1) {
    // A request with minor 0 in its minor field carries no timers: they stay 0, "no preference".
    a.timers = Timers{negotiated_keepalive(req.timers.keepalive_ms, self.timers.keepalive_ms),
                      self.timers.dead_peer_ms};
    a.limits = self.limits;
    o.session.keepalive_ms = a.timers.keepalive_ms;
    o.session.local_dead_peer_ms = self.timers.dead_peer_ms;
    o.session.peer_dead_peer_ms = req.timers.dead_peer_ms;
  }
  if (minor >= 2 && self.auth_required) {
    a.flags |= kHandshakeFlagAuth;
    a.gateway_nonce = self.gateway_nonce;
    o.session.auth_required = true;
    o.session.gateway_nonce = self.gateway_nonce;
  }
  return o;
}

HandshakeError complete_connect(const HandshakeBody& sent, std::span<const std::uint8_t> accept_data,
                                const LocalEndpoint& self, Session& out) noexcept {
  HandshakeBody a;
  if (const HandshakeError e = decode_handshake(accept_data, HandshakeKind::kAccept, a);
      e != HandshakeError::kOk)
    return e;
  if (a.major != sent.major || !minor_in_mask(a.minor, sent.minor_mask) ||
      a.minor != highest_minor(sent.minor_mask & a.minor_mask))
    return HandshakeError::kIncompatibleVersion;
  const bool checksum = (a.flags & kHandshakeFlagChecksum) != 0;
  if ((a.flags & ~handshake_flags_known(a.minor)) != 0 ||
      ((sent.flags & kHandshakeFlagChecksum) != 0 && !checksum))
    return HandshakeError::kBadFlags;
  // The nonce is what makes every AUTH unique to this connection: required with the flag, zero without it.
  const bool auth = (a.flags & kHandshakeFlagAuth) != 0;
  if (auth == all_zero(a.gateway_nonce)) return HandshakeError::kBadParameter;
  if (a.dst_incarnation != sent.src_incarnation ||
      (sent.dst_incarnation != 0 && a.src_incarnation != sent.dst_incarnation))
    return HandshakeError::kStaleIncarnation;
  if (!params_sane(a.params) || a.params.max_fragments > fragments_fitting(a.params.max_message_size) ||
      !timers_sane(a.timers))
    return HandshakeError::kBadParameter;
  // The negotiated keepalive is the stricter of the two intervals: above ours (or none while we asked
  // for one) would let the acceptor stay silent longer than we promised ourselves to wait.
  // A minor-0 accept (an older acceptor) carries no timers: each side then keeps its own.
  const std::uint32_t asked = a.minor >= 1 ? sent.timers.keepalive_ms : 0;
  if (any_raised(a.params, sent.params) ||
      (asked != 0 && (a.timers.keepalive_ms == 0 || a.timers.keepalive_ms > asked)))
    return HandshakeError::kParameterRaised;
  // An acceptor that skipped the depth floor (an older build) must not get us to run the credit
  // machine outside its proof.
  if (a.params.queue_depth < required_queue_depth(self.min_queue_depth) ||
      a.params.max_fragments < self.min_fragments)
    return HandshakeError::kBelowMinimum;
  out = Session{pack_version(a.major, a.minor), checksum, a.params, sent.src_incarnation, a.src_incarnation};
  if (a.minor >= 1) {
    out.keepalive_ms = a.timers.keepalive_ms;
    out.local_dead_peer_ms = sent.timers.dead_peer_ms;
    out.peer_dead_peer_ms = a.timers.dead_peer_ms;
    out.peer_limits = a.limits;
  }
  out.auth_required = auth;
  out.gateway_nonce = a.gateway_nonce;
  return HandshakeError::kOk;
}

}  // namespace rdmagate::protocol

// libFuzzer target: the private-data decoders and both halves of the negotiation. The same bytes
// are fed as a connect request (acceptor side), an accept (initiator side) and a reject.
// Invariants: decode -> encode -> decode is the identity; an accepted request yields parameters
// no larger than any of the three bounds, and the accept it produces completes on the initiator
// with the mirror-image session; a refused one yields a well-formed reject with our parameters.
// Minor 1: the negotiated keepalive is the stricter announced interval, both sides learn the same
// timers, the initiator the acceptor's limits; a minor-0 connection carries none.
// Minor 2: an acceptor requiring authentication accepts only at minor >= 2 with a message size that carries
// AUTH, with the auth flag and its nonce, which the initiator learns; refuses older initiators auth_required;
// an acceptor that does not require it never sets the flag and sends a zero nonce.

#include <array>
#include <cstring>
#include <memory>

#include "fuzz_common.hpp"

using namespace rdmagate::fuzz;

namespace {

std::array<std::uint8_t, kMaxHandshakeSize> encode_or_die(const HandshakeBody& b, std::size_t& n) {
  std::array<std::uint8_t, kMaxHandshakeSize> out{};
  const Encoded<HandshakeError> e = encode_handshake(b, out);
  RDMAGATE_FUZZ_CHECK(e.ok() && e.size == handshake_size(b.kind, b.minor));
  n = e.size;
  return out;
}

void check_round_trip(const HandshakeBody& b) {
  std::size_t n = 0;
  const auto bytes = encode_or_die(b, n);
  HandshakeBody again;
  RDMAGATE_FUZZ_CHECK(decode_handshake({bytes.data(), n}, b.kind, again) == HandshakeError::kOk);
  RDMAGATE_FUZZ_CHECK(again == b);
}

bool zero(const std::array<std::uint8_t, kGatewayNonceSize>& n) {
  for (const std::uint8_t b : n)
    if (b != 0) return false;
  return true;
}

bool le_all(const ConnParams& a, const ConnParams& b) {
  return a.queue_depth <= b.queue_depth && a.max_message_size <= b.max_message_size &&
         a.max_fragments <= b.max_fragments && a.max_bulk_size <= b.max_bulk_size;
}

void acceptor_side(std::span<const std::uint8_t> pd, std::uint8_t sel) {
  const LocalEndpoint self = acceptor(sel);
  const ConnParams own = clamp(clamp(self.params, device(sel)), kParamCaps);
  const AcceptOutcome o = negotiate_accept(pd, self, device(sel));
  HandshakeBody req;
  const HandshakeError derr = decode_handshake(pd, HandshakeKind::kRequest, req);
  if (derr == HandshakeError::kOk)
    check_round_trip(req);
  else
    RDMAGATE_FUZZ_CHECK(o.reason == RejectReason::kBadPrivateData && o.error == derr);

  if (o.reason == RejectReason::kAuthRequired) RDMAGATE_FUZZ_CHECK(self.auth_required);
  if (o.reason != RejectReason::kNone) {
    RDMAGATE_FUZZ_CHECK(o.reply.kind == HandshakeKind::kReject && o.reply.reason == o.reason);
    RDMAGATE_FUZZ_CHECK(zero(o.reply.gateway_nonce) && o.reply.flags == (self.want_checksum ? 1 : 0));
    RDMAGATE_FUZZ_CHECK(o.reply.params == own && o.reply.src_incarnation == self.incarnation);
    check_round_trip(o.reply);
    return;
  }
  RDMAGATE_FUZZ_CHECK(derr == HandshakeError::kOk && o.error == HandshakeError::kOk);
  const ConnParams& p = o.session.params;
  RDMAGATE_FUZZ_CHECK(params_sane(p) && le_all(p, own) && le_all(p, req.params) && le_all(p, kParamCaps));
  RDMAGATE_FUZZ_CHECK(p.max_fragments <= fragments_fitting(p.max_message_size));
  RDMAGATE_FUZZ_CHECK(p.queue_depth >= self.min_queue_depth && p.max_fragments >= self.min_fragments);
  RDMAGATE_FUZZ_CHECK(p.queue_depth >= kMinCreditQueueDepth);  // the credit machine's floor
  RDMAGATE_FUZZ_CHECK(req.major == self.major && (req.minor_mask & self.minor_mask) != 0);
  RDMAGATE_FUZZ_CHECK(req.dst_incarnation == 0 || req.dst_incarnation == self.incarnation);
  RDMAGATE_FUZZ_CHECK(o.session.local_incarnation == self.incarnation &&
                      o.session.peer_incarnation == req.src_incarnation);
  RDMAGATE_FUZZ_CHECK(o.reply.kind == HandshakeKind::kAccept && o.reply.params == p);
  check_round_trip(o.reply);
  const bool auth = (o.reply.flags & kHandshakeFlagAuth) != 0;
  RDMAGATE_FUZZ_CHECK(auth == self.auth_required && o.session.auth_required == auth);
  RDMAGATE_FUZZ_CHECK(auth ? o.reply.gateway_nonce == self.gateway_nonce : zero(o.reply.gateway_nonce));
  RDMAGATE_FUZZ_CHECK(o.session.gateway_nonce == o.reply.gateway_nonce);
  if (auth) RDMAGATE_FUZZ_CHECK(o.reply.minor >= 2 && p.max_message_size >= kAuthMaxSize);
  RDMAGATE_FUZZ_CHECK(timers_sane(req.timers) && timers_sane(o.reply.timers));
  if (o.reply.minor >= 1) {
    RDMAGATE_FUZZ_CHECK(o.session.keepalive_ms ==
                        negotiated_keepalive(req.timers.keepalive_ms, self.timers.keepalive_ms));
    RDMAGATE_FUZZ_CHECK(o.reply.timers == (Timers{o.session.keepalive_ms, self.timers.dead_peer_ms}));
    RDMAGATE_FUZZ_CHECK(o.reply.limits == self.limits &&
                        o.session.peer_dead_peer_ms == req.timers.dead_peer_ms);
  } else {
    RDMAGATE_FUZZ_CHECK(o.reply.timers == Timers{} && o.reply.limits == Limits{});
    RDMAGATE_FUZZ_CHECK(o.session.keepalive_ms == 0 && o.session.local_dead_peer_ms == 0);
  }

  // The initiator that sent this request completes with the mirror image of our session.
  std::size_t n = 0;
  const auto reply = encode_or_die(o.reply, n);
  LocalEndpoint ini;
  ini.incarnation = req.src_incarnation;
  Session s;
  RDMAGATE_FUZZ_CHECK(complete_connect(req, {reply.data(), n}, ini, s) == HandshakeError::kOk);
  RDMAGATE_FUZZ_CHECK(s.version == o.session.version && s.checksum == o.session.checksum && s.params == p);
  RDMAGATE_FUZZ_CHECK(s.local_incarnation == o.session.peer_incarnation &&
                      s.peer_incarnation == o.session.local_incarnation);
  RDMAGATE_FUZZ_CHECK(s.keepalive_ms == o.session.keepalive_ms &&
                      s.local_dead_peer_ms == o.session.peer_dead_peer_ms &&
                      s.peer_dead_peer_ms == o.session.local_dead_peer_ms);
  RDMAGATE_FUZZ_CHECK(s.peer_limits == o.reply.limits);
  RDMAGATE_FUZZ_CHECK(s.auth_required == o.session.auth_required && s.gateway_nonce == o.session.gateway_nonce);
}

void initiator_side(std::span<const std::uint8_t> pd, std::uint8_t sel) {
  const LocalEndpoint self = initiator(sel);
  const HandshakeBody sent = initiator_request(sel);
  Session s;
  if (complete_connect(sent, pd, self, s) != HandshakeError::kOk) return;
  RDMAGATE_FUZZ_CHECK(params_sane(s.params) && le_all(s.params, sent.params));
  RDMAGATE_FUZZ_CHECK(s.params.queue_depth >= required_queue_depth(self.min_queue_depth));
  RDMAGATE_FUZZ_CHECK(s.params.max_fragments <= fragments_fitting(s.params.max_message_size));
  RDMAGATE_FUZZ_CHECK(s.local_incarnation == self.incarnation && s.peer_incarnation != 0);
  RDMAGATE_FUZZ_CHECK(sent.dst_incarnation == 0 || s.peer_incarnation == sent.dst_incarnation);
  RDMAGATE_FUZZ_CHECK(!self.want_checksum || s.checksum);
  // Whatever the accept said, we never end up quieter than we asked, nor with a peer that calls us dead
  // before its own keepalive.
  if (s.version != pack_version(self.major, 0) && sent.timers.keepalive_ms != 0)
    RDMAGATE_FUZZ_CHECK(s.keepalive_ms != 0 && s.keepalive_ms <= sent.timers.keepalive_ms);
  RDMAGATE_FUZZ_CHECK(timers_sane(Timers{s.keepalive_ms, s.peer_dead_peer_ms}));
  // Authentication only from minor 2, and then always with a nonce; without it, no nonce.
  RDMAGATE_FUZZ_CHECK(s.auth_required != zero(s.gateway_nonce));
  if (s.auth_required) RDMAGATE_FUZZ_CHECK((s.version & 0x0f) >= 2);
}

void reject_side(std::span<const std::uint8_t> pd) {
  HandshakeBody rej;
  if (decode_handshake(pd, HandshakeKind::kReject, rej) != HandshakeError::kOk) return;
  RDMAGATE_FUZZ_CHECK(rej.reason != RejectReason::kNone &&
                      static_cast<std::uint8_t>(rej.reason) <= kRejectReasonMax);
  check_round_trip(rej);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t sel = data[0];
  const std::size_t n = size - 1;
  // An exact-size heap copy: any read past the private data is an ASan report.
  std::unique_ptr<std::uint8_t[]> pd(new std::uint8_t[n ? n : 1]);
  if (n) std::memcpy(pd.get(), data + 1, n);
  const std::span<const std::uint8_t> bytes(pd.get(), n);
  acceptor_side(bytes, sel);
  initiator_side(bytes, sel);
  reject_side(bytes);
  return 0;
}

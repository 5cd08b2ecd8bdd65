#include "protocol/handshake.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "protocol/byte_order.hpp"
#include "protocol/credit_machine.hpp"
#include "protocol/message.hpp"

namespace rdmagate::protocol {
namespace {

constexpr ConnParams kDevice{1024, 1u << 16, 16, 0xffffffffu};
constexpr std::uint64_t kInitiatorStamp = 0x1111111111111111ull;
constexpr std::uint64_t kAcceptorStamp = 0x2222222222222222ull;

LocalEndpoint initiator() {
  LocalEndpoint e;
  e.incarnation = kInitiatorStamp;
  e.params = ConnParams{64, 4096, 8, 1u << 20};
  return e;
}

LocalEndpoint acceptor() {
  LocalEndpoint e;
  e.incarnation = kAcceptorStamp;
  e.params = ConnParams{128, 2048, 16, 1u << 22};
  return e;
}

std::vector<std::uint8_t> encode(const HandshakeBody& b) {
  std::vector<std::uint8_t> v(kMaxHandshakeSize);
  const auto r = encode_handshake(b, v);
  EXPECT_TRUE(r.ok());
  v.resize(r.size);
  return v;
}

HandshakeBody request_body() {
  return make_connect_request(initiator(), kDevice, 0);
}

AcceptOutcome accept_request(const HandshakeBody& req, const LocalEndpoint& self = acceptor(),
                             const ConnParams& device = kDevice) {
  const auto bytes = encode(req);
  return negotiate_accept(bytes, self, device);
}

// ---- sizes and layout -------------------------------------------------------------------------

TEST(HandshakeLayout, FitsRdmaCmPrivateDataLimits) {
  EXPECT_EQ(kCmConnectRequestPrivateDataMax, 56u);
  EXPECT_EQ(kCmAcceptPrivateDataMax, 196u);
  EXPECT_EQ(kCmRejectPrivateDataMax, 148u);
  for (std::uint8_t minor = 0; minor <= kMaxMinor; ++minor) {
    EXPECT_LE(handshake_size(HandshakeKind::kRequest, minor), kCmConnectRequestPrivateDataMax);
    EXPECT_LE(handshake_size(HandshakeKind::kAccept, minor), kCmAcceptPrivateDataMax);
    EXPECT_LE(handshake_size(HandshakeKind::kReject, minor), kCmRejectPrivateDataMax);
  }
  EXPECT_EQ(encode(request_body()).size(), 48u);                        // minor 1: + keepalive, dead-peer
  EXPECT_EQ(encode(accept_request(request_body()).reply).size(), 96u);  // minor 2: + gateway nonce
  LocalEndpoint v11 = initiator();
  v11.minor_mask = 0b11;
  EXPECT_EQ(encode(make_connect_request(v11, kDevice, 0)).size(), 48u);
  EXPECT_EQ(encode(accept_request(make_connect_request(v11, kDevice, 0)).reply).size(), 64u);
  EXPECT_EQ(encode(make_reject(acceptor(), kDevice, RejectReason::kRace, 1)).size(), 44u);
  LocalEndpoint old = initiator();
  old.minor_mask = 1;
  EXPECT_EQ(encode(make_connect_request(old, kDevice, 0)).size(), 40u);
  EXPECT_EQ(encode(accept_request(make_connect_request(old, kDevice, 0)).reply).size(), 40u);
}

// Pins the minor-1 extensions (docs/protocol.md §3.8): request bytes 40..47, accept bytes 40..63.
TEST(HandshakeLayout, GoldenMinor1RequestAndAcceptBytes) {
  HandshakeBody b;
  b.kind = HandshakeKind::kRequest;
  b.minor = 1;
  b.minor_mask = 0x0003;
  b.params = ConnParams{0x0102, 0x03040506, 0x0708, 0x090a0b0c};
  b.src_incarnation = 0x1122334455667788ull;
  b.timers = Timers{0x11223344, 0x55667788};
  const std::vector<std::uint8_t> head = {
      'R',  'G',  'H',  'S',  0x01, 0x01, 0x01, 0x00,   // magic, kind, major, minor, flags
      0x03, 0x00, 0x02, 0x01, 0x06, 0x05, 0x04, 0x03,   // mask, depth, max message
      0x08, 0x07, 0x00, 0x00, 0x0c, 0x0b, 0x0a, 0x09,   // fragments, reserved, max bulk
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,   // src stamp
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};  // dst stamp
  std::vector<std::uint8_t> want = head;
  want.insert(want.end(), {0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55});  // keepalive, dead-peer
  EXPECT_EQ(encode(b), want);
  HandshakeBody d;
  ASSERT_EQ(decode_handshake(want, HandshakeKind::kRequest, d), HandshakeError::kOk);
  EXPECT_EQ(d, b);

  b.kind = HandshakeKind::kAccept;
  b.limits = Limits{0xa1a2a3a4, 0xb1b2b3b4, 0xc1c2, 0xd1d2};
  want[4] = 0x02;
  want.insert(want.end(),
              {0xa4, 0xa3, 0xa2, 0xa1, 0xb4, 0xb3, 0xb2, 0xb1,    // bulk deadline, max value
               0xc2, 0xc1, 0xd2, 0xd1, 0x00, 0x00, 0x00, 0x00});  // chunk queue, per source, reserved
  EXPECT_EQ(encode(b), want);
  ASSERT_EQ(decode_handshake(want, HandshakeKind::kAccept, d), HandshakeError::kOk);
  EXPECT_EQ(d, b);
  // The same accept with minor 0 is the 40-byte body: the extension's bytes are neither sent nor read.
  b.minor = 0;
  want[6] = 0;
  EXPECT_EQ(encode(b), std::vector<std::uint8_t>(want.begin(), want.begin() + 40));
  ASSERT_EQ(decode_handshake(want, HandshakeKind::kAccept, d), HandshakeError::kOk);
  EXPECT_EQ(d.timers, Timers{});
  EXPECT_EQ(d.limits, Limits{});
}

// Pins the byte layout documented in docs/protocol.md.
TEST(HandshakeLayout, GoldenRejectBytes) {
  HandshakeBody b;
  b.kind = HandshakeKind::kReject;
  b.major = 1;
  b.minor = 2;
  b.minor_mask = 0x0007;
  b.flags = kHandshakeFlagChecksum;
  b.params = ConnParams{0x0102, 0x03040506, 0x0708, 0x090a0b0c};
  b.src_incarnation = 0x1122334455667788ull;
  b.dst_incarnation = 0x99aabbccddeeff00ull;
  b.reason = RejectReason::kQueueSizeMismatch;
  const std::vector<std::uint8_t> want = {
      'R',  'G',  'H',  'S',  0x03, 0x01, 0x02, 0x01,  // magic, kind, major, minor, flags
      0x07, 0x00, 0x02, 0x01, 0x06, 0x05, 0x04, 0x03,  // mask, depth, max message
      0x08, 0x07, 0x00, 0x00, 0x0c, 0x0b, 0x0a, 0x09,  // fragments, reserved, max bulk
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // src stamp
      0x00, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99,  // dst stamp
      0x07, 0x00, 0x00, 0x00};                         // reason, reserved
  EXPECT_EQ(encode(b), want);
  HandshakeBody d;
  ASSERT_EQ(decode_handshake(want, HandshakeKind::kReject, d), HandshakeError::kOk);
  EXPECT_EQ(d, b);
}

// ---- encode / decode --------------------------------------------------------------------------

TEST(HandshakeCodec, RoundTripsEveryKind) {
  const HandshakeBody req = make_connect_request(initiator(), kDevice, 0x77);
  HandshakeBody d;
  ASSERT_EQ(decode_handshake(encode(req), HandshakeKind::kRequest, d), HandshakeError::kOk);
  EXPECT_EQ(d, req);

  const AcceptOutcome o = accept_request(req);
  ASSERT_EQ(o.reason, RejectReason::kStale);  // 0x77 is not the acceptor's stamp
  ASSERT_EQ(decode_handshake(encode(o.reply), HandshakeKind::kReject, d), HandshakeError::kOk);
  EXPECT_EQ(d, o.reply);

  const AcceptOutcome ok = accept_request(request_body());
  ASSERT_EQ(ok.reason, RejectReason::kNone);
  ASSERT_EQ(decode_handshake(encode(ok.reply), HandshakeKind::kAccept, d), HandshakeError::kOk);
  EXPECT_EQ(d, ok.reply);
}

TEST(HandshakeCodec, EveryRejectReasonRoundTrips) {
  for (std::uint8_t r = 1; r <= kRejectReasonMax; ++r) {
    const auto why = static_cast<RejectReason>(r);
    const HandshakeBody b = make_reject(acceptor(), kDevice, why, kInitiatorStamp);
    HandshakeBody d;
    ASSERT_EQ(decode_handshake(encode(b), HandshakeKind::kReject, d), HandshakeError::kOk) << to_string(why);
    EXPECT_EQ(d.reason, why);
    // A reject carries the rejecter's own parameters so the initiator can retry with them.
    EXPECT_EQ(d.params, clamp(acceptor().params, kDevice));
    EXPECT_EQ(d.src_incarnation, kAcceptorStamp);
    EXPECT_EQ(d.dst_incarnation, kInitiatorStamp);
    EXPECT_EQ(d.minor_mask, kSupportedMinorMask);
  }
}

// Like fabtests cm_data: every length up to the CM limit; short ones fail cleanly, padded ones work.
TEST(HandshakeCodec, EveryPrivateDataLength) {
  std::vector<std::uint8_t> bytes = encode(request_body());
  bytes.resize(kCmConnectRequestPrivateDataMax, 0);
  for (std::size_t n = 0; n <= bytes.size(); ++n) {
    HandshakeBody d;
    const HandshakeError e = decode_handshake({bytes.data(), n}, HandshakeKind::kRequest, d);
    EXPECT_EQ(e, n < kConnectRequestSizeMinor1 ? HandshakeError::kTooShort : HandshakeError::kOk) << n;
  }
  std::vector<std::uint8_t> rej = encode(make_reject(acceptor(), kDevice, RejectReason::kFatal, 0));
  HandshakeBody d;
  EXPECT_EQ(decode_handshake({rej.data(), 43}, HandshakeKind::kReject, d), HandshakeError::kTooShort);
  rej.resize(kCmRejectPrivateDataMax, 0xab);  // trailing bytes are ignored, whatever they hold
  EXPECT_EQ(decode_handshake(rej, HandshakeKind::kReject, d), HandshakeError::kOk);
}

TEST(HandshakeCodec, EncodeBufferTooSmall) {
  std::array<std::uint8_t, 39> small{};
  EXPECT_EQ(encode_handshake(request_body(), small).error, HandshakeError::kBufferTooSmall);
  std::array<std::uint8_t, 43> small_rej{};
  const auto r = encode_handshake(make_reject(acceptor(), kDevice, RejectReason::kRace, 0), small_rej);
  EXPECT_EQ(r.error, HandshakeError::kBufferTooSmall);
  EXPECT_EQ(r.size, 0u);
}

TEST(HandshakeCodec, DecodeErrors) {
  const std::vector<std::uint8_t> good = encode(request_body());
  HandshakeBody d;
  auto with = [&](std::size_t at, std::uint8_t v) {
    auto b = good;
    b[at] = v;
    return b;
  };
  EXPECT_EQ(decode_handshake(with(0, 'X'), HandshakeKind::kRequest, d), HandshakeError::kBadMagic);
  EXPECT_EQ(decode_handshake(good, HandshakeKind::kAccept, d), HandshakeError::kWrongKind);
  EXPECT_EQ(decode_handshake(with(4, 9), HandshakeKind::kRequest, d), HandshakeError::kWrongKind);
  EXPECT_EQ(decode_handshake(with(6, 3), HandshakeKind::kRequest, d), HandshakeError::kMinorNotInMask);
  EXPECT_EQ(decode_handshake(with(6, 16), HandshakeKind::kRequest, d), HandshakeError::kMinorNotInMask);
  auto zero_mask = with(8, 0);
  EXPECT_EQ(decode_handshake(zero_mask, HandshakeKind::kRequest, d), HandshakeError::kMinorNotInMask);
  auto zero_src = good;
  le::store<std::uint64_t>(zero_src.data() + 24, 0);
  EXPECT_EQ(decode_handshake(zero_src, HandshakeKind::kRequest, d), HandshakeError::kZeroIncarnation);

  auto rej = encode(make_reject(acceptor(), kDevice, RejectReason::kRace, 0));
  rej[40] = 0;
  EXPECT_EQ(decode_handshake(rej, HandshakeKind::kReject, d), HandshakeError::kUnknownRejectReason);
  rej[40] = kRejectReasonMax + 1;
  EXPECT_EQ(decode_handshake(rej, HandshakeKind::kReject, d), HandshakeError::kUnknownRejectReason);
}

// The extension's size follows the minor field, not the bytes received: IB pads private data with zeros,
// so a minor-0 body arrives as long as a minor-1 one, and a minor-1 body cut to 40 bytes is short.
TEST(HandshakeCodec, ExtensionPresenceFollowsTheMinorField) {
  const auto req = encode(request_body());
  HandshakeBody d;
  EXPECT_EQ(decode_handshake({req.data(), 40}, HandshakeKind::kRequest, d), HandshakeError::kTooShort);
  EXPECT_EQ(decode_handshake({req.data(), 47}, HandshakeKind::kRequest, d), HandshakeError::kTooShort);
  const auto acc = encode(accept_request(request_body()).reply);
  EXPECT_EQ(decode_handshake({acc.data(), 40}, HandshakeKind::kAccept, d), HandshakeError::kTooShort);
  EXPECT_EQ(decode_handshake({acc.data(), 63}, HandshakeKind::kAccept, d), HandshakeError::kTooShort);
  EXPECT_EQ(decode_handshake(acc, HandshakeKind::kAccept, d), HandshakeError::kOk);

  LocalEndpoint old = initiator();
  old.minor_mask = 1;
  old.timers = Timers{500, 4000};
  auto padded = encode(make_connect_request(old, kDevice, 0));
  padded.resize(kCmConnectRequestPrivateDataMax, 0xee);  // whatever follows a minor-0 body is not timers
  ASSERT_EQ(decode_handshake(padded, HandshakeKind::kRequest, d), HandshakeError::kOk);
  EXPECT_EQ(d.timers, Timers{});
}

// Reserved bytes are sent as zero and ignored on receipt (room for later minors).
TEST(HandshakeCodec, ReservedBytesIgnored) {
  auto b = encode(request_body());
  b[18] = 0xff;
  b[19] = 0xff;
  HandshakeBody d;
  ASSERT_EQ(decode_handshake(b, HandshakeKind::kRequest, d), HandshakeError::kOk);
  EXPECT_EQ(d, request_body());
}

// ---- negotiation (acceptor) --------------------------------------------------------------------

TEST(Negotiate, ClampsEveryParameterToMinOfOwnPeerDevice) {
  LocalEndpoint self = acceptor();
  self.params = ConnParams{100, 3000, 10, 5000};
  struct Case {
    ConnParams peer, device, want;
  };
  const Case cases[] = {
      // own smallest
      {{200, 4000, 12, 6000}, {300, 5000, 14, 7000}, {100, 3000, 10, 5000}},
      // peer smallest
      {{50, 1000, 5, 2000}, {300, 5000, 14, 7000}, {50, 1000, 5, 2000}},
      // device smallest
      {{200, 4000, 12, 6000}, {20, 500, 3, 1000}, {20, 500, 3, 1000}},
      // mixed
      {{90, 4000, 2, 6000}, {300, 2500, 14, 4500}, {90, 2500, 2, 4500}},
  };
  for (const Case& c : cases) {
    HandshakeBody req = request_body();
    req.params = c.peer;
    const AcceptOutcome o = accept_request(req, self, c.device);
    ASSERT_EQ(o.reason, RejectReason::kNone) << to_string(o.error);
    EXPECT_EQ(o.reply.params, c.want);
    EXPECT_EQ(o.session.params, c.want);
  }
}

TEST(Negotiate, ProtocolCapsApplyOnTopOfOffers) {
  LocalEndpoint self = acceptor();
  self.params = ConnParams{0xffff, 0xffffffffu, 0xffff, 0xffffffffu};
  HandshakeBody req = request_body();
  req.params = self.params;
  const AcceptOutcome o = accept_request(req, self, self.params);
  ASSERT_EQ(o.reason, RejectReason::kNone);
  EXPECT_EQ(o.session.params, kParamCaps);
  EXPECT_EQ(o.session.params.max_fragments, kMaxFragments);
}

TEST(Negotiate, FragmentsClampedToFitMessageSize) {
  LocalEndpoint self = acceptor();
  self.params.max_message_size = 100;  // (100 - 44) / 16 = 3 fragments fit
  HandshakeBody req = request_body();
  req.params.max_fragments = 16;
  const AcceptOutcome o = accept_request(req, self);
  ASSERT_EQ(o.reason, RejectReason::kNone);
  EXPECT_EQ(o.session.params.max_fragments, 3);
  EXPECT_EQ(fragments_fitting(100), 3);
}

TEST(Negotiate, HighestCommonMinorWins) {
  LocalEndpoint self = acceptor();
  self.minor_mask = 0b0111;  // speaks 0, 1, 2
  HandshakeBody req = request_body();
  req.minor_mask = 0b1011;  // speaks 0, 1, 3
  req.minor = 3;
  const AcceptOutcome o = accept_request(req, self);
  ASSERT_EQ(o.reason, RejectReason::kNone);
  EXPECT_EQ(o.reply.minor, 1);
  EXPECT_EQ(o.reply.minor_mask, 0b0111);
  EXPECT_EQ(o.session.version, pack_version(1, 1));
}

TEST(Negotiate, RejectsMajorMismatchAsIncompatible) {
  HandshakeBody req = request_body();
  req.major = 2;
  const AcceptOutcome o = accept_request(req);
  EXPECT_EQ(o.reason, RejectReason::kIncompatibleVersion);
  EXPECT_EQ(o.error, HandshakeError::kIncompatibleVersion);
  EXPECT_EQ(o.reply.kind, HandshakeKind::kReject);
  EXPECT_EQ(o.reply.major, kProtocolMajor);  // tells the peer what we speak
  EXPECT_EQ(o.reply.dst_incarnation, kInitiatorStamp);
}

TEST(Negotiate, RejectsNoCommonMinorAsIncompatible) {
  HandshakeBody req = request_body();
  req.minor_mask = 0b11000;
  req.minor = 4;
  EXPECT_EQ(accept_request(req).reason, RejectReason::kIncompatibleVersion);
}

TEST(Negotiate, RejectsStaleDestinationStamp) {
  const HandshakeBody req = make_connect_request(initiator(), kDevice, kAcceptorStamp + 1);
  const AcceptOutcome o = accept_request(req);
  EXPECT_EQ(o.reason, RejectReason::kStale);
  EXPECT_EQ(o.error, HandshakeError::kStaleIncarnation);
  // A reconnect naming our current stamp, or a first connect naming none, is fine.
  EXPECT_EQ(accept_request(make_connect_request(initiator(), kDevice, kAcceptorStamp)).reason,
            RejectReason::kNone);
  EXPECT_EQ(accept_request(make_connect_request(initiator(), kDevice, 0)).reason, RejectReason::kNone);
}

TEST(Negotiate, RejectsZeroOrNonsenseParametersAsBadPrivateData) {
  const auto bad = [](auto mutate) {
    HandshakeBody req = request_body();
    mutate(req.params);
    const AcceptOutcome o = accept_request(req);
    EXPECT_EQ(o.error, HandshakeError::kBadParameter);
    return o.reason;
  };
  EXPECT_EQ(bad([](ConnParams& p) { p.queue_depth = 0; }), RejectReason::kBadPrivateData);
  EXPECT_EQ(bad([](ConnParams& p) { p.max_message_size = 0; }), RejectReason::kBadPrivateData);
  EXPECT_EQ(bad([](ConnParams& p) { p.max_message_size = kMinMessageSize - 1; }),
            RejectReason::kBadPrivateData);
  EXPECT_EQ(bad([](ConnParams& p) { p.max_fragments = 0; }), RejectReason::kBadPrivateData);
  EXPECT_EQ(bad([](ConnParams& p) { p.max_bulk_size = 0; }), RejectReason::kBadPrivateData);
  HandshakeBody req = request_body();
  req.params.max_message_size = kMinMessageSize;  // the smallest sane value is accepted
  EXPECT_EQ(accept_request(req).reason, RejectReason::kNone);
}

TEST(Negotiate, RejectsUndecodablePrivateDataAsBadPrivateData) {
  std::vector<std::uint8_t> bytes = encode(request_body());
  bytes[1] ^= 0xff;
  AcceptOutcome o = negotiate_accept(bytes, acceptor(), kDevice);
  EXPECT_EQ(o.reason, RejectReason::kBadPrivateData);
  EXPECT_EQ(o.error, HandshakeError::kBadMagic);
  EXPECT_EQ(o.reply.dst_incarnation, 0u);  // we could not learn who asked
  EXPECT_EQ(o.reply.params, clamp(acceptor().params, kDevice));
  o = negotiate_accept({}, acceptor(), kDevice);
  EXPECT_EQ(o.reason, RejectReason::kBadPrivateData);
  EXPECT_EQ(o.error, HandshakeError::kTooShort);
}

TEST(Negotiate, RejectsQueueSizeBelowOurMinimum) {
  LocalEndpoint self = acceptor();
  self.min_queue_depth = 16;
  HandshakeBody req = request_body();
  req.params.queue_depth = 15;
  AcceptOutcome o = accept_request(req, self);
  EXPECT_EQ(o.reason, RejectReason::kQueueSizeMismatch);
  EXPECT_EQ(o.reply.params.queue_depth, 128);  // our own, so the peer can retry with it
  req.params.queue_depth = 16;
  EXPECT_EQ(accept_request(req, self).reason, RejectReason::kNone);
}

// The credit rules are proven only from depth 4 (docs §5.1): a sane but smaller depth is a
// queue-size mismatch, not bad private data, so the peer knows to offer more.
TEST(Negotiate, RejectsDepthBelowCreditFloorAsQueueSizeMismatch) {
  static_assert(kMinCreditQueueDepth == 4, "the tests below name the boundary explicitly");
  EXPECT_EQ(LocalEndpoint{}.min_queue_depth, kMinCreditQueueDepth);
  HandshakeBody req = request_body();
  for (const std::uint16_t depth : {1, 2, 3}) {
    req.params.queue_depth = depth;
    const AcceptOutcome o = accept_request(req);
    EXPECT_EQ(o.reason, RejectReason::kQueueSizeMismatch) << depth;
    EXPECT_EQ(o.error, HandshakeError::kBelowMinimum) << depth;
    EXPECT_EQ(o.reply.kind, HandshakeKind::kReject);
    EXPECT_EQ(o.reply.params.queue_depth, 128);  // our own, so the peer can retry with it
  }
  req.params.queue_depth = 4;
  const AcceptOutcome o = accept_request(req);
  EXPECT_EQ(o.reason, RejectReason::kNone);
  EXPECT_EQ(o.session.params.queue_depth, 4);
}

// Configuring a lower minimum does not lower the floor; neither does a shallow device.
TEST(Negotiate, FloorHoldsWhateverTheEndpointOrDeviceSays) {
  LocalEndpoint self = acceptor();
  self.min_queue_depth = 1;
  HandshakeBody req = request_body();
  req.params.queue_depth = 3;
  EXPECT_EQ(accept_request(req, self).reason, RejectReason::kQueueSizeMismatch);
  ConnParams device = kDevice;
  device.queue_depth = 3;
  const AcceptOutcome o = accept_request(request_body(), acceptor(), device);
  EXPECT_EQ(o.reason, RejectReason::kQueueSizeMismatch);
  EXPECT_EQ(o.reply.params.queue_depth, 3);  // honest about what we could offer
  device.queue_depth = 4;
  EXPECT_EQ(accept_request(request_body(), acceptor(), device).reason, RejectReason::kNone);
}

TEST(Negotiate, RejectsFragmentsBelowOurMinimum) {
  LocalEndpoint self = acceptor();
  self.min_fragments = 4;
  HandshakeBody req = request_body();
  req.params.max_fragments = 3;
  EXPECT_EQ(accept_request(req, self).reason, RejectReason::kFragmentsMismatch);
  // Also when the fragments would not fit the negotiated message size.
  req.params.max_fragments = 16;
  req.params.max_message_size = 100;  // 3 fit
  EXPECT_EQ(accept_request(req, self).reason, RejectReason::kFragmentsMismatch);
  req.params.max_message_size = 108;  // 4 fit
  EXPECT_EQ(accept_request(req, self).reason, RejectReason::kNone);
}

TEST(Negotiate, OwnBrokenConfigurationIsFatal) {
  ConnParams device = kDevice;
  device.max_bulk_size = 0;
  const AcceptOutcome o = accept_request(request_body(), acceptor(), device);
  EXPECT_EQ(o.reason, RejectReason::kFatal);
  EXPECT_EQ(o.error, HandshakeError::kBadParameter);
}

TEST(Negotiate, ChecksumOnIfEitherSideWantsIt) {
  for (int mask = 0; mask < 4; ++mask) {
    LocalEndpoint ini = initiator(), acc = acceptor();
    ini.want_checksum = (mask & 1) != 0;
    acc.want_checksum = (mask & 2) != 0;
    const AcceptOutcome o = accept_request(make_connect_request(ini, kDevice, 0), acc);
    ASSERT_EQ(o.reason, RejectReason::kNone);
    EXPECT_EQ(o.session.checksum, mask != 0);
    EXPECT_EQ(o.reply.flags, mask != 0 ? kHandshakeFlagChecksum : 0);
  }
}

TEST(Negotiate, UnknownRequestFlagsAreIgnored) {
  HandshakeBody req = request_body();
  req.flags = 0xfe;  // bits of minors we do not speak
  const AcceptOutcome o = accept_request(req);
  ASSERT_EQ(o.reason, RejectReason::kNone);
  EXPECT_FALSE(o.session.checksum);
  EXPECT_EQ(o.reply.flags, 0);
}

TEST(Negotiate, EngineChosenRejects) {
  for (RejectReason why :
       {RejectReason::kRace, RejectReason::kNoResources, RejectReason::kFatal, RejectReason::kNotAllowed}) {
    const HandshakeBody b = make_reject(acceptor(), kDevice, why, kInitiatorStamp);
    EXPECT_EQ(b.kind, HandshakeKind::kReject);
    EXPECT_EQ(b.reason, why);
    EXPECT_EQ(b.params, clamp(acceptor().params, kDevice));
  }
}

// ---- completion (initiator) --------------------------------------------------------------------

struct Handshake {
  HandshakeBody sent;
  AcceptOutcome outcome;
  std::vector<std::uint8_t> reply;
};

Handshake run(const LocalEndpoint& ini, const LocalEndpoint& acc, std::uint64_t last_peer = 0) {
  Handshake h;
  h.sent = make_connect_request(ini, kDevice, last_peer);
  h.outcome = accept_request(h.sent, acc);
  h.reply = encode(h.outcome.reply);
  return h;
}

TEST(CompleteConnect, SessionsMirrorEachOther) {
  const Handshake h = run(initiator(), acceptor());
  ASSERT_EQ(h.outcome.reason, RejectReason::kNone);
  Session ini;
  ASSERT_EQ(complete_connect(h.sent, h.reply, initiator(), ini), HandshakeError::kOk);
  const Session& acc = h.outcome.session;
  EXPECT_EQ(ini.version, acc.version);
  EXPECT_EQ(ini.checksum, acc.checksum);
  EXPECT_EQ(ini.params, acc.params);
  EXPECT_EQ(ini.local_incarnation, acc.peer_incarnation);
  EXPECT_EQ(ini.peer_incarnation, acc.local_incarnation);
  EXPECT_EQ(ini.params, (ConnParams{64, 2048, 8, 1u << 20}));

  // And the two sessions speak to each other.
  std::array<std::uint8_t, 64> buf{};
  Message m;
  m.type = MessageType::kInlineRequest;
  m.cookie = 9;
  const auto enc = encode_message(m, ini, buf);
  ASSERT_TRUE(enc.ok());
  Message d;
  EXPECT_EQ(decode_message({buf.data(), enc.size}, acc, d), WireError::kOk);
}

TEST(CompleteConnect, ReconnectToSameIncarnation) {
  const Handshake h = run(initiator(), acceptor(), kAcceptorStamp);
  Session s;
  EXPECT_EQ(complete_connect(h.sent, h.reply, initiator(), s), HandshakeError::kOk);
}

TEST(CompleteConnect, DecodeErrorsPropagate) {
  const Handshake h = run(initiator(), acceptor());
  Session s;
  const auto rej = encode(make_reject(acceptor(), kDevice, RejectReason::kRace, kInitiatorStamp));
  EXPECT_EQ(complete_connect(h.sent, rej, initiator(), s), HandshakeError::kWrongKind);
  EXPECT_EQ(complete_connect(h.sent, {h.reply.data(), 39}, initiator(), s), HandshakeError::kTooShort);
}

// Mutate the accept body and expect complete_connect to refuse it with `want`.
void expect_refused(void (*mutate)(HandshakeBody&), HandshakeError want, std::uint64_t last_peer = 0) {
  Handshake h = run(initiator(), acceptor(), last_peer);
  ASSERT_EQ(h.outcome.reason, RejectReason::kNone);
  HandshakeBody a = h.outcome.reply;
  mutate(a);
  Session s;
  EXPECT_EQ(complete_connect(h.sent, encode(a), initiator(), s), want);
}

TEST(CompleteConnect, RefusesBadAccepts) {
  expect_refused([](HandshakeBody& a) { a.major = 2; }, HandshakeError::kIncompatibleVersion);
  expect_refused(
      [](HandshakeBody& a) {
        a.minor = 3;  // we never offered minor 3
        a.minor_mask = 0b1111;
      },
      HandshakeError::kIncompatibleVersion);
  expect_refused([](HandshakeBody& a) { a.flags = 0x80; }, HandshakeError::kBadFlags);
  expect_refused([](HandshakeBody& a) { a.dst_incarnation = kInitiatorStamp + 1; },
                 HandshakeError::kStaleIncarnation);
  expect_refused([](HandshakeBody& a) { a.src_incarnation = kAcceptorStamp + 1; },
                 HandshakeError::kStaleIncarnation, kAcceptorStamp);
  expect_refused([](HandshakeBody& a) { a.src_incarnation = 0; }, HandshakeError::kZeroIncarnation);
  expect_refused([](HandshakeBody& a) { a.params.queue_depth = 0; }, HandshakeError::kBadParameter);
  expect_refused([](HandshakeBody& a) { a.params.max_bulk_size = 0; }, HandshakeError::kBadParameter);
  expect_refused(
      [](HandshakeBody& a) {
        a.params.max_message_size = 100;  // only 3 fragments fit, 8 claimed
      },
      HandshakeError::kBadParameter);
  expect_refused([](HandshakeBody& a) { a.params.queue_depth = 65; }, HandshakeError::kParameterRaised);
  expect_refused([](HandshakeBody& a) { a.params.max_message_size = 4097; },
                 HandshakeError::kParameterRaised);
  expect_refused([](HandshakeBody& a) { a.params.max_fragments = 9; }, HandshakeError::kParameterRaised);
  expect_refused([](HandshakeBody& a) { a.params.max_bulk_size = (1u << 20) + 1; },
                 HandshakeError::kParameterRaised);
}

TEST(CompleteConnect, RefusesChecksumDroppedAfterWeAsked) {
  LocalEndpoint ini = initiator();
  ini.want_checksum = true;
  Handshake h = run(ini, acceptor());
  HandshakeBody a = h.outcome.reply;
  ASSERT_EQ(a.flags, kHandshakeFlagChecksum);
  Session s;
  ASSERT_EQ(complete_connect(h.sent, h.reply, ini, s), HandshakeError::kOk);
  EXPECT_TRUE(s.checksum);
  a.flags = 0;
  EXPECT_EQ(complete_connect(h.sent, encode(a), ini, s), HandshakeError::kBadFlags);
}

TEST(CompleteConnect, AcceptorMayImposeChecksum) {
  LocalEndpoint acc = acceptor();
  acc.want_checksum = true;
  const Handshake h = run(initiator(), acc);
  Session s;
  ASSERT_EQ(complete_connect(h.sent, h.reply, initiator(), s), HandshakeError::kOk);
  EXPECT_TRUE(s.checksum);
}

TEST(CompleteConnect, RefusesBelowOurMinimum) {
  LocalEndpoint ini = initiator();
  ini.min_queue_depth = 100;  // we offered 64 but insist on 100: the accept cannot satisfy us
  const Handshake h = run(ini, acceptor());
  Session s;
  EXPECT_EQ(complete_connect(h.sent, h.reply, ini, s), HandshakeError::kBelowMinimum);
}

// An acceptor that does not enforce the floor (an older build, or a broken one) must not talk us
// into a depth the credit machine refuses; 4 is fine.
TEST(CompleteConnect, RefusesDepthBelowCreditFloor) {
  for (const std::uint16_t depth : {1, 2, 3, 4}) {
    LocalEndpoint ini = initiator();
    ini.min_queue_depth = 1;  // a lower configured minimum does not lower the floor
    Handshake h = run(ini, acceptor());
    ASSERT_EQ(h.outcome.reason, RejectReason::kNone);
    HandshakeBody a = h.outcome.reply;
    a.params.queue_depth = depth;
    Session s;
    EXPECT_EQ(complete_connect(h.sent, encode(a), ini, s),
              depth < kMinCreditQueueDepth ? HandshakeError::kBelowMinimum : HandshakeError::kOk)
        << depth;
    if (depth == kMinCreditQueueDepth) {
      EXPECT_EQ(s.params.queue_depth, depth);
    }
  }
}

// Both halves together: an initiator that can only offer 3 is told why and with what to retry.
TEST(BothSides, ShallowInitiatorGetsQueueSizeMismatch) {
  LocalEndpoint ini = initiator();
  ini.params.queue_depth = 3;
  const Handshake h = run(ini, acceptor());
  EXPECT_EQ(h.outcome.reason, RejectReason::kQueueSizeMismatch);
  HandshakeBody rej;
  ASSERT_EQ(decode_handshake(h.reply, HandshakeKind::kReject, rej), HandshakeError::kOk);
  EXPECT_EQ(rej.reason, RejectReason::kQueueSizeMismatch);
  EXPECT_GE(rej.params.queue_depth, kMinCreditQueueDepth);
  ini.params.queue_depth = 4;
  const Handshake ok = run(ini, acceptor());
  ASSERT_EQ(ok.outcome.reason, RejectReason::kNone);
  Session s;
  EXPECT_EQ(complete_connect(ok.sent, ok.reply, ini, s), HandshakeError::kOk);
  EXPECT_EQ(s.params.queue_depth, 4);
}

// One floor for both: every depth a handshake settles on is one CreditMachine::validate accepts,
// and every depth validate refuses is refused in the handshake already.
TEST(BothSides, NegotiatedDepthsAreExactlyTheOnesTheCreditMachineRuns) {
  for (std::uint16_t depth = 1; depth <= 2 * kMinCreditQueueDepth; ++depth) {
    LocalEndpoint ini = initiator();
    ini.params.queue_depth = depth;
    const Handshake h = run(ini, acceptor());
    const bool runs = CreditMachine::validate({depth, 0, 0, 0}, 8) == CreditError::kOk;
    EXPECT_EQ(h.outcome.reason == RejectReason::kNone, runs) << depth;
  }
}

TEST(CompleteConnect, RefusesLowerMinorThanHighestCommon) {
  LocalEndpoint ini = initiator(), acc = acceptor();
  ini.minor_mask = acc.minor_mask = 0b11;
  Handshake h = run(ini, acc);
  ASSERT_EQ(h.outcome.reply.minor, 1);
  HandshakeBody a = h.outcome.reply;
  a.minor = 0;
  Session s;
  EXPECT_EQ(complete_connect(h.sent, encode(a), ini, s), HandshakeError::kIncompatibleVersion);
  EXPECT_EQ(complete_connect(h.sent, h.reply, ini, s), HandshakeError::kOk);
  EXPECT_EQ(s.version, pack_version(1, 1));
}

// ---- minor 1: timers and limits ------------------------------------------------------------------

TEST(Minor1, KeepaliveIsTheStricterIntervalAndBothSidesLearnIt) {
  struct Case {
    std::uint32_t ini_keepalive, acc_keepalive, want;
  };
  for (const Case c : {Case{0, 1000, 1000}, Case{250, 1000, 250}, Case{5000, 1000, 1000}, Case{300, 0, 300},
                       Case{0, 0, 0}}) {
    LocalEndpoint ini = initiator(), acc = acceptor();
    ini.minor_mask = 0b11;  // a 1.1 initiator against a 1.2 acceptor: minor 1, as before
    ini.timers = Timers{c.ini_keepalive, c.ini_keepalive == 0 ? 0 : 3 * c.ini_keepalive};
    acc.timers = Timers{c.acc_keepalive, c.acc_keepalive == 0 ? 0 : 10 * c.acc_keepalive};
    acc.limits = Limits{30000, 4u << 20, 4, 8};
    const Handshake h = run(ini, acc);
    ASSERT_EQ(h.outcome.reason, RejectReason::kNone);
    EXPECT_EQ(h.outcome.reply.timers, (Timers{c.want, acc.timers.dead_peer_ms}));
    Session s;
    ASSERT_EQ(complete_connect(h.sent, h.reply, ini, s), HandshakeError::kOk) << c.ini_keepalive;
    const Session& a = h.outcome.session;
    EXPECT_EQ(s.keepalive_ms, c.want);
    EXPECT_EQ(a.keepalive_ms, c.want);
    EXPECT_EQ(s.local_dead_peer_ms, ini.timers.dead_peer_ms);
    EXPECT_EQ(s.peer_dead_peer_ms, acc.timers.dead_peer_ms);
    EXPECT_EQ(a.local_dead_peer_ms, acc.timers.dead_peer_ms);
    EXPECT_EQ(a.peer_dead_peer_ms, ini.timers.dead_peer_ms);
    EXPECT_EQ(s.peer_limits, acc.limits);
    EXPECT_EQ(s.version, pack_version(1, 1));
    EXPECT_EQ(h.reply.size(), 64u);
  }
}

// A 1.0 peer on either side: minor 0, the 40-byte bodies, no timers; each side keeps its own.
TEST(Minor1, InteroperatesWithMinor0PeersBothWays) {
  LocalEndpoint old_ini = initiator(), new_acc = acceptor();
  old_ini.minor_mask = 1;
  new_acc.timers = Timers{1000, 10000};
  new_acc.limits = Limits{30000, 1, 4, 8};
  Handshake h = run(old_ini, new_acc);
  ASSERT_EQ(h.outcome.reason, RejectReason::kNone);
  EXPECT_EQ(h.outcome.reply.minor, 0);
  EXPECT_EQ(h.reply.size(), 40u);
  EXPECT_EQ(h.outcome.session.keepalive_ms, 0u);
  EXPECT_EQ(h.outcome.session.local_dead_peer_ms, 0u);
  Session s;
  ASSERT_EQ(complete_connect(h.sent, h.reply, old_ini, s), HandshakeError::kOk);
  EXPECT_EQ(s.version, pack_version(1, 0));

  LocalEndpoint new_ini = initiator(), old_acc = acceptor();
  new_ini.timers = Timers{200, 2000};
  old_acc.minor_mask = 1;
  h = run(new_ini, old_acc);
  ASSERT_EQ(h.outcome.reason, RejectReason::kNone);
  EXPECT_EQ(h.reply.size(), 40u);
  ASSERT_EQ(complete_connect(h.sent, h.reply, new_ini, s), HandshakeError::kOk);
  EXPECT_EQ(s.version, pack_version(1, 0));
  EXPECT_EQ(s.keepalive_ms, 0u);
  EXPECT_EQ(s.local_dead_peer_ms, 0u);
  EXPECT_EQ(s.peer_limits, Limits{});
}

TEST(Minor1, NonsenseTimersAreBadPrivateDataOrFatal) {
  for (const Timers t : {Timers{0, 1000}, Timers{1000, 1000}, Timers{2000, 1000}}) {
    LocalEndpoint ini = initiator();
    ini.timers = t;
    Handshake h = run(ini, acceptor());
    EXPECT_EQ(h.outcome.reason, RejectReason::kBadPrivateData);
    EXPECT_EQ(h.outcome.error, HandshakeError::kBadParameter);
    LocalEndpoint acc = acceptor();
    acc.timers = t;
    h = run(initiator(), acc);
    EXPECT_EQ(h.outcome.reason, RejectReason::kFatal);
  }
  EXPECT_TRUE(timers_sane(Timers{0, 0}));
  EXPECT_TRUE(timers_sane(Timers{999, 1000}));
  EXPECT_TRUE(timers_sane(Timers{5, 0}));
}

TEST(Minor1, InitiatorRefusesAKeepaliveLooserThanItsOwn) {
  LocalEndpoint ini = initiator(), acc = acceptor();
  ini.timers = Timers{500, 5000};
  acc.timers = Timers{1000, 10000};
  const Handshake h = run(ini, acc);
  ASSERT_EQ(h.outcome.reply.timers.keepalive_ms, 500u);
  Session s;
  auto with_timers = [&](Timers t) {
    HandshakeBody a = h.outcome.reply;
    a.timers = t;
    return complete_connect(h.sent, encode(a), ini, s);
  };
  EXPECT_EQ(with_timers(Timers{501, 10000}), HandshakeError::kParameterRaised);
  EXPECT_EQ(with_timers(Timers{0, 0}), HandshakeError::kParameterRaised);   // no keepalive at all
  EXPECT_EQ(with_timers(Timers{500, 500}), HandshakeError::kBadParameter);  // dead before its own keepalive
  EXPECT_EQ(with_timers(Timers{400, 0}), HandshakeError::kOk);              // stricter is fine
  EXPECT_EQ(s.keepalive_ms, 400u);
}

// ---- minor 2: the gateway nonce and the auth flag ---------------------------------------------------

constexpr std::array<std::uint8_t, kGatewayNonceSize> kNonce = [] {
  std::array<std::uint8_t, kGatewayNonceSize> n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(0xa0 + i);
  return n;
}();

LocalEndpoint auth_acceptor() {
  LocalEndpoint e = acceptor();
  e.auth_required = true;
  e.gateway_nonce = kNonce;
  return e;
}

TEST(Minor2, AuthAcceptCarriesFlagAndNonceAndBothSessionsLearnThem) {
  const Handshake h = run(initiator(), auth_acceptor());
  ASSERT_EQ(h.outcome.reason, RejectReason::kNone);
  EXPECT_EQ(h.outcome.reply.minor, 2);
  EXPECT_EQ(h.outcome.reply.flags, kHandshakeFlagAuth);
  ASSERT_EQ(h.reply.size(), 96u);
  EXPECT_EQ(h.reply[7], kHandshakeFlagAuth);
  EXPECT_TRUE(std::equal(kNonce.begin(), kNonce.end(), h.reply.begin() + 64));  // offset 64, 32 bytes
  HandshakeBody d;
  ASSERT_EQ(decode_handshake(h.reply, HandshakeKind::kAccept, d), HandshakeError::kOk);
  EXPECT_EQ(d, h.outcome.reply);
  Session s;
  ASSERT_EQ(complete_connect(h.sent, h.reply, initiator(), s), HandshakeError::kOk);
  EXPECT_TRUE(h.outcome.session.auth_required);
  EXPECT_EQ(h.outcome.session.gateway_nonce, kNonce);
  EXPECT_TRUE(s.auth_required);
  EXPECT_EQ(s.gateway_nonce, kNonce);
  EXPECT_EQ(s.version, pack_version(1, 2));
}

TEST(Minor2, AuthOffAcceptHasZeroNonceAndNoFlag) {
  const Handshake h = run(initiator(), acceptor());
  ASSERT_EQ(h.outcome.reason, RejectReason::kNone);
  ASSERT_EQ(h.reply.size(), 96u);
  EXPECT_EQ(h.reply[7], 0);
  EXPECT_TRUE(std::all_of(h.reply.begin() + 64, h.reply.end(), [](std::uint8_t b) { return b == 0; }));
  Session s;
  ASSERT_EQ(complete_connect(h.sent, h.reply, initiator(), s), HandshakeError::kOk);
  EXPECT_FALSE(s.auth_required);
  EXPECT_FALSE(h.outcome.session.auth_required);
  EXPECT_EQ(s.gateway_nonce, (std::array<std::uint8_t, kGatewayNonceSize>{}));
}

// Older initiators against an acceptor requiring auth: refused with the reason that names the cure.
TEST(Minor2, OldInitiatorsAreRefusedAuthRequired) {
  for (const std::uint16_t mask : {0b01, 0b10, 0b11}) {
    LocalEndpoint old = initiator();
    old.minor_mask = mask;
    const Handshake h = run(old, auth_acceptor());
    EXPECT_EQ(h.outcome.reason, RejectReason::kAuthRequired) << mask;
    EXPECT_EQ(h.outcome.reply.kind, HandshakeKind::kReject);
    EXPECT_EQ(h.outcome.reply.dst_incarnation, kInitiatorStamp);
    HandshakeBody d;
    ASSERT_EQ(decode_handshake(h.reply, HandshakeKind::kReject, d), HandshakeError::kOk);
    EXPECT_EQ(d.reason, RejectReason::kAuthRequired);
    EXPECT_EQ(to_string(d.reason), "auth_required");
  }
  // With auth off the same initiators get what they always got.
  LocalEndpoint old = initiator();
  old.minor_mask = 0b11;
  const Handshake h = run(old, acceptor());
  EXPECT_EQ(h.outcome.reason, RejectReason::kNone);
  EXPECT_EQ(h.outcome.reply.minor, 1);
}

TEST(Minor2, AuthRequiresRoomForTheAuthMessage) {
  LocalEndpoint ini = initiator();
  ini.params.max_message_size = kAuthMaxSize - 1;
  Handshake h = run(ini, auth_acceptor());
  EXPECT_EQ(h.outcome.reason, RejectReason::kAuthRequired);
  EXPECT_EQ(h.outcome.error, HandshakeError::kBelowMinimum);
  ini.params.max_message_size = kAuthMaxSize;
  h = run(ini, auth_acceptor());
  EXPECT_EQ(h.outcome.reason, RejectReason::kNone);
  h = run(initiator(), [] {  // without auth a small size is fine
    LocalEndpoint a = acceptor();
    a.params.max_message_size = 100;
    return a;
  }());
  EXPECT_EQ(h.outcome.reason, RejectReason::kNone);
}

TEST(Minor2, AcceptorWithoutANonceIsFatal) {
  LocalEndpoint acc = auth_acceptor();
  acc.gateway_nonce = {};
  EXPECT_EQ(run(initiator(), acc).outcome.reason, RejectReason::kFatal);
}

TEST(Minor2, InitiatorRefusesInconsistentAuthAccepts) {
  const Handshake h = run(initiator(), auth_acceptor());
  Session s;
  auto with = [&](auto mutate) {
    HandshakeBody a = h.outcome.reply;
    mutate(a);
    return complete_connect(h.sent, encode(a), initiator(), s);
  };
  EXPECT_EQ(with([](HandshakeBody& a) { a.gateway_nonce = {}; }), HandshakeError::kBadParameter);
  EXPECT_EQ(with([](HandshakeBody& a) { a.flags = 0; }), HandshakeError::kBadParameter);  // nonce, no flag
  EXPECT_EQ(with([](HandshakeBody& a) { a.flags |= 1u << 2; }), HandshakeError::kBadFlags);
  EXPECT_EQ(with([](HandshakeBody&) {}), HandshakeError::kOk);
  // The auth flag does not exist before minor 2: a minor-1 accept carrying it is refused.
  LocalEndpoint v11 = initiator();
  v11.minor_mask = 0b11;
  const Handshake h1 = run(v11, acceptor());
  ASSERT_EQ(h1.outcome.reply.minor, 1);
  HandshakeBody a = h1.outcome.reply;
  a.flags |= kHandshakeFlagAuth;
  EXPECT_EQ(complete_connect(h1.sent, encode(a), v11, s), HandshakeError::kBadFlags);
  // A 96-byte accept cut to the minor-1 size is short.
  EXPECT_EQ(complete_connect(h.sent, {h.reply.data(), 64}, initiator(), s), HandshakeError::kTooShort);
}

// A request's bit 1 has no meaning: ignored, it neither asks for nor refuses authentication.
TEST(Minor2, RequestAuthBitIsIgnored) {
  HandshakeBody req = request_body();
  req.flags |= kHandshakeFlagAuth;
  AcceptOutcome o = accept_request(req);
  EXPECT_EQ(o.reason, RejectReason::kNone);
  EXPECT_EQ(o.reply.flags, 0);
  o = accept_request(req, auth_acceptor());
  EXPECT_EQ(o.reply.flags, kHandshakeFlagAuth);
  EXPECT_EQ(encode(req).size(), 48u);  // a minor-2 request has no new bytes
}

TEST(MakeConnectRequest, ClampsOwnOfferToDeviceAndCaps) {
  LocalEndpoint ini = initiator();
  ini.params = ConnParams{5000, 1u << 24, 40, 0xffffffffu};
  const HandshakeBody b = make_connect_request(ini, ConnParams{256, 1u << 30, 64, 1u << 24}, 5);
  EXPECT_EQ(b.params, (ConnParams{256, kMaxMessageSizeCap, kMaxFragments, 1u << 24}));
  EXPECT_EQ(b.dst_incarnation, 5u);
  EXPECT_EQ(b.src_incarnation, kInitiatorStamp);
  EXPECT_EQ(b.minor, kProtocolMinor);
  ini.params.max_message_size = 80;  // 2 fragments fit
  EXPECT_EQ(make_connect_request(ini, kDevice, 0).params.max_fragments, 2);
}

}  // namespace
}  // namespace rdmagate::protocol

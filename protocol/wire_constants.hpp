#pragma once
// Compile-time constants of the rdmagate wire protocol (handshake private data and message
// framing). Every number a peer must agree on lives here; docs/protocol.md is the prose version.

#include <cstddef>
#include <cstdint>

namespace rdmagate::protocol {

// ---- versions -------------------------------------------------------------------------------
// The major changes only for incompatible layouts. Minors are negotiated: each side advertises a
// 16-bit mask of the minors it speaks and the highest common one wins (RDS style).
inline constexpr std::uint8_t kProtocolMajor = 1;
// Minor 1 appends liveness timers to the request and timers and limits to the accept (docs §3.8); minor 2
// appends the gateway nonce to the accept and adds the AUTH / AUTH_ANSWER messages (docs §11).
inline constexpr std::uint8_t kProtocolMinor = 2;  // highest minor we speak
inline constexpr std::uint16_t kSupportedMinorMask =
    (1u << 0) | (1u << 1) | (1u << 2);     // bit i: we speak minor i
inline constexpr unsigned kMaxMinor = 15;  // a u16 mask holds minors 0..15

static_assert(kProtocolMajor >= 1 && kProtocolMajor <= 15, "major must fit the header's high nibble");
static_assert(kProtocolMinor <= kMaxMinor, "minor must fit the header's low nibble and the mask");
static_assert((kSupportedMinorMask >> kProtocolMinor) == 1u, "our highest minor must be the mask's top bit");

// Message headers carry the negotiated version as one byte: major in the high nibble.
constexpr std::uint8_t pack_version(std::uint8_t major, std::uint8_t minor) {
  return static_cast<std::uint8_t>((major << 4) | (minor & 0x0f));
}

// ---- rdma_cm private-data limits (IB and RoCE; iWARP/MPA allows more) ------------------------
// The IB CM REQ/REP/REJ MADs carry 92/196/148 bytes of private data; rdma_cm spends 36 of the
// REQ's bytes on its own header, leaving 56. Our bodies must fit the smallest of these.
inline constexpr std::size_t kCmConnectRequestPrivateDataMax = 56;
inline constexpr std::size_t kCmAcceptPrivateDataMax = 196;
inline constexpr std::size_t kCmRejectPrivateDataMax = 148;

// ---- handshake bodies --------------------------------------------------------------------------
inline constexpr std::uint32_t kHandshakeMagic = 0x53484752;  // bytes on the wire: 'R' 'G' 'H' 'S'
// Minor-0 sizes; a body whose minor is 1 or more also carries the minor-1 extension (a request when the
// sender's highest minor is >= 1, an accept when the chosen one is). Later minors only append.
inline constexpr std::size_t kConnectRequestSize = 40;
inline constexpr std::size_t kConnectAcceptSize = 40;
inline constexpr std::size_t kConnectRejectSize = 44;
inline constexpr std::size_t kConnectRequestSizeMinor1 = 48;  // + keepalive ms, dead-peer ms
inline constexpr std::size_t kConnectAcceptSizeMinor1 = 64;   // + timers, limits, reserved
inline constexpr std::size_t kConnectAcceptSizeMinor2 = 96;   // + gateway nonce
inline constexpr std::size_t kGatewayNonceSize = 32;
inline constexpr std::size_t kMaxHandshakeSize = 96;  // a buffer this big holds any body
// request: "I want CRC32C"; accept: "CRC32C on". Defined in minor 0.
inline constexpr std::uint8_t kHandshakeFlagChecksum = 1u << 0;
// accept of minor >= 2 only: "authentication required, the initiator's first message must be AUTH"; ignored
// in a request.
inline constexpr std::uint8_t kHandshakeFlagAuth = 1u << 1;
// Flag bits an accept of `minor` may carry.
constexpr std::uint8_t handshake_flags_known(std::uint8_t minor) {
  return minor >= 2 ? kHandshakeFlagChecksum | kHandshakeFlagAuth : kHandshakeFlagChecksum;
}

static_assert(kConnectRequestSizeMinor1 <= kCmConnectRequestPrivateDataMax,
              "request exceeds the IB CM REQ limit");
static_assert(kConnectAcceptSizeMinor2 <= kCmAcceptPrivateDataMax, "accept exceeds the IB CM REP limit");
static_assert(kConnectRejectSize <= kCmRejectPrivateDataMax, "reject exceeds the IB CM REJ limit");
static_assert(kMaxHandshakeSize >= kConnectRequestSizeMinor1 &&
              kMaxHandshakeSize >= kConnectAcceptSizeMinor2 && kMaxHandshakeSize >= kConnectRejectSize);
static_assert(kMaxHandshakeSize <= 255, "rdma_conn_param::private_data_len is a u8");

// ---- message framing ---------------------------------------------------------------------------
inline constexpr std::uint16_t kMessageMagic = 0x4752;  // bytes on the wire: 'R' 'G'
inline constexpr std::size_t kHeaderSize = 40;
inline constexpr std::size_t kChunkHeaderSize = 4;  // u16 fragment count + u16 reserved
inline constexpr std::size_t kFragmentSize = 16;    // u64 addr + u32 len + u32 rkey
inline constexpr std::size_t kChunkRequestFixedSize = kHeaderSize + kChunkHeaderSize;
inline constexpr std::size_t kCompletionBodySize = 8;  // u32 status + u32 byte count
inline constexpr std::size_t kCompletionSize = kHeaderSize + kCompletionBodySize;
// AUTH (type 7): mechanism, name length n, reserved u16, client nonce, client proof, then the n name bytes.
inline constexpr std::size_t kAuthFixedSize = kHeaderSize + 4 + 32 + 32;
inline constexpr std::size_t kAuthMaxPrincipal = 64;
// AUTH_ANSWER (type 8): u32 status, gateway proof.
inline constexpr std::size_t kAuthAnswerSize = kHeaderSize + 4 + 32;
inline constexpr std::uint32_t kAuthStatusMax =
    3;  // 0 ok, 1 denied, 2 connection_limit, 3 revoked (reserved)

// Compile-time capacity of a decoded chunk. The negotiated fragment count never exceeds it, so a
// wire count is always checked against a fixed bound before it indexes anything.
inline constexpr std::uint16_t kMaxFragments = 16;

// Limits on negotiable parameters. A peer offering less than the minimum is talking nonsense; a
// peer offering more than the cap is clamped like any other over-offer.
inline constexpr std::uint32_t kMinMessageSize = 64;           // holds a 1-fragment chunk request
inline constexpr std::uint32_t kMaxMessageSizeCap = 1u << 20;  // receive buffers are per-connection memory
inline constexpr std::uint16_t kMaxQueueDepthCap = 0xffff;     // the credits field is 16 bits wide

// Smallest queue depth the credit rules are proven for (docs §5.1, §5.6): two reserved credits
// plus room for two requests, so a lone NOOP never makes the peer look starved. The handshake
// refuses a negotiated depth below it (queue-size mismatch), so a connection never runs the
// credit machine outside its proof; conf/ takes its range from here too.
inline constexpr std::uint16_t kMinCreditQueueDepth = 4;

// Credits a request may never take, as a function of the negotiated depth. Both sides compute it,
// so it is part of the protocol: a request arriving into our reserve is a violation. At least 2
// (one for answers, one last credit only a credit-returning message may take); an eighth of the
// depth on deep queues so that answers keep flowing under a request flood.
constexpr std::uint16_t credit_reserve(std::uint16_t queue_depth) {
  return queue_depth / 8 > 2 ? static_cast<std::uint16_t>(queue_depth / 8) : std::uint16_t{2};
}

static_assert(kHeaderSize <= 40, "the hot path pays for every header byte");
static_assert(kMinMessageSize >= kChunkRequestFixedSize + kFragmentSize);
static_assert(kMinMessageSize >= kCompletionSize);
static_assert(kAuthFixedSize == 108 && kAuthAnswerSize == 76);
// A small negotiated max message size cannot carry the AUTH exchange: an acceptor that requires
// authentication refuses to negotiate one below kAuthMaxSize (docs §3.4).
inline constexpr std::size_t kAuthMaxSize = kAuthFixedSize + kAuthMaxPrincipal;
static_assert(kAuthMaxSize > kAuthAnswerSize && kAuthMaxSize <= kMaxMessageSizeCap);
static_assert(kChunkRequestFixedSize + kMaxFragments * kFragmentSize <= kMaxMessageSizeCap);
static_assert(kMaxFragments > 0 && kMaxFragments <= 0xffff);
static_assert(credit_reserve(kMinCreditQueueDepth) + 2 == kMinCreditQueueDepth, "the proof needs P - R >= 2");
static_assert(credit_reserve(64) == 8 && credit_reserve(kMaxQueueDepthCap) + 2 <= kMaxQueueDepthCap);
static_assert(kMinCreditQueueDepth <= kMaxQueueDepthCap);

// Largest fragment count a chunk request of `message_size` bytes can carry.
constexpr std::uint16_t fragments_fitting(std::uint32_t message_size) {
  if (message_size < kChunkRequestFixedSize) return 0;
  const std::size_t n = (message_size - kChunkRequestFixedSize) / kFragmentSize;
  return static_cast<std::uint16_t>(n < kMaxFragments ? n : kMaxFragments);
}
static_assert(fragments_fitting(kMinMessageSize) >= 1);

}  // namespace rdmagate::protocol

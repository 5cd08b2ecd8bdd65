#pragma once
// Configurations shared by the fuzz targets and the seed-corpus generator. The first input byte
// selects one of them, so the fuzzer explores every negotiated shape with one binary.

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "protocol/handshake.hpp"
#include "protocol/message.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace rdmagate::fuzz {

using namespace rdmagate::protocol;

// ---- message target: selector bit 0 = checksum on; bit 1 = leave a wrong checksum alone
//      (otherwise the target fixes it up so mutations reach the body); bits 2-3 = parameters; bit 4 = a
//      minor-1 session (no AUTH or AUTH_ANSWER), else the highest minor (1.2).
inline constexpr std::uint64_t kLocalStamp = 0x0123456789abcdefull;
inline constexpr std::uint64_t kPeerStamp = 0xfedcba9876543210ull;
inline constexpr ConnParams kMessageParams[4] = {
    {32, 512, 4, 1u << 20},                         // typical
    {kMinCreditQueueDepth, kMinMessageSize, 1, 1},  // every limit at the least a handshake settles on
    {0xffff, 4096, 16, 0xffffffffu},                // every limit wide open
    {128, 300, 16, 65536},                          // exactly kMaxFragments fit the message size
};

// The session of the receiver; the sender's is its mirror.
inline Session message_session(std::uint8_t selector) {
  return Session{pack_version(kProtocolMajor, (selector & 16) != 0 ? 1 : kProtocolMinor), (selector & 1) != 0,
                 kMessageParams[(selector >> 2) & 3], kLocalStamp, kPeerStamp};
}
inline Session sender_session(std::uint8_t selector) {
  Session s = message_session(selector);
  s.local_incarnation = kPeerStamp;
  s.peer_incarnation = kLocalStamp;
  return s;
}

// ---- handshake target: selector bit 0 = acceptor wants checksums; bit 1 = acceptor minimums
//      8 credits / 2 fragments; bit 2 = small device; bit 3 = initiator reconnects (names the
//      acceptor's stamp); bit 4 = initiator wants checksums; bit 5 = both announce timers (minor 1)
//      and the acceptor its limits; bit 6 = the initiator is an older build: minor 0 only, or minors 0 and 1 (a
//      1.1 build) when bit 7 is set too; bit 7 = the acceptor requires authentication (minor 2).
inline constexpr std::uint64_t kAcceptorStamp = 0xa5a5a5a5a5a5a5a5ull;
inline constexpr std::uint64_t kInitiatorStamp = 0x5a5a5a5a5a5a5a5aull;

// The gateway nonce an authenticating acceptor puts in its accepts.
inline constexpr std::array<std::uint8_t, kGatewayNonceSize> kFuzzNonce = [] {
  std::array<std::uint8_t, kGatewayNonceSize> n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(0x31 + 7 * i);
  return n;
}();

inline LocalEndpoint acceptor(std::uint8_t selector) {
  LocalEndpoint e;
  e.incarnation = kAcceptorStamp;
  e.params = ConnParams{128, 4096, 16, 1u << 20};
  e.want_checksum = (selector & 1) != 0;
  if (selector & 128) {
    e.auth_required = true;
    e.gateway_nonce = kFuzzNonce;
  }
  if (selector & 32) {
    e.timers = Timers{1000, 10000};
    e.limits = Limits{30000, 4u << 20, 4, 8};
  }
  if (selector & 2) {
    e.min_queue_depth = 8;
    e.min_fragments = 2;
  }
  return e;
}

inline ConnParams device(std::uint8_t selector) {
  return (selector & 4) != 0 ? ConnParams{16, 256, 4, 65536} : ConnParams{4096, 1u << 20, 32, 0xffffffffu};
}

inline LocalEndpoint initiator(std::uint8_t selector) {
  LocalEndpoint e;
  e.incarnation = kInitiatorStamp;
  e.params = ConnParams{64, 2048, 8, 1u << 22};
  e.want_checksum = (selector & 16) != 0;
  if (selector & 32) e.timers = Timers{250, 2000};
  if (selector & 64) e.minor_mask = (selector & 128) != 0 ? 0b11 : 0b1;  // a 1.1 build, or a 1.0 one
  return e;
}

inline HandshakeBody initiator_request(std::uint8_t selector) {
  return make_connect_request(initiator(selector), device(selector),
                              (selector & 8) != 0 ? kAcceptorStamp : 0);
}

}  // namespace rdmagate::fuzz

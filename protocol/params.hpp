#pragma once
// Connection parameters exchanged in the handshake, and the per-connection session that the
// message codec validates against once the handshake has completed.

#include <algorithm>
#include <array>
#include <cstdint>

#include "protocol/wire_constants.hpp"

namespace rdmagate::protocol {

// The four negotiable limits. Both directions use the same values after negotiation.
struct ConnParams {
  std::uint16_t queue_depth = 0;       // receives each side keeps posted = initial send credits
  std::uint32_t max_message_size = 0;  // largest message including header: inline threshold, rx buffer size
  std::uint16_t max_fragments = 0;     // fragments per read/write chunk
  std::uint32_t max_bulk_size = 0;     // sum of fragment lengths per chunk (and completion byte count)

  friend constexpr bool operator==(const ConnParams&, const ConnParams&) = default;
};

// Field-wise minimum: the acceptor's rule min(own, peer, device).
constexpr ConnParams clamp(const ConnParams& a, const ConnParams& b) {
  return ConnParams{std::min(a.queue_depth, b.queue_depth), std::min(a.max_message_size, b.max_message_size),
                    std::min(a.max_fragments, b.max_fragments), std::min(a.max_bulk_size, b.max_bulk_size)};
}

// The protocol's own ceilings, applied on top of any offer.
inline constexpr ConnParams kParamCaps{kMaxQueueDepthCap, kMaxMessageSizeCap, kMaxFragments, 0xffffffffu};

// A parameter set a peer may sensibly offer: nothing zero and messages big enough to carry a
// one-fragment chunk request. Values above the caps are sane; they get clamped. A sane depth may
// still be too small to run: see required_queue_depth().
constexpr bool params_sane(const ConnParams& p) {
  return p.queue_depth >= 1 && p.max_message_size >= kMinMessageSize && p.max_fragments >= 1 &&
         p.max_bulk_size >= 1;
}

// Smallest negotiated queue depth an endpoint with minimum `own_minimum` may accept: never below
// the credit rules' floor, whatever the endpoint configured. Deliberately not in params_sane: a
// depth of 1..3 is a well-formed offer that is merely too small, so it earns a queue-size
// mismatch (the peer can retry with more), not a bad-private-data verdict.
constexpr std::uint16_t required_queue_depth(std::uint16_t own_minimum) {
  return std::max(own_minimum, kMinCreditQueueDepth);
}

// Liveness timers a side announces in a minor-1 handshake (docs/protocol.md §3.8), in milliseconds.
// keepalive_ms: the longest it stays silent before sending a NOOP (0: no keepalive of its own, the
// peer's decides); dead_peer_ms: how long it waits without receiving before it closes (0: never).
struct Timers {
  std::uint32_t keepalive_ms = 0;
  std::uint32_t dead_peer_ms = 0;

  friend constexpr bool operator==(const Timers&, const Timers&) = default;
};

// A side that closes silent peers must say how often it keeps the connection alive itself, and the
// silence it tolerates must exceed that interval; otherwise the announcement is nonsense.
constexpr bool timers_sane(const Timers& t) {
  return t.dead_peer_ms == 0 || (t.keepalive_ms != 0 && t.keepalive_ms < t.dead_peer_ms);
}

// The connection's keepalive interval: the smaller of the two announced intervals, a 0 standing for
// "no preference". Both sides compute it, so each keeps the connection alive for the stricter one.
constexpr std::uint32_t negotiated_keepalive(std::uint32_t a, std::uint32_t b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

// Limits of the acceptor's services announced in a minor-1 accept (docs/protocol.md §3.8), so a peer
// can read them without provoking a refusal. 0 in any field: not announced.
struct Limits {
  std::uint32_t bulk_deadline_ms = 0;  // a chunk's transfer not done by then closes the connection
  std::uint32_t max_value_bytes = 0;   // largest object a service stores (the object service's max value)
  std::uint16_t chunk_queue = 0;       // chunk requests that may wait per connection behind the one moving
  std::uint16_t max_conns_per_source = 0;  // connections admitted from one source address

  friend constexpr bool operator==(const Limits&, const Limits&) = default;
};

// What the message codec needs to know about one established connection.
struct Session {
  std::uint8_t version = pack_version(kProtocolMajor, kProtocolMinor);  // negotiated; on every header
  bool checksum = false;                // CRC32C on every message (negotiated; off by default)
  ConnParams params;                    // negotiated limits, identical on both sides
  std::uint64_t local_incarnation = 0;  // our stamp: expected as destination of every received message
  std::uint64_t peer_incarnation = 0;   // peer's stamp from the handshake: expected as source
  // Minor >= 1 only (all 0 on a minor-0 connection): the negotiated keepalive interval and each side's
  // announced dead-peer timeout, in ms; the initiator also learns the acceptor's limits.
  std::uint32_t keepalive_ms = 0;
  std::uint32_t local_dead_peer_ms = 0;
  std::uint32_t peer_dead_peer_ms = 0;
  Limits peer_limits{};
  // Minor >= 2 only: the accept's `auth` flag (the initiator's first message must be AUTH, docs §11) and the
  // acceptor's nonce from the accept (all zero when auth_required is false). Equal on both sides.
  bool auth_required = false;
  std::array<std::uint8_t, kGatewayNonceSize> gateway_nonce{};

  friend constexpr bool operator==(const Session&, const Session&) = default;
};

}  // namespace rdmagate::protocol

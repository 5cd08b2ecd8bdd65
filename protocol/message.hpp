#pragma once
// Message framing: a 40-byte header plus a type-specific body. Decode validates every field
// against the negotiated Session and yields a zero-copy view of the payload; encode applies the
// same rules so that we never send what a peer must reject. No exceptions, no allocation.
// Layouts and rules: docs/protocol.md, "Messages".

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "protocol/errors.hpp"
#include "protocol/params.hpp"
#include "protocol/wire_constants.hpp"

namespace rdmagate::protocol {

enum class MessageType : std::uint8_t {
  kNoop = 1,               // returns credits / keepalive; costs a credit like every type; no body
  kInlineRequest = 2,      // request whose whole argument is the inline payload
  kInlineResponse = 3,     // answer whose whole result is the inline payload
  kReadChunkRequest = 4,   // request + chunk the responder RDMA-READs from (data to the responder)
  kWriteChunkRequest = 5,  // request + chunk the responder RDMA-WRITEs into (data to the requester)
  kCompletion = 6,         // answer with a status and a byte count; no payload
  kAuth = 7,               // minor >= 2, initiator -> acceptor: principal, client nonce and proof (docs §11)
  kAuthAnswer = 8,         // minor >= 2, acceptor -> initiator: status and gateway proof
};
inline constexpr std::uint8_t kMessageTypeMin = 1;
inline constexpr std::uint8_t kMessageTypeMax = 8;

constexpr bool is_chunk_request(MessageType t) {
  return t == MessageType::kReadChunkRequest || t == MessageType::kWriteChunkRequest;
}
constexpr bool is_request(MessageType t) {
  return t == MessageType::kInlineRequest || is_chunk_request(t);
}
// Every type costs one credit, NOOPs included (docs §5.2 rule 1): each lands in a posted receive,
// and only a returned count tells the sender that receive was posted again. What differs per type
// is which credits it may take: credit_class() in credit_machine.hpp.

// Completion status values below kStatusApplicationBase are the transport's; the rest belong to
// the service named by the request's opcode.
enum class CompletionStatus : std::uint32_t {
  kOk = 0,             // done; byte_count bytes moved through the chunk (0 for inline requests)
  kBulkFailed = 1,     // an RDMA READ/WRITE against the requester's chunk failed
  kTooSmall = 2,       // the result does not fit where the requester wants it; byte count: the size needed
  kUnknownOpcode = 3,  // no service handles this opcode
  kNoResources = 4,    // the responder could not take the request now; retrying may work
  kBadRequest = 5,     // the service rejected the request's payload
};
inline constexpr std::uint32_t kStatusApplicationBase = 0x100;

// One remote buffer piece: the responder moves data between it and its own memory.
struct Fragment {
  std::uint64_t addr = 0;  // remote virtual address
  std::uint32_t len = 0;   // bytes, nonzero; addr + len does not wrap
  std::uint32_t rkey = 0;  // remote key covering [addr, addr + len)

  friend constexpr bool operator==(const Fragment&, const Fragment&) = default;
};

// Fixed-capacity fragment list; only fragments[0, count) are meaningful.
struct Chunk {
  std::uint16_t count = 0;
  std::array<Fragment, kMaxFragments> fragments{};

  // Never beyond the array, even for a hand-built count the codec would refuse.
  std::span<const Fragment> view() const {
    return {fragments.data(), count < kMaxFragments ? count : kMaxFragments};
  }
  // Sum of lengths. Cannot overflow: at most kMaxFragments lengths of 32 bits.
  std::uint64_t total_length() const {
    std::uint64_t t = 0;
    for (const Fragment& f : view()) t += f.len;
    return t;
  }
};
static_assert(static_cast<std::uint64_t>(kMaxFragments) * 0xffffffffull < 0xffffffffffffffffull);

using AuthBytes = std::array<std::uint8_t, 32>;  // a nonce or an HMAC-SHA-256 proof

// Decoded message, or the description of one to encode.
struct Message {
  MessageType type = MessageType::kNoop;
  std::uint16_t credits = 0;              // credits returned to the receiver of this message
  std::uint16_t opcode = 0;               // service operation: set by requests, echoed by answers, 0 on NOOP
  std::uint64_t cookie = 0;               // requester's tag, echoed by the answer; 0 on NOOP
  Chunk chunk;                            // chunk requests only
  std::uint32_t status = 0;               // completion only: CompletionStatus or an application status
  std::uint32_t byte_count = 0;           // completion only: bytes moved through the chunk
  std::span<const std::uint8_t> payload;  // inline types and chunk requests; decode: view into rx
  // AUTH and AUTH_ANSWER only (docs §11): decode writes them for those types only (the hot path does not
  // pay for clearing them), so they are meaningless after decoding any other type.
  std::uint8_t auth_mechanism = 0;  // kAuth: auth::Mechanism value (judged by the auth layer, not here)
  std::string_view auth_principal;  // kAuth: 1..64 bytes of [A-Za-z0-9._@-]; decode: view into rx
  AuthBytes auth_client_nonce{};    // kAuth: Nc
  AuthBytes auth_proof{};           // kAuth: Pc; kAuthAnswer: Pg (all zero unless auth_status is 0)
  std::uint32_t auth_status = 0;    // kAuthAnswer: auth::AuthStatus value, 0..3
};

// An AUTH to encode (no allocation; `principal` must outlive the encode).
Message make_auth_message(std::uint64_t cookie, std::uint8_t mechanism, std::string_view principal,
                          const AuthBytes& client_nonce, const AuthBytes& proof) noexcept;
// An AUTH_ANSWER to encode; the proof is sent only with status 0 (zero otherwise, as decode demands).
Message make_auth_answer(std::uint64_t cookie, std::uint32_t status, const AuthBytes& proof) noexcept;

// 1..64 bytes, each in [A-Za-z0-9._@-] (the AUTH rule; auth::valid_principal_name is the same test).
bool valid_principal_bytes(std::string_view name) noexcept;

// Offset of the payload in an encoded message, so a sender can build the payload in place.
constexpr std::size_t payload_offset(MessageType type, std::uint16_t fragments) {
  return is_chunk_request(type) ? kChunkRequestFixedSize + std::size_t{fragments} * kFragmentSize
                                : kHeaderSize;
}

// Encoded length of `m` (not validated).
constexpr std::size_t encoded_size(const Message& m) {
  switch (m.type) {
    case MessageType::kNoop:
      return kHeaderSize;
    case MessageType::kCompletion:
      return kCompletionSize;
    case MessageType::kAuth:
      return kAuthFixedSize + m.auth_principal.size();
    case MessageType::kAuthAnswer:
      return kAuthAnswerSize;
    default:
      return payload_offset(m.type, m.chunk.count) + m.payload.size();
  }
}

// Encodes `m` for session `s` into `out`, checking every rule decode checks (bounded by
// s.params). The payload is copied unless it already sits at payload_offset() inside `out`.
// Computes the checksum when the session has them on. = check_encodable + write_message.
Encoded<WireError> encode_message(const Message& m, const Session& s, std::span<std::uint8_t> out) noexcept;

// What encode_message would refuse `m` for, into a buffer of `out_size` bytes, without writing anything
// (kOk: it would succeed). The engine checks before the credit decision and writes after it, so the header
// and its checksum are written once, with the final credit count.
WireError check_encodable(const Message& m, const Session& s, std::size_t out_size) noexcept;

// Writes `m`, which check_encodable accepted for `s` and out.size(); returns the encoded length.
std::size_t write_message(const Message& m, const Session& s, std::span<std::uint8_t> out) noexcept;

// Rewrites the returned-credits field of an already encoded message (the credit count is known only
// at post time) and refreshes its checksum. `encoded` is exactly the bytes encode_message wrote.
WireError patch_credits(std::span<std::uint8_t> encoded, std::uint16_t credits, const Session& s) noexcept;

// Decodes the `rx` bytes of one received message (the completion's byte_len) for session `s`.
// On kOk, `out.payload` points into `rx`; on error `out` is unspecified.
WireError decode_message(std::span<const std::uint8_t> rx, const Session& s, Message& out) noexcept;

// decode_message with every check taken one at a time in the documented order: its path for a message that
// fails a check or a session with checksums, and the reference the fuzzer holds its fast path to (the same
// result, and on kOk the same fields).
WireError decode_message_ordered(std::span<const std::uint8_t> rx, const Session& s, Message& out) noexcept;

}  // namespace rdmagate::protocol

#pragma once
// The object service's layer on top of the message framing (docs/protocol.md §8): opcodes, the request
// payload (a length-prefixed key, then the inline value), which message type each operation may travel in,
// and the statuses its answers carry. Verbs-free like the rest of protocol/, so every rule is unit-tested
// and fuzzed on the host (tests/fuzz/fuzz_object.cpp).
//
//   op      request message                 payload                 answer
//   PUT     kInlineRequest                  key prefix + value      kCompletion(status, bytes stored)
//   PUT     kReadChunkRequest (value)       key prefix only         kCompletion(status, bytes stored)
//   GET     kInlineRequest                  key prefix only         kInlineResponse(value) on success,
//                                                                   else kCompletion(status, needed size)
//   GET     kWriteChunkRequest (dest)       key prefix only         RDMA WRITE + kCompletion(kOk, size),
//                                                                   else kCompletion(status, needed size)
//   DELETE  kInlineRequest                  key prefix only         kCompletion(status, 0)
//   ECHO    kInlineRequest                  anything                kInlineResponse(same payload)
//   SINK    kInlineRequest                  anything                none (one way; credits return on NOOPs)
//
// Key prefix: u8 key length (1..kMaxKeyLength) followed by the key bytes.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "protocol/message.hpp"
#include "protocol/object_op.hpp"
#include "protocol/wire_constants.hpp"

namespace rdmagate::protocol {

// The opcodes of §8.1 (wire values). ECHO and SINK are service opcodes, not object operations.
enum class ObjectOpcode : std::uint16_t {
  kEcho = 1,
  kSink = 2,
  kPut = 0x10,
  kGet = 0x11,
  kDelete = 0x12,
};

constexpr ObjectOpcode object_opcode(ObjectOp op) noexcept {
  switch (op) {
    case ObjectOp::kGet:
      return ObjectOpcode::kGet;
    case ObjectOp::kPut:
      return ObjectOpcode::kPut;
    case ObjectOp::kDelete:
      return ObjectOpcode::kDelete;
  }
  return ObjectOpcode::kGet;
}

inline constexpr std::size_t kKeyPrefixSize = 1;  // the u8 length

// Statuses of object answers (kCompletion.status). Values below kStatusApplicationBase are the transport's
// CompletionStatus values and keep their meaning; the rest belong to the object service.
enum class ObjectStatus : std::uint32_t {
  kOk = 0,
  kBulkFailed = 1,     // an RDMA READ/WRITE against the requester's chunk failed
  kTooSmall = 2,       // GET: the destination cannot hold the value; byte_count = the size needed
  kUnknownOpcode = 3,
  kNoResources = 4,    // not started (quiescing, chunk queue full); retrying may work
  kBadRequest = 5,     // malformed payload, bad key length, wrong message type for the op
  kNotFound = kStatusApplicationBase + 0,
  kTooLarge = kStatusApplicationBase + 1,  // PUT value above the gateway's max value size
  kNoSpace = kStatusApplicationBase + 2,   // store full and nothing could be evicted
  kUnavailable = kStatusApplicationBase + 3,  // the gateway's backing store did not answer in time; retry later
  kCorrupt = kStatusApplicationBase + 4,      // the stored value failed its checksum; no bytes were sent
  kForbidden = kStatusApplicationBase + 5,      // the principal lacks the op's permission; nothing moved
  kQuotaExceeded = kStatusApplicationBase + 6,  // PUT: the tenant's max_bytes or max_objects would be passed
};

const char* object_status_name(std::uint32_t status) noexcept;

// Why a request payload was refused (the gateway answers kBadRequest and counts the reason).
enum class ObjectParseError : std::uint8_t {
  kOk = 0,
  kUnknownOpcode = 1,   // not an object opcode (kEcho/kSink are not parsed here)
  kWrongType = 2,       // the op does not travel in this message type (e.g. DELETE with a chunk)
  kEmptyPayload = 3,    // no key prefix
  kBadKeyLength = 4,    // key length 0 or above kMaxKeyLength
  kKeyTruncated = 5,    // the payload ends inside the key
  kTrailingBytes = 6,   // bytes after the key where the op allows none
};
inline constexpr std::size_t kObjectParseErrorCount = 7;
const char* object_parse_error_name(ObjectParseError e) noexcept;

struct ObjectRequest {
  ObjectOp op = ObjectOp::kGet;
  std::string_view key;                 // view into the payload
  std::span<const std::uint8_t> value;  // inline PUT only; view into the payload
};

// Parses the payload of an object request that arrived as `type` with `opcode`. Every length is checked
// before use; `out` views into `payload`.
ObjectParseError parse_object_request(MessageType type, std::uint16_t opcode, std::span<const std::uint8_t> payload,
                                      ObjectRequest& out) noexcept;

// Bytes of a request payload carrying `key` and `value_len` inline value bytes.
constexpr std::size_t object_payload_size(std::size_t key_len, std::size_t value_len) noexcept {
  return kKeyPrefixSize + key_len + value_len;
}

// Writes the key prefix and `value` into `out`. Returns the bytes written, or 0 when the key length is
// invalid or `out` is too small.
std::size_t encode_object_payload(std::string_view key, std::span<const std::uint8_t> value,
                                  std::span<std::uint8_t> out) noexcept;

// Largest value an inline PUT of a key of `key_len` bytes can carry in a message of `max_message` bytes
// (the session's negotiated size); 0 when not even the key fits.
constexpr std::uint32_t max_inline_put_value(std::uint32_t max_message, std::size_t key_len) noexcept {
  const std::size_t need = kHeaderSize + kKeyPrefixSize + key_len;
  return max_message > need ? static_cast<std::uint32_t>(max_message - need) : 0;
}

// Largest value a GET can return inline (kInlineResponse payload) in a message of `max_message` bytes.
constexpr std::uint32_t max_inline_get_value(std::uint32_t max_message) noexcept {
  return max_message > kHeaderSize ? static_cast<std::uint32_t>(max_message - kHeaderSize) : 0;
}

}  // namespace rdmagate::protocol

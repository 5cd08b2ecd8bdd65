#include "protocol/object_wire.hpp"

#include <cstring>

namespace rdmagate::protocol {

const char* object_status_name(std::uint32_t status) noexcept {
  switch (static_cast<ObjectStatus>(status)) {
    case ObjectStatus::kOk: return "ok";
    case ObjectStatus::kBulkFailed: return "bulk_failed";
    case ObjectStatus::kTooSmall: return "too_small";
    case ObjectStatus::kUnknownOpcode: return "unknown_opcode";
    case ObjectStatus::kNoResources: return "no_resources";
    case ObjectStatus::kBadRequest: return "bad_request";
    case ObjectStatus::kNotFound: return "not_found";
    case ObjectStatus::kTooLarge: return "too_large";
    case ObjectStatus::kNoSpace: return "no_space";
    case ObjectStatus::kUnavailable: return "unavailable";
    case ObjectStatus::kCorrupt: return "corrupt";
    case ObjectStatus::kForbidden: return "forbidden";
    case ObjectStatus::kQuotaExceeded: return "quota_exceeded";
  }
  return "unknown_status";
}

const char* object_parse_error_name(ObjectParseError e) noexcept {
  switch (e) {
    case ObjectParseError::kOk: return "ok";
    case ObjectParseError::kUnknownOpcode: return "unknown_opcode";
    case ObjectParseError::kWrongType: return "wrong_type";
    case ObjectParseError::kEmptyPayload: return "empty_payload";
    case ObjectParseError::kBadKeyLength: return "bad_key_length";
    case ObjectParseError::kKeyTruncated: return "key_truncated";
    case ObjectParseError::kTrailingBytes: return "trailing_bytes";
  }
  return "unknown";
}

namespace {

// Which message types carry which op (the table in object_wire.hpp).
bool type_allowed(ObjectOp op, MessageType type) noexcept {
  switch (op) {
    case ObjectOp::kPut:
      return type == MessageType::kInlineRequest || type == MessageType::kReadChunkRequest;
    case ObjectOp::kGet:
      return type == MessageType::kInlineRequest || type == MessageType::kWriteChunkRequest;
    case ObjectOp::kDelete:
      return type == MessageType::kInlineRequest;
  }
  return false;
}

}  // namespace

ObjectParseError parse_object_request(MessageType type, std::uint16_t opcode, std::span<const std::uint8_t> payload,
                                      ObjectRequest& out) noexcept {
  ObjectOp op;
  switch (static_cast<ObjectOpcode>(opcode)) {
    case ObjectOpcode::kGet:
      op = ObjectOp::kGet;
      break;
    case ObjectOpcode::kPut:
      op = ObjectOp::kPut;
      break;
    case ObjectOpcode::kDelete:
      op = ObjectOp::kDelete;
      break;
    default:
      return ObjectParseError::kUnknownOpcode;
  }
  if (!type_allowed(op, type)) return ObjectParseError::kWrongType;
  if (payload.empty()) return ObjectParseError::kEmptyPayload;
  const std::size_t key_len = payload[0];
  if (key_len == 0 || key_len > kMaxKeyLength) return ObjectParseError::kBadKeyLength;
  // payload.size() >= 1 here, so the subtraction cannot wrap.
  if (key_len > payload.size() - kKeyPrefixSize) return ObjectParseError::kKeyTruncated;
  const std::size_t rest = payload.size() - kKeyPrefixSize - key_len;
  const bool inline_value = op == ObjectOp::kPut && type == MessageType::kInlineRequest;
  if (!inline_value && rest != 0) return ObjectParseError::kTrailingBytes;
  out.op = op;
  out.key = std::string_view(reinterpret_cast<const char*>(payload.data() + kKeyPrefixSize), key_len);
  out.value = inline_value ? payload.subspan(kKeyPrefixSize + key_len) : std::span<const std::uint8_t>{};
  return ObjectParseError::kOk;
}

std::size_t encode_object_payload(std::string_view key, std::span<const std::uint8_t> value,
                                  std::span<std::uint8_t> out) noexcept {
  if (key.empty() || key.size() > kMaxKeyLength) return 0;
  if (value.size() > out.size() || out.size() - value.size() < kKeyPrefixSize + key.size()) return 0;
  out[0] = static_cast<std::uint8_t>(key.size());
  std::memcpy(out.data() + kKeyPrefixSize, key.data(), key.size());
  if (!value.empty()) std::memcpy(out.data() + kKeyPrefixSize + key.size(), value.data(), value.size());
  return object_payload_size(key.size(), value.size());
}

}  // namespace rdmagate::protocol

// libFuzzer target: parse_object_request (the object service's payload layer, docs/protocol.md §8).
// Input: byte 0 = the message type (any value, invalid ones included), bytes 1-2 = the opcode (little
// endian), the rest = the payload. Beyond "does not crash": an accepted request views inside the payload,
// obeys the key and type rules, re-encodes to the very same bytes, and its key-only forms refuse a
// trailing byte.
// The whole input is also a RADOS cache-invalidation payload (services/storage/rados/invalidation.hpp,
// what other gateways send in a notify): its window is in range, its keys lie inside it, are 1..250
// bytes, and header and keys re-encode to the prefix they were read from, the whole input when accepted.

#include <cstring>
#include <memory>
#include <span>

#include "fuzz_common.hpp"
#include "protocol/object_wire.hpp"
#include "services/storage/rados/invalidation.hpp"

using namespace rdmagate::fuzz;

namespace {
void invalidation_payload(const std::uint8_t* data, std::size_t size) {
  namespace rados = rdmagate::storage::rados;
  const std::span<const char> in(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<char[]> again(new char[rados::kNotifyPayload]);
  std::uint32_t window_ms = 0;
  std::size_t used = rados::begin_invalidation({again.get(), rados::kNotifyPayload}, 0);
  bool keys_seen = false;
  const bool ok = rados::parse_invalidation(in, &window_ms, [&](std::string_view key) {
    if (!keys_seen) {  // the header was accepted: re-encode it with the window read
      RDMAGATE_FUZZ_CHECK(window_ms >= 1 && window_ms <= rados::kMaxWindowMs);
      used = rados::begin_invalidation({again.get(), rados::kNotifyPayload}, window_ms);
      keys_seen = true;
    }
    RDMAGATE_FUZZ_CHECK(key.size() >= 1 && key.size() <= kMaxKeyLength);
    RDMAGATE_FUZZ_CHECK(key.data() >= in.data() && key.data() + key.size() <= in.data() + in.size());
    used = rados::append_key({again.get(), rados::kNotifyPayload}, used, key);
    RDMAGATE_FUZZ_CHECK(used != 0);
  });
  if (keys_seen) RDMAGATE_FUZZ_CHECK(used <= size && std::memcmp(again.get(), in.data(), used) == 0);
  if (ok) RDMAGATE_FUZZ_CHECK(keys_seen ? used == size : size == rados::kInvalidationHeader);
  if (ok && !keys_seen) {  // a hello: its header, exactly
    RDMAGATE_FUZZ_CHECK(window_ms >= 1 && window_ms <= rados::kMaxWindowMs);
    used = rados::begin_invalidation({again.get(), rados::kNotifyPayload}, window_ms);
    RDMAGATE_FUZZ_CHECK(used == size && std::memcmp(again.get(), in.data(), used) == 0);
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  invalidation_payload(data, size);
  if (size < 3) return 0;
  const auto type = static_cast<MessageType>(data[0]);
  const auto opcode = static_cast<std::uint16_t>(data[1] | (data[2] << 8));
  const std::span<const std::uint8_t> payload(data + 3, size - 3);

  ObjectRequest r;
  const ObjectParseError e = parse_object_request(type, opcode, payload, r);
  RDMAGATE_FUZZ_CHECK(static_cast<std::size_t>(e) < kObjectParseErrorCount);
  if (e != ObjectParseError::kOk) return 0;

  RDMAGATE_FUZZ_CHECK(static_cast<std::size_t>(r.op) < kObjectOpCount);
  RDMAGATE_FUZZ_CHECK(static_cast<std::uint16_t>(object_opcode(r.op)) == opcode);
  const bool inline_put = r.op == ObjectOp::kPut && type == MessageType::kInlineRequest;
  if (r.op == ObjectOp::kPut)
    RDMAGATE_FUZZ_CHECK(type == MessageType::kInlineRequest || type == MessageType::kReadChunkRequest);
  if (r.op == ObjectOp::kGet)
    RDMAGATE_FUZZ_CHECK(type == MessageType::kInlineRequest || type == MessageType::kWriteChunkRequest);
  if (r.op == ObjectOp::kDelete) RDMAGATE_FUZZ_CHECK(type == MessageType::kInlineRequest);

  // The key: 1..250 bytes right after its length byte; the value: exactly the rest (inline PUT only).
  RDMAGATE_FUZZ_CHECK(!payload.empty() && payload[0] == r.key.size());
  RDMAGATE_FUZZ_CHECK(r.key.size() >= 1 && r.key.size() <= kMaxKeyLength);
  RDMAGATE_FUZZ_CHECK(reinterpret_cast<const std::uint8_t*>(r.key.data()) == payload.data() + kKeyPrefixSize);
  if (inline_put) {
    RDMAGATE_FUZZ_CHECK(r.value.data() == payload.data() + kKeyPrefixSize + r.key.size());
    RDMAGATE_FUZZ_CHECK(object_payload_size(r.key.size(), r.value.size()) == payload.size());
  } else {
    RDMAGATE_FUZZ_CHECK(r.value.empty());
    RDMAGATE_FUZZ_CHECK(object_payload_size(r.key.size(), 0) == payload.size());
  }

  // Canonical: encoding what was parsed reproduces the payload byte for byte.
  const std::size_t n = payload.size();
  std::unique_ptr<std::uint8_t[]> out(new std::uint8_t[n + 1]);
  RDMAGATE_FUZZ_CHECK(encode_object_payload(r.key, r.value, {out.get(), n}) == n);
  RDMAGATE_FUZZ_CHECK(std::memcmp(out.get(), payload.data(), n) == 0);
  // One byte too small a buffer is refused, never written past.
  RDMAGATE_FUZZ_CHECK(encode_object_payload(r.key, r.value, {out.get(), n - 1}) == 0);

  // Truncated into the key is refused; a key-only form with one more byte is trailing bytes.
  ObjectRequest again;
  if (!inline_put || r.value.empty()) {
    RDMAGATE_FUZZ_CHECK(parse_object_request(type, opcode, payload.first(n - 1), again) !=
                        ObjectParseError::kOk);
  }
  if (!inline_put) {
    out[n] = 0;
    RDMAGATE_FUZZ_CHECK(parse_object_request(type, opcode, {out.get(), n + 1}, again) ==
                        ObjectParseError::kTrailingBytes);
  }
  return 0;
}

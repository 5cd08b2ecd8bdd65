#pragma once
// The payload of a gateway's cache-invalidation notify (docs/store.md "Consistency across gateways"):
//   byte 0    0x00 (never a key length: a gateway that predates the header reads it as malformed, and
//             malformed makes it forget its whole cache, which is safe)
//   byte 1    kInvalidationVersion
//   bytes 2-5 window_ms, little endian, 1..kMaxWindowMs: the receiver caches none of the keys from a read
//             or write it starts within this long after it handled the notify
//   then      the keys of the writes it covers, each a u8 length (1..protocol::kMaxKeyLength) and the key
//             bytes; at most kNotifyPayload bytes in all. No key: a gateway announcing its new watch.
// Pure and verbs-free: the worker encodes and decodes it, the fuzzer checks the decoder.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "protocol/object_wire.hpp"

namespace rdmagate::storage::rados {

inline constexpr std::size_t kNotifyPayload = 4096;
inline constexpr std::uint8_t kInvalidationVersion = 1;
inline constexpr std::size_t kInvalidationHeader = 6;
inline constexpr std::uint32_t kMaxWindowMs = 600000;

// Writes the header into buf (kNotifyPayload bytes); its length, where the keys start.
inline std::size_t begin_invalidation(std::span<char> buf, std::uint32_t window_ms) noexcept {
  if (buf.size() < kInvalidationHeader) return 0;
  buf[0] = 0;
  buf[1] = static_cast<char>(kInvalidationVersion);
  for (std::size_t i = 0; i < 4; ++i) buf[2 + i] = static_cast<char>(window_ms >> (8 * i) & 0xff);
  return kInvalidationHeader;
}

// Appends `key` at buf[used..]; the new length, or 0 when the key is not 1..kMaxKeyLength or does not fit.
inline std::size_t append_key(std::span<char> buf, std::size_t used, std::string_view key) noexcept {
  if (key.empty() || key.size() > protocol::kMaxKeyLength || used > buf.size() ||
      buf.size() - used < 1 + key.size()) {
    return 0;
  }
  buf[used] = static_cast<char>(key.size());
  std::memcpy(buf.data() + used + 1, key.data(), key.size());
  return used + 1 + key.size();
}

// Reads the header into *window_ms, then calls fn(key) for every key in order. False when the payload is
// not a version-1 invalidation, or malformed (a window out of range, a zero or too
// long key length, a key running past the end): fn has then seen the well-formed keys before the fault.
template <typename Fn>
bool parse_invalidation(std::span<const char> payload, std::uint32_t* window_ms, Fn&& fn) {
  if (payload.size() < kInvalidationHeader || payload.size() > kNotifyPayload || payload[0] != 0 ||
      static_cast<std::uint8_t>(payload[1]) != kInvalidationVersion) {
    return false;
  }
  std::uint32_t w = 0;
  for (std::size_t i = 0; i < 4; ++i)
    w |= std::uint32_t{static_cast<unsigned char>(payload[2 + i])} << (8 * i);
  if (w == 0 || w > kMaxWindowMs) return false;
  *window_ms = w;
  std::size_t pos = kInvalidationHeader;
  while (pos < payload.size()) {
    const std::size_t len = static_cast<unsigned char>(payload[pos]);
    if (len == 0 || len > protocol::kMaxKeyLength || len > payload.size() - pos - 1) return false;
    fn(std::string_view(payload.data() + pos + 1, len));
    pos += 1 + len;
  }
  return true;
}

}  // namespace rdmagate::storage::rados

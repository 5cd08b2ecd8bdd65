#pragma once
// The payload of a gateway's cache-invalidation notify (docs/store.md "On RADOS"): the keys of the writes it
// covers, each a u8 length (1..protocol::kMaxKeyLength) and the key bytes, at most kNotifyPayload bytes in
// all. Pure and verbs-free: the worker encodes and decodes it, the fuzzer checks the decoder.
#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>

#include "protocol/object_wire.hpp"

namespace rdmagate::storage::rados {

inline constexpr std::size_t kNotifyPayload = 4096;

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

// Calls fn(key) for every key in order. False when the payload is empty or malformed (a zero or too long
// length, a key running past the end): fn has then seen the well-formed keys before the fault.
template <typename Fn>
bool for_each_key(std::span<const char> payload, Fn&& fn) {
  if (payload.empty() || payload.size() > kNotifyPayload) return false;
  std::size_t pos = 0;
  while (pos < payload.size()) {
    const std::size_t len = static_cast<unsigned char>(payload[pos]);
    if (len == 0 || len > protocol::kMaxKeyLength || len > payload.size() - pos - 1) return false;
    fn(std::string_view(payload.data() + pos + 1, len));
    pos += 1 + len;
  }
  return true;
}

}  // namespace rdmagate::storage::rados

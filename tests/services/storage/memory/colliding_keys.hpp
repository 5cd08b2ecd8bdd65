// Keys that share one probe window under a given slot hash: what a peer who can compute the store's hash
// sends so that a chosen PUT fails with no_space (issue 15). Used by the host tests and the guest test
// (tests/rdma/store_collision_test.cpp). No gtest here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::store::test {

// The store's slot hash before it was keyed (a fixed murmur-style mix anyone could compute): kept here only
// to craft the keys that defeated it.
inline uint64_t unkeyed_hash(std::string_view key) {
  auto mix = [](uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
  };
  uint64_t h = 0x9e3779b97f4a7c15ull ^ key.size();
  size_t i = 0;
  for (; i + 8 <= key.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, key.data() + i, 8);
    h = mix(h ^ w) + 0x9e3779b97f4a7c15ull;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, key.data() + i, key.size() - i);
  return mix(h ^ tail);
}

// Slots in a key's probe window: 4 buckets of 7 (services/storage/memory/store.cpp).
inline constexpr size_t kWindowSlots = 28;

// `n` keys (other than `target`) whose home bucket under `hash` is target's: kWindowSlots of them, put
// first into an empty index, take every slot of target's window. `bucket_mask` is the index's (bucket
// count - 1). The search costs about (bucket count) x n hashes.
template <typename Hash>
std::vector<std::string> colliding_keys(const Hash& hash, uint64_t bucket_mask, std::string_view target,
                                        size_t n) {
  const uint64_t home = hash(target) & bucket_mask;
  std::vector<std::string> keys;
  for (uint64_t i = 0; keys.size() < n; ++i) {
    std::string k("collide-");
    k.append(std::to_string(i));
    if (k != target && (hash(k) & bucket_mask) == home) keys.push_back(std::move(k));
  }
  return keys;
}

}  // namespace rdmagate::store::test

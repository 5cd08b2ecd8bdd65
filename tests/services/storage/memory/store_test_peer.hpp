// A friend peer that reads the memory store's private accounting. No gtest: the core-loop fuzzer uses it too.
#pragma once

#include <cstdint>
#include <string_view>

#include "services/storage/memory/store.hpp"

namespace rdmagate::store {

class StoreTestPeer {
 public:
  static uint64_t allocator_free_bytes(const Store& s) { return s.allocator_.free_bytes(); }
  static uint64_t arena_bytes(const Store& s) { return s.allocator_.arena_bytes(); }
  static uint32_t descriptor_count(const Store& s) { return s.descriptor_count_; }
  static uint32_t free_descriptors(const Store& s) { return s.count_free_descriptors(); }  // quiescent only
  static uint32_t refs(const Store& s, uint32_t token) { return s.refs_of(token); }
  // The index: a key's home bucket is hash & bucket_mask.
  static uint64_t bucket_mask(const Store& s) { return s.bucket_mask_; }
  static uint64_t hash_of(const Store& s, std::string_view key) { return s.hash_key(0, key); }
  using HashSeed = Store::HashSeed;
  static HashSeed hash_seed(const Store& s) { return s.hash_seed_; }
  // A seed the test knows, as an attacker who learnt it would; only on an empty store (slots hold hashes).
  static void set_hash_seed(Store& s, const HashSeed& seed) { s.hash_seed_ = seed; }
};

}  // namespace rdmagate::store

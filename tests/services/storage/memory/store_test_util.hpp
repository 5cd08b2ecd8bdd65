// Shared helpers of the store tests: heap regions standing in for EAL hugepage memory, value patterns, and
// the friend peer that reads the store's private accounting (store_test_peer.hpp).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "services/storage/memory/store.hpp"
#include "tests/services/storage/memory/store_test_peer.hpp"

namespace rdmagate::store {

namespace test {

struct Region {
  explicit Region(size_t bytes) : storage(new std::byte[bytes]), size(bytes) {}
  std::span<std::byte> span() { return {storage.get(), size}; }
  std::unique_ptr<std::byte[]> storage;
  size_t size;
};

inline std::unique_ptr<Store> make_store(Region& region, const StoreConfig& config) {
  std::string error;
  auto s = Store::create(config, region.span(), &error);
  if (!s) ADD_FAILURE() << error;
  return s;
}

inline std::vector<std::byte> pattern(size_t size, uint32_t seed) {
  std::vector<std::byte> v(size);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<std::byte>(x >> 24);
  }
  return v;
}

// Built by append: GCC 12 at -O3 reports a false -Wrestrict on `"literal" + std::to_string(i)`.
inline std::string key_of(const char* prefix, uint64_t i) {
  std::string k(prefix);
  k.append(std::to_string(i));
  return k;
}

inline std::span<const std::byte> as_span(const std::vector<std::byte>& v) { return {v.data(), v.size()}; }

// Quiescent-store check: every byte of capacity, block and descriptor is back.
inline void expect_empty(const Store& s) {
  const StoreStats st = s.stats();
  EXPECT_EQ(st.objects, 0u);
  EXPECT_EQ(st.value_bytes, 0u);
  EXPECT_EQ(st.used_bytes, 0u);
  EXPECT_EQ(StoreTestPeer::allocator_free_bytes(s), StoreTestPeer::arena_bytes(s));
  EXPECT_EQ(StoreTestPeer::free_descriptors(s), StoreTestPeer::descriptor_count(s));
}

}  // namespace test
}  // namespace rdmagate::store

// A friend peer that reads the memory store's private accounting. No gtest: the core-loop fuzzer uses it too.
#pragma once

#include <cstdint>

#include "services/storage/memory/store.hpp"

namespace rdmagate::store {

class StoreTestPeer {
 public:
  static uint64_t allocator_free_bytes(const Store& s) { return s.allocator_.free_bytes(); }
  static uint64_t arena_bytes(const Store& s) { return s.allocator_.arena_bytes(); }
  static uint32_t descriptor_count(const Store& s) { return s.descriptor_count_; }
  static uint32_t free_descriptors(const Store& s) { return s.count_free_descriptors(); }  // quiescent only
  static uint32_t refs(const Store& s, uint32_t token) { return s.refs_of(token); }
};

}  // namespace rdmagate::store

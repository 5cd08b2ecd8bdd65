// Buddy allocator for value blocks inside caller-provided memory.
//
// Blocks are powers of two from 64 B (order 0) to 64 B << max_order. A freed block merges with its free
// buddy, so memory never stays stranded in one size class: the only waste is the rounding of a value up to
// its class, plus buddy fragmentation under mixed sizes (documented in docs/store.md).
//
// All state lives in memory the caller hands over (the per-unit order map and the free-list links, which
// sit inside the free blocks themselves); nothing is allocated after init. One spinlock serialises
// alloc/free: the critical section is O(max_order) list operations, never a syscall.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace rdmagate::store {

class BlockAllocator {
 public:
  static constexpr uint32_t kUnitShift = 6;  // 64 B: the smallest block
  static constexpr uint64_t kUnitBytes = uint64_t{1} << kUnitShift;
  static constexpr uint32_t kMaxOrders = 40;
  static constexpr uint32_t kNoBlock = 0xffffffffu;

  // Bytes of order map needed for an arena of `arena_bytes`.
  static uint64_t map_bytes(uint64_t arena_bytes) { return arena_bytes >> kUnitShift; }

  // Order of the smallest block holding `bytes` (bytes >= 1).
  static uint32_t order_for(uint64_t bytes);
  static uint64_t order_bytes(uint32_t order) { return kUnitBytes << order; }

  // `arena` must be 64-byte aligned; `map` holds map_bytes(arena_bytes) bytes. Blocks never exceed
  // `max_order`. The arena is carved greedily into aligned blocks of at most max_order.
  void init(std::byte* arena, uint64_t arena_bytes, uint8_t* map, uint32_t max_order);

  // Returns the unit index of a block of `order`, or kNoBlock when no block of that size is free.
  uint32_t alloc(uint32_t order);
  void free(uint32_t unit, uint32_t order);

  std::byte* address(uint32_t unit) const { return arena_ + (static_cast<uint64_t>(unit) << kUnitShift); }
  uint64_t arena_bytes() const { return static_cast<uint64_t>(units_) << kUnitShift; }
  uint64_t free_bytes() const;  // takes the lock; for stats and tests, not the data path
  uint32_t max_order() const { return max_order_; }

 private:
  friend class BlockAllocatorTestPeer;

  struct FreeLink {  // stored in the first bytes of a free block
    uint32_t next;
    uint32_t prev;
  };

  FreeLink* link(uint32_t unit) const { return reinterpret_cast<FreeLink*>(address(unit)); }
  void push_locked(uint32_t unit, uint32_t order);
  void unlink_locked(uint32_t unit, uint32_t order);
  void lock();
  void unlock() { lock_.store(false, std::memory_order_release); }

  std::byte* arena_{nullptr};
  uint32_t units_{0};
  uint8_t* map_{nullptr};  // per unit: 0, or order + 1 when a free block of that order starts there
  uint32_t max_order_{0};
  uint32_t heads_[kMaxOrders]{};
  uint64_t free_units_{0};
  alignas(64) std::atomic<bool> lock_{false};
};

}  // namespace rdmagate::store

#include "services/storage/memory/block_allocator.hpp"

#include <bit>
#include <cstring>

namespace rdmagate::store {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

uint32_t BlockAllocator::order_for(uint64_t bytes) {
  const uint64_t units = (bytes + kUnitBytes - 1) >> kUnitShift;
  return units <= 1 ? 0 : static_cast<uint32_t>(std::bit_width(units - 1));
}

void BlockAllocator::init(std::byte* arena, uint64_t arena_bytes, uint8_t* map, uint32_t max_order) {
  arena_ = arena;
  // Unit indices are 32-bit; a larger arena is clipped (256 GiB of 64 B units is far beyond any config).
  const uint64_t units = arena_bytes >> kUnitShift;
  units_ = units > 0xfffffff0u ? 0xfffffff0u : static_cast<uint32_t>(units);
  map_ = map;
  max_order_ = max_order < kMaxOrders ? max_order : kMaxOrders - 1;
  std::memset(map_, 0, units_);
  for (uint32_t& h : heads_) h = kNoBlock;
  free_units_ = 0;
  // Greedy carve: every block is aligned to its own size, so a buddy computed by XOR either lies wholly
  // inside the arena or is never marked free; merging can therefore never grow past the arena's end.
  uint64_t unit = 0;
  while (unit < units_) {
    uint32_t order = max_order_;
    while (order > 0 && ((unit & ((uint64_t{1} << order) - 1)) != 0 || unit + (uint64_t{1} << order) > units_)) {
      --order;
    }
    push_locked(static_cast<uint32_t>(unit), order);
    unit += uint64_t{1} << order;
  }
}

void BlockAllocator::lock() {
  for (;;) {
    if (!lock_.exchange(true, std::memory_order_acquire)) return;
    while (lock_.load(std::memory_order_relaxed)) cpu_relax();
  }
}

void BlockAllocator::push_locked(uint32_t unit, uint32_t order) {
  FreeLink* l = link(unit);
  l->next = heads_[order];
  l->prev = kNoBlock;
  if (heads_[order] != kNoBlock) link(heads_[order])->prev = unit;
  heads_[order] = unit;
  map_[unit] = static_cast<uint8_t>(order + 1);
  free_units_ += uint64_t{1} << order;
}

void BlockAllocator::unlink_locked(uint32_t unit, uint32_t order) {
  FreeLink* l = link(unit);
  if (l->prev != kNoBlock) {
    link(l->prev)->next = l->next;
  } else {
    heads_[order] = l->next;
  }
  if (l->next != kNoBlock) link(l->next)->prev = l->prev;
  map_[unit] = 0;
  free_units_ -= uint64_t{1} << order;
}

uint32_t BlockAllocator::alloc(uint32_t order) {
  if (order > max_order_) return kNoBlock;
  lock();
  uint32_t have = order;
  while (have <= max_order_ && heads_[have] == kNoBlock) ++have;
  if (have > max_order_) {
    unlock();
    return kNoBlock;
  }
  const uint32_t unit = heads_[have];
  unlink_locked(unit, have);
  while (have > order) {
    --have;
    push_locked(unit + (uint32_t{1} << have), have);
  }
  unlock();
  return unit;
}

void BlockAllocator::free(uint32_t unit, uint32_t order) {
  lock();
  while (order < max_order_) {
    const uint32_t buddy = unit ^ (uint32_t{1} << order);
    if (buddy >= units_ || map_[buddy] != order + 1) break;
    unlink_locked(buddy, order);
    unit = unit < buddy ? unit : buddy;
    ++order;
  }
  push_locked(unit, order);
  unlock();
}

uint64_t BlockAllocator::free_bytes() const {
  auto* self = const_cast<BlockAllocator*>(this);
  self->lock();
  const uint64_t units = free_units_;
  self->unlock();
  return units << kUnitShift;
}

}  // namespace rdmagate::store

#include "services/storage/memory/block_allocator.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

namespace rdmagate::store {
namespace {

struct Arena {
  explicit Arena(uint64_t bytes)
      : mem(new std::byte[bytes + 64]), map(new uint8_t[BlockAllocator::map_bytes(bytes)]) {
    auto p = (reinterpret_cast<uintptr_t>(mem.get()) + 63) & ~uintptr_t{63};
    base = reinterpret_cast<std::byte*>(p);
  }
  std::unique_ptr<std::byte[]> mem;
  std::unique_ptr<uint8_t[]> map;
  std::byte* base;
};

TEST(BlockAllocator, OrderForRoundsUpToPowersOfTwoFrom64) {
  EXPECT_EQ(BlockAllocator::order_for(1), 0u);
  EXPECT_EQ(BlockAllocator::order_for(64), 0u);
  EXPECT_EQ(BlockAllocator::order_for(65), 1u);
  EXPECT_EQ(BlockAllocator::order_for(128), 1u);
  EXPECT_EQ(BlockAllocator::order_for(4096), 6u);
  EXPECT_EQ(BlockAllocator::order_for(uint64_t{4} << 20), 16u);
  EXPECT_EQ(BlockAllocator::order_bytes(16), uint64_t{4} << 20);
}

TEST(BlockAllocator, SmallBlocksMergeBackIntoLargest) {
  constexpr uint64_t kBytes = 64 * 1024;
  Arena a(kBytes);
  BlockAllocator alloc;
  alloc.init(a.base, kBytes, a.map.get(), 10);  // 64 KiB top blocks: exactly one
  EXPECT_EQ(alloc.free_bytes(), kBytes);
  std::vector<uint32_t> units;
  std::set<uint32_t> seen;
  for (;;) {
    const uint32_t u = alloc.alloc(0);
    if (u == BlockAllocator::kNoBlock) break;
    EXPECT_TRUE(seen.insert(u).second) << "unit handed out twice";
    units.push_back(u);
  }
  EXPECT_EQ(units.size(), kBytes / 64);
  EXPECT_EQ(alloc.free_bytes(), 0u);
  EXPECT_EQ(alloc.alloc(10), BlockAllocator::kNoBlock);
  // Free in an interleaved order so merges happen out of sequence.
  for (size_t i = 0; i < units.size(); i += 2) alloc.free(units[i], 0);
  EXPECT_EQ(alloc.alloc(1), BlockAllocator::kNoBlock);  // only isolated 64 B holes
  for (size_t i = 1; i < units.size(); i += 2) alloc.free(units[i], 0);
  EXPECT_EQ(alloc.free_bytes(), kBytes);
  EXPECT_EQ(alloc.alloc(10), 0u);
  EXPECT_EQ(alloc.alloc(0), BlockAllocator::kNoBlock);
  alloc.free(0, 10);
  EXPECT_EQ(alloc.free_bytes(), kBytes);
}

TEST(BlockAllocator, ArenaNotAMultipleOfTheTopBlockIsUsedAndNeverOverrun) {
  constexpr uint64_t kBytes = 3 * 4096 + 3 * 64;  // 3 top blocks of 4 KiB plus 128 B and 64 B remainders
  Arena a(kBytes);
  BlockAllocator alloc;
  alloc.init(a.base, kBytes, a.map.get(), 6);
  EXPECT_EQ(alloc.free_bytes(), kBytes);
  std::vector<uint32_t> units;
  for (uint32_t u; (u = alloc.alloc(0)) != BlockAllocator::kNoBlock;) {
    EXPECT_LT((uint64_t{u} + 1) * 64, kBytes + 1);
    units.push_back(u);
  }
  EXPECT_EQ(units.size(), kBytes / 64);
  for (uint32_t u : units) alloc.free(u, 0);
  EXPECT_EQ(alloc.free_bytes(), kBytes);
  // The remainder never merges into a 4 KiB block past the end: exactly 3 top blocks exist.
  for (int i = 0; i < 3; ++i) EXPECT_NE(alloc.alloc(6), BlockAllocator::kNoBlock);
  EXPECT_EQ(alloc.alloc(6), BlockAllocator::kNoBlock);
  EXPECT_NE(alloc.alloc(1), BlockAllocator::kNoBlock);
  EXPECT_NE(alloc.alloc(0), BlockAllocator::kNoBlock);
  EXPECT_EQ(alloc.free_bytes(), 0u);
}

TEST(BlockAllocator, OrderAboveMaxIsRefused) {
  constexpr uint64_t kBytes = 8192;
  Arena a(kBytes);
  BlockAllocator alloc;
  alloc.init(a.base, kBytes, a.map.get(), 6);
  EXPECT_EQ(alloc.alloc(7), BlockAllocator::kNoBlock);
}

}  // namespace
}  // namespace rdmagate::store

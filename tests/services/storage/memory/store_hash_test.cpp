// The keyed slot hash (issue 15): keys crafted to share one probe window make a chosen PUT fail only when
// the attacker can compute the hash (the old unkeyed one, or a seed it learnt); under a seed drawn per
// process the same keys spread and the PUT succeeds. Window-full refusals are counted apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "services/storage/memory/store.hpp"
#include "store_test_util.hpp"
#include "tests/services/storage/memory/colliding_keys.hpp"

namespace rdmagate::store {
namespace {

using test::as_span;
using test::colliding_keys;
using test::expect_empty;
using test::kWindowSlots;
using test::make_store;
using test::pattern;
using test::Region;

constexpr const char* kTarget = "the-key-they-want-refused";

StoreConfig index_config() {
  StoreConfig c;
  c.max_value = 4096;
  c.max_objects = 1024;  // 1,024 buckets: 28 crafted keys are 3% of the objects the store is sized for
  c.max_inflight = 64;
  c.max_cores = 2;
  return c;
}

// PUTs every crafted key, then the target; returns the target's status. Every crafted PUT must succeed.
Status put_crafted_then_target(Store& s, const std::vector<std::string>& crafted) {
  const auto v = pattern(64, 1);
  for (const auto& k : crafted) {
    const Status st = s.put(0, k, as_span(v));
    EXPECT_EQ(st, Status::kOk) << k;
  }
  return s.put(1, kTarget, as_span(v));
}

void remove_all(Store& s, const std::vector<std::string>& crafted) {
  for (const auto& k : crafted) EXPECT_EQ(s.remove(0, k), Status::kOk) << k;
  (void)s.remove(1, kTarget);
}

TEST(StoreHash, KeysCraftedForAKnownSeedFillTheWindowAndTheRefusalIsCounted) {
  // The attack as it worked before the hash was keyed: the attacker computes the hash (here it knows the
  // seed). 28 keys with the target's home bucket take all 28 slots of its window.
  Region r(8 << 20);
  auto s = make_store(r, index_config());
  ASSERT_NE(s, nullptr);
  StoreTestPeer::HashSeed known{};
  for (size_t i = 0; i < known.size(); ++i) known[i] = static_cast<unsigned char>(i);
  StoreTestPeer::set_hash_seed(*s, known);
  const Store& view = *s;
  const auto crafted = colliding_keys([&](std::string_view k) { return StoreTestPeer::hash_of(view, k); },
                                      StoreTestPeer::bucket_mask(*s), kTarget, kWindowSlots);
  EXPECT_EQ(put_crafted_then_target(*s, crafted), Status::kNoSpace);
  const StoreStats st = s->stats();
  EXPECT_EQ(st.window_full, 1u);
  EXPECT_EQ(st.ops[static_cast<size_t>(protocol::ObjectOp::kPut)][static_cast<size_t>(Status::kNoSpace)], 1u);
  EXPECT_LT(st.used_bytes, st.capacity_bytes / 10);  // refused with the store nearly empty: not capacity
  remove_all(*s, crafted);
  expect_empty(*s);
}

TEST(StoreHash, KeysCraftedForAnotherSeedOrTheUnkeyedHashDoNotCollide) {
  // Keys crafted under a seed the store does not use (the attacker guessed), and under the old unkeyed
  // hash: with the store's own seed, drawn at create(), the target's PUT succeeds.
  Region r(8 << 20);
  auto s = make_store(r, index_config());
  ASSERT_NE(s, nullptr);
  const uint64_t mask = StoreTestPeer::bucket_mask(*s);

  Region r2(8 << 20);
  auto other = make_store(r2, index_config());
  ASSERT_NE(other, nullptr);
  StoreTestPeer::HashSeed guessed{};
  for (size_t i = 0; i < guessed.size(); ++i) guessed[i] = static_cast<unsigned char>(i);
  StoreTestPeer::set_hash_seed(*other, guessed);
  const Store& other_view = *other;
  const auto for_guessed_seed = colliding_keys(
      [&](std::string_view k) { return StoreTestPeer::hash_of(other_view, k); }, mask, kTarget, kWindowSlots);
  const auto for_unkeyed = colliding_keys(test::unkeyed_hash, mask, kTarget, kWindowSlots);

  for (const auto* crafted : {&for_guessed_seed, &for_unkeyed}) {
    // Both sets do share one home bucket under the hash they were made for ...
    EXPECT_EQ(crafted->size(), kWindowSlots);
    // ... and not under this store's: they spread over many buckets.
    std::vector<uint64_t> homes;
    for (const auto& k : *crafted) homes.push_back(StoreTestPeer::hash_of(*s, k) & mask);
    std::sort(homes.begin(), homes.end());
    EXPECT_GT(std::unique(homes.begin(), homes.end()) - homes.begin(), 10);
    EXPECT_EQ(put_crafted_then_target(*s, *crafted), Status::kOk);
    remove_all(*s, *crafted);
  }
  EXPECT_EQ(s->stats().window_full, 0u);
  expect_empty(*s);
}

TEST(StoreHash, EachStoreDrawsItsOwnSeed) {
  Region r1(4 << 20), r2(4 << 20);
  auto a = make_store(r1, index_config());
  auto b = make_store(r2, index_config());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(StoreTestPeer::hash_seed(*a), StoreTestPeer::hash_seed(*b));
  EXPECT_NE(StoreTestPeer::hash_seed(*a), StoreTestPeer::HashSeed{});
  EXPECT_NE(StoreTestPeer::hash_of(*a, kTarget), StoreTestPeer::hash_of(*b, kTarget));
  // Stable within a store: the same key always finds its slot.
  EXPECT_EQ(StoreTestPeer::hash_of(*a, kTarget), StoreTestPeer::hash_of(*a, std::string(kTarget)));
}

TEST(StoreHash, SipHashKnownAnswer) {
  // SipHash-2-4 reference vector (Aumasson and Bernstein, appendix A): key 00..0f, message 00..0e (15
  // bytes) gives a129ca6149be45e5, read as little-endian bytes e5 45 be 49 61 ca 29 a1.
  Region r(4 << 20);
  auto s = make_store(r, index_config());
  ASSERT_NE(s, nullptr);
  StoreTestPeer::HashSeed key{};
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<unsigned char>(i);
  StoreTestPeer::set_hash_seed(*s, key);
  std::string msg;
  for (char i = 0; i < 15; ++i) msg.push_back(i);
  EXPECT_EQ(StoreTestPeer::hash_of(*s, msg), 0xa129ca6149be45e5ull);
}

}  // namespace
}  // namespace rdmagate::store

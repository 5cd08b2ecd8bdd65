// Single-threaded semantics: every status, size edges, capacity, pins and reservations.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "services/storage/memory/store.hpp"
#include "store_test_util.hpp"

namespace rdmagate::store {
namespace {

using protocol::ObjectOp;
using test::as_span;
using test::expect_empty;
using test::make_store;
using test::pattern;
using test::Region;

constexpr uint64_t kMaxValue = 64 * 1024;

StoreConfig small_config() {
  StoreConfig c;
  c.max_value = kMaxValue;
  c.max_objects = 256;
  c.max_inflight = 64;
  c.max_cores = 4;
  return c;
}

bool value_is(const PinnedValue& v, const std::vector<std::byte>& want) {
  return v.size == want.size() && (want.empty() || std::memcmp(v.data, want.data(), want.size()) == 0);
}

TEST(Store, CreateRejectsBadConfigAndTinyRegion) {
  Region r(1 << 20);
  std::string error;
  StoreConfig c = small_config();
  c.max_objects = 0;
  EXPECT_EQ(Store::create(c, r.span(), &error), nullptr);
  EXPECT_FALSE(error.empty());
  c = small_config();
  c.max_cores = 0;
  EXPECT_EQ(Store::create(c, r.span(), &error), nullptr);
  c = small_config();
  c.max_value = uint64_t{4} << 30;
  EXPECT_EQ(Store::create(c, r.span(), &error), nullptr);
  Region tiny(4096);
  EXPECT_EQ(Store::create(small_config(), tiny.span(), &error), nullptr);
  EXPECT_NE(error.find("too small"), std::string::npos);
}

TEST(Store, PutGetDeleteAndEveryStatus) {
  Region r(4 << 20);
  auto s = make_store(r, small_config());
  ASSERT_NE(s, nullptr);
  const auto v = pattern(100, 1);
  PinnedValue got;
  EXPECT_EQ(s->get(0, "k", &got), Status::kNotFound);
  EXPECT_EQ(got.token, PinnedValue::kNoToken);
  EXPECT_EQ(s->remove(0, "k"), Status::kNotFound);
  EXPECT_EQ(s->put(0, "k", as_span(v)), Status::kOk);
  ASSERT_EQ(s->get(0, "k", &got), Status::kOk);
  EXPECT_TRUE(value_is(got, v));
  s->unpin(&got);
  EXPECT_EQ(got.token, PinnedValue::kNoToken);
  s->unpin(&got);  // empty: a no-op

  const auto big = pattern(kMaxValue + 1, 2);
  EXPECT_EQ(s->put(0, "k", as_span(big)), Status::kTooLarge);
  EXPECT_EQ(s->put(0, "", as_span(v)), Status::kBadRequest);
  EXPECT_EQ(s->get(0, "", &got), Status::kBadRequest);
  EXPECT_EQ(s->remove(0, ""), Status::kBadRequest);
  const std::string k251(251, 'x');
  EXPECT_EQ(s->put(0, k251, as_span(v)), Status::kBadRequest);
  EXPECT_EQ(s->get(0, k251, &got), Status::kBadRequest);
  EXPECT_EQ(s->remove(0, k251), Status::kBadRequest);

  EXPECT_EQ(s->remove(1, "k"), Status::kOk);
  EXPECT_EQ(s->get(1, "k", &got), Status::kNotFound);

  const StoreStats st = s->stats();
  EXPECT_EQ(st.ops[uint32_t(ObjectOp::kPut)][uint32_t(Status::kOk)], 1u);
  EXPECT_EQ(st.ops[uint32_t(ObjectOp::kPut)][uint32_t(Status::kTooLarge)], 1u);
  EXPECT_EQ(st.ops[uint32_t(ObjectOp::kPut)][uint32_t(Status::kBadRequest)], 2u);
  EXPECT_EQ(st.ops[uint32_t(ObjectOp::kGet)][uint32_t(Status::kOk)], 1u);
  EXPECT_EQ(st.ops[uint32_t(ObjectOp::kGet)][uint32_t(Status::kNotFound)], 2u);
  EXPECT_EQ(st.ops[uint32_t(ObjectOp::kGet)][uint32_t(Status::kBadRequest)], 2u);
  EXPECT_EQ(st.ops[uint32_t(ObjectOp::kDelete)][uint32_t(Status::kOk)], 1u);
  EXPECT_EQ(st.ops[uint32_t(ObjectOp::kDelete)][uint32_t(Status::kNotFound)], 1u);
  EXPECT_EQ(st.ops[uint32_t(ObjectOp::kDelete)][uint32_t(Status::kBadRequest)], 2u);
  EXPECT_STREQ(status_name(Status::kNoSpace), "no_space");
  expect_empty(*s);
}

TEST(Store, NoSpaceStatusIsCounted) {
  Region r(4 << 20);
  StoreConfig c = small_config();
  c.capacity_bytes = 1;  // nothing fits
  auto s = make_store(r, c);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->put(2, "k", as_span(pattern(1, 1))), Status::kNoSpace);
  EXPECT_EQ(s->stats().ops[uint32_t(ObjectOp::kPut)][uint32_t(Status::kNoSpace)], 1u);
  expect_empty(*s);
}

TEST(Store, ValueSizesZeroOneMaxAndMaxPlusOne) {
  Region r(4 << 20);
  auto s = make_store(r, small_config());
  ASSERT_NE(s, nullptr);
  for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{63}, uint64_t{64}, uint64_t{65}, kMaxValue}) {
    const auto v = pattern(size, static_cast<uint32_t>(size));
    const std::string key = test::key_of("size-", size);
    ASSERT_EQ(s->put(0, key, as_span(v)), Status::kOk) << size;
    PinnedValue got;
    ASSERT_EQ(s->get(0, key, &got), Status::kOk) << size;
    EXPECT_TRUE(value_is(got, v)) << size;
    s->unpin(&got);
  }
  EXPECT_EQ(s->put(0, "over", as_span(pattern(kMaxValue + 1, 9))), Status::kTooLarge);
  Reservation res;
  EXPECT_EQ(s->reserve(0, "over", kMaxValue + 1, &res), Status::kTooLarge);
  EXPECT_EQ(s->stats().objects, 6u);
  EXPECT_EQ(s->stats().value_bytes, 0u + 1 + 63 + 64 + 65 + kMaxValue);
  for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{63}, uint64_t{64}, uint64_t{65}, kMaxValue}) {
    EXPECT_EQ(s->remove(0, test::key_of("size-", size)), Status::kOk);
  }
  expect_empty(*s);
}

TEST(Store, KeyLengthsOneAndMaxAndBinaryKeys) {
  Region r(4 << 20);
  auto s = make_store(r, small_config());
  ASSERT_NE(s, nullptr);
  const std::string k1 = "a";
  const std::string k250(250, 'z');
  std::string binary(17, '\0');
  binary[5] = '\xff';
  std::string binary2 = binary;
  binary2[16] = '\x01';  // differs only in the tail word
  const std::string* keys[] = {&k1, &k250, &binary, &binary2};
  for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(s->put(0, *keys[i], as_span(pattern(10, i))), Status::kOk);
  for (uint32_t i = 0; i < 4; ++i) {
    PinnedValue got;
    ASSERT_EQ(s->get(0, *keys[i], &got), Status::kOk);
    EXPECT_TRUE(value_is(got, pattern(10, i))) << i;
    s->unpin(&got);
  }
  EXPECT_EQ(s->stats().objects, 4u);
  for (const std::string* k : keys) EXPECT_EQ(s->remove(0, *k), Status::kOk);
  expect_empty(*s);
}

TEST(Store, OverwriteReplacesValueAndKeepsOneObject) {
  Region r(4 << 20);
  auto s = make_store(r, small_config());
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->put(0, "k", as_span(pattern(1000, 1))), Status::kOk);
  ASSERT_EQ(s->put(1, "k", as_span(pattern(10, 2))), Status::kOk);
  PinnedValue got;
  ASSERT_EQ(s->get(0, "k", &got), Status::kOk);
  EXPECT_TRUE(value_is(got, pattern(10, 2)));
  s->unpin(&got);
  EXPECT_EQ(s->stats().objects, 1u);
  EXPECT_EQ(s->stats().value_bytes, 10u);
  EXPECT_EQ(s->stats().used_bytes, s->charge_for(10));
  ASSERT_EQ(s->remove(0, "k"), Status::kOk);
  expect_empty(*s);
}

TEST(Store, CapacityExhaustionReturnsNoSpaceAndDeleteFreesIt) {
  Region r(4 << 20);
  StoreConfig c = small_config();
  c.capacity_bytes = 10 * (4096 + 1024);  // roomy for 10 objects of 4 KiB with their descriptors
  auto s = make_store(r, c);
  ASSERT_NE(s, nullptr);
  const uint64_t per = s->charge_for(4096);
  const uint64_t fits = s->capacity_bytes() / per;
  ASSERT_GE(fits, 1u);
  for (uint64_t i = 0; i < fits; ++i) {
    ASSERT_EQ(s->put(0, test::key_of("k", i), as_span(pattern(4096, uint32_t(i)))), Status::kOk) << i;
  }
  EXPECT_EQ(s->put(0, "one-more", as_span(pattern(4096, 99))), Status::kNoSpace);
  // Nothing was evicted to make room.
  for (uint64_t i = 0; i < fits; ++i) {
    PinnedValue got;
    ASSERT_EQ(s->get(0, test::key_of("k", i), &got), Status::kOk);
    EXPECT_TRUE(value_is(got, pattern(4096, uint32_t(i))));
    s->unpin(&got);
  }
  // An overwrite needs room for the new copy while the old one is still published.
  EXPECT_EQ(s->put(0, "k0", as_span(pattern(4096, 7))), Status::kNoSpace);
  ASSERT_EQ(s->remove(0, "k0"), Status::kOk);
  EXPECT_EQ(s->put(0, "one-more", as_span(pattern(4096, 99))), Status::kOk);
  ASSERT_EQ(s->remove(0, "one-more"), Status::kOk);
  for (uint64_t i = 1; i < fits; ++i) ASSERT_EQ(s->remove(0, test::key_of("k", i)), Status::kOk);
  expect_empty(*s);
}

TEST(Store, WholeRegionCapacityIsUsableAndReturns) {
  Region r(2 << 20);
  auto s = make_store(r, small_config());
  ASSERT_NE(s, nullptr);
  // Metadata and arena together fit the region (the region may lose up to 64 B to alignment).
  EXPECT_GT(s->arena_bytes(), 0u);
  EXPECT_LE(Store::metadata_bytes(small_config(), r.size) + s->arena_bytes(), r.size + 64);
  EXPECT_EQ(s->capacity_bytes(), s->arena_bytes() + 320u * (256 + 64));
  // Fill with max-size values until the arena (not the accounting) says no.
  uint32_t n = 0;
  while (s->put(0, test::key_of("big", n), as_span(pattern(kMaxValue, n))) == Status::kOk) ++n;
  EXPECT_GE(n, 1u);
  EXPECT_LE(n * s->charge_for(kMaxValue), s->capacity_bytes());
  EXPECT_GT(s->stats().used_bytes, 0u);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(s->remove(0, test::key_of("big", i)), Status::kOk);
  expect_empty(*s);
  // After merging back, the same number fits again.
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(s->put(0, test::key_of("big", i), as_span(pattern(kMaxValue, i))), Status::kOk);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(s->remove(0, test::key_of("big", i)), Status::kOk);
  expect_empty(*s);
}

TEST(Store, IndexFullReturnsNoSpace) {
  Region r(4 << 20);
  StoreConfig c = small_config();
  c.max_objects = 4;
  c.max_inflight = 2;
  auto s = make_store(r, c);
  ASSERT_NE(s, nullptr);
  uint32_t ok = 0;
  for (uint32_t i = 0; i < 10; ++i) {
    const Status st = s->put(0, test::key_of("k", i), as_span(pattern(8, i)));
    ASSERT_TRUE(st == Status::kOk || st == Status::kNoSpace);
    if (st == Status::kOk) ++ok;
  }
  EXPECT_GE(ok, 4u);
  EXPECT_LE(ok, 6u);  // bounded by descriptors: objects + in-flight
  EXPECT_EQ(s->stats().objects, ok);
  for (uint32_t i = 0; i < 10; ++i) (void)s->remove(0, test::key_of("k", i));
  expect_empty(*s);
}

TEST(Store, FullIndexWindowReturnsNoSpaceAndRefundsTheReservation) {
  Region r(4 << 20);
  StoreConfig c = small_config();
  c.max_objects = 4;     // 4 buckets of 7 slots: every key's 4-bucket window is the whole table
  c.max_inflight = 100;  // so descriptors are not the limit
  auto s = make_store(r, c);
  ASSERT_NE(s, nullptr);
  uint32_t ok = 0;
  for (uint32_t i = 0; i < 40; ++i) {
    const Status st = s->put(0, test::key_of("k", i), as_span(pattern(8, i)));
    ASSERT_TRUE(st == Status::kOk || st == Status::kNoSpace);
    if (st == Status::kOk) ++ok;
  }
  EXPECT_EQ(ok, 28u);
  EXPECT_EQ(s->stats().used_bytes, 28 * s->charge_for(8));  // refused commits gave their charge back
  // Overwrites of present keys still work: they reuse the key's slot.
  EXPECT_EQ(s->put(0, "k0", as_span(pattern(8, 77))), Status::kOk);
  for (uint32_t i = 0; i < 40; ++i) (void)s->remove(0, test::key_of("k", i));
  expect_empty(*s);
}

// max_objects is a promise: a store takes that many distinct keys without meeting a full probe window.
// 7,168 objects is the sizing's worst case (exactly a quarter of 4,096 buckets' slots); 16,384 is the index
// of the gateway's 64 MiB test store, whose fills met a full window 1,570 times in 2,000 under the old
// half-full sizing (docs/store.md). Each fill here draws its own hash seed.
TEST(Store, FilledToMaxObjectsWithoutAFullProbeWindow) {
  for (const uint32_t max_objects : {7168u, 16384u}) {
    StoreConfig c;
    c.max_value = 64;
    c.max_objects = max_objects;
    c.max_inflight = 16;
    c.max_cores = 1;
    const uint64_t values = uint64_t{max_objects} * 512;  // class size + descriptor, with room to spare
    Region r(values + Store::metadata_bytes(c, values) + (1 << 20));
    const auto v = pattern(64, 7);
    for (int fill = 0; fill < 8; ++fill) {
      auto s = make_store(r, c);
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(StoreTestPeer::bucket_mask(*s) + 1, max_objects == 7168u ? 4096u : 16384u);
      for (uint32_t i = 0; i < max_objects; ++i) {
        ASSERT_EQ(s->put(0, test::key_of("b-", i), as_span(v)), Status::kOk)
            << "key " << i << " of " << max_objects;
      }
      EXPECT_EQ(s->stats().objects, max_objects);
      EXPECT_EQ(s->stats().window_full, 0u);
    }
  }
}

TEST(Store, PinnedValueSurvivesOverwriteAndDeleteUntilUnpinned) {
  Region r(4 << 20);
  auto s = make_store(r, small_config());
  ASSERT_NE(s, nullptr);
  const auto v1 = pattern(4096, 1);
  ASSERT_EQ(s->put(0, "k", as_span(v1)), Status::kOk);
  PinnedValue a;
  PinnedValue b;
  ASSERT_EQ(s->get(0, "k", &a), Status::kOk);
  ASSERT_EQ(s->get(1, "k", &b), Status::kOk);
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(StoreTestPeer::refs(*s, a.token), 3u);  // the slot and two pins

  // Overwrite: the new value is visible, the pinned one unchanged, and its block not reused.
  const auto v2 = pattern(4096, 2);
  ASSERT_EQ(s->put(0, "k", as_span(v2)), Status::kOk);
  PinnedValue c;
  ASSERT_EQ(s->get(0, "k", &c), Status::kOk);
  EXPECT_TRUE(value_is(c, v2));
  EXPECT_NE(c.data, a.data);
  EXPECT_TRUE(value_is(a, v1));
  const uint64_t used_with_both = s->stats().used_bytes;
  EXPECT_EQ(used_with_both, 2 * s->charge_for(4096));

  // Delete: not found any more, yet both pinned values stay intact while more puts churn memory.
  ASSERT_EQ(s->remove(0, "k"), Status::kOk);
  PinnedValue none;
  EXPECT_EQ(s->get(0, "k", &none), Status::kNotFound);
  for (uint32_t i = 0; i < 50; ++i) {
    ASSERT_EQ(s->put(0, "churn", as_span(pattern(4096, 100 + i))), Status::kOk);
  }
  ASSERT_EQ(s->remove(0, "churn"), Status::kOk);
  EXPECT_TRUE(value_is(a, v1));
  EXPECT_TRUE(value_is(c, v2));
  EXPECT_EQ(s->stats().objects, 0u);
  EXPECT_EQ(s->stats().used_bytes, 2 * s->charge_for(4096));

  s->unpin(&a);
  EXPECT_EQ(s->stats().used_bytes, 2 * s->charge_for(4096));  // b still holds v1
  s->unpin(&b);
  EXPECT_EQ(s->stats().used_bytes, s->charge_for(4096));
  s->unpin(&c);
  expect_empty(*s);
}

TEST(Store, ReserveCommitPublishesAndAbortLeaksNothing) {
  Region r(4 << 20);
  auto s = make_store(r, small_config());
  ASSERT_NE(s, nullptr);
  const auto v = pattern(3000, 5);

  Reservation res;
  ASSERT_EQ(s->reserve(0, "k", v.size(), &res), Status::kOk);
  ASSERT_NE(res.data, nullptr);
  EXPECT_EQ(res.size, v.size());
  PinnedValue got;
  EXPECT_EQ(s->get(0, "k", &got), Status::kNotFound);  // a reservation is invisible
  std::memcpy(res.data, v.data(), v.size());           // stands in for the RDMA READ
  ASSERT_EQ(s->commit(0, &res), Status::kOk);
  EXPECT_EQ(res.token, PinnedValue::kNoToken);
  ASSERT_EQ(s->get(0, "k", &got), Status::kOk);
  EXPECT_TRUE(value_is(got, v));
  s->unpin(&got);

  // An aborted overwrite leaves the old value in place and gives its space back.
  const uint64_t used = s->stats().used_bytes;
  ASSERT_EQ(s->reserve(1, "k", kMaxValue, &res), Status::kOk);
  EXPECT_GT(s->stats().used_bytes, used);
  std::memset(res.data, 0xab, res.size);
  s->abort(&res);
  EXPECT_EQ(res.token, PinnedValue::kNoToken);
  s->abort(&res);  // empty: a no-op
  EXPECT_EQ(s->stats().used_bytes, used);
  ASSERT_EQ(s->get(0, "k", &got), Status::kOk);
  EXPECT_TRUE(value_is(got, v));
  s->unpin(&got);

  // Many aborted reservations of every size, zero included.
  for (uint32_t i = 0; i < 200; ++i) {
    ASSERT_EQ(s->reserve(0, test::key_of("r", i % 7), (i * 977) % (kMaxValue + 1), &res), Status::kOk);
    s->abort(&res);
  }
  // Two reservations of one key: the later commit wins.
  Reservation first;
  Reservation second;
  ASSERT_EQ(s->reserve(0, "k", 16, &first), Status::kOk);
  ASSERT_EQ(s->reserve(1, "k", 16, &second), Status::kOk);
  std::memset(first.data, 1, 16);
  std::memset(second.data, 2, 16);
  ASSERT_EQ(s->commit(1, &second), Status::kOk);
  ASSERT_EQ(s->commit(0, &first), Status::kOk);
  ASSERT_EQ(s->get(0, "k", &got), Status::kOk);
  EXPECT_EQ(got.size, 16u);
  EXPECT_EQ(got.data[15], std::byte{1});
  s->unpin(&got);
  EXPECT_EQ(s->stats().objects, 1u);
  ASSERT_EQ(s->remove(0, "k"), Status::kOk);
  expect_empty(*s);
}

TEST(Store, ZeroLengthReservationCommits) {
  Region r(4 << 20);
  auto s = make_store(r, small_config());
  ASSERT_NE(s, nullptr);
  Reservation res;
  ASSERT_EQ(s->reserve(0, "empty", 0, &res), Status::kOk);
  EXPECT_EQ(res.size, 0u);
  ASSERT_EQ(s->commit(0, &res), Status::kOk);
  PinnedValue got;
  ASSERT_EQ(s->get(0, "empty", &got), Status::kOk);
  EXPECT_EQ(got.size, 0u);
  s->unpin(&got);
  ASSERT_EQ(s->remove(0, "empty"), Status::kOk);
  expect_empty(*s);
}

}  // namespace
}  // namespace rdmagate::store

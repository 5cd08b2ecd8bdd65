// The store as a cache (StoreConfig::evict): CLOCK eviction, commit with a pin, drop and drop_all, alone
// and under concurrent readers and writers. Bounded by iterations or about a second; no timing is asserted.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
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

// A value names its key and version in its first 8 bytes, and its size and every later byte follow from
// both: a GET can tell exactly which PUT it sees, and that nothing of it is torn or stale.
constexpr uint32_t kHeader = 8;

uint32_t value_size(uint32_t key, uint32_t version, uint32_t max) {
  return kHeader + (key * 131u + version * 977u) % (max - kHeader + 1);
}

std::byte value_byte(uint32_t key, uint32_t version, uint32_t i) {
  return static_cast<std::byte>((key * 31u + version * 17u + i * 7u) ^ (i >> 8));
}

void fill_value(std::byte* p, uint32_t size, uint32_t key, uint32_t version) {
  std::memcpy(p, &key, 4);
  std::memcpy(p + 4, &version, 4);
  for (uint32_t i = kHeader; i < size; ++i) p[i] = value_byte(key, version, i);
}

std::vector<std::byte> make_value(uint32_t key, uint32_t version, uint32_t max) {
  std::vector<std::byte> v(value_size(key, version, max));
  fill_value(v.data(), static_cast<uint32_t>(v.size()), key, version);
  return v;
}

// True when `v` is exactly some PUT's value of `key`; *version says which.
bool check_value(const PinnedValue& v, uint32_t key, uint32_t max, uint32_t* version) {
  if (v.size < kHeader) return false;
  uint32_t k = 0;
  std::memcpy(&k, v.data, 4);
  std::memcpy(version, v.data + 4, 4);
  if (k != key || v.size != value_size(key, *version, max)) return false;
  for (uint32_t i = kHeader; i < v.size; ++i) {
    if (v.data[i] != value_byte(key, *version, i)) return false;
  }
  return true;
}

std::string key_name(uint32_t key) {
  return test::key_of("key-", key);
}

bool value_is(const PinnedValue& v, const std::vector<std::byte>& want) {
  return v.size == want.size() && (want.empty() || std::memcmp(v.data, want.data(), want.size()) == 0);
}

uint64_t put_count(const StoreStats& st, Status s) {
  return st.ops[uint32_t(ObjectOp::kPut)][uint32_t(s)];
}

StoreConfig cache_config() {
  StoreConfig c;
  c.max_value = 8192;
  c.max_objects = 512;
  c.max_inflight = 64;
  c.max_cores = 4;
  c.evict = true;
  return c;
}

TEST(StoreEvict, SmallCacheAcceptsEveryPutAndGetsSeeTheLastPutOrNothing) {
  constexpr uint32_t kKeys = 2000;
  constexpr uint32_t kOps = 30000;
  Region region(4 << 20);
  StoreConfig c = cache_config();
  c.capacity_bytes = 256 * 1024;  // ~50 values of the ~2 MiB of distinct values the keys take at once
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);
  std::vector<uint32_t> last(kKeys, 0);  // 0: never put
  std::mt19937 rng(7);
  uint64_t puts = 0;
  uint64_t hits = 0;
  for (uint32_t op = 0; op < kOps; ++op) {
    const uint32_t key = rng() % kKeys;
    if (rng() % 100 < 60) {
      const auto v = make_value(key, last[key] + 1, c.max_value);
      ASSERT_EQ(s->put(op % 4, key_name(key), as_span(v)), Status::kOk) << op;
      ++last[key];
      ++puts;
    } else {
      PinnedValue got;
      const Status st = s->get(op % 4, key_name(key), &got);
      if (st == Status::kNotFound) continue;
      ASSERT_EQ(st, Status::kOk);
      uint32_t version = 0;
      ASSERT_TRUE(check_value(got, key, c.max_value, &version)) << key;
      ASSERT_EQ(version, last[key]) << key;  // never an older version: the index never goes back
      s->unpin(&got);
      ++hits;
    }
    ASSERT_LE(s->stats().used_bytes, s->capacity_bytes());
  }
  const StoreStats st = s->stats();
  EXPECT_EQ(put_count(st, Status::kOk), puts);
  EXPECT_EQ(put_count(st, Status::kNoSpace), 0u);
  EXPECT_GT(st.evictions, puts / 2);  // the cache holds a few dozen of thousands of keys
  EXPECT_GT(hits, 0u);
  // What the stats call published is exactly what GETs still find, each at its last version.
  uint64_t present = 0;
  for (uint32_t key = 0; key < kKeys; ++key) {
    PinnedValue got;
    if (s->get(0, key_name(key), &got) != Status::kOk) continue;
    uint32_t version = 0;
    EXPECT_TRUE(check_value(got, key, c.max_value, &version));
    EXPECT_EQ(version, last[key]);
    s->unpin(&got);
    ++present;
  }
  EXPECT_EQ(st.objects, present);
  for (uint32_t key = 0; key < kKeys; ++key) (void)s->remove(0, key_name(key));
  expect_empty(*s);
}

TEST(StoreEvict, DescriptorsAndTheProbeWindowAreEvictedForToo) {
  Region region(4 << 20);
  StoreConfig c = cache_config();
  c.max_objects = 16;  // descriptors, not bytes, are short
  c.max_inflight = 4;
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);
  for (uint32_t i = 0; i < 500; ++i)
    ASSERT_EQ(s->put(0, key_name(i), as_span(pattern(16, i))), Status::kOk) << i;
  EXPECT_LE(s->stats().objects, 20u);
  EXPECT_GE(s->stats().evictions, 480u);
  const uint64_t objects = s->stats().objects;
  EXPECT_EQ(s->drop_all(), objects);
  expect_empty(*s);

  // 4 buckets of 7 slots: every key's window is the whole index, so commits find it full and evict there.
  Region region2(4 << 20);
  c.max_objects = 4;
  c.max_inflight = 100;
  auto w = make_store(region2, c);
  ASSERT_NE(w, nullptr);
  for (uint32_t i = 0; i < 200; ++i)
    ASSERT_EQ(w->put(0, key_name(i), as_span(pattern(8, i))), Status::kOk) << i;
  EXPECT_EQ(w->stats().objects, 28u);
  EXPECT_EQ(w->stats().evictions, 200u - 28u);
  PinnedValue got;
  ASSERT_EQ(w->get(0, key_name(199), &got), Status::kOk);  // the last put is published
  EXPECT_TRUE(value_is(got, pattern(8, 199)));
  w->unpin(&got);
  EXPECT_EQ(w->drop_all(), 28u);
  expect_empty(*w);
}

TEST(StoreEvict, RecentlyReadKeysSurviveASweepThatEvictsColdOnes) {
  constexpr uint32_t kFit = 32;
  Region region(4 << 20);
  StoreConfig c = cache_config();
  auto probe = make_store(region, c);
  ASSERT_NE(probe, nullptr);
  c.capacity_bytes = kFit * probe->charge_for(4096);
  probe.reset();
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);
  for (uint32_t i = 0; i < kFit; ++i)
    ASSERT_EQ(s->put(0, key_name(i), as_span(pattern(4096, i))), Status::kOk);
  EXPECT_EQ(s->stats().evictions, 0u);
  for (uint32_t i = 0; i < kFit; i += 4) {  // every fourth key is hot
    PinnedValue got;
    ASSERT_EQ(s->get(0, key_name(i), &got), Status::kOk);
    s->unpin(&got);
  }
  // Half a cache of new keys: one eviction each, well within one sweep of the hand.
  for (uint32_t i = 0; i < kFit / 2; ++i) {
    ASSERT_EQ(s->put(1, key_name(1000 + i), as_span(pattern(4096, 1000 + i))), Status::kOk);
  }
  EXPECT_EQ(s->stats().evictions, kFit / 2);
  uint32_t cold_left = 0;
  for (uint32_t i = 0; i < kFit; ++i) {
    PinnedValue got;
    const Status st = s->get(0, key_name(i), &got);
    if (i % 4 == 0) {
      ASSERT_EQ(st, Status::kOk) << "hot key " << i << " lost its second chance";
      EXPECT_TRUE(value_is(got, pattern(4096, i)));
    } else if (st == Status::kOk) {
      ++cold_left;
      // The hand went round the table in order: it took the first sixteen cold keys (1..21) only.
      EXPECT_GT(i, 21u) << "cold key " << i << " survived while a later one went";
    }
    s->unpin(&got);
  }
  EXPECT_EQ(cold_left, kFit * 3 / 4 - kFit / 2);
  for (uint32_t i = 0; i < kFit / 2; ++i) {
    PinnedValue got;
    ASSERT_EQ(s->get(0, key_name(1000 + i), &got), Status::kOk);
    s->unpin(&got);
  }
  EXPECT_EQ(s->drop_all(), kFit);
  expect_empty(*s);
}

TEST(StoreEvict, PinnedValueSurvivesItsEvictionAndIsFreedOnUnpin) {
  Region region(4 << 20);
  StoreConfig c = cache_config();
  auto probe = make_store(region, c);
  ASSERT_NE(probe, nullptr);
  c.capacity_bytes = 2 * probe->charge_for(4096);
  probe.reset();
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);
  const uint64_t one = s->charge_for(4096);

  // Unpinned victims first: A is pinned with its reference bit clear (a commit's pin does not set it), B
  // is neither, so the first sweep takes B.
  Reservation r;
  ASSERT_EQ(s->reserve(0, "a", 4096, &r), Status::kOk);
  std::memcpy(r.data, pattern(4096, 1).data(), 4096);
  PinnedValue a;
  ASSERT_EQ(s->commit(0, &r, &a), Status::kOk);
  ASSERT_EQ(s->put(0, "b", as_span(pattern(4096, 2))), Status::kOk);
  ASSERT_EQ(s->put(0, "c", as_span(pattern(4096, 3))), Status::kOk);
  PinnedValue got;
  EXPECT_EQ(s->get(0, "b", &got), Status::kNotFound);
  ASSERT_EQ(s->get(0, "a", &got), Status::kOk);
  s->unpin(&got);
  EXPECT_EQ(s->stats().evictions, 1u);

  // When only pinned values are left, the second sweep takes them: unpublished at once, still charged and
  // intact until the last unpin.
  ASSERT_EQ(s->get(0, "c", &got), Status::kOk);  // now both are pinned
  const uint32_t c_token = got.token;
  EXPECT_EQ(s->put(1, "d", as_span(pattern(4096, 4))), Status::kNoSpace);  // the space is the pins'
  EXPECT_EQ(s->stats().evictions, 3u);
  PinnedValue none;
  EXPECT_EQ(s->get(0, "a", &none), Status::kNotFound);
  EXPECT_EQ(s->get(0, "c", &none), Status::kNotFound);
  EXPECT_EQ(StoreTestPeer::refs(*s, a.token), 1u);
  EXPECT_EQ(StoreTestPeer::refs(*s, c_token), 1u);
  EXPECT_TRUE(value_is(a, pattern(4096, 1)));
  EXPECT_TRUE(value_is(got, pattern(4096, 3)));
  EXPECT_EQ(s->stats().objects, 0u);
  EXPECT_EQ(s->stats().used_bytes, 2 * one);
  s->unpin(&a);
  EXPECT_EQ(s->stats().used_bytes, one);
  s->unpin(&got);
  expect_empty(*s);
  ASSERT_EQ(s->put(1, "d", as_span(pattern(4096, 4))), Status::kOk);
  ASSERT_EQ(s->drop("d"), Status::kOk);
  expect_empty(*s);
}

TEST(StoreEvict, ValueThatCanNeverFitGetsNoSpaceWithoutEvictingAnything) {
  Region region(700 << 10);
  StoreConfig c = cache_config();
  c.max_value = 4 << 20;  // more than the arena
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);
  for (uint32_t i = 0; i < 8; ++i) ASSERT_EQ(s->put(0, key_name(i), as_span(pattern(1000, i))), Status::kOk);
  // Its charge fits the capacity (which counts the descriptor table too), but its block not the arena.
  const uint64_t huge = s->arena_bytes() + 1;
  ASSERT_LE(s->charge_for(huge), s->capacity_bytes());
  EXPECT_EQ(s->put(0, "huge", as_span(pattern(huge, 9))), Status::kNoSpace);
  Reservation r;
  EXPECT_EQ(s->reserve(0, "huge", 2 << 20, &r), Status::kNoSpace);
  EXPECT_EQ(s->reserve(0, "huge", c.max_value + 1, &r), Status::kTooLarge);
  // Larger than the configured capacity, though the arena would hold it.
  Region region2(4 << 20);
  c.max_value = 8192;
  c.capacity_bytes = 4096;
  auto t = make_store(region2, c);
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->put(0, "small", as_span(pattern(100, 1))), Status::kOk);
  EXPECT_EQ(t->put(0, "big", as_span(pattern(8192, 2))), Status::kNoSpace);
  EXPECT_EQ(t->stats().evictions, 0u);
  EXPECT_EQ(t->stats().objects, 1u);
  EXPECT_EQ(t->drop_all(), 1u);
  expect_empty(*t);

  EXPECT_EQ(s->stats().evictions, 0u);
  EXPECT_EQ(s->stats().objects, 8u);
  EXPECT_EQ(put_count(s->stats(), Status::kNoSpace), 2u);
  EXPECT_EQ(s->drop_all(), 8u);
  expect_empty(*s);
}

TEST(StoreEvict, EverythingPinnedGivesUpWithNoSpaceInBoundedWork) {
  Region region(4 << 20);
  StoreConfig c = cache_config();
  c.max_objects = 64;
  c.max_inflight = 0;  // every descriptor published and pinned: nothing to take
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);
  std::vector<PinnedValue> pins(64);
  for (uint32_t i = 0; i < 64; ++i) {
    ASSERT_EQ(s->put(0, key_name(i), as_span(pattern(64, i))), Status::kOk);
    ASSERT_EQ(s->get(0, key_name(i), &pins[i]), Status::kOk);
  }
  EXPECT_EQ(s->put(0, "more", as_span(pattern(64, 99))), Status::kNoSpace);
  EXPECT_EQ(s->stats().objects, 0u);  // the second sweep unpublished them all; their pins hold the space
  for (uint32_t i = 0; i < 64; ++i) {
    EXPECT_TRUE(value_is(pins[i], pattern(64, i)));
    s->unpin(&pins[i]);
  }
  expect_empty(*s);
}

TEST(StoreEvict, EvictOffKeepsNoSpaceAndEvictsNothing) {
  Region region(4 << 20);
  StoreConfig c = cache_config();
  c.evict = false;
  c.max_objects = 8;
  c.max_inflight = 0;
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);
  for (uint32_t i = 0; i < 8; ++i) ASSERT_EQ(s->put(0, key_name(i), as_span(pattern(64, i))), Status::kOk);
  EXPECT_EQ(s->put(0, "more", as_span(pattern(64, 99))), Status::kNoSpace);
  EXPECT_EQ(s->stats().evictions, 0u);
  EXPECT_EQ(s->stats().objects, 8u);
  EXPECT_EQ(StoreConfig{}.evict, false);
  EXPECT_EQ(s->drop_all(), 8u);
  expect_empty(*s);
}

TEST(StoreEvict, CommitWithPinPublishesAndPinsAtOnce) {
  Region region(4 << 20);
  StoreConfig c = cache_config();
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);
  const auto v = pattern(3000, 5);
  Reservation r;
  ASSERT_EQ(s->reserve(0, "k", v.size(), &r), Status::kOk);
  std::memcpy(r.data, v.data(), v.size());
  PinnedValue pin;
  ASSERT_EQ(s->commit(1, &r, &pin), Status::kOk);
  EXPECT_EQ(r.token, PinnedValue::kNoToken);
  ASSERT_NE(pin.token, PinnedValue::kNoToken);
  EXPECT_TRUE(value_is(pin, v));
  EXPECT_EQ(StoreTestPeer::refs(*s, pin.token), 2u);  // the slot and the pin
  PinnedValue got;
  ASSERT_EQ(s->get(0, "k", &got), Status::kOk);
  EXPECT_EQ(got.token, pin.token);
  s->unpin(&got);
  EXPECT_EQ(put_count(s->stats(), Status::kOk), 1u);
  EXPECT_EQ(s->stats().objects, 1u);
  ASSERT_EQ(s->remove(0, "k"), Status::kOk);
  EXPECT_TRUE(value_is(pin, v));
  EXPECT_EQ(s->stats().used_bytes, s->charge_for(v.size()));
  s->unpin(&pin);
  expect_empty(*s);

  // A refused commit leaves no pin and no charge.
  Region region2(4 << 20);
  c.evict = false;
  c.max_objects = 4;  // one 28-slot window for every key
  c.max_inflight = 100;
  auto w = make_store(region2, c);
  ASSERT_NE(w, nullptr);
  for (uint32_t i = 0; i < 28; ++i) ASSERT_EQ(w->put(0, key_name(i), as_span(pattern(8, i))), Status::kOk);
  const uint64_t used = w->stats().used_bytes;
  ASSERT_EQ(w->reserve(0, "late", 8, &r), Status::kOk);
  EXPECT_EQ(w->commit(0, &r, &pin), Status::kNoSpace);
  EXPECT_EQ(pin.token, PinnedValue::kNoToken);
  EXPECT_EQ(r.token, PinnedValue::kNoToken);
  EXPECT_EQ(w->stats().used_bytes, used);
  EXPECT_EQ(put_count(w->stats(), Status::kNoSpace), 1u);
  EXPECT_EQ(w->drop_all(), 28u);
  expect_empty(*w);
}

TEST(StoreEvict, DropUnpublishesWithoutCountingADelete) {
  Region region(4 << 20);
  auto s = make_store(region, cache_config());
  ASSERT_NE(s, nullptr);
  const auto v = pattern(500, 3);
  ASSERT_EQ(s->put(0, "k", as_span(v)), Status::kOk);
  ASSERT_EQ(s->put(0, "other", as_span(v)), Status::kOk);
  PinnedValue pinned;
  ASSERT_EQ(s->get(0, "k", &pinned), Status::kOk);
  EXPECT_EQ(s->drop("k"), Status::kOk);
  EXPECT_EQ(s->drop("k"), Status::kNotFound);
  EXPECT_EQ(s->drop(""), Status::kNotFound);
  EXPECT_EQ(s->drop(std::string(251, 'x')), Status::kNotFound);
  PinnedValue none;
  EXPECT_EQ(s->get(0, "k", &none), Status::kNotFound);
  EXPECT_TRUE(value_is(pinned, v));  // a reader keeps its copy
  StoreStats st = s->stats();
  EXPECT_EQ(st.drops, 1u);
  EXPECT_EQ(st.objects, 1u);
  EXPECT_EQ(st.value_bytes, v.size());
  for (uint64_t n : st.ops[uint32_t(ObjectOp::kDelete)]) EXPECT_EQ(n, 0u);
  s->unpin(&pinned);
  ASSERT_EQ(s->put(0, "k", as_span(v)), Status::kOk);  // a dropped key may come back
  EXPECT_EQ(s->drop("k"), Status::kOk);
  EXPECT_EQ(s->drop("other"), Status::kOk);
  EXPECT_EQ(s->stats().drops, 3u);
  expect_empty(*s);
}

TEST(StoreEvict, DropAllUnpublishesEverything) {
  Region region(4 << 20);
  auto s = make_store(region, cache_config());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->drop_all(), 0u);
  for (uint32_t i = 0; i < 300; ++i)
    ASSERT_EQ(s->put(i % 4, key_name(i), as_span(pattern(i, i))), Status::kOk);
  PinnedValue pinned;
  ASSERT_EQ(s->get(0, key_name(77), &pinned), Status::kOk);
  EXPECT_EQ(s->drop_all(), 300u);
  EXPECT_EQ(s->drop_all(), 0u);
  const StoreStats st = s->stats();
  EXPECT_EQ(st.objects, 0u);
  EXPECT_EQ(st.value_bytes, 0u);
  EXPECT_EQ(st.drops, 300u);
  for (uint32_t i = 0; i < 300; i += 17) {
    PinnedValue none;
    EXPECT_EQ(s->get(0, key_name(i), &none), Status::kNotFound);
  }
  EXPECT_TRUE(value_is(pinned, pattern(77, 77)));
  s->unpin(&pinned);
  expect_empty(*s);
}

// Readers verify every byte of what they see; writers fill a small cache; a third kind of thread drops
// keys and everything. Whatever interleaving, no value is torn or misnamed and nothing leaks.
void run_cache_mix(bool with_drops) {
  constexpr uint32_t kKeys = 300;  // about four times what the cache holds
  constexpr uint32_t kWriters = 2;
  constexpr uint32_t kReaders = 2;
  Region region(4 << 20);
  StoreConfig c = cache_config();
  c.capacity_bytes = 384 * 1024;
  c.max_cores = kWriters + kReaders;
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad_count{0};
  std::atomic<uint64_t> no_space{0};
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> dropped{0};
  auto bad = [&](const char* what) {
    if (bad_count.fetch_add(1) < 5) ADD_FAILURE() << what;
  };
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937 rng(11 + w);
      std::vector<uint32_t> version(kKeys, 0);
      std::vector<PinnedValue> pins;
      while (!stop.load(std::memory_order_relaxed)) {
        const uint32_t key = rng() % kKeys;
        // Versions of one key differ between writers (odd/even), so a reader can tell any two PUTs apart.
        const uint32_t ver = (++version[key]) * 2 + w;
        const uint32_t size = value_size(key, ver, c.max_value);
        Reservation r;
        Status st = s->reserve(w, key_name(key), size, &r);
        if (st == Status::kOk) {
          fill_value(r.data, size, key, ver);
          PinnedValue pin;
          st = rng() % 2 ? s->commit(w, &r, &pin) : s->commit(w, &r);
          if (st == Status::kOk && pin.token != PinnedValue::kNoToken) pins.push_back(pin);
        }
        if (st == Status::kNoSpace) {
          no_space.fetch_add(1, std::memory_order_relaxed);
        } else if (st != Status::kOk) {
          bad("put status");
        }
        while (pins.size() > 3) {  // a few held, as across the RADOS client's reply
          uint32_t seen = 0;
          uint32_t k = 0;
          std::memcpy(&k, pins.front().data, 4);
          if (!check_value(pins.front(), k, c.max_value, &seen)) bad("pinned commit verify");
          s->unpin(&pins.front());
          pins.erase(pins.begin());
        }
      }
      for (auto& p : pins) s->unpin(&p);
    });
  }
  for (uint32_t rd = 0; rd < kReaders; ++rd) {
    threads.emplace_back([&, rd] {
      std::mt19937 rng(101 + rd);
      while (!stop.load(std::memory_order_relaxed)) {
        const uint32_t key = rng() % kKeys;
        PinnedValue v;
        const Status st = s->get(kWriters + rd, key_name(key), &v);
        if (st == Status::kNotFound) continue;
        if (st != Status::kOk) {
          bad("get status");
          continue;
        }
        uint32_t version = 0;
        if (!check_value(v, key, c.max_value, &version)) bad("get verify");
        std::this_thread::yield();  // an RDMA WRITE in flight: eviction or drop must not touch the bytes
        uint32_t again = 0;
        if (!check_value(v, key, c.max_value, &again) || again != version) bad("get verify after yield");
        s->unpin(&v);
        hits.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  if (with_drops) {
    threads.emplace_back([&] {
      std::mt19937 rng(1001);
      while (!stop.load(std::memory_order_relaxed)) {
        if (rng() % 8 == 0) {
          dropped.fetch_add(s->drop_all(), std::memory_order_relaxed);
        } else {
          const Status st = s->drop(key_name(rng() % kKeys));
          if (st == Status::kOk)
            dropped.fetch_add(1, std::memory_order_relaxed);
          else if (st != Status::kNotFound)
            bad("drop status");
        }
        if (s->stats().used_bytes > s->capacity_bytes()) bad("used over capacity");
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad_count.load(), 0u);
  EXPECT_GT(hits.load(), 0u);
  const StoreStats st = s->stats();
  EXPECT_GT(st.evictions, 0u);
  EXPECT_EQ(st.drops, dropped.load());
  std::printf("cache mix%s: %llu puts, %llu no-space, %llu hits, %llu evictions, %llu drops\n",
              with_drops ? " with drops" : "", static_cast<unsigned long long>(put_count(st, Status::kOk)),
              static_cast<unsigned long long>(no_space.load()), static_cast<unsigned long long>(hits.load()),
              static_cast<unsigned long long>(st.evictions), static_cast<unsigned long long>(st.drops));
  // Pins are few and small against the capacity: two sweeps always find room, so no PUT fails for want of
  // capacity. What may fail, rarely, is a commit whose key's probe window (28 slots, placed by the keyed hash,
  // so which keys share one differs per process) the other writer refilled after each of its 4 evictions
  // there: counted as window_full, a bounded and documented refusal (docs/store.md), never a lost value.
  EXPECT_LE(no_space.load(), st.window_full);
  EXPECT_LE(no_space.load() * 10000, put_count(st, Status::kOk) + 10000) << "window refusals are rare";
  const uint64_t left = st.objects;
  EXPECT_EQ(s->drop_all(), left);
  expect_empty(*s);
}

TEST(StoreEvictConcurrency, SmallCacheUnderConcurrentPutsAndGetsLosesNothingItKeeps) {
  run_cache_mix(false);
}

TEST(StoreEvictConcurrency, DropAndDropAllWhileReadersAndWritersRun) {
  run_cache_mix(true);
}

}  // namespace
}  // namespace rdmagate::store

// Many threads on one store: torn reads, last writer wins, and a random op mix that must leak nothing.
// Bounded by time or iterations; no timing is asserted.
#include <gtest/gtest.h>

#include <array>
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

using test::expect_empty;
using test::make_store;
using test::Region;

// A whole pattern: one 64-bit stamp repeated; a torn value mixes stamps.
bool whole_pattern(const std::byte* p, uint32_t size, uint64_t* stamp) {
  if (size % 8 != 0 || size == 0) return false;
  std::memcpy(stamp, p, 8);
  for (uint32_t off = 8; off < size; off += 8) {
    uint64_t w;
    std::memcpy(&w, p + off, 8);
    if (w != *stamp) return false;
  }
  return true;
}

void fill_stamp(std::byte* p, uint32_t size, uint64_t stamp) {
  for (uint32_t off = 0; off < size; off += 8) std::memcpy(p + off, &stamp, 8);
}

TEST(StoreConcurrency, TornReadNeverSeenWhileTwoWritersOverwriteOneMiBKey) {
  constexpr uint32_t kValue = 1 << 20;
  Region region(24 << 20);
  StoreConfig c;
  c.max_value = kValue;
  c.max_objects = 64;
  c.max_inflight = 64;
  c.max_cores = 4;
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);
  std::vector<std::byte> initial(kValue);
  fill_stamp(initial.data(), kValue, 0);
  ASSERT_EQ(s->put(0, "torn", {initial.data(), initial.size()}), Status::kOk);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> torn{0};
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> writes{0};
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      std::vector<std::byte> buf(kValue);
      for (uint64_t seq = 1; !stop.load(std::memory_order_relaxed); ++seq) {
        const uint64_t stamp = (uint64_t{w + 1} << 32) | seq;
        Status st;
        if (w == 0) {  // plain put: copies from a private buffer
          fill_stamp(buf.data(), kValue, stamp);
          st = s->put(w, "torn", {buf.data(), buf.size()});
        } else {  // reserve, fill in place (the RDMA READ), commit
          Reservation r;
          st = s->reserve(w, "torn", kValue, &r);
          if (st == Status::kOk) {
            fill_stamp(r.data, r.size, stamp);
            st = s->commit(w, &r);
          }
        }
        // Readers hold pins, so space can run short for a moment; anything else is a bug.
        if (st == Status::kOk) {
          writes.fetch_add(1, std::memory_order_relaxed);
        } else {
          ASSERT_EQ(st, Status::kNoSpace);
          std::this_thread::yield();
        }
      }
    });
  }
  for (uint32_t rd = 0; rd < 2; ++rd) {
    threads.emplace_back([&, rd] {
      while (!stop.load(std::memory_order_relaxed)) {
        PinnedValue v;
        ASSERT_EQ(s->get(2 + rd, "torn", &v), Status::kOk);
        uint64_t first = 0;
        uint64_t second = 0;
        const bool ok1 = v.size == kValue && whole_pattern(v.data, v.size, &first);
        std::this_thread::yield();  // the RDMA WRITE is in flight: the value must not change under the pin
        const bool ok2 = whole_pattern(v.data, v.size, &second);
        if (!ok1 || !ok2 || first != second) torn.fetch_add(1, std::memory_order_relaxed);
        s->unpin(&v);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  EXPECT_GT(writes.load(), 0u);
  std::printf("torn-read: %llu reads, %llu writes\n", static_cast<unsigned long long>(reads.load()),
              static_cast<unsigned long long>(writes.load()));
  ASSERT_EQ(s->remove(0, "torn"), Status::kOk);
  expect_empty(*s);
}

TEST(StoreConcurrency, LastWriterWinsAndReadersNeverGoBackInTime) {
  constexpr uint32_t kWriters = 3;
  constexpr uint64_t kPuts = 5000;
  Region region(8 << 20);
  StoreConfig c;
  c.max_value = 4096;
  c.max_objects = 64;
  c.max_inflight = 256;
  c.max_cores = kWriters + 1;
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);

  std::atomic<uint32_t> writers_left{kWriters};
  std::atomic<uint64_t> regressions{0};
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (uint64_t seq = 1; seq <= kPuts; ++seq) {
        std::array<uint64_t, 2> v{w, seq};
        ASSERT_EQ(s->put(w, "lww", {reinterpret_cast<const std::byte*>(v.data()), sizeof(v)}), Status::kOk);
        // A GET after our acknowledged PUT sees our value or a later one: never an older one of ours.
        PinnedValue got;
        ASSERT_EQ(s->get(w, "lww", &got), Status::kOk);
        std::array<uint64_t, 2> seen{};
        std::memcpy(seen.data(), got.data, sizeof(seen));
        if (seen[0] == w && seen[1] != seq) regressions.fetch_add(1);
        s->unpin(&got);
      }
      writers_left.fetch_sub(1);
    });
  }
  threads.emplace_back([&] {
    std::array<uint64_t, kWriters> last{};
    while (writers_left.load() != 0) {
      PinnedValue got;
      if (s->get(kWriters, "lww", &got) != Status::kOk) continue;  // before the first put
      std::array<uint64_t, 2> seen{};
      std::memcpy(seen.data(), got.data, sizeof(seen));
      s->unpin(&got);
      if (seen[0] >= kWriters || seen[1] < last[seen[0]]) regressions.fetch_add(1);
      if (seen[0] < kWriters) last[seen[0]] = seen[1];
    }
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(regressions.load(), 0u);
  PinnedValue got;
  ASSERT_EQ(s->get(0, "lww", &got), Status::kOk);
  std::array<uint64_t, 2> final_value{};
  std::memcpy(final_value.data(), got.data, sizeof(final_value));
  s->unpin(&got);
  EXPECT_LT(final_value[0], kWriters);
  EXPECT_EQ(final_value[1], kPuts);  // whoever committed last, it was that writer's last put
  EXPECT_EQ(s->stats().objects, 1u);
  ASSERT_EQ(s->remove(0, "lww"), Status::kOk);
  expect_empty(*s);
}

uint8_t mix_byte(uint32_t key, uint32_t size, uint32_t i) { return static_cast<uint8_t>(key * 31 + size * 7 + i); }

TEST(StoreConcurrency, RandomOpMixKeepsInvariantsAndLeaksNothing) {
  constexpr uint32_t kThreads = 4;
  constexpr uint32_t kKeys = 64;
  constexpr uint32_t kOps = 20000;
  constexpr uint32_t kMaxValue = 64 * 1024;
  Region region(3 << 20);
  StoreConfig c;
  c.max_value = kMaxValue;
  c.max_objects = 128;
  c.max_inflight = 64;
  c.max_cores = kThreads;
  c.capacity_bytes = 768 * 1024;  // tight, so NoSpace and its refunds are exercised too
  auto s = make_store(region, c);
  ASSERT_NE(s, nullptr);
  const uint64_t capacity = s->capacity_bytes();

  std::atomic<uint64_t> bad_count{0};
  std::atomic<uint64_t> no_space{0};
  auto bad = [&](const char* what) {
    if (bad_count.fetch_add(1) < 5) ADD_FAILURE() << what;
  };
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      std::vector<PinnedValue> pins;
      auto verify = [&](uint32_t key, const PinnedValue& v) {
        for (uint32_t i = 0; i < v.size; ++i) {
          if (static_cast<uint8_t>(v.data[i]) != mix_byte(key, v.size, i)) return false;
        }
        return true;
      };
      auto pick_size = [&]() -> uint32_t {
        switch (rng() % 4) {
          case 0: return rng() % 2;
          case 1: return rng() % 300;
          case 2: return 4096;
          default: return rng() % (kMaxValue + 1);
        }
      };
      for (uint32_t op = 0; op < kOps; ++op) {
        const uint32_t key = rng() % kKeys;
        const std::string k = test::key_of("key-", key);
        const uint32_t dice = rng() % 100;
        if (dice < 40) {
          PinnedValue v;
          const Status st = s->get(t, k, &v);
          if (st == Status::kOk) {
            if (!verify(key, v)) bad("get verify");
            pins.push_back(v);
          } else if (st != Status::kNotFound) {
            bad("get status");
          }
        } else if (dice < 75) {
          const uint32_t size = pick_size();
          std::vector<std::byte> buf(size);
          for (uint32_t i = 0; i < size; ++i) buf[i] = static_cast<std::byte>(mix_byte(key, size, i));
          const Status st = s->put(t, k, {buf.data(), buf.size()});
          if (st == Status::kNoSpace) no_space.fetch_add(1);
          else if (st != Status::kOk) bad("put status");
        } else if (dice < 85) {
          const uint32_t size = pick_size();
          Reservation r;
          const Status st = s->reserve(t, k, size, &r);
          if (st == Status::kOk) {
            for (uint32_t i = 0; i < size; ++i) r.data[i] = static_cast<std::byte>(mix_byte(key, size, i));
            if (rng() % 2) {
              const Status cs = s->commit(t, &r);
              if (cs != Status::kOk && cs != Status::kNoSpace) bad("commit status");
            } else {
              s->abort(&r);
            }
          } else if (st == Status::kNoSpace) {
            no_space.fetch_add(1);
          } else {
            bad("reserve status");
          }
        } else {
          const Status st = s->remove(t, k);
          if (st != Status::kOk && st != Status::kNotFound) bad("delete status");
        }
        // Hold a few pins across later ops, the way GETs hold them across RDMA WRITEs; pinned values must
        // still verify when released.
        while (pins.size() > 6 || (!pins.empty() && rng() % 4 == 0)) {
          const size_t i = rng() % pins.size();
          PinnedValue v = pins[i];
          pins[i] = pins.back();
          pins.pop_back();
          uint32_t pinned_key = 0;
          // The key is not stored in PinnedValue; every value is checked against all keys' patterns.
          bool ok = false;
          for (; pinned_key < kKeys && !ok; ++pinned_key) ok = verify(pinned_key, v);
          if (!ok) bad("pinned verify");
          s->unpin(&v);
        }
        if (s->stats().used_bytes > capacity) bad("used over capacity");
      }
      for (auto& v : pins) s->unpin(&v);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad_count.load(), 0u);
  std::printf("random mix: %llu no-space answers\n", static_cast<unsigned long long>(no_space.load()));
  const StoreStats st = s->stats();
  uint64_t total = 0;
  for (const auto& row : st.ops)
    for (uint64_t v : row) total += v;
  EXPECT_GT(total, 0u);
  for (uint32_t key = 0; key < kKeys; ++key) (void)s->remove(0, test::key_of("key-", key));
  expect_empty(*s);
}

}  // namespace
}  // namespace rdmagate::store

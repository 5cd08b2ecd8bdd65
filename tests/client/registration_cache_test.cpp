// The client's registration cache (client/registration_cache.hpp) with a fake registrar: hits, one access per
// registration, release moving the generation before anything is deregistered, and caller threads, cores and
// a releasing thread at once (run under ThreadSanitizer by the tsan preset).
#include "client/registration_cache.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace rdmagate::client {
namespace {

constexpr std::uintptr_t kPage = 4096;

// Hands out numbered registrations and records which are live, so a double or unknown deregistration and a
// key of a dead registration are seen.
struct FakeRegistry {
  std::mutex mu;
  std::set<std::uint32_t> live;
  std::uint32_t next = 1;
  std::uint32_t registered = 0, deregistered = 0, refused = 0, bad_dereg = 0;
  std::uintptr_t readonly_from = ~std::uintptr_t{0};  // ranges at or above it refuse write access
  std::vector<std::pair<std::uintptr_t, std::size_t>> ranges;
  std::set<std::uint32_t> writable;  // ids registered for remote write (the rest: remote read only)
};

struct FakeRegistrar {
  struct Mr {
    std::uint32_t id;
  };
  using Handle = Mr*;
  FakeRegistry* r;
  Mr* reg(std::uintptr_t start, std::size_t len, bool writable) const {
    std::lock_guard<std::mutex> lock(r->mu);
    if (writable && start >= r->readonly_from) {
      ++r->refused;
      return nullptr;
    }
    auto* mr = new Mr{r->next++};
    r->live.insert(mr->id);
    r->ranges.emplace_back(start, len);
    if (writable) r->writable.insert(mr->id);
    ++r->registered;
    return mr;
  }
  void dereg(Mr* mr) const {
    {
      std::lock_guard<std::mutex> lock(r->mu);
      if (r->live.erase(mr->id) != 1) ++r->bad_dereg;
      ++r->deregistered;
    }
    delete mr;
  }
  // Keys derived from the id: lkey = id, rkey = id | 1 << 31.
  static std::uint32_t lkey(Mr* mr) { return mr->id; }
  static std::uint32_t rkey(Mr* mr) { return mr->id | 0x80000000u; }
};

using Cache = RegistrationCache<FakeRegistrar>;

TEST(RegistrationCache, RegistersThePagesOnceAndHitsAfterwards) {
  FakeRegistry reg;
  Cache cache(FakeRegistrar{&reg}, kPage);
  std::uint32_t lk = 0, rk = 0;
  EXPECT_EQ(cache.keys_for(10 * kPage + 100, 2 * kPage, true, &lk, &rk), Cache::Found::kRegistered);
  ASSERT_EQ(reg.ranges.size(), 2u);  // the pages once per access
  for (const auto& [start, len] : reg.ranges) {
    EXPECT_EQ(start, 10 * kPage);  // rounded down to the page
    EXPECT_EQ(len, 3 * kPage);     // and up: [10p + 100, 12p + 100) covers 3 pages
  }
  std::uint32_t lk2 = 0, rk2 = 0;
  EXPECT_EQ(cache.keys_for(11 * kPage, kPage, true, &lk2, &rk2), Cache::Found::kCached);  // inside
  EXPECT_EQ(lk2, lk);
  EXPECT_EQ(rk2, rk);
  EXPECT_EQ(cache.keys_for(12 * kPage, kPage + 1, true, &lk2, &rk2), Cache::Found::kRegistered);  // past it
  EXPECT_EQ(reg.registered, 4u);
}

// A GET's key grants remote write only and a PUT's remote read only. A miss registers the pages both ways, so
// the other kind then finds its own key (a callback may reuse the buffer either way), and neither key is
// handed out for the other kind of request, by a caller thread or a core.
TEST(RegistrationCache, AKeyGrantsOnlyTheAccessOfItsRequestKind) {
  FakeRegistry reg;
  Cache cache(FakeRegistrar{&reg}, kPage);
  std::uint32_t get_lk = 0, get_rk = 0, put_lk = 0, put_rk = 0, lk = 0, rk = 0;
  ASSERT_EQ(cache.keys_for(30 * kPage, 2 * kPage, true, &get_lk, &get_rk), Cache::Found::kRegistered);
  EXPECT_EQ(reg.writable.count(get_lk), 1u);
  EXPECT_EQ(reg.registered, 2u) << "one registration per access";
  // The same bytes for a PUT: not the GET's registration but the read-only one made beside it.
  ASSERT_EQ(cache.keys_for(30 * kPage, 2 * kPage, false, &put_lk, &put_rk), Cache::Found::kCached);
  EXPECT_NE(put_rk, get_rk);
  EXPECT_EQ(reg.writable.count(put_lk), 0u);
  EXPECT_EQ(reg.registered, 2u);
  // Each lookup afterwards finds its own kind.
  EXPECT_EQ(cache.keys_for(30 * kPage + 8, 64, false, &lk, &rk), Cache::Found::kCached);
  EXPECT_EQ(rk, put_rk);
  EXPECT_EQ(cache.keys_for(30 * kPage + 8, 64, true, &lk, &rk), Cache::Found::kCached);
  EXPECT_EQ(rk, get_rk);
  CoreRegCache core;
  EXPECT_EQ(cache.core_keys_for(core, 30 * kPage, 64, false, &lk, &rk), CoreRegCache::Outcome::kFill);
  EXPECT_EQ(rk, put_rk);
  EXPECT_EQ(cache.core_keys_for(core, 30 * kPage, 64, true, &lk, &rk), CoreRegCache::Outcome::kFill);
  EXPECT_EQ(rk, get_rk);
  EXPECT_EQ(cache.core_keys_for(core, 30 * kPage, 64, false, &lk, &rk), CoreRegCache::Outcome::kHit);
  EXPECT_EQ(rk, put_rk);
  EXPECT_EQ(cache.core_keys_for(core, 30 * kPage, 64, true, &lk, &rk), CoreRegCache::Outcome::kHit);
  EXPECT_EQ(rk, get_rk);
  cache.release(30 * kPage);
  EXPECT_EQ(reg.deregistered, 2u) << "release drops both";
  EXPECT_EQ(reg.bad_dereg, 0u);
}

TEST(RegistrationCache, ReadOnlyMemoryServesPutsButNeverAGet) {
  FakeRegistry reg;
  reg.readonly_from = 100 * kPage;
  Cache cache(FakeRegistrar{&reg}, kPage);
  std::uint32_t lk = 0, rk = 0;
  EXPECT_EQ(cache.keys_for(100 * kPage, 64, true, &lk, &rk), Cache::Found::kFailed);  // a GET: needs write
  EXPECT_EQ(reg.registered, 0u);
  EXPECT_EQ(cache.keys_for(100 * kPage, 64, false, &lk, &rk), Cache::Found::kRegistered);  // a PUT: read only
  EXPECT_EQ(reg.registered, 1u) << "the write registration beside it is refused and skipped";
  EXPECT_EQ(reg.refused, 2u);
  EXPECT_EQ(cache.keys_for(100 * kPage, 64, false, &lk, &rk), Cache::Found::kCached);
  // The read-only entry is not handed to a GET, on a caller thread or on a core.
  EXPECT_EQ(cache.keys_for(100 * kPage, 64, true, &lk, &rk), Cache::Found::kFailed);
  CoreRegCache core;
  EXPECT_EQ(cache.core_keys_for(core, 100 * kPage, 64, true, &lk, &rk), CoreRegCache::Outcome::kUnregistered);
  EXPECT_EQ(cache.core_keys_for(core, 100 * kPage, 64, false, &lk, &rk), CoreRegCache::Outcome::kFill);
}

TEST(RegistrationCache, ACoreCopiesOnceNeverRegistersAndForgetsOnRelease) {
  FakeRegistry reg;
  Cache cache(FakeRegistrar{&reg}, kPage);
  CoreRegCache core;
  std::uint32_t lk = 0, rk = 0, clk = 0, crk = 0;
  EXPECT_EQ(cache.core_keys_for(core, 5 * kPage, 100, true, &clk, &crk), CoreRegCache::Outcome::kUnregistered);
  EXPECT_EQ(reg.registered, 0u);
  ASSERT_EQ(cache.keys_for(5 * kPage, 100, true, &lk, &rk), Cache::Found::kRegistered);
  EXPECT_EQ(cache.core_keys_for(core, 5 * kPage, 100, true, &clk, &crk), CoreRegCache::Outcome::kFill);
  EXPECT_EQ(clk, lk);
  EXPECT_EQ(crk, rk);
  EXPECT_EQ(cache.core_keys_for(core, 5 * kPage, 100, true, &clk, &crk), CoreRegCache::Outcome::kHit);
  cache.release(5 * kPage + 50);
  EXPECT_EQ(reg.deregistered, 2u);  // both accesses
  EXPECT_TRUE(reg.live.empty());
  // The core's copy was made under the old generation: emptied before its next lookup, never handed out.
  EXPECT_EQ(cache.core_keys_for(core, 5 * kPage, 100, true, &clk, &crk), CoreRegCache::Outcome::kUnregistered);
  ASSERT_EQ(cache.keys_for(5 * kPage, 100, true, &lk, &rk), Cache::Found::kRegistered);
  EXPECT_EQ(cache.core_keys_for(core, 5 * kPage, 100, true, &clk, &crk), CoreRegCache::Outcome::kFill);
  EXPECT_EQ(clk, lk);
  EXPECT_EQ(reg.bad_dereg, 0u);
}

TEST(RegistrationCache, ReleaseDropsEveryEntryHoldingTheAddressAndNothingElse) {
  FakeRegistry reg;
  Cache cache(FakeRegistrar{&reg}, kPage);
  std::uint32_t lk = 0, rk = 0;
  ASSERT_EQ(cache.keys_for(8 * kPage, kPage, true, &lk, &rk), Cache::Found::kRegistered);
  ASSERT_EQ(cache.keys_for(8 * kPage, 4 * kPage, true, &lk, &rk), Cache::Found::kRegistered);  // longer
  ASSERT_EQ(cache.keys_for(20 * kPage, kPage, true, &lk, &rk), Cache::Found::kRegistered);
  cache.release(8 * kPage);
  EXPECT_EQ(reg.deregistered, 4u);  // two ranges, each registered for both accesses
  EXPECT_EQ(reg.live.size(), 2u);
  EXPECT_EQ(cache.keys_for(20 * kPage, kPage, true, &lk, &rk), Cache::Found::kCached);
  cache.clear();
  EXPECT_TRUE(reg.live.empty());
  EXPECT_EQ(reg.bad_dereg, 0u);
}

// Caller threads registering and looking up, cores copying into their own caches and a thread releasing, all
// at once, as a client with callbacks that submit runs them. Under ThreadSanitizer this is the test of the
// cache's locking and of the generation's ordering; everywhere it checks that every key handed out belonged
// to a registration that was live when the lookup began, and that nothing leaks or is deregistered twice.
TEST(RegistrationCache, CallersCoresAndAReleaserAtOnce) {
  FakeRegistry reg;
  constexpr int kBuffers = 64, kCallers = 2, kCores = 2, kRounds = 4000;
  std::uint32_t handed_max = 0;
  {
    Cache cache(FakeRegistrar{&reg}, kPage);
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> hits{0}, fills{0}, misses{0}, bad_keys{0};
    auto buffer = [](int i) { return std::uintptr_t(1000 + 8 * i) * kPage + 64; };
    auto key_ok = [&](std::uint32_t lk, std::uint32_t rk) {
      if (rk != (lk | 0x80000000u) || lk == 0) return false;
      std::lock_guard<std::mutex> lock(reg.mu);
      return lk < reg.next;  // issued by the registrar (it may have been released since: the API allows that)
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kCallers; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t + 1));
        for (int r = 0; r < kRounds; ++r) {
          std::uint32_t lk = 0, rk = 0;
          const int i = static_cast<int>(rng() % kBuffers);
          if (cache.keys_for(buffer(i), 3 * kPage, (rng() & 1) != 0, &lk, &rk) == Cache::Found::kFailed ||
              !key_ok(lk, rk)) {
            bad_keys.fetch_add(1);
          }
        }
      });
    }
    for (int t = 0; t < kCores; ++t) {
      threads.emplace_back([&, t] {
        CoreRegCache core;
        std::mt19937 rng(static_cast<unsigned>(100 + t));
        while (!stop.load(std::memory_order_relaxed)) {
          std::uint32_t lk = 0, rk = 0;
          const int i = static_cast<int>(rng() % kBuffers);
          switch (cache.core_keys_for(core, buffer(i), 3 * kPage, false, &lk, &rk)) {
            case CoreRegCache::Outcome::kHit:
              hits.fetch_add(1);
              if (!key_ok(lk, rk)) bad_keys.fetch_add(1);
              break;
            case CoreRegCache::Outcome::kFill:
              fills.fetch_add(1);
              if (!key_ok(lk, rk)) bad_keys.fetch_add(1);
              break;
            case CoreRegCache::Outcome::kUnregistered:
              misses.fetch_add(1);
              break;
          }
        }
      });
    }
    threads.emplace_back([&] {
      std::mt19937 rng(7);
      for (int r = 0; r < kRounds / 4; ++r) {
        cache.release(buffer(static_cast<int>(rng() % kBuffers)));
        std::this_thread::yield();
      }
    });
    for (int t = 0; t < kCallers; ++t) threads[static_cast<std::size_t>(t)].join();
    threads.back().join();
    stop.store(true);
    for (int t = 0; t < kCores; ++t) threads[static_cast<std::size_t>(kCallers + t)].join();
    EXPECT_EQ(bad_keys.load(), 0u);
    EXPECT_GT(fills.load(), 0u);
    EXPECT_GT(hits.load() + misses.load(), 0u);
    {
      std::lock_guard<std::mutex> lock(reg.mu);
      handed_max = reg.next;
      EXPECT_EQ(reg.registered - reg.deregistered, reg.live.size());
    }
  }  // the cache's end deregisters the rest
  EXPECT_TRUE(reg.live.empty());
  EXPECT_EQ(reg.registered, reg.deregistered);
  EXPECT_EQ(reg.bad_dereg, 0u);
  EXPECT_GT(handed_max, static_cast<std::uint32_t>(kBuffers));  // releases forced re-registrations
}

}  // namespace
}  // namespace rdmagate::client

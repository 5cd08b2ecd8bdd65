// The embedded store's cost per operation on one core (no contention): GET (lookup + pin + unpin) and
// PUT (reserve + copy + commit, replacing the previous value) at 64 B and 4 KiB, and a GET while another
// thread overwrites the same keys. Reported per op: the benchmark's own time per iteration.
// BM_SlotHash: the slot hash alone by key length, the keyed one every op computes (SipHash-2-4 under the
// process seed) beside the unkeyed mix it replaced, in the same run.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "services/storage/memory/store.hpp"
#include "tests/services/storage/memory/colliding_keys.hpp"
#include "tests/services/storage/memory/store_test_peer.hpp"

namespace rdmagate::store {
namespace {

constexpr uint32_t kKeys = 1024;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "store_bench: %s\n", what);
    std::abort();
  }
}

struct Fixture {
  explicit Fixture(uint32_t value_size) : value(value_size, std::byte{0x5a}) {
    StoreConfig c;
    c.max_value = 1 << 20;
    c.max_objects = 4 * kKeys;
    c.max_inflight = 1024;
    c.max_cores = 4;
    const size_t bytes = size_t{64} << 20;
    region.reset(new std::byte[bytes]);
    std::string error;
    store = Store::create(c, {region.get(), bytes}, &error);
    check(store != nullptr, error.c_str());
    for (uint32_t i = 0; i < kKeys; ++i) keys.push_back("bench-key-" + std::to_string(i));
    for (const auto& k : keys) check(store->put(0, k, {value.data(), value.size()}) == Status::kOk, "fill");
  }
  std::unique_ptr<std::byte[]> region;
  std::unique_ptr<Store> store;
  std::vector<std::string> keys;
  std::vector<std::byte> value;
};

void BM_Get(benchmark::State& state) {
  Fixture f(static_cast<uint32_t>(state.range(0)));
  uint32_t i = 0;
  for (auto _ : state) {
    PinnedValue v;
    check(f.store->get(0, f.keys[i++ % kKeys], &v) == Status::kOk, "get");
    benchmark::DoNotOptimize(v.data);
    f.store->unpin(&v);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Put(benchmark::State& state) {
  Fixture f(static_cast<uint32_t>(state.range(0)));
  uint32_t i = 0;
  for (auto _ : state) {
    check(f.store->put(0, f.keys[i++ % kKeys], {f.value.data(), f.value.size()}) == Status::kOk, "put");
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

// GET on one core while another core overwrites the same keys: the cost of pin retries and shared lines.
void BM_GetUnderOverwrite(benchmark::State& state) {
  Fixture f(static_cast<uint32_t>(state.range(0)));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    uint32_t j = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const Status st = f.store->put(1, f.keys[j++ % kKeys], {f.value.data(), f.value.size()});
      check(st == Status::kOk || st == Status::kNoSpace, "writer put");
    }
  });
  uint32_t i = 0;
  for (auto _ : state) {
    PinnedValue v;
    check(f.store->get(0, f.keys[i++ % kKeys], &v) == Status::kOk, "get");
    benchmark::DoNotOptimize(v.data);
    f.store->unpin(&v);
  }
  stop.store(true);
  writer.join();
  state.SetItemsProcessed(state.iterations());
}

std::vector<std::string> keys_of_length(size_t len) {
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < kKeys; ++i) {
    std::string k("bench-key-");
    k.append(std::to_string(i));
    k.resize(len, 'x');
    keys.push_back(std::move(k));
  }
  return keys;
}

void BM_SlotHashKeyed(benchmark::State& state) {
  Fixture f(64);
  const auto keys = keys_of_length(static_cast<size_t>(state.range(0)));
  uint32_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(StoreTestPeer::hash_of(*f.store, keys[i++ % kKeys]));
  state.SetItemsProcessed(state.iterations());
}

void BM_SlotHashUnkeyed(benchmark::State& state) {
  const auto keys = keys_of_length(static_cast<size_t>(state.range(0)));
  uint32_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(test::unkeyed_hash(keys[i++ % kKeys]));
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_SlotHashKeyed)->Arg(13)->Arg(64)->Arg(250);
BENCHMARK(BM_SlotHashUnkeyed)->Arg(13)->Arg(64)->Arg(250);
BENCHMARK(BM_Get)->Arg(64)->Arg(4096);
BENCHMARK(BM_Put)->Arg(64)->Arg(4096);
BENCHMARK(BM_GetUnderOverwrite)->Arg(64)->Arg(4096)->UseRealTime();

}  // namespace
}  // namespace rdmagate::store

BENCHMARK_MAIN();

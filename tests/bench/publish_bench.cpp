// Cost of the issue-6 publication scheme: what a data-plane core pays per publish_core_counters call (once
// per ~1 ms of TSC, at its ring-check point), with and without a scraper reading its block at the same time,
// and what one scrape costs the HTTP thread (Collect, and Collect + text serialisation) with 4 cores.
// Judge numbers from a Release build.
#include <benchmark/benchmark.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <memory>
#include <sstream>
#include <thread>

#include "daemon/engine_stats_publish.hpp"
#include "dataplane/core_stats_publish.hpp"
#include "telemetry/collector.hpp"
#include "telemetry/stats.hpp"

namespace {

using rdmagate::dataplane::CoreCounters;
using rdmagate::dataplane::PollerTimes;
using rdmagate::dataplane::publish_core_counters;
using rdmagate::telemetry::CoreStats;
using rdmagate::telemetry::StatsCollector;

constexpr unsigned kCores = 4;

CoreCounters busy_counters(std::uint64_t seed) {
  CoreCounters c;
  c.polls = seed * 1'000'000;
  c.idle_polls = seed * 400'000;
  c.completions_recv = seed * 90'000;
  c.completions_send = seed * 11'000;
  for (std::size_t i = 1; i < c.msgs_rx.size(); ++i) {
    c.msgs_rx[i] = seed * 1000 * i;
    c.msgs_tx[i] = seed * 900 * i;
    c.bytes_rx[i] = seed * 100'000 * i;
    c.bytes_tx[i] = seed * 90'000 * i;
  }
  c.noops = seed * 50;
  c.keepalives = seed;
  return c;
}

// Everything a 4-core gateway would have registered, with every slot non-zero.
struct Fleet {
  std::unique_ptr<CoreStats[]> blocks = std::make_unique<CoreStats[]>(kCores);
  std::unique_ptr<CoreStats> control = std::make_unique<CoreStats>();
  StatsCollector collector{"bench", 2'400'000'000ull};
  Fleet() {
    for (unsigned i = 0; i < kCores; ++i) {
      collector.register_core(i, blocks[i]);
      publish_core_counters(busy_counters(i + 1), PollerTimes{1'000'000ull * (i + 1), 5'000'000}, blocks[i]);
      for (std::uint64_t ns = 1000; ns < 50'000'000; ns = ns * 3 / 2) {
        blocks[i].observe_request_ns(rdmagate::protocol::ObjectOp::kGet, ns);
      }
    }
    collector.register_control(*control);
    rdmagate::control::EngineCounters ec;
    ec.accepts = 100;
    ec.async_by_kind[0] = 3;
    rdmagate::control::publish_engine_counters(ec, *control);
    rdmagate::store::StoreStats ss;
    ss.objects = 1000;
    ss.capacity_bytes = 1ull << 30;
    rdmagate::control::publish_store_stats(ss, *control);
  }
};

// One publication: about 80 relaxed stores into the core's own block. Arg 1: a second thread scrapes the
// same blocks in a loop meanwhile (the worst case for the core: its lines are being read remotely).
void BM_PublishCoreCounters(benchmark::State& state) {
  Fleet fleet;
  CoreCounters c = busy_counters(7);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> scrapes{0};
  std::thread scraper;
  if (state.range(0) != 0) {
    scraper = std::thread([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        benchmark::DoNotOptimize(fleet.collector.Collect());
        scrapes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  PollerTimes t{1000, 2000};
  for (auto _ : state) {
    ++c.polls;  // as the core would between two publications
    ++t.busy_tsc;
    publish_core_counters(c, t, fleet.blocks[0]);
    benchmark::ClobberMemory();
  }
  stop.store(true);
  if (scraper.joinable()) scraper.join();
  state.counters["scrapes"] = static_cast<double>(scrapes.load());
}
BENCHMARK(BM_PublishCoreCounters)->Arg(0)->Arg(1)->UseRealTime();

// The HTTP thread's side: read and sum every block into metric families.
void BM_CollectFourCores(benchmark::State& state) {
  Fleet fleet;
  std::size_t families = 0;
  for (auto _ : state) {
    auto out = fleet.collector.Collect();
    families = out.size();
    benchmark::DoNotOptimize(out);
  }
  state.counters["families"] = static_cast<double>(families);
}
BENCHMARK(BM_CollectFourCores);

// A whole /metrics body: Collect plus prometheus-cpp's text serialisation.
void BM_ScrapeTextFourCores(benchmark::State& state) {
  Fleet fleet;
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::ostringstream os;
    prometheus::TextSerializer().Serialize(os, fleet.collector.Collect());
    bytes = os.str().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["body_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ScrapeTextFourCores);

}  // namespace

BENCHMARK_MAIN();

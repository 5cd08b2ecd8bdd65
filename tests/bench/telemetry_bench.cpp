// Data-path cost of telemetry updates (goal: about 1 ns per counter increment, a few ns per histogram
// observation), plus the scrape-side Collect for reference. Judge numbers from a Release build.
#include <benchmark/benchmark.h>

#include <memory>

#include "telemetry/collector.hpp"
#include "telemetry/stats.hpp"

namespace {

using rdmagate::protocol::ObjectOp;
using rdmagate::telemetry::CoreStats;
using rdmagate::telemetry::Direction;
using rdmagate::telemetry::Stat;

void BM_CounterIncrement(benchmark::State& state) {
  auto s = std::make_unique<CoreStats>();
  for (auto _ : state) s->add(Stat::kPolls);
  benchmark::DoNotOptimize(s->load(Stat::kPolls));
}
BENCHMARK(BM_CounterIncrement);

// The typical per-message update: message count and bytes by type/direction.
void BM_MessageAccounting(benchmark::State& state) {
  auto s = std::make_unique<CoreStats>();
  std::size_t type = 0;
  for (auto _ : state) {
    s->add(rdmagate::telemetry::message_stat(type, Direction::kRx));
    s->add(rdmagate::telemetry::bytes_stat(type, Direction::kRx), 256);
    type = (type + 1) % 6;
  }
  benchmark::DoNotOptimize(s->load(Stat::kMessagesFirst));
}
BENCHMARK(BM_MessageAccounting);

void BM_HistogramObserve(benchmark::State& state) {
  auto s = std::make_unique<CoreStats>();
  std::uint64_t ns = 1000;
  for (auto _ : state) {
    s->observe_request_ns(ObjectOp::kGet, ns);
    ns = ns * 3 % 1'000'000'007ull;  // spread over buckets so the branch predictor cannot learn one
  }
  benchmark::DoNotOptimize(s->request_duration[0].sum_ns);
}
BENCHMARK(BM_HistogramObserve);

void BM_TscToNsPlusObserve(benchmark::State& state) {
  auto s = std::make_unique<CoreStats>();
  const rdmagate::telemetry::TscToNs conv(2'400'000'000ull);
  std::uint64_t tsc = 5000;
  for (auto _ : state) {
    s->observe_request_ns(ObjectOp::kPut, conv.ns(tsc));
    tsc = tsc * 3 % 1'000'000'007ull;
  }
  benchmark::DoNotOptimize(s->request_duration[1].sum_ns);
}
BENCHMARK(BM_TscToNsPlusObserve);

void BM_CollectTwoCores(benchmark::State& state) {
  rdmagate::telemetry::StatsCollector c("bench", 2'400'000'000ull);
  auto a = std::make_unique<CoreStats>();
  auto b = std::make_unique<CoreStats>();
  c.register_core(0, *a);
  c.register_core(1, *b);
  for (auto _ : state) benchmark::DoNotOptimize(c.Collect());
}
BENCHMARK(BM_CollectTwoCores);

}  // namespace

BENCHMARK_MAIN();

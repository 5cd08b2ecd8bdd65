#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "telemetry/collector.hpp"
#include "telemetry/stats.hpp"

namespace rdmagate::telemetry {
namespace {

using protocol::ObjectOp;

TEST(LatencyHistogram, BucketBoundaries) {
  using H = LatencyHistogram;
  EXPECT_EQ(H::bucket_index(0), 0u);
  EXPECT_EQ(H::bucket_index(1), 0u);
  EXPECT_EQ(H::bucket_index(1024), 0u);  // le is inclusive
  EXPECT_EQ(H::bucket_index(1025), 1u);
  EXPECT_EQ(H::bucket_index(2048), 1u);
  EXPECT_EQ(H::bucket_index(2049), 2u);
  for (std::size_t i = 0; i < H::kFiniteBuckets; ++i) {
    EXPECT_EQ(H::bucket_index(H::upper_bound_ns(i)), i) << i;
    EXPECT_EQ(H::bucket_index(H::upper_bound_ns(i) + 1), i + 1) << i;
  }
  EXPECT_EQ(H::upper_bound_ns(H::kFiniteBuckets - 1), 1ull << 34);  // about 17 s
  EXPECT_EQ(H::bucket_index(~0ull), H::kFiniteBuckets);              // +Inf
}

TEST(LatencyHistogram, ObserveCountsAndSums) {
  LatencyHistogram h;
  h.observe_ns(1000);
  h.observe_ns(1500);
  h.observe_ns(1ull << 40);
  EXPECT_EQ(h.buckets[0], 1u);
  EXPECT_EQ(h.buckets[1], 1u);
  EXPECT_EQ(h.buckets[LatencyHistogram::kFiniteBuckets], 1u);
  EXPECT_EQ(h.sum_ns, 2500u + (1ull << 40));
  EXPECT_EQ(h.count(), 3u);
}

TEST(CoreStats, LayoutIsCacheLineAligned) {
  EXPECT_EQ(alignof(CoreStats), kCacheLine);
  auto blocks = std::make_unique<CoreStats[]>(3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(&blocks[i]) % kCacheLine, 0u);
}

TEST(CoreStats, AddSubSetLoad) {
  CoreStats s;
  s.add(Stat::kPolls);
  s.add(Stat::kPolls, 4);
  EXPECT_EQ(s.load(Stat::kPolls), 5u);
  s.add(connection_stat(1), 3);
  s.sub(connection_stat(1));
  EXPECT_EQ(s.load(connection_stat(1)), 2u);
  s.set(Stat::kStoreCapacityBytes, 1u << 20);
  EXPECT_EQ(s.load(Stat::kStoreCapacityBytes), 1u << 20);
}

TEST(TscToNs, Converts) {
  const TscToNs c(2'000'000'000ull);
  EXPECT_NEAR(static_cast<double>(c.ns(2'000'000'000ull)), 1e9, 1.0);
  EXPECT_NEAR(static_cast<double>(c.ns(3)), 1.0, 1.0);
  EXPECT_NEAR(static_cast<double>(c.ns(40'000'000'000ull)), 2e10, 10.0);  // 20 s of a 2 GHz TSC: no overflow
}

double counter_value(const std::vector<prometheus::MetricFamily>& fams, const std::string& name,
                     const std::string& label = "", const std::string& value = "") {
  for (const auto& f : fams) {
    if (f.name != name) continue;
    double sum = 0;
    for (const auto& m : f.metric) {
      bool match = label.empty();
      for (const auto& l : m.label)
        if (l.name == label && l.value == value) match = true;
      if (match) sum += f.type == prometheus::MetricType::Gauge ? m.gauge.value : m.counter.value;
    }
    return sum;
  }
  return -1;
}

TEST(StatsCollector, RejectsDuplicateCore) {
  StatsCollector c("t", 1'000'000'000);
  CoreStats a, b;
  EXPECT_TRUE(c.register_core(0, a));
  EXPECT_FALSE(c.register_core(0, b));
  EXPECT_TRUE(c.register_core(1, b));
}

TEST(StatsCollector, SumsCoresAndControlAndConvertsTsc) {
  StatsCollector c("t", 1'000'000'000);
  CoreStats a, b, ctl;
  ASSERT_TRUE(c.register_core(0, a));
  ASSERT_TRUE(c.register_core(1, b));
  c.register_control(ctl);
  a.add(message_stat(1, Direction::kRx), 3);
  b.add(message_stat(1, Direction::kRx), 4);
  ctl.add(Stat::kAccepts, 2);
  ctl.add(Stat::kPolls, 100);  // control blocks never appear in per-core series
  a.add(Stat::kBusyTsc, 1'500'000'000);
  const auto fams = c.Collect();
  EXPECT_EQ(counter_value(fams, "rdmagate_transport_messages_total", "type", "inline_request"), 7);
  EXPECT_EQ(counter_value(fams, "rdmagate_connection_accepts_total"), 2);
  EXPECT_EQ(counter_value(fams, "rdmagate_poller_polls_total"), 0);
  EXPECT_DOUBLE_EQ(counter_value(fams, "rdmagate_poller_busy_seconds_total", "core", "0"), 1.5);
}

TEST(StatsCollector, HistogramsMergeAcrossCores) {
  StatsCollector c("t", 1'000'000'000);
  CoreStats a, b;
  ASSERT_TRUE(c.register_core(0, a));
  ASSERT_TRUE(c.register_core(1, b));
  a.observe_request_ns(ObjectOp::kGet, 1000);  // bucket 0
  b.observe_request_ns(ObjectOp::kGet, 1024);  // bucket 0
  b.observe_request_ns(ObjectOp::kGet, 3000);  // bucket 2 (le 4096 ns)
  a.observe_request_ns(ObjectOp::kPut, 5000);
  const auto fams = c.Collect();
  const prometheus::MetricFamily* f = nullptr;
  for (const auto& x : fams)
    if (x.name == "rdmagate_request_duration_seconds") f = &x;
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->metric.size(), kRadosHistogramFirst);  // the request histograms; the librados ones follow
  const auto& get = f->metric[0];
  ASSERT_EQ(get.label.at(0).value, "get");
  EXPECT_EQ(get.histogram.sample_count, 3u);
  EXPECT_DOUBLE_EQ(get.histogram.sample_sum, 5024e-9);
  ASSERT_EQ(get.histogram.bucket.size(), LatencyHistogram::kBuckets);
  EXPECT_EQ(get.histogram.bucket[0].cumulative_count, 2u);
  EXPECT_DOUBLE_EQ(get.histogram.bucket[0].upper_bound, 1024e-9);
  EXPECT_EQ(get.histogram.bucket[1].cumulative_count, 2u);
  EXPECT_EQ(get.histogram.bucket[2].cumulative_count, 3u);
  EXPECT_EQ(get.histogram.bucket.back().cumulative_count, 3u);
  EXPECT_TRUE(std::isinf(get.histogram.bucket.back().upper_bound));
  EXPECT_EQ(f->metric[1].histogram.sample_count, 1u);
  EXPECT_EQ(f->metric[2].histogram.sample_count, 0u);
}

// Writers increment their own block while the scraper sums: every scraped total is monotonic and the final
// scrape equals the exact number of increments (no lost or torn updates).
TEST(StatsCollector, ConcurrentWritersWhileScraping) {
  constexpr unsigned kCores = 3;
  constexpr std::uint64_t kIters = 200'000;
  StatsCollector c("t", 1'000'000'000);
  auto blocks = std::make_unique<CoreStats[]>(kCores);
  for (unsigned i = 0; i < kCores; ++i) ASSERT_TRUE(c.register_core(i, blocks[i]));
  std::atomic<unsigned> done{0};
  std::vector<std::thread> writers;
  for (unsigned i = 0; i < kCores; ++i) {
    writers.emplace_back([&, i] {
      CoreStats& s = blocks[i];
      for (std::uint64_t n = 0; n < kIters; ++n) {
        s.add(Stat::kPolls);
        s.add(bytes_stat(0, Direction::kTx), 1000);
        s.observe_request_ns(ObjectOp::kGet, (n % 64) * 1000);
      }
      done.fetch_add(1);
    });
  }
  double last_polls = 0, last_bytes = 0;
  std::uint64_t last_count = 0;
  unsigned scrapes = 0;
  while (done.load() < kCores || scrapes == 0) {
    const auto fams = c.Collect();
    const double polls = counter_value(fams, "rdmagate_poller_polls_total");
    const double bytes = counter_value(fams, "rdmagate_transport_message_bytes_total", "direction", "tx");
    EXPECT_GE(polls, last_polls);
    EXPECT_GE(bytes, last_bytes);
    EXPECT_EQ(std::fmod(bytes, 1000.0), 0.0);  // no torn value
    for (const auto& f : fams) {
      if (f.name != "rdmagate_request_duration_seconds") continue;
      const auto& h = f.metric[0].histogram;
      EXPECT_GE(h.sample_count, last_count);
      last_count = h.sample_count;
      for (std::size_t i = 1; i < h.bucket.size(); ++i)
        EXPECT_GE(h.bucket[i].cumulative_count, h.bucket[i - 1].cumulative_count);
      EXPECT_EQ(h.bucket.back().cumulative_count, h.sample_count);
    }
    last_polls = polls;
    last_bytes = bytes;
    ++scrapes;
  }
  for (auto& t : writers) t.join();
  const auto fams = c.Collect();
  EXPECT_EQ(counter_value(fams, "rdmagate_poller_polls_total"), static_cast<double>(kCores * kIters));
  EXPECT_EQ(counter_value(fams, "rdmagate_transport_message_bytes_total", "direction", "tx"),
            static_cast<double>(kCores * kIters * 1000));
  EXPECT_GT(scrapes, 0u);
}

}  // namespace
}  // namespace rdmagate::telemetry

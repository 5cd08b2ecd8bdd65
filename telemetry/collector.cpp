#include "telemetry/collector.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "telemetry/metrics.hpp"

namespace rdmagate::telemetry {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

void add_labels(ClientMetric& m, const std::array<LabelPair, 2>& labels) {
  for (const auto& l : labels)
    if (!l.name.empty()) m.label.push_back({std::string(l.name), std::string(l.value)});
}

MetricFamily& family_for(std::vector<MetricFamily>& out, std::string_view name, std::string_view help,
                         MetricType type) {
  if (out.empty() || out.back().name != name) out.push_back(MetricFamily{std::string(name), std::string(help), type, {}});
  return out.back();
}

// An info metric: one series whose labels carry the facts and whose value is always 1.
void add_info(std::vector<MetricFamily>& out, std::string_view name, std::string_view help,
              std::initializer_list<prometheus::ClientMetric::Label> labels) {
  ClientMetric m;
  m.label.assign(labels.begin(), labels.end());
  m.gauge.value = 1;
  family_for(out, name, help, MetricType::Gauge).metric.push_back(std::move(m));
}

}  // namespace

#ifndef RDMAGATE_GIT_COMMIT
#define RDMAGATE_GIT_COMMIT "unknown"
#endif
std::string_view StatsCollector::build_commit() noexcept { return RDMAGATE_GIT_COMMIT; }

StatsCollector::StatsCollector(std::string version, std::uint64_t tsc_hz)
    : version_(std::move(version)), tsc_hz_(tsc_hz == 0 ? 1e9 : static_cast<double>(tsc_hz)) {}

bool StatsCollector::register_core(unsigned core_id, CoreStats& block) {
  const std::lock_guard lock(mutex_);
  if (std::any_of(cores_.begin(), cores_.end(), [&](const Entry& e) { return e.core == core_id; })) return false;
  cores_.push_back({core_id, &block});
  return true;
}

void StatsCollector::register_control(CoreStats& block) {
  const std::lock_guard lock(mutex_);
  control_.push_back(&block);
}

void StatsCollector::set_backend(std::string backend, std::string configured) {
  const std::lock_guard lock(mutex_);
  backend_ = std::move(backend);
  backend_configured_ = std::move(configured);
}

std::vector<StatsCollector::CoreProgress> StatsCollector::core_progress() const {
  const std::lock_guard lock(mutex_);
  std::vector<CoreProgress> out;
  out.reserve(cores_.size());
  for (const auto& e : cores_) {
    if (e.block->load(Stat::kSleeping) != 0) ++e.asleep_seen;
    out.push_back(
        {e.core, e.block->load(Stat::kPolls) + e.asleep_seen, e.block->load(Stat::kCoreOutOfService) != 0});
  }
  return out;
}

double StatsCollector::export_value(std::uint64_t raw, Unit unit, bool gauge) const noexcept {
  if (unit == Unit::kTscSeconds) return static_cast<double>(raw) / tsc_hz_;
  if (unit == Unit::kMicroSeconds) return static_cast<double>(raw) / 1e6;
  // A gauge moved by add/sub wraps below zero; show that as negative rather than as 1.8e19.
  if (gauge) return static_cast<double>(static_cast<std::int64_t>(raw));
  return static_cast<double>(raw);
}

std::vector<MetricFamily> StatsCollector::Collect() const {
  const std::lock_guard lock(mutex_);
  std::vector<MetricFamily> out;

  add_info(out, kBuildInfoName, "Build information; the value is always 1.",
           {{"version", version_}, {"commit", std::string(build_commit())}});
  if (!backend_.empty()) {
    add_info(out, kBackendInfoName, "Device backend the data-plane cores run; the value is always 1.",
             {{"backend", backend_}, {"configured", backend_configured_}});
  }

  for (const MetricDesc& d : metric_table()) {
    const bool gauge = d.kind == MetricKind::kGauge;
    auto& f = family_for(out, d.name, d.help, gauge ? MetricType::Gauge : MetricType::Counter);
    auto emit = [&](std::uint64_t raw, const std::string* core) {
      ClientMetric m;
      if (core != nullptr) m.label.push_back({std::string(kCoreLabel), *core});
      add_labels(m, d.labels);
      const double v = export_value(raw, d.unit, gauge);
      if (gauge) {
        m.gauge.value = v;
      } else {
        m.counter.value = v;
      }
      f.metric.push_back(std::move(m));
    };
    if (d.scope == Scope::kPerCore) {
      for (const auto& e : cores_) {
        const std::string core = std::to_string(e.core);
        emit(e.block->load(d.stat), &core);
      }
    } else {
      std::uint64_t sum = 0;
      for (const auto& e : cores_) sum += e.block->load(d.stat);
      for (const CoreStats* c : control_) sum += c->load(d.stat);
      emit(sum, nullptr);
    }
  }

  const auto hists = histogram_table();
  for (std::size_t h = 0; h < hists.size(); ++h) {
    const HistogramDesc& d = hists[h];
    auto& f = family_for(out, d.name, d.help, MetricType::Histogram);
    std::array<std::uint64_t, LatencyHistogram::kBuckets> merged{};
    std::uint64_t sum_ns = 0;
    auto merge = [&](const CoreStats& c) {
      const LatencyHistogram& lh = c.request_duration[h];
      for (std::size_t i = 0; i < merged.size(); ++i) merged[i] += LatencyHistogram::read(lh.buckets[i]);
      sum_ns += LatencyHistogram::read(lh.sum_ns);
    };
    for (const auto& e : cores_) merge(*e.block);
    for (const CoreStats* c : control_) merge(*c);

    ClientMetric m;
    m.label.push_back({std::string(d.label.name), std::string(d.label.value)});
    // The count is the sum of the buckets read, not a separately stored count, so +Inf always equals
    // _count even while writers run.
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < merged.size(); ++i) {
      cumulative += merged[i];
      // Integer nanoseconds over 1e9: IEEE division rounds correctly, so this is the double nearest the
      // exact bound in seconds, which serialize_text prints as exactly that decimal.
      const double le = i < LatencyHistogram::kFiniteBuckets
                            ? static_cast<double>(LatencyHistogram::upper_bound_ns(i)) / 1e9
                            : std::numeric_limits<double>::infinity();
      m.histogram.bucket.push_back({cumulative, le});
    }
    m.histogram.sample_count = cumulative;
    m.histogram.sample_sum = static_cast<double>(sum_ns) / 1e9;
    f.metric.push_back(std::move(m));
  }
  return out;
}

}  // namespace rdmagate::telemetry

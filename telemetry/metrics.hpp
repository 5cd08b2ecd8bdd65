#pragma once
// The metric set as data: one row per Stat slot (name, type, unit, scope, help, label values). The collector,
// the naming tests and docs/metrics.md all work from this table, so adding a metric is adding a row.

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "telemetry/stats.hpp"

namespace rdmagate::telemetry {

enum class MetricKind : std::uint8_t { kCounter = 0, kGauge = 1 };
// kTscSeconds: stored as TSC cycles on the data path (no division there), exported in seconds.
// kMicroSeconds: stored in microseconds (a count that is already a duration), exported in seconds.
enum class Unit : std::uint8_t { kNone = 0, kBytes = 1, kTscSeconds = 2, kMicroSeconds = 3 };
// kPerCore series carry a `core` label; kSummed series are added up over every registered block.
enum class Scope : std::uint8_t { kSummed = 0, kPerCore = 1 };

struct LabelPair {
  std::string_view name;
  std::string_view value;
};

struct MetricDesc {
  Stat stat{};
  std::string_view name;
  MetricKind kind = MetricKind::kCounter;
  Unit unit = Unit::kNone;
  Scope scope = Scope::kSummed;
  std::string_view help;
  std::array<LabelPair, 2> labels{};  // unused entries have an empty name
};

struct HistogramDesc {
  std::string_view name;
  std::string_view help;
  LabelPair label;
};

inline constexpr std::string_view kBuildInfoName = "rdmagate_build_info";
// Which device backend the cores run: chosen at start from the device, so not a build property.
inline constexpr std::string_view kBackendInfoName = "rdmagate_dataplane_backend_info";
inline constexpr std::string_view kCoreLabel = "core";

// Rows in Stat order; rows of one family are contiguous (the collector relies on it, a test checks it).
std::span<const MetricDesc> metric_table() noexcept;
// Row i describes CoreStats::request_duration[i].
std::span<const HistogramDesc> histogram_table() noexcept;

}  // namespace rdmagate::telemetry

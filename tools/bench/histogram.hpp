#pragma once
// The bench's latency histogram, header-only and free of DPDK so that the echo client service (on the
// engine's cores), the client-library runs and the host tests of the report all share it.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace rdmagate::bench {

// Log-linear histogram of unsigned values (TSC ticks): exact below 128, then 64 sub-buckets per power of
// two (relative error below 1/64). Minimum, maximum, sum and sum of squares are exact (the sum of squares to
// a double's precision), so t_min, t_max, t_avg and t_stdev do not carry the buckets' error. Single writer;
// merge() after the writers stopped.
class Histogram {
 public:
  static constexpr unsigned kSub = 64;
  static constexpr std::size_t kBuckets = kSub * 59;

  void record(std::uint64_t v) noexcept {
    ++buckets_[index(v)];
    ++count_;
    sum_ += v;
    const auto d = static_cast<double>(v);
    sum_sq_ += d * d;
    if (v > max_) max_ = v;
    if (v < min_) min_ = v;
  }
  void merge(const Histogram& o) noexcept {
    for (std::size_t i = 0; i < kBuckets; ++i) buckets_[i] += o.buckets_[i];
    count_ += o.count_;
    sum_ += o.sum_;
    sum_sq_ += o.sum_sq_;
    max_ = std::max(max_, o.max_);
    min_ = std::min(min_, o.min_);
  }
  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t max() const noexcept { return max_; }
  std::uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  double mean() const noexcept {
    return count_ == 0 ? 0.0 : static_cast<double>(sum_) / static_cast<double>(count_);
  }
  // Population standard deviation, as perftest's t_stdev.
  double stdev() const noexcept {
    if (count_ == 0) return 0.0;
    const double m = mean();
    return std::sqrt(std::max(0.0, sum_sq_ / static_cast<double>(count_) - m * m));
  }
  // The value at quantile q (0..1]: the midpoint of the bucket holding it (exact below 128); max for q >= 1.
  std::uint64_t quantile(double q) const noexcept {
    if (count_ == 0) return 0;
    if (q >= 1.0) return max_;
    const auto want =
        std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_))));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < kBuckets; ++i) {
      seen += buckets_[i];
      if (seen >= want) return std::clamp(bucket_mid(i), min_, max_);
    }
    return max_;
  }

  static std::size_t index(std::uint64_t v) noexcept {
    if (v < 2 * kSub) return static_cast<std::size_t>(v);
    const unsigned msb = 63u - static_cast<unsigned>(__builtin_clzll(v));
    const unsigned e = msb - 6;  // v >> e is in [64, 128)
    return std::size_t{kSub} * (e + 1) + static_cast<std::size_t>((v >> e) - kSub);
  }
  static std::uint64_t bucket_mid(std::size_t i) noexcept {
    if (i < 2 * kSub) return i;
    const unsigned e = static_cast<unsigned>(i / kSub) - 1;
    const std::uint64_t m = i % kSub + kSub;
    return (m << e) + ((std::uint64_t{1} << e) >> 1);
  }

 private:
  std::array<std::uint64_t, kBuckets> buckets_{};
  std::uint64_t count_ = 0, sum_ = 0, max_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  double sum_sq_ = 0;
};

}  // namespace rdmagate::bench

#pragma once
// The TSC frequency with or without EAL. rte_get_tsc_hz() is 0 until rte_eal_init has run; a process that
// never brings EAL up (the client's kCaller / kThread modes) measures it once against steady_clock instead
// (20 ms: well under 0.1 % error, which is all timeouts and keepalives need).

#include <rte_cycles.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace rdmagate::dataplane {

inline std::uint64_t measure_tsc_hz() noexcept {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const std::uint64_t c0 = rte_rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::uint64_t c1 = rte_rdtsc();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
  return ns > 0 ? (c1 - c0) * 1'000'000'000ull / static_cast<std::uint64_t>(ns) : 1'000'000'000ull;
}

// EAL's value when EAL is up, else the measurement (taken on first use, then fixed for the process).
inline std::uint64_t tsc_hz() noexcept {
  if (const std::uint64_t hz = rte_get_tsc_hz(); hz != 0) return hz;
  static const std::uint64_t measured = measure_tsc_hz();
  return measured;
}

}  // namespace rdmagate::dataplane

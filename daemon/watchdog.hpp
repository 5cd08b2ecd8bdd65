#pragma once
// The systemd watchdog's decision (WatchdogSec= in deploy/systemd/rdmagate.service): the control loop sends
// WATCHDOG=1 only while every data-plane core makes progress, so systemd restarts a gateway whose core hangs
// even though its control thread, which is what pings, still runs.
//
// "Progress" is the one /healthz uses (telemetry::HealthState): a core's published poll counter moved within
// telemetry.core_stall_ms. The samples are the watchdog's own rather than HealthState's, so the decision is
// a pure function of what the caller passes (host-tested without a collector), taken at the control loop's
// cadence whether or not anything probes /healthz.

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

namespace rdmagate::control {

// One core's poll counter as telemetry's StatsCollector::core_progress() reports it.
struct CorePolls {
  unsigned core = 0;
  std::uint64_t polls = 0;
};

// What the previous check saw of one core.
struct CoreSeen {
  unsigned core = 0;
  std::uint64_t polls = 0;
  std::chrono::steady_clock::time_point changed{};  // when `polls` last moved, or the core was first seen
};

struct WatchdogCheck {
  bool ping = false;
  std::vector<unsigned> stalled;  // cores whose counter stood still longer than the threshold, in input order
  std::vector<CoreSeen> seen;     // pass to the next check
};

// Ping when there is at least one core and none stood still longer than `threshold`. A core seen for the
// first time gets a full threshold from `now`, as in HealthState. No core means nothing shows progress: no
// ping (the daemon never runs without one; /healthz says "not live" then too).
WatchdogCheck check_watchdog(std::span<const CoreSeen> seen, std::span<const CorePolls> progress,
                             std::chrono::steady_clock::time_point now, std::chrono::nanoseconds threshold);

// How often the control loop checks and pings, given systemd's WATCHDOG_USEC: half of it, as
// sd_watchdog_enabled(3) advises, so one late turn of the loop is not yet a missed ping.
constexpr std::chrono::microseconds watchdog_ping_interval(std::uint64_t watchdog_usec) noexcept {
  return std::chrono::microseconds(watchdog_usec / 2);
}

}  // namespace rdmagate::control

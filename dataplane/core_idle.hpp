#pragma once
// What a data-plane core does when a poll finds nothing (dataplane.idle_policy), as small policy objects
// chosen once before the loop starts: CoreLoop::run_st switches on CoreConfig::idle once and runs the loop
// instantiated for that policy, so no poll branches on the policy kind.
//
//   BusyIdle     poll again at once (a pinned core with a CPU of its own; lowest latency)
//   BackoffIdle  a run of pause instructions after each empty poll, doubling from 1 up to a cap, back to 1
//                on work: the core gives its issue slots to a hyperthread sibling and draws less power, and
//                never makes a syscall. kPause is BackoffIdle with a cap of 1.
//   YieldIdle    sched_yield after a run of empty polls (more pollers than CPUs: tests, the 2-vCPU guest)
//   EventIdle    BackoffIdle, then after idle_event_after_us without work the core sleeps on its CQ's
//                completion channel and control's doorbell (CoreLoop::sleep_st, core_sleep.hpp)
//
// Each measures the time it spends not polling (pausing, yielding) with two TSC reads around it, only on
// the idle path; the loop publishes the time in each PollerState with its other counters.

#include <rte_cycles.h>
#include <rte_pause.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "dataplane/core_sleep.hpp"

namespace rdmagate::dataplane {

// Where a core's running time goes (rdmagate_poller_state_seconds_total{state}); index into
// telemetry::kPollerStateNames.
enum class PollerState : std::uint8_t {
  kBusy = 0,     // iterations that found work
  kIdle = 1,     // empty polls and the loop around them (the rest of the running time)
  kBackoff = 2,  // pause runs (BackoffIdle, EventIdle before it sleeps)
  kYield = 3,    // inside sched_yield (YieldIdle)
  kSleep = 4,    // inside epoll_wait (EventIdle)
};
inline constexpr std::size_t kPollerStateCount = 5;

// The loop's idle-side counters (the core's alone; published with CoreCounters).
struct IdleStats {
  std::array<std::uint64_t, kPollerStateCount> tsc{};     // kBusy and kIdle are filled in at publication
  std::uint64_t arms = 0;                                 // wakeups armed before a last look (EventIdle)
  std::uint64_t sleeps = 0;                               // last looks that found nothing: the core slept
  std::array<std::uint64_t, kWakeSourceCount> wakeups{};  // by WakeSource; one sleep may count two
  std::uint64_t& state(PollerState s) noexcept { return tsc[static_cast<std::size_t>(s)]; }
};

// Every policy: on_work_st() after an iteration that did work, on_empty_st() after one that did not; it
// returns true when the core should try to sleep now (EventIdle only).
struct BusyIdle {
  static constexpr bool kSleeps = false;
  void on_work_st() noexcept {}
  bool on_empty_st() noexcept { return false; }
};

class BackoffIdle {
 public:
  static constexpr bool kSleeps = false;
  BackoffIdle(std::uint32_t max_pauses, IdleStats& st) noexcept : max_(std::max(max_pauses, 1u)), st_(st) {}
  void on_work_st() noexcept { run_ = 1; }
  bool on_empty_st() noexcept {
    const std::uint64_t t0 = rte_rdtsc();
    for (std::uint32_t i = 0; i < run_; ++i) rte_pause();
    st_.state(PollerState::kBackoff) += rte_rdtsc() - t0;
    run_ = std::min(run_ * 2, max_);
    return false;
  }
  std::uint32_t run() const noexcept { return run_; }  // pauses after the next empty poll

 private:
  std::uint32_t run_ = 1;
  const std::uint32_t max_;
  IdleStats& st_;
};

class YieldIdle {
 public:
  static constexpr bool kSleeps = false;
  YieldIdle(std::uint32_t yield_after, std::uint64_t& yields, IdleStats& st) noexcept
      : after_(yield_after), yields_(yields), st_(st) {}
  void on_work_st() noexcept { idle_run_ = 0; }
  bool on_empty_st() noexcept {
    if (++idle_run_ < after_) {
      rte_pause();
      return false;
    }
    ++yields_;
    const std::uint64_t t0 = rte_rdtsc();
    sched_yield();
    st_.state(PollerState::kYield) += rte_rdtsc() - t0;
    return false;
  }

 private:
  std::uint32_t idle_run_ = 0;
  const std::uint32_t after_;
  std::uint64_t& yields_;
  IdleStats& st_;
};

class EventIdle {
 public:
  static constexpr bool kSleeps = true;
  EventIdle(std::uint32_t max_pauses, std::uint64_t after_tsc, IdleStats& st) noexcept
      : backoff_(max_pauses, st), after_(after_tsc) {}
  void on_work_st() noexcept {
    idle_since_ = 0;
    backoff_.on_work_st();
  }
  // True once the core has found no work for idle_event_after_us: the loop tries to sleep, then calls
  // on_work_st whatever came of it (a sleep ends on work or a deadline; a refused one found work).
  bool on_empty_st() noexcept {
    const std::uint64_t now = rte_rdtsc();
    if (idle_since_ == 0) {
      idle_since_ = now;
    } else if (now - idle_since_ >= after_) {
      return true;
    }
    return backoff_.on_empty_st();
  }

 private:
  BackoffIdle backoff_;
  const std::uint64_t after_;
  std::uint64_t idle_since_ = 0;  // TSC of the first empty poll of this idle run; 0: not idle
};

}  // namespace rdmagate::dataplane

#pragma once
// A log rate limit in the manner of the kernel's printk_ratelimit: at most `burst` lines per interval; lines
// beyond that are dropped and counted, and the next line written carries the count ("suppressed=K"), so a
// flood (a connection storm, a peer that keeps failing) cannot drown the other lines yet leaves a trace of
// its size. Control thread only: no locking, no allocation.

#include <chrono>
#include <cstdint>

namespace rdmagate::control {

class LogRateLimit {
 public:
  using Clock = std::chrono::steady_clock;

  LogRateLimit(unsigned burst, Clock::duration interval) noexcept : burst_(burst), interval_(interval) {}

  // Whether a line may be written at `now`. When it may, *suppressed is how many were dropped since the last
  // line written (0 unless a burst was cut short), and the count starts again.
  bool allow(Clock::time_point now, std::uint64_t* suppressed) noexcept {
    if (!started_ || now - window_start_ >= interval_) {
      started_ = true;
      window_start_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= burst_) {
      ++suppressed_;
      return false;
    }
    ++in_window_;
    *suppressed = suppressed_;
    suppressed_ = 0;
    return true;
  }

  // Lines dropped and not yet reported by a written one.
  std::uint64_t pending_suppressed() const noexcept { return suppressed_; }

 private:
  unsigned burst_;
  Clock::duration interval_;
  bool started_ = false;
  Clock::time_point window_start_{};
  unsigned in_window_ = 0;
  std::uint64_t suppressed_ = 0;
};

}  // namespace rdmagate::control

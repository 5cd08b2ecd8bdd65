// The engine's log rate limit (control/log_rate_limit.hpp): a burst per interval, then drops counted and
// reported by the next line written, like the kernel's printk_ratelimit.
#include "control/log_rate_limit.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

namespace {

using rdmagate::control::LogRateLimit;
using namespace std::chrono_literals;

TEST(LogRateLimit, BurstThenDropsCountedOnTheNextLineWritten) {
  LogRateLimit limit(3, 1s);
  const LogRateLimit::Clock::time_point t0{};
  std::uint64_t suppressed = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limit.allow(t0 + i * 10ms, &suppressed)) << i;
    EXPECT_EQ(suppressed, 0u);
  }
  // A flood within the same second: nothing written, everything counted.
  for (int i = 0; i < 500; ++i) EXPECT_FALSE(limit.allow(t0 + 500ms, &suppressed));
  EXPECT_EQ(limit.pending_suppressed(), 500u);
  // The next second's first line carries the count, once.
  ASSERT_TRUE(limit.allow(t0 + 1s, &suppressed));
  EXPECT_EQ(suppressed, 500u);
  EXPECT_EQ(limit.pending_suppressed(), 0u);
  ASSERT_TRUE(limit.allow(t0 + 1s + 1ms, &suppressed));
  EXPECT_EQ(suppressed, 0u);
}

TEST(LogRateLimit, AQuietStreamIsNeverLimited) {
  LogRateLimit limit(2, 1s);
  const LogRateLimit::Clock::time_point t0{};
  std::uint64_t suppressed = 0;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(limit.allow(t0 + i * 600ms, &suppressed)) << i;
    EXPECT_EQ(suppressed, 0u);
  }
}

TEST(LogRateLimit, WindowRestartsAtTheFirstLineAfterIt) {
  LogRateLimit limit(1, 1s);
  const LogRateLimit::Clock::time_point t0{};
  std::uint64_t suppressed = 0;
  ASSERT_TRUE(limit.allow(t0 + 5s, &suppressed));
  EXPECT_FALSE(limit.allow(t0 + 5s + 999ms, &suppressed));
  ASSERT_TRUE(limit.allow(t0 + 6s, &suppressed));
  EXPECT_EQ(suppressed, 1u);
}

}  // namespace

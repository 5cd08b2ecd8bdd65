// The systemd watchdog's decision (daemon/watchdog.*): WATCHDOG=1 only while every core's poll counter moves.
#include "daemon/watchdog.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace {

using namespace rdmagate::control;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Clock = std::chrono::steady_clock;

constexpr auto kThreshold = std::chrono::milliseconds(1000);

// Feeds checks in sequence, as the control loop does, keeping the samples between them.
class Watchdog {
 public:
  WatchdogCheck check(std::vector<CorePolls> progress, Clock::duration since_start,
                      std::chrono::nanoseconds threshold = kThreshold) {
    WatchdogCheck c = check_watchdog(seen_, progress, t0_ + since_start, threshold);
    seen_ = c.seen;
    return c;
  }

 private:
  const Clock::time_point t0_ = Clock::now();
  std::vector<CoreSeen> seen_;
};

TEST(Watchdog, NoCoreNoPing) {
  Watchdog w;
  const WatchdogCheck c = w.check({}, 0s);
  EXPECT_FALSE(c.ping);
  EXPECT_THAT(c.stalled, IsEmpty());
  EXPECT_THAT(c.seen, IsEmpty());
}

TEST(Watchdog, ProgressingCoresPingLongAfterTheThreshold) {
  Watchdog w;
  for (int i = 0; i < 20; ++i) {
    const auto polls = static_cast<std::uint64_t>(i) * 1000;
    const WatchdogCheck c = w.check({{1, polls}, {2, polls + 7}}, i * 500ms);
    EXPECT_TRUE(c.ping) << "check " << i;
    EXPECT_THAT(c.stalled, IsEmpty());
  }
}

TEST(Watchdog, FirstSightGetsAFullThreshold) {
  Watchdog w;
  // A core that has not polled yet, seen first at t=10 s: not stalled until t=11 s.
  EXPECT_TRUE(w.check({{3, 0}}, 10s).ping);
  EXPECT_TRUE(w.check({{3, 0}}, 11s).ping);
  const WatchdogCheck c = w.check({{3, 0}}, 11s + 1ms);
  EXPECT_FALSE(c.ping);
  EXPECT_THAT(c.stalled, ElementsAre(3u));
}

TEST(Watchdog, OneStalledCoreWithholdsThePingUntilItMovesAgain) {
  Watchdog w;
  EXPECT_TRUE(w.check({{1, 100}, {2, 100}}, 0s).ping);
  // Core 2 stops at 200 (last moved at t=0.5 s); core 1 keeps going.
  EXPECT_TRUE(w.check({{1, 200}, {2, 200}}, 500ms).ping);
  EXPECT_TRUE(w.check({{1, 300}, {2, 200}}, 1000ms).ping);
  EXPECT_TRUE(w.check({{1, 400}, {2, 200}}, 1500ms).ping);  // exactly the threshold: not yet
  WatchdogCheck c = w.check({{1, 500}, {2, 200}}, 2000ms);
  EXPECT_FALSE(c.ping);
  EXPECT_THAT(c.stalled, ElementsAre(2u));
  c = w.check({{1, 600}, {2, 200}}, 5000ms);
  EXPECT_FALSE(c.ping);
  EXPECT_THAT(c.stalled, ElementsAre(2u));
  // It moves again: the ping resumes at once.
  c = w.check({{1, 700}, {2, 201}}, 5500ms);
  EXPECT_TRUE(c.ping);
  EXPECT_THAT(c.stalled, IsEmpty());
}

TEST(Watchdog, EveryStalledCoreIsNamed) {
  Watchdog w;
  w.check({{1, 5}, {2, 5}, {4, 5}}, 0s);
  const WatchdogCheck c = w.check({{1, 5}, {2, 6}, {4, 5}}, 2s);
  EXPECT_FALSE(c.ping);
  EXPECT_THAT(c.stalled, ElementsAre(1u, 4u));
}

TEST(Watchdog, ANewThresholdAppliesAtTheNextCheck) {
  // telemetry.core_stall_ms is live (SIGHUP): the loop passes the current value each time.
  Watchdog w;
  w.check({{1, 9}}, 0s);
  EXPECT_FALSE(w.check({{1, 9}}, 3s).ping);
  EXPECT_TRUE(w.check({{1, 9}}, 3s, 5s).ping);
}

TEST(Watchdog, PingsAtHalfTheInterval) {
  EXPECT_EQ(watchdog_ping_interval(10'000'000), 5s);
  EXPECT_EQ(watchdog_ping_interval(3), std::chrono::microseconds(1));
}

}  // namespace

// DeadlineQueue: the control loop's deadline index (control/deadline_queue.hpp).
#include "control/deadline_queue.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <utility>

namespace rdmagate::control {
namespace {

using std::chrono::milliseconds;

TEST(DeadlineQueue, EarliestFirst) {
  const TimePoint t0{};
  DeadlineQueue q;
  q.push(t0 + milliseconds(30), 3, DeadlineKind::kHandshake);
  q.push(t0 + milliseconds(10), 1, DeadlineKind::kReconnect);
  q.push(t0 + milliseconds(20), 2, DeadlineKind::kCloseKick);
  const auto all = [](const DeadlineEntry&) { return true; };
  std::vector<std::uint64_t> order;
  while (const DeadlineEntry* e = q.top(all)) {
    order.push_back(e->conn);
    q.pop();
  }
  EXPECT_EQ(order, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(q.size(), 0u);
}

TEST(DeadlineQueue, StaleEntriesAreDroppedWhenTheySurface) {
  const TimePoint t0{};
  DeadlineQueue q;
  // Connection 1's handshake deadline moved from 5 ms to 50 ms; connection 2's was cancelled.
  std::map<std::pair<std::uint64_t, DeadlineKind>, TimePoint> current{
      {{1, DeadlineKind::kHandshake}, t0 + milliseconds(50)}};
  q.push(t0 + milliseconds(5), 1, DeadlineKind::kHandshake);
  q.push(t0 + milliseconds(7), 2, DeadlineKind::kHandshake);
  q.push(t0 + milliseconds(50), 1, DeadlineKind::kHandshake);
  const auto live = [&](const DeadlineEntry& e) {
    auto it = current.find({e.conn, e.kind});
    return it != current.end() && it->second == e.when;
  };
  const DeadlineEntry* e = q.top(live);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->conn, 1u);
  EXPECT_EQ(e->when, t0 + milliseconds(50));
  EXPECT_EQ(q.size(), 1u);  // both stale entries went
  q.pop();
  EXPECT_EQ(q.top(live), nullptr);
}

// Against a scan of every deadline (what Engine::arm_timerfd_st did before): random sets, moves and
// cancellations, the queue's live top is always the scan's minimum.
TEST(DeadlineQueue, AgreesWithAFullScan) {
  std::mt19937_64 rng(7);
  const TimePoint t0{};
  DeadlineQueue q;
  std::map<std::pair<std::uint64_t, DeadlineKind>, TimePoint> current;
  const auto live = [&](const DeadlineEntry& e) {
    auto it = current.find({e.conn, e.kind});
    return it != current.end() && it->second == e.when;
  };
  for (int step = 0; step < 20000; ++step) {
    const std::uint64_t conn = rng() % 64;
    const auto kind = static_cast<DeadlineKind>(rng() % 3);
    if (rng() % 4 == 0) {
      current.erase({conn, kind});
    } else {
      const TimePoint when = t0 + milliseconds(static_cast<long>(rng() % 100000));
      current[{conn, kind}] = when;
      q.push(when, conn, kind);
    }
    std::optional<TimePoint> scan;
    for (const auto& [key, when] : current) {
      if (!scan || when < *scan) scan = when;
    }
    const DeadlineEntry* e = q.top(live);
    ASSERT_EQ(e != nullptr, scan.has_value()) << "step " << step;
    if (e != nullptr) {
      ASSERT_EQ(e->when, *scan) << "step " << step;
    }
  }
}

}  // namespace
}  // namespace rdmagate::control

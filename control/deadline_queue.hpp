// The connections' deadlines (handshake, reconnect backoff, close re-kick) in one min-heap.
//
// A turn of the control loop looks only at the earliest deadline, in O(log n), instead of scanning every
// connection: with 1,000 connections coming up at once the scans were O(n) per turn, O(n^2) per burst. A
// deadline that is cancelled or moved leaves its entry behind (lazy deletion, as libevent's min-heap and
// Seastar's timer sets do); the entry that surfaces is checked against the connection's current deadline
// and dropped when stale. Stale entries leave when their time comes, or at a rebuild (Engine::arm_timerfd_st)
// once they outnumber the live ones, so the heap stays O(connections).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "control/connection_lifecycle.hpp"

namespace rdmagate::control {

enum class DeadlineKind : std::uint8_t {
  kHandshake = 0,  // Connection::handshake_deadline_
  kReconnect = 1,  // Connection::reconnect_deadline_
  kCloseKick = 2,  // Connection::close_kick_deadline_
};

struct DeadlineEntry {
  TimePoint when;
  std::uint64_t conn = 0;  // Connection::id()
  DeadlineKind kind = DeadlineKind::kHandshake;
};

class DeadlineQueue {
 public:
  void push(TimePoint when, std::uint64_t conn, DeadlineKind kind) {
    heap_.push_back(DeadlineEntry{when, conn, kind});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }

  // The earliest entry that `current(entry)` still vouches for, or null; the stale ones above it are dropped.
  template <typename Current>
  const DeadlineEntry* top(Current&& current) {
    while (!heap_.empty() && !current(heap_.front())) pop();
    return heap_.empty() ? nullptr : &heap_.front();
  }

  void pop() {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
  }

  void clear() noexcept { heap_.clear(); }
  std::size_t size() const noexcept { return heap_.size(); }

 private:
  static bool later(const DeadlineEntry& a, const DeadlineEntry& b) noexcept { return a.when > b.when; }
  std::vector<DeadlineEntry> heap_;
};

}  // namespace rdmagate::control

#pragma once
// Driving several in-process engines from one test thread.

#include <chrono>

namespace rdmagate::testfix {

// Polls every engine's control loop (in argument order) until pred() or the deadline.
template <typename Pred, typename... Engines>
bool poll_all(Pred pred, std::chrono::milliseconds timeout, Engines&... engines) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    (engines.poll_st(1), ...);
  }
  return true;
}

}  // namespace rdmagate::testfix

#include "daemon/watchdog.hpp"

#include <algorithm>

namespace rdmagate::control {

WatchdogCheck check_watchdog(std::span<const CoreSeen> seen, std::span<const CorePolls> progress,
                             std::chrono::steady_clock::time_point now, std::chrono::nanoseconds threshold) {
  WatchdogCheck r;
  r.seen.reserve(progress.size());
  for (const CorePolls& p : progress) {
    const auto it = std::find_if(seen.begin(), seen.end(), [&](const CoreSeen& s) { return s.core == p.core; });
    if (it == seen.end() || it->polls != p.polls) {
      r.seen.push_back({p.core, p.polls, now});
      continue;
    }
    r.seen.push_back(*it);
    if (now - it->changed > threshold) r.stalled.push_back(p.core);
  }
  r.ping = !progress.empty() && r.stalled.empty();
  return r;
}

}  // namespace rdmagate::control

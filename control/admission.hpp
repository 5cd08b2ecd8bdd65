#pragma once
// Admission of connection requests per source address (issue 15): at most `per_source` connections held by
// one address (any state, the handshake included) and a token bucket on its requests (`burst` tokens,
// refilled at `rate` per second). With "one bulk transfer per connection of at most max_value bytes" (the
// core's chunk queue and the store's per-connection bound) this bounds what one source can make the gateway
// reserve or pin: per_source x max_value bytes, and per_source x queue depth receive buffers.
//
// Control thread only; pure (no rdma_cm, no verbs) so that it is host tested (tests/daemon/admission_test).
// The table forgets a source once it holds no connection and its bucket is full again, and sweeps such
// entries when it grows past kSweepAbove, so many spoofed or short-lived sources cannot grow it without
// bound beyond the ones that really hold connections or are still being limited. The hash is keyed per
// process so that chosen addresses cannot pile into one bucket of the map.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

struct sockaddr;

namespace rdmagate::control {

// A source address as admission counts it: IPv6 bytes, IPv4 as ::ffff:a.b.c.d; the port is left out.
using SourceKey = std::array<std::uint8_t, 16>;
// sockaddr_in / sockaddr_in6 to a SourceKey; any other family (or null) gives all zeros, one shared source.
SourceKey source_key(const sockaddr* sa) noexcept;

// 0 is "no limit" (the engine's default: the client library, the bench and tests build engines directly; the
// daemon's security.* keys are never 0).
struct AdmissionLimits {
  std::uint32_t per_source = 0;  // security.connections_per_source; 0: no cap
  double rate = 0;               // security.connect_rate, requests per second; 0: no rate limit
  std::uint32_t burst = 0;       // security.connect_burst (with a rate; at least 1 is used)
};

enum class AdmissionVerdict : std::uint8_t {
  kAdmit = 0,               // counted: release() it when the connection is gone
  kTooManyConnections = 1,  // the source holds per_source connections already (a token was spent)
  kRateExceeded = 2,        // the source's bucket is empty (nothing counted)
};

class AdmissionTable {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kSweepAbove = 4096;

  explicit AdmissionTable(const AdmissionLimits& limits = {}, std::uint64_t seed = 0) noexcept;
  // Whether any limit is set: with none, admit() tracks nothing.
  bool limited() const noexcept { return limits_.per_source != 0 || limits_.rate > 0; }

  // New limits: requests from now on. A bucket keeps its tokens, capped at the new burst.
  void set_limits(const AdmissionLimits& limits) noexcept;
  const AdmissionLimits& limits() const noexcept { return limits_; }

  // A connection request from `src` at `now`: spends a token, then counts a connection if the source holds
  // fewer than per_source.
  AdmissionVerdict admit(const SourceKey& src, Clock::time_point now);
  // An admitted connection of `src` is gone.
  void release(const SourceKey& src, Clock::time_point now);

  std::uint32_t connections(const SourceKey& src) const noexcept;
  std::size_t sources() const noexcept { return map_.size(); }

 private:
  struct Entry {
    std::uint32_t conns = 0;
    double tokens = 0;
    Clock::time_point last{};
  };
  struct Hash {
    std::uint64_t k0;
    std::uint64_t k1;
    std::size_t operator()(const SourceKey& k) const noexcept;
  };
  void refill(Entry& e, Clock::time_point now) const noexcept;
  bool idle(const Entry& e, Clock::time_point now) const noexcept;
  void sweep(Clock::time_point now);

  AdmissionLimits limits_;
  std::unordered_map<SourceKey, Entry, Hash> map_;
};

}  // namespace rdmagate::control

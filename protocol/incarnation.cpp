#include "protocol/incarnation.hpp"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

namespace rdmagate::protocol {
namespace {

// splitmix64 finalizer: spreads weak entropy (clock, pid, ASLR) over all 64 bits.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t fallback_entropy(std::uint64_t salt) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  std::uint64_t x =
      mix(static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec));
  clock_gettime(CLOCK_MONOTONIC, &ts);
  x = mix(x ^ static_cast<std::uint64_t>(ts.tv_nsec) ^ (static_cast<std::uint64_t>(getpid()) << 32));
  return mix(x ^ reinterpret_cast<std::uintptr_t>(&x) ^ salt);
}

}  // namespace

std::uint64_t make_incarnation() noexcept {
  for (std::uint64_t attempt = 0;; ++attempt) {
    std::uint64_t v = 0;
    // A 64-bit read from getrandom never returns short once the pool is initialised; anything
    // else (old kernel, seccomp) falls back to clock and address entropy, which still separates
    // two lives of a process.
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof v))
      v = fallback_entropy(attempt);
    if (v != 0) return v;  // zero means "no incarnation seen"
  }
}

std::uint64_t process_incarnation() noexcept {
  static const std::uint64_t stamp = make_incarnation();
  return stamp;
}

}  // namespace rdmagate::protocol

#include "control/admission.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace rdmagate::control {

namespace {

std::uint64_t mix(std::uint64_t x) noexcept {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

AdmissionLimits sane(AdmissionLimits l) noexcept {
  if (!(l.rate > 0)) l.rate = 0;
  l.burst = std::max<std::uint32_t>(l.burst, 1);
  return l;
}

}  // namespace

SourceKey source_key(const sockaddr* sa) noexcept {
  SourceKey k{};
  if (sa == nullptr) return k;
  if (sa->sa_family == AF_INET) {
    k[10] = 0xff;
    k[11] = 0xff;
    std::memcpy(&k[12], &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    std::memcpy(k.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
  }
  return k;
}

std::size_t AdmissionTable::Hash::operator()(const SourceKey& k) const noexcept {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::memcpy(&lo, k.data(), 8);
  std::memcpy(&hi, k.data() + 8, 8);
  return static_cast<std::size_t>(mix(mix(lo ^ k0) ^ hi ^ k1));
}

AdmissionTable::AdmissionTable(const AdmissionLimits& limits, std::uint64_t seed) noexcept
    : limits_(sane(limits)), map_(16, Hash{mix(seed), mix(seed + 0x9e3779b97f4a7c15ull)}) {}

void AdmissionTable::set_limits(const AdmissionLimits& limits) noexcept {
  limits_ = sane(limits);
  for (auto& [k, e] : map_) e.tokens = std::min(e.tokens, static_cast<double>(limits_.burst));
}

void AdmissionTable::refill(Entry& e, Clock::time_point now) const noexcept {
  if (limits_.rate == 0) {
    e.tokens = static_cast<double>(limits_.burst);
    e.last = std::max(e.last, now);
    return;
  }
  const double secs = std::chrono::duration<double>(now - e.last).count();
  if (secs > 0) e.tokens = std::min(static_cast<double>(limits_.burst), e.tokens + secs * limits_.rate);
  e.last = std::max(e.last, now);
}

bool AdmissionTable::idle(const Entry& e, Clock::time_point now) const noexcept {
  if (e.conns != 0) return false;
  if (limits_.rate == 0) return true;
  const double secs = std::chrono::duration<double>(now - e.last).count();
  return e.tokens + secs * limits_.rate >= static_cast<double>(limits_.burst);
}

void AdmissionTable::sweep(Clock::time_point now) {
  std::erase_if(map_, [&](const auto& kv) { return idle(kv.second, now); });
}

AdmissionVerdict AdmissionTable::admit(const SourceKey& src, Clock::time_point now) {
  if (!limited()) return AdmissionVerdict::kAdmit;
  if (map_.size() >= kSweepAbove) sweep(now);
  auto [it, fresh] = map_.try_emplace(src);
  Entry& e = it->second;
  if (fresh) {
    e.tokens = static_cast<double>(limits_.burst);
    e.last = now;
  } else {
    refill(e, now);
  }
  if (limits_.rate > 0) {
    if (e.tokens < 1.0) return AdmissionVerdict::kRateExceeded;
    e.tokens -= 1.0;
  }
  if (limits_.per_source != 0 && e.conns >= limits_.per_source) return AdmissionVerdict::kTooManyConnections;
  ++e.conns;
  return AdmissionVerdict::kAdmit;
}

void AdmissionTable::release(const SourceKey& src, Clock::time_point now) {
  auto it = map_.find(src);
  if (it == map_.end() || it->second.conns == 0) return;
  --it->second.conns;
  refill(it->second, now);
  if (idle(it->second, now)) map_.erase(it);
}

std::uint32_t AdmissionTable::connections(const SourceKey& src) const noexcept {
  auto it = map_.find(src);
  return it == map_.end() ? 0 : it->second.conns;
}

}  // namespace rdmagate::control

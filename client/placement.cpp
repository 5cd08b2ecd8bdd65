#include "client/placement.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstdio>

// xxHash compiled into this file (its documented header-only mode): the client library needs no
// libxxhash at run time, and no consumer sees the header.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace rdmagate::client::placement {

namespace {

// A better candidate: larger weight; on equal weight (only when two identities hash alike) the bytewise
// smaller identity, so that the list's order never decides.
bool better(std::uint64_t w, std::string_view id, std::uint64_t best_w, std::string_view best_id) {
  return w > best_w || (w == best_w && id < best_id);
}

std::string ipv6_text(const std::array<std::uint8_t, 16>& b) {
  std::array<unsigned, 8> g{};
  for (std::size_t i = 0; i < 8; ++i) g[i] = (unsigned{b[2 * i]} << 8) | b[2 * i + 1];
  // RFC 5952 section 4.2: "::" stands for the longest run of two or more zero groups, the first on a tie.
  std::size_t best_at = 8, best_len = 0;
  for (std::size_t at = 0; at < 8;) {
    if (g[at] != 0) {
      ++at;
      continue;
    }
    std::size_t end = at;
    while (end < 8 && g[end] == 0) ++end;
    if (end - at > best_len) best_at = at, best_len = end - at;
    at = end;
  }
  if (best_len < 2) best_at = 8;
  std::string out;
  char buf[8];
  for (std::size_t i = 0; i < 8;) {
    if (i == best_at) {
      out += "::";
      i += best_len;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    std::snprintf(buf, sizeof buf, "%x", g[i]);
    out += buf;
    ++i;
  }
  return out;
}

}  // namespace

std::uint64_t hash(std::string_view bytes) noexcept {
  return XXH64(bytes.data(), bytes.size(), 0);
}

std::uint64_t weight(std::uint64_t key_hash, std::uint64_t gateway_hash) noexcept {
  std::uint64_t x = key_hash ^ gateway_hash;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

bool identity(std::string_view address, std::uint16_t port, std::string* out, std::string* why) {
  const std::string text(address);
  const std::string quoted = "gateway address \"" + text + "\"";
  if (text.find('%') != std::string::npos)
    return *why = quoted + ": a zone index (%...) is not accepted", false;
  std::array<std::uint8_t, 16> b{};
  std::string host;
  if (inet_pton(AF_INET, text.c_str(), b.data()) == 1) {
    host = std::to_string(b[0]) + "." + std::to_string(b[1]) + "." + std::to_string(b[2]) + "." +
           std::to_string(b[3]);
  } else if (inet_pton(AF_INET6, text.c_str(), b.data()) == 1) {
    constexpr std::array<std::uint8_t, 12> kMapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::equal(kMapped.begin(), kMapped.end(), b.begin())) {
      host = std::to_string(b[12]) + "." + std::to_string(b[13]) + "." + std::to_string(b[14]) + "." +
             std::to_string(b[15]);
    } else {
      host = "[" + ipv6_text(b) + "]";
    }
  } else {
    return *why = quoted + ": not an IPv4 or IPv6 literal", false;
  }
  *out = host + ":" + std::to_string(port);
  return true;
}

std::size_t pick(std::string_view key, std::span<const std::string_view> identities) noexcept {
  const std::uint64_t kh = hash(key);
  std::size_t best = kNone;
  std::uint64_t best_w = 0;
  for (std::size_t i = 0; i < identities.size(); ++i) {
    const std::uint64_t w = weight(kh, hash(identities[i]));
    if (best == kNone || better(w, identities[i], best_w, identities[best])) best = i, best_w = w;
  }
  return best;
}

bool Table::assign(std::span<const std::string> identities, std::string* why) {
  for (std::size_t i = 0; i < identities.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (identities[i] == identities[j]) {
        return *why = "gateways " + std::to_string(j) + " and " + std::to_string(i) +
                      " are the same gateway (" + identities[i] + ")",
               false;
      }
    }
  }
  identities_.assign(identities.begin(), identities.end());
  hashes_.clear();
  for (const std::string& id : identities_) hashes_.push_back(hash(id));
  return true;
}

std::size_t Table::pick_hash(std::uint64_t key_hash) const noexcept {
  std::size_t best = kNone;
  std::uint64_t best_w = 0;
  for (std::size_t i = 0; i < hashes_.size(); ++i) {
    const std::uint64_t w = weight(key_hash, hashes_[i]);
    if (best == kNone || better(w, identities_[i], best_w, identities_[best])) best = i, best_w = w;
  }
  return best;
}

}  // namespace rdmagate::client::placement

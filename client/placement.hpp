#pragma once
// Which gateway holds a key: rendezvous (highest random weight) hashing over XXH64, specified in
// docs/placement.md so that every language computes the same answer (client/python/rdmagate/placement.py
// is the Python implementation). Every gateway scores the key, weight(XXH64(key), XXH64(identity)); the
// highest score wins. The gateway's identity, not its position in the list, decides: reordering the list
// moves no key, adding a gateway moves only the keys it wins (about 1/(N+1) of them), removing one moves
// only its own keys.
//
// Pure computation: no allocation in pick(), no I/O, no DPDK or verbs.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::client::placement {

// pick() on an empty gateway list.
inline constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// XXH64 of the bytes with seed 0: the hash of a key and of a gateway identity.
std::uint64_t hash(std::string_view bytes) noexcept;

// A gateway's score for a key: MurmurHash3's fmix64 of key_hash XOR gateway_hash.
std::uint64_t weight(std::uint64_t key_hash, std::uint64_t gateway_hash) noexcept;

// The canonical "address:port" identity of a gateway: an IPv4 dotted quad ("10.0.0.1:7471"), an IPv6
// address in RFC 5952 text in brackets ("[2001:db8::1]:7471"), an IPv4-mapped IPv6 address as the IPv4
// address it carries. False, with *why naming the problem, for anything else (host names, zones "%eth0").
bool identity(std::string_view address, std::uint16_t port, std::string* out, std::string* why);

// The index in `identities` of the gateway that holds `key`, or kNone for an empty list. Identical
// identities tie and the lowest index wins (Table refuses duplicates).
std::size_t pick(std::string_view key, std::span<const std::string_view> identities) noexcept;

// A gateway list hashed once, for placing many keys.
class Table {
 public:
  // False, with *why naming both positions, when two identities are equal (the same gateway twice).
  bool assign(std::span<const std::string> identities, std::string* why);

  std::size_t pick(std::string_view key) const noexcept { return pick_hash(hash(key)); }
  // As pick(), for a key whose hash() is already known.
  std::size_t pick_hash(std::uint64_t key_hash) const noexcept;

  std::size_t size() const noexcept { return hashes_.size(); }

 private:
  std::vector<std::string> identities_;
  std::vector<std::uint64_t> hashes_;
};

}  // namespace rdmagate::client::placement

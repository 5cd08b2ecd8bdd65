#pragma once
// Runtime fault-injection rules (docs/faults.md), LNet's `lctl net_drop_add` / `net_delay_add` for rdmagate:
// an operator or a test lists rules in `faults.rules`, SIGHUP installs them, and each data-plane core applies
// them to the messages it receives and sends. This header holds what a rule IS (plain data, no allocation:
// a core reads a table of them) and the text parser; dataplane/fault_core.hpp holds what a core DOES with
// them.
//
// One rule per string: an action, then key=value words in any order.
//   drop | delay | duplicate | corrupt   [dir=rx|tx|both] [type=T[,T...]] [opcode=O] [peer=ADDR[/LEN]]
//                                        [every=N | rate=P] [count=N] [ms=N (delay)] [at=N|random (corrupt)]
//   stall ms=N [core=N]
//   qp_err peer=ADDR[/LEN]
// docs/faults.md has the meaning of each word and its defaults.

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::dataplane {

enum class FaultAction : std::uint8_t {
  kNone = 0,       // no fault: the message goes on
  kDrop = 1,       // the message is lost (after its credits: the transport stays consistent)
  kDelay = 2,      // the message is held for `ms`, then goes on
  kDuplicate = 3,  // the message goes on twice
  kCorrupt = 4,    // one byte of the message is inverted
  kStall = 5,      // a core spins for `ms` without polling (once per installation of the rule)
  kQpErr = 6,      // control moves the QPs of the matching peers to ERR (once per installation)
};
inline constexpr std::size_t kFaultActionCount = 7;
inline constexpr std::array<std::string_view, kFaultActionCount> kFaultActionNames = {
    "none", "drop", "delay", "duplicate", "corrupt", "stall", "qp_err"};

// Directions, as a mask: a rule may match both.
inline constexpr std::uint8_t kFaultRx = 1;
inline constexpr std::uint8_t kFaultTx = 2;

// The peer's address as a core compares it: 16 bytes, IPv4 as an IPv4-mapped IPv6 address (::ffff:a.b.c.d).
using PeerIp = std::array<std::uint8_t, 16>;

// `sa` (AF_INET or AF_INET6) as a PeerIp; anything else (null included) is all zeros, which no rule's
// peer= matches unless it names :: itself.
PeerIp fault_peer_ip(const sockaddr* sa) noexcept;

// Bounds a rule's numbers are checked against (docs/faults.md repeats them).
inline constexpr std::uint32_t kFaultMaxDelayMs = 60'000;
inline constexpr std::uint32_t kFaultMaxStallMs = 10'000;
inline constexpr std::size_t kMaxFaultRules = 16;
inline constexpr std::size_t kMaxFaultRuleChars = 256;
inline constexpr std::uint32_t kFaultAtRandom = UINT32_MAX;  // corrupt at=random
inline constexpr std::uint32_t kFaultAllCores = UINT32_MAX;  // stall without core=

struct FaultRule {
  FaultAction action = FaultAction::kNone;
  std::uint8_t dirs = kFaultRx | kFaultTx;  // kFaultRx | kFaultTx bits
  // Bit t set: protocol::MessageType t matches. Default: every type but NOOP (a NOOP only carries credits).
  std::uint8_t types = 0;
  bool any_opcode = true;
  std::uint16_t opcode = 0;
  bool any_peer = true;
  PeerIp peer{};
  std::uint8_t peer_prefix = 128;  // leading bits of `peer` that must match (IPv4 /n is 96 + n)
  std::uint32_t every = 1;         // every Nth matching message (1: all), when rate is 0
  std::uint64_t rate = 0;          // else: probability scaled to 2^64 - 1 (fires when a random u64 < rate)
  bool by_rate = false;
  std::uint64_t count = 0;  // at most this many injections per core; 0: no limit
  std::uint32_t ms = 0;     // delay, stall
  std::uint32_t at = 0;     // corrupt: byte offset (wraps at the message length), or kFaultAtRandom
  std::uint32_t core = kFaultAllCores;  // stall

  // True when the rule is about messages (a core matches it per message); stall and qp_err are actions taken
  // once when the table is installed.
  bool per_message() const noexcept {
    return action >= FaultAction::kDrop && action <= FaultAction::kCorrupt;
  }
};

// Whether `ip` lies within the rule's peer= (every address when it has none).
constexpr bool fault_peer_matches(const FaultRule& r, const PeerIp& ip) noexcept {
  if (r.any_peer) return true;
  const unsigned full = r.peer_prefix / 8, rest = r.peer_prefix % 8;
  for (unsigned i = 0; i < full; ++i) {
    if (ip[i] != r.peer[i]) return false;
  }
  if (rest == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff00u >> rest);
  return (ip[full] & mask) == (r.peer[full] & mask);
}

// An immutable set of rules as control publishes it to the cores (FaultTablePublisher, fault_core.hpp): plain
// data a core reads through a pointer, never writes.
struct FaultTable {
  std::uint64_t generation = 0;  // set by the publisher: 1, 2, ... in publication order
  std::uint32_t count = 0;
  std::array<FaultRule, kMaxFaultRules> rules{};

  bool has_message_rules() const noexcept {
    for (std::uint32_t i = 0; i < count; ++i) {
      if (rules[i].per_message()) return true;
    }
    return false;
  }
  // qp_err: whether a connection to `ip` is to be moved to ERR now (control, when it installs the table).
  bool qp_err_matches(const PeerIp& ip) const noexcept {
    for (std::uint32_t i = 0; i < count; ++i) {
      if (rules[i].action == FaultAction::kQpErr && fault_peer_matches(rules[i], ip)) return true;
    }
    return false;
  }
};

// Parses one rule. False with *error (what is wrong, quoting the word) on any error; `out` is then
// unspecified.
bool parse_fault_rule(std::string_view text, FaultRule& out, std::string* error);

// Parses `faults.rules`. False with *error naming the entry ("faults.rules[2]: ...").
bool parse_fault_rules(const std::vector<std::string>& lines, FaultTable& out, std::string* error);

// The rule in canonical form (every word explicit, defaults included): what the daemon logs when it installs
// it. parse_fault_rule(format_fault_rule(r)) gives r back.
std::string format_fault_rule(const FaultRule& r);

}  // namespace rdmagate::dataplane

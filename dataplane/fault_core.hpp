#pragma once
// What a data-plane core does with fault-injection rules (docs/faults.md; the rules: fault_rules.hpp).
//
// Each core has a CoreFaults (CoreResources::faults). The loop asks armed() once per received message and
// once per message a service sends: a core-local bool, false unless a table with message rules is installed
// or a delayed message is still held, so a gateway without rules pays one predictable branch there and
// nothing else. When armed, on_receive_st / on_send_st match the message against the rules (first rule that
// fires wins), count the injection and return a verdict; the loop carries it out (core_loop.hpp,
// faulted_receive_st / faulted_send_st) so that credits and descriptors stay exact:
//   drop (rx)       decoded, credits taken, buffer re-posted, never dispatched: the transport is unchanged
//   drop (tx)       never written: no descriptor, no credit taken, nothing owed
//   delay           the receive buffer (rx) or the written descriptor (tx) is held here, bounded by
//                   kHoldCapacity, and handed back to the loop at its time from the loop's timers
//   duplicate       dispatched twice (rx) / sent twice, each copy with its own descriptor and credit (tx)
//   corrupt         one byte inverted in place: on rx before decode (the wire), on tx before the checksum
// A stall rule makes apply_st spin; qp_err rules are control's (FaultTable::qp_err_matches).
//
// Tables reach a core by value of pointer: control publishes an immutable FaultTable (FaultTablePublisher)
// with CONFIG kFaultTable, the core switches to it between two messages and records the generation it
// applied; control frees a table only when every core applied a later one. No lock, and the core never
// allocates.

#include <rte_cycles.h>
#include <rte_pause.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dataplane/core_conn.hpp"
#include "dataplane/fault_rules.hpp"
#include "protocol/message.hpp"

namespace rdmagate::dataplane {

// What the loop is to do with one message.
struct FaultVerdict {
  FaultAction action = FaultAction::kNone;
  std::uint32_t at = 0;   // corrupt (tx): the byte to invert, modulo the message's length
  std::uint64_t due = 0;  // delay: TSC time the message goes on
};

// A message a delay rule holds: a received one (rx: its buffer, not yet decoded) or a written send (tx: the
// connection's descriptor index, written with no credits).
struct FaultHeld {
  CoreConn* conn = nullptr;  // null: forgotten (its connection closed)
  RxDesc* rx = nullptr;
  std::uint16_t tx = 0;
  std::uint64_t due = 0;
};

// A core's fault counters. The core writes them (plain load + store: it is the only writer); control reads
// them at any time for /metrics.
class FaultCounters {
 public:
  // Injections by action and direction (kFaultRx or kFaultTx); stall counts its own below.
  std::uint64_t injected(FaultAction a, std::uint8_t dir) const noexcept {
    return injected_[static_cast<std::size_t>(a)][dir == kFaultTx ? 1 : 0].load(std::memory_order_relaxed);
  }
  std::uint64_t stalls() const noexcept { return stalls_.load(std::memory_order_relaxed); }
  std::uint64_t stall_us() const noexcept { return stall_us_.load(std::memory_order_relaxed); }
  // Delays that found the hold queue full: the message went on at once.
  std::uint64_t hold_full() const noexcept { return hold_full_.load(std::memory_order_relaxed); }
  // Messages held now.
  std::uint64_t held() const noexcept { return held_.load(std::memory_order_relaxed); }
  // Generation of the table the core applied last (0: none yet).
  std::uint64_t applied_generation() const noexcept { return applied_.load(std::memory_order_acquire); }

 private:
  friend class CoreFaults;
  static void bump(std::atomic<std::uint64_t>& a, std::uint64_t n = 1) noexcept {
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::array<std::array<std::atomic<std::uint64_t>, 2>, kFaultActionCount> injected_{};
  std::atomic<std::uint64_t> stalls_{0};
  std::atomic<std::uint64_t> stall_us_{0};
  std::atomic<std::uint64_t> hold_full_{0};
  std::atomic<std::uint64_t> held_{0};
  std::atomic<std::uint64_t> applied_{0};
};

class CoreFaults {
 public:
  static constexpr std::uint32_t kHoldCapacity = 256;  // messages a core holds for delay rules at most
  static_assert((kHoldCapacity & (kHoldCapacity - 1)) == 0);

  CoreFaults() = default;
  CoreFaults(const CoreFaults&) = delete;
  CoreFaults& operator=(const CoreFaults&) = delete;

  // The loop's one question when no rule is installed.
  bool armed() const noexcept { return armed_; }
  const FaultCounters& counters() const noexcept { return counters_; }
  const FaultTable* table() const noexcept { return table_; }

  // A received message of `len` bytes from `peer`, before decode. Applies kCorrupt here (the bytes are
  // changed in place, and the loop decodes them as they now are); returns kNone for it, as for no fault.
  FaultVerdict on_receive_st(const PeerIp& peer, std::uint8_t* bytes, std::uint32_t len,
                             std::uint64_t now) noexcept {
    // Type and opcode from the raw header (docs/protocol.md "Message header": type at byte 3, opcode at 6,
    // little endian); a message too short to have them has type 0, which no rule matches.
    const unsigned type = len >= 8 ? bytes[3] : 0;
    const auto opcode = static_cast<std::uint16_t>(len >= 8 ? bytes[6] | bytes[7] << 8 : 0);
    FaultVerdict v = decide(peer, kFaultRx, type, opcode, now);
    if (v.action == FaultAction::kCorrupt) {
      corrupt(v, bytes, len);
      v.action = FaultAction::kNone;
    }
    return v;
  }

  // A message a service sends to `peer`, before it is written.
  FaultVerdict on_send_st(const PeerIp& peer, protocol::MessageType type, std::uint16_t opcode,
                          std::uint64_t now) noexcept {
    return decide(peer, kFaultTx, static_cast<unsigned>(type), opcode, now);
  }

  // Inverts byte v.at (modulo len) of a message.
  static void corrupt(const FaultVerdict& v, std::uint8_t* bytes, std::uint32_t len) noexcept {
    if (len != 0) bytes[v.at % len] ^= 0xff;
  }

  // Holds a message until h.due. False (counted) when the queue is full: the caller lets it go on at once.
  bool hold_st(const FaultHeld& h) noexcept {
    if (tail_ - head_ == kHoldCapacity) {
      FaultCounters::bump(counters_.hold_full_);
      return false;
    }
    held_[tail_++ & (kHoldCapacity - 1)] = h;
    FaultCounters::bump(counters_.held_);
    armed_ = true;
    return true;
  }

  // Hands every held message whose time came to `f(const FaultHeld&)`, oldest first. The queue is in holding
  // order: a message behind a later-due one waits for it (delays of one rule keep their order).
  template <typename F>
  void release_due_st(std::uint64_t now, F&& f) noexcept {
    while (head_ != tail_) {
      const FaultHeld h = held_[head_ & (kHoldCapacity - 1)];
      if (h.conn != nullptr && h.due > now) break;
      ++head_;  // before f: f may hold another message
      if (h.conn == nullptr) continue;
      counters_.held_.store(counters_.held_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
      f(h);
    }
    armed_ = has_rules_ || head_ != tail_;
  }

  // Hands every message held for `c` to `f` (its connection is closing: buffers and descriptors go back).
  template <typename F>
  void forget_st(const CoreConn* c, F&& f) noexcept {
    for (std::uint32_t i = head_; i != tail_; ++i) {
      FaultHeld& slot = held_[i & (kHoldCapacity - 1)];
      if (slot.conn != c) continue;
      const FaultHeld h = slot;
      slot.conn = nullptr;
      counters_.held_.store(counters_.held_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
      f(h);
    }
    while (head_ != tail_ && held_[head_ & (kHoldCapacity - 1)].conn == nullptr) ++head_;
    armed_ = has_rules_ || head_ != tail_;
  }

  // TSC time the oldest held message is due (0: none held): a sleeping core wakes for it.
  std::uint64_t next_due_st() const noexcept {
    for (std::uint32_t i = head_; i != tail_; ++i) {
      const FaultHeld& h = held_[i & (kHoldCapacity - 1)];
      if (h.conn != nullptr) return h.due;
    }
    return 0;
  }

  // CONFIG kFaultTable: switch to `t` (null: none). Messages held under the previous table stay held until
  // their time. A stall rule for this core (core= absent, or `core_index`) spins here, once per installation.
  void apply_st(const FaultTable* t, unsigned core_index, std::uint64_t tsc_hz) noexcept {
    table_ = t;
    rules_ = t != nullptr ? std::min<std::uint32_t>(t->count, kMaxFaultRules) : 0;
    state_ = {};
    for (std::uint32_t i = 0; i < rules_; ++i) ticks_[i] = std::uint64_t{t->rules[i].ms} * (tsc_hz / 1000);
    has_rules_ = t != nullptr && t->has_message_rules();
    armed_ = has_rules_ || head_ != tail_;
    if (rng_ == 0) rng_ = (rte_rdtsc() ^ (std::uint64_t{core_index} + 1) * 0x9e3779b97f4a7c15ull) | 1;
    if (t != nullptr) counters_.applied_.store(t->generation, std::memory_order_release);
    for (std::uint32_t i = 0; i < rules_; ++i) {
      const FaultRule& r = t->rules[i];
      if (r.action != FaultAction::kStall || (r.core != kFaultAllCores && r.core != core_index)) continue;
      const std::uint64_t start = rte_rdtsc();
      while (rte_rdtsc() - start < ticks_[i]) rte_pause();
      FaultCounters::bump(counters_.stalls_);
      FaultCounters::bump(counters_.stall_us_,
                          (rte_rdtsc() - start) * 1'000'000 / std::max<std::uint64_t>(tsc_hz, 1));
    }
  }

 private:
  struct RuleState {
    std::uint64_t matched = 0;   // messages the rule matched (its every=N counts these)
    std::uint64_t injected = 0;  // faults it injected on this core (its count= limits these)
  };

  FaultVerdict decide(const PeerIp& peer, std::uint8_t dir, unsigned type, std::uint16_t opcode,
                      std::uint64_t now) noexcept {
    const std::uint8_t type_bit = type < 8 ? static_cast<std::uint8_t>(1u << type) : 0;
    for (std::uint32_t i = 0; i < rules_; ++i) {
      const FaultRule& r = table_->rules[i];
      if (!r.per_message() || (r.dirs & dir) == 0 || (r.types & type_bit) == 0 ||
          (!r.any_opcode && r.opcode != opcode) || !fault_peer_matches(r, peer)) {
        continue;
      }
      RuleState& st = state_[i];
      if (r.count != 0 && st.injected >= r.count) continue;
      ++st.matched;
      const bool fire =
          r.by_rate ? (r.rate == UINT64_MAX || next_random() < r.rate) : st.matched % r.every == 0;
      if (!fire) continue;
      ++st.injected;
      FaultCounters::bump(counters_.injected_[static_cast<std::size_t>(r.action)][dir == kFaultTx ? 1 : 0]);
      return FaultVerdict{r.action,
                          r.at == kFaultAtRandom ? static_cast<std::uint32_t>(next_random() >> 32) : r.at,
                          now + ticks_[i]};
    }
    return FaultVerdict{};
  }

  // xorshift64*: a few cycles, no state beyond one word; seeded per core at the first table.
  std::uint64_t next_random() noexcept {
    rng_ ^= rng_ >> 12;
    rng_ ^= rng_ << 25;
    rng_ ^= rng_ >> 27;
    return rng_ * 0x2545f4914f6cdd1dull;
  }

  bool armed_ = false;
  bool has_rules_ = false;
  const FaultTable* table_ = nullptr;
  std::uint32_t rules_ = 0;
  std::array<RuleState, kMaxFaultRules> state_{};
  std::array<std::uint64_t, kMaxFaultRules> ticks_{};  // each rule's ms in TSC ticks
  std::uint64_t rng_ = 0;
  std::array<FaultHeld, kHoldCapacity> held_{};
  std::uint32_t head_ = 0, tail_ = 0;
  FaultCounters counters_;
};

// Control's side: keeps every published table alive until no core can be using it. Control thread only.
class FaultTablePublisher {
 public:
  // Copies `t`, gives it the next generation, and returns the address to send in CONFIG kFaultTable.
  const FaultTable* publish(const FaultTable& t) {
    auto p = std::make_unique<FaultTable>(t);
    p->generation = ++generation_;
    tables_.push_back(std::move(p));
    return tables_.back().get();
  }
  // The table published last (null: none yet).
  const FaultTable* current() const noexcept { return tables_.empty() ? nullptr : tables_.back().get(); }
  // Frees every table older than the oldest one a core applied: `applied` holds each core's
  // FaultCounters::applied_generation(). A table a core applied, or whose CONFIG is still on its way, stays.
  void reclaim(std::span<const std::uint64_t> applied) {
    std::uint64_t oldest = generation_;
    for (const std::uint64_t g : applied) oldest = std::min(oldest, g);
    std::erase_if(tables_, [oldest](const std::unique_ptr<FaultTable>& p) { return p->generation < oldest; });
  }
  std::size_t tables_kept() const noexcept { return tables_.size(); }

 private:
  std::uint64_t generation_ = 0;
  std::vector<std::unique_ptr<FaultTable>> tables_;
};

}  // namespace rdmagate::dataplane

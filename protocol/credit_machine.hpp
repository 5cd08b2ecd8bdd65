#pragma once
// Per-connection credit flow control, in the style of Lustre o2iblnd: the rules of
// docs/protocol.md, "Credit rules", as a state machine with no verbs, no EAL, no I/O, no clock,
// no allocation and no exceptions. The engine owns one per connection, on the connection's lcore.
//
// Vocabulary (one connection, queue depth P negotiated in the handshake, the same both ways):
//   credits  sends we may still make: receives the peer has posted for us and told us about.
//   held     messages of the peer that sit in our receive buffers, not yet re-posted.
//   owed     receives we have re-posted but not yet reported to the peer; every header we send
//            returns all of them. "Eager" ones freed a data message, "lazy" ones a NOOP.
//   room     P - held - owed: the most the peer can have as credits plus messages in flight.
//
// Engine use:
//   receive   decode, then on_receive(class of the type, header credits, now); any error closes the
//             connection (count it under its code).
//   re-post   after a receive buffer goes back to the receive queue: on_reposted(class it held).
//             Re-post a request's buffer before queuing its answer when you can: the answer then
//             carries the credit instead of a NOOP.
//   send      send_or_queue(class, tx, now): kSend -> patch_credits(step.credits) and post now;
//             otherwise it waits on its queue. After each poll: `if (wants_noop(now)) enqueue a
//             NOOP descriptor`, then loop next_send(now): kSend -> patch_credits(step.credits) and
//             post step.tx; kDropNoop -> recycle step.tx; kNone -> stop. (enqueue() + next_send()
//             alone is equivalent, one queue round trip slower.)
//   timer     wants_noop(now) covers the keepalive; peer_dead(now) reports a silent peer.
//   teardown  cancel_next() until kEnd returns every queued descriptor.
//
// Time is whatever monotonic tick the engine feeds (TSC, ns): only differences are taken.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "protocol/credit_queue.hpp"
#include "protocol/message.hpp"
#include "protocol/wire_constants.hpp"

namespace rdmagate::protocol {

// kMinCreditQueueDepth and credit_reserve() live in wire_constants.hpp: the handshake enforces
// the same floor, and both sides must agree on the reserve.

// By type byte: a table rather than a switch, the receive path asks once per message.
inline constexpr std::array<CreditClass, 16> kCreditClassOf = {
    CreditClass::kRequest,   // 0: not a type; the strictest class
    CreditClass::kNoop,      // kNoop
    CreditClass::kRequest,   // kInlineRequest
    CreditClass::kReserved,  // kInlineResponse
    CreditClass::kRequest,   // kReadChunkRequest
    CreditClass::kRequest,   // kWriteChunkRequest
    CreditClass::kReserved,  // kCompletion
    CreditClass::kRequest,   // kAuth: the initiator's first message, answered like a request
    CreditClass::kReserved,  // kAuthAnswer
    CreditClass::kRequest,   // 9..15: not types
    CreditClass::kRequest,  CreditClass::kRequest, CreditClass::kRequest,
    CreditClass::kRequest,  CreditClass::kRequest, CreditClass::kRequest,
};

constexpr CreditClass credit_class(MessageType t) {
  const auto i = static_cast<std::uint8_t>(t);
  return i < kCreditClassOf.size() ? kCreditClassOf[i] : CreditClass::kRequest;
}
static_assert(kMessageTypeMax < kCreditClassOf.size());

// Results of the credit machine. Values are stable (the engine indexes counters with them).
enum class CreditError : std::uint8_t {
  kOk = 0,                // no error
  kCreditOverrun = 1,     // the peer sent with no credit of ours left: every receive was in use
  kReserveViolation = 2,  // the peer sent a request into the reserve, or spent its last credit
                          // on a message that returned none
  kReturnedTooMany = 3,   // returned credits exceed our sends the peer still has to account for
  kRepostUnderflow = 4,   // engine bug: more re-posts than messages received
  kBadConfig = 5,         // validate(): depth below kMinCreditQueueDepth or above the links
};
inline constexpr std::uint8_t kCreditErrorMax = 5;
inline constexpr std::size_t kCreditErrorCount = kCreditErrorMax + 1;

// Why a NOOP is wanted (or was sent); also a counter index.
enum class NoopReason : std::uint8_t {
  kNone = 0,         // no NOOP needed
  kHighWater = 1,    // owed credits reached the high-water mark
  kPeerStarved = 2,  // the peer may be out of credits for requests or answers and we owe some
  kKeepalive = 3,    // we have sent nothing for the keepalive interval
};
inline constexpr std::size_t kNoopReasonCount = 4;

// The high water a depth gets when CreditConfig::high_water is 0 (docs/protocol.md, "Parameters"): a
// quarter of the depth, so that a one-way stream always keeps P - R - H >= 5P/8 of its window; but not below
// min(P / 2, 32) on shallow queues, where a quarter would return credits more often than one NOOP per 32
// messages. The constructor clamps the result to [2, P].
constexpr std::uint16_t default_high_water(std::uint16_t queue_depth) {
  const std::uint16_t quarter = queue_depth / 4;
  const std::uint16_t floor =
      queue_depth / 2 < 32 ? static_cast<std::uint16_t>(queue_depth / 2) : std::uint16_t{32};
  return quarter > floor ? quarter : floor;
}

struct CreditConfig {
  std::uint16_t queue_depth = 0;         // negotiated ConnParams::queue_depth: initial credits both ways
  std::uint16_t high_water = 0;          // owed credits that force a NOOP; 0: default_high_water(); min 2
  std::uint64_t keepalive_interval = 0;  // ticks without sending before a keepalive NOOP; 0: never
  std::uint64_t dead_peer_timeout = 0;   // ticks without receiving before the peer is dead; 0: never
  // What the handshake promised the peer (minor >= 1, set_session_timers): set_timers never raises the
  // keepalive above the ceiling nor lowers a nonzero dead-peer timeout below the floor. 0: no bound.
  std::uint64_t keepalive_ceiling = 0;
  std::uint64_t dead_peer_floor = 0;
};

// The credit machine's timers for a connection: on a minor >= 1 session the negotiated keepalive interval
// (the stricter of both sides', docs §3.8) replaces our own, our dead-peer timeout is at least what we
// announced, and both become bounds that a live reload keeps; on a minor-0 session our own local times,
// unbounded, as before. own_* and the result are in ticks; ticks_per_ms converts the handshake's ms.
constexpr void set_session_timers(CreditConfig& c, const Session& s, std::uint64_t own_keepalive,
                                  std::uint64_t own_dead_peer, std::uint64_t ticks_per_ms) noexcept {
  c.keepalive_interval = own_keepalive;
  c.dead_peer_timeout = own_dead_peer;
  c.keepalive_ceiling = 0;
  c.dead_peer_floor = 0;
  if (s.keepalive_ms != 0) {
    c.keepalive_interval = c.keepalive_ceiling = std::uint64_t{s.keepalive_ms} * ticks_per_ms;
  }
  if (s.local_dead_peer_ms != 0) {
    c.dead_peer_floor = std::uint64_t{s.local_dead_peer_ms} * ticks_per_ms;
    if (c.dead_peer_timeout != 0 && c.dead_peer_timeout < c.dead_peer_floor)
      c.dead_peer_timeout = c.dead_peer_floor;
  }
}

enum class SendKind : std::uint8_t {
  kNone = 0,      // nothing may be sent now
  kSend = 1,      // post `tx` with `credits` in its header (patch_credits)
  kDropNoop = 2,  // a queued NOOP is no longer needed: recycle `tx` without sending it
};

struct SendStep {
  SendKind kind = SendKind::kNone;
  CreditClass cls = CreditClass::kRequest;  // queue `tx` came from
  std::uint16_t tx = TxQueues::kEnd;        // descriptor index
  std::uint16_t credits = 0;                // returned-credits field to put in the header
};

// Plain per-connection counters; the engine sums them at scrape time.
struct CreditStats {
  std::array<std::uint64_t, kCreditClassCount> sent{};      // messages sent, by class
  std::array<std::uint64_t, kCreditClassCount> received{};  // messages accepted, by class
  std::array<std::uint64_t, kNoopReasonCount> noops{};      // NOOPs sent, by reason
  std::uint64_t noops_dropped = 0;                          // queued NOOPs made redundant
  std::uint64_t credits_returned = 0;                       // sum of credits we sent back
};

class CreditMachine {
 public:
  // kOk when `config` may be used with `links` of `link_count` entries.
  static CreditError validate(const CreditConfig& config, std::size_t link_count) noexcept;

  // Precondition: validate(config, links.size()) == kOk. `links` (one per tx descriptor) must
  // outlive the machine; `now` starts the keepalive and dead-peer clocks.
  CreditMachine(const CreditConfig& config, std::span<std::uint16_t> links, std::uint64_t now) noexcept;

  CreditMachine(const CreditMachine&) = delete;
  CreditMachine& operator=(const CreditMachine&) = delete;

  // ---- receive side ----------------------------------------------------------------------------

  // A message of class `cls` carrying `returned` credits arrived at `now`. Validates it against
  // the credits we granted, then takes the returned credits. On error nothing changes and the
  // connection must close.
  CreditError on_receive(CreditClass cls, std::uint16_t returned, std::uint64_t now) noexcept {
    // room >= the peer's credits when it sent this message, so every check below catches only a
    // true violation. Above the reserve, neither the reserve nor the last-credit rule can apply.
    if (room_ <= reserve_ || returned > depth_ - credits_) [[unlikely]] {
      if (const CreditError e = check_receive_slow(cls, returned); e != CreditError::kOk) return e;
    }
    credits_ += returned;
    --room_;
    last_rx_ = now;
    ++stats_.received[index_of(cls)];
    return CreditError::kOk;
  }

  // `n` receive buffers that held messages of class `cls` are posted again; their credits are
  // now owed to the peer.
  CreditError on_reposted(CreditClass cls, std::uint16_t n = 1) noexcept {
    if (n > held()) return CreditError::kRepostUnderflow;
    owed_ += n;
    if (cls == CreditClass::kNoop) owed_lazy_ += n;
    return CreditError::kOk;
  }

  // ---- send side -------------------------------------------------------------------------------

  // Queues descriptor `tx` on the queue of `cls`. False: index out of range or already queued.
  bool enqueue(CreditClass cls, std::uint16_t tx) noexcept { return queues_.push(cls, tx); }

  // Sends `tx` at once when nothing queued is ahead of it and credits allow (the common case,
  // which skips the queue); otherwise queues it and returns kNone. kNone with `tx` == kEnd: the
  // descriptor was refused (out of range or already queued).
  // Inlined: the engine's send path calls it once per message, and a call costs it the SendStep's packing.
  [[gnu::always_inline]] SendStep send_or_queue(CreditClass cls, std::uint16_t tx,
                                                std::uint64_t now) noexcept {
    // An answer may pass queued requests, never queued answers; a request waits behind both.
    if (queues_.empty(cls) && (cls == CreditClass::kReserved || queues_.empty(CreditClass::kReserved)) &&
        cls != CreditClass::kNoop && may_send(cls) && queues_.idle(tx)) {
      return charge(cls, tx, now, NoopReason::kNone);
    }
    if (!queues_.push(cls, tx)) return SendStep{SendKind::kNone, cls, TxQueues::kEnd, 0};
    return SendStep{SendKind::kNone, cls, tx, 0};
  }

  // Why a NOOP should go out now, ignoring whether one is queued or could be sent.
  NoopReason noop_reason(std::uint64_t now) const {
    if (owed_ != 0) {
      if (owed_ >= high_water_) return NoopReason::kHighWater;
      // Answers: the peer may hold at most one credit. Requests: the peer may be held at its
      // reserve, and what we owe would lift it above. Lazy credits alone need two, so that NOOPs
      // answering NOOPs die out instead of ping-ponging.
      // room <= 1 implies room <= R (R >= 2): the rare test first, so a busy stream pays one compare.
      if (room_ <= reserve_ && (room_ <= 1 || room_ + owed_ > reserve_) &&
          (owed_ > owed_lazy_ || owed_lazy_ >= 2)) {
        return NoopReason::kPeerStarved;
      }
    }
    if (keepalive_ != 0 && elapsed(last_tx_, now) >= keepalive_) return NoopReason::kKeepalive;
    return NoopReason::kNone;
  }

  // True when the engine should enqueue a NOOP descriptor now: one is needed, none is queued,
  // nothing queued could carry the credits instead, and it may be sent.
  bool wants_noop(std::uint64_t now) const {
    return queues_.empty(CreditClass::kNoop) && noop_reason(now) != NoopReason::kNone && !data_sendable() &&
           may_send(CreditClass::kNoop);
  }

  // The next descriptor to post. Answers first (they free the peer's receives and must never wait
  // behind our requests), then requests, then a NOOP if it is still needed. A kSend has already
  // been charged: post it.
  SendStep next_send(std::uint64_t now) noexcept {
    if (!queues_.empty(CreditClass::kReserved) && may_send(CreditClass::kReserved)) {
      return take(CreditClass::kReserved, now, NoopReason::kNone);
    }
    if (!queues_.empty(CreditClass::kRequest) && may_send(CreditClass::kRequest)) {
      return take(CreditClass::kRequest, now, NoopReason::kNone);
    }
    if (!queues_.empty(CreditClass::kNoop)) {
      const NoopReason why = noop_reason(now);
      if (why == NoopReason::kNone) {
        ++stats_.noops_dropped;
        return SendStep{SendKind::kDropNoop, CreditClass::kNoop, queues_.pop(CreditClass::kNoop), 0};
      }
      if (may_send(CreditClass::kNoop)) return take(CreditClass::kNoop, now, why);
    }
    return SendStep{};
  }

  // True when next_send(now) would not return kNone, or a NOOP should be queued: the send side
  // has something to do. False with messages queued means they wait for credits.
  bool send_ready(std::uint64_t now) const {
    if (data_sendable() || wants_noop(now)) return true;
    if (queues_.empty(CreditClass::kNoop)) return false;
    return noop_reason(now) == NoopReason::kNone || may_send(CreditClass::kNoop);
  }

  // Whether a message of class `cls` could be sent now (ignoring the queues).
  bool may_send(CreditClass cls) const {
    if (cls == CreditClass::kRequest) return credits_ > reserve_;
    // The last credit only goes with returned credits: see docs, "Why it cannot deadlock".
    return credits_ >= 2 || (credits_ == 1 && owed_ != 0);
  }

  // ---- liveness --------------------------------------------------------------------------------

  // True once nothing has arrived from the peer for the dead-peer timeout.
  bool peer_dead(std::uint64_t now) const {
    return dead_timeout_ != 0 && elapsed(last_rx_, now) >= dead_timeout_;
  }

  // A live reload (SIGHUP) of the timer settings, in the same ticks as CreditConfig. The clocks keep
  // running from the last send and receive, so a shorter timeout can fire at the next check. Bounded by
  // what the handshake announced (CreditConfig::keepalive_ceiling, dead_peer_floor): a reload never makes
  // us quieter than the peer was told, nor closes it sooner than it was told.
  void set_timers(std::uint64_t keepalive_interval, std::uint64_t dead_peer_timeout) noexcept {
    keepalive_ = bounded_keepalive(keepalive_interval);
    dead_timeout_ = bounded_dead_peer(dead_peer_timeout);
  }
  std::uint64_t keepalive_interval() const noexcept { return keepalive_; }
  std::uint64_t dead_peer_timeout() const noexcept { return dead_timeout_; }

  // ---- teardown --------------------------------------------------------------------------------

  // Removes any queued descriptor without sending it; kEnd when all queues are empty.
  std::uint16_t cancel_next() noexcept {
    for (const CreditClass q : {CreditClass::kReserved, CreditClass::kRequest, CreditClass::kNoop}) {
      if (!queues_.empty(q)) return queues_.pop(q);
    }
    return TxQueues::kEnd;
  }

  // ---- observation -----------------------------------------------------------------------------

  std::uint16_t queue_depth() const { return depth_; }
  std::uint16_t reserve() const { return reserve_; }
  std::uint16_t high_water() const { return high_water_; }
  std::uint32_t credits() const { return credits_; }
  std::uint32_t held() const { return depth_ - room_ - owed_; }
  std::uint32_t owed() const { return owed_; }
  std::uint32_t owed_eager() const { return owed_ - owed_lazy_; }
  std::uint32_t owed_lazy() const { return owed_lazy_; }
  std::uint32_t peer_room() const { return room_; }
  std::uint32_t queued(CreditClass cls) const { return queues_.size(cls); }
  std::uint32_t queued_total() const { return queues_.total(); }
  const CreditStats& stats() const { return stats_; }

 private:
  friend class CreditMachineTestPeer;

  static std::uint64_t elapsed(std::uint64_t since, std::uint64_t now) {
    return now > since ? now - since : 0;
  }

  bool data_sendable() const {
    return (!queues_.empty(CreditClass::kReserved) && may_send(CreditClass::kReserved)) ||
           (!queues_.empty(CreditClass::kRequest) && may_send(CreditClass::kRequest));
  }

  SendStep take(CreditClass cls, std::uint64_t now, NoopReason why) noexcept {
    return charge(cls, queues_.pop(cls), now, why);
  }

  // Spends a credit on `tx` and hands it every owed credit.
  SendStep charge(CreditClass cls, std::uint16_t tx, std::uint64_t now, NoopReason why) noexcept {
    const std::uint32_t returned = owed_;
    --credits_;
    room_ += returned;
    owed_ = 0;
    owed_lazy_ = 0;
    last_tx_ = now;
    ++stats_.sent[index_of(cls)];
    if (cls == CreditClass::kNoop) ++stats_.noops[static_cast<std::size_t>(why)];
    stats_.credits_returned += returned;
    return SendStep{SendKind::kSend, cls, tx, static_cast<std::uint16_t>(returned)};
  }

  std::uint64_t bounded_keepalive(std::uint64_t k) const noexcept {
    return keepalive_ceiling_ != 0 && (k == 0 || k > keepalive_ceiling_) ? keepalive_ceiling_ : k;
  }
  // 0 (never declare the peer dead) stays allowed: it can only keep a peer longer.
  std::uint64_t bounded_dead_peer(std::uint64_t d) const noexcept {
    return d != 0 && d < dead_peer_floor_ ? dead_peer_floor_ : d;
  }

  // The detailed checks behind on_receive's fast test.
  CreditError check_receive_slow(CreditClass cls, std::uint16_t returned) const noexcept;

  // Negotiated constants.
  std::uint16_t depth_;
  std::uint16_t reserve_;
  std::uint16_t high_water_;
  // All counters are bounded by depth_ (<= 0xffff); 32 bits keep the arithmetic free of casts.
  // held = depth - room - owed is derived, so the hot path updates one counter less.
  std::uint32_t credits_;
  std::uint32_t room_;           // peer_room()
  std::uint32_t owed_ = 0;       // eager + lazy
  std::uint32_t owed_lazy_ = 0;  // part of owed_ that freed NOOPs
  std::uint64_t keepalive_;
  std::uint64_t dead_timeout_;
  std::uint64_t last_tx_;
  std::uint64_t last_rx_;
  TxQueues queues_;
  CreditStats stats_;
  // Cold: read only by set_timers.
  std::uint64_t keepalive_ceiling_;
  std::uint64_t dead_peer_floor_;
};

std::string_view to_string(CreditError e);
std::string_view to_string(NoopReason r);

}  // namespace rdmagate::protocol

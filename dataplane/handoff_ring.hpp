#pragma once
// Per-core handoff between the control thread and one data-plane core (design.md "Handoff";
// docs/engine-handoff.md explains the choices).
//
//   control thread                                   data-plane core
//   ControlMailbox --SpscRing<ToCore>  (ADOPT/CLOSE/CONFIG)-->  CoreMailbox
//   ControlMailbox <--SpscRing<ToControl> (CLOSED/FAILED/STATS)-- CoreMailbox
//
// - The rings are rte_rings formatted with rte_ring_init on caller-provided memory, never rte_ring_create:
//   that needs EAL (memzones and the global ring list), which host unit tests do not have. In production the
//   memory is an rte_zmalloc_socket block on the core's NUMA socket; in tests it is RingStorage.
// - Both rings are single-producer / single-consumer (RING_F_SP_ENQ | RING_F_SC_DEQ); the typed producer and
//   consumer handles are handed out once each, so a second writer cannot appear by accident.
// - Commands are 16-byte values copied into ring slots (rte_ring "elem" API), see handoff_commands.hpp.
// - Full rings: the core never blocks and never drops. A reply that does not fit waits in a fixed-size
//   pending FIFO and goes first at the next check. Control never spins either: what does not fit waits in its
//   backlog, retried by the engine's timerfd 1 ms later (a full ring has no fd to wait on).
// - Wakeups: each side may sleep. The core rings the control thread's Doorbell after a reply and control rings
//   a sleeping core's after a command, and either ring costs a syscall only while the other side is armed
//   (asleep), so a busy side never pays for the other one.
//
// Every method ending in _st must run on the thread that owns that end of the ring (docs/design.md "Naming").

#include <rte_common.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cerrno>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

#include "dataplane/doorbell.hpp"
#include "dataplane/handoff_commands.hpp"

namespace rdmagate::dataplane {

// What a ring slot may hold: a small trivially copyable value whose size rte_ring's elem API accepts. The
// elem copy loops move 8-byte elements as uint64_t and 16-byte ones as rte_int128_t, so those sizes need that
// alignment too.
template <typename T>
concept RingCommand = std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T> && sizeof(T) % 4 == 0 &&
                      sizeof(T) <= 64 && alignof(T) <= RTE_CACHE_LINE_SIZE &&
                      (sizeof(T) != 8 || alignof(T) >= 8) && (sizeof(T) != 16 || alignof(T) >= 16);
static_assert(RingCommand<ToCore> && RingCommand<ToControl>);

// Upper bound on a handoff ring's capacity. A ring holds commands about connections, so a million is already
// far beyond anything a core can own; the bound keeps the power-of-two rounding far from RTE_RING_SZ_MASK.
inline constexpr std::uint32_t kMaxRingCapacity = 1u << 20;
static_assert(2 * kMaxRingCapacity <= RTE_RING_SZ_MASK);

// Owning, cache-line-aligned heap block for a ring when EAL memory is not available (host tests) or not
// wanted. Production passes rte_zmalloc_socket() memory straight to SpscRing::init instead.
class RingStorage {
 public:
  RingStorage() = default;
  explicit RingStorage(std::size_t bytes) noexcept
      : data_(bytes == 0 ? nullptr
                         : static_cast<std::byte*>(::operator new(round_up(bytes), kAlign, std::nothrow))),
        size_(data_ != nullptr ? bytes : 0) {}
  RingStorage(RingStorage&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  RingStorage& operator=(RingStorage&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  RingStorage(const RingStorage&) = delete;
  RingStorage& operator=(const RingStorage&) = delete;
  ~RingStorage() { release(); }

  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }

 private:
  static constexpr std::align_val_t kAlign{RTE_CACHE_LINE_SIZE};
  static std::size_t round_up(std::size_t n) noexcept {
    return (n + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE * RTE_CACHE_LINE_SIZE;
  }
  void release() noexcept {
    if (data_ != nullptr) ::operator delete(data_, kAlign);
    data_ = nullptr;
    size_ = 0;
  }

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

template <RingCommand Cmd>
class SpscRing;

// The one writer of a ring. Move-only; obtained once from SpscRing::take_producer().
template <RingCommand Cmd>
class RingProducer {
 public:
  RingProducer() = default;
  RingProducer(RingProducer&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  RingProducer& operator=(RingProducer&& o) noexcept {
    r_ = std::exchange(o.r_, nullptr);
    return *this;
  }
  RingProducer(const RingProducer&) = delete;
  RingProducer& operator=(const RingProducer&) = delete;

  bool valid() const noexcept { return r_ != nullptr; }

  // All-or-nothing for one command: false when the ring is full.
  [[nodiscard]] bool try_enqueue_st(const Cmd& cmd) noexcept {
    return rte_ring_sp_enqueue_bulk_elem(r_, &cmd, sizeof(Cmd), 1, nullptr) == 1;
  }
  // Enqueues the longest prefix of `cmds` that fits, in order; returns its length.
  [[nodiscard]] std::uint32_t enqueue_burst_st(std::span<const Cmd> cmds) noexcept {
    return rte_ring_sp_enqueue_burst_elem(r_, cmds.data(), sizeof(Cmd), static_cast<unsigned>(cmds.size()),
                                          nullptr);
  }
  // A lower bound on the room left (the consumer may free more concurrently).
  std::uint32_t free_count() const noexcept { return rte_ring_free_count(r_); }

 private:
  friend class SpscRing<Cmd>;
  explicit RingProducer(rte_ring* r) noexcept : r_(r) {}
  rte_ring* r_ = nullptr;
};

// The one reader of a ring. Move-only; obtained once from SpscRing::take_consumer().
template <RingCommand Cmd>
class RingConsumer {
 public:
  RingConsumer() = default;
  RingConsumer(RingConsumer&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  RingConsumer& operator=(RingConsumer&& o) noexcept {
    r_ = std::exchange(o.r_, nullptr);
    return *this;
  }
  RingConsumer(const RingConsumer&) = delete;
  RingConsumer& operator=(const RingConsumer&) = delete;

  bool valid() const noexcept { return r_ != nullptr; }

  [[nodiscard]] bool try_dequeue_st(Cmd& out) noexcept {
    return rte_ring_sc_dequeue_bulk_elem(r_, &out, sizeof(Cmd), 1, nullptr) == 1;
  }
  // Dequeues up to out.size() commands in FIFO order; returns how many were written to `out`.
  [[nodiscard]] std::uint32_t dequeue_burst_st(std::span<Cmd> out) noexcept {
    return rte_ring_sc_dequeue_burst_elem(r_, out.data(), sizeof(Cmd), static_cast<unsigned>(out.size()),
                                          nullptr);
  }
  // A lower bound on what is waiting (the producer may add more concurrently).
  std::uint32_t count() const noexcept { return rte_ring_count(r_); }

 private:
  friend class SpscRing<Cmd>;
  explicit RingConsumer(rte_ring* r) noexcept : r_(r) {}
  rte_ring* r_ = nullptr;
};

// An SP/SC rte_ring of `Cmd` values living in memory the caller owns. The SpscRing object itself is only the
// formatter and the issuer of the two end handles; the memory must outlive both handles.
template <RingCommand Cmd>
class SpscRing {
 public:
  // EXACT_SZ: the ring holds exactly the capacity asked for, so "full" means what the caller configured.
  static constexpr unsigned kFlags = RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ;

  // Bytes of memory init() needs for `capacity` commands; 0 when the capacity is out of range.
  static std::size_t memsize(std::uint32_t capacity) noexcept {
    if (capacity == 0 || capacity > kMaxRingCapacity) return 0;
    const ssize_t n = rte_ring_get_memsize_elem(sizeof(Cmd), rte_align32pow2(capacity + 1));
    return n < 0 ? 0 : static_cast<std::size_t>(n);
  }

  SpscRing() = default;
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  // Formats `mem` as an empty ring. Needs no EAL: rte_ring_init only fills the header. `name` is for
  // debugging (it is not registered anywhere, so it need not be unique) and must be shorter than
  // RTE_RING_NAMESIZE. Returns 0, or -EBUSY (already initialised), -EINVAL (bad capacity, null or misaligned
  // memory), -ENOSPC (memory too small), -ENAMETOOLONG.
  [[nodiscard]] int init(void* mem, std::size_t len, std::uint32_t capacity, const char* name) noexcept {
    if (ring_ != nullptr) return -EBUSY;
    const std::size_t need = memsize(capacity);
    if (need == 0 || mem == nullptr || reinterpret_cast<std::uintptr_t>(mem) % RTE_CACHE_LINE_SIZE != 0) {
      return -EINVAL;
    }
    if (len < need) return -ENOSPC;
    auto* r = static_cast<rte_ring*>(mem);
    const int rc = rte_ring_init(r, name, capacity, kFlags);
    if (rc != 0) return rc < 0 ? rc : -rc;
    ring_ = r;
    producer_taken_ = false;
    consumer_taken_ = false;
    return 0;
  }

  bool initialized() const noexcept { return ring_ != nullptr; }
  std::uint32_t capacity() const noexcept { return ring_ != nullptr ? rte_ring_get_capacity(ring_) : 0; }
  // For diagnostics only (rte_ring_dump); never hand this to a second producer or consumer.
  const rte_ring* raw() const noexcept { return ring_; }

  // Each end is issued exactly once; a second request yields an invalid handle (and asserts in debug builds),
  // which is how "single producer, single consumer" is kept true by construction rather than by convention.
  RingProducer<Cmd> take_producer() noexcept {
    assert(ring_ != nullptr && !producer_taken_);
    if (ring_ == nullptr || producer_taken_) return RingProducer<Cmd>{};
    producer_taken_ = true;
    return RingProducer<Cmd>{ring_};
  }
  RingConsumer<Cmd> take_consumer() noexcept {
    assert(ring_ != nullptr && !consumer_taken_);
    if (ring_ == nullptr || consumer_taken_) return RingConsumer<Cmd>{};
    consumer_taken_ = true;
    return RingConsumer<Cmd>{ring_};
  }

 private:
  rte_ring* ring_ = nullptr;
  bool producer_taken_ = false;
  bool consumer_taken_ = false;
};

// Sizes of one core's pair of rings.
struct HandoffSizes {
  // control -> core: ADOPT and CLOSE per connection plus the odd CONFIG. Control keeps a backlog, so this
  // only needs to absorb a burst between two core checks.
  std::uint32_t to_core = 256;
  // core -> control: at most one FAILED and one CLOSED per owned connection plus STATS; the core's pending
  // FIFO takes the overflow.
  std::uint32_t to_control = 256;
};

// One core's two rings, formatted in a single block (one allocation on the core's socket in production).
class CoreHandoff {
 public:
  static std::size_t memsize(const HandoffSizes& s) noexcept {
    const std::size_t a = SpscRing<ToCore>::memsize(s.to_core);
    const std::size_t b = SpscRing<ToControl>::memsize(s.to_control);
    if (a == 0 || b == 0) return 0;
    return align_up(a) + b;
  }

  // Formats both rings in `mem` (memsize(s) bytes, cache-line aligned). `core` only names the rings.
  // Returns 0 or the first -errno from SpscRing::init.
  [[nodiscard]] int init(void* mem, std::size_t len, const HandoffSizes& s, unsigned core) noexcept {
    const std::size_t need = memsize(s);
    if (need == 0 || mem == nullptr) return -EINVAL;
    if (len < need) return -ENOSPC;
    char name[RTE_RING_NAMESIZE];
    std::snprintf(name, sizeof(name), "rg_c%u_in", core);
    int rc = to_core_.init(mem, SpscRing<ToCore>::memsize(s.to_core), s.to_core, name);
    if (rc != 0) return rc;
    std::snprintf(name, sizeof(name), "rg_c%u_out", core);
    const std::size_t off = align_up(SpscRing<ToCore>::memsize(s.to_core));
    rc = to_control_.init(static_cast<std::byte*>(mem) + off, len - off, s.to_control, name);
    return rc;
  }

  SpscRing<ToCore>& to_core() noexcept { return to_core_; }
  SpscRing<ToControl>& to_control() noexcept { return to_control_; }

 private:
  static std::size_t align_up(std::size_t n) noexcept {
    return (n + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE * RTE_CACHE_LINE_SIZE;
  }
  SpscRing<ToCore> to_core_;
  SpscRing<ToControl> to_control_;
};

// What a core's loop provides to act on control's commands. Called from CoreMailbox::check_st, on the core.
// No virtual calls: the mailbox is templated on the handler.
template <typename H>
concept CoreCommandHandler = requires(H& h, ConnHandle c, CloseReason r, ConfigKey k, std::uint64_t v) {
  h.on_adopt_st(c);
  h.on_close_st(c, r);
  h.on_config_st(k, v);
};

// What control provides to act on a core's replies. Called from ControlMailbox::drain_st, on the control
// thread.
template <typename H>
concept ControlReplyHandler = requires(H& h, ConnHandle c, FailureKind f, std::uint32_t status) {
  h.on_closed_st(c);
  h.on_failed_st(c, f, status);
};

// Plain per-core counters (summed at scrape time, never atomics).
struct CoreMailboxCounters {
  std::uint64_t checks = 0;            // ring checks actually performed (every check_every iterations)
  std::uint64_t commands = 0;          // commands dequeued and dispatched
  std::uint64_t invalid_commands = 0;  // unknown op or null connection: dropped, never acted on
  std::uint64_t replies = 0;           // replies put on the ring
  std::uint64_t replies_deferred = 0;  // replies that had to wait in the pending FIFO (ring was full)
  std::uint64_t reply_overflows = 0;   // pending FIFO full too: a sizing bug, see CoreMailbox
};

// The data-plane core's end of the handoff. Lives in the core's own memory; every method runs on the core.
//
// kPendingCapacity sizes the FIFO that holds replies while the core->control ring is full. Size it to at
// least 2 x the connections a core may own (each can owe one FAILED and one CLOSED); then a reply can never
// be lost, however long control stalls.
template <std::uint32_t kPendingCapacity>
class CoreMailbox {
 public:
  // Check the ring every 16 loop iterations, never per completion (DPDK ip_pipeline's `(i & 0xF) == 0`).
  static constexpr std::uint32_t kCheckEvery = 16;
  // Commands handled per check: bounded so a flood of CLOSEs cannot stall the completion loop.
  static constexpr std::uint32_t kBurst = 32;
  static_assert(std::has_single_bit(kCheckEvery), "the core loop masks its iteration counter");
  static_assert(std::has_single_bit(kPendingCapacity), "pending FIFO indexes with a mask");
  static_assert(kPendingCapacity >= kBurst, "a full burst of CLOSEs answered at once must fit");

  CoreMailbox(RingConsumer<ToCore> in, RingProducer<ToControl> out) noexcept
      : in_(std::move(in)), out_(std::move(out)) {}
  CoreMailbox(const CoreMailbox&) = delete;
  CoreMailbox& operator=(const CoreMailbox&) = delete;

  bool valid() const noexcept { return in_.valid() && out_.valid(); }

  // Retries deferred replies first (so they keep their order ahead of anything the handler answers now), then
  // dispatches at most one burst of commands. Returns the number of commands dispatched.
  template <CoreCommandHandler H>
  std::uint32_t check_st(H& handler) noexcept {
    ++counters_.checks;
    flush_st();
    std::array<ToCore, kBurst> burst;
    const std::uint32_t n = in_.dequeue_burst_st(burst);
    for (std::uint32_t i = 0; i < n; ++i) dispatch_st(burst[i], handler);
    counters_.commands += n;
    return n;
  }

  // Queues a reply. Never blocks. The reply goes on the ring now if nothing older is waiting and there is
  // room; otherwise it waits in the pending FIFO. Returns false only if that FIFO is full as well (a sizing
  // bug; the reply is dropped and counted).
  [[nodiscard]] bool reply_st(const ToControl& msg) noexcept {
    if (pending_size() == 0 && out_.try_enqueue_st(msg)) {
      ++counters_.replies;
      if (wake_ != nullptr) wake_->ring();
      return true;
    }
    if (pending_size() == kPendingCapacity) {
      ++counters_.reply_overflows;
      return false;
    }
    pending_[tail_ & kMask] = msg;
    ++tail_;
    ++counters_.replies_deferred;
    return true;
  }
  [[nodiscard]] bool closed_st(ConnHandle conn) noexcept { return reply_st(ToControl::closed(conn)); }
  [[nodiscard]] bool failed_st(ConnHandle conn, FailureKind kind, std::uint32_t status) noexcept {
    return reply_st(ToControl::failed(conn, kind, status));
  }
  [[nodiscard]] bool cq_lost_st(unsigned core) noexcept { return reply_st(ToControl::cq_lost(core)); }
  // Pushes deferred replies (oldest first). Returns how many replies still wait.
  std::uint32_t flush_st() noexcept {
    while (pending_size() != 0) {
      const std::uint32_t head = head_ & kMask;
      const std::uint32_t contiguous = std::min(pending_size(), kPendingCapacity - head);
      const std::uint32_t sent =
          out_.enqueue_burst_st(std::span<const ToControl>(pending_.data() + head, contiguous));
      head_ += sent;
      counters_.replies += sent;
      if (sent != 0 && wake_ != nullptr) wake_->ring();
      if (sent < contiguous) break;
    }
    return pending_size();
  }

  std::uint32_t pending_st() const noexcept { return pending_size(); }
  // Commands on the ring not yet dispatched (a core about to sleep must not).
  std::uint32_t commands_waiting_st() const noexcept { return in_.count(); }
  // Rung after every reply put on the ring: control sleeps until then (Doorbell; a write only while control
  // is armed). Null: nobody sleeps on it (host tests). Set once, before the core runs.
  void set_wake(Doorbell* bell) noexcept { wake_ = bell; }
  const CoreMailboxCounters& counters() const noexcept { return counters_; }

 private:
  static constexpr std::uint32_t kMask = kPendingCapacity - 1;

  std::uint32_t pending_size() const noexcept { return tail_ - head_; }

  template <CoreCommandHandler H>
  void dispatch_st(const ToCore& cmd, H& handler) noexcept {
    switch (cmd.op) {
      case ToCoreOp::kAdopt:
        if (!cmd.conn().valid()) break;
        handler.on_adopt_st(cmd.conn());
        return;
      case ToCoreOp::kClose:
        if (!cmd.conn().valid()) break;
        handler.on_close_st(cmd.conn(), cmd.close_reason());
        return;
      case ToCoreOp::kConfig:
        handler.on_config_st(cmd.config_key(), cmd.config_value());
        return;
      case ToCoreOp::kCqLost:
        if constexpr (requires(H & h) { h.on_cq_lost_st(); }) {
          handler.on_cq_lost_st();
          return;
        }
        break;
      case ToCoreOp::kInvalid:
        break;
    }
    ++counters_.invalid_commands;
  }

  RingConsumer<ToCore> in_;
  RingProducer<ToControl> out_;
  // Free-running indices; unsigned wrap-around keeps tail_ - head_ correct.
  std::uint32_t head_ = 0;
  std::uint32_t tail_ = 0;
  CoreMailboxCounters counters_{};
  Doorbell* wake_ = nullptr;
  std::array<ToControl, kPendingCapacity> pending_{};
};

// Control-side counters for one core's handoff.
struct ControlMailboxCounters {
  std::uint64_t sent = 0;             // commands put on the ring
  std::uint64_t deferred = 0;         // commands that had to wait in the backlog (ring was full)
  std::uint64_t replies = 0;          // replies dequeued and dispatched
  std::uint64_t invalid_replies = 0;  // unknown op or null connection: dropped
};

// The control thread's end of one core's handoff. Control may allocate, so its backlog is unbounded; it is in
// practice bounded by 2 commands per connection (ADOPT, CLOSE) plus CONFIGs. Control never waits for room:
// the engine calls flush_st()/drain_st() on every wakeup, and arms its timerfd 1 ms ahead while
// has_backlog_st() is true so a stalled core's backlog is retried without busy-waiting.
class ControlMailbox {
 public:
  // Replies handled per drain_st call, so one chatty core cannot starve the control loop's other fds.
  static constexpr std::uint32_t kDrainBurst = 32;
  static constexpr std::uint32_t kDrainLimit = 1024;
  static_assert(kDrainLimit % kDrainBurst == 0);

  ControlMailbox(RingProducer<ToCore> out, RingConsumer<ToControl> in) noexcept
      : out_(std::move(out)), in_(std::move(in)) {}
  ControlMailbox(const ControlMailbox&) = delete;
  ControlMailbox& operator=(const ControlMailbox&) = delete;

  bool valid() const noexcept { return out_.valid() && in_.valid(); }

  // Never fails and never blocks. Order is preserved: nothing overtakes an older command still in the
  // backlog, which is what lets CLOSE follow an ADOPT that is still waiting. Returns true if the command is
  // on the ring now, false if it waits in the backlog (flush_st reports when it leaves).
  bool send_st(const ToCore& cmd) {
    if (backlog_.empty() && out_.try_enqueue_st(cmd)) {
      ++counters_.sent;
      if (wake_ != nullptr) wake_->ring();
      return true;
    }
    backlog_.push_back(cmd);
    ++counters_.deferred;
    return false;
  }

  // Retries the backlog, oldest first. Returns how many commands still wait.
  std::size_t flush_st() noexcept {
    return flush_st([](const ToCore&) {});
  }
  // Same, calling `on_sent(cmd)` for each command that made it onto the ring, in order. This is how the
  // engine learns that a deferred ADOPT has been delivered (ConnectionLifecycle's kAdoptEnqueued), outside
  // any lifecycle dispatch.
  template <typename OnSent>
  requires std::invocable<OnSent&, const ToCore&> std::size_t flush_st(OnSent&& on_sent) {
    while (!backlog_.empty() && out_.try_enqueue_st(backlog_.front())) {
      const ToCore sent = backlog_.front();
      backlog_.pop_front();
      ++counters_.sent;
      if (wake_ != nullptr) wake_->ring();
      on_sent(sent);
    }
    return backlog_.size();
  }

  // Dispatches up to `limit` replies in FIFO order; returns how many were dispatched.
  template <ControlReplyHandler H>
  std::uint32_t drain_st(H& handler, std::uint32_t limit = kDrainLimit) noexcept {
    std::array<ToControl, kDrainBurst> burst;
    std::uint32_t total = 0;
    while (total < limit) {
      const std::uint32_t want = std::min<std::uint32_t>(kDrainBurst, limit - total);
      const std::uint32_t n = in_.dequeue_burst_st(std::span<ToControl>(burst.data(), want));
      for (std::uint32_t i = 0; i < n; ++i) dispatch_st(burst[i], handler);
      total += n;
      if (n < want) break;
    }
    counters_.replies += total;
    return total;
  }

  bool has_backlog_st() const noexcept { return !backlog_.empty(); }
  // Replies on the ring not yet drained (control about to sleep must not).
  bool has_replies_st() const noexcept { return in_.count() != 0; }
  // Rung after every command put on the ring: a core that sleeps when idle (the client's caller-driven and
  // thread modes) wakes for it. Null: the core polls. Set once, before control sends anything.
  void set_wake(Doorbell* bell) noexcept { wake_ = bell; }
  std::size_t backlog_st() const noexcept { return backlog_.size(); }
  const ControlMailboxCounters& counters() const noexcept { return counters_; }

 private:
  template <ControlReplyHandler H>
  void dispatch_st(const ToControl& msg, H& handler) noexcept {
    switch (msg.op) {
      case ToControlOp::kClosed:
        if (!msg.conn().valid()) break;
        handler.on_closed_st(msg.conn());
        return;
      case ToControlOp::kFailed:
        if (!msg.conn().valid()) break;
        handler.on_failed_st(msg.conn(), msg.failure_kind(), msg.status());
        return;
      case ToControlOp::kCqLost:
        // Optional in a handler: only control of a core that can lose its CQ (the engine) acts on it.
        if constexpr (requires(H & h) { h.on_cq_lost_st(0u); }) {
          handler.on_cq_lost_st(static_cast<unsigned>(msg.payload));
          return;
        }
        break;
      case ToControlOp::kInvalid:
        break;
    }
    ++counters_.invalid_replies;
  }

  RingProducer<ToCore> out_;
  RingConsumer<ToControl> in_;
  std::deque<ToCore> backlog_;
  ControlMailboxCounters counters_{};
  Doorbell* wake_ = nullptr;
};

}  // namespace rdmagate::dataplane

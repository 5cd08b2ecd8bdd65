#pragma once
// The data-plane core loop (hot path): poll the CQ in bursts, process completions by wr_id kind, decode and
// validate every message with the protocol core, run credits through the credit machine, dispatch to the
// service chosen at setup, flush each dirty connection once per burst (one doorbell for its receives, one
// for its sends, selective signaling), check the control ring every 16 iterations.
//
// CoreLoop<Backend, Service> is a template on both (eRPC's Rpc<Transport>): no virtual call and no branch on
// the device kind per message. The backend (dataplane/backend/) owns work-request building and completion
// decoding; the service (service_api.hpp) owns what requests mean. No syscalls, locks or allocation on this
// path; the one exception is the optional yielding idle policy (sched_yield after a run of empty polls),
// chosen at setup for machines with more pollers than CPUs.
//
// The class is declared here with the loop itself (run, completions, receive); its other concerns live in
// files of their own, included at the end:
//   core_send.hpp      the send path: encode once after the credit decision, stage, flush
//   core_bulk.hpp      the bulk-transfer engine: chunk queue, RDMA READ/WRITE, their completions
//   core_commands.hpp  control's commands (ADOPT, CLOSE, CONFIG), quiesce, keepalive and dead-peer timers
//   core_auth.hpp      the authentication gate (AUTH before anything else), table swaps and revocation
//   core_windows.hpp   memory windows: a requester's per-request keys, bound and invalidated on its QP
//
// Every method ending in _st runs on the core's own lcore (docs/design.md "Naming").

#include <rte_cycles.h>
#include <rte_pause.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "dataplane/backend/backend.hpp"
#include "dataplane/core_conn.hpp"
#include "dataplane/core_idle.hpp"
#include "dataplane/core_resources.hpp"
#include "dataplane/core_stats_publish.hpp"
#include "dataplane/service_api.hpp"
#include "dataplane/tsc.hpp"
#include "protocol/credit_machine.hpp"
#include "protocol/message.hpp"

namespace rdmagate::dataplane {

template <typename Backend, typename Service>
class CoreLoop {
 public:
  using Qp = typename Backend::Qp;
  using Cq = typename Backend::Cq;
  static constexpr std::uint32_t kMaxBurst = 64;
  static constexpr std::uint32_t kTimerEvery = 1024;  // iterations between keepalive/dead-peer scans (at least)
  static_assert((kTimerEvery & (kTimerEvery - 1)) == 0);

  CoreLoop(CoreResources& res, Service& svc)
      : res_(res), svc_(svc), cnt_(res.counters), mailbox_(res.core_mailbox()), cq_(static_cast<Cq&>(res.cq())) {
    owned_.reserve(res.config().max_conns);
    drain_retry_.reserve(res.config().max_conns);
    dirty_.reserve(res.config().max_conns);
    burst_ = res.config().poll_burst == 0 || res.config().poll_burst > kMaxBurst ? kMaxBurst
                                                                                    : res.config().poll_burst;
    tsc_hz_ = dataplane::tsc_hz();
    publish_every_ = tsc_hz_ / 1000;
    // Both powers of two (CoreResources::create checked check_every): timers run at a ring check.
    check_mask_ = res.config().check_every - 1;
    timer_mask_ = std::max(kTimerEvery, res.config().check_every) - 1;
    bulk_timeout_tsc_ = us_to_tsc(res.config().bulk_timeout_us, tsc_hz_);
    auth_timeout_tsc_ = us_to_tsc(res.config().auth_timeout_us, tsc_hz_);
  }
  CoreLoop(const CoreLoop&) = delete;
  CoreLoop& operator=(const CoreLoop&) = delete;

  // Runs until control sets res.stop. Returns 0. The idle policy is chosen here, once: the loop below is
  // instantiated per policy (core_idle.hpp), so no poll branches on it.
  int run_st() noexcept {
    const CoreConfig& cfg = res_.config();
    switch (cfg.idle) {
      case IdlePolicy::kYield:
        return run_with_st(YieldIdle(cfg.idle_yield_after, cnt_.yields, idle_));
      case IdlePolicy::kPause:
        return run_with_st(BackoffIdle(1, idle_));
      case IdlePolicy::kBackoff:
        return run_with_st(BackoffIdle(cfg.idle_backoff_max_pauses, idle_));
      case IdlePolicy::kEvent:
        // The engine gives every event core a sleeper (Engine::create); without one it backs off forever.
        if (cfg.sleeper != nullptr) {
          return run_with_st(EventIdle(cfg.idle_backoff_max_pauses, us_to_tsc(cfg.idle_event_after_us, tsc_hz_),
                                       idle_));
        }
        return run_with_st(BackoffIdle(cfg.idle_backoff_max_pauses, idle_));
      case IdlePolicy::kBusy:
        break;
    }
    return run_with_st(BusyIdle{});
  }

  // One poll of the CQ: every completion of the burst processed, then every dirty connection flushed. True
  // when the poll found completions. (run_st's body; host tests drive it directly.)
  bool poll_once_st() noexcept {
    std::array<Completion, kMaxBurst> wcs;
    const int n = Backend::poll_st(cq_, wcs.data(), static_cast<int>(burst_));
    if (n <= 0) [[unlikely]] {
      ++cnt_.idle_polls;
      if (n < 0) ++cnt_.errors[static_cast<std::size_t>(CoreError::kCompletion)];
      return false;
    }
    now_ = rte_rdtsc();
    for (int i = 0; i < n; ++i) process_completion_st(wcs[static_cast<std::size_t>(i)]);
    flush_st();
    last_polled_ = static_cast<unsigned>(n);
    return true;
  }

  // ---- caller-driven progress (a core without an lcore of its own: its owner's thread calls these) -------
  // The same work as run_st's turn, but every call checks control's ring and the clock decides the timers
  // (the owner may call rarely, or sleep in between). Never used together with run_st.

  // One turn: the completions idle_for_sleep_st set aside, else one poll of the CQ; the service's poll hook;
  // control's ring; the timers once per millisecond. Returns the completions processed. Publishes no
  // telemetry (CoreResources::stats): its busy/idle split means nothing for a core that sleeps.
  unsigned progress_st() noexcept {
    ++cnt_.polls;
    if (cq_lost_) [[unlikely]] {
      lost_turn_st();
      return 0;
    }
    unsigned done = 0;
    if (stashed_ != 0) {
      now_ = rte_rdtsc();
      done = stashed_;
      for (unsigned i = 0; i < stashed_; ++i) process_completion_st(stash_[i]);
      stashed_ = 0;
      flush_st();
    } else if (poll_once_st()) {
      done = last_polled_;
    }
    if constexpr (requires(Service& sv) { sv.on_poll_st(*this); }) {
      if (svc_.on_poll_st(*this)) flush_st();
    }
    now_ = rte_rdtsc();
    if (mailbox_.check_st(*this) != 0) flush_st();
    if (cq_lost_) [[unlikely]] {
      lost_turn_st();
      return done;
    }
    if (now_ >= next_timers_) {
      timers_st();
      next_timers_ = now_ + publish_every_;
    }
    return done;
  }

  // Before the owner sleeps, after it armed its wakeups (CQ notification, doorbells): true when nothing is
  // pending, so that anything arriving from now on wakes it. Completions already on the CQ (they raise no
  // event) are taken off and kept for the next progress_st: false. Commands on control's ring: false.
  bool idle_for_sleep_st() noexcept {
    if (cq_lost_) [[unlikely]] {  // nothing to poll: only the kCqLost answer and control's commands
      return cq_lost_answered_ && mailbox_.commands_waiting_st() == 0 && mailbox_.pending_st() == 0;
    }
    if (stashed_ == 0) {
      const int n = Backend::poll_st(cq_, stash_.data(), static_cast<int>(burst_));
      if (n < 0) ++cnt_.errors[static_cast<std::size_t>(CoreError::kCompletion)];
      stashed_ = n > 0 ? static_cast<unsigned>(n) : 0;
    }
    return stashed_ == 0 && mailbox_.commands_waiting_st() == 0 && mailbox_.pending_st() == 0 &&
           drain_retry_.empty();
  }

  // ---- API for services (core thread) ----------------------------------------------------------------

  // Encodes and sends (or queues, when credits do not allow it now) one message. Returns false when the
  // connection cannot send (not owned, no descriptor, a message encode_message would refuse); counted.
  bool send_st(CoreConn& c, protocol::MessageType type, std::uint16_t opcode, std::uint64_t cookie,
               std::span<const std::uint8_t> payload, std::uint32_t status = 0, std::uint32_t byte_count = 0,
               const protocol::Chunk* chunk = nullptr) noexcept;
  // The same for a message the caller built whole (protocol::make_auth_message / make_auth_answer): the same
  // checks, credits and fault rules.
  bool send_built_st(CoreConn& c, protocol::Message m) noexcept;

  // Bulk transfers (core_bulk.hpp has the rules: one per connection, every started one ends exactly once).
  bool bulk_read_st(CoreConn& c, const ChunkRequest& req, std::uint8_t* dst, std::uint32_t lkey) noexcept;
  bool bulk_read_st(CoreConn& c, const ChunkRequest& req) noexcept;
  bool bulk_write_st(CoreConn& c, const ChunkRequest& req, const std::uint8_t* src, std::uint32_t lkey,
                     std::uint32_t len) noexcept;
  bool bulk_write_st(CoreConn& c, const ChunkRequest& req, std::uint32_t len) noexcept;

  // Memory windows (core_windows.hpp): a requester exposes one request's memory through window `slot` of
  // `c`'s QP, from the bind (staged before the request's send) until its invalidation completes (the
  // service's on_window_invalidated_st). windows_st: how many `c` has (0: the backend or device has none).
  std::uint32_t windows_st(const CoreConn& c) const noexcept {
    if constexpr (WindowBackend<Backend>) {
      return static_cast<std::uint32_t>(c.windows.size());
    } else {
      (void)c;
      return 0;
    }
  }
  // The window's new key (0: not bound, nothing staged).
  std::uint32_t bind_window_st(CoreConn& c, std::uint32_t slot, const WindowBind& b) noexcept;
  // False: nothing staged (the connection is not owned, or no such window).
  bool invalidate_window_st(CoreConn& c, std::uint32_t slot) noexcept;

  // FAULT INJECTION ONLY (tests of misbehaving peers): sends `bytes` as one message exactly as given,
  // bypassing encode_message and the credit machine. Returns false when no descriptor is free.
  bool inject_raw_st(CoreConn& c, std::span<const std::uint8_t> bytes) noexcept;

  // Free tx descriptors of `c` (a service paces its requests with it).
  std::uint32_t tx_available_st(const CoreConn& c) const noexcept { return c.tx_free_top; }
  std::uint64_t now_tsc_st() const noexcept { return now_; }
  std::uint64_t tsc_hz() const noexcept { return tsc_hz_; }
  CoreCounters& counters_st() noexcept { return cnt_; }
  std::uint32_t owned_st() const noexcept { return static_cast<std::uint32_t>(owned_.size()); }
  // True after CONFIG kQuiesce 1: services start no new request (the core refuses incoming ones).
  bool quiescing_st() const noexcept { return quiescing_; }

  // ---- handoff commands (CoreMailbox calls these during check_st; core_commands.hpp) ------------------
  void on_adopt_st(ConnHandle h) noexcept;
  void on_close_st(ConnHandle h, CloseReason why) noexcept;
  void on_config_st(ConfigKey k, std::uint64_t v) noexcept;
  void on_cq_lost_st() noexcept;
  // True once control said the CQ is lost (ToCore kCqLost): the core polls and posts nothing any more.
  bool cq_lost_st() const noexcept { return cq_lost_; }

 private:
  static Qp& qp_of(CoreConn& c) noexcept { return static_cast<Qp&>(*c.qp); }

  // ---- the loop and its idle policy (this file) -------------------------------------------------------

  template <typename Idle>
  int run_with_st(Idle idle) noexcept {
    res_.running.store(true, std::memory_order_release);
    // Busy time is summed with one extra rdtsc per busy iteration; the policy times its pauses, yields and
    // sleeps itself; idle time is the rest of the running time. The counters reach res.stats about once per
    // publish_every_ cycles, and before every sleep.
    // A loop run again (host tests run it a few iterations at a time) goes on with the running time it had.
    start_tsc_ = rte_rdtsc() - ran_tsc_;
    std::uint64_t next_publish = start_tsc_ + ran_tsc_;
    for (std::uint64_t iter = 0; !cq_lost_; ++iter) {
      ++cnt_.polls;
      if (poll_once_st()) [[likely]] {
        busy_tsc_ += rte_rdtsc() - now_;
        idle.on_work_st();
      } else if (idle.on_empty_st()) {
        if constexpr (Idle::kSleeps) {
          // Only a sleep published (just before it): an arm that found work pending must not push the next
          // publication back, or a core that arms more often than publish_every_ (a service waiting for
          // storage completions) never publishes and looks stalled.
          if (sleep_st(*res_.config().sleeper)) next_publish = now_ + publish_every_;
          idle.on_work_st();
        }
      }
      if constexpr (requires(Service& s) { s.on_poll_st(*this); }) {
        if (svc_.on_poll_st(*this)) {
          flush_st();
          idle.on_work_st();
        }
      }
      if ((iter & check_mask_) == 0) [[unlikely]] {
        now_ = rte_rdtsc();
        if (mailbox_.check_st(*this) != 0) flush_st();
        if (res_.stop.load(std::memory_order_acquire) || cq_lost_) break;
        if (now_ >= next_publish && res_.stats != nullptr) {
          publish_st(now_);
          next_publish = now_ + publish_every_;
        }
        if ((iter & timer_mask_) == 0) timers_st();
      }
    }
    // The CQ is lost (ToCore kCqLost): nothing is polled or posted any more; control's CLOSEs (each after it
    // destroyed the QP) end the connections. Until stop, at least one turn (a test's stop is preset). Each
    // turn counts as a poll: the core is not stuck, so /healthz must not restart the gateway (and drop the
    // other cores' connections) for it; rdmagate_core_out_of_service and its alert report it instead.
    if (cq_lost_) {
      do {
        ++cnt_.polls;
        lost_turn_st();
        if (now_ >= next_publish && res_.stats != nullptr) {
          publish_st(now_);
          next_publish = now_ + publish_every_;
        }
        rte_pause();
      } while (!res_.stop.load(std::memory_order_acquire));
    }
    const std::uint64_t end = rte_rdtsc();
    ran_tsc_ = end - start_tsc_;
    if (res_.stats != nullptr) publish_st(end);  // the final totals, for a scrape after the core stopped
    res_.running.store(false, std::memory_order_release);
    return 0;
  }

  void publish_st(std::uint64_t now) noexcept {
    const std::uint64_t running = now - start_tsc_;
    const std::uint64_t idle = running > busy_tsc_ ? running - busy_tsc_ : 0;
    publish_core_counters(cnt_, PollerTimes{busy_tsc_, idle}, *res_.stats);
    publish_idle_stats(idle_, busy_tsc_, idle, *res_.stats);
  }

  // EventIdle found no work for idle_event_after_us. Arms the CQ's notification and control's doorbell,
  // looks once more at everything that raises no event, and sleeps until a completion, a command, a
  // deadline of its own or stop. Returns awake, with now_ set; true when it slept (and published first).
  bool sleep_st(CoreSleeper& sleeper) noexcept {
    ++idle_.arms;
    if (!sleeper.arm_st(cq_)) [[unlikely]] {
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kCompletion)];
      sleeper.disarm_st(CoreSleeper::kAll);
      return false;
    }
    // Refused: what raced the arm (a completion's event, a command's ring) is likely what the look found.
    if (!nothing_pending_st()) {
      sleeper.disarm_st(CoreSleeper::kAll);
      return false;
    }
    ++idle_.sleeps;
    const std::uint64_t t0 = rte_rdtsc();
    if (res_.stats != nullptr) {
      publish_st(t0);
      res_.stats->set(telemetry::Stat::kSleeping, 1);
    }
    const unsigned woke = sleeper.sleep_st(sleep_timeout_ms_st());
    now_ = rte_rdtsc();
    idle_.state(PollerState::kSleep) += now_ - t0;
    if (res_.stats != nullptr) res_.stats->set(telemetry::Stat::kSleeping, 0);
    sleeper.disarm_st(woke);
    if (woke == 0) {
      ++idle_.wakeups[static_cast<std::size_t>(WakeSource::kTimer)];
      timers_st();
      return true;
    }
    for (std::size_t i = 0; i < kWakeSourceCount; ++i) idle_.wakeups[i] += (woke >> i) & 1u;
    if ((woke & (1u << static_cast<unsigned>(WakeSource::kCommand))) != 0 && mailbox_.check_st(*this) != 0) {
      flush_st();
    }
    return true;
  }

  // The last look before sleeping, after arming: completions already on the CQ or the service's storage
  // queue raise no event, so they are run now (and the core stays awake); commands on the ring, replies
  // still to push, drain markers still to post, stop, and storage ops whose completions would ring no bell
  // keep it awake too.
  bool nothing_pending_st() noexcept {
    if (poll_once_st()) {
      busy_tsc_ += rte_rdtsc() - now_;
      return false;
    }
    if (res_.stop.load(std::memory_order_acquire)) return false;
    if (mailbox_.commands_waiting_st() != 0 || mailbox_.pending_st() != 0 || !drain_retry_.empty()) return false;
    if constexpr (requires(Service& s) { s.on_poll_st(*this); }) {
      // Its completions queued before the arm rang no bell: take them now, as those on the CQ.
      if (svc_.on_poll_st(*this)) {
        flush_st();
        return false;
      }
      // A service with completions of its own (storage ops) must say whether one would wake the core (or
      // that it waits for none), or the core stays up.
      if constexpr (requires(const Service& s) { s.idle_st(); }) {
        if (!svc_.idle_st()) return false;
      } else {
        return false;
      }
    }
    return true;
  }

  // The core's own next deadline while asleep: keepalive NOOPs and dead-peer checks of its connections (a
  // quarter of the shortest interval, so one is at most that late), a quiesce in progress (its quiet
  // period). -1: none, the core sleeps until a completion or a command.
  int sleep_timeout_ms_st() const noexcept {
    std::uint64_t ticks = 0;
    for (const CoreConn* c : owned_) {
      for (const std::uint64_t t : {c->credits->keepalive_interval(), c->credits->dead_peer_timeout(),
                                    c->bulk_op.state != BulkState::kIdle ? bulk_timeout_tsc_ : 0}) {
        if (t != 0 && (ticks == 0 || t < ticks)) ticks = t;
      }
    }
    for (const CoreConn* c : owned_) {  // an AUTH deadline; a denied connection waits for its answer's send
      if (c->auth == AuthState::kOpen) continue;
      const std::uint64_t t = c->auth == AuthState::kDenied || c->auth_deadline_tsc <= now_
                                  ? std::max<std::uint64_t>(tsc_hz_ / 250, 1)
                                  : c->auth_deadline_tsc - now_;
      if (ticks == 0 || t < ticks) ticks = t;
    }
    if (quiescing_ && !res_.quiesced.load(std::memory_order_relaxed)) {
      const std::uint64_t quiet = tsc_hz_ / 1000 * kQuietMs;
      if (ticks == 0 || quiet < ticks) ticks = quiet;
    }
    if (const std::uint64_t due = res_.faults.next_due_st(); due != 0) {  // a held message
      const std::uint64_t left = due > now_ ? due - now_ : 1;
      if (ticks == 0 || left < ticks) ticks = left;
    }
    if (ticks == 0) return -1;
    const std::uint64_t ms = ticks / 4 / std::max<std::uint64_t>(tsc_hz_ / 1000, 1);
    return static_cast<int>(std::clamp<std::uint64_t>(ms, 1, 1u << 30));
  }

  // ---- completions and receive (this file) ----------------------------------------------------------

  void process_completion_st(const Completion& wc) noexcept {
    switch (wr_kind(wc.wr_id)) {
      case WrKind::kRecv:
        receive_completed_st(wc);
        return;
      case WrKind::kSend: {
        TxDesc& d = *wr_desc<TxDesc>(wc.wr_id);
        CoreConn& c = *d.conn;
        if (stale_st(c, wc)) [[unlikely]]
          return;
        ++cnt_.completions_send;
        reclaim_sq_st(c, d.index);
        if (wc.status != CompletionStatus::kOk) [[unlikely]] {
          completion_error_st(c, wc);
          return;
        }
        if (c.state == CoreConnState::kOwned) {
          if (c.credits->queued_total() != 0) mark_dirty_st(c);
          notify_writable_st(c);
        }
        return;
      }
      case WrKind::kDrain: {
        CoreConn& c = *wr_desc<TxDesc>(wc.wr_id)->conn;
        if (stale_st(c, wc)) [[unlikely]]
          return;
        drain_completed_st(c, wc);
        return;
      }
      case WrKind::kWindowBind:
      case WrKind::kWindowInv:
        window_completed_st(wc);
        return;
      case WrKind::kRdma:
      case WrKind::kRdmaFiller:
      default:
        rdma_completed_st(wc);
        return;
    }
  }

  // A completion of an earlier incarnation of `c` (its wr_id's generation is not c's): it says nothing about
  // the connection that now owns the descriptor, and acting on it would free or reuse what is still posted.
  bool stale_st(const CoreConn& c, const Completion& wc) noexcept {
    if (wr_gen(wc.wr_id) == c.generation) [[likely]]
      return false;
    ++cnt_.stale_completions;
    return true;
  }

  void completion_error_st(CoreConn& c, const Completion& wc) noexcept {
    note_completion_error_st(c, wc);
    maybe_closed_st(c);
  }

  // The class of an error completion the peer caused, or kPeerFaultCount for a local one. device_status is an
  // ibv_wc_status on every backend (mlx5 maps its syndromes to them).
  static std::size_t peer_fault_of(const Completion& wc) noexcept {
    switch (wc.device_status) {
      case IBV_WC_REM_ACCESS_ERR:
        return static_cast<std::size_t>(PeerFault::kRemoteAccess);
      case IBV_WC_REM_INV_REQ_ERR:
        return static_cast<std::size_t>(PeerFault::kRemoteInvalidRequest);
      case IBV_WC_REM_OP_ERR:
        return static_cast<std::size_t>(PeerFault::kRemoteOperation);
      case IBV_WC_LOC_LEN_ERR:  // on a receive the sender's length; on our own send our bug
        return wr_kind(wc.wr_id) == WrKind::kRecv ? static_cast<std::size_t>(PeerFault::kRecvLength)
                                                  : kPeerFaultCount;
      case IBV_WC_RNR_RETRY_EXC_ERR:
        return static_cast<std::size_t>(PeerFault::kRnrRetryExceeded);
      case IBV_WC_RETRY_EXC_ERR:
        return static_cast<std::size_t>(PeerFault::kRetryExceeded);
      default:
        return kPeerFaultCount;
    }
  }

  // completion_error_st without the CLOSED check (the caller still uses the connection).
  void note_completion_error_st(CoreConn& c, const Completion& wc) noexcept {
    if (wc.status == CompletionStatus::kFlushed) {
      ++cnt_.completions_flushed;
    } else {
      ++cnt_.completions_error;
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kCompletion)];
      const std::size_t fault = peer_fault_of(wc);
      if (fault != kPeerFaultCount) ++cnt_.peer_faults[fault];
      if (c.state == CoreConnState::kOwned || c.state == CoreConnState::kPosted) {
        report_failed_st(c, fault != kPeerFaultCount ? FailureKind::kPeerFault : FailureKind::kCompletion,
                         wc.device_status);
      }
    }
    if (c.state == CoreConnState::kOwned) {
      // A flush on an owned connection: control moved the QP to ERR and its CLOSE is on the way.
      c.state = CoreConnState::kFailed;
      remove_owned_st(c);
    }
  }

  // Every received message of an owned connection (and each replayed early one) enters here.
  void receive_st(CoreConn& c, RxDesc& rx) noexcept {
    if (res_.faults.armed()) [[unlikely]] {  // the one branch fault injection costs (docs/faults.md)
      faulted_receive_st(c, rx);
      return;
    }
    if constexpr (SharedReceiveBackend<Backend>) {
      handle_pooled_st(c, rx);
    } else {
      handle_message_st(c, rx);
    }
  }

  void handle_message_st(CoreConn& c, RxDesc& rx) noexcept {
    protocol::Message m;
    if (accept_st(c, rx, m)) dispatch_st(c, m);
  }

  // Decode and validate, credits, re-post (staged). False: the message failed the connection.
  bool accept_st(CoreConn& c, RxDesc& rx, protocol::Message& m) noexcept {
    const protocol::WireError we =
        protocol::decode_message(std::span<const std::uint8_t>(rx.buf, rx.byte_len), c.session, m);
    if (we != protocol::WireError::kOk) [[unlikely]] {
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kWire)];
      ++cnt_.wire_errors[static_cast<std::size_t>(we)];
      fail_st(c, FailureKind::kProtocol, static_cast<std::uint32_t>(we));
      return false;
    }
    const protocol::CreditClass cls = protocol::credit_class(m.type);
    const protocol::CreditError ce = c.credits->on_receive(cls, m.credits, now_);
    if (ce != protocol::CreditError::kOk) [[unlikely]] {
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kCredit)];
      ++cnt_.credit_errors[static_cast<std::size_t>(ce)];
      fail_st(c, FailureKind::kProtocol, kCreditStatusBase + static_cast<std::uint32_t>(ce));
      return false;
    }
    const auto t = static_cast<std::size_t>(m.type);
    ++cnt_.msgs_rx[t];
    cnt_.bytes_rx[t] += rx.byte_len;
    // Re-post first (staged: the buffer reaches the device only at flush, after the service has used the
    // payload), so an answer queued now carries this credit instead of a NOOP.
    stage_recv_st(c, rx);
    c.credits->on_reposted(cls);
    return true;
  }

  void dispatch_st(CoreConn& c, const protocol::Message& m) noexcept {
    // The one branch authentication costs a connection that is open (auth off, or authenticated).
    if (c.auth != AuthState::kOpen) [[unlikely]] {
      auth_gate_st(c, m);
      mark_dirty_st(c);  // its buffer's re-post, and an answer
      return;
    }
    if (quiescing_ && is_request(m.type)) [[unlikely]] {
      // A request that arrives now is not started; the requester gets a clear answer.
      ++cnt_.quiesce_refused;
      last_refusal_ = now_;
      res_.quiesced.store(false, std::memory_order_relaxed);
      refuse_st(c, m, Refusal::kQuiescing);
      mark_dirty_st(c);
      return;
    }
    switch (m.type) {
      case protocol::MessageType::kNoop:
        notify_writable_st(c);  // it returned credits
        break;
      case protocol::MessageType::kInlineRequest:
        svc_.on_request_st(*this, c, m);
        break;
      case protocol::MessageType::kInlineResponse:
      case protocol::MessageType::kCompletion:
        svc_.on_response_st(*this, c, m);
        break;
      case protocol::MessageType::kReadChunkRequest:
      case protocol::MessageType::kWriteChunkRequest:
        queue_chunk_st(c, m);
        break;
      case protocol::MessageType::kAuthAnswer:
        // The initiator's service authenticates (it sent the AUTH); any other service never asked.
        if constexpr (requires(Service& s) { s.on_auth_answer_st(*this, c, m); }) {
          svc_.on_auth_answer_st(*this, c, m);
        } else {
          unexpected_st(c, m);
        }
        break;
      case protocol::MessageType::kAuth:
        // An open connection takes none: authentication is off, or this is a second AUTH.
        if (c.principal != nullptr) ++cnt_.auth_unauthenticated;
        unexpected_st(c, m);
        break;
    }
    mark_dirty_st(c);
  }

  // A message type this connection does not take now: a protocol violation.
  void unexpected_st(CoreConn& c, const protocol::Message& m) noexcept {
    ++cnt_.errors[static_cast<std::size_t>(CoreError::kUnexpected)];
    fail_st(c, FailureKind::kProtocol, kUnexpectedStatusBase + static_cast<std::uint32_t>(m.type));
  }

  // receive_st with fault rules installed: a delayed message is held (its buffer, and so the peer's credit,
  // with it) and comes back through release_held_st; a dropped one is lost after its credits were taken and
  // its buffer re-posted (the transport stays consistent, the service never sees it); a duplicate reaches the
  // service twice. A corrupted one was changed in place by on_receive_st and is decoded as it now is.
  void faulted_receive_st(CoreConn& c, RxDesc& rx) noexcept {
    const FaultVerdict v = res_.faults.on_receive_st(c.peer_ip, rx.buf, rx.byte_len, now_);
    if (v.action == FaultAction::kDelay && res_.faults.hold_st(FaultHeld{&c, &rx, 0, v.due})) return;
    deliver_st(c, rx, v.action);
  }

  void deliver_st(CoreConn& c, RxDesc& rx, FaultAction a) noexcept {
    const std::uint64_t reposts = res_.srq_reposts;
    protocol::Message m;
    if (accept_st(c, rx, m)) {
      mark_dirty_st(c);  // a dropped message's buffer is re-posted (staged) all the same
      if (a != FaultAction::kDrop) dispatch_st(c, m);
      if (a == FaultAction::kDuplicate && c.state == CoreConnState::kOwned) dispatch_st(c, m);
    }
    if constexpr (SharedReceiveBackend<Backend>) {
      if (res_.srq_reposts == reposts) repost_pool_st(rx);  // refused: no credit stands for it
    }
  }

  // A held message's time came (deliver), or its connection closes (give back only).
  void release_held_st(const FaultHeld& h, bool deliver) noexcept {
    CoreConn& c = *h.conn;
    const bool owned = deliver && c.state == CoreConnState::kOwned;
    if (h.rx != nullptr) {
      if (owned) {
        deliver_st(c, *h.rx, FaultAction::kNone);
      } else if constexpr (SharedReceiveBackend<Backend>) {
        repost_pool_st(*h.rx);  // a connection's own buffer is consumed, as every receive of a closing one
      }
    } else if (owned) {
      launch_written_st(c, h.tx);
    } else {
      free_tx_st(c, h.tx);
    }
  }

  void refuse_st(CoreConn& c, const protocol::Message& m, Refusal why) noexcept {
    if constexpr (requires(Service& s) { s.on_refused_st(*this, c, m, why); }) {
      svc_.on_refused_st(*this, c, m, why);
    } else {
      refuse_request_st(*this, c, m, why);
    }
  }

  // Optional service hook: descriptors or credits came back.
  void notify_writable_st(CoreConn& c) noexcept {
    if constexpr (requires(Service& s) { s.on_writable_st(*this, c); }) svc_.on_writable_st(*this, c);
  }

  static constexpr bool is_request(protocol::MessageType t) noexcept {
    return t == protocol::MessageType::kInlineRequest || t == protocol::MessageType::kReadChunkRequest ||
           t == protocol::MessageType::kWriteChunkRequest;
  }

  void fail_st(CoreConn& c, FailureKind kind, std::uint32_t status) noexcept {
    if (c.state != CoreConnState::kOwned) return;
    c.state = CoreConnState::kFailed;
    remove_owned_st(c);
    report_failed_st(c, kind, status);
  }

  void report_failed_st(CoreConn& c, FailureKind kind, std::uint32_t status) noexcept {
    if (!mailbox_.failed_st(c.handle, kind, status)) {
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kUnexpected)];
    }
  }

  void remove_owned_st(CoreConn& c) noexcept {
    const std::uint32_t i = c.owned_index;
    if (i < owned_.size() && owned_[i] == &c) {
      owned_[i] = owned_.back();
      owned_[i]->owned_index = i;
      owned_.pop_back();
    }
    c.owned_index = UINT32_MAX;
    // A table swap re-resolves owned connections only: a principal here could outlive its table. The
    // connection no longer counts against its principal's limit either.
    c.principal = nullptr;
    if (c.auth_usage != nullptr) {
      c.auth_usage->connections.fetch_sub(1, std::memory_order_acq_rel);
      c.auth_usage = nullptr;
    }
  }

  // ---- receive path (core_send.hpp): a receive queue per connection, or the core's shared one ----
  void receive_completed_st(const Completion& wc) noexcept;
  void handle_pooled_st(CoreConn& c, RxDesc& rx) noexcept;
  RxDesc& parked_rx_st(CoreConn& c, std::uint32_t i) noexcept;
  void drop_parked_st(CoreConn& c, std::uint32_t from) noexcept;
  void repost_pool_st(RxDesc& rx) noexcept;
  void flush_pool_st() noexcept;

  // ---- send path (core_send.hpp) ---------------------------------------------------------------------
  bool send_message_st(CoreConn& c, protocol::Message& m) noexcept;
  bool faulted_send_st(CoreConn& c, protocol::Message& m) noexcept;
  void launch_written_st(CoreConn& c, std::uint16_t idx) noexcept;
  std::uint16_t take_tx_st(CoreConn& c) noexcept;
  void write_st(CoreConn& c, std::uint16_t idx, const protocol::Message& m) noexcept;
  void stage_recv_st(CoreConn& c, RxDesc& rx) noexcept;
  void stage_queued_st(CoreConn& c, const protocol::SendStep& step) noexcept;
  void stage_tx_st(CoreConn& c, std::uint16_t tx) noexcept;
  void push_sq_st(CoreConn& c, std::uint16_t fifo_entry) noexcept;
  void mark_dirty_st(CoreConn& c) noexcept;
  void flush_st() noexcept;
  void pump_sends_st(CoreConn& c) noexcept;
  void post_staged_st(CoreConn& c) noexcept;
  void free_tx_st(CoreConn& c, std::uint16_t idx) noexcept;
  void reclaim_sq_st(CoreConn& c, std::uint16_t idx) noexcept;
  static constexpr std::uint32_t kSqAll = 0x10000;  // no FIFO entry: pop_sq_st takes every one
  void pop_sq_st(CoreConn& c, std::uint32_t idx) noexcept;

  // ---- bulk transfers (core_bulk.hpp) ----------------------------------------------------------------
  void queue_chunk_st(CoreConn& c, const protocol::Message& m) noexcept;
  void run_chunks_st(CoreConn& c) noexcept;
  void post_reads_st(CoreConn& c) noexcept;
  void stage_rdma_st(CoreConn& c, RdmaOp op, WrKind kind, const protocol::Fragment& f, std::uint32_t local_off,
                     std::uint32_t len, unsigned flags, std::uint16_t fifo_entry) noexcept;
  void rdma_completed_st(const Completion& wc) noexcept;
  void maybe_end_bulk_st(CoreConn& c) noexcept;
  void end_bulk_st(CoreConn& c) noexcept;
  void unposted_rdma_st(CoreConn& c, std::uint16_t fifo_entry) noexcept;

  // ---- memory windows (core_windows.hpp) -------------------------------------------------------------
  void window_completed_st(const Completion& wc) noexcept;

  // ---- authentication (core_auth.hpp) ----------------------------------------------------------------
  void auth_gate_st(CoreConn& c, const protocol::Message& m) noexcept;
  void authenticate_st(CoreConn& c, const protocol::Message& m) noexcept;
  bool auth_expired_st(CoreConn& c) noexcept;
  void apply_auth_table_st(const AuthTable* t) noexcept;
  std::uint32_t still_allowed_st(CoreConn& c, const AuthTable* t) noexcept;

  // ---- commands, quiesce, timers (core_commands.hpp) -------------------------------------------------
  void drain_completed_st(CoreConn& c, const Completion& wc) noexcept;
  bool post_drain_st(CoreConn& c) noexcept;
  void maybe_closed_st(CoreConn& c) noexcept;
  void timers_st() noexcept;
  bool quiesce_idle_st() noexcept;
  void lost_turn_st() noexcept;
  void close_lost_st(CoreConn& c) noexcept;

  CoreResources& res_;
  Service& svc_;
  CoreCounters& cnt_;
  EngineCoreMailbox& mailbox_;
  Cq& cq_;
  std::vector<CoreConn*> owned_;
  std::vector<CoreConn*> dirty_;
  std::vector<CoreConn*> drain_retry_;  // draining connections whose drain marker is still to be posted
  std::uint32_t burst_ = 32;
  std::uint64_t check_mask_ = 0;
  std::uint64_t timer_mask_ = 0;
  std::uint64_t now_ = 0;
  std::uint64_t tsc_hz_ = 0;
  std::uint64_t publish_every_ = 0;  // TSC cycles between copies of the counters into res.stats (~1 ms)
  std::uint64_t start_tsc_ = 0;      // run_st's start, less the running time of earlier runs
  std::uint64_t ran_tsc_ = 0;        // running time of the runs that ended
  std::uint64_t busy_tsc_ = 0;       // TSC cycles of iterations that found work
  IdleStats idle_{};
  static constexpr std::uint64_t kQuietMs = 50;
  bool quiescing_ = false;
  std::uint64_t last_refusal_ = 0;
  std::uint64_t bulk_timeout_tsc_ = 0;  // CoreConfig::bulk_timeout_us (CONFIG kBulkTimeoutUs), in TSC ticks
  std::uint64_t auth_timeout_tsc_ = 0;  // CoreConfig::auth_timeout_us (CONFIG kAuthTimeoutUs), in TSC ticks
  bool cq_lost_ = false;                // ToCore kCqLost seen
  bool cq_lost_answered_ = false;       // and answered (kCqLost), once the loop stopped polling
  // Caller-driven progress only.
  unsigned last_polled_ = 0;  // completions of the last poll_once_st that found some
  std::uint64_t next_timers_ = 0;
  unsigned stashed_ = 0;      // completions idle_for_sleep_st took off the CQ, first in the next progress_st
  std::array<Completion, kMaxBurst> stash_{};
};

}  // namespace rdmagate::dataplane

#include "dataplane/core_auth.hpp"      // IWYU pragma: export
#include "dataplane/core_bulk.hpp"      // IWYU pragma: export
#include "dataplane/core_commands.hpp"  // IWYU pragma: export
#include "dataplane/core_send.hpp"      // IWYU pragma: export
#include "dataplane/core_windows.hpp"   // IWYU pragma: export

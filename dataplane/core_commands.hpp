#pragma once
// The core loop's side of control's commands (included by core_loop.hpp): ADOPT, CLOSE and CONFIG from the
// handoff ring, the drain that ends a closing connection, quiesce, and the keepalive / dead-peer timers.

#include "dataplane/core_loop.hpp"

namespace rdmagate::dataplane {

template <typename B, typename S>
void CoreLoop<B, S>::on_adopt_st(ConnHandle h) noexcept {
  CoreConn& c = *h.as_ptr<CoreConn>();
  if (c.state != CoreConnState::kPosted) return;  // a CLOSE overtook it? (cannot: rings are FIFO)
  if (cq_lost_) [[unlikely]] {  // its messages would never be seen, nor its answers' completions
    c.state = CoreConnState::kFailed;
    report_failed_st(c, FailureKind::kCqError, 0);
    return;
  }
  if (protocol::CreditMachine::validate(c.credit_cfg, c.links.size()) != protocol::CreditError::kOk) {
    c.state = CoreConnState::kFailed;
    report_failed_st(c, FailureKind::kProtocol,
                     kCreditStatusBase + static_cast<std::uint32_t>(protocol::CreditError::kBadConfig));
    return;
  }
  c.credits.emplace(c.credit_cfg, std::span<std::uint16_t>(c.links), now_);
  c.state = CoreConnState::kOwned;
  if (c.auth == AuthState::kAwaiting) c.auth_deadline_tsc = now_ + auth_timeout_tsc_;
  c.owned_index = static_cast<std::uint32_t>(owned_.size());
  owned_.push_back(&c);
  ++cnt_.adopted;
  svc_.on_adopt_st(*this, c);
  // Messages that arrived between accept and ADOPT, in arrival order (those behind a failure are dropped).
  std::uint32_t i = 0;
  for (; i < c.early_count && c.state == CoreConnState::kOwned; ++i) {
    RxDesc& rx = parked_rx_st(c, i);
    receive_st(c, rx);
  }
  drop_parked_st(c, i);
  mark_dirty_st(c);
}

template <typename B, typename S>
void CoreLoop<B, S>::on_close_st(ConnHandle h, CloseReason) noexcept {
  CoreConn& c = *h.as_ptr<CoreConn>();
  if (cq_lost_) [[unlikely]] {
    close_lost_st(c);
    return;
  }
  if (c.state == CoreConnState::kDraining || c.state == CoreConnState::kClosed) return;
  if (c.state == CoreConnState::kOwned || (c.state == CoreConnState::kFailed && c.credits)) {
    svc_.on_close_st(*this, c);
  }
  // Post whatever is staged (on a QP in ERR it flushes), so every descriptor is accounted by the CQ, and so
  // the dirty list never names a connection control may free after CLOSED.
  if (c.dirty) flush_st();
  remove_owned_st(c);
  c.state = CoreConnState::kDraining;
  // Queued descriptors never reach the device.
  if (c.credits) {
    for (std::uint16_t tx = c.credits->cancel_next(); tx != protocol::TxQueues::kEnd; tx = c.credits->cancel_next()) {
      free_tx_st(c, tx);
    }
  }
  drop_parked_st(c, 0);  // parked receives already completed: drop them
  // Messages a delay rule holds give their buffers back.
  if (res_.faults.armed()) {
    res_.faults.forget_st(&c, [this](const FaultHeld& held) { release_held_st(held, false); });
  }
  c.chunk_count = 0;  // waiting chunk requests are dropped with the connection
  // Unsignaled sends that completed leave no CQE: a signaled marker behind them proves the SQ empty. If it
  // cannot be posted now, the FIFO stays as it is (what is on the device still flushes into it) and the
  // timers try again; CLOSED waits either way.
  if (c.sq_inflight() != 0 && !post_drain_st(c)) {
    c.drain_retry = true;
    drain_retry_.push_back(&c);
  }
  maybe_closed_st(c);
}

template <typename B, typename S>
bool CoreLoop<B, S>::post_drain_st(CoreConn& c) noexcept {
  B::stage_send_st(qp_of(c), make_wr_id(&c.drain, WrKind::kDrain, c.generation), Segment{}, kSendSignaled);
  if (B::flush_st(qp_of(c)).send_unposted != 0) {
    ++cnt_.errors[static_cast<std::size_t>(CoreError::kPostSend)];
    return false;
  }
  c.drain_posted = true;
  ++cnt_.send_wrs;
  return true;
}

// kQuiesce 1 (SIGTERM drain): requests that arrive from now on are refused (never reach the service; see
// Refusal::kQuiescing), services start no new request, and every send is signaled, so its completion proves
// the SQ empty up to it. Unsignaled sends posted before the quiesce and followed by no send since cannot be
// proven (a NOOP without a reason is dropped by the credit machine); they count as done once the quiet
// period has passed. When every connection is idle (quiesce_idle_st) the core sets res.quiesced.
// kQuiesce 0 resumes.
//
// kAuthTimeoutUs applies to connections adopted from then on (one awaiting AUTH keeps its deadline).
//
// kKeepaliveIntervalUs / kPeerDeadTimeoutUs (SIGHUP reload): every owned connection takes the new time at
// once. A connection control sets up later carries it in its credit config; one already on its way (its
// ADOPT ahead of this CONFIG in the ring) is owned by the time this runs, so none keeps the old time.
template <typename B, typename S>
void CoreLoop<B, S>::on_config_st(ConfigKey k, std::uint64_t v) noexcept {
  switch (k) {
    case ConfigKey::kQuiesce:
      quiescing_ = v != 0;
      res_.quiesced.store(false, std::memory_order_release);
      last_refusal_ = now_;
      for (CoreConn* c : owned_) c->quiesce_sq_mark = c->sq_tail;
      return;
    case ConfigKey::kKeepaliveIntervalUs:
    case ConfigKey::kPeerDeadTimeoutUs: {
      const std::uint64_t ticks = us_to_tsc(v, tsc_hz_);
      for (CoreConn* c : owned_) {
        protocol::CreditMachine& cm = *c->credits;
        if (k == ConfigKey::kKeepaliveIntervalUs) {
          cm.set_timers(ticks, cm.dead_peer_timeout());
        } else {
          cm.set_timers(cm.keepalive_interval(), ticks);
        }
      }
      return;
    }
    case ConfigKey::kFaultTable:  // a new rule table; a stall rule for this core spins in apply_st
      res_.faults.apply_st(reinterpret_cast<const FaultTable*>(static_cast<std::uintptr_t>(v)), res_.index(),
                           tsc_hz_);
      return;
    case ConfigKey::kBulkTimeoutUs:
      if (v == 0) break;  // every transfer keeps a deadline
      bulk_timeout_tsc_ = us_to_tsc(v, tsc_hz_);
      return;
    case ConfigKey::kAuthTable:  // core_auth.hpp: re-resolves (or revokes) every authenticated connection
      apply_auth_table_st(reinterpret_cast<const AuthTable*>(static_cast<std::uintptr_t>(v)));
      return;
    case ConfigKey::kAuthTimeoutUs:
      if (v == 0) break;  // every connection that must authenticate keeps a deadline
      auth_timeout_tsc_ = us_to_tsc(v, tsc_hz_);
      return;
    default:
      break;
  }
  ++cnt_.errors[static_cast<std::size_t>(CoreError::kUnexpected)];  // a key or value this core does not take
}

// ToCore kCqLost: the CQ is in error and reports nothing more, flushes included, so no drain can end and no
// bulk op's work requests can be proven done by completions. What is staged goes out while control still
// lets the core touch its QPs; every owned connection fails (kCqError); the loop stops polling (run_with_st,
// progress_st) and answers kCqLost once it has, after which it posts nothing to any QP. A CLOSE then means
// the QP is destroyed (close_lost_st).
template <typename B, typename S>
void CoreLoop<B, S>::on_cq_lost_st() noexcept {
  if (cq_lost_) return;
  flush_st();
  cq_lost_ = true;
  while (!owned_.empty()) fail_st(*owned_.back(), FailureKind::kCqError, 0);
}

// One turn of a core whose CQ is lost: control's commands only, and the kCqLost answer once.
template <typename B, typename S>
void CoreLoop<B, S>::lost_turn_st() noexcept {
  now_ = rte_rdtsc();
  if (!cq_lost_answered_) {
    cq_lost_answered_ = mailbox_.cq_lost_st(res_.index());
    if (!cq_lost_answered_) ++cnt_.errors[static_cast<std::size_t>(CoreError::kUnexpected)];
  }
  mailbox_.check_st(*this);
}

// CLOSE on a core whose CQ is lost: control destroyed the connection's QP first, so nothing posted can run or
// touch memory any more, though no completion will ever say so. Everything the connection holds is released
// now (the service's close, then its bulk op ends as failed: its reservation or pin goes) and CLOSED answers.
// Also for a connection already draining when the CQ was lost (control sends CLOSE again).
template <typename B, typename S>
void CoreLoop<B, S>::close_lost_st(CoreConn& c) noexcept {
  if (c.state == CoreConnState::kClosed) return;
  if (c.state == CoreConnState::kOwned || (c.state == CoreConnState::kFailed && c.credits)) {
    svc_.on_close_st(*this, c);
  }
  remove_owned_st(c);
  c.state = CoreConnState::kDraining;
  if (c.credits) {
    for (std::uint16_t tx = c.credits->cancel_next(); tx != protocol::TxQueues::kEnd;
         tx = c.credits->cancel_next()) {
      free_tx_st(c, tx);
    }
  }
  c.early_count = 0;  // a shared pool's parked buffers stay out of it: the pool is lost with the CQ
  c.chunk_count = 0;
  if (c.drain_retry) {
    c.drain_retry = false;
    std::erase(drain_retry_, &c);
  }
  if (c.dirty) {
    c.dirty = false;
    std::erase(dirty_, &c);
  }
  c.staged_recvs = c.staged_sends = 0;
  // Messages a delay rule holds go with the lost CQ: nothing is posted any more, and the queue must not name
  // a connection control may free after CLOSED.
  if (res_.faults.armed()) res_.faults.forget_st(&c, [](const FaultHeld&) {});
  pop_sq_st(c, kSqAll);
  c.rx_posted = 0;
  c.drain_posted = false;
  c.bulk_op.failed = true;
  maybe_end_bulk_st(c);
  maybe_closed_st(c);
}

// The drain marker completed (flushed, normally: the QP is in ERR): everything posted before it has too.
template <typename B, typename S>
void CoreLoop<B, S>::drain_completed_st(CoreConn& c, const Completion& wc) noexcept {
  ++cnt_.completions_drain;
  if (wc.status == CompletionStatus::kFlushed) {
    ++cnt_.completions_flushed;
  } else if (wc.status != CompletionStatus::kOk) {
    ++cnt_.completions_error;
  }
  pop_sq_st(c, kSqAll);
  c.drain_posted = false;
  maybe_end_bulk_st(c);
  maybe_closed_st(c);
}

// Draining and nothing left on the device: answer CLOSED and forget the connection.
template <typename B, typename S>
void CoreLoop<B, S>::maybe_closed_st(CoreConn& c) noexcept {
  if (c.state != CoreConnState::kDraining) return;
  if (c.rx_posted != 0 || c.sq_inflight() != 0 || c.drain_posted) return;
  if (c.drain_retry) {  // the FIFO emptied by itself: no marker needed, and the retry list must not name c
    c.drain_retry = false;
    std::erase(drain_retry_, &c);
  }
  c.state = CoreConnState::kClosed;
  // A receive of its QP that still completes (it ran as the QP went to ERR) is a stray from now on: control
  // may free the connection once it reads CLOSED.
  if constexpr (SharedReceiveBackend<B>) res_.conn_table().erase(&c);
  ++cnt_.closed;
  if (!mailbox_.closed_st(c.handle)) ++cnt_.errors[static_cast<std::size_t>(CoreError::kUnexpected)];
}

// Keepalive NOOPs and dead peers, on TSC deadlines (every kTimerEvery iterations).
template <typename B, typename S>
void CoreLoop<B, S>::timers_st() noexcept {
  if (res_.faults.armed()) {
    res_.faults.release_due_st(now_, [this](const FaultHeld& held) { release_held_st(held, true); });
  }
  for (std::size_t i = 0; i < owned_.size();) {
    CoreConn& c = *owned_[i];
    if (c.credits->peer_dead(now_)) {
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kDeadPeer)];
      fail_st(c, FailureKind::kKeepalive, 0);  // removes owned_[i]
      continue;
    }
    // The bulk deadline: a READ/WRITE chain still on the device (a peer that stalls the send queue by posting
    // no receives, or never lets a READ finish) fails the connection; control's CLOSE moves the QP to ERR,
    // every work request of the op flushes, and only then does the op end and its memory go back.
    if (c.bulk_op.state != BulkState::kIdle && now_ - c.bulk_op.start_tsc >= bulk_timeout_tsc_) [[unlikely]] {
      ++cnt_.bulk_timeouts;
      const std::uint64_t ms = (now_ - c.bulk_op.start_tsc) / std::max<std::uint64_t>(tsc_hz_ / 1000, 1);
      fail_st(c, FailureKind::kBulkTimeout,
              static_cast<std::uint32_t>(std::min<std::uint64_t>(ms, UINT32_MAX)));
      continue;
    }
    if (c.auth != AuthState::kOpen && auth_expired_st(c)) [[unlikely]]
      continue;  // failed: removed owned_[i]
    if (c.credits->wants_noop(now_)) mark_dirty_st(c);
    ++i;
  }
  if (!dirty_.empty()) flush_st();
  // A lost CQ: no QP is touched any more (control destroys them; close_lost_st ends the connections).
  for (std::size_t i = 0; i < drain_retry_.size() && !cq_lost_;) {
    CoreConn& c = *drain_retry_[i];
    if (c.sq_inflight() != 0 && !post_drain_st(c)) {
      ++i;
      continue;
    }
    c.drain_retry = false;
    drain_retry_[i] = drain_retry_.back();
    drain_retry_.pop_back();
    maybe_closed_st(c);
  }
  if (quiescing_ && !res_.quiesced.load(std::memory_order_relaxed) && quiesce_idle_st()) {
    ++cnt_.quiesce_reached;
    res_.quiesced.store(true, std::memory_order_release);
  }
}

// Every owned connection idle, and no request refused for kQuietMs (requests the peer sent before it saw our
// first refusal are still arriving until then).
template <typename B, typename S>
bool CoreLoop<B, S>::quiesce_idle_st() noexcept {
  if (now_ - last_refusal_ < tsc_hz_ / 1000 * kQuietMs) return false;
  for (CoreConn* c : owned_) {
    const bool sq_done = c->sq_inflight() == 0 || (c->sq_tail == c->quiesce_sq_mark && c->staged_sends == 0);
    if (!sq_done || c->credits->queued_total() != 0 || c->chunk_count != 0 || c->bulk_op.state != BulkState::kIdle) {
      return false;
    }
    if constexpr (requires(S& s) { s.pending_st(*c); }) {
      if (svc_.pending_st(*c) != 0) return false;
    }
  }
  return true;
}

}  // namespace rdmagate::dataplane

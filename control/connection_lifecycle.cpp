#include "control/connection_lifecycle.hpp"

#include <algorithm>
#include <cassert>

namespace rdmagate::control {
namespace {

constexpr bool is_handshake(State s) {
  return s == State::kAddrResolving || s == State::kRouteResolving || s == State::kConnecting ||
         s == State::kReqReceived || s == State::kAccepting;
}
constexpr bool is_established(State s) {
  return s == State::kEstablishedPendingAdopt || s == State::kOwnedByCore;
}
// States in which the connection is being built or is up: the ones a teardown can start from.
constexpr bool is_live(State s) {
  return is_handshake(s) || is_established(s);
}
// Teardown under way: late events from rdma_cm, the device or the core are expected and harmless here.
constexpr bool is_closing(State s) {
  return s == State::kClosing || s == State::kDrained;
}

Plan make(Verdict v, State next) {
  Plan p;
  p.verdict = v;
  p.next = next;
  return p;
}
Plan illegal(const Snapshot& s) {
  return make(Verdict::kIllegal, s.state);
}
Plan ignored(const Snapshot& s) {
  return make(Verdict::kIgnored, s.state);
}

// A cm event that does not fit the state: expected noise while closing (the cm_id is still alive until the
// release ladder), impossible anywhere else.
Plan cm_event_out_of_place(const Snapshot& s) {
  return is_closing(s.state) ? ignored(s) : illegal(s);
}

void add(Plan& p, ActionKind k, std::uint8_t code = 0, Duration delay = Duration::zero()) {
  [[maybe_unused]] const bool fits = p.actions.push(Action{k, code, delay});
  assert(fits && "ActionList::kCapacity too small for a plan");
}

// The peer or the device is already gone: a reject would go nowhere.
constexpr bool peer_gone(CloseReason r) {
  return r == CloseReason::kPeerDisconnected || r == CloseReason::kRejectedByPeer ||
         r == CloseReason::kUnreachable || r == CloseReason::kConnectError ||
         r == CloseReason::kDeviceRemoval || r == CloseReason::kDeviceFatal;
}

bool should_reconnect(const LifecycleConfig& cfg, const Snapshot& s, RetryHint retry, bool shutdown) {
  return s.role == Role::kActive && cfg.reconnect && s.started && !shutdown && retry != RetryHint::kNever;
}

// The second half of teardown. Only called when no core reference is held, so nothing here can race a core.
// Reverse order of acquisition: rx buffers, QP, core slot, cm_id. (Timers and the CM connection were released
// by the first half.)
void add_release_ladder(Plan& p, ResourceSet held, bool reconnect) {
  assert(!held.has(Resource::kCoreRef));
  if (held.has(Resource::kRxPosted)) add(p, ActionKind::kFreeRx);
  if (held.has(Resource::kQp)) add(p, ActionKind::kDestroyQp);
  if (held.has(Resource::kCoreSlot)) add(p, ActionKind::kReleaseCoreSlot);
  if (held.has(Resource::kCmId)) add(p, ActionKind::kDestroyCmId);
  if (reconnect) add(p, ActionKind::kScheduleReconnect);
}

// Teardown from any state, driven only by what is held (RDS iw_cm: undo exactly what was built).
//  1. stop event sources that would call back into us (timers);
//  2. quiesce: reject a request we never accepted, disconnect a CM connection, move the QP to ERR;
//  3. if a core can see this connection's completions (rx posted) or holds it (ADOPT sent), send CLOSE and
//     stop there: the release ladder waits for CLOSED. Otherwise run the ladder now.
Plan begin_teardown(const LifecycleConfig& cfg, const Snapshot& s, CloseReason why, const EventArgs& a,
                    ResourceSet consumed, RetryHint retry = RetryHint::kBackoff, bool shutdown = false) {
  Plan p = make(Verdict::kApplied, s.state);
  p.consume = consumed;
  p.teardown = why;
  p.retry = retry;
  p.sets_shutdown = shutdown;
  const ResourceSet held = s.held.without(consumed);

  if (held.has(Resource::kHandshakeTimer)) add(p, ActionKind::kCancelHandshakeTimer);
  if (held.has(Resource::kReconnectTimer)) add(p, ActionKind::kCancelReconnect);
  if (s.role == Role::kPassive && held.has(Resource::kCmId) && !held.has(Resource::kCmConnected) &&
      !peer_gone(why)) {
    const std::uint8_t code =
        why == CloseReason::kRejectedLocally ? a.reject_code : cfg.reject_code_unavailable;
    add(p, ActionKind::kReject, code);
  }
  if (held.has(Resource::kCmConnected)) add(p, ActionKind::kDisconnect);
  if (held.has(Resource::kQp)) add(p, ActionKind::kMoveQpToErr);

  if (held.has(Resource::kRxPosted) || held.has(Resource::kCoreRef)) {
    add(p, ActionKind::kSendClose, static_cast<std::uint8_t>(why));
    p.next = State::kClosing;
    return p;
  }
  add_release_ladder(p, held, should_reconnect(cfg, s, retry, s.shutdown || shutdown));
  p.next = State::kDrained;
  return p;
}

Plan start_connecting(const LifecycleConfig& cfg, const Snapshot& s, ResourceSet consumed) {
  Plan p = make(Verdict::kApplied, State::kAddrResolving);
  p.consume = consumed;
  if (s.held.without(consumed).has(Resource::kReconnectTimer)) add(p, ActionKind::kCancelReconnect);
  add(p, ActionKind::kCreateCmId);
  add(p, ActionKind::kArmHandshakeTimer, 0, cfg.handshake_timeout);
  add(p, ActionKind::kResolveAddr);
  return p;
}

// Route resolved (active) or request accepted (passive): place on a core, build the QP on its CQ, post every
// receive BEFORE connect/accept so the peer's first message never meets an empty receive queue.
Plan build_and_connect(State next, ActionKind final_step) {
  Plan p = make(Verdict::kApplied, next);
  add(p, ActionKind::kReserveCoreSlot);
  add(p, ActionKind::kCreateQp);
  add(p, ActionKind::kPostRx);
  add(p, final_step);
  return p;
}

CloseReason reason_for_cm_failure(Event ev) {
  switch (ev) {
    case Event::kConnectError:
      return CloseReason::kConnectError;
    case Event::kUnreachable:
      return CloseReason::kUnreachable;
    default:
      return CloseReason::kRejectedByPeer;
  }
}

CloseReason reason_for_device_event(Event ev) {
  switch (ev) {
    case Event::kDeviceRemoval:
      return CloseReason::kDeviceRemoval;
    case Event::kDeviceFatal:
      return CloseReason::kDeviceFatal;
    default:
      return CloseReason::kPortDown;
  }
}

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

ResourceSet acquired_by(ActionKind k) noexcept {
  switch (k) {
    case ActionKind::kCreateCmId:
      return Resource::kCmId;
    case ActionKind::kArmHandshakeTimer:
      return Resource::kHandshakeTimer;
    case ActionKind::kReserveCoreSlot:
      return Resource::kCoreSlot;
    case ActionKind::kCreateQp:
      return Resource::kQp;
    case ActionKind::kPostRx:
      return Resource::kRxPosted;
    case ActionKind::kConnect:
    case ActionKind::kAccept:
      return Resource::kCmConnected;
    case ActionKind::kSendAdopt:
    case ActionKind::kSendClose:
      return Resource::kCoreRef;
    case ActionKind::kScheduleReconnect:
      return Resource::kReconnectTimer;
    default:
      return ResourceSet{};
  }
}

ResourceSet released_by(ActionKind k) noexcept {
  switch (k) {
    case ActionKind::kCancelHandshakeTimer:
      return Resource::kHandshakeTimer;
    case ActionKind::kCancelReconnect:
      return Resource::kReconnectTimer;
    case ActionKind::kDisconnect:
      return Resource::kCmConnected;
    case ActionKind::kFreeRx:
      return Resource::kRxPosted;
    case ActionKind::kDestroyQp:
      return Resource::kQp;
    case ActionKind::kReleaseCoreSlot:
      return Resource::kCoreSlot;
    case ActionKind::kDestroyCmId:
      return Resource::kCmId;
    default:
      return ResourceSet{};
  }
}

Plan plan_transition(const LifecycleConfig& cfg, const Snapshot& s, Event ev, const EventArgs& a) noexcept {
  const bool active = s.role == Role::kActive;
  const State st = s.state;
  const bool live = is_live(st);
  const bool closing = is_closing(st);

  switch (ev) {
    case Event::kStart:
      if (!active) return illegal(s);
      if (st == State::kIdle || st == State::kBackoff) return start_connecting(cfg, s, ResourceSet{});
      if (live) return ignored(s);  // already connecting or connected
      return illegal(s);

    case Event::kLocalAccept:
      if (active || st != State::kReqReceived) return illegal(s);
      return build_and_connect(State::kAccepting, ActionKind::kAccept);

    case Event::kLocalReject:
      if (active || st != State::kReqReceived) return illegal(s);
      return begin_teardown(cfg, s, CloseReason::kRejectedLocally, a, ResourceSet{});

    case Event::kLocalClose:
      if (st == State::kIdle || live) {
        const CloseReason why = a.close_reason == CloseReason::kNone ? CloseReason::kLocal : a.close_reason;
        return begin_teardown(cfg, s, why, a, ResourceSet{});
      }
      return ignored(s);  // closing or closed already: a second close is a no-op

    case Event::kShutdown:
      if (st == State::kIdle || live || st == State::kBackoff) {
        return begin_teardown(cfg, s, CloseReason::kShutdown, a, ResourceSet{}, RetryHint::kNever, true);
      }
      if (st == State::kClosing && !s.shutdown) {
        // Already closing: only the reconnect decision at CLOSED changes.
        Plan p = make(Verdict::kApplied, State::kClosing);
        p.sets_shutdown = true;
        return p;
      }
      return ignored(s);

    case Event::kHandshakeTimeout:
      if (is_handshake(st) && s.held.has(Resource::kHandshakeTimer)) {
        return begin_teardown(cfg, s, CloseReason::kHandshakeTimeout, a, Resource::kHandshakeTimer);
      }
      return ignored(s);  // stale: the timer was cancelled after it had already fired

    case Event::kReconnectTimer:
      if (st == State::kBackoff && s.held.has(Resource::kReconnectTimer)) {
        return start_connecting(cfg, s, Resource::kReconnectTimer);
      }
      return ignored(s);  // stale

    case Event::kAdoptEnqueued:
      if (st == State::kEstablishedPendingAdopt) return make(Verdict::kApplied, State::kOwnedByCore);
      if (closing) return ignored(s);  // teardown began while the ADOPT still sat in control's backlog
      return illegal(s);

    case Event::kSetupFailed:
      if (live) return begin_teardown(cfg, s, CloseReason::kSetupFailed, a, ResourceSet{});
      if (closing) return ignored(s);
      return illegal(s);

    case Event::kAddrResolved:
      if (st == State::kAddrResolving) {
        Plan p = make(Verdict::kApplied, State::kRouteResolving);
        add(p, ActionKind::kResolveRoute);
        return p;
      }
      return cm_event_out_of_place(s);

    case Event::kAddrError:
      if (st == State::kAddrResolving)
        return begin_teardown(cfg, s, CloseReason::kAddrError, a, ResourceSet{});
      return cm_event_out_of_place(s);

    case Event::kRouteResolved:
      if (st == State::kRouteResolving) return build_and_connect(State::kConnecting, ActionKind::kConnect);
      return cm_event_out_of_place(s);

    case Event::kRouteError:
      if (st == State::kRouteResolving)
        return begin_teardown(cfg, s, CloseReason::kRouteError, a, ResourceSet{});
      return cm_event_out_of_place(s);

    case Event::kConnectRequest:
      // A request always comes with a new child cm_id, so it can only start a fresh passive lifecycle. If
      // this is illegal the child id was NOT taken over: the engine must reject and destroy it itself.
      if (!active && st == State::kIdle) {
        Plan p = make(Verdict::kApplied, State::kReqReceived);
        p.grant = Resource::kCmId;
        add(p, ActionKind::kArmHandshakeTimer, 0, cfg.handshake_timeout);
        return p;
      }
      return illegal(s);

    case Event::kConnectError:
    case Event::kUnreachable:
    case Event::kRejected:
      if (st == State::kConnecting || st == State::kAccepting) {
        // The CM exchange is over: no disconnect is owed for it.
        const RetryHint retry = ev == Event::kRejected ? a.retry : RetryHint::kBackoff;
        return begin_teardown(cfg, s, reason_for_cm_failure(ev), a, Resource::kCmConnected, retry);
      }
      return cm_event_out_of_place(s);

    case Event::kEstablished:
      if (st == State::kConnecting || st == State::kAccepting) {
        Plan p = make(Verdict::kApplied, State::kEstablishedPendingAdopt);
        if (s.held.has(Resource::kHandshakeTimer)) add(p, ActionKind::kCancelHandshakeTimer);
        add(p, ActionKind::kSendAdopt);
        return p;
      }
      return cm_event_out_of_place(s);

    case Event::kDisconnected:
      // Not consumed: rdma_disconnect in answer to the peer's DREQ is what sends the DREP.
      if (st == State::kConnecting || st == State::kAccepting || is_established(st)) {
        return begin_teardown(cfg, s, CloseReason::kPeerDisconnected, a, ResourceSet{});
      }
      return cm_event_out_of_place(s);

    case Event::kTimewaitExit:
      return ignored(s);  // informational: we never reuse a QP

    case Event::kDeviceRemoval:
      if (live) return begin_teardown(cfg, s, CloseReason::kDeviceRemoval, a, ResourceSet{});
      return cm_event_out_of_place(s);

    case Event::kQpFatal:
      if (live && s.held.has(Resource::kQp))
        return begin_teardown(cfg, s, CloseReason::kQpFatal, a, ResourceSet{});
      if (closing) return ignored(s);
      return illegal(s);

    case Event::kDeviceFatal:
    case Event::kPortDown:
      if (live) return begin_teardown(cfg, s, reason_for_device_event(ev), a, ResourceSet{});
      // Fanned out to every connection on the device: one holding nothing has nothing to do.
      if (closing || st == State::kIdle || st == State::kBackoff) return ignored(s);
      return illegal(s);

    case Event::kCoreClosed:
      if (st == State::kClosing) {
        Plan p = make(Verdict::kApplied, State::kDrained);
        p.consume = Resource::kCoreRef;
        add_release_ladder(p, s.held.without(Resource::kCoreRef),
                           should_reconnect(cfg, s, s.retry, s.shutdown));
        return p;
      }
      // Unsolicited or duplicate CLOSED: a core bug. Acting on it could free memory the core still uses.
      return illegal(s);

    case Event::kCoreFailed:
      // A core can report errors for a connection whose receives it can see, adopted or not (an early rx).
      if (live && (s.held.has(Resource::kRxPosted) || s.held.has(Resource::kCoreRef))) {
        return begin_teardown(cfg, s, dataplane::close_reason_for(a.failure), a, ResourceSet{});
      }
      if (closing) return ignored(s);
      return illegal(s);
  }
  return illegal(s);  // an out-of-range Event value
}

ReconnectBackoff::ReconnectBackoff(const BackoffPolicy& policy, std::uint64_t seed) noexcept
    : policy_(policy), current_(), rng_(seed) {
  policy_.min = std::max(policy_.min, Duration(1));
  policy_.max = std::max(policy_.max, policy_.min);
  policy_.jitter_permille = std::min<std::uint32_t>(policy_.jitter_permille, 1000);
  current_ = policy_.min;
}

std::uint64_t ReconnectBackoff::next_random() noexcept {
  return splitmix64(rng_);
}

Duration ReconnectBackoff::next_delay() noexcept {
  const Duration base = current_;
  ++attempts_;
  // Doubling written so it cannot overflow however large max is.
  current_ = current_ > policy_.max / 2 ? policy_.max : std::min(current_ * 2, policy_.max);
  if (policy_.jitter_permille == 0) return base;
  const auto b = static_cast<std::uint64_t>(base.count());
  const std::uint64_t j = policy_.jitter_permille;
  const std::uint64_t span = (b / 1000) * j + (b % 1000) * j / 1000;
  if (span == 0) return base;
  const std::uint64_t cut = next_random() % (span + 1);
  return Duration(static_cast<Duration::rep>(b - cut));
}

void ReconnectBackoff::reset() noexcept {
  current_ = policy_.min;
  attempts_ = 0;
}

ConnectionLifecycle::ConnectionLifecycle(const LifecycleConfig& cfg) noexcept
    : cfg_(cfg), backoff_(cfg.backoff, cfg.jitter_seed) {}

Snapshot ConnectionLifecycle::snapshot() const noexcept {
  Snapshot s;
  s.role = cfg_.role;
  s.state = state_;
  s.held = held_;
  s.started = started_;
  s.shutdown = shutdown_;
  s.retry = retry_;
  return s;
}

DispatchResult ConnectionLifecycle::dispatch(Event ev, const EventArgs& args, ConnectionOps& ops) noexcept {
  DispatchResult out;
  out.event = ev;
  out.from = state_;
  out.to = state_;
  if (in_dispatch_) {
    // An ops method reported an outcome synchronously. Running it now would interleave two plans.
    ++counters_.reentrant_dispatches;
    ++counters_.illegal;
    out.verdict = Verdict::kIllegal;
    return out;
  }
  in_dispatch_ = true;

  const Plan plan = plan_transition(cfg_, snapshot(), ev, args);
  out.verdict = plan.verdict;
  switch (plan.verdict) {
    case Verdict::kApplied:
      ++counters_.applied;
      break;
    case Verdict::kIgnored:
      ++counters_.ignored;
      break;
    case Verdict::kIllegal:
      ++counters_.illegal;
      break;
  }

  if (plan.verdict == Verdict::kApplied) {
    if (!run_plan(ev, plan, ops, out)) {
      ++counters_.setup_failures;
      EventArgs failure;
      failure.status = out.status;
      const Plan undo = plan_transition(cfg_, snapshot(), Event::kSetupFailed, failure);
      // A teardown holds no fallible step except kScheduleReconnect, which run_plan absorbs: it cannot fail.
      assert(undo.verdict == Verdict::kApplied);
      [[maybe_unused]] const bool undone = run_plan(Event::kSetupFailed, undo, ops, out);
      assert(undone);
    }
    // The two transient landings the pure planner cannot decide, because they depend on what the ops did.
    if (state_ == State::kDrained) {
      state_ = held_.has(Resource::kReconnectTimer) ? State::kBackoff : State::kDestroyed;
    }
    if (state_ == State::kEstablishedPendingAdopt && ev == Event::kEstablished && adopt_delivered_) {
      state_ = State::kOwnedByCore;
    }
  }
  out.to = state_;
  in_dispatch_ = false;
  return out;
}

bool ConnectionLifecycle::run_plan(Event ev, const Plan& plan, ConnectionOps& ops,
                                   DispatchResult& out) noexcept {
  held_ = held_.with(plan.grant).without(plan.consume);
  if (plan.teardown != CloseReason::kNone) {
    close_reason_ = plan.teardown;
    retry_ = plan.retry;
  }
  if (plan.sets_shutdown) shutdown_ = true;
  if (ev == Event::kStart) started_ = true;
  if (ev == Event::kEstablished) {
    established_since_retry_ = true;
    immediate_retry_used_ = false;
  }
  state_ = plan.next;

  for (Action a : plan.actions) {
    const ResourceSet acquires = acquired_by(a.kind);
    const ResourceSet releases = released_by(a.kind);
    // Structural guards behind the planner's own guarantees: release only what is held (exactly once), never
    // acquire twice (a leak), never release what a core can touch while it may hold the connection.
    const bool not_held = !releases.empty() && held_.without(releases) == held_;
    const bool double_acquire =
        !acquires.empty() && a.kind != ActionKind::kSendClose && held_.with(acquires) == held_;
    const bool core_touchable = a.kind == ActionKind::kFreeRx || a.kind == ActionKind::kDestroyQp ||
                                a.kind == ActionKind::kReleaseCoreSlot || a.kind == ActionKind::kDestroyCmId;
    if (not_held || double_acquire || (core_touchable && held_.has(Resource::kCoreRef))) {
      assert(false && "plan violates the resource discipline");
      continue;
    }

    const int rc = execute(a, ops);
    [[maybe_unused]] const bool fits = out.executed.push(a);
    assert(fits);
    if (rc == 0) {
      held_ = held_.with(acquires).without(releases);
      continue;
    }
    if (a.kind == ActionKind::kScheduleReconnect) {
      // Nothing to undo; the connection simply ends in kDestroyed instead of kBackoff.
      ++counters_.reconnect_arm_failures;
      continue;
    }
    out.setup_failed = true;
    out.failed_action = a.kind;
    out.status = rc;
    return false;
  }
  return true;
}

int ConnectionLifecycle::execute(Action& a, ConnectionOps& ops) noexcept {
  switch (a.kind) {
    case ActionKind::kCreateCmId:
      return ops.create_cm_id();
    case ActionKind::kArmHandshakeTimer:
      return ops.arm_handshake_timer(a.delay);
    case ActionKind::kResolveAddr:
      return ops.resolve_addr();
    case ActionKind::kResolveRoute:
      return ops.resolve_route();
    case ActionKind::kReserveCoreSlot:
      return ops.reserve_core_slot();
    case ActionKind::kCreateQp:
      return ops.create_qp();
    case ActionKind::kPostRx:
      return ops.post_rx();
    case ActionKind::kConnect:
      return ops.connect();
    case ActionKind::kAccept:
      return ops.accept();
    case ActionKind::kSendAdopt:
      adopt_delivered_ = ops.send_adopt();
      return 0;
    case ActionKind::kCancelHandshakeTimer:
      ops.cancel_handshake_timer();
      return 0;
    case ActionKind::kCancelReconnect:
      ops.cancel_reconnect();
      return 0;
    case ActionKind::kReject:
      ops.reject(a.code);
      return 0;
    case ActionKind::kDisconnect:
      ops.disconnect();
      return 0;
    case ActionKind::kMoveQpToErr:
      ops.move_qp_to_err();
      return 0;
    case ActionKind::kSendClose:
      ops.send_close(static_cast<CloseReason>(a.code));
      return 0;
    case ActionKind::kFreeRx:
      ops.free_rx();
      return 0;
    case ActionKind::kDestroyQp:
      ops.destroy_qp();
      return 0;
    case ActionKind::kReleaseCoreSlot:
      ops.release_core_slot();
      return 0;
    case ActionKind::kDestroyCmId:
      ops.destroy_cm_id();
      return 0;
    case ActionKind::kScheduleReconnect:
      // The delay is decided here, not in the pure planner, because it advances the backoff sequence.
      if (established_since_retry_) {
        established_since_retry_ = false;
        if (backoff_resets_after(close_reason_)) backoff_.reset();
      }
      if (retry_ == RetryHint::kImmediate && !immediate_retry_used_) {
        immediate_retry_used_ = true;
        a.delay = Duration::zero();
      } else {
        a.delay = backoff_.next_delay();
      }
      return ops.schedule_reconnect(a.delay);
  }
  return -22;  // EINVAL: an out-of-range ActionKind cannot come from plan_transition
}

bool backoff_resets_after(CloseReason why) noexcept {
  switch (why) {
    case CloseReason::kAuthDenied:
    case CloseReason::kProtocolError:
    case CloseReason::kQpFatal:
      return false;
    default:
      return true;
  }
}

std::string_view to_string(Role r) noexcept {
  switch (r) {
    case Role::kActive:
      return "active";
    case Role::kPassive:
      return "passive";
  }
  return "unknown";
}

std::string_view to_string(State s) noexcept {
  switch (s) {
    case State::kIdle:
      return "idle";
    case State::kAddrResolving:
      return "addr resolving";
    case State::kRouteResolving:
      return "route resolving";
    case State::kConnecting:
      return "connecting";
    case State::kReqReceived:
      return "request received";
    case State::kAccepting:
      return "accepting";
    case State::kEstablishedPendingAdopt:
      return "established, adopt pending";
    case State::kOwnedByCore:
      return "owned by core";
    case State::kClosing:
      return "closing";
    case State::kDrained:
      return "drained";
    case State::kBackoff:
      return "backoff";
    case State::kDestroyed:
      return "destroyed";
  }
  return "unknown";
}

std::string_view to_string(Event e) noexcept {
  switch (e) {
    case Event::kStart:
      return "start";
    case Event::kLocalAccept:
      return "local accept";
    case Event::kLocalReject:
      return "local reject";
    case Event::kLocalClose:
      return "local close";
    case Event::kShutdown:
      return "shutdown";
    case Event::kHandshakeTimeout:
      return "handshake timeout";
    case Event::kReconnectTimer:
      return "reconnect timer";
    case Event::kAdoptEnqueued:
      return "adopt enqueued";
    case Event::kSetupFailed:
      return "setup failed";
    case Event::kAddrResolved:
      return "addr resolved";
    case Event::kAddrError:
      return "addr error";
    case Event::kRouteResolved:
      return "route resolved";
    case Event::kRouteError:
      return "route error";
    case Event::kConnectRequest:
      return "connect request";
    case Event::kConnectError:
      return "connect error";
    case Event::kUnreachable:
      return "unreachable";
    case Event::kRejected:
      return "rejected";
    case Event::kEstablished:
      return "established";
    case Event::kDisconnected:
      return "disconnected";
    case Event::kTimewaitExit:
      return "timewait exit";
    case Event::kDeviceRemoval:
      return "device removal";
    case Event::kQpFatal:
      return "qp fatal";
    case Event::kDeviceFatal:
      return "device fatal";
    case Event::kPortDown:
      return "port down";
    case Event::kCoreClosed:
      return "core closed";
    case Event::kCoreFailed:
      return "core failed";
  }
  return "unknown";
}

std::string_view to_string(ActionKind a) noexcept {
  switch (a) {
    case ActionKind::kCreateCmId:
      return "create cm_id";
    case ActionKind::kArmHandshakeTimer:
      return "arm handshake timer";
    case ActionKind::kResolveAddr:
      return "resolve addr";
    case ActionKind::kResolveRoute:
      return "resolve route";
    case ActionKind::kReserveCoreSlot:
      return "reserve core slot";
    case ActionKind::kCreateQp:
      return "create qp";
    case ActionKind::kPostRx:
      return "post rx";
    case ActionKind::kConnect:
      return "connect";
    case ActionKind::kAccept:
      return "accept";
    case ActionKind::kSendAdopt:
      return "send adopt";
    case ActionKind::kCancelHandshakeTimer:
      return "cancel handshake timer";
    case ActionKind::kCancelReconnect:
      return "cancel reconnect";
    case ActionKind::kReject:
      return "reject";
    case ActionKind::kDisconnect:
      return "disconnect";
    case ActionKind::kMoveQpToErr:
      return "move qp to err";
    case ActionKind::kSendClose:
      return "send close";
    case ActionKind::kFreeRx:
      return "free rx";
    case ActionKind::kDestroyQp:
      return "destroy qp";
    case ActionKind::kReleaseCoreSlot:
      return "release core slot";
    case ActionKind::kDestroyCmId:
      return "destroy cm_id";
    case ActionKind::kScheduleReconnect:
      return "schedule reconnect";
  }
  return "unknown";
}

std::string_view to_string(Verdict v) noexcept {
  switch (v) {
    case Verdict::kApplied:
      return "applied";
    case Verdict::kIgnored:
      return "ignored";
    case Verdict::kIllegal:
      return "illegal";
  }
  return "unknown";
}

std::string_view to_string(Resource r) noexcept {
  switch (r) {
    case Resource::kCmId:
      return "cm_id";
    case Resource::kHandshakeTimer:
      return "handshake timer";
    case Resource::kCoreSlot:
      return "core slot";
    case Resource::kQp:
      return "qp";
    case Resource::kRxPosted:
      return "rx posted";
    case Resource::kCmConnected:
      return "cm connection";
    case Resource::kCoreRef:
      return "core reference";
    case Resource::kReconnectTimer:
      return "reconnect timer";
  }
  return "unknown";
}

}  // namespace rdmagate::control

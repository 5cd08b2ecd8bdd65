#pragma once
// Connection lifecycle and teardown state machine (control thread only); docs/engine-handoff.md has the
// diagram.
//
// Three layers, so the logic is host-testable without verbs, rdma_cm or EAL:
//  1. plan_transition(): a PURE function of (config, snapshot, event) returning a Plan: a verdict, the next
//     state and an action list.
//  2. ConnectionOps: the thin interface behind which the engine does the real rdma_cm, verbs, ring and timer
//     work, one method per action.
//  3. ConnectionLifecycle: holds the state and the set of acquired resources, runs a plan's actions through
//     ConnectionOps in order, records every acquisition and release, and turns a failed acquisition into
//     teardown.
//
// The properties it exists to guarantee (RDS iw_cm's shutdown from any half-built state; design.md Teardown):
//  - every event is accepted in every state: it is applied, ignored (a harmless late or duplicate event) or
//    reported as illegal; none is undefined and none leaks;
//  - teardown can start from any state, any number of times; the second and later requests are no-ops;
//  - a resource is released only if it was acquired, exactly once, in reverse order of acquisition;
//  - nothing a core can touch (rx buffers, QP, the connection object) is released while a core holds, or may
//    hold, a reference: control sends CLOSE and waits for CLOSED first.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dataplane/handoff_commands.hpp"

namespace rdmagate::control {

using Duration = std::chrono::nanoseconds;
using TimePoint = std::chrono::steady_clock::time_point;
using dataplane::CloseReason;
using dataplane::FailureKind;

// Which side of the rdma_cm handshake this connection is.
enum class Role : std::uint8_t {
  kActive = 0,   // we resolve, connect, and reconnect with backoff (client side of the engine)
  kPassive = 1,  // created by a listener's CONNECT_REQUEST; never reconnects (gateway side)
};

enum class State : std::uint8_t {
  kIdle = 0,            // created, nothing acquired; active: waiting for kStart, passive: for the request
  kAddrResolving = 1,   // active: cm_id created, rdma_resolve_addr issued, handshake timer armed
  kRouteResolving = 2,  // active: address resolved, rdma_resolve_route issued
  kConnecting = 3,      // active: core slot reserved, QP on the core's CQ, rx posted, rdma_connect issued
  kReqReceived = 4,     // passive: CONNECT_REQUEST's child cm_id is ours; private data being negotiated
  kAccepting = 5,       // passive: core slot reserved, QP created, rx posted, rdma_accept issued
  kEstablishedPendingAdopt = 6,  // ESTABLISHED, but the ADOPT still waits in control's backlog (the core's
                                 // ring was full). It will reach the core: teardown goes through
                                 // CLOSE/CLOSED. Lingering here means a core is not draining its ring.
  kOwnedByCore = 7,              // ADOPT is on the core's ring: the core owns the data path
  kClosing = 8,     // teardown began: QP moved to ERR, CLOSE sent; waiting for the core's CLOSED.
                    // Nothing a core can touch is released in this state.
  kDrained = 9,     // no core reference remains: the release ladder is running. Transient: a dispatch
                    // that enters it always leaves it for kBackoff or kDestroyed.
  kBackoff = 10,    // active: everything released, reconnect timer armed
  kDestroyed = 11,  // everything released, no timer pending: the owner may free the object
};
inline constexpr std::size_t kStateCount = 12;
static_assert(kStateCount == static_cast<std::size_t>(State::kDestroyed) + 1);

enum class Event : std::uint8_t {
  // Local requests and timers.
  kStart = 0,             // active: begin (or, from kBackoff, begin now) connecting
  kLocalAccept = 1,       // passive: negotiation accepted the request; place it on a core and accept
  kLocalReject = 2,       // passive: negotiation refused the request (args.reject_code goes in the reject)
  kLocalClose = 3,        // close this connection (args.close_reason); the active side then reconnects
  kShutdown = 4,          // close for good: no reconnect, cancels a pending reconnect
  kHandshakeTimeout = 5,  // the handshake timer fired
  kReconnectTimer = 6,    // the backoff timer fired
  kAdoptEnqueued = 7,  // a deferred ADOPT left control's backlog for the core's ring (ControlMailbox flush)
  kSetupFailed = 8,    // an acquisition failed (args.status); raised by the lifecycle itself
  // rdma_cm events.
  kAddrResolved = 9,
  kAddrError = 10,
  kRouteResolved = 11,
  kRouteError = 12,
  kConnectRequest = 13,  // always dispatched to a fresh passive lifecycle, which takes over the child cm_id
  kConnectError = 14,
  kUnreachable = 15,
  kRejected = 16,  // args.retry: what the peer's reject reason allows
  kEstablished = 17,
  kDisconnected = 18,
  kTimewaitExit = 19,
  kDeviceRemoval = 20,
  // Device async events (the engine fans device- and port-wide ones out to the connections concerned).
  kQpFatal = 21,
  kDeviceFatal = 22,
  kPortDown = 23,
  // Core replies from the handoff ring.
  kCoreClosed = 24,  // CLOSED: the core drained the connection and dropped its reference
  kCoreFailed = 25,  // FAILED: args.failure says what; the core still owns the connection
};
inline constexpr std::size_t kEventCount = 26;
static_assert(kEventCount == static_cast<std::size_t>(Event::kCoreFailed) + 1);

// What a connection holds; ResourceSet tracks which bits are held right now. Each bit has one acquiring
// action (two for kCmConnected: connect or accept; and for kCoreRef: ADOPT or CLOSE), or is handed over by an
// event (CONNECT_REQUEST's cm_id), and one releasing action, or is ended by an event (a fired timer, CLOSED).
enum class Resource : std::uint16_t {
  kCmId = 1u << 0,            // the rdma_cm id (created, or the child id of a CONNECT_REQUEST)
  kHandshakeTimer = 1u << 1,  // an armed handshake deadline that would call back into this connection
  kCoreSlot = 1u << 2,        // a place reserved on a data-plane core (its load count, its connection table)
  kQp = 1u << 3,              // the QP, created on that core's CQ
  kRxPosted = 1u << 4,  // rx buffers taken from the core's pool and posted: completions will reach the core
  kCmConnected =
      1u << 5,         // rdma_connect/rdma_accept issued: the CM connection must be answered by disconnect
  kCoreRef = 1u << 6,  // the core holds or may hold a reference (ADOPT or CLOSE sent, CLOSED not yet seen)
  kReconnectTimer = 1u << 7,  // an armed reconnect timer
};

class ResourceSet {
 public:
  constexpr ResourceSet() = default;
  constexpr explicit ResourceSet(std::uint16_t bits) : bits_(bits) {}
  constexpr ResourceSet(Resource r) : bits_(static_cast<std::uint16_t>(r)) {}  // NOLINT: implicit on purpose

  constexpr bool has(Resource r) const { return (bits_ & static_cast<std::uint16_t>(r)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr std::uint16_t bits() const { return bits_; }
  constexpr ResourceSet with(ResourceSet o) const { return ResourceSet(bits_ | o.bits_); }
  constexpr ResourceSet without(ResourceSet o) const { return ResourceSet(bits_ & ~o.bits_); }
  friend constexpr ResourceSet operator|(ResourceSet a, ResourceSet b) { return a.with(b); }
  friend constexpr bool operator==(ResourceSet, ResourceSet) = default;

 private:
  std::uint16_t bits_ = 0;
};
inline constexpr std::size_t kResourceCount = 8;
static_assert(kResourceCount <= 16, "ResourceSet is 16 bits");
static_assert(static_cast<std::uint16_t>(Resource::kReconnectTimer) == 1u << (kResourceCount - 1));

enum class ActionKind : std::uint8_t {
  // Setup, in the order a connection acquires things.
  kCreateCmId = 0,         // acquires kCmId (rdma_create_id on the control event channel)
  kArmHandshakeTimer = 1,  // acquires kHandshakeTimer (Action::delay from now)
  kResolveAddr = 2,        // rdma_resolve_addr
  kResolveRoute = 3,       // rdma_resolve_route
  kReserveCoreSlot = 4,    // acquires kCoreSlot: pick the least-loaded core near the device
  kCreateQp = 5,           // acquires kQp: the device backend creates it on that core's CQ
  kPostRx = 6,             // acquires kRxPosted: post every rx buffer before connect/accept (no RNR on msg 1)
  kConnect = 7,            // acquires kCmConnected: rdma_connect with our private data
  kAccept = 8,             // acquires kCmConnected: rdma_accept with our private data
  kSendAdopt = 9,          // acquires kCoreRef: queue ADOPT(conn) to the core (never fails; see send_adopt)
  // Teardown, first half: stop event sources and quiesce.
  kCancelHandshakeTimer = 10,  // releases kHandshakeTimer
  kCancelReconnect = 11,       // releases kReconnectTimer
  kReject = 12,                // passive, not yet accepted: rdma_reject with Action::code (best effort)
  kDisconnect = 13,            // releases kCmConnected: rdma_disconnect (best effort; also answers a DREQ)
  kMoveQpToErr = 14,           // ibv_modify_qp(ERR): every posted WR flushes to the core's CQ (best effort)
  kSendClose = 15,  // acquires kCoreRef: queue CLOSE(conn, Action::code as CloseReason) (never fails)
  // Teardown, second half: the release ladder, only ever with no core reference held.
  kFreeRx = 16,           // releases kRxPosted: return the rx buffers to the core's pool
  kDestroyQp = 17,        // releases kQp
  kReleaseCoreSlot = 18,  // releases kCoreSlot
  kDestroyCmId = 19,      // releases kCmId (the engine must have acked the cm event it is handling first)
  // After teardown.
  kScheduleReconnect = 20,  // acquires kReconnectTimer (Action::delay from now, from the backoff)
};
inline constexpr std::size_t kActionKindCount = 21;
static_assert(kActionKindCount == static_cast<std::size_t>(ActionKind::kScheduleReconnect) + 1);

struct Action {
  ActionKind kind = ActionKind::kCreateCmId;
  std::uint8_t code = 0;  // kReject: reject code; kSendClose: CloseReason
  Duration delay{};       // kArmHandshakeTimer, kScheduleReconnect
  friend constexpr bool operator==(const Action&, const Action&) = default;
};

// The resource an action acquires or releases, if any (pure; used by the lifecycle and by tests).
ResourceSet acquired_by(ActionKind k) noexcept;
ResourceSet released_by(ActionKind k) noexcept;

// Fixed-capacity list: plans are built on the control thread's stack without allocating.
class ActionList {
 public:
  // A dispatch runs at most one setup step (4 actions) and, if that fails, one teardown. The planner never
  // emits more than 11 for any state, event and resource set, and no dispatch executes more than 11; both are
  // asserted by the tests. 16 leaves room.
  static constexpr std::size_t kCapacity = 16;

  constexpr bool push(const Action& a) {
    if (size_ == kCapacity) return false;
    items_[size_++] = a;
    return true;
  }
  constexpr std::size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const Action& operator[](std::size_t i) const { return items_[i]; }
  constexpr Action& operator[](std::size_t i) { return items_[i]; }
  constexpr const Action* begin() const { return items_.data(); }
  constexpr const Action* end() const { return items_.data() + size_; }
  constexpr bool contains(ActionKind k) const { return index_of(k) != kNotFound; }
  static constexpr std::size_t kNotFound = kCapacity;
  constexpr std::size_t index_of(ActionKind k) const {
    for (std::size_t i = 0; i < size_; ++i) {
      if (items_[i].kind == k) return i;
    }
    return kNotFound;
  }

 private:
  std::array<Action, kCapacity> items_{};
  std::size_t size_ = 0;
};

// What a peer's reject (or another failure) allows the active side to do next.
enum class RetryHint : std::uint8_t {
  kBackoff = 0,  // reconnect after the next backoff delay (the default for every failure)
  kImmediate =
      1,       // retry now with the peer's parameters (once; a second consecutive one falls back to backoff)
  kNever = 2,  // do not reconnect (incompatible version, lost a connection race: the other connection stands)
};

struct EventArgs {
  int status = 0;                                  // errno / cm status / wc status, for logs and kSetupFailed
  std::uint8_t reject_code = 0;                    // kLocalReject: the protocol core's reject reason
  RetryHint retry = RetryHint::kBackoff;           // kRejected
  CloseReason close_reason = CloseReason::kLocal;  // kLocalClose
  FailureKind failure = FailureKind::kCompletion;  // kCoreFailed
};

enum class Verdict : std::uint8_t {
  kApplied = 0,  // the event moved the machine (possibly to the same state) and/or produced actions
  kIgnored = 1,  // legal but meaningless now: a late cm event while closing, a stale timer, a second close
  kIllegal = 2,  // cannot happen if engine and rdma_cm behave; nothing was done and the event is counted so
                 // the engine can log it (rate-limited). Never undefined behaviour.
};

// Reconnect backoff: min, 2*min, 4*min, ... capped at max; optional jitter subtracts up to
// jitter_permille/1000 of each delay (never adds, so max stays a hard cap). Deterministic for a given seed.
// A connection that reached ESTABLISHED starts the sequence over when it ends, unless it ended because the
// peer refused or failed authentication, broke the protocol or caused an access error on our QP: then the
// sequence goes on growing, so a gateway that fails every session (a wrong secret, or a hostile one probing
// our keys) is retried at most once per `max`, not once per `min`.
bool backoff_resets_after(CloseReason why) noexcept;

struct BackoffPolicy {
  Duration min = std::chrono::milliseconds(100);
  Duration max = std::chrono::seconds(30);
  std::uint32_t jitter_permille = 0;  // 0..1000
};

class ReconnectBackoff {
 public:
  // Out-of-range policies are clamped rather than rejected: min >= 1 ns, max >= min, jitter <= 1000.
  explicit ReconnectBackoff(const BackoffPolicy& policy, std::uint64_t seed = 0) noexcept;

  // The delay before the next attempt; advances the sequence.
  Duration next_delay() noexcept;
  // `now` + next_delay(): the deadline to arm.
  TimePoint next_deadline(TimePoint now) noexcept { return now + next_delay(); }
  // The un-jittered delay next_delay() would start from.
  Duration peek_base() const noexcept { return current_; }
  // After a success: the next failure waits min again.
  void reset() noexcept;
  std::uint32_t attempts() const noexcept { return attempts_; }
  const BackoffPolicy& policy() const noexcept { return policy_; }

 private:
  std::uint64_t next_random() noexcept;

  BackoffPolicy policy_;
  Duration current_;
  std::uint32_t attempts_ = 0;
  std::uint64_t rng_;
};

struct LifecycleConfig {
  Role role = Role::kActive;
  bool reconnect = true;  // active side: reconnect after a failure or disconnect (never after kShutdown)
  BackoffPolicy backoff{};
  std::uint64_t jitter_seed = 0;
  Duration handshake_timeout = std::chrono::seconds(10);
  // The protocol core's reject code for "no resources / unavailable", sent when a passive connection is torn
  // down locally before it was accepted (setup failure, timeout, shutdown).
  std::uint8_t reject_code_unavailable = 0;
};

// Everything plan_transition() reads about a connection.
struct Snapshot {
  Role role = Role::kActive;
  State state = State::kIdle;
  ResourceSet held{};
  bool started = false;                   // kStart was applied at least once (active)
  bool shutdown = false;                  // kShutdown seen: never reconnect
  RetryHint retry = RetryHint::kBackoff;  // remembered from the event that began the teardown
};

struct Plan {
  Verdict verdict = Verdict::kIgnored;
  State next = State::kIdle;
  ResourceSet grant{};    // handed over by the event itself (CONNECT_REQUEST's child cm_id)
  ResourceSet consume{};  // ended by the event itself (fired timer, CLOSED, a CM connection the peer ended)
  CloseReason teardown = CloseReason::kNone;  // != kNone: this event begins teardown, for this reason
  RetryHint retry = RetryHint::kBackoff;      // with teardown: what to remember for the reconnect decision
  bool sets_shutdown = false;
  ActionList actions{};
};

// The pure transition function. Never fails: every (state, event) pair has a plan.
Plan plan_transition(const LifecycleConfig& cfg, const Snapshot& s, Event ev, const EventArgs& args) noexcept;

// The thin interface the engine implements (one object per connection, so no connection argument). Called
// only from ConnectionLifecycle::dispatch on the control thread. Implementations must not dispatch events
// into the same lifecycle synchronously: report outcomes through the control loop instead.
class ConnectionOps {
 public:
  virtual ~ConnectionOps() = default;

  // Fallible setup steps: return 0, or a negative errno having acquired nothing.
  virtual int create_cm_id() noexcept = 0;
  virtual int arm_handshake_timer(Duration timeout) noexcept = 0;
  virtual int resolve_addr() noexcept = 0;
  virtual int resolve_route() noexcept = 0;
  virtual int reserve_core_slot() noexcept = 0;
  virtual int create_qp() noexcept = 0;
  virtual int post_rx() noexcept = 0;
  virtual int connect() noexcept = 0;
  virtual int accept() noexcept = 0;
  virtual int schedule_reconnect(Duration delay) noexcept = 0;

  // Hand-offs to the core through ControlMailbox::send_st, so they cannot fail. send_adopt returns what
  // send_st returned: true if the ADOPT is on the core's ring now (the lifecycle goes straight to
  // kOwnedByCore), false if it waits in the backlog (the engine dispatches kAdoptEnqueued when flush_st
  // reports it sent).
  virtual bool send_adopt() noexcept = 0;
  virtual void send_close(CloseReason why) noexcept = 0;

  // Best effort: a failure is the engine's to log; the plan goes on (RDS iw_cm ignores rdma_disconnect
  // failing).
  virtual void reject(std::uint8_t code) noexcept = 0;
  virtual void disconnect() noexcept = 0;
  virtual void move_qp_to_err() noexcept = 0;

  // Releases: after the call the resource is gone as far as the lifecycle is concerned.
  virtual void cancel_handshake_timer() noexcept = 0;
  virtual void cancel_reconnect() noexcept = 0;
  virtual void free_rx() noexcept = 0;
  virtual void destroy_qp() noexcept = 0;
  virtual void release_core_slot() noexcept = 0;
  virtual void destroy_cm_id() noexcept = 0;
};

// What one dispatch did, for the engine's log line and for tests.
struct DispatchResult {
  Verdict verdict = Verdict::kIgnored;
  Event event = Event::kStart;
  State from = State::kIdle;
  State to = State::kIdle;
  ActionList executed{};  // actions performed, in order, with the delays actually used
  bool setup_failed =
      false;  // an acquisition failed; the rest of its plan was skipped and teardown ran instead
  ActionKind failed_action = ActionKind::kCreateCmId;
  int status = 0;  // the failed action's error
};

struct LifecycleCounters {
  std::uint64_t applied = 0;
  std::uint64_t ignored = 0;
  std::uint64_t illegal = 0;
  std::uint64_t setup_failures = 0;
  std::uint64_t reconnect_arm_failures = 0;  // kScheduleReconnect failed: the connection ends in kDestroyed
  std::uint64_t reentrant_dispatches = 0;  // a ConnectionOps method dispatched synchronously (a bug; illegal)
};

class ConnectionLifecycle {
 public:
  explicit ConnectionLifecycle(const LifecycleConfig& cfg) noexcept;
  ConnectionLifecycle(const ConnectionLifecycle&) = delete;
  ConnectionLifecycle& operator=(const ConnectionLifecycle&) = delete;

  // Plans the event and executes the plan through `ops`. Control thread only.
  DispatchResult dispatch(Event ev, const EventArgs& args, ConnectionOps& ops) noexcept;
  DispatchResult dispatch(Event ev, ConnectionOps& ops) noexcept { return dispatch(ev, EventArgs{}, ops); }

  State state() const noexcept { return state_; }
  Role role() const noexcept { return cfg_.role; }
  ResourceSet held() const noexcept { return held_; }
  // Why the current (or last) teardown happened; kNone before any.
  CloseReason close_reason() const noexcept { return close_reason_; }
  bool shutdown_requested() const noexcept { return shutdown_; }
  // True while a core holds or may hold a reference: the connection object must stay alive and untouched.
  bool core_may_reference() const noexcept { return held_.has(Resource::kCoreRef); }
  // True once the owner may free the object: nothing held, no timer pending, no core reference.
  bool destroyable() const noexcept { return state_ == State::kDestroyed && held_.empty(); }
  Snapshot snapshot() const noexcept;
  const ReconnectBackoff& backoff() const noexcept { return backoff_; }
  const LifecycleCounters& counters() const noexcept { return counters_; }
  const LifecycleConfig& config() const noexcept { return cfg_; }

 private:
  friend class ConnectionLifecycleTestPeer;

  // Applies the plan's bookkeeping and runs its actions. Returns false if an acquisition failed.
  bool run_plan(Event ev, const Plan& plan, ConnectionOps& ops, DispatchResult& out) noexcept;
  int execute(Action& a, ConnectionOps& ops) noexcept;

  LifecycleConfig cfg_;
  State state_ = State::kIdle;
  ResourceSet held_{};
  CloseReason close_reason_ = CloseReason::kNone;
  RetryHint retry_ = RetryHint::kBackoff;
  bool started_ = false;
  bool shutdown_ = false;
  bool immediate_retry_used_ = false;
  // ESTABLISHED was reached since the last reconnect was scheduled: the next one starts the backoff over,
  // unless the connection ended for a reason the peer caused on purpose (backoff_resets_after).
  bool established_since_retry_ = false;
  bool adopt_delivered_ = false;  // the last send_adopt put ADOPT straight on the ring
  bool in_dispatch_ = false;
  ReconnectBackoff backoff_;
  LifecycleCounters counters_{};
};

std::string_view to_string(Role r) noexcept;
std::string_view to_string(State s) noexcept;
std::string_view to_string(Event e) noexcept;
std::string_view to_string(ActionKind a) noexcept;
std::string_view to_string(Verdict v) noexcept;
std::string_view to_string(Resource r) noexcept;

}  // namespace rdmagate::control

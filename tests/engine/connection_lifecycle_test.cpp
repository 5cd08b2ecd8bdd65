// Connection lifecycle: the pure transition table, the executor's resource discipline against a fake world,
// and the reconnect backoff.
#include "control/connection_lifecycle.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace rdmagate::control {

// Reaches into the lifecycle only to build states no event sequence can leave it in (kDrained is transient).
class ConnectionLifecycleTestPeer {
 public:
  static void force(ConnectionLifecycle& lc, State s, ResourceSet held) {
    lc.state_ = s;
    lc.held_ = held;
  }
};

namespace {

using namespace std::chrono_literals;

constexpr std::uint8_t kUnavailable = 0x55;

LifecycleConfig config(Role role) {
  LifecycleConfig c;
  c.role = role;
  c.reconnect = true;
  c.backoff = BackoffPolicy{100ms, 1s, 0};
  c.handshake_timeout = 3s;
  c.reject_code_unavailable = kUnavailable;
  return c;
}

constexpr bool core_touchable(Resource r) {
  return r == Resource::kCmId || r == Resource::kCoreSlot || r == Resource::kQp || r == Resource::kRxPosted;
}

// The world as the engine would see it: which resources really exist, what the core holds. It checks every
// call the lifecycle makes against that world and records violations instead of crashing, so a sweep can
// report them.
class FakeWorld final : public ConnectionOps {
 public:
  struct Call {
    ActionKind kind;
    std::uint8_t code = 0;
    Duration delay{};
  };

  std::vector<Call> calls;
  std::vector<std::string> violations;
  std::optional<ActionKind> fail_on;
  int fail_rc = -ENOMEM;
  bool core_holds = false;         // ADOPT or CLOSE went to the core and no CLOSED came back yet
  bool adopt_on_ring = false;      // what send_adopt reports: on the ring now, or deferred in the backlog
  bool rx_drained_by_core = true;  // since rx was last posted, a CLOSED proved the core flushed it
  std::vector<Resource> stack;     // core-touchable resources in acquisition order
  ResourceSet live{};
  std::size_t acquisitions = 0;
  std::size_t releases = 0;
  std::size_t ended = 0;  // resources that ended by themselves: a fired timer, a CM connection the peer ended
  ConnectionLifecycle* reenter =
      nullptr;  // when set, send_close dispatches into this lifecycle (a bug to catch)

  ResourceSet world() const { return core_holds ? live.with(Resource::kCoreRef) : live; }

  // Event-side changes of the world, applied by the harness.
  void grant(Resource r) { acquire_res(r); }
  void consume(Resource r) {
    if (!live.has(r)) violations.push_back(std::string("consumed unheld ") + std::string(to_string(r)));
    live = live.without(r);
    ++ended;
  }
  void core_closed() {
    if (!core_holds) violations.push_back("CLOSED without CLOSE/ADOPT");
    core_holds = false;
    rx_drained_by_core = true;
  }

  int create_cm_id() noexcept override { return acquire(ActionKind::kCreateCmId, Resource::kCmId); }
  int arm_handshake_timer(Duration t) noexcept override {
    return acquire(ActionKind::kArmHandshakeTimer, Resource::kHandshakeTimer, 0, t);
  }
  int resolve_addr() noexcept override { return step(ActionKind::kResolveAddr, Resource::kCmId); }
  int resolve_route() noexcept override { return step(ActionKind::kResolveRoute, Resource::kCmId); }
  int reserve_core_slot() noexcept override {
    return acquire(ActionKind::kReserveCoreSlot, Resource::kCoreSlot);
  }
  int create_qp() noexcept override {
    if (!live.has(Resource::kCoreSlot)) violations.push_back("qp created with no core slot");
    return acquire(ActionKind::kCreateQp, Resource::kQp);
  }
  int post_rx() noexcept override {
    if (!live.has(Resource::kQp)) violations.push_back("rx posted with no qp");
    const int rc = acquire(ActionKind::kPostRx, Resource::kRxPosted);
    if (rc == 0) rx_drained_by_core = false;
    return rc;
  }
  int connect() noexcept override {
    if (!live.has(Resource::kRxPosted)) violations.push_back("connect before rx posted");
    return acquire(ActionKind::kConnect, Resource::kCmConnected);
  }
  int accept() noexcept override {
    if (!live.has(Resource::kRxPosted)) violations.push_back("accept before rx posted");
    return acquire(ActionKind::kAccept, Resource::kCmConnected);
  }
  int schedule_reconnect(Duration d) noexcept override {
    if (!(live.without(Resource::kReconnectTimer)).empty() || core_holds) {
      violations.push_back("reconnect scheduled while still holding resources");
    }
    return acquire(ActionKind::kScheduleReconnect, Resource::kReconnectTimer, 0, d);
  }
  bool send_adopt() noexcept override {
    record(ActionKind::kSendAdopt);
    if (!live.has(Resource::kRxPosted) || !live.has(Resource::kCmConnected))
      violations.push_back("adopt of half-built");
    core_holds = true;
    return adopt_on_ring;
  }
  void send_close(CloseReason why) noexcept override {
    record(ActionKind::kSendClose, static_cast<std::uint8_t>(why));
    if (live.has(Resource::kQp) && !qp_in_err) violations.push_back("close sent with qp not in err");
    core_holds = true;
    if (reenter != nullptr) reentrant_result = reenter->dispatch(Event::kCoreClosed, *this).verdict;
  }
  void reject(std::uint8_t code) noexcept override {
    record(ActionKind::kReject, code);
    if (!live.has(Resource::kCmId) || live.has(Resource::kCmConnected)) violations.push_back("bad reject");
  }
  void disconnect() noexcept override { release(ActionKind::kDisconnect, Resource::kCmConnected); }
  void move_qp_to_err() noexcept override {
    record(ActionKind::kMoveQpToErr);
    if (!live.has(Resource::kQp)) violations.push_back("err on missing qp");
    qp_in_err = true;
  }
  void cancel_handshake_timer() noexcept override {
    release(ActionKind::kCancelHandshakeTimer, Resource::kHandshakeTimer);
  }
  void cancel_reconnect() noexcept override {
    release(ActionKind::kCancelReconnect, Resource::kReconnectTimer);
  }
  void free_rx() noexcept override {
    if (!rx_drained_by_core) violations.push_back("rx freed before the core drained it");
    release(ActionKind::kFreeRx, Resource::kRxPosted);
  }
  void destroy_qp() noexcept override {
    release(ActionKind::kDestroyQp, Resource::kQp);
    qp_in_err = false;
  }
  void release_core_slot() noexcept override { release(ActionKind::kReleaseCoreSlot, Resource::kCoreSlot); }
  void destroy_cm_id() noexcept override { release(ActionKind::kDestroyCmId, Resource::kCmId); }

  std::vector<ActionKind> kinds() const {
    std::vector<ActionKind> k;
    for (const Call& c : calls) k.push_back(c.kind);
    return k;
  }

  std::optional<Verdict> reentrant_result;

 private:
  void record(ActionKind k, std::uint8_t code = 0, Duration d = {}) { calls.push_back(Call{k, code, d}); }
  bool should_fail(ActionKind k) {
    if (fail_on && *fail_on == k) {
      fail_on.reset();
      return true;
    }
    return false;
  }
  int step(ActionKind k, Resource needs) {
    record(k);
    if (!live.has(needs)) violations.push_back(std::string(to_string(k)) + " without its prerequisite");
    return should_fail(k) ? fail_rc : 0;
  }
  int acquire(ActionKind k, Resource r, std::uint8_t code = 0, Duration d = {}) {
    record(k, code, d);
    if (should_fail(k)) return fail_rc;
    acquire_res(r);
    return 0;
  }
  void acquire_res(Resource r) {
    if (live.has(r)) violations.push_back(std::string("double acquire of ") + std::string(to_string(r)));
    live = live.with(r);
    ++acquisitions;
    if (core_touchable(r)) stack.push_back(r);
  }
  void release(ActionKind k, Resource r) {
    record(k);
    if (!live.has(r)) {
      violations.push_back(std::string("release of unheld ") + std::string(to_string(r)));
      return;
    }
    if (core_touchable(r)) {
      if (core_holds)
        violations.push_back(std::string("released ") + std::string(to_string(r)) + " while core holds");
      if (stack.empty() || stack.back() != r) {
        violations.push_back(std::string("out-of-order release of ") + std::string(to_string(r)));
      }
      if (!stack.empty()) stack.pop_back();
    }
    live = live.without(r);
    ++releases;
  }

  bool qp_in_err = false;
};

// A lifecycle in a fake world. fire() keeps the world in step with what the event itself means.
struct Harness {
  explicit Harness(Role role) : Harness(config(role)) {}
  explicit Harness(const LifecycleConfig& cfg) : lc(cfg) {}

  DispatchResult fire(Event ev, EventArgs args = {}) {
    const ResourceSet before = lc.held();
    // A real core answers CLOSED only to a CLOSE, and has dropped the connection by the time control reads
    // it. Any other CLOSED is a core bug the lifecycle must refuse; the world does not change for it.
    if (ev == Event::kCoreClosed && lc.state() == State::kClosing) world.core_closed();
    // A timer event means the timer has fired: if it was armed, it is gone before control hears about it.
    if (ev == Event::kHandshakeTimeout && world.live.has(Resource::kHandshakeTimer)) {
      world.consume(Resource::kHandshakeTimer);
    }
    if (ev == Event::kReconnectTimer && world.live.has(Resource::kReconnectTimer)) {
      world.consume(Resource::kReconnectTimer);
    }
    const DispatchResult r = lc.dispatch(ev, args, world);
    if (r.verdict == Verdict::kIllegal) ++illegal_seen;
    max_actions = std::max(max_actions, r.executed.size());
    if (r.verdict == Verdict::kApplied) {
      switch (ev) {
        case Event::kConnectRequest:
          break;  // granted below, before the actions ran; see grant_child_id
        case Event::kConnectError:
        case Event::kUnreachable:
        case Event::kRejected:
          if (before.has(Resource::kCmConnected)) world.consume(Resource::kCmConnected);
          break;
        default:
          break;
      }
    }
    return r;
  }

  // CONNECT_REQUEST hands over the child cm_id before the lifecycle arms its timer; mirror that order.
  DispatchResult connect_request(EventArgs args = {}) {
    if (lc.state() == State::kIdle && lc.role() == Role::kPassive) world.grant(Resource::kCmId);
    return fire(Event::kConnectRequest, args);
  }

  DispatchResult fire_any(Event ev, EventArgs args = {}) {
    return ev == Event::kConnectRequest ? connect_request(args) : fire(ev, args);
  }

  // Shut down and, if a core is draining, answer CLOSED: every connection must then be gone without a trace.
  void finish() {
    fire(Event::kShutdown);
    if (lc.state() == State::kClosing) fire(Event::kCoreClosed);
  }

  void expect_clean(const std::string& where) const {
    EXPECT_EQ(lc.state(), State::kDestroyed) << where << ": " << to_string(lc.state());
    EXPECT_TRUE(lc.destroyable()) << where;
    EXPECT_TRUE(lc.held().empty()) << where << " held 0x" << std::hex << lc.held().bits();
    EXPECT_TRUE(world.world().empty()) << where << " world 0x" << std::hex << world.world().bits();
    EXPECT_EQ(world.acquisitions, world.releases + world.ended) << where;
    EXPECT_TRUE(world.violations.empty())
        << where << ": " << (world.violations.empty() ? "" : world.violations[0]);
    EXPECT_EQ(lc.counters().illegal, illegal_seen) << where;
    EXPECT_LE(max_actions, 11u) << where;
  }

  ConnectionLifecycle lc;
  FakeWorld world;
  std::uint64_t illegal_seen = 0;
  std::size_t max_actions = 0;
};

// --- paths to every resting state
// -------------------------------------------------------------------------------

struct Path {
  const char* name;
  Role role;
  std::vector<Event> events;
  State expect;
  std::optional<ActionKind> fail_on = std::nullopt;
};

std::vector<Path> all_paths() {
  using E = Event;
  const std::vector<E> active_up = {E::kStart, E::kAddrResolved, E::kRouteResolved, E::kEstablished,
                                    E::kAdoptEnqueued};
  const std::vector<E> passive_up = {E::kConnectRequest, E::kLocalAccept, E::kEstablished, E::kAdoptEnqueued};
  std::vector<Path> p = {
      {"active idle", Role::kActive, {}, State::kIdle},
      {"active addr resolving", Role::kActive, {E::kStart}, State::kAddrResolving},
      {"active route resolving", Role::kActive, {E::kStart, E::kAddrResolved}, State::kRouteResolving},
      {"active connecting",
       Role::kActive,
       {E::kStart, E::kAddrResolved, E::kRouteResolved},
       State::kConnecting},
      {"active pending adopt",
       Role::kActive,
       {E::kStart, E::kAddrResolved, E::kRouteResolved, E::kEstablished},
       State::kEstablishedPendingAdopt},
      {"active owned", Role::kActive, active_up, State::kOwnedByCore},
      {"active closing after close",
       Role::kActive,
       {E::kStart, E::kAddrResolved, E::kRouteResolved, E::kEstablished, E::kAdoptEnqueued, E::kLocalClose},
       State::kClosing},
      {"active closing after reject",
       Role::kActive,
       {E::kStart, E::kAddrResolved, E::kRouteResolved, E::kRejected},
       State::kClosing},
      {"active closing after core failed",
       Role::kActive,
       {E::kStart, E::kAddrResolved, E::kRouteResolved, E::kEstablished, E::kCoreFailed},
       State::kClosing},
      {"active backoff", Role::kActive, {E::kStart, E::kAddrError}, State::kBackoff},
      {"active backoff after drain",
       Role::kActive,
       {E::kStart, E::kAddrResolved, E::kRouteResolved, E::kEstablished, E::kDisconnected, E::kCoreClosed},
       State::kBackoff},
      {"active destroyed", Role::kActive, {E::kStart, E::kShutdown}, State::kDestroyed},
      {"passive idle", Role::kPassive, {}, State::kIdle},
      {"passive request received", Role::kPassive, {E::kConnectRequest}, State::kReqReceived},
      {"passive accepting", Role::kPassive, {E::kConnectRequest, E::kLocalAccept}, State::kAccepting},
      {"passive pending adopt",
       Role::kPassive,
       {E::kConnectRequest, E::kLocalAccept, E::kEstablished},
       State::kEstablishedPendingAdopt},
      {"passive owned", Role::kPassive, passive_up, State::kOwnedByCore},
      {"passive closing after disconnect",
       Role::kPassive,
       {E::kConnectRequest, E::kLocalAccept, E::kEstablished, E::kAdoptEnqueued, E::kDisconnected},
       State::kClosing},
      {"passive closing after timeout",
       Role::kPassive,
       {E::kConnectRequest, E::kLocalAccept, E::kHandshakeTimeout},
       State::kClosing},
      {"passive destroyed by reject",
       Role::kPassive,
       {E::kConnectRequest, E::kLocalReject},
       State::kDestroyed},
  };
  // Every fallible acquisition failing on the way up. Active: back off; passive: reject or drain, then
  // destroyed.
  const ActionKind active_fallible[] = {ActionKind::kCreateCmId,      ActionKind::kArmHandshakeTimer,
                                        ActionKind::kResolveAddr,     ActionKind::kResolveRoute,
                                        ActionKind::kReserveCoreSlot, ActionKind::kCreateQp,
                                        ActionKind::kPostRx,          ActionKind::kConnect};
  for (ActionKind k : active_fallible) {
    // A failed connect leaves receives posted on the core's CQ: the core drains them before anything is
    // freed.
    const State end = k == ActionKind::kConnect ? State::kClosing : State::kBackoff;
    p.push_back({"active setup failure", Role::kActive, active_up, end, k});
  }
  const ActionKind passive_fallible[] = {ActionKind::kArmHandshakeTimer, ActionKind::kReserveCoreSlot,
                                         ActionKind::kCreateQp, ActionKind::kPostRx, ActionKind::kAccept};
  for (ActionKind k : passive_fallible) {
    // Once rx is posted the core must drain it, so a failure at accept ends in kClosing, earlier ones
    // destroyed.
    const State end = k == ActionKind::kAccept ? State::kClosing : State::kDestroyed;
    p.push_back({"passive setup failure", Role::kPassive, passive_up, end, k});
  }
  return p;
}

std::string describe(const Path& p) {
  std::string s = p.name;
  if (p.fail_on) s += std::string(" (") + std::string(to_string(*p.fail_on)) + " fails)";
  return s;
}

void run_path(Harness& h, const Path& p) {
  h.world.fail_on = p.fail_on;
  for (Event e : p.events) {
    if (h.lc.state() == p.expect && p.fail_on && !h.world.fail_on) break;  // failure consumed: stop climbing
    h.fire_any(e);
  }
}

const std::vector<Event>& all_events() {
  static const std::vector<Event> events = [] {
    std::vector<Event> v;
    for (std::size_t i = 0; i < kEventCount; ++i) v.push_back(static_cast<Event>(i));
    return v;
  }();
  return events;
}

// Variants of the arguments an event can carry, so each branch that reads them is swept.
std::vector<EventArgs> arg_variants(Event e) {
  std::vector<EventArgs> v(1);
  if (e == Event::kRejected) {
    v.resize(3);
    v[1].retry = RetryHint::kImmediate;
    v[2].retry = RetryHint::kNever;
  } else if (e == Event::kCoreFailed) {
    v.resize(3);
    v[0].failure = FailureKind::kCompletion;
    v[1].failure = FailureKind::kProtocol;
    v[2].failure = FailureKind::kKeepalive;
  } else if (e == Event::kLocalClose) {
    v.resize(2);
    v[1].close_reason = CloseReason::kNone;
  } else if (e == Event::kLocalReject) {
    v[0].reject_code = 9;
  }
  return v;
}

// --- tests
// -------------------------------------------------------------------------------------------------------

TEST(LifecycleNames, EveryEnumeratorHasAName) {
  for (std::size_t i = 0; i < kStateCount; ++i) EXPECT_NE(to_string(static_cast<State>(i)), "unknown") << i;
  for (std::size_t i = 0; i < kEventCount; ++i) EXPECT_NE(to_string(static_cast<Event>(i)), "unknown") << i;
  for (std::size_t i = 0; i < kActionKindCount; ++i) {
    EXPECT_NE(to_string(static_cast<ActionKind>(i)), "unknown") << i;
  }
  for (std::size_t i = 0; i < kResourceCount; ++i) {
    EXPECT_NE(to_string(static_cast<Resource>(1u << i)), "unknown") << i;
  }
  EXPECT_EQ(to_string(Verdict::kIllegal), "illegal");
  EXPECT_EQ(to_string(Role::kPassive), "passive");
}

TEST(LifecycleResources, EveryResourceHasExactlyOneAcquirerAndOneReleaser) {
  // Resources ended by events rather than actions: kCoreRef (CLOSED). kCmId is also granted by
  // CONNECT_REQUEST.
  for (std::size_t bit = 0; bit < kResourceCount; ++bit) {
    const auto r = static_cast<Resource>(1u << bit);
    int acquirers = 0;
    int releasers = 0;
    for (std::size_t k = 0; k < kActionKindCount; ++k) {
      const auto kind = static_cast<ActionKind>(k);
      if (acquired_by(kind).has(r)) ++acquirers;
      if (released_by(kind).has(r)) ++releasers;
      EXPECT_TRUE(acquired_by(kind).empty() || released_by(kind).empty()) << to_string(kind);
    }
    // kCmConnected: connect or accept; kCoreRef: adopt or close (a half-built connection is handed over to
    // drain).
    const int want_acquirers = (r == Resource::kCmConnected || r == Resource::kCoreRef) ? 2 : 1;
    EXPECT_EQ(acquirers, want_acquirers) << to_string(r);
    EXPECT_EQ(releasers, r == Resource::kCoreRef ? 0 : 1) << to_string(r);
  }
}

// The expected verdict of every (state, event) pair, per role. A = applied, - = ignored, X = illegal.
// Columns follow Event's numbering:
//   start lacc lrej lclose shutdown hstimeout rctimer adoptenq setupfail | addrres addrerr routeres routeerr
//   connreq connerr unreach rejected established disconnected timewait devremoval | qpfatal devfatal portdown
//   | coreclosed corefailed
struct Row {
  State state;
  const char* verdicts;
};

const Row kActiveTable[] = {
    {State::kIdle, "AXXAA--XXXXXXXXXXXX-XX--XX"},
    {State::kAddrResolving, "-XXAAA-XAAAXXXXXXXX-AXAAXX"},
    {State::kRouteResolving, "-XXAAA-XAXXAAXXXXXX-AXAAXX"},
    {State::kConnecting, "-XXAAA-XAXXXXXAAAAA-AAAAXA"},
    {State::kEstablishedPendingAdopt, "-XXAA--AAXXXXXXXXXA-AAAAXA"},
    {State::kOwnedByCore, "-XXAA--XAXXXXXXXXXA-AAAAXA"},
    {State::kClosing, "XXX-A--------X----------A-"},
    {State::kDrained, "XXX----------X----------X-"},
    {State::kBackoff, "AXX-A-AXXXXXXXXXXXX-XX--XX"},
    {State::kDestroyed, "XXX----XXXXXXXXXXXX-XXXXXX"},
};
const Row kPassiveTable[] = {
    {State::kIdle, "XXXAA--XXXXXXAXXXXX-XX--XX"},
    {State::kReqReceived, "XAAAAA-XAXXXXXXXXXX-AXAAXX"},
    {State::kAccepting, "XXXAAA-XAXXXXXAAAAA-AAAAXA"},
    {State::kEstablishedPendingAdopt, "XXXAA--AAXXXXXXXXXA-AAAAXA"},
    {State::kOwnedByCore, "XXXAA--XAXXXXXXXXXA-AAAAXA"},
    {State::kClosing, "XXX-A--------X----------A-"},
    {State::kDrained, "XXX----------X----------X-"},
    {State::kDestroyed, "XXX----XXXXXXXXXXXX-XXXXXX"},
};

char verdict_char(Verdict v) {
  return v == Verdict::kApplied ? 'A' : v == Verdict::kIgnored ? '-' : 'X';
}

// The snapshot a state really has, taken from a lifecycle driven there (kDrained is built by hand: it holds
// what the release ladder is about to free, and no core reference).
Snapshot snapshot_for(Role role, State st) {
  if (st == State::kDrained) {
    Snapshot s;
    s.role = role;
    s.state = st;
    s.started = role == Role::kActive;
    s.held = ResourceSet(Resource::kCmId) | Resource::kCoreSlot | Resource::kQp | Resource::kRxPosted;
    return s;
  }
  for (const Path& p : all_paths()) {
    if (p.role == role && p.expect == st && !p.fail_on) {
      Harness h(role);
      run_path(h, p);
      EXPECT_EQ(h.lc.state(), st) << describe(p);
      return h.lc.snapshot();
    }
  }
  ADD_FAILURE() << "no path to " << to_string(st);
  return Snapshot{};
}

void check_table(Role role, const Row* rows, std::size_t n) {
  const LifecycleConfig cfg = config(role);
  for (std::size_t r = 0; r < n; ++r) {
    ASSERT_EQ(std::string(rows[r].verdicts).size(), kEventCount) << to_string(rows[r].state);
    const Snapshot s = snapshot_for(role, rows[r].state);
    std::string got;
    for (Event e : all_events()) {
      const Plan p = plan_transition(cfg, s, e, EventArgs{});
      got += verdict_char(p.verdict);
      // Whatever the verdict, only an applied plan may do anything.
      if (p.verdict != Verdict::kApplied) {
        EXPECT_TRUE(p.actions.empty()) << to_string(s.state) << " / " << to_string(e);
        EXPECT_EQ(p.next, s.state) << to_string(s.state) << " / " << to_string(e);
      }
    }
    EXPECT_EQ(got, rows[r].verdicts) << to_string(role) << " " << to_string(rows[r].state);
  }
}

TEST(LifecycleTable, ActiveVerdictForEveryStateAndEvent) {
  check_table(Role::kActive, kActiveTable, std::size(kActiveTable));
}

TEST(LifecycleTable, PassiveVerdictForEveryStateAndEvent) {
  check_table(Role::kPassive, kPassiveTable, std::size(kPassiveTable));
}

TEST(LifecycleTable, PlannerIsTotalOverEveryStateEventAndResourceSet) {
  // Including combinations no event sequence produces and out-of-range enum values: a plan always comes back,
  // illegal ones are inert, and no plan ever releases something a core may hold.
  for (Role role : {Role::kActive, Role::kPassive}) {
    const LifecycleConfig cfg = config(role);
    for (std::size_t st = 0; st <= kStateCount; ++st) {
      for (std::uint32_t bits = 0; bits < (1u << kResourceCount); ++bits) {
        for (std::size_t ev = 0; ev <= kEventCount; ++ev) {
          Snapshot s;
          s.role = role;
          s.state = static_cast<State>(st);
          s.held = ResourceSet(static_cast<std::uint16_t>(bits));
          s.started = true;
          const Plan p = plan_transition(cfg, s, static_cast<Event>(ev), EventArgs{});
          ASSERT_LE(p.actions.size(), 11u);
          if (p.verdict != Verdict::kApplied) {
            ASSERT_TRUE(p.actions.empty());
            continue;
          }
          ResourceSet held = s.held.with(p.grant).without(p.consume);
          for (const Action& a : p.actions) {
            const bool touchable = a.kind == ActionKind::kFreeRx || a.kind == ActionKind::kDestroyQp ||
                                   a.kind == ActionKind::kReleaseCoreSlot ||
                                   a.kind == ActionKind::kDestroyCmId;
            ASSERT_FALSE(touchable && held.has(Resource::kCoreRef))
                << to_string(s.state) << " " << to_string(static_cast<Event>(ev)) << " bits " << bits;
            held = held.with(acquired_by(a.kind)).without(released_by(a.kind));
          }
        }
      }
    }
  }
}

TEST(LifecycleActive, HappyPathThenCloseReleasesOnlyAfterClosed) {
  Harness h(Role::kActive);
  using A = ActionKind;
  auto r = h.fire(Event::kStart);
  EXPECT_EQ(r.to, State::kAddrResolving);
  ASSERT_EQ(r.executed.size(), 3u);
  EXPECT_EQ(r.executed[0].kind, A::kCreateCmId);
  EXPECT_EQ(r.executed[1], (Action{A::kArmHandshakeTimer, 0, 3s}));
  EXPECT_EQ(r.executed[2].kind, A::kResolveAddr);
  EXPECT_EQ(h.fire(Event::kAddrResolved).to, State::kRouteResolving);
  r = h.fire(Event::kRouteResolved);
  EXPECT_EQ(r.to, State::kConnecting);
  EXPECT_EQ(h.world.kinds(),
            (std::vector<A>{A::kCreateCmId, A::kArmHandshakeTimer, A::kResolveAddr, A::kResolveRoute,
                            A::kReserveCoreSlot, A::kCreateQp, A::kPostRx, A::kConnect}));
  r = h.fire(Event::kEstablished);
  EXPECT_EQ(r.to, State::kEstablishedPendingAdopt);
  EXPECT_TRUE(h.lc.core_may_reference());
  EXPECT_EQ(h.fire(Event::kAdoptEnqueued).to, State::kOwnedByCore);

  h.world.calls.clear();
  r = h.fire(Event::kLocalClose);
  EXPECT_EQ(r.to, State::kClosing);
  EXPECT_EQ(h.world.kinds(), (std::vector<A>{A::kDisconnect, A::kMoveQpToErr, A::kSendClose}));
  EXPECT_EQ(h.world.calls.back().code, static_cast<std::uint8_t>(CloseReason::kLocal));
  EXPECT_EQ(h.lc.close_reason(), CloseReason::kLocal);
  EXPECT_FALSE(h.lc.destroyable());

  // Nothing else, however late or odd, releases anything while the core still holds the connection.
  h.world.calls.clear();
  for (Event e : all_events()) {
    if (e == Event::kCoreClosed || e == Event::kShutdown) continue;
    h.fire_any(e);
  }
  EXPECT_TRUE(h.world.calls.empty());
  EXPECT_EQ(h.lc.state(), State::kClosing);

  r = h.fire(Event::kCoreClosed);
  EXPECT_EQ(r.to, State::kBackoff);
  EXPECT_EQ(h.world.kinds(), (std::vector<A>{A::kFreeRx, A::kDestroyQp, A::kReleaseCoreSlot, A::kDestroyCmId,
                                             A::kScheduleReconnect}));
  EXPECT_EQ(h.world.calls.back().delay, 100ms);
  EXPECT_TRUE(h.world.violations.empty()) << h.world.violations[0];

  h.fire(Event::kShutdown);
  h.expect_clean("active happy path");
}

TEST(LifecyclePassive, HappyPathThenPeerDisconnect) {
  Harness h(Role::kPassive);
  using A = ActionKind;
  EXPECT_EQ(h.connect_request().to, State::kReqReceived);
  EXPECT_TRUE(h.lc.held().has(Resource::kCmId));
  EXPECT_EQ(h.fire(Event::kLocalAccept).to, State::kAccepting);
  EXPECT_EQ(h.world.kinds(), (std::vector<A>{A::kArmHandshakeTimer, A::kReserveCoreSlot, A::kCreateQp,
                                             A::kPostRx, A::kAccept}));
  EXPECT_EQ(h.fire(Event::kEstablished).to, State::kEstablishedPendingAdopt);
  EXPECT_EQ(h.fire(Event::kAdoptEnqueued).to, State::kOwnedByCore);
  h.world.calls.clear();
  EXPECT_EQ(h.fire(Event::kDisconnected).to, State::kClosing);
  // rdma_disconnect answers the peer's DREQ; the QP goes to ERR; the core drains.
  EXPECT_EQ(h.world.kinds(), (std::vector<A>{A::kDisconnect, A::kMoveQpToErr, A::kSendClose}));
  h.world.calls.clear();
  EXPECT_EQ(h.fire(Event::kCoreClosed).to, State::kDestroyed);  // the passive side never reconnects
  EXPECT_EQ(h.world.kinds(),
            (std::vector<A>{A::kFreeRx, A::kDestroyQp, A::kReleaseCoreSlot, A::kDestroyCmId}));
  h.expect_clean("passive happy path");
}

TEST(LifecycleAdopt, AdoptThatFitsTheRingGoesStraightToOwnedByCore) {
  for (Role role : {Role::kActive, Role::kPassive}) {
    Harness h(role);
    h.world.adopt_on_ring = true;
    if (role == Role::kActive) {
      for (Event e : {Event::kStart, Event::kAddrResolved, Event::kRouteResolved}) h.fire(e);
    } else {
      h.connect_request();
      h.fire(Event::kLocalAccept);
    }
    const auto r = h.fire(Event::kEstablished);
    EXPECT_EQ(r.to, State::kOwnedByCore) << to_string(role);
    EXPECT_TRUE(r.executed.contains(ActionKind::kSendAdopt));
    EXPECT_TRUE(h.lc.core_may_reference());
    // A late confirmation is then meaningless: the machine already knows.
    EXPECT_EQ(h.fire(Event::kAdoptEnqueued).verdict, Verdict::kIllegal);
    h.finish();
    h.expect_clean(std::string("adopt on ring ") + std::string(to_string(role)));
  }
}

TEST(LifecycleAdopt, DeferredAdoptWaitsForTheEnginesConfirmation) {
  Harness h(Role::kPassive);
  h.connect_request();
  h.fire(Event::kLocalAccept);
  EXPECT_EQ(h.fire(Event::kEstablished).to, State::kEstablishedPendingAdopt);
  // Teardown before the confirmation still goes through the core: the ADOPT is ahead of the CLOSE in the
  // backlog.
  h.world.calls.clear();
  EXPECT_EQ(h.fire(Event::kDisconnected).to, State::kClosing);
  EXPECT_EQ(h.world.kinds().back(), ActionKind::kSendClose);
  EXPECT_EQ(h.fire(Event::kAdoptEnqueued).verdict, Verdict::kIgnored);  // the flush reports it late: harmless
  h.fire(Event::kCoreClosed);
  h.expect_clean("deferred adopt");
}

TEST(LifecyclePassive, LocalRejectSendsTheNegotiatedReasonAndDestroysTheChildId) {
  Harness h(Role::kPassive);
  h.connect_request();
  h.world.calls.clear();
  EventArgs a;
  a.reject_code = 9;
  const auto r = h.fire(Event::kLocalReject, a);
  EXPECT_EQ(r.to, State::kDestroyed);
  ASSERT_EQ(h.world.calls.size(), 3u);
  EXPECT_EQ(h.world.calls[0].kind, ActionKind::kCancelHandshakeTimer);
  EXPECT_EQ(h.world.calls[1].kind, ActionKind::kReject);
  EXPECT_EQ(h.world.calls[1].code, 9);
  EXPECT_EQ(h.world.calls[2].kind, ActionKind::kDestroyCmId);
  EXPECT_EQ(h.lc.close_reason(), CloseReason::kRejectedLocally);
  h.expect_clean("local reject");
}

TEST(LifecyclePassive, SetupFailureBeforeAcceptRejectsWithUnavailable) {
  Harness h(Role::kPassive);
  h.connect_request();
  h.world.fail_on = ActionKind::kCreateQp;
  h.world.calls.clear();
  const auto r = h.fire(Event::kLocalAccept);
  EXPECT_TRUE(r.setup_failed);
  EXPECT_EQ(r.failed_action, ActionKind::kCreateQp);
  EXPECT_EQ(r.status, -ENOMEM);
  EXPECT_EQ(r.to, State::kDestroyed);
  using A = ActionKind;
  EXPECT_EQ(h.world.kinds(), (std::vector<A>{A::kReserveCoreSlot, A::kCreateQp, A::kCancelHandshakeTimer,
                                             A::kReject, A::kReleaseCoreSlot, A::kDestroyCmId}));
  EXPECT_EQ(h.world.calls[3].code, kUnavailable);
  EXPECT_EQ(h.lc.close_reason(), CloseReason::kSetupFailed);
  EXPECT_EQ(h.lc.counters().setup_failures, 1u);
  h.expect_clean("setup failure before accept");
}

TEST(LifecyclePassive, AcceptFailureAfterRxPostedStillWaitsForTheCore) {
  // The receives sit on the core's CQ: only the core can prove they flushed, so even a never-adopted
  // connection goes through CLOSE/CLOSED before its buffers are freed.
  Harness h(Role::kPassive);
  h.connect_request();
  h.world.fail_on = ActionKind::kAccept;
  const auto r = h.fire(Event::kLocalAccept);
  EXPECT_TRUE(r.setup_failed);
  EXPECT_EQ(r.to, State::kClosing);
  EXPECT_TRUE(r.executed.contains(ActionKind::kReject));
  EXPECT_TRUE(r.executed.contains(ActionKind::kMoveQpToErr));
  EXPECT_TRUE(r.executed.contains(ActionKind::kSendClose));
  EXPECT_FALSE(r.executed.contains(ActionKind::kFreeRx));
  EXPECT_TRUE(h.lc.core_may_reference());
  h.fire(Event::kCoreClosed);
  h.expect_clean("accept failure");
}

TEST(LifecycleTeardown, FromEveryStateReleasesExactlyWhatWasAcquiredOnce) {
  for (const Path& p : all_paths()) {
    for (Event trigger : {Event::kLocalClose, Event::kShutdown, Event::kDeviceFatal, Event::kQpFatal}) {
      Harness h(p.role);
      run_path(h, p);
      ASSERT_EQ(h.lc.state(), p.expect) << describe(p);
      const ResourceSet held_before = h.lc.held();
      ASSERT_EQ(held_before, h.world.world()) << describe(p);
      h.fire(trigger);
      h.finish();
      h.expect_clean(describe(p) + " + " + std::string(to_string(trigger)));
    }
  }
}

TEST(LifecycleTeardown, DoubleCloseIsANoOp) {
  for (const Path& p : all_paths()) {
    Harness h(p.role);
    run_path(h, p);
    h.fire(Event::kLocalClose);
    const State after_first = h.lc.state();
    const ResourceSet held_after_first = h.lc.held();
    const std::size_t calls = h.world.calls.size();
    const auto second = h.fire(Event::kLocalClose);
    if (after_first != State::kIdle) {
      EXPECT_NE(second.verdict, Verdict::kIllegal) << describe(p);
      EXPECT_EQ(h.world.calls.size(), calls) << describe(p);
      EXPECT_EQ(h.lc.state(), after_first) << describe(p);
      EXPECT_EQ(h.lc.held(), held_after_first) << describe(p);
    }
    h.finish();
    h.expect_clean(describe(p) + " double close");
  }
}

TEST(LifecycleTeardown, UnsolicitedOrDuplicateClosedIsIllegalAndInert) {
  Harness h(Role::kActive);
  for (Event e : {Event::kStart, Event::kAddrResolved, Event::kRouteResolved, Event::kEstablished,
                  Event::kAdoptEnqueued}) {
    h.fire(e);
  }
  const std::size_t calls = h.world.calls.size();
  const auto r = h.fire(Event::kCoreClosed);
  EXPECT_EQ(r.verdict, Verdict::kIllegal);
  EXPECT_EQ(h.world.calls.size(), calls);
  EXPECT_EQ(h.lc.state(), State::kOwnedByCore);
  EXPECT_TRUE(h.lc.core_may_reference());
  h.fire(Event::kShutdown);
  h.fire(Event::kCoreClosed);
  EXPECT_EQ(h.lc.state(), State::kDestroyed);
  EXPECT_EQ(h.fire(Event::kCoreClosed).verdict, Verdict::kIllegal);  // a second CLOSED
  h.expect_clean("duplicate closed");
}

TEST(LifecycleTeardown, ReentrantDispatchFromAnOpIsRefused) {
  Harness h(Role::kPassive);
  h.connect_request();
  h.fire(Event::kLocalAccept);
  h.fire(Event::kEstablished);
  h.world.reenter = &h.lc;  // send_close will try to dispatch CLOSED synchronously
  h.fire(Event::kDisconnected);
  ASSERT_TRUE(h.world.reentrant_result.has_value());
  EXPECT_EQ(*h.world.reentrant_result, Verdict::kIllegal);
  EXPECT_EQ(h.lc.counters().reentrant_dispatches, 1u);
  EXPECT_EQ(h.lc.state(), State::kClosing);
  h.world.reenter = nullptr;
  h.illegal_seen += 1;  // counted by the lifecycle, not seen by the harness
  // The CLOSED the core really sends later, through the control loop, is handled normally.
  h.fire(Event::kCoreClosed);
  h.expect_clean("reentrant");
}

TEST(LifecycleSweep, EveryEventInEveryReachableStateThenShutdownLeavesNothing) {
  std::size_t cases = 0;
  for (const Path& p : all_paths()) {
    for (Event e : all_events()) {
      for (const EventArgs& a : arg_variants(e)) {
        for (int repeat = 1; repeat <= 2; ++repeat) {
          Harness h(p.role);
          run_path(h, p);
          for (int i = 0; i < repeat; ++i) {
            h.fire_any(e, a);
            ASSERT_EQ(h.lc.held(), h.world.world()) << describe(p) << " + " << to_string(e);
          }
          h.finish();
          h.expect_clean(describe(p) + " + " + std::string(to_string(e)) + " x" + std::to_string(repeat));
          ++cases;
        }
      }
    }
  }
  RecordProperty("cases", std::to_string(cases));
  EXPECT_GT(cases, 1000u);
}

TEST(LifecycleSweep, RandomEventSequencesWithRandomFailuresNeverLeakOrDesync) {
  std::mt19937_64 rng(20240601);
  const ActionKind fallible[] = {ActionKind::kCreateCmId,      ActionKind::kArmHandshakeTimer,
                                 ActionKind::kResolveAddr,     ActionKind::kResolveRoute,
                                 ActionKind::kReserveCoreSlot, ActionKind::kCreateQp,
                                 ActionKind::kPostRx,          ActionKind::kConnect,
                                 ActionKind::kAccept,          ActionKind::kScheduleReconnect};
  for (int seq = 0; seq < 3000; ++seq) {
    const Role role = seq % 2 == 0 ? Role::kActive : Role::kPassive;
    Harness h(role);
    h.world.adopt_on_ring = rng() % 2 == 0;
    std::string trail;
    for (int step = 0; step < 24; ++step) {
      if (rng() % 8 == 0) h.world.fail_on = fallible[rng() % std::size(fallible)];
      const Event e = static_cast<Event>(rng() % kEventCount);
      EventArgs a;
      a.retry = static_cast<RetryHint>(rng() % 3);
      a.failure = static_cast<FailureKind>(1 + rng() % 3);
      trail += std::string(to_string(e)) + ", ";
      h.fire_any(e, a);
      ASSERT_EQ(h.lc.held(), h.world.world()) << trail;
      ASSERT_TRUE(h.world.violations.empty()) << trail << " -> " << h.world.violations[0];
      // A core reference and the release of anything it can touch never coexist.
      if (h.lc.core_may_reference()) {
        ASSERT_TRUE(h.lc.state() == State::kClosing || h.lc.state() == State::kEstablishedPendingAdopt ||
                    h.lc.state() == State::kOwnedByCore)
            << trail;
      }
    }
    h.world.fail_on.reset();
    h.finish();
    h.expect_clean(trail);
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(LifecycleReconnect, BackoffGrowsCapsAndResetsOnSuccess) {
  Harness h(Role::kActive);
  std::vector<Duration> delays;
  h.fire(Event::kStart);
  for (int i = 0; i < 6; ++i) {
    h.fire(Event::kAddrError);
    ASSERT_EQ(h.lc.state(), State::kBackoff);
    delays.push_back(h.world.calls.back().delay);
    h.fire(Event::kReconnectTimer);
    ASSERT_EQ(h.lc.state(), State::kAddrResolving);
  }
  EXPECT_EQ(delays, (std::vector<Duration>{100ms, 200ms, 400ms, 800ms, 1s, 1s}));

  // Success resets the sequence: the next failure waits min again.
  h.fire(Event::kAddrResolved);
  h.fire(Event::kRouteResolved);
  h.fire(Event::kEstablished);
  h.fire(Event::kDisconnected);
  h.fire(Event::kCoreClosed);
  ASSERT_EQ(h.lc.state(), State::kBackoff);
  EXPECT_EQ(h.world.calls.back().kind, ActionKind::kScheduleReconnect);
  EXPECT_EQ(h.world.calls.back().delay, 100ms);
  h.finish();
  h.expect_clean("backoff");
}

// A session that connects and is then refused authentication (or breaks the protocol, or faults our QP) is
// no success: the sequence goes on growing to its cap instead of starting over at min, so a gateway with a
// wrong secret or a hostile one gets one session per `max`. An ordinary end afterwards resets it.
TEST(LifecycleReconnect, SessionsEndedByAuthFailureKeepTheBackoffGrowing) {
  Harness h(Role::kActive);
  h.fire(Event::kStart);
  std::vector<Duration> delays;
  auto session_ending = [&](Event end, CloseReason why) {
    h.fire(Event::kAddrResolved);
    h.fire(Event::kRouteResolved);
    h.fire(Event::kEstablished);
    EventArgs a;
    a.close_reason = why;
    h.fire(end, a);
    h.fire(Event::kCoreClosed);
    EXPECT_EQ(h.lc.state(), State::kBackoff) << to_string(why);
    delays.push_back(h.world.calls.back().delay);
    h.fire(Event::kReconnectTimer);
  };
  for (const CloseReason why :
       {CloseReason::kAuthDenied, CloseReason::kAuthDenied, CloseReason::kProtocolError,
        CloseReason::kAuthDenied, CloseReason::kAuthDenied}) {
    session_ending(Event::kLocalClose, why);
  }
  session_ending(Event::kLocalClose, CloseReason::kLocal);
  session_ending(Event::kDisconnected, CloseReason::kNone);
  EXPECT_EQ(delays, (std::vector<Duration>{100ms, 200ms, 400ms, 800ms, 1s, 100ms, 100ms}));
  EXPECT_TRUE(backoff_resets_after(CloseReason::kPeerDisconnected));
  EXPECT_FALSE(backoff_resets_after(CloseReason::kQpFatal));
  h.finish();
  h.expect_clean("auth backoff");
}

TEST(LifecycleReconnect, RejectHintsImmediateOnceThenBackoffAndNeverMeansNever) {
  Harness h(Role::kActive);
  auto to_connecting = [&h] {
    h.fire(Event::kStart);
    h.fire(Event::kAddrResolved);
    h.fire(Event::kRouteResolved);
  };
  EventArgs immediate;
  immediate.retry = RetryHint::kImmediate;
  to_connecting();
  h.fire(Event::kRejected, immediate);
  h.fire(Event::kCoreClosed);  // rx was posted: the core drains even a never-adopted connection
  ASSERT_EQ(h.lc.state(), State::kBackoff);
  EXPECT_EQ(h.world.calls.back().delay, Duration::zero());
  h.fire(Event::kReconnectTimer);
  h.fire(Event::kAddrResolved);
  h.fire(Event::kRouteResolved);
  h.fire(Event::kRejected, immediate);
  h.fire(Event::kCoreClosed);
  EXPECT_EQ(h.world.calls.back().delay, 100ms);  // the second consecutive "immediate" backs off

  h.fire(Event::kReconnectTimer);
  h.fire(Event::kAddrResolved);
  h.fire(Event::kRouteResolved);
  EventArgs never;
  never.retry = RetryHint::kNever;
  h.fire(Event::kRejected, never);
  h.fire(Event::kCoreClosed);
  EXPECT_EQ(h.lc.state(), State::kDestroyed);
  EXPECT_EQ(h.lc.close_reason(), CloseReason::kRejectedByPeer);
  h.expect_clean("reject hints");
}

TEST(LifecycleReconnect, ShutdownDuringBackoffOrClosingPreventsReconnect) {
  {
    Harness h(Role::kActive);
    h.fire(Event::kStart);
    h.fire(Event::kAddrError);
    ASSERT_EQ(h.lc.state(), State::kBackoff);
    EXPECT_EQ(h.fire(Event::kLocalClose).verdict, Verdict::kIgnored);
    const auto r = h.fire(Event::kShutdown);
    EXPECT_EQ(r.to, State::kDestroyed);
    EXPECT_EQ(h.world.calls.back().kind, ActionKind::kCancelReconnect);
    EXPECT_EQ(h.fire(Event::kReconnectTimer).verdict, Verdict::kIgnored);  // stale tick after cancel
    h.expect_clean("shutdown in backoff");
  }
  {
    Harness h(Role::kActive);
    for (Event e : {Event::kStart, Event::kAddrResolved, Event::kRouteResolved, Event::kEstablished})
      h.fire(e);
    h.fire(Event::kQpFatal);
    ASSERT_EQ(h.lc.state(), State::kClosing);
    EXPECT_EQ(h.fire(Event::kShutdown).verdict, Verdict::kApplied);
    EXPECT_EQ(h.fire(Event::kShutdown).verdict, Verdict::kIgnored);
    EXPECT_TRUE(h.lc.shutdown_requested());
    h.fire(Event::kCoreClosed);
    EXPECT_EQ(h.lc.state(), State::kDestroyed);
    EXPECT_FALSE(h.world.kinds().back() == ActionKind::kScheduleReconnect);
    EXPECT_EQ(h.lc.close_reason(), CloseReason::kQpFatal);
    h.expect_clean("shutdown while closing");
  }
}

TEST(LifecycleReconnect, DisabledReconnectOrFailedTimerEndsDestroyed) {
  {
    LifecycleConfig cfg = config(Role::kActive);
    cfg.reconnect = false;
    Harness h(cfg);
    h.fire(Event::kStart);
    EXPECT_EQ(h.fire(Event::kAddrError).to, State::kDestroyed);
    h.expect_clean("reconnect disabled");
  }
  {
    Harness h(Role::kActive);
    h.fire(Event::kStart);
    h.world.fail_on = ActionKind::kScheduleReconnect;
    const auto r = h.fire(Event::kAddrError);
    EXPECT_EQ(r.to, State::kDestroyed);
    EXPECT_FALSE(r.setup_failed);
    EXPECT_EQ(h.lc.counters().reconnect_arm_failures, 1u);
    h.expect_clean("reconnect timer failed");
  }
  {
    // A local close of a connection never started just destroys it.
    Harness h(Role::kActive);
    EXPECT_EQ(h.fire(Event::kLocalClose).to, State::kDestroyed);
    EXPECT_TRUE(h.world.calls.empty());
    h.expect_clean("close before start");
  }
}

TEST(LifecycleTimers, HandshakeTimeoutTearsDownAndStaleTicksAreIgnored) {
  Harness h(Role::kActive);
  h.fire(Event::kStart);
  h.fire(Event::kAddrResolved);
  h.world.calls.clear();
  const auto r = h.fire(Event::kHandshakeTimeout);
  EXPECT_EQ(r.to, State::kBackoff);
  EXPECT_EQ(h.lc.close_reason(), CloseReason::kHandshakeTimeout);
  // The fired timer is not cancelled again (it is gone), the cm_id is destroyed, a reconnect is scheduled.
  EXPECT_EQ(h.world.kinds(),
            (std::vector<ActionKind>{ActionKind::kDestroyCmId, ActionKind::kScheduleReconnect}));
  EXPECT_EQ(h.fire(Event::kHandshakeTimeout).verdict, Verdict::kIgnored);

  // After ESTABLISHED the timer is cancelled, so a tick that raced the cancel is stale.
  h.fire(Event::kReconnectTimer);
  h.fire(Event::kAddrResolved);
  h.fire(Event::kRouteResolved);
  h.fire(Event::kEstablished);
  EXPECT_FALSE(h.lc.held().has(Resource::kHandshakeTimer));
  EXPECT_EQ(h.fire(Event::kHandshakeTimeout).verdict, Verdict::kIgnored);
  EXPECT_EQ(h.lc.state(), State::kEstablishedPendingAdopt);
  h.finish();
  h.expect_clean("timers");
}

TEST(LifecycleDrained, IsTransientAndRejectsLocalRequests) {
  // kDrained never survives a dispatch; if something forced it, local requests are refused and late noise
  // ignored.
  ConnectionLifecycle lc(config(Role::kActive));
  FakeWorld w;
  ConnectionLifecycleTestPeer::force(lc, State::kDrained, ResourceSet{});
  EXPECT_EQ(lc.dispatch(Event::kStart, w).verdict, Verdict::kIllegal);
  EXPECT_EQ(lc.dispatch(Event::kDisconnected, w).verdict, Verdict::kIgnored);
  EXPECT_EQ(lc.dispatch(Event::kCoreClosed, w).verdict, Verdict::kIllegal);
  EXPECT_TRUE(w.calls.empty());
}

// --- backoff on its own
// ------------------------------------------------------------------------------------------

TEST(ReconnectBackoff, DoublesFromMinToMaxAndResets) {
  ReconnectBackoff b(BackoffPolicy{250ms, 5s, 0});
  std::vector<Duration> got;
  for (int i = 0; i < 8; ++i) got.push_back(b.next_delay());
  EXPECT_EQ(got, (std::vector<Duration>{250ms, 500ms, 1s, 2s, 4s, 5s, 5s, 5s}));
  EXPECT_EQ(b.attempts(), 8u);
  b.reset();
  EXPECT_EQ(b.attempts(), 0u);
  EXPECT_EQ(b.peek_base(), 250ms);
  EXPECT_EQ(b.next_delay(), 250ms);
  const TimePoint now{std::chrono::seconds(1000)};
  EXPECT_EQ(b.next_deadline(now), now + 500ms);
}

TEST(ReconnectBackoff, NeverOverflowsAndClampsBadPolicies) {
  ReconnectBackoff huge(BackoffPolicy{Duration::max() / 3, Duration::max(), 0});
  for (int i = 0; i < 10; ++i) EXPECT_GT(huge.next_delay().count(), 0);
  EXPECT_EQ(huge.next_delay(), Duration::max());

  ReconnectBackoff bad(BackoffPolicy{Duration(-5), Duration(-10), 5000});
  EXPECT_EQ(bad.policy().min, Duration(1));
  EXPECT_EQ(bad.policy().max, Duration(1));
  EXPECT_EQ(bad.policy().jitter_permille, 1000u);
  for (int i = 0; i < 5; ++i) {
    const Duration d = bad.next_delay();
    EXPECT_GE(d.count(), 0);
    EXPECT_LE(d, Duration(1));
  }

  ReconnectBackoff inverted(BackoffPolicy{2s, 1s, 0});
  EXPECT_EQ(inverted.next_delay(), 2s);
  EXPECT_EQ(inverted.next_delay(), 2s);
}

TEST(ReconnectBackoff, JitterIsBoundedAndDeterministicPerSeed) {
  const BackoffPolicy p{100ms, 10s, 200};
  ReconnectBackoff a(p, 42);
  ReconnectBackoff b(p, 42);
  ReconnectBackoff c(p, 43);
  ReconnectBackoff plain(BackoffPolicy{100ms, 10s, 0});
  bool any_difference = false;
  bool any_jitter = false;
  for (int i = 0; i < 12; ++i) {
    const Duration base = plain.next_delay();
    const Duration da = a.next_delay();
    EXPECT_EQ(da, b.next_delay());
    if (c.next_delay() != da) any_difference = true;
    if (da != base) any_jitter = true;
    EXPECT_LE(da, base);
    EXPECT_GE(da, base - base / 5);
  }
  EXPECT_TRUE(any_difference);
  EXPECT_TRUE(any_jitter);
}

}  // namespace
}  // namespace rdmagate::control

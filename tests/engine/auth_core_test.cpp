// Host tests of the core loop's authentication gate (dataplane/core_auth.hpp, docs/protocol.md §11) through
// the fake device backend: the real loop and CoreResources, an echo service behind the gate, and a FakePeer
// that plays the client (it computes its proof with the same protocol::auth functions a client uses, from
// the session both ends share). The test plays control: it marks a connection kAwaiting as control does for
// the passive side of a session with auth_required, publishes AuthTables with CONFIG kAuthTable, and reads
// the FAILED replies that make control disconnect.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/auth_table.hpp"
#include "dataplane/core_loop.hpp"
#include "protocol/auth.hpp"
#include "protocol/message.hpp"
#include "telemetry/stats.hpp"
#include "tests/engine/core_harness.hpp"
#include "tests/engine/device_rigs.hpp"
#include "tests/support/test_services.hpp"
#if RDMAGATE_TEST_AUTH_REGISTRY
#include "dataplane/auth_registry.hpp"
#endif

namespace rdmagate::dataplane {
namespace {

namespace auth = protocol::auth;
using fake::Core;
using fake::FakePeer;
using fake::FakeRig;
using fake::LoopbackConn;
using fake::LoopbackOptions;
using fake::test_core_config;
using protocol::MessageType;

constexpr std::uint32_t kDenied = static_cast<std::uint32_t>(auth::AuthStatus::kDenied);
constexpr std::uint32_t kLimit = static_cast<std::uint32_t>(auth::AuthStatus::kConnectionLimit);

std::vector<std::uint8_t> secret_of(std::uint8_t seed, std::size_t n = 32) {
  std::vector<std::uint8_t> s(n);
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<std::uint8_t>(seed * 31 + i * 7 + 1);
  return s;
}

struct PrincipalSpec {
  std::string name;
  std::string tenant;
  std::uint8_t perms = kPermRead | kPermWrite | kPermDelete;
  std::uint32_t max_connections = 0;
  std::vector<std::uint8_t> secret;
};

// What conf's AuthRegistry is to the gateway: one usage object and one tenant id per name for the life of
// the process, and a new generation per table.
class TestRegistry {
 public:
  std::unique_ptr<AuthTable> build(std::vector<PrincipalSpec> specs, bool required = true) {
    auto t = std::make_unique<AuthTable>();
    t->required = required;
    t->generation = ++generation_;
    std::vector<std::string> tenant_names;
    for (const PrincipalSpec& p : specs) {
      if (std::find(tenant_names.begin(), tenant_names.end(), p.tenant) == tenant_names.end()) {
        tenant_names.push_back(p.tenant);
      }
    }
    t->tenants.reserve(tenant_names.size());  // stable addresses before any principal points at one
    for (const std::string& n : tenant_names) {
      TenantEntry e;
      e.name = n;
      auto [it, fresh] = tenant_ids_.try_emplace(n, static_cast<std::uint16_t>(tenant_ids_.size() + 1));
      e.id = it->second;
      e.usage = &tenant_usage_[n];
      t->tenants.push_back(std::move(e));
    }
    std::sort(specs.begin(), specs.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    for (PrincipalSpec& p : specs) {
      PrincipalEntry e;
      e.name = p.name;
      e.secret = p.secret;
      e.perms = p.perms;
      e.max_connections = p.max_connections;
      for (const TenantEntry& te : t->tenants) {
        if (te.name == p.tenant) e.tenant = &te;
      }
      e.usage = &usage(p.name);
      t->principals.push_back(std::move(e));
    }
    return t;
  }
  PrincipalUsage& usage(const std::string& name) { return principal_usage_[name]; }
  std::uint16_t tenant_id(const std::string& name) const { return tenant_ids_.at(name); }

 private:
  std::uint64_t generation_ = 0;
  std::map<std::string, std::uint16_t> tenant_ids_;
  std::map<std::string, TenantUsage> tenant_usage_;
  std::map<std::string, PrincipalUsage> principal_usage_;
};

auth::Nonce nonce_of(std::uint8_t seed) {
  auth::Nonce n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(seed + i * 13 + 5);
  return n;
}

// The transcript as the client sees it: it is the initiator, the gateway the acceptor.
auth::Transcript client_transcript(const FakePeer& peer, const auth::Nonce& nc, std::string_view name) {
  const protocol::Session& s = peer.session();
  return auth::Transcript{s.local_incarnation, s.peer_incarnation, s.gateway_nonce, nc, name};
}

// The AUTH a client with `secret` sends (mechanism HMAC-SHA-256 unless told otherwise).
protocol::Message auth_message(const FakePeer& peer, std::string_view name,
                               const std::vector<std::uint8_t>& secret, std::uint8_t mechanism = 1,
                               std::uint64_t cookie = 77) {
  const auth::Nonce nc = nonce_of(static_cast<std::uint8_t>(name.size()));
  auth::Proof pc{};
  EXPECT_TRUE(auth::compute_proof(auth::Role::kClient, secret, client_transcript(peer, nc, name), &pc));
  return protocol::make_auth_message(cookie, mechanism, name, nc, pc);
}

protocol::Message echo_request(std::uint64_t cookie) {
  static const std::uint8_t bytes[] = {1, 2, 3, 4, 5};
  protocol::Message m;
  m.type = MessageType::kInlineRequest;
  m.opcode = 1;
  m.cookie = cookie;
  m.payload = bytes;
  return m;
}

// One core with an echo service behind the gate, a registry, and a principal table applied.
struct AuthFixture {
  explicit AuthFixture(CoreConfig cfg = test_core_config()) : core{rig, svc, cfg} {}

  void apply(std::unique_ptr<AuthTable> t) {
    core.res->control_mailbox().send_st(
        ToCore::config(ConfigKey::kAuthTable, reinterpret_cast<std::uintptr_t>(t.get())));
    tables.push_back(std::move(t));  // control keeps every table alive (here: for the test)
    core.turn();
  }
  LoopbackConn& open_awaiting(std::uint8_t nonce_seed = 1) {
    LoopbackOptions o;
    o.auth_required = true;
    o.gateway_nonce = nonce_of(static_cast<std::uint8_t>(100 + nonce_seed));
    LoopbackConn& c = core.open(o);
    core.adopt(c);
    return c;
  }
  // Authenticates `c` as `name`; the answer the peer got.
  FakePeer::Received login(LoopbackConn& c, const std::string& name,
                           const std::vector<std::uint8_t>& secret) {
    return core.ask(c, auth_message(c.peer(), name, secret));
  }
  std::size_t failures(ConnHandle h, FailureKind k) const {
    return static_cast<std::size_t>(std::count_if(core.replies.failed.begin(), core.replies.failed.end(),
                                                  [&](const auto& f) { return f.conn == h && f.kind == k; }));
  }

  FakeRig rig;
  EchoService svc;
  Core<FakeRig, EchoService> core;
  TestRegistry reg;
  std::vector<std::unique_ptr<AuthTable>> tables;
  const std::vector<std::uint8_t> writer_secret = secret_of(1);
  const std::vector<std::uint8_t> reader_secret = secret_of(2, 16);
};

std::vector<PrincipalSpec> two_principals(std::uint32_t writer_limit = 0) {
  return {
      PrincipalSpec{"app-writer", "app", kPermRead | kPermWrite | kPermDelete, writer_limit, secret_of(1)},
      PrincipalSpec{"app-reader", "app", kPermRead, 0, secret_of(2, 16)}};
}

// ---- AUTH --------------------------------------------------------------------------------------------

TEST(CoreAuth, RightProofOpensTheConnectionWithThePrincipalsTenantAndPermissions) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals()));
  EXPECT_EQ(f.core.res->auth_applied.load(), 1u);
  LoopbackConn& c = f.open_awaiting();
  EXPECT_EQ(c.cc().auth, AuthState::kAwaiting);
  EXPECT_EQ(c.cc().principal, nullptr);
  const FakePeer::Received a = f.login(c, "app-writer", f.writer_secret);
  ASSERT_EQ(a.type, MessageType::kAuthAnswer);
  EXPECT_EQ(a.cookie, 77u);
  EXPECT_EQ(a.auth_status, 0u);
  // The gateway proved the secret too: Pg over the same transcript.
  auth::Proof pg{};
  ASSERT_TRUE(auth::compute_proof(auth::Role::kGateway, f.writer_secret,
                                  client_transcript(c.peer(), nonce_of(10), "app-writer"), &pg));
  EXPECT_EQ(a.auth_proof, pg);
  const CoreConn& cc = c.cc();
  EXPECT_EQ(cc.auth, AuthState::kOpen);
  ASSERT_NE(cc.principal, nullptr);
  EXPECT_EQ(cc.principal, f.tables[0]->find("app-writer"));
  EXPECT_EQ(cc.tenant_id, f.reg.tenant_id("app"));
  EXPECT_NE(cc.tenant_id, 0u);
  EXPECT_EQ(cc.perms, kPermRead | kPermWrite | kPermDelete);
  EXPECT_EQ(f.reg.usage("app-writer").connections.load(), 1u);
  // Requests reach the service now.
  const FakePeer::Received r = f.core.ask(c, echo_request(5));
  EXPECT_EQ(r.type, MessageType::kInlineResponse);
  EXPECT_EQ(f.svc.requests, 1u);
  const CoreCounters& k = f.core.counters();
  EXPECT_EQ(k.auth_ok, 1u);
  EXPECT_EQ(k.auth_denied[kDenied] + k.auth_denied[kLimit] + k.auth_unauthenticated + k.auth_timeouts, 0u);
  EXPECT_TRUE(f.core.replies.failed.empty());
  f.core.close(c);
  f.core.settle();
  EXPECT_EQ(f.core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(f.reg.usage("app-writer").connections.load(), 0u) << "a close frees the principal's connection";
}

// An AUTH that came before ADOPT (the client sends it as soon as it is established) is parked and served
// at ADOPT like any early message.
TEST(CoreAuth, AuthBeforeAdoptIsServedAtAdopt) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals()));
  LoopbackOptions o;
  o.auth_required = true;
  o.gateway_nonce = nonce_of(3);
  LoopbackConn& c = f.core.open(o);
  ASSERT_TRUE(c.peer().send(auth_message(c.peer(), "app-reader", f.reader_secret)));
  f.rig.dev.run_all();
  f.core.turn();
  EXPECT_EQ(f.core.counters().early_rx, 1u);
  f.core.adopt(c);
  f.core.settle();
  ASSERT_EQ(c.peer().inbox.size(), 1u);
  EXPECT_EQ(c.peer().inbox.front().auth_status, 0u);
  EXPECT_EQ(c.cc().auth, AuthState::kOpen);
  EXPECT_EQ(c.cc().perms, kPermRead);
}

// A denial is answered first; FAILED kAuthDenied follows only once the answer's send completed, so control's
// disconnect cannot overtake it.
void expect_denied_after_the_answer(AuthFixture& f, LoopbackConn& c, const protocol::Message& m,
                                    std::uint32_t status) {
  ASSERT_TRUE(c.peer().send(m));
  f.rig.dev.run(c.peer().qp());  // the AUTH lands
  f.core.turn();                 // served: the answer is posted, not run yet
  EXPECT_EQ(c.cc().auth, AuthState::kDenied);
  EXPECT_EQ(f.failures(c.handle(), FailureKind::kAuthDenied), 0u) << "FAILED before the answer went out";
  EXPECT_FALSE(c.qp().send_queue().empty());
  EXPECT_TRUE(c.qp().send_queue().back().signaled) << "the answer's completion must be seen";
  f.core.settle();
  ASSERT_EQ(c.peer().inbox.size(), 1u);
  const FakePeer::Received& a = c.peer().inbox.front();
  EXPECT_EQ(a.type, MessageType::kAuthAnswer);
  EXPECT_EQ(a.auth_status, status);
  EXPECT_EQ(a.auth_proof, auth::Proof{});
  ASSERT_EQ(f.failures(c.handle(), FailureKind::kAuthDenied), 1u);
  EXPECT_EQ(f.core.replies.failed.back().status, status);
  EXPECT_EQ(close_reason_for(FailureKind::kAuthDenied), CloseReason::kAuthDenied);
  EXPECT_EQ(c.cc().state, CoreConnState::kFailed);
  EXPECT_EQ(c.cc().principal, nullptr);
  EXPECT_EQ(f.svc.requests, 0u);
}

TEST(CoreAuth, WrongProofIsAnsweredDeniedThenFailed) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals()));
  LoopbackConn& c = f.open_awaiting();
  expect_denied_after_the_answer(f, c, auth_message(c.peer(), "app-writer", secret_of(9)), kDenied);
  EXPECT_EQ(f.core.counters().auth_denied[kDenied], 1u);
  EXPECT_EQ(f.core.counters().auth_ok, 0u);
  EXPECT_EQ(f.reg.usage("app-writer").connections.load(), 0u);
  f.core.close(c, CloseReason::kAuthDenied);
  f.core.settle();
  EXPECT_EQ(f.core.replies.closed_count(c.handle()), 1u);
}

TEST(CoreAuth, UnknownPrincipalIsDeniedLikeAWrongProof) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals()));
  LoopbackConn& c = f.open_awaiting();
  expect_denied_after_the_answer(f, c, auth_message(c.peer(), "nobody", f.writer_secret), kDenied);
  EXPECT_EQ(f.core.counters().auth_denied[kDenied], 1u);
}

TEST(CoreAuth, UnsupportedMechanismIsDeniedLikeAWrongProof) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals()));
  LoopbackConn& c = f.open_awaiting();
  expect_denied_after_the_answer(f, c, auth_message(c.peer(), "app-writer", f.writer_secret, 2), kDenied);
  EXPECT_EQ(f.reg.usage("app-writer").connections.load(), 0u);
}

TEST(CoreAuth, NoTableYetDeniesEveryAuth) {
  AuthFixture f;
  LoopbackConn& c = f.open_awaiting();
  expect_denied_after_the_answer(f, c, auth_message(c.peer(), "app-writer", f.writer_secret), kDenied);
}

// What the peer sends after its denial is dropped, not served and not answered.
TEST(CoreAuth, MessagesAfterADenialAreDropped) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals()));
  LoopbackConn& c = f.open_awaiting();
  ASSERT_TRUE(c.peer().send(auth_message(c.peer(), "app-writer", secret_of(9))));
  ASSERT_TRUE(c.peer().send(echo_request(1)));
  ASSERT_TRUE(c.peer().send(auth_message(c.peer(), "app-writer", f.writer_secret)));
  f.core.settle();
  EXPECT_EQ(f.svc.requests, 0u);
  ASSERT_EQ(c.peer().inbox.size(), 1u);
  EXPECT_EQ(c.peer().inbox.front().auth_status, kDenied);
  EXPECT_EQ(f.failures(c.handle(), FailureKind::kAuthDenied), 1u);
  EXPECT_EQ(f.core.counters().auth_ok, 0u);
  EXPECT_EQ(f.core.counters().auth_unauthenticated, 0u);
}

// ---- messages before AUTH --------------------------------------------------------------------------------

TEST(CoreAuth, RequestBeforeAuthFailsTheConnectionAndIsCounted) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals()));
  LoopbackConn& c = f.open_awaiting();
  ASSERT_TRUE(c.peer().send(echo_request(1)));
  f.core.settle();
  EXPECT_EQ(f.svc.requests, 0u);
  EXPECT_TRUE(c.peer().inbox.empty());
  ASSERT_EQ(f.failures(c.handle(), FailureKind::kProtocol), 1u);
  EXPECT_EQ(f.core.replies.failed[0].status,
            kUnexpectedStatusBase + static_cast<std::uint32_t>(MessageType::kInlineRequest));
  EXPECT_EQ(f.core.counters().auth_unauthenticated, 1u);
}

TEST(CoreAuth, AnswerBeforeAuthFailsTheConnectionToo) {
  AuthFixture f;
  LoopbackConn& c = f.open_awaiting();
  ASSERT_TRUE(c.peer().send(protocol::make_auth_answer(1, 0, auth::Proof{})));
  f.core.settle();
  EXPECT_EQ(f.failures(c.handle(), FailureKind::kProtocol), 1u);
  EXPECT_EQ(f.core.counters().auth_unauthenticated, 1u);
}

TEST(CoreAuth, NoopBeforeAuthIsFine) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals()));
  LoopbackConn& c = f.open_awaiting();
  protocol::Message noop;
  std::vector<std::uint8_t> bytes(protocol::kHeaderSize);
  const auto enc = protocol::encode_message(noop, c.peer().session(), bytes);
  ASSERT_EQ(enc.error, protocol::WireError::kOk);
  ASSERT_TRUE(c.peer().send_raw(bytes));
  f.core.settle();
  EXPECT_EQ(f.core.counters().msgs_rx[static_cast<std::size_t>(MessageType::kNoop)], 1u);
  EXPECT_TRUE(f.core.replies.failed.empty());
  EXPECT_EQ(c.cc().auth, AuthState::kAwaiting);
  // The raw NOOP went past the peer's credit machine (tainted: it cannot check the credits the gateway
  // returns from here on), so the AUTH is judged by the gateway's side.
  ASSERT_TRUE(c.peer().send(auth_message(c.peer(), "app-writer", f.writer_secret)));
  f.core.settle();
  EXPECT_TRUE(c.peer().tainted());
  EXPECT_EQ(c.cc().auth, AuthState::kOpen);
  EXPECT_EQ(c.cc().principal, f.tables[0]->find("app-writer"));
  EXPECT_EQ(f.core.counters().auth_ok, 1u);
  EXPECT_EQ(f.core.counters().msgs_tx[static_cast<std::size_t>(MessageType::kAuthAnswer)], 1u);
  EXPECT_TRUE(f.core.replies.failed.empty());
  EXPECT_EQ(f.core.counters().auth_unauthenticated, 0u);
}

TEST(CoreAuth, SecondAuthFailsTheConnectionAndFreesItsPlace) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals()));
  LoopbackConn& c = f.open_awaiting();
  ASSERT_EQ(f.login(c, "app-writer", f.writer_secret).auth_status, 0u);
  EXPECT_EQ(f.reg.usage("app-writer").connections.load(), 1u);
  ASSERT_TRUE(c.peer().send(auth_message(c.peer(), "app-writer", f.writer_secret)));
  f.core.settle();
  ASSERT_EQ(f.failures(c.handle(), FailureKind::kProtocol), 1u);
  EXPECT_EQ(f.core.replies.failed[0].status,
            kUnexpectedStatusBase + static_cast<std::uint32_t>(MessageType::kAuth));
  EXPECT_EQ(f.core.counters().auth_unauthenticated, 1u);
  EXPECT_EQ(f.reg.usage("app-writer").connections.load(), 0u) << "a failed connection holds no place";
  EXPECT_EQ(c.cc().principal, nullptr);
}

// ---- the deadline ----------------------------------------------------------------------------------------

TEST(CoreAuth, NoAuthWithinTheTimeoutFailsTheConnection) {
  CoreConfig cfg = test_core_config();
  cfg.auth_timeout_us = 30'000;
  AuthFixture f(cfg);
  f.apply(f.reg.build(two_principals()));
  LoopbackConn& c = f.open_awaiting();
  f.core.turn();
  EXPECT_TRUE(f.core.replies.failed.empty()) << "failed before its deadline";
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  f.core.turn();
  ASSERT_EQ(f.failures(c.handle(), FailureKind::kAuthTimeout), 1u);
  EXPECT_EQ(close_reason_for(FailureKind::kAuthTimeout), CloseReason::kAuthTimeout);
  EXPECT_EQ(f.core.counters().auth_timeouts, 1u);
  // An authenticated connection has no deadline.
  LoopbackConn& d = f.open_awaiting(2);
  ASSERT_EQ(f.login(d, "app-reader", f.reader_secret).auth_status, 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  f.core.turn();
  EXPECT_EQ(f.core.replies.failed.size(), 1u);
  EXPECT_EQ(f.core.counters().auth_timeouts, 1u);
}

// CONFIG kAuthTimeoutUs: connections adopted from then on get the new deadline; 0 is refused and counted.
TEST(CoreAuth, AuthTimeoutTakesANewValueFromControl) {
  CoreConfig cfg = test_core_config();
  cfg.auth_timeout_us = 600'000'000;
  AuthFixture f(cfg);
  LoopbackConn& early = f.open_awaiting(1);
  f.core.res->control_mailbox().send_st(ToCore::config(ConfigKey::kAuthTimeoutUs, 1000));
  f.core.turn();
  LoopbackConn& late = f.open_awaiting(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  f.core.turn();
  EXPECT_EQ(f.failures(late.handle(), FailureKind::kAuthTimeout), 1u);
  EXPECT_EQ(f.failures(early.handle(), FailureKind::kAuthTimeout), 0u);
  f.core.res->control_mailbox().send_st(ToCore::config(ConfigKey::kAuthTimeoutUs, 0));
  f.core.turn();
  EXPECT_EQ(f.core.counters().errors[static_cast<std::size_t>(CoreError::kUnexpected)], 1u);
}

TEST(CoreResourcesAuth, ZeroAuthTimeoutIsRefusedAtSetup) {
  FakeRig rig;
  CoreConfig cfg = test_core_config();
  cfg.auth_timeout_us = 0;
  std::string err;
  EXPECT_EQ(CoreResources::create(0, cfg, rig.device(), &err), nullptr);
  EXPECT_NE(err.find("security.auth_timeout_ms"), std::string::npos) << err;
}

// ---- the connection limit --------------------------------------------------------------------------------

TEST(CoreAuth, ConnectionLimitHoldsExactlyAtTheBoundaryAndACloseFreesAPlace) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals(2)));
  LoopbackConn& a = f.open_awaiting(1);
  LoopbackConn& b = f.open_awaiting(2);
  LoopbackConn& x = f.open_awaiting(3);
  EXPECT_EQ(f.login(a, "app-writer", f.writer_secret).auth_status, 0u);
  EXPECT_EQ(f.login(b, "app-writer", f.writer_secret).auth_status, 0u);
  EXPECT_EQ(f.reg.usage("app-writer").connections.load(), 2u);
  expect_denied_after_the_answer(f, x, auth_message(x.peer(), "app-writer", f.writer_secret), kLimit);
  EXPECT_EQ(f.core.counters().auth_denied[kLimit], 1u);
  EXPECT_EQ(f.reg.usage("app-writer").connections.load(), 2u) << "a refused connection takes no place";
  // Another principal is not limited by this one's count.
  f.core.close(x, CloseReason::kAuthDenied);
  f.core.settle();
  f.core.destroy(x);
  LoopbackConn& r = f.open_awaiting(4);
  EXPECT_EQ(f.login(r, "app-reader", f.reader_secret).auth_status, 0u);
  // A close frees exactly one place.
  f.core.close(a);
  f.core.settle();
  EXPECT_EQ(f.reg.usage("app-writer").connections.load(), 1u);
  f.core.destroy(a);
  LoopbackConn& y = f.open_awaiting(5);
  EXPECT_EQ(f.login(y, "app-writer", f.writer_secret).auth_status, 0u);
  EXPECT_EQ(f.reg.usage("app-writer").connections.load(), 2u);
  EXPECT_EQ(f.core.counters().auth_ok, 4u);
}

// ---- table swaps -----------------------------------------------------------------------------------------

// One swap: a removed principal, one with narrowed permissions and one moved to another tenant are revoked;
// one whose permissions widened is repointed at the new entry, keeps its place in the usage count and
// goes on serving.
TEST(CoreAuth, NewTableRevokesWhatItNoLongerAllowsAndRepointsTheRest) {
  CoreConfig cfg = test_core_config();
  cfg.max_conns = 5;
  AuthFixture f(cfg);
  const std::uint8_t rw = kPermRead | kPermWrite;
  f.apply(f.reg.build({PrincipalSpec{"gone", "app", rw, 0, secret_of(1)},
                       PrincipalSpec{"narrowed", "app", rw, 0, secret_of(2)},
                       PrincipalSpec{"moved", "app", rw, 0, secret_of(3)},
                       PrincipalSpec{"kept", "app", kPermRead, 3, secret_of(4)}}));
  LoopbackConn& gone = f.open_awaiting(1);
  LoopbackConn& narrowed = f.open_awaiting(2);
  LoopbackConn& moved = f.open_awaiting(3);
  LoopbackConn& kept = f.open_awaiting(4);
  LoopbackConn& waiting = f.open_awaiting(5);  // not authenticated yet: checked when its AUTH comes
  ASSERT_EQ(f.login(gone, "gone", secret_of(1)).auth_status, 0u);
  ASSERT_EQ(f.login(narrowed, "narrowed", secret_of(2)).auth_status, 0u);
  ASSERT_EQ(f.login(moved, "moved", secret_of(3)).auth_status, 0u);
  ASSERT_EQ(f.login(kept, "kept", secret_of(4)).auth_status, 0u);
  PrincipalUsage* kept_usage = kept.cc().auth_usage;
  EXPECT_EQ(kept_usage, &f.reg.usage("kept"));
  f.apply(f.reg.build({PrincipalSpec{"narrowed", "app", kPermRead, 0, secret_of(2)},
                       PrincipalSpec{"moved", "other", rw, 0, secret_of(3)},
                       PrincipalSpec{"kept", "app", kPermRead | kPermDelete, 3, secret_of(4)}}));
  EXPECT_EQ(f.core.res->auth_applied.load(), 2u);
  for (LoopbackConn* c : {&gone, &narrowed, &moved}) {
    ASSERT_EQ(f.failures(c->handle(), FailureKind::kRevoked), 1u);
    EXPECT_EQ(c->cc().state, CoreConnState::kFailed);
    EXPECT_EQ(c->cc().principal, nullptr);
  }
  for (const auto& fl : f.core.replies.failed) EXPECT_EQ(fl.status, kRevokedPrincipal);
  EXPECT_EQ(close_reason_for(FailureKind::kRevoked), CloseReason::kRevoked);
  EXPECT_EQ(f.core.counters().revoked_principal, 3u);
  EXPECT_EQ(f.core.counters().revoked_unauthenticated, 0u);
  for (const char* n : {"gone", "narrowed", "moved"}) EXPECT_EQ(f.reg.usage(n).connections.load(), 0u) << n;
  // The survivor points into the new table, with its wider rights; its place in the count is the same object.
  const CoreConn& k = kept.cc();
  EXPECT_EQ(k.state, CoreConnState::kOwned);
  EXPECT_EQ(k.principal, f.tables[1]->find("kept"));
  EXPECT_EQ(k.perms, kPermRead | kPermDelete);
  EXPECT_EQ(k.auth_usage, kept_usage);
  EXPECT_EQ(f.tables[1]->find("kept")->usage, kept_usage);
  EXPECT_EQ(kept_usage->connections.load(), 1u);
  EXPECT_EQ(f.core.ask(kept, echo_request(9)).type, MessageType::kInlineResponse);
  // The waiting connection authenticates against the new table: the removed principal is unknown now.
  EXPECT_EQ(waiting.cc().state, CoreConnState::kOwned);
  EXPECT_EQ(f.login(waiting, "gone", secret_of(1)).auth_status, kDenied);
  f.core.close(kept);
  f.core.settle();
  EXPECT_EQ(kept_usage->connections.load(), 0u);
}

// Usage objects are the registry's per name; should a table ever carry another object for the same name, the
// connection's place moves with it (the limit stays exact).
TEST(CoreAuth, RepointMovesThePlaceWhenTheUsageObjectDiffers) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals()));
  LoopbackConn& c = f.open_awaiting();
  ASSERT_EQ(f.login(c, "app-writer", f.writer_secret).auth_status, 0u);
  std::unique_ptr<AuthTable> t = f.reg.build(two_principals());
  PrincipalUsage other;
  for (PrincipalEntry& e : t->principals) {
    if (e.name == "app-writer") e.usage = &other;
  }
  f.apply(std::move(t));
  EXPECT_EQ(c.cc().state, CoreConnState::kOwned);
  EXPECT_EQ(f.reg.usage("app-writer").connections.load(), 0u);
  EXPECT_EQ(other.connections.load(), 1u);
  f.core.close(c);
  f.core.settle();
  EXPECT_EQ(other.connections.load(), 0u);
}

TEST(CoreAuth, NullTableRevokesEveryAuthenticatedConnection) {
  AuthFixture f;
  f.apply(f.reg.build(two_principals()));
  LoopbackConn& c = f.open_awaiting();
  ASSERT_EQ(f.login(c, "app-reader", f.reader_secret).auth_status, 0u);
  const std::uint64_t applied = f.core.res->auth_applied.load();
  f.core.res->control_mailbox().send_st(ToCore::config(ConfigKey::kAuthTable, 0));
  f.core.turn();
  EXPECT_EQ(f.failures(c.handle(), FailureKind::kRevoked), 1u);
  EXPECT_EQ(f.core.res->auth_applied.load(), applied);
}

// A connection admitted while authentication was off keeps working under a table that does not require it,
// and is revoked by one that does.
TEST(CoreAuth, TableThatRequiresAuthenticationRevokesUnauthenticatedConnections) {
  AuthFixture f;
  LoopbackConn& c = f.core.open();  // auth off: open from the start
  f.core.adopt(c);
  EXPECT_EQ(f.core.ask(c, echo_request(1)).type, MessageType::kInlineResponse);
  f.apply(f.reg.build(two_principals(), false));
  EXPECT_TRUE(f.core.replies.failed.empty());
  EXPECT_EQ(f.core.ask(c, echo_request(2)).type, MessageType::kInlineResponse);
  f.apply(f.reg.build(two_principals(), true));
  ASSERT_EQ(f.failures(c.handle(), FailureKind::kRevoked), 1u);
  EXPECT_EQ(f.core.replies.failed[0].status, kRevokedUnauthenticated);
  EXPECT_EQ(f.core.counters().revoked_unauthenticated, 1u);
  EXPECT_EQ(f.core.counters().revoked_principal, 0u);
}

#if RDMAGATE_TEST_AUTH_REGISTRY
// The registry the daemon builds its tables with keeps one usage object per principal name for the process:
// a reload with the same principal repoints the connection at the same object (its place in the count stays);
// a reload without it revokes the connection and frees its place; the name coming back finds the same object.
TEST(CoreAuth, ReloadsThroughTheDaemonsRegistryKeepTheConnectionCount) {
  AuthFixture f;
  AuthRegistry reg;
  conf::SecurityConfig sec;
  sec.authentication = conf::Authentication::kRequired;
  sec.tenants = {conf::TenantConfig{"app", 0, 0}};
  sec.principals = {conf::PrincipalConfig{"app-writer", "app", kPermRead | kPermWrite, 1}};
  const conf::Secrets secrets(std::vector<conf::PrincipalSecret>{{"app-writer", f.writer_secret}});
  std::string err;
  std::unique_ptr<AuthTable> t1 = reg.build(sec, secrets, &err);
  ASSERT_NE(t1, nullptr) << err;
  PrincipalUsage* usage = t1->find("app-writer")->usage;
  f.apply(std::move(t1));
  LoopbackConn& c = f.open_awaiting(1);
  ASSERT_EQ(f.login(c, "app-writer", f.writer_secret).auth_status, 0u);
  EXPECT_EQ(c.cc().auth_usage, usage);
  std::unique_ptr<AuthTable> t2 = reg.build(sec, secrets, &err);  // a SIGHUP with the same principals
  ASSERT_NE(t2, nullptr) << err;
  EXPECT_EQ(t2->find("app-writer")->usage, usage);
  f.apply(std::move(t2));
  EXPECT_EQ(c.cc().state, CoreConnState::kOwned);
  EXPECT_EQ(c.cc().principal, f.tables[1]->find("app-writer"));
  EXPECT_EQ(c.cc().auth_usage, usage);
  EXPECT_EQ(usage->connections.load(), 1u);
  // The limit (1) still counts the connection after the reload.
  LoopbackConn& d = f.open_awaiting(2);
  EXPECT_EQ(f.login(d, "app-writer", f.writer_secret).auth_status, kLimit);
  // A reload without the principal revokes the connection and frees its place.
  conf::SecurityConfig without = sec;
  without.principals.clear();
  std::unique_ptr<AuthTable> t3 = reg.build(without, conf::Secrets(), &err);
  ASSERT_NE(t3, nullptr) << err;
  f.apply(std::move(t3));
  EXPECT_EQ(f.failures(c.handle(), FailureKind::kRevoked), 1u);
  EXPECT_EQ(usage->connections.load(), 0u);
  std::unique_ptr<AuthTable> t4 = reg.build(sec, secrets, &err);  // and back
  ASSERT_NE(t4, nullptr) << err;
  EXPECT_EQ(t4->find("app-writer")->usage, usage);
  f.apply(std::move(t4));
  EXPECT_EQ(f.core.res->auth_applied.load(), 4u);
}
#endif

// ---- telemetry -------------------------------------------------------------------------------------------

// The counters reach their telemetry slots (the loop publishes its totals when a run ends).
TEST(CoreAuth, CountersArePublishedInTheirSlots) {
  CoreConfig cfg = test_core_config();
  cfg.max_conns = 5;
  AuthFixture f(cfg);
  auto block = std::make_unique<telemetry::CoreStats>();
  f.core.res->stats = block.get();
  f.apply(f.reg.build(two_principals(1)));
  LoopbackConn& ok = f.open_awaiting(1);
  LoopbackConn& limited = f.open_awaiting(2);
  LoopbackConn& wrong = f.open_awaiting(3);
  LoopbackConn& early = f.open_awaiting(4);
  LoopbackConn& unauth = f.core.open();
  f.core.adopt(unauth);
  ASSERT_EQ(f.login(ok, "app-writer", f.writer_secret).auth_status, 0u);
  ASSERT_EQ(f.login(limited, "app-writer", f.writer_secret).auth_status, kLimit);
  ASSERT_EQ(f.login(wrong, "app-reader", f.writer_secret).auth_status, kDenied);
  ASSERT_TRUE(early.peer().send(echo_request(1)));
  f.core.settle();
  f.apply(
      f.reg.build({PrincipalSpec{"app-reader", "app", kPermRead, 0, secret_of(2, 16)}}));  // app-writer gone
  const telemetry::CoreStats& s = *block;
  EXPECT_EQ(s.load(telemetry::auth_result_stat(0)), 1u);
  EXPECT_EQ(s.load(telemetry::auth_result_stat(1)), 1u);
  EXPECT_EQ(s.load(telemetry::auth_result_stat(2)), 1u);
  EXPECT_EQ(s.load(telemetry::auth_failure_stat(0)), 1u);
  EXPECT_EQ(s.load(telemetry::auth_failure_stat(1)), 0u);
  EXPECT_EQ(s.load(telemetry::revoked_stat(0)), 1u);
  EXPECT_EQ(s.load(telemetry::revoked_stat(1)), 0u) << "allowed_clients is control's";
  EXPECT_EQ(s.load(telemetry::revoked_stat(2)), 1u);
  f.core.res->stats = nullptr;
}

// ---- authentication off ----------------------------------------------------------------------------------

// A connection without authentication starts open: requests are served at once, with every permission and
// the no-authentication namespace; an AUTH on it is a protocol violation like any unexpected type.
TEST(CoreAuth, WithAuthenticationOffTheConnectionIsOpenAndAuthIsUnexpected) {
  AuthFixture f;
  LoopbackConn& c = f.core.open();
  f.core.adopt(c);
  EXPECT_EQ(c.cc().auth, AuthState::kOpen);
  EXPECT_EQ(c.cc().perms, kPermAll);
  EXPECT_EQ(c.cc().tenant_id, 0u);
  EXPECT_EQ(f.core.ask(c, echo_request(1)).type, MessageType::kInlineResponse);
  ASSERT_TRUE(c.peer().send(auth_message(c.peer(), "app-writer", f.writer_secret)));
  f.core.settle();
  ASSERT_EQ(f.failures(c.handle(), FailureKind::kProtocol), 1u);
  EXPECT_EQ(f.core.counters().errors[static_cast<std::size_t>(CoreError::kUnexpected)], 1u);
  EXPECT_EQ(f.core.counters().auth_unauthenticated, 0u);
  EXPECT_EQ(f.core.counters().auth_ok + f.core.counters().auth_denied[kDenied], 0u);
}

// ---- the initiator's side --------------------------------------------------------------------------------

// An echo service that also takes AUTH_ANSWERs, as the client's service does.
struct AnswerTakingService : EchoService {
  std::vector<std::uint32_t> answers;
  template <typename Api>
  void on_auth_answer_st(Api&, CoreConn&, const protocol::Message& m) noexcept {
    answers.push_back(m.auth_status);
  }
};

TEST(CoreAuth, AuthAnswerGoesToAServiceThatTakesItAndFailsOneThatDoesNot) {
  FakeRig rig;
  AnswerTakingService svc;
  Core<FakeRig, AnswerTakingService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);
  ASSERT_TRUE(c.peer().send(protocol::make_auth_answer(3, kLimit, auth::Proof{})));
  core.settle();
  ASSERT_EQ(svc.answers.size(), 1u);
  EXPECT_EQ(svc.answers[0], kLimit);
  EXPECT_TRUE(core.replies.failed.empty());

  AuthFixture f;  // EchoService: no hook
  LoopbackConn& d = f.core.open();
  f.core.adopt(d);
  ASSERT_TRUE(d.peer().send(protocol::make_auth_answer(3, 0, auth::Proof{})));
  f.core.settle();
  EXPECT_EQ(f.failures(d.handle(), FailureKind::kProtocol), 1u);
}

}  // namespace
}  // namespace rdmagate::dataplane

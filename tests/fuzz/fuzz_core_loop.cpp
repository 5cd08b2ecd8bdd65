// libFuzzer target: the core loop (CoreLoop<FakeBackend, ...> running the object service over a real store)
// driven through the fake device backend (tests/engine/fake_backend.hpp) by a schedule read from the input.
// Inputs whose first byte is even run the same schedule through CoreLoop<SimMlx5Backend, ...>: the real mlx5
// hot path writing WQEs and parsing CQEs against the simulated NIC (tests/engine/sim_mlx5.hpp) in front of
// the same device model. (The first byte is read, not consumed: odd-first inputs, the checked-in seeds among
// them, mean what they always meant.) Inputs whose first byte has bit 1 clear run with authentication on
// (the checked-in seeds all have it set): every connection must send AUTH first (dataplane/core_auth.hpp),
// peers send AUTHs right or wrong (secret, name, mechanism), and control swaps principal tables that remove
// principals, narrow or widen their rights or move them to another tenant, freeing each table once the core
// applied a later one. There the post faults, which an mlx5 QP cannot have, become the NIC's:
// a dropped doorbell (taken up by the next one, or by a kick once the schedule is over) or scatter-to-CQE.
//
// The input is a program of one-byte actions and their arguments: peers send valid requests (echo, sink,
// PUT/GET/DELETE inline, PUT by read chunk, GET by write chunk, now and then naming a bad fragment) or raw
// bytes (random, or a valid message mutated, or valid but past the peer's credit machine); the device runs
// or fails the oldest work request of a QP of the input's choice (so completions of both connections come in
// any order), or flushes; the CQ is shuffled across work queues or fails a poll; a post fails at the Nth
// work request; control ADOPTs, CLOSEs (at any point, before ADOPT too) and reopens; another core PUTs and
// DELETEs in the store. Control answers every FAILED with CLOSE and frees a connection's memory right after
// its CLOSED, so a later touch of it by the core is a use after free under ASan.
//
// Invariants (RDMAGATE_FUZZ_CHECK), during the run and once everything is closed:
//   - CLOSED comes once per connection, only after CLOSE, only when the device holds nothing of it (no
//     posted work request, no CQE), with no bulk transfer in flight; FAILED never after CLOSED.
//   - every bulk transfer the service started ends exactly once, through one hook, before CLOSED.
//   - a healthy connection, once quiescent, has nothing stuck: no work request waiting, no message queued
//     in either credit machine, and its credits are conserved (every receive of each end is a credit of
//     the other or owed back) with both sides having received exactly what the other sent.
//   - after every loop iteration the core's accounting matches the device's (fake::audit): receives posted,
//     the SQ FIFO against the device's send queue entry for entry, every tx descriptor in one place only.
//   - what the gateway sends always decodes at the peer; each request is answered at most once; values come
//     back whole (self-describing values: a torn or misdirected one fails its own check).
//   - every pin and reservation is released: after deleting every key the store is empty to the byte.
//   - the loop never hands the device a segment outside its registration nor overfills a queue.
//   - the CQ never overflows (it holds every completion a connection can have outstanding).
//   - through the simulated NIC: nothing the hardware would reject (a WQE it cannot parse, a doorbell that
//     disagrees with its record, ring space overwritten before its CQE was consumed) and no CQ ring overrun.
//   - with authentication: no answer but AUTH_ANSWER reaches a peer before an AUTH_ANSWER ok; ok only for an
//     AUTH with the right secret, name and mechanism, with a gateway proof that verifies; a wrong one is
//     denied; FAILED kAuthDenied only once the answer's send is off the queue; every authenticated owned
//     connection points into the core's current table with that entry's tenant and rights; each principal's
//     connection count equals the connections counted in it, never above its limit, and 0 at the end.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/auth_table.hpp"
#include "dataplane/core_loop.hpp"
#include "protocol/auth.hpp"
#include "protocol/object_wire.hpp"
#include "services/object/object_service.hpp"
#include "services/storage/memory/store.hpp"
#include "tests/engine/fake_backend.hpp"
#include "tests/engine/sim_mlx5.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "tests/services/storage/memory/store_test_peer.hpp"

namespace {

using namespace rdmagate;
using namespace rdmagate::dataplane;
using fake::FakeBackend;
using fake::FakeCq;
using fake::FakeDevice;
using fake::FakePeer;
using fake::FakeQp;
using fake::LoopbackConn;
using fake::LoopbackOptions;
using fake::Queue;
using fake::SimMlx5Backend;
using fake::SimMlx5Device;
using protocol::MessageType;
using protocol::ObjectOpcode;

constexpr std::size_t kConns = 2;
constexpr std::array<std::string_view, 4> kKeys = {"k0", "k1", "key2", "k3"};
constexpr std::uint32_t kBufSize = 256;
constexpr std::size_t kSlot = 4096;  // a peer's bulk memory: 4 source slots, then 4 destination slots
constexpr std::size_t kSlots = 4;
constexpr std::size_t kPeerBulk = 2 * kSlots * kSlot;
constexpr std::uint8_t kSentinel = 0xe7;
constexpr std::uint32_t kValueMagic = 0x5a17e0d1;

// Authentication mode: three principals (sorted names), two tenants; limits never change across tables.
constexpr std::size_t kPrincipals = 3;
constexpr std::array<std::string_view, kPrincipals> kPrincipalNames = {"p0", "p1", "p2"};
constexpr std::array<std::uint8_t, kPrincipals> kPrincipalPerms = {kPermRead | kPermWrite | kPermDelete,
                                                                   kPermRead, kPermRead | kPermWrite};
constexpr std::array<std::size_t, kPrincipals> kPrincipalTenant = {0, 0, 1};
constexpr std::array<std::uint32_t, kPrincipals> kPrincipalLimit = {1, 0, 2};
constexpr std::array<std::string_view, 2> kTenantNames = {"t0", "t1"};

std::vector<std::uint8_t> principal_secret(std::size_t who) {
  std::vector<std::uint8_t> s(32);
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<std::uint8_t>(who * 53 + i * 11 + 3);
  return s;
}

// ---- self-describing values: magic, seed, length, then a pattern of the seed ----------------------------

std::uint8_t value_byte(std::uint32_t seed, std::size_t i) {
  return static_cast<std::uint8_t>((i * 2654435761u >> 11) ^ (seed * 97u) ^ (i >> 7));
}
void fill_value(std::uint8_t* p, std::size_t len, std::uint32_t seed) {
  const std::uint32_t head[3] = {kValueMagic, seed, static_cast<std::uint32_t>(len)};
  for (std::size_t i = 0; i < len; ++i) {
    p[i] = i < sizeof(head) ? reinterpret_cast<const std::uint8_t*>(head)[i] : value_byte(seed, i);
  }
}
// A value that carries its header is whole and is the one it says; shorter ones say nothing.
bool value_whole(const std::uint8_t* p, std::size_t len) {
  if (len < 12) return true;
  std::uint32_t head[3];
  std::memcpy(head, p, sizeof(head));
  if (head[0] != kValueMagic || head[2] != len) return false;
  for (std::size_t i = 12; i < len; ++i) {
    if (p[i] != value_byte(head[1], i)) return false;
  }
  return true;
}

// ---- the instrumented service ---------------------------------------------------------------------------

// The object service, unchanged, behind a proxy of the loop's API that sees every transfer it starts (from a
// chunk request, or from a bulk hook that starts a parked one); the bulk hooks check that each started
// transfer ends exactly once, and only after it started.
class CountingService {
 public:
  explicit CountingService(const ObjectServiceConfig& cfg) : inner_(cfg) {}

  template <typename Loop>
  struct Api {
    Loop& loop;
    CountingService& svc;
    bool send_st(CoreConn& c, MessageType type, std::uint16_t opcode, std::uint64_t cookie,
                 std::span<const std::uint8_t> payload, std::uint32_t status = 0,
                 std::uint32_t byte_count = 0) noexcept {
      return loop.send_st(c, type, opcode, cookie, payload, status, byte_count);
    }
    bool bulk_read_st(CoreConn& c, const ChunkRequest& r, std::uint8_t* dst, std::uint32_t lkey) noexcept {
      const bool ok = loop.bulk_read_st(c, r, dst, lkey);
      if (ok) svc.started(c);
      return ok;
    }
    bool bulk_write_st(CoreConn& c, const ChunkRequest& r, const std::uint8_t* src, std::uint32_t lkey,
                       std::uint32_t len) noexcept {
      const bool ok = loop.bulk_write_st(c, r, src, lkey, len);
      if (ok && len != 0) svc.started(c);  // len 0 posts nothing and ends at once, without a hook
      return ok;
    }
    std::uint64_t now_tsc_st() const noexcept { return loop.now_tsc_st(); }
    std::uint64_t tsc_hz() const noexcept { return loop.tsc_hz(); }
    std::uint32_t tx_available_st(const CoreConn& c) const noexcept { return loop.tx_available_st(c); }
    bool quiescing_st() const noexcept { return loop.quiescing_st(); }
  };

  template <typename Loop>
  void on_adopt_st(Loop& l, CoreConn& c) noexcept {
    Api<Loop> a{l, *this};
    inner_.on_adopt_st(a, c);
  }
  template <typename Loop>
  void on_request_st(Loop& l, CoreConn& c, const protocol::Message& m) noexcept {
    Api<Loop> a{l, *this};
    inner_.on_request_st(a, c, m);
  }
  template <typename Loop>
  void on_response_st(Loop& l, CoreConn& c, const protocol::Message& m) noexcept {
    Api<Loop> a{l, *this};
    inner_.on_response_st(a, c, m);
  }
  template <typename Loop>
  void on_close_st(Loop& l, CoreConn& c) noexcept {
    Api<Loop> a{l, *this};
    inner_.on_close_st(a, c);
  }
  template <typename Loop>
  void on_chunk_request_st(Loop& l, CoreConn& c, const ChunkRequest& r) noexcept {
    Api<Loop> a{l, *this};
    inner_.on_chunk_request_st(a, c, r);
  }
  template <typename Loop>
  bool on_poll_st(Loop& l) noexcept {
    Api<Loop> a{l, *this};
    return inner_.on_poll_st(a);
  }
  std::uint64_t pending_st(const CoreConn& c) const noexcept { return inner_.pending_st(c); }
  template <typename Loop>
  void on_bulk_read_done_st(Loop& l, CoreConn& c, const BulkOp& op) noexcept {
    ended(c);
    RDMAGATE_FUZZ_CHECK(!op.failed && c.state == CoreConnState::kOwned);
    Api<Loop> a{l, *this};
    inner_.on_bulk_read_done_st(a, c, op);
  }
  template <typename Loop>
  void on_bulk_read_failed_st(Loop& l, CoreConn& c, const BulkOp& op) noexcept {
    ended(c);
    Api<Loop> a{l, *this};
    inner_.on_bulk_read_failed_st(a, c, op);
  }
  template <typename Loop>
  void on_bulk_write_done_st(Loop& l, CoreConn& c, const BulkOp& op) noexcept {
    ended(c);
    Api<Loop> a{l, *this};
    inner_.on_bulk_write_done_st(a, c, op);
  }

  bool in_flight(const CoreConn* c) const noexcept {
    return std::find(in_flight_.begin(), in_flight_.end(), c) != in_flight_.end();
  }
  std::uint64_t started_total() const noexcept { return started_; }
  std::uint64_t ended_total() const noexcept { return ended_; }
  const ObjectServiceCounters& counters() const noexcept { return inner_.counters(); }

 private:
  void started(const CoreConn& c) noexcept {
    RDMAGATE_FUZZ_CHECK(!in_flight(&c));  // one transfer per connection at a time
    in_flight_.push_back(&c);
    ++started_;
  }
  void ended(const CoreConn& c) noexcept {
    const auto it = std::find(in_flight_.begin(), in_flight_.end(), &c);
    RDMAGATE_FUZZ_CHECK(it != in_flight_.end());  // ends once, and only what was started
    in_flight_.erase(it);
    ++ended_;
  }

  ObjectService inner_;
  std::vector<const CoreConn*> in_flight_;
  std::uint64_t started_ = 0, ended_ = 0;
};

// The device the core runs on, and the model behind it that the schedule steps (tests/engine/
// core_loop_test.cpp has the same two rigs).
struct FakeRig {
  using Backend = FakeBackend;
  static constexpr bool kSim = false;
  FakeDevice dev;
  FakeDevice& model() { return dev; }
  DeviceBackend& device() { return dev; }
  FakeCq& model_cq(BackendCq& cq) { return static_cast<FakeCq&>(cq); }
  void after_turn() {}
  bool behind(const BackendQp&) const { return false; }
  void kick(BackendQp&) {}
  bool nic_clean() const { return true; }
};

struct SimMlx5Rig {
  using Backend = SimMlx5Backend;
  static constexpr bool kSim = true;
  SimMlx5Device sim;
  FakeDevice& model() { return sim.model(); }
  DeviceBackend& device() { return sim; }
  FakeCq& model_cq(BackendCq& cq) { return SimMlx5Device::model_of(cq); }
  void after_turn() { sim.sync(); }
  bool behind(const BackendQp& q) const { return sim.behind(q); }
  void kick(BackendQp& q) { sim.kick(q); }
  bool nic_clean() const { return sim.stats().nic_errors() == 0 && sim.stats().cq_overruns == 0; }
};

// ---- the world of one input -------------------------------------------------------------------------------

// What the peer of a connection asked and has not had answered yet.
struct Pending {
  enum class Kind : std::uint8_t { kEcho, kPutInline, kGetInline, kDelete, kPutChunk, kGetChunk };
  Kind kind = Kind::kEcho;
  std::vector<std::uint8_t> echo;
  int slot = -1;  // source (PUT) or destination (GET) slot of a chunk request
  std::vector<protocol::Fragment> frags;
  std::uint32_t capacity = 0;
};

// An AUTH a peer sent, and whether it should verify (right secret, known name, mechanism 1).
struct AuthSent {
  std::size_t who = kPrincipals;  // kPrincipals: a name no table has
  bool valid = false;
  protocol::auth::Nonce nc{};
};

struct Conn {
  std::unique_ptr<LoopbackConn> lc;
  std::map<std::uint64_t, AuthSent> auths;  // by cookie
  bool authenticated = false;               // the peer received AUTH_ANSWER ok
  ConnHandle handle{};
  bool adopt_sent = false;
  bool close_sent = false;
  bool closed = false;
  std::uint32_t failed = 0;
  std::uint64_t next_cookie = 0;
  std::map<std::uint64_t, Pending> pending;
  std::array<bool, kSlots> src_busy{}, dst_busy{};
};

template <typename Rig>
class World {
 public:
  using Loop = CoreLoop<typename Rig::Backend, CountingService>;

  World(FuzzedDataProvider& in, bool auth)
      : in_(in), auth_(auth), dev_(rig_.model()), region_(new std::byte[kStoreRegion]) {
    store::StoreConfig scfg;
    scfg.max_value = 8192;
    scfg.max_objects = 16;
    scfg.max_inflight = 16;
    scfg.max_cores = 2;  // core 0 is the loop's; core 1 is "another core"
    std::string err;
    store_ = store::Store::create(scfg, std::span<std::byte>(region_.get(), kStoreRegion), &err);
    RDMAGATE_FUZZ_CHECK(store_ != nullptr);
    arena_mr_ =
        dev_.register_memory(store_->arena_base(), store_->arena_bytes(), IBV_ACCESS_LOCAL_WRITE, &err);
    ObjectServiceConfig ocfg;
    ocfg.storage = &store_->core(0);
    ocfg.arena_lkey = arena_mr_->lkey;
    ocfg.max_requests = in_.ConsumeIntegralInRange<std::uint32_t>(2, 16);  // small: the table fills up too
    svc_ = std::make_unique<CountingService>(ocfg);
    CoreConfig cfg;
    cfg.memory = HugeBufferKind::kHeap;
    cfg.max_conns = kConns;
    cfg.rx_per_conn = 8;
    cfg.tx_per_conn = 12;
    cfg.buf_size = kBufSize;
    cfg.check_every = 1;
    res_ = CoreResources::create(0, cfg, rig_.device(), &err);
    RDMAGATE_FUZZ_CHECK(res_ != nullptr);
    loop_ = std::make_unique<Loop>(*res_, *svc_);
    if (auth_) apply_table(build_table(0x7, 0, 0, 0));  // before any ADOPT, as control does
    for (std::size_t i = 0; i < kConns; ++i) open(i);
  }

  ~World() {
    for (Conn& c : conns_) c.lc.reset();
  }

  void run() {
    for (int steps = 0; steps < 400 && in_.remaining_bytes() != 0; ++steps)
      act(in_.ConsumeIntegral<std::uint8_t>());
    finish();
  }

 private:
  static constexpr std::size_t kStoreRegion = 512 * 1024;

  // ---- control ----

  void open(std::size_t i) {
    Conn& c = conns_[i];
    LoopbackOptions opt;
    opt.queue_depth = static_cast<std::uint16_t>(in_.ConsumeIntegralInRange<int>(4, 8));
    opt.checksum = in_.ConsumeBool();
    opt.max_fragments = static_cast<std::uint16_t>(in_.ConsumeIntegralInRange<int>(1, 13));  // 13 fit 256 B
    opt.max_bulk_size = kSlot;
    opt.rd_depth = static_cast<std::uint16_t>(in_.ConsumeIntegralInRange<int>(1, 3));
    opt.signal_interval = static_cast<std::uint16_t>(in_.ConsumeIntegralInRange<int>(1, 8));
    opt.inline_bytes = in_.ConsumeBool() ? 128 : 0;
    opt.peer_tx = 16;
    opt.peer_bulk_bytes = kPeerBulk;
    opt.incarnation = ++opened_;
    if (auth_) {
      opt.auth_required = true;
      opt.gateway_nonce[0] = 1;  // nonzero, as control's RAND_bytes nonce is
      opt.gateway_nonce[1] = in_.ConsumeIntegral<std::uint8_t>();
    }
    std::string err;
    c = Conn{};
    c.lc = LoopbackConn::open(rig_.device(), dev_, *res_, opt, &err);
    RDMAGATE_FUZZ_CHECK(c.lc != nullptr);
    c.handle = c.lc->handle();
    std::memset(c.lc->peer().bulk(), kSentinel, kPeerBulk);
  }

  void adopt(Conn& c) {
    if (!c.lc || c.adopt_sent || c.close_sent) return;
    c.adopt_sent = true;
    res_->control_mailbox().send_st(ToCore::adopt(c.handle));
  }

  // The QP to ERR, then CLOSE. A post failure the input armed may still hit the drain marker.
  void close(Conn& c) {
    if (!c.lc || c.close_sent) return;
    c.close_sent = true;
    rig_.device().qp_to_err(c.lc->backend_qp());
    res_->control_mailbox().send_st(ToCore::close(c.handle, CloseReason::kLocal));
  }

  Conn* by_handle(ConnHandle h) {
    for (Conn& c : conns_) {
      if (c.lc && c.handle == h) return &c;
    }
    return nullptr;
  }

  // Control reading the core's replies.
  void on_closed_st(ConnHandle h) {
    Conn* c = by_handle(h);
    RDMAGATE_FUZZ_CHECK(c != nullptr);  // a CLOSED for a connection control freed: the second one
    RDMAGATE_FUZZ_CHECK(c->close_sent && !c->closed);
    RDMAGATE_FUZZ_CHECK(dev_.outstanding(c->lc->qp()) == 0);  // nothing of it left on the device or the CQ
    RDMAGATE_FUZZ_CHECK(c->lc->cc().state == CoreConnState::kClosed);
    RDMAGATE_FUZZ_CHECK(c->lc->cc().bulk_op.state == BulkState::kIdle);
    RDMAGATE_FUZZ_CHECK(!svc_->in_flight(&c->lc->cc()));
    c->closed = true;
  }
  void on_failed_st(ConnHandle h, FailureKind k, std::uint32_t status) {
    Conn* c = by_handle(h);
    RDMAGATE_FUZZ_CHECK(c != nullptr && !c->closed);
    // A denial fails the connection only once its answer left the send queue (or the answer could not be
    // sent at all: status 0). The core sends nothing on a failed connection, so this still holds here.
    if (k == FailureKind::kAuthDenied && status != 0) RDMAGATE_FUZZ_CHECK(c->lc->cc().sq_inflight() == 0);
    ++c->failed;
    failed_pending_ = true;
  }
  friend struct ReplySink;
  struct ReplySink {
    World& w;
    void on_closed_st(ConnHandle h) { w.on_closed_st(h); }
    void on_failed_st(ConnHandle h, FailureKind k, std::uint32_t s) { w.on_failed_st(h, k, s); }
  };

  // The core's accounting against the device's view (fake::audit says what it checks), after every turn.
  // (Not while the NIC has not seen a batch whose doorbell it dropped: the model lacks its newest WQEs.)
  void audit(Conn& c) {
    if (rig_.behind(c.lc->backend_qp())) return;
    const std::string why = fake::audit(c.lc->cc(), c.lc->qp());
    if (!why.empty()) std::fprintf(stderr, "audit: %s\n", why.c_str());
    RDMAGATE_FUZZ_CHECK(why.empty());
  }

  // One core turn (two iterations, the first with its timers), then control's part: replies, CLOSE for every
  // FAILED, memory freed after CLOSED.
  void turn() {
    res_->stop.store(
        false);  // run_st for two iterations, the first with its timers (FakeCq::stop_after_polls)
    rig_.model_cq(res_->cq()).stop_after_polls(&res_->stop, 2);
    loop_->run_st();
    rig_.after_turn();
    RDMAGATE_FUZZ_CHECK(rig_.nic_clean());
    ReplySink sink{*this};
    res_->control_mailbox().drain_st(sink);
    if (failed_pending_) {
      failed_pending_ = false;
      for (Conn& c : conns_) {
        if (c.lc && c.failed != 0) close(c);
      }
    }
    for (Conn& c : conns_) {
      if (c.lc && c.closed) {
        c.lc.reset();  // the core must not touch it any more
        ++freed_;
      }
      if (c.lc) audit(c);
    }
    if (auth_) check_auth();
  }

  // ---- authentication mode ----

  // A table with the principals of `present` (bit per principal); `narrow` drops all but read, `widen` adds
  // delete, `moved` puts the principal in the other tenant.
  std::unique_ptr<AuthTable> build_table(std::uint8_t present, std::uint8_t narrow, std::uint8_t widen,
                                         std::uint8_t moved) {
    auto t = std::make_unique<AuthTable>();
    t->required = true;
    t->generation = ++table_generation_;
    t->tenants.resize(kTenantNames.size());
    for (std::size_t k = 0; k < kTenantNames.size(); ++k) {
      t->tenants[k].name = std::string(kTenantNames[k]);
      t->tenants[k].id = static_cast<std::uint16_t>(k + 1);
      t->tenants[k].usage = &tenant_usage_[k];
    }
    for (std::size_t who = 0; who < kPrincipals; ++who) {
      if ((present >> who & 1) == 0) continue;
      PrincipalEntry e;
      e.name = std::string(kPrincipalNames[who]);
      e.secret = principal_secret(who);
      e.perms = kPrincipalPerms[who];
      if ((narrow >> who & 1) != 0) e.perms = kPermRead;
      if ((widen >> who & 1) != 0) e.perms |= kPermDelete;
      e.max_connections = kPrincipalLimit[who];
      e.tenant = &t->tenants[kPrincipalTenant[who] ^ (moved >> who & 1)];
      e.usage = &principal_usage_[who];
      t->principals.push_back(std::move(e));
    }
    return t;
  }

  // CONFIG kAuthTable; control keeps every table until the core applied a later one (freed in check_auth,
  // so a core that still read an old one is a use after free under ASan).
  void apply_table(std::unique_ptr<AuthTable> t) {
    const AuthTable* p = t.get();
    if (t) tables_.push_back(std::move(t));
    res_->control_mailbox().send_st(
        ToCore::config(ConfigKey::kAuthTable, reinterpret_cast<std::uintptr_t>(p)));
  }

  void send_auth(std::size_t i) {
    Conn& c = conns_[i];
    FakePeer* p = peer_of(i);
    if (p == nullptr) return;
    AuthSent a;
    a.who = in_.ConsumeIntegralInRange<std::size_t>(0, kPrincipals);
    const int how = in_.ConsumeIntegralInRange<int>(0, 3);  // 0, 1: right; 2: wrong secret; 3: mechanism
    const std::uint8_t mechanism = how == 3 ? in_.ConsumeIntegral<std::uint8_t>() : 1;
    const std::string_view name = a.who < kPrincipals ? kPrincipalNames[a.who] : std::string_view("nobody");
    const std::vector<std::uint8_t> secret = principal_secret(how == 2 ? a.who + kPrincipals : a.who);
    a.valid = a.who < kPrincipals && how != 2 && mechanism == 1;
    a.nc[0] = in_.ConsumeIntegral<std::uint8_t>();
    const protocol::Session& s = p->session();
    const protocol::auth::Transcript tr{s.local_incarnation, s.peer_incarnation, s.gateway_nonce, a.nc, name};
    protocol::auth::Proof pc{};
    RDMAGATE_FUZZ_CHECK(protocol::auth::compute_proof(protocol::auth::Role::kClient, secret, tr, &pc));
    const std::uint64_t cookie = ++c.next_cookie;
    if (p->send(protocol::make_auth_message(cookie, mechanism, name, a.nc, pc))) c.auths.emplace(cookie, a);
  }

  void swap_table() {
    if (in_.ConsumeProbability<float>() < 0.1f) {
      apply_table(nullptr);
      return;
    }
    const auto bits = [this] { return static_cast<std::uint8_t>(in_.ConsumeIntegral<std::uint8_t>() & 0x7); };
    const std::uint8_t present = bits(), narrow = bits(), widen = bits(), moved = bits();
    apply_table(build_table(present, narrow, widen, moved));
  }

  // An AUTH_ANSWER: right only for a valid AUTH, with a gateway proof that verifies.
  void take_auth_answer(Conn& c, const FakePeer::Received& r) {
    const auto it = c.auths.find(r.cookie);
    RDMAGATE_FUZZ_CHECK(it != c.auths.end() || raw_used_);
    if (it == c.auths.end()) return;
    const AuthSent a = it->second;
    c.auths.erase(it);
    if (!a.valid)
      RDMAGATE_FUZZ_CHECK(r.auth_status == static_cast<std::uint32_t>(protocol::auth::AuthStatus::kDenied));
    if (r.auth_status != 0) return;
    RDMAGATE_FUZZ_CHECK(a.valid);
    const protocol::Session& s = c.lc->peer().session();
    const protocol::auth::Transcript tr{s.local_incarnation, s.peer_incarnation, s.gateway_nonce, a.nc,
                                        kPrincipalNames[a.who]};
    protocol::auth::Proof pg{};
    RDMAGATE_FUZZ_CHECK(
        protocol::auth::compute_proof(protocol::auth::Role::kGateway, principal_secret(a.who), tr, &pg));
    RDMAGATE_FUZZ_CHECK(protocol::auth::proofs_equal(pg, r.auth_proof));
    c.authenticated = true;
  }

  // After every turn: connections point into the current table, the counts add up, old tables go.
  void check_auth() {
    const AuthTable* cur = res_->auth_table;
    std::array<std::uint32_t, kPrincipals> counted{};
    for (Conn& c : conns_) {
      if (!c.lc) continue;
      const CoreConn& cc = c.lc->cc();
      RDMAGATE_FUZZ_CHECK((cc.principal == nullptr) == (cc.auth_usage == nullptr));
      for (std::size_t who = 0; who < kPrincipals; ++who)
        counted[who] += cc.auth_usage == &principal_usage_[who];
      if (cc.principal == nullptr) continue;
      RDMAGATE_FUZZ_CHECK(cc.state == CoreConnState::kOwned && cc.auth == AuthState::kOpen);
      RDMAGATE_FUZZ_CHECK(cur != nullptr && cur->find(cc.principal->name) == cc.principal);
      RDMAGATE_FUZZ_CHECK(cc.perms == cc.principal->perms && cc.tenant_id == cc.principal->tenant->id);
    }
    for (std::size_t who = 0; who < kPrincipals; ++who) {
      const std::uint32_t n = principal_usage_[who].connections.load();
      RDMAGATE_FUZZ_CHECK(n == counted[who]);
      RDMAGATE_FUZZ_CHECK(kPrincipalLimit[who] == 0 || n <= kPrincipalLimit[who]);
    }
    const std::uint64_t applied = res_->auth_applied.load(std::memory_order_acquire);
    std::erase_if(tables_,
                  [applied](const std::unique_ptr<AuthTable>& t) { return t->generation < applied; });
  }

  // ---- the peer's requests and what comes back ----

  FakePeer* peer_of(std::size_t i) { return conns_[i].lc ? &conns_[i].lc->peer() : nullptr; }

  static protocol::Message message(MessageType t, ObjectOpcode op, std::uint64_t cookie,
                                   std::span<const std::uint8_t> payload) {
    protocol::Message m;
    m.type = t;
    m.opcode = static_cast<std::uint16_t>(op);
    m.cookie = cookie;
    m.payload = payload;
    return m;
  }

  // Splits [base, base + total) into n fragments; maybe one names memory the peer never registered.
  std::vector<protocol::Fragment> fragments(FakePeer& p, std::size_t base, std::uint32_t total,
                                            std::uint16_t n, bool corrupt) {
    std::vector<protocol::Fragment> f;
    n = std::max<std::uint16_t>(1, std::min<std::uint16_t>(n, static_cast<std::uint16_t>(total)));
    std::uint32_t off = 0;
    for (std::uint16_t i = 0; i < n; ++i) {
      const std::uint32_t len = total / n + (i < total % n ? 1 : 0);
      f.push_back(p.fragment(base + off, len));
      off += len;
    }
    if (corrupt) {
      protocol::Fragment& bad = f[in_.ConsumeIntegralInRange<std::size_t>(0, f.size() - 1)];
      if (in_.ConsumeBool()) {
        bad.rkey ^= 0x10;
      } else {
        bad.addr += kPeerBulk;  // past the registration
      }
    }
    return f;
  }

  void request(std::size_t i) {
    Conn& c = conns_[i];
    FakePeer* p = peer_of(i);
    if (p == nullptr) return;
    // With authentication a client's first message is its AUTH (mostly: a request before it must fail).
    if (auth_ && c.auths.empty() && !c.authenticated && in_.ConsumeProbability<float>() < 0.9f) {
      send_auth(i);
      return;
    }
    const std::uint8_t kind = in_.ConsumeIntegralInRange<std::uint8_t>(0, 6);
    const std::string_view key = kKeys[in_.ConsumeIntegralInRange<std::size_t>(0, kKeys.size() - 1)];
    const std::uint64_t cookie = ++c.next_cookie;
    Pending pend;
    std::vector<std::uint8_t> payload;
    protocol::Message m;
    const std::uint16_t max_frags = p->session().params.max_fragments;
    switch (kind) {
      case 0:  // echo
      case 1:  // sink: one way, never answered
        payload = in_.ConsumeBytes<std::uint8_t>(in_.ConsumeIntegralInRange<std::size_t>(0, 64));
        m = message(MessageType::kInlineRequest, kind == 0 ? ObjectOpcode::kEcho : ObjectOpcode::kSink,
                    cookie, payload);
        pend.kind = Pending::Kind::kEcho;
        pend.echo = payload;
        break;
      case 2: {  // PUT inline
        const std::size_t len =
            in_.ConsumeIntegralInRange<std::size_t>(0, protocol::max_inline_put_value(kBufSize, key.size()));
        std::vector<std::uint8_t> v(len);
        fill_value(v.data(), len, ++seed_);
        payload.resize(protocol::object_payload_size(key.size(), len));
        protocol::encode_object_payload(key, v, payload);
        m = message(MessageType::kInlineRequest, ObjectOpcode::kPut, cookie, payload);
        pend.kind = Pending::Kind::kPutInline;
        break;
      }
      case 3:
      case 4:
        payload.resize(protocol::object_payload_size(key.size(), 0));
        protocol::encode_object_payload(key, {}, payload);
        m = message(MessageType::kInlineRequest, kind == 3 ? ObjectOpcode::kGet : ObjectOpcode::kDelete,
                    cookie, payload);
        pend.kind = kind == 3 ? Pending::Kind::kGetInline : Pending::Kind::kDelete;
        break;
      case 5: {  // PUT by read chunk from a source slot that stays untouched until the answer
        const auto slot = std::find(c.src_busy.begin(), c.src_busy.end(), false);
        if (slot == c.src_busy.end()) return;
        pend.slot = static_cast<int>(slot - c.src_busy.begin());
        const auto total = in_.ConsumeIntegralInRange<std::uint32_t>(1, kSlot);
        std::uint8_t* src = p->bulk() + static_cast<std::size_t>(pend.slot) * kSlot;
        fill_value(src, total, ++seed_);
        pend.frags = fragments(*p, static_cast<std::size_t>(pend.slot) * kSlot, total,
                               in_.ConsumeIntegralInRange<std::uint16_t>(1, max_frags),
                               in_.ConsumeProbability<float>() < 0.05f);
        payload.resize(protocol::object_payload_size(key.size(), 0));
        protocol::encode_object_payload(key, {}, payload);
        m = message(MessageType::kReadChunkRequest, ObjectOpcode::kPut, cookie, payload);
        pend.kind = Pending::Kind::kPutChunk;
        *slot = true;
        break;
      }
      default: {  // GET by write chunk into a destination slot, sentinel-filled
        const auto slot = std::find(c.dst_busy.begin(), c.dst_busy.end(), false);
        if (slot == c.dst_busy.end()) return;
        pend.slot = static_cast<int>(slot - c.dst_busy.begin());
        pend.capacity = in_.ConsumeIntegralInRange<std::uint32_t>(1, kSlot);
        const std::size_t base = (kSlots + static_cast<std::size_t>(pend.slot)) * kSlot;
        std::memset(p->bulk() + base, kSentinel, kSlot);
        pend.frags =
            fragments(*p, base, pend.capacity, in_.ConsumeIntegralInRange<std::uint16_t>(1, max_frags),
                      in_.ConsumeProbability<float>() < 0.05f);
        payload.resize(protocol::object_payload_size(key.size(), 0));
        protocol::encode_object_payload(key, {}, payload);
        m = message(MessageType::kWriteChunkRequest, ObjectOpcode::kGet, cookie, payload);
        pend.kind = Pending::Kind::kGetChunk;
        *slot = true;
        break;
      }
    }
    if (!pend.frags.empty()) {
      m.chunk.count = static_cast<std::uint16_t>(pend.frags.size());
      std::copy(pend.frags.begin(), pend.frags.end(), m.chunk.fragments.begin());
    }
    if (!p->send(m)) {  // no buffer, or not encodable here: nothing was sent
      if (pend.kind == Pending::Kind::kPutChunk) c.src_busy[static_cast<std::size_t>(pend.slot)] = false;
      if (pend.kind == Pending::Kind::kGetChunk) c.dst_busy[static_cast<std::size_t>(pend.slot)] = false;
      return;
    }
    if (kind != 1) c.pending.emplace(cookie, std::move(pend));
  }

  // Bytes past the encoder: random, a valid message with a few bytes changed, or a valid message past the
  // peer's credit machine (credits and cookies of the input's choice).
  void raw(std::size_t i) {
    FakePeer* p = peer_of(i);
    if (p == nullptr) return;
    raw_used_ = true;
    std::vector<std::uint8_t> bytes;
    switch (in_.ConsumeIntegralInRange<int>(0, 2)) {
      case 0:
        bytes = in_.ConsumeBytes<std::uint8_t>(in_.ConsumeIntegralInRange<std::size_t>(0, kBufSize));
        break;
      default: {
        protocol::Message m;
        m.type = static_cast<MessageType>(in_.ConsumeIntegralInRange<int>(1, 6));
        m.opcode = in_.ConsumeIntegral<std::uint16_t>();
        m.cookie = in_.ConsumeIntegral<std::uint64_t>();
        m.credits = in_.ConsumeIntegralInRange<std::uint16_t>(0, p->session().params.queue_depth);
        m.status = in_.ConsumeIntegral<std::uint32_t>();
        m.byte_count = in_.ConsumeIntegralInRange<std::uint32_t>(0, kSlot);
        if (m.type == MessageType::kNoop) {
          m.opcode = 0;
          m.cookie = 0;
        }
        const std::vector<std::uint8_t> payload =
            in_.ConsumeBytes<std::uint8_t>(in_.ConsumeIntegralInRange<std::size_t>(0, 40));
        if (m.type != MessageType::kNoop && m.type != MessageType::kCompletion) m.payload = payload;
        if (protocol::is_chunk_request(m.type)) {
          m.chunk.count = in_.ConsumeIntegralInRange<std::uint16_t>(1, 4);
          for (std::uint16_t f = 0; f < m.chunk.count; ++f) {
            m.chunk.fragments[f] = p->fragment(in_.ConsumeIntegralInRange<std::size_t>(0, kSlot),
                                               in_.ConsumeIntegralInRange<std::uint32_t>(1, 512));
          }
        }
        bytes.resize(kBufSize);
        const auto enc = protocol::encode_message(m, p->session(), bytes);
        bytes.resize(enc.ok() ? enc.size : 0);
        for (int n = in_.ConsumeIntegralInRange<int>(0, 3); n > 0 && !bytes.empty(); --n) {
          bytes[in_.ConsumeIntegralInRange<std::size_t>(0, bytes.size() - 1)] =
              in_.ConsumeIntegral<std::uint8_t>();
        }
        break;
      }
    }
    p->send_raw(bytes);
  }

  // What a peer received: each request answered at most once, echoes equal, values whole, writes exact.
  void take_answers(std::size_t i) {
    Conn& c = conns_[i];
    if (!c.lc) return;
    FakePeer& p = c.lc->peer();
    RDMAGATE_FUZZ_CHECK(p.stats().wire_errors == 0);  // the gateway only ever sends what it encoded
    if (!p.tainted()) RDMAGATE_FUZZ_CHECK(p.stats().credit_errors == 0);
    while (!p.inbox.empty()) {
      const FakePeer::Received r = std::move(p.inbox.front());
      p.inbox.pop_front();
      if (auth_) {
        if (r.type == MessageType::kAuthAnswer) {
          take_auth_answer(c, r);
          continue;
        }
        // Nothing is served before AUTH_ANSWER ok (a tainted peer may have dropped that answer on its
        // credits).
        RDMAGATE_FUZZ_CHECK(c.authenticated || p.tainted());
      }
      const auto it = c.pending.find(r.cookie);
      if (it == c.pending.end()) {
        RDMAGATE_FUZZ_CHECK(raw_used_);  // only a raw request can be answered without being asked
        continue;
      }
      Pending& q = it->second;
      const bool ok = r.type == MessageType::kCompletion && r.status == 0;
      switch (q.kind) {
        case Pending::Kind::kEcho:
          if (r.type == MessageType::kInlineResponse) RDMAGATE_FUZZ_CHECK(r.payload == q.echo);
          break;
        case Pending::Kind::kGetInline:
          if (r.type == MessageType::kInlineResponse && !raw_used_) {
            RDMAGATE_FUZZ_CHECK(value_whole(r.payload.data(), r.payload.size()));
          }
          break;
        case Pending::Kind::kGetChunk: {
          const std::size_t base = (kSlots + static_cast<std::size_t>(q.slot)) * kSlot;
          if (ok) {
            RDMAGATE_FUZZ_CHECK(r.byte_count <= q.capacity);
            // The fragments are contiguous in the slot: the value, then untouched sentinel to the end.
            const std::uint8_t* d = p.bulk() + base;
            if (!raw_used_) RDMAGATE_FUZZ_CHECK(value_whole(d, r.byte_count));
            for (std::size_t b = r.byte_count; b < kSlot; ++b) RDMAGATE_FUZZ_CHECK(d[b] == kSentinel);
          } else if (r.type == MessageType::kCompletion) {
            // Not written: nothing of the slot changed. (kBulkFailed is never answered: the connection
            // failed.)
            for (std::size_t b = 0; b < kSlot; ++b) RDMAGATE_FUZZ_CHECK(p.bulk()[base + b] == kSentinel);
          }
          c.dst_busy[static_cast<std::size_t>(q.slot)] = false;
          break;
        }
        case Pending::Kind::kPutChunk:
          c.src_busy[static_cast<std::size_t>(q.slot)] = false;
          break;
        case Pending::Kind::kPutInline:
        case Pending::Kind::kDelete:
          break;
      }
      c.pending.erase(it);
    }
  }

  void poll_peer(std::size_t i) {
    if (FakePeer* p = peer_of(i)) p->poll();
    take_answers(i);
  }

  // ---- the device ----

  FakeQp* pick_qp() {
    const std::size_t n = in_.ConsumeIntegralInRange<std::size_t>(0, 2 * kConns - 1);
    Conn& c = conns_[n / 2];
    if (!c.lc) return nullptr;
    return n % 2 == 0 ? &c.lc->qp() : &c.lc->peer().qp();
  }

  void act(std::uint8_t a) {
    const std::size_t i = in_.ConsumeIntegralInRange<std::size_t>(0, kConns - 1);
    Conn& c = conns_[i];
    switch (a % 16) {
      case 0:
      case 1:
        request(i);
        break;
      case 2:
        raw(i);
        break;
      case 3:
      case 4:
        if (FakeQp* q = pick_qp()) dev_.step(*q, in_.ConsumeBool() ? Queue::kSend : Queue::kRecv);
        break;
      case 5: {
        static constexpr std::uint32_t kStatuses[] = {IBV_WC_LOC_LEN_ERR, IBV_WC_LOC_PROT_ERR,
                                                      IBV_WC_REM_ACCESS_ERR, IBV_WC_RETRY_EXC_ERR,
                                                      IBV_WC_GENERAL_ERR};
        if (FakeQp* q = pick_qp()) {
          dev_.fail_head(*q, in_.ConsumeBool() ? Queue::kSend : Queue::kRecv,
                         kStatuses[in_.ConsumeIntegralInRange<std::size_t>(0, 4)]);
        }
        break;
      }
      case 6:
      case 7:
        turn();
        break;
      case 8:
        poll_peer(i);
        break;
      case 9:
        adopt(c);
        turn();
        break;
      case 10:
        if (in_.ConsumeProbability<float>() < 0.5f) close(c);
        break;
      case 11:
        if constexpr (Rig::kSim) {
          if (!c.lc || c.close_sent) break;
          if (in_.ConsumeBool()) {
            rig_.sim.drop_next_doorbell(c.lc->backend_qp());
          } else {
            rig_.sim.set_scatter_to_cqe(in_.ConsumeBool() ? 32 : 0);
          }
        } else if (c.lc && !c.close_sent) {
          const auto n = in_.ConsumeIntegralInRange<std::uint32_t>(0, 6);
          if (in_.ConsumeBool()) {
            c.lc->qp().fail_send_post(n);
          } else {
            c.lc->qp().fail_recv_post(n);
          }
        }
        break;
      case 12:
        if (in_.ConsumeBool()) {
          rig_.model_cq(res_->cq()).fail_next_polls(in_.ConsumeIntegralInRange<std::uint32_t>(1, 2));
        } else {
          rig_.model_cq(res_->cq()).interleave(in_.ConsumeIntegral<std::uint64_t>());
        }
        break;
      case 13:
        if (c.lc) {
          dev_.qp_to_err(c.lc->peer().qp());  // the peer went away: our sends to it will fail
        } else if (in_.ConsumeBool()) {
          open(i);  // reconnect in the freed slot
        }
        break;
      case 14: {  // another core writes the store (with authentication, also: AUTH, table swaps)
        if (auth_) {
          const int what = in_.ConsumeIntegralInRange<int>(0, 3);
          if (what == 0 || what == 1) {
            send_auth(i);
            break;
          }
          if (what == 2) {
            swap_table();
            break;
          }
        }
        const std::string_view key = kKeys[in_.ConsumeIntegralInRange<std::size_t>(0, kKeys.size() - 1)];
        if (in_.ConsumeBool()) {
          std::vector<std::uint8_t> v(in_.ConsumeIntegralInRange<std::size_t>(0, kSlot));
          fill_value(v.data(), v.size(), ++seed_);
          store_->put(1, key, std::as_bytes(std::span(v)));
        } else {
          store_->remove(1, key);
        }
        break;
      }
      default:
        for (int n = in_.ConsumeIntegralInRange<int>(1, 8); n > 0; --n) {
          dev_.run_all();
          turn();
          for (std::size_t k = 0; k < kConns; ++k) poll_peer(k);
        }
        break;
    }
  }

  // Until nothing moves anywhere. True if it settled.
  bool quiesce() {
    for (int round = 0; round < 2000; ++round) {
      // What a later doorbell would have done for a batch whose doorbell the NIC dropped.
      for (Conn& c : conns_) {
        if (c.lc) rig_.kick(c.lc->backend_qp());
      }
      std::size_t moved = dev_.run_all() + rig_.model_cq(res_->cq()).pending();
      const std::uint64_t freed = freed_;
      turn();
      for (std::size_t k = 0; k < kConns; ++k) {
        if (FakePeer* p = peer_of(k)) moved += p->poll();
        take_answers(k);
      }
      moved += dev_.run_all() + (freed_ - freed);
      if (moved == 0) return true;
    }
    return false;
  }

  void finish() {
    FakeCq& cq = rig_.model_cq(res_->cq());
    cq.fail_next_polls(0);
    for (Conn& c : conns_) {
      if (c.lc) c.lc->qp().clear_faults();
    }
    RDMAGATE_FUZZ_CHECK(quiesce());
    // A healthy connection has nothing stuck and its credits add up.
    for (Conn& c : conns_) {
      if (!c.lc || c.close_sent || c.failed != 0) continue;
      CoreConn& cc = c.lc->cc();
      FakePeer& p = c.lc->peer();
      if (cc.state != CoreConnState::kOwned || p.tainted() || c.lc->qp().in_error() || p.qp().in_error())
        continue;
      RDMAGATE_FUZZ_CHECK(c.lc->qp().send_queue().empty() && p.qp().send_queue().empty());
      const protocol::CreditMachine& g = *cc.credits;
      protocol::CreditMachine& pm = p.credits();
      RDMAGATE_FUZZ_CHECK(g.queued_total() == 0 && pm.queued_total() == 0);
      const std::uint32_t depth = cc.session.params.queue_depth;
      RDMAGATE_FUZZ_CHECK(g.credits() + pm.held() + pm.owed() == depth);
      RDMAGATE_FUZZ_CHECK(pm.credits() + g.held() + g.owed() == depth);
      std::uint64_t g_sent = 0, g_recv = 0, p_sent = 0, p_recv = 0;
      for (std::size_t k = 0; k < protocol::kCreditClassCount; ++k) {
        g_sent += g.stats().sent[k];
        g_recv += g.stats().received[k];
        p_sent += pm.stats().sent[k];
        p_recv += pm.stats().received[k];
      }
      RDMAGATE_FUZZ_CHECK(g_sent == p_recv && p_sent == g_recv);
      RDMAGATE_FUZZ_CHECK(cc.bulk_op.state == BulkState::kIdle && cc.chunk_count == 0);
    }
    // Control closes everything; every connection answers CLOSED once and is freed.
    for (Conn& c : conns_) close(c);
    RDMAGATE_FUZZ_CHECK(quiesce());
    for (Conn& c : conns_) RDMAGATE_FUZZ_CHECK(!c.lc);
    RDMAGATE_FUZZ_CHECK(res_->counters.closed == opened_);
    RDMAGATE_FUZZ_CHECK(loop_->owned_st() == 0);
    RDMAGATE_FUZZ_CHECK(svc_->started_total() == svc_->ended_total());
    RDMAGATE_FUZZ_CHECK(res_->core_mailbox().counters().reply_overflows == 0);
    RDMAGATE_FUZZ_CHECK(dev_.stats().local_errors == 0);
    RDMAGATE_FUZZ_CHECK(dev_.stats().destroyed_busy == 0);
    RDMAGATE_FUZZ_CHECK(cq.pending() == 0);
    RDMAGATE_FUZZ_CHECK(cq.stats().overflows == 0);
    RDMAGATE_FUZZ_CHECK(rig_.nic_clean());
    // Every pin and reservation is back: with every key deleted the store is empty to the byte.
    for (const std::string_view k : kKeys) {
      // With authentication the keys live in the tenants' namespaces (ids 1, 2), else in namespace 0.
      for (std::uint16_t ns = 0; ns <= (auth_ ? kTenantNames.size() : 0); ++ns)
        store_->remove(0, ns, k, nullptr);
    }
    const store::StoreStats st = store_->stats();
    RDMAGATE_FUZZ_CHECK(st.objects == 0 && st.value_bytes == 0 && st.used_bytes == 0);
    RDMAGATE_FUZZ_CHECK(store::StoreTestPeer::allocator_free_bytes(*store_) ==
                        store::StoreTestPeer::arena_bytes(*store_));
    RDMAGATE_FUZZ_CHECK(store::StoreTestPeer::free_descriptors(*store_) ==
                        store::StoreTestPeer::descriptor_count(*store_));
    for (const PrincipalUsage& u : principal_usage_) RDMAGATE_FUZZ_CHECK(u.connections.load() == 0);
  }

  FuzzedDataProvider& in_;
  const bool auth_;
  Rig rig_;
  FakeDevice& dev_;
  std::unique_ptr<std::byte[]> region_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<BackendMr> arena_mr_;
  std::unique_ptr<CountingService> svc_;
  std::unique_ptr<CoreResources> res_;
  std::unique_ptr<Loop> loop_;
  std::array<Conn, kConns> conns_;
  std::uint64_t opened_ = 0;
  std::uint64_t freed_ = 0;
  std::uint32_t seed_ = 0;
  bool failed_pending_ = false;
  bool raw_used_ = false;
  // Authentication mode: the usage objects outlive every table (as the registry's), the tables control keeps.
  std::array<TenantUsage, kTenantNames.size()> tenant_usage_{};
  std::array<PrincipalUsage, kPrincipals> principal_usage_{};
  std::vector<std::unique_ptr<AuthTable>> tables_;
  std::uint64_t table_generation_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const bool sim = size != 0 && (data[0] & 1) == 0;
  const bool auth = size != 0 && (data[0] & 2) == 0;
  FuzzedDataProvider in(data, size);
  if (sim) {
    World<SimMlx5Rig> w(in, auth);
    w.run();
  } else {
    World<FakeRig> w(in, auth);
    w.run();
  }
  return 0;
}

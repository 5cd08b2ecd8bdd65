// Host tests of the core loop on a shared receive queue: CoreLoop<FakeBackend::WithSrq, EchoService> over the
// fake device's SRQ (fake_backend.hpp), the real CoreResources on heap memory. What they prove:
//   - the pool covers every credit the core's peers may hold (srq_receives / queue_depth connections), so
//     full windows on every connection at once never find the SRQ empty (no RNR) and every answer is right;
//   - a receive completion reaches its connection by QP number (early rx before ADOPT included);
//   - every buffer goes back to the pool: after answers, after a refused message, after a close with
//     messages parked or in flight, after a stray completion of a QP the core no longer knows;
//   - the choice at setup: auto falls back to a receive queue per connection where the device (max_srq 0)
//     or the backend (mlx5dv) has no SRQ, with a note for the log; on is an error there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/core_loop.hpp"
#include "tests/engine/fake_backend.hpp"
#include "tests/engine/sim_mlx5.hpp"
#include "tests/support/test_services.hpp"

namespace rdmagate::dataplane::fake {
namespace {

using protocol::MessageType;
using Loop = CoreLoop<FakeBackend::WithSrq, EchoService>;

constexpr std::uint16_t kDepth = 8;

CoreConfig srq_config(SrqMode mode = SrqMode::kOn) {
  CoreConfig cfg;
  cfg.memory = HugeBufferKind::kHeap;  // no EAL
  cfg.max_conns = 4;
  cfg.rx_per_conn = kDepth;
  cfg.tx_per_conn = 3 * kDepth;
  cfg.buf_size = 256;
  cfg.check_every = 1;
  cfg.srq = mode;
  return cfg;
}

struct Replies {
  std::vector<ConnHandle> closed;
  std::vector<ConnHandle> failed;
  void on_closed_st(ConnHandle c) { closed.push_back(c); }
  void on_failed_st(ConnHandle c, FailureKind, std::uint32_t) { failed.push_back(c); }
};

// One core on the fake device's SRQ, and the connections a test opens on it (as core_loop_test's Core).
class SrqCore {
 public:
  explicit SrqCore(const CoreConfig& cfg = srq_config()) {
    std::string err;
    res = CoreResources::create(0, cfg, dev, &err);
    if (res == nullptr) {
      ADD_FAILURE() << err;
      return;
    }
    loop = std::make_unique<Loop>(*res, svc);
  }
  ~SrqCore() { conns.clear(); }

  FakeCq& cq() { return static_cast<FakeCq&>(res->cq()); }
  const FakeSrq& srq() { return static_cast<const FakeSrq&>(*res->srq()); }

  LoopbackConn& open() {
    LoopbackOptions opt;
    opt.queue_depth = kDepth;
    opt.peer_tx = 3 * kDepth;
    opt.incarnation = ++opened_;
    std::string err;
    auto c = LoopbackConn::open(dev, *res, opt, &err);
    EXPECT_NE(c, nullptr) << err;
    conns.push_back(std::move(c));
    return *conns.back();
  }
  void turn() {
    res->stop.store(false);
    cq().stop_after_polls(&res->stop, 2);
    loop->run_st();
    res->control_mailbox().drain_st(replies);
  }
  void adopt(LoopbackConn& c) {
    res->control_mailbox().send_st(ToCore::adopt(c.handle()));
    turn();
  }
  void close(LoopbackConn& c) {
    dev.qp_to_err(c.backend_qp());
    res->control_mailbox().send_st(ToCore::close(c.handle(), CloseReason::kLocal));
    turn();
  }
  void settle() {
    for (int i = 0; i < 10000; ++i) {
      std::size_t moved = dev.run_all() + cq().pending();
      turn();
      for (auto& c : conns) moved += c->peer().poll();
      moved += dev.run_all();
      if (moved == 0) return;
    }
    ADD_FAILURE() << "the loop and the device did not settle";
  }
  // Every buffer of the pool is posted on the SRQ, none twice: the pool lost nothing and gained nothing.
  void expect_pool_whole() {
    const std::deque<FakeWr>& q = srq().queue();
    ASSERT_EQ(q.size(), res->pool_size());
    std::vector<bool> seen(res->pool_size(), false);
    for (const FakeWr& w : q) {
      ASSERT_EQ(wr_kind(w.wr_id), WrKind::kRecv);
      const RxDesc* d = wr_desc<RxDesc>(w.wr_id);
      ASSERT_LT(d->index, res->pool_size());
      EXPECT_EQ(d, &res->pool_rx(d->index));
      EXPECT_FALSE(seen[d->index]) << "pool buffer " << d->index << " posted twice";
      seen[d->index] = true;
    }
    EXPECT_EQ(res->srq_lost, 0u);
  }

  FakeDevice dev;
  EchoService svc;
  std::unique_ptr<CoreResources> res;
  std::unique_ptr<Loop> loop;
  Replies replies;
  std::vector<std::unique_ptr<LoopbackConn>> conns;

 private:
  std::uint64_t opened_ = 0;
};

protocol::Message request(std::uint64_t cookie, const std::vector<std::uint8_t>& payload) {
  protocol::Message m;
  m.type = MessageType::kInlineRequest;
  m.opcode = 3;
  m.cookie = cookie;
  m.payload = payload;
  return m;
}

std::vector<std::uint8_t> payload_of(std::uint64_t cookie) {
  std::vector<std::uint8_t> p(16 + cookie % 40);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::uint8_t>(cookie * 31 + i);
  return p;
}

// Sends up to `n` requests on c's peer as its credits allow (the rest wait in its credit machine).
void send_requests(LoopbackConn& c, std::uint64_t first, std::uint32_t n) {
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::vector<std::uint8_t> p = payload_of(first + i);
    ASSERT_TRUE(c.peer().send(request(first + i, p)));
  }
}

// Every answer of c's inbox for cookies [first, first + n), in order, with its payload.
void expect_answers(LoopbackConn& c, std::uint64_t first, std::uint32_t n) {
  ASSERT_EQ(c.peer().inbox.size(), n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const FakePeer::Received& r = c.peer().inbox[i];
    EXPECT_EQ(r.type, MessageType::kInlineResponse);
    EXPECT_EQ(r.cookie, first + i);
    EXPECT_EQ(r.payload, payload_of(first + i));
  }
  c.peer().inbox.clear();
}

TEST(SrqSetup, PoolCoversEveryCreditAndSlotsHoldNoReceiveBuffers) {
  SrqCore core;
  ASSERT_NE(core.res, nullptr);
  ASSERT_NE(core.res->srq(), nullptr);
  EXPECT_TRUE(core.res->srq_note().empty());
  EXPECT_EQ(core.res->pool_size(), 4u * kDepth);
  EXPECT_EQ(core.srq().queue().size(), 4u * kDepth);  // every buffer posted at setup
  // The pool, then per slot only the send buffers.
  EXPECT_EQ(core.res->registered_bytes(), (4u * kDepth + 4u * 3u * kDepth) * 256u);
  LoopbackConn& c = core.open();
  EXPECT_TRUE(c.cc().rx.empty());
  EXPECT_EQ(c.qp().max_recv_wr(), 0u);
  EXPECT_EQ(c.qp().srq(), &core.srq());
}

TEST(SrqSetup, SrqReceivesBelowTheSlotsLimitTheConnections) {
  CoreConfig cfg = srq_config();
  cfg.srq_receives = 2 * kDepth + kDepth / 2;  // covers two connections, not three
  SrqCore core(cfg);
  ASSERT_NE(core.res, nullptr);
  EXPECT_EQ(core.res->config().max_conns, 2u);
  EXPECT_EQ(core.res->pool_size(), 2u * kDepth);
  EXPECT_GE(core.res->alloc_slot_st(), 0);
  EXPECT_GE(core.res->alloc_slot_st(), 0);
  EXPECT_EQ(core.res->alloc_slot_st(), -1);
}

TEST(SrqSetup, FewerReceivesThanOneConnectionsCreditsIsAnError) {
  CoreConfig cfg = srq_config();
  cfg.srq_receives = kDepth - 1;
  FakeDevice dev;
  std::string err;
  EXPECT_EQ(CoreResources::create(0, cfg, dev, &err), nullptr);
  EXPECT_NE(err.find("dataplane.srq_receives"), std::string::npos) << err;
}

TEST(SrqSetup, AutoFallsBackOnADeviceWithoutSrqAndOnIsAnError) {
  FakeDevice dev;
  dev.set_srq_supported(false);
  std::string err;
  auto res = CoreResources::create(0, srq_config(SrqMode::kAuto), dev, &err);
  ASSERT_NE(res, nullptr) << err;
  EXPECT_EQ(res->srq(), nullptr);
  EXPECT_NE(res->srq_note().find("max_srq 0"), std::string::npos) << res->srq_note();
  EXPECT_EQ(res->pool_size(), 0u);
  EXPECT_EQ(res->config().max_conns, 4u);
  // A receive queue per connection: the slots hold their receive buffers again.
  EXPECT_EQ(res->registered_bytes(), 4u * (kDepth + 3u * kDepth) * 256u);
  EXPECT_EQ(CoreResources::create(0, srq_config(SrqMode::kOn), dev, &err), nullptr);
  EXPECT_NE(err.find("dataplane.srq required"), std::string::npos) << err;
}

// A core admits only the connections the device's CQ can hold completions for (each: its receive share and
// a full send queue), and says so; a CQ too small for one connection is an error naming the key to lower.
TEST(SrqSetup, TheDevicesCqLimitsTheConnectionsWithANote) {
  for (const SrqMode mode : {SrqMode::kOff, SrqMode::kOn}) {
    FakeDevice dev;
    const CoreConfig cfg = srq_config(mode);
    const std::uint32_t per_conn = cfg.rx_per_conn + send_queue_depth(cfg);
    dev.set_max_cqe(3 * per_conn - 1);
    std::string err;
    auto res = CoreResources::create(0, cfg, dev, &err);
    ASSERT_NE(res, nullptr) << err;
    EXPECT_EQ(res->config().max_conns, 2u);
    EXPECT_NE(res->srq_note().find("dataplane.max_connections_per_core 4"), std::string::npos)
        << res->srq_note();
    EXPECT_EQ(res->pool_size(), mode == SrqMode::kOn ? 2u * kDepth : 0u);
    dev.set_max_cqe(per_conn - 1);
    EXPECT_EQ(CoreResources::create(0, cfg, dev, &err), nullptr);
    EXPECT_NE(err.find("dataplane.queue_depth"), std::string::npos) << err;
  }
}

// The mlx5dv backend builds its receive queues itself and has no SRQ: its cores keep one per connection.
TEST(SrqSetup, Mlx5CoresKeepAReceiveQueuePerConnection) {
  SimMlx5Device sim;
  std::string err;
  CoreConfig cfg = srq_config(SrqMode::kAuto);
  auto res = CoreResources::create(0, cfg, sim, &err);
  ASSERT_NE(res, nullptr) << err;
  EXPECT_EQ(res->srq(), nullptr);
  EXPECT_NE(res->srq_note().find("no shared receive queue"), std::string::npos) << res->srq_note();
  EXPECT_EQ(CoreResources::create(0, srq_config(SrqMode::kOn), sim, &err), nullptr);
}

// Every connection sends a full window (all its credits) at once, repeatedly: the pool always has a buffer
// (the SRQ never runs empty: no RNR), each completion reaches its own connection, every answer is right.
TEST(SrqLoop, FullWindowsOnEveryConnectionNeverFindThePoolEmpty) {
  SrqCore core;
  ASSERT_NE(core.res, nullptr);
  std::vector<LoopbackConn*> cs;
  for (int i = 0; i < 4; ++i) cs.push_back(&core.open());
  for (LoopbackConn* c : cs) core.adopt(*c);
  for (std::uint64_t round = 0; round < 5; ++round) {
    // Credits allow kDepth - reserve requests at once; the rest wait in the peer's machine.
    for (std::size_t i = 0; i < cs.size(); ++i) send_requests(*cs[i], 1000 * i + 100 * round, kDepth);
    core.settle();
    for (std::size_t i = 0; i < cs.size(); ++i) expect_answers(*cs[i], 1000 * i + 100 * round, kDepth);
  }
  EXPECT_EQ(core.srq().stats().rnr, 0u);
  EXPECT_EQ(core.srq().stats().overflows, 0u);
  EXPECT_EQ(core.srq().stats().consumed, 4u * 5u * kDepth + core.res->counters.msgs_rx[0]);  // + NOOPs
  EXPECT_EQ(core.res->counters.completions_recv, core.srq().stats().consumed);
  EXPECT_EQ(core.res->counters.srq_stray, 0u);
  EXPECT_EQ(core.svc.requests, 4u * 5u * kDepth);
  for (LoopbackConn* c : cs) {
    EXPECT_EQ(c->peer().stats().credit_errors, 0u);
    EXPECT_EQ(c->cc().state, CoreConnState::kOwned);
  }
  core.expect_pool_whole();
  // One doorbell for the pool per flush that re-posted, whatever the number of connections behind it.
  EXPECT_LE(core.res->counters.doorbells_recv, core.res->counters.completions_recv);
  EXPECT_EQ(core.res->counters.recv_posts, core.srq().stats().posted - core.res->pool_size());
}

// Messages before ADOPT are parked by QP number and run at ADOPT, in order.
TEST(SrqLoop, EarlyMessagesFindTheirConnectionByQpNumber) {
  SrqCore core;
  ASSERT_NE(core.res, nullptr);
  LoopbackConn& a = core.open();
  LoopbackConn& b = core.open();
  core.adopt(b);
  send_requests(a, 1, 3);
  send_requests(b, 50, 2);
  core.settle();  // a's requests park; b's are answered
  EXPECT_EQ(core.res->counters.early_rx, 3u);
  EXPECT_TRUE(a.peer().inbox.empty());
  expect_answers(b, 50, 2);
  core.adopt(a);
  core.settle();
  expect_answers(a, 1, 3);
  core.expect_pool_whole();
}

// A message the core refuses fails its connection; its buffer still goes back to the pool (no credit stands
// for it), and so do the buffers a closing connection had parked or still receives.
TEST(SrqLoop, RefusedParkedAndClosingReceivesReturnToThePool) {
  SrqCore core;
  ASSERT_NE(core.res, nullptr);
  LoopbackConn& bad = core.open();
  LoopbackConn& parked = core.open();
  LoopbackConn& good = core.open();
  core.adopt(bad);
  core.adopt(good);
  const std::uint8_t garbage[24] = {0xde, 0xad, 0xbe, 0xef};
  ASSERT_TRUE(bad.peer().send_raw(garbage));
  send_requests(parked, 1, 3);
  core.settle();
  EXPECT_EQ(core.replies.failed.size(), 1u);
  EXPECT_EQ(core.res->counters.early_rx, 3u);
  core.close(bad);
  core.close(parked);  // never adopted: its three parked messages are dropped
  core.settle();
  EXPECT_EQ(core.replies.closed.size(), 2u);
  // Control frees the connections after CLOSED; a receive of their QPs completing now is a stray.
  core.expect_pool_whole();
  send_requests(good, 7, kDepth);
  core.settle();
  expect_answers(good, 7, kDepth);
  core.expect_pool_whole();
}

// A receive of a QP the core answered CLOSED for (it ran as the QP went to ERR) names no connection: counted,
// and its buffer goes back to the pool.
TEST(SrqLoop, StrayReceiveOfAClosedQpGoesBackToThePool) {
  SrqCore core;
  ASSERT_NE(core.res, nullptr);
  LoopbackConn& c = core.open();
  core.adopt(c);
  const std::uint32_t qpn = c.cc().qp_num;
  core.close(c);
  core.settle();
  ASSERT_EQ(core.replies.closed.size(), 1u);
  // Take one buffer off the SRQ as the device would for a message, and complete it on the closed QP.
  ASSERT_EQ(core.srq().queue().size(), core.res->pool_size());
  FakeWr taken;
  ASSERT_TRUE(static_cast<FakeSrq&>(*core.res->srq()).take_front(&taken));
  Completion wc;
  wc.wr_id = taken.wr_id;
  wc.byte_len = 40;
  wc.qp_num = qpn;
  core.cq().inject(wc);
  core.turn();
  EXPECT_EQ(core.res->counters.srq_stray, 1u);
  core.expect_pool_whole();
}

}  // namespace
}  // namespace rdmagate::dataplane::fake

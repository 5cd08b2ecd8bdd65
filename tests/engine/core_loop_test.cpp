// Host tests of the core loop with the fake device backend: the real loop, the real CoreResources (heap
// memory, no EAL), the real ObjectService over a real store, and a FakePeer at the far end of each connection
// that speaks the protocol through its own credit machine. Control's part is played by the test: it builds
// connections as control/connection.cpp does (LoopbackConn), sends ADOPT and CLOSE through the core's ring,
// moves QPs to ERR and reads the CLOSED/FAILED replies.
//
// Each test runs on a rig: FakeRig (CoreLoop<FakeBackend, Service>: work requests handed to the device model
// as they are staged) or SimMlx5Rig (CoreLoop<SimMlx5Backend, Service>: the real mlx5 hot path writing WQEs
// into rings and parsing CQEs out of one, against the simulated NIC of sim_mlx5.hpp in front of the same
// model). The CoreLoop suite runs on both; tests of injected post failures or poll errors, which an mlx5 QP
// cannot have, run on the fake rig only (CoreLoopFake); CoreLoopSimMlx5 holds what only the NIC has (dropped
// doorbells, scatter-to-CQE, ring wrap-around).
//
// Every test asserts concrete counters and states: the loop's CoreCounters, the service's counters, the
// store's accounting (a leaked pin or reservation keeps capacity charged), the device model's view of what a
// QP still has outstanding, every byte that moved, and (after every turn) that the simulated NIC saw nothing
// real hardware would reject.
#include "dataplane/core_loop.hpp"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "protocol/object_wire.hpp"
#include "services/object/object_service.hpp"
#include "services/storage/memory/store.hpp"
#include "telemetry/stats.hpp"
#include "tests/engine/core_harness.hpp"
#include "tests/engine/device_rigs.hpp"
#include "tests/services/storage/memory/store_test_util.hpp"
#include "tests/support/test_services.hpp"

namespace rdmagate::dataplane {
namespace {

using fake::Core;
using fake::expect_nic_clean;
using fake::FakeBackend;
using fake::FakeCq;
using fake::FakeDevice;
using fake::FakePeer;
using fake::FakeQp;
using fake::FakeRig;
using fake::LoopbackConn;
using fake::LoopbackOptions;
using fake::Queue;
using fake::SimMlx5Backend;
using fake::SimMlx5Device;
using fake::SimMlx5Rig;
using fake::test_core_config;
using protocol::MessageType;
using protocol::ObjectOpcode;
using protocol::ObjectStatus;

constexpr std::uint8_t kSentinel = 0xe7;

std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  std::uint32_t x = seed * 2654435761u + 7;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return v;
}

protocol::Message inline_request(std::uint16_t opcode, std::uint64_t cookie,
                                 std::span<const std::uint8_t> p) {
  protocol::Message m;
  m.type = MessageType::kInlineRequest;
  m.opcode = opcode;
  m.cookie = cookie;
  m.payload = p;
  return m;
}

protocol::Message chunk_request(MessageType type, std::uint16_t opcode, std::uint64_t cookie,
                                std::span<const std::uint8_t> p,
                                const std::vector<protocol::Fragment>& frags) {
  protocol::Message m;
  m.type = type;
  m.opcode = opcode;
  m.cookie = cookie;
  m.payload = p;
  m.chunk.count = static_cast<std::uint16_t>(frags.size());
  std::copy(frags.begin(), frags.end(), m.chunk.fragments.begin());
  return m;
}

std::vector<std::uint8_t> object_payload(std::string_view key, std::span<const std::uint8_t> value = {}) {
  std::vector<std::uint8_t> p(protocol::object_payload_size(key.size(), value.size()));
  EXPECT_EQ(protocol::encode_object_payload(key, value, p), p.size());
  return p;
}

constexpr std::uint16_t op(ObjectOpcode o) {
  return static_cast<std::uint16_t>(o);
}
constexpr std::uint32_t st(ObjectStatus s) {
  return static_cast<std::uint32_t>(s);
}
constexpr std::size_t mt(MessageType t) {
  return static_cast<std::size_t>(t);
}
constexpr std::size_t err(CoreError e) {
  return static_cast<std::size_t>(e);
}
constexpr std::size_t opi(protocol::ObjectOp o) {
  return static_cast<std::size_t>(o);
}
std::size_t sti(ObjectStatus s) {
  return object_status_slot(s);
}

std::uint64_t sum(const std::array<std::uint64_t, protocol::kCreditClassCount>& a) {
  return std::accumulate(a.begin(), a.end(), std::uint64_t{0});
}

// Quiescent (settled, nothing in flight either way): every receive of each end is a credit of the other,
// or owed back by its owner; and each side received exactly what the other sent.
void expect_credits_conserved(LoopbackConn& c) {
  ASSERT_TRUE(c.cc().credits.has_value());
  const protocol::CreditMachine& g = *c.cc().credits;
  protocol::CreditMachine& p = c.peer().credits();
  const std::uint32_t depth = c.cc().session.params.queue_depth;
  EXPECT_EQ(g.credits() + p.held() + p.owed(), depth);
  EXPECT_EQ(p.credits() + g.held() + g.owed(), depth);
  EXPECT_EQ(sum(g.stats().sent), sum(p.stats().received));
  EXPECT_EQ(sum(p.stats().sent), sum(g.stats().received));
}

// What no test expects from the loop: a segment outside its registration, more work than a queue holds, a
// QP destroyed with work on it.
template <typename Rig>
void expect_device_clean(Rig& rig) {
  expect_nic_clean(rig);
  const FakeDevice& dev = rig.model();
  EXPECT_EQ(dev.stats().local_errors, 0u);
  EXPECT_EQ(dev.stats().destroyed_busy, 0u);
  for (std::size_t i = 0; i < dev.live_qps(); ++i) {
    EXPECT_EQ(dev.qp_at(i)->stats().sq_overflows, 0u) << "qp " << i;
    EXPECT_EQ(dev.qp_at(i)->stats().rq_overflows, 0u) << "qp " << i;
  }
}

void expect_no_core_errors(const CoreCounters& k) {
  for (std::size_t i = 0; i < kCoreErrorCount; ++i) EXPECT_EQ(k.errors[i], 0u) << "core error " << i;
}

// The store, its region on the heap, and the arena registered once as the gateway does (local write only).
class StoreArena {
 public:
  explicit StoreArena(FakeDevice& dev, std::size_t bytes = 2u << 20) : region_(bytes) {
    store::StoreConfig cfg;
    cfg.max_value = 64 * 1024;
    cfg.max_objects = 64;
    cfg.max_inflight = 64;
    cfg.max_cores = 1;
    store = store::test::make_store(region_, cfg);
    std::string e;
    mr_ = dev.register_memory(store->arena_base(), store->arena_bytes(), IBV_ACCESS_LOCAL_WRITE, &e);
    EXPECT_NE(mr_, nullptr) << e;
  }
  ObjectServiceConfig config() const {
    ObjectServiceConfig c;
    c.storage = &store->core(0);
    c.arena_lkey = mr_->lkey;
    return c;
  }
  // The published value of `key`, copied (empty optional if absent).
  std::optional<std::vector<std::uint8_t>> value(std::string_view key) {
    store::PinnedValue v;
    if (store->get(0, key, &v) != store::Status::kOk) return std::nullopt;
    const auto* p = reinterpret_cast<const std::uint8_t*>(v.data);
    std::vector<std::uint8_t> out(p, p + v.size);
    store->unpin(&v);
    return out;
  }
  // References on the descriptor holding `key`'s value (1: published, unpinned).
  std::uint32_t refs(std::string_view key) {
    store::PinnedValue v;
    if (store->get(0, key, &v) != store::Status::kOk) return 0;
    const std::uint32_t r = store::StoreTestPeer::refs(*store, v.token) - 1;  // minus our own pin
    store->unpin(&v);
    return r;
  }

  std::unique_ptr<store::Store> store;

 private:
  store::test::Region region_;
  std::unique_ptr<BackendMr> mr_;
};

// The suite that runs on both rigs (test names CoreLoopTest/Fake.* and CoreLoopTest/SimMlx5.*).
template <typename Rig>
class CoreLoopTest : public ::testing::Test {};
struct RigName {
  template <typename Rig>
  static std::string GetName(int) {
    return std::is_same_v<Rig, FakeRig> ? "Fake" : "SimMlx5";
  }
};
using Rigs = ::testing::Types<FakeRig, SimMlx5Rig>;
TYPED_TEST_SUITE(CoreLoopTest, Rigs, RigName);

// ---- echo ------------------------------------------------------------------------------------------------

TYPED_TEST(CoreLoopTest, EchoAnswersEveryRequestWithItsBytes) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  EchoService svc;
  Core<TypeParam, EchoService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);
  EXPECT_EQ(core.counters().adopted, 1u);
  EXPECT_EQ(core.loop->owned_st(), 1u);
  // Sizes from empty to the largest inline payload (512 - 40 header bytes): inline sends and not.
  constexpr std::uint64_t kRequests = 60;
  std::uint64_t bytes = 0;
  for (std::uint64_t cookie = 1; cookie <= kRequests; ++cookie) {
    const std::uint32_t len = static_cast<std::uint32_t>(cookie * 53 % 473);
    const std::vector<std::uint8_t> p = pattern(len, static_cast<std::uint32_t>(cookie));
    const FakePeer::Received r = core.ask(c, inline_request(1, cookie, p));
    EXPECT_EQ(r.type, MessageType::kInlineResponse);
    EXPECT_EQ(r.opcode, 1);
    EXPECT_EQ(r.cookie, cookie);
    EXPECT_EQ(r.payload, p) << "cookie " << cookie;
    bytes += len;
  }
  const CoreCounters& k = core.counters();
  EXPECT_EQ(svc.requests, kRequests);
  EXPECT_EQ(svc.send_failures, 0u);
  EXPECT_EQ(k.msgs_rx[mt(MessageType::kInlineRequest)], kRequests);
  EXPECT_EQ(k.msgs_tx[mt(MessageType::kInlineResponse)], kRequests);
  EXPECT_EQ(k.bytes_tx[mt(MessageType::kInlineResponse)], kRequests * protocol::kHeaderSize + bytes);
  EXPECT_GT(k.inline_sends, 0u);  // answers up to 128 bytes went inline
  EXPECT_LT(k.inline_sends, kRequests);
  EXPECT_EQ(k.completions_recv, kRequests + c.peer().stats().noops_sent);
  EXPECT_EQ(k.completions_error, 0u);
  EXPECT_EQ(k.completions_flushed, 0u);
  expect_no_core_errors(k);
  EXPECT_EQ(c.peer().stats().wire_errors, 0u);
  EXPECT_EQ(c.peer().stats().credit_errors, 0u);
  expect_credits_conserved(c);
  // Selective signaling: one signaled send per 8, so fewer send CQEs than sends.
  EXPECT_LT(k.completions_send, k.msgs_tx[mt(MessageType::kInlineResponse)]);
  core.close(c);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  EXPECT_TRUE(core.replies.failed.empty());
  EXPECT_EQ(dev.outstanding(c.qp()), 0u);
  EXPECT_EQ(k.closed, 1u);
  expect_device_clean(rig);
}

// A core its owner drives (the client's kCaller / kThread modes): progress_st does a whole turn, control's
// ring included, on every call; idle_for_sleep_st refuses sleep while a command or a completion waits, and
// a completion it finds is set aside (a CQE already on the CQ raises no event) and run by the next turn.
// The fake rig only: owner-driven cores run on the verbs backend (mlx5 CQs cannot be armed).
TEST(CoreLoopFake, OwnerDrivenTurnsAndTheSleepCheck) {
  FakeRig rig;
  FakeDevice& dev = rig.model();
  EchoService svc;
  Core<FakeRig, EchoService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.res->control_mailbox().send_st(ToCore::adopt(c.handle()));
  EXPECT_FALSE(core.loop->idle_for_sleep_st()) << "ADOPT waits on control's ring";
  EXPECT_EQ(core.loop->progress_st(), 0u);
  EXPECT_EQ(core.loop->owned_st(), 1u) << "one turn read control's ring";
  dev.run_all();
  while (core.cq().pending() != 0) core.loop->progress_st();
  EXPECT_TRUE(core.loop->idle_for_sleep_st());

  const std::vector<std::uint8_t> p = pattern(100, 7);
  ASSERT_TRUE(c.peer().send(inline_request(1, 42, p)));
  dev.run_all();
  ASSERT_GT(core.cq().pending(), 0u);
  EXPECT_FALSE(core.loop->idle_for_sleep_st()) << "a request's completion is on the CQ";
  EXPECT_EQ(core.cq().pending(), 0u) << "the check took it off the CQ";
  EXPECT_EQ(svc.requests, 0u) << "the check ran nothing";
  EXPECT_FALSE(core.loop->idle_for_sleep_st()) << "still set aside";
  EXPECT_GE(core.loop->progress_st(), 1u);
  EXPECT_EQ(svc.requests, 1u);
  for (int i = 0; i < 100 && c.peer().inbox.empty(); ++i) {
    dev.run_all();
    c.peer().poll();
    core.loop->progress_st();
  }
  ASSERT_EQ(c.peer().inbox.size(), 1u);
  EXPECT_EQ(c.peer().inbox.front().cookie, 42u);
  EXPECT_EQ(c.peer().inbox.front().payload, p);
  for (int i = 0; i < 100 && (dev.run_all() != 0 || core.cq().pending() != 0); ++i) core.loop->progress_st();
  EXPECT_TRUE(core.loop->idle_for_sleep_st());
  expect_no_core_errors(core.counters());
  core.close(c);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  expect_device_clean(rig);
}

// A burst of requests beyond what the peer's credits allow at once: the peer's machine queues the rest, the
// answers return credits, every request is answered once, in order.
TYPED_TEST(CoreLoopTest, EchoWindowBeyondTheCreditsDrainsInOrder) {
  TypeParam rig;
  EchoService svc;
  Core<TypeParam, EchoService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);
  constexpr std::uint64_t kRequests = 20;  // depth 8, reserve 2: at most 6 requests leave at once
  std::vector<std::vector<std::uint8_t>> sent;
  for (std::uint64_t cookie = 1; cookie <= kRequests; ++cookie) {
    sent.push_back(pattern(cookie * 11, static_cast<std::uint32_t>(cookie)));
    ASSERT_TRUE(c.peer().send(inline_request(1, cookie, sent.back())));
  }
  EXPECT_EQ(c.peer().credits().queued(protocol::CreditClass::kRequest), kRequests - 6);
  core.settle();
  ASSERT_EQ(c.peer().inbox.size(), kRequests);
  for (std::uint64_t i = 0; i < kRequests; ++i) {
    EXPECT_EQ(c.peer().inbox[i].cookie, i + 1);
    EXPECT_EQ(c.peer().inbox[i].payload, sent[i]);
  }
  EXPECT_EQ(svc.requests, kRequests);
  expect_no_core_errors(core.counters());
  expect_credits_conserved(c);
  expect_device_clean(rig);
}

// ---- object service --------------------------------------------------------------------------------------

TYPED_TEST(CoreLoopTest, ObjectPutGetDeleteInline) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  StoreArena arena(dev);
  ObjectService svc(arena.config());
  Core<TypeParam, ObjectService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);

  const std::vector<std::uint8_t> v1 = pattern(200, 1);
  const std::vector<std::uint8_t> v2 = pattern(470 - 3, 2);  // the largest inline PUT of a 2-byte key
  std::uint64_t cookie = 0;
  auto put = [&](std::string_view key, const std::vector<std::uint8_t>& v) {
    const std::vector<std::uint8_t> p = object_payload(key, v);
    return core.ask(c, inline_request(op(ObjectOpcode::kPut), ++cookie, p));
  };
  auto keyed = [&](ObjectOpcode o, std::string_view key) {
    const std::vector<std::uint8_t> p = object_payload(key);
    return core.ask(c, inline_request(op(o), ++cookie, p));
  };

  FakePeer::Received r = put("k1", v1);
  EXPECT_EQ(r.type, MessageType::kCompletion);
  EXPECT_EQ(r.status, st(ObjectStatus::kOk));
  EXPECT_EQ(r.byte_count, v1.size());
  EXPECT_EQ(r.cookie, cookie);
  r = keyed(ObjectOpcode::kGet, "k1");
  EXPECT_EQ(r.type, MessageType::kInlineResponse);
  EXPECT_EQ(r.payload, v1);
  r = put("k1", v2);  // overwrite
  EXPECT_EQ(r.status, st(ObjectStatus::kOk));
  EXPECT_EQ(r.byte_count, v2.size());
  r = keyed(ObjectOpcode::kGet, "k1");
  EXPECT_EQ(r.payload, v2);
  EXPECT_EQ(arena.store->stats().objects, 1u);
  EXPECT_EQ(arena.store->stats().value_bytes, v2.size());
  r = keyed(ObjectOpcode::kDelete, "k1");
  EXPECT_EQ(r.type, MessageType::kCompletion);
  EXPECT_EQ(r.status, st(ObjectStatus::kOk));
  r = keyed(ObjectOpcode::kGet, "k1");
  EXPECT_EQ(r.type, MessageType::kCompletion);
  EXPECT_EQ(r.status, st(ObjectStatus::kNotFound));
  r = keyed(ObjectOpcode::kDelete, "k1");
  EXPECT_EQ(r.status, st(ObjectStatus::kNotFound));
  // A key prefix of length 0: refused with kBadRequest, counted by reason; the connection lives on.
  const std::uint8_t bad[1] = {0};
  r = core.ask(c, inline_request(op(ObjectOpcode::kGet), ++cookie, bad));
  EXPECT_EQ(r.status, st(ObjectStatus::kBadRequest));

  const ObjectServiceCounters& s = svc.counters();
  EXPECT_EQ(s.requests[opi(protocol::ObjectOp::kPut)], 2u);
  EXPECT_EQ(s.statuses[opi(protocol::ObjectOp::kPut)][sti(ObjectStatus::kOk)], 2u);
  EXPECT_EQ(s.requests[opi(protocol::ObjectOp::kGet)], 3u);
  EXPECT_EQ(s.statuses[opi(protocol::ObjectOp::kGet)][sti(ObjectStatus::kOk)], 2u);
  EXPECT_EQ(s.statuses[opi(protocol::ObjectOp::kGet)][sti(ObjectStatus::kNotFound)], 1u);
  EXPECT_EQ(s.requests[opi(protocol::ObjectOp::kDelete)], 2u);
  EXPECT_EQ(s.statuses[opi(protocol::ObjectOp::kDelete)][sti(ObjectStatus::kNotFound)], 1u);
  EXPECT_EQ(s.parse_errors[static_cast<std::size_t>(protocol::ObjectParseError::kBadKeyLength)], 1u);
  EXPECT_EQ(s.bytes_in, v1.size() + v2.size());
  EXPECT_EQ(s.bytes_out, v1.size() + v2.size());
  EXPECT_EQ(s.send_failures, 0u);
  EXPECT_EQ(s.bulk_failures, 0u);
  expect_no_core_errors(core.counters());
  expect_credits_conserved(c);
  core.close(c);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  core.destroy(c);
  store::test::expect_empty(*arena.store);
  expect_device_clean(rig);
}

// PUT by RDMA READ from three scattered fragments, GET by RDMA WRITE into four: every byte checked, the
// unused destination untouched, the completion seen only after the data landed.
TYPED_TEST(CoreLoopTest, ObjectPutReadChunkAndGetWriteChunkMoveEveryByte) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  StoreArena arena(dev);
  ObjectService svc(arena.config());
  Core<TypeParam, ObjectService> core(rig, svc);
  LoopbackConn& c = core.open();  // rd_depth 2
  core.adopt(c);
  FakePeer& peer = c.peer();
  std::memset(peer.bulk(), kSentinel, peer.bulk_size());

  const std::vector<std::uint8_t> value = pattern(3000, 42);
  const std::vector<protocol::Fragment> src = {peer.fragment(0, 1000), peer.fragment(4096, 1200),
                                               peer.fragment(8192, 800)};
  std::memcpy(peer.bulk() + 0, value.data(), 1000);
  std::memcpy(peer.bulk() + 4096, value.data() + 1000, 1200);
  std::memcpy(peer.bulk() + 8192, value.data() + 2200, 800);
  const std::vector<std::uint8_t> key = object_payload("big");
  FakePeer::Received r =
      core.ask(c, chunk_request(MessageType::kReadChunkRequest, op(ObjectOpcode::kPut), 1, key, src));
  EXPECT_EQ(r.type, MessageType::kCompletion);
  EXPECT_EQ(r.status, st(ObjectStatus::kOk));
  EXPECT_EQ(r.byte_count, 3000u);
  EXPECT_EQ(arena.value("big"), value);
  const CoreCounters& k = core.counters();
  EXPECT_EQ(k.read_chunks, 1u);
  EXPECT_EQ(k.read_bytes, 3000u);
  EXPECT_EQ(k.rdma_reads_queued, 1u);  // three fragments, two READs in flight at most
  EXPECT_EQ(k.completions_rdma, 3u);
  EXPECT_EQ(c.qp().stats().bytes_read, 3000u);

  // Too big to answer inline (472 bytes at most): kTooSmall with the size needed.
  r = core.ask(c, inline_request(op(ObjectOpcode::kGet), 2, key));
  EXPECT_EQ(r.type, MessageType::kCompletion);
  EXPECT_EQ(r.status, st(ObjectStatus::kTooSmall));
  EXPECT_EQ(r.byte_count, 3000u);
  // A destination too small: nothing written, the size needed.
  const std::size_t kDst = 16384;
  r = core.ask(c, chunk_request(MessageType::kWriteChunkRequest, op(ObjectOpcode::kGet), 3, key,
                                {peer.fragment(kDst, 1000), peer.fragment(kDst + 2048, 1000)}));
  EXPECT_EQ(r.status, st(ObjectStatus::kTooSmall));
  EXPECT_EQ(r.byte_count, 3000u);
  EXPECT_TRUE(std::all_of(peer.bulk() + kDst, peer.bulk() + peer.bulk_size(),
                          [](std::uint8_t b) { return b == kSentinel; }));

  // Four 1000-byte fragments, 2048 apart: three are written (1000 each), the fourth and the gaps are not.
  std::vector<protocol::Fragment> dst;
  for (std::size_t i = 0; i < 4; ++i) dst.push_back(peer.fragment(kDst + i * 2048, 1000));
  ASSERT_TRUE(peer.send(chunk_request(MessageType::kWriteChunkRequest, op(ObjectOpcode::kGet), 4, key, dst)));
  // One work request at a time: when the completion reaches the peer, the bytes are already there.
  bool answered = false;
  for (int i = 0; i < 200 && !answered; ++i) {
    dev.step(peer.qp());
    dev.step(c.qp());
    core.turn();
    peer.poll();
    if (peer.inbox.empty()) continue;
    answered = true;
    r = peer.inbox.front();
    peer.inbox.pop_front();
    for (std::size_t f = 0; f < 3; ++f) {
      EXPECT_TRUE(std::equal(value.begin() + static_cast<std::ptrdiff_t>(f * 1000),
                             value.begin() + static_cast<std::ptrdiff_t>(f * 1000 + 1000),
                             peer.bulk() + kDst + f * 2048))
          << "fragment " << f;
    }
  }
  ASSERT_TRUE(answered);
  EXPECT_EQ(r.type, MessageType::kCompletion);
  EXPECT_EQ(r.status, st(ObjectStatus::kOk));
  EXPECT_EQ(r.byte_count, 3000u);
  core.settle();
  for (std::size_t i = kDst; i < peer.bulk_size(); ++i) {
    const std::size_t rel = i - kDst;
    if (rel < 3 * 2048 && rel % 2048 < 1000) continue;  // written
    ASSERT_EQ(peer.bulk()[i], kSentinel) << "byte " << i << " of the destination was touched";
  }
  EXPECT_EQ(k.write_chunks, 1u);
  EXPECT_EQ(k.write_bytes, 3000u);
  EXPECT_EQ(c.qp().stats().bytes_written, 3000u);
  EXPECT_EQ(arena.refs("big"), 1u);  // the GET's pin is gone
  const ObjectServiceCounters& s = svc.counters();
  EXPECT_EQ(s.bytes_in, 3000u);
  EXPECT_EQ(s.bytes_out, 3000u);
  EXPECT_EQ(s.bulk_failures, 0u);
  EXPECT_EQ(s.statuses[opi(protocol::ObjectOp::kGet)][sti(ObjectStatus::kTooSmall)], 2u);
  expect_no_core_errors(k);
  expect_credits_conserved(c);

  r = core.ask(c, inline_request(op(ObjectOpcode::kDelete), 5, key));
  EXPECT_EQ(r.status, st(ObjectStatus::kOk));
  core.close(c);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  core.destroy(c);
  store::test::expect_empty(*arena.store);
  expect_device_clean(rig);
}

// ---- reordering --------------------------------------------------------------------------------------

// Three connections PUT at once by read chunk; the device runs their READs in an interleaved order and the
// CQ delivers them shuffled across connections (each work queue keeps its order, as on a real CQ). Each
// value lands under its own key, each answer on its own connection.
TYPED_TEST(CoreLoopTest, ReorderedCompletionsAcrossConnections) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  StoreArena arena(dev);
  ObjectService svc(arena.config());
  Core<TypeParam, ObjectService> core(rig, svc);
  constexpr int kConns = 3;
  std::vector<LoopbackConn*> cs;
  std::vector<std::vector<std::uint8_t>> values;
  std::vector<std::vector<std::uint8_t>> keys;
  for (int i = 0; i < kConns; ++i) {
    LoopbackConn& c = core.open();
    core.adopt(c);
    cs.push_back(&c);
    values.push_back(pattern(1500 + 100 * static_cast<std::size_t>(i), 100 + static_cast<std::uint32_t>(i)));
    keys.push_back(object_payload("key" + std::to_string(i)));
    FakePeer& p = c.peer();
    // Three fragments each (rd_depth 2: a third READ is posted only after a completion).
    const std::size_t n = values.back().size() / 3;
    std::vector<protocol::Fragment> frags;
    for (std::size_t f = 0; f < 3; ++f) {
      std::memcpy(p.bulk() + f * 4096, values.back().data() + f * n, n);
      frags.push_back(p.fragment(f * 4096, static_cast<std::uint32_t>(n)));
    }
    ASSERT_TRUE(p.send(chunk_request(MessageType::kReadChunkRequest, op(ObjectOpcode::kPut),
                                     10 + static_cast<std::uint64_t>(i), keys.back(), frags)));
  }
  // The requests land in the order 2, 0, 1; the core takes them in one burst.
  for (const int i : {2, 0, 1}) ASSERT_TRUE(dev.step(cs[static_cast<std::size_t>(i)]->peer().qp()));
  core.cq().interleave(7);
  core.turn();
  EXPECT_EQ(core.counters().read_chunks, 3u);
  // READs run in a shuffled order across the connections, CQEs shuffled again before each poll.
  const int order[] = {1, 2, 0, 2, 1, 0, 0, 1, 2, 1, 0, 2};
  std::uint64_t seed = 1;
  for (const int i : order) {
    dev.step(cs[static_cast<std::size_t>(i)]->qp());
    if (seed % 2 == 0) {
      core.cq().interleave(seed);
      core.turn();
    }
    ++seed;
  }
  core.settle();
  for (int i = 0; i < kConns; ++i) {
    FakePeer& p = cs[static_cast<std::size_t>(i)]->peer();
    ASSERT_EQ(p.inbox.size(), 1u) << "connection " << i;
    EXPECT_EQ(p.inbox[0].cookie, 10u + static_cast<std::uint64_t>(i));
    EXPECT_EQ(p.inbox[0].status, st(ObjectStatus::kOk));
    EXPECT_EQ(p.inbox[0].byte_count, values[static_cast<std::size_t>(i)].size() / 3 * 3);
    const std::size_t n = values[static_cast<std::size_t>(i)].size() / 3 * 3;
    const std::vector<std::uint8_t> want(
        values[static_cast<std::size_t>(i)].begin(),
        values[static_cast<std::size_t>(i)].begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_EQ(arena.value("key" + std::to_string(i)), want) << "connection " << i;
    expect_credits_conserved(*cs[static_cast<std::size_t>(i)]);
  }
  EXPECT_EQ(core.counters().completions_rdma, 9u);
  EXPECT_EQ(svc.counters().statuses[opi(protocol::ObjectOp::kPut)][sti(ObjectStatus::kOk)], 3u);
  expect_no_core_errors(core.counters());
  expect_device_clean(rig);
}

// ---- flushes ------------------------------------------------------------------------------------------

// A connection control gives up before ADOPT (its receives are posted): CLOSE, its receives flush one by
// one, CLOSED comes with the last and not before.
TYPED_TEST(CoreLoopTest, FlushedReceivesOfAnUnadoptedConnectionEndInOneClosed) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  EchoService svc;
  Core<TypeParam, EchoService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.close(c, CloseReason::kHandshakeTimeout);
  EXPECT_EQ(c.cc().state, CoreConnState::kDraining);
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(core.replies.closed.empty()) << "CLOSED before receive " << i << " flushed";
    ASSERT_TRUE(dev.step(c.qp(), Queue::kRecv));
    core.turn();
  }
  ASSERT_EQ(core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(dev.outstanding(c.qp()), 0u);
  EXPECT_EQ(c.cc().state, CoreConnState::kClosed);
  const CoreCounters& k = core.counters();
  EXPECT_EQ(k.completions_flushed, 8u);
  EXPECT_EQ(k.completions_recv, 8u);
  EXPECT_EQ(k.completions_error, 0u);
  EXPECT_EQ(k.adopted, 0u);
  EXPECT_EQ(k.closed, 1u);
  EXPECT_TRUE(core.replies.failed.empty());
  core.destroy(c);
  core.settle();
  expect_device_clean(rig);
}

// An owned connection whose QP goes to ERR under it (control moved it on DISCONNECTED; its CLOSE is on the
// way): the flushes fail it quietly (a flush is no error: no FAILED), the other connection keeps working.
TYPED_TEST(CoreLoopTest, FlushOnAnOwnedConnectionFailsItQuietly) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  EchoService svc;
  Core<TypeParam, EchoService> core(rig, svc);
  LoopbackConn& a = core.open();
  LoopbackConn& b = core.open();
  core.adopt(a);
  core.adopt(b);
  const std::vector<std::uint8_t> p = pattern(64, 3);
  EXPECT_EQ(core.ask(a, inline_request(1, 1, p)).payload, p);
  rig.device().qp_to_err(a.backend_qp());
  ASSERT_TRUE(dev.step(a.qp(), Queue::kRecv));
  core.turn();
  EXPECT_EQ(a.cc().state, CoreConnState::kFailed);
  EXPECT_EQ(core.loop->owned_st(), 1u);
  EXPECT_TRUE(core.replies.failed.empty());
  EXPECT_EQ(core.ask(b, inline_request(1, 2, p)).payload, p);  // b does not notice
  core.res->control_mailbox().send_st(ToCore::close(a.handle(), CloseReason::kPeerDisconnected));
  core.settle();
  EXPECT_EQ(core.replies.closed_count(a.handle()), 1u);
  EXPECT_EQ(core.replies.closed_count(b.handle()), 0u);
  EXPECT_EQ(dev.outstanding(a.qp()), 0u);
  // Eight receives, and the drain marker behind the answer that ran unsignaled (no CQE of its own).
  EXPECT_EQ(core.counters().completions_flushed, 9u);
  EXPECT_EQ(core.counters().completions_drain, 1u);
  EXPECT_EQ(core.counters().completions_error, 0u);
  EXPECT_TRUE(core.replies.failed.empty());
  expect_device_clean(rig);
}

// Messages that arrive between accept and ADOPT are parked and handled at ADOPT, in arrival order.
TYPED_TEST(CoreLoopTest, EarlyMessagesAreAnsweredAtAdoptInOrder) {
  TypeParam rig;
  EchoService svc;
  Core<TypeParam, EchoService> core(rig, svc);
  LoopbackConn& c = core.open();
  std::vector<std::vector<std::uint8_t>> sent;
  for (std::uint64_t cookie = 1; cookie <= 3; ++cookie) {
    sent.push_back(pattern(cookie * 30, static_cast<std::uint32_t>(cookie)));
    ASSERT_TRUE(c.peer().send(inline_request(1, cookie, sent.back())));
  }
  core.settle();
  EXPECT_EQ(core.counters().early_rx, 3u);
  EXPECT_TRUE(c.peer().inbox.empty());
  EXPECT_EQ(svc.requests, 0u);
  core.adopt(c);
  core.settle();
  ASSERT_EQ(c.peer().inbox.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c.peer().inbox[i].cookie, i + 1);
    EXPECT_EQ(c.peer().inbox[i].payload, sent[i]);
  }
  expect_credits_conserved(c);
  expect_no_core_errors(core.counters());
  expect_device_clean(rig);
}

// ---- failed posts -------------------------------------------------------------------------------------

// The scenario of a GET whose value needs four WRITEs, where the post fails at the third: the device took
// W1 and W2, not W3, W4 (the signaled last one) nor the completion behind them. The connection FAILs; the op
// ends exactly once (one write-done hook, counted as a bulk failure) when W1 and W2 have left the device,
// and only then is the pin released, once.
struct WriteChainFixture {
  FakeRig rig;
  FakeDevice& dev = rig.dev;
  StoreArena arena{dev};
  ObjectService svc{arena.config()};
  Core<FakeRig, ObjectService> core{rig, svc};
  LoopbackConn* c = nullptr;
  std::vector<std::uint8_t> value = pattern(4000, 9);
  std::vector<std::uint8_t> key = object_payload("v");

  void start_get_with_failing_third_write() {
    c = &core.open();
    core.adopt(*c);
    EXPECT_EQ(arena.store->put(0, "v", std::as_bytes(std::span(value))), store::Status::kOk);
    FakePeer& peer = c->peer();
    std::memset(peer.bulk(), kSentinel, peer.bulk_size());
    std::vector<protocol::Fragment> dst;
    for (std::size_t i = 0; i < 4; ++i) dst.push_back(peer.fragment(i * 2048, 1000));
    ASSERT_TRUE(
        peer.send(chunk_request(MessageType::kWriteChunkRequest, op(ObjectOpcode::kGet), 1, key, dst)));
    ASSERT_TRUE(dev.step(peer.qp()));  // the request lands in a receive of the core
    c->qp().fail_send_post(2);         // W1 and W2 post; W3 fails, with everything behind it
    core.turn();
  }
};

// ---- memory windows (core_windows.hpp) ----------------------------------------------------------------

// A requester's per-request keys, as a service stages them: a bind of window `slot` over a range, and its
// invalidation, each on command from the test (once per loop turn, from on_poll_st); the invalidations the
// core reported back.
struct WindowService {
  struct ConnState {
    std::uint32_t unused = 0;
  };
  CoreConn* conn = nullptr;
  bool want_bind = false, want_invalidate = false;
  std::uint32_t slot = 0;
  WindowBind bind{};
  std::uint32_t key = 0;  // what the last bind returned
  bool invalidate_staged = false;
  std::vector<std::uint32_t> invalidated;

  template <typename Api>
  void on_adopt_st(Api&, CoreConn& c) noexcept {
    c.svc.reset<ConnState>();
    conn = &c;
  }
  template <typename Api>
  void on_request_st(Api&, CoreConn&, const protocol::Message&) noexcept {}
  template <typename Api>
  void on_response_st(Api&, CoreConn&, const protocol::Message&) noexcept {}
  template <typename Api>
  void on_close_st(Api&, CoreConn&) noexcept {
    conn = nullptr;
  }
  template <typename Api>
  bool on_poll_st(Api& api) noexcept {
    if (conn == nullptr) return false;
    if (want_bind) {
      want_bind = false;
      key = api.bind_window_st(*conn, slot, bind);
      return true;
    }
    if (want_invalidate) {
      want_invalidate = false;
      invalidate_staged = api.invalidate_window_st(*conn, slot);
      return true;
    }
    return false;
  }
  template <typename Api>
  void on_window_invalidated_st(Api&, CoreConn&, std::uint32_t w) noexcept {
    invalidated.push_back(w);
  }
};

// One core asking for two windows per connection, over a device with or without type-2 windows, and one
// adopted connection. On the simulated mlx5 NIC the windows are bound and invalidated by UMR WQEs the NIC
// parses byte by byte (sim_mlx5.hpp) into the model's binds and invalidations.
template <typename Rig>
struct WindowFixture {
  static CoreConfig config() {
    CoreConfig cfg = test_core_config();
    cfg.windows_per_conn = 2;
    return cfg;
  }
  explicit WindowFixture(bool with_windows) : device_windows(with_windows) {}
  bool device_windows;
  Rig rig;
  bool device_set = (rig.model().set_type2_windows(device_windows), true);  // before the connection's QP
  WindowService svc;
  CoreConfig cfg = config();
  Core<Rig, WindowService> core{rig, svc, cfg};
  LoopbackConn& c = core.open();
  bool adopted = (core.adopt(c), true);
};

// A bound window grants its one access to exactly its range through its own QP, until its invalidation has
// completed; each bind has a new key; the FIFO accounting holds after every turn (Core::turn audits it); the
// invalidation's completion reaches the service. A bind the device refuses fails the connection.
TYPED_TEST(CoreLoopTest, MemoryWindowGrantsItsRangeUntilInvalidated) {
  WindowFixture<TypeParam> f(true);
  FakeDevice& dev = f.rig.model();
  WindowService& svc = f.svc;
  const CoreConfig& cfg = f.cfg;
  Core<TypeParam, WindowService>& core = f.core;
  LoopbackConn& c = f.c;
  ASSERT_EQ(c.cc().windows.size(), 2u);
  EXPECT_EQ(core.loop->windows_st(c.cc()), 2u);
  EXPECT_EQ(send_queue_depth(cfg), cfg.tx_per_conn + 1 + protocol::kMaxFragments + 4)
      << "two more send work requests per window";
  EXPECT_GE(c.qp().max_send_wr(), send_queue_depth(cfg));

  std::vector<std::uint8_t> mem(8192);
  const auto base = reinterpret_cast<std::uintptr_t>(mem.data());
  std::string err;
  std::unique_ptr<BackendMr> mr = dev.register_memory(mem.data(), mem.size(), IBV_ACCESS_MW_BIND, &err);
  ASSERT_NE(mr, nullptr) << err;
  ibv_mr vmr{};
  vmr.lkey = mr->lkey;
  EXPECT_FALSE(dev.remote_access(c.qp(), base, 64, mr->rkey, IBV_ACCESS_REMOTE_READ))
      << "a registration for binding grants nothing by its own key";

  const std::uint64_t sends_before = core.counters().send_wrs;
  svc.slot = 0;
  svc.bind = WindowBind{base + 1024, 2048, &vmr, false};
  svc.want_bind = true;
  core.settle();
  const std::uint32_t k1 = svc.key;
  ASSERT_NE(k1, 0u);
  EXPECT_EQ(core.counters().send_wrs, sends_before + 1);
  EXPECT_EQ(core.counters().completions_send, 0u) << "the bind is unsignaled";
  EXPECT_TRUE(dev.remote_access(c.qp(), base + 1024, 2048, k1, IBV_ACCESS_REMOTE_READ));
  EXPECT_FALSE(dev.remote_access(c.qp(), base + 1024, 2048, k1, IBV_ACCESS_REMOTE_WRITE)) << "read only";
  EXPECT_FALSE(dev.remote_access(c.qp(), base + 1023, 64, k1, IBV_ACCESS_REMOTE_READ)) << "before the range";
  EXPECT_FALSE(dev.remote_access(c.qp(), base + 3000, 100, k1, IBV_ACCESS_REMOTE_READ)) << "past the range";
  EXPECT_FALSE(dev.remote_access(c.peer().qp(), base + 1024, 64, k1, IBV_ACCESS_REMOTE_READ))
      << "a type-2 window is reached through its own QP only";

  svc.want_invalidate = true;
  core.settle();
  EXPECT_TRUE(svc.invalidate_staged);
  EXPECT_EQ(svc.invalidated, std::vector<std::uint32_t>{0});
  EXPECT_EQ(core.counters().completions_send, 1u) << "the invalidation is signaled";
  EXPECT_FALSE(dev.remote_access(c.qp(), base + 1024, 64, k1, IBV_ACCESS_REMOTE_READ)) << "dead after it";

  // Bound again (a GET's destination: remote write, which needs local write on the registration): a new key,
  // the old one stays dead. Memory registered without local write refuses it: the connection fails.
  std::unique_ptr<BackendMr> wmr =
      dev.register_memory(mem.data(), mem.size(), IBV_ACCESS_MW_BIND | IBV_ACCESS_LOCAL_WRITE, &err);
  ASSERT_NE(wmr, nullptr) << err;
  ibv_mr wvmr{};
  wvmr.lkey = wmr->lkey;
  svc.bind = WindowBind{base, 4096, &wvmr, true};
  svc.want_bind = true;
  core.settle();
  const std::uint32_t k2 = svc.key;
  EXPECT_NE(k2, k1);
  EXPECT_TRUE(dev.remote_access(c.qp(), base, 4096, k2, IBV_ACCESS_REMOTE_WRITE));
  EXPECT_FALSE(dev.remote_access(c.qp(), base, 4096, k1, IBV_ACCESS_REMOTE_WRITE));
  EXPECT_TRUE(core.replies.failed.empty());

  svc.slot = 1;
  svc.bind = WindowBind{base, 4096, &vmr, true};  // remote write over memory registered without local write
  svc.want_bind = true;
  core.settle();
  EXPECT_NE(svc.key, 0u) << "staged: only the device can refuse it";
  ASSERT_EQ(core.replies.failed_count(c.handle()), 1u) << "the refused bind fails the connection";
  EXPECT_EQ(core.replies.failed[0].status, static_cast<std::uint32_t>(IBV_WC_MW_BIND_ERR));
  EXPECT_EQ(c.cc().state, CoreConnState::kFailed);
  EXPECT_EQ(core.loop->bind_window_st(c.cc(), 0, svc.bind), 0u) << "nothing binds on a failed connection";
  EXPECT_FALSE(core.loop->invalidate_window_st(c.cc(), 0));
  core.close(c);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(dev.outstanding(c.qp()), 0u);
  if constexpr (std::is_same_v<TypeParam, SimMlx5Rig>) {
    EXPECT_EQ(f.rig.sim.stats().umr_wqes, 4u) << "three binds and an invalidation, each one UMR";
  }
}

// Without type-2 windows on the device, a connection gets none and the service learns it (windows_st 0).
TYPED_TEST(CoreLoopTest, DeviceWithoutWindowsGivesNone) {
  WindowFixture<TypeParam> f(false);
  Core<TypeParam, WindowService>& core = f.core;
  LoopbackConn& c = f.c;
  EXPECT_EQ(core.loop->windows_st(c.cc()), 0u);
  EXPECT_EQ(core.loop->bind_window_st(c.cc(), 0, WindowBind{}), 0u);
  EXPECT_FALSE(core.loop->invalidate_window_st(c.cc(), 0));
}

TEST(CoreLoopFake, FailedPostInTheMiddleOfAWriteChainEndsTheOpOnceAndFailsTheConnection) {
  WriteChainFixture f;
  f.start_get_with_failing_third_write();
  LoopbackConn& c = *f.c;
  const CoreCounters& k = f.core.counters();
  EXPECT_EQ(c.qp().stats().injected_post_failures, 1u);
  EXPECT_EQ(c.qp().stats().unposted_sends, 3u);  // W3, W4 and the completion
  EXPECT_EQ(c.qp().send_queue().size(), 2u);     // W1, W2 on the device
  EXPECT_EQ(k.errors[err(CoreError::kPostSend)], 1u);
  EXPECT_EQ(k.write_chunks, 1u);
  ASSERT_EQ(f.core.replies.failed.size(), 1u);
  EXPECT_EQ(f.core.replies.failed[0].conn, c.handle());
  EXPECT_EQ(f.core.replies.failed[0].kind, FailureKind::kCompletion);
  EXPECT_EQ(c.cc().state, CoreConnState::kFailed);
  EXPECT_EQ(f.core.loop->owned_st(), 0u);
  // W1 and W2 may still read the pinned value: the op has not ended, the pin stays.
  EXPECT_EQ(f.svc.counters().bulk_failures, 0u);
  EXPECT_EQ(f.arena.refs("v"), 2u);
  EXPECT_EQ(f.svc.counters().bytes_out, 0u);
  // Control answers FAILED with CLOSE; W1 and W2 flush, then the drain marker: the op ends (the write-done
  // hook, with op.failed), then CLOSED once.
  f.core.close(c, close_reason_for(FailureKind::kCompletion));
  f.core.settle();
  EXPECT_EQ(f.core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(f.core.replies.failed.size(), 1u);
  EXPECT_EQ(f.dev.outstanding(c.qp()), 0u);
  EXPECT_EQ(f.svc.counters().bulk_failures, 1u);  // once
  EXPECT_TRUE(c.peer().inbox.empty());            // the answer never left
  EXPECT_EQ(f.arena.refs("v"), 1u);               // unpinned exactly once
  EXPECT_EQ(f.svc.counters().released_at_close, 0u);
  f.core.destroy(c);
  f.core.settle();
  EXPECT_EQ(f.arena.store->remove(0, "v"), store::Status::kOk);
  store::test::expect_empty(*f.arena.store);
  expect_device_clean(f.rig);
}

// A WRITE chain whose signaled last WRITE was not posted, while fillers before it were: the device still
// reads the pinned block through them. Were the op ended (and the value unpinned) at the failed post, another
// core deleting or overwriting the key would free the block for reuse while W1 and W2 read it, and the
// requester would receive another object's bytes. The op ends only once nothing of it is on the device.
TEST(CoreLoopFake, PinOutlivesThePostedWritesOfAFailedChain) {
  WriteChainFixture f;
  f.start_get_with_failing_third_write();
  LoopbackConn& c = *f.c;
  ASSERT_EQ(c.qp().send_queue().size(), 2u);
  EXPECT_EQ(f.arena.refs("v"), 2u) << "the GET's pin went while two posted WRITEs still read the block";
  // Another core replaces the key meanwhile; the old block may be reused at once.
  EXPECT_EQ(f.arena.store->remove(0, "v"), store::Status::kOk);
  const std::vector<std::uint8_t> other = pattern(4000, 77);
  EXPECT_EQ(f.arena.store->put(0, "w", std::as_bytes(std::span(other))), store::Status::kOk);
  // W1 and W2 run (the QP is still RTS: control has not read the FAILED yet).
  ASSERT_TRUE(f.dev.step(c.qp()));
  ASSERT_TRUE(f.dev.step(c.qp()));
  FakePeer& peer = c.peer();
  EXPECT_TRUE(std::equal(f.value.begin(), f.value.begin() + 1000, peer.bulk()))
      << "the requester got bytes that are not its value's";
  EXPECT_TRUE(std::equal(f.value.begin() + 1000, f.value.begin() + 2000, peer.bulk() + 2048));
  EXPECT_FALSE(std::equal(other.begin(), other.begin() + 1000, peer.bulk())) << "they are key w's";
  f.core.close(c, CloseReason::kCompletionError);
  f.core.settle();
  EXPECT_EQ(f.core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(f.svc.counters().bulk_failures, 1u);
}

// An unposted tail that holds a READ op's last READs: the whole tail is taken back before any bulk hook runs.
// (Ending the op in the middle of the rewind let its read-failed hook answer and start the next chunk
// request, pushing onto the FIFO being rewound: the rewind then took back the wrong entries, an orphan READ
// went to the device uncounted and wrote into a reservation the store handed out again.) Here: an inline
// GET's answer A, then PUT p's READs, all fail to post; PUT q waits behind p.
TEST(CoreLoopFake, UnpostedTailThatEndsAReadOpLeavesTheAccountingRight) {
  FakeRig rig;
  FakeDevice& dev = rig.dev;
  StoreArena arena(dev);
  ObjectService svc(arena.config());
  Core<FakeRig, ObjectService> core(rig, svc);
  LoopbackConn& c = core.open();  // rd_depth 2
  core.adopt(c);
  FakePeer& peer = c.peer();
  std::memset(peer.bulk(), 0x5c, peer.bulk_size());
  const std::vector<std::uint8_t> kx = object_payload("x"), kp = object_payload("p"),
                                  kq = object_payload("q");
  ASSERT_TRUE(peer.send(inline_request(op(ObjectOpcode::kGet), 1, kx)));
  ASSERT_TRUE(peer.send(chunk_request(MessageType::kReadChunkRequest, op(ObjectOpcode::kPut), 2, kp,
                                      {peer.fragment(0, 1000), peer.fragment(1024, 1000)})));
  ASSERT_TRUE(peer.send(chunk_request(MessageType::kReadChunkRequest, op(ObjectOpcode::kPut), 3, kq,
                                      {peer.fragment(4096, 1000), peer.fragment(5120, 1000)})));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(dev.step(peer.qp()));
  c.qp().fail_send_post(0);  // A, p's two READs: none posts
  core.turn();               // audits: every work request on the device has its FIFO entry
  EXPECT_EQ(core.replies.failed.size(), 1u);
  // Whatever the core does next, its reservations last as long as READs may write into them: another core
  // writing meanwhile never sees its value changed.
  const std::vector<std::uint8_t> other = pattern(2000, 11);
  bool written = false;
  while (dev.step(c.qp())) {
    core.turn();
    if (!written && arena.store->stats().used_bytes == 0) {
      ASSERT_EQ(arena.store->put(0, "z", std::as_bytes(std::span(other))), store::Status::kOk);
      written = true;
    }
  }
  if (written) {
    EXPECT_EQ(arena.value("z"), other) << "a READ wrote into a block the store had given out again";
  }
  core.close(c, CloseReason::kCompletionError);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(arena.store->stats().objects, written ? 1u : 0u);
}

// A drain marker that cannot be posted (rare: a real device takes a post on a QP in ERR, and the SQ keeps a
// slot for the marker): the FIFO stays as it is, the timers post the marker again, and CLOSED waits until the
// device holds nothing of the connection (dropping the FIFO let flush CQEs name the descriptors of a
// connection control had freed).
struct DrainFixture {
  FakeRig rig;
  FakeDevice& dev = rig.dev;
  EchoService svc;
  Core<FakeRig, EchoService> core{rig, svc};
  LoopbackConn* c = nullptr;

  // An answer on the device that has not run (above the inline size: the device reads its buffer), then
  // CLOSE with the drain marker's post failing.
  void close_with_failing_drain(bool sticky) {
    c = &core.open();
    core.adopt(*c);
    const std::vector<std::uint8_t> p = pattern(300, 1);
    ASSERT_TRUE(c->peer().send(inline_request(1, 1, p)));
    ASSERT_TRUE(dev.step(c->peer().qp()));
    core.turn();
    ASSERT_EQ(c->qp().send_queue().size(), 1u);
    rig.dev.qp_to_err(c->qp());
    c->qp().fail_send_post(0, sticky);
    core.res->control_mailbox().send_st(ToCore::close(c->handle(), CloseReason::kLocal));
    core.turn();  // CLOSE: the marker's post fails; the turn's timers try again
    EXPECT_GE(core.counters().errors[err(CoreError::kPostSend)], 1u);
  }
};

TEST(CoreLoopFake, DrainMarkerThatFailedToPostIsPostedAgainByTheTimers) {
  DrainFixture f;
  f.close_with_failing_drain(false);
  LoopbackConn& c = *f.c;
  EXPECT_EQ(f.core.counters().errors[err(CoreError::kPostSend)], 1u);
  EXPECT_TRUE(c.cc().drain_posted);
  EXPECT_EQ(c.qp().send_queue().size(), 2u);  // the answer, then the marker
  std::size_t steps = 0;
  while (f.dev.step(c.qp(), Queue::kRecv) || f.dev.step(c.qp(), Queue::kSend)) {
    EXPECT_EQ(f.core.replies.closed_count(c.handle()), 0u) << "CLOSED before step " << steps;
    f.core.turn();
    ++steps;
  }
  EXPECT_EQ(steps, 8u + 2u);
  EXPECT_EQ(f.core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(f.dev.outstanding(c.qp()), 0u);
  EXPECT_EQ(f.core.counters().completions_drain, 1u);
}

// The marker never posts: CLOSED still waits for the answer on the device; when its flush empties the FIFO,
// no marker is needed any more.
TEST(CoreLoopFake, CloseWhoseDrainMarkerNeverPostsStillWaitsForTheDevice) {
  DrainFixture f;
  f.close_with_failing_drain(true);
  LoopbackConn& c = *f.c;
  EXPECT_FALSE(c.cc().drain_posted);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(f.dev.step(c.qp(), Queue::kRecv));
    f.core.turn();
  }
  EXPECT_EQ(f.core.replies.closed_count(c.handle()), 0u) << "CLOSED with the answer still on the device";
  EXPECT_GT(f.core.counters().errors[err(CoreError::kPostSend)], 8u);  // a retry per turn
  ASSERT_TRUE(f.dev.step(c.qp()));  // the answer flushes: the FIFO is empty, no marker is needed any more
  f.core.turn();
  EXPECT_EQ(f.core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(f.dev.outstanding(c.qp()), 0u);
  EXPECT_EQ(f.core.counters().completions_drain, 0u);
  c.qp().clear_faults();
}

// The CQ holds every completion a connection can have outstanding: its receives and its whole send queue
// (send_queue_depth() = tx_per_conn + 1 + kMaxFragments: a chunk's RDMA work requests come on top of the
// messages, and a flush gives every posted work request a CQE, signaled or not). Sized for rx + tx + 1, it
// overflowed: one connection with its answers and a 16-fragment GET on the device, closed: 8 receives + 5
// answers + 16 WRITEs + 1 completion + the drain marker = 31 CQEs in a CQ of 25 (a real device reports a CQ
// overrun: every QP on it goes to ERR).
TYPED_TEST(CoreLoopTest, CqHoldsEveryCompletionAConnectionCanHaveOutstanding) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  StoreArena arena(dev);
  ObjectService svc(arena.config());
  CoreConfig cfg = test_core_config();
  cfg.max_conns = 1;
  Core<TypeParam, ObjectService> core(rig, svc, cfg);
  LoopbackConn& c = core.open();
  core.adopt(c);
  FakePeer& peer = c.peer();
  const std::vector<std::uint8_t> value = pattern(1600, 4);
  ASSERT_EQ(arena.store->put(0, "v", std::as_bytes(std::span(value))), store::Status::kOk);
  const std::vector<std::uint8_t> echo = pattern(10, 5);
  for (std::uint64_t cookie = 1; cookie <= 5; ++cookie) {
    ASSERT_TRUE(peer.send(inline_request(op(ObjectOpcode::kEcho), cookie, echo)));
  }
  std::vector<protocol::Fragment> dst;
  for (std::size_t i = 0; i < protocol::kMaxFragments; ++i) dst.push_back(peer.fragment(i * 128, 100));
  const std::vector<std::uint8_t> key = object_payload("v");
  ASSERT_TRUE(peer.send(chunk_request(MessageType::kWriteChunkRequest, op(ObjectOpcode::kGet), 6, key, dst)));
  dev.run(peer.qp());  // six requests land (the peer's credits allow no more)
  core.turn();         // five answers, sixteen WRITEs and the completion posted; nothing of it has run
  EXPECT_EQ(c.qp().send_queue().size(), 5u + protocol::kMaxFragments + 1u);
  core.close(c);    // the drain marker behind them
  dev.run(c.qp());  // everything flushes before the core polls again
  EXPECT_EQ(core.cq().pending(), 8u + 5u + protocol::kMaxFragments + 1u + 1u);
  EXPECT_EQ(core.cq().stats().overflows, 0u)
      << "a CQ of " << cfg.max_conns * (cfg.rx_per_conn + cfg.tx_per_conn + 1);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
}

// A receive the device could not take back (the re-post after a request fails): the connection FAILs, the
// receive is no longer counted as posted, CLOSED still waits for every receive the device does hold.
TEST(CoreLoopFake, FailedReceivePostFailsTheConnection) {
  FakeRig rig;
  FakeDevice& dev = rig.dev;
  EchoService svc;
  Core<FakeRig, EchoService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);
  const std::vector<std::uint8_t> p = pattern(20, 1);
  ASSERT_TRUE(c.peer().send(inline_request(1, 1, p)));
  ASSERT_TRUE(dev.step(c.peer().qp()));
  c.qp().fail_recv_post(0);
  core.turn();
  EXPECT_EQ(core.counters().errors[err(CoreError::kPostRecv)], 1u);
  ASSERT_EQ(core.replies.failed.size(), 1u);
  EXPECT_EQ(core.replies.failed[0].kind, FailureKind::kCompletion);
  EXPECT_EQ(c.cc().rx_posted, 7u);
  EXPECT_EQ(c.qp().recv_queue().size(), 7u);
  core.close(c, CloseReason::kCompletionError);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(dev.outstanding(c.qp()), 0u);
  expect_device_clean(rig);
}

// ---- completion errors ----------------------------------------------------------------------------------

// A GET whose write chunk names a key the peer never registered: the WRITE completes in error, the
// connection FAILs with the device's status, the pin goes, the answer queued behind the WRITE flushes.
TYPED_TEST(CoreLoopTest, WriteCompletionErrorFailsTheConnectionAndReleasesThePin) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  StoreArena arena(dev);
  ObjectService svc(arena.config());
  Core<TypeParam, ObjectService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);
  const std::vector<std::uint8_t> value = pattern(300, 5);
  ASSERT_EQ(arena.store->put(0, "v", std::as_bytes(std::span(value))), store::Status::kOk);
  protocol::Fragment bad = c.peer().fragment(0, 1000);
  bad.rkey ^= 0x40;
  const std::vector<std::uint8_t> key = object_payload("v");
  ASSERT_TRUE(
      c.peer().send(chunk_request(MessageType::kWriteChunkRequest, op(ObjectOpcode::kGet), 1, key, {bad})));
  core.settle();
  ASSERT_EQ(core.replies.failed.size(), 1u);
  // A bad client rkey is the peer's fault, and says so: FAILED kPeerFault, counted by class.
  EXPECT_EQ(core.replies.failed[0].kind, FailureKind::kPeerFault);
  EXPECT_EQ(close_reason_for(core.replies.failed[0].kind), CloseReason::kPeerFault);
  EXPECT_EQ(core.replies.failed[0].status, static_cast<std::uint32_t>(IBV_WC_REM_ACCESS_ERR));
  const CoreCounters& k = core.counters();
  EXPECT_EQ(k.completions_error, 1u);
  EXPECT_EQ(k.peer_faults[static_cast<std::size_t>(PeerFault::kRemoteAccess)], 1u);
  EXPECT_EQ(std::accumulate(k.peer_faults.begin(), k.peer_faults.end(), std::uint64_t{0}), 1u);
  EXPECT_EQ(k.errors[err(CoreError::kCompletion)], 1u);
  EXPECT_EQ(dev.stats().remote_errors, 1u);
  EXPECT_EQ(c.cc().state, CoreConnState::kFailed);
  EXPECT_EQ(svc.counters().bulk_failures, 1u);
  EXPECT_EQ(arena.refs("v"), 1u);
  EXPECT_TRUE(c.peer().inbox.empty());
  EXPECT_EQ(c.cc().rx_posted, 0u);  // the QP is in ERR: every receive flushed
  core.close(c, CloseReason::kCompletionError);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(core.replies.failed.size(), 1u);
  EXPECT_EQ(dev.outstanding(c.qp()), 0u);
  core.destroy(c);
  EXPECT_EQ(arena.store->remove(0, "v"), store::Status::kOk);
  store::test::expect_empty(*arena.store);
  expect_device_clean(rig);
}

// A PUT whose second fragment is out of the peer's registration: the first READ lands, the second fails;
// the op ends once the last posted READ completed, the reservation is aborted, nothing is published.
TYPED_TEST(CoreLoopTest, ReadCompletionErrorAbortsTheReservation) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  StoreArena arena(dev);
  ObjectService svc(arena.config());
  Core<TypeParam, ObjectService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);
  protocol::Fragment beyond = c.peer().fragment(c.peer().bulk_size() - 100, 1000);  // runs past the end
  const std::vector<std::uint8_t> key = object_payload("p");
  ASSERT_TRUE(c.peer().send(chunk_request(MessageType::kReadChunkRequest, op(ObjectOpcode::kPut), 1, key,
                                          {c.peer().fragment(0, 1000), beyond})));
  core.settle();
  ASSERT_EQ(core.replies.failed.size(), 1u);
  EXPECT_EQ(core.replies.failed[0].status, static_cast<std::uint32_t>(IBV_WC_REM_ACCESS_ERR));
  EXPECT_EQ(c.qp().stats().bytes_read, 1000u);
  EXPECT_EQ(svc.counters().bulk_failures, 1u);
  EXPECT_EQ(arena.store->stats().objects, 0u);
  EXPECT_EQ(arena.store->stats().used_bytes, 0u);  // the reservation is gone already
  EXPECT_TRUE(c.peer().inbox.empty());             // no answer on a failed connection
  core.close(c, CloseReason::kCompletionError);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  core.destroy(c);
  store::test::expect_empty(*arena.store);
  expect_device_clean(rig);
}

// A receive completing in error (the device's local length error): FAILED with that status, the other
// receives flush, CLOSED after CLOSE.
TYPED_TEST(CoreLoopTest, ReceiveCompletionErrorFailsTheConnection) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  EchoService svc;
  Core<TypeParam, EchoService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);
  ASSERT_TRUE(dev.fail_head(c.qp(), Queue::kRecv, IBV_WC_LOC_LEN_ERR));
  core.turn();
  ASSERT_EQ(core.replies.failed.size(), 1u);
  EXPECT_EQ(core.replies.failed[0].status, static_cast<std::uint32_t>(IBV_WC_LOC_LEN_ERR));
  EXPECT_EQ(c.cc().state, CoreConnState::kFailed);
  core.settle();
  EXPECT_EQ(core.counters().completions_error, 1u);
  EXPECT_EQ(core.counters().completions_flushed, 7u);
  core.close(c, CloseReason::kCompletionError);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(dev.outstanding(c.qp()), 0u);
  expect_device_clean(rig);
}

// ---- CQ error ---------------------------------------------------------------------------------------

TEST(CoreLoopFake, CqErrorIsCountedAndTheLoopCarriesOn) {
  FakeRig rig;
  FakeDevice& dev = rig.dev;
  EchoService svc;
  Core<FakeRig, EchoService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);
  const std::vector<std::uint8_t> p = pattern(33, 8);
  ASSERT_TRUE(c.peer().send(inline_request(1, 1, p)));
  dev.run_all();
  ASSERT_EQ(core.cq().pending(), 1u);
  core.cq().fail_next_polls(2);
  const std::uint64_t idle_before = core.counters().idle_polls;
  core.turn();  // both of its polls fail
  EXPECT_EQ(core.counters().errors[err(CoreError::kCompletion)], 2u);
  EXPECT_EQ(core.counters().idle_polls, idle_before + 2);
  EXPECT_EQ(core.cq().pending(), 1u);  // nothing taken
  EXPECT_EQ(core.cq().stats().failed_polls, 2u);
  core.settle();
  ASSERT_EQ(c.peer().inbox.size(), 1u);
  EXPECT_EQ(c.peer().inbox[0].payload, p);
  EXPECT_EQ(c.cc().state, CoreConnState::kOwned);
  EXPECT_TRUE(core.replies.failed.empty());
  EXPECT_EQ(core.counters().completions_error, 0u);
  expect_credits_conserved(c);
}

// ---- stale completions (a generation in every wr_id) ----------------------------------------------------

// A completion that names a live descriptor but an earlier incarnation of its connection (a reused CoreConn:
// an active side reconnects over the same object) is dropped and counted: it neither frees a tx descriptor,
// nor un-counts a receive, nor ends a bulk op, nor fails the connection.
// The object service on one adopted connection, with a 3000-byte value stored under "v": where the tests
// that keep a GET's WRITEs on the device start.
struct StoredValueFixture {
  FakeRig rig;
  FakeDevice& dev = rig.dev;
  StoreArena arena{dev};
  ObjectService svc{arena.config()};
  Core<FakeRig, ObjectService> core{rig, svc};
  LoopbackConn& c = core.open();
  const std::vector<std::uint8_t> value = pattern(3000, 3);
  const std::vector<std::uint8_t> key = object_payload("v");

  StoredValueFixture() {
    core.adopt(c);
    EXPECT_EQ(arena.store->put(0, "v", std::as_bytes(std::span(value))), store::Status::kOk);
  }
};

TEST(CoreLoopFake, CompletionOfAnEarlierIncarnationIsDroppedAndCounted) {
  StoredValueFixture f;
  auto& [rig, dev, arena, svc, core, c, value, key] = f;
  LoopbackConn& other = core.open();
  EXPECT_NE(c.cc().generation, 0u);
  EXPECT_NE(c.cc().generation, other.cc().generation);
  // A GET whose WRITEs sit on the device (not run): a bulk op in flight, a pinned value.
  ASSERT_TRUE(c.peer().send(chunk_request(MessageType::kWriteChunkRequest, op(ObjectOpcode::kGet), 1, key,
                                          {c.peer().fragment(0, 2000), c.peer().fragment(2048, 2000)})));
  ASSERT_TRUE(dev.step(c.peer().qp()));
  core.turn();
  ASSERT_EQ(c.cc().bulk_op.state, BulkState::kWriting);
  const std::uint32_t rx_posted = c.cc().rx_posted;
  const std::uint32_t tx_free = c.cc().tx_free_top;
  const std::uint32_t in_flight = c.cc().sq_inflight();
  const auto old = static_cast<std::uint16_t>(c.cc().generation - 1);
  // Named captures: clang before 16 cannot capture structured bindings.
  const auto stale = [qp_num = c.cc().qp_num, &cq = core.cq(), old](const void* desc, WrKind k,
                                                                    CompletionStatus st) {
    Completion wc;
    wc.wr_id = make_wr_id(desc, k, old);
    wc.qp_num = qp_num;
    wc.status = st;
    wc.device_status = st == CompletionStatus::kFlushed ? IBV_WC_WR_FLUSH_ERR : IBV_WC_REM_ACCESS_ERR;
    wc.byte_len = 64;
    cq.inject(wc);
  };
  stale(&c.cc().rx[0], WrKind::kRecv, CompletionStatus::kOk);
  stale(&c.cc().rx[1], WrKind::kRecv, CompletionStatus::kError);
  stale(&c.cc().tx[0], WrKind::kSend, CompletionStatus::kFlushed);
  stale(&c.cc().drain, WrKind::kDrain, CompletionStatus::kFlushed);
  stale(&c.cc().bulk_op, WrKind::kRdma, CompletionStatus::kError);
  stale(&c.cc().bulk_op, WrKind::kRdmaFiller, CompletionStatus::kFlushed);
  core.turn();
  const CoreCounters& k = core.counters();
  EXPECT_EQ(k.stale_completions, 6u);
  EXPECT_EQ(k.completions_error, 0u);
  EXPECT_EQ(k.completions_flushed, 0u);
  EXPECT_EQ(k.completions_drain, 0u);
  EXPECT_TRUE(core.replies.failed.empty());
  EXPECT_EQ(c.cc().state, CoreConnState::kOwned);
  EXPECT_EQ(c.cc().rx_posted, rx_posted);
  EXPECT_EQ(c.cc().tx_free_top, tx_free);
  EXPECT_EQ(c.cc().sq_inflight(), in_flight);
  EXPECT_EQ(c.cc().bulk_op.state, BulkState::kWriting);
  EXPECT_EQ(arena.refs("v"), 2u) << "a stale completion ended the GET while its WRITEs were on the device";
  // The connection goes on: the GET completes with every byte.
  core.settle();
  ASSERT_EQ(c.peer().inbox.size(), 1u);
  EXPECT_EQ(c.peer().inbox[0].status, st(ObjectStatus::kOk));
  EXPECT_TRUE(std::equal(value.begin(), value.begin() + 2000, c.peer().bulk()));
  EXPECT_TRUE(std::equal(value.begin() + 2000, value.end(), c.peer().bulk() + 2048));
  EXPECT_EQ(arena.refs("v"), 1u);
  expect_no_core_errors(k);
  core.close(c);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
}

// A chunk request beyond the queue (one served, kChunkQueue waiting) is answered no_resources at once and
// counted; the connection goes on, and every request it took is answered with every byte.
TEST(CoreLoopFake, ChunkRequestBeyondTheQueueIsRefusedCountedAndTheConnectionGoesOn) {
  StoredValueFixture f;
  auto& [rig, dev, arena, svc, core, c, value, key] = f;
  constexpr std::uint64_t kSent = kChunkQueue + 2;
  for (std::uint64_t cookie = 1; cookie <= kSent; ++cookie) {
    ASSERT_TRUE(c.peer().send(chunk_request(MessageType::kWriteChunkRequest, op(ObjectOpcode::kGet), cookie,
                                            key, {c.peer().fragment(0, 3000)})));
    ASSERT_TRUE(dev.step(c.peer().qp()));
  }
  core.turn();  // the first GET's WRITEs on the device (not run yet), kChunkQueue waiting, the last refused
  EXPECT_EQ(c.cc().bulk_op.state, BulkState::kWriting);
  EXPECT_EQ(core.counters().chunk_queue_full, 1u);
  core.settle();
  ASSERT_EQ(c.peer().inbox.size(), kSent);
  for (const FakePeer::Received& a : c.peer().inbox) {
    SCOPED_TRACE(a.cookie);
    EXPECT_EQ(a.status, a.cookie == kSent ? st(ObjectStatus::kNoResources) : st(ObjectStatus::kOk));
  }
  EXPECT_TRUE(std::equal(value.begin(), value.end(), c.peer().bulk()));
  EXPECT_EQ(c.cc().state, CoreConnState::kOwned);
  EXPECT_EQ(core.counters().chunk_queue_full, 1u);
  expect_no_core_errors(core.counters());
  core.close(c);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
}

// ---- peer faults, the bulk deadline, a peer that posts no receives ----------------------------------------

// A peer that posts no receives: the answer to its ECHO waits at the head of the send queue (RNR), and the
// READs of its PUT wait behind it while the store holds their reservation. `timeout_us`: the bulk deadline.
struct StalledPutFixture {
  explicit StalledPutFixture(std::uint64_t timeout_us) : core{rig, svc, config(timeout_us)} {}
  static CoreConfig config(std::uint64_t timeout_us) {
    CoreConfig cfg = test_core_config();
    cfg.bulk_timeout_us = timeout_us;
    return cfg;
  }
  FakeRig rig;
  FakeDevice& dev = rig.dev;
  StoreArena arena{dev};
  ObjectService svc{arena.config()};
  Core<FakeRig, ObjectService> core;
  LoopbackConn* c = nullptr;

  void start() {
    c = &core.open();
    core.adopt(*c);
    FakePeer& peer = c->peer();
    EXPECT_EQ(peer.qp().discard_receives(), 8u);
    const std::vector<std::uint8_t> p = pattern(20, 1);
    const std::vector<std::uint8_t> key = object_payload("p");
    ASSERT_TRUE(peer.send(inline_request(op(ObjectOpcode::kEcho), 1, p)));
    ASSERT_TRUE(peer.send(chunk_request(MessageType::kReadChunkRequest, op(ObjectOpcode::kPut), 2, key,
                                        {peer.fragment(0, 1000), peer.fragment(1024, 1000)})));
    ASSERT_TRUE(dev.step(peer.qp()));
    ASSERT_TRUE(dev.step(peer.qp()));
    core.turn();  // the answer, then R1 and R2 (rd_depth 2), on the device
    core.settle();
    ASSERT_EQ(c->qp().send_queue().size(), 3u);
    EXPECT_EQ(c->qp().send_queue().front().op, fake::WrOp::kSend);
    EXPECT_EQ(c->cc().bulk_op.state, BulkState::kReading);
    EXPECT_GT(arena.store->stats().used_bytes, 0u);
  }
};

// The bulk deadline fails the connection (kBulkTimeout); the reservation stays while the READs are on the
// device, and goes once control's CLOSE has flushed them; then CLOSED.
TEST(CoreLoopFake, BulkTransferPastItsDeadlineFailsTheConnectionAndReleasesOnlyAfterTheFlush) {
  StalledPutFixture f(300'000);
  f.start();
  LoopbackConn& c = *f.c;
  EXPECT_TRUE(f.core.replies.failed.empty()) << "failed before its deadline";
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  f.core.turn();
  ASSERT_EQ(f.core.replies.failed.size(), 1u);
  EXPECT_EQ(f.core.replies.failed[0].kind, FailureKind::kBulkTimeout);
  EXPECT_GE(f.core.replies.failed[0].status, 300u);  // its age in ms
  EXPECT_EQ(close_reason_for(FailureKind::kBulkTimeout), CloseReason::kBulkTimeout);
  EXPECT_EQ(f.core.counters().bulk_timeouts, 1u);
  EXPECT_EQ(c.cc().state, CoreConnState::kFailed);
  const std::uint64_t reserved = f.arena.store->stats().used_bytes;
  EXPECT_GT(reserved, 0u) << "released while R1 and R2 may still write into it";
  EXPECT_EQ(c.qp().send_queue().size(), 3u);
  f.core.close(c, CloseReason::kBulkTimeout);  // the QP to ERR: the answer, R1 and R2 flush
  f.core.settle();
  EXPECT_EQ(f.core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(f.dev.outstanding(c.qp()), 0u);
  EXPECT_EQ(f.arena.store->stats().used_bytes, 0u);
  EXPECT_EQ(f.svc.counters().bulk_failures, 1u);
  EXPECT_EQ(f.core.counters().bulk_timeouts, 1u);
  f.core.destroy(c);
  store::test::expect_empty(*f.arena.store);
  expect_device_clean(f.rig);
}

// The deadline can be changed on a running core (CONFIG kBulkTimeoutUs): a transfer already running gets it.
TEST(CoreLoopFake, BulkDeadlineTakesANewValueFromControl) {
  StalledPutFixture f(600'000'000);  // ten minutes
  f.start();
  f.core.res->control_mailbox().send_st(ToCore::config(ConfigKey::kBulkTimeoutUs, 1000));
  f.core.turn();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  f.core.turn();
  ASSERT_EQ(f.core.replies.failed.size(), 1u);
  EXPECT_EQ(f.core.replies.failed[0].kind, FailureKind::kBulkTimeout);
  // 0 is refused (counted): every transfer keeps a deadline.
  f.core.res->control_mailbox().send_st(ToCore::config(ConfigKey::kBulkTimeoutUs, 0));
  f.core.turn();
  EXPECT_EQ(f.core.counters().errors[err(CoreError::kUnexpected)], 1u);
  f.core.close(*f.c, CloseReason::kBulkTimeout);
  f.core.settle();
  EXPECT_EQ(f.arena.store->stats().used_bytes, 0u);
}

// With a finite RNR retry count the stalled answer fails (RNR retries exceeded) long before the deadline:
// FAILED kPeerFault, counted in its class; the READs behind it flush; the reservation goes once they have,
// and CLOSED follows control's CLOSE.
TEST(CoreLoopFake, RnrRetriesExceededIsAPeerFaultAndReleasesEverythingInOrder) {
  StalledPutFixture f(600'000'000);
  f.start();
  LoopbackConn& c = *f.c;
  ASSERT_TRUE(f.dev.fail_head(c.qp(), Queue::kSend, IBV_WC_RNR_RETRY_EXC_ERR));
  f.core.turn();
  ASSERT_EQ(f.core.replies.failed.size(), 1u);
  EXPECT_EQ(f.core.replies.failed[0].kind, FailureKind::kPeerFault);
  EXPECT_EQ(f.core.replies.failed[0].status, static_cast<std::uint32_t>(IBV_WC_RNR_RETRY_EXC_ERR));
  const CoreCounters& k = f.core.counters();
  EXPECT_EQ(k.peer_faults[static_cast<std::size_t>(PeerFault::kRnrRetryExceeded)], 1u);
  EXPECT_EQ(k.bulk_timeouts, 0u);
  EXPECT_GT(f.arena.store->stats().used_bytes, 0u) << "released before R1 and R2 flushed";
  ASSERT_TRUE(f.dev.step(c.qp()));  // R1 flushes
  f.core.turn();
  EXPECT_GT(f.arena.store->stats().used_bytes, 0u) << "released before R2 flushed";
  ASSERT_TRUE(f.dev.step(c.qp()));  // R2 flushes: the op ends
  f.core.turn();
  EXPECT_EQ(f.arena.store->stats().used_bytes, 0u);
  EXPECT_EQ(f.svc.counters().bulk_failures, 1u);
  f.core.close(c, close_reason_for(FailureKind::kPeerFault));
  f.core.settle();
  EXPECT_EQ(f.core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(f.dev.outstanding(c.qp()), 0u);
  EXPECT_EQ(k.peer_faults[static_cast<std::size_t>(PeerFault::kRnrRetryExceeded)], 1u);
  EXPECT_EQ(k.completions_error, 1u);
}

// Every peer-caused status in its own class; a local one (a protection error on our own send) in none.
TEST(CoreLoopFake, ErrorCompletionsAreClassedAsPeerFaultsOrLocal) {
  struct Case {
    Queue queue;
    std::uint32_t status;
    std::size_t fault;  // kPeerFaultCount: local
  };
  const Case cases[] = {
      {Queue::kRecv, IBV_WC_LOC_LEN_ERR, static_cast<std::size_t>(PeerFault::kRecvLength)},
      {Queue::kSend, IBV_WC_REM_INV_REQ_ERR, static_cast<std::size_t>(PeerFault::kRemoteInvalidRequest)},
      {Queue::kSend, IBV_WC_REM_OP_ERR, static_cast<std::size_t>(PeerFault::kRemoteOperation)},
      {Queue::kSend, IBV_WC_REM_ACCESS_ERR, static_cast<std::size_t>(PeerFault::kRemoteAccess)},
      {Queue::kSend, IBV_WC_RETRY_EXC_ERR, static_cast<std::size_t>(PeerFault::kRetryExceeded)},
      {Queue::kSend, IBV_WC_RNR_RETRY_EXC_ERR, static_cast<std::size_t>(PeerFault::kRnrRetryExceeded)},
      {Queue::kSend, IBV_WC_LOC_LEN_ERR, kPeerFaultCount},
      {Queue::kSend, IBV_WC_LOC_PROT_ERR, kPeerFaultCount},
  };
  for (const Case& t : cases) {
    FakeRig rig;
    FakeDevice& dev = rig.dev;
    EchoService svc;
    Core<FakeRig, EchoService> core(rig, svc);
    LoopbackConn& c = core.open();
    core.adopt(c);
    if (t.queue == Queue::kSend) {
      ASSERT_TRUE(c.peer().send(inline_request(1, 1, pattern(300, 2))));
      ASSERT_TRUE(dev.step(c.peer().qp()));
      core.turn();  // the answer on the device
    }
    ASSERT_TRUE(dev.fail_head(c.qp(), t.queue, t.status));
    core.turn();
    ASSERT_EQ(core.replies.failed.size(), 1u) << t.status;
    EXPECT_EQ(core.replies.failed[0].status, t.status);
    EXPECT_EQ(core.replies.failed[0].kind,
              t.fault == kPeerFaultCount ? FailureKind::kCompletion : FailureKind::kPeerFault)
        << t.status;
    for (std::size_t i = 0; i < kPeerFaultCount; ++i) {
      EXPECT_EQ(core.counters().peer_faults[i], i == t.fault ? 1u : 0u) << t.status << " class " << i;
    }
    EXPECT_EQ(core.counters().errors[err(CoreError::kCompletion)], 1u);
    core.close(c, close_reason_for(core.replies.failed[0].kind));
    core.settle();
    EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  }
}

// ---- a partly posted READ chain --------------------------------------------------------------------------

// A PUT whose first READ posted and second did not: the connection fails (the post), but the reservation
// stays as long as R1 may write into it; R1 runs (the QP is still RTS until control acts), the op ends as
// failed once R1 completed, and only then is the reservation aborted. Another core's PUT meanwhile gets other
// space.
TEST(CoreLoopFake, PartlyPostedReadChainEndsOnlyAfterItsPostedReadCompleted) {
  FakeRig rig;
  FakeDevice& dev = rig.dev;
  StoreArena arena(dev);
  ObjectService svc(arena.config());
  Core<FakeRig, ObjectService> core(rig, svc);
  LoopbackConn& c = core.open();  // rd_depth 2
  core.adopt(c);
  FakePeer& peer = c.peer();
  std::memset(peer.bulk(), 0x3c, peer.bulk_size());
  const std::vector<std::uint8_t> key = object_payload("p");
  ASSERT_TRUE(peer.send(chunk_request(MessageType::kReadChunkRequest, op(ObjectOpcode::kPut), 1, key,
                                      {peer.fragment(0, 1000), peer.fragment(1024, 1000)})));
  ASSERT_TRUE(dev.step(peer.qp()));
  c.qp().fail_send_post(1);  // R1 posts, R2 does not
  core.turn();
  EXPECT_EQ(c.qp().stats().unposted_sends, 1u);
  EXPECT_EQ(c.qp().send_queue().size(), 1u);
  ASSERT_EQ(core.replies.failed.size(), 1u);
  EXPECT_EQ(core.replies.failed[0].kind, FailureKind::kCompletion);
  EXPECT_EQ(c.cc().bulk_op.state, BulkState::kReading);
  EXPECT_EQ(c.cc().bulk_op.in_sq, 1u);
  const std::uint64_t reserved = arena.store->stats().used_bytes;
  EXPECT_GT(reserved, 0u) << "the reservation went while R1 may write into it";
  EXPECT_EQ(svc.counters().bulk_failures, 0u);
  // Another core's PUT meanwhile gets space of its own.
  const std::vector<std::uint8_t> other = pattern(1000, 12);
  ASSERT_EQ(arena.store->put(0, "z", std::as_bytes(std::span(other))), store::Status::kOk);
  ASSERT_TRUE(dev.step(c.qp()));  // R1 runs and writes into the reservation
  core.turn();
  EXPECT_EQ(c.cc().bulk_op.state, BulkState::kIdle);
  EXPECT_EQ(svc.counters().bulk_failures, 1u);
  EXPECT_EQ(arena.value("z"), other) << "R1 wrote into z's block";
  EXPECT_EQ(arena.store->stats().objects, 1u);  // p never published
  core.close(c, CloseReason::kCompletionError);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(dev.outstanding(c.qp()), 0u);
  EXPECT_EQ(arena.store->remove(0, "z"), store::Status::kOk);
  core.destroy(c);
  store::test::expect_empty(*arena.store);
  expect_device_clean(rig);
}

// The drain marker fails to post while a partly posted WRITE chain is on the device: CLOSED waits for the
// posted WRITEs (their flush, then the retried marker), the pin goes only when they have left the device.
TEST(CoreLoopFake, FailedDrainMarkerBehindAPartlyPostedWriteChainWaitsForTheChain) {
  WriteChainFixture f;
  f.start_get_with_failing_third_write();  // W1, W2 on the device; FAILED
  LoopbackConn& c = *f.c;
  ASSERT_EQ(c.qp().send_queue().size(), 2u);
  f.rig.dev.qp_to_err(c.qp());
  c.qp().fail_send_post(0);  // the marker's first post fails
  f.core.res->control_mailbox().send_st(ToCore::close(c.handle(), CloseReason::kCompletionError));
  f.core.turn();  // CLOSE; the timers post the marker again
  EXPECT_TRUE(c.cc().drain_posted);
  EXPECT_EQ(f.arena.refs("v"), 2u) << "unpinned while W1 and W2 may read the block";
  // W1, W2, the marker, then the receives flush, one at a time: nothing before W2 is done ends the op.
  ASSERT_TRUE(f.dev.step(c.qp()));
  f.core.turn();
  EXPECT_EQ(f.arena.refs("v"), 2u);
  EXPECT_EQ(f.core.replies.closed_count(c.handle()), 0u);
  ASSERT_TRUE(f.dev.step(c.qp()));
  f.core.turn();
  EXPECT_EQ(f.arena.refs("v"), 1u);
  EXPECT_EQ(f.svc.counters().bulk_failures, 1u);
  f.core.settle();
  EXPECT_EQ(f.core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(f.dev.outstanding(c.qp()), 0u);
  EXPECT_EQ(f.core.counters().completions_drain, 1u);
}

// ---- CQ lost (IBV_EVENT_CQ_ERR) -------------------------------------------------------------------------

// The CQ reports nothing more, flushes included. ToCore kCqLost: every owned connection fails (kCqError),
// the core stops polling and answers kCqLost; control destroys each QP and sends CLOSE, on which the core
// releases the connection's pins at once (destroying the QP proved the NIC done) and answers CLOSED. An
// ADOPT that comes after fails at once. Nothing of a destroyed QP is touched (ASan says if it is).
TEST(CoreLoopFake, LostCqFailsEveryConnectionAndReleasesPinsOnceTheQpsAreDestroyed) {
  FakeRig rig;
  FakeDevice& dev = rig.dev;
  StoreArena arena(dev);
  ObjectService svc(arena.config());
  Core<FakeRig, ObjectService> core(rig, svc);
  core.audit = false;  // the QPs go away under the connections
  LoopbackConn& a = core.open();
  LoopbackConn& b = core.open();
  LoopbackConn& unadopted = core.open();
  core.adopt(a);
  core.adopt(b);
  const std::vector<std::uint8_t> value = pattern(3000, 6);
  ASSERT_EQ(arena.store->put(0, "v", std::as_bytes(std::span(value))), store::Status::kOk);
  const std::vector<std::uint8_t> key = object_payload("v");
  ASSERT_TRUE(a.peer().send(chunk_request(MessageType::kWriteChunkRequest, op(ObjectOpcode::kGet), 1, key,
                                          {a.peer().fragment(0, 2000), a.peer().fragment(2048, 2000)})));
  ASSERT_TRUE(dev.step(a.peer().qp()));
  core.turn();  // a's WRITEs on the device: v pinned
  ASSERT_EQ(a.cc().bulk_op.state, BulkState::kWriting);
  ASSERT_EQ(arena.refs("v"), 2u);
  // b closes normally first: it waits for its receives' flushes, which never come (the CQ is lost).
  core.close(b);
  ASSERT_EQ(b.cc().state, CoreConnState::kDraining);
  ASSERT_EQ(b.cc().rx_posted, 8u);

  const auto lost_turn = [&] {
    core.res->stop.store(true);
    core.loop->run_st();
    core.res->control_mailbox().drain_st(core.replies);
  };
  core.res->control_mailbox().send_st(ToCore::cq_lost());
  lost_turn();
  EXPECT_TRUE(core.loop->cq_lost_st());
  ASSERT_EQ(core.replies.cq_lost.size(), 1u);
  EXPECT_EQ(core.replies.cq_lost[0], 0u);
  ASSERT_EQ(core.replies.failed.size(), 1u);  // a: the only owned one
  EXPECT_EQ(core.replies.failed[0].conn, a.handle());
  EXPECT_EQ(core.replies.failed[0].kind, FailureKind::kCqError);
  EXPECT_EQ(close_reason_for(FailureKind::kCqError), CloseReason::kCqError);
  EXPECT_EQ(arena.refs("v"), 2u) << "unpinned before the QP was destroyed";
  // A message lands for the unadopted connection: the core no longer polls.
  ASSERT_TRUE(unadopted.peer().send(inline_request(op(ObjectOpcode::kEcho), 1, pattern(10, 1))));
  ASSERT_TRUE(dev.step(unadopted.peer().qp()));
  const std::uint64_t polled = core.cq().stats().polled;
  const std::size_t pending = core.cq().pending();
  const std::uint64_t turns = core.counters().polls;
  lost_turn();
  EXPECT_EQ(core.cq().stats().polled, polled);
  EXPECT_EQ(core.cq().pending(), pending);
  // Its turns still count (what /healthz watches): a lost core is out of service, not stuck.
  EXPECT_GT(core.counters().polls, turns);
  EXPECT_EQ(core.replies.cq_lost.size(), 1u);  // answered once
  EXPECT_TRUE(core.loop->idle_for_sleep_st());  // an owner-driven core may sleep: it has nothing to poll
  EXPECT_EQ(core.cq().stats().polled, polled);
  // An ADOPT that was on its way fails at once.
  core.res->control_mailbox().send_st(ToCore::adopt(unadopted.handle()));
  lost_turn();
  ASSERT_EQ(core.replies.failed.size(), 2u);
  EXPECT_EQ(core.replies.failed[1].conn, unadopted.handle());
  EXPECT_EQ(core.replies.failed[1].kind, FailureKind::kCqError);
  // Control destroys every QP, then closes each connection (b again).
  for (LoopbackConn* c : {&a, &b, &unadopted}) {
    c->destroy_qp();
    core.res->control_mailbox().send_st(ToCore::close(c->handle(), CloseReason::kCqError));
  }
  lost_turn();
  for (LoopbackConn* c : {&a, &b, &unadopted}) {
    EXPECT_EQ(core.replies.closed_count(c->handle()), 1u);
    EXPECT_EQ(c->cc().state, CoreConnState::kClosed);
  }
  EXPECT_EQ(arena.refs("v"), 1u);
  EXPECT_EQ(svc.counters().bulk_failures, 1u);
  EXPECT_EQ(core.counters().closed, 3u);
  EXPECT_TRUE(a.peer().inbox.empty());
  for (LoopbackConn* c : {&a, &b, &unadopted}) core.destroy(*c);
  EXPECT_EQ(arena.store->remove(0, "v"), store::Status::kOk);
  store::test::expect_empty(*arena.store);
  EXPECT_EQ(dev.stats().local_errors, 0u);
}

// ---- setup bounds -----------------------------------------------------------------------------------------

// tx descriptor indices share the SQ FIFO with the RDMA markers (0xfff0, 0xfff1): more descriptors than
// kMaxTxPerConn are refused at setup, naming the key; and a bulk deadline of 0 is refused.
TEST(CoreResourcesSetup, TxDescriptorsStayBelowTheMarkersAndEveryTransferHasADeadline) {
  FakeDevice dev;
  CoreConfig cfg = test_core_config();
  cfg.max_conns = 1;
  cfg.buf_size = 64;
  cfg.bulk_bytes_per_conn = 0;
  std::string err;
  cfg.tx_per_conn = kMaxTxPerConn + 1;
  EXPECT_EQ(CoreResources::create(0, cfg, dev, &err), nullptr);
  EXPECT_NE(err.find("tx_per_conn"), std::string::npos) << err;
  EXPECT_NE(err.find("65520"), std::string::npos) << err;
  cfg.tx_per_conn = kMaxTxPerConn;
  err.clear();
  auto res = CoreResources::create(0, cfg, dev, &err);
  ASSERT_NE(res, nullptr) << err;
  EXPECT_LT(cfg.tx_per_conn - 1, kRdmaMarker);
  res.reset();
  cfg.tx_per_conn = 16;
  cfg.bulk_timeout_us = 0;
  EXPECT_EQ(CoreResources::create(0, cfg, dev, &err), nullptr);
  EXPECT_NE(err.find("protocol.bulk_timeout_ms"), std::string::npos) << err;
}

// ---- close with transfers in flight ---------------------------------------------------------------------

// CLOSE while the READs of a PUT are outstanding: the reservation stays until the last posted READ flushed
// (the device may still write into it), CLOSED comes only after every posted work request completed, and the
// connection's memory can go right after it.
TYPED_TEST(CoreLoopTest, CloseWhileReadsOfAPutAreOutstanding) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  StoreArena arena(dev);
  ObjectService svc(arena.config());
  Core<TypeParam, ObjectService> core(rig, svc);
  LoopbackConn& c = core.open();  // rd_depth 2
  core.adopt(c);
  std::vector<protocol::Fragment> frags;
  for (std::size_t i = 0; i < 4; ++i) frags.push_back(c.peer().fragment(i * 1024, 1000));
  const std::vector<std::uint8_t> key = object_payload("p");
  ASSERT_TRUE(
      c.peer().send(chunk_request(MessageType::kReadChunkRequest, op(ObjectOpcode::kPut), 1, key, frags)));
  ASSERT_TRUE(dev.step(c.peer().qp()));
  core.turn();  // reserve, R1 and R2 posted
  const std::uint64_t reserved = arena.store->stats().used_bytes;
  EXPECT_GT(reserved, 0u);
  ASSERT_TRUE(dev.step(c.qp()));  // R1 lands
  core.turn();                    // R3 posted behind R2
  EXPECT_EQ(c.cc().bulk_op.outstanding, 2u);
  EXPECT_EQ(c.qp().send_queue().size(), 2u);

  core.close(c);
  EXPECT_EQ(c.cc().state, CoreConnState::kDraining);
  EXPECT_TRUE(c.cc().drain_posted);
  EXPECT_EQ(arena.store->stats().used_bytes, reserved)
      << "reservation released while READs may write into it";
  EXPECT_EQ(svc.counters().bulk_failures, 0u);
  // R2, R3, the drain marker, then the receives, one flush at a time.
  std::size_t steps = 0;
  while (dev.step(c.qp(), Queue::kSend) || dev.step(c.qp(), Queue::kRecv)) {
    ++steps;
    EXPECT_TRUE(core.replies.closed.empty()) << "CLOSED with " << dev.outstanding(c.qp()) << " outstanding";
    core.turn();
    if (steps == 2) {  // R3 flushed: the op is over
      EXPECT_EQ(svc.counters().bulk_failures, 1u);
      EXPECT_EQ(arena.store->stats().used_bytes, 0u);
    }
  }
  EXPECT_EQ(steps, 3u + 8u);
  ASSERT_EQ(core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(dev.outstanding(c.qp()), 0u);
  EXPECT_EQ(svc.counters().bulk_failures, 1u);
  EXPECT_EQ(svc.counters().released_at_close, 0u);
  EXPECT_EQ(arena.store->stats().objects, 0u);
  EXPECT_TRUE(core.replies.failed.empty());  // flushes are no error
  core.destroy(c);
  core.settle();  // nothing left that names the freed connection
  store::test::expect_empty(*arena.store);
  expect_device_clean(rig);

  // The slot is reused at once by a new connection, which works.
  LoopbackConn& d = core.open();
  core.adopt(d);
  const std::vector<std::uint8_t> v = pattern(100, 3);
  const std::vector<std::uint8_t> put = object_payload("q", v);
  EXPECT_EQ(core.ask(d, inline_request(op(ObjectOpcode::kPut), 1, put)).status, st(ObjectStatus::kOk));
  EXPECT_EQ(arena.value("q"), v);
}

// CLOSE while the WRITEs of a GET are on the device: the pin stays until the last WRITE completed (here:
// flushed), then goes exactly once.
TYPED_TEST(CoreLoopTest, CloseWhileWritesOfAGetAreOutstanding) {
  TypeParam rig;
  FakeDevice& dev = rig.model();
  StoreArena arena(dev);
  ObjectService svc(arena.config());
  Core<TypeParam, ObjectService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);
  const std::vector<std::uint8_t> value = pattern(3000, 6);
  ASSERT_EQ(arena.store->put(0, "v", std::as_bytes(std::span(value))), store::Status::kOk);
  std::vector<protocol::Fragment> frags;
  for (std::size_t i = 0; i < 3; ++i) frags.push_back(c.peer().fragment(i * 1024, 1000));
  const std::vector<std::uint8_t> key = object_payload("v");
  ASSERT_TRUE(
      c.peer().send(chunk_request(MessageType::kWriteChunkRequest, op(ObjectOpcode::kGet), 1, key, frags)));
  ASSERT_TRUE(dev.step(c.peer().qp()));
  core.turn();  // W1, W2 (unsignaled), W3 (signaled), the completion
  EXPECT_EQ(c.qp().send_queue().size(), 4u);
  ASSERT_TRUE(dev.step(c.qp()));  // W1 runs: no CQE
  EXPECT_EQ(core.cq().pending(), 0u);
  EXPECT_EQ(arena.refs("v"), 2u);
  core.close(c);
  EXPECT_EQ(arena.refs("v"), 2u) << "pin released while WRITEs may still read the block";
  core.settle();
  EXPECT_EQ(arena.refs("v"), 1u);
  EXPECT_EQ(svc.counters().bulk_failures, 1u);
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  EXPECT_EQ(dev.outstanding(c.qp()), 0u);
  EXPECT_EQ(c.qp().stats().bytes_written, 1000u);
  core.destroy(c);
  EXPECT_EQ(arena.store->remove(0, "v"), store::Status::kOk);
  store::test::expect_empty(*arena.store);
  expect_device_clean(rig);
}

// ---- the simulated mlx5 NIC only ------------------------------------------------------------------------

fake::SimMlx5Cq& sim_cq(CoreResources& res) {
  return static_cast<fake::SimMlx5Cq&>(res.cq());
}

void expect_backend_clean(CoreResources& res) {
  const Mlx5Cq::Stats& s = sim_cq(res).stats;
  EXPECT_EQ(s.unknown_qp, 0u);
  EXPECT_EQ(s.unknown_opcode, 0u);
}

// Every payload size from 0 to the largest inline one: every inline WQE length (messages of 40..128 bytes:
// one to three BBs, the inline bytes crossing every BB boundary) and gathered sends beyond; each echoed
// whole.
TYPED_TEST(CoreLoopTest, EchoEveryPayloadSize) {
  TypeParam rig;
  EchoService svc;
  Core<TypeParam, EchoService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);
  constexpr std::uint32_t kMax = 512 - protocol::kHeaderSize;
  for (std::uint32_t len = 0; len <= kMax; ++len) {
    const std::vector<std::uint8_t> p = pattern(len, len + 1000);
    const FakePeer::Received r = core.ask(c, inline_request(1, len + 1, p));
    ASSERT_EQ(r.payload, p) << "payload of " << len << " bytes";
  }
  EXPECT_EQ(core.counters().inline_sends, 128u - protocol::kHeaderSize + 1);
  expect_no_core_errors(core.counters());
  expect_credits_conserved(c);
  if constexpr (std::is_same_v<TypeParam, SimMlx5Rig>) {
    const SimMlx5Device::Stats& s = rig.sim.stats();
    EXPECT_EQ(s.inline_wqes, 128u - protocol::kHeaderSize + 1);
    EXPECT_GT(s.multi_bb_wqes, 0u);
    EXPECT_GT(s.wrapped_wqes, 0u);
    expect_backend_clean(*core.res);
  }
  core.close(c);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  expect_device_clean(rig);
}

// The NIC ignores a doorbell (a lost UAR write): the answer behind it stays in the SQ, unseen, and the next
// doorbell, which names only the newest WQE, makes the NIC take both batches up to the doorbell record.
TEST(CoreLoopSimMlx5, DroppedDoorbellIsCoveredByTheNextOne) {
  SimMlx5Rig rig;
  EchoService svc;
  Core<SimMlx5Rig, EchoService> core(rig, svc);
  LoopbackConn& c = core.open();
  core.adopt(c);
  const std::vector<std::uint8_t> p1 = pattern(20, 1), p2 = pattern(300, 2);
  EXPECT_EQ(core.ask(c, inline_request(1, 1, p1)).payload, p1);
  rig.sim.drop_next_doorbell(c.backend_qp());
  ASSERT_TRUE(c.peer().send(inline_request(1, 2, p1)));
  core.settle();
  EXPECT_EQ(rig.sim.stats().dropped_doorbells, 1u);
  EXPECT_TRUE(rig.sim.behind(c.backend_qp()));
  EXPECT_TRUE(c.peer().inbox.empty()) << "an answer left through a doorbell the NIC never saw";
  EXPECT_TRUE(c.qp().send_queue().empty());
  ASSERT_TRUE(c.peer().send(inline_request(1, 3, p2)));
  core.settle();
  EXPECT_FALSE(rig.sim.behind(c.backend_qp()));
  ASSERT_EQ(c.peer().inbox.size(), 2u);
  EXPECT_EQ(c.peer().inbox[0].cookie, 2u);
  EXPECT_EQ(c.peer().inbox[0].payload, p1);
  EXPECT_EQ(c.peer().inbox[1].cookie, 3u);
  EXPECT_EQ(c.peer().inbox[1].payload, p2);
  expect_credits_conserved(c);
  expect_no_core_errors(core.counters());
  core.close(c);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  expect_device_clean(rig);
}

// Scatter-to-CQE: a receive of up to 32 bytes arrives in the CQE and never in the buffer (which the NIC
// leaves holding other bytes). No protocol message is that short (the header alone is 40 bytes), so the peers
// send raw ones; the loop refuses each as a wire error, but first the backend must have put its bytes where
// the receive said. A 33-byte message is not scattered.
TEST(CoreLoopSimMlx5, ScatteredReceivesAreCopiedOutOfTheCqe) {
  SimMlx5Rig rig;
  rig.sim.set_scatter_to_cqe(32);
  EchoService svc;
  Core<SimMlx5Rig, EchoService> core(rig, svc);
  const std::uint32_t sizes[] = {1, 17, 32, 33};
  std::vector<LoopbackConn*> cs;
  for (std::size_t i = 0; i < 4; ++i) {
    LoopbackConn& c = core.open();
    core.adopt(c);
    cs.push_back(&c);
  }
  for (std::size_t i = 0; i < 4; ++i) {
    const std::vector<std::uint8_t> raw = pattern(sizes[i], 50 + static_cast<std::uint32_t>(i));
    ASSERT_TRUE(cs[i]->peer().send_raw(raw));
    ASSERT_TRUE(rig.model().step(cs[i]->peer().qp()));
    core.turn();
    const RxDesc& rx = cs[i]->cc().rx[0];  // the first receive posted takes the first message
    EXPECT_TRUE(std::equal(raw.begin(), raw.end(), rx.buf)) << sizes[i] << " bytes";
    EXPECT_EQ(rx.byte_len, sizes[i]);
  }
  EXPECT_EQ(rig.sim.stats().scattered, 3u);
  EXPECT_EQ(sim_cq(*core.res).stats.inline_scatter, 3u);
  EXPECT_EQ(core.counters().errors[err(CoreError::kWire)], 4u);
  ASSERT_EQ(core.replies.failed.size(), 4u);
  for (LoopbackConn* c : cs) core.close(*c, CloseReason::kProtocolError);
  core.settle();
  for (LoopbackConn* c : cs) EXPECT_EQ(core.replies.closed_count(c->handle()), 1u);
  expect_backend_clean(*core.res);
  expect_device_clean(rig);
}

// A small SQ (tx_per_conn 4: 21 work requests of up to 3 BBs, 64 BBs) wraps many times: WQEs of one to three
// BBs, inline bytes and whole WQEs running past the ring's end, RDMA WRITEs of GET chunks among them.
TEST(CoreLoopSimMlx5, SqWrapsAroundOverManyLaps) {
  SimMlx5Rig rig;
  StoreArena arena(rig.model());
  ObjectService svc(arena.config());
  CoreConfig cfg = test_core_config();
  cfg.tx_per_conn = 4;
  Core<SimMlx5Rig, ObjectService> core(rig, svc, cfg);
  LoopbackOptions opt;
  opt.signal_interval = 2;  // four tx descriptors: a signaled send before they run out
  LoopbackConn& c = core.open(opt);
  core.adopt(c);
  FakePeer& peer = c.peer();
  const std::vector<std::uint8_t> value = pattern(1500, 77);
  ASSERT_EQ(arena.store->put(0, "v", std::as_bytes(std::span(value))), store::Status::kOk);
  const std::vector<std::uint8_t> key = object_payload("v");
  std::uint64_t cookie = 0;
  for (int round = 0; round < 120; ++round) {
    const std::vector<std::uint8_t> p = pattern(static_cast<std::size_t>(round * 7 % 100), round);
    FakePeer::Received r = core.ask(c, inline_request(op(ObjectOpcode::kEcho), ++cookie, p));
    ASSERT_EQ(r.payload, p) << "round " << round;
    if (round % 10 == 0) {
      std::memset(peer.bulk(), kSentinel, 4096);
      r = core.ask(
          c, chunk_request(MessageType::kWriteChunkRequest, op(ObjectOpcode::kGet), ++cookie, key,
                           {peer.fragment(0, 700), peer.fragment(1024, 700), peer.fragment(2048, 700)}));
      ASSERT_EQ(r.status, st(ObjectStatus::kOk));
      ASSERT_TRUE(std::equal(value.begin(), value.begin() + 700, peer.bulk()));
      ASSERT_TRUE(std::equal(value.begin() + 700, value.begin() + 1400, peer.bulk() + 1024));
      ASSERT_TRUE(std::equal(value.begin() + 1400, value.end(), peer.bulk() + 2048));
      ASSERT_EQ(peer.bulk()[2048 + 100], kSentinel);  // the value ends 100 bytes into the third fragment
    }
  }
  auto& q = static_cast<Mlx5Qp&>(c.backend_qp());
  EXPECT_EQ(q.sq_wqe_cnt, 64u);
  const SimMlx5Device::Stats& s = rig.sim.stats();
  EXPECT_GE(s.send_bbs / q.sq_wqe_cnt, 4u) << s.send_bbs << " BBs";
  EXPECT_GT(s.wrapped_wqes, 0u);
  EXPECT_GT(s.multi_bb_wqes, 0u);
  expect_no_core_errors(core.counters());
  expect_credits_conserved(c);
  expect_backend_clean(*core.res);
  core.close(c);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
  core.destroy(c);
  EXPECT_EQ(arena.store->remove(0, "v"), store::Status::kOk);
  store::test::expect_empty(*arena.store);
  expect_device_clean(rig);
}

// The CQ ring's owner bit over many laps, at the smallest rings a core gets (one connection, few receives:
// 32 and 64 entries) and with two connections: pairs of requests keep several CQEs in the ring at once, so
// bursts stop at the first entry of the next lap the NIC has not written yet.
TEST(CoreLoopSimMlx5, CqOwnerBitOverManyLapsAtSmallRings) {
  struct Shape {
    std::uint32_t conns, rx, tx;
    std::uint16_t depth;
  };
  for (const Shape sh : {Shape{1, 4, 2, 4}, Shape{1, 8, 8, 8}, Shape{2, 4, 4, 4}}) {
    SCOPED_TRACE("conns " + std::to_string(sh.conns) + " rx " + std::to_string(sh.rx));
    SimMlx5Rig rig;
    EchoService svc;
    CoreConfig cfg = test_core_config();
    cfg.max_conns = sh.conns;
    cfg.rx_per_conn = sh.rx;
    cfg.tx_per_conn = sh.tx;
    Core<SimMlx5Rig, EchoService> core(rig, svc, cfg);
    std::vector<LoopbackConn*> cs;
    LoopbackOptions opt;
    opt.queue_depth = sh.depth;
    opt.signal_interval =
        static_cast<std::uint16_t>(sh.tx);  // a signaled send before the tx descriptors run out
    for (std::uint32_t i = 0; i < sh.conns; ++i) {
      LoopbackConn& c = core.open(opt);
      core.adopt(c);
      cs.push_back(&c);
    }
    const std::uint32_t ring = sim_cq(*core.res).cqe_cnt;
    std::uint64_t cookie = 0;
    std::vector<std::vector<std::uint8_t>> sent(sh.conns);
    std::vector<std::size_t> got(sh.conns, 0);
    while (sim_cq(*core.res).produced() < 12 * ring) {
      for (std::uint32_t i = 0; i < sh.conns; ++i) {
        for (int k = 0; k < 2; ++k) {  // depth 4 keeps 2 credits in reserve: two requests at once
          ++cookie;
          const std::vector<std::uint8_t> p = pattern(cookie % 90, static_cast<std::uint32_t>(cookie));
          ASSERT_TRUE(cs[i]->peer().send(inline_request(1, cookie, p))) << "cookie " << cookie;
        }
      }
      core.settle();
      for (std::uint32_t i = 0; i < sh.conns; ++i) {
        FakePeer& peer = cs[i]->peer();
        for (const FakePeer::Received& r : peer.inbox) {
          EXPECT_EQ(r.payload, pattern(r.cookie % 90, static_cast<std::uint32_t>(r.cookie)));
        }
        got[i] += peer.inbox.size();
        peer.inbox.clear();
      }
    }
    std::size_t total = 0;
    for (std::size_t n : got) total += n;
    EXPECT_EQ(total, cookie);
    EXPECT_GE(sim_cq(*core.res).produced() / ring, 12u);
    for (LoopbackConn* c : cs) expect_credits_conserved(*c);
    expect_no_core_errors(core.counters());
    expect_backend_clean(*core.res);
    for (LoopbackConn* c : cs) core.close(*c);
    core.settle();
    for (LoopbackConn* c : cs) EXPECT_EQ(core.replies.closed_count(c->handle()), 1u);
    expect_device_clean(rig);
  }
}

// ---- idle policies (core_idle.hpp) ------------------------------------------------------------------------

TEST(IdlePolicies, BackoffDoublesItsPauseRunUpToTheCapAndStartsOverOnWork) {
  IdleStats st;
  BackoffIdle b(8, st);
  std::vector<std::uint32_t> runs;
  for (int i = 0; i < 6; ++i) {
    runs.push_back(b.run());
    EXPECT_FALSE(b.on_empty_st());
  }
  EXPECT_EQ(runs, (std::vector<std::uint32_t>{1, 2, 4, 8, 8, 8}));
  EXPECT_GT(st.state(PollerState::kBackoff), 0u) << "the pause runs are timed";
  b.on_work_st();
  EXPECT_EQ(b.run(), 1u);
  BackoffIdle pause(1, st);  // idle_policy pause
  pause.on_empty_st();
  EXPECT_EQ(pause.run(), 1u);
  EXPECT_EQ(st.state(PollerState::kYield) + st.state(PollerState::kSleep), 0u);
}

TEST(IdlePolicies, YieldComesAfterARunOfEmptyPollsAndNeverBefore) {
  IdleStats st;
  std::uint64_t yields = 0;
  YieldIdle y(3, yields, st);
  y.on_empty_st();
  y.on_empty_st();
  EXPECT_EQ(yields, 0u);
  EXPECT_EQ(st.state(PollerState::kYield), 0u);
  y.on_empty_st();
  y.on_empty_st();
  EXPECT_EQ(yields, 2u) << "every empty poll of the run from the third on";
  EXPECT_GT(st.state(PollerState::kYield), 0u);
  y.on_work_st();
  y.on_empty_st();
  EXPECT_EQ(yields, 2u) << "work started the run over";
}

TEST(IdlePolicies, EventAsksToSleepOnlyAfterItsIdleTime) {
  IdleStats st;
  EventIdle never(4, ~std::uint64_t{0} >> 1, st);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(never.on_empty_st());
  EXPECT_GT(st.state(PollerState::kBackoff), 0u) << "it backs off meanwhile";
  EventIdle at_once(4, 0, st);
  EXPECT_FALSE(at_once.on_empty_st()) << "the first empty poll starts the idle time";
  EXPECT_TRUE(at_once.on_empty_st());
  at_once.on_work_st();
  EXPECT_FALSE(at_once.on_empty_st()) << "work started it over";
  EXPECT_TRUE(at_once.on_empty_st());
}

// The time-in-state split and the counters the core publishes, for each policy that polls: only the states
// the policy has are non-zero, they add up to the running time, and an echo still moves every byte.
class IdlePolicyLoop : public ::testing::TestWithParam<IdlePolicy> {};

TEST_P(IdlePolicyLoop, PublishesTheTimeInEachStateAndTheDoorbells) {
  FakeRig rig;
  EchoService svc;
  CoreConfig cfg = test_core_config();
  cfg.idle = GetParam();
  cfg.idle_yield_after = 2;
  cfg.idle_backoff_max_pauses = 16;
  Core<FakeRig, EchoService> core(rig, svc, cfg);
  auto block = std::make_unique<telemetry::CoreStats>();
  core.res->stats = block.get();
  LoopbackConn& c = core.open();
  core.adopt(c);
  for (int i = 0; i < 20; ++i) core.turn();  // empty polls
  const std::vector<std::uint8_t> p = pattern(200, 11);
  const FakePeer::Received r = core.ask(c, inline_request(1, 5, p));
  EXPECT_EQ(r.payload, p);
  EXPECT_EQ(r.cookie, 5u);

  using telemetry::Stat;
  const auto state = [&](PollerState s) {
    return block->load(telemetry::poller_state_stat(static_cast<std::size_t>(s)));
  };
  EXPECT_GT(state(PollerState::kBusy), 0u);
  EXPECT_EQ(state(PollerState::kBusy), block->load(Stat::kBusyTsc));
  EXPECT_EQ(state(PollerState::kIdle) + state(PollerState::kBackoff) + state(PollerState::kYield) +
                state(PollerState::kSleep),
            block->load(Stat::kIdleTsc));
  const bool pauses = GetParam() == IdlePolicy::kPause || GetParam() == IdlePolicy::kBackoff;
  EXPECT_EQ(state(PollerState::kBackoff) > 0, pauses);
  EXPECT_EQ(state(PollerState::kYield) > 0, GetParam() == IdlePolicy::kYield);
  EXPECT_EQ(block->load(Stat::kYields) > 0, GetParam() == IdlePolicy::kYield);
  EXPECT_EQ(block->load(Stat::kYields), core.counters().yields);
  EXPECT_EQ(state(PollerState::kSleep), 0u);
  EXPECT_EQ(block->load(Stat::kIdleArms) + block->load(Stat::kSleeps), 0u);

  const CoreCounters& k = core.counters();
  EXPECT_GE(k.doorbells_send, 1u);
  EXPECT_EQ(block->load(telemetry::doorbell_stat(0)), k.doorbells_send);
  EXPECT_EQ(block->load(telemetry::doorbell_stat(1)), k.doorbells_recv);
  EXPECT_GE(k.send_wrs, 1u);
  EXPECT_EQ(block->load(Stat::kSendWrs), k.send_wrs);
  EXPECT_GE(k.recv_posts, 1u);
  EXPECT_EQ(block->load(Stat::kRecvPosts), k.recv_posts);
  expect_no_core_errors(k);
  core.close(c);
  core.settle();
  EXPECT_EQ(core.replies.closed_count(c.handle()), 1u);
}

INSTANTIATE_TEST_SUITE_P(Policies, IdlePolicyLoop,
                         ::testing::Values(IdlePolicy::kBusy, IdlePolicy::kPause, IdlePolicy::kBackoff,
                                           IdlePolicy::kYield),
                         [](const ::testing::TestParamInfo<IdlePolicy>& i) {
                           switch (i.param) {
                             case IdlePolicy::kPause:
                               return std::string("pause");
                             case IdlePolicy::kBackoff:
                               return std::string("backoff");
                             case IdlePolicy::kYield:
                               return std::string("yield");
                             default:
                               return std::string("busy");
                           }
                         });

// The verbs completion channel's stand-in: an eventfd the test writes when a completion lands on an armed CQ,
// which is what the device does (one event per arming); a semaphore, so that one read takes one event.
class StandInCqEvents final : public CqEvents {
 public:
  StandInCqEvents() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE)) {}
  ~StandInCqEvents() override { close(fd_); }
  int fd() const noexcept override { return fd_; }
  bool arm(BackendCq&) noexcept override {
    armed_.store(true);
    return true;
  }
  unsigned consume(unsigned max) noexcept override {
    unsigned n = 0;
    std::uint64_t v = 0;
    while (n < max && read(fd_, &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v))) ++n;
    return n;
  }
  // A completion was pushed: the event, if the CQ is armed. False: it was not.
  bool fire() {
    if (!armed_.exchange(false)) return false;
    const std::uint64_t one = 1;
    return write(fd_, &one, sizeof(one)) == static_cast<ssize_t>(sizeof(one));
  }

 private:
  int fd_;
  std::atomic<bool> armed_{false};
};

// A service whose storage ops may pend (as the object service's do): the core must not sleep while it waits.
struct PendingEchoService : EchoService {
  std::atomic<bool> pending{true};
  template <typename Api>
  bool on_poll_st(Api&) noexcept {
    return false;
  }
  bool idle_st() const noexcept { return !pending.load(); }
};

// A service whose storage ops end on a CompletionQueue, as the RADOS backend's do: the test pushes their
// completions from its own thread. Like the object service, it lets the core sleep with ops pending only
// when the queue rings the core's storage doorbell.
struct QueuedStorageEchoService : EchoService {
  QueuedStorageEchoService() {
    std::string error;
    cq = storage::CompletionQueue::create(8, &error);
    EXPECT_NE(cq, nullptr) << error;
  }
  template <typename Api>
  bool on_poll_st(Api&) noexcept {
    std::array<storage::Completion, 8> batch;
    const std::uint32_t n = cq->pop_burst_st(batch);
    pending.fetch_sub(n);
    completed.fetch_add(n);
    return n != 0;
  }
  bool idle_st() const noexcept { return pending.load() == 0 || cq->wakes(); }
  std::unique_ptr<storage::CompletionQueue> cq;
  std::atomic<std::uint32_t> pending{0};
  std::atomic<std::uint32_t> completed{0};
};

// One core running idle_policy event on its own thread, as the engine runs it: a sleeper whose bell control's
// mailbox rings. The test touches the device only while the core sleeps (the sleeper's flag is set after the
// core's last access and before epoll_wait), so the fake device is never used by two threads at once.
template <typename Service>
struct EventCore {
  explicit EventCore(FakeRig& rig, Service& svc, std::uint32_t after_us = 200) {
    auto ev = std::make_unique<StandInCqEvents>();
    events = ev.get();
    std::string err;
    sleeper = CoreSleeper::create(std::move(ev), &err);
    EXPECT_NE(sleeper, nullptr) << err;
    CoreConfig cfg = test_core_config();
    cfg.idle = IdlePolicy::kEvent;
    cfg.idle_event_after_us = after_us;
    cfg.sleeper = sleeper.get();
    core = std::make_unique<Core<FakeRig, Service>>(rig, svc, cfg);
    core->res->control_mailbox().set_wake(&sleeper->bell());
    core->res->stats = block.get();
  }
  ~EventCore() { stop(); }
  void start() {
    core->res->stop.store(false);
    thread = std::thread([this] { core->loop->run_st(); });
  }
  void stop() {
    if (!thread.joinable()) return;
    core->res->stop.store(true);
    sleeper->bell().ring();
    thread.join();
  }
  std::uint64_t stat(telemetry::Stat s) const { return block->load(s); }
  // Until the core has slept `n` times in all and is asleep now.
  bool wait_asleep(std::uint64_t n) {
    for (int i = 0; i < 5000; ++i) {
      if (stat(telemetry::Stat::kSleeps) >= n && sleeper->asleep()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  std::uint64_t wakeups(WakeSource w) const {
    return stat(telemetry::wakeup_stat(static_cast<std::size_t>(w)));
  }

  StandInCqEvents* events = nullptr;
  std::unique_ptr<CoreSleeper> sleeper;
  std::unique_ptr<telemetry::CoreStats> block = std::make_unique<telemetry::CoreStats>();
  std::unique_ptr<Core<FakeRig, Service>> core;
  std::thread thread;
};

TEST(CoreLoopEvent, SleepsWhenIdleAndWakesForACommandAndForACompletion) {
  FakeRig rig;
  FakeDevice& dev = rig.model();
  EchoService svc;
  EventCore<EchoService> ec(rig, svc);
  LoopbackConn& c = ec.core->open();
  ec.start();
  ASSERT_TRUE(ec.wait_asleep(1)) << "an idle core with nothing owned sleeps";
  const std::uint64_t polls = ec.stat(telemetry::Stat::kPolls);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_TRUE(ec.sleeper->asleep());
  EXPECT_EQ(ec.stat(telemetry::Stat::kPolls), polls) << "asleep, it polls nothing";
  EXPECT_EQ(ec.stat(telemetry::Stat::kSleeping), 1u);
  EXPECT_EQ(ec.wakeups(WakeSource::kTimer), 0u) << "no deadline of its own: no timeout";

  // Control's command rings the bell: the core wakes, adopts, and sleeps again.
  ec.core->res->control_mailbox().send_st(ToCore::adopt(c.handle()));
  ASSERT_TRUE(ec.wait_asleep(2));
  EXPECT_EQ(ec.wakeups(WakeSource::kCommand), 1u);
  EXPECT_EQ(ec.core->loop->owned_st(), 1u);

  // The first request: its completion raises the CQ event; the core answers, then sleeps again.
  const std::vector<std::uint8_t> p = pattern(300, 21);
  ASSERT_TRUE(c.peer().send(inline_request(1, 77, p)));
  dev.run_all();
  ASSERT_EQ(ec.core->cq().pending(), 1u);
  ASSERT_TRUE(ec.events->fire()) << "the core armed its CQ before sleeping";
  ASSERT_TRUE(ec.wait_asleep(3));
  EXPECT_EQ(ec.wakeups(WakeSource::kCompletion), 1u);
  EXPECT_EQ(svc.requests, 1u);
  dev.run_all();
  c.peer().poll();
  ASSERT_EQ(c.peer().inbox.size(), 1u);
  EXPECT_EQ(c.peer().inbox.front().cookie, 77u);
  EXPECT_EQ(c.peer().inbox.front().payload, p);

  ec.stop();
  EXPECT_GE(ec.stat(telemetry::Stat::kIdleArms), 3u);
  EXPECT_EQ(ec.stat(telemetry::Stat::kSleeps), 3u);
  EXPECT_EQ(ec.stat(telemetry::Stat::kSleeping), 0u);
  EXPECT_GT(ec.stat(telemetry::poller_state_stat(static_cast<std::size_t>(PollerState::kSleep))), 0u);
  EXPECT_GT(ec.stat(telemetry::poller_state_stat(static_cast<std::size_t>(PollerState::kBusy))), 0u);
  expect_no_core_errors(ec.core->counters());
  ec.core->close(c);
  ec.core->settle();
  EXPECT_EQ(ec.core->replies.closed_count(c.handle()), 1u);
  expect_device_clean(rig);
}

// A completion already on the CQ when the core arms raises no event: the last look must find it and keep the
// core awake, or the request would wait for the next one.
TEST(CoreLoopEvent, ACompletionThatCameBeforeTheArmIsServedWithoutAnEvent) {
  FakeRig rig;
  FakeDevice& dev = rig.model();
  EchoService svc;
  EventCore<EchoService> ec(rig, svc);
  LoopbackConn& c = ec.core->open();
  ec.core->adopt(c);  // on this thread, before the core runs
  const std::vector<std::uint8_t> p = pattern(64, 3);
  ASSERT_TRUE(c.peer().send(inline_request(1, 9, p)));
  dev.run_all();
  ASSERT_EQ(ec.core->cq().pending(), 1u);
  ec.start();  // never fired: the core finds the completion by polling
  ASSERT_TRUE(ec.wait_asleep(1));
  EXPECT_EQ(svc.requests, 1u);
  EXPECT_EQ(ec.wakeups(WakeSource::kCompletion), 0u);
  ec.stop();
  dev.run_all();
  c.peer().poll();
  ASSERT_EQ(c.peer().inbox.size(), 1u);
  EXPECT_EQ(c.peer().inbox.front().payload, p);
  ec.core->close(c);
  ec.core->settle();
  expect_device_clean(rig);
}

// Keepalives are the core's own deadline: asleep, it wakes on its timer for them (a quarter of the interval)
// and sends them; no completion or command is needed.
TEST(CoreLoopEvent, WakesOnItsOwnDeadlineForKeepalives) {
  FakeRig rig;
  EchoService svc;
  EventCore<EchoService> ec(rig, svc);
  LoopbackConn& c = ec.core->open();
  ec.core->adopt(c);
  ec.start();
  ASSERT_TRUE(ec.wait_asleep(1));
  ec.core->res->control_mailbox().send_st(ToCore::config(ConfigKey::kKeepaliveIntervalUs, 8000));
  for (int i = 0; i < 2000 && ec.stat(telemetry::Stat::kKeepalives) < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(ec.wait_asleep(3));
  ec.stop();
  EXPECT_GE(ec.stat(telemetry::Stat::kKeepalives), 2u);
  EXPECT_GE(ec.wakeups(WakeSource::kTimer), 2u);
  EXPECT_EQ(ec.wakeups(WakeSource::kCompletion), 0u);
  ec.core->close(c);
  ec.core->settle();
}

// While the service waits for storage ops (whose completions ring nothing) the core arms but never sleeps;
// once they are done it does.
TEST(CoreLoopEvent, NoSleepWhileTheServiceWaitsForItsOwnCompletions) {
  FakeRig rig;
  PendingEchoService svc;
  EventCore<PendingEchoService> ec(rig, svc, 50);
  ec.start();
  for (int i = 0; i < 5000 && ec.stat(telemetry::Stat::kIdleArms) < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(ec.stat(telemetry::Stat::kIdleArms), 3u);
  EXPECT_EQ(ec.stat(telemetry::Stat::kSleeps), 0u);
  EXPECT_FALSE(ec.sleeper->asleep());
  // Awake and arming every 50 us, it still publishes about every millisecond: health reads its polls move.
  const std::uint64_t polls = ec.stat(telemetry::Stat::kPolls);
  for (int i = 0; i < 5000 && ec.stat(telemetry::Stat::kPolls) == polls; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GT(ec.stat(telemetry::Stat::kPolls), polls);
  svc.pending.store(false);
  EXPECT_TRUE(ec.wait_asleep(1));
}

// With the storage queue ringing the core's storage doorbell, the core sleeps while its op is pending and
// the completion wakes it. One queued before the core ran (no ring: nobody was armed) is taken by polling.
TEST(CoreLoopEvent, SleepsThroughPendingStorageOpsWhoseCompletionsRingItsBell) {
  FakeRig rig;
  QueuedStorageEchoService svc;
  EventCore<QueuedStorageEchoService> ec(rig, svc, 50);
  svc.cq->set_wake(&ec.sleeper->storage_bell());
  svc.pending.store(2);
  ASSERT_TRUE(svc.cq->push(storage::Completion{1, {}, storage::Status::kOk}));  // rings nothing
  ec.start();
  ASSERT_TRUE(ec.wait_asleep(1)) << "asleep with an op pending";
  EXPECT_EQ(svc.completed.load(), 1u) << "the completion queued before the core ran was taken";
  EXPECT_EQ(svc.pending.load(), 1u);
  EXPECT_EQ(ec.wakeups(WakeSource::kStorage), 0u);

  ASSERT_TRUE(svc.cq->push(storage::Completion{2, {}, storage::Status::kOk}));
  ASSERT_TRUE(ec.wait_asleep(2)) << "woken, it took the completion and slept again";
  EXPECT_EQ(svc.completed.load(), 2u);
  EXPECT_EQ(ec.wakeups(WakeSource::kStorage), 1u);
  EXPECT_EQ(
      ec.wakeups(WakeSource::kCompletion) + ec.wakeups(WakeSource::kCommand) + ec.wakeups(WakeSource::kTimer),
      0u);
  EXPECT_EQ(ec.sleeper->storage_bell().rings(), 1u) << "a push rings only while the core sleeps";
  ec.stop();
}

}  // namespace
}  // namespace rdmagate::dataplane

// Handoff rings: typed SP/SC rte_rings on caller memory, and the two mailboxes built on them. No EAL anywhere
// in this binary; the first test makes that explicit.
#include "dataplane/handoff_ring.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <rte_lcore.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace rdmagate::dataplane {
namespace {

// Formats a ring on heap storage the test owns.
template <typename Cmd>
struct TestRing {
  explicit TestRing(std::uint32_t capacity, const char* name = "test")
      : storage(SpscRing<Cmd>::memsize(capacity)) {
    rc = ring.init(storage.data(), storage.size(), capacity, name);
  }
  RingStorage storage;
  SpscRing<Cmd> ring;
  int rc = -1;
};

ToCore seq_cmd(std::uint64_t i) {
  return ToCore::config(ConfigKey::kKeepaliveIntervalUs, i);
}

TEST(HandoffCommands, FactoriesRoundTrip) {
  int object = 0;
  const ConnHandle h = ConnHandle::from_ptr(&object);
  EXPECT_TRUE(h.valid());
  EXPECT_EQ(h.as_ptr<int>(), &object);
  EXPECT_FALSE(ConnHandle{}.valid());

  const ToCore adopt = ToCore::adopt(h);
  EXPECT_EQ(adopt.op, ToCoreOp::kAdopt);
  EXPECT_EQ(adopt.conn(), h);
  const ToCore close = ToCore::close(h, CloseReason::kQpFatal);
  EXPECT_EQ(close.op, ToCoreOp::kClose);
  EXPECT_EQ(close.close_reason(), CloseReason::kQpFatal);
  const ToCore cfg = ToCore::config(ConfigKey::kQuiesce, 1);
  EXPECT_EQ(cfg.config_key(), ConfigKey::kQuiesce);
  EXPECT_EQ(cfg.config_value(), 1u);

  const ToControl failed = ToControl::failed(h, FailureKind::kProtocol, 42);
  EXPECT_EQ(failed.op, ToControlOp::kFailed);
  EXPECT_EQ(failed.conn(), h);
  EXPECT_EQ(failed.failure_kind(), FailureKind::kProtocol);
  EXPECT_EQ(failed.status(), 42u);
  EXPECT_EQ(ToControl::closed(h).op, ToControlOp::kClosed);

  EXPECT_EQ(close_reason_for(FailureKind::kCompletion), CloseReason::kCompletionError);
  EXPECT_EQ(close_reason_for(FailureKind::kProtocol), CloseReason::kProtocolError);
  EXPECT_EQ(close_reason_for(FailureKind::kKeepalive), CloseReason::kKeepaliveTimeout);
  for (std::uint8_t r = 0; r < kCloseReasonCount; ++r) {
    EXPECT_NE(to_string(static_cast<CloseReason>(r)), "unknown") << int(r);
  }
}

TEST(HandoffRing, WorksWithoutEal) {
  // rte_lcore_id() is LCORE_ID_ANY in any thread EAL did not set up; nothing in this binary calls
  // rte_eal_init.
  ASSERT_EQ(rte_lcore_id(), LCORE_ID_ANY);
  TestRing<ToCore> t(8, "no_eal");
  ASSERT_EQ(t.rc, 0);
  EXPECT_EQ(t.ring.capacity(), 8u);
  auto prod = t.ring.take_producer();
  auto cons = t.ring.take_consumer();
  ASSERT_TRUE(prod.valid() && cons.valid());
  ASSERT_TRUE(prod.try_enqueue_st(ToCore::close(ConnHandle{77}, CloseReason::kShutdown)));
  ToCore out;
  ASSERT_TRUE(cons.try_dequeue_st(out));
  EXPECT_EQ(out, ToCore::close(ConnHandle{77}, CloseReason::kShutdown));
  EXPECT_FALSE(cons.try_dequeue_st(out));
  // Still no EAL after using the ring.
  EXPECT_EQ(rte_lcore_id(), LCORE_ID_ANY);
}

TEST(HandoffRing, InitValidatesArguments) {
  const std::size_t need = SpscRing<ToCore>::memsize(16);
  ASSERT_GT(need, 16 * sizeof(ToCore));
  EXPECT_EQ(SpscRing<ToCore>::memsize(0), 0u);
  EXPECT_EQ(SpscRing<ToCore>::memsize(kMaxRingCapacity + 1), 0u);
  RingStorage mem(need + RTE_CACHE_LINE_SIZE);
  ASSERT_TRUE(mem);

  {
    SpscRing<ToCore> r;
    EXPECT_EQ(r.init(mem.data(), mem.size(), 0, "zero"), -EINVAL);
    EXPECT_EQ(r.init(mem.data(), mem.size(), kMaxRingCapacity + 1, "huge"), -EINVAL);
    EXPECT_EQ(r.init(nullptr, mem.size(), 16, "null"), -EINVAL);
    EXPECT_EQ(r.init(mem.data() + 8, mem.size() - 8, 16, "misaligned"), -EINVAL);
    EXPECT_EQ(r.init(mem.data(), need - 1, 16, "small"), -ENOSPC);
    EXPECT_EQ(r.init(mem.data(), mem.size(), 16, "a_name_that_is_much_longer_than_rte_ring_namesize"),
              -ENAMETOOLONG);
    EXPECT_FALSE(r.initialized());
    EXPECT_EQ(r.capacity(), 0u);
    EXPECT_EQ(r.init(mem.data(), need, 16, "ok"), 0);
    EXPECT_TRUE(r.initialized());
    EXPECT_EQ(r.init(mem.data(), need, 16, "again"), -EBUSY);
  }
}

TEST(HandoffRing, EachEndIsIssuedOnce) {
  TestRing<ToCore> t(4);
  ASSERT_EQ(t.rc, 0);
  auto prod = t.ring.take_producer();
  auto cons = t.ring.take_consumer();
  EXPECT_TRUE(prod.valid());
  EXPECT_TRUE(cons.valid());
#ifdef NDEBUG
  EXPECT_FALSE(t.ring.take_producer().valid());
  EXPECT_FALSE(t.ring.take_consumer().valid());
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)t.ring.take_producer(), "");
  EXPECT_DEATH((void)t.ring.take_consumer(), "");
#endif
  // Moving a handle moves the right to write; the source becomes invalid.
  RingProducer<ToCore> moved = std::move(prod);
  EXPECT_TRUE(moved.valid());
  EXPECT_FALSE(prod.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state is the point
}

TEST(HandoffRing, ExactCapacityAndFullBehaviour) {
  // A non-power-of-two capacity holds exactly that many (RING_F_EXACT_SZ).
  TestRing<ToCore> t(5);
  ASSERT_EQ(t.rc, 0);
  EXPECT_EQ(t.ring.capacity(), 5u);
  auto prod = t.ring.take_producer();
  auto cons = t.ring.take_consumer();
  for (std::uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(prod.try_enqueue_st(seq_cmd(i))) << i;
  EXPECT_EQ(prod.free_count(), 0u);
  EXPECT_FALSE(prod.try_enqueue_st(seq_cmd(99)));  // full: refused, nothing overwritten

  ToCore one;
  ASSERT_TRUE(cons.try_dequeue_st(one));
  EXPECT_EQ(one.config_value(), 0u);
  // A burst larger than the room enqueues the prefix that fits, in order.
  const std::array<ToCore, 3> more{seq_cmd(5), seq_cmd(6), seq_cmd(7)};
  EXPECT_EQ(prod.enqueue_burst_st(more), 1u);
  std::array<ToCore, 8> out;
  ASSERT_EQ(cons.dequeue_burst_st(out), 5u);
  for (std::uint64_t i = 0; i < 5; ++i) EXPECT_EQ(out[i].config_value(), i + 1);
  EXPECT_EQ(cons.count(), 0u);
  EXPECT_EQ(cons.dequeue_burst_st(out), 0u);
}

TEST(HandoffRing, BurstsAcrossTheWrapPointKeepOrder) {
  TestRing<ToControl> t(7);
  ASSERT_EQ(t.rc, 0);
  auto prod = t.ring.take_producer();
  auto cons = t.ring.take_consumer();
  std::uint64_t next_in = 1;
  std::uint64_t next_out = 1;
  std::array<ToControl, 7> buf;
  // Varying burst sizes walk the indices around the ring many times.
  for (int round = 0; round < 1000; ++round) {
    const std::uint32_t want = 1 + static_cast<std::uint32_t>(round % 7);
    std::array<ToControl, 7> in;
    for (std::uint32_t i = 0; i < want; ++i) in[i] = ToControl::closed(ConnHandle{next_in + i});
    const std::uint32_t put = prod.enqueue_burst_st(std::span<const ToControl>(in.data(), want));
    next_in += put;
    const std::uint32_t take = 1 + static_cast<std::uint32_t>((round * 3) % 7);
    const std::uint32_t got = cons.dequeue_burst_st(std::span<ToControl>(buf.data(), take));
    for (std::uint32_t i = 0; i < got; ++i) ASSERT_EQ(buf[i].conn().value, next_out++);
  }
  while (true) {
    const std::uint32_t got = cons.dequeue_burst_st(buf);
    if (got == 0) break;
    for (std::uint32_t i = 0; i < got; ++i) ASSERT_EQ(buf[i].conn().value, next_out++);
  }
  EXPECT_EQ(next_in, next_out);
  EXPECT_GT(next_in, 1000u);
}

TEST(HandoffRing, SpscAcrossTwoThreadsMillionCommandsInOrder) {
  constexpr std::uint64_t kCount = 1'000'000;
  TestRing<ToCore> t(64);
  ASSERT_EQ(t.rc, 0);
  auto prod = t.ring.take_producer();
  auto cons = t.ring.take_consumer();

  std::thread producer([&prod] {
    std::array<ToCore, 16> burst;
    std::uint64_t next = 0;
    while (next < kCount) {
      const std::uint32_t n =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(1 + next % 16, kCount - next));
      for (std::uint32_t i = 0; i < n; ++i) burst[i] = seq_cmd(next + i);
      const std::uint32_t put = prod.enqueue_burst_st(std::span<const ToCore>(burst.data(), n));
      next += put;
      if (put == 0) std::this_thread::yield();  // full: the producer backs off, never drops
    }
  });

  std::uint64_t expected = 0;
  std::uint64_t mismatches = 0;
  std::array<ToCore, 32> out;
  while (expected < kCount) {
    const std::uint32_t got = cons.dequeue_burst_st(out);
    if (got == 0) {
      std::this_thread::yield();
      continue;
    }
    for (std::uint32_t i = 0; i < got; ++i) {
      // Order preserved, nothing lost, nothing duplicated: every value is exactly the next one.
      if (out[i].op != ToCoreOp::kConfig || out[i].config_value() != expected) ++mismatches;
      ++expected;
    }
  }
  producer.join();
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(expected, kCount);
  EXPECT_EQ(cons.dequeue_burst_st(out), 0u);
}

TEST(CoreHandoff, FormatsBothRingsInOneBlock) {
  const HandoffSizes sizes{32, 100};
  const std::size_t need = CoreHandoff::memsize(sizes);
  ASSERT_GT(need, 0u);
  EXPECT_EQ(CoreHandoff::memsize(HandoffSizes{0, 8}), 0u);
  RingStorage mem(need);
  CoreHandoff h;
  EXPECT_EQ(h.init(mem.data(), need - 1, sizes, 3), -ENOSPC);
  ASSERT_EQ(h.init(mem.data(), need, sizes, 3), 0);
  EXPECT_EQ(h.to_core().capacity(), 32u);
  EXPECT_EQ(h.to_control().capacity(), 100u);
  EXPECT_STREQ(h.to_core().raw()->name, "rg_c3_in");
  EXPECT_STREQ(h.to_control().raw()->name, "rg_c3_out");

  // The rings are independent: filling one leaves the other empty and usable.
  auto to_core = h.to_core().take_producer();
  auto to_control = h.to_control().take_producer();
  for (std::uint64_t i = 0; i < 32; ++i) ASSERT_TRUE(to_core.try_enqueue_st(seq_cmd(i)));
  for (std::uint64_t i = 0; i < 100; ++i)
    ASSERT_TRUE(to_control.try_enqueue_st(ToControl::closed(ConnHandle{i + 1})));
  auto core_in = h.to_core().take_consumer();
  auto control_in = h.to_control().take_consumer();
  ToCore c;
  ToControl r;
  ASSERT_TRUE(core_in.try_dequeue_st(c));
  EXPECT_EQ(c.config_value(), 0u);
  ASSERT_TRUE(control_in.try_dequeue_st(r));
  EXPECT_EQ(r.conn().value, 1u);
}

// ---- mailboxes
// -------------------------------------------------------------------------------------------------

// Both directions of one core's handoff on test-owned memory.
struct Pair {
  explicit Pair(HandoffSizes s) : mem(CoreHandoff::memsize(s)) { rc = h.init(mem.data(), mem.size(), s, 0); }
  RingStorage mem;
  CoreHandoff h;
  int rc = -1;
};

struct RecordingCore {
  std::vector<ToCore> seen;
  void on_adopt_st(ConnHandle c) { seen.push_back(ToCore::adopt(c)); }
  void on_close_st(ConnHandle c, CloseReason r) { seen.push_back(ToCore::close(c, r)); }
  void on_config_st(ConfigKey k, std::uint64_t v) { seen.push_back(ToCore::config(k, v)); }
};

struct RecordingControl {
  std::vector<ToControl> seen;
  void on_closed_st(ConnHandle c) { seen.push_back(ToControl::closed(c)); }
  void on_failed_st(ConnHandle c, FailureKind k, std::uint32_t s) {
    seen.push_back(ToControl::failed(c, k, s));
  }
};

static_assert(CoreCommandHandler<RecordingCore>);
static_assert(ControlReplyHandler<RecordingControl>);

TEST(CoreMailbox, DispatchesTypedCommandsInBoundedBurstsAndCountsInvalidOnes) {
  Pair p({256, 64});
  ASSERT_EQ(p.rc, 0);
  CoreMailbox<64> core(p.h.to_core().take_consumer(), p.h.to_control().take_producer());
  auto raw_to_core = p.h.to_core().take_producer();
  RecordingCore handler;

  std::vector<ToCore> sent;
  for (std::uint64_t i = 1; i <= 40; ++i) {
    const ToCore c = i % 3 == 0   ? ToCore::close(ConnHandle{i}, CloseReason::kPeerDisconnected)
                     : i % 3 == 1 ? ToCore::adopt(ConnHandle{i})
                                  : ToCore::config(ConfigKey::kKeepaliveIntervalUs, i);
    sent.push_back(c);
    ASSERT_TRUE(raw_to_core.try_enqueue_st(c));
  }
  // Garbage that must be counted and dropped, never acted on.
  ASSERT_TRUE(raw_to_core.try_enqueue_st(ToCore{}));                     // op kInvalid
  ASSERT_TRUE(raw_to_core.try_enqueue_st(ToCore::adopt(ConnHandle{})));  // null connection
  ASSERT_TRUE(raw_to_core.try_enqueue_st(ToCore::close(ConnHandle{}, CloseReason::kLocal)));
  ToCore bogus = ToCore::adopt(ConnHandle{9});
  bogus.op = static_cast<ToCoreOp>(200);
  ASSERT_TRUE(raw_to_core.try_enqueue_st(bogus));

  // One check handles at most one burst.
  EXPECT_EQ(core.check_st(handler), CoreMailbox<64>::kBurst);
  EXPECT_EQ(handler.seen.size(), CoreMailbox<64>::kBurst);
  EXPECT_EQ(core.check_st(handler), 44u - CoreMailbox<64>::kBurst);
  EXPECT_EQ(handler.seen, sent);
  EXPECT_EQ(core.counters().commands, 44u);
  EXPECT_EQ(core.counters().invalid_commands, 4u);
}

TEST(CoreMailbox, RepliesWaitWhenTheRingIsFullAndKeepTheirOrder) {
  Pair p({8, 4});
  ASSERT_EQ(p.rc, 0);
  CoreMailbox<32> core(p.h.to_core().take_consumer(), p.h.to_control().take_producer());
  ControlMailbox control(p.h.to_core().take_producer(), p.h.to_control().take_consumer());
  RecordingCore core_handler;
  RecordingControl control_handler;

  // Ten replies into a ring of four: the core never blocks, the rest wait in order.
  for (std::uint64_t i = 1; i <= 10; ++i) {
    const bool ok = i % 2 == 0 ? core.closed_st(ConnHandle{i})
                               : core.failed_st(ConnHandle{i}, FailureKind::kCompletion, 5);
    ASSERT_TRUE(ok);
  }
  EXPECT_EQ(core.pending_st(), 6u);
  EXPECT_EQ(core.counters().replies, 4u);
  EXPECT_EQ(core.counters().replies_deferred, 6u);
  // Nothing is retried until the core's next check; checks with a still-full ring change nothing.
  EXPECT_EQ(core.check_st(core_handler), 0u);
  EXPECT_EQ(core.pending_st(), 6u);

  std::size_t rounds = 0;
  while (control_handler.seen.size() < 10 && rounds++ < 10) {
    control.drain_st(control_handler);
    core.check_st(core_handler);
  }
  ASSERT_EQ(control_handler.seen.size(), 10u);
  for (std::uint64_t i = 1; i <= 10; ++i) {
    const ToControl& m = control_handler.seen[i - 1];
    EXPECT_EQ(m.conn().value, i);
    EXPECT_EQ(m.op, i % 2 == 0 ? ToControlOp::kClosed : ToControlOp::kFailed);
  }
  EXPECT_EQ(core.pending_st(), 0u);
  EXPECT_EQ(core.counters().reply_overflows, 0u);
}

TEST(CoreMailbox, PendingFifoOverflowIsReportedNotUndefined) {
  Pair p({8, 4});
  ASSERT_EQ(p.rc, 0);
  CoreMailbox<32> core(p.h.to_core().take_consumer(), p.h.to_control().take_producer());
  for (std::uint64_t i = 1; i <= 4 + 32; ++i) ASSERT_TRUE(core.closed_st(ConnHandle{i})) << i;
  EXPECT_FALSE(core.closed_st(ConnHandle{999}));
  EXPECT_EQ(core.counters().reply_overflows, 1u);
  EXPECT_EQ(core.pending_st(), 32u);

  // Everything accepted still arrives, in order; the refused one does not.
  ControlMailbox control(p.h.to_core().take_producer(), p.h.to_control().take_consumer());
  RecordingCore core_handler;
  RecordingControl control_handler;
  for (int round = 0; round < 20 && control_handler.seen.size() < 36; ++round) {
    control.drain_st(control_handler);
    core.check_st(core_handler);
  }
  ASSERT_EQ(control_handler.seen.size(), 36u);
  for (std::uint64_t i = 1; i <= 36; ++i) EXPECT_EQ(control_handler.seen[i - 1].conn().value, i);
}

TEST(ControlMailbox, BacklogHoldsWhatDoesNotFitAndFlushesInOrder) {
  Pair p({4, 8});
  ASSERT_EQ(p.rc, 0);
  ControlMailbox control(p.h.to_core().take_producer(), p.h.to_control().take_consumer());
  CoreMailbox<32> core(p.h.to_core().take_consumer(), p.h.to_control().take_producer());
  RecordingCore core_handler;

  std::vector<ToCore> sent;
  for (std::uint64_t i = 1; i <= 10; ++i) {
    sent.push_back(ToCore::adopt(ConnHandle{i}));
    sent.push_back(ToCore::close(ConnHandle{i}, CloseReason::kShutdown));
  }
  std::size_t direct = 0;
  for (const ToCore& c : sent) direct += control.send_st(c) ? 1 : 0;
  EXPECT_EQ(direct, 4u);
  EXPECT_EQ(control.counters().sent, 4u);
  EXPECT_EQ(control.backlog_st(), 16u);
  EXPECT_TRUE(control.has_backlog_st());
  // The core has not drained: a flush makes no progress and does not spin.
  EXPECT_EQ(control.flush_st(), 16u);

  // What leaves the backlog is reported in order, so the engine can confirm deferred ADOPTs.
  std::vector<ToCore> flushed;
  for (int round = 0; round < 10 && control.has_backlog_st(); ++round) {
    core.check_st(core_handler);
    control.flush_st([&flushed](const ToCore& c) { flushed.push_back(c); });
  }
  EXPECT_EQ(flushed, std::vector<ToCore>(sent.begin() + 4, sent.end()));
  core.check_st(core_handler);
  EXPECT_FALSE(control.has_backlog_st());
  // CLOSE never overtook its ADOPT, and nothing else reordered either.
  EXPECT_EQ(core_handler.seen, sent);
  EXPECT_EQ(control.counters().sent, 20u);
  EXPECT_EQ(control.counters().deferred, 16u);
}

TEST(ControlMailbox, DrainIsBoundedAndDropsInvalidReplies) {
  Pair p({8, 2048});
  ASSERT_EQ(p.rc, 0);
  ControlMailbox control(p.h.to_core().take_producer(), p.h.to_control().take_consumer());
  auto raw = p.h.to_control().take_producer();
  for (std::uint64_t i = 1; i <= 1500; ++i) ASSERT_TRUE(raw.try_enqueue_st(ToControl::closed(ConnHandle{i})));
  ASSERT_TRUE(raw.try_enqueue_st(ToControl{}));
  ASSERT_TRUE(raw.try_enqueue_st(ToControl::closed(ConnHandle{})));
  ASSERT_TRUE(raw.try_enqueue_st(ToControl::failed(ConnHandle{}, FailureKind::kCompletion, 1)));

  RecordingControl handler;
  EXPECT_EQ(control.drain_st(handler), ControlMailbox::kDrainLimit);
  EXPECT_EQ(handler.seen.size(), ControlMailbox::kDrainLimit);
  EXPECT_EQ(control.drain_st(handler, 10), 10u);
  EXPECT_EQ(control.drain_st(handler), 1503u - ControlMailbox::kDrainLimit - 10);
  EXPECT_EQ(handler.seen.size(), 1500u);
  for (std::uint64_t i = 1; i <= 1500; ++i) ASSERT_EQ(handler.seen[i - 1].conn().value, i);
  EXPECT_EQ(control.counters().invalid_replies, 3u);
  EXPECT_EQ(control.drain_st(handler), 0u);
}

// The real shape: a control thread and a core thread, small rings so both the control backlog and the core's
// pending FIFO are exercised, half a million connections adopted and closed (a million commands one way, half
// a million CLOSED plus STATS back). Every connection must be closed exactly once, in the order control
// closed them.
bool readable(const Doorbell& b) {
  pollfd p{b.fd(), POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

// The wakeups of a side that sleeps (a caller-driven or event-policy core, every control thread):
// a command or reply put on the ring rings the other side's bell, and the bell writes its eventfd only while
// that side is armed, so a busy receiver costs the sender no syscall.
TEST(Mailboxes, DoorbellsRingOnlyWhileTheReceiverSleeps) {
  Pair p({8, 8});
  ASSERT_EQ(p.rc, 0);
  ControlMailbox control(p.h.to_core().take_producer(), p.h.to_control().take_consumer());
  CoreMailbox<64> core(p.h.to_core().take_consumer(), p.h.to_control().take_producer());
  Doorbell core_bell, control_bell;
  ASSERT_TRUE(core_bell.valid());
  control.set_wake(&core_bell);
  core.set_wake(&control_bell);

  EXPECT_TRUE(control.send_st(ToCore::adopt(ConnHandle{1})));  // the core is awake: no write
  EXPECT_EQ(core_bell.rings(), 0u);
  EXPECT_FALSE(readable(core_bell));
  EXPECT_EQ(core.commands_waiting_st(), 1u);  // what the core's sleep check sees
  RecordingCore handler;
  core.check_st(handler);
  EXPECT_EQ(core.commands_waiting_st(), 0u);

  core_bell.arm();
  EXPECT_TRUE(control.send_st(ToCore::close(ConnHandle{1}, CloseReason::kLocal)));
  EXPECT_EQ(core_bell.rings(), 1u);
  EXPECT_TRUE(readable(core_bell));
  core_bell.disarm();
  EXPECT_FALSE(readable(core_bell)) << "disarm empties the eventfd";

  // Replies: the same for control.
  EXPECT_FALSE(control.has_replies_st());
  EXPECT_TRUE(core.closed_st(ConnHandle{1}));
  EXPECT_EQ(control_bell.rings(), 0u);
  EXPECT_TRUE(control.has_replies_st());
  control_bell.arm();
  EXPECT_TRUE(core.failed_st(ConnHandle{2}, FailureKind::kCompletion, 5));
  EXPECT_EQ(control_bell.rings(), 1u);
  EXPECT_TRUE(readable(control_bell));
  control_bell.disarm();
  RecordingControl replies;
  EXPECT_EQ(control.drain_st(replies), 2u);
  EXPECT_FALSE(control.has_replies_st());

  // A backlogged command rings when flush_st puts it on the ring.
  for (std::uint64_t i = 10; i < 40; ++i) control.send_st(ToCore::adopt(ConnHandle{i}));
  ASSERT_TRUE(control.has_backlog_st());
  core.check_st(handler);
  core_bell.arm();
  const std::uint64_t before = core_bell.rings();
  control.flush_st();
  EXPECT_GT(core_bell.rings(), before);
  EXPECT_TRUE(readable(core_bell));
}

TEST(Mailboxes, ControlAndCoreThreadsHandOffAMillionCommands) {
  constexpr std::uint64_t kConns = 500'000;
  constexpr std::uint32_t kPending = 1024;
  Pair p({128, 128});
  ASSERT_EQ(p.rc, 0);
  ControlMailbox control(p.h.to_core().take_producer(), p.h.to_control().take_consumer());
  CoreMailbox<kPending> core(p.h.to_core().take_consumer(), p.h.to_control().take_producer());
  std::atomic<bool> stop{false};
  // The core starts only once control has had to defer a command (its ring full), so that the slow path
  // runs whatever the scheduler does; a core that kept up from the start left it untested (seen under TSan).
  std::atomic<bool> go{false};

  struct CoreSide {
    CoreMailbox<kPending>* mailbox;
    std::uint64_t next_adopt = 1;
    std::uint64_t next_close = 1;
    std::uint64_t owned = 0;
    std::uint64_t errors = 0;
    void on_adopt_st(ConnHandle c) {
      if (c.value != next_adopt++) ++errors;
      ++owned;
    }
    void on_close_st(ConnHandle c, CloseReason r) {
      if (c.value != next_close++ || c.value >= next_adopt || r != CloseReason::kLocal) ++errors;
      --owned;
      if (!mailbox->closed_st(c)) ++errors;
    }
    void on_config_st(ConfigKey, std::uint64_t) { ++errors; }
  } core_side{&core};

  std::thread core_thread([&] {
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      // A real core never yields; this host may be shared with compilers, so give the CPU away when idle.
      if ((i & (CoreMailbox<kPending>::kCheckEvery - 1)) == 0 && core.check_st(core_side) == 0) {
        std::this_thread::yield();
      }
    }
  });

  struct ControlSide {
    std::uint64_t next_closed = 1;
    std::uint64_t errors = 0;
    void on_closed_st(ConnHandle c) {
      if (c.value != next_closed++) ++errors;
    }
    void on_failed_st(ConnHandle, FailureKind, std::uint32_t) { ++errors; }
  } control_side;

  std::uint64_t sent = 0;
  while (control_side.next_closed <= kConns) {
    // Keep at most 512 connections in flight, like a connect/disconnect storm on a core sized for 512: the
    // core's pending FIFO (kPending >= 2 x connections) can then never overflow, however far behind control
    // falls.
    while (sent < kConns && sent - (control_side.next_closed - 1) < kPending / 2 &&
           control.backlog_st() < 256) {
      ++sent;
      control.send_st(ToCore::adopt(ConnHandle{sent}));
      control.send_st(ToCore::close(ConnHandle{sent}, CloseReason::kLocal));
    }
    control.flush_st();
    if (control.counters().deferred > 0) go.store(true, std::memory_order_release);
    if (control.drain_st(control_side) == 0) std::this_thread::yield();
  }
  stop.store(true, std::memory_order_relaxed);
  core_thread.join();

  EXPECT_EQ(control_side.errors, 0u);
  EXPECT_EQ(core_side.errors, 0u);
  EXPECT_EQ(control_side.next_closed, kConns + 1);
  EXPECT_EQ(core_side.owned, 0u);
  EXPECT_EQ(core.counters().commands, 2 * kConns);
  EXPECT_EQ(core.counters().reply_overflows, 0u);
  EXPECT_EQ(core.counters().invalid_commands, 0u);
  EXPECT_EQ(control.counters().sent, 2 * kConns);
  EXPECT_EQ(control.counters().invalid_replies, 0u);
  EXPECT_FALSE(control.has_backlog_st());
  // Both slow paths really ran.
  EXPECT_GT(control.counters().deferred, 0u);
  RecordProperty("control_deferred", std::to_string(control.counters().deferred));
  RecordProperty("core_replies_deferred", std::to_string(core.counters().replies_deferred));
}

}  // namespace
}  // namespace rdmagate::dataplane

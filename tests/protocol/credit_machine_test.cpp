// Every credit rule of docs/protocol.md ("Credit rules"), one machine at a time. The two-machine
// behaviour (no overrun, no deadlock, conservation) is the simulation's job: credit_sim_test.cpp.

#include "protocol/credit_machine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace rdmagate::protocol {
namespace {

constexpr CreditClass kReq = CreditClass::kRequest;
constexpr CreditClass kRsv = CreditClass::kReserved;
constexpr CreditClass kNop = CreditClass::kNoop;

// One machine plus the link storage it queues through.
struct Rig {
  explicit Rig(CreditConfig c, std::uint64_t now = 0) : links(64), m(c, links, now) {}
  explicit Rig(std::uint16_t depth, std::uint64_t now = 0) : Rig(CreditConfig{depth, 0, 0, 0}, now) {}

  // Queues descriptor `tx` and sends it at once; returns the step (kind kNone when it had to wait).
  SendStep send(CreditClass c, std::uint16_t tx, std::uint64_t now = 0) {
    EXPECT_TRUE(m.enqueue(c, tx));
    return m.next_send(now);
  }

  std::vector<std::uint16_t> links;
  CreditMachine m;
};

// ---- configuration --------------------------------------------------------------------------------

TEST(CreditConfig, ValidateRejectsShallowQueuesAndBadLinks) {
  std::vector<std::uint16_t> links(8);
  EXPECT_EQ(CreditMachine::validate({3, 0, 0, 0}, 8), CreditError::kBadConfig);
  EXPECT_EQ(CreditMachine::validate({0, 0, 0, 0}, 8), CreditError::kBadConfig);
  EXPECT_EQ(CreditMachine::validate({kMinCreditQueueDepth, 0, 0, 0}, 0), CreditError::kBadConfig);
  EXPECT_EQ(CreditMachine::validate({kMinCreditQueueDepth, 0, 0, 0}, 0x10000), CreditError::kBadConfig);
  EXPECT_EQ(CreditMachine::validate({kMinCreditQueueDepth, 0, 0, 0}, 8), CreditError::kOk);
  EXPECT_EQ(CreditMachine::validate({0xffff, 0, 0, 0}, 8), CreditError::kOk);
}

TEST(CreditConfig, ReserveIsTwoOrAnEighth) {
  EXPECT_EQ(credit_reserve(4), 2);
  EXPECT_EQ(credit_reserve(16), 2);
  EXPECT_EQ(credit_reserve(23), 2);
  EXPECT_EQ(credit_reserve(24), 3);
  EXPECT_EQ(credit_reserve(64), 8);
  EXPECT_EQ(credit_reserve(0xffff), 8191);
  // Requests always keep at least two slots of their own at the minimum depth.
  for (std::uint32_t d = kMinCreditQueueDepth; d <= 0xffff; ++d) {
    ASSERT_GE(d - credit_reserve(static_cast<std::uint16_t>(d)), 2u) << d;
  }
}

TEST(CreditConfig, HighWaterDefaultsToAQuarterButAtLeastHalfUpTo32) {
  EXPECT_EQ(Rig(4).m.high_water(), 2);
  EXPECT_EQ(Rig(5).m.high_water(), 2);
  EXPECT_EQ(Rig(16).m.high_water(), 8);
  EXPECT_EQ(Rig(64).m.high_water(), 32);  // the shallow floor: as before the quarter rule
  EXPECT_EQ(Rig(65).m.high_water(), 32);
  EXPECT_EQ(Rig(128).m.high_water(), 32);  // the two rules meet
  EXPECT_EQ(Rig(131).m.high_water(), 32);
  EXPECT_EQ(Rig(132).m.high_water(), 33);
  EXPECT_EQ(Rig(256).m.high_water(), 64);
  EXPECT_EQ(Rig(0xffff).m.high_water(), 0x3fff);
  // Never below 2 and never above the depth, at every depth; from 128 up the one-way window P - R - H stays
  // at least 5/8 of the depth, and a NOOP never goes more often than one per 32 messages where P allows.
  for (std::uint32_t d = kMinCreditQueueDepth; d <= 0xffff; ++d) {
    const auto depth = static_cast<std::uint16_t>(d);
    const std::uint32_t h = default_high_water(depth);
    ASSERT_GE(h, 2u) << d;
    ASSERT_LE(h, d) << d;
    ASSERT_GE(h, std::min<std::uint32_t>(d / 2, 32)) << d;
    if (d >= 128) {
      ASSERT_GE(8 * (d - credit_reserve(depth) - h), 5 * d) << d;
    }
  }
  EXPECT_EQ(Rig(CreditConfig{8, 1, 0, 0}).m.high_water(), 2);
  EXPECT_EQ(Rig(CreditConfig{8, 100, 0, 0}).m.high_water(), 8);
  EXPECT_EQ(Rig(CreditConfig{8, 5, 0, 0}).m.high_water(), 5);
}

TEST(CreditClassOf, EveryMessageType) {
  EXPECT_EQ(credit_class(MessageType::kNoop), kNop);
  EXPECT_EQ(credit_class(MessageType::kInlineRequest), kReq);
  EXPECT_EQ(credit_class(MessageType::kReadChunkRequest), kReq);
  EXPECT_EQ(credit_class(MessageType::kWriteChunkRequest), kReq);
  EXPECT_EQ(credit_class(MessageType::kInlineResponse), kRsv);
  EXPECT_EQ(credit_class(MessageType::kCompletion), kRsv);
}

TEST(CreditStrings, AreDistinct) {
  EXPECT_EQ(to_string(CreditError::kCreditOverrun), "credit_overrun");
  EXPECT_EQ(to_string(CreditError::kReserveViolation), "reserve_violation");
  EXPECT_EQ(to_string(NoopReason::kPeerStarved), "peer_starved");
  for (std::uint8_t a = 0; a <= kCreditErrorMax; ++a)
    for (std::uint8_t b = 0; b < a; ++b)
      EXPECT_NE(to_string(static_cast<CreditError>(a)), to_string(static_cast<CreditError>(b)));
}

// ---- spending ---------------------------------------------------------------------------------------

TEST(CreditSpend, StartsWithTheQueueDepthAndEverySendCostsOne) {
  Rig r(16);
  EXPECT_EQ(r.m.credits(), 16u);
  EXPECT_EQ(r.m.peer_room(), 16u);
  SendStep s = r.send(kReq, 0);
  EXPECT_EQ(s.kind, SendKind::kSend);
  EXPECT_EQ(s.tx, 0u);
  EXPECT_EQ(s.cls, kReq);
  EXPECT_EQ(s.credits, 0u);
  EXPECT_EQ(r.m.credits(), 15u);
  EXPECT_EQ(r.send(kRsv, 1).kind, SendKind::kSend);
  EXPECT_EQ(r.m.credits(), 14u);
  EXPECT_EQ(r.m.stats().sent[index_of(kReq)], 1u);
  EXPECT_EQ(r.m.stats().sent[index_of(kRsv)], 1u);
}

TEST(CreditSpend, RequestsStopAtTheReserve) {
  Rig r(16);  // reserve 2
  for (std::uint16_t i = 0; i < 14; ++i) ASSERT_EQ(r.send(kReq, i).kind, SendKind::kSend) << i;
  EXPECT_EQ(r.m.credits(), 2u);
  EXPECT_FALSE(r.m.may_send(kReq));
  EXPECT_EQ(r.send(kReq, 14).kind, SendKind::kNone);
  EXPECT_EQ(r.m.queued(kReq), 1u);
  // Answers still go: the reserve exists for them.
  EXPECT_TRUE(r.m.may_send(kRsv));
  SendStep s = r.send(kRsv, 20);
  EXPECT_EQ(s.kind, SendKind::kSend);
  EXPECT_EQ(s.tx, 20u);
  EXPECT_EQ(r.m.credits(), 1u);
}

TEST(CreditSpend, LastCreditOnlyWithReturnedCredits) {
  Rig r(4);
  ASSERT_EQ(r.send(kReq, 0).kind, SendKind::kSend);
  ASSERT_EQ(r.send(kReq, 1).kind, SendKind::kSend);
  ASSERT_EQ(r.send(kRsv, 2).kind, SendKind::kSend);
  ASSERT_EQ(r.m.credits(), 1u);
  EXPECT_FALSE(r.m.may_send(kRsv));
  EXPECT_FALSE(r.m.may_send(kNop));
  EXPECT_EQ(r.send(kRsv, 3).kind, SendKind::kNone);
  // Once we owe the peer a credit, the answer may take the last credit because it carries it.
  ASSERT_EQ(r.m.on_receive(kRsv, 1, 0), CreditError::kOk);
  ASSERT_EQ(r.m.credits(), 2u);
  // (that return lifted us to 2; spend back down to the last credit)
  ASSERT_EQ(r.m.next_send(0).kind, SendKind::kSend);
  ASSERT_EQ(r.m.credits(), 1u);
  EXPECT_EQ(r.send(kRsv, 4).kind, SendKind::kNone);
  ASSERT_EQ(r.m.on_reposted(kRsv), CreditError::kOk);
  EXPECT_TRUE(r.m.may_send(kRsv));
  SendStep s = r.m.next_send(0);
  EXPECT_EQ(s.kind, SendKind::kSend);
  EXPECT_EQ(s.tx, 4u);
  EXPECT_EQ(s.credits, 1u);
  EXPECT_EQ(r.m.credits(), 0u);
  EXPECT_FALSE(r.m.may_send(kRsv));
  EXPECT_FALSE(r.m.may_send(kNop));
}

TEST(CreditSpend, AnswersGoBeforeRequestsAndEachQueueIsFifo) {
  Rig r(16);
  ASSERT_TRUE(r.m.enqueue(kReq, 1));
  ASSERT_TRUE(r.m.enqueue(kReq, 2));
  ASSERT_TRUE(r.m.enqueue(kRsv, 3));
  ASSERT_TRUE(r.m.enqueue(kRsv, 4));
  std::vector<std::uint16_t> order;
  for (SendStep s = r.m.next_send(0); s.kind != SendKind::kNone; s = r.m.next_send(0)) order.push_back(s.tx);
  EXPECT_EQ(order, (std::vector<std::uint16_t>{3, 4, 1, 2}));
}

TEST(CreditSpend, EnqueueRefusesTheSameDescriptorTwice) {
  Rig r(8);
  EXPECT_TRUE(r.m.enqueue(kReq, 5));
  EXPECT_FALSE(r.m.enqueue(kRsv, 5));
  EXPECT_FALSE(r.m.enqueue(kReq, 64));  // beyond the links
}

TEST(CreditSpend, SendOrQueueSendsAtOnceWhenNothingIsAhead) {
  Rig r(8);
  SendStep s = r.m.send_or_queue(kReq, 3, 5);
  EXPECT_EQ(s.kind, SendKind::kSend);
  EXPECT_EQ(s.tx, 3u);
  EXPECT_EQ(r.m.credits(), 7u);
  EXPECT_EQ(r.m.queued_total(), 0u);
  EXPECT_EQ(r.m.stats().sent[index_of(kReq)], 1u);
}

TEST(CreditSpend, SendOrQueueKeepsOrderBehindQueuedMessages) {
  Rig r(4);  // reserve 2: two requests, then they queue
  ASSERT_EQ(r.m.send_or_queue(kReq, 0, 0).kind, SendKind::kSend);
  ASSERT_EQ(r.m.send_or_queue(kReq, 1, 0).kind, SendKind::kSend);
  SendStep s = r.m.send_or_queue(kReq, 2, 0);
  EXPECT_EQ(s.kind, SendKind::kNone);
  EXPECT_EQ(s.tx, 2u);  // queued
  ASSERT_EQ(r.m.on_receive(kRsv, 2, 0), CreditError::kOk);
  // A later request must not overtake the queued one, even with credits back.
  EXPECT_EQ(r.m.send_or_queue(kReq, 3, 0).kind, SendKind::kNone);
  EXPECT_EQ(r.m.next_send(0).tx, 2u);
  // An answer passes queued requests (3 waits at the reserve) but never queued answers.
  EXPECT_EQ(r.m.queued(kReq), 1u);
  EXPECT_EQ(r.m.send_or_queue(kRsv, 4, 0).kind, SendKind::kSend);
  EXPECT_EQ(r.m.send_or_queue(kRsv, 5, 0).kind, SendKind::kSend);
  ASSERT_EQ(r.m.credits(), 1u);
  EXPECT_EQ(r.m.send_or_queue(kRsv, 6, 0).kind, SendKind::kNone);  // last credit, nothing owed
  ASSERT_EQ(r.m.on_reposted(kRsv), CreditError::kOk);
  EXPECT_EQ(r.m.send_or_queue(kRsv, 7, 0).kind, SendKind::kNone);  // 6 is ahead of it
  EXPECT_EQ(r.m.next_send(0).tx, 6u);
}

TEST(CreditSpend, SendOrQueueRefusesBadDescriptorsAndNeverSendsNoopsDirectly) {
  Rig r(8);
  ASSERT_TRUE(r.m.enqueue(kReq, 1));
  SendStep s = r.m.send_or_queue(kRsv, 1, 0);  // already queued
  EXPECT_EQ(s.kind, SendKind::kNone);
  EXPECT_EQ(s.tx, TxQueues::kEnd);
  s = r.m.send_or_queue(kRsv, 64, 0);  // beyond the links
  EXPECT_EQ(s.tx, TxQueues::kEnd);
  EXPECT_EQ(r.m.credits(), 8u);
  // NOOPs are the machine's decision: they always go through the queue.
  s = r.m.send_or_queue(kNop, 2, 0);
  EXPECT_EQ(s.kind, SendKind::kNone);
  EXPECT_EQ(s.tx, 2u);
}

// ---- returning ----------------------------------------------------------------------------------------

TEST(CreditReturn, ReturnedCreditsComeBackOnReceive) {
  Rig r(8);
  for (std::uint16_t i = 0; i < 5; ++i) ASSERT_EQ(r.send(kReq, i).kind, SendKind::kSend);
  ASSERT_EQ(r.m.credits(), 3u);
  ASSERT_EQ(r.m.on_receive(kRsv, 4, 0), CreditError::kOk);
  EXPECT_EQ(r.m.credits(), 7u);
  EXPECT_EQ(r.m.held(), 1u);
}

TEST(CreditReturn, RepostedReceivesRideOnTheNextHeader) {
  Rig r(8);
  ASSERT_EQ(r.m.on_receive(kReq, 0, 0), CreditError::kOk);
  ASSERT_EQ(r.m.on_receive(kReq, 0, 0), CreditError::kOk);
  ASSERT_EQ(r.m.on_receive(kNop, 0, 0), CreditError::kOk);
  EXPECT_EQ(r.m.held(), 3u);
  EXPECT_EQ(r.m.owed(), 0u);
  EXPECT_EQ(r.m.peer_room(), 5u);
  // Held receives are not owed until they are posted again.
  SendStep s = r.send(kRsv, 0);
  EXPECT_EQ(s.credits, 0u);
  ASSERT_EQ(r.m.on_reposted(kReq, 2), CreditError::kOk);
  ASSERT_EQ(r.m.on_reposted(kNop), CreditError::kOk);
  EXPECT_EQ(r.m.owed_eager(), 2u);
  EXPECT_EQ(r.m.owed_lazy(), 1u);
  EXPECT_EQ(r.m.peer_room(), 5u);
  s = r.send(kRsv, 1);
  EXPECT_EQ(s.kind, SendKind::kSend);
  EXPECT_EQ(s.credits, 3u);
  EXPECT_EQ(r.m.owed(), 0u);
  EXPECT_EQ(r.m.peer_room(), 8u);
  EXPECT_EQ(r.m.stats().credits_returned, 3u);
  // Every header returns everything owed; the next one returns nothing more.
  EXPECT_EQ(r.send(kReq, 2).credits, 0u);
}

TEST(CreditReturn, RepostWithoutReceiveIsAnEngineBug) {
  Rig r(8);
  EXPECT_EQ(r.m.on_reposted(kRsv), CreditError::kRepostUnderflow);
  ASSERT_EQ(r.m.on_receive(kRsv, 0, 0), CreditError::kOk);
  EXPECT_EQ(r.m.on_reposted(kRsv, 2), CreditError::kRepostUnderflow);
  EXPECT_EQ(r.m.held(), 1u);
  EXPECT_EQ(r.m.on_reposted(kRsv, 1), CreditError::kOk);
}

// ---- NOOP ----------------------------------------------------------------------------------------------

// Receives and re-posts `n` messages of class `c` that return nothing.
void absorb(CreditMachine& m, CreditClass c, std::uint16_t n, std::uint64_t now = 0) {
  for (std::uint16_t i = 0; i < n; ++i) {
    ASSERT_EQ(m.on_receive(c, 0, now), CreditError::kOk);
    ASSERT_EQ(m.on_reposted(c), CreditError::kOk);
  }
}

TEST(CreditNoop, HighWaterWithNothingQueuedWantsANoop) {
  Rig r(32);  // high water 16, reserve 4
  absorb(r.m, kReq, 15);
  EXPECT_EQ(r.m.noop_reason(0), NoopReason::kNone);
  EXPECT_FALSE(r.m.wants_noop(0));
  absorb(r.m, kReq, 1);
  EXPECT_EQ(r.m.noop_reason(0), NoopReason::kHighWater);
  ASSERT_TRUE(r.m.wants_noop(0));
  ASSERT_TRUE(r.m.enqueue(kNop, 7));
  EXPECT_FALSE(r.m.wants_noop(0));  // one queued is enough
  SendStep s = r.m.next_send(0);
  EXPECT_EQ(s.kind, SendKind::kSend);
  EXPECT_EQ(s.cls, kNop);
  EXPECT_EQ(s.tx, 7u);
  EXPECT_EQ(s.credits, 16u);
  EXPECT_EQ(r.m.owed(), 0u);
  EXPECT_EQ(r.m.stats().noops[static_cast<std::size_t>(NoopReason::kHighWater)], 1u);
  EXPECT_FALSE(r.m.wants_noop(0));
}

TEST(CreditNoop, NotWhenAQueuedMessageCanCarryTheCredits) {
  Rig r(32);
  absorb(r.m, kReq, 20);
  ASSERT_TRUE(r.m.enqueue(kRsv, 1));
  EXPECT_EQ(r.m.noop_reason(0), NoopReason::kHighWater);
  EXPECT_FALSE(r.m.wants_noop(0));  // the answer piggybacks them
  EXPECT_EQ(r.m.next_send(0).credits, 20u);
}

TEST(CreditNoop, WhenTheOnlyQueuedMessageIsABlockedRequest) {
  Rig r(32);  // reserve 4
  for (std::uint16_t i = 0; i < 28; ++i) ASSERT_EQ(r.send(kReq, i).kind, SendKind::kSend);
  ASSERT_TRUE(r.m.enqueue(kReq, 40));
  absorb(r.m, kRsv, 16);  // answers that return nothing yet
  ASSERT_FALSE(r.m.may_send(kReq));
  EXPECT_TRUE(r.m.wants_noop(0));
}

TEST(CreditNoop, QueuedNoopIsDroppedOnceSomethingElseCarriedTheCredits) {
  Rig r(32);
  absorb(r.m, kReq, 16);
  ASSERT_TRUE(r.m.wants_noop(0));
  ASSERT_TRUE(r.m.enqueue(kNop, 9));
  ASSERT_TRUE(r.m.enqueue(kRsv, 1));
  SendStep s = r.m.next_send(0);
  EXPECT_EQ(s.tx, 1u);
  EXPECT_EQ(s.credits, 16u);
  s = r.m.next_send(0);
  EXPECT_EQ(s.kind, SendKind::kDropNoop);
  EXPECT_EQ(s.tx, 9u);
  EXPECT_EQ(r.m.stats().noops_dropped, 1u);
  EXPECT_EQ(r.m.next_send(0).kind, SendKind::kNone);
  EXPECT_EQ(r.m.stats().sent[index_of(kNop)], 0u);
}

TEST(CreditNoop, PeerAtItsLastCreditGetsOneReturnedAtOnce) {
  Rig r(32);  // high water 16
  // The peer spent 31 credits on answers; we hold 30 of them and re-posted one.
  absorb(r.m, kRsv, 1);
  for (int i = 0; i < 30; ++i) ASSERT_EQ(r.m.on_receive(kRsv, 0, 0), CreditError::kOk);
  EXPECT_EQ(r.m.peer_room(), 1u);
  EXPECT_EQ(r.m.owed(), 1u);
  EXPECT_EQ(r.m.noop_reason(0), NoopReason::kPeerStarved);
  EXPECT_TRUE(r.m.wants_noop(0));
}

TEST(CreditNoop, PeerHeldAtItsReserveOnlyWhenReturningLiftsItAbove) {
  Rig r(32);  // reserve 4
  // The peer sent 28 requests: its credits are at the reserve. We hold 27 and re-posted one.
  absorb(r.m, kReq, 1);
  for (int i = 0; i < 27; ++i) ASSERT_EQ(r.m.on_receive(kReq, 0, 0), CreditError::kOk);
  EXPECT_EQ(r.m.peer_room(), 4u);
  EXPECT_EQ(r.m.noop_reason(0), NoopReason::kPeerStarved);  // 4 + 1 > reserve: it may send one more
  // With the peer's room eaten by our holds instead, returning cannot let it send a request: no NOOP.
  Rig h(32);
  for (int i = 0; i < 27; ++i) ASSERT_EQ(h.m.on_receive(kReq, 0, 0), CreditError::kOk);
  absorb(h.m, kNop, 1);  // a lone NOOP of the peer, re-posted (lazy)
  EXPECT_EQ(h.m.peer_room(), 4u);
  EXPECT_EQ(h.m.noop_reason(0), NoopReason::kNone);
}

TEST(CreditNoop, ALoneNoopIsNeverAnsweredWithANoop) {
  // Minimal depth, where everything looks starved: one lazy credit must still not trigger.
  Rig r(kMinCreditQueueDepth);
  absorb(r.m, kNop, 1);
  EXPECT_EQ(r.m.owed_lazy(), 1u);
  EXPECT_EQ(r.m.noop_reason(0), NoopReason::kNone);
  EXPECT_FALSE(r.m.wants_noop(0));
  // Two are answered (high water is 2 here), so credits lost to NOOPs always come back.
  absorb(r.m, kNop, 1);
  EXPECT_NE(r.m.noop_reason(0), NoopReason::kNone);
  EXPECT_TRUE(r.m.wants_noop(0));
}

TEST(CreditNoop, UsesTheReserveThatRequestsCannotTouch) {
  Rig r(8);  // reserve 2
  for (std::uint16_t i = 0; i < 6; ++i) ASSERT_EQ(r.send(kReq, i).kind, SendKind::kSend);
  ASSERT_FALSE(r.m.may_send(kReq));
  ASSERT_TRUE(r.m.may_send(kNop));
  absorb(r.m, kRsv, 4);
  ASSERT_TRUE(r.m.wants_noop(0));
  ASSERT_TRUE(r.m.enqueue(kNop, 10));
  SendStep s = r.m.next_send(0);
  EXPECT_EQ(s.kind, SendKind::kSend);
  EXPECT_EQ(s.credits, 4u);
  EXPECT_EQ(r.m.credits(), 1u);
}

TEST(CreditNoop, NoopWaitsWhenOnlyTheLastCreditIsLeftAndNothingIsOwed) {
  Rig r(CreditConfig{4, 0, 10, 0});
  ASSERT_EQ(r.send(kReq, 0).kind, SendKind::kSend);
  ASSERT_EQ(r.send(kReq, 1).kind, SendKind::kSend);
  ASSERT_EQ(r.send(kRsv, 2).kind, SendKind::kSend);
  ASSERT_EQ(r.m.credits(), 1u);
  // Keepalive due, but a NOOP returning nothing may not take the last credit.
  EXPECT_EQ(r.m.noop_reason(100), NoopReason::kKeepalive);
  EXPECT_FALSE(r.m.wants_noop(100));
  ASSERT_TRUE(r.m.enqueue(kNop, 3));  // even if the engine queues one anyway
  EXPECT_EQ(r.m.next_send(100).kind, SendKind::kNone);
  EXPECT_FALSE(r.m.send_ready(100));
}

// ---- keepalive and liveness --------------------------------------------------------------------------

TEST(CreditKeepalive, AfterTheIntervalWithoutSending) {
  Rig r(CreditConfig{16, 0, 100, 0}, 1000);
  EXPECT_EQ(r.m.noop_reason(1099), NoopReason::kNone);
  EXPECT_EQ(r.m.noop_reason(1100), NoopReason::kKeepalive);
  ASSERT_TRUE(r.m.wants_noop(1100));
  ASSERT_TRUE(r.m.enqueue(kNop, 0));
  SendStep s = r.m.next_send(1100);
  EXPECT_EQ(s.kind, SendKind::kSend);
  EXPECT_EQ(s.credits, 0u);
  EXPECT_EQ(r.m.stats().noops[static_cast<std::size_t>(NoopReason::kKeepalive)], 1u);
  EXPECT_EQ(r.m.noop_reason(1150), NoopReason::kNone);
  // Any send restarts the interval.
  EXPECT_EQ(r.send(kReq, 1, 1190).kind, SendKind::kSend);
  EXPECT_EQ(r.m.noop_reason(1250), NoopReason::kNone);
  EXPECT_EQ(r.m.noop_reason(1290), NoopReason::kKeepalive);
}

TEST(CreditKeepalive, DisabledByZero) {
  Rig r(CreditConfig{16, 0, 0, 0});
  EXPECT_EQ(r.m.noop_reason(~std::uint64_t{0}), NoopReason::kNone);
}

TEST(CreditKeepalive, QueuedKeepaliveDroppedIfSomethingWasSentMeanwhile) {
  Rig r(CreditConfig{16, 0, 100, 0});
  ASSERT_TRUE(r.m.wants_noop(100));
  ASSERT_TRUE(r.m.enqueue(kNop, 0));
  ASSERT_TRUE(r.m.enqueue(kReq, 1));
  EXPECT_EQ(r.m.next_send(100).tx, 1u);
  EXPECT_EQ(r.m.next_send(100).kind, SendKind::kDropNoop);
}

TEST(CreditLiveness, SilentPeerIsDeadAfterTheTimeout) {
  Rig r(CreditConfig{16, 0, 0, 500}, 1000);
  EXPECT_FALSE(r.m.peer_dead(1000));
  EXPECT_FALSE(r.m.peer_dead(1499));
  EXPECT_TRUE(r.m.peer_dead(1500));
  // Anything received, a NOOP included, proves the peer alive.
  ASSERT_EQ(r.m.on_receive(kNop, 0, 1400), CreditError::kOk);
  EXPECT_FALSE(r.m.peer_dead(1500));
  EXPECT_FALSE(r.m.peer_dead(1899));
  EXPECT_TRUE(r.m.peer_dead(1900));
  // Sending does not.
  EXPECT_EQ(r.send(kReq, 0, 1950).kind, SendKind::kSend);
  EXPECT_TRUE(r.m.peer_dead(1950));
}

TEST(CreditTimers, ALiveReloadTakesEffectFromTheLastSendAndReceive) {
  Rig r(CreditConfig{16, 0, 1000, 5000}, 1000);
  ASSERT_EQ(r.m.on_receive(kNop, 0, 1200), CreditError::kOk);
  EXPECT_EQ(r.m.noop_reason(1300), NoopReason::kNone);
  EXPECT_FALSE(r.m.peer_dead(1300));
  // Shorter times: measured from the last send (1000) and the last receive (1200), so both are due at once.
  r.m.set_timers(100, 50);
  EXPECT_EQ(r.m.keepalive_interval(), 100u);
  EXPECT_EQ(r.m.dead_peer_timeout(), 50u);
  EXPECT_EQ(r.m.noop_reason(1300), NoopReason::kKeepalive);
  EXPECT_TRUE(r.m.peer_dead(1300));
  // Longer again, and zero switches a timer off.
  r.m.set_timers(0, 10'000);
  EXPECT_EQ(r.m.noop_reason(100'000), NoopReason::kNone);
  EXPECT_FALSE(r.m.peer_dead(11'199));
  EXPECT_TRUE(r.m.peer_dead(11'200));
}

// A minor-1 connection: the handshake told the peer our keepalive interval and dead-peer timeout, so a
// reload may make us stricter (keepalive sooner, dead later) but never break the promise.
TEST(CreditTimers, AnnouncedTimersBoundALiveReload) {
  CreditConfig c{16, 0, 0, 0};
  Session s;
  s.keepalive_ms = 250;
  s.local_dead_peer_ms = 4000;
  set_session_timers(c, s, /*own keepalive*/ 1000 * 10, /*own dead*/ 3000 * 10, /*ticks per ms*/ 10);
  EXPECT_EQ(c.keepalive_interval, 2500u);   // the negotiated interval, not our own
  EXPECT_EQ(c.dead_peer_timeout, 40'000u);  // raised to what we announced
  EXPECT_EQ(c.keepalive_ceiling, 2500u);
  EXPECT_EQ(c.dead_peer_floor, 40'000u);
  Rig r(c, 0);
  EXPECT_EQ(r.m.keepalive_interval(), 2500u);
  r.m.set_timers(100, 100'000);  // stricter keepalive, longer patience: taken
  EXPECT_EQ(r.m.keepalive_interval(), 100u);
  EXPECT_EQ(r.m.dead_peer_timeout(), 100'000u);
  r.m.set_timers(9000, 20'000);  // quieter than announced, sooner dead: clamped to the promise
  EXPECT_EQ(r.m.keepalive_interval(), 2500u);
  EXPECT_EQ(r.m.dead_peer_timeout(), 40'000u);
  r.m.set_timers(0, 0);  // no keepalive breaks the promise; never dead does not
  EXPECT_EQ(r.m.keepalive_interval(), 2500u);
  EXPECT_EQ(r.m.dead_peer_timeout(), 0u);
  EXPECT_EQ(r.m.noop_reason(2499), NoopReason::kNone);
  EXPECT_EQ(r.m.noop_reason(2500), NoopReason::kKeepalive);
}

// A minor-0 connection announced nothing: our own local times, and a reload applies as it is.
TEST(CreditTimers, Minor0SessionsKeepLocalTimesUnbounded) {
  CreditConfig c{16, 0, 0, 0};
  set_session_timers(c, Session{}, 700, 9000, 10);
  EXPECT_EQ(c.keepalive_interval, 700u);
  EXPECT_EQ(c.dead_peer_timeout, 9000u);
  EXPECT_EQ(c.keepalive_ceiling, 0u);
  EXPECT_EQ(c.dead_peer_floor, 0u);
  Rig r(c, 0);
  r.m.set_timers(0, 5);
  EXPECT_EQ(r.m.keepalive_interval(), 0u);
  EXPECT_EQ(r.m.dead_peer_timeout(), 5u);
  // A peer that negotiated a keepalive while we announced no dead-peer timeout: no floor, own timeout kept.
  Session s;
  s.keepalive_ms = 100;
  set_session_timers(c, s, 0, 0, 10);
  EXPECT_EQ(c.keepalive_interval, 1000u);
  EXPECT_EQ(c.dead_peer_timeout, 0u);
}

TEST(CreditLiveness, DisabledByZeroAndTimeGoingBackwardsIsNotSilence) {
  Rig off(CreditConfig{16, 0, 0, 0});
  EXPECT_FALSE(off.m.peer_dead(~std::uint64_t{0}));
  Rig r(CreditConfig{16, 0, 100, 500}, 1000);
  EXPECT_FALSE(r.m.peer_dead(10));  // no unsigned wrap into "forever"
  EXPECT_EQ(r.m.noop_reason(10), NoopReason::kNone);
}

// ---- violations by the peer --------------------------------------------------------------------------

TEST(CreditViolation, PeerSendingBeyondOurReceivesIsAnOverrun) {
  Rig r(8);
  ASSERT_EQ(r.send(kReq, 0).kind, SendKind::kSend);  // so that the peer can return one
  for (int i = 0; i < 7; ++i) ASSERT_EQ(r.m.on_receive(kRsv, 0, 0), CreditError::kOk);
  ASSERT_EQ(r.m.on_receive(kRsv, 1, 0), CreditError::kOk);  // its last credit, returning one
  EXPECT_EQ(r.m.peer_room(), 0u);
  EXPECT_EQ(r.m.on_receive(kNop, 0, 0), CreditError::kCreditOverrun);
  EXPECT_EQ(r.m.on_receive(kRsv, 0, 0), CreditError::kCreditOverrun);
  EXPECT_EQ(r.m.held(), 8u);  // the refused messages changed nothing
}

TEST(CreditViolation, OverrunAlsoCountsReceivesReportedButNotYetReturned) {
  Rig r(4);
  absorb(r.m, kRsv, 3);  // re-posted but the peer has not heard: its credits are still spent
  ASSERT_EQ(r.send(kReq, 0).kind, SendKind::kSend);  // returns the 3
  absorb(r.m, kRsv, 3);
  ASSERT_EQ(r.m.on_receive(kRsv, 1, 0), CreditError::kOk);
  EXPECT_EQ(r.m.on_receive(kRsv, 0, 0), CreditError::kCreditOverrun);
}

TEST(CreditViolation, RequestIntoTheReserve) {
  Rig r(16);  // reserve 2
  for (int i = 0; i < 14; ++i) ASSERT_EQ(r.m.on_receive(kReq, 0, 0), CreditError::kOk);
  EXPECT_EQ(r.m.peer_room(), 2u);
  EXPECT_EQ(r.m.on_receive(kReq, 0, 0), CreditError::kReserveViolation);
  EXPECT_EQ(r.m.held(), 14u);
  EXPECT_EQ(r.m.on_receive(kRsv, 0, 0), CreditError::kOk);  // answers may use it
}

TEST(CreditViolation, LastCreditWithoutReturningAny) {
  Rig r(8);
  for (int i = 0; i < 7; ++i) ASSERT_EQ(r.m.on_receive(kRsv, 0, 0), CreditError::kOk);
  EXPECT_EQ(r.m.on_receive(kRsv, 0, 0), CreditError::kReserveViolation);
  EXPECT_EQ(r.m.on_receive(kNop, 0, 0), CreditError::kReserveViolation);
}

TEST(CreditViolation, ReturningMoreThanWeSpent) {
  Rig r(8);
  EXPECT_EQ(r.m.on_receive(kRsv, 1, 0), CreditError::kReturnedTooMany);
  ASSERT_EQ(r.send(kReq, 0).kind, SendKind::kSend);
  ASSERT_EQ(r.send(kReq, 1).kind, SendKind::kSend);
  EXPECT_EQ(r.m.on_receive(kRsv, 3, 0), CreditError::kReturnedTooMany);
  EXPECT_EQ(r.m.credits(), 6u);
  EXPECT_EQ(r.m.held(), 0u);
  ASSERT_EQ(r.m.on_receive(kRsv, 2, 0), CreditError::kOk);
  EXPECT_EQ(r.m.credits(), 8u);
  // Each credit comes back once only.
  EXPECT_EQ(r.m.on_receive(kRsv, 1, 0), CreditError::kReturnedTooMany);
}

TEST(CreditViolation, RefusedMessageDoesNotRefreshLiveness) {
  Rig r(CreditConfig{8, 0, 0, 100}, 0);
  EXPECT_EQ(r.m.on_receive(kRsv, 5, 90), CreditError::kReturnedTooMany);
  EXPECT_TRUE(r.m.peer_dead(100));
}

// ---- bookkeeping ---------------------------------------------------------------------------------------

TEST(CreditStatsTest, CountReceivesByClass) {
  Rig r(16);
  absorb(r.m, kReq, 2);
  absorb(r.m, kRsv, 3);
  absorb(r.m, kNop, 1);
  EXPECT_EQ(r.m.stats().received[index_of(kReq)], 2u);
  EXPECT_EQ(r.m.stats().received[index_of(kRsv)], 3u);
  EXPECT_EQ(r.m.stats().received[index_of(kNop)], 1u);
}

TEST(CreditTeardown, CancelReturnsEveryQueuedDescriptor) {
  Rig r(4);
  for (std::uint16_t i = 0; i < 10; ++i) ASSERT_TRUE(r.m.enqueue(static_cast<CreditClass>(i % 3), i));
  std::vector<bool> seen(10);
  for (std::uint16_t tx = r.m.cancel_next(); tx != TxQueues::kEnd; tx = r.m.cancel_next()) {
    ASSERT_LT(tx, 10u);
    EXPECT_FALSE(seen[tx]);
    seen[tx] = true;
  }
  for (bool b : seen) EXPECT_TRUE(b);
  EXPECT_EQ(r.m.queued_total(), 0u);
  EXPECT_EQ(r.m.credits(), 4u);  // cancelling spends nothing
}

TEST(CreditSendReady, ReflectsWhatThePumpWouldDo) {
  Rig r(4);
  EXPECT_FALSE(r.m.send_ready(0));
  ASSERT_TRUE(r.m.enqueue(kReq, 0));
  EXPECT_TRUE(r.m.send_ready(0));
  ASSERT_EQ(r.m.next_send(0).kind, SendKind::kSend);
  ASSERT_EQ(r.send(kReq, 1).kind, SendKind::kSend);
  ASSERT_TRUE(r.m.enqueue(kReq, 2));
  EXPECT_FALSE(r.m.send_ready(0));  // blocked at the reserve, nothing owed
}

// ---- the high-water rule at its boundaries -----------------------------------------------------------

TEST(CreditHighWater, ExactlyAtHighWaterOnADeepQueue) {
  Rig r(256);  // high water 64, reserve 32
  absorb(r.m, kReq, 63);
  EXPECT_EQ(r.m.owed(), 63u);
  EXPECT_EQ(r.m.noop_reason(0), NoopReason::kNone);  // one below: the sender still has a 160-message window
  absorb(r.m, kReq, 1);
  EXPECT_EQ(r.m.noop_reason(0), NoopReason::kHighWater);
  ASSERT_TRUE(r.m.wants_noop(0));
  ASSERT_TRUE(r.m.enqueue(kNop, 0));
  const SendStep s = r.m.next_send(0);
  EXPECT_EQ(s.kind, SendKind::kSend);
  EXPECT_EQ(s.credits, 64u);
  EXPECT_EQ(r.m.owed(), 0u);
  EXPECT_EQ(r.m.peer_room(), 256u);
}

TEST(CreditHighWater, AtHighWaterWithZeroCreditsTheNoopWaitsForACredit) {
  Rig r(CreditConfig{16, 4, 0, 0});  // reserve 2
  // Spend every credit: requests down to the reserve, then answers down to zero.
  for (std::uint16_t i = 0; i < 14; ++i) ASSERT_EQ(r.send(kReq, i).kind, SendKind::kSend);
  absorb(r.m, kReq, 1);  // something owed, so answers may take the last credit
  ASSERT_EQ(r.send(kRsv, 20).kind, SendKind::kSend);
  absorb(r.m, kReq, 1);
  ASSERT_EQ(r.send(kRsv, 21).kind, SendKind::kSend);
  ASSERT_EQ(r.m.credits(), 0u);
  absorb(r.m, kReq, 4);  // exactly at high water
  EXPECT_EQ(r.m.noop_reason(0), NoopReason::kHighWater);
  EXPECT_FALSE(r.m.wants_noop(0));  // no credit to send it with
  EXPECT_FALSE(r.m.may_send(kNop));
  // The peer returns one credit: the NOOP may take it, being a message that returns credits.
  ASSERT_EQ(r.m.on_receive(kRsv, 1, 0), CreditError::kOk);
  ASSERT_EQ(r.m.credits(), 1u);
  ASSERT_TRUE(r.m.wants_noop(0));
  ASSERT_TRUE(r.m.enqueue(kNop, 30));
  const SendStep s = r.m.next_send(0);
  EXPECT_EQ(s.kind, SendKind::kSend);
  EXPECT_EQ(s.credits, 4u);
  EXPECT_EQ(r.m.credits(), 0u);
}

TEST(CreditHighWater, TheWholeWindowOfTheDeepestQueueFitsOneHeader) {
  // P = 65535: the 16-bit credits field carries every credit at once, with no wrap.
  std::vector<std::uint16_t> la(4), lb(4);
  CreditMachine a(CreditConfig{0xffff, 0xffff, 0, 0}, la, 0), b(CreditConfig{0xffff, 0xffff, 0, 0}, lb, 0);
  const std::uint32_t window = 0xffff - credit_reserve(0xffff);
  for (std::uint32_t i = 0; i < window; ++i) {
    const SendStep s = a.send_or_queue(kReq, 0, 0);
    ASSERT_EQ(s.kind, SendKind::kSend) << i;
    ASSERT_EQ(b.on_receive(kReq, s.credits, 0), CreditError::kOk) << i;
  }
  ASSERT_FALSE(a.may_send(kReq));
  ASSERT_EQ(b.on_reposted(kReq, static_cast<std::uint16_t>(window)), CreditError::kOk);
  ASSERT_TRUE(b.enqueue(kNop, 0));
  const SendStep n = b.next_send(0);  // below high water: the peer is held at its reserve
  ASSERT_EQ(n.kind, SendKind::kSend);
  EXPECT_EQ(n.credits, window);
  ASSERT_EQ(a.on_receive(kNop, n.credits, 0), CreditError::kOk);
  EXPECT_EQ(a.credits(), 0xffffu);
  // One more than outstanding is caught, not wrapped.
  EXPECT_EQ(a.on_receive(kNop, 1, 0), CreditError::kReturnedTooMany);
}

// A one-way stream through a link of fixed delay: A sends a request every tick while its credits allow, B
// re-posts at once and returns credits by the default high water. The round trip is `rtt` ticks, so the pipe
// holds rtt messages: the default rule keeps it full whenever P - R - H >= rtt, and the old half-depth
// high water does not at the same depth.
struct Stream {
  Stream(std::uint16_t depth, std::uint16_t high_water, std::uint32_t rtt)
      : la(8),
        lb(8),
        a(CreditConfig{depth, 0, 0, 0}, la, 0),
        b(CreditConfig{depth, high_water, 0, 0}, lb, 0),
        half(rtt / 2) {}
  // Runs `ticks` ticks; returns the ticks on which A had to wait for credits.
  std::uint64_t run(std::uint64_t ticks) {
    std::uint64_t stalls = 0;
    for (std::uint64_t t = 0; t < ticks; ++t) {
      deliver(to_b, t, [&](std::uint16_t credits) {
        EXPECT_EQ(b.on_receive(kReq, credits, t), CreditError::kOk);
        EXPECT_EQ(b.on_reposted(kReq), CreditError::kOk);
      });
      deliver(to_a, t, [&](std::uint16_t credits) {
        EXPECT_EQ(a.on_receive(kNop, credits, t), CreditError::kOk);
        EXPECT_EQ(a.on_reposted(kNop), CreditError::kOk);
      });
      if (b.wants_noop(t)) {
        EXPECT_TRUE(b.enqueue(kNop, 0));
        const SendStep n = b.next_send(t);
        EXPECT_EQ(n.kind, SendKind::kSend);
        to_a.push_back({t + half, n.credits});
        ++noops;
      }
      const SendStep s = a.send_or_queue(kReq, 0, t);
      if (s.kind == SendKind::kSend) {
        to_b.push_back({t + half, s.credits});
        ++sent;
      } else {
        EXPECT_EQ(a.cancel_next(), 0u);
        if (t > 4u * half) ++stalls;  // after the first round trips
      }
    }
    return stalls;
  }
  struct InFlight {
    std::uint64_t due;
    std::uint16_t credits;
  };
  template <typename F>
  static void deliver(std::vector<InFlight>& link, std::uint64_t t, F take) {
    std::size_t done = 0;
    while (done < link.size() && link[done].due <= t) take(link[done++].credits);
    link.erase(link.begin(), link.begin() + static_cast<std::ptrdiff_t>(done));
  }
  std::vector<std::uint16_t> la, lb;
  CreditMachine a, b;
  std::uint64_t half;
  std::vector<InFlight> to_b, to_a;
  std::uint64_t sent = 0, noops = 0;
};

TEST(CreditHighWater, DefaultKeepsAOneWayStreamsPipeFull) {
  // P = 256: R = 32, H = 64, so a round trip of 160 messages never waits.
  Stream s(256, 0, 160);
  EXPECT_EQ(s.run(100'000), 0u);
  EXPECT_NEAR(static_cast<double>(s.noops) / static_cast<double>(s.sent), 1.0 / 64, 0.001);
  // P = 128 (the shipped default): H = 32, window 80.
  Stream m(128, 0, 80);
  EXPECT_EQ(m.run(100'000), 0u);
  EXPECT_NEAR(static_cast<double>(m.noops) / static_cast<double>(m.sent), 1.0 / 32, 0.001);
}

TEST(CreditHighWater, HalfTheDepthWouldStallTheSamePipe) {
  Stream s(256, 128, 160);  // the former default: P - R - H = 96 < 160
  EXPECT_GT(s.run(100'000), 10'000u);
  Stream old(64, 0, 40);  // the former shipped depth: P - R - H = 24 < 40
  EXPECT_GT(old.run(100'000), 10'000u);
}

}  // namespace
}  // namespace rdmagate::protocol

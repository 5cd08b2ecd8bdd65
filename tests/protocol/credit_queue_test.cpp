// The three transmit queues: FIFO per queue, one link per descriptor shared by all queues, and
// refusal of the engine bugs that would corrupt them.

#include "protocol/credit_queue.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

namespace rdmagate::protocol {
namespace {

TEST(TxQueues, StartEmptyAndIdle) {
  std::array<std::uint16_t, 8> links{};
  TxQueues q(links);
  EXPECT_EQ(q.capacity(), 8u);
  EXPECT_EQ(q.total(), 0u);
  for (CreditClass c : {CreditClass::kRequest, CreditClass::kReserved, CreditClass::kNoop}) {
    EXPECT_TRUE(q.empty(c));
    EXPECT_EQ(q.size(c), 0u);
    EXPECT_EQ(q.front(c), TxQueues::kEnd);
    EXPECT_EQ(q.pop(c), TxQueues::kEnd);
  }
  for (std::uint16_t i = 0; i < 8; ++i) EXPECT_FALSE(q.queued(i));
}

TEST(TxQueues, FifoPerQueueAndQueuesAreIndependent) {
  std::array<std::uint16_t, 16> links{};
  TxQueues q(links);
  // Interleave pushes to the three queues.
  for (std::uint16_t i = 0; i < 15; ++i) ASSERT_TRUE(q.push(static_cast<CreditClass>(i % 3), i));
  EXPECT_EQ(q.total(), 15u);
  EXPECT_EQ(q.size(CreditClass::kRequest), 5u);
  EXPECT_EQ(q.front(CreditClass::kReserved), 1u);
  for (std::uint16_t c = 0; c < 3; ++c) {
    for (std::uint16_t k = 0; k < 5; ++k) EXPECT_EQ(q.pop(static_cast<CreditClass>(c)), c + 3 * k);
    EXPECT_TRUE(q.empty(static_cast<CreditClass>(c)));
  }
  EXPECT_EQ(q.total(), 0u);
}

TEST(TxQueues, RefusesDoubleEnqueueEvenOnAnotherQueue) {
  std::array<std::uint16_t, 4> links{};
  TxQueues q(links);
  ASSERT_TRUE(q.push(CreditClass::kRequest, 2));
  EXPECT_TRUE(q.queued(2));
  EXPECT_FALSE(q.push(CreditClass::kRequest, 2));
  EXPECT_FALSE(q.push(CreditClass::kNoop, 2));
  EXPECT_EQ(q.total(), 1u);
  // Once popped, the descriptor may be queued again.
  EXPECT_EQ(q.pop(CreditClass::kRequest), 2u);
  EXPECT_FALSE(q.queued(2));
  EXPECT_TRUE(q.push(CreditClass::kNoop, 2));
}

TEST(TxQueues, RefusesIndexOutOfRange) {
  std::array<std::uint16_t, 4> links{};
  TxQueues q(links);
  EXPECT_FALSE(q.push(CreditClass::kReserved, 4));
  EXPECT_FALSE(q.push(CreditClass::kReserved, TxQueues::kIdle));
  EXPECT_FALSE(q.push(CreditClass::kReserved, TxQueues::kEnd));
  EXPECT_FALSE(q.queued(4));
  EXPECT_FALSE(q.idle(4));
  EXPECT_TRUE(q.idle(3));
  EXPECT_EQ(q.total(), 0u);
}

TEST(TxQueues, FullCapacityAndReuse) {
  std::vector<std::uint16_t> links(1000);
  TxQueues q(links);
  for (int round = 0; round < 3; ++round) {
    for (std::uint16_t i = 0; i < 1000; ++i) ASSERT_TRUE(q.push(CreditClass::kRequest, i));
    EXPECT_EQ(q.size(CreditClass::kRequest), 1000u);
    for (std::uint16_t i = 0; i < 1000; ++i) ASSERT_EQ(q.pop(CreditClass::kRequest), i);
  }
}

TEST(TxQueues, CapacityClampedBelowSentinels) {
  std::vector<std::uint16_t> links(0x10000);
  TxQueues q(links);
  EXPECT_EQ(q.capacity(), TxQueues::kMaxDescriptors);
  EXPECT_TRUE(q.push(CreditClass::kNoop, TxQueues::kMaxDescriptors - 1));
}

}  // namespace
}  // namespace rdmagate::protocol

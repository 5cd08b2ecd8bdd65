// CQE tests of the mlx5 backend's poll path (dataplane/backend/mlx5_datapath.hpp), with no NIC: the test
// writes 64-byte CQEs by hand in the mlx5_cqe64 / mlx5_err_cqe layouts of mlx5dv.h, as the NIC would (the
// body first, op_own last, its owner bit the parity of the lap), and checks what the backend takes, what it
// reports and what it leaves in the CQ's doorbell record. The rules are rdma-core's (providers/mlx5/cq.c):
//   [sw]      get_sw_cqe: an entry is the software's when its opcode is not MLX5_CQE_INVALID and its owner
//             bit equals !!(n & cqe_cnt), n the consumer index; polling stops at the first that is not.
//   [ci]      update_cons_index: dbrec[MLX5_CQ_SET_CI] = be32(cons_index & 0xffffff), after the burst.
//   [req]     mlx5_parse_cqe, MLX5_CQE_REQ / REQ_ERR: idx = wqe_counter & (wqe_cnt - 1), wr_id = wrid[idx],
//             the SQ's tail moves past that WQE (and the unsignaled ones before it).
//   [resp]    handle_responder (no SRQ): wr_id = the RQ's wrid in order, ++tail; byte_len = byte_cnt;
//             MLX5_INLINE_SCATTER_32: the CQE's first byte_len bytes go to the receive WQE's buffers
//             (mlx5_copy_to_recv_wqe).
//   [synd]    mlx5_handle_error_cqe: syndrome -> ibv_wc_status, anything else IBV_WC_GENERAL_ERR.
//   [alloc]   mlx5_alloc_cq_buf: a new ring is zero with op_own = MLX5_CQE_INVALID << 4 in every entry;
//             mlx5_create_cq: ncqe = align_queue_size(cqe + 1) with cqe >= 1, so the smallest ring is 2.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/engine/mlx5_host_rings.hpp"

namespace rdmagate::dataplane {
namespace {

using B = Mlx5Backend;
using namespace mlx5_test;

constexpr std::uint32_t kLkey = 0x11223344;
constexpr std::uint64_t kGatherAddr = 0x8877665544332211ull;
constexpr std::uint8_t kJunk = 0xc3;  // what the NIC leaves in the fields this backend does not read

struct Cqe {
  std::uint8_t opcode = MLX5_CQE_REQ;
  std::uint32_t qpn = 0;
  std::uint16_t wqe_counter = 0;
  std::uint32_t byte_cnt = 0;
  std::uint8_t wqe_opcode = 0;  // sop_drop_qpn's (s_wqe_opcode_qpn's) top byte
  std::uint8_t syndrome = 0;    // error CQEs only
  std::uint8_t vendor_syndrome = 0;
  std::uint8_t op_own_flags = 0;          // e.g. MLX5_INLINE_SCATTER_32
  const std::uint8_t* scatter = nullptr;  // bytes in the CQE's first 32, for inline scatter
  std::size_t scatter_len = 0;
};

// The NIC's write of CQE number `n` (absolute: the consumer index that will take it).
void nic_write(HostCq& c, std::uint32_t n, const Cqe& e) {
  std::uint8_t* p = c.entry(n);
  std::memset(p, kJunk, 63);
  if (e.scatter != nullptr) std::memcpy(p, e.scatter, e.scatter_len);
  const bool err = e.opcode == MLX5_CQE_REQ_ERR || e.opcode == MLX5_CQE_RESP_ERR;
  if (err) {
    p[54] = e.vendor_syndrome;  // mlx5_err_cqe.vendor_err_synd
    p[55] = e.syndrome;         // mlx5_err_cqe.syndrome
  } else {
    put_be32(p + 44, e.byte_cnt);  // mlx5_cqe64.byte_cnt
  }
  put_be32(p + 56, std::uint32_t{e.wqe_opcode} << 24 | e.qpn);  // sop_drop_qpn / s_wqe_opcode_qpn
  put_be16(p + 60, e.wqe_counter);
  // The NIC's op_own store is the last of the entry; the backend's read barrier pairs with it.
  std::atomic_signal_fence(std::memory_order_release);
  const std::uint8_t owner = (n & c.cq.cqe_cnt) != 0 ? 1 : 0;
  p[63] = static_cast<std::uint8_t>(e.opcode << 4 | e.op_own_flags | owner);
}

Cqe resp(std::uint32_t qpn, std::uint16_t rq_counter, std::uint32_t len) {
  Cqe e;
  e.opcode = MLX5_CQE_RESP_SEND;
  e.qpn = qpn;
  e.wqe_counter = rq_counter;
  e.byte_cnt = len;
  return e;
}
Cqe req(std::uint32_t qpn, std::uint16_t counter, std::uint32_t len = 0,
        std::uint8_t wqe_op = MLX5_OPCODE_SEND) {
  Cqe e;
  e.opcode = MLX5_CQE_REQ;
  e.qpn = qpn;
  e.wqe_counter = counter;
  e.byte_cnt = len;
  e.wqe_opcode = wqe_op;
  return e;
}

void stage_receives(HostQp& h, std::uint32_t n, std::uint64_t first_wr_id, std::uint32_t len = 256) {
  for (std::uint32_t i = 0; i < n; ++i)
    B::stage_recv_st(h.qp, first_wr_id + i, Segment{kGatherAddr, len, kLkey});
  B::flush_st(h.qp);
}

// ---------------------------------------------------------------------------------------------------------
// Owner bit and bursts ([sw], [ci], [alloc]).

class CqLaps : public ::testing::TestWithParam<std::uint32_t> {};

// Rounds of "the NIC writes k entries, the core drains them", k varying from 1 to the whole ring, until
// the ring has turned at least 40 times. After each round the next entry holds the previous lap's CQE (or,
// in the first lap, MLX5_CQE_INVALID) and must not be taken.
TEST_P(CqLaps, OwnerBitAcrossManyWrapArounds) {
  const std::uint32_t cnt = GetParam();
  HostCq c(cnt, 1);
  QpShape s;
  s.rq_wqes = 1024;
  HostQp h(s, &c);
  std::uint64_t posted = 0, written = 0, done = 0;
  auto refill = [&] {
    while (h.qp.rq_head - h.qp.rq_tail < h.qp.rq_wqe_cnt) {
      B::stage_recv_st(h.qp, 0x10000 + posted, Segment{kGatherAddr, 4096, kLkey});
      ++posted;
    }
    B::flush_st(h.qp);
  };
  refill();
  const std::uint64_t total = std::uint64_t{40} * cnt + 4000;
  Completion out[B::kMaxPoll];
  for (std::uint32_t round = 0; done < total; ++round) {
    const std::uint32_t k = 1 + static_cast<std::uint32_t>((round * 2654435761ull) >> 7) % cnt;  // <= cnt
    for (std::uint32_t i = 0; i < k; ++i, ++written) {
      nic_write(c, static_cast<std::uint32_t>(written),
                resp(0x1234ab, static_cast<std::uint16_t>(written),
                     static_cast<std::uint32_t>(written % 4096 + 1)));
    }
    std::uint32_t got = 0;
    while (got < k) {
      const int n = B::poll_st(c.cq, out, B::kMaxPoll);
      ASSERT_GT(n, 0) << "round " << round << ": stopped after " << got << " of " << k;
      for (int j = 0; j < n; ++j, ++done) {
        ASSERT_EQ(out[j].wr_id, 0x10000 + done);
        ASSERT_EQ(out[j].byte_len, done % 4096 + 1);
        ASSERT_EQ(out[j].status, CompletionStatus::kOk);
      }
      got += static_cast<std::uint32_t>(n);
      ASSERT_EQ(c.ci_record(), static_cast<std::uint32_t>(done) & 0xffffff) << "[ci] after the burst";
    }
    ASSERT_EQ(got, k) << "took an entry the NIC had not written";
    c.poison_ci_record();
    ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 0) << "round " << round << ": a stale entry was taken";
    ASSERT_EQ(c.ci_record(), 0x5a5a5a5au) << "[ci] written with nothing taken";
    refill();
  }
  EXPECT_EQ(c.cq.ci, done);
  EXPECT_GE(c.cq.ci / cnt, 40u) << "laps";
}

INSTANTIATE_TEST_SUITE_P(RingSizes, CqLaps, ::testing::Values(2u, 4u, 8u, 64u, 1024u),
                         [](const ::testing::TestParamInfo<std::uint32_t>& i) {
                           return "cqe" + std::to_string(i.param);
                         });

// First lap: the entries the NIC has not written carry owner 0, the parity the core expects, so only
// MLX5_CQE_INVALID stops the burst. An entry written out of order (the next but one) is not reached.
TEST(Mlx5Cqe, FirstLapStopsAtInvalidOpcode) {
  HostCq c(8, 1);
  HostQp h({}, &c);
  stage_receives(h, 8, 100);
  nic_write(c, 0, resp(0x1234ab, 0, 10));
  nic_write(c, 1, resp(0x1234ab, 1, 11));
  nic_write(c, 3, resp(0x1234ab, 3, 13));  // entry 2 still MLX5_CQE_INVALID
  Completion out[B::kMaxPoll];
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 2);
  EXPECT_EQ(out[0].wr_id, 100u);
  EXPECT_EQ(out[1].wr_id, 101u);
  EXPECT_EQ(out[1].byte_len, 11u);
  EXPECT_EQ(c.ci_record(), 2u);
  c.poison_ci_record();
  EXPECT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 0);
  EXPECT_EQ(c.ci_record(), 0x5a5a5a5au);
  nic_write(c, 2, resp(0x1234ab, 2, 12));
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 2);
  EXPECT_EQ(out[0].wr_id, 102u);
  EXPECT_EQ(out[1].wr_id, 103u);
  EXPECT_EQ(out[1].byte_len, 13u);
  EXPECT_EQ(c.ci_record(), 4u);
}

// Second lap: the entries not yet rewritten hold valid lap-0 CQEs; their owner bit (0) is what stops it.
TEST(Mlx5Cqe, SecondLapStopsAtStaleOwnerBit) {
  HostCq c(8, 1);
  QpShape s;
  s.rq_wqes = 32;
  HostQp h(s, &c);
  stage_receives(h, 32, 0);
  Completion out[B::kMaxPoll];
  for (std::uint32_t i = 0; i < 8; ++i) nic_write(c, i, resp(0x1234ab, static_cast<std::uint16_t>(i), 1));
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 8);
  EXPECT_EQ(c.ci_record(), 8u);
  for (std::uint32_t i = 8; i < 11; ++i) nic_write(c, i, resp(0x1234ab, static_cast<std::uint16_t>(i), 2));
  EXPECT_EQ(c.entry(11)[63] >> 4, MLX5_CQE_RESP_SEND) << "entry 11 holds lap 0's valid CQE";
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 3);
  EXPECT_EQ(out[0].wr_id, 8u);
  EXPECT_EQ(out[2].wr_id, 10u);
  EXPECT_EQ(c.cq.ci, 11u);
  EXPECT_EQ(c.ci_record(), 11u);
  EXPECT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 0);
}

// The budget: at most n, at most kMaxPoll, nothing for n <= 0 (and then no record write either).
TEST(Mlx5Cqe, PollBudgetAndKMaxPoll) {
  static_assert(B::kMaxPoll == 64);
  HostCq c(128, 1);
  QpShape s;
  s.rq_wqes = 128;
  HostQp h(s, &c);
  stage_receives(h, 100, 0);
  for (std::uint32_t i = 0; i < 100; ++i) nic_write(c, i, resp(0x1234ab, static_cast<std::uint16_t>(i), i));
  std::vector<Completion> out(200);
  ASSERT_EQ(B::poll_st(c.cq, out.data(), 3), 3);
  EXPECT_EQ(c.ci_record(), 3u);
  c.poison_ci_record();
  EXPECT_EQ(B::poll_st(c.cq, out.data(), 0), 0);
  EXPECT_EQ(B::poll_st(c.cq, out.data(), -4), 0);
  EXPECT_EQ(c.ci_record(), 0x5a5a5a5au);
  EXPECT_EQ(c.cq.ci, 3u);
  ASSERT_EQ(B::poll_st(c.cq, out.data(), 1000), 64);
  EXPECT_EQ(out[0].wr_id, 3u);
  EXPECT_EQ(out[63].wr_id, 66u);
  EXPECT_EQ(c.ci_record(), 67u);
  ASSERT_EQ(B::poll_st(c.cq, out.data(), 1000), 33);
  EXPECT_EQ(out[32].wr_id, 99u);
  EXPECT_EQ(out[32].byte_len, 99u);
  EXPECT_EQ(c.ci_record(), 100u);
}

// [ci]: the record carries the consumer index's low 24 bits; [sw]: the lap parity past 2^24 is still
// ci & cqe_cnt.
TEST(Mlx5Cqe, ConsumerIndexRecordIs24Bits) {
  HostCq c(8, 1);
  HostQp h({}, &c);
  stage_receives(h, 4, 7);
  c.cq.ci = 0xfffffe;
  for (std::uint32_t n = 0xfffffe; n != 0x1000002; ++n) nic_write(c, n, resp(0x1234ab, 0, 5));
  Completion out[B::kMaxPoll];
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 4);
  EXPECT_EQ(out[3].wr_id, 10u);
  EXPECT_EQ(c.cq.ci, 0x1000002u);
  EXPECT_EQ(c.ci_record(), 0x000002u);
}

// ---------------------------------------------------------------------------------------------------------
// Requester completions ([req]).

TEST(Mlx5Cqe, ReqCompletionFreesTheSqUpToItsWqe) {
  HostCq c(16, 1);
  QpShape s;
  s.sq_bbs = 8;
  HostQp h(s, &c);
  std::vector<std::uint8_t> payload(109, 0x42);
  B::stage_send_st(h.qp, 0xa, Segment{addr_of(payload.data()), 109, kLkey},
                   kSendInline | kSendSignaled);                                // 0-2
  B::stage_send_st(h.qp, 0xb, Segment{kGatherAddr, 64, kLkey}, 0);              // 3
  B::stage_send_st(h.qp, 0xc, Segment{kGatherAddr, 64, kLkey}, kSendSignaled);  // 4
  B::stage_rdma_st(h.qp, RdmaOp::kRead, 0xd, Segment{kGatherAddr, 4096, kLkey}, 0x1000, 0x77,
                   kSendSignaled);  // 5
  B::flush_st(h.qp);
  nic_write(c, 0, req(0x1234ab, 0, 0, MLX5_OPCODE_SEND));
  Completion out[B::kMaxPoll];
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 1);
  EXPECT_EQ(out[0].wr_id, 0xau);
  EXPECT_EQ(out[0].status, CompletionStatus::kOk);
  EXPECT_EQ(out[0].device_status, static_cast<std::uint32_t>(IBV_WC_SUCCESS));
  EXPECT_EQ(h.qp.sq_ci, 3u) << "past the 3 BBs of the inline WQE";
  nic_write(c, 1, req(0x1234ab, 4));  // covers the unsignaled WQE at 3
  nic_write(c, 2, req(0x1234ab, 5, 4096, MLX5_OPCODE_RDMA_READ));
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 2);
  EXPECT_EQ(out[0].wr_id, 0xcu);
  EXPECT_EQ(out[1].wr_id, 0xdu);
  EXPECT_EQ(out[1].byte_len, 4096u) << "a READ's byte count";
  EXPECT_EQ(h.qp.sq_ci, 6u);
  // All six BBs are free again: eight one-BB WQEs fit, the ninth does not.
  for (std::uint64_t i = 0; i < 9; ++i) B::stage_send_st(h.qp, 0x100 + i, Segment{kGatherAddr, 8, kLkey}, 0);
  EXPECT_EQ(h.qp.sq_pi, 14u);
  EXPECT_EQ(B::flush_st(h.qp).send_unposted, 1u);
}

// The WQE counter is 16 bits: a WQE staged at producer index 0x10000 completes with wqe_counter 0, and the
// SQ's consumer index wraps with it.
TEST(Mlx5Cqe, ReqWqeCounterWrapped16Bits) {
  HostCq c(4, 1);
  QpShape s;
  s.sq_bbs = 8;
  HostQp h(s, &c);
  h.start_sq_at(0xfffe);
  std::vector<std::uint8_t> payload(45, 0x17);
  B::stage_send_st(h.qp, 0xe1, Segment{addr_of(payload.data()), 45, kLkey},
                   kSendInline | kSendSignaled);                                // 2 BBs
  B::stage_send_st(h.qp, 0xe2, Segment{kGatherAddr, 8, kLkey}, kSendSignaled);  // pi 0x10000
  B::flush_st(h.qp);
  EXPECT_EQ(be16_at(h.bb(0) + 1), 0x0000) << "the WQE's own index";
  Completion out[B::kMaxPoll];
  nic_write(c, 0, req(0x1234ab, 0xfffe));
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 1);
  EXPECT_EQ(out[0].wr_id, 0xe1u);
  EXPECT_EQ(h.qp.sq_ci, 0x0000u) << "0xfffe + 2 BBs";
  nic_write(c, 1, req(0x1234ab, 0x0000));
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 1);
  EXPECT_EQ(out[0].wr_id, 0xe2u);
  EXPECT_EQ(h.qp.sq_ci, 0x0001u);
  for (std::uint64_t i = 0; i < 9; ++i) B::stage_send_st(h.qp, i, Segment{kGatherAddr, 8, kLkey}, 0);
  EXPECT_EQ(B::flush_st(h.qp).send_unposted, 1u) << "exactly the SQ's 8 BBs were free";
}

// A small NIC model on the SQ: after each flush it reads the WQEs between its own index and the send
// record, checks each is at the index it names, and completes the signaled ones. Turns of mixed sizes,
// every fifth ending with an unsignaled WQE (its BBs stay held until the next turn's first WQE, always
// signaled, completes: a core that left the SQ full of unsignaled WQEs would never see it drain) and some
// overrunning the ring, for more than 2^16 BBs: every completion names its wr_id and no drop leaves a hole.
TEST(Mlx5Cqe, SqLapsWithAModelNic) {
  HostCq c(4, 1);
  QpShape s;
  s.sq_bbs = 8;
  HostQp h(s, &c);
  std::vector<std::uint8_t> payload(109, 0x66);
  std::uint32_t nic_pi = 0, cqe_n = 0;
  std::uint64_t next_wr = 1, drops = 0, completions = 0;
  Completion out[B::kMaxPoll];
  for (std::uint32_t turn = 0; nic_pi < 0x30000; ++turn) {
    ASSERT_LT(turn, 1000000u) << "the SQ stopped draining";
    std::vector<std::uint64_t> staged;  // the signaled ones, in order
    const std::uint32_t wqes = 1 + turn % 4;
    for (std::uint32_t i = 0; i < wqes; ++i) {
      const bool last = i + 1 == wqes;
      const unsigned sig = last && turn % 5 == 0 ? 0 : kSendSignaled;
      const std::uint32_t len = (turn + i) % 3 == 0 ? 8 : (turn + i) % 3 == 1 ? 45 : 109;  // 1, 2, 3 BBs
      const unsigned inl = len == 8 ? 0 : kSendInline;
      B::stage_send_st(h.qp, next_wr, Segment{len == 8 ? kGatherAddr : addr_of(payload.data()), len, kLkey},
                       sig | inl);
      staged.push_back(sig != 0 ? next_wr : 0);
      ++next_wr;
    }
    const FlushResult r = B::flush_st(h.qp);
    drops += r.send_unposted;
    staged.resize(staged.size() - r.send_unposted);
    ASSERT_EQ(h.snd_record(), h.qp.sq_pi & 0xffff);
    std::size_t k = 0;
    std::vector<std::uint64_t> expect;
    while ((nic_pi & 0xffff) != h.snd_record()) {
      const std::uint8_t* w = h.bb(nic_pi);
      ASSERT_EQ(be16_at(w + 1), nic_pi & 0xffff) << "turn " << turn;
      ASSERT_EQ(be32_at(w + 4) >> 8, 0x1234abu);
      const std::uint32_t bbs = (w[7] + 3u) / 4;
      if ((w[11] & MLX5_WQE_CTRL_CQ_UPDATE) != 0) {
        nic_write(c, cqe_n++, req(0x1234ab, static_cast<std::uint16_t>(nic_pi)));
        expect.push_back(staged.at(k));
      }
      ++k;
      nic_pi += bbs;
    }
    ASSERT_EQ(k, staged.size()) << "the NIC saw every WQE written, no more";
    std::size_t got = 0;
    while (got < expect.size()) {
      const int n = B::poll_st(c.cq, out, B::kMaxPoll);
      ASSERT_GT(n, 0);
      for (int j = 0; j < n; ++j) ASSERT_EQ(out[j].wr_id, expect[got + j]);
      got += static_cast<std::size_t>(n);
      completions += static_cast<std::size_t>(n);
    }
    if (!staged.empty() && staged.back() != 0) {  // the newest WQE was signaled: it freed everything
      ASSERT_EQ(h.qp.sq_ci, static_cast<std::uint16_t>(nic_pi));
    }
  }
  EXPECT_GT(drops, 0u) << "the turns never overran the ring: the test lost its point";
  EXPECT_GT(completions, 10000u);
}

// ---------------------------------------------------------------------------------------------------------
// Responder completions ([resp]).

TEST(Mlx5Cqe, ResponderCompletionsInOrderWithByteLen) {
  HostCq c(16, 1);
  HostQp h({}, &c);
  h.start_rq_at(14);  // wraps the RQ's wrid table
  stage_receives(h, 4, 0x900);
  const std::uint8_t ops[4] = {MLX5_CQE_RESP_SEND, MLX5_CQE_RESP_SEND_IMM, MLX5_CQE_RESP_WR_IMM,
                               MLX5_CQE_RESP_SEND_INV};
  for (std::uint32_t i = 0; i < 4; ++i) {
    Cqe e = resp(0x1234ab, static_cast<std::uint16_t>(14 + i), 1000 + i);
    e.opcode = ops[i];
    nic_write(c, i, e);
  }
  Completion out[B::kMaxPoll];
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 4);
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i].wr_id, 0x900u + i);
    EXPECT_EQ(out[i].byte_len, 1000u + i);
    EXPECT_EQ(out[i].status, CompletionStatus::kOk);
    EXPECT_EQ(out[i].device_status, static_cast<std::uint32_t>(IBV_WC_SUCCESS));
  }
  EXPECT_EQ(h.qp.rq_tail, 18u);
  EXPECT_EQ(c.cq.stats.inline_scatter, 0u);
}

// Scatter-to-CQE: a receive of at most 32 bytes arrives in the CQE itself; the backend puts those bytes
// into the buffer of the receive WQE, exactly byte_len of them.
class InlineScatter : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(InlineScatter, CopiesByteLenBytesIntoTheReceiveBuffer) {
  const std::uint32_t len = GetParam();
  HostCq c(8, 1);
  QpShape s;
  s.rq_stride_shift = 5;
  HostQp h(s, &c);
  auto buf = poisoned(64);
  auto other = poisoned(64);
  B::stage_recv_st(h.qp, 1, Segment{addr_of(buf.get()), 64, kLkey});
  B::stage_recv_st(h.qp, 2, Segment{addr_of(other.get()), 64, kLkey});
  B::flush_st(h.qp);
  std::uint8_t data[32];
  for (std::uint32_t i = 0; i < 32; ++i) data[i] = static_cast<std::uint8_t>(0xa0 + i);
  Cqe e = resp(0x1234ab, 0, len);
  e.op_own_flags = MLX5_INLINE_SCATTER_32;
  e.scatter = data;
  e.scatter_len = len;
  nic_write(c, 0, e);
  nic_write(c, 1, resp(0x1234ab, 1, 20));  // a plain receive: its bytes are already in its buffer
  Completion out[B::kMaxPoll];
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 2);
  EXPECT_EQ(out[0].wr_id, 1u);
  EXPECT_EQ(out[0].byte_len, len);
  EXPECT_EQ(std::memcmp(buf.get(), data, len), 0);
  EXPECT_TRUE(all_poison(buf.get() + len, 64 - len)) << "copied past byte_len";
  EXPECT_TRUE(all_poison(other.get(), 64)) << "a receive without the flag was written";
  EXPECT_EQ(c.cq.stats.inline_scatter, 1u);
}

INSTANTIATE_TEST_SUITE_P(Lengths, InlineScatter, ::testing::Values(1u, 5u, 20u, 32u));

// Not a case the NIC produces (it reports a length error instead): the copy still never goes past the
// receive buffer.
TEST(Mlx5Cqe, InlineScatterNeverWritesPastTheReceiveBuffer) {
  HostCq c(8, 1);
  HostQp h({}, &c);
  auto buf = poisoned(64);
  B::stage_recv_st(h.qp, 1, Segment{addr_of(buf.get()), 8, kLkey});
  B::flush_st(h.qp);
  std::uint8_t data[32];
  std::memset(data, 0x11, sizeof(data));
  Cqe e = resp(0x1234ab, 0, 20);
  e.op_own_flags = MLX5_INLINE_SCATTER_32;
  e.scatter = data;
  e.scatter_len = 20;
  nic_write(c, 0, e);
  Completion out[B::kMaxPoll];
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 1);
  EXPECT_EQ(std::memcmp(buf.get(), data, 8), 0);
  EXPECT_TRUE(all_poison(buf.get() + 8, 56));
}

// Nor past the CQE's 32 data bytes (the rest of the entry is the CQE's own fields), whatever byte_cnt says.
TEST(Mlx5Cqe, InlineScatterNeverCopiesMoreThan32Bytes) {
  HostCq c(8, 1);
  HostQp h({}, &c);
  auto buf = poisoned(64);
  B::stage_recv_st(h.qp, 1, Segment{addr_of(buf.get()), 64, kLkey});
  B::flush_st(h.qp);
  std::uint8_t data[32];
  std::memset(data, 0x22, sizeof(data));
  Cqe e = resp(0x1234ab, 0, 40);
  e.op_own_flags = MLX5_INLINE_SCATTER_32;
  e.scatter = data;
  e.scatter_len = 32;
  nic_write(c, 0, e);
  Completion out[B::kMaxPoll];
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 1);
  EXPECT_EQ(std::memcmp(buf.get(), data, 32), 0);
  EXPECT_TRUE(all_poison(buf.get() + 32, 32));
}

// ---------------------------------------------------------------------------------------------------------
// Error CQEs ([synd], [req], [resp]).

struct SyndromeCase {
  std::uint8_t syndrome;
  ibv_wc_status status;  // what mlx5_handle_error_cqe returns for it
};
// Every MLX5_CQE_SYNDROME_* of mlx5dv.h, then values it does not name.
constexpr SyndromeCase kSyndromes[] = {
    {MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, IBV_WC_LOC_LEN_ERR},
    {MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, IBV_WC_LOC_QP_OP_ERR},
    {MLX5_CQE_SYNDROME_LOCAL_PROT_ERR, IBV_WC_LOC_PROT_ERR},
    {MLX5_CQE_SYNDROME_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR},
    {MLX5_CQE_SYNDROME_MW_BIND_ERR, IBV_WC_MW_BIND_ERR},
    {MLX5_CQE_SYNDROME_BAD_RESP_ERR, IBV_WC_BAD_RESP_ERR},
    {MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR, IBV_WC_LOC_ACCESS_ERR},
    {MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, IBV_WC_REM_INV_REQ_ERR},
    {MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR},
    {MLX5_CQE_SYNDROME_REMOTE_OP_ERR, IBV_WC_REM_OP_ERR},
    {MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, IBV_WC_RETRY_EXC_ERR},
    {MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR},
    {MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR, IBV_WC_REM_ABORT_ERR},
    {0x00, IBV_WC_GENERAL_ERR},
    {0x03, IBV_WC_GENERAL_ERR},
    {0x07, IBV_WC_GENERAL_ERR},
    {0x21, IBV_WC_GENERAL_ERR},
    {0x93, IBV_WC_GENERAL_ERR},  // MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT is a vendor syndrome, not this byte's
    {0xff, IBV_WC_GENERAL_ERR},
};

TEST(Mlx5Cqe, SyndromeTableIsExhaustive) {
  for (unsigned v = 0; v < 256; ++v) {
    ibv_wc_status want = IBV_WC_GENERAL_ERR;
    for (const auto& c : kSyndromes) {
      if (c.syndrome == v) want = c.status;
    }
    EXPECT_EQ(mlx5_syndrome_status(static_cast<std::uint8_t>(v)), want) << "syndrome " << v;
  }
}

TEST(Mlx5Cqe, RequesterErrorCqeEverySyndrome) {
  for (const auto& sc : kSyndromes) {
    SCOPED_TRACE("syndrome " + std::to_string(sc.syndrome));
    HostCq c(4, 1);
    QpShape s;
    s.sq_bbs = 8;
    HostQp h(s, &c);
    h.start_sq_at(6);
    B::stage_send_st(h.qp, 0x51, Segment{kGatherAddr, 8, kLkey}, 0);              // BB 6, unsignaled
    B::stage_send_st(h.qp, 0x52, Segment{kGatherAddr, 8, kLkey}, kSendSignaled);  // BB 7
    B::flush_st(h.qp);
    Cqe e;
    e.opcode = MLX5_CQE_REQ_ERR;
    e.qpn = 0x1234ab;
    e.wqe_counter = 7;
    e.wqe_opcode = MLX5_OPCODE_SEND;
    e.syndrome = sc.syndrome;
    e.vendor_syndrome = 0x81;
    nic_write(c, 0, e);
    Completion out[B::kMaxPoll];
    ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 1);
    EXPECT_EQ(out[0].wr_id, 0x52u);
    EXPECT_EQ(out[0].device_status, static_cast<std::uint32_t>(sc.status));
    EXPECT_EQ(out[0].status, sc.syndrome == MLX5_CQE_SYNDROME_WR_FLUSH_ERR ? CompletionStatus::kFlushed
                                                                           : CompletionStatus::kError);
    EXPECT_EQ(out[0].byte_len, 0u);
    EXPECT_EQ(h.qp.sq_ci, 8u) << "the failed WQE's BBs are free";
    EXPECT_EQ(c.ci_record(), 1u);
  }
}

TEST(Mlx5Cqe, ResponderErrorCqeEverySyndrome) {
  for (const auto& sc : kSyndromes) {
    SCOPED_TRACE("syndrome " + std::to_string(sc.syndrome));
    HostCq c(4, 1);
    HostQp h({}, &c);
    stage_receives(h, 2, 0x61);
    Cqe e;
    e.opcode = MLX5_CQE_RESP_ERR;
    e.qpn = 0x1234ab;
    e.wqe_counter = 0;
    e.syndrome = sc.syndrome;
    nic_write(c, 0, e);
    e.wqe_counter = 1;
    e.syndrome = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;  // what follows an error on a real QP
    nic_write(c, 1, e);
    Completion out[B::kMaxPoll];
    ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 2);
    EXPECT_EQ(out[0].wr_id, 0x61u);
    EXPECT_EQ(out[0].device_status, static_cast<std::uint32_t>(sc.status));
    EXPECT_EQ(out[0].status, sc.syndrome == MLX5_CQE_SYNDROME_WR_FLUSH_ERR ? CompletionStatus::kFlushed
                                                                           : CompletionStatus::kError);
    EXPECT_EQ(out[0].byte_len, 0u);
    EXPECT_EQ(out[1].wr_id, 0x62u);
    EXPECT_EQ(out[1].status, CompletionStatus::kFlushed);
    EXPECT_EQ(out[1].device_status, static_cast<std::uint32_t>(IBV_WC_WR_FLUSH_ERR));
    EXPECT_EQ(h.qp.rq_tail, 2u);
  }
}

// ---------------------------------------------------------------------------------------------------------
// CQEs the backend cannot place: taken (the consumer index moves past them), counted, not returned.

TEST(Mlx5Cqe, UnknownQpIsTakenCountedAndNotReturned) {
  HostCq c(8, 4);
  HostQp h({}, &c);
  stage_receives(h, 4, 0x71);
  nic_write(c, 0, resp(0x1234ab, 0, 1));
  nic_write(c, 1, resp(0x1234ac, 0, 2));  // a neighbour's number
  nic_write(c, 2, resp(0x1234ab, 1, 3));
  nic_write(c, 3, req(0x000001, 0));
  Completion out[B::kMaxPoll];
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 2);
  EXPECT_EQ(out[0].wr_id, 0x71u);
  EXPECT_EQ(out[1].wr_id, 0x72u);
  EXPECT_EQ(out[1].byte_len, 3u);
  EXPECT_EQ(c.cq.stats.unknown_qp, 2u);
  EXPECT_EQ(c.cq.ci, 4u);
  EXPECT_EQ(c.ci_record(), 4u);
  EXPECT_EQ(h.qp.rq_tail, 2u);
  // A burst of nothing but strangers returns nothing, yet hands the entries back to the NIC.
  nic_write(c, 4, resp(0x999999, 0, 1));
  nic_write(c, 5, req(0x999999, 0));
  EXPECT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 0);
  EXPECT_EQ(c.cq.stats.unknown_qp, 4u);
  EXPECT_EQ(c.ci_record(), 6u);
}

// A destroyed QP leaves its CQ's table: a late CQE naming it is a stranger, not a use after free.
TEST(Mlx5Cqe, DestroyedQpsCqesAreUnknown) {
  HostCq c(8, 4);
  auto gone = std::make_unique<HostQp>(QpShape{.qp_num = 0x000777}, &c);
  HostQp stays({}, &c);
  stage_receives(stays, 1, 5);
  EXPECT_EQ(c.cq.qps.find_st(0x000777), &gone->qp);
  gone.reset();
  EXPECT_EQ(c.cq.qps.find_st(0x000777), nullptr);
  nic_write(c, 0, req(0x000777, 0));
  nic_write(c, 1, resp(0x1234ab, 0, 9));
  Completion out[B::kMaxPoll];
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 1);
  EXPECT_EQ(out[0].wr_id, 5u);
  EXPECT_EQ(c.cq.stats.unknown_qp, 1u);
}

TEST(Mlx5Cqe, UnknownOpcodeIsTakenCountedAndNotReturned) {
  HostCq c(32, 1);
  QpShape s;
  s.sq_bbs = 8;
  HostQp h(s, &c);
  stage_receives(h, 2, 0x81);
  std::uint32_t n = 0;
  nic_write(c, n++, resp(0x1234ab, 0, 1));
  // MLX5_CQE_RESIZE_CQ, NO_PACKET, the unnamed 7..11 and SIG_ERR: nothing this backend asks for.
  const std::uint8_t strange[] = {MLX5_CQE_RESIZE_CQ, MLX5_CQE_NO_PACKET, 7, 8, 9, 10, 11, MLX5_CQE_SIG_ERR};
  for (std::uint8_t op : strange) {
    Cqe e = resp(0x1234ab, 0, 1);
    e.opcode = op;
    nic_write(c, n++, e);
  }
  nic_write(c, n++, resp(0x1234ab, 1, 2));
  Completion out[B::kMaxPoll];
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 2);
  EXPECT_EQ(out[0].wr_id, 0x81u);
  EXPECT_EQ(out[1].wr_id, 0x82u);
  EXPECT_EQ(c.cq.stats.unknown_opcode, 8u);
  EXPECT_EQ(c.cq.stats.unknown_qp, 0u);
  EXPECT_EQ(c.ci_record(), n);
  EXPECT_EQ(h.qp.rq_tail, 2u) << "no receive consumed by a strange CQE";
  EXPECT_EQ(h.qp.sq_ci, 0u);
}

// ---------------------------------------------------------------------------------------------------------
// QPs sharing a CQ, and the QP-number table.

TEST(Mlx5Cqe, TwoQpsOnOneCqAreToldApartByQpNumber) {
  HostCq c(16, 2);
  QpShape sa, sb;
  sa.qp_num = 0x000010;
  sb.qp_num = 0xfe0010;  // the same low bits
  sa.sq_bbs = sb.sq_bbs = 8;
  HostQp a(sa, &c), b(sb, &c);
  stage_receives(a, 2, 0xa00);
  stage_receives(b, 2, 0xb00);
  B::stage_send_st(a.qp, 0xa50, Segment{kGatherAddr, 8, kLkey}, kSendSignaled);
  B::stage_send_st(b.qp, 0xb50, Segment{kGatherAddr, 8, kLkey}, 0);
  B::stage_send_st(b.qp, 0xb51, Segment{kGatherAddr, 8, kLkey}, kSendSignaled);
  B::flush_st(a.qp);
  B::flush_st(b.qp);
  nic_write(c, 0, resp(0xfe0010, 0, 7));
  nic_write(c, 1, resp(0x000010, 0, 8));
  nic_write(c, 2, req(0xfe0010, 1));
  nic_write(c, 3, resp(0xfe0010, 1, 9));
  nic_write(c, 4, req(0x000010, 0));
  nic_write(c, 5, resp(0x000010, 1, 10));
  Completion out[B::kMaxPoll];
  ASSERT_EQ(B::poll_st(c.cq, out, B::kMaxPoll), 6);
  const std::uint64_t want[] = {0xb00, 0xa00, 0xb51, 0xb01, 0xa50, 0xa01};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i].wr_id, want[i]) << i;
  EXPECT_EQ(out[0].byte_len, 7u);
  EXPECT_EQ(out[5].byte_len, 10u);
  EXPECT_EQ(a.qp.rq_tail, 2u);
  EXPECT_EQ(b.qp.rq_tail, 2u);
  EXPECT_EQ(a.qp.sq_ci, 1u);
  EXPECT_EQ(b.qp.sq_ci, 2u);
  EXPECT_EQ(c.cq.stats.unknown_qp, 0u);
}

// The table's own hash (mlx5_datapath.hpp), used only to choose QP numbers whose probe sequences collide;
// the full-table test below does not depend on it.
std::uint32_t home_slot(std::uint32_t qpn, std::uint32_t mask) {
  return (qpn * 2654435761u >> 8) & mask;
}

std::vector<std::unique_ptr<Mlx5Qp>> qps_with_numbers(const std::vector<std::uint32_t>& nums) {
  std::vector<std::unique_ptr<Mlx5Qp>> v;
  for (std::uint32_t n : nums) {
    v.push_back(std::make_unique<Mlx5Qp>());
    v.back()->qp_num = n;
  }
  return v;
}

TEST(Mlx5QpTable, TombstonesKeepCollidingProbeChainsIntact) {
  Mlx5QpTable t(8);  // 16 slots
  std::vector<std::uint32_t> nums;
  for (std::uint32_t q = 1; nums.size() < 5; ++q) {
    if (home_slot(q, 15) == home_slot(1, 15)) nums.push_back(q);
  }
  auto qps = qps_with_numbers(nums);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(t.insert(qps[i].get()));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t.find_st(nums[i]), qps[i].get());
  EXPECT_EQ(t.find_st(nums[3]), nullptr) << "same home slot, not inserted";
  t.erase(qps[1].get());  // the middle of the chain
  EXPECT_EQ(t.find_st(nums[1]), nullptr);
  EXPECT_EQ(t.find_st(nums[2]), qps[2].get()) << "found past the tombstone";
  ASSERT_TRUE(t.insert(qps[3].get()));  // reuses the tombstone
  ASSERT_TRUE(t.insert(qps[4].get()));
  for (int i : {0, 2, 3, 4}) EXPECT_EQ(t.find_st(nums[i]), qps[i].get()) << i;
  t.erase(qps[0].get());
  t.erase(qps[3].get());
  EXPECT_EQ(t.find_st(nums[2]), qps[2].get());
  EXPECT_EQ(t.find_st(nums[4]), qps[4].get());
  EXPECT_EQ(t.find_st(nums[0]), nullptr);
  t.erase(qps[0].get());  // erasing what is not there changes nothing
  EXPECT_EQ(t.find_st(nums[4]), qps[4].get());
}

TEST(Mlx5QpTable, ManyQpsFullTableAndChurn) {
  Mlx5QpTable t(64);  // 128 slots
  std::vector<std::uint32_t> nums;
  for (std::uint32_t i = 0; i < 200; ++i) nums.push_back((i * 0x10101u + 0x42) & 0xffffff);
  auto qps = qps_with_numbers(nums);
  for (int i = 0; i < 128; ++i) ASSERT_TRUE(t.insert(qps[i].get())) << i;
  EXPECT_FALSE(t.insert(qps[128].get())) << "a full table says so";
  for (int i = 0; i < 128; ++i) ASSERT_EQ(t.find_st(nums[i]), qps[i].get()) << i;
  EXPECT_EQ(t.find_st(nums[150]), nullptr) << "a miss in a full table ends";
  for (int i = 0; i < 128; i += 2) t.erase(qps[i].get());
  for (int i = 0; i < 128; ++i) ASSERT_EQ(t.find_st(nums[i]), i % 2 ? qps[i].get() : nullptr) << i;
  for (int i = 128; i < 192; ++i) ASSERT_TRUE(t.insert(qps[i].get())) << i;
  for (int i = 1; i < 128; i += 2) ASSERT_EQ(t.find_st(nums[i]), qps[i].get()) << i;
  for (int i = 128; i < 192; ++i) ASSERT_EQ(t.find_st(nums[i]), qps[i].get()) << i;
  for (int i = 1; i < 128; i += 2) t.erase(qps[i].get());
  for (int i = 128; i < 192; ++i) t.erase(qps[i].get());
  for (int i = 0; i < 200; ++i) ASSERT_EQ(t.find_st(nums[i]), nullptr) << i;
  for (int i = 0; i < 128; ++i) ASSERT_TRUE(t.insert(qps[i].get())) << "tombstones are reusable " << i;
}

}  // namespace
}  // namespace rdmagate::dataplane

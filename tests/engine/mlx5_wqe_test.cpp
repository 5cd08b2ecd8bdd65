// Golden tests of the WQEs and doorbells the mlx5 backend (dataplane/backend/mlx5_datapath.hpp) writes,
// with no NIC: the bytes in the SQ/RQ rings, the doorbell records and the BlueFlame register, field by
// field against mlx5dv.h's layouts and against what rdma-core's mlx5 provider writes for the same work
// request (providers/mlx5/qp.c: _mlx5_post_send, set_data_inl_seg, post_send_db, mlx5_post_recv). The
// expected bytes are stated here independently: by explicit big-endian shifts (mlx5_host_rings.hpp) and by
// mlx5dv.h's own inline setters (mlx5dv_set_ctrl_seg, mlx5dv_set_data_seg) as a second oracle.
//
// Each expectation names the provider rule it comes from, in brackets:
//   [ctrl]    _mlx5_post_send: opmod_idx_opcode = be32((cur_post & 0xffff) << 8 | opcode | opmod << 24),
//             opmod 0; qpn_ds = be32(qp_num << 8 | size) with size in 16-byte units; signature, the stream
//             id and fm_ce_se cleared (`*(uint32_t *)(seg + 8) = 0`) then fm_ce_se = CQ_UPDATE when
//             signaled (no sq_sig_all: selective signaling); imm = send_ieth() = 0 for SEND / READ / WRITE.
//   [bbs]     cur_post += DIV_ROUND_UP(size * 16, MLX5_SEND_WQE_BB); wrid[idx] = wr_id at the WQE's first BB.
//   [inl]     set_data_inl_seg: header be32(total | MLX5_INLINE_SEG) right after the control segment, bytes
//             after it, wrapping to mlx5_get_send_wqe(qp, 0) at qend; size = align(total + 4, 16) / 16; no
//             header at all (size 0) when there are no bytes.
//   [sge]     set_data_ptr_seg: be32 byte_count, be32 lkey, be64 addr; SGEs of length 0 are skipped.
//   [raddr]   set_raddr_seg: be64 remote address, be32 rkey, reserved 0, between ctrl and data.
//   [recv]    mlx5_post_recv: one data segment per SGE, then, when the WQE has room for more
//             (j < rq.max_gs), a terminator {byte_count 0, lkey be32(MLX5_INVALID_LKEY), addr 0};
//             wrid[head & (wqe_cnt - 1)] = wr_id; db[MLX5_RCV_DBR] = be32(head & 0xffff).
//   [umr]     set_bind_wr (IBV_WR_BIND_MW, and IBV_WR_LOCAL_INV as a bind of length 0), opcode UMR:
//             ctrl.imm = be32(the window's current key: mw->rkey, or invalidate_rkey); then the UMR control
//             segment (48 bytes: flags INLINE | TRNSLATION_OFFSET | CHECK_FREE for a bind, CHECK_QPN for an
//             invalidation of a type-2 window; klm_octowords be16(ALIGN(entries, 3) / 2): 4 for one entry,
//             0 for none; mkey_mask FREE | MKEY | QPN, and for a bind LEN | START_ADDR | the four access
//             bits); the mkey context (64: free, access_flags, qpn_mkey = be32(qpn << 8 | new key & 0xff) or
//             be32(0xffffff00) when freeing, start_addr, len); for a bind one KLM entry in a 64-byte segment
//             (be32 byte_count, be32 the registration's lkey, be64 address, the rest zero). ds 12 or 8.
//   [fence]   next_fence = MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE after a bind or an invalidation: the
//             next WQE's fm_ce_se carries it, whatever that WQE is.
//   [db]      post_send_db: db[MLX5_SND_DBR] = be32(cur_post & 0xffff), then the first 8 bytes of the
//             newest control segment to bf->reg + bf->offset (mmio_write64_be), then offset ^= buf_size.

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "tests/engine/mlx5_host_rings.hpp"

namespace rdmagate::dataplane {
namespace {

using B = Mlx5Backend;
using namespace mlx5_test;

constexpr std::uint32_t kLkey = 0x11223344;
constexpr std::uint32_t kRkey = 0x55667788;
constexpr std::uint64_t kRemote = 0x0102030405060708ull;
constexpr std::uint64_t kGatherAddr = 0x8877665544332211ull;  // never dereferenced for a gathered segment
constexpr std::uint8_t kSignaledBits = 0x08;                  // MLX5_WQE_CTRL_CQ_UPDATE, 2 << 2 in mlx5dv.h

static_assert(MLX5_WQE_CTRL_CQ_UPDATE == kSignaledBits);
static_assert(MLX5_OPCODE_SEND == 0x0a && MLX5_OPCODE_RDMA_WRITE == 0x08 && MLX5_OPCODE_RDMA_READ == 0x10);
static_assert(MLX5_INLINE_SEG == 0x80000000u && MLX5_INVALID_LKEY == 0x100);

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + 7 * i + (i >> 8));
  return v;
}

// The second oracle: the control segment mlx5dv.h's own setter builds for the same fields.
std::array<std::uint8_t, 16> ctrl_image(std::uint16_t pi, std::uint8_t opcode, std::uint32_t qpn,
                                        std::uint8_t fm_ce_se, std::uint8_t ds) {
  mlx5_wqe_ctrl_seg c;
  std::memset(&c, 0, sizeof(c));
  mlx5dv_set_ctrl_seg(&c, pi, opcode, /*opmod=*/0, qpn, fm_ce_se, ds, /*signature=*/0, /*imm=*/0);
  std::array<std::uint8_t, 16> out;
  std::memcpy(out.data(), &c, sizeof(c));
  return out;
}

std::array<std::uint8_t, 16> data_image(std::uint32_t len, std::uint32_t lkey, std::uint64_t addr) {
  mlx5_wqe_data_seg d;
  mlx5dv_set_data_seg(&d, len, lkey, addr);
  std::array<std::uint8_t, 16> out;
  std::memcpy(out.data(), &d, sizeof(d));
  return out;
}

// [ctrl], field by field and then as a whole against mlx5dv_set_ctrl_seg.
void expect_ctrl(const std::uint8_t* w, std::uint32_t pi, std::uint8_t opcode, std::uint32_t qpn,
                 std::uint32_t ds, bool signaled) {
  EXPECT_EQ(w[0], 0) << "opmod";
  EXPECT_EQ(be16_at(w + 1), pi & 0xffff) << "WQE index";
  EXPECT_EQ(w[3], opcode) << "opcode";
  EXPECT_EQ(be32_at(w + 4) >> 8, qpn) << "QP number";
  EXPECT_EQ(w[7], ds) << "DS count (the high 2 bits of the byte are reserved, so the whole byte)";
  EXPECT_EQ(w[8], 0) << "signature";
  EXPECT_EQ(be16_at(w + 9), 0) << "dci_stream_channel_id";
  EXPECT_EQ(w[11], signaled ? kSignaledBits : 0) << "fm_ce_se: no fence, no solicited event";
  EXPECT_EQ(be32_at(w + 12), 0u) << "imm";
  const auto img = ctrl_image(static_cast<std::uint16_t>(pi), opcode, qpn, signaled ? kSignaledBits : 0,
                              static_cast<std::uint8_t>(ds));
  EXPECT_EQ(std::memcmp(w, img.data(), img.size()), 0) << "mlx5dv_set_ctrl_seg image";
}

void expect_data(const std::uint8_t* d, std::uint32_t len, std::uint32_t lkey, std::uint64_t addr) {
  EXPECT_EQ(be32_at(d), len) << "byte_count";
  EXPECT_EQ(be32_at(d + 4), lkey) << "lkey";
  EXPECT_EQ(be64_at(d + 8), addr) << "addr";
  const auto img = data_image(len, lkey, addr);
  EXPECT_EQ(std::memcmp(d, img.data(), img.size()), 0) << "mlx5dv_set_data_seg image";
}

// Every BB of the SQ outside [first, first + n) still holds the poison.
void expect_other_bbs_untouched(HostQp& h, std::uint32_t first, std::uint32_t n) {
  for (std::uint32_t i = 0; i < h.qp.sq_wqe_cnt; ++i) {
    const std::uint32_t rel = (i - first) & (h.qp.sq_wqe_cnt - 1);
    if (rel < n) continue;
    EXPECT_TRUE(all_poison(h.bb(i), kBb)) << "BB " << i << " written";
  }
}

// ---------------------------------------------------------------------------------------------------------
// Inline SEND: the sizes around the basic-block boundaries. A WQE holds ctrl (16) + header (4) + n bytes,
// so 44 bytes fill the first BB exactly, 45 spill into the second, 108 fill two, 109 spill into a third,
// and 236 (the QP's max_inline here) fill four.

struct InlineCase {
  std::uint32_t len;
  std::uint32_t ds;   // [inl]: 1 + align(len + 4, 16) / 16
  std::uint32_t bbs;  // [bbs]
};
void PrintTo(const InlineCase& c, std::ostream* os) {
  *os << c.len << " bytes";
}

class InlineSend : public ::testing::TestWithParam<InlineCase> {};

TEST_P(InlineSend, CtrlHeaderAndBytesFieldByField) {
  const InlineCase c = GetParam();
  HostQp h;
  constexpr std::uint32_t kStart = 5;  // not 0, so the WQE index field is seen carrying a value
  h.start_sq_at(kStart);
  const auto payload = pattern(c.len, 0x31);
  const auto again = pattern(c.len, 0x90);

  B::stage_send_st(h.qp, 0xabc0001, Segment{addr_of(payload.data()), c.len, kLkey},
                   kSendInline | kSendSignaled);
  B::stage_send_st(h.qp, 0xabc0002, Segment{addr_of(again.data()), c.len, kLkey}, kSendInline);

  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(k == 0 ? "signaled" : "unsignaled");
    const std::uint32_t pi = kStart + k * c.bbs;
    const std::uint8_t* w = h.bb(pi);
    expect_ctrl(w, pi, MLX5_OPCODE_SEND, 0x1234ab, c.ds, k == 0);
    EXPECT_EQ(be32_at(w + 16), c.len | 0x80000000u) << "[inl] header: byte count | MLX5_INLINE_SEG";
    EXPECT_EQ(std::memcmp(w + 20, (k == 0 ? payload : again).data(), c.len), 0) << "[inl] bytes";
    // Past the bytes nothing is written: neither the lkey nor the address goes to the NIC inline, and the
    // pad up to the 16-byte unit is not read by the NIC (the header's count bounds it).
    EXPECT_TRUE(all_poison(w + 20 + c.len, c.bbs * kBb - 20 - c.len)) << "written past the inline bytes";
    EXPECT_EQ(h.qp.sq_wrid[pi & 15], 0xabc0001u + k);
    EXPECT_EQ(h.qp.sq_bbs[pi & 15], c.bbs);
  }
  EXPECT_EQ(h.qp.sq_pi, kStart + 2 * c.bbs) << "[bbs]";
  expect_other_bbs_untouched(h, kStart, 2 * c.bbs);
  EXPECT_TRUE(h.records_untouched()) << "staging alone rings nothing";
}

INSTANTIATE_TEST_SUITE_P(Sizes, InlineSend,
                         ::testing::Values(InlineCase{1, 2, 1}, InlineCase{12, 2, 1}, InlineCase{44, 4, 1},
                                           InlineCase{45, 5, 2}, InlineCase{108, 8, 2}, InlineCase{109, 9, 3},
                                           InlineCase{236, 16, 4}),
                         [](const ::testing::TestParamInfo<InlineCase>& i) {
                           return "len" + std::to_string(i.param.len);
                         });

// [inl]: inline with no bytes writes no header; the WQE is the control segment alone, ds 1.
TEST(Mlx5Wqe, InlineSendOfZeroBytesIsCtrlOnly) {
  HostQp h;
  const std::uint8_t none = 0;
  B::stage_send_st(h.qp, 77, Segment{addr_of(&none), 0, kLkey}, kSendInline | kSendSignaled);
  expect_ctrl(h.bb(0), 0, MLX5_OPCODE_SEND, 0x1234ab, 1, true);
  EXPECT_TRUE(all_poison(h.bb(0) + 16, kBb - 16));
  EXPECT_EQ(h.qp.sq_pi, 1u);
  EXPECT_EQ(h.qp.sq_wrid[0], 77u);
  EXPECT_EQ(h.qp.sq_bbs[0], 1u);
  expect_other_bbs_untouched(h, 0, 1);
}

// The largest inline the QP was granted, at the start of an empty SQ: exactly 4 BBs, nothing past them.
TEST(Mlx5Wqe, MaxInlineFillsFourBasicBlocks) {
  QpShape s;
  s.max_inline = 236;
  HostQp h(s);
  const auto payload = pattern(236, 0x02);
  B::stage_send_st(h.qp, 5, Segment{addr_of(payload.data()), 236, kLkey}, kSendInline);
  expect_ctrl(h.bb(0), 0, MLX5_OPCODE_SEND, 0x1234ab, 16, false);
  EXPECT_EQ(be32_at(h.bb(0) + 16), 236u | MLX5_INLINE_SEG);
  EXPECT_EQ(std::memcmp(h.bb(0) + 20, payload.data(), 236), 0);
  EXPECT_EQ(h.qp.sq_pi, 4u);
  expect_other_bbs_untouched(h, 0, 4);
}

// Inline asked for but longer than max_inline: rdma-core refuses the WR (set_data_inl_seg returns ENOMEM
// when inl > max_inline_data); the backend instead sends it gathered from its registered buffer, [sge].
TEST(Mlx5Wqe, InlineLongerThanMaxInlineFallsBackToGather) {
  HostQp h;
  const auto payload = pattern(237, 0x44);
  B::stage_send_st(h.qp, 9, Segment{addr_of(payload.data()), 237, kLkey}, kSendInline | kSendSignaled);
  expect_ctrl(h.bb(0), 0, MLX5_OPCODE_SEND, 0x1234ab, 2, true);
  expect_data(h.bb(0) + 16, 237, kLkey, addr_of(payload.data()));
  EXPECT_TRUE(all_poison(h.bb(0) + 32, 32));
  EXPECT_EQ(h.qp.sq_pi, 1u);
}

// [ctrl] + [sge]: a gathered SEND is ctrl | data, ds 2, one BB.
TEST(Mlx5Wqe, GatheredSendSignaledAndUnsignaled) {
  HostQp h;
  h.start_sq_at(14);  // the second one lands in the SQ's last BB (index 15)
  B::stage_send_st(h.qp, 0x1111, Segment{kGatherAddr, 4096, kLkey}, kSendSignaled);
  B::stage_send_st(h.qp, 0x2222, Segment{kGatherAddr + 4096, 1, kLkey + 1}, 0);
  expect_ctrl(h.bb(14), 14, MLX5_OPCODE_SEND, 0x1234ab, 2, true);
  expect_data(h.bb(14) + 16, 4096, kLkey, kGatherAddr);
  EXPECT_TRUE(all_poison(h.bb(14) + 32, 32));
  expect_ctrl(h.bb(15), 15, MLX5_OPCODE_SEND, 0x1234ab, 2, false);
  expect_data(h.bb(15) + 16, 1, kLkey + 1, kGatherAddr + 4096);
  EXPECT_TRUE(all_poison(h.bb(15) + 32, 32));
  EXPECT_EQ(h.qp.sq_wrid[14], 0x1111u);
  EXPECT_EQ(h.qp.sq_wrid[15], 0x2222u);
  EXPECT_EQ(h.qp.sq_pi, 16u);
  expect_other_bbs_untouched(h, 14, 2);
}

// The drain marker: a SEND of length 0 without inline. [sge] skips the zero-length SGE, so rdma-core's WQE
// is the control segment alone, ds 1 (never a data segment with byte_count 0).
TEST(Mlx5Wqe, ZeroLengthSendIsCtrlOnly) {
  HostQp h;
  B::stage_send_st(h.qp, 0xd1a1, Segment{kGatherAddr, 0, kLkey}, kSendSignaled);
  expect_ctrl(h.bb(0), 0, MLX5_OPCODE_SEND, 0x1234ab, 1, true);
  EXPECT_TRUE(all_poison(h.bb(0) + 16, kBb - 16));
  EXPECT_EQ(h.qp.sq_pi, 1u);
  EXPECT_EQ(h.qp.sq_wrid[0], 0xd1a1u);
}

// ---------------------------------------------------------------------------------------------------------
// RDMA READ and WRITE: ctrl | raddr | data, ds 3 ([ctrl], [raddr], [sge]).

class Rdma : public ::testing::TestWithParam<RdmaOp> {
 protected:
  std::uint8_t opcode() const {
    return GetParam() == RdmaOp::kRead ? MLX5_OPCODE_RDMA_READ : MLX5_OPCODE_RDMA_WRITE;
  }
};

void expect_raddr(const std::uint8_t* r, std::uint64_t raddr, std::uint32_t rkey) {
  EXPECT_EQ(be64_at(r), raddr) << "remote address";
  EXPECT_EQ(be32_at(r + 8), rkey) << "rkey";
  EXPECT_EQ(be32_at(r + 12), 0u) << "reserved";
}

TEST_P(Rdma, SingleFragment) {
  HostQp h;
  h.start_sq_at(3);
  // kSendInline means nothing to READ/WRITE here (the backend never inlines them); only the signal counts.
  B::stage_rdma_st(h.qp, GetParam(), 0x5151, Segment{kGatherAddr, 65536, kLkey}, kRemote, kRkey,
                   kSendSignaled | kSendInline);
  const std::uint8_t* w = h.bb(3);
  expect_ctrl(w, 3, opcode(), 0x1234ab, 3, true);
  expect_raddr(w + 16, kRemote, kRkey);
  expect_data(w + 32, 65536, kLkey, kGatherAddr);
  EXPECT_TRUE(all_poison(w + 48, 16));
  EXPECT_EQ(h.qp.sq_pi, 4u);
  EXPECT_EQ(h.qp.sq_wrid[3], 0x5151u);
  EXPECT_EQ(h.qp.sq_bbs[3], 1u);
  expect_other_bbs_untouched(h, 3, 1);
}

// [sge] skips a zero-length SGE: ctrl | raddr, ds 2.
TEST_P(Rdma, ZeroLengthHasNoDataSegment) {
  HostQp h;
  B::stage_rdma_st(h.qp, GetParam(), 1, Segment{kGatherAddr, 0, kLkey}, kRemote, kRkey, 0);
  expect_ctrl(h.bb(0), 0, opcode(), 0x1234ab, 2, false);
  expect_raddr(h.bb(0) + 16, kRemote, kRkey);
  EXPECT_TRUE(all_poison(h.bb(0) + 32, 32));
}

// One object chunked into 16 fragments, the last one signaled (selective signaling): 16 one-BB WQEs that
// fill a 16-BB SQ exactly, one doorbell carrying the 16th.
TEST_P(Rdma, SixteenFragmentsFillTheSqBehindOneDoorbell) {
  HostQp h;
  for (std::uint32_t i = 0; i < 16; ++i) {
    B::stage_rdma_st(h.qp, GetParam(), 1000 + i, Segment{kGatherAddr + i * 4096ull, 4096, kLkey},
                     kRemote + i * 4096ull, kRkey, i == 15 ? kSendSignaled : 0);
  }
  for (std::uint32_t i = 0; i < 16; ++i) {
    SCOPED_TRACE("fragment " + std::to_string(i));
    const std::uint8_t* w = h.bb(i);
    expect_ctrl(w, i, opcode(), 0x1234ab, 3, i == 15);
    expect_raddr(w + 16, kRemote + i * 4096ull, kRkey);
    expect_data(w + 32, 4096, kLkey, kGatherAddr + i * 4096ull);
    EXPECT_TRUE(all_poison(w + 48, 16));
    EXPECT_EQ(h.qp.sq_wrid[i], 1000u + i);
    EXPECT_EQ(h.qp.sq_bbs[i], 1u);
  }
  EXPECT_EQ(h.qp.sq_pi, 16u);
  const FlushResult r = B::flush_st(h.qp);
  EXPECT_EQ(r.send_unposted, 0u);
  EXPECT_EQ(h.snd_record(), 16u) << "[db]";
  EXPECT_EQ(std::memcmp(h.bf(), h.bb(15), 8), 0) << "[db] the newest WQE's first 8 bytes";
  EXPECT_EQ(h.qp.doorbells, 1u);
}

INSTANTIATE_TEST_SUITE_P(ReadWrite, Rdma, ::testing::Values(RdmaOp::kRead, RdmaOp::kWrite),
                         [](const ::testing::TestParamInfo<RdmaOp>& i) {
                           return i.param == RdmaOp::kRead ? "Read" : "Write";
                         });

// ---------------------------------------------------------------------------------------------------------
// Type-2 memory windows: bind and invalidation as UMR WQEs ([umr], [fence]).

static_assert(MLX5_OPCODE_UMR == 0x25 && MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE == 0x20);
static_assert(sizeof(mlx5_wqe_umr_ctrl_seg) == 48 && offsetof(mlx5_wqe_umr_ctrl_seg, klm_octowords) == 4 &&
              offsetof(mlx5_wqe_umr_ctrl_seg, mkey_mask) == 8);
static_assert(sizeof(mlx5_wqe_mkey_context_seg) == 64 &&
              offsetof(mlx5_wqe_mkey_context_seg, access_flags) == 2 &&
              offsetof(mlx5_wqe_mkey_context_seg, qpn_mkey) == 4 &&
              offsetof(mlx5_wqe_mkey_context_seg, start_addr) == 16 &&
              offsetof(mlx5_wqe_mkey_context_seg, len) == 24);
static_assert(sizeof(mlx5_wqe_umr_klm_seg) == 16);

constexpr std::uint8_t kSmallFence = 0x20;
constexpr std::uint32_t kWindowKey0 = 0x00abcd12, kWindowKey1 = 0x00beeffe;

// A QP with two windows whose keys are kWindowKey0 and kWindowKey1 (as ibv_alloc_mw handed them out).
struct WindowQp {
  explicit WindowQp(std::uint32_t start = 0) {
    h.qp.window_rkey = {kWindowKey0, kWindowKey1};
    h.start_sq_at(start);
  }
  HostQp h;
  ibv_mr mr = [] {
    ibv_mr m{};
    m.lkey = kLkey;
    return m;
  }();
};

// [ctrl] of a UMR: as any WQE's, with the window's key as immediate and the fence bits given.
void expect_umr_ctrl(const std::uint8_t* w, std::uint32_t pi, std::uint32_t ds, std::uint8_t fm_ce_se,
                     std::uint32_t key) {
  EXPECT_EQ(w[0], 0) << "opmod";
  EXPECT_EQ(be16_at(w + 1), pi & 0xffff) << "WQE index";
  EXPECT_EQ(w[3], 0x25) << "opcode UMR";
  EXPECT_EQ(be32_at(w + 4), 0x1234abu << 8 | ds) << "QP number and DS count";
  EXPECT_EQ(w[8], 0) << "signature";
  EXPECT_EQ(be16_at(w + 9), 0) << "dci_stream_channel_id";
  EXPECT_EQ(w[11], fm_ce_se) << "fm_ce_se";
  EXPECT_EQ(be32_at(w + 12), key) << "imm: the key the window holds now";
}

class WindowBindWqe : public ::testing::TestWithParam<bool> {};  // remote write (a GET's) or read (a PUT's)

TEST_P(WindowBindWqe, FieldByField) {
  const bool write = GetParam();
  WindowQp q(5);
  const std::uint32_t key =
      B::stage_bind_window_st(q.h.qp, 1, 0xb1d, WindowBind{kGatherAddr, 8192, &q.mr, write});
  EXPECT_EQ(key, 0x00beefffu) << "ibv_inc_rkey: the key byte moves on, the index stays";
  EXPECT_EQ(q.h.qp.window_rkey[1], key);
  EXPECT_EQ(q.h.qp.window_rkey[0], kWindowKey0);
  const std::uint8_t* w = q.h.bb(5);
  expect_umr_ctrl(w, 5, 12, 0, kWindowKey1);
  // UMR control segment.
  EXPECT_EQ(w[16], 0xb0) << "INLINE (0x80) | CHECK_FREE (0x20) | TRNSLATION_OFFSET (0x10)";
  EXPECT_TRUE(all_value(w + 17, 3, 0));
  EXPECT_EQ(be16_at(w + 20), 4) << "klm_octowords: one KLM entry";
  EXPECT_EQ(be16_at(w + 22), 0) << "translation_offset";
  EXPECT_EQ(be64_at(w + 24), 0x203c6041ull)
      << "mkey_mask: FREE 1<<29 | QPN 1<<14 | MKEY 1<<13 | LEN 1<<0 | START_ADDR 1<<6 | access 1<<18..21";
  EXPECT_TRUE(all_value(w + 32, 32, 0)) << "rsvd1";
  // Mkey context.
  const std::uint8_t* m = q.h.bb(6);
  EXPECT_EQ(m[0], 0) << "free: 0, the window becomes valid";
  EXPECT_EQ(m[2], write ? 0x28 : 0x10) << "access: LOCAL_WRITE 0x08 | REMOTE_WRITE 0x20, or REMOTE_READ 0x10";
  EXPECT_EQ(be32_at(m + 4), 0x1234abu << 8 | 0xff) << "qpn_mkey: bound to this QP, the new key byte";
  EXPECT_EQ(be64_at(m + 16), kGatherAddr) << "start_addr (not zero-based)";
  EXPECT_EQ(be64_at(m + 24), 8192u) << "len";
  EXPECT_EQ(m[1], 0);
  EXPECT_EQ(m[3], 0);
  EXPECT_TRUE(all_value(m + 8, 8, 0));
  EXPECT_TRUE(all_value(m + 32, 32, 0));
  // One KLM entry.
  const std::uint8_t* k = q.h.bb(7);
  EXPECT_EQ(be32_at(k), 8192u) << "byte_count";
  EXPECT_EQ(be32_at(k + 4), kLkey) << "mkey: the registration's lkey";
  EXPECT_EQ(be64_at(k + 8), kGatherAddr) << "address";
  EXPECT_TRUE(all_value(k + 16, 48, 0)) << "the rest of the 64-byte segment";

  EXPECT_EQ(q.h.qp.sq_pi, 8u) << "[bbs] 12 ds: 3 BBs";
  EXPECT_EQ(q.h.qp.sq_wrid[5], 0xb1du);
  EXPECT_EQ(q.h.qp.sq_bbs[5], 3u);
  expect_other_bbs_untouched(q.h, 5, 3);
}

INSTANTIATE_TEST_SUITE_P(Access, WindowBindWqe, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Write" : "Read"; });

TEST(Mlx5Wqe, WindowInvalidationFieldByField) {
  WindowQp q(2);
  ASSERT_TRUE(B::stage_invalidate_window_st(q.h.qp, 0, 0x1a7));
  const std::uint8_t* w = q.h.bb(2);
  expect_umr_ctrl(w, 2, 8, kSignaledBits, kWindowKey0);
  EXPECT_EQ(w[16], 0x98) << "INLINE (0x80) | TRNSLATION_OFFSET (0x10) | CHECK_QPN (0x08)";
  EXPECT_TRUE(all_value(w + 17, 3, 0));
  EXPECT_EQ(be16_at(w + 20), 0) << "klm_octowords: no entry";
  EXPECT_EQ(be16_at(w + 22), 0);
  EXPECT_EQ(be64_at(w + 24), 0x20006000ull) << "mkey_mask: FREE | QPN | MKEY";
  EXPECT_TRUE(all_value(w + 32, 32, 0));
  const std::uint8_t* m = q.h.bb(3);
  EXPECT_EQ(m[0], 0x40) << "free: MLX5_WQE_MKEY_CONTEXT_FREE";
  EXPECT_EQ(be32_at(m + 4), 0xffffff00u) << "qpn_mkey of a freed window";
  EXPECT_EQ(m[1] | m[2] | m[3], 0);
  EXPECT_TRUE(all_value(m + 8, 56, 0));
  EXPECT_EQ(q.h.qp.window_rkey[0], kWindowKey0) << "an invalidation keeps the key; the next bind moves it";
  EXPECT_EQ(q.h.qp.sq_pi, 4u) << "[bbs] 8 ds: 2 BBs";
  EXPECT_EQ(q.h.qp.sq_bbs[2], 2u);
  EXPECT_EQ(q.h.qp.sq_wrid[2], 0x1a7u);
  expect_other_bbs_untouched(q.h, 2, 2);
}

// [fence]: the WQE right after a UMR waits for it (the request's SEND that hands the key out must not run
// before the window holds it); the one after that does not; a UMR after a UMR carries it too.
TEST(Mlx5Wqe, SmallFenceOnTheWqeAfterEachUmr) {
  WindowQp q;
  B::stage_bind_window_st(q.h.qp, 0, 1, WindowBind{kGatherAddr, 64, &q.mr, false});                 // BBs 0-2
  B::stage_send_st(q.h.qp, 2, Segment{kGatherAddr, 64, kLkey}, kSendSignaled);                      // BB 3
  B::stage_send_st(q.h.qp, 3, Segment{kGatherAddr, 64, kLkey}, 0);                                  // BB 4
  ASSERT_TRUE(B::stage_invalidate_window_st(q.h.qp, 0, 4));                                         // BBs 5-6
  B::stage_bind_window_st(q.h.qp, 0, 5, WindowBind{kGatherAddr, 64, &q.mr, true});                  // BBs 7-9
  B::stage_rdma_st(q.h.qp, RdmaOp::kWrite, 6, Segment{kGatherAddr, 64, kLkey}, kRemote, kRkey, 0);  // BB 10
  EXPECT_EQ(q.h.bb(0)[11], 0) << "the first UMR: nothing before it";
  EXPECT_EQ(q.h.bb(3)[11], kSmallFence | kSignaledBits) << "the SEND after the bind";
  EXPECT_EQ(q.h.bb(4)[11], 0) << "the SEND after that";
  EXPECT_EQ(q.h.bb(5)[11], kSignaledBits) << "the invalidation (signaled) after a plain SEND";
  EXPECT_EQ(q.h.bb(7)[11], kSmallFence) << "a bind right after the invalidation";
  EXPECT_EQ(q.h.bb(10)[11], kSmallFence) << "the WRITE after that bind";
  EXPECT_EQ(be32_at(q.h.bb(7) + 12), kWindowKey0 + 1) << "the second bind names the key of the first";
  EXPECT_EQ(q.h.qp.sq_pi, 11u);
  const FlushResult r = B::flush_st(q.h.qp);
  EXPECT_EQ(r.send_unposted, 0u);
  EXPECT_EQ(q.h.snd_record(), 11u) << "[db]";
  EXPECT_EQ(std::memcmp(q.h.bf(), q.h.bb(10), 8), 0) << "[db] the newest WQE's first 8 bytes";
}

// A bind whose last segments run past the SQ's end continues at its start, segment by segment (rdma-core:
// `if (*seg == qend) *seg = mlx5_get_send_wqe(qp, 0)` between them).
TEST(Mlx5Wqe, WindowBindWrapsTheSqEnd) {
  WindowQp q(14);
  const std::uint32_t key = B::stage_bind_window_st(q.h.qp, 0, 7, WindowBind{kGatherAddr, 100, &q.mr, true});
  EXPECT_EQ(key, kWindowKey0 + 1);
  expect_umr_ctrl(q.h.bb(14), 14, 12, 0, kWindowKey0);
  EXPECT_EQ(be32_at(q.h.bb(15) + 4), 0x1234abu << 8 | ((kWindowKey0 + 1) & 0xff)) << "mkey context in BB 15";
  EXPECT_EQ(be64_at(q.h.bb(15) + 24), 100u);
  EXPECT_EQ(be32_at(q.h.bb(0)), 100u) << "the KLM entry at the SQ's start";
  EXPECT_EQ(be64_at(q.h.bb(0) + 8), kGatherAddr);
  EXPECT_EQ(q.h.qp.sq_pi, 17u);
  expect_other_bbs_untouched(q.h, 14, 3);
}

// The key byte wraps from 0xff to 0x00 within the window's index (ibv_inc_rkey).
TEST(Mlx5Wqe, WindowKeyByteWraps) {
  WindowQp q;
  q.h.qp.window_rkey[0] = 0x00abcdff;
  EXPECT_EQ(B::stage_bind_window_st(q.h.qp, 0, 1, WindowBind{kGatherAddr, 1, &q.mr, false}), 0x00abcd00u);
  EXPECT_EQ(be32_at(q.h.bb(1) + 4), 0x1234abu << 8) << "qpn_mkey's key byte 0x00";
}

// What stages nothing: no such window, no registration, a range beyond one KLM entry's 2 GiB. A ring without
// room drops a bind or an invalidation as it drops any send: staged as far as the caller knows (the key comes
// back, so the core's queue accounting holds the entry), never written, reported in the flush's unposted
// tail.
TEST(Mlx5Wqe, WindowWorkThatCannotBeStaged) {
  WindowQp q;
  EXPECT_EQ(B::stage_bind_window_st(q.h.qp, 2, 1, WindowBind{kGatherAddr, 64, &q.mr, false}), 0u);
  EXPECT_FALSE(B::stage_invalidate_window_st(q.h.qp, 2, 1));
  EXPECT_EQ(B::stage_bind_window_st(q.h.qp, 0, 1, WindowBind{kGatherAddr, 64, nullptr, false}), 0u);
  EXPECT_EQ(B::stage_bind_window_st(q.h.qp, 0, 1, WindowBind{kGatherAddr, (1ull << 31) + 1, &q.mr, false}),
            0u);
  EXPECT_EQ(q.h.qp.sq_pi, 0u);
  EXPECT_EQ(q.h.qp.window_rkey[0], kWindowKey0) << "a key moves only with a staged bind";
  expect_other_bbs_untouched(q.h, 0, 0);

  q.h.start_sq_at(0);
  q.h.qp.sq_ci = static_cast<std::uint16_t>(-14);  // 14 of 16 BBs still the NIC's: a bind (3) does not fit
  EXPECT_EQ(B::stage_bind_window_st(q.h.qp, 0, 1, WindowBind{kGatherAddr, 64, &q.mr, false}),
            kWindowKey0 + 1);
  EXPECT_EQ(q.h.qp.window_rkey[0], kWindowKey0) << "never bound: the window keeps its key";
  EXPECT_TRUE(B::stage_invalidate_window_st(q.h.qp, 0, 2)) << "dropped too: nothing after a dropped WQE goes";
  EXPECT_EQ(q.h.qp.sq_pi, 0u);
  expect_other_bbs_untouched(q.h, 0, 0);
  EXPECT_EQ(B::flush_st(q.h.qp).send_unposted, 2u);
}

// ---------------------------------------------------------------------------------------------------------
// Receives ([recv]).

class Recv : public ::testing::TestWithParam<std::uint32_t> {};  // the RQ stride's log2

TEST_P(Recv, DataSegmentTerminatorAndWrid) {
  QpShape s;
  s.rq_stride_shift = GetParam();
  s.rq_wqes = 8;
  HostQp h(s);
  h.start_rq_at(6);  // the third receive wraps to RQ WQE 0
  for (std::uint32_t i = 0; i < 3; ++i) {
    B::stage_recv_st(h.qp, 0x700 + i, Segment{kGatherAddr + i * 8192ull, 8192, kLkey + i});
  }
  const std::uint32_t stride = 1u << GetParam();
  for (std::uint32_t i = 0; i < 3; ++i) {
    SCOPED_TRACE("receive " + std::to_string(i));
    const std::uint8_t* d = h.rwqe(6 + i);
    expect_data(d, 8192, kLkey + i, kGatherAddr + i * 8192ull);
    if (stride == 16) continue;  // room for one segment: no terminator (j == max_gs)
    EXPECT_EQ(be32_at(d + 16), 0u) << "terminator byte_count";
    EXPECT_EQ(be32_at(d + 20), 0x100u) << "terminator lkey: MLX5_INVALID_LKEY";
    EXPECT_EQ(be64_at(d + 24), 0u) << "terminator addr";
    EXPECT_TRUE(all_poison(d + 32, stride - 32));
  }
  for (std::uint32_t i = 1; i < 6; ++i) EXPECT_TRUE(all_poison(h.rwqe(i), stride)) << "RQ WQE " << i;
  EXPECT_EQ(h.qp.rq_wrid[6], 0x700u);
  EXPECT_EQ(h.qp.rq_wrid[7], 0x701u);
  EXPECT_EQ(h.qp.rq_wrid[0], 0x702u);
  EXPECT_EQ(h.qp.rq_head, 9u);
  EXPECT_TRUE(h.records_untouched()) << "staging alone hands nothing over";
  const FlushResult r = B::flush_st(h.qp);
  EXPECT_EQ(r.recv_unposted, 0u);
  EXPECT_EQ(h.rcv_record(), 9u);
  EXPECT_EQ(h.qp.doorbells, 0u) << "receives ring no UAR doorbell";
  EXPECT_TRUE(all_poison(h.bf(), kBfArea));
}

INSTANTIATE_TEST_SUITE_P(Strides, Recv, ::testing::Values(4u, 5u, 6u),
                         [](const ::testing::TestParamInfo<std::uint32_t>& i) {
                           return "stride" + std::to_string(1u << i.param);
                         });

// A full RQ takes no more: the receive that does not fit and every later one of the turn come back as the
// unposted tail, and the record covers only what was written.
TEST(Mlx5Wqe, ReceiveRingFullDropsTheTail) {
  QpShape s;
  s.rq_wqes = 4;
  HostQp h(s);
  for (std::uint32_t i = 0; i < 6; ++i) B::stage_recv_st(h.qp, i, Segment{kGatherAddr, 64, kLkey});
  EXPECT_EQ(h.qp.rq_head, 4u);
  FlushResult r = B::flush_st(h.qp);
  EXPECT_EQ(r.recv_unposted, 2u);
  EXPECT_EQ(h.rcv_record(), 4u);
  // Two receives complete; the next turn fits two again, and the count of the previous turn is gone.
  h.qp.rq_tail = 2;
  B::stage_recv_st(h.qp, 10, Segment{kGatherAddr, 64, kLkey});
  B::stage_recv_st(h.qp, 11, Segment{kGatherAddr, 64, kLkey});
  r = B::flush_st(h.qp);
  EXPECT_EQ(r.recv_unposted, 0u);
  EXPECT_EQ(h.rcv_record(), 6u);
  EXPECT_EQ(h.qp.rq_wrid[0], 10u);
  EXPECT_EQ(h.qp.rq_wrid[1], 11u);
}

// ---------------------------------------------------------------------------------------------------------
// Wrap-around of the SQ.

// [inl]: the WQE starts in the SQ's last BB(s) and its inline bytes continue at the SQ's start; the control
// segment and the header stay at the old end.
struct WrapCase {
  std::uint32_t start;  // BB of the control segment in an 8-BB SQ
  std::uint32_t len;
  std::uint32_t bbs;
};
void PrintTo(const WrapCase& c, std::ostream* os) {
  *os << c.len << " bytes at BB " << c.start;
}
class InlineWrap : public ::testing::TestWithParam<WrapCase> {};

TEST_P(InlineWrap, BytesSplitAtTheSqEnd) {
  const WrapCase c = GetParam();
  QpShape s;
  s.sq_bbs = 8;
  HostQp h(s);
  h.start_sq_at(c.start);
  const auto payload = pattern(c.len, 0x5c);
  B::stage_send_st(h.qp, 0xaaaa, Segment{addr_of(payload.data()), c.len, kLkey}, kSendInline | kSendSignaled);

  const std::uint8_t* w = h.bb(c.start);
  expect_ctrl(w, c.start, MLX5_OPCODE_SEND, 0x1234ab, 1 + (c.len + 4 + 15) / 16, true);
  EXPECT_EQ(be32_at(w + 16), c.len | MLX5_INLINE_SEG);
  const std::size_t before_end = h.sq_bytes() - (std::size_t{c.start} * kBb + 20);  // bytes up to qend
  const std::size_t first = c.len < before_end ? c.len : before_end;
  EXPECT_EQ(std::memcmp(w + 20, payload.data(), first), 0) << "bytes before the SQ's end";
  EXPECT_EQ(std::memcmp(h.sq(), payload.data() + first, c.len - first), 0) << "bytes from the SQ's start";
  const std::size_t used_at_start = c.len - first;
  const std::size_t wrapped_bbs = c.start + c.bbs > 8 ? c.start + c.bbs - 8 : 0;
  EXPECT_TRUE(all_poison(h.sq() + used_at_start, wrapped_bbs * kBb - used_at_start)) << "past the bytes";
  EXPECT_EQ(h.qp.sq_wrid[c.start], 0xaaaau);
  EXPECT_EQ(h.qp.sq_bbs[c.start], c.bbs);
  EXPECT_EQ(h.qp.sq_pi, c.start + c.bbs);
  expect_other_bbs_untouched(h, c.start, c.bbs);
  B::flush_st(h.qp);
  EXPECT_EQ(h.snd_record(), c.start + c.bbs) << "[db] the record counts BBs, past the wrap";
  EXPECT_EQ(std::memcmp(h.bf(), w, 8), 0) << "[db] the ctrl at the old end";
}

INSTANTIATE_TEST_SUITE_P(Cases, InlineWrap,
                         ::testing::Values(WrapCase{7, 44, 1},    // fills the last BB: nothing at the start
                                           WrapCase{7, 45, 2},    // one byte past the end
                                           WrapCase{7, 100, 2},   // 44 before, 56 after
                                           WrapCase{6, 109, 3},   // two BBs before, one after
                                           WrapCase{7, 236, 4}),  // max inline: three BBs after
                         [](const ::testing::TestParamInfo<WrapCase>& i) {
                           return "bb" + std::to_string(i.param.start) + "_len" + std::to_string(i.param.len);
                         });

// [ctrl]: the WQE index is the producer index's low 16 bits; the BB is the producer index modulo the SQ;
// [db]: the record is the low 16 bits too.
TEST(Mlx5Wqe, ProducerIndexWrapsPast16Bits) {
  QpShape s;
  s.sq_bbs = 8;
  HostQp h(s);
  h.start_sq_at(0xfffe);
  for (std::uint64_t i = 0; i < 3; ++i)
    B::stage_send_st(h.qp, 40 + i, Segment{kGatherAddr, 8, kLkey}, kSendSignaled);
  expect_ctrl(h.bb(6), 0xfffe, MLX5_OPCODE_SEND, 0x1234ab, 2, true);
  expect_ctrl(h.bb(7), 0xffff, MLX5_OPCODE_SEND, 0x1234ab, 2, true);
  expect_ctrl(h.bb(0), 0x0000, MLX5_OPCODE_SEND, 0x1234ab, 2, true);
  EXPECT_EQ(h.qp.sq_wrid[6], 40u);
  EXPECT_EQ(h.qp.sq_wrid[7], 41u);
  EXPECT_EQ(h.qp.sq_wrid[0], 42u);
  EXPECT_EQ(h.qp.sq_pi, 0x10001u);
  B::flush_st(h.qp);
  EXPECT_EQ(h.snd_record(), 0x0001u);
  EXPECT_EQ(be32_at(h.bf()), std::uint32_t{MLX5_OPCODE_SEND}) << "index 0x0000 in the doorbell";
}

// A WQE that would overwrite BBs the NIC has not finished with is not written; it and every later one of
// the turn are the unposted tail, even one small enough to fit.
TEST(Mlx5Wqe, RingFullDropsTheTailEvenWhenALaterOneFits) {
  QpShape s;
  s.sq_bbs = 8;
  HostQp h(s);
  const auto payload = pattern(109, 1);
  for (std::uint64_t i = 0; i < 6; ++i) B::stage_send_st(h.qp, i, Segment{kGatherAddr, 8, kLkey}, 0);
  B::stage_send_st(h.qp, 6, Segment{addr_of(payload.data()), 109, kLkey}, kSendInline);  // 3 BBs, 2 free
  B::stage_send_st(h.qp, 7, Segment{kGatherAddr, 8, kLkey}, kSendSignaled);              // 1 BB would fit
  EXPECT_EQ(h.qp.sq_pi, 6u);
  EXPECT_TRUE(all_poison(h.bb(6), 2 * kBb)) << "a dropped WQE left bytes in the ring";
  const FlushResult r = B::flush_st(h.qp);
  EXPECT_EQ(r.send_unposted, 2u);
  EXPECT_EQ(r.recv_unposted, 0u);
  EXPECT_EQ(h.snd_record(), 6u);
  EXPECT_EQ(std::memcmp(h.bf(), h.bb(5), 8), 0) << "the doorbell names the last WQE written";
  EXPECT_EQ(h.qp.doorbells, 1u);

  // The next turn starts clean: the two free BBs take two WQEs (the ring exactly full), a third is dropped.
  B::stage_send_st(h.qp, 8, Segment{kGatherAddr, 8, kLkey}, 0);
  B::stage_send_st(h.qp, 9, Segment{kGatherAddr, 8, kLkey}, kSendSignaled);
  B::stage_send_st(h.qp, 10, Segment{kGatherAddr, 8, kLkey}, kSendSignaled);
  EXPECT_EQ(h.qp.sq_pi, 8u);
  expect_ctrl(h.bb(7), 7, MLX5_OPCODE_SEND, 0x1234ab, 2, true);
  EXPECT_EQ(h.qp.sq_wrid[6], 8u);
  EXPECT_EQ(h.qp.sq_wrid[7], 9u);
  const FlushResult r2 = B::flush_st(h.qp);
  EXPECT_EQ(r2.send_unposted, 1u);
  EXPECT_EQ(h.snd_record(), 8u);
  expect_ctrl(h.bb(0), 0, MLX5_OPCODE_SEND, 0x1234ab, 2, false);  // BB 0 was not overwritten by WQE 10
  EXPECT_EQ(h.qp.sq_wrid[0], 0u);

  // The NIC completes up to BB 2 (sq_ci, as a CQE would set it): three BBs free again.
  h.qp.sq_ci = 3;
  B::stage_send_st(h.qp, 11, Segment{addr_of(payload.data()), 109, kLkey}, kSendInline | kSendSignaled);
  EXPECT_EQ(h.qp.sq_pi, 11u);
  expect_ctrl(h.bb(0), 8, MLX5_OPCODE_SEND, 0x1234ab, 9, true);
  EXPECT_EQ(B::flush_st(h.qp).send_unposted, 0u);
}

// ---------------------------------------------------------------------------------------------------------
// Doorbells ([db], [recv]).

TEST(Mlx5Doorbell, OneFlushRingsBothRecordsAndOneBlueFlameWrite) {
  HostQp h;
  B::stage_recv_st(h.qp, 1, Segment{kGatherAddr, 64, kLkey});
  B::stage_recv_st(h.qp, 2, Segment{kGatherAddr, 64, kLkey});
  const auto payload = pattern(60, 9);
  B::stage_send_st(h.qp, 3, Segment{addr_of(payload.data()), 60, kLkey}, kSendInline);  // BBs 0-1
  B::stage_send_st(h.qp, 4, Segment{kGatherAddr, 64, kLkey}, 0);                        // BB 2
  B::stage_send_st(h.qp, 5, Segment{kGatherAddr, 64, kLkey}, kSendSignaled);            // BB 3
  const FlushResult r = B::flush_st(h.qp);
  EXPECT_EQ(r.send_unposted, 0u);
  EXPECT_EQ(r.recv_unposted, 0u);
  EXPECT_EQ(h.rcv_record(), 2u);
  EXPECT_EQ(h.snd_record(), 4u);
  EXPECT_EQ(std::memcmp(h.bf(), h.bb(3), 8), 0) << "exactly the newest WQE's first 8 bytes";
  EXPECT_EQ(be32_at(h.bf()), (3u << 8) | MLX5_OPCODE_SEND);
  EXPECT_EQ(be32_at(h.bf() + 4), (0x1234abu << 8) | 2);
  EXPECT_TRUE(all_poison(h.bf() + 8, kBfArea - 8)) << "8 bytes, not a BlueFlame copy of the WQE";
  EXPECT_EQ(h.qp.doorbells, 1u);
  EXPECT_EQ(h.qp.bf_offset, 256u);
}

TEST(Mlx5Doorbell, BlueFlameOffsetAlternates) {
  HostQp h;
  for (std::uint32_t turn = 0; turn < 5; ++turn) {
    SCOPED_TRACE("turn " + std::to_string(turn));
    std::memset(h.bf(), kPoison, kBfArea);
    B::stage_send_st(h.qp, turn, Segment{kGatherAddr, 8, kLkey}, kSendSignaled);
    B::flush_st(h.qp);
    const std::size_t at = (turn % 2) * 256;
    EXPECT_EQ(std::memcmp(h.bf() + at, h.bb(turn), 8), 0);
    EXPECT_TRUE(all_poison(h.bf() + (256 - at), 256)) << "the other buffer";
    EXPECT_TRUE(all_poison(h.bf() + at + 8, 248));
    EXPECT_EQ(h.qp.bf_offset, at ^ 256);
    EXPECT_EQ(h.snd_record(), turn + 1);
  }
  EXPECT_EQ(h.qp.doorbells, 5u);
}

// A UAR without BlueFlame buffers (bf->buf_size 0): every doorbell goes to the same register.
TEST(Mlx5Doorbell, BfSizeZeroKeepsOffsetZero) {
  QpShape s;
  s.bf_size = 0;
  HostQp h(s);
  for (std::uint32_t turn = 0; turn < 4; ++turn) {
    B::stage_send_st(h.qp, turn, Segment{kGatherAddr, 8, kLkey}, 0);
    B::flush_st(h.qp);
    EXPECT_EQ(h.qp.bf_offset, 0u);
    EXPECT_EQ(std::memcmp(h.bf(), h.bb(turn), 8), 0);
    EXPECT_TRUE(all_poison(h.bf() + 8, kBfArea - 8));
  }
  EXPECT_EQ(h.qp.doorbells, 4u);
}

// post_send_db returns at once when nreq is 0; a receive-free flush touches no receive record either.
TEST(Mlx5Doorbell, FlushWithNothingStagedWritesNothing) {
  HostQp h;
  FlushResult r = B::flush_st(h.qp);
  EXPECT_EQ(r.send_unposted + r.recv_unposted, 0u);
  EXPECT_TRUE(h.records_untouched());
  EXPECT_TRUE(all_poison(h.bf(), kBfArea));
  EXPECT_EQ(h.qp.doorbells, 0u);
  EXPECT_EQ(h.qp.bf_offset, 0u);
  // And after a real flush, a second one with nothing new writes nothing again.
  B::stage_send_st(h.qp, 1, Segment{kGatherAddr, 8, kLkey}, 0);
  B::flush_st(h.qp);
  std::memset(h.bf(), kPoison, kBfArea);
  r = B::flush_st(h.qp);
  EXPECT_EQ(r.send_unposted, 0u);
  EXPECT_TRUE(all_poison(h.bf(), kBfArea));
  EXPECT_EQ(h.qp.doorbells, 1u);
  EXPECT_EQ(h.qp.bf_offset, 256u);
  EXPECT_EQ(dbrec_word(h.qp.dbrec, MLX5_RCV_DBR), 0xeeeeeeeeu) << "no receive was ever staged";
}

// Every send of a turn was dropped: no record, no doorbell, and the drop is still reported.
TEST(Mlx5Doorbell, AllSendsDroppedRingsNothing) {
  QpShape s;
  s.sq_bbs = 4;
  HostQp h(s);
  h.qp.sq_pi = h.qp.sq_rung = 4;  // four BBs outstanding (sq_ci 0): the SQ is full
  B::stage_send_st(h.qp, 1, Segment{kGatherAddr, 8, kLkey}, 0);
  const FlushResult r = B::flush_st(h.qp);
  EXPECT_EQ(r.send_unposted, 1u);
  EXPECT_TRUE(h.records_untouched());
  EXPECT_TRUE(all_poison(h.bf(), kBfArea));
  EXPECT_EQ(h.qp.doorbells, 0u);
}

// Receive-only turn: the receive record moves, the send record and the UAR do not. And the record is the
// head's low 16 bits ([recv]) when the head passes 0xffff.
TEST(Mlx5Doorbell, ReceiveRecordIsHeadLow16Bits) {
  HostQp h;
  h.start_rq_at(0xfffe);
  for (std::uint64_t i = 0; i < 3; ++i) B::stage_recv_st(h.qp, 100 + i, Segment{kGatherAddr, 64, kLkey});
  B::flush_st(h.qp);
  EXPECT_EQ(h.rcv_record(), 0x0001u);
  EXPECT_EQ(dbrec_word(h.qp.dbrec, MLX5_SND_DBR), 0xeeeeeeeeu);
  EXPECT_TRUE(all_poison(h.bf(), kBfArea));
  EXPECT_EQ(h.qp.rq_wrid[14], 100u);
  EXPECT_EQ(h.qp.rq_wrid[15], 101u);
  EXPECT_EQ(h.qp.rq_wrid[0], 102u);
}

}  // namespace
}  // namespace rdmagate::dataplane

#pragma once
// Host stand-ins for what mlx5dv_init_obj hands the mlx5 backend (dataplane/backend/mlx5_datapath.hpp): the
// SQ and RQ rings, the QP's doorbell record pair, a 512-byte BlueFlame area (two 256-byte buffers, as a
// UAR page has), the CQ ring and its doorbell record. Everything is heap memory filled with a poison byte,
// so a test sees every byte the backend wrote and every byte it must not have written.
//
// Expected bytes are read and written here with explicit shifts, not with htobe/be*toh, so that the oracle
// does not share the backend's byte-order helpers. The offsets are mlx5dv.h's, pinned by static_asserts.

#include <infiniband/mlx5dv.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "dataplane/backend/mlx5_datapath.hpp"

namespace rdmagate::dataplane::mlx5_test {

// ---- the layouts the tests (and the backend) rely on, as mlx5dv.h and the mlx5 PRM define them ----
static_assert(sizeof(mlx5_wqe_ctrl_seg) == 16);
static_assert(offsetof(mlx5_wqe_ctrl_seg, opmod_idx_opcode) == 0);
static_assert(offsetof(mlx5_wqe_ctrl_seg, qpn_ds) == 4);
static_assert(offsetof(mlx5_wqe_ctrl_seg, signature) == 8);
static_assert(offsetof(mlx5_wqe_ctrl_seg, dci_stream_channel_id) == 9);
static_assert(offsetof(mlx5_wqe_ctrl_seg, fm_ce_se) == 11);
static_assert(offsetof(mlx5_wqe_ctrl_seg, imm) == 12);
static_assert(sizeof(mlx5_wqe_data_seg) == 16);
static_assert(offsetof(mlx5_wqe_data_seg, byte_count) == 0);
static_assert(offsetof(mlx5_wqe_data_seg, lkey) == 4);
static_assert(offsetof(mlx5_wqe_data_seg, addr) == 8);
static_assert(sizeof(mlx5_wqe_raddr_seg) == 16);
static_assert(offsetof(mlx5_wqe_raddr_seg, raddr) == 0);
static_assert(offsetof(mlx5_wqe_raddr_seg, rkey) == 8);
static_assert(offsetof(mlx5_wqe_raddr_seg, reserved) == 12);
static_assert(sizeof(mlx5_cqe64) == 64);
static_assert(offsetof(mlx5_cqe64, srqn_uidx) == 32);
static_assert(offsetof(mlx5_cqe64, imm_inval_pkey) == 36);
static_assert(offsetof(mlx5_cqe64, byte_cnt) == 44);
static_assert(offsetof(mlx5_cqe64, sop_drop_qpn) == 56);
static_assert(offsetof(mlx5_cqe64, wqe_counter) == 60);
static_assert(offsetof(mlx5_cqe64, signature) == 62);
static_assert(offsetof(mlx5_cqe64, op_own) == 63);
static_assert(sizeof(mlx5_err_cqe) == 64);
static_assert(offsetof(mlx5_err_cqe, vendor_err_synd) == 54);
static_assert(offsetof(mlx5_err_cqe, syndrome) == 55);
static_assert(offsetof(mlx5_err_cqe, s_wqe_opcode_qpn) == 56);
static_assert(offsetof(mlx5_err_cqe, wqe_counter) == 60);
static_assert(offsetof(mlx5_err_cqe, op_own) == 63);
static_assert(MLX5_SEND_WQE_BB == 64);

inline constexpr std::uint8_t kPoison = 0xee;
inline constexpr std::size_t kBb = 64;
inline constexpr std::size_t kBfArea = 512;  // two BlueFlame buffers of 256 bytes

// ---- big-endian by hand ----
inline std::uint16_t be16_at(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
inline std::uint32_t be32_at(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}
inline std::uint64_t be64_at(const std::uint8_t* p) {
  return std::uint64_t{be32_at(p)} << 32 | be32_at(p + 4);
}
inline void put_be16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
inline void put_be32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
// A doorbell record word as the NIC reads it: its four bytes in memory order, most significant first.
inline std::uint32_t dbrec_word(const volatile std::uint32_t* rec, int i) {
  const std::uint32_t v = rec[i];
  std::uint8_t b[4];
  std::memcpy(b, &v, sizeof(b));
  return be32_at(b);
}

inline bool all_value(const std::uint8_t* p, std::size_t n, std::uint8_t v) {
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != v) return false;
  }
  return true;
}
inline bool all_poison(const std::uint8_t* p, std::size_t n) {
  return all_value(p, n, kPoison);
}

struct FreeBytes {
  void operator()(std::uint8_t* p) const noexcept { std::free(p); }
};
using Bytes = std::unique_ptr<std::uint8_t[], FreeBytes>;

// Page-aligned like the provider's ring buffers (the backend only needs 64-byte alignment).
inline Bytes poisoned(std::size_t n, std::uint8_t fill = kPoison) {
  const std::size_t size = (n + 4095) / 4096 * 4096;
  auto* p = static_cast<std::uint8_t*>(std::aligned_alloc(4096, size));
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, fill, size);
  return Bytes(p);
}

// rdma-core's CQ buffer as mlx5_alloc_cq_buf (providers/mlx5/cq.c) leaves it: zeroed, and every entry's
// op_own MLX5_CQE_INVALID << 4 (owner bit 0, which is lap 0's parity: only the opcode says "not written").
class HostCq {
 public:
  HostCq(std::uint32_t cqe_cnt, std::uint32_t max_qps)
      : ring_(poisoned(std::size_t{cqe_cnt} * 64, 0)), cq(max_qps) {
    for (std::uint32_t i = 0; i < cqe_cnt; ++i) ring_[std::size_t{i} * 64 + 63] = MLX5_CQE_INVALID << 4;
    put_be32(reinterpret_cast<std::uint8_t*>(dbrec_), 0x5a5a5a5a);  // not yet written by anyone
    put_be32(reinterpret_cast<std::uint8_t*>(dbrec_ + 1), 0x5a5a5a5a);
    cq.buf = ring_.get();
    cq.cqe_cnt = cqe_cnt;
    cq.dbrec = dbrec_;
  }
  HostCq(const HostCq&) = delete;
  HostCq& operator=(const HostCq&) = delete;

  std::uint8_t* entry(std::uint32_t abs_index) {
    return ring_.get() + std::size_t{abs_index & (cq.cqe_cnt - 1)} * 64;
  }
  std::uint32_t ci_record() const { return dbrec_word(dbrec_, mlx5::kCqSetCi); }
  void poison_ci_record() { put_be32(reinterpret_cast<std::uint8_t*>(dbrec_), 0x5a5a5a5a); }

 private:
  Bytes ring_;
  alignas(8) std::uint32_t dbrec_[2];

 public:
  Mlx5Cq cq;  // after its memory, so it goes first
};

struct QpShape {
  std::uint32_t sq_bbs = 16;
  std::uint32_t rq_wqes = 16;
  std::uint32_t rq_stride_shift = 4;  // 16-byte receive WQEs: one data segment
  std::uint32_t max_inline = 236;     // 16 ds: 4 BBs exactly (ctrl 16 + inline header 4 + 236)
  std::uint32_t qp_num = 0x1234ab;    // 24 bits, every byte distinct
  std::uint32_t bf_size = 256;
};

// One QP's rings, as mlx5dv_init_obj describes them (mlx5dv_qp: sq.buf/wqe_cnt, rq.buf/wqe_cnt/stride,
// dbrec, bf.reg/size), handed to a hand-built Mlx5Qp. The QP joins `cq`'s table when one is given.
class HostQp {
 public:
  explicit HostQp(const QpShape& s = {}, HostCq* cq = nullptr)
      : sq_(poisoned(std::size_t{s.sq_bbs} * kBb)),
        rq_(poisoned(std::size_t{s.rq_wqes} << s.rq_stride_shift)),
        bf_(poisoned(kBfArea)) {
    std::memset(dbrec_, kPoison, sizeof(dbrec_));
    qp.qp_num = s.qp_num;
    qp.sq_buf = sq_.get();
    qp.sq_wqe_cnt = s.sq_bbs;
    qp.rq_buf = rq_.get();
    qp.rq_wqe_cnt = s.rq_wqes;
    qp.rq_stride_shift = s.rq_stride_shift;
    qp.dbrec = dbrec_;
    qp.bf_reg = bf_.get();
    qp.bf_size = s.bf_size;
    qp.max_inline = s.max_inline;
    qp.qpn_shifted = s.qp_num << 8;
    qp.sq_wrid.assign(s.sq_bbs, 0);
    qp.sq_bbs.assign(s.sq_bbs, 0);
    qp.rq_wrid.assign(s.rq_wqes, 0);
    if (cq != nullptr) {
      qp.cq = &cq->cq;
      if (!cq->cq.qps.insert(&qp)) throw std::bad_alloc();
    }
  }
  HostQp(const HostQp&) = delete;
  HostQp& operator=(const HostQp&) = delete;

  // Every counter at `pi` with nothing outstanding, as after that many WQEs were posted and completed.
  void start_sq_at(std::uint32_t pi) {
    qp.sq_pi = pi;
    qp.sq_ci = static_cast<std::uint16_t>(pi);
    qp.sq_rung = pi;
  }
  void start_rq_at(std::uint32_t head) { qp.rq_head = qp.rq_tail = qp.rq_rung = head; }

  std::uint8_t* bb(std::uint32_t i) { return sq_.get() + std::size_t{i & (qp.sq_wqe_cnt - 1)} * kBb; }
  std::uint8_t* sq() { return sq_.get(); }
  std::size_t sq_bytes() const { return std::size_t{qp.sq_wqe_cnt} * kBb; }
  std::uint8_t* rwqe(std::uint32_t i) {
    return rq_.get() + (std::size_t{i & (qp.rq_wqe_cnt - 1)} << qp.rq_stride_shift);
  }
  std::uint8_t* bf() { return bf_.get(); }
  std::uint32_t rcv_record() const { return dbrec_word(dbrec_, MLX5_RCV_DBR); }
  std::uint32_t snd_record() const { return dbrec_word(dbrec_, MLX5_SND_DBR); }
  bool records_untouched() const {
    return dbrec_word(dbrec_, 0) == 0xeeeeeeee && dbrec_word(dbrec_, 1) == 0xeeeeeeee;
  }

 private:
  Bytes sq_, rq_, bf_;
  alignas(8) std::uint32_t dbrec_[2];

 public:
  Mlx5Qp qp;  // declared last: destroyed first, leaving its CQ's table while the memory still exists
};

inline std::uint64_t addr_of(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

}  // namespace rdmagate::dataplane::mlx5_test

#pragma once
// Hot path of the mlx5 direct-verbs backend: the core writes WQEs into the send and receive queues' memory,
// updates the doorbell records and rings the doorbell itself, and parses 64-byte CQEs itself (UCX rc_mlx5,
// SPDK's mlx5 layer). No libibverbs or libmlx5 call here; the rings come from mlx5dv_init_obj at setup
// (mlx5_setup.cpp on a NIC, the simulated NIC in tests/engine/sim_mlx5.* on the host). Layouts and constants
// are infiniband/mlx5dv.h's; every multi-byte field the NIC reads or writes is big-endian.
//
// What one work request becomes (sizes in 16-byte data segments, "ds"; a WQE takes ceil(ds / 4) 64-byte
// basic blocks, "BBs", and may wrap from the end of the SQ to its start):
//   SEND gathered      ctrl | data                   ds 2 (1 when the length is 0: the drain marker)
//   SEND inline n      ctrl | inline hdr + n bytes   ds 1 + ceil((4 + n) / 16)  (1 when n is 0)
//   RDMA READ/WRITE    ctrl | raddr | data           ds 3 (2 when the length is 0)
//   window bind        ctrl | umr ctrl | mkey context | klm (64 bytes)   ds 12, 3 BBs
//   window invalidate  ctrl | umr ctrl | mkey context                    ds 8, 2 BBs
//   receive            data [| invalid-lkey terminator when the RQ stride holds more than one segment]
// The window WQEs are UMRs laid out as rdma-core's provider lays out IBV_WR_BIND_MW and IBV_WR_LOCAL_INV
// (providers/mlx5/qp.c set_bind_wr); the WQE after a UMR carries the initiator small fence, as there.
// Flush: receives first (a credit never goes out ahead of its buffer), each queue's doorbell record once, and
// one 8-byte doorbell write (the newest WQE's first 8 bytes) to the UAR for all sends of the turn.
// Poll: owner bit against the consumer index's wrap, read barrier, decode; the CQ's doorbell record once
// per burst. Every function here runs on the owning core; setup only fills the fields.

#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>  // ibv_wc_status: what an error CQE's syndrome means, as the verbs backend says

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "dataplane/backend/backend.hpp"
#include "dataplane/backend/mlx5_barriers.hpp"

struct ibv_context;
struct ibv_pd;

namespace rdmagate::dataplane {

namespace mlx5 {
// The CQ doorbell record's consumer-index word (rdma-core's private mlx5.h: MLX5_CQ_SET_CI; mlx5dv.h does
// not name it). The next word arms the CQ for an event, which a polled core never does.
inline constexpr int kCqSetCi = 0;
}  // namespace mlx5

class Mlx5Cq;

// Not final: the setup half derives its own (the real one destroys the verbs QP in its destructor).
class Mlx5Qp : public BackendQp {
 public:
  ~Mlx5Qp() override;  // leaves its CQ's table

  // ---- from mlx5dv_init_obj (or the simulated NIC), fixed after setup ----
  std::uint8_t* sq_buf = nullptr;
  std::uint32_t sq_wqe_cnt = 0;  // basic blocks, a power of two
  std::uint8_t* rq_buf = nullptr;
  std::uint32_t rq_wqe_cnt = 0;  // receive WQEs, a power of two
  std::uint32_t rq_stride_shift = 4;
  volatile std::uint32_t* dbrec = nullptr;  // [MLX5_RCV_DBR], [MLX5_SND_DBR], big-endian
  std::uint8_t* bf_reg = nullptr;           // the UAR doorbell register (BlueFlame buffer 0)
  std::uint32_t bf_size = 0;                // 0: one register (no alternation)
  std::uint32_t max_inline = 0;             // bytes an inline SEND carries (granted at creation)
  std::uint32_t qpn_shifted = 0;            // qp_num << 8: ctrl.qpn_ds without the ds count
  Mlx5Cq* cq = nullptr;                     // where this QP's completions go (its table names it)
  // Type-2 memory windows (QpCaps::windows): the key each holds, as allocated and then as last bound. A UMR
  // names its window by that key; a bind moves the key byte on.
  std::vector<std::uint32_t> window_rkey;

  // ---- send queue state (core) ----
  std::uint32_t sq_pi = 0;            // producer index, BBs (the WQE counter the NIC sees is its low 16 bits)
  std::uint16_t sq_ci = 0;            // BBs the NIC is done with: behind the newest WQE a polled CQE named
  std::uint32_t sq_rung = 0;          // sq_pi at the last doorbell
  std::uint8_t* last_ctrl = nullptr;  // the newest staged WQE, whose first 8 bytes the doorbell carries
  std::uint32_t bf_offset = 0;
  std::uint8_t fence_next = 0;         // fm_ce_se bits of the next WQE: the small fence after a UMR
  std::vector<std::uint64_t> sq_wrid;  // by WQE start BB: what the core staged it with
  std::vector<std::uint16_t> sq_bbs;   // by WQE start BB: its length in BBs
  // ---- receive queue state (core) ----
  std::uint32_t rq_head = 0;  // receives written
  std::uint32_t rq_tail = 0;  // receives completed (in order: no SRQ)
  std::uint32_t rq_rung = 0;  // rq_head at the last doorbell record update
  std::vector<std::uint64_t> rq_wrid;
  // Staged beyond the rings (a sizing bug): never written, reported as unposted by the next flush.
  std::uint32_t sends_dropped = 0, recvs_dropped = 0;
  std::uint64_t doorbells = 0;  // UAR writes: one per flush that staged a send
};

// The QPs whose completions a CQ carries, by QP number: an open-addressing table that control fills (QP
// creation, before the first receive is posted) and empties (QP destruction, after CLOSED) while the core
// reads it. Entries are single pointers published with release; a removed entry becomes a tombstone so the
// probe sequence of every other QP stays intact. Capacity is fixed at setup (twice the QPs the CQ serves).
class Mlx5QpTable {
 public:
  explicit Mlx5QpTable(std::uint32_t max_qps);
  bool insert(Mlx5Qp* q) noexcept;  // control; false when full
  void erase(Mlx5Qp* q) noexcept;   // control
  Mlx5Qp* find_st(std::uint32_t qpn) const noexcept {
    for (std::uint32_t i = hash(qpn), n = 0; n <= mask_; i = (i + 1) & mask_, ++n) {
      Mlx5Qp* q = slots_[i].load(std::memory_order_acquire);
      if (q == nullptr) return nullptr;
      if (q != tombstone() && q->qp_num == qpn) return q;
    }
    return nullptr;
  }

 private:
  static Mlx5Qp* tombstone() noexcept { return reinterpret_cast<Mlx5Qp*>(alignof(Mlx5Qp)); }
  std::uint32_t hash(std::uint32_t qpn) const noexcept { return (qpn * 2654435761u >> 8) & mask_; }
  std::unique_ptr<std::atomic<Mlx5Qp*>[]> slots_;
  std::uint32_t mask_ = 0;
};

class Mlx5Cq : public BackendCq {
 public:
  explicit Mlx5Cq(std::uint32_t max_qps) : qps(max_qps) {}

  // ---- from mlx5dv_init_obj (or the simulated NIC) ----
  std::uint8_t* buf = nullptr;              // cqe_cnt 64-byte CQEs
  std::uint32_t cqe_cnt = 0;                // a power of two
  volatile std::uint32_t* dbrec = nullptr;  // [mlx5::kCqSetCi], big-endian, 24 bits
  Mlx5QpTable qps;
  // ---- core ----
  std::uint32_t ci = 0;  // consumer index: CQEs taken
  struct Stats {
    std::uint64_t unknown_qp = 0;      // a CQE naming no QP of this CQ (taken and dropped)
    std::uint64_t unknown_opcode = 0;  // a CQE of a kind this backend never asks for (taken and dropped)
    std::uint64_t inline_scatter = 0;  // receives whose bytes the NIC put into the CQE
  } stats;
};

inline Mlx5QpTable::Mlx5QpTable(std::uint32_t max_qps) {
  std::uint32_t cap = 16;
  while (cap < 2 * max_qps) cap <<= 1;
  slots_ = std::make_unique<std::atomic<Mlx5Qp*>[]>(cap);
  for (std::uint32_t i = 0; i < cap; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
  mask_ = cap - 1;
}

inline bool Mlx5QpTable::insert(Mlx5Qp* q) noexcept {
  for (std::uint32_t i = hash(q->qp_num), n = 0; n <= mask_; i = (i + 1) & mask_, ++n) {
    Mlx5Qp* cur = slots_[i].load(std::memory_order_relaxed);
    if (cur == nullptr || cur == tombstone()) {
      slots_[i].store(q, std::memory_order_release);
      return true;
    }
  }
  return false;
}

inline void Mlx5QpTable::erase(Mlx5Qp* q) noexcept {
  for (std::uint32_t i = hash(q->qp_num), n = 0; n <= mask_; i = (i + 1) & mask_, ++n) {
    Mlx5Qp* cur = slots_[i].load(std::memory_order_relaxed);
    if (cur == nullptr) return;
    if (cur == q) {
      slots_[i].store(tombstone(), std::memory_order_release);
      return;
    }
  }
}

inline Mlx5Qp::~Mlx5Qp() {
  if (cq != nullptr) cq->qps.erase(this);
}

// What an error CQE's syndrome means, in the verbs backend's terms (rdma-core providers/mlx5/cq.c).
inline ibv_wc_status mlx5_syndrome_status(std::uint8_t syndrome) noexcept {
  switch (syndrome) {
    case MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR:
      return IBV_WC_LOC_LEN_ERR;
    case MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR:
      return IBV_WC_LOC_QP_OP_ERR;
    case MLX5_CQE_SYNDROME_LOCAL_PROT_ERR:
      return IBV_WC_LOC_PROT_ERR;
    case MLX5_CQE_SYNDROME_WR_FLUSH_ERR:
      return IBV_WC_WR_FLUSH_ERR;
    case MLX5_CQE_SYNDROME_MW_BIND_ERR:
      return IBV_WC_MW_BIND_ERR;
    case MLX5_CQE_SYNDROME_BAD_RESP_ERR:
      return IBV_WC_BAD_RESP_ERR;
    case MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR:
      return IBV_WC_LOC_ACCESS_ERR;
    case MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR:
      return IBV_WC_REM_INV_REQ_ERR;
    case MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR:
      return IBV_WC_REM_ACCESS_ERR;
    case MLX5_CQE_SYNDROME_REMOTE_OP_ERR:
      return IBV_WC_REM_OP_ERR;
    case MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR:
      return IBV_WC_RETRY_EXC_ERR;
    case MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR:
      return IBV_WC_RNR_RETRY_EXC_ERR;
    case MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR:
      return IBV_WC_REM_ABORT_ERR;
    default:
      return IBV_WC_GENERAL_ERR;
  }
}

struct Mlx5Backend {
  using Qp = Mlx5Qp;
  using Cq = Mlx5Cq;
  static constexpr BackendKind kKind = BackendKind::kMlx5;
  static constexpr const char* kName = "mlx5dv";
  static bool supports(ibv_context* ctx) noexcept;  // mlx5dv_is_supported (mlx5_setup.cpp)
  static std::unique_ptr<DeviceBackend> make_device(ibv_context* ctx, ibv_pd* pd);
  static std::optional<std::uint32_t> probe_max_inline(ibv_context* ctx, std::uint32_t want);
  static constexpr int kMaxPoll = 64;
  static constexpr bool kWindows = true;
  static constexpr std::uint32_t kBindDs = 12, kInvalidateDs = 8;

  static void stage_recv_st(Qp& q, std::uint64_t wr_id, Segment s) noexcept {
    if (q.recvs_dropped != 0 || q.rq_head - q.rq_tail >= q.rq_wqe_cnt) [[unlikely]] {
      ++q.recvs_dropped;
      return;
    }
    const std::uint32_t idx = q.rq_head & (q.rq_wqe_cnt - 1);
    auto* d = reinterpret_cast<mlx5_wqe_data_seg*>(q.rq_buf + (std::size_t{idx} << q.rq_stride_shift));
    d->byte_count = htobe32(s.len);
    d->lkey = htobe32(s.lkey);
    d->addr = htobe64(s.addr);
    if (q.rq_stride_shift > 4) {  // room for more segments: the NIC stops at an invalid lkey
      d[1].byte_count = 0;
      d[1].lkey = htobe32(MLX5_INVALID_LKEY);
      d[1].addr = 0;
    }
    q.rq_wrid[idx] = wr_id;
    ++q.rq_head;
  }

  // A SEND of `s` (len 0: a control segment alone, as for the drain marker). Inline when asked and the
  // bytes fit what the QP was granted; gathered otherwise (the segment is registered either way).
  static void stage_send_st(Qp& q, std::uint64_t wr_id, Segment s, unsigned flags) noexcept {
    const bool inl = (flags & kSendInline) != 0 && s.len != 0 && s.len <= q.max_inline;
    const std::uint32_t ds = s.len == 0 ? 1 : inl ? 1 + (4 + s.len + 15) / 16 : 2;
    std::uint8_t* w = begin_wqe(q, wr_id, ds);
    if (w == nullptr) [[unlikely]]
      return;
    std::uint8_t* seg = w + sizeof(mlx5_wqe_ctrl_seg);
    end_wqe(q, w, MLX5_OPCODE_SEND, ds, flags);
    if (inl) {
      // The inline header is in the first BB with the control segment; the bytes may run past the SQ's end.
      // Copied last, so the common case is a tail call (nothing is read back from the WQE before the flush).
      const std::uint32_t hdr = htobe32(s.len | MLX5_INLINE_SEG);
      std::memcpy(seg, &hdr, sizeof(hdr));
      copy_wrapping(q, seg + sizeof(hdr), reinterpret_cast<const std::uint8_t*>(s.addr), s.len);
    } else if (s.len != 0) {
      set_data(seg, s);
    }
  }

  // One RDMA READ (remote -> local) or WRITE (local -> remote) of one fragment.
  static void stage_rdma_st(Qp& q, RdmaOp op, std::uint64_t wr_id, Segment local, std::uint64_t remote_addr,
                            std::uint32_t rkey, unsigned flags) noexcept {
    const std::uint32_t ds = local.len != 0 ? 3 : 2;
    std::uint8_t* w = begin_wqe(q, wr_id, ds);
    if (w == nullptr) [[unlikely]]
      return;
    auto* r = reinterpret_cast<mlx5_wqe_raddr_seg*>(w + sizeof(mlx5_wqe_ctrl_seg));
    r->raddr = htobe64(remote_addr);
    r->rkey = htobe32(rkey);
    r->reserved = 0;
    if (local.len != 0) set_data(reinterpret_cast<std::uint8_t*>(r + 1), local);
    end_wqe(q, w, op == RdmaOp::kRead ? MLX5_OPCODE_RDMA_READ : MLX5_OPCODE_RDMA_WRITE, ds,
            flags & kSendSignaled);
  }

  // Binds window `slot` of `q` over [b.addr, b.addr + b.len) of b.mr with a key it never had before, which it
  // returns (unsignaled: it completes only in error). 0: nothing staged (no such window, or a range beyond
  // the 2 GiB one KLM entry maps). Without room it is dropped like any send: the key comes back all the same,
  // so that the core's queue accounting holds it, and the flush reports it in the unposted tail.
  static std::uint32_t stage_bind_window_st(Qp& q, std::uint32_t slot, std::uint64_t wr_id,
                                            const WindowBind& b) noexcept {
    if (slot >= q.window_rkey.size() || b.mr == nullptr || b.len > kMaxWindowBytes) [[unlikely]]
      return 0;
    const std::uint32_t old_key = q.window_rkey[slot];
    const std::uint32_t rkey = ibv_inc_rkey(old_key);
    std::uint8_t* w = begin_wqe(q, wr_id, kBindDs);
    if (w == nullptr) [[unlikely]]
      return rkey;  // never bound: the window keeps its key
    q.window_rkey[slot] = rkey;
    set_umr_ctrl(w, true);
    auto* m = reinterpret_cast<mlx5_wqe_mkey_context_seg*>(bb_after(q, w, 1));
    std::memset(m, 0, sizeof(*m));
    // A GET's destination: remote write, with the local write the registration must also grant (as the
    // verbs backend asks); a PUT's source: remote read only.
    m->access_flags = b.remote_write ? MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE |
                                           MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE
                                     : MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ;
    m->qpn_mkey = htobe32(q.qpn_shifted | (rkey & 0xff));  // type 2: the window answers on this QP only
    m->start_addr = htobe64(b.addr);
    m->len = htobe64(b.len);
    std::uint8_t* k = bb_after(q, w, 2);
    std::memset(k, 0, MLX5_SEND_WQE_BB);
    auto* klm = reinterpret_cast<mlx5_wqe_umr_klm_seg*>(k);
    klm->byte_count = htobe32(static_cast<std::uint32_t>(b.len));
    klm->mkey = htobe32(b.mr->lkey);
    klm->address = htobe64(b.addr);
    end_umr(q, w, kBindDs, 0, old_key);
    return rkey;
  }

  // Invalidates window `slot`'s current key (signaled: its completion says the peer can no longer use it).
  // false: no such window. Without room it is dropped like any send (true, and the flush reports it).
  static bool stage_invalidate_window_st(Qp& q, std::uint32_t slot, std::uint64_t wr_id) noexcept {
    if (slot >= q.window_rkey.size()) [[unlikely]]
      return false;
    std::uint8_t* w = begin_wqe(q, wr_id, kInvalidateDs);
    if (w == nullptr) [[unlikely]]
      return true;
    set_umr_ctrl(w, false);
    auto* m = reinterpret_cast<mlx5_wqe_mkey_context_seg*>(bb_after(q, w, 1));
    std::memset(m, 0, sizeof(*m));
    m->free = MLX5_WQE_MKEY_CONTEXT_FREE;
    m->qpn_mkey = htobe32(0xffffff00u);
    end_umr(q, w, kInvalidateDs, kSendSignaled, q.window_rkey[slot]);
    return true;
  }

  // Receives first, then sends, as the verbs backend does. Nothing here can fail: what did not fit the
  // rings was never written and comes back as the unposted tail.
  static FlushResult flush_st(Qp& q) noexcept {
    FlushResult r;
    if (q.rq_head != q.rq_rung) {
      mlx5::to_device();  // the receive WQEs before the record that hands them over
      q.dbrec[MLX5_RCV_DBR] = htobe32(q.rq_head & 0xffff);
      q.rq_rung = q.rq_head;
    }
    if (q.sq_pi != q.sq_rung) {
      mlx5::to_device();  // the WQEs before the record and the doorbell
      q.dbrec[MLX5_SND_DBR] = htobe32(q.sq_pi & 0xffff);
      mlx5::wc_start();  // the record before the UAR write
      std::uint64_t first8;
      std::memcpy(&first8, q.last_ctrl, sizeof(first8));
      *reinterpret_cast<volatile std::uint64_t*>(q.bf_reg + q.bf_offset) = first8;
      mlx5::flush_writes();  // out of the write-combining buffer before anything else, and alone
      q.bf_offset ^= q.bf_size;
      q.sq_rung = q.sq_pi;
      ++q.doorbells;
    }
    r.recv_unposted = std::exchange(q.recvs_dropped, 0);
    r.send_unposted = std::exchange(q.sends_dropped, 0);
    return r;
  }

  // Up to n (<= kMaxPoll) completions. Never < 0: a CQE this backend cannot place is counted and dropped.
  static int poll_st(Cq& cq, Completion* out, int n) noexcept {
    const int want = n < kMaxPoll ? n : kMaxPoll;
    int got = 0;
    std::uint32_t ci = cq.ci;
    // Locals: the stores into out[] and into the QPs' rings may alias the CQ's fields for the compiler.
    const std::uint8_t* const buf = cq.buf;
    const std::uint32_t mask = cq.cqe_cnt - 1;
    const int shift = std::countr_zero(cq.cqe_cnt);  // the consumer index's lap is ci >> shift
    // The QP of the previous CQE of this burst: consecutive CQEs mostly share one. Safe to keep for the
    // burst: control destroys a QP only after the core reported it CLOSED, which happens after this returns.
    Qp* last = nullptr;
    while (got < want) {
      const auto* cqe = reinterpret_cast<const mlx5_cqe64*>(buf + (std::size_t{ci & mask} << 6));
      const std::uint8_t op_own = cqe->op_own;
      // The NIC's entry for this lap: a valid opcode and the owner bit of the lap (ci / cqe_cnt) parity.
      if ((op_own >> 4) == MLX5_CQE_INVALID || ((op_own ^ (ci >> shift)) & MLX5_CQE_OWNER_MASK) != 0) break;
      mlx5::from_device();  // the rest of the entry only after its owner bit
      ++ci;
      const std::uint32_t qpn = be32toh(cqe->sop_drop_qpn) & 0xffffff;
      if (last == nullptr || last->qp_num != qpn) [[unlikely]] {
        last = cq.qps.find_st(qpn);
        if (last == nullptr) [[unlikely]] {
          ++cq.stats.unknown_qp;
          continue;
        }
      }
      if (decode(cq, *last, *cqe, op_own, out[got])) out[got++].qp_num = qpn;
    }
    if (ci != cq.ci) {
      cq.ci = ci;
      cq.dbrec[mlx5::kCqSetCi] = htobe32(ci & 0xffffff);
    }
    return got;
  }

 private:
  // The control segment's place for a WQE of ds segments, its bookkeeping done; nullptr (and counted) when
  // it would overwrite a WQE the NIC has not finished with, or an earlier one of this turn was dropped (what
  // is dropped is always the tail, as FlushResult promises, even when a smaller WQE would still fit).
  static std::uint8_t* begin_wqe(Qp& q, std::uint64_t wr_id, std::uint32_t ds) noexcept {
    const std::uint32_t bbs = (ds + 3) / 4;
    const std::uint16_t used = static_cast<std::uint16_t>(static_cast<std::uint16_t>(q.sq_pi) - q.sq_ci);
    if (q.sends_dropped != 0 || used + bbs > q.sq_wqe_cnt) [[unlikely]] {
      ++q.sends_dropped;
      return nullptr;
    }
    const std::uint32_t idx = q.sq_pi & (q.sq_wqe_cnt - 1);
    q.sq_wrid[idx] = wr_id;
    q.sq_bbs[idx] = static_cast<std::uint16_t>(bbs);
    return q.sq_buf + (std::size_t{idx} << 6);
  }

  static void end_wqe(Qp& q, std::uint8_t* w, std::uint32_t opcode, std::uint32_t ds,
                      unsigned flags) noexcept {
    auto* c = reinterpret_cast<mlx5_wqe_ctrl_seg*>(w);
    c->opmod_idx_opcode = htobe32(((q.sq_pi & 0xffff) << 8) | opcode);
    c->qpn_ds = htobe32(q.qpn_shifted | ds);
    c->signature = 0;
    c->dci_stream_channel_id = 0;
    c->fm_ce_se = static_cast<std::uint8_t>(q.fence_next |
                                            ((flags & kSendSignaled) != 0 ? MLX5_WQE_CTRL_CQ_UPDATE : 0));
    c->imm = 0;
    q.fence_next = 0;
    q.last_ctrl = w;
    q.sq_pi += (ds + 3) / 4;
  }

  // The UMR's first BB after its control segment; its mkey mask says which fields of the mkey context the NIC
  // takes (a bind: the range and the access; an invalidation: only that the window is free again).
  static void set_umr_ctrl(std::uint8_t* w, bool bind) noexcept {
    constexpr std::uint64_t kInvalidateMask =
        MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY | MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN;
    constexpr std::uint64_t kBindMask =
        kInvalidateMask | MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN | MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR |
        MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE | MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ |
        MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE | MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC;
    auto* u = reinterpret_cast<mlx5_wqe_umr_ctrl_seg*>(w + sizeof(mlx5_wqe_ctrl_seg));
    std::memset(u, 0, sizeof(*u));
    // CHECK_FREE: a bind of a window still bound fails (rebinding only after the invalidation completed);
    // CHECK_QPN: only this QP may invalidate it. One KLM entry is one octoword pair, rounded up to 8 entries.
    u->flags = MLX5_WQE_UMR_CTRL_FLAG_INLINE | MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET |
               (bind ? MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE : MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN);
    u->klm_octowords = htobe16(bind ? 4 : 0);
    u->mkey_mask = htobe64(bind ? kBindMask : kInvalidateMask);
  }

  // ctrl.imm names the window (by the key it holds now); whatever follows waits for the UMR.
  static void end_umr(Qp& q, std::uint8_t* w, std::uint32_t ds, unsigned flags, std::uint32_t key) noexcept {
    end_wqe(q, w, MLX5_OPCODE_UMR, ds, flags);
    reinterpret_cast<mlx5_wqe_ctrl_seg*>(w)->imm = htobe32(key);
    q.fence_next = MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE;
  }

  // The BB n after the one at p, around the ring.
  static std::uint8_t* bb_after(Qp& q, std::uint8_t* p, std::uint32_t n) noexcept {
    const auto idx = static_cast<std::uint32_t>((p - q.sq_buf) >> 6) + n;
    return q.sq_buf + (std::size_t{idx & (q.sq_wqe_cnt - 1)} << 6);
  }

  static constexpr std::uint64_t kMaxWindowBytes = std::uint64_t{1} << 31;  // one KLM entry's reach

  static void set_data(std::uint8_t* seg, Segment s) noexcept {
    auto* d = reinterpret_cast<mlx5_wqe_data_seg*>(seg);
    d->byte_count = htobe32(s.len);
    d->lkey = htobe32(s.lkey);
    d->addr = htobe64(s.addr);
  }

  // n bytes to `dst` inside the SQ, continuing at the SQ's start past its end.
  static void copy_wrapping(Qp& q, std::uint8_t* dst, const std::uint8_t* src, std::uint32_t n) noexcept {
    std::uint8_t* const end = q.sq_buf + (std::size_t{q.sq_wqe_cnt} << 6);
    const std::size_t room = static_cast<std::size_t>(end - dst);
    if (n <= room) [[likely]] {
      std::memcpy(dst, src, n);
      return;
    }
    std::memcpy(dst, src, room);
    std::memcpy(q.sq_buf, src + room, n - room);
  }

  // One CQE of QP q into out; false when it is of a kind this backend never asks for (counted).
  static bool decode(Cq& cq, Qp& q, const mlx5_cqe64& cqe, std::uint8_t op_own, Completion& out) noexcept {
    const std::uint8_t opcode = op_own >> 4;
    switch (opcode) {
      case MLX5_CQE_REQ: {
        out.wr_id = sq_done(q, be16toh(cqe.wqe_counter));
        out.byte_len = be32toh(cqe.byte_cnt);
        out.status = CompletionStatus::kOk;
        out.device_status = IBV_WC_SUCCESS;
        return true;
      }
      case MLX5_CQE_RESP_WR_IMM:
      case MLX5_CQE_RESP_SEND:
      case MLX5_CQE_RESP_SEND_IMM:
      case MLX5_CQE_RESP_SEND_INV: {
        const std::uint32_t idx = rq_done(q);
        out.wr_id = q.rq_wrid[idx];
        out.byte_len = be32toh(cqe.byte_cnt);
        out.status = CompletionStatus::kOk;
        out.device_status = IBV_WC_SUCCESS;
        // Scatter-to-CQE (on by default in rdma-core): a small message's bytes are in the CQE's first 32
        // bytes, not in the buffer; put them where the receive said, as the provider does.
        if ((op_own & MLX5_INLINE_SCATTER_32) != 0) [[unlikely]] {
          scatter_from_cqe(cq, q, idx, cqe, out.byte_len);
        }
        return true;
      }
      case MLX5_CQE_REQ_ERR:
      case MLX5_CQE_RESP_ERR: {
        const auto& e = reinterpret_cast<const mlx5_err_cqe&>(cqe);
        out.wr_id = opcode == MLX5_CQE_REQ_ERR ? sq_done(q, be16toh(cqe.wqe_counter)) : q.rq_wrid[rq_done(q)];
        out.byte_len = 0;
        out.device_status = mlx5_syndrome_status(e.syndrome);
        out.status = e.syndrome == MLX5_CQE_SYNDROME_WR_FLUSH_ERR ? CompletionStatus::kFlushed
                                                                  : CompletionStatus::kError;
        return true;
      }
      default:
        ++cq.stats.unknown_opcode;
        return false;
    }
  }

  // The send WQE starting at `counter` completed (it and, unsignaled, every one before it): its wr_id, and
  // the SQ space up to its end is free again.
  static std::uint64_t sq_done(Qp& q, std::uint16_t counter) noexcept {
    const std::uint32_t idx = counter & (q.sq_wqe_cnt - 1);
    q.sq_ci = static_cast<std::uint16_t>(counter + q.sq_bbs[idx]);
    return q.sq_wrid[idx];
  }

  // The oldest posted receive completed (receives complete in order: no SRQ): its RQ index.
  static std::uint32_t rq_done(Qp& q) noexcept { return q.rq_tail++ & (q.rq_wqe_cnt - 1); }

  static void scatter_from_cqe(Cq& cq, Qp& q, std::uint32_t idx, const mlx5_cqe64& cqe,
                               std::uint32_t len) noexcept {
    ++cq.stats.inline_scatter;
    const auto* d =
        reinterpret_cast<const mlx5_wqe_data_seg*>(q.rq_buf + (std::size_t{idx} << q.rq_stride_shift));
    const std::uint32_t room = be32toh(d->byte_count);
    const std::uint32_t n = len < 32 ? len : 32;
    std::memcpy(reinterpret_cast<void*>(be64toh(d->addr)), &cqe, n < room ? n : room);
  }
};

}  // namespace rdmagate::dataplane

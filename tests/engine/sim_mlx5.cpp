// The simulated mlx5 NIC (sim_mlx5.hpp says what it plays and what it counts).
#include "tests/engine/sim_mlx5.hpp"

#include <endian.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <utility>

#include "dataplane/backend/first_receives.hpp"

namespace rdmagate::dataplane::fake {

namespace {

std::uint32_t load_be32(const std::uint8_t* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return be32toh(v);
}
std::uint64_t load_be64(const std::uint8_t* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return be64toh(v);
}

// What a NIC puts in an error CQE's vendor syndrome; the backend reports only the syndrome, so any value
// does.
constexpr std::uint8_t kVendorSyndrome = 0x68;

// An SQ of at most 2^15 BBs keeps every WQE counter difference unambiguous in 16 bits (rdma-core's limit
// too).
constexpr std::uint32_t kMaxRing = 1u << 15;

}  // namespace

bool mlx5_status_syndrome(std::uint32_t status, std::uint8_t* syndrome) noexcept {
  // The first syndrome mlx5_syndrome_status maps to `status`: exact for every status the backend can report.
  static const std::array<std::int16_t, 256> inverse = [] {
    std::array<std::int16_t, 256> t{};
    t.fill(-1);
    for (int s = 255; s >= 0; --s) {
      const ibv_wc_status st = mlx5_syndrome_status(static_cast<std::uint8_t>(s));
      if (static_cast<std::uint32_t>(st) < t.size())
        t[static_cast<std::size_t>(st)] = static_cast<std::int16_t>(s);
    }
    return t;
  }();
  if (status >= inverse.size() || inverse[status] < 0) return false;
  *syndrome = static_cast<std::uint8_t>(inverse[status]);
  return true;
}

// ---- CQ and QP ---------------------------------------------------------------------------------------

SimMlx5Cq::~SimMlx5Cq() {
  if (sim_ != nullptr) std::erase(sim_->cqs_, this);
}

bool SimMlx5Cq::before_poll_st() noexcept {
  FakeCq& s = *shadow_;
  if (s.polls_to_stop_ != 0 && --s.polls_to_stop_ == 0) s.stop_->store(true, std::memory_order_release);
  if (s.fail_polls_ != 0) {
    --s.fail_polls_;
    ++s.stats_.failed_polls;
    return true;
  }
  if (sim_ != nullptr) {
    sim_->sync();
    sim_->deliver();
  }
  return false;
}

SimMlx5Qp::~SimMlx5Qp() {
  if (sim_ != nullptr) std::erase(sim_->qps_, this);
}

// ---- setup half --------------------------------------------------------------------------------------

SimMlx5Device::~SimMlx5Device() {
  for (SimMlx5Qp* q : qps_) q->sim_ = nullptr;
  for (SimMlx5Cq* c : cqs_) c->sim_ = nullptr;
}

std::unique_ptr<BackendCq> SimMlx5Device::create_cq(int cqe, std::uint32_t max_qps, std::string* error) {
  if (cqe <= 0 || static_cast<std::uint32_t>(cqe) >= kMaxRing * 8) {
    *error = "sim-mlx5 create_cq: " + std::to_string(cqe) + " entries";
    return nullptr;
  }
  auto cq = std::make_unique<SimMlx5Cq>(max_qps);
  // rdma-core's mlx5_create_cq: a power of two above the entries asked (one entry always stays empty).
  const std::uint32_t n = std::bit_ceil(static_cast<std::uint32_t>(cqe) + 1);
  cq->ring_ = std::make_unique<SimMlx5Cq::Cqe[]>(n);
  for (std::uint32_t i = 0; i < n; ++i)
    cq->ring_[i].b[63] = MLX5_CQE_INVALID << 4;  // as rdma-core initialises
  cq->buf = cq->ring_[0].b;
  cq->cqe_cnt = n;
  cq->dbrec = cq->db_;
  cq->shadow_ = model_.make_cq(cqe);
  cq->sim_ = this;
  cqs_.push_back(cq.get());
  return cq;
}

std::unique_ptr<BackendMr> SimMlx5Device::register_memory(void* addr, std::size_t len, int access,
                                                          std::string* error) {
  return model_.register_memory(addr, len, access, error);
}

std::unique_ptr<BackendQp> SimMlx5Device::create_qp(rdma_cm_id*, BackendCq& bcq, const QpCaps& caps,
                                                    QpInfo* out, std::string* error) {
  auto& cq = static_cast<SimMlx5Cq&>(bcq);
  if (caps.max_send_wr == 0 || caps.max_recv_wr == 0) {
    *error = "sim-mlx5 create_qp: empty queue";
    return nullptr;
  }
  if (caps.windows != 0 && !model_.type2_windows()) {
    *error = "sim-mlx5 create_qp: no type-2 memory windows";
    return nullptr;
  }
  // rdma-core's mlx5_calc_sq_size: every WQE slot is as large as the largest WQE this QP may post (here an
  // inline SEND of max_inline bytes, a READ/WRITE with one fragment or, with windows, a bind), the ring a
  // power of two of those. rdma-core reserves a bind's room in every RC QP, windows or not (and a data
  // segment more); the least that holds what the backend posts is the stricter test of its ring arithmetic.
  const std::uint32_t inl = std::min(caps.max_inline_data, opt_.max_inline);
  const std::uint32_t ds_max = std::max<std::uint32_t>(caps.windows != 0 ? Mlx5Backend::kBindDs : 3,
                                                       inl != 0 ? 1 + (4 + inl + 15) / 16 : 1);
  const std::uint32_t wqe_bbs = (ds_max + 3) / 4;
  const std::uint64_t want_bbs = std::uint64_t{caps.max_send_wr} * wqe_bbs;
  if (want_bbs > kMaxRing || caps.max_recv_wr > kMaxRing) {
    *error = "sim-mlx5 create_qp: queues beyond " + std::to_string(kMaxRing) + " entries";
    return nullptr;
  }
  const std::uint32_t sq_bbs = std::bit_ceil(static_cast<std::uint32_t>(want_bbs));
  const std::uint32_t rq_cnt = std::bit_ceil(caps.max_recv_wr);
  const std::uint32_t shift = opt_.rq_stride_shift;

  auto q = std::make_unique<SimMlx5Qp>();
  q->sq_ = std::make_unique<SimMlx5Qp::Bb[]>(sq_bbs);
  q->rq_ = std::make_unique<std::uint8_t[]>(std::size_t{rq_cnt} << shift);
  QpCaps shadow_caps;
  shadow_caps.max_send_wr = sq_bbs / wqe_bbs;
  shadow_caps.max_recv_wr = rq_cnt;
  shadow_caps.max_inline_data = inl;
  shadow_caps.windows = caps.windows;
  QpInfo info;
  q->shadow_ = model_.make_qp(cq.model(), shadow_caps, &info);
  for (const FakeQp::Window& w : q->shadow_->windows()) q->window_rkey.push_back(w.rkey);
  q->qp_num = info.qp_num;
  q->sq_buf = q->sq_[0].b;
  q->sq_wqe_cnt = sq_bbs;
  q->rq_buf = q->rq_.get();
  q->rq_wqe_cnt = rq_cnt;
  q->rq_stride_shift = shift;
  q->dbrec = q->db_;
  q->bf_reg = q->bf_;
  q->bf_size = 256;
  q->max_inline = inl;
  q->qpn_shifted = q->qp_num << 8;
  q->sq_wrid.assign(sq_bbs, 0);
  q->sq_bbs.assign(sq_bbs, 0);
  q->rq_wrid.assign(rq_cnt, 0);
  q->nic_bbs_.assign(sq_bbs, 0);
  q->nic_len_.assign(sq_bbs, 0);
  q->nic_op_.assign(sq_bbs, 0);
  q->rq_addr_.assign(rq_cnt, 0);
  q->rq_room_.assign(rq_cnt, 0);
  q->cq = &cq;
  if (!cq.qps.insert(q.get())) {
    *error = "sim-mlx5 create_qp: the CQ's QP table is full";
    return nullptr;
  }
  q->sim_ = this;
  qps_.push_back(q.get());
  if (out != nullptr) {
    out->qp_num = q->qp_num;
    out->max_send_wr = shadow_caps.max_send_wr;
    out->max_recv_wr = rq_cnt;
    out->max_inline_data = inl;
  }
  return q;
}

std::uint32_t SimMlx5Device::post_receives(BackendQp& qp, std::span<const RecvPost> recvs,
                                           std::string* error) {
  auto& q = static_cast<SimMlx5Qp&>(qp);
  const std::uint32_t posted =
      post_first_receives<Mlx5Backend>(q, recvs, q.rq_wqe_cnt - (q.rq_head - q.rq_tail), error);
  take_receives(q);  // a NIC sees the record at once; a peer's first SEND must find these
  return posted;
}

int SimMlx5Device::qp_to_err(BackendQp& qp) noexcept {
  sync();  // what the core rang before the transition flushes with the rest
  return model_.qp_to_err(*static_cast<SimMlx5Qp&>(qp).shadow_);
}

// ---- the NIC -----------------------------------------------------------------------------------------

SimMlx5Qp* SimMlx5Device::find(std::uint32_t qpn) const noexcept {
  for (SimMlx5Qp* q : qps_) {
    if (q->qp_num == qpn) return q;
  }
  return nullptr;
}

void SimMlx5Device::drop_next_doorbell(BackendQp& qp) noexcept {
  static_cast<SimMlx5Qp&>(qp).drop_next_ = true;
}

void SimMlx5Device::kick(BackendQp& qp) noexcept {
  take_sends(static_cast<SimMlx5Qp&>(qp), false);
}

bool SimMlx5Device::behind(const BackendQp& qp) const noexcept {
  const auto& q = static_cast<const SimMlx5Qp&>(qp);
  return !q.broken_ && (be32toh(q.db_[MLX5_SND_DBR]) & 0xffff) != q.sq_next_;
}

void SimMlx5Device::sync() noexcept {
  for (SimMlx5Cq* cq : cqs_) reap(*cq);  // first: the space it frees is what the new WQEs may reuse
  for (SimMlx5Qp* q : qps_) {
    take_receives(*q);
    take_sends(*q, true);
  }
}

void SimMlx5Device::deliver() noexcept {
  for (SimMlx5Cq* cq : cqs_) {
    FakeCq& s = *cq->shadow_;
    while (s.delivered_ < s.entries_.size()) {
      if (cq->produced_ - cq->consumed_ >= cq->cqe_cnt) {
        ++stats_.cq_overruns;
        break;
      }
      write_cqe(*cq, s.entries_[s.delivered_]);
      ++s.delivered_;
    }
  }
}

// The CQEs the core took since the last look: their shadow entries go (the model reclaims queue slots as a
// polled fake CQE does), and the SQ and RQ space they name is free again.
void SimMlx5Device::reap(SimMlx5Cq& cq) noexcept {
  const std::uint32_t ci = be32toh(cq.db_[mlx5::kCqSetCi]) & 0xffffff;
  const std::uint32_t n = (ci - cq.consumed_) & 0xffffff;
  if (n == 0) return;
  if (n > cq.produced_ - cq.consumed_) {
    ++stats_.bad_ci;
    return;
  }
  FakeCq& s = *cq.shadow_;
  for (std::uint32_t i = 0; i < n; ++i) {
    const FakeCq::Entry e = s.entries_.front();
    s.entries_.pop_front();
    --s.delivered_;
    ++s.stats_.polled;
    model_.on_polled_st(e);
    SimMlx5Qp* q = e.qp_num != 0 ? find(e.qp_num) : nullptr;
    if (q == nullptr) continue;
    if (e.send) {
      q->sq_freed_ = static_cast<std::uint16_t>(e.wqe_index + q->nic_bbs_[e.wqe_index & (q->sq_wqe_cnt - 1)]);
    } else {
      ++q->rq_freed_;
    }
  }
  cq.consumed_ += n;
}

void SimMlx5Device::take_receives(SimMlx5Qp& q) noexcept {
  const std::uint16_t pi = be32toh(q.db_[MLX5_RCV_DBR]) & 0xffff;
  const auto fresh = static_cast<std::uint16_t>(pi - static_cast<std::uint16_t>(q.rq_next_));
  if (fresh == 0) return;
  if (static_cast<std::uint16_t>(pi - static_cast<std::uint16_t>(q.rq_freed_)) > q.rq_wqe_cnt) {
    ++stats_.rq_overwrite;
  }
  std::vector<FakeWr> batch;
  batch.reserve(fresh);
  const std::uint32_t mask = q.rq_wqe_cnt - 1;
  for (std::uint16_t k = 0; k < fresh; ++k) {
    const std::uint32_t slot = q.rq_next_ & mask;
    const std::uint8_t* d = q.rq_.get() + (std::size_t{slot} << q.rq_stride_shift);
    FakeWr w;
    w.op = WrOp::kRecv;
    w.wr_id = q.rq_wrid[slot];
    w.local.len = load_be32(d);
    w.local.lkey = load_be32(d + 4);
    w.local.addr = load_be64(d + 8);
    w.wqe_index = q.rq_next_ & 0xffff;
    // A zero byte count means 2 GiB to the NIC; a stride with room for more segments must end at one whose
    // lkey is invalid.
    if (w.local.len == 0 || (q.rq_stride_shift > 4 && load_be32(d + 16 + 4) != MLX5_INVALID_LKEY)) {
      ++stats_.bad_recv;
    }
    q.rq_addr_[slot] = w.local.addr;
    q.rq_room_[slot] = w.local.len;
    batch.push_back(std::move(w));
    ++q.rq_next_;
  }
  stats_.recv_wqes += batch.size();
  stats_.model_refused += model_.post_st(*q.shadow_, batch, Queue::kRecv);
}

// from_register: a doorbell (the UAR write is what tells the NIC to look); else kick().
void SimMlx5Device::take_sends(SimMlx5Qp& q, bool from_register) noexcept {
  std::uint64_t reg[2] = {0, 0};
  if (from_register) {
    std::memcpy(&reg[0], q.bf_, 8);
    std::memcpy(&reg[1], q.bf_ + 256, 8);
    if ((reg[0] | reg[1]) == 0) return;
    std::memset(q.bf_, 0, 8);  // the backend only ever writes it: zero says "no doorbell since"
    std::memset(q.bf_ + 256, 0, 8);
    if (q.drop_next_) {
      q.drop_next_ = false;
      ++stats_.dropped_doorbells;
      return;
    }
    ++stats_.doorbells;
  }
  if (q.broken_) return;
  const std::uint16_t pi = be32toh(q.db_[MLX5_SND_DBR]) & 0xffff;
  if (pi == q.sq_next_) {
    if (from_register) ++stats_.bad_doorbell;  // rung with nothing new behind the record
    return;
  }
  if (static_cast<std::uint16_t>(pi - q.sq_freed_) > q.sq_wqe_cnt) ++stats_.sq_overwrite;
  std::vector<FakeWr> batch;
  std::uint16_t last = q.sq_next_;
  while (q.sq_next_ != pi) {
    FakeWr w;
    std::uint16_t bbs = 0;
    if (!parse_send(q, q.sq_next_, pi, w, &bbs)) {
      q.broken_ = true;
      break;
    }
    last = q.sq_next_;
    q.sq_next_ = static_cast<std::uint16_t>(q.sq_next_ + bbs);
    batch.push_back(std::move(w));
  }
  if (from_register && !q.broken_) {
    // The register holds the newest WQE's first 8 bytes, in whichever half the backend's turn put it.
    std::uint64_t want;
    std::memcpy(&want, q.sq_[last & (q.sq_wqe_cnt - 1)].b, 8);
    if (reg[0] != want && reg[1] != want) ++stats_.bad_doorbell;
  }
  stats_.send_wqes += batch.size();
  stats_.model_refused += model_.post_st(*q.shadow_, batch, Queue::kSend);
}

// The WQE at counter `at` (the record is at `limit`) into `w`; false (counted) when the NIC cannot run it.
bool SimMlx5Device::parse_send(SimMlx5Qp& q, std::uint16_t at, std::uint16_t limit, FakeWr& w,
                               std::uint16_t* bbs) noexcept {
  const std::uint32_t mask = q.sq_wqe_cnt - 1;
  const std::uint32_t slot = at & mask;
  // Byte b of the WQE: its BBs follow each other around the ring.
  const auto byte_at = [&](std::uint32_t b) { return q.sq_[(slot + b / 64) & mask].b + b % 64; };
  const auto bad = [&] {
    ++stats_.bad_wqe;
    return false;
  };
  const std::uint8_t* c = q.sq_[slot].b;
  const std::uint32_t w0 = load_be32(c);
  const std::uint32_t w1 = load_be32(c + 4);
  const std::uint32_t opcode = w0 & 0xff;
  const std::uint32_t ds = w1 & 0x3f;
  if ((w1 >> 8) != q.qp_num) {
    ++stats_.bad_qpn;
    return false;
  }
  if (((w0 >> 8) & 0xffff) != at || (w0 >> 24) != 0 || ds == 0 || (w1 & 0xc0) != 0) return bad();
  const auto n_bbs = static_cast<std::uint16_t>((ds + 3) / 4);
  if (n_bbs > static_cast<std::uint16_t>(limit - at)) return bad();  // runs past the doorbell record
  // No signature, stream id or solicited event; a fence only right after a UMR, and there always; an
  // immediate only as a UMR's window key.
  const std::uint32_t imm = load_be32(c + 12);
  if (c[8] != 0 || c[9] != 0 || c[10] != 0 || (c[11] & ~MLX5_WQE_CTRL_CQ_UPDATE) != q.fence_next_ ||
      (imm != 0 && opcode != MLX5_OPCODE_UMR)) {
    return bad();
  }
  w.signaled = (c[11] & MLX5_WQE_CTRL_CQ_UPDATE) != 0;
  w.wqe_index = at;
  w.wr_id = q.sq_wrid[slot];
  const auto data_seg = [&](const std::uint8_t* d) {
    w.local.len = load_be32(d);
    w.local.lkey = load_be32(d + 4);
    w.local.addr = load_be64(d + 8);
    return w.local.len != 0;  // zero means 2 GiB to the NIC: the backend never means it
  };
  switch (opcode) {
    case MLX5_OPCODE_SEND: {
      w.op = WrOp::kSend;
      if (ds == 1) break;  // no segment: a zero-length SEND
      const std::uint32_t hdr = load_be32(c + 16);
      if ((hdr & MLX5_INLINE_SEG) != 0) {
        const std::uint32_t n = hdr & ~static_cast<std::uint32_t>(MLX5_INLINE_SEG);
        if (n == 0 || n > q.max_inline || ds != 1 + (4 + n + 15) / 16) return bad();
        w.is_inline = true;
        w.local.len = n;
        w.inline_data.resize(n);
        for (std::uint32_t i = 0; i < n; ++i) w.inline_data[i] = *byte_at(20 + i);
      } else if (ds != 2 || !data_seg(c + 16)) {
        return bad();
      }
      break;
    }
    case MLX5_OPCODE_RDMA_WRITE:
    case MLX5_OPCODE_RDMA_READ:
      w.op = opcode == MLX5_OPCODE_RDMA_READ ? WrOp::kRead : WrOp::kWrite;
      if (ds != 2 && ds != 3) return bad();
      w.remote_addr = load_be64(c + 16);
      w.rkey = load_be32(c + 24);
      if (load_be32(c + 28) != 0) return bad();
      if (ds == 3 && !data_seg(c + 32)) return bad();
      break;
    case MLX5_OPCODE_UMR:
      if (!parse_umr(q, c, byte_at(64), ds == Mlx5Backend::kBindDs ? byte_at(128) : nullptr, ds, imm, w)) {
        return bad();
      }
      ++stats_.umr_wqes;
      break;
    default:
      return bad();
  }
  q.fence_next_ = opcode == MLX5_OPCODE_UMR ? MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE : 0;
  stats_.send_bbs += n_bbs;
  if (w.is_inline) ++stats_.inline_wqes;
  if (n_bbs > 1) ++stats_.multi_bb_wqes;
  if (slot + n_bbs > q.sq_wqe_cnt) ++stats_.wrapped_wqes;
  q.nic_bbs_[slot] = n_bbs;
  q.nic_len_[slot] = w.local.len;
  q.nic_op_[slot] = static_cast<std::uint8_t>(opcode);
  *bbs = n_bbs;
  return true;
}

// A window bind (ds 12: control, UMR control, mkey context, one KLM entry) or local invalidation (ds 8: no
// KLM), every field as rdma-core's set_bind_wr writes it for a type-2 window of this QP and every reserved
// byte zero (the backend clears them). `c` is the WQE's first BB, `m` its second, `k` its third (binds).
bool SimMlx5Device::parse_umr(SimMlx5Qp& q, const std::uint8_t* c, const std::uint8_t* m,
                              const std::uint8_t* k, std::uint32_t ds, std::uint32_t key,
                              FakeWr& w) noexcept {
  const bool bind = ds == Mlx5Backend::kBindDs;
  if (!bind && ds != Mlx5Backend::kInvalidateDs) return false;
  const auto zero = [](const std::uint8_t* p, std::size_t n) {
    return std::all_of(p, p + n, [](std::uint8_t b) { return b == 0; });
  };
  // The window the key names: by its index (the key without its key byte), among this QP's only.
  const std::vector<FakeQp::Window>& wins = q.shadow_->windows();
  const auto it = std::find_if(wins.begin(), wins.end(),
                               [&](const FakeQp::Window& x) { return (x.rkey & ~0xffu) == (key & ~0xffu); });
  if (it == wins.end()) return false;
  // The UMR control segment: 48 bytes after the 16 of the WQE's control segment.
  const std::uint8_t* u = c + 16;
  // Stated as numbers, not as the backend's expressions, so that a wrong constant there is caught here:
  // the mkey mask's FREE (bit 29), QPN (14) and MKEY (13), for a bind also the four access bits (18-21),
  // START_ADDR (6) and LEN (0); the flags INLINE (0x80) and TRNSLATION_OFFSET (0x10) with CHECK_FREE (0x20)
  // for a bind or CHECK_QPN (0x08) for an invalidation.
  constexpr std::uint64_t kInvMask = 0x20006000, kBindMask = 0x203c6041;
  const std::uint8_t flags = bind ? 0xb0 : 0x98;
  std::uint16_t octowords;
  std::memcpy(&octowords, u + 4, 2);
  if (u[0] != flags || !zero(u + 1, 3) || be16toh(octowords) != (bind ? 4 : 0) || u[6] != 0 || u[7] != 0 ||
      load_be64(u + 8) != (bind ? kBindMask : kInvMask) || !zero(u + 16, 32)) {
    return false;
  }
  // The mkey context: free, -, access, -, qpn_mkey, -, pd, start, len, the rest (offsets as mlx5dv.h's).
  const std::uint32_t qpn_mkey = load_be32(m + 4);
  if (m[1] != 0 || m[3] != 0 || !zero(m + 8, 8) || !zero(m + 32, 32)) return false;
  w.window = static_cast<std::uint32_t>(it - wins.begin());
  if (!bind) {
    if (m[0] != MLX5_WQE_MKEY_CONTEXT_FREE || m[2] != 0 || qpn_mkey != 0xffffff00u || !zero(m + 16, 16)) {
      return false;
    }
    w.op = WrOp::kLocalInv;
    w.rkey = key;
    return true;
  }
  constexpr std::uint8_t kRead = MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ;
  constexpr std::uint8_t kWrite =
      MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE | MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE;
  const std::uint32_t len = load_be32(k);
  const std::uint64_t addr = load_be64(k + 8);
  if (m[0] != 0 || (m[2] != kRead && m[2] != kWrite) || (qpn_mkey >> 8) != q.qp_num ||
      load_be64(m + 16) != addr || load_be64(m + 24) != len || len == 0 || !zero(k + 16, 48)) {
    return false;
  }
  w.op = WrOp::kBind;
  w.rkey = (key & ~0xffu) | (qpn_mkey & 0xffu);
  w.bind_addr = addr;
  w.bind_len = len;
  w.bind_lkey = load_be32(k + 4);
  w.bind_write = m[2] == kWrite;
  return true;
}

void SimMlx5Device::write_cqe(SimMlx5Cq& cq, const FakeCq::Entry& e) noexcept {
  std::uint8_t* p = cq.ring_[cq.produced_ & (cq.cqe_cnt - 1)].b;
  std::memset(p, 0, 63);
  const std::uint8_t owner = (cq.produced_ & cq.cqe_cnt) != 0 ? 1 : 0;  // the lap's parity
  SimMlx5Qp* q = e.qp_num != 0 ? find(e.qp_num) : nullptr;
  std::uint32_t qpn = e.qp_num & 0xffffff;
  const auto counter = static_cast<std::uint16_t>(e.wqe_index);
  if (e.send && q != nullptr) qpn |= std::uint32_t{q->nic_op_[counter & (q->sq_wqe_cnt - 1)]} << 24;
  std::uint8_t opcode;
  std::uint8_t flags = 0;
  if (e.wc.device_status == IBV_WC_SUCCESS) {
    auto* c = reinterpret_cast<mlx5_cqe64*>(p);
    std::uint32_t len = e.wc.byte_len;
    if (e.send) {
      opcode = MLX5_CQE_REQ;
      len = q != nullptr ? q->nic_len_[counter & (q->sq_wqe_cnt - 1)] : 0;
    } else {
      opcode = MLX5_CQE_RESP_SEND;
      if (q != nullptr && len != 0 && len <= scatter_max_) {
        // The message is in the CQE's first 32 bytes and never reached the buffer: what the buffer holds is
        // not it (every byte differs), so only the backend's copy makes the receive right.
        const std::uint32_t slot = counter & (q->rq_wqe_cnt - 1);
        auto* buf = reinterpret_cast<std::uint8_t*>(static_cast<std::uintptr_t>(q->rq_addr_[slot]));
        std::memcpy(p, buf, len);
        for (std::uint32_t i = 0; i < len; ++i) buf[i] = static_cast<std::uint8_t>(~buf[i]);
        flags = MLX5_INLINE_SCATTER_32;
        ++stats_.scattered;
      }
    }
    c->byte_cnt = htobe32(len);
    c->sop_drop_qpn = htobe32(qpn);
    c->wqe_counter = htobe16(counter);
  } else {
    auto* c = reinterpret_cast<mlx5_err_cqe*>(p);
    opcode = e.send ? MLX5_CQE_REQ_ERR : MLX5_CQE_RESP_ERR;
    std::uint8_t syndrome = 0;
    if (!mlx5_status_syndrome(e.wc.device_status, &syndrome)) ++stats_.unencodable;
    c->syndrome = syndrome;
    c->vendor_err_synd = kVendorSyndrome;
    c->s_wqe_opcode_qpn = htobe32(qpn);
    c->wqe_counter = htobe16(counter);
  }
  // The owner byte last: the core reads the rest only after it (mlx5::from_device on its side).
  std::atomic_thread_fence(std::memory_order_release);
  p[63] = static_cast<std::uint8_t>(opcode << 4 | flags | owner);
  ++cq.produced_;
  ++stats_.cqes;
}

}  // namespace rdmagate::dataplane::fake

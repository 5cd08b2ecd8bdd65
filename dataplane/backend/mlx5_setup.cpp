// Setup half of the mlx5 direct-verbs backend (control thread only).
#include "dataplane/backend/mlx5_setup.hpp"

#include <infiniband/mlx5dv.h>
#include <rdma/rdma_cma.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dataplane/backend/first_receives.hpp"
#include "dataplane/backend/mlx5_datapath.hpp"
#include "dataplane/backend/verbs_setup.hpp"

namespace rdmagate::dataplane {

namespace {

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%x", v);
  return buf;
}

class Mlx5DvCq final : public Mlx5Cq {
 public:
  explicit Mlx5DvCq(std::uint32_t max_qps) : Mlx5Cq(max_qps) {}
  ~Mlx5DvCq() override {
    if (cq != nullptr && ibv_destroy_cq(cq) != 0) std::fprintf(stderr, "rdmagate: ibv_destroy_cq: %m\n");
  }
  ibv_cq* cq = nullptr;
};

// Its destructor runs before Mlx5Qp's: the QP is gone (no CQE of it can arrive any more) before the CQ's
// table stops naming it.
class Mlx5DvQp final : public Mlx5Qp {
 public:
  ~Mlx5DvQp() override {
    // The windows first: a bound type-2 window holds its QP.
    for (ibv_mw* mw : windows) {
      if (ibv_dealloc_mw(mw) != 0) std::fprintf(stderr, "rdmagate: ibv_dealloc_mw: %m\n");
    }
    if (id != nullptr && id->qp != nullptr) rdma_destroy_qp(id);
  }
  ibv_qp* qp = nullptr;
  rdma_cm_id* id = nullptr;      // the QP is the id's (rdma_create_qp)
  std::vector<ibv_mw*> windows;  // QpCaps::windows; the core binds them with UMR WQEs by key (window_rkey)
};

class Mlx5Device final : public DeviceBackend {
 public:
  Mlx5Device(ibv_context* ctx, ibv_pd* pd) : ctx_(ctx), pd_(pd), type2_windows_(verbs_type2_windows(ctx)) {}

  BackendKind kind() const noexcept override { return BackendKind::kMlx5; }
  const char* name() const noexcept override { return Mlx5Backend::kName; }

  std::unique_ptr<BackendCq> create_cq(int cqe, std::uint32_t max_qps, std::string* error) override {
    ibv_cq_init_attr_ex ca{};
    ca.cqe = static_cast<std::uint32_t>(cqe);
    // The core parses 64-byte CQEs one by one: the size is pinned (MLX5_CQE_SIZE=128 in the environment would
    // otherwise change it) and the compression mask is left out, so the NIC never writes mini-CQE arrays.
    mlx5dv_cq_init_attr da{};
    da.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
    da.cqe_size = 64;
    ibv_cq_ex* cqx = mlx5dv_create_cq(ctx_, &ca, &da);
    if (cqx == nullptr) {
      *error = "mlx5dv_create_cq of " + std::to_string(cqe) + " entries: " + std::strerror(errno);
      return nullptr;
    }
    auto cq = std::make_unique<Mlx5DvCq>(max_qps);
    cq->cq = ibv_cq_ex_to_cq(cqx);
    cq->verbs_cq = cq->cq;
    // Besides the ring, this marks the CQ as the core's: the provider's QP destruction no longer walks it
    // from its own consumer index (which never moves here) to drop the dead QP's entries.
    mlx5dv_cq dv{};
    mlx5dv_obj obj{};
    obj.cq.in = cq->cq;
    obj.cq.out = &dv;
    if (const int rc = mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ); rc != 0) {
      *error = std::string("mlx5dv_init_obj of a cq: ") + std::strerror(rc < 0 ? -rc : rc);
      return nullptr;
    }
    if (dv.cqe_size != 64) {
      *error = "mlx5 cq " + hex(dv.cqn) + " has " + std::to_string(dv.cqe_size) +
               "-byte CQEs; the mlx5dv backend parses 64-byte ones";
      return nullptr;
    }
    if (!std::has_single_bit(dv.cqe_cnt)) {
      *error = "mlx5 cq " + hex(dv.cqn) + " has " + std::to_string(dv.cqe_cnt) +
               " entries, not a power of two (the core indexes the ring with a mask)";
      return nullptr;
    }
    cq->buf = static_cast<std::uint8_t*>(dv.buf);
    cq->cqe_cnt = dv.cqe_cnt;
    cq->dbrec = dv.dbrec;
    return cq;
  }

  std::unique_ptr<BackendMr> register_memory(void* addr, std::size_t len, int access,
                                             std::string* error) override {
    return register_verbs_memory(pd_, addr, len, access, error);
  }

  std::unique_ptr<BackendQp> create_qp(rdma_cm_id* id, BackendCq& cq, const QpCaps& caps, QpInfo* out,
                                       std::string* error) override {
    auto& mcq = static_cast<Mlx5DvCq&>(cq);
    // The same QP the verbs backend makes, so that both backends get the same depths and inline size from a
    // device and the config checks (probe_max_inline) hold for either.
    const std::optional<ibv_qp_cap> granted = create_rc_qp(id, pd_, mcq.cq, caps, error);
    if (!granted) return nullptr;
    // Owned from here: every error return below destroys the QP again.
    auto q = std::make_unique<Mlx5DvQp>();
    q->id = id;
    q->qp = id->qp;
    q->qp_num = id->qp->qp_num;

    mlx5dv_qp dv{};
    mlx5dv_obj obj{};
    obj.qp.in = q->qp;
    obj.qp.out = &dv;
    if (const int rc = mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP); rc != 0) {
      *error = "mlx5dv_init_obj of qp " + hex(q->qp_num) + ": " + std::strerror(rc < 0 ? -rc : rc);
      return nullptr;
    }
    // What the hot path's index arithmetic assumes (masks, 64-byte basic blocks, a shift for the RQ stride).
    if (dv.sq.stride != MLX5_SEND_WQE_BB || !std::has_single_bit(dv.sq.wqe_cnt)) {
      *error = "mlx5 qp " + hex(q->qp_num) + ": send queue of " + std::to_string(dv.sq.wqe_cnt) + " x " +
               std::to_string(dv.sq.stride) + "-byte blocks; the mlx5dv backend needs a power of two of " +
               std::to_string(MLX5_SEND_WQE_BB) + "-byte ones";
      return nullptr;
    }
    if (!std::has_single_bit(dv.rq.wqe_cnt) || !std::has_single_bit(dv.rq.stride) || dv.rq.stride < 16) {
      *error = "mlx5 qp " + hex(q->qp_num) + ": receive queue of " + std::to_string(dv.rq.wqe_cnt) + " x " +
               std::to_string(dv.rq.stride) +
               "-byte entries; the mlx5dv backend needs powers of two (and room for one data segment)";
      return nullptr;
    }
    q->sq_buf = static_cast<std::uint8_t*>(dv.sq.buf);
    q->sq_wqe_cnt = dv.sq.wqe_cnt;
    q->rq_buf = static_cast<std::uint8_t*>(dv.rq.buf);
    q->rq_wqe_cnt = dv.rq.wqe_cnt;
    q->rq_stride_shift = static_cast<std::uint32_t>(std::countr_zero(dv.rq.stride));
    q->dbrec = dv.dbrec;
    q->bf_reg = static_cast<std::uint8_t*>(dv.bf.reg);
    q->bf_size = dv.bf.size;
    q->max_inline = granted->max_inline_data;
    q->qpn_shifted = q->qp_num << 8;
    q->sq_wrid.assign(q->sq_wqe_cnt, 0);
    q->sq_bbs.assign(q->sq_wqe_cnt, 0);
    q->rq_wrid.assign(q->rq_wqe_cnt, 0);
    // rdma-core sizes every RC QP's WQE slots to hold a bind (its sq_overhead), so the window WQEs fit the
    // send queue the core accounts for in work requests.
    if (!alloc_type2_windows(ctx_, pd_, type2_windows_, caps.windows, &q->windows, error)) return nullptr;
    for (const ibv_mw* mw : q->windows) q->window_rkey.push_back(mw->rkey);
    q->cq = &mcq;
    // Last: the core may find the QP in the table as soon as it is in (its first CQE can follow the first
    // receive post), so every field above is written before the release store that publishes it.
    if (!mcq.qps.insert(q.get())) {
      q->cq = nullptr;  // not in the table: nothing for ~Mlx5Qp to take out
      *error = "mlx5 qp " + hex(q->qp_num) + ": more QPs than the CQ was created for";
      return nullptr;
    }

    out->qp_num = q->qp_num;
    out->max_send_wr = granted->max_send_wr;
    out->max_recv_wr = granted->max_recv_wr;
    out->max_inline_data = granted->max_inline_data;
    return q;
  }

  std::uint32_t post_receives(BackendQp& qp, std::span<const RecvPost> recvs, std::string* error) override {
    auto& q = static_cast<Mlx5DvQp&>(qp);
    return post_first_receives<Mlx5Backend>(q, recvs, q.rq_wqe_cnt - (q.rq_head - q.rq_tail), error);
  }

  std::uint32_t max_cqe() const noexcept override { return verbs_max_cqe(ctx_); }
  bool type2_windows() const noexcept override { return type2_windows_; }

  int qp_to_err(BackendQp& qp) noexcept override { return verbs_qp_to_err(static_cast<Mlx5DvQp&>(qp).qp); }

 private:
  ibv_context* ctx_;
  ibv_pd* pd_;
  bool type2_windows_;
};

}  // namespace

bool Mlx5Backend::supports(ibv_context* ctx) noexcept {
  return ctx != nullptr && mlx5dv_is_supported(ctx->device);
}

std::unique_ptr<DeviceBackend> Mlx5Backend::make_device(ibv_context* ctx, ibv_pd* pd) {
  return make_mlx5_device(ctx, pd);
}

// The QPs are verbs-created (rdma_create_qp), so the provider grants them what it grants any RC QP.
std::optional<std::uint32_t> Mlx5Backend::probe_max_inline(ibv_context* ctx, std::uint32_t want) {
  return verbs_probe_max_inline(ctx, want);
}

std::unique_ptr<DeviceBackend> make_mlx5_device(ibv_context* ctx, ibv_pd* pd) {
  return std::make_unique<Mlx5Device>(ctx, pd);
}

}  // namespace rdmagate::dataplane

// Setup half of the generic verbs backend (control thread only).
#include "dataplane/backend/verbs_setup.hpp"

#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dataplane/backend/first_receives.hpp"
#include "dataplane/backend/verbs_datapath.hpp"

namespace rdmagate::dataplane {

VerbsQp::~VerbsQp() {
  // The windows first: a bound type-2 window holds its QP.
  for (ibv_mw* mw : windows) {
    if (ibv_dealloc_mw(mw) != 0) std::fprintf(stderr, "rdmagate: ibv_dealloc_mw: %m\n");
  }
  if (id != nullptr && id->qp != nullptr) rdma_destroy_qp(id);
}

VerbsCq::~VerbsCq() {
  if (cq != nullptr && ibv_destroy_cq(cq) != 0) std::fprintf(stderr, "rdmagate: ibv_destroy_cq: %m\n");
}

VerbsSrq::~VerbsSrq() {
  if (srq != nullptr && ibv_destroy_srq(srq) != 0) std::fprintf(stderr, "rdmagate: ibv_destroy_srq: %m\n");
}

namespace {

class VerbsMr final : public BackendMr {
 public:
  explicit VerbsMr(ibv_mr* mr) : mr_(mr) {
    lkey = mr->lkey;
    rkey = mr->rkey;
  }
  ~VerbsMr() override {
    if (ibv_dereg_mr(mr_) != 0) std::fprintf(stderr, "rdmagate: ibv_dereg_mr: %m\n");
  }

 private:
  ibv_mr* mr_;
};

}  // namespace

std::optional<ibv_qp_cap> create_rc_qp(rdma_cm_id* id, ibv_pd* pd, ibv_cq* cq, const QpCaps& caps,
                                       std::string* error, ibv_srq* srq) {
  ibv_qp_init_attr qa{};
  qa.send_cq = cq;
  qa.recv_cq = cq;
  qa.srq = srq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = caps.max_send_wr;
  qa.cap.max_recv_wr = srq != nullptr ? 0 : caps.max_recv_wr;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = srq != nullptr ? 0 : 1;
  qa.cap.max_inline_data = caps.max_inline_data;
  qa.sq_sig_all = 0;  // selective signaling
  if (rdma_create_qp(id, pd, &qa) != 0) {
    const int e = errno;
    // Some devices refuse the inline size asked for: without inline rather than no connection.
    qa.cap.max_inline_data = 0;
    if (caps.max_inline_data == 0 || rdma_create_qp(id, pd, &qa) != 0) {
      *error = std::string("rdma_create_qp: ") + std::strerror(e);
      return std::nullopt;
    }
  }
  // What the device granted (inline sends only when max_inline_data says there is room): rdma_create_qp
  // writes it back into qa.cap, as ibv_create_qp does, so no ibv_query_qp (one syscall per connection).
  return qa.cap;
}

std::unique_ptr<BackendMr> register_verbs_memory(ibv_pd* pd, void* addr, std::size_t len, int access,
                                                 std::string* error) {
  ibv_mr* mr = ibv_reg_mr(pd, addr, len, access);
  if (mr == nullptr) {
    *error = "ibv_reg_mr of " + std::to_string(len) + " bytes: " + std::strerror(errno);
    return nullptr;
  }
  return std::make_unique<VerbsMr>(mr);
}

bool verbs_type2_windows(ibv_context* ctx) noexcept {
  ibv_device_attr da{};
  return ibv_query_device(ctx, &da) == 0 &&
         (da.device_cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)) != 0;
}

bool alloc_type2_windows(ibv_context* ctx, ibv_pd* pd, bool supported, std::uint32_t n,
                         std::vector<ibv_mw*>* windows, std::string* error) {
  if (n == 0) return true;
  if (!supported) {
    *error = std::string("device ") + ibv_get_device_name(ctx->device) + " has no type-2 memory windows";
    return false;
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    ibv_mw* mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    if (mw == nullptr) {
      *error = "ibv_alloc_mw(type 2) " + std::to_string(i + 1) + " of " + std::to_string(n) + ": " +
               std::strerror(errno);
      return false;
    }
    windows->push_back(mw);
  }
  return true;
}

std::uint32_t verbs_max_cqe(ibv_context* ctx) noexcept {
  ibv_device_attr a{};
  return ibv_query_device(ctx, &a) == 0 && a.max_cqe > 0 ? static_cast<std::uint32_t>(a.max_cqe) : 0;
}

int verbs_qp_to_err(ibv_qp* qp) noexcept {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  const int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
  return rc == 0 ? 0 : -(rc > 0 ? rc : errno);
}

namespace {

// Fixed chains over the staging arrays: entry i links to i + 1 for good (verbs_datapath.hpp).
void chain(VerbsQp& q, std::uint32_t sends, std::uint32_t recvs) {
  q.send_wr.assign(sends, ibv_send_wr{});
  q.send_sge.assign(sends, ibv_sge{});
  for (std::uint32_t i = 0; i < sends; ++i) {
    q.send_wr[i].sg_list = &q.send_sge[i];
    q.send_wr[i].next = i + 1 < sends ? &q.send_wr[i + 1] : nullptr;
  }
  q.recv_wr.assign(recvs, ibv_recv_wr{});
  q.recv_sge.assign(recvs, ibv_sge{});
  for (std::uint32_t i = 0; i < recvs; ++i) {
    q.recv_wr[i].sg_list = &q.recv_sge[i];
    q.recv_wr[i].num_sge = 1;
    q.recv_wr[i].next = i + 1 < recvs ? &q.recv_wr[i + 1] : nullptr;
  }
}

class VerbsDevice final : public DeviceBackend {
 public:
  VerbsDevice(ibv_context* ctx, ibv_pd* pd) : ctx_(ctx), pd_(pd), type2_windows_(verbs_type2_windows(ctx)) {}

  BackendKind kind() const noexcept override { return BackendKind::kVerbs; }
  const char* name() const noexcept override { return "verbs"; }

  std::unique_ptr<BackendCq> create_cq(int cqe, std::uint32_t, std::string* error) override {
    auto cq = std::make_unique<VerbsCq>();
    cq->cq = ibv_create_cq(ctx_, cqe, nullptr, nullptr, 0);
    if (cq->cq == nullptr) {
      *error = "ibv_create_cq of " + std::to_string(cqe) + " entries: " + std::strerror(errno);
      return nullptr;
    }
    cq->verbs_cq = cq->cq;
    return cq;
  }

  std::unique_ptr<BackendCq> create_armable_cq(int cqe, std::uint32_t, ibv_comp_channel* channel,
                                               std::string* error) override {
    auto cq = std::make_unique<VerbsCq>();
    cq->cq = ibv_create_cq(ctx_, cqe, nullptr, channel, 0);
    if (cq->cq == nullptr) {
      *error = "ibv_create_cq of " + std::to_string(cqe) + " entries with a completion channel: " +
               std::strerror(errno);
      return nullptr;
    }
    cq->armable = cq->cq;
    cq->verbs_cq = cq->cq;
    return cq;
  }

  std::unique_ptr<BackendMr> register_memory(void* addr, std::size_t len, int access,
                                             std::string* error) override {
    return register_verbs_memory(pd_, addr, len, access, error);
  }

  std::unique_ptr<BackendQp> create_qp(rdma_cm_id* id, BackendCq& cq, const QpCaps& caps, QpInfo* out,
                                       std::string* error) override {
    ibv_srq* srq = caps.srq != nullptr ? static_cast<VerbsSrq*>(caps.srq)->srq : nullptr;
    const std::optional<ibv_qp_cap> granted =
        create_rc_qp(id, pd_, static_cast<VerbsCq&>(cq).cq, caps, error, srq);
    if (!granted) return nullptr;
    auto q = std::make_unique<VerbsQp>();
    q->id = id;
    q->qp = id->qp;
    q->qp_num = id->qp->qp_num;
    out->qp_num = q->qp_num;
    out->max_send_wr = granted->max_send_wr;
    out->max_recv_wr = granted->max_recv_wr;
    out->max_inline_data = granted->max_inline_data;
    // Everything the loop can stage between two flushes: at most a full send queue and a full receive queue
    // (none on a QP of the shared receive queue).
    chain(*q, caps.max_send_wr, srq != nullptr ? 0 : caps.max_recv_wr);
    // On failure ~VerbsQp frees the windows so far and the QP.
    if (!alloc_type2_windows(ctx_, pd_, type2_windows_, caps.windows, &q->windows, error)) return nullptr;
    for (const ibv_mw* mw : q->windows) q->window_rkey.push_back(mw->rkey);
    return q;
  }

  std::uint32_t post_receives(BackendQp& qp, std::span<const RecvPost> recvs, std::string* error) override {
    auto& q = static_cast<VerbsQp&>(qp);
    return post_first_receives<VerbsBackend>(q, recvs, q.recv_wr.size(), error);
  }

  bool type2_windows() const noexcept override { return type2_windows_; }
  std::uint32_t max_cqe() const noexcept override { return verbs_max_cqe(ctx_); }

  int qp_to_err(BackendQp& qp) noexcept override { return verbs_qp_to_err(static_cast<VerbsQp&>(qp).qp); }

  std::unique_ptr<BackendSrq> create_srq(std::uint32_t max_wr, std::string* error) override {
    ibv_device_attr da{};
    if (ibv_query_device(ctx_, &da) != 0) {
      *error = std::string("ibv_query_device: ") + std::strerror(errno);
      return nullptr;
    }
    const std::string dev = ibv_get_device_name(ctx_->device);
    if (da.max_srq <= 0) {
      *error = "device " + dev + " has no shared receive queues (max_srq 0)";
      return nullptr;
    }
    if (max_wr > static_cast<std::uint32_t>(da.max_srq_wr)) {
      *error = "device " + dev + " holds at most " + std::to_string(da.max_srq_wr) + " receives per SRQ, " +
               std::to_string(max_wr) + " asked (dataplane.srq_receives)";
      return nullptr;
    }
    ibv_srq_init_attr a{};
    a.attr.max_wr = max_wr;
    a.attr.max_sge = 1;
    auto s = std::make_unique<VerbsSrq>();
    s->srq = ibv_create_srq(pd_, &a);
    if (s->srq == nullptr) {
      *error =
          "ibv_create_srq of " + std::to_string(max_wr) + " receives on " + dev + ": " + std::strerror(errno);
      return nullptr;
    }
    s->max_wr = a.attr.max_wr;
    // The chain holds what a core re-posts between two flushes (a burst, an adopted connection's parked
    // receives); staging beyond it posts the chain at once, so its length bounds doorbells, not correctness.
    const std::uint32_t chain_len = std::min<std::uint32_t>(max_wr, kSrqChain);
    s->recv_wr.assign(chain_len, ibv_recv_wr{});
    s->recv_sge.assign(chain_len, ibv_sge{});
    for (std::uint32_t i = 0; i < chain_len; ++i) {
      s->recv_wr[i].sg_list = &s->recv_sge[i];
      s->recv_wr[i].num_sge = 1;
      s->recv_wr[i].next = i + 1 < chain_len ? &s->recv_wr[i + 1] : nullptr;
    }
    return s;
  }

  std::uint32_t post_srq_receives(BackendSrq& srq, std::span<const RecvPost> recvs,
                                  std::string* error) override {
    auto& s = static_cast<VerbsSrq&>(srq);
    for (const RecvPost& r : recvs) VerbsBackend::WithSrq::stage_srq_recv_st(s, r.wr_id, r.seg);
    const std::uint32_t unposted = VerbsBackend::WithSrq::flush_srq_st(s);
    if (unposted != 0) {
      *error = "ibv_post_srq_recv of " + std::to_string(recvs.size()) +
               " receives: " + std::to_string(unposted) + " not posted";
    }
    return static_cast<std::uint32_t>(recvs.size()) - unposted;
  }

 private:
  static constexpr std::uint32_t kSrqChain = 1024;
  ibv_context* ctx_;
  ibv_pd* pd_;
  bool type2_windows_ = false;
};

}  // namespace

// A throwaway QP asking for `want` bytes, read back; when the device refuses that, the largest size it
// accepts (bisection). The objects live on their own PD and are gone before the engine creates anything.
std::optional<std::uint32_t> verbs_probe_max_inline(ibv_context* ctx, std::uint32_t want) {
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (pd == nullptr) return std::nullopt;
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  if (cq == nullptr) {
    ibv_dealloc_pd(pd);
    return std::nullopt;
  }
  const auto try_inline = [&](std::uint32_t bytes) -> std::optional<std::uint32_t> {
    ibv_qp_init_attr a{};
    a.send_cq = cq;
    a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 1;
    a.cap.max_recv_wr = 1;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = bytes;
    ibv_qp* qp = ibv_create_qp(pd, &a);
    if (qp == nullptr) return std::nullopt;
    const std::uint32_t granted = a.cap.max_inline_data;
    ibv_destroy_qp(qp);
    return granted;
  };
  std::optional<std::uint32_t> got = try_inline(want);
  if (!got && try_inline(0)) {
    std::uint32_t lo = 0, hi = want;  // lo accepted, hi refused
    while (hi - lo > 1) {
      const std::uint32_t mid = lo + (hi - lo) / 2;
      (try_inline(mid) ? lo : hi) = mid;
    }
    got = lo;
  }
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  return got;
}

std::unique_ptr<DeviceBackend> make_verbs_device(ibv_context* ctx, ibv_pd* pd) {
  return std::make_unique<VerbsDevice>(ctx, pd);
}

}  // namespace rdmagate::dataplane

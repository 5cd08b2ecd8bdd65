// Setup half of the generic verbs backend (control thread only); the hot path is inline in the header.
#include "dataplane/verbs_backend.hpp"

#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rdmagate::dataplane {

ibv_cq* VerbsBackend::create_cq(ibv_context* ctx, int cqe, std::string* error) {
  ibv_cq* cq = ibv_create_cq(ctx, cqe, nullptr, nullptr, 0);
  if (cq == nullptr && error != nullptr) *error = std::string("ibv_create_cq: ") + std::strerror(errno);
  return cq;
}

void VerbsBackend::destroy_cq(ibv_cq* cq) noexcept {
  if (cq != nullptr && ibv_destroy_cq(cq) != 0) std::fprintf(stderr, "rdmagate: ibv_destroy_cq: %m\n");
}

int VerbsBackend::create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_cq* cq, const QpCaps& caps, QpInfo* out,
                            std::string* error) {
  ibv_qp_init_attr qa{};
  qa.send_cq = cq;
  qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = caps.max_send_wr;
  qa.cap.max_recv_wr = caps.max_recv_wr;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = caps.max_inline_data;
  qa.sq_sig_all = 0;  // selective signaling
  if (rdma_create_qp(id, pd, &qa) != 0) {
    const int e = errno;
    // Some devices refuse the inline size asked for: retry without inline rather than fail the connection.
    if (caps.max_inline_data != 0) {
      qa.cap.max_inline_data = 0;
      if (rdma_create_qp(id, pd, &qa) == 0) goto created;
    }
    if (error != nullptr) *error = std::string("rdma_create_qp: ") + std::strerror(e);
    return -e;
  }
created:
  // Read back what the device granted: inline sends only when max_inline_data says there is room.
  {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(id->qp, &attr, IBV_QP_CAP, &init) == 0) {
      out->max_send_wr = init.cap.max_send_wr;
      out->max_recv_wr = init.cap.max_recv_wr;
      out->max_inline_data = init.cap.max_inline_data;
    } else {
      out->max_send_wr = qa.cap.max_send_wr;
      out->max_recv_wr = qa.cap.max_recv_wr;
      out->max_inline_data = qa.cap.max_inline_data;
    }
  }
  out->qp = id->qp;
  out->qp_num = id->qp->qp_num;
  return 0;
}

int VerbsBackend::qp_to_err(ibv_qp* qp) noexcept {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  const int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
  return rc == 0 ? 0 : -(rc > 0 ? rc : errno);
}

void VerbsBackend::destroy_qp(rdma_cm_id* id) noexcept {
  if (id != nullptr && id->qp != nullptr) rdma_destroy_qp(id);
}

}  // namespace rdmagate::dataplane

#pragma once
// Device backend: everything the engine does with verbs, behind one type chosen once at setup.
//
// The core loop is a template on its backend (eRPC's Rpc<Transport>), so the hot path has no virtual call
// and no per-message branch on the device kind. A backend provides:
//   hot path (this header, inline):  post_send, post_recv, poll_cq
//   setup (verbs_backend.cpp):       create_cq, create_qp, qp_to_err, destroy_qp, destroy_cq
// An mlx5dv backend (raw CQE polling, direct WQE building) slots in as another struct with the same members:
// its per-QP state would live in BackendQp, which the generic backend keeps as the plain ibv_qp pointer.
//
// Everything here that ends in _st runs on the owning core; setup functions run on the control thread.

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

struct rdma_cm_id;

namespace rdmagate::dataplane {

// What the control thread asks for when it creates a QP on a core's CQ.
struct QpCaps {
  std::uint32_t max_send_wr = 0;
  std::uint32_t max_recv_wr = 0;
  std::uint32_t max_inline_data = 0;  // requested; the device may grant less (read back into QpInfo)
  std::uint8_t responder_resources = 0;
  std::uint8_t initiator_depth = 0;
};

// What the device actually granted, read back after creation.
struct QpInfo {
  ibv_qp* qp = nullptr;
  std::uint32_t qp_num = 0;
  std::uint32_t max_send_wr = 0;
  std::uint32_t max_recv_wr = 0;
  std::uint32_t max_inline_data = 0;
};

// The generic verbs backend: ibv_post_send chains behind one doorbell, ibv_post_recv in batches,
// ibv_poll_cq in bursts.
struct VerbsBackend {
  static constexpr const char* kName = "verbs";

  // ---- hot path ----------------------------------------------------------------------------------
  static int post_send_st(ibv_qp* qp, ibv_send_wr* chain, ibv_send_wr** bad) noexcept {
    return ibv_post_send(qp, chain, bad);
  }
  static int post_recv_st(ibv_qp* qp, ibv_recv_wr* chain, ibv_recv_wr** bad) noexcept {
    return ibv_post_recv(qp, chain, bad);
  }
  static int poll_cq_st(ibv_cq* cq, int n, ibv_wc* wc) noexcept { return ibv_poll_cq(cq, n, wc); }

  // ---- setup (control thread) ----------------------------------------------------------------------
  // A CQ with no completion channel: the core busy-polls it.
  static ibv_cq* create_cq(ibv_context* ctx, int cqe, std::string* error);
  static void destroy_cq(ibv_cq* cq) noexcept;
  // rdma_create_qp on `id` with `cq` as send and receive CQ; fills `out` from what the device granted.
  // Returns 0 or -errno (and *error).
  static int create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_cq* cq, const QpCaps& caps, QpInfo* out,
                       std::string* error);
  // Moves the QP to ERR: every posted WR flushes to the CQ. Returns 0 or -errno.
  static int qp_to_err(ibv_qp* qp) noexcept;
  static void destroy_qp(rdma_cm_id* id) noexcept;
};

}  // namespace rdmagate::dataplane

#pragma once
// Setup half of the generic verbs backend (control thread): see verbs_datapath.hpp for the hot path.

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/backend/backend.hpp"

struct rdma_cm_id;

namespace rdmagate::dataplane {

// A backend over `ctx` whose QPs, CQs and registrations live in `pd`; both must outlive it and everything it
// creates.
std::unique_ptr<DeviceBackend> make_verbs_device(ibv_context* ctx, ibv_pd* pd);

// What every backend of the verbs family shares at setup (the mlx5dv backend's QPs are these, taken over).
//
// An RC QP for `id` on `cq` (send and receive), one SGE each way, selective signaling, as `caps` asks; when
// the device refuses the inline size, without inline rather than no connection. Returns the granted caps
// (rdma_create_qp writes them back). With `srq` the QP takes its receives from it and has no receive queue of
// its own. nullopt and *error on failure.
std::optional<ibv_qp_cap> create_rc_qp(rdma_cm_id* id, ibv_pd* pd, ibv_cq* cq, const QpCaps& caps,
                                       std::string* error, ibv_srq* srq = nullptr);
// ibv_reg_mr as a BackendMr (deregistered by its destructor). nullptr and *error on failure.
std::unique_ptr<BackendMr> register_verbs_memory(ibv_pd* pd, void* addr, std::size_t len, int access,
                                                 std::string* error);

// Whether the device binds type-2 memory windows (rxe and ConnectX have type 2B; 2A is associated with a QP
// number rather than the QP, which serves as well).
bool verbs_type2_windows(ibv_context* ctx) noexcept;
// n type-2 windows in `pd`, appended to *windows (those made before a failure stay there for the caller to
// deallocate); `supported` is verbs_type2_windows, read once per device. false and *error on failure.
bool alloc_type2_windows(ibv_context* ctx, ibv_pd* pd, bool supported, std::uint32_t n,
                         std::vector<ibv_mw*>* windows, std::string* error);

// ibv_device_attr::max_cqe of the device (0 when the query fails: no known limit).
std::uint32_t verbs_max_cqe(ibv_context* ctx) noexcept;

// Moves the QP to ERR: every posted work request flushes to its CQ. 0 or -errno.
int verbs_qp_to_err(ibv_qp* qp) noexcept;

// The largest inline size up to `want` an RC QP of this device grants (ibv_query_device does not report it).
std::optional<std::uint32_t> verbs_probe_max_inline(ibv_context* ctx, std::uint32_t want);

}  // namespace rdmagate::dataplane

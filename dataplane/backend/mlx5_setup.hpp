#pragma once
// Setup half of the mlx5 direct-verbs backend (control thread): see mlx5_datapath.hpp for the hot path.
//
// The QPs are created through rdma_cm and verbs as the verbs backend creates them (rdma_cm owns the
// connection and moves the QP through its states); the CQs through mlx5dv_create_cq, for 64-byte CQEs
// without compression. mlx5dv_init_obj then hands the rings, doorbell records and the UAR register to the
// core, and from then on nothing posts to or polls these objects through libibverbs.

#include <infiniband/verbs.h>

#include <memory>

#include "dataplane/backend/backend.hpp"

namespace rdmagate::dataplane {

// A backend over `ctx` (an mlx5 device: Mlx5Backend::supports) whose QPs, CQs and registrations live in `pd`;
// both must outlive it and everything it creates.
std::unique_ptr<DeviceBackend> make_mlx5_device(ibv_context* ctx, ibv_pd* pd);

}  // namespace rdmagate::dataplane

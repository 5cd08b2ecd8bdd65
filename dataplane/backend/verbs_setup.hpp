#pragma once
// Setup half of the generic verbs backend (control thread): see verbs_datapath.hpp for the hot path.

#include <infiniband/verbs.h>

#include <memory>

#include "dataplane/backend/backend.hpp"

namespace rdmagate::dataplane {

// A backend over `ctx` whose QPs, CQs and registrations live in `pd`; both must outlive it and everything it
// creates.
std::unique_ptr<DeviceBackend> make_verbs_device(ibv_context* ctx, ibv_pd* pd);

}  // namespace rdmagate::dataplane

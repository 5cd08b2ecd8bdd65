#pragma once
// Setup half of the generic verbs backend (control thread): see verbs_datapath.hpp for the hot path.

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "dataplane/backend/backend.hpp"

namespace rdmagate::dataplane {

// A backend over `ctx` whose QPs, CQs and registrations live in `pd`; both must outlive it and everything it
// creates.
std::unique_ptr<DeviceBackend> make_verbs_device(ibv_context* ctx, ibv_pd* pd);

// The largest inline size up to `want` an RC QP of this device grants (ibv_query_device does not report it).
std::optional<std::uint32_t> verbs_probe_max_inline(ibv_context* ctx, std::uint32_t want);

}  // namespace rdmagate::dataplane

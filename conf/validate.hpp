#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conf/config.hpp"
#include "conf/error.hpp"
#include "conf/host.hpp"
#include "conf/origins.hpp"

namespace rdmagate::conf {

// Cross-key consistency and host checks. The loader already runs this; it is public for configs built or
// merged in code (applyLiveChanges after a SIGHUP). Errors name the key an operator set rather than the
// one left at its default, and quote the other key with its own origin.
std::vector<ConfigError> validateConfig(const Config& config, const ConfigOrigins& origins,
                                        const HostFacts& host);

// Limits of the opened RDMA device. Every limit is optional: a missing one skips its check.
struct DeviceLimits {
  std::string name;                        // for messages, e.g. "rxe0"
  std::optional<std::uint32_t> max_qp_wr;  // ibv_device_attr.max_qp_wr
  std::optional<std::uint32_t> max_sge;    // ibv_device_attr.max_sge
  // ibv_query_device does not report it: read ibv_qp_init_attr.cap.max_inline_data back from a probe QP.
  std::optional<std::uint32_t> max_inline_data;
  std::optional<std::uint64_t> max_msg_size;  // ibv_port_attr.max_msg_sz
  std::optional<std::uint32_t> port_count;    // ibv_device_attr.phys_port_cnt
};

// Checks that need the device. The engine calls it after opening the device and before creating any PD,
// CQ or QP; errors still point at the config line of the offending key.
std::vector<ConfigError> validateAgainstDevice(const LoadedConfig& loaded, const DeviceLimits& device);

}  // namespace rdmagate::conf

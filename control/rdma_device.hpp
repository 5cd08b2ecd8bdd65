// Finding and opening the RDMA device, and saying clearly when there is none.
//
// On a kernel without RDMA, rdma-core returns NULL with ENOSYS from ibv_get_device_list, and rdma_cm calls
// fail with ENODEV. probe_rdma() turns every such case into one line that says what is missing and how to
// get it; binaries print that line and exit non-zero (test binaries exit kSkipExitCode, which CTest maps
// to "skipped").
//
// RdmaDevice::open takes its ibv_context from rdma_get_devices(), i.e. the very context librdmacm hands
// to every rdma_cm_id on that device (id->verbs), so a PD and the MRs registered once on it can be used
// with rdma_create_qp on any connection of the device.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::control {

// Exit code of a test binary that found no RDMA (CTest SKIP_RETURN_CODE).
inline constexpr int kSkipExitCode = 77;

enum class RdmaStatus : uint8_t {
  kOk = 0,
  kNoKernelSupport = 1,    // ibv_get_device_list: NULL + ENOSYS
  kListFailed = 2,         // ibv_get_device_list: NULL, another errno
  kNoDevices = 3,          // an empty list
  kDeviceNotFound = 4,     // a device was named and is not there
  kAmbiguous = 5,          // no name given and several devices present
  kRdmaCmUnavailable = 6,  // rdma_create_event_channel / rdma_create_id / rdma_get_devices failed
  kOpenFailed = 7,         // the device is listed but cannot be opened or queried
};

const char* rdma_status_name(RdmaStatus s);

struct RdmaProbe {
  RdmaStatus status{RdmaStatus::kOk};
  int error{0};                      // errno of the failing call, 0 if none
  std::string device;                // the device chosen (on kOk)
  std::vector<std::string> devices;  // every device ibv_get_device_list returned
  std::string message;               // one line, "rdmagate: ..." (empty on kOk)

  bool ok() const { return status == RdmaStatus::kOk; }
  // The machine has no usable RDMA at all (vs. a configuration error such as a wrong device name).
  bool no_rdma() const {
    return status == RdmaStatus::kNoKernelSupport || status == RdmaStatus::kListFailed ||
           status == RdmaStatus::kNoDevices || status == RdmaStatus::kRdmaCmUnavailable;
  }
};

// Lists devices and, when check_rdma_cm, creates and destroys one rdma_cm event channel and id.
// `name` empty: accept the only device. Never prints; the caller prints probe.message.
RdmaProbe probe_rdma(std::string_view name, bool check_rdma_cm = true);

// $RDMAGATE_RXE_DEV, or empty.
std::string device_name_from_env();

// Device attributes the engine sizes itself by (from ibv_query_device).
struct RdmaDeviceLimits {
  int max_qp{0};
  int max_qp_wr{0};
  int max_sge{0};
  int max_cq{0};
  int max_cqe{0};
  int max_mr{0};
  uint64_t max_mr_size{0};
  int max_pd{0};
  int max_qp_rd_atom{0};       // responder resources
  int max_qp_init_rd_atom{0};  // initiator depth
  int max_srq{0};
  int max_srq_wr{0};
  uint8_t phys_port_cnt{0};
  std::string fw_ver;
  uint64_t node_guid{0};  // host order
};

struct RdmaPortInfo {
  uint8_t port_num{0};
  ibv_port_state state{IBV_PORT_NOP};
  ibv_mtu active_mtu{IBV_MTU_256};
  uint8_t link_layer{IBV_LINK_LAYER_UNSPECIFIED};
  int gid_tbl_len{0};
  uint32_t max_msg_sz{0};
  bool active() const { return state == IBV_PORT_ACTIVE; }
  int active_mtu_bytes() const { return 128 << static_cast<int>(active_mtu); }
};

class RdmaDevice {
 public:
  // Opens `name` (empty: the only device). On failure returns nullptr and *probe says why; print
  // probe->message. `probe` may be null.
  static std::unique_ptr<RdmaDevice> open(std::string_view name, RdmaProbe* probe);

  ~RdmaDevice();
  RdmaDevice(const RdmaDevice&) = delete;
  RdmaDevice& operator=(const RdmaDevice&) = delete;

  ibv_context* context() const { return ctx_; }
  const std::string& name() const { return name_; }
  const RdmaDeviceLimits& limits() const { return limits_; }
  const std::vector<RdmaPortInfo>& ports() const { return ports_; }  // ports()[0] is port 1
  int first_active_port() const;  // 0 when none is active
  int numa_node() const { return numa_node_; }  // -1 when unknown (rxe has no PCI parent)
  bool shared_with_rdma_cm() const { return cm_devices_ != nullptr; }

  // Re-reads port states. Returns false and fills *error (with %m-style text) on failure.
  bool refresh_ports(std::string* error);
  // "rxe0: fw ..., 1 port(s), port 1 active mtu 4096 ethernet, max_qp_wr 1048576, ..."
  std::string describe() const;

 private:
  RdmaDevice() = default;

  ibv_context* ctx_{nullptr};
  ibv_context** cm_devices_{nullptr};  // rdma_get_devices list: holds the context's reference
  bool own_ctx_{false};                // opened by ibv_open_device (rdma_cm unavailable)
  std::string name_;
  RdmaDeviceLimits limits_;
  std::vector<RdmaPortInfo> ports_;
  int numa_node_{-1};
};

}  // namespace rdmagate::control

#include "control/rdma_device.hpp"

#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <endian.h>
#include <fstream>

namespace rdmagate::control {
namespace {

constexpr const char* kHowToGetRdma =
    "load Soft-RoCE with 'rdma link add rxe0 type rxe netdev <if>' or run inside the project's rxe guest: "
    "tools/rxe-vm/rxe-vm run -- <cmd>";

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) {
    if (!s.empty()) s += ", ";
    s += x;
  }
  return s;
}

std::string errno_text(int e) { return e != 0 ? std::strerror(e) : "no error code"; }

// Lists devices into probe->devices and picks one. Returns the chosen ibv_device index, or -1 with
// probe->status/message set. *list must be freed with ibv_free_device_list when non-null.
int list_and_pick(std::string_view name, RdmaProbe* probe, ibv_device*** list_out) {
  int n = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&n);
  *list_out = list;
  if (list == nullptr) {
    const int e = errno;
    probe->error = e;
    if (e == ENOSYS) {
      probe->status = RdmaStatus::kNoKernelSupport;
      probe->message = "rdmagate: no RDMA device: this kernel has no RDMA support (ibv_get_device_list: " +
                       errno_text(e) + "); " + kHowToGetRdma;
    } else {
      probe->status = RdmaStatus::kListFailed;
      probe->message = "rdmagate: no RDMA device: cannot list RDMA devices (ibv_get_device_list: " +
                       errno_text(e) + "); " + kHowToGetRdma;
    }
    return -1;
  }
  for (int i = 0; i < n; ++i) probe->devices.emplace_back(ibv_get_device_name(list[i]));
  if (n == 0) {
    probe->status = RdmaStatus::kNoDevices;
    probe->message =
        "rdmagate: no RDMA device: the kernel has RDMA support but no device is registered "
        "(ibv_get_device_list: 0 devices); " + std::string(kHowToGetRdma);
    return -1;
  }
  if (name.empty()) {
    if (n > 1) {
      probe->status = RdmaStatus::kAmbiguous;
      probe->message = "rdmagate: " + std::to_string(n) + " RDMA devices present (" + join(probe->devices) +
                       ") and none chosen; name one (RDMAGATE_RXE_DEV or the device option)";
      return -1;
    }
    probe->device = probe->devices[0];
    return 0;
  }
  for (int i = 0; i < n; ++i) {
    if (probe->devices[i] == name) {
      probe->device = probe->devices[i];
      return i;
    }
  }
  probe->status = RdmaStatus::kDeviceNotFound;
  probe->message = "rdmagate: RDMA device '" + std::string(name) + "' not found (ibv_get_device_list has: " +
                   join(probe->devices) + ")";
  return -1;
}

void set_cm_unavailable(RdmaProbe* probe, const char* call, int e) {
  probe->status = RdmaStatus::kRdmaCmUnavailable;
  probe->error = e;
  probe->message = std::string("rdmagate: no RDMA device: rdma_cm cannot use it (") + call + ": " +
                   errno_text(e) + "); load rdma_ucm ('modprobe rdma_ucm'), " + kHowToGetRdma;
}

int read_numa_node(ibv_device* dev) {
  std::ifstream in(std::string(dev->ibdev_path) + "/device/numa_node");
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

}  // namespace

const char* rdma_status_name(RdmaStatus s) {
  switch (s) {
    case RdmaStatus::kOk: return "ok";
    case RdmaStatus::kNoKernelSupport: return "no kernel support";
    case RdmaStatus::kListFailed: return "device list failed";
    case RdmaStatus::kNoDevices: return "no devices";
    case RdmaStatus::kDeviceNotFound: return "device not found";
    case RdmaStatus::kAmbiguous: return "several devices, none chosen";
    case RdmaStatus::kRdmaCmUnavailable: return "rdma_cm unavailable";
    case RdmaStatus::kOpenFailed: return "open failed";
  }
  return "unknown";
}

std::string device_name_from_env() {
  const char* v = std::getenv("RDMAGATE_RXE_DEV");
  return v != nullptr ? std::string(v) : std::string();
}

RdmaProbe probe_rdma(std::string_view name, bool check_rdma_cm) {
  RdmaProbe probe;
  ibv_device** list = nullptr;
  const int idx = list_and_pick(name, &probe, &list);
  if (list != nullptr) ibv_free_device_list(list);
  if (idx < 0 || !check_rdma_cm) return probe;

  // Only reached with at least one verbs device, so librdmacm has something to talk about.
  errno = 0;
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) {
    set_cm_unavailable(&probe, "rdma_create_event_channel", errno);
    return probe;
  }
  rdma_cm_id* id = nullptr;
  errno = 0;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) {
    set_cm_unavailable(&probe, "rdma_create_id", errno);
    rdma_destroy_event_channel(ch);
    return probe;
  }
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  return probe;
}

std::unique_ptr<RdmaDevice> RdmaDevice::open(std::string_view name, RdmaProbe* probe_out) {
  RdmaProbe local;
  RdmaProbe& probe = probe_out != nullptr ? *probe_out : local;
  probe = RdmaProbe{};

  ibv_device** list = nullptr;
  const int idx = list_and_pick(name, &probe, &list);
  if (idx < 0) {
    if (list != nullptr) ibv_free_device_list(list);
    return nullptr;
  }
  std::unique_ptr<RdmaDevice> dev(new RdmaDevice());
  dev->name_ = probe.device;
  dev->numa_node_ = read_numa_node(list[idx]);

  // Prefer librdmacm's context for the device: it is the one every rdma_cm_id on it carries.
  int n = 0;
  errno = 0;
  dev->cm_devices_ = rdma_get_devices(&n);
  const int cm_errno = errno;
  if (dev->cm_devices_ != nullptr) {
    for (int i = 0; i < n; ++i) {
      if (dev->name_ == ibv_get_device_name(dev->cm_devices_[i]->device)) dev->ctx_ = dev->cm_devices_[i];
    }
  }
  if (dev->ctx_ == nullptr) {
    // rdma_cm is not usable (no rdma_ucm) or does not know the device: plain verbs still work.
    if (dev->cm_devices_ != nullptr) {
      rdma_free_devices(dev->cm_devices_);
      dev->cm_devices_ = nullptr;
    }
    errno = 0;
    dev->ctx_ = ibv_open_device(list[idx]);
    if (dev->ctx_ == nullptr) {
      const int e = errno;
      probe.status = RdmaStatus::kOpenFailed;
      probe.error = e;
      probe.message = "rdmagate: cannot open RDMA device " + dev->name_ + " (ibv_open_device: " + errno_text(e) +
                      "; rdma_get_devices: " + errno_text(cm_errno) + ")";
      ibv_free_device_list(list);
      return nullptr;
    }
    dev->own_ctx_ = true;
  }
  ibv_free_device_list(list);

  ibv_device_attr attr{};
  const int qret = ibv_query_device(dev->ctx_, &attr);
  if (qret != 0) {
    probe.status = RdmaStatus::kOpenFailed;
    probe.error = qret;
    probe.message = "rdmagate: cannot query RDMA device " + dev->name_ + " (ibv_query_device: " +
                    errno_text(qret) + ")";
    return nullptr;  // the destructor releases the context
  }
  RdmaDeviceLimits& l = dev->limits_;
  l.max_qp = attr.max_qp;
  l.max_qp_wr = attr.max_qp_wr;
  l.max_sge = attr.max_sge;
  l.max_cq = attr.max_cq;
  l.max_cqe = attr.max_cqe;
  l.max_mr = attr.max_mr;
  l.max_mr_size = attr.max_mr_size;
  l.max_pd = attr.max_pd;
  l.max_qp_rd_atom = attr.max_qp_rd_atom;
  l.max_qp_init_rd_atom = attr.max_qp_init_rd_atom;
  l.max_srq = attr.max_srq;
  l.max_srq_wr = attr.max_srq_wr;
  l.phys_port_cnt = attr.phys_port_cnt;
  l.fw_ver = attr.fw_ver;
  l.node_guid = be64toh(attr.node_guid);

  std::string err;
  if (!dev->refresh_ports(&err)) {
    probe.status = RdmaStatus::kOpenFailed;
    probe.error = errno;
    probe.message = "rdmagate: cannot query RDMA device " + dev->name_ + ": " + err;
    return nullptr;
  }
  return dev;
}

RdmaDevice::~RdmaDevice() {
  if (own_ctx_ && ctx_ != nullptr) {
    if (ibv_close_device(ctx_) != 0) std::fprintf(stderr, "rdmagate: ibv_close_device %s: %m\n", name_.c_str());
  }
  ctx_ = nullptr;
  if (cm_devices_ != nullptr) rdma_free_devices(cm_devices_);
  cm_devices_ = nullptr;
}

bool RdmaDevice::refresh_ports(std::string* error) {
  std::vector<RdmaPortInfo> ports;
  for (uint8_t p = 1; p <= limits_.phys_port_cnt; ++p) {
    ibv_port_attr pa{};
    const int ret = ibv_query_port(ctx_, p, &pa);
    if (ret != 0) {
      errno = ret;
      if (error) *error = "ibv_query_port(" + std::to_string(p) + "): " + errno_text(ret);
      return false;
    }
    RdmaPortInfo pi;
    pi.port_num = p;
    pi.state = pa.state;
    pi.active_mtu = pa.active_mtu;
    pi.link_layer = pa.link_layer;
    pi.gid_tbl_len = pa.gid_tbl_len;
    pi.max_msg_sz = pa.max_msg_sz;
    ports.push_back(pi);
  }
  ports_ = std::move(ports);
  return true;
}

int RdmaDevice::first_active_port() const {
  for (const auto& p : ports_) {
    if (p.active()) return p.port_num;
  }
  return 0;
}

std::string RdmaDevice::describe() const {
  char buf[512];
  int off = std::snprintf(buf, sizeof(buf),
                          "%s: fw %s, guid %016" PRIx64 ", numa %d, max_qp %d, max_qp_wr %d, max_sge %d, max_cq %d, "
                          "max_cqe %d, max_mr_size %" PRIu64 ", max_qp_rd_atom %d, max_qp_init_rd_atom %d%s",
                          name_.c_str(), limits_.fw_ver.empty() ? "-" : limits_.fw_ver.c_str(), limits_.node_guid,
                          numa_node_, limits_.max_qp, limits_.max_qp_wr, limits_.max_sge, limits_.max_cq,
                          limits_.max_cqe, limits_.max_mr_size, limits_.max_qp_rd_atom,
                          limits_.max_qp_init_rd_atom, shared_with_rdma_cm() ? "" : ", verbs only (no rdma_cm)");
  for (const auto& p : ports_) {
    if (off < 0 || static_cast<size_t>(off) >= sizeof(buf)) break;
    off += std::snprintf(buf + off, sizeof(buf) - static_cast<size_t>(off), "; port %u %s mtu %d %s",
                         static_cast<unsigned>(p.port_num), ibv_port_state_str(p.state), p.active_mtu_bytes(),
                         p.link_layer == IBV_LINK_LAYER_ETHERNET ? "ethernet" : "infiniband");
  }
  return buf;
}

}  // namespace rdmagate::control

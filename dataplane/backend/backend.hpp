#pragma once
// The device backend boundary: the one place the engine meets a device's work-request and completion
// formats (eRPC's transport: tx_burst / post_recvs / rx_burst).
//
// Two halves, chosen once at setup (backend_factory.hpp):
//   - setup (DeviceBackend, a virtual interface, control thread): CQs, QPs, registration of a core's
//     region, the first receives of a connection, moving a QP to ERR. One virtual call per setup step.
//   - hot path (a struct of static inline functions, the template parameter of CoreLoop): stage a receive,
//     stage a send, stage one RDMA READ/WRITE fragment, flush (one doorbell per QP per loop turn), poll a
//     burst of completions into plain Completion records. No virtual call, no branch on the device kind.
// Per-QP and per-CQ state is the backend's own type (derived from BackendQp / BackendCq); the hot path
// reaches it with a static_cast, since the loop and its QPs come from the same backend by construction.
//
// Nothing outside dataplane/backend/ names a work request, a scatter/gather entry or a work completion.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

struct rdma_cm_id;
struct ibv_comp_channel;
struct ibv_cq;
struct ibv_mr;

namespace rdmagate::dataplane {

// What a completion says, as the core loop acts on it.
enum class CompletionStatus : std::uint8_t {
  kOk = 0,
  kFlushed = 1,  // the QP went to ERR before the work request ran (the usual end of a closing connection)
  kError = 2,    // anything else: the connection fails; device_status says what the device reported
};

struct Completion {
  std::uint64_t wr_id = 0;          // what the core staged the work request with
  std::uint32_t byte_len = 0;       // receives: bytes that landed
  std::uint32_t qp_num = 0;  // the QP it ran on: a receive of a shared receive queue names its connection
  CompletionStatus status = CompletionStatus::kOk;
  std::uint32_t device_status = 0;  // the device's own code (verbs: ibv_wc_status), reported in FAILED
};

// Registered local memory of one work request.
struct Segment {
  std::uint64_t addr = 0;
  std::uint32_t len = 0;
  std::uint32_t lkey = 0;
};

// Flags of a staged send or RDMA operation.
inline constexpr unsigned kSendSignaled = 1u;  // completes with a CQE (selective signaling otherwise)
inline constexpr unsigned kSendInline = 2u;    // the device copies the bytes at post time

enum class RdmaOp : std::uint8_t { kRead = 0, kWrite = 1 };

// What one flush could not hand to the device: always the newest staged work requests (the tail), so the
// loop takes back the same number from the end of its send FIFO.
struct FlushResult {
  std::uint32_t recv_unposted = 0;
  std::uint32_t send_unposted = 0;
};

class BackendSrq;

// What control asks for when it creates a QP on a core's CQ.
struct QpCaps {
  std::uint32_t max_send_wr = 0;
  std::uint32_t max_recv_wr = 0;      // ignored with `srq`: the QP has no receive queue of its own
  std::uint32_t max_inline_data = 0;  // requested; the device may grant less (read back into QpInfo)
  BackendSrq* srq = nullptr;          // the core's shared receive queue, or none (a receive queue per QP)
  // Type-2 memory windows to allocate with the QP (DeviceBackend::type2_windows must be true): the
  // requester's per-request keys (docs/client-internals.md "Key scope"). 0: none.
  std::uint32_t windows = 0;
};

// One window bind: [addr, addr + len) of `mr` (registered with IBV_ACCESS_MW_BIND) exposed to the peer with
// remote write (a GET's destination, which also needs local write on `mr`) or remote read only (a PUT's
// source).
struct WindowBind {
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  ibv_mr* mr = nullptr;
  bool remote_write = false;
};

// What the device granted, read back after creation.
struct QpInfo {
  std::uint32_t qp_num = 0;
  std::uint32_t max_send_wr = 0;
  std::uint32_t max_recv_wr = 0;
  std::uint32_t max_inline_data = 0;
};

// A receive the control thread posts before the connection is adopted.
struct RecvPost {
  std::uint64_t wr_id = 0;
  Segment seg{};
};

// Backend-owned state. Destroying a BackendQp destroys the QP; a BackendCq the CQ; a BackendMr the
// registration.
class BackendQp {
 public:
  virtual ~BackendQp() = default;
  std::uint32_t qp_num = 0;
};
class BackendCq {
 public:
  virtual ~BackendCq() = default;
  // Set by create_armable_cq: the verbs CQ to arm (ibv_req_notify_cq) and to acknowledge events of.
  ibv_cq* armable = nullptr;
  // The verbs CQ underneath, whatever the backend (set by every create_cq): what an IBV_EVENT_CQ_ERR names,
  // so that control finds the core whose CQ was lost. Null only for a device with no verbs CQ (the host
  // tests').
  ibv_cq* verbs_cq = nullptr;
};
class BackendMr {
 public:
  virtual ~BackendMr() = default;
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
};
// A shared receive queue: the receive buffers of one core, taken by whichever of its QPs a message arrives
// on. Destroying it destroys the SRQ (after every QP on it).
class BackendSrq {
 public:
  virtual ~BackendSrq() = default;
  std::uint32_t max_wr = 0;  // receives it holds at most (granted)
};

// A backend whose hot path posts receives to a shared receive queue (Backend::Srq, stage_srq_recv_st,
// flush_srq_st) instead of each QP's own: the core loop takes its receive path at compile time from this.
template <typename B>
concept SharedReceiveBackend = B::kSharedReceiveQueue && std::is_class_v<typename B::Srq>;

// A backend whose hot path binds and invalidates type-2 memory windows (stage_bind_window_st,
// stage_invalidate_window_st): the core loop compiles its window path in only for such a backend.
template <typename B>
concept WindowBackend = B::kWindows;

enum class BackendKind : std::uint8_t {
  kVerbs = 0,  // generic libibverbs: every device
  kMlx5 = 1,   // mlx5 direct verbs: WQEs and CQEs built and parsed by the core (ConnectX, BlueField)
};

// Setup half of a backend (control thread only).
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual BackendKind kind() const noexcept = 0;
  virtual const char* name() const noexcept = 0;
  // A CQ of at least `cqe` entries for the completions of at most `max_qps` QPs, busy-polled (no completion
  // channel). nullptr and *error on failure.
  virtual std::unique_ptr<BackendCq> create_cq(int cqe, std::uint32_t max_qps, std::string* error) = 0;
  // The same CQ reporting to `channel` once armed (BackendCq::armable), for a core that sleeps when idle (the
  // client's caller-driven and thread modes). Polled exactly as create_cq's. The default refuses: a backend
  // that polls its CQ directly (mlx5) never moves the provider's consumer index, which arming reads.
  virtual std::unique_ptr<BackendCq> create_armable_cq(int cqe, std::uint32_t max_qps, ibv_comp_channel* channel,
                                                       std::string* error) {
    (void)cqe;
    (void)max_qps;
    (void)channel;
    *error = std::string("the ") + name() + " backend cannot arm its CQs (dataplane.backend: verbs can)";
    return nullptr;
  }
  // Registers [addr, addr + len) with IBV_ACCESS_* flags `access`. nullptr and *error on failure.
  virtual std::unique_ptr<BackendMr> register_memory(void* addr, std::size_t len, int access,
                                                     std::string* error) = 0;
  // An RC QP for the connection of `id` (which then owns it for rdma_cm's purposes) with `cq` as send and
  // receive CQ and selective signaling; `out` says what the device granted. nullptr and *error on failure.
  virtual std::unique_ptr<BackendQp> create_qp(rdma_cm_id* id, BackendCq& cq, const QpCaps& caps, QpInfo* out,
                                               std::string* error) = 0;
  // Posts `recvs` in order, behind one doorbell. Returns how many the device took (a prefix); fewer than
  // recvs.size() fills *error.
  virtual std::uint32_t post_receives(BackendQp& qp, std::span<const RecvPost> recvs, std::string* error) = 0;
  // Moves the QP to ERR: every posted work request flushes to the CQ. 0 or -errno.
  virtual int qp_to_err(BackendQp& qp) noexcept = 0;
  // Whether QPs of this backend can carry type-2 memory windows (QpCaps::windows): the device binds them with
  // a work request and its hot path stages those (WindowBackend). The default: no.
  virtual bool type2_windows() const noexcept { return false; }
  // The most entries one CQ of this device may have (ibv_device_attr::max_cqe); 0: no known limit.
  virtual std::uint32_t max_cqe() const noexcept { return 0; }
  // A shared receive queue of at least `max_wr` receives for a core's QPs (QpCaps::srq). The default refuses:
  // a backend without one keeps a receive queue per QP. nullptr and *error (why not: the device or the
  // backend) on failure.
  virtual std::unique_ptr<BackendSrq> create_srq(std::uint32_t max_wr, std::string* error) {
    (void)max_wr;
    *error = std::string("the ") + name() + " backend has no shared receive queue";
    return nullptr;
  }
  // Posts `recvs` to `srq` (control thread, before the core runs). Returns how many the device took.
  virtual std::uint32_t post_srq_receives(BackendSrq& srq, std::span<const RecvPost> recvs,
                                          std::string* error) {
    (void)srq;
    (void)recvs;
    *error = std::string("the ") + name() + " backend has no shared receive queue";
    return 0;
  }
};

}  // namespace rdmagate::dataplane

#pragma once
// Per-core resources (setup side; control thread): the core's CQ, its hugepage region registered ONCE
// through the device backend, the fixed connection slots carved out of that region (rx buffers and tx
// buffers per slot), and the core's pair of handoff rings. The core loop (core_loop.hpp) uses them; control
// allocates and frees slots and builds each connection's descriptors over its slot (init_core_conn).
//
// Memory: one HugeBuffer (rte_malloc on the core's socket) holding every slot's buffers:
//   slot s: [rx_per_conn x buf_size][tx_per_conn x buf_size][bulk_bytes_per_conn]
// registered with `access` (IBV_ACCESS_LOCAL_WRITE only on the passive side). With a shared receive queue
// (CoreConfig::srq) the receive buffers are the core's pool instead, in front of the slots, and a slot holds
// only its send and bulk buffers:
//   [srq pool x buf_size] then slot s: [tx_per_conn x buf_size][bulk_bytes_per_conn]

#include <infiniband/verbs.h>  // IBV_ACCESS_* flags

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/backend/backend.hpp"
#include "dataplane/core_conn.hpp"
#include "dataplane/fault_core.hpp"
#include "dataplane/handoff_ring.hpp"
#include "dataplane/huge_buffer.hpp"

namespace rdmagate::telemetry {
struct CoreStats;
}  // namespace rdmagate::telemetry

namespace rdmagate::dataplane {

// Replies a core can owe: one FAILED and one CLOSED per connection it may hold.
inline constexpr std::uint32_t kMaxConnsPerCore = 512;
inline constexpr std::uint32_t kMaxCheckEvery = 65536;
inline constexpr std::uint32_t kCorePendingReplies = 2 * kMaxConnsPerCore;
using EngineCoreMailbox = CoreMailbox<kCorePendingReplies>;

// What a core does when a poll finds nothing.
enum class IdlePolicy : std::uint8_t {
  kBusy = 0,   // poll again at once: a pinned core with a physical CPU of its own (lowest latency)
  kYield = 1,  // sched_yield after `idle_yield_after` empty polls: more pollers than CPUs (tests, 2-vCPU guest)
  kPause = 2,  // rte_pause, then poll again: a hyperthread sibling keeps the core's issue slots, less power
  kBackoff = 3,  // pause runs doubling up to idle_backoff_max_pauses, reset on work: no syscall
  kEvent = 4,    // backoff, then after idle_event_after_us arm CQ notification and sleep (CoreSleeper)
};

class CoreSleeper;

// Where a core's receive buffers are posted (dataplane.srq: disabled, required, auto).
enum class SrqMode : std::uint8_t {
  kOff = 0,   // a receive queue and rx_per_conn buffers per connection
  kOn = 1,    // one shared receive queue per core; a device or backend without one is an error at setup
  kAuto = 2,  // the shared receive queue where the device and the backend have one, else kOff (noted)
};

struct CoreConfig {
  unsigned lcore = 1;             // EAL worker lcore the loop runs on
  int socket = -1;                // NUMA socket for its memory (-1: any)
  std::uint32_t max_conns = 64;   // connection slots
  std::uint32_t rx_per_conn = 32;  // receive buffers per connection (>= queue depth); with srq, the credits
                                   // each connection's peer may hold (the share of the pool it is sure of)
  SrqMode srq = SrqMode::kOff;
  // Buffers of the shared receive pool (srq); 0: max_conns x rx_per_conn. The core admits at most
  // srq_receives / rx_per_conn connections, so that the pool covers every credit its peers may hold.
  std::uint32_t srq_receives = 0;
  std::uint32_t tx_per_conn = 80; // tx descriptors per connection
  std::uint32_t buf_size = 4096;  // bytes per buffer (>= max message size)
  int access = IBV_ACCESS_LOCAL_WRITE;
  std::uint32_t poll_burst = 32;
  // Loop iterations between checks of the control ring (a power of two; dataplane.control_check_interval).
  std::uint32_t check_every = EngineCoreMailbox::kCheckEvery;
  IdlePolicy idle = IdlePolicy::kBusy;
  std::uint32_t idle_yield_after = 256;
  std::uint32_t idle_backoff_max_pauses = 64;
  std::uint32_t idle_event_after_us = 1000;
  // Non-null with idle kEvent: what the core sleeps on (its CQ's channel is cq_channel; set by the engine).
  CoreSleeper* sleeper = nullptr;
  std::uint32_t bulk_bytes_per_conn = 0;  // per-connection bulk buffer (chunk READ target / WRITE source)
  // Type-2 memory windows per connection (the requester's per-request keys; core_windows.hpp): each adds a
  // bind and an invalidation to what the send queue must hold. 0: none (a gateway's cores).
  std::uint32_t windows_per_conn = 0;
  std::uint64_t keepalive_us = 0;       // 0: no keepalive NOOPs
  std::uint64_t dead_peer_us = 0;       // 0: never declare a peer dead
  // protocol.bulk_timeout_ms: an RDMA READ/WRITE chain still on the device this long after it started fails
  // its connection (FailureKind::kBulkTimeout). Never 0 (create refuses it): every transfer has a deadline.
  std::uint64_t bulk_timeout_us = 5'000'000;
  // security.auth_timeout_ms: a connection control marks AuthState::kAwaiting must send AUTH this long after
  // ADOPT at the latest, or it fails (FailureKind::kAuthTimeout). Never 0 (create refuses it).
  std::uint64_t auth_timeout_us = 5'000'000;
  // Non-null: the CQ reports to this completion channel once armed (a core that sleeps when idle; the
  // backend must support it, DeviceBackend::create_armable_cq).
  ibv_comp_channel* cq_channel = nullptr;
  // Where the region and rings live: the EAL heap (hugepages) in the engine; plain heap memory for host
  // tests of the core loop, which run without EAL.
  HugeBufferKind memory = HugeBufferKind::kMalloc;
};

class CoreResources {
 public:
  // Builds everything; nullptr and *error on failure (partial state is undone).
  static std::unique_ptr<CoreResources> create(unsigned index, const CoreConfig& cfg, DeviceBackend& backend,
                                               std::string* error);
  ~CoreResources();
  CoreResources(const CoreResources&) = delete;
  CoreResources& operator=(const CoreResources&) = delete;

  unsigned index() const noexcept { return index_; }
  const CoreConfig& config() const noexcept { return cfg_; }
  BackendCq& cq() const noexcept { return *cq_; }
  std::uint32_t lkey() const noexcept { return mr_->lkey; }
  // Remote key of the core's region: meaningful only on the active side (the passive side registers
  // IBV_ACCESS_LOCAL_WRITE only and never hands a key out).
  std::uint32_t rkey() const noexcept { return mr_->rkey; }
  // Bytes of the region registered with the NIC (this core's share of rdmagate_memory_registered_bytes).
  std::size_t registered_bytes() const noexcept { return pool_bytes() + slot_bytes() * cfg_.max_conns; }

  // ---- shared receive queue (null: a receive queue per connection) ----
  BackendSrq* srq() const noexcept { return srq_.get(); }
  // What setup decided that the operator must know (control logs it): fewer connections than configured
  // because the device's CQ is smaller (then with the SRQ's size), or with SrqMode::kAuto why there is no
  // shared receive queue. Empty otherwise.
  const std::string& srq_note() const noexcept { return note_; }
  std::uint32_t pool_size() const noexcept { return static_cast<std::uint32_t>(pool_.size()); }
  RxDesc& pool_rx(std::uint32_t i) noexcept { return pool_[i]; }
  ConnTable& conn_table() noexcept { return conn_table_; }
  // The core's: receives staged on the shared receive queue since its last flush, every re-post ever staged
  // (a receive path compares it around a message to see whether its buffer went back), and buffers a post
  // refused (lost to the pool; never on a pool that matches the SRQ's size).
  std::uint32_t srq_staged = 0;
  std::uint64_t srq_reposts = 0;
  std::uint64_t srq_lost = 0;

  // ---- control thread ----
  // A free slot index, or -1. load() counts slots in use (least-loaded placement).
  int alloc_slot_st() noexcept;
  void free_slot_st(int slot) noexcept;
  std::uint32_t load() const noexcept { return used_; }
  std::uint8_t* rx_buf(int slot, std::uint32_t i) const noexcept {
    return region_.bytes() + pool_bytes() + slot_bytes() * static_cast<std::size_t>(slot) +
           std::size_t{i} * cfg_.buf_size;
  }
  std::uint8_t* tx_buf(int slot, std::uint32_t i) const noexcept {
    return rx_buf(slot, slot_rx()) + std::size_t{i} * cfg_.buf_size;
  }
  std::uint8_t* bulk_buf(int slot) const noexcept { return tx_buf(slot, cfg_.tx_per_conn); }
  ControlMailbox& control_mailbox() noexcept { return *control_mailbox_; }
  // The generation of the next connection built on this core (init_core_conn): 1..65535, then round again.
  std::uint16_t next_generation() noexcept {
    if (++generation_ == 0) generation_ = 1;
    return generation_;
  }

  // ---- the core ----
  EngineCoreMailbox& core_mailbox() noexcept { return *core_mailbox_; }

  // Set by control to stop the loop; the core polls it at its ring checks.
  std::atomic<bool> stop{false};
  // True while the loop runs (set by the core).
  std::atomic<bool> running{false};
  // Set by the core while quiescing (CONFIG kQuiesce 1) once every owned connection is idle: no request
  // of ours outstanding or held by the service, no send on the device or queued, and no request arrived
  // for a quiet period. Control reads it during the SIGTERM drain; cleared by CONFIG kQuiesce 0.
  std::atomic<bool> quiesced{false};
  // The core's counters (written only by the core; readers accept stale values).
  CoreCounters counters{};
  // Fault-injection rules and their counters (docs/faults.md): the core writes; control reads the counters
  // and the applied generation (atomics) to publish them and to free rule tables no core uses any more.
  CoreFaults faults{};
  // Authentication (CONFIG kAuthTable): the table the core checks AUTH against (the core's alone; null: none
  // yet, every AUTH is denied), and the generation of the last table it applied, stored (release) once it
  // re-resolved its connections against it: control frees a table only when every core applied a later one.
  const AuthTable* auth_table = nullptr;
  std::atomic<std::uint64_t> auth_applied{0};
  // The core's telemetry block: set by control before launch_cores (it must outlive the loop); null: the
  // core publishes nothing. The core copies `counters` into it about once per millisecond.
  telemetry::CoreStats* stats = nullptr;

 private:
  CoreResources() = default;
  // Receive buffers a slot holds itself: none with a shared receive queue.
  std::uint32_t slot_rx() const noexcept { return srq_ != nullptr ? 0 : cfg_.rx_per_conn; }
  std::size_t slot_bytes() const noexcept {
    return std::size_t{slot_rx() + cfg_.tx_per_conn} * cfg_.buf_size + cfg_.bulk_bytes_per_conn;
  }
  std::size_t pool_bytes() const noexcept { return pool_.size() * std::size_t{cfg_.buf_size}; }
  bool fit_cq(DeviceBackend& backend, std::string* error);
  bool setup_srq(DeviceBackend& backend, std::string* error);
  void add_note(const std::string& n);
  bool post_pool(DeviceBackend& backend, std::string* error);

  unsigned index_ = 0;
  CoreConfig cfg_{};
  std::unique_ptr<BackendCq> cq_;
  std::unique_ptr<BackendMr> mr_;
  HugeBuffer region_;
  HugeBuffer ring_mem_;
  CoreHandoff handoff_;
  std::unique_ptr<ControlMailbox> control_mailbox_;
  std::unique_ptr<EngineCoreMailbox> core_mailbox_;
  std::vector<int> free_slots_;
  std::uint32_t used_ = 0;
  std::unique_ptr<BackendSrq> srq_;  // destroyed after every QP (control's connections go first)
  std::string note_;
  std::vector<RxDesc> pool_;
  ConnTable conn_table_;
  std::uint16_t generation_ = 0;
};

// What a connection's QP is, once created on core `core` in slot `slot`: what init_core_conn needs.
struct CoreConnSetup {
  BackendQp* qp = nullptr;
  QpInfo granted{};
  std::uint32_t send_inline_bytes = 0;  // what the engine inlines at most (capped by the grant, the buffer)
  std::uint16_t signal_interval = 8;    // one signaled send per N (capped by the SQ depth)
  std::uint16_t rd_depth = 1;           // RDMA READs in flight at most
  bool hand_out_rkey = false;           // active side: chunk requests may name the core region
  std::uint32_t windows = 0;            // type-2 memory windows the QP got (QpCaps::windows)
};

// Send work requests a connection may have on its QP at once: its messages, the drain marker, one chunk's
// RDMA READs/WRITEs, and a bind and an invalidation per memory window. Control asks the backend for this send
// queue depth.
std::uint32_t send_queue_depth(const CoreConfig& cfg) noexcept;

// Resets `cc` and builds its descriptors over slot `slot` of `core` (control thread, before any receive of
// the connection is posted); the core only reuses them.
void init_core_conn(CoreConn& cc, CoreResources& core, int slot, const CoreConnSetup& setup);

// The receives control posts before accept/connect: the first `n` of the connection's rx descriptors.
std::vector<RecvPost> initial_receives(const CoreConn& cc, std::uint32_t n);

// With a shared receive queue: makes `cc` (its QP created, init_core_conn done) the owner of its QP's
// receives on `core` (control, where it would post the first receives). False when the core's table is full.
bool attach_to_srq(CoreConn& cc, CoreResources& core);
// Control, when it destroys the QP: the table no longer names `cc` (the core removed it already if it
// answered CLOSED).
void detach_from_srq(CoreConn& cc, CoreResources& core);

}  // namespace rdmagate::dataplane

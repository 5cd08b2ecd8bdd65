#pragma once
// A simulated mlx5 NIC on the host: the real Mlx5Backend (dataplane/backend/mlx5_datapath.hpp) writes WQEs
// into rings this file allocates, rings its doorbell and parses CQEs out of a CQ ring, and this file plays
// the hardware in between, byte for byte as infiniband/mlx5dv.h lays the rings out (UCX tests its rc_mlx5
// path against a mock the same way). What an RC QP does with the work (ordering, RNR wait, flush on ERR, key,
// bounds and access checks, the bytes READ/WRITE/SEND move) is the fake device's model (fake_backend.hpp):
// every mlx5 QP and CQ has a shadow FakeQp / FakeCq there, and the tests step, fail and reorder the shadow
// exactly as they do a fake QP.
//
//   SimMlx5Device   the setup half (a DeviceBackend, kind kMlx5): rings sized as rdma-core's mlx5 provider
//                   sizes them, every Mlx5Qp / Mlx5Cq field filled as mlx5dv_init_obj fills it.
//   SimMlx5Backend  Mlx5Backend with a poll_st that first lets the NIC catch up (and honours the shadow
//                   FakeCq's stop_after_polls / fail_next_polls, so a test runs the production loop a step at
//                   a time); staging, flush and CQE decoding are Mlx5Backend's own.
//
// The NIC runs when asked, never behind the core's back (single-threaded, deterministic):
//   sync()      reads each CQ's doorbell record (the CQEs the core consumed: their shadow entries go, send
//               queue space is free again), each RQ's doorbell record (new receive WQEs become shadow
//               receives) and each SQ's doorbell register (new send WQEs, parsed out of the ring from the
//               NIC's own index to the doorbell record, become shadow work requests, inline bytes copied from
//               the WQE).
//   deliver()   writes the shadow CQs' pending entries into the CQ rings as 64-byte CQEs, owner bit last.
// SimMlx5Backend::poll_st does both before it polls; a test calls sync() after its loop turn, so the shadow
// QPs hold everything the core handed over when it audits them.
//
// Type-2 memory windows are the model's too: a UMR WQE (bind or invalidation, as rdma-core's provider lays
// them out) becomes the model's bind or local invalidation of the window its control segment's key names.
//
// Anything the hardware would reject or misread is counted, never acted on: a WQE it cannot parse, a ds count
// that does not match the opcode, a UMR naming no window of its QP or another QP, a WQE after a UMR without
// the small fence (or one elsewhere), a QP number that is not the QP's, a doorbell register that disagrees
// with the doorbell record, WQEs written over ring space no consumed CQE has freed, a CQ consumer index ahead
// of what the NIC wrote. Stats::nic_errors() is the sum; every test expects it to be 0. A CQ ring without
// room stops delivery (Stats::cq_overruns: a real NIC would raise a CQ error).
//
// Faults on demand: error CQEs and flushes through the model (FakeDevice::fail_head, qp_to_err); a dropped
// doorbell (drop_next_doorbell: the next doorbell of the QP is ignored, the one after covers both batches);
// scatter-to-CQE (set_scatter_to_cqe: receives of up to 32 bytes arrive in the CQE, not in the buffer, as
// rdma-core enables by default, so the backend's copy is what puts them there).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/backend/mlx5_datapath.hpp"
#include "tests/engine/fake_backend.hpp"

namespace rdmagate::dataplane::fake {

class SimMlx5Device;

class SimMlx5Cq final : public Mlx5Cq {
 public:
  explicit SimMlx5Cq(std::uint32_t max_qps) : Mlx5Cq(max_qps) {}
  ~SimMlx5Cq() override;
  FakeCq& model() noexcept { return *shadow_; }
  const FakeCq& model() const noexcept { return *shadow_; }
  std::uint32_t produced() const noexcept { return produced_; }  // CQEs the NIC wrote, ever

  // SimMlx5Backend::poll_st's hook: the shadow's stop countdown, then the NIC catches up. True: this poll
  // fails (the shadow's fail_next_polls), as a CQ error would.
  bool before_poll_st() noexcept;

 private:
  friend class SimMlx5Device;
  struct alignas(64) Cqe {
    std::uint8_t b[64];
  };
  SimMlx5Device* sim_ = nullptr;
  std::unique_ptr<Cqe[]> ring_;
  alignas(8) std::uint32_t db_[2] = {0, 0};
  std::unique_ptr<FakeCq> shadow_;
  std::uint32_t produced_ = 0;  // CQEs written
  std::uint32_t consumed_ = 0;  // CQEs the core said it took (the doorbell record), 24 bits as the record
};

class SimMlx5Qp final : public Mlx5Qp {
 public:
  ~SimMlx5Qp() override;
  FakeQp& model() noexcept { return *shadow_; }

 private:
  friend class SimMlx5Device;
  struct alignas(64) Bb {
    std::uint8_t b[64];
  };
  SimMlx5Device* sim_ = nullptr;
  std::unique_ptr<Bb[]> sq_;
  std::unique_ptr<std::uint8_t[]> rq_;
  alignas(64) std::uint32_t db_[2] = {0, 0};
  alignas(64) std::uint8_t bf_[512] = {};
  std::unique_ptr<FakeQp> shadow_;
  // ---- the NIC's side ----
  std::uint16_t sq_next_ = 0;   // the next WQE counter it parses
  std::uint16_t sq_freed_ = 0;  // SQ space is free up to here: the end of the newest WQE a consumed CQE named
  std::vector<std::uint16_t> nic_bbs_;  // by WQE start BB, as parsed: its length in BBs
  std::vector<std::uint32_t> nic_len_;  // its byte count (what a REQ CQE reports)
  std::vector<std::uint8_t> nic_op_;    // its opcode
  std::uint32_t rq_next_ = 0;           // receive WQEs parsed
  std::uint32_t rq_freed_ = 0;          // receive CQEs consumed
  std::vector<std::uint64_t> rq_addr_;  // by RQ slot, as parsed: where a scattered CQE's bytes belong
  std::vector<std::uint32_t> rq_room_;
  std::uint8_t fence_next_ = 0;  // what the next WQE's fm_ce_se must carry: the small fence after a UMR
  bool drop_next_ = false;
  bool broken_ = false;  // a WQE it could not parse: the NIC takes nothing more from this QP
};

class SimMlx5Device final : public DeviceBackend {
 public:
  struct Options {
    std::uint32_t max_inline = 512;     // the most create_qp grants (ConnectX grants what the WQE can hold)
    std::uint32_t rq_stride_shift = 4;  // 16-byte receive WQEs (one segment); 5: room for the terminator
    std::uint32_t min_cqe_cnt = 0;      // 0: as rdma-core (a power of two >= cqe + 1); else at least this
  };
  struct Stats {
    std::uint64_t doorbells = 0;          // doorbell writes taken
    std::uint64_t dropped_doorbells = 0;  // ignored on request
    std::uint64_t send_wqes = 0, recv_wqes = 0;
    std::uint64_t send_bbs = 0;       // SQ space the send WQEs took (laps of a ring: send_bbs / its BBs)
    std::uint64_t inline_wqes = 0;    // SENDs that carried their bytes
    std::uint64_t multi_bb_wqes = 0;  // WQEs of more than one BB
    std::uint64_t wrapped_wqes = 0;   // WQEs that ran past the SQ's end into its start
    std::uint64_t umr_wqes = 0;       // window binds and invalidations
    std::uint64_t cqes = 0;           // written into CQ rings
    std::uint64_t scattered = 0;      // receive CQEs that carried the message
    std::uint64_t cq_overruns = 0;
    // ---- what real hardware would reject or misread (nic_errors) ----
    std::uint64_t bad_wqe = 0;       // opcode, opmod, ds, flags, segment contents, WQE counter
    std::uint64_t bad_qpn = 0;       // qpn_ds names another QP
    std::uint64_t bad_doorbell = 0;  // register vs record, or a doorbell with nothing new
    std::uint64_t sq_overwrite = 0;  // WQEs over space no consumed CQE freed
    std::uint64_t rq_overwrite = 0;
    std::uint64_t bad_recv = 0;  // a receive WQE the NIC cannot use
    std::uint64_t bad_ci = 0;    // the CQ doorbell record claims CQEs the NIC never wrote
    std::uint64_t model_refused =
        0;                          // the model's queue was full (the loop posted beyond what it was granted)
    std::uint64_t unencodable = 0;  // a model status no syndrome says
    std::uint64_t nic_errors() const noexcept {
      return bad_wqe + bad_qpn + bad_doorbell + sq_overwrite + rq_overwrite + bad_recv + bad_ci +
             model_refused + unencodable;
    }
  };

  SimMlx5Device() : SimMlx5Device(Options{}) {}
  explicit SimMlx5Device(const Options& opt) : opt_(opt) {}
  ~SimMlx5Device() override;
  SimMlx5Device(const SimMlx5Device&) = delete;
  SimMlx5Device& operator=(const SimMlx5Device&) = delete;

  // ---- DeviceBackend ----
  BackendKind kind() const noexcept override { return BackendKind::kMlx5; }
  const char* name() const noexcept override { return "sim-mlx5"; }
  std::unique_ptr<BackendCq> create_cq(int cqe, std::uint32_t max_qps, std::string* error) override;
  std::unique_ptr<BackendMr> register_memory(void* addr, std::size_t len, int access,
                                             std::string* error) override;
  // `id` is ignored. Grants max_send_wr as rdma-core does (the SQ's BBs over the largest WQE), max_recv_wr
  // the RQ's size, max_inline_data what was asked up to Options::max_inline.
  std::unique_ptr<BackendQp> create_qp(rdma_cm_id* id, BackendCq& cq, const QpCaps& caps, QpInfo* out,
                                       std::string* error) override;
  std::uint32_t post_receives(BackendQp& qp, std::span<const RecvPost> recvs, std::string* error) override;
  int qp_to_err(BackendQp& qp) noexcept override;  // after taking what the core handed over
  bool type2_windows() const noexcept override { return model_.type2_windows(); }

  // ---- the NIC (see the top of this file) ----
  void sync() noexcept;
  void deliver() noexcept;
  // The next doorbell of `qp` is ignored.
  void drop_next_doorbell(BackendQp& qp) noexcept;
  // What a later doorbell of `qp` would do: take every WQE up to the doorbell record (a dropped doorbell's
  // batch when no later one comes).
  void kick(BackendQp& qp) noexcept;
  // WQEs of `qp` the doorbell record names and the NIC has not taken (a dropped doorbell).
  bool behind(const BackendQp& qp) const noexcept;
  // Receives of 1..max_bytes (at most 32: a 64-byte CQE's room) land in the CQE; 0: off.
  void set_scatter_to_cqe(std::uint32_t max_bytes) noexcept {
    scatter_max_ = max_bytes < 32 ? max_bytes : 32;
  }

  FakeDevice& model() noexcept { return model_; }
  const Stats& stats() const noexcept { return stats_; }
  // The shadow of a QP or CQ this device created.
  static FakeQp& model_of(BackendQp& qp) noexcept { return static_cast<SimMlx5Qp&>(qp).model(); }
  static FakeCq& model_of(BackendCq& cq) noexcept { return static_cast<SimMlx5Cq&>(cq).model(); }

 private:
  friend class SimMlx5Qp;
  friend class SimMlx5Cq;
  SimMlx5Qp* find(std::uint32_t qpn) const noexcept;
  void reap(SimMlx5Cq& cq) noexcept;
  void take_receives(SimMlx5Qp& q) noexcept;
  void take_sends(SimMlx5Qp& q, bool rung) noexcept;
  bool parse_send(SimMlx5Qp& q, std::uint16_t at, std::uint16_t limit, FakeWr& w,
                  std::uint16_t* bbs) noexcept;
  bool parse_umr(SimMlx5Qp& q, const std::uint8_t* c, const std::uint8_t* m, const std::uint8_t* k,
                 std::uint32_t ds, std::uint32_t key, FakeWr& w) noexcept;
  void write_cqe(SimMlx5Cq& cq, const FakeCq::Entry& e) noexcept;

  Options opt_;
  FakeDevice model_;
  std::vector<SimMlx5Qp*> qps_;
  std::vector<SimMlx5Cq*> cqs_;
  std::uint32_t scatter_max_ = 0;
  Stats stats_{};
};

// The real hot path, with the NIC's turn before each poll (SimMlx5Cq::before_poll_st, out of line so an
// instruction count can leave the NIC out).
struct SimMlx5Backend : Mlx5Backend {
  static int poll_st(Cq& cq, Completion* out, int n) noexcept {
    if (static_cast<SimMlx5Cq&>(cq).before_poll_st()) return -1;
    return Mlx5Backend::poll_st(cq, out, n);
  }
};

// What status a syndrome names (the inverse of mlx5_syndrome_status); false when none does.
bool mlx5_status_syndrome(std::uint32_t status, std::uint8_t* syndrome) noexcept;

}  // namespace rdmagate::dataplane::fake

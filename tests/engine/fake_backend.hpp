#pragma once
// A fake device backend for host tests and fuzzing of the core loop, in the spirit of SPDK's
// test/unit/lib/nvmf/rdma.c/rdma_ut.c: the poller runs on the host and this file plays the device.
//
//   FakeDevice    the setup half (a DeviceBackend): fake CQs, QPs and registrations with made-up keys, so
//                 CoreResources::create and the tests' stand-in for control use it as they use verbs.
//   FakeBackend   the hot path: the static API of VerbsBackend (stage_*, flush_st, poll_st), the template
//                 argument of CoreLoop<FakeBackend, Service>.
//   FakePeer      the far end of a loopback connection: its own QP, CQ, receive buffers, credit machine and
//                 registered bulk memory; encodes requests with the protocol core and decodes answers.
//   LoopbackConn  one connection as control builds it (control/connection.cpp), with its FakePeer.
//
// The device model is what the core loop relies on from an RC QP, and nothing more:
//   - flush_st posts what was staged, receives first, in staging order. A post can fail (an injected fault,
//     or a queue beyond max_send_wr / max_recv_wr): that work request and every later one of the same flush
//     are not posted, and FlushResult reports that tail, as ibv_post_send's bad_wr does.
//   - posted work runs only when the test says so (step, run, run_all): the test picks which QP moves next,
//     so completions of different connections reach a CQ in whatever order it likes.
//   - a send queue runs in order. A SEND lands in the peer QP's oldest posted receive (bytes copied,
//     byte_len reported) or waits while the peer has none (RNR with infinite retry). RDMA READ/WRITE copy
//     between the local segment and the remote range named by (addr, rkey), both checked against the
//     registrations (key, bounds, access flags) first; a failed check is the error a device would report.
//   - selective signaling: a successful unsignaled send work request leaves no CQE; an error or a flush
//     always leaves one.
//   - the first error moves the QP to ERR, as qp_to_err does: every work request still posted, and every one
//     posted later, then completes flushed (one step each, so a test can interleave flushes too).
//   - send queue slots come back when a signaled CQE is polled (that slot and every older one), receive
//     slots when the receive's CQE is polled, as on mlx5: so the fake sees a loop that posts more than the
//     SQ it asked for even when every earlier send already ran.
//   - poll_st can be told to fail (a CQ error: it returns -1).
//   - type-2 memory windows (QpCaps::windows; set_type2_windows(false): a device without): a bind and a local
//     invalidation run in the send queue in order like any work request; a bound window grants its one
//     access to its range, and only through its own QP; a bind of a window that is bound, of memory
//     registered without IBV_ACCESS_MW_BIND or outside it, or a remote write window over memory without
//     local write, fails with IBV_WC_MW_BIND_ERR.
//   - a shared receive queue (FakeSrq, create_srq): a QP created on one has no receive queue; a SEND to it
//     lands in the SRQ's oldest posted receive (RNR while it has none), and the receive's CQE names the QP
//     (Completion::qp_num). The SRQ's receives are not the QP's: a QP in ERR flushes none of them.
// Every CQE remembers its QP; FakeDevice::outstanding says what a QP still has on the device or in its CQ,
// which is what "CLOSED only after every posted work request completed" means.

#include <infiniband/verbs.h>  // IBV_ACCESS_* and ibv_wc_status values: what the fake reports

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/backend/backend.hpp"
#include "dataplane/core_conn.hpp"
#include "dataplane/core_resources.hpp"
#include "protocol/credit_machine.hpp"
#include "protocol/message.hpp"

namespace rdmagate::dataplane::fake {

// BackendKind has no value for a test backend; nothing in the engine switches on it for a loop the test
// builds itself.
inline constexpr BackendKind kFakeKind = static_cast<BackendKind>(0xfe);

enum class WrOp : std::uint8_t { kRecv = 0, kSend = 1, kRead = 2, kWrite = 3, kBind = 4, kLocalInv = 5 };

struct FakeWr {
  WrOp op = WrOp::kSend;
  std::uint64_t wr_id = 0;
  Segment local{};
  std::uint64_t remote_addr = 0;  // kRead / kWrite
  std::uint32_t rkey = 0;
  bool signaled = false;
  bool is_inline = false;
  std::uint64_t seq = 0;                  // send queue: posting order (slot reclaim on a polled CQE)
  std::vector<std::uint8_t> inline_data;  // an inline SEND's bytes, copied at post time like the device does
  std::uint32_t wqe_index = 0;  // a simulated NIC's WQE counter: its CQE names the WQE by it (sim_mlx5.hpp)
  // kBind / kLocalInv: the window, and for a bind the range, the registration's lkey and the access
  // (rkey: the window's new key; for kLocalInv the key to invalidate).
  std::uint32_t window = 0;
  std::uint64_t bind_addr = 0, bind_len = 0;
  std::uint32_t bind_lkey = 0;
  bool bind_write = false;
};

class FakeDevice;
class SimMlx5Device;
class SimMlx5Cq;

class FakeCq final : public BackendCq {
 public:
  struct Entry {
    Completion wc{};
    std::uint32_t qp_num = 0;     // 0: injected by the test, belongs to no QP
    bool send = false;            // a send queue CQE (else a receive's)
    std::uint64_t seq = 0;        // send queue CQEs: the work request's FakeWr::seq
    std::uint32_t wqe_index = 0;  // the work request's FakeWr::wqe_index
  };
  struct Stats {
    std::uint64_t pushed = 0;
    std::uint64_t polled = 0;
    std::uint64_t failed_polls = 0;  // poll_st returned -1
    std::uint64_t overflows = 0;     // more CQEs than the CQ holds: a real device would raise a CQ error
  };

  ~FakeCq() override;

  // The next `n` polls fail (a CQ error): poll_st returns -1 and takes nothing.
  void fail_next_polls(std::uint32_t n) noexcept { fail_polls_ = n; }
  // Sets *flag at the n-th poll from now. CoreLoop::run_st reads its stop flag only at a ring check, and
  // before its timers: with check_every 1 and n = 2, one run_st is exactly two iterations, the first with its
  // timers, which is how a host test runs the production loop a step at a time.
  void stop_after_polls(std::atomic<bool>* flag, std::uint32_t n) noexcept {
    stop_ = flag;
    polls_to_stop_ = n;
  }
  // A CQE made by the test (wr_id and status as given; it names no QP).
  void inject(const Completion& wc);
  // Reorders the pending CQEs into a random merge that keeps the order of each work queue (a QP's send
  // queue, a QP's receive queue): every order a device could deliver. `seed` makes it reproducible. CQEs a
  // simulated NIC already wrote into its ring (the first delivered()) stay where they are.
  void interleave(std::uint64_t seed);
  std::size_t delivered() const noexcept { return delivered_; }
  std::size_t pending() const noexcept { return entries_.size(); }
  std::size_t pending_of(std::uint32_t qp_num) const noexcept;
  std::size_t pending_of(std::uint32_t qp_num, bool send) const noexcept;
  const std::deque<Entry>& entries() const noexcept { return entries_; }
  const Stats& stats() const noexcept { return stats_; }

 private:
  friend class FakeDevice;
  friend struct FakeBackend;
  friend class SimMlx5Device;
  friend class SimMlx5Cq;
  FakeDevice* dev_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t delivered_ = 0;  // a simulated NIC's CQEs in its ring, not yet consumed: entries_' head
  std::uint32_t fail_polls_ = 0;
  std::atomic<bool>* stop_ = nullptr;
  std::uint32_t polls_to_stop_ = 0;
  std::deque<Entry> entries_;
  Stats stats_{};
};

class FakeSrq final : public BackendSrq {
 public:
  struct Stats {
    std::uint64_t posted = 0;     // receives posted
    std::uint64_t consumed = 0;   // receives a SEND landed in
    std::uint64_t overflows = 0;  // a post beyond max_wr (ENOMEM from a real device): not posted
    std::uint64_t rnr = 0;        // a SEND found the SRQ empty (waits, like RNR with infinite retry)
  };
  ~FakeSrq() override;
  const std::deque<FakeWr>& queue() const noexcept { return rq_; }
  const Stats& stats() const noexcept { return stats_; }
  // The test's stand-in for a message landing: the oldest posted receive leaves the SRQ. False: empty.
  bool take_front(FakeWr* out) {
    if (rq_.empty()) return false;
    *out = std::move(rq_.front());
    rq_.pop_front();
    ++stats_.consumed;
    return true;
  }

 private:
  friend class FakeDevice;
  friend struct FakeBackend;
  FakeDevice* dev_ = nullptr;
  std::vector<FakeWr> staged_;
  std::deque<FakeWr> rq_;
  Stats stats_{};
};

class FakeQp final : public BackendQp {
 public:
  struct Stats {
    std::uint64_t flushes = 0;  // flush_st calls that posted anything (doorbells)
    std::uint64_t posted_sends = 0, posted_recvs = 0;
    std::uint64_t unposted_sends = 0, unposted_recvs = 0;  // the tails FlushResult reported
    std::uint64_t injected_post_failures = 0;              // of those, by fail_send_post / fail_recv_post
    std::uint64_t sq_overflows = 0, rq_overflows = 0;      // a post beyond the queue's depth
    std::uint64_t executed = 0;  // work requests that ran (successfully or in error)
    std::uint64_t flushed = 0;   // work requests that completed flushed
    std::uint64_t errors = 0;    // error CQEs (the first error of the QP, or a receive it failed)
    std::uint64_t bytes_sent = 0, bytes_read = 0, bytes_written = 0;
  };

  ~FakeQp() override;

  // ---- faults (one-shot) ----
  // The post of the send work request `n` positions from now (0: the next one) fails: it and every later
  // one of that flush are reported unposted.
  // sticky: every send post fails from then on, until clear_faults.
  void fail_send_post(std::uint32_t n, bool sticky = false) noexcept {
    fail_send_after_ = n;
    fail_send_sticky_ = sticky;
  }
  void fail_recv_post(std::uint32_t n) noexcept { fail_recv_after_ = n; }
  // A peer that posts no receives (or took them back): every receive posted on this QP is gone without a
  // CQE, so a SEND to it waits (RNR, retried for ever) until the test fails it with fail_head. Returns how
  // many there were.
  std::size_t discard_receives() noexcept {
    const std::size_t n = rq_.size();
    rq_.clear();
    rq_polled_ += n;
    return n;
  }
  void clear_faults() noexcept {
    fail_send_after_ = fail_recv_after_ = -1;
    fail_send_sticky_ = false;
  }

  // A type-2 memory window of this QP, as the device holds it.
  struct Window {
    std::uint32_t rkey = 0;
    bool valid = false;  // bound (else free: allocated, or invalidated)
    std::uint64_t addr = 0, len = 0;
    int access = 0;
  };
  const std::vector<Window>& windows() const noexcept { return windows_; }

  bool in_error() const noexcept { return error_; }
  const FakeCq* cq() const noexcept { return cq_; }
  const FakeSrq* srq() const noexcept { return srq_; }
  FakeQp* peer() const noexcept { return peer_; }
  const std::deque<FakeWr>& send_queue() const noexcept { return sq_; }
  const std::deque<FakeWr>& recv_queue() const noexcept { return rq_; }
  std::size_t staged() const noexcept { return staged_sends_.size() + staged_recvs_.size(); }
  std::uint32_t max_send_wr() const noexcept { return max_send_wr_; }
  std::uint32_t max_recv_wr() const noexcept { return max_recv_wr_; }
  // Send queue slots in use: posted, and not yet reclaimed by a polled signaled CQE.
  std::uint64_t sq_occupied() const noexcept { return sq_posted_total_ - sq_reclaimed_; }
  std::uint64_t rq_occupied() const noexcept { return rq_posted_total_ - rq_polled_; }
  const Stats& stats() const noexcept { return stats_; }
  // Test peers' QPs are not audited at destruction (a test peer may well go away with receives posted).
  void set_audited(bool on) noexcept { audited_ = on; }

 private:
  friend class FakeDevice;
  friend struct FakeBackend;
  FakeDevice* dev_ = nullptr;
  FakeCq* cq_ = nullptr;
  FakeSrq* srq_ = nullptr;
  FakeQp* peer_ = nullptr;
  std::uint32_t max_send_wr_ = 0, max_recv_wr_ = 0;
  bool error_ = false;
  bool audited_ = true;
  std::vector<FakeWr> staged_sends_, staged_recvs_;
  std::deque<FakeWr> sq_, rq_;
  std::uint64_t sq_posted_total_ = 0, sq_reclaimed_ = 0;
  std::uint64_t rq_posted_total_ = 0, rq_polled_ = 0;
  std::int64_t fail_send_after_ = -1, fail_recv_after_ = -1;
  bool fail_send_sticky_ = false;
  std::vector<Window> windows_;
  std::vector<std::uint32_t> window_staged_rkey_;  // the key of each window's newest staged bind
  Stats stats_{};
};

// Which work queue of a QP a step acts on.
enum class Queue : std::uint8_t { kSend = 0, kRecv = 1 };

class FakeDevice final : public DeviceBackend {
 public:
  struct Stats {
    std::uint64_t local_errors = 0;    // a local segment outside its registration or key (a loop bug)
    std::uint64_t remote_errors = 0;   // a remote range outside its registration (a peer's bad chunk)
    std::uint64_t destroyed_busy = 0;  // audited QPs destroyed with posted work or CQEs still pending
  };

  FakeDevice() = default;
  ~FakeDevice() override;
  FakeDevice(const FakeDevice&) = delete;
  FakeDevice& operator=(const FakeDevice&) = delete;

  // ---- DeviceBackend ----
  BackendKind kind() const noexcept override { return kFakeKind; }
  const char* name() const noexcept override { return "fake"; }
  std::unique_ptr<BackendCq> create_cq(int cqe, std::uint32_t max_qps, std::string* error) override;
  std::unique_ptr<BackendMr> register_memory(void* addr, std::size_t len, int access,
                                             std::string* error) override;
  // `id` is ignored (there is no rdma_cm here); the grant is what was asked, inline capped by max_inline.
  std::unique_ptr<BackendQp> create_qp(rdma_cm_id* id, BackendCq& cq, const QpCaps& caps, QpInfo* out,
                                       std::string* error) override;
  std::uint32_t post_receives(BackendQp& qp, std::span<const RecvPost> recvs, std::string* error) override;
  int qp_to_err(BackendQp& qp) noexcept override;
  // Refused while set_srq_supported(false) (a device with max_srq 0).
  std::unique_ptr<BackendSrq> create_srq(std::uint32_t max_wr, std::string* error) override;
  std::uint32_t post_srq_receives(BackendSrq& srq, std::span<const RecvPost> recvs,
                                  std::string* error) override;

  std::uint32_t max_cqe() const noexcept override { return max_cqe_; }
  bool type2_windows() const noexcept override { return type2_windows_; }

  // ---- the test's side ----
  void set_type2_windows(bool on) noexcept { type2_windows_ = on; }
  // Whether a peer's RDMA READ (access IBV_ACCESS_REMOTE_READ) or WRITE of [addr, addr + len) with `rkey`
  // arriving on `target` would pass the checks now (a window of `target`'s, or a registration).
  bool remote_access(const FakeQp& target, std::uint64_t addr, std::uint32_t len, std::uint32_t rkey,
                     int access) const noexcept {
    return remote_ok(target, addr, len, rkey, access);
  }
  void set_srq_supported(bool on) noexcept { srq_supported_ = on; }
  void set_max_cqe(std::uint32_t n) noexcept { max_cqe_ = n; }  // 0: no limit (the default)
  std::unique_ptr<FakeCq> make_cq(int cqe);
  std::unique_ptr<FakeQp> make_qp(FakeCq& cq, const QpCaps& caps, QpInfo* out);
  // Connects two QPs: a SEND on one lands in a receive of the other; READ/WRITE need a connected QP.
  void connect(FakeQp& a, FakeQp& b) noexcept;
  // Runs (or, in ERR, flushes) the oldest work request of `which` queue. A receive only ever completes
  // through the peer's SEND, so kRecv does something only in ERR. False: nothing could happen.
  bool step(FakeQp& q, Queue which = Queue::kSend);
  // The oldest work request of `which` queue completes with device error `status` (an ibv_wc_status), even
  // if unsignaled, and the QP goes to ERR. False: that queue is empty.
  bool fail_head(FakeQp& q, Queue which, std::uint32_t status);
  // Steps `q` (both queues) until nothing moves; returns the work requests completed.
  std::size_t run(FakeQp& q);
  // Steps every QP, round robin in creation order, until nothing moves anywhere.
  std::size_t run_all();
  // Posted work requests of `q` not yet completed, plus its CQEs not yet polled.
  std::size_t outstanding(const FakeQp& q) const noexcept;
  std::size_t live_qps() const noexcept { return qps_.size(); }
  FakeQp* find(std::uint32_t qp_num) const noexcept { return find_qp(qp_num); }
  FakeQp* qp_at(std::size_t i) const noexcept { return i < qps_.size() ? qps_[i] : nullptr; }
  // Caps what create_qp grants as max_inline_data (a device that offers less than asked).
  void set_max_inline(std::uint32_t n) noexcept { max_inline_ = n; }
  const Stats& stats() const noexcept { return stats_; }

  // Hot path (FakeBackend).
  std::uint32_t post_st(FakeQp& q, std::vector<FakeWr>& staged, Queue which) noexcept;
  std::uint32_t post_srq_st(FakeSrq& s) noexcept;
  void on_polled_st(const FakeCq::Entry& e) noexcept;

 private:
  friend class FakeQp;
  friend class FakeCq;
  friend class FakeSrq;
  struct Region {
    std::uintptr_t addr = 0;
    std::size_t len = 0;
    int access = 0;
    std::uint32_t lkey = 0, rkey = 0;
  };
  class Mr;

  FakeQp* find_qp(std::uint32_t qp_num) const noexcept;
  const Region* by_lkey(std::uint32_t lkey) const noexcept;
  bool local_ok(const Segment& s, bool write) const noexcept;
  bool remote_ok(const FakeQp& target, std::uint64_t addr, std::uint32_t len, std::uint32_t rkey,
                 int access) const noexcept;
  bool execute_window_op(FakeQp& q);
  void push(FakeCq& cq, FakeCq::Entry e);
  void complete(FakeQp& q, const FakeWr& w, Queue which, std::uint32_t status, std::uint32_t byte_len);
  bool execute_send_head(FakeQp& q);
  void forget(FakeQp* q) noexcept;
  void forget(FakeCq* cq) noexcept;
  void unregister(std::uint32_t lkey) noexcept;

  std::vector<FakeQp*> qps_;
  std::vector<FakeCq*> cqs_;
  std::vector<Region> regions_;
  std::uint32_t next_qp_num_ = 0x100;
  std::uint32_t next_key_ = 1;
  std::uint32_t max_inline_ = 0xffffffffu;
  bool srq_supported_ = true;
  bool type2_windows_ = true;
  std::uint32_t next_window_ = 1;
  std::uint32_t max_cqe_ = 0;
  std::vector<FakeSrq*> srqs_;
  Stats stats_{};
};

// The hot path: what CoreLoop<FakeBackend, Service> calls. Staging only records; flush_st hands the work to
// the device model; poll_st takes CQEs. Like the verbs backend, nothing here allocates a CQE or blocks.
struct FakeBackend {
  using Qp = FakeQp;
  using Cq = FakeCq;
  static constexpr BackendKind kKind = kFakeKind;
  static constexpr const char* kName = "fake";
  static constexpr int kMaxPoll = 64;
  static constexpr bool kWindows = true;

  static void stage_recv_st(Qp& q, std::uint64_t wr_id, Segment s) noexcept {
    FakeWr w;
    w.op = WrOp::kRecv;
    w.wr_id = wr_id;
    w.local = s;
    q.staged_recvs_.push_back(std::move(w));
  }

  static void stage_send_st(Qp& q, std::uint64_t wr_id, Segment s, unsigned flags) noexcept {
    FakeWr w;
    w.op = WrOp::kSend;
    w.wr_id = wr_id;
    w.local = s;
    w.signaled = (flags & kSendSignaled) != 0;
    w.is_inline = (flags & kSendInline) != 0;
    q.staged_sends_.push_back(std::move(w));
  }

  static void stage_rdma_st(Qp& q, RdmaOp op, std::uint64_t wr_id, Segment local, std::uint64_t remote_addr,
                            std::uint32_t rkey, unsigned flags) noexcept {
    FakeWr w;
    w.op = op == RdmaOp::kRead ? WrOp::kRead : WrOp::kWrite;
    w.wr_id = wr_id;
    w.local = local;
    w.remote_addr = remote_addr;
    w.rkey = rkey;
    w.signaled = (flags & kSendSignaled) != 0;
    q.staged_sends_.push_back(std::move(w));
  }

  // The verbs backend's window binds and invalidations (a new key per bind: the key byte moves on).
  static std::uint32_t stage_bind_window_st(Qp& q, std::uint32_t slot, std::uint64_t wr_id,
                                            const WindowBind& b) noexcept {
    if (slot >= q.windows_.size()) return 0;
    std::uint32_t& k = q.window_staged_rkey_[slot];
    k = (k & ~0xffu) | ((k + 1) & 0xffu);
    FakeWr w;
    w.op = WrOp::kBind;
    w.wr_id = wr_id;
    w.rkey = k;
    w.window = slot;
    w.bind_addr = b.addr;
    w.bind_len = b.len;
    w.bind_lkey = b.mr != nullptr ? b.mr->lkey : 0;
    w.bind_write = b.remote_write;
    q.staged_sends_.push_back(std::move(w));
    return k;
  }
  static bool stage_invalidate_window_st(Qp& q, std::uint32_t slot, std::uint64_t wr_id) noexcept {
    if (slot >= q.windows_.size()) return false;
    FakeWr w;
    w.op = WrOp::kLocalInv;
    w.wr_id = wr_id;
    w.rkey = q.window_staged_rkey_[slot];
    w.window = slot;
    w.signaled = true;
    q.staged_sends_.push_back(std::move(w));
    return true;
  }

  // Receives first, then sends (the verbs backend's order: a credit never goes out ahead of its buffer).
  static FlushResult flush_st(Qp& q) noexcept {
    FlushResult r;
    if (!q.staged_recvs_.empty() || !q.staged_sends_.empty()) ++q.stats_.flushes;
    r.recv_unposted = q.dev_->post_st(q, q.staged_recvs_, Queue::kRecv);
    r.send_unposted = q.dev_->post_st(q, q.staged_sends_, Queue::kSend);
    return r;
  }

  // The same with the core's receives on a shared receive queue.
  struct WithSrq;

  static int poll_st(Cq& cq, Completion* out, int n) noexcept {
    if (cq.polls_to_stop_ != 0 && --cq.polls_to_stop_ == 0) cq.stop_->store(true, std::memory_order_release);
    if (cq.fail_polls_ != 0) {
      --cq.fail_polls_;
      ++cq.stats_.failed_polls;
      return -1;
    }
    int got = 0;
    const int want = n < kMaxPoll ? n : kMaxPoll;
    while (got < want && !cq.entries_.empty()) {
      const FakeCq::Entry e = cq.entries_.front();
      cq.entries_.pop_front();
      cq.dev_->on_polled_st(e);
      out[got++] = e.wc;
    }
    cq.stats_.polled += static_cast<std::uint64_t>(got);
    return got;
  }
};

struct FakeBackend::WithSrq : FakeBackend {
  using Srq = FakeSrq;
  static constexpr bool kSharedReceiveQueue = true;
  static void stage_srq_recv_st(Srq& s, std::uint64_t wr_id, Segment seg) noexcept {
    FakeWr w;
    w.op = WrOp::kRecv;
    w.wr_id = wr_id;
    w.local = seg;
    s.staged_.push_back(std::move(w));
  }
  static std::uint32_t flush_srq_st(Srq& s) noexcept { return s.dev_->post_srq_st(s); }
};

// The core's accounting of connection `cc` against what the device holds for its QP `qp`, at a point where
// nothing is staged (after a loop iteration). "" when it adds up, else what does not:
//   - every receive the core counts as posted is on the device, or its CQE is still in the CQ;
//   - the device's send queue is the newest part of the core's SQ FIFO, entry for entry (the drain marker,
//     posted last, has no FIFO entry), and an RDMA work request on the device belongs to a running bulk op;
//   - every tx descriptor is in exactly one place: free, in the FIFO, or queued in the credit machine; none
//     the device may still read from is free.
std::string audit(const CoreConn& cc, const FakeQp& qp);

// ---- the far end of a loopback connection ---------------------------------------------------------------

// A peer that speaks the protocol correctly unless told otherwise: it keeps queue_depth receives posted
// (re-posting each one as soon as it has decoded it), spends and returns credits through its own
// protocol::CreditMachine (NOOPs included), and signals every send so it can reuse its buffers. Received
// messages are decoded and copied into `inbox`.
class FakePeer {
 public:
  struct Received {
    protocol::MessageType type = protocol::MessageType::kNoop;
    std::uint16_t opcode = 0;
    std::uint64_t cookie = 0;
    std::uint16_t credits = 0;
    std::uint32_t status = 0;
    std::uint32_t byte_count = 0;
    std::vector<std::uint8_t> payload;
    std::uint32_t auth_status = 0;     // kAuthAnswer
    protocol::AuthBytes auth_proof{};  // kAuthAnswer: the gateway proof
  };
  struct Stats {
    std::uint64_t received = 0;  // messages decoded and accepted by the credit machine
    std::uint64_t sent = 0;      // messages posted (NOOPs included)
    std::uint64_t noops_sent = 0;
    std::uint64_t raw_sent = 0;  // send_raw
    std::uint64_t send_completions = 0;
    std::uint64_t flushed = 0;        // CQEs flushed (the QP went to ERR)
    std::uint64_t errors = 0;         // error CQEs
    std::uint64_t wire_errors = 0;    // what the gateway sent failed to decode
    std::uint64_t credit_errors = 0;  // the gateway broke the credit rules
    std::uint64_t refused = 0;        // send() refused (no buffer, not encodable)
  };

  FakePeer(FakeDevice& dev, const protocol::Session& session, std::uint32_t buf_size, std::uint32_t tx_count,
           std::size_t bulk_bytes);
  ~FakePeer();
  FakePeer(const FakePeer&) = delete;
  FakePeer& operator=(const FakePeer&) = delete;

  FakeQp& qp() noexcept { return *qp_; }
  FakeCq& cq() noexcept { return *cq_; }
  const protocol::Session& session() const noexcept { return session_; }
  protocol::CreditMachine& credits() noexcept { return *cm_; }
  std::uint32_t buf_size() const noexcept { return buf_size_; }

  // Sends `m` (its credits field is the machine's business). A message the credits do not allow now waits
  // in the machine's queue and leaves from poll(). False: no free buffer, or encode_message would refuse.
  bool send(protocol::Message m);
  // Sends `bytes` exactly as given, past the encoder and the credit machine (a misbehaving peer). After
  // it the credit accounting of this connection means nothing (tainted()).
  bool send_raw(std::span<const std::uint8_t> bytes);
  bool tainted() const noexcept { return tainted_; }
  // Takes every CQE, decodes and re-posts receives, then sends what the credit machine lets go. Returns
  // the CQEs taken plus the messages posted.
  std::size_t poll();
  std::uint32_t tx_free() const noexcept { return static_cast<std::uint32_t>(tx_free_.size()); }

  // Registered memory for chunk fragments (remote read and write allowed).
  std::uint8_t* bulk() const noexcept { return bulk_; }
  std::size_t bulk_size() const noexcept { return bulk_bytes_; }
  std::uint32_t bulk_rkey() const noexcept { return mr_->rkey; }
  protocol::Fragment fragment(std::size_t off, std::uint32_t len) const noexcept {
    return protocol::Fragment{reinterpret_cast<std::uintptr_t>(bulk_ + off), len, mr_->rkey};
  }

  std::deque<Received> inbox;
  const Stats& stats() const noexcept { return stats_; }

 private:
  static constexpr std::uint64_t kTxTag = 1ull << 32;
  std::uint8_t* rx_buf(std::uint32_t i) const noexcept { return mem_.get() + std::size_t{i} * buf_size_; }
  std::uint8_t* tx_buf(std::uint32_t i) const noexcept {
    return mem_.get() + (std::size_t{depth_} + i) * buf_size_;
  }
  void post_recv(std::uint32_t i) noexcept;
  void post_send(std::uint16_t tx) noexcept;
  std::size_t pump() noexcept;

  protocol::Session session_;
  std::uint32_t buf_size_;
  std::uint16_t depth_;
  std::uint32_t tx_count_;
  std::size_t bulk_bytes_;
  std::unique_ptr<std::uint8_t[]> mem_;
  std::uint8_t* bulk_ = nullptr;
  std::unique_ptr<FakeCq> cq_;
  std::unique_ptr<BackendMr> mr_;
  std::unique_ptr<FakeQp> qp_;
  std::vector<std::uint16_t> links_;
  std::unique_ptr<protocol::CreditMachine> cm_;
  std::vector<std::uint16_t> tx_free_;
  std::vector<std::uint32_t> tx_len_;
  bool tainted_ = false;
  Stats stats_{};
};

// ---- one connection as control builds it -----------------------------------------------------------------

struct LoopbackOptions {
  std::uint16_t queue_depth = 8;  // negotiated depth: receives posted each way, initial credits
  bool checksum = false;
  std::uint16_t max_fragments = protocol::kMaxFragments;
  std::uint32_t max_bulk_size = 1u << 20;
  std::uint16_t rd_depth = 2;         // RDMA READs in flight (CoreConnSetup::rd_depth)
  std::uint16_t signal_interval = 8;  // one signaled send per N
  std::uint32_t inline_bytes = 128;   // the engine's send_inline_bytes
  std::uint32_t peer_tx = 24;         // the peer's send buffers
  std::size_t peer_bulk_bytes = 64 * 1024;
  std::uint64_t incarnation = 1;  // distinguishes the stamps of connections of one test
  // The session's auth flag and gateway nonce (minor 2); with auth_required the connection is marked
  // AuthState::kAwaiting, as control marks the passive side of such a session.
  bool auth_required = false;
  protocol::AuthBytes gateway_nonce{};
};

// control/connection.cpp's create_qp + init_core_conn + set_session + post_rx over the fake device, and the
// FakePeer at the far end, connected. The connection is not adopted: send ToCore::adopt(handle()).
class LoopbackConn {
 public:
  static std::unique_ptr<LoopbackConn> open(FakeDevice& dev, CoreResources& core, const LoopbackOptions& opt,
                                            std::string* error);
  // The same with the core's QP from `dev`, a device in front of the model `model` (the simulated mlx5 NIC,
  // whose QPs are FakeQps of the model under the same QP number); the peer lives on the model.
  static std::unique_ptr<LoopbackConn> open(DeviceBackend& dev, FakeDevice& model, CoreResources& core,
                                            const LoopbackOptions& opt, std::string* error);
  ~LoopbackConn();  // frees the slot; only after the core answered CLOSED (or never saw the connection)
  LoopbackConn(const LoopbackConn&) = delete;
  LoopbackConn& operator=(const LoopbackConn&) = delete;

  // Control destroys the QP while the core still holds the connection (after the core lost its CQ: ToCore
  // kCqLost). What was posted goes with it, unaudited; the core must never touch it again (ASan says if it
  // does). qp() is gone from here on.
  void destroy_qp() noexcept {
    model_qp_->set_audited(false);
    model_qp_ = nullptr;
    qp_.reset();
  }
  CoreConn& cc() noexcept { return *cc_; }
  FakeQp& qp() noexcept { return *model_qp_; }       // the model's QP: what the test steps and audits
  BackendQp& backend_qp() noexcept { return *qp_; }  // the device's: what control moves to ERR
  FakePeer& peer() noexcept { return *peer_; }
  ConnHandle handle() const noexcept { return cc_->handle; }

 private:
  LoopbackConn() = default;
  CoreResources* core_ = nullptr;
  int slot_ = -1;
  std::unique_ptr<BackendQp> qp_;
  FakeQp* model_qp_ = nullptr;
  std::unique_ptr<CoreConn> cc_;
  std::unique_ptr<FakePeer> peer_;
};

}  // namespace rdmagate::dataplane::fake

// The fake device: setup half, device model, loopback peer (fake_backend.hpp says what it models and why).
#include "tests/engine/fake_backend.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace rdmagate::dataplane::fake {

// ---- CQ ----------------------------------------------------------------------------------------------

FakeCq::~FakeCq() {
  if (dev_ != nullptr) dev_->forget(this);
}

void FakeCq::inject(const Completion& wc) {
  FakeCq::Entry e;
  e.wc = wc;
  if (dev_ != nullptr) {
    dev_->push(*this, e);
  } else {
    entries_.push_back(e);
  }
}

std::size_t FakeCq::pending_of(std::uint32_t qp_num) const noexcept {
  return static_cast<std::size_t>(
      std::count_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.qp_num == qp_num; }));
}

std::size_t FakeCq::pending_of(std::uint32_t qp_num, bool send) const noexcept {
  return static_cast<std::size_t>(std::count_if(entries_.begin(), entries_.end(), [&](const Entry& e) {
    return e.qp_num == qp_num && e.send == send;
  }));
}

void FakeCq::interleave(std::uint64_t seed) {
  // One FIFO per work queue, then a random merge: each work queue keeps its order, nothing else does.
  std::vector<std::deque<Entry>> queues;
  std::vector<std::pair<std::uint32_t, bool>> keys;
  for (std::size_t i = delivered_; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const auto key = std::make_pair(e.qp_num, e.send);
    const auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end()) {
      keys.push_back(key);
      queues.emplace_back().push_back(e);
    } else {
      queues[static_cast<std::size_t>(it - keys.begin())].push_back(e);
    }
  }
  // What a simulated NIC wrote into its ring is the hardware's order already.
  std::vector<Entry> fixed(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(delivered_));
  entries_.clear();
  entries_.insert(entries_.end(), fixed.begin(), fixed.end());
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  std::size_t left = 0;
  for (const auto& q : queues) left += q.size();
  while (left != 0) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::size_t pick = static_cast<std::size_t>(x % left);  // weighted by what each queue still holds
    for (auto& q : queues) {
      if (pick < q.size()) {
        entries_.push_back(q.front());
        q.pop_front();
        break;
      }
      pick -= q.size();
    }
    --left;
  }
}

// ---- QP ----------------------------------------------------------------------------------------------

FakeQp::~FakeQp() {
  if (dev_ != nullptr) dev_->forget(this);
}

FakeSrq::~FakeSrq() {
  if (dev_ != nullptr) std::erase(dev_->srqs_, this);
}

// ---- registrations -----------------------------------------------------------------------------------

class FakeDevice::Mr final : public BackendMr {
 public:
  Mr(FakeDevice* dev, std::uint32_t key) : dev_(dev) {
    lkey = key;
    rkey = key | 0x80000000u;  // never equal to an lkey: a loop that mixes them up gets an access error
  }
  ~Mr() override {
    if (dev_ != nullptr) dev_->unregister(lkey);
  }

 private:
  FakeDevice* dev_;
};

// ---- device: setup half ------------------------------------------------------------------------------

FakeDevice::~FakeDevice() {
  // Whatever outlives the device must not call back into it.
  for (FakeQp* q : qps_) q->dev_ = nullptr;
  for (FakeCq* c : cqs_) c->dev_ = nullptr;
  for (FakeSrq* r : srqs_) r->dev_ = nullptr;
}

std::unique_ptr<BackendCq> FakeDevice::create_cq(int cqe, std::uint32_t, std::string* error) {
  if (cqe <= 0) {
    *error = "fake create_cq: " + std::to_string(cqe) + " entries";
    return nullptr;
  }
  return make_cq(cqe);
}

std::unique_ptr<FakeCq> FakeDevice::make_cq(int cqe) {
  auto cq = std::make_unique<FakeCq>();
  cq->dev_ = this;
  cq->capacity_ = static_cast<std::size_t>(cqe);
  cqs_.push_back(cq.get());
  return cq;
}

std::unique_ptr<BackendMr> FakeDevice::register_memory(void* addr, std::size_t len, int access,
                                                       std::string* error) {
  if (addr == nullptr || len == 0) {
    *error = "fake register_memory: empty range";
    return nullptr;
  }
  const std::uint32_t key = 0x1000 + next_key_++;
  regions_.push_back(Region{reinterpret_cast<std::uintptr_t>(addr), len, access, key, key | 0x80000000u});
  return std::make_unique<Mr>(this, key);
}

void FakeDevice::unregister(std::uint32_t lkey) noexcept {
  std::erase_if(regions_, [&](const Region& r) { return r.lkey == lkey; });
}

std::unique_ptr<BackendQp> FakeDevice::create_qp(rdma_cm_id*, BackendCq& cq, const QpCaps& caps, QpInfo* out,
                                                 std::string* error) {
  if (caps.max_send_wr == 0 || (caps.max_recv_wr == 0 && caps.srq == nullptr)) {
    *error = "fake create_qp: empty queue";
    return nullptr;
  }
  if (caps.windows != 0 && !type2_windows_) {
    *error = "fake create_qp: no type-2 memory windows";
    return nullptr;
  }
  std::unique_ptr<FakeQp> q = make_qp(static_cast<FakeCq&>(cq), caps, out);
  q->srq_ = static_cast<FakeSrq*>(caps.srq);
  if (q->srq_ != nullptr) {
    q->max_recv_wr_ = 0;
    if (out != nullptr) out->max_recv_wr = 0;
  }
  return q;
}

std::unique_ptr<BackendSrq> FakeDevice::create_srq(std::uint32_t max_wr, std::string* error) {
  if (!srq_supported_) {
    *error = "device fake has no shared receive queues (max_srq 0)";
    return nullptr;
  }
  if (max_wr == 0) {
    *error = "fake create_srq: empty queue";
    return nullptr;
  }
  auto s = std::make_unique<FakeSrq>();
  s->dev_ = this;
  s->max_wr = max_wr;
  srqs_.push_back(s.get());
  return s;
}

std::uint32_t FakeDevice::post_srq_receives(BackendSrq& srq, std::span<const RecvPost> recvs,
                                            std::string* error) {
  auto& s = static_cast<FakeSrq&>(srq);
  for (const RecvPost& r : recvs) FakeBackend::WithSrq::stage_srq_recv_st(s, r.wr_id, r.seg);
  const std::uint32_t unposted = post_srq_st(s);
  if (unposted != 0)
    *error = "fake post of " + std::to_string(recvs.size()) + " SRQ receives: " + std::to_string(unposted) +
             " not posted";
  return static_cast<std::uint32_t>(recvs.size()) - unposted;
}

std::uint32_t FakeDevice::post_srq_st(FakeSrq& s) noexcept {
  std::uint32_t unposted = 0;
  for (FakeWr& w : s.staged_) {
    if (s.rq_.size() >= s.max_wr) {
      ++s.stats_.overflows;
      ++unposted;
      continue;
    }
    s.rq_.push_back(std::move(w));
    ++s.stats_.posted;
  }
  s.staged_.clear();
  return unposted;
}

std::unique_ptr<FakeQp> FakeDevice::make_qp(FakeCq& cq, const QpCaps& caps, QpInfo* out) {
  auto q = std::make_unique<FakeQp>();
  q->dev_ = this;
  q->cq_ = &cq;
  q->qp_num = next_qp_num_++;
  q->max_send_wr_ = caps.max_send_wr;
  q->max_recv_wr_ = caps.max_recv_wr;
  for (std::uint32_t i = 0; i < caps.windows; ++i) {
    // Keys of their own range (registrations' have bit 31): an index and a key byte, as a device's.
    const std::uint32_t rkey = 0x40000000u | (next_window_++ << 8);
    q->windows_.push_back(FakeQp::Window{rkey, false, 0, 0, 0});
    q->window_staged_rkey_.push_back(rkey);
  }
  if (out != nullptr) {
    out->qp_num = q->qp_num;
    out->max_send_wr = caps.max_send_wr;
    out->max_recv_wr = caps.max_recv_wr;
    out->max_inline_data = std::min(caps.max_inline_data, max_inline_);
  }
  qps_.push_back(q.get());
  return q;
}

std::uint32_t FakeDevice::post_receives(BackendQp& qp, std::span<const RecvPost> recvs, std::string* error) {
  auto& q = static_cast<FakeQp&>(qp);
  for (const RecvPost& r : recvs) FakeBackend::stage_recv_st(q, r.wr_id, r.seg);
  const FlushResult fr = FakeBackend::flush_st(q);
  if (fr.recv_unposted != 0) {
    *error = "fake post of " + std::to_string(recvs.size()) +
             " receives: " + std::to_string(fr.recv_unposted) + " not posted";
  }
  return static_cast<std::uint32_t>(recvs.size()) - fr.recv_unposted;
}

int FakeDevice::qp_to_err(BackendQp& qp) noexcept {
  static_cast<FakeQp&>(qp).error_ = true;
  return 0;
}

void FakeDevice::connect(FakeQp& a, FakeQp& b) noexcept {
  a.peer_ = &b;
  b.peer_ = &a;
}

void FakeDevice::forget(FakeQp* q) noexcept {
  if (q->audited_ &&
      (!q->sq_.empty() || !q->rq_.empty() || (q->cq_ != nullptr && q->cq_->pending_of(q->qp_num) != 0))) {
    ++stats_.destroyed_busy;
  }
  if (q->peer_ != nullptr) q->peer_->peer_ = nullptr;
  std::erase(qps_, q);
}

void FakeDevice::forget(FakeCq* cq) noexcept {
  for (FakeQp* q : qps_) {
    if (q->cq_ == cq) q->cq_ = nullptr;
  }
  std::erase(cqs_, cq);
}

FakeQp* FakeDevice::find_qp(std::uint32_t qp_num) const noexcept {
  for (FakeQp* q : qps_) {
    if (q->qp_num == qp_num) return q;
  }
  return nullptr;
}

// ---- device: memory checks ---------------------------------------------------------------------------

const FakeDevice::Region* FakeDevice::by_lkey(std::uint32_t lkey) const noexcept {
  for (const Region& r : regions_) {
    if (r.lkey == lkey) return &r;
  }
  return nullptr;
}

bool FakeDevice::local_ok(const Segment& s, bool write) const noexcept {
  if (s.len == 0) return true;  // no scatter/gather entry at all (the drain marker)
  const Region* r = by_lkey(s.lkey);
  if (r == nullptr || s.addr < r->addr || s.addr - r->addr > r->len || s.len > r->len - (s.addr - r->addr)) {
    return false;
  }
  return !write || (r->access & IBV_ACCESS_LOCAL_WRITE) != 0;
}

bool FakeDevice::remote_ok(const FakeQp& target, std::uint64_t addr, std::uint32_t len, std::uint32_t rkey,
                           int access) const noexcept {
  // A type-2 window is reached only through its own QP (another QP's key names nothing here).
  for (const FakeQp::Window& w : target.windows_) {
    if (w.rkey != rkey) continue;
    if (!w.valid || addr < w.addr || addr - w.addr > w.len || len > w.len - (addr - w.addr)) return false;
    return (w.access & access) == access;
  }
  for (const Region& r : regions_) {
    if (r.rkey != rkey) continue;
    if (addr < r.addr || addr - r.addr > r.len || len > r.len - (addr - r.addr)) return false;
    return (r.access & access) == access;
  }
  return false;
}

// ---- device: hot path --------------------------------------------------------------------------------

std::uint32_t FakeDevice::post_st(FakeQp& q, std::vector<FakeWr>& staged, Queue which) noexcept {
  const bool send = which == Queue::kSend;
  std::int64_t& fault = send ? q.fail_send_after_ : q.fail_recv_after_;
  const std::size_t n = staged.size();
  std::size_t posted = 0;
  for (; posted < n; ++posted) {
    if (fault == 0) {  // the injected failure: this one and the rest of the chain stay unposted
      if (!send || !q.fail_send_sticky_) fault = -1;
      ++q.stats_.injected_post_failures;
      break;
    }
    if (send ? q.sq_occupied() >= q.max_send_wr_ : q.rq_occupied() >= q.max_recv_wr_) {
      ++(send ? q.stats_.sq_overflows : q.stats_.rq_overflows);  // ENOMEM from a real device
      break;
    }
    if (fault > 0) --fault;
    FakeWr w = std::move(staged[posted]);
    if (send) {
      // The device takes the bytes now; the buffer is free at once. (A simulated NIC took them from its WQE.)
      if (w.is_inline && w.local.len != 0 && w.inline_data.empty()) {
        const auto* p = reinterpret_cast<const std::uint8_t*>(static_cast<std::uintptr_t>(w.local.addr));
        w.inline_data.assign(p, p + w.local.len);
      }
      w.seq = q.sq_posted_total_++;
      q.sq_.push_back(std::move(w));
      ++q.stats_.posted_sends;
    } else {
      ++q.rq_posted_total_;
      q.rq_.push_back(std::move(w));
      ++q.stats_.posted_recvs;
    }
  }
  const auto unposted = static_cast<std::uint32_t>(n - posted);
  (send ? q.stats_.unposted_sends : q.stats_.unposted_recvs) += unposted;
  staged.clear();
  return unposted;
}

void FakeDevice::on_polled_st(const FakeCq::Entry& e) noexcept {
  FakeQp* q = e.qp_num != 0 ? find_qp(e.qp_num) : nullptr;
  if (q == nullptr) return;
  if (e.send) {
    q->sq_reclaimed_ = std::max(q->sq_reclaimed_, e.seq + 1);  // this slot and every older one
  } else {
    if (q->srq_ == nullptr) ++q->rq_polled_;  // an SRQ's receive is not the QP's
  }
}

void FakeDevice::push(FakeCq& cq, FakeCq::Entry e) {
  if (cq.entries_.size() >= cq.capacity_) ++cq.stats_.overflows;
  cq.entries_.push_back(e);
  ++cq.stats_.pushed;
}

// Pops nothing: the caller has taken `w` off its queue. Errors always leave a CQE; a flush too; a success
// only if signaled (receives always are).
void FakeDevice::complete(FakeQp& q, const FakeWr& w, Queue which, std::uint32_t status,
                          std::uint32_t byte_len) {
  const bool ok = status == IBV_WC_SUCCESS;
  if (status == IBV_WC_WR_FLUSH_ERR) {
    ++q.stats_.flushed;
  } else {
    ++q.stats_.executed;
    if (!ok) {
      ++q.stats_.errors;
      q.error_ = true;
    }
  }
  if (which == Queue::kSend && ok && !w.signaled) return;
  if (q.cq_ == nullptr) return;
  FakeCq::Entry e;
  e.wc.wr_id = w.wr_id;
  e.wc.byte_len = which == Queue::kRecv ? byte_len : 0;
  e.wc.device_status = status;
  e.wc.status = ok                              ? CompletionStatus::kOk
                : status == IBV_WC_WR_FLUSH_ERR ? CompletionStatus::kFlushed
                                                : CompletionStatus::kError;
  e.wc.qp_num = q.qp_num;
  e.qp_num = q.qp_num;
  e.send = which == Queue::kSend;
  e.seq = w.seq;
  e.wqe_index = w.wqe_index;
  push(*q.cq_, e);
}

// The head of q's send queue runs, q in RTS. False when it has to wait (no peer, or no receive posted).
bool FakeDevice::execute_send_head(FakeQp& q) {
  FakeWr& head = q.sq_.front();
  FakeQp* p = q.peer_;
  if (p == nullptr) return false;  // not connected (yet): nothing leaves the QP
  const auto fail = [&](std::uint32_t status) {
    const FakeWr w = std::move(q.sq_.front());
    q.sq_.pop_front();
    complete(q, w, Queue::kSend, status, 0);
    return true;
  };
  const auto done = [&] {
    const FakeWr w = std::move(q.sq_.front());
    q.sq_.pop_front();
    complete(q, w, Queue::kSend, IBV_WC_SUCCESS, 0);
    return true;
  };
  if (p->error_) return fail(IBV_WC_RETRY_EXC_ERR);  // the responder never acknowledges
  switch (head.op) {
    case WrOp::kSend: {
      std::deque<FakeWr>& rq = p->srq_ != nullptr ? p->srq_->rq_ : p->rq_;
      if (rq.empty()) {  // RNR: retried for as long as it takes
        if (p->srq_ != nullptr) ++p->srq_->stats_.rnr;
        return false;
      }
      const std::uint8_t* src;
      if (head.is_inline) {
        src = head.inline_data.data();
      } else {
        if (!local_ok(head.local, false)) {
          ++stats_.local_errors;
          return fail(IBV_WC_LOC_PROT_ERR);
        }
        src = reinterpret_cast<const std::uint8_t*>(static_cast<std::uintptr_t>(head.local.addr));
      }
      const FakeWr r = std::move(rq.front());
      rq.pop_front();
      if (p->srq_ != nullptr) ++p->srq_->stats_.consumed;
      if (head.local.len > r.local.len) {  // the receiver's buffer is too small: both ends fail
        complete(*p, r, Queue::kRecv, IBV_WC_LOC_LEN_ERR, 0);
        return fail(IBV_WC_REM_INV_REQ_ERR);
      }
      if (!local_ok(r.local, true)) {
        ++stats_.local_errors;
        complete(*p, r, Queue::kRecv, IBV_WC_LOC_PROT_ERR, 0);
        return fail(IBV_WC_REM_OP_ERR);
      }
      if (head.local.len != 0) {
        std::memmove(reinterpret_cast<void*>(static_cast<std::uintptr_t>(r.local.addr)), src, head.local.len);
      }
      q.stats_.bytes_sent += head.local.len;
      complete(*p, r, Queue::kRecv, IBV_WC_SUCCESS, head.local.len);
      return done();
    }
    case WrOp::kRead:
      if (!local_ok(head.local, true)) {
        ++stats_.local_errors;
        return fail(IBV_WC_LOC_PROT_ERR);
      }
      if (!remote_ok(*p, head.remote_addr, head.local.len, head.rkey, IBV_ACCESS_REMOTE_READ)) {
        ++stats_.remote_errors;
        return fail(IBV_WC_REM_ACCESS_ERR);
      }
      std::memmove(reinterpret_cast<void*>(static_cast<std::uintptr_t>(head.local.addr)),
                   reinterpret_cast<const void*>(static_cast<std::uintptr_t>(head.remote_addr)),
                   head.local.len);
      q.stats_.bytes_read += head.local.len;
      return done();
    case WrOp::kWrite:
      if (!local_ok(head.local, false)) {
        ++stats_.local_errors;
        return fail(IBV_WC_LOC_PROT_ERR);
      }
      if (!remote_ok(*p, head.remote_addr, head.local.len, head.rkey, IBV_ACCESS_REMOTE_WRITE)) {
        ++stats_.remote_errors;
        return fail(IBV_WC_REM_ACCESS_ERR);
      }
      std::memmove(reinterpret_cast<void*>(static_cast<std::uintptr_t>(head.remote_addr)),
                   reinterpret_cast<const void*>(static_cast<std::uintptr_t>(head.local.addr)),
                   head.local.len);
      q.stats_.bytes_written += head.local.len;
      return done();
    case WrOp::kBind:
    case WrOp::kLocalInv:
      return execute_window_op(q);
    case WrOp::kRecv:
      break;
  }
  return false;
}

// A bind or local invalidation at the head of q's send queue (q in RTS): local work, no peer involved.
bool FakeDevice::execute_window_op(FakeQp& q) {
  const FakeWr w = std::move(q.sq_.front());
  q.sq_.pop_front();
  std::uint32_t status = IBV_WC_MW_BIND_ERR;
  if (w.window < q.windows_.size()) {
    FakeQp::Window& win = q.windows_[w.window];
    if (w.op == WrOp::kLocalInv) {
      if (win.valid && win.rkey == w.rkey) {
        win.valid = false;
        status = IBV_WC_SUCCESS;
      }
    } else {
      const Region* r = by_lkey(w.bind_lkey);
      const bool in_range = r != nullptr && w.bind_addr >= r->addr && w.bind_addr - r->addr <= r->len &&
                            w.bind_len <= r->len - (w.bind_addr - r->addr) && w.bind_len != 0;
      if (!win.valid && in_range && (r->access & IBV_ACCESS_MW_BIND) != 0 &&
          (!w.bind_write || (r->access & IBV_ACCESS_LOCAL_WRITE) != 0) &&
          (w.rkey & ~0xffu) == (win.rkey & ~0xffu) && w.rkey != win.rkey) {
        win = FakeQp::Window{w.rkey, true, w.bind_addr, w.bind_len,
                             w.bind_write ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ};
        status = IBV_WC_SUCCESS;
      }
    }
  }
  complete(q, w, Queue::kSend, status, 0);
  return true;
}

bool FakeDevice::step(FakeQp& q, Queue which) {
  std::deque<FakeWr>& wq = which == Queue::kSend ? q.sq_ : q.rq_;
  if (wq.empty()) return false;
  if (q.error_) {
    const FakeWr w = std::move(wq.front());
    wq.pop_front();
    complete(q, w, which, IBV_WC_WR_FLUSH_ERR, 0);
    return true;
  }
  return which == Queue::kSend && execute_send_head(q);
}

bool FakeDevice::fail_head(FakeQp& q, Queue which, std::uint32_t status) {
  std::deque<FakeWr>& wq = which == Queue::kSend ? q.sq_ : q.rq_;
  if (wq.empty()) return false;
  const FakeWr w = std::move(wq.front());
  wq.pop_front();
  // Neither success nor a flush is an error: those become the device's general error.
  const bool not_error = status == IBV_WC_SUCCESS || status == IBV_WC_WR_FLUSH_ERR;
  complete(q, w, which, not_error ? static_cast<std::uint32_t>(IBV_WC_GENERAL_ERR) : status, 0);
  q.error_ = true;
  return true;
}

std::size_t FakeDevice::run(FakeQp& q) {
  std::size_t n = 0;
  for (;;) {
    if (step(q, Queue::kSend) || step(q, Queue::kRecv)) {
      ++n;
    } else {
      return n;
    }
  }
}

std::size_t FakeDevice::run_all() {
  std::size_t total = 0;
  for (bool moved = true; moved;) {
    moved = false;
    // By index: a step never creates or destroys a QP, but keep it robust anyway.
    for (std::size_t i = 0; i < qps_.size(); ++i) {
      FakeQp& q = *qps_[i];
      if (step(q, Queue::kSend) || step(q, Queue::kRecv)) {
        moved = true;
        ++total;
      }
    }
  }
  return total;
}

std::size_t FakeDevice::outstanding(const FakeQp& q) const noexcept {
  return q.sq_.size() + q.rq_.size() + (q.cq_ != nullptr ? q.cq_->pending_of(q.qp_num) : 0);
}

// ---- audit ---------------------------------------------------------------------------------------------

std::string audit(const CoreConn& cc, const FakeQp& qp) {
  std::string why;
  const auto fail = [&](const std::string& what) {
    if (why.empty()) why = "qp " + std::to_string(qp.qp_num) + ": " + what;
  };
  if (qp.staged() != 0) fail(std::to_string(qp.staged()) + " work requests staged and not flushed");
  const std::size_t rx_cqes = qp.cq() != nullptr ? qp.cq()->pending_of(qp.qp_num, false) : 0;
  if (cc.rx_posted != qp.recv_queue().size() + rx_cqes) {
    fail("rx_posted " + std::to_string(cc.rx_posted) + ", device holds " +
         std::to_string(qp.recv_queue().size()) + " receives and " + std::to_string(rx_cqes) +
         " receive CQEs");
  }
  const std::deque<FakeWr>& sq = qp.send_queue();
  std::size_t n = sq.size();
  if (n != 0 && wr_kind(sq.back().wr_id) == WrKind::kDrain) --n;
  if (cc.sq_inflight() < n) {
    fail("the device holds " + std::to_string(n) + " send work requests, the SQ FIFO " +
         std::to_string(cc.sq_inflight()));
    return why;
  }
  const std::size_t mask = cc.sq_fifo.size() - 1;
  std::vector<std::uint8_t> where(cc.tx.size(),
                                  0);  // per tx descriptor: 1 free, 2 in the FIFO, 4 on the device
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint16_t entry = cc.sq_fifo[(cc.sq_tail - n + k) & mask];
    const std::uint64_t id = sq[k].wr_id;
    const std::string at = "device send " + std::to_string(k) + " of " + std::to_string(n) + ": ";
    switch (wr_kind(id)) {
      case WrKind::kSend: {
        const std::uint16_t idx = wr_desc<TxDesc>(id)->index;
        if (entry != idx) fail(at + "tx " + std::to_string(idx) + ", FIFO entry " + std::to_string(entry));
        if (idx < where.size()) where[idx] |= 4;
        break;
      }
      case WrKind::kRdma:
      case WrKind::kRdmaFiller: {
        const std::uint16_t want = wr_kind(id) == WrKind::kRdma ? kRdmaMarker : kRdmaFiller;
        if (entry != want) fail(at + "RDMA, FIFO entry " + std::to_string(entry));
        if (cc.bulk_op.state == BulkState::kIdle) fail(at + "RDMA of a bulk op that has ended");
        break;
      }
      case WrKind::kWindowBind:
      case WrKind::kWindowInv: {
        const std::uint16_t want = wr_kind(id) == WrKind::kWindowBind ? kWindowBindEntry : kWindowInvEntry;
        if (entry != want) fail(at + "window operation, FIFO entry " + std::to_string(entry));
        break;
      }
      default:
        fail(at + "a drain marker that is not the newest, or a receive");
        break;
    }
  }
  std::size_t in_fifo = 0;
  for (std::uint32_t k = cc.sq_head; k != cc.sq_tail; ++k) {
    const std::uint16_t entry = cc.sq_fifo[k & mask];
    if (entry == kRdmaMarker || entry == kRdmaFiller || entry == kWindowBindEntry ||
        entry == kWindowInvEntry) {
      continue;
    }
    if (entry >= where.size() || (where[entry] & 2) != 0) {
      fail("FIFO entry " + std::to_string(entry) + " twice or out of range");
      continue;
    }
    where[entry] |= 2;
    ++in_fifo;
  }
  for (std::uint32_t k = 0; k < cc.tx_free_top; ++k) {
    const std::uint16_t idx = cc.tx_free[k];
    if (idx >= where.size() || where[idx] != 0) {
      fail("tx " + std::to_string(idx) + " is free but also " +
           (idx < where.size() && (where[idx] & 4) != 0 ? "on the device" : "in use or free twice"));
      continue;
    }
    where[idx] |= 1;
  }
  const std::size_t queued = cc.credits ? cc.credits->queued_total() : 0;
  if (cc.tx_free_top + in_fifo + queued != cc.tx.size()) {
    fail(std::to_string(cc.tx_free_top) + " free + " + std::to_string(in_fifo) + " in the FIFO + " +
         std::to_string(queued) + " queued tx descriptors, of " + std::to_string(cc.tx.size()));
  }
  return why;
}

// ---- FakePeer ----------------------------------------------------------------------------------------

FakePeer::FakePeer(FakeDevice& dev, const protocol::Session& session, std::uint32_t buf_size,
                   std::uint32_t tx_count, std::size_t bulk_bytes)
    : session_(session),
      buf_size_(buf_size),
      depth_(session.params.queue_depth),
      tx_count_(tx_count),
      bulk_bytes_(bulk_bytes) {
  const std::size_t bytes = (std::size_t{depth_} + tx_count_) * buf_size_ + bulk_bytes_;
  mem_.reset(new std::uint8_t[bytes]());
  bulk_ = mem_.get() + (std::size_t{depth_} + tx_count_) * buf_size_;
  cq_ = dev.make_cq(static_cast<int>(depth_ + tx_count_ + 1));
  std::string err;
  mr_ = dev.register_memory(mem_.get(), bytes,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE, &err);
  QpCaps caps;
  caps.max_send_wr = tx_count_ + 1;
  caps.max_recv_wr = depth_;
  qp_ = dev.make_qp(*cq_, caps, nullptr);
  qp_->set_audited(false);
  links_.assign(tx_count_, 0);
  protocol::CreditConfig cc;
  cc.queue_depth = depth_;
  cm_ = std::make_unique<protocol::CreditMachine>(cc, std::span<std::uint16_t>(links_), 0);
  tx_len_.assign(tx_count_, 0);
  for (std::uint32_t i = tx_count_; i > 0; --i) tx_free_.push_back(static_cast<std::uint16_t>(i - 1));
  for (std::uint32_t i = 0; i < depth_; ++i) post_recv(i);
  FakeBackend::flush_st(*qp_);
}

FakePeer::~FakePeer() = default;

void FakePeer::post_recv(std::uint32_t i) noexcept {
  FakeBackend::stage_recv_st(*qp_, i,
                             Segment{reinterpret_cast<std::uintptr_t>(rx_buf(i)), buf_size_, mr_->lkey});
}

void FakePeer::post_send(std::uint16_t tx) noexcept {
  FakeBackend::stage_send_st(*qp_, kTxTag | tx,
                             Segment{reinterpret_cast<std::uintptr_t>(tx_buf(tx)), tx_len_[tx], mr_->lkey},
                             kSendSignaled);
  ++stats_.sent;
}

bool FakePeer::send(protocol::Message m) {
  m.credits = 0;
  if (tx_free_.empty() || protocol::check_encodable(m, session_, buf_size_) != protocol::WireError::kOk) {
    ++stats_.refused;
    return false;
  }
  const std::uint16_t tx = tx_free_.back();
  tx_free_.pop_back();
  const protocol::SendStep step = cm_->send_or_queue(protocol::credit_class(m.type), tx, 0);
  if (step.kind == protocol::SendKind::kSend) m.credits = step.credits;
  if (step.kind != protocol::SendKind::kSend && step.tx == protocol::TxQueues::kEnd) {
    tx_free_.push_back(tx);
    ++stats_.refused;
    return false;
  }
  tx_len_[tx] = static_cast<std::uint32_t>(
      protocol::write_message(m, session_, std::span<std::uint8_t>(tx_buf(tx), buf_size_)));
  if (step.kind == protocol::SendKind::kSend) post_send(tx);  // else it leaves from pump()
  FakeBackend::flush_st(*qp_);
  return true;
}

bool FakePeer::send_raw(std::span<const std::uint8_t> bytes) {
  if (tx_free_.empty() || bytes.size() > buf_size_) {
    ++stats_.refused;
    return false;
  }
  const std::uint16_t tx = tx_free_.back();
  tx_free_.pop_back();
  if (!bytes.empty()) std::memcpy(tx_buf(tx), bytes.data(), bytes.size());
  tx_len_[tx] = static_cast<std::uint32_t>(bytes.size());
  tainted_ = true;
  ++stats_.raw_sent;
  post_send(tx);
  FakeBackend::flush_st(*qp_);
  return true;
}

std::size_t FakePeer::pump() noexcept {
  std::size_t n = 0;
  if (cm_->wants_noop(0) && !tx_free_.empty()) {
    const std::uint16_t tx = tx_free_.back();
    tx_free_.pop_back();
    protocol::Message noop;
    tx_len_[tx] = static_cast<std::uint32_t>(
        protocol::write_message(noop, session_, std::span<std::uint8_t>(tx_buf(tx), buf_size_)));
    if (!cm_->enqueue(protocol::CreditClass::kNoop, tx)) tx_free_.push_back(tx);
  }
  for (;;) {
    const protocol::SendStep step = cm_->next_send(0);
    if (step.kind == protocol::SendKind::kSend) {
      protocol::patch_credits(std::span<std::uint8_t>(tx_buf(step.tx), tx_len_[step.tx]), step.credits,
                              session_);
      if (step.cls == protocol::CreditClass::kNoop) ++stats_.noops_sent;
      post_send(step.tx);
      ++n;
    } else if (step.kind == protocol::SendKind::kDropNoop) {
      tx_free_.push_back(step.tx);
    } else {
      break;
    }
  }
  FakeBackend::flush_st(*qp_);
  return n;
}

std::size_t FakePeer::poll() {
  std::size_t n = 0;
  Completion wcs[FakeBackend::kMaxPoll];
  for (;;) {
    const int got = FakeBackend::poll_st(*cq_, wcs, FakeBackend::kMaxPoll);
    if (got <= 0) break;
    for (int i = 0; i < got; ++i) {
      const Completion& wc = wcs[i];
      ++n;
      if (wc.status == CompletionStatus::kFlushed) {
        ++stats_.flushed;
      } else if (wc.status != CompletionStatus::kOk) {
        ++stats_.errors;
      }
      if ((wc.wr_id & kTxTag) != 0) {  // a send: its buffer is free again
        ++stats_.send_completions;
        tx_free_.push_back(static_cast<std::uint16_t>(wc.wr_id & 0xffff));
        continue;
      }
      if (wc.status != CompletionStatus::kOk) continue;  // a receive that never held a message
      const auto i_rx = static_cast<std::uint32_t>(wc.wr_id);
      protocol::Message m;
      if (protocol::decode_message(std::span<const std::uint8_t>(rx_buf(i_rx), wc.byte_len), session_, m) !=
          protocol::WireError::kOk) {
        ++stats_.wire_errors;
        post_recv(i_rx);  // keep the receive posted so the test can go on looking
        continue;
      }
      const protocol::CreditClass cls = protocol::credit_class(m.type);
      if (cm_->on_receive(cls, m.credits, 0) != protocol::CreditError::kOk) {
        ++stats_.credit_errors;
        post_recv(i_rx);
        continue;
      }
      ++stats_.received;
      Received r;
      r.type = m.type;
      r.opcode = m.opcode;
      r.cookie = m.cookie;
      r.credits = m.credits;
      r.status = m.status;
      r.byte_count = m.byte_count;
      r.payload.assign(m.payload.begin(), m.payload.end());
      r.auth_status = m.auth_status;
      r.auth_proof = m.auth_proof;
      if (m.type != protocol::MessageType::kNoop) inbox.push_back(std::move(r));
      post_recv(i_rx);
      cm_->on_reposted(cls);
    }
  }
  FakeBackend::flush_st(*qp_);
  return n + pump();
}

// ---- LoopbackConn ------------------------------------------------------------------------------------

std::unique_ptr<LoopbackConn> LoopbackConn::open(FakeDevice& dev, CoreResources& core,
                                                 const LoopbackOptions& opt, std::string* error) {
  return open(dev, dev, core, opt, error);
}

std::unique_ptr<LoopbackConn> LoopbackConn::open(DeviceBackend& dev, FakeDevice& model, CoreResources& core,
                                                 const LoopbackOptions& opt, std::string* error) {
  const CoreConfig& cfg = core.config();
  std::unique_ptr<LoopbackConn> lc(new LoopbackConn());
  lc->core_ = &core;
  lc->slot_ = core.alloc_slot_st();
  if (lc->slot_ < 0) {
    *error = "no free slot";
    return nullptr;
  }
  // create_qp (control/connection.cpp).
  QpCaps caps;
  caps.max_send_wr = send_queue_depth(cfg);
  caps.max_recv_wr = cfg.rx_per_conn;
  caps.max_inline_data = std::min(cfg.buf_size, opt.inline_bytes);
  caps.srq = core.srq();
  caps.windows = dev.type2_windows() ? cfg.windows_per_conn : 0;  // as Engine::create decides
  CoreConnSetup setup;
  std::unique_ptr<BackendQp> qp = dev.create_qp(nullptr, core.cq(), caps, &setup.granted, error);
  if (qp == nullptr) return nullptr;
  lc->qp_ = std::move(qp);
  lc->model_qp_ = model.find(setup.granted.qp_num);
  if (lc->model_qp_ == nullptr) {
    *error = "qp " + std::to_string(setup.granted.qp_num) + " is not the model's";
    return nullptr;
  }
  setup.qp = lc->qp_.get();
  setup.send_inline_bytes = caps.max_inline_data;
  setup.signal_interval = opt.signal_interval;
  setup.rd_depth = opt.rd_depth;
  setup.hand_out_rkey = false;  // the passive side
  setup.windows = caps.windows;
  lc->cc_ = std::make_unique<CoreConn>();
  CoreConn& cc = *lc->cc_;
  init_core_conn(cc, core, lc->slot_, setup);
  cc.handle = ConnHandle::from_ptr(&cc);
  // set_session: the handshake's outcome, the same limits both ways.
  protocol::Session s;
  s.checksum = opt.checksum;
  s.params = protocol::ConnParams{opt.queue_depth, cfg.buf_size, opt.max_fragments, opt.max_bulk_size};
  s.local_incarnation = 0x6761746500000000ull + opt.incarnation;
  s.peer_incarnation = 0x7065657200000000ull + opt.incarnation;
  s.auth_required = opt.auth_required;
  s.gateway_nonce = opt.gateway_nonce;
  cc.session = s;
  cc.auth = opt.auth_required ? AuthState::kAwaiting : AuthState::kOpen;
  cc.credit_cfg = protocol::CreditConfig{};
  cc.credit_cfg.queue_depth = opt.queue_depth;
  // The peer, its session mirrored, connected before any receive is posted.
  protocol::Session ps = s;
  ps.local_incarnation = s.peer_incarnation;
  ps.peer_incarnation = s.local_incarnation;
  lc->peer_ = std::make_unique<FakePeer>(model, ps, cfg.buf_size, opt.peer_tx, opt.peer_bulk_bytes);
  model.connect(*lc->model_qp_, lc->peer_->qp());
  // post_rx: with the core's shared receive queue, the table names the connection; else the passive side
  // posts queue_depth receives.
  if (core.srq() != nullptr) {
    if (!attach_to_srq(cc, core)) {
      *error = "the core's connection table is full";
      return nullptr;
    }
    return lc;
  }
  const std::uint32_t n = std::min<std::uint32_t>(opt.queue_depth, cfg.rx_per_conn);
  const std::vector<RecvPost> posts = initial_receives(cc, n);
  cc.rx_posted = n;
  const std::uint32_t posted = dev.post_receives(*lc->qp_, posts, error);
  if (posted != n) {
    cc.rx_posted = posted;
    return nullptr;
  }
  return lc;
}

LoopbackConn::~LoopbackConn() {
  peer_.reset();
  if (core_ != nullptr && core_->srq() != nullptr && cc_ != nullptr) detach_from_srq(*cc_, *core_);
  qp_.reset();
  cc_.reset();
  if (core_ != nullptr && slot_ >= 0) core_->free_slot_st(slot_);
}

}  // namespace rdmagate::dataplane::fake

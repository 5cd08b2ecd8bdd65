// Per-core resources: setup and teardown on the control thread.
#include "dataplane/core_resources.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <algorithm>
#include <bit>

namespace rdmagate::dataplane {

std::unique_ptr<CoreResources> CoreResources::create(unsigned index, const CoreConfig& cfg, DeviceBackend& backend,
                                                     std::string* error) {
  // The SQ FIFO holds tx descriptor indices and, above every one of them, the RDMA markers.
  static_assert(kMaxTxPerConn <= protocol::TxQueues::kMaxDescriptors);
  if (cfg.tx_per_conn > kMaxTxPerConn) {
    *error =
        "core " + std::to_string(index) + ": " + std::to_string(cfg.tx_per_conn) +
        " tx descriptors per connection (tx_per_conn, 3 x dataplane.queue_depth in the gateway): at most " +
        std::to_string(kMaxTxPerConn) + ", below the send queue's RDMA markers";
    return nullptr;
  }
  if (cfg.bulk_timeout_us == 0) {
    *error = "core " + std::to_string(index) +
             ": protocol.bulk_timeout_ms is 0: every bulk transfer needs a deadline";
    return nullptr;
  }
  if (cfg.auth_timeout_us == 0) {
    *error = "core " + std::to_string(index) +
             ": security.auth_timeout_ms is 0: a connection that must authenticate needs a deadline";
    return nullptr;
  }
  if (cfg.max_conns == 0 || cfg.max_conns > kMaxConnsPerCore || cfg.rx_per_conn == 0 ||
      cfg.tx_per_conn == 0 || cfg.buf_size < 64 || cfg.check_every == 0 || cfg.check_every > kMaxCheckEvery ||
      !std::has_single_bit(cfg.check_every)) {
    *error = "core " + std::to_string(index) + ": bad sizing (max_conns 1.." + std::to_string(kMaxConnsPerCore) +
             ", rx/tx per connection >= 1, buffer >= 64 bytes, control check interval a power of two up to " +
             std::to_string(kMaxCheckEvery) + ")";
    return nullptr;
  }
  std::unique_ptr<CoreResources> c(new CoreResources());
  c->index_ = index;
  c->cfg_ = cfg;
  if (!c->fit_cq(backend, error)) return nullptr;
  if (cfg.srq != SrqMode::kOff && !c->setup_srq(backend, error)) return nullptr;
  // Every receive and every send work request of every slot can complete on this CQ: a flush gives each a
  // CQE, signaled or not, and a slot's send queue holds its messages, a chunk's RDMA work requests and the
  // drain marker (send_queue_depth). With the shared receive queue, every receive of the pool instead.
  // It is enough: a connection never has more on its QP than its SQ FIFO admits (tx_per_conn descriptors, one
  // bulk op of at most kMaxFragments READs/WRITEs, since the next op starts only when the last one's are all
  // off the device, and one drain marker, posted only when none is), nor more receives than rx_per_conn (or
  // its pool share); and the core answers CLOSED only after every CQE of the connection was polled, so a slot's
  // next connection never adds to CQEs of the one before.
  const std::uint32_t receives = c->srq_ != nullptr ? c->pool_size() : c->cfg_.max_conns * cfg.rx_per_conn;
  const int cqe = static_cast<int>(receives + c->cfg_.max_conns * send_queue_depth(cfg));
  c->cq_ = cfg.cq_channel != nullptr ? backend.create_armable_cq(cqe, cfg.max_conns, cfg.cq_channel, error)
                                     : backend.create_cq(cqe, cfg.max_conns, error);
  if (c->cq_ == nullptr) return nullptr;
  const std::size_t bytes = c->registered_bytes();
  c->region_ = HugeBuffer::allocate(bytes, cfg.socket, 4096, error, cfg.memory);
  if (!c->region_) return nullptr;
  // Registered once for the core's whole life.
  c->mr_ = backend.register_memory(c->region_.data(), bytes, cfg.access, error);
  if (c->mr_ == nullptr) return nullptr;
  if (c->srq_ != nullptr && !c->post_pool(backend, error)) return nullptr;
  HandoffSizes sizes;
  const std::size_t ring_bytes = CoreHandoff::memsize(sizes);
  c->ring_mem_ = HugeBuffer::allocate(ring_bytes, cfg.socket, 0, error, cfg.memory);
  if (!c->ring_mem_) return nullptr;
  const int rc = c->handoff_.init(c->ring_mem_.data(), c->ring_mem_.size(), sizes, index);
  if (rc != 0) {
    *error = "core handoff rings: " + std::string(std::strerror(-rc));
    return nullptr;
  }
  c->control_mailbox_ = std::make_unique<ControlMailbox>(c->handoff_.to_core().take_producer(),
                                                         c->handoff_.to_control().take_consumer());
  c->core_mailbox_ = std::make_unique<EngineCoreMailbox>(c->handoff_.to_core().take_consumer(),
                                                         c->handoff_.to_control().take_producer());
  c->free_slots_.reserve(c->cfg_.max_conns);
  for (int s = static_cast<int>(c->cfg_.max_conns) - 1; s >= 0; --s) c->free_slots_.push_back(s);
  return c;
}

// A connection can have rx_per_conn receives (its own, or its share of the pool) and a full send queue
// completing on the core's CQ: the core admits only as many connections as the device's CQ holds, and says
// so (setup note) when that is fewer than configured.
bool CoreResources::fit_cq(DeviceBackend& backend, std::string* error) {
  const std::uint32_t limit = backend.max_cqe();
  const std::uint64_t per_conn = std::uint64_t{cfg_.rx_per_conn} + send_queue_depth(cfg_);
  if (limit == 0 || std::uint64_t{cfg_.max_conns} * per_conn <= limit) return true;
  const std::string core = "core " + std::to_string(index_);
  const auto fit = static_cast<std::uint32_t>(limit / per_conn);
  if (fit == 0) {
    *error = core + ": the device's CQ holds " + std::to_string(limit) +
             " completions, fewer than one connection's " + std::to_string(per_conn) +
             " (lower dataplane.queue_depth)";
    return false;
  }
  note_ = core + ": the device's CQ holds " + std::to_string(limit) + " completions: " + std::to_string(fit) +
          " connections of " + std::to_string(per_conn) + " each, not dataplane.max_connections_per_core " +
          std::to_string(cfg_.max_conns) + " (lower dataplane.queue_depth to admit more)";
  cfg_.max_conns = fit;
  return true;
}

// The pool's size and the connections it covers: every peer may hold rx_per_conn credits, so the pool holds
// rx_per_conn for each connection the core admits (docs/protocol.md, "Shared receive queue"). The core's slot
// count becomes what the pool covers when dataplane.srq_receives asks for fewer buffers.
bool CoreResources::setup_srq(DeviceBackend& backend, std::string* error) {
  const std::string core = "core " + std::to_string(index_);
  const std::uint64_t want =
      cfg_.srq_receives != 0 ? cfg_.srq_receives : std::uint64_t{cfg_.max_conns} * cfg_.rx_per_conn;
  if (want < cfg_.rx_per_conn || want > 0xffffffffu) {
    *error = core + ": dataplane.srq_receives " + std::to_string(want) + " cannot cover one connection's " +
             std::to_string(cfg_.rx_per_conn) + " credits (dataplane.queue_depth), or exceeds 2^32 - 1";
    return false;
  }
  const std::uint32_t conns =
      std::min<std::uint32_t>(cfg_.max_conns, static_cast<std::uint32_t>(want / cfg_.rx_per_conn));
  const auto pool = static_cast<std::uint32_t>(std::uint64_t{conns} * cfg_.rx_per_conn);
  std::string why;
  srq_ = backend.create_srq(pool, &why);
  if (srq_ == nullptr) {
    if (cfg_.srq == SrqMode::kOn) {
      *error = core + ": dataplane.srq required: " + why;
      return false;
    }
    add_note(core + ": no shared receive queue (" + why + "): a receive queue per connection");
    return true;
  }
  if (!note_.empty()) {
    add_note("shared receive queue of " + std::to_string(pool) + " receives (" + std::to_string(conns) +
             " x " + std::to_string(cfg_.rx_per_conn) + ")");
  }
  cfg_.max_conns = conns;
  pool_.assign(pool, RxDesc{});
  conn_table_ = ConnTable(conns);
  return true;
}

// Every buffer of the pool posted (control thread, before the core runs).
bool CoreResources::post_pool(DeviceBackend& backend, std::string* error) {
  std::vector<RecvPost> posts;
  posts.reserve(pool_.size());
  for (std::uint32_t i = 0; i < pool_.size(); ++i) {
    RxDesc& d = pool_[i];
    d.buf = region_.bytes() + std::size_t{i} * cfg_.buf_size;
    d.index = i;
    posts.push_back(RecvPost{make_wr_id(&d, WrKind::kRecv, 0),
                             Segment{reinterpret_cast<std::uintptr_t>(d.buf), cfg_.buf_size, mr_->lkey}});
  }
  std::string why;
  if (backend.post_srq_receives(*srq_, posts, &why) != posts.size()) {
    *error = "core " + std::to_string(index_) + ": filling the shared receive queue: " + why;
    return false;
  }
  return true;
}

void CoreResources::add_note(const std::string& n) {
  note_ += note_.empty() ? n : "; " + n;
}

bool attach_to_srq(CoreConn& cc, CoreResources& core) {
  return core.conn_table().insert(&cc);
}

void detach_from_srq(CoreConn& cc, CoreResources& core) {
  core.conn_table().erase(&cc);
}

// The registration goes before the CQ and the region (member order would free the region first).
CoreResources::~CoreResources() {
  mr_.reset();
  cq_.reset();
}

int CoreResources::alloc_slot_st() noexcept {
  if (free_slots_.empty()) return -1;
  const int s = free_slots_.back();
  free_slots_.pop_back();
  ++used_;
  return s;
}

void CoreResources::free_slot_st(int slot) noexcept {
  if (slot < 0 || static_cast<std::uint32_t>(slot) >= cfg_.max_conns) return;
  free_slots_.push_back(slot);
  --used_;
}

std::uint32_t send_queue_depth(const CoreConfig& cfg) noexcept {
  return cfg.tx_per_conn + 1 + protocol::kMaxFragments + 2 * cfg.windows_per_conn;
}

void init_core_conn(CoreConn& cc, CoreResources& core, int slot, const CoreConnSetup& setup) {
  const CoreConfig& cfg = core.config();
  const QpInfo& g = setup.granted;
  cc.qp = setup.qp;
  cc.qp_num = g.qp_num;
  cc.state = CoreConnState::kPosted;
  cc.rx_posted = 0;
  cc.credits.reset();
  cc.lkey = core.lkey();
  // The device may grant more than asked; the configured size is what we inline.
  cc.max_inline = std::min({g.max_inline_data, setup.send_inline_bytes, cfg.buf_size});
  cc.buf_size = cfg.buf_size;
  cc.sq_depth = g.max_send_wr;
  cc.signal_interval = static_cast<std::uint16_t>(
      std::max<std::uint32_t>(1, std::min<std::uint32_t>(setup.signal_interval, g.max_send_wr / 4)));
  // With the shared receive queue the connection has no receive buffers of its own.
  const std::uint32_t own_rx = core.srq() != nullptr ? 0 : cfg.rx_per_conn;
  cc.rx.assign(own_rx, RxDesc{});
  for (std::uint32_t i = 0; i < own_rx; ++i) {
    cc.rx[i].conn = &cc;
    cc.rx[i].buf = core.rx_buf(slot, i);
    cc.rx[i].index = i;
  }
  cc.tx.assign(cfg.tx_per_conn, TxDesc{});
  cc.tx_free.assign(cfg.tx_per_conn, 0);
  for (std::uint32_t i = 0; i < cfg.tx_per_conn; ++i) {
    cc.tx[i].conn = &cc;
    cc.tx[i].buf = core.tx_buf(slot, i);
    cc.tx[i].index = static_cast<std::uint16_t>(i);
    cc.tx_free[cfg.tx_per_conn - 1 - i] = static_cast<std::uint16_t>(i);
  }
  cc.tx_free_top = cfg.tx_per_conn;
  cc.drain = TxDesc{};
  cc.drain.conn = &cc;
  cc.links.assign(cfg.tx_per_conn, 0);
  // The windows the QP got (none when the backend or device has none: the requester falls back).
  cc.windows.assign(setup.windows, WindowDesc{});
  for (std::uint32_t i = 0; i < setup.windows; ++i) cc.windows[i] = WindowDesc{&cc, i};
  cc.sq_fifo.assign(std::bit_ceil(send_queue_depth(cfg)), 0);
  cc.sq_head = cc.sq_tail = 0;
  cc.quiesce_sq_mark = 0;
  cc.unsignaled = 0;
  cc.drain_posted = false;
  cc.drain_retry = false;
  cc.early.assign(cfg.rx_per_conn, 0);
  cc.early_count = 0;
  cc.staged_recvs = cc.staged_sends = 0;
  cc.dirty = false;
  cc.owned_index = UINT32_MAX;
  cc.svc = ServiceConnState{};
  cc.bulk_op = BulkOp{};
  cc.bulk_op.conn = &cc;
  cc.chunk_head = cc.chunk_count = 0;
  cc.bulk = cfg.bulk_bytes_per_conn != 0 ? core.bulk_buf(slot) : nullptr;
  cc.bulk_size = cfg.bulk_bytes_per_conn;
  cc.rkey = setup.hand_out_rkey ? core.rkey() : 0;  // the passive side never hands out a key
  cc.rd_depth = setup.rd_depth;
  // cc.auth is control's, set with the session (which comes first on the passive side).
  cc.principal = nullptr;
  cc.tenant_id = 0;
  cc.perms = kPermAll;
  cc.auth_denied_status = 0;
  cc.auth_deadline_tsc = 0;
  cc.auth_usage = nullptr;
  cc.generation = core.next_generation();
}

std::vector<RecvPost> initial_receives(const CoreConn& cc, std::uint32_t n) {
  std::vector<RecvPost> posts;
  posts.reserve(n);
  for (std::uint32_t i = 0; i < n && i < cc.rx.size(); ++i) {
    const RxDesc& d = cc.rx[i];
    posts.push_back(RecvPost{make_wr_id(&d, WrKind::kRecv, cc.generation),
                             Segment{reinterpret_cast<std::uintptr_t>(d.buf), cc.buf_size, cc.lkey}});
  }
  return posts;
}

}  // namespace rdmagate::dataplane

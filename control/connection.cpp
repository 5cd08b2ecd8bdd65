// ConnectionOps for one connection: the real rdma_cm, verbs, ring and timer work behind the lifecycle's
// actions. Control thread only; never dispatches into its own lifecycle (outcomes come back as cm events,
// core replies or timers through the control loop).
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include <rte_cycles.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "control/engine.hpp"
#include "dataplane/tsc.hpp"
#include "protocol/handshake.hpp"
#include "protocol/incarnation.hpp"

namespace rdmagate::control {

namespace {
int neg_errno() { return errno != 0 ? -errno : -EIO; }
}  // namespace

Connection::Connection(Engine& eng, const LifecycleConfig& cfg, std::uint64_t id)
    : eng_(eng), lc_(cfg), id_(id) {}

DispatchResult Connection::dispatch(Event ev, const EventArgs& args) {
  const DispatchResult r = lc_.dispatch(ev, args, *this);
  eng_.note_dispatch_st(r);
  if (r.from != r.to && eng_.cfg_.on_state_change) eng_.cfg_.on_state_change(id_, r.from, r.to);
  return r;
}

void Connection::set_session(const protocol::Session& s) noexcept {
  cc_.session = s;
  cc_.credit_cfg = protocol::CreditConfig{};
  cc_.credit_cfg.queue_depth = s.params.queue_depth;
  // The engine's copy of the core config: set_timeouts_st (SIGHUP) updates its keepalive times.
  const dataplane::CoreConfig& core_cfg = eng_.cfg_.cores[static_cast<std::size_t>(core_ < 0 ? 0 : core_)];
  const std::uint64_t hz = dataplane::tsc_hz();
  cc_.credit_cfg.keepalive_interval = dataplane::us_to_tsc(core_cfg.keepalive_us, hz);
  cc_.credit_cfg.dead_peer_timeout = dataplane::us_to_tsc(core_cfg.dead_peer_us, hz);
}

int Connection::create_cm_id() noexcept {
  if (rdma_create_id(eng_.channel_, &cm_id_, this, RDMA_PS_TCP) != 0) {
    const int e = neg_errno();
    eng_.log_st("rdma_create_id: %s", std::strerror(-e));
    cm_id_ = nullptr;
    return e;
  }
  return 0;
}

int Connection::arm_handshake_timer(Duration timeout) noexcept {
  handshake_deadline_ = std::chrono::steady_clock::now() + timeout;
  return 0;
}

int Connection::resolve_addr() noexcept {
  if (rdma_resolve_addr(cm_id_, nullptr, reinterpret_cast<sockaddr*>(&peer_addr_), eng_.cfg_.resolve_timeout_ms) !=
      0) {
    const int e = neg_errno();
    eng_.log_st("rdma_resolve_addr %s: %s", peer_str_.c_str(), std::strerror(-e));
    return e;
  }
  return 0;
}

int Connection::resolve_route() noexcept {
  if (rdma_resolve_route(cm_id_, eng_.cfg_.resolve_timeout_ms) != 0) {
    const int e = neg_errno();
    eng_.log_st("rdma_resolve_route %s: %s", peer_str_.c_str(), std::strerror(-e));
    return e;
  }
  return 0;
}

int Connection::reserve_core_slot() noexcept {
  // Least-loaded core (SPDK's optimal poll group); ties go to the lowest index.
  int best = -1;
  for (std::size_t i = 0; i < eng_.cores_.size(); ++i) {
    if (pinned_core_ >= 0 && static_cast<std::size_t>(pinned_core_) != i) continue;
    const auto& c = *eng_.cores_[i];
    if (c.load() >= c.config().max_conns) continue;
    if (best < 0 || c.load() < eng_.cores_[static_cast<std::size_t>(best)]->load()) best = static_cast<int>(i);
  }
  if (best < 0) return -ENOSPC;
  const int slot = eng_.cores_[static_cast<std::size_t>(best)]->alloc_slot_st();
  if (slot < 0) return -ENOSPC;
  core_ = best;
  slot_ = slot;
  return 0;
}

int Connection::create_qp() noexcept {
  dataplane::CoreResources& core = *eng_.cores_[static_cast<std::size_t>(core_)];
  const dataplane::CoreConfig& cc = core.config();
  dataplane::QpCaps caps;
  caps.max_send_wr = dataplane::send_queue_depth(cc);
  caps.max_recv_wr = cc.rx_per_conn;
  caps.srq = core.srq();  // the core's shared receive queue, if it has one: the QP gets no receive queue
  caps.max_inline_data = std::min<std::uint32_t>(cc.buf_size, eng_.cfg_.send_inline_bytes);
  dataplane::CoreConnSetup setup;
  std::string err;
  qp_ = eng_.backend_->create_qp(cm_id_, core.cq(), caps, &setup.granted, &err);
  if (qp_ == nullptr) {
    eng_.log_st("%s (peer %s)", err.c_str(), peer_str_.c_str());
    return -EIO;
  }
  setup.qp = qp_.get();
  setup.send_inline_bytes = caps.max_inline_data;
  setup.signal_interval = eng_.cfg_.signal_interval;
  setup.rd_depth = static_cast<std::uint16_t>(
      std::max(1, std::min(eng_.device().limits().max_qp_init_rd_atom, eng_.cfg_.max_rd_atom)));
  setup.hand_out_rkey = lc_.role() == Role::kActive;
  dataplane::init_core_conn(cc_, core, slot_, setup);
  cc_.handle = handle();
  eng_.by_qp_[cc_.qp_num] = this;
  return 0;
}

int Connection::post_rx() noexcept {
  dataplane::CoreResources& core = *eng_.cores_[static_cast<std::size_t>(core_)];
  if (core.srq() != nullptr) {
    // The core's pool holds this connection's share already; from here its QP's receives reach the core.
    if (!dataplane::attach_to_srq(cc_, core)) {
      eng_.log_st("qp 0x%x (peer %s): core %u's connection table is full", cc_.qp_num, peer_str_.c_str(),
                  core.index());
      return -ENOSPC;
    }
    return 0;
  }
  const std::uint32_t n = lc_.role() == Role::kPassive ? rx_to_post_ : static_cast<std::uint32_t>(cc_.rx.size());
  if (n == 0 || n > cc_.rx.size()) return -EINVAL;
  const std::vector<dataplane::RecvPost> posts = dataplane::initial_receives(cc_, n);
  cc_.rx_posted = n;  // before the post: a completion may reach the core at once
  std::string err;
  const std::uint32_t posted = eng_.backend_->post_receives(*qp_, posts, &err);
  if (posted != n) {
    eng_.log_st("%s", err.c_str());
    // The ones posted flush through the core; nothing posted means nothing to drain.
    cc_.rx_posted = posted;
    if (posted == 0) return -EIO;
  }
  return 0;
}

// Both ends offer the same RDMA READ depths and retry counts; only the private data differs. retry_count
// matters only to the active side (rdma_accept ignores it).
rdma_conn_param Connection::conn_param(const std::uint8_t* private_data, std::size_t len) const noexcept {
  rdma_conn_param p{};
  p.private_data = private_data;
  p.private_data_len = static_cast<std::uint8_t>(len);
  const RdmaDeviceLimits& lim = eng_.device().limits();
  p.responder_resources = static_cast<std::uint8_t>(std::min(lim.max_qp_rd_atom, eng_.cfg_.max_rd_atom));
  p.initiator_depth = static_cast<std::uint8_t>(std::min(lim.max_qp_init_rd_atom, eng_.cfg_.max_rd_atom));
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  return p;
}

int Connection::connect() noexcept {
  const protocol::ConnParams dev = eng_.device_params();
  protocol::LocalEndpoint self = eng_.local();
  if (retry_params_) self.params = *retry_params_;  // the peer's, from its mismatch reject
  sent_request_ = protocol::make_connect_request(self, dev, last_peer_incarnation_);
  std::uint8_t buf[protocol::kMaxHandshakeSize] = {};
  const auto enc = protocol::encode_handshake(sent_request_, buf);
  if (!enc.ok()) return -EINVAL;
  rdma_conn_param p = conn_param(buf, enc.size);
  if (rdma_connect(cm_id_, &p) != 0) {
    const int e = neg_errno();
    eng_.log_st("rdma_connect %s qp 0x%x: %s", peer_str_.c_str(), cc_.qp_num, std::strerror(-e));
    return e;
  }
  return 0;
}

int Connection::accept() noexcept {
  std::uint8_t buf[protocol::kMaxHandshakeSize] = {};
  const auto enc = protocol::encode_handshake(accept_body_, buf);
  if (!enc.ok()) return -EINVAL;
  rdma_conn_param p = conn_param(buf, enc.size);
  if (rdma_accept(cm_id_, &p) != 0) {
    const int e = neg_errno();
    eng_.log_st("rdma_accept %s qp 0x%x: %s", peer_str_.c_str(), cc_.qp_num, std::strerror(-e));
    return e;
  }
  ++eng_.counters_.accepts;
  return 0;
}

int Connection::schedule_reconnect(Duration delay) noexcept {
  reconnect_deadline_ = std::chrono::steady_clock::now() + delay;
  reconnect_delays_.push_back(delay);
  ++eng_.counters_.reconnects;
  return 0;
}

bool Connection::send_adopt() noexcept {
  return eng_.cores_[static_cast<std::size_t>(core_)]->control_mailbox().send_st(
      dataplane::ToCore::adopt(handle()));
}

void Connection::send_close(CloseReason why) noexcept {
  eng_.cores_[static_cast<std::size_t>(core_)]->control_mailbox().send_st(dataplane::ToCore::close(handle(), why));
  close_kick_delay_ = kFirstCloseKick;
  close_kick_deadline_ = std::chrono::steady_clock::now() + close_kick_delay_;
}

void Connection::reject(std::uint8_t code) noexcept {
  const auto why = static_cast<protocol::RejectReason>(code);
  const protocol::HandshakeBody body =
      protocol::make_reject(eng_.local(), eng_.device_params(), why, accept_body_.dst_incarnation);
  std::uint8_t buf[protocol::kMaxHandshakeSize] = {};
  const auto enc = protocol::encode_handshake(body, buf);
  if (code <= protocol::kRejectReasonMax) ++eng_.counters_.rejects_sent[code];
  if (rdma_reject(cm_id_, buf, static_cast<std::uint8_t>(enc.ok() ? enc.size : 0)) != 0) {
    eng_.log_st("rdma_reject %s: %m", peer_str_.c_str());
  }
}

void Connection::disconnect() noexcept {
  if (cm_id_ != nullptr && rdma_disconnect(cm_id_) != 0 && errno != EINVAL) {
    eng_.log_st("rdma_disconnect %s qp 0x%x: %m", peer_str_.c_str(), cc_.qp_num);
  }
}

void Connection::move_qp_to_err() noexcept {
  if (qp_ == nullptr) return;
  const int rc = eng_.backend_->qp_to_err(*qp_);
  if (rc != 0) eng_.log_st("modify qp 0x%x to err: %s", cc_.qp_num, std::strerror(-rc));
}

void Connection::cancel_handshake_timer() noexcept { handshake_deadline_.reset(); }
void Connection::cancel_reconnect() noexcept { reconnect_deadline_.reset(); }

void Connection::free_rx() noexcept {
  // The buffers belong to the slot; nothing is posted any more (the core proved it by CLOSED).
  cc_.rx_posted = 0;
}

void Connection::destroy_qp() noexcept {
  if (cc_.qp_num != 0) eng_.by_qp_.erase(cc_.qp_num);
  if (core_ >= 0 && eng_.cores_[static_cast<std::size_t>(core_)]->srq() != nullptr) {
    dataplane::detach_from_srq(cc_, *eng_.cores_[static_cast<std::size_t>(core_)]);
  }
  qp_.reset();
  cc_.qp = nullptr;
}

void Connection::release_core_slot() noexcept {
  if (core_ >= 0) eng_.cores_[static_cast<std::size_t>(core_)]->free_slot_st(slot_);
  slot_ = -1;
}

void Connection::destroy_cm_id() noexcept {
  if (cm_id_ != nullptr && rdma_destroy_id(cm_id_) != 0) eng_.log_st("rdma_destroy_id: %m");
  cm_id_ = nullptr;
}

}  // namespace rdmagate::control

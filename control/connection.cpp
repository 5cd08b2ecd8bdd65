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
#include "dataplane/fault_rules.hpp"
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
  eng_.note_dispatch_st(r, lc_.role());
  // Only a dispatch moves the lifecycle, so reap_st needs to look only at the connections named here.
  if (lc_.destroyable()) eng_.reapable_.push_back(id_);
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
  // Minor 1: the negotiated keepalive, and the dead-peer timeout the peer was told as a floor.
  protocol::set_session_timers(cc_.credit_cfg, s, dataplane::us_to_tsc(core_cfg.keepalive_us, hz),
                               dataplane::us_to_tsc(core_cfg.dead_peer_us, hz), dataplane::us_to_tsc(1000, hz));
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
  eng_.schedule_st(*this, DeadlineKind::kHandshake, eng_.now_st() + timeout);
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
    if (eng_.out_of_service_[i]) continue;  // its CQ was lost: nothing new goes there
    const auto& c = *eng_.cores_[i];
    if (c.load() >= c.config().max_conns) continue;
    if (best < 0 || c.load() < eng_.cores_[static_cast<std::size_t>(best)]->load()) best = static_cast<int>(i);
  }
  if (best < 0) {
    setup_error_ = "no free connection slot on any core in service";
    return -ENOSPC;
  }
  const int slot = eng_.cores_[static_cast<std::size_t>(best)]->alloc_slot_st();
  if (slot < 0) {
    setup_error_ = "core " + std::to_string(best) + "'s connection table is full";
    return -ENOSPC;
  }
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
  // The engine asks for windows only where the device has them (Engine::create decided at start).
  caps.windows = cc.windows_per_conn;
  dataplane::CoreConnSetup setup;
  std::string err;
  qp_ = eng_.backend_->create_qp(cm_id_, core.cq(), caps, &setup.granted, &err);
  if (qp_ == nullptr) {
    // Passive: the reject (or, if the peer is gone, the abandon) line reports it, on the peers' log budget.
    if (lc_.role() == Role::kActive) eng_.log_st("%s (peer %s)", err.c_str(), peer_str_.c_str());
    setup_error_ = err;
    return -EIO;
  }
  setup.qp = qp_.get();
  setup.send_inline_bytes = caps.max_inline_data;
  setup.signal_interval = eng_.cfg_.signal_interval;
  // RDMA READs the core keeps in flight: our initiator depth, which (passive) is clamped to the peer's
  // responder resources from its request; the active side clamps it again at ESTABLISHED from the accept.
  setup.rd_depth = static_cast<std::uint16_t>(std::max(1, initiator_depth()));
  setup.hand_out_rkey = lc_.role() == Role::kActive && eng_.cfg_.core_region_remote();
  setup.windows = caps.windows;
  dataplane::init_core_conn(cc_, core, slot_, setup);
  // The acceptor gates what a peer may send until it authenticated (docs/protocol.md §11); the initiator's
  // session says auth_required too, but its client service runs the exchange, not the core's gate.
  if (lc_.role() == Role::kPassive && cc_.session.auth_required) cc_.auth = dataplane::AuthState::kAwaiting;
  cc_.peer_ip = dataplane::fault_peer_ip(rdma_get_peer_addr(cm_id_));  // what fault rules match (docs/faults.md)
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

int Connection::initiator_depth() const noexcept {
  const int ours = std::min(eng_.device().limits().max_qp_init_rd_atom, eng_.cfg_.max_rd_atom);
  return std::min(ours, static_cast<int>(peer_responder_resources_));
}

int Connection::responder_resources() const noexcept {
  const int ours = std::min(eng_.device().limits().max_qp_rd_atom, eng_.cfg_.max_rd_atom);
  return std::min(ours, static_cast<int>(peer_initiator_depth_));
}

// Both ends offer the same retry counts (kRetryCount, kRnrRetryCount: what the peer's QP uses) and, as RDMA READ
// depths, their device's capped at max_rd_atom; the passive side's are clamped to the request's (SPDK's target
// does the same): never more READs in flight than the peer has responder resources for. retry_count matters
// only to the active side (rdma_accept ignores it).
rdma_conn_param Connection::conn_param(const std::uint8_t* private_data, std::size_t len) const noexcept {
  rdma_conn_param p{};
  p.private_data = private_data;
  p.private_data_len = static_cast<std::uint8_t>(len);
  p.responder_resources = static_cast<std::uint8_t>(responder_resources());
  p.initiator_depth = static_cast<std::uint8_t>(initiator_depth());
  p.retry_count = kRetryCount;
  p.rnr_retry_count = kRnrRetryCount;
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
    setup_error_ = std::string("rdma_accept: ") + std::strerror(-e);
    return e;
  }
  ++eng_.counters_.accepts;
  return 0;
}

int Connection::schedule_reconnect(Duration delay) noexcept {
  eng_.schedule_st(*this, DeadlineKind::kReconnect, eng_.now_st() + delay);
  reconnect_delays_.push_back(delay);
  ++eng_.counters_.reconnects;
  return 0;
}

bool Connection::send_adopt() noexcept {
  return eng_.cores_[static_cast<std::size_t>(core_)]->control_mailbox().send_st(
      dataplane::ToCore::adopt(handle()));
}

void Connection::send_close(CloseReason why) noexcept {
  // A core whose CQ is being declared lost takes a CLOSE as "the QP is destroyed": Engine::on_cq_lost_st
  // sends this connection's CLOSE once it has destroyed the QP.
  if (!eng_.cq_lost_pending_[static_cast<std::size_t>(core_)]) {
    eng_.cores_[static_cast<std::size_t>(core_)]->control_mailbox().send_st(dataplane::ToCore::close(handle(), why));
  }
  close_kick_delay_ = kFirstCloseKick;
  eng_.schedule_st(*this, DeadlineKind::kCloseKick, eng_.now_st() + close_kick_delay_);
}

// A request we took but could not accept (setup failure, timeout, shutdown). When the CM refuses the reject
// too, the peer abandoned the request first: it destroyed its id or gave up, and its REJ (or timeout) moved
// the CM's state on, which is also why rdma_create_qp or rdma_accept failed with EINVAL. That is no reject
// and no lack of resources: it is counted as abandoned (peer_gone), so that
// rdmagate_connection_rejects_total{reason="no_resources"} means what it says.
void Connection::reject(std::uint8_t code) noexcept {
  const auto why = static_cast<protocol::RejectReason>(code);
  const protocol::HandshakeBody body =
      protocol::make_reject(eng_.local(), eng_.device_params(), why, accept_body_.dst_incarnation);
  std::uint8_t buf[protocol::kMaxHandshakeSize] = {};
  const auto enc = protocol::encode_handshake(body, buf);
  const std::string detail =
      setup_error_.empty() ? std::string(dataplane::to_string(lc_.close_reason())) : setup_error_;
  if (rdma_reject(cm_id_, buf, static_cast<std::uint8_t>(enc.ok() ? enc.size : 0)) != 0) {
    const int e = errno;
    ++eng_.counters_.abandoned[static_cast<std::size_t>(AbandonReason::kPeerGone)];
    eng_.log_peer_st("connection request from %s abandoned by the peer during setup (%s; rdma_reject: %s)",
                     peer_str_.c_str(), detail.c_str(), std::strerror(e));
    return;
  }
  if (code <= protocol::kRejectReasonMax) ++eng_.counters_.rejects_sent[code];
  eng_.log_peer_st("reject %s: %s (%s)", peer_str_.c_str(), std::string(protocol::to_string(why)).c_str(),
                   detail.c_str());
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

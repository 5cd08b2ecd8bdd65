#pragma once
// The engine: one device, its protection domain, N data-plane cores, and the control thread's epoll loop
// (rdma_cm event channel, the device's async-event fd, a timerfd, and the cores' reply rings). The engine is
// symmetric: the gateway listens (passive), the client connects (active); both use this same class.
//
//   control/engine.hpp         this API, the Connection object (ConnectionOps implementation)
//   control/control_loop.cpp  setup, the epoll loop, rdma_cm / async-event / core-reply handling, shutdown
//   control/connection.cpp    ConnectionOps: rdma_cm, QP, rx posting, handoff, timers for one connection
//   dataplane/core_loop.hpp   the hot path (CoreLoop<Backend, Service>)
//   dataplane/backend/        the device backend: chosen here at create (EngineConfig::backend), it makes the
//                             CQs, QPs and the core regions' registrations; the cores run its hot path
//
// Threads: every method here runs on the control thread (the main lcore), except the core loops, which run
// on their worker lcores and talk to control only through the handoff rings.

#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "control/admission.hpp"
#include "control/async_fanout.hpp"
#include "control/connection_lifecycle.hpp"
#include "control/deadline_queue.hpp"
#include "control/log_rate_limit.hpp"
#include "control/rdma_device.hpp"
#include "dataplane/auth_table.hpp"
#include "dataplane/backend/backend.hpp"
#include "dataplane/core_conn.hpp"
#include "dataplane/core_resources.hpp"
#include "dataplane/core_runner.hpp"
#include "dataplane/core_sleep.hpp"
#include "dataplane/doorbell.hpp"
#include "dataplane/fault_core.hpp"
#include "protocol/errors.hpp"
#include "protocol/handshake.hpp"

namespace rdmagate::control {

class Engine;

// Who runs the data-plane cores' loops (a setup-time choice; the loop itself is the same).
enum class CoreDriver : std::uint8_t {
  kEalLcores = 0,  // launch_cores starts each on its pinned EAL worker lcore (rte_eal_remote_launch)
  // The engine's owner calls runner(i).progress_st() from one thread of its own (no EAL needed). Cores get
  // CQs armable through cq_channel() (the verbs backend), so the owner can sleep until completions arrive.
  kOwner = 1,
};

struct EngineConfig {
  std::string name = "engine";  // log prefix
  std::string device;           // empty: the only device
  std::string backend = "auto";  // dataplane.backend: "auto" or a backend's name (backend_factory.hpp)
  bool passive = true;          // passive: our memory is registered IBV_ACCESS_LOCAL_WRITE only
  // Active side: whether chunk requests may name the cores' own regions (CoreConn::rkey), which are then
  // registered for remote read and write. The client library and the bench say no: their bulk memory is the
  // caller's, registered per access (docs/client-internals.md "Key scope"), and a gateway must not reach
  // anything else. Test peers that move bulk through the core region say yes.
  bool expose_core_region = true;
  // The one answer to "may a peer reach the cores' regions": how they are registered and whether a chunk
  // request names them both follow it, so no rkey is handed out for memory registered local-only.
  bool core_region_remote() const noexcept { return !passive && expose_core_region; }
  std::vector<dataplane::CoreConfig> cores;
  CoreDriver driver = CoreDriver::kEalLcores;
  protocol::LocalEndpoint local{};   // incarnation 0: process_incarnation()
  std::uint16_t signal_interval = 8;
  BackoffPolicy backoff{};
  Duration handshake_timeout = std::chrono::seconds(10);
  int resolve_timeout_ms = 2000;
  // RDMA READs a connection keeps in flight for read chunks, and what we ask rdma_cm for as initiator depth
  // and responder resources; clamped to the device's max_qp_init_rd_atom / max_qp_rd_atom.
  int max_rd_atom = 16;
  // Admission per source address (the peer's IP, any port), passive side, checked before anything is
  // allocated; a request beyond either is rejected "source_limit" (security.connections_per_source,
  // security.connect_rate, security.connect_burst; Engine::set_admission_st on SIGHUP). Connections in any
  // state count, the handshake included. The requests are a token bucket: connect_burst tokens, refilled at
  // connect_rate per second. 0: no limit (the default here: the client library, the bench and tests build
  // engines directly; the daemon's keys are never 0).
  std::uint32_t max_conns_per_source = 0;
  double connect_rate = 0;
  std::uint32_t connect_burst = 0;
  // Sends up to this many bytes go IBV_SEND_INLINE (dataplane.send_inline_bytes; 0: never); capped by the
  // buffer size and by what the QP grants.
  std::uint32_t send_inline_bytes = 512;
  // Admission of a connection request by the peer's address (the gateway's security.allowed_clients),
  // asked before any resource is allocated; false rejects it "not allowed". Null: every peer is admitted.
  // Control thread; may read state the owner changes between poll_st calls (a SIGHUP reload).
  std::function<bool(const sockaddr* peer)> admit;
  // Where log_st's lines go (without a trailing newline; "warning: " prefixes a warning). Null: stderr.
  std::function<void(std::string_view line)> log_sink;
  // Every applied change of a connection's state, when it happens (control thread, inside poll_st/connect).
  // rdmagate-bench's connect mode times the setup steps with it. Null: nothing is called.
  std::function<void(std::uint64_t id, State from, State to)> on_state_change;
};

// QP and device asynchronous events, as counted (the order of telemetry::kAsyncEventNames).
enum class AsyncEventKind : std::uint8_t {
  kQpFatal = 0, kQpAccessErr = 1, kQpReqErr = 2, kCqErr = 3, kPortActive = 4, kPortErr = 5, kDeviceFatal = 6,
  kOther = 7,
};
inline constexpr std::size_t kAsyncEventKindCount = 8;
constexpr AsyncEventKind async_event_kind(ibv_event_type t) noexcept {
  switch (t) {
    case IBV_EVENT_QP_FATAL: return AsyncEventKind::kQpFatal;
    case IBV_EVENT_QP_ACCESS_ERR: return AsyncEventKind::kQpAccessErr;
    case IBV_EVENT_QP_REQ_ERR: return AsyncEventKind::kQpReqErr;
    case IBV_EVENT_CQ_ERR: return AsyncEventKind::kCqErr;
    case IBV_EVENT_PORT_ACTIVE: return AsyncEventKind::kPortActive;
    case IBV_EVENT_PORT_ERR: return AsyncEventKind::kPortErr;
    case IBV_EVENT_DEVICE_FATAL: return AsyncEventKind::kDeviceFatal;
    default: return AsyncEventKind::kOther;
  }
}

// The rdma_cm retry counts we ask for (docs/protocol.md, rdma_cm parameters). In RC a QP retries an RNR NAK
// as often as the OTHER side asked in its connect request or accept (the IB CM carries the count across), so
// these bound the peer's sends to us, and the peer's counts bound ours: the passive side refuses a request
// asking 7 (retry forever; kRnrRetryForever) with "bad_conn_param". A conforming peer never sees an RNR NAK
// (credits stand for posted receives), so the count only limits how long a peer that broke that rule can
// stall a send queue: 3 expiries of its RNR timer. 7 transport retries is the usual bound on a lost ack.
inline constexpr std::uint8_t kRnrRetryCount = 3;
inline constexpr std::uint8_t kRetryCount = 7;
inline constexpr std::uint8_t kRnrRetryForever = 7;

// What an rdma_cm event says of the peer's RDMA READ depths and RNR retries. The IB CM reports the depths
// from the receiver's side (rdma_get_cm_event(3)): initiator_depth is what we may use as ours (the peer's
// responder resources), responder_resources what we must provide (the peer's initiator depth).
struct PeerConnParam {
  std::uint8_t initiator_depth = 0;
  std::uint8_t responder_resources = 0;
  std::uint8_t rnr_retry_count = 0;
};

// Why a connection request ended before it was accepted with no reject sent (telemetry::kAbandonReasonNames).
enum class AbandonReason : std::uint8_t { kPeerGone = 0, kHandshakeTimeout = 1 };
inline constexpr std::size_t kAbandonReasonCount = 2;

// Control-side counters (plain; control thread only).
struct EngineCounters {
  std::uint64_t connect_requests = 0;
  std::uint64_t accepts = 0;
  std::array<std::uint64_t, protocol::kRejectReasonMax + 1> rejects_sent{};      // by RejectReason
  std::array<std::uint64_t, protocol::kRejectReasonMax + 1> rejects_received{};  // by RejectReason
  std::uint64_t established = 0;
  std::uint64_t reconnects = 0;
  std::uint64_t handshake_failures = 0;  // complete_connect refused the accept
  std::uint64_t core_failures = 0;       // FAILED replies
  std::uint64_t dead_peers = 0;          // FAILED kKeepalive: the peer stayed silent past the timeout
  std::array<std::uint64_t, dataplane::kProtocolStatusEnd> failures_by_status{};  // FAILED kProtocol statuses (wire/credit/unexpected)
  std::uint64_t async_events = 0;
  std::array<std::uint64_t, kAsyncEventKindCount> async_by_kind{};  // by AsyncEventKind
  std::uint64_t illegal_events = 0;
  std::uint64_t destroyed = 0;
  std::uint64_t retries_with_peer_params = 0;  // mismatch rejects answered by a retry with the peer's parameters
  std::uint64_t races_won = 0;  // contested or duplicate requests we rejected "race"
  std::uint64_t remote_cores = 0;  // configured cores not local to the device (hwloc)
  std::uint64_t close_rekicks = 0;  // QPs moved to ERR again because the core's CLOSED was slow (flush kick)
  std::uint64_t quiesce_timeouts = 0;  // SIGTERM drains whose quiesce phase hit the drain timeout
  // FAILED replies for a known connection, by FailureKind value (1..9).
  std::array<std::uint64_t, 10> failures_by_kind{};
  std::array<std::uint64_t, kAbandonReasonCount> abandoned{};  // by AbandonReason
  std::uint64_t cq_lost = 0;        // cores whose CQ went to error (IBV_EVENT_CQ_ERR): out of service
  std::uint64_t faults_qp_err = 0;  // connections a fault-injection qp_err rule moved to ERR
  // Passive connections closed because a reload took their source out of security.allowed_clients.
  std::uint64_t revoked_allowed_clients = 0;
  std::uint64_t auth_nonce_failures = 0;  // RAND_bytes failed for a request's nonce (rejected no_resources)
};

// The engine's log lines per second (log_st), and separately its "accepted" and "closed" lines (log_conn_st);
// beyond them lines are dropped and the next one written says how many ("suppressed=K").
inline constexpr unsigned kLogLinesPerSecond = 20;
inline constexpr unsigned kConnLogLinesPerSecond = 10;
// What peers did (rejects, abandoned requests, violations, peer faults), at warn, on a budget of its own: a
// flood of bad requests neither drowns the engine's other lines nor is drowned by them.
inline constexpr unsigned kPeerLogLinesPerSecond = 10;

// First re-kick of a closing QP whose CLOSED has not come back (Engine::fire_timers_st), doubling up to the
// cap. A core answers CLOSE within microseconds on hardware; the first kick is well past that.
inline constexpr Duration kFirstCloseKick = std::chrono::milliseconds(50);
inline constexpr Duration kMaxCloseKick = std::chrono::seconds(1);

// One connection, owned by the control thread; its CoreConn part is lent to a core between the first
// posted receive and CLOSED.
class Connection final : public ConnectionOps {
 public:
  Connection(Engine& eng, const LifecycleConfig& cfg, std::uint64_t id);
  ~Connection() override = default;

  DispatchResult dispatch(Event ev, const EventArgs& args = {});

  // ConnectionOps.
  int create_cm_id() noexcept override;
  int arm_handshake_timer(Duration timeout) noexcept override;
  int resolve_addr() noexcept override;
  int resolve_route() noexcept override;
  int reserve_core_slot() noexcept override;
  int create_qp() noexcept override;
  int post_rx() noexcept override;
  int connect() noexcept override;
  int accept() noexcept override;
  rdma_conn_param conn_param(const std::uint8_t* private_data, std::size_t len) const noexcept;
  // Our RDMA READ depths: the device's capped at max_rd_atom and clamped to the peer's (passive: from its
  // request; active: 0xff until the accept arrives).
  int initiator_depth() const noexcept;
  int responder_resources() const noexcept;
  int schedule_reconnect(Duration delay) noexcept override;
  bool send_adopt() noexcept override;
  void send_close(CloseReason why) noexcept override;
  void reject(std::uint8_t code) noexcept override;
  void disconnect() noexcept override;
  void move_qp_to_err() noexcept override;
  void cancel_handshake_timer() noexcept override;
  void cancel_reconnect() noexcept override;
  void free_rx() noexcept override;
  void destroy_qp() noexcept override;
  void release_core_slot() noexcept override;
  void destroy_cm_id() noexcept override;

  std::uint64_t id() const noexcept { return id_; }
  const ConnectionLifecycle& lifecycle() const noexcept { return lc_; }
  dataplane::ConnHandle handle() const noexcept { return dataplane::ConnHandle::from_ptr(&cc_); }
  int core() const noexcept { return core_; }
  std::uint32_t qp_num() const noexcept { return cc_.qp_num; }
  std::uint32_t max_inline() const noexcept { return cc_.max_inline; }
  const std::string& peer() const noexcept { return peer_str_; }
  const protocol::Session& session() const noexcept { return cc_.session; }
  const std::vector<Duration>& reconnect_delays() const noexcept { return reconnect_delays_; }
  protocol::RejectReason last_reject() const noexcept { return last_reject_; }
  bool retried_with_peer_params() const noexcept { return retried_with_peer_params_; }

 private:
  friend class Engine;
  void set_session(const protocol::Session& s) noexcept;

  Engine& eng_;
  ConnectionLifecycle lc_;
  std::uint64_t id_;
  rdma_cm_id* cm_id_ = nullptr;
  int core_ = -1;
  int pinned_core_ = -1;  // Engine::connect(core): reserve_core_slot uses only this core
  int slot_ = -1;
  std::unique_ptr<dataplane::BackendQp> qp_;  // the backend's QP (cc_.qp points at it)
  dataplane::CoreConn cc_;
  std::optional<TimePoint> handshake_deadline_;
  std::optional<TimePoint> reconnect_deadline_;
  // CLOSE sent, CLOSED not seen yet: when to move the QP to ERR again (see Engine::fire_timers_st).
  std::optional<TimePoint> close_kick_deadline_;
  Duration close_kick_delay_{};
  // The peer's address: where we connect (active), the request's source (passive: what admit() judges again
  // after a reload).
  sockaddr_storage peer_addr_{};
  // Active side.
  std::string peer_str_;
  protocol::HandshakeBody sent_request_{};
  std::uint64_t last_peer_incarnation_ = 0;
  std::vector<Duration> reconnect_delays_;
  protocol::RejectReason last_reject_ = protocol::RejectReason::kNone;
  // A queue-size or fragments mismatch reject carries the peer's parameters: the next connect offers them
  // (clamped to our device by make_connect_request). Once only: a second mismatch gives up.
  std::optional<protocol::ConnParams> retry_params_;
  bool retried_with_peer_params_ = false;
  // Passive side: the accept body negotiated from the request.
  protocol::HandshakeBody accept_body_{};
  std::uint32_t rx_to_post_ = 0;
  // Passive side: the peer's RDMA READ depths from its connect request (rdma_conn_param), which ours are
  // clamped to: our initiator depth to its responder resources, our responder resources to its initiator
  // depth.
  std::uint8_t peer_responder_resources_ = 0xff;
  std::uint8_t peer_initiator_depth_ = 0xff;
  // Passive side: the source address admission counted this connection under (released when reaped).
  std::optional<SourceKey> admitted_source_;
  // Why the last setup step failed, for the reject line (passive side).
  std::string setup_error_;
  // Passive side, once ESTABLISHED: the QP and lcore it was accepted on, for the "closed" line (the release
  // ladder clears both before the connection is reaped).
  struct Accepted {
    std::uint32_t qp_num = 0;
    unsigned lcore = 0;
  };
  std::optional<Accepted> accepted_;
};

using dataplane::CoreRunner;

class Engine {
 public:
  // Opens the device, allocates the PD, builds every core's resources, opens the event channel, epoll,
  // timerfd. nullptr and *error on failure.
  static std::unique_ptr<Engine> create(const EngineConfig& cfg, std::string* error);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Registers [addr, addr + len) on the engine's PD with `access` (IBV_ACCESS_*); the engine owns the MR and
  // deregisters it in its destructor, before the PD is freed, so the memory must outlive the engine. The
  // gateway registers the store arena IBV_ACCESS_LOCAL_WRITE only (it never hands out a key); a client
  // registers its buffers with the remote flags. nullptr and *error on failure. Control thread, setup time.
  ibv_mr* register_memory(void* addr, std::size_t len, int access, std::string* error);

  // Launches `runners[i]` on core i's lcore (rte_eal_remote_launch pins it). Call once, after create.
  // A runner is dataplane::make_core_runner(backend_kind(), core(i), service): the loop of this engine's
  // backend.
  // CoreDriver::kOwner: keeps the runners for the owner to drive (runner(i)); nothing is launched.
  bool launch_cores(std::vector<std::unique_ptr<CoreRunner>> runners, std::string* error);
  // CoreDriver::kOwner, after launch_cores: core i's loop. One thread at a time drives it.
  CoreRunner& runner(std::size_t i) noexcept { return *runners_[i]; }
  // CoreDriver::kOwner: the completion channel every core's CQ reports to once armed (non-blocking fd).
  ibv_comp_channel* cq_channel() const noexcept { return cq_channel_; }
  // Makes the control thread's current or next poll_st return soon. Any thread. The flag covers a wake()
  // that comes before poll_st arms the bell (the owner's loop checks its own flags first).
  void wake() noexcept {
    wake_pending_.store(true, std::memory_order_release);
    reply_bell_->ring();
  }

  // Passive: listen on addr (IPv4 or IPv6 literal) and port (0: ephemeral). Returns the bound port or 0.
  // backlog: rdma_listen's queue of connection requests not yet handled (listen.backlog).
  std::uint16_t listen(const std::string& addr, std::uint16_t port, std::string* error, int backlog = 128);
  // Active: connect to addr:port and keep the connection up (reconnect with backoff). Returns its id.
  // reconnect=false: give up after the first failure (tools and fault-injection clients).
  // core >= 0 pins the connection (and its reconnects) to that core (the client library keeps one connection
  // per gateway on every core); -1: the least-loaded core at each connect.
  std::uint64_t connect(const std::string& addr, std::uint16_t port, std::string* error, bool reconnect = true,
                        int core = -1);

  // One turn of the control loop: sleeps up to timeout_ms (-1: until something happens) for the fds, a
  // core's reply (the cores ring the reply doorbell only while this thread sleeps), wake() or the timerfd,
  // then handles cm events, async events, core replies and due timers. Nothing wakes it periodically: every
  // deadline (handshake, reconnect backoff, close kick, command-ring backlog retry, the owner's
  // set_deadline_st) is one timerfd, armed at the earliest. The clock is read once per turn (now_st).
  void poll_st(int timeout_ms);
  // Runs poll_st until `pred()` or the deadline; true if pred() held. pred may watch what no fd reports (a
  // core's quiesced flag), so while it is false the loop looks again at least every 5 ms: for shutdown and
  // tests, never for an idle loop.
  bool poll_until_st(const std::function<bool()>& pred, Duration timeout);
  // The owner's own next deadline (the gateway's stats publication, port check, watchdog ping): poll_st
  // returns by then, so the owner can sleep with poll_st(-1). nullopt: none. Control thread.
  void set_deadline_st(std::optional<TimePoint> when) noexcept { owner_deadline_ = when; }
  // An fd of the owner's (the gateway's signalfd) in the loop's epoll: poll_st calls on_readable when it is
  // readable (level-triggered: on_readable must consume what made it so). Control thread, setup time.
  bool watch_fd_st(int fd, std::function<void()> on_readable, std::string* error);
  // The monotonic clock as poll_st read it once after its last sleep (create's time before the first turn).
  // Every deadline and the log rate limits count from it; the public calls that dispatch between turns
  // (connect, close_st, revoke_not_admitted_st, set_fault_rules_st, begin_shutdown_st) read the clock
  // first, so a deadline they set never starts in the past.
  TimePoint now_st() const noexcept { return now_; }

  // A SIGHUP reload of the admission limits (EngineConfig::max_conns_per_source, connect_rate,
  // connect_burst): requests from now on; connections already held stay.
  void set_admission_st(std::uint32_t per_source, double rate, std::uint32_t burst);
  // Installs fault-injection rules (docs/faults.md) on every core (CONFIG kFaultTable) and applies the qp_err
  // rules once: each established connection to a matching peer has its QP moved to ERR, as an
  // IBV_EVENT_QP_FATAL would (closed kQpFatal), counted. An empty table removes every rule.
  void set_fault_rules_st(const dataplane::FaultTable& t);
  // Rules installed now (0: none).
  std::uint32_t fault_rule_count() const noexcept {
    return fault_tables_.current() != nullptr ? fault_tables_.current()->count : 0;
  }
  // The bulk transfer deadline (protocol.bulk_timeout_ms, in us) for every core, live (CONFIG
  // kBulkTimeoutUs).
  void set_bulk_timeout_st(std::uint64_t bulk_timeout_us);
  // Principals and tenants (docs/protocol.md §11): `t` goes to every core (CONFIG kAuthTable), which
  // re-resolves its authenticated connections against it and revokes those whose principal is gone or lost
  // rights. The engine keeps every table until each core applied a later one (CoreResources::auth_applied).
  // From now on, accepts require the AUTH exchange exactly when t->required: each accept then carries a
  // fresh nonce (RAND_bytes) and a request offering no minor >= 2 is rejected auth_required. A table whose
  // generation is not above the last one's is refused (logged; nothing changes). Control thread; the first
  // table must come before the listeners (the command ring is FIFO, so every core has it before any ADOPT).
  void set_auth_table_st(std::unique_ptr<const dataplane::AuthTable> t);
  // security.auth_timeout_ms, in us (> 0): the AUTH deadline of connections adopted from now on (CONFIG
  // kAuthTimeoutUs).
  void set_auth_timeout_st(std::uint64_t auth_timeout_us);
  bool auth_required() const noexcept { return auth_required_; }
  std::size_t auth_tables_kept() const noexcept { return auth_tables_.size(); }
  // Revocation by address after a reload of EngineConfig::admit's rules (security.allowed_clients): every
  // passive connection whose peer admit() now refuses is closed (CloseReason::kRevoked), one log line each
  // (on the connection log budget), counted in revoked_allowed_clients. Handshakes in progress included, so
  // nothing admitted under the old list outlives the reload. Returns how many were closed. Control thread.
  std::size_t revoke_not_admitted_st();
  // Core i lost its CQ (IBV_EVENT_CQ_ERR) and takes no connection any more: readiness reports it.
  bool core_out_of_service(std::size_t i) const noexcept { return out_of_service_[i]; }
  const AdmissionTable& admission() const noexcept { return admission_; }
  // A SIGHUP reload of the timeouts: handshake limit and reconnect backoff (for handshakes and reconnects
  // that start from now on), and every core's keepalive / dead-peer times, which established connections
  // take too (CONFIG through each core's ring; they apply when the core reads its ring).
  void set_timeouts_st(Duration handshake_timeout, const BackoffPolicy& backoff, std::uint64_t keepalive_us,
                       std::uint64_t dead_peer_us);

  // Closes one connection (active side: it reconnects, as after any failure).
  void close_st(std::uint64_t id, CloseReason why);
  // SIGTERM path: stop accepting; quiesce (CONFIG kQuiesce: requests arriving now are answered
  // kCompletion kNoResources, none of ours are started) and let in-flight requests finish, bounded by
  // drain_timeout (counted in quiesce_timeouts when it expires: what is still in flight then fails with
  // the connection); then close every connection for good, wait for the cores' CLOSED (bounded by
  // drain_timeout again), stop the cores. True if the close phase drained in time.
  bool shutdown_st(Duration drain_timeout);
  // The quiesce phase alone: stop accepting, tell every core, poll until every core reports quiesced or
  // the timeout. True if quiesced in time.
  bool quiesce_st(Duration timeout);
  // The same in steps, for a thread that drives several engines: begin, poll until drained_st(), stop.
  void begin_shutdown_st();
  bool drained_st() const noexcept { return conns_.empty() && pending_requests_.empty(); }
  void stop_cores_st();

  // Observation (control thread).
  std::size_t connection_count() const noexcept { return conns_.size(); }
  std::size_t owned_count() const noexcept;
  // One line per connection still held (at most `limit`): peer, qp, lifecycle state and the resources it
  // still holds, e.g.
  // "198.18.0.2:4791 qp 0x12 closing {cm_id, core slot, qp, rx posted, core reference}". What an operator
  // (and a test) needs when a drain times out. Once the cores are stopped it adds the core's view (its
  // connection state, receives still posted, sends in flight).
  std::string describe_connections_st(std::size_t limit = 16) const;
  Connection* find(std::uint64_t id) noexcept;
  std::vector<Connection*> connections() const;
  const EngineCounters& counters() const noexcept { return counters_; }
  dataplane::CoreResources& core(std::size_t i) noexcept { return *cores_[i]; }
  const dataplane::CoreResources& core(std::size_t i) const noexcept { return *cores_[i]; }
  std::size_t core_count() const noexcept { return cores_.size(); }
  const RdmaDevice& device() const noexcept { return *device_; }
  dataplane::BackendKind backend_kind() const noexcept { return backend_->kind(); }
  const char* backend_name() const noexcept { return backend_->name(); }
  // The protection domain every core's memory and QP live in (the client registers caller buffers in it).
  ibv_pd* pd() const noexcept { return pd_; }
  const EngineConfig& config() const noexcept { return cfg_; }
  // What we offer: our parameters clamped to the device.
  protocol::ConnParams device_params() const noexcept;
  const protocol::LocalEndpoint& local() const noexcept { return cfg_.local; }

 private:
  friend class Connection;
  Engine() = default;

  // Reads the channel to the end (or until pending_requests_ is full): every event but a CONNECT_REQUEST is
  // dispatched at once, requests are queued.
  void read_cm_events_st();
  // Up to kRequestsPerTurn queued requests, the channel read again after each.
  void accept_pending_st();
  // No more accepts: queued requests refused ("shutting down"), listeners destroyed.
  void stop_accepting_st();
  void handle_async_events_st();
  void drain_cores_st();
  void fire_timers_st();
  void reap_st();
  void on_connect_request_st(rdma_cm_id* child, const std::vector<std::uint8_t>& pd, const PeerConnParam& param);
  void arm_timerfd_st(bool backlog);
  // Sets one of c's deadlines and queues it (DeadlineQueue); the member stays the truth, the queue the index.
  void schedule_st(Connection& c, DeadlineKind kind, TimePoint when);
  void refresh_clock_st() noexcept { now_ = std::chrono::steady_clock::now(); }
  std::optional<TimePoint>& deadline_of(Connection& c, DeadlineKind kind) noexcept;
  // The earliest deadline of a live connection still set to its queued time (stale entries dropped).
  const DeadlineEntry* next_deadline_st();
  // Sets every core's stop flag and wakes the sleeping ones.
  void signal_stop_st();
  Connection* by_handle(dataplane::ConnHandle h) noexcept;
  void log_st(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  // An accepted or closed connection, at info: rate-limited on its own budget, so that a connection storm
  // neither drowns log_st's lines nor is drowned by them.
  void log_conn_st(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void emit_log_st(LogRateLimit& limit, const char* fmt, va_list ap);
  void emit_st(LogRateLimit& limit, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  void note_accepted_st(Connection& c);
  void note_reaped_st(const Connection& c);
  void note_dispatch_st(const DispatchResult& r, Role role);
  // A peer's reject, abandoned request, violation or fault, at warn, on its own budget
  // (kPeerLogLinesPerSecond).
  void log_peer_st(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  // Sends a reject for a request we never turned into a Connection, counts and logs it.
  void reject_request_st(rdma_cm_id* child, const std::string& peer, protocol::RejectReason why,
                         std::uint64_t their_incarnation, const char* detail);
  // IBV_EVENT_CQ_ERR on core i's CQ: take it out of service (docs/engine.md, the CQ_ERR sequence).
  void on_cq_error_st(std::size_t core);
  void on_cq_lost_st(unsigned core);

  struct ReplyHandler;

  EngineConfig cfg_;
  std::unique_ptr<RdmaDevice> device_;
  ibv_pd* pd_ = nullptr;
  std::unique_ptr<dataplane::DeviceBackend> backend_;
  std::vector<ibv_mr*> mrs_;  // register_memory's, deregistered before the PD
  std::vector<std::unique_ptr<dataplane::CoreResources>> cores_;
  // By core: what an idle_policy event core sleeps on (null for the others); destroyed after cores_.
  std::vector<std::unique_ptr<dataplane::CoreSleeper>> sleepers_;
  std::vector<std::unique_ptr<CoreRunner>> runners_;
  std::vector<unsigned> launched_lcores_;
  rdma_event_channel* channel_ = nullptr;
  ibv_comp_channel* cq_channel_ = nullptr;            // CoreDriver::kOwner
  std::unique_ptr<dataplane::Doorbell> reply_bell_;  // rung by the cores' replies and wake() while we sleep
  std::atomic<bool> wake_pending_{false};            // wake() since the last poll_st
  int epfd_ = -1;
  int timerfd_ = -1;
  // What timerfd_ is set to (skips re-arming the same deadline), set_deadline_st's, now_st's.
  std::optional<TimePoint> timer_armed_;
  std::optional<TimePoint> owner_deadline_;
  TimePoint now_{};
  std::vector<std::function<void()>> watched_;  // watch_fd_st's callbacks, by epoll tag - kTagWatchedBase
  std::unique_ptr<AsyncInbox> async_inbox_;  // this engine's share of the device's async events
  std::vector<rdma_cm_id*> listeners_;
  // CONNECT_REQUESTs read from the channel, not handled yet (read_cm_events_st). At most
  // pending_requests_cap_: the largest listen backlog, so the requests held here and in the kernel's queue
  // together stay within twice what the operator allowed.
  struct PendingRequest {
    rdma_cm_id* child = nullptr;
    std::vector<std::uint8_t> pd;
    PeerConnParam param;
  };
  std::deque<PendingRequest> pending_requests_;
  std::size_t pending_requests_cap_ = 0;
  std::unordered_map<std::uint64_t, std::unique_ptr<Connection>> conns_;
  // The active ones among conns_: what a connect request may race with (on_connect_request_st), so that a
  // gateway's accepts do not scan its passive connections.
  std::unordered_map<std::uint64_t, Connection*> active_;
  DeadlineQueue deadlines_;
  std::vector<DeadlineEntry> due_;       // fire_timers_st's entries of this turn (kept for its capacity)
  std::vector<std::uint64_t> reapable_;  // ids that reached kDestroyed with nothing held (reap_st)
  std::unordered_map<std::uint64_t, Connection*> by_handle_;
  std::unordered_map<std::uint32_t, Connection*> by_qp_;
  std::uint64_t next_id_ = 1;
  bool accepting_ = true;
  EngineCounters counters_{};
  LogRateLimit log_limit_{kLogLinesPerSecond, std::chrono::seconds(1)};
  LogRateLimit conn_log_limit_{kConnLogLinesPerSecond, std::chrono::seconds(1)};
  LogRateLimit peer_log_limit_{kPeerLogLinesPerSecond, std::chrono::seconds(1)};
  AdmissionTable admission_;
  // By core: its CQ went to error; no connection is placed on it any more (reserve_core_slot skips it).
  std::vector<bool> out_of_service_;
  // By core: kCqLost sent, its reply not seen yet. No CLOSE goes to such a core (the core in lost mode takes
  // a CLOSE as "the QP is destroyed"); on_cq_lost_st sends them, each after destroying the QP.
  std::vector<bool> cq_lost_pending_;
  // Fault-injection tables sent to the cores; freed once every core applied a later one (fire_timers_st).
  dataplane::FaultTablePublisher fault_tables_;
  // Auth tables sent to the cores, oldest first; freed once every core applied a later one (fire_timers_st).
  std::vector<std::unique_ptr<const dataplane::AuthTable>> auth_tables_;
  bool auth_required_ = false;  // the last table's `required`: what accepts announce
};

}  // namespace rdmagate::control

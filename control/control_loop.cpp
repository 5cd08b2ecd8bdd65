// The control thread: engine setup, the epoll loop over the rdma_cm event channel, the device async-event
// fd, a timerfd and the cores' reply rings; connection requests, negotiation, placement; shutdown.
#include <arpa/inet.h>
#include <fcntl.h>
#include <hwloc.h>
#include <hwloc/openfabrics-verbs.h>
#include <netdb.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "control/engine.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "dataplane/core_sleep_verbs.hpp"
#include "protocol/auth.hpp"
#include "protocol/incarnation.hpp"

namespace rdmagate::control {

namespace {

constexpr std::uint64_t kTagChannel = 1;
constexpr std::uint64_t kTagAsync = 2;
constexpr std::uint64_t kTagTimer = 3;
constexpr std::uint64_t kTagAsyncInbox = 4;
constexpr std::uint64_t kTagReplyBell = 5;
constexpr std::uint64_t kTagWatchedBase = 16;  // watch_fd_st's fds: kTagWatchedBase + their index

// A command ring that is full has no fd to wait on: the backlog is retried this long after the turn that
// left it (a core drains its ring within microseconds unless it is stalled).
constexpr Duration kBacklogRetry = std::chrono::milliseconds(1);

// Connection requests accepted per turn before core replies and timers get theirs. An accept is the
// control thread's longest step (QP creation, three modifies, the REP: 1-3 ms under qemu TCG).
constexpr unsigned kRequestsPerTurn = 16;

// The timerfd is set in absolute CLOCK_MONOTONIC time, which is steady_clock's clock, so arming it needs no
// clock read of its own.
static_assert(std::chrono::steady_clock::is_steady);
itimerspec absolute(TimePoint t) {
  const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  itimerspec its{};
  its.it_value.tv_sec = ns / 1'000'000'000;
  its.it_value.tv_nsec = ns % 1'000'000'000;
  // it_value zero would disarm; the monotonic clock is past its epoch once the machine has booted.
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  return its;
}

bool set_nonblock(int fd) {
  const int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

bool parse_addr(const std::string& addr, std::uint16_t port, sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  if (inet_pton(AF_INET, addr.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    return true;
  }
  return false;
}

std::string addr_string(const sockaddr* sa) {
  if (sa == nullptr) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  std::uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
    port = ntohs(v4->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (sa->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
    port = ntohs(v6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

bool same_host(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

// The cores whose lcore may run on a CPU that is not local to the device (hwloc_ibv_get_device_cpuset;
// devices without a PCI parent, such as rxe, are local to every CPU). Returns the lcores, or nothing when
// hwloc cannot tell.
std::vector<unsigned> remote_lcores(ibv_device* dev, const std::vector<unsigned>& lcores) {
  std::vector<unsigned> remote;
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) != 0) return remote;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (set != nullptr && hwloc_topology_load(topo) == 0 && hwloc_ibv_get_device_cpuset(topo, dev, set) == 0) {
    for (unsigned l : lcores) {
      const rte_cpuset_t cpus = rte_lcore_cpuset(l);
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &cpus) && !hwloc_bitmap_isset(set, static_cast<unsigned>(cpu))) {
          remote.push_back(l);
          break;
        }
      }
    }
  }
  if (set != nullptr) hwloc_bitmap_free(set);
  hwloc_topology_destroy(topo);
  return remote;
}

int core_trampoline(void* arg) { return static_cast<CoreRunner*>(arg)->run_st(); }

// What a peer's reject allows (lifecycle RetryHint).
RetryHint retry_for(protocol::RejectReason r) {
  switch (r) {
    case protocol::RejectReason::kQueueSizeMismatch:
    case protocol::RejectReason::kFragmentsMismatch:
    case protocol::RejectReason::kStale:
      return RetryHint::kImmediate;
    case protocol::RejectReason::kIncompatibleVersion:
    case protocol::RejectReason::kFatal:
    case protocol::RejectReason::kNotAllowed:
    case protocol::RejectReason::kRace:
    case protocol::RejectReason::kBadPrivateData:
    case protocol::RejectReason::kBadConnParam:
    case protocol::RejectReason::kAuthRequired:
      return RetryHint::kNever;
    default:
      return RetryHint::kBackoff;
  }
}

// The verbs CQ behind a core's BackendCq, to match IBV_EVENT_CQ_ERR's element.cq.
const void* verbs_cq_of(const dataplane::BackendCq& cq) { return cq.verbs_cq; }

std::uint64_t random_seed() {
  std::uint64_t s = 0;
  if (getrandom(&s, sizeof s, 0) != static_cast<ssize_t>(sizeof s)) {
    s = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return s;
}

}  // namespace

// ---- setup -------------------------------------------------------------------------------------------

std::unique_ptr<Engine> Engine::create(const EngineConfig& cfg, std::string* error) {
  std::unique_ptr<Engine> e(new Engine());
  e->cfg_ = cfg;
  e->admission_ = AdmissionTable({cfg.max_conns_per_source, cfg.connect_rate, cfg.connect_burst}, random_seed());
  e->out_of_service_.assign(cfg.cores.size(), false);
  e->cq_lost_pending_.assign(cfg.cores.size(), false);
  if (e->cfg_.local.incarnation == 0) e->cfg_.local.incarnation = protocol::process_incarnation();
  if (cfg.cores.empty()) {
    *error = cfg.name + ": no data-plane core configured";
    return nullptr;
  }
  RdmaProbe probe;
  e->device_ = RdmaDevice::open(cfg.device, &probe);
  if (!e->device_) {
    *error = probe.message;
    return nullptr;
  }
  e->pd_ = ibv_alloc_pd(e->device_->context());
  if (e->pd_ == nullptr) {
    *error = std::string("ibv_alloc_pd: ") + std::strerror(errno);
    return nullptr;
  }
  e->backend_ = dataplane::make_device_backend(cfg.backend, e->device_->context(), e->pd_, error);
  if (e->backend_ == nullptr) {
    *error = cfg.name + ": " + *error;
    return nullptr;
  }
  const bool owner_driven = cfg.driver == CoreDriver::kOwner;
  if (owner_driven) {
    e->cq_channel_ = ibv_create_comp_channel(e->device_->context());
    if (e->cq_channel_ == nullptr || !set_nonblock(e->cq_channel_->fd)) {
      *error = cfg.name + ": ibv_create_comp_channel: " + std::strerror(errno);
      return nullptr;
    }
  }
  for (std::size_t i = 0; i < cfg.cores.size(); ++i) {
    dataplane::CoreConfig cc = cfg.cores[i];
    if (owner_driven) cc.cq_channel = e->cq_channel_;
    // Windows only where the backend binds them: without, the requester keeps its registration's keys (its
    // owner reads the core's config to learn which, and says so).
    if (!e->backend_->type2_windows()) cc.windows_per_conn = 0;
    cc.access = cfg.core_region_remote()
                    ? (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)
                    : IBV_ACCESS_LOCAL_WRITE;
    if (cc.socket < 0 && e->device_->numa_node() >= 0) cc.socket = e->device_->numa_node();
    // idle_policy event on an EAL core: it sleeps on its CQ's completion channel and on control's doorbell.
    std::unique_ptr<dataplane::CoreSleeper> sleeper;
    const char* what = "";
    if (!owner_driven && cc.idle == dataplane::IdlePolicy::kEvent) {
      what = "dataplane.idle_policy event: ";
      sleeper = dataplane::make_verbs_sleeper(e->device_->context(), error);
      if (!sleeper) {
        *error = cfg.name + ": core " + std::to_string(i) + ": " + what + *error;
        return nullptr;
      }
      cc.cq_channel = sleeper->channel();
      cc.sleeper = sleeper.get();
    }
    auto core = dataplane::CoreResources::create(static_cast<unsigned>(i), cc, *e->backend_, error);
    if (!core) {
      *error = cfg.name + ": core " + std::to_string(i) + ": " + what + *error;
      return nullptr;
    }
    if (sleeper) core->control_mailbox().set_wake(&sleeper->bell());
    e->cores_.push_back(std::move(core));
    e->sleepers_.push_back(std::move(sleeper));
    const dataplane::CoreResources& made = *e->cores_.back();
    if (!made.srq_note().empty()) {
      e->log_st("%s", made.srq_note().c_str());
    } else if (made.srq() != nullptr) {
      e->log_st("core %zu: shared receive queue of %u receives (%u connections x %u credits)", i,
                made.pool_size(), made.config().max_conns, made.config().rx_per_conn);
    }
  }
  // Placement: memory follows the device's NUMA node (above); warn when a configured core is remote.
  std::vector<unsigned> lcores;
  for (const auto& cc : cfg.cores) lcores.push_back(cc.lcore);
  // Owner-driven cores run on no lcore: nothing to place.
  for (unsigned l : owner_driven ? std::vector<unsigned>{} : remote_lcores(e->device_->context()->device, lcores)) {
    ++e->counters_.remote_cores;
    e->log_st("warning: lcore %u runs on cpus not local to %s (hwloc); expect cross-socket traffic", l,
              e->device_->name().c_str());
  }
  e->channel_ = rdma_create_event_channel();
  if (e->channel_ == nullptr || !set_nonblock(e->channel_->fd)) {
    *error = std::string("rdma_create_event_channel: ") + std::strerror(errno);
    return nullptr;
  }
  e->epfd_ = epoll_create1(EPOLL_CLOEXEC);
  e->timerfd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (e->epfd_ < 0 || e->timerfd_ < 0 || !set_nonblock(e->device_->context()->async_fd)) {
    *error = std::string("epoll/timerfd setup: ") + std::strerror(errno);
    return nullptr;
  }
  e->async_inbox_ = AsyncInbox::create(e->device_->context(), error);
  if (!e->async_inbox_) return nullptr;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTagChannel;
  int rc = epoll_ctl(e->epfd_, EPOLL_CTL_ADD, e->channel_->fd, &ev);
  ev.data.u64 = kTagAsync;
  rc |= epoll_ctl(e->epfd_, EPOLL_CTL_ADD, e->device_->context()->async_fd, &ev);
  ev.data.u64 = kTagTimer;
  rc |= epoll_ctl(e->epfd_, EPOLL_CTL_ADD, e->timerfd_, &ev);
  ev.data.u64 = kTagAsyncInbox;
  rc |= epoll_ctl(e->epfd_, EPOLL_CTL_ADD, e->async_inbox_->fd(), &ev);
  // The cores ring this after a reply only while the control thread sleeps (Doorbell's armed flag), so a
  // busy control thread costs them no syscall and an idle one is not woken to look at empty rings.
  e->reply_bell_ = std::make_unique<dataplane::Doorbell>();
  ev.data.u64 = kTagReplyBell;
  rc |= e->reply_bell_->valid() ? epoll_ctl(e->epfd_, EPOLL_CTL_ADD, e->reply_bell_->fd(), &ev) : -1;
  for (auto& core : e->cores_) core->core_mailbox().set_wake(e->reply_bell_.get());
  if (rc != 0) {
    *error = std::string("epoll_ctl / eventfd: ") + std::strerror(errno);
    return nullptr;
  }
  e->now_ = std::chrono::steady_clock::now();
  return e;
}

bool Engine::watch_fd_st(int fd, std::function<void()> on_readable, std::string* error) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTagWatchedBase + watched_.size();
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    *error = cfg_.name + ": epoll_ctl(fd " + std::to_string(fd) + "): " + std::strerror(errno);
    return false;
  }
  watched_.push_back(std::move(on_readable));
  return true;
}

ibv_mr* Engine::register_memory(void* addr, std::size_t len, int access, std::string* error) {
  if (addr == nullptr || len == 0) {
    *error = cfg_.name + ": register_memory: empty range";
    return nullptr;
  }
  ibv_mr* mr = ibv_reg_mr(pd_, addr, len, access);
  if (mr == nullptr) {
    *error = cfg_.name + ": ibv_reg_mr(" + std::to_string(len) + " bytes): " + std::strerror(errno);
    return nullptr;
  }
  mrs_.push_back(mr);
  return mr;
}

Engine::~Engine() {
  // Cores first (they may still poll the CQs), then connections, listeners, cores' resources, PD.
  signal_stop_st();
  for (unsigned l : launched_lcores_) rte_eal_wait_lcore(l);
  for (auto& [id, c] : conns_) {
    if (c->qp_ != nullptr) c->destroy_qp();
    if (c->cm_id_ != nullptr) c->destroy_cm_id();
  }
  active_.clear();
  conns_.clear();
  for (PendingRequest& r : pending_requests_) rdma_destroy_id(r.child);
  pending_requests_.clear();
  for (rdma_cm_id* l : listeners_) rdma_destroy_id(l);
  cores_.clear();
  sleepers_.clear();  // after the CQs: a completion channel with a CQ attached cannot be destroyed
  backend_.reset();
  for (ibv_mr* mr : mrs_) {
    if (ibv_dereg_mr(mr) != 0) std::fprintf(stderr, "rdmagate: ibv_dereg_mr: %m\n");
  }
  mrs_.clear();
  if (pd_ != nullptr && ibv_dealloc_pd(pd_) != 0) std::fprintf(stderr, "rdmagate: ibv_dealloc_pd: %m\n");
  if (timerfd_ >= 0) close(timerfd_);
  if (epfd_ >= 0) close(epfd_);
  if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
  // After the CQs (cores_): a channel with CQs still attached cannot be destroyed.
  if (cq_channel_ != nullptr && ibv_destroy_comp_channel(cq_channel_) != 0) {
    std::fprintf(stderr, "rdmagate: ibv_destroy_comp_channel: %m\n");
  }
}

bool Engine::launch_cores(std::vector<std::unique_ptr<CoreRunner>> runners, std::string* error) {
  if (runners.size() != cores_.size()) {
    *error = "launch_cores: one runner per core";
    return false;
  }
  runners_ = std::move(runners);
  if (cfg_.driver == CoreDriver::kOwner) return true;
  for (std::size_t i = 0; i < cores_.size(); ++i) {
    const unsigned lcore = cores_[i]->config().lcore;
    const int rc = rte_eal_remote_launch(core_trampoline, runners_[i].get(), lcore);
    if (rc != 0) {
      *error = "rte_eal_remote_launch on lcore " + std::to_string(lcore) + ": " + std::strerror(-rc);
      return false;
    }
    launched_lcores_.push_back(lcore);
  }
  return true;
}

protocol::ConnParams Engine::device_params() const noexcept {
  const RdmaDeviceLimits& lim = device_->limits();
  std::uint32_t depth = cores_[0]->config().rx_per_conn;
  depth = std::min<std::uint32_t>(depth, static_cast<std::uint32_t>(std::max(lim.max_qp_wr, 1)));
  protocol::ConnParams p;
  p.queue_depth = static_cast<std::uint16_t>(std::min<std::uint32_t>(depth, 0xffff));
  p.max_message_size = cores_[0]->config().buf_size;
  p.max_fragments = protocol::kMaxFragments;
  p.max_bulk_size = 0xffffffffu;
  return p;
}

std::uint16_t Engine::listen(const std::string& addr, std::uint16_t port, std::string* error, int backlog) {
  sockaddr_storage ss{};
  if (!parse_addr(addr, port, &ss)) {
    *error = "listen: not an IPv4 or IPv6 address: " + addr;
    return 0;
  }
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_, &id, nullptr, RDMA_PS_TCP) != 0) {
    *error = std::string("rdma_create_id: ") + std::strerror(errno);
    return 0;
  }
  if (ss.ss_family == AF_INET6) {
    int only = 1;
    rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &only, sizeof(only));
  }
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&ss)) != 0 || rdma_listen(id, backlog) != 0) {
    *error = "listen on " + addr + ": " + std::strerror(errno);
    rdma_destroy_id(id);
    return 0;
  }
  listeners_.push_back(id);
  pending_requests_cap_ = std::max(pending_requests_cap_, static_cast<std::size_t>(std::max(backlog, 1)));
  return ntohs(rdma_get_src_port(id));
}

std::uint64_t Engine::connect(const std::string& addr, std::uint16_t port, std::string* error, bool reconnect,
                              int core) {
  if (core >= static_cast<int>(cores_.size())) {
    *error = "connect: no core " + std::to_string(core);
    return 0;
  }
  LifecycleConfig lc;
  lc.role = Role::kActive;
  lc.reconnect = reconnect;
  lc.backoff = cfg_.backoff;
  lc.handshake_timeout = cfg_.handshake_timeout;
  lc.reject_code_unavailable = static_cast<std::uint8_t>(protocol::RejectReason::kNoResources);
  refresh_clock_st();  // called between turns: the handshake deadline counts from now
  const std::uint64_t id = next_id_++;
  auto conn = std::make_unique<Connection>(*this, lc, id);
  conn->pinned_core_ = core;
  if (!parse_addr(addr, port, &conn->peer_addr_)) {
    *error = "connect: not an IPv4 or IPv6 address: " + addr;
    return 0;
  }
  conn->peer_str_ = addr_string(reinterpret_cast<const sockaddr*>(&conn->peer_addr_));
  Connection* c = conn.get();
  conns_.emplace(id, std::move(conn));
  active_.emplace(id, c);
  by_handle_[c->handle().value] = c;
  c->dispatch(Event::kStart);
  return id;
}

// ---- the loop ----------------------------------------------------------------------------------------

void Engine::poll_st(int timeout_ms) {
  // Arm the bell, then look at the rings once more: a reply put there before the arm rang nothing.
  reply_bell_->arm();
  if (wake_pending_.exchange(false, std::memory_order_acq_rel)) timeout_ms = 0;
  if (!pending_requests_.empty()) timeout_ms = 0;
  bool backlog = false;
  for (auto& core : cores_) {
    const dataplane::ControlMailbox& mb = core->control_mailbox();
    if (mb.has_replies_st()) timeout_ms = 0;
    backlog = backlog || mb.has_backlog_st();
  }
  arm_timerfd_st(backlog);
  epoll_event evs[8];
  const int n = epoll_wait(epfd_, evs, 8, timeout_ms);
  if (n < 0 && errno != EINTR) log_st("epoll_wait: %m");
  bool rung = false;
  for (int i = 0; i < n; ++i) rung = rung || evs[i].data.u64 == kTagReplyBell;
  reply_bell_->disarm(rung);                // the rings are drained below, whatever woke us
  now_ = std::chrono::steady_clock::now();  // the one clock read of this turn
  for (int i = 0; i < n; ++i) {
    if (evs[i].data.u64 >= kTagWatchedBase) {
      watched_[evs[i].data.u64 - kTagWatchedBase]();
      continue;
    }
    switch (evs[i].data.u64) {
      case kTagChannel:
        read_cm_events_st();
        break;
      case kTagAsync:
        async_inbox_->read_and_publish();  // to every engine on this device, this one included
        handle_async_events_st();
        break;
      case kTagAsyncInbox:
        handle_async_events_st();
        break;
      case kTagReplyBell:  // read by disarm(rung)
        break;
      case kTagTimer: {
        std::uint64_t ticks = 0;
        if (read(timerfd_, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN) log_st("read timerfd: %m");
        timer_armed_.reset();  // expired: a deadline still due (the owner's, not yet moved) is armed again
        break;
      }
      default:
        break;
    }
  }
  accept_pending_st();
  drain_cores_st();
  fire_timers_st();
  reap_st();
}

bool Engine::poll_until_st(const std::function<bool()>& pred, Duration timeout) {
  constexpr auto kLookAgain = std::chrono::milliseconds(5);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now_);
    if (left.count() <= 0) return false;
    poll_st(static_cast<int>(std::min(left, std::chrono::milliseconds(kLookAgain)).count()));
  }
  return true;
}

void Engine::arm_timerfd_st(bool backlog) {
  std::optional<TimePoint> next = owner_deadline_;
  if (backlog) next = std::min(next.value_or(TimePoint::max()), now_ + kBacklogRetry);
  // Stale entries outnumbering the live connections: rebuild from the connections' own deadlines.
  if (deadlines_.size() > 2 * conns_.size() + 64) {
    deadlines_.clear();
    for (auto& [id, c] : conns_) {
      for (const DeadlineKind k :
           {DeadlineKind::kHandshake, DeadlineKind::kReconnect, DeadlineKind::kCloseKick}) {
        if (const std::optional<TimePoint>& d = deadline_of(*c, k)) deadlines_.push(*d, id, k);
      }
    }
  }
  if (const DeadlineEntry* e = next_deadline_st(); e != nullptr && (!next || e->when < *next)) next = e->when;
  // Most turns leave the earliest deadline where it was: no syscall for them.
  if (next == timer_armed_) return;
  const itimerspec its = next ? absolute(*next) : itimerspec{};
  if (timerfd_settime(timerfd_, TFD_TIMER_ABSTIME, &its, nullptr) != 0) {
    log_st("timerfd_settime: %m");
    return;
  }
  timer_armed_ = next;
}

// Requests wait while everything else goes first. Under a burst of requests (1,000 clients starting at
// once) the channel holds hundreds of them, and an ESTABLISHED read in order waited behind every request
// that came before it: the connection's ADOPT with it, so the peer's first messages sat parked until
// control had accepted nearly everyone (in the 1,000-connection setup in the guest, no connection was
// verified before 2.6 s of 3.3). Dispatched at once, each connection reaches its core right after its
// accept completes, and the cores answer while control accepts the rest. A connection's own events never
// reorder: nothing but its request can arrive before its accept.
void Engine::read_cm_events_st() {
  for (;;) {
    if (pending_requests_cap_ != 0 && pending_requests_.size() >= pending_requests_cap_) return;
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel_, &ev) != 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) log_st("rdma_get_cm_event: %m");
      return;
    }
    // Copy what we need and ack at once: rdma_destroy_id (run by the lifecycle) waits for every ack.
    const rdma_cm_event_type type = ev->event;
    const int status = ev->status;
    rdma_cm_id* id = ev->id;
    const bool is_request = type == RDMA_CM_EVENT_CONNECT_REQUEST;
    const PeerConnParam peer_param{ev->param.conn.initiator_depth, ev->param.conn.responder_resources,
                                   ev->param.conn.rnr_retry_count};
    std::vector<std::uint8_t> pd;
    if (ev->param.conn.private_data != nullptr) {
      const auto* p = static_cast<const std::uint8_t*>(ev->param.conn.private_data);
      pd.assign(p, p + ev->param.conn.private_data_len);
    }
    auto* conn = is_request ? nullptr : static_cast<Connection*>(id->context);
    rdma_ack_cm_event(ev);

    if (is_request) {
      pending_requests_.push_back(PendingRequest{id, std::move(pd), peer_param});
      continue;
    }
    if (conn == nullptr) continue;  // a listener's event
    EventArgs args;
    args.status = status;
    switch (type) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
        conn->dispatch(Event::kAddrResolved, args);
        break;
      case RDMA_CM_EVENT_ADDR_ERROR:
        conn->dispatch(Event::kAddrError, args);
        break;
      case RDMA_CM_EVENT_ROUTE_RESOLVED:
        conn->dispatch(Event::kRouteResolved, args);
        break;
      case RDMA_CM_EVENT_ROUTE_ERROR:
        conn->dispatch(Event::kRouteError, args);
        break;
      case RDMA_CM_EVENT_UNREACHABLE:
        conn->dispatch(Event::kUnreachable, args);
        break;
      case RDMA_CM_EVENT_CONNECT_ERROR:
        conn->dispatch(Event::kConnectError, args);
        break;
      case RDMA_CM_EVENT_REJECTED: {
        if (conn->lifecycle().role() == Role::kPassive) {
          // The peer refused our accept's REP, or destroyed its id before ESTABLISHED (its CM sends a REJ).
          ++counters_.abandoned[static_cast<std::size_t>(AbandonReason::kPeerGone)];
          log_peer_st("connection request from %s abandoned by the peer before it was established (REJ)",
                      conn->peer_str_.c_str());
          conn->dispatch(Event::kRejected, args);
          break;
        }
        protocol::HandshakeBody body;
        if (!pd.empty() && protocol::decode_handshake(pd, protocol::HandshakeKind::kReject, body) ==
                               protocol::HandshakeError::kOk) {
          conn->last_reject_ = body.reason;
          // Stale: the peer restarted since our last connection. Its reject names its new incarnation,
          // which the immediate retry then carries.
          if (body.reason == protocol::RejectReason::kStale) conn->last_peer_incarnation_ = body.src_incarnation;
          ++counters_.rejects_received[static_cast<std::size_t>(body.reason)];
          args.retry = retry_for(body.reason);
          log_st("connect to %s rejected: %s", conn->peer_str_.c_str(),
                 std::string(protocol::to_string(body.reason)).c_str());
          // Queue-size / fragments mismatch: retry once, at once, offering the peer's parameters (its reject
          // carries them; the connect clamps them to our device). A mismatch after that cannot be fixed.
          if (body.reason == protocol::RejectReason::kQueueSizeMismatch ||
              body.reason == protocol::RejectReason::kFragmentsMismatch) {
            if (conn->retried_with_peer_params_) {
              args.retry = RetryHint::kNever;
            } else {
              // The peer's depth and fragments (both: a retry that fixes one and trips on the other would be
              // wasted); the other parameters stay ours, the negotiation takes the minimum anyway.
              protocol::ConnParams rp = local().params;
              rp.queue_depth = body.params.queue_depth;
              rp.max_fragments = body.params.max_fragments;
              conn->retry_params_ = rp;
              conn->retried_with_peer_params_ = true;
              ++counters_.retries_with_peer_params;
              log_st("retrying %s with the peer's parameters: depth %u, fragments %u, message %u",
                     conn->peer_str_.c_str(), body.params.queue_depth, body.params.max_fragments,
                     body.params.max_message_size);
            }
          }
        }
        conn->dispatch(Event::kRejected, args);
        break;
      }
      case RDMA_CM_EVENT_ESTABLISHED: {
        if (conn->lifecycle().role() == Role::kActive) {
          protocol::Session s;
          const protocol::HandshakeError he = protocol::complete_connect(conn->sent_request_, pd, local(), s);
          if (he != protocol::HandshakeError::kOk) {
            ++counters_.handshake_failures;
            log_st("accept from %s refused: %s", conn->peer_str_.c_str(),
                   std::string(protocol::to_string(he)).c_str());
            args.close_reason = CloseReason::kProtocolError;
            conn->dispatch(Event::kLocalClose, args);
            break;
          }
          conn->set_session(s);
          conn->last_peer_incarnation_ = s.peer_incarnation;
          // The accept's depths: our RDMA READs never outnumber its responder resources. The core reads
          // rd_depth only for requests, which it handles only after the ADOPT that publishes this.
          if (peer_param.initiator_depth != 0) {
            conn->cc_.rd_depth = std::min<std::uint16_t>(conn->cc_.rd_depth, peer_param.initiator_depth);
          }
        }
        ++counters_.established;
        conn->dispatch(Event::kEstablished, args);
        note_accepted_st(*conn);
        break;
      }
      case RDMA_CM_EVENT_DISCONNECTED:
        conn->dispatch(Event::kDisconnected, args);
        break;
      case RDMA_CM_EVENT_TIMEWAIT_EXIT:
        conn->dispatch(Event::kTimewaitExit, args);
        break;
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
        conn->dispatch(Event::kDeviceRemoval, args);
        break;
      default:
        break;
    }
  }
}

void Engine::accept_pending_st() {
  for (unsigned i = 0; i < kRequestsPerTurn && !pending_requests_.empty(); ++i) {
    PendingRequest r = std::move(pending_requests_.front());
    pending_requests_.pop_front();
    on_connect_request_st(r.child, r.pd, r.param);
    // What arrived during that accept, the ESTABLISHED of earlier ones among it, goes before the next.
    read_cm_events_st();
  }
}

void Engine::stop_accepting_st() {
  accepting_ = false;
  // Requests read but not handled yet are refused like any that come from now on ("shutting down").
  while (!pending_requests_.empty()) {
    PendingRequest r = std::move(pending_requests_.front());
    pending_requests_.pop_front();
    on_connect_request_st(r.child, r.pd, r.param);
  }
  for (rdma_cm_id* l : listeners_) rdma_destroy_id(l);
  listeners_.clear();
}

void Engine::reject_request_st(rdma_cm_id* child, const std::string& peer, protocol::RejectReason why,
                               std::uint64_t their_incarnation, const char* detail) {
  const protocol::HandshakeBody body = protocol::make_reject(local(), device_params(), why, their_incarnation);
  std::uint8_t buf[protocol::kMaxHandshakeSize] = {};
  const auto enc = protocol::encode_handshake(body, buf);
  if (rdma_reject(child, buf, static_cast<std::uint8_t>(enc.ok() ? enc.size : 0)) != 0) {
    const int e = errno;
    ++counters_.abandoned[static_cast<std::size_t>(AbandonReason::kPeerGone)];
    log_peer_st("connection request from %s abandoned by the peer (%s; rdma_reject: %s)", peer.c_str(), detail,
                std::strerror(e));
  } else {
    ++counters_.rejects_sent[static_cast<std::size_t>(why)];
    log_peer_st("reject %s: %s (%s)", peer.c_str(), std::string(protocol::to_string(why)).c_str(), detail);
  }
  rdma_destroy_id(child);
}

void Engine::on_connect_request_st(rdma_cm_id* child, const std::vector<std::uint8_t>& pd,
                                   const PeerConnParam& param) {
  ++counters_.connect_requests;
  const sockaddr* peer_sa = rdma_get_peer_addr(child);
  const std::string peer = addr_string(peer_sa);
  // With authentication required, every accept carries a nonce of its own (docs/protocol.md §11): drawn
  // before the negotiation, which copies it into the accept and the session.
  protocol::LocalEndpoint ep = local();
  bool nonce_failed = false;
  if (auth_required_) {
    ep.auth_required = true;
    nonce_failed = !protocol::auth::random_nonce(&ep.gateway_nonce);
  }
  const protocol::AcceptOutcome out = protocol::negotiate_accept(pd, ep, device_params());
  protocol::RejectReason why = out.reason;
  std::string detail(protocol::to_string(out.error));
  if (why == protocol::RejectReason::kAuthRequired)
    detail = "security.authentication required; no minor >= 2 offered";
  if (nonce_failed) {
    ++counters_.auth_nonce_failures;
    why = protocol::RejectReason::kNoResources;
    detail = "RAND_bytes failed for the gateway nonce";
  }
  // The allow list comes first: a peer that may not connect learns nothing else about why.
  if (cfg_.admit && !cfg_.admit(peer_sa)) {
    why = protocol::RejectReason::kNotAllowed;
    detail = "security.allowed_clients";
  }
  // Then admission per source: every request of an allowed peer spends a token, well-formed or not.
  std::optional<SourceKey> admitted;
  if (why != protocol::RejectReason::kNotAllowed) {
    const SourceKey src = source_key(peer_sa);
    switch (admission_.admit(src, now_)) {
      case AdmissionVerdict::kAdmit:
        admitted = src;
        break;
      case AdmissionVerdict::kTooManyConnections:
        why = protocol::RejectReason::kSourceLimit;
        detail = "security.connections_per_source " + std::to_string(admission_.limits().per_source) + " reached";
        break;
      case AdmissionVerdict::kRateExceeded:
        why = protocol::RejectReason::kSourceLimit;
        detail = "security.connect_rate exceeded";
        break;
    }
  }
  // In RC our QP retries an RNR NAK as often as the peer's request asks: 7 is forever (kRnrRetryCount).
  // And our READs of a read chunk need at least one responder resource at the peer.
  if (why == protocol::RejectReason::kNone && param.rnr_retry_count >= kRnrRetryForever) {
    why = protocol::RejectReason::kBadConnParam;
    detail = "rnr_retry_count 7 (retry forever)";
  } else if (why == protocol::RejectReason::kNone && param.initiator_depth == 0) {
    why = protocol::RejectReason::kBadConnParam;
    detail = "responder_resources 0 (read chunks need RDMA READ)";
  }
  if (why == protocol::RejectReason::kNone && !accepting_) {
    why = protocol::RejectReason::kNoResources;
    detail = "shutting down";
  }
  if (why != protocol::RejectReason::kNone) {
    if (admitted) admission_.release(*admitted, now_);
    reject_request_st(child, peer, why, out.reply.dst_incarnation, detail.c_str());
    return;
  }
  // Connection races (RDS / o2iblnd): one connection per pair of engines. A request from a peer we are
  // connecting to ourselves is contested: the lower incarnation's request loses and is rejected "race"
  // (its active side then stands down, retry never); a request from a peer we are already connected to is a
  // duplicate and loses too.
  const std::uint64_t theirs = out.reply.dst_incarnation;
  for (const auto& [cid, other] : active_) {
    if (!same_host(reinterpret_cast<const sockaddr*>(&other->peer_addr_), peer_sa)) continue;
    const State st = other->lifecycle().state();
    const bool contested = st == State::kAddrResolving || st == State::kRouteResolving || st == State::kConnecting;
    const bool duplicate = (st == State::kEstablishedPendingAdopt || st == State::kOwnedByCore) &&
                           other->session().peer_incarnation == theirs;
    if (duplicate || (contested && cfg_.local.incarnation > theirs)) {
      ++counters_.races_won;
      admission_.release(*admitted, now_);
      reject_request_st(child, peer, protocol::RejectReason::kRace, theirs,
                        duplicate ? "already connected" : "higher incarnation wins");
      return;
    }
  }
  LifecycleConfig lc;
  lc.role = Role::kPassive;
  lc.reconnect = false;
  lc.handshake_timeout = cfg_.handshake_timeout;
  lc.reject_code_unavailable = static_cast<std::uint8_t>(protocol::RejectReason::kNoResources);
  const std::uint64_t id = next_id_++;
  auto conn = std::make_unique<Connection>(*this, lc, id);
  Connection* c = conn.get();
  c->cm_id_ = child;
  child->context = c;
  c->peer_str_ = peer;
  c->accept_body_ = out.reply;
  c->rx_to_post_ = out.session.params.queue_depth;
  c->peer_responder_resources_ = param.initiator_depth;
  c->peer_initiator_depth_ = param.responder_resources;
  c->admitted_source_ = admitted;
  if (peer_sa != nullptr) {
    const std::size_t len = peer_sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    std::memcpy(&c->peer_addr_, peer_sa, std::min(len, sizeof(c->peer_addr_)));
  }
  c->set_session(out.session);
  conns_.emplace(id, std::move(conn));
  by_handle_[c->handle().value] = c;
  c->dispatch(Event::kConnectRequest);
  c->dispatch(Event::kLocalAccept);
}

void Engine::handle_async_events_st() {
  for (const AsyncNote& ev : async_inbox_->take()) {
    ++counters_.async_events;
    ++counters_.async_by_kind[static_cast<std::size_t>(async_event_kind(ev.type))];
    switch (ev.type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR: {
        // Every engine on the device sees the event; only the QP's owner acts on it.
        auto it = by_qp_.find(ev.qp_num);
        if (it == by_qp_.end()) continue;
        log_st("async event %s on qp 0x%x", ibv_event_type_str(ev.type), ev.qp_num);
        it->second->dispatch(Event::kQpFatal);
        continue;
      }
      case IBV_EVENT_CQ_ERR: {
        // Every engine on the device sees it; only the engine whose core owns the CQ acts.
        for (std::size_t i = 0; i < cores_.size(); ++i) {
          if (ev.cq != nullptr && verbs_cq_of(cores_[i]->cq()) == ev.cq) on_cq_error_st(i);
        }
        continue;
      }
      case IBV_EVENT_DEVICE_FATAL:
      case IBV_EVENT_PORT_ERR: {
        const Event e = ev.type == IBV_EVENT_DEVICE_FATAL ? Event::kDeviceFatal : Event::kPortDown;
        log_st("async event %s on %s", ibv_event_type_str(ev.type), device_->name().c_str());
        for (Connection* c : connections()) c->dispatch(e);
        continue;
      }
      default:
        continue;
    }
  }
}

struct Engine::ReplyHandler {
  Engine& eng;
  void on_closed_st(dataplane::ConnHandle h) {
    if (Connection* c = eng.by_handle(h)) {
      c->close_kick_deadline_.reset();
      c->dispatch(Event::kCoreClosed);
    }
  }
  void on_failed_st(dataplane::ConnHandle h, FailureKind kind, std::uint32_t status) {
    ++eng.counters_.core_failures;
    Connection* c = eng.by_handle(h);
    if (c == nullptr) return;
    const auto k = static_cast<std::size_t>(kind);
    if (k < eng.counters_.failures_by_kind.size()) ++eng.counters_.failures_by_kind[k];
    if (kind == FailureKind::kKeepalive) ++eng.counters_.dead_peers;
    if (kind == FailureKind::kProtocol && status < eng.counters_.failures_by_status.size()) {
      ++eng.counters_.failures_by_status[status];
    }
    // The core lost its CQ: on_cq_lost_st closes every connection of it, each after destroying its QP.
    if (kind == FailureKind::kCqError) return;
    std::string detail = std::to_string(status);
    const char* what = "completion error";
    switch (kind) {
      case FailureKind::kProtocol:
        what = "protocol violation";
        if (status < dataplane::kCreditStatusBase) {
          detail = std::string(protocol::to_string(static_cast<protocol::WireError>(status)));
        } else if (status < dataplane::kUnexpectedStatusBase) {
          detail = std::string(
              protocol::to_string(static_cast<protocol::CreditError>(status - dataplane::kCreditStatusBase)));
        }
        break;
      case FailureKind::kKeepalive:
        what = "dead peer";
        break;
      case FailureKind::kPeerFault:
        what = "peer fault";
        detail = ibv_wc_status_str(static_cast<ibv_wc_status>(status));
        break;
      case FailureKind::kBulkTimeout:
        what = "bulk transfer timed out";
        detail = std::to_string(status) + " ms";
        break;
      case FailureKind::kCompletion:
        detail = ibv_wc_status_str(static_cast<ibv_wc_status>(status));
        break;
      case FailureKind::kCqError:
        break;
      case FailureKind::kAuthDenied:
        what = "authentication denied";
        detail = status == static_cast<std::uint32_t>(protocol::auth::AuthStatus::kConnectionLimit)
                     ? "connection_limit"
                     : "denied";
        break;
      case FailureKind::kAuthTimeout:
        what = "no authentication in time";
        detail = "security.auth_timeout_ms";
        break;
      case FailureKind::kRevoked:
        what = "revoked";
        detail = status == dataplane::kRevokedUnauthenticated ? "authentication now required" : "principal";
        break;
    }
    eng.log_peer_st("closing %s qp 0x%x: %s (%s)", c->peer().c_str(), c->qp_num(), what, detail.c_str());
    EventArgs a;
    a.failure = kind;
    a.status = static_cast<int>(status);
    c->dispatch(Event::kCoreFailed, a);
  }
  void on_cq_lost_st(unsigned core) { eng.on_cq_lost_st(core); }
};

// IBV_EVENT_CQ_ERR: the core's CQ reports nothing more, flushes included, so no drain of its connections can
// end the usual way. The core is told (kCqLost) and stops touching its QPs; its answer comes back through
// on_cq_lost_st. From now on nothing new is placed on it, and no CLOSE goes to it until then.
void Engine::on_cq_error_st(std::size_t core) {
  if (out_of_service_[core]) return;
  out_of_service_[core] = true;
  cq_lost_pending_[core] = true;
  ++counters_.cq_lost;
  log_st("warning: core %zu (lcore %u): its completion queue went to error (IBV_EVENT_CQ_ERR): closing its "
         "connections; it takes no new ones until the gateway restarts",
         core, cores_[core]->config().lcore);
  cores_[core]->control_mailbox().send_st(dataplane::ToCore::cq_lost());
}

// The core touches none of its QPs any more. For every connection it may still reference: destroy the QP
// (which proves the device is done with that connection's memory: a CQ in error reports no flush), then
// CLOSE, which the core in lost mode takes as "release everything now" and answers CLOSED. A connection
// already closing gets its CLOSE again; one that was answered CLOSED holds no core reference and is left
// alone.
void Engine::on_cq_lost_st(unsigned core) {
  if (core >= cores_.size()) return;
  cq_lost_pending_[core] = false;
  std::size_t n = 0;
  for (Connection* c : connections()) {
    if (c->core() != static_cast<int>(core)) continue;
    const ResourceSet held = c->lifecycle().held();
    if (!held.has(Resource::kCoreRef) && !held.has(Resource::kRxPosted)) continue;
    c->qp_.reset();  // the core posts to it no more; cc_.qp stays for the core's bookkeeping
    ++n;
    if (c->lifecycle().state() == State::kClosing) {
      c->send_close(CloseReason::kCqError);
    } else {
      EventArgs a;
      a.close_reason = CloseReason::kCqError;
      c->dispatch(Event::kLocalClose, a);
    }
  }
  log_st("warning: core %u: %zu connection(s) closed after its completion queue was lost", core, n);
}

void Engine::drain_cores_st() {
  ReplyHandler h{*this};
  for (auto& core : cores_) {
    dataplane::ControlMailbox& mb = core->control_mailbox();
    if (mb.has_backlog_st()) {
      mb.flush_st([this](const dataplane::ToCore& cmd) {
        if (cmd.op != dataplane::ToCoreOp::kAdopt) return;
        if (Connection* c = by_handle(cmd.conn())) c->dispatch(Event::kAdoptEnqueued);
      });
    }
    mb.drain_st(h);
  }
}

void Engine::fire_timers_st() {
  const TimePoint now = now_;
  if (fault_tables_.tables_kept() > 1) {
    std::vector<std::uint64_t> applied;
    applied.reserve(cores_.size());
    for (const auto& core : cores_) applied.push_back(core->faults.counters().applied_generation());
    fault_tables_.reclaim(applied);
  }
  if (auth_tables_.size() > 1) {
    std::uint64_t oldest = auth_tables_.back()->generation;
    for (const auto& core : cores_)
      oldest = std::min(oldest, core->auth_applied.load(std::memory_order_acquire));
    std::erase_if(auth_tables_, [oldest](const std::unique_ptr<const dataplane::AuthTable>& t) {
      return t->generation < oldest;
    });
  }
  // What is due now, taken out first: handling one may set a deadline that is due at once (a zero timeout).
  due_.clear();
  for (const DeadlineEntry* e = next_deadline_st(); e != nullptr && e->when <= now; e = next_deadline_st()) {
    due_.push_back(*e);
    deadlines_.pop();
  }
  for (const DeadlineEntry& d : due_) {
    auto it = conns_.find(d.conn);
    if (it == conns_.end()) continue;
    Connection* c = it->second.get();
    std::optional<TimePoint>& slot = deadline_of(*c, d.kind);
    if (slot != d.when) continue;  // cancelled or moved by an earlier one of this turn
    slot.reset();
    switch (d.kind) {
      case DeadlineKind::kHandshake:
        if (c->lifecycle().role() == Role::kPassive) {
          ++counters_.abandoned[static_cast<std::size_t>(AbandonReason::kHandshakeTimeout)];
          log_peer_st(
              "connection request from %s abandoned: no answer to our accept within the handshake timeout",
              c->peer_str_.c_str());
        }
        c->dispatch(Event::kHandshakeTimeout);
        break;
      case DeadlineKind::kReconnect:
        c->dispatch(Event::kReconnectTimer);
        break;
      case DeadlineKind::kCloseKick:
        // The core waits for a flush completion of every WR it posted, but a WR posted while the QP went to
        // ERR may never flush: rxe's user-space provider posts receives into a shared queue without entering
        // the kernel, and its responder flushes the receive queue only when something runs it (a modify to
        // ERR does). Seen in the guest as an idle connection whose last re-posted receive kept the drain from
        // ever finishing. ERR -> ERR is a legal transition that flushes what is queued; the core posts
        // nothing after CLOSE, so one kick after it suffices. Backed off in case the core is just slow.
        if (c->lifecycle().held().has(Resource::kCoreRef) && c->lifecycle().held().has(Resource::kQp)) {
          ++counters_.close_rekicks;
          c->move_qp_to_err();
          c->close_kick_delay_ = std::min(c->close_kick_delay_ * 2, kMaxCloseKick);
          schedule_st(*c, DeadlineKind::kCloseKick, now + c->close_kick_delay_);
        }
        break;
    }
  }
}

void Engine::schedule_st(Connection& c, DeadlineKind kind, TimePoint when) {
  deadline_of(c, kind) = when;
  deadlines_.push(when, c.id(), kind);
}

std::optional<TimePoint>& Engine::deadline_of(Connection& c, DeadlineKind kind) noexcept {
  switch (kind) {
    case DeadlineKind::kReconnect:
      return c.reconnect_deadline_;
    case DeadlineKind::kCloseKick:
      return c.close_kick_deadline_;
    case DeadlineKind::kHandshake:
      break;
  }
  return c.handshake_deadline_;
}

const DeadlineEntry* Engine::next_deadline_st() {
  return deadlines_.top([this](const DeadlineEntry& e) {
    auto it = conns_.find(e.conn);
    return it != conns_.end() && deadline_of(*it->second, e.kind) == e.when;
  });
}

void Engine::reap_st() {
  for (const std::uint64_t id : reapable_) {
    auto it = conns_.find(id);
    // Named twice, or dispatched out of kDestroyed again (a reconnect) since: only a destroyable one goes.
    if (it == conns_.end() || !it->second->lifecycle().destroyable()) continue;
    note_reaped_st(*it->second);
    if (it->second->admitted_source_) admission_.release(*it->second->admitted_source_, now_);
    by_handle_.erase(it->second->handle().value);
    active_.erase(id);
    ++counters_.destroyed;
    conns_.erase(it);
  }
  reapable_.clear();
}

void Engine::set_timeouts_st(Duration handshake_timeout, const BackoffPolicy& backoff, std::uint64_t keepalive_us,
                             std::uint64_t dead_peer_us) {
  cfg_.handshake_timeout = handshake_timeout;
  cfg_.backoff = backoff;
  // What accepts from now on announce (handshake minor 1): the peer keeps to what it was told.
  cfg_.local.timers = protocol::Timers{static_cast<std::uint32_t>(keepalive_us / 1000),
                                       static_cast<std::uint32_t>(dead_peer_us / 1000)};
  for (dataplane::CoreConfig& cc : cfg_.cores) {
    cc.keepalive_us = keepalive_us;
    cc.dead_peer_us = dead_peer_us;
  }
  // Established connections too: each core applies them to every connection it owns.
  for (auto& core : cores_) {
    dataplane::ControlMailbox& mb = core->control_mailbox();
    mb.send_st(dataplane::ToCore::config(dataplane::ConfigKey::kKeepaliveIntervalUs, keepalive_us));
    mb.send_st(dataplane::ToCore::config(dataplane::ConfigKey::kPeerDeadTimeoutUs, dead_peer_us));
  }
}

void Engine::set_admission_st(std::uint32_t per_source, double rate, std::uint32_t burst) {
  cfg_.max_conns_per_source = per_source;
  cfg_.connect_rate = rate;
  cfg_.connect_burst = burst;
  admission_.set_limits({per_source, rate, burst});
}

void Engine::set_fault_rules_st(const dataplane::FaultTable& t) {
  refresh_clock_st();
  const dataplane::FaultTable* p = fault_tables_.publish(t);
  for (auto& core : cores_) {
    core->control_mailbox().send_st(
        dataplane::ToCore::config(dataplane::ConfigKey::kFaultTable, reinterpret_cast<std::uintptr_t>(p)));
  }
  for (Connection* c : connections()) {
    if (c->lifecycle().state() != State::kOwnedByCore || !t.qp_err_matches(c->cc_.peer_ip)) continue;
    ++counters_.faults_qp_err;
    log_st("warning: fault injection: qp 0x%x (peer %s) moved to ERR", c->qp_num(), c->peer().c_str());
    c->dispatch(Event::kQpFatal);
  }
}

void Engine::set_bulk_timeout_st(std::uint64_t bulk_timeout_us) {
  for (dataplane::CoreConfig& cc : cfg_.cores) cc.bulk_timeout_us = bulk_timeout_us;
  for (auto& core : cores_) {
    core->control_mailbox().send_st(dataplane::ToCore::config(dataplane::ConfigKey::kBulkTimeoutUs, bulk_timeout_us));
  }
}

void Engine::set_auth_table_st(std::unique_ptr<const dataplane::AuthTable> t) {
  if (!t) return;
  if (!auth_tables_.empty() && t->generation <= auth_tables_.back()->generation) {
    log_st("auth table generation %llu not above the last one (%llu): not installed",
           static_cast<unsigned long long>(t->generation),
           static_cast<unsigned long long>(auth_tables_.back()->generation));
    return;
  }
  auth_required_ = t->required;
  const dataplane::AuthTable* p = t.get();
  auth_tables_.push_back(std::move(t));
  for (auto& core : cores_) {
    core->control_mailbox().send_st(
        dataplane::ToCore::config(dataplane::ConfigKey::kAuthTable, reinterpret_cast<std::uintptr_t>(p)));
  }
}

void Engine::set_auth_timeout_st(std::uint64_t auth_timeout_us) {
  for (dataplane::CoreConfig& cc : cfg_.cores) cc.auth_timeout_us = auth_timeout_us;
  for (auto& core : cores_) {
    core->control_mailbox().send_st(
        dataplane::ToCore::config(dataplane::ConfigKey::kAuthTimeoutUs, auth_timeout_us));
  }
}

std::size_t Engine::revoke_not_admitted_st() {
  if (!cfg_.admit) return 0;
  refresh_clock_st();
  std::size_t n = 0;
  for (Connection* c : connections()) {
    if (c->lifecycle().role() != Role::kPassive) continue;
    const State st = c->lifecycle().state();
    if (st == State::kClosing || st == State::kDrained || st == State::kDestroyed) continue;
    if (cfg_.admit(reinterpret_cast<const sockaddr*>(&c->peer_addr_))) continue;
    ++counters_.revoked_allowed_clients;
    ++n;
    log_conn_st("revoked %s qp 0x%x: its address is no longer in security.allowed_clients", c->peer().c_str(),
                c->qp_num());
    EventArgs a;
    a.close_reason = CloseReason::kRevoked;
    c->dispatch(Event::kLocalClose, a);
  }
  return n;
}

void Engine::close_st(std::uint64_t id, CloseReason why) {
  refresh_clock_st();
  if (Connection* c = find(id)) {
    EventArgs a;
    a.close_reason = why;
    c->dispatch(Event::kLocalClose, a);
  }
}

void Engine::begin_shutdown_st() {
  refresh_clock_st();
  stop_accepting_st();
  for (Connection* c : connections()) c->dispatch(Event::kShutdown);
}

void Engine::signal_stop_st() {
  for (std::size_t i = 0; i < cores_.size(); ++i) {
    cores_[i]->stop.store(true, std::memory_order_release);
    // A sleeping core (idle_policy event) sees `stop` once woken; it checks it after arming its bell.
    if (sleepers_[i]) sleepers_[i]->bell().ring();
  }
}

void Engine::stop_cores_st() {
  signal_stop_st();
  for (unsigned l : launched_lcores_) rte_eal_wait_lcore(l);
  launched_lcores_.clear();
}

bool Engine::quiesce_st(Duration timeout) {
  stop_accepting_st();
  for (auto& core : cores_) {
    core->quiesced.store(false, std::memory_order_release);
    core->control_mailbox().send_st(dataplane::ToCore::config(dataplane::ConfigKey::kQuiesce, 1));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const bool ok = poll_until_st([this] {
    for (const auto& core : cores_) {
      if (core->running.load(std::memory_order_acquire) && !core->quiesced.load(std::memory_order_acquire)) {
        return false;
      }
    }
    return true;
  }, timeout);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  if (ok) {
    log_st("quiesced %zu connection(s) in %lld ms", conns_.size(), static_cast<long long>(ms.count()));
  } else {
    ++counters_.quiesce_timeouts;
    log_st("quiesce timed out after %lld ms: closing %zu connection(s) with requests in flight",
           static_cast<long long>(ms.count()), conns_.size());
  }
  return ok;
}

bool Engine::shutdown_st(Duration drain_timeout) {
  quiesce_st(drain_timeout);
  begin_shutdown_st();
  const bool drained = poll_until_st([this] { return conns_.empty(); }, drain_timeout);
  stop_cores_st();
  return drained;
}

// ---- helpers -----------------------------------------------------------------------------------------

std::size_t Engine::owned_count() const noexcept {
  std::size_t n = 0;
  for (const auto& [id, c] : conns_) n += c->lifecycle().state() == State::kOwnedByCore ? 1 : 0;
  return n;
}

std::string Engine::describe_connections_st(std::size_t limit) const {
  std::string out;
  std::size_t n = 0;
  for (const auto& [id, c] : conns_) {
    if (n++ == limit) {
      out += "... and " + std::to_string(conns_.size() - limit) + " more\n";
      break;
    }
    char qp[16];
    std::snprintf(qp, sizeof qp, "0x%x", c->qp_num());
    out += c->peer() + " qp " + qp + " " + std::string(to_string(c->lifecycle().state())) + " {";
    const ResourceSet held = c->lifecycle().held();
    bool first = true;
    for (std::size_t b = 0; b < kResourceCount; ++b) {
      const auto r = static_cast<Resource>(1u << b);
      if (!held.has(r)) continue;
      if (!first) out += ", ";
      out += to_string(r);
      first = false;
    }
    out += '}';
    // The core's side of the connection is its own while it runs; read it only once every core stopped.
    if (launched_lcores_.empty()) {
      const dataplane::CoreConn& cc = c->cc_;
      out += " core: state " + std::to_string(static_cast<unsigned>(cc.state)) + " rx_posted " +
             std::to_string(cc.rx_posted) + " sq_inflight " + std::to_string(cc.sq_inflight()) +
             (cc.drain_posted ? " drain_posted" : "");
    }
    out += '\n';
  }
  return out;
}

Connection* Engine::find(std::uint64_t id) noexcept {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : it->second.get();
}

std::vector<Connection*> Engine::connections() const {
  std::vector<Connection*> v;
  v.reserve(conns_.size());
  for (const auto& [id, c] : conns_) v.push_back(c.get());
  return v;
}

Connection* Engine::by_handle(dataplane::ConnHandle h) noexcept {
  auto it = by_handle_.find(h.value);
  return it == by_handle_.end() ? nullptr : it->second;
}

void Engine::note_dispatch_st(const DispatchResult& r, Role role) {
  if (r.verdict == Verdict::kIllegal) {
    ++counters_.illegal_events;
    log_st("illegal event %s in state %s", std::string(to_string(r.event)).c_str(),
           std::string(to_string(r.from)).c_str());
  }
  // A passive connection's failed setup step is in its reject or abandon line (Connection::reject).
  if (r.setup_failed && role == Role::kActive) {
    log_st("setup step %s failed: %s", std::string(to_string(r.failed_action)).c_str(), std::strerror(-r.status));
  }
}

void Engine::log_st(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit_log_st(log_limit_, fmt, ap);
  va_end(ap);
}

void Engine::log_peer_st(const char* fmt, ...) {
  char line[480];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  emit_st(peer_log_limit_, "warning: %s", line);
}

void Engine::emit_st(LogRateLimit& limit, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit_log_st(limit, fmt, ap);
  va_end(ap);
}

void Engine::log_conn_st(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit_log_st(conn_log_limit_, fmt, ap);
  va_end(ap);
}

void Engine::emit_log_st(LogRateLimit& limit, const char* fmt, va_list ap) {
  std::uint64_t suppressed = 0;
  if (!limit.allow(now_, &suppressed)) return;
  char buf[512];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  if (suppressed != 0) {
    const std::size_t len = std::strlen(buf);
    std::snprintf(buf + len, sizeof(buf) - len, " (suppressed=%llu)",
                  static_cast<unsigned long long>(suppressed));
  }
  if (cfg_.log_sink) {
    cfg_.log_sink(buf);
    return;
  }
  std::fprintf(stderr, "rdmagate[%s]: %s\n", cfg_.name.c_str(), buf);
}

// Passive connections only: a server's operator wants each client's arrival and departure; a client
// library's application (the engine's active side) has its own view of its connections.
void Engine::note_accepted_st(Connection& c) {
  if (c.lifecycle().role() != Role::kPassive) return;
  const State st = c.lifecycle().state();
  if (st != State::kEstablishedPendingAdopt && st != State::kOwnedByCore) return;
  const unsigned lcore = c.core() >= 0 ? cfg_.cores[static_cast<std::size_t>(c.core())].lcore : 0;
  c.accepted_ = Connection::Accepted{c.qp_num(), lcore};
  log_conn_st("accepted %s qp 0x%x core %u", c.peer().c_str(), c.qp_num(), lcore);
}

void Engine::note_reaped_st(const Connection& c) {
  if (!c.accepted_) return;
  log_conn_st("closed %s qp 0x%x core %u: %s", c.peer().c_str(), c.accepted_->qp_num, c.accepted_->lcore,
              std::string(dataplane::to_string(c.lifecycle().close_reason())).c_str());
}

}  // namespace rdmagate::control

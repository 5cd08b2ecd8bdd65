#include "daemon/gateway.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <optional>
#include <span>
#include <thread>

#include "control/engine.hpp"
#include "control/rdma_device.hpp"
#include "daemon/engine_stats_publish.hpp"
#include "daemon/gateway_cli.hpp"
#include "daemon/gateway_settings.hpp"
#include "daemon/log.hpp"
#include "daemon/placement.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "dataplane/core_sleep.hpp"
#include "dataplane/eal_runtime.hpp"
#include "dataplane/huge_buffer.hpp"
#include "services/object/object_service.hpp"
#include "services/storage/memory/store.hpp"
#include "services/storage/rados/rados_store.hpp"
#include "telemetry/collector.hpp"
#include "telemetry/gateway_state.hpp"
#include "telemetry/http_server.hpp"
#include "telemetry/process_metrics.hpp"
#include "telemetry/stats.hpp"

namespace rdmagate::control {

namespace {

using Clock = std::chrono::steady_clock;

// The control thread's only periodic work: the control block for scrapes (and the RADOS health behind
// /readyz) every kPublishEvery, and the port state at the first publication kPortCheckEvery after the last
// check, so that both share one wakeup (the port's changes also arrive as async events).
constexpr auto kPublishEvery = std::chrono::milliseconds(100);
constexpr auto kPortCheckEvery = std::chrono::milliseconds(500);
constexpr auto kCoreStartTimeout = std::chrono::seconds(10);

log::Logger& lg() {
  return log::logger();
}

std::optional<conf::IpAddress> to_ip(const sockaddr* sa) {
  if (sa == nullptr) return std::nullopt;
  if (sa->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(sa);
    std::array<std::uint8_t, 4> b{};
    std::memcpy(b.data(), &v4->sin_addr, 4);
    return conf::IpAddress::v4(b[0], b[1], b[2], b[3]);
  }
  if (sa->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(sa);
    std::array<std::uint8_t, 16> b{};
    std::memcpy(b.data(), &v6->sin6_addr, 16);
    return conf::IpAddress::v6(b);
  }
  return std::nullopt;
}

const char* signal_name(int signo) {
  switch (signo) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal";
  }
}

void notify(const std::string& state) {
  // No NOTIFY_SOCKET (not under systemd): sd_notify returns 0 and does nothing.
  const int rc = sd_notify(0, state.c_str());
  if (rc < 0) lg().warn("sd_notify failed", {{"state", state}, {"error", std::strerror(-rc)}});
}

std::string monotonic_usec() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::to_string(static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000u +
                        static_cast<std::uint64_t>(ts.tv_nsec) / 1000u);
}

void log_config_errors(const std::vector<conf::ConfigError>& errors, std::string_view msg) {
  for (const conf::ConfigError& e : errors) {
    lg().error(msg, {{"error", e.str()}});
  }
}

double unix_seconds_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

telemetry::PortState port_state(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_DOWN:
      return telemetry::PortState::kDown;
    case IBV_PORT_INIT:
      return telemetry::PortState::kInit;
    case IBV_PORT_ARMED:
      return telemetry::PortState::kArmed;
    case IBV_PORT_ACTIVE:
      return telemetry::PortState::kActive;
    case IBV_PORT_ACTIVE_DEFER:
      return telemetry::PortState::kActiveDefer;
    case IBV_PORT_NOP:
      break;
  }
  return telemetry::PortState::kUnknown;
}

telemetry::LinkLayer link_layer(std::uint8_t l) {
  switch (l) {
    case IBV_LINK_LAYER_INFINIBAND:
      return telemetry::LinkLayer::kInfiniband;
    case IBV_LINK_LAYER_ETHERNET:
      return telemetry::LinkLayer::kEthernet;
    default:
      return telemetry::LinkLayer::kUnspecified;
  }
}

// The engine's log lines, structured: a "warning: " prefix makes a warning.
void engine_log_sink(std::string_view line) {
  constexpr std::string_view kWarning = "warning: ";
  if (line.starts_with(kWarning)) {
    lg().warn(line.substr(kWarning.size()), {{"component", "engine"}});
  } else {
    lg().info(line, {{"component", "engine"}});
  }
}

}  // namespace

int block_daemon_signals(std::string* error) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  if (const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0) {
    *error = std::string("pthread_sigmask: ") + std::strerror(rc);
    return -1;
  }
  const int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) *error = std::string("signalfd: ") + std::strerror(errno);
  // A scraper that hangs up mid-response must not kill the daemon.
  signal(SIGPIPE, SIG_IGN);
  return fd;
}

Gateway::Gateway() = default;

Gateway::~Gateway() {
  http_.reset();  // no scrape reads the blocks while they go
  engine_.reset();
}

std::unique_ptr<Gateway> Gateway::start(const conf::LoadedConfig& loaded, Options options,
                                        std::string* error) {
  std::unique_ptr<Gateway> g(new Gateway());
  g->loaded_ = loaded;
  g->opts_ = std::move(options);
  const conf::Config& cfg = g->loaded_.config;
  g->allowed_ = cfg.security.allowed_clients;
  g->state_ = std::make_shared<telemetry::GatewayState>();
  g->state_->config_loaded(unix_seconds_now());  // the start counts as a successful load
  std::optional<GatewaySettings> planned = plan_gateway(cfg, error);
  if (!planned) return nullptr;
  GatewaySettings& s = *planned;

  // 1. The device, checked against the config before EAL or the engine touch it.
  {
    RdmaProbe probe;
    auto dev = RdmaDevice::open(s.engine.device, &probe);
    if (!dev) {
      *error = probe.message;
      return nullptr;
    }
    conf::DeviceLimits lim;
    lim.name = dev->name();
    lim.max_qp_wr = static_cast<std::uint32_t>(std::max(dev->limits().max_qp_wr, 0));
    lim.max_sge = static_cast<std::uint32_t>(std::max(dev->limits().max_sge, 0));
    lim.port_count = dev->limits().phys_port_cnt;
    if (cfg.device.port >= 1 && cfg.device.port <= dev->ports().size()) {
      lim.max_msg_size = dev->ports()[cfg.device.port - 1].max_msg_sz;
    }
    std::string backend_error;
    lim.max_inline_data = dataplane::probe_max_inline(conf::toString(cfg.dataplane.backend), dev->context(),
                                                      cfg.dataplane.send_inline_bytes, &backend_error);
    if (!backend_error.empty()) {
      *error = backend_error;
      return nullptr;
    }
    if (auto errs = conf::validateAgainstDevice(g->loaded_, lim); !errs.empty()) {
      log_config_errors(errs, "config does not fit the device");
      *error = std::to_string(errs.size()) + " configuration error(s) against device " + dev->name();
      return nullptr;
    }
    lg().info("device", {{"device", dev->name()}, {"describe", dev->describe()}});
    if (cfg.device.port <= dev->ports().size()) {
      const RdmaPortInfo& port = dev->ports()[cfg.device.port - 1];
      g->port_active_ = port.active();
      g->state_->set_port(port_state(port.state), link_layer(port.link_layer));
    }
  }

  // 2. EAL.
  g->eal_ = dataplane::EalRuntime::init(s.eal, error);
  if (!g->eal_) return nullptr;
  lg().info("eal up", {{"args", g->eal_->args_line()},
                       {"hugepages", g->eal_->hugepages()},
                       {"memory_mib", s.eal.memory_mb},
                       {"memory_derived", s.eal_memory_derived},
                       {"seconds", g->eal_->init_seconds()}});
  if (!g->eal_->hugepages() && cfg.eal.hugepages == conf::HugepageMode::kAuto) {
    g->state_->set_hugepages_fallback(true);
    lg().warn("running without hugepages", {{"reason", g->eal_->probe().reason}, {"key", "eal.hugepages"}});
  }

  // 3. The store: with store.backend rados it is the cache in front of RADOS (it evicts), and every lease
  // the RADOS backend lends comes from it, so the arena registered below covers both.
  g->region_ = std::make_unique<dataplane::HugeBuffer>(
      dataplane::HugeBuffer::allocate(s.store_region_bytes, -1, 4096, error));
  if (!*g->region_) {
    *error = "store region (" + std::to_string(s.store_region_bytes >> 20) + " MiB for store.capacity_mib " +
             std::to_string(cfg.store.capacity_mib) + "): " + *error;
    return nullptr;
  }
  g->store_ = store::Store::create(
      s.store, std::span<std::byte>(reinterpret_cast<std::byte*>(g->region_->data()), g->region_->size()),
      error);
  if (!g->store_) return nullptr;
  lg().info("store", {{"backend", conf::toString(cfg.store.backend)},
                      {"capacity_bytes", g->store_->capacity_bytes()},
                      {"arena_bytes", g->store_->arena_bytes()},
                      {"max_value_bytes", g->store_->max_value()},
                      {"max_objects", s.store.max_objects},
                      {"hugepage_backed", g->region_->hugepage_backed()}});
  if (s.rados) {
    storage::rados::RadosSettings r = *s.rados;
    r.max_requests = dataplane::ObjectServiceConfig{}.max_requests;
    // The worker and librados' threads (which inherit its CPUs) stay off the data-plane cores.
    const rte_cpuset_t main_cpus = rte_lcore_cpuset(rte_get_main_lcore());
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &main_cpus)) r.cpus.push_back(c);
    }
    g->rados_ = storage::rados::RadosStore::create(r, *g->store_, error);
    if (!g->rados_) return nullptr;
    lg().info("rados backend", {{"conf_file", r.conf_file},
                                {"client", r.client},
                                {"pool", r.pool},
                                {"namespace", r.ns},
                                {"op_timeout_ms", r.op_timeout_ms},
                                {"notify_timeout_ms", r.notify_timeout_ms},
                                {"cache_lease_ms", r.cache_lease_ms}});
  }

  // 4. The engine.
  Gateway* self = g.get();
  s.engine.admit = [self](const sockaddr* peer) { return self->admit(peer); };
  s.engine.log_sink = engine_log_sink;
  g->engine_ = Engine::create(s.engine, error);
  if (!g->engine_) return nullptr;
  // Principals and tenants before any listener: the cores apply the table before any connection reaches them.
  std::unique_ptr<dataplane::AuthTable> auth = load_auth_table(cfg.security, g->auth_registry_, error);
  if (!auth) return nullptr;
  g->engine_->set_auth_table_st(std::move(auth));
  if (!cfg.security.authentication_required()) {
    lg().warn(kAuthOffWarning, {{"key", "security.authentication"}});
  } else {
    lg().info("authentication required",
              {{"principals", cfg.security.principals.size()}, {"tenants", cfg.security.tenants.size()}});
  }
  // Signals wake the control loop through the engine's epoll. The signalfd is read where it is reported, so
  // that a signal during the drain (whose poll_st turns come from stop) is consumed and cannot keep epoll
  // ready; run() acts on what was read.
  const auto read_signals = [self] {
    signalfd_siginfo si{};
    while (read(self->opts_.signal_fd, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
      self->pending_signals_.push_back(static_cast<int>(si.ssi_signo));
    }
  };
  if (!g->engine_->watch_fd_st(g->opts_.signal_fd, read_signals, error)) return nullptr;
  for (std::size_t i = 0; i < g->engine_->core_count(); ++i) {
    g->state_->add_registered_bytes(g->engine_->core(i).registered_bytes());
  }
  g->state_->set_port_identity(g->engine_->device().name(), cfg.device.port, g->engine_->backend_name());
  lg().info("dataplane backend", {{"backend", g->engine_->backend_name()},
                                  {"configured", conf::toString(cfg.dataplane.backend)}});
  // The arena: local write only (RDMA READs of PUT values land in it); no key to it ever leaves the process.
  ibv_mr* mr = g->engine_->register_memory(g->store_->arena_base(), g->store_->arena_bytes(),
                                           IBV_ACCESS_LOCAL_WRITE, error);
  if (mr == nullptr) return nullptr;
  g->state_->add_registered_bytes(g->store_->arena_bytes());

  // Telemetry blocks: one per core (its lcore is the `core` label), one for the control thread.
  const std::uint64_t tsc_hz = rte_get_tsc_hz();
  g->control_stats_ = std::make_unique<telemetry::CoreStats>();
  // rdmagate_build_info: the plain project version; its `commit` label carries the git describe.
  g->collector_ = std::make_shared<telemetry::StatsCollector>(RDMAGATE_VERSION, tsc_hz);
  g->collector_->set_backend(g->engine_->backend_name(), std::string(conf::toString(cfg.dataplane.backend)));
  g->collector_->register_control(*g->control_stats_);
  std::vector<std::unique_ptr<CoreRunner>> runners;
  for (std::size_t i = 0; i < g->engine_->core_count(); ++i) {
    g->core_stats_.push_back(std::make_unique<telemetry::CoreStats>());
    telemetry::CoreStats* block = g->core_stats_.back().get();
    g->engine_->core(i).stats = block;
    g->collector_->register_core(g->engine_->core(i).config().lcore, *block);
    dataplane::ObjectServiceConfig sc;
    const auto index = static_cast<std::uint32_t>(i);
    sc.storage = g->rados_ ? &g->rados_->core(index) : &g->store_->core(index);
    // A core that sleeps when idle sleeps through its pending storage ops too: their completions wake it.
    dataplane::CoreSleeper* sleeper = g->engine_->core(i).config().sleeper;
    if (sleeper != nullptr && sc.storage->completions() != nullptr) {
      sc.storage->completions()->set_wake(&sleeper->storage_bell());
    }
    sc.arena_lkey = mr->lkey;
    sc.stats = block;
    g->services_.push_back(std::make_unique<dataplane::ObjectService>(sc));
    runners.push_back(dataplane::make_core_runner(g->engine_->backend_kind(), g->engine_->core(i), *g->services_.back()));
  }

  // 5. Telemetry first, so /readyz explains the rest of the startup; then the cores; then the listeners.
  g->health_ = std::make_unique<telemetry::HealthState>(*g->collector_, s.core_stall);
  g->health_->set_port_active(g->port_active_);
  g->state_->set_health(*g->health_);
  g->process_ = std::make_shared<telemetry::ProcessCollector>();
  g->check_store();
  if (s.http) {
    // civetweb's threads would inherit this thread's CPUs, which EAL has made the main lcore's; say so
    // explicitly, so that serving /metrics can never land on a data-plane core's CPU.
    s.http->cpus = rte_lcore_cpuset(rte_get_main_lcore());
    std::string herr;
    g->http_ =
        telemetry::HttpServer::start(*s.http, g->collector_, *g->health_, herr, {g->state_, g->process_});
    if (!g->http_) {
      *error = "telemetry (telemetry.bind_address, telemetry.port, telemetry.probe_port): " + herr;
      return nullptr;
    }
    if (s.http->probe_port) {
      lg().info("telemetry listening", {{"addr", s.http->bind_address},
                                        {"port", g->http_->port()},
                                        {"probe_port", g->http_->probe_port()}});
    } else {
      lg().info("telemetry listening", {{"addr", s.http->bind_address}, {"port", g->http_->port()}});
    }
  }
  if (!g->engine_->launch_cores(std::move(runners), error)) return nullptr;
  const auto deadline = Clock::now() + kCoreStartTimeout;
  // Started means polling as /readyz sees it: the core's first published poll count (about 1 ms after its
  // loop began), so that READY=1 never goes out while /readyz still says "core N not polling".
  for (std::size_t i = 0; i < g->engine_->core_count(); ++i) {
    while (!g->engine_->core(i).running.load(std::memory_order_acquire) ||
           g->core_stats_[i]->load(telemetry::Stat::kPolls) == 0) {
      if (Clock::now() >= deadline) {
        *error = "data-plane core on lcore " + std::to_string(g->engine_->core(i).config().lcore) +
                 " did not start within 10 s";
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (!g->check_placement(error)) return nullptr;
  g->install_faults(s.faults);
  lg().info("cores running", {{"cores", cfg.dataplane.cores.str()},
                              {"idle_policy", conf::toString(cfg.dataplane.idle_policy)},
                              {"queue_depth", cfg.dataplane.queue_depth},
                              {"message_bytes", cfg.dataplane.inline_threshold_bytes}});
  for (const ListenerSettings& l : s.listeners) {
    const std::uint16_t port = g->engine_->listen(l.address, l.port, error, l.backlog);
    if (port == 0) {
      *error = "listen.addresses " + l.address + " port " + std::to_string(l.port) + ": " + *error;
      return nullptr;
    }
    lg().info("listening", {{"addr", l.address}, {"port", port}});
  }
  return g;
}

// Once every thread exists (EAL's, civetweb's, the RADOS worker's, the cores'), before the listeners: a
// thread that may run on a polling core's CPU would preempt it, so the daemon refuses to serve.
bool Gateway::check_placement(std::string* error) const {
  const auto cpus_of = [](unsigned lcore) {
    const rte_cpuset_t set = rte_lcore_cpuset(lcore);
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
    return cpus;
  };
  std::vector<PollerCpus> pollers;
  for (std::size_t i = 0; i < engine_->core_count(); ++i) {
    const unsigned lcore = engine_->core(i).config().lcore;
    pollers.push_back({lcore, cpus_of(lcore)});
  }
  const unsigned main_lcore = rte_get_main_lcore();
  const std::vector<int> main_cpus = cpus_of(main_lcore);
  const std::vector<ThreadCpus> threads = process_threads();
  const std::vector<std::string> conflicts = placement_conflicts(main_lcore, main_cpus, pollers, threads);
  for (const std::string& c : conflicts) lg().error("thread placement conflict", {{"conflict", c}});
  if (!conflicts.empty()) {
    *error = std::to_string(conflicts.size()) +
             " thread placement conflict(s) with the data-plane cores; first: " + conflicts.front();
    return false;
  }
  const std::string main_list = cpu_list_string(main_cpus);
  lg().info("thread placement", {{"main_lcore", main_lcore}, {"main_cpus", main_list}, {"threads", threads.size()}});
  return true;
}

bool Gateway::admit(const void* peer_sockaddr) const {
  const std::optional<conf::IpAddress> ip = to_ip(static_cast<const sockaddr*>(peer_sockaddr));
  if (!ip) return false;
  for (const conf::Cidr& c : allowed_) {
    if (c.contains(*ip)) return true;
  }
  return false;
}

void Gateway::publish_stats() {
  publish_engine_stats(*engine_, *control_stats_);
  publish_store_stats(store_->stats(), *control_stats_);
  if (rados_) publish_rados_stats(rados_->stats(), *control_stats_);
}

void Gateway::check_store() {
  if (!rados_) return;
  const storage::rados::Health h = rados_->health();
  const char* not_ready = h == storage::rados::Health::kReady ? nullptr : storage::rados::health_name(h);
  if (not_ready == store_not_ready_) return;  // both start ready (null): a change is logged once
  store_not_ready_ = not_ready;
  health_->set_store_not_ready(not_ready);
  if (not_ready == nullptr) {
    lg().info("rados backend ready", {{"pool", loaded_.config.store.rados.pool}});
  } else {
    lg().warn("rados backend not ready", {{"state", not_ready}, {"error", rados_->last_error()}});
  }
}

void Gateway::check_port() {
  ibv_port_attr attr{};
  if (ibv_query_port(engine_->device().context(), static_cast<std::uint8_t>(loaded_.config.device.port),
                     &attr) != 0) {
    return;
  }
  state_->set_port(port_state(attr.state), link_layer(attr.link_layer));
  const bool active = attr.state == IBV_PORT_ACTIVE;
  if (active != port_active_) {
    port_active_ = active;
    health_->set_port_active(active);
    if (active) {
      lg().info("device port active", {{"port", loaded_.config.device.port}});
    } else {
      lg().warn("device port not active",
                {{"port", loaded_.config.device.port}, {"state", ibv_port_state_str(attr.state)}});
    }
  }
}

void Gateway::check_watchdog(Clock::time_point now) {
  std::vector<CorePolls> progress;
  for (const telemetry::StatsCollector::CoreProgress& p : collector_->core_progress()) {
    progress.push_back({p.core, p.polls});
  }
  const std::uint32_t stall_ms = loaded_.config.telemetry.core_stall_ms;
  WatchdogCheck c =
      control::check_watchdog(watchdog_seen_, progress, now, std::chrono::milliseconds(stall_ms));
  watchdog_seen_ = std::move(c.seen);
  if (c.ping) {
    notify("WATCHDOG=1");
    if (watchdog_withheld_) lg().info("watchdog resumed: every data-plane core makes progress", {});
    watchdog_withheld_ = false;
    return;
  }
  if (watchdog_withheld_) return;
  watchdog_withheld_ = true;
  std::string cores;
  for (const unsigned core : c.stalled) cores += (cores.empty() ? "" : ",") + std::to_string(core);
  // Error level: unless the core moves again, systemd kills the daemon within WatchdogSec from here.
  lg().error("watchdog withheld: a data-plane core made no progress",
             {{"cores", cores}, {"core_stall_ms", stall_ms}, {"watchdog_usec", watchdog_usec_}});
}

void Gateway::apply_live(const conf::Config& c) {
  lg().set_level(c.logging.level);
  allowed_ = c.security.allowed_clients;
  const TimeoutSettings t = plan_timeouts(c.protocol);
  engine_->set_timeouts_st(t.handshake_timeout, t.backoff, t.keepalive_us, t.dead_peer_us);
  engine_->set_bulk_timeout_st(t.bulk_timeout_us);
  engine_->set_auth_timeout_st(plan_auth_timeout_us(c.security));
  // Validation parsed the rules already (plan_faults): a reload with a bad rule never gets here.
  std::string ferr;
  if (const std::optional<dataplane::FaultTable> f = plan_faults(c.faults, &ferr)) {
    install_faults(*f);
  } else {
    lg().error("reload: faults.rules not applied", {{"error", ferr}});
  }
  const AdmissionSettings a = plan_admission(c.security);
  engine_->set_admission_st(a.per_source, a.rate, a.burst);
  health_->set_liveness_threshold(std::chrono::milliseconds(c.telemetry.core_stall_ms));
}

// Fault injection (docs/faults.md) on every core, the qp_err rules carried out once. Logged at warn while any
// rule is installed: an operator must see a gateway that injects faults.
void Gateway::install_faults(const dataplane::FaultTable& t) {
  const std::uint32_t before = engine_->fault_rule_count();
  if (t.count == 0 && before == 0) return;
  engine_->set_fault_rules_st(t);
  if (t.count == 0) {
    lg().info("fault injection: no rules", {});
    return;
  }
  std::string rules;
  for (std::uint32_t i = 0; i < t.count; ++i) rules += (i == 0 ? "" : "; ") + dataplane::format_fault_rule(t.rules[i]);
  lg().warn("fault injection: rules installed", {{"count", t.count}, {"rules", rules}});
}

void Gateway::reload() {
  notify("RELOADING=1\nMONOTONIC_USEC=" + monotonic_usec());
  lg().info("reloading", {{"config", opts_.config_path}});
  // The host facts read at startup, not now: EAL has pinned this thread to the main lcore since, so the
  // process's affinity would no longer include the data-plane cores and every reload would fail.
  conf::Result<conf::LoadedConfig> next = conf::loadConfigFile(opts_.config_path, opts_.load);
  if (!next) {
    log_config_errors(next.errors(), "reload: config error");
    state_->config_reload_failed();
    lg().error("reload failed: keeping the running configuration", {{"config", opts_.config_path}});
    notify("READY=1");
    return;
  }
  // The secrets file is read with the config: a refused file fails the whole reload, so the running table,
  // principals and config stay together.
  std::string aerr;
  std::unique_ptr<dataplane::AuthTable> auth = load_auth_table(next->config.security, auth_registry_, &aerr);
  if (!auth) {
    lg().error("reload: security not applied", {{"error", aerr}});
    state_->config_reload_failed();
    lg().error("reload failed: keeping the running configuration", {{"config", opts_.config_path}});
    notify("READY=1");
    return;
  }
  const std::vector<conf::ConfigChange> changes = conf::diffConfig(loaded_.config, next->config);
  std::size_t applied = 0, ignored = 0;
  // Logged before the new level applies, so a reload that raises the level still shows what it changed.
  for (const conf::ConfigChange& c : changes) {
    if (c.reload == conf::Reload::kLive) {
      ++applied;
      lg().info("config change applied", {{"key", c.key}, {"before", c.before}, {"after", c.after}});
    } else {
      ++ignored;
      lg().warn("config change ignored: needs a restart",
                {{"key", c.key}, {"running", c.before}, {"file", c.after}});
    }
  }
  loaded_.config = conf::applyLiveChanges(loaded_.config, next->config);
  apply_live(loaded_.config);
  // Revocation within the same turn: the cores close the connections of principals the new table dropped or
  // narrowed; here, those whose source address allowed_clients no longer admits.
  engine_->set_auth_table_st(std::move(auth));
  if (!loaded_.config.security.authentication_required())
    lg().warn(kAuthOffWarning, {{"key", "security.authentication"}});
  if (const std::size_t revoked = engine_->revoke_not_admitted_st(); revoked != 0) {
    lg().warn("connections revoked: source no longer in security.allowed_clients",
              {{"connections", revoked}});
  }
  state_->config_loaded(unix_seconds_now());
  lg().info("reloaded", {{"applied", applied}, {"ignored", ignored}});
  notify("READY=1");
}

int Gateway::stop(int signo) {
  const std::uint32_t drain_ms = loaded_.config.protocol.drain_timeout_ms;
  notify("STOPPING=1");
  health_->set_listeners_up(false);
  lg().info("stopping", {{"signal", signal_name(signo)},
                         {"connections", engine_->connection_count()},
                         {"drain_timeout_ms", drain_ms}});
  const EngineCounters& ctr = engine_->counters();
  lg().debug("engine counters", {{"connect_requests", ctr.connect_requests},
                                 {"accepts", ctr.accepts},
                                 {"established", ctr.established},
                                 {"destroyed", ctr.destroyed},
                                 {"core_failures", ctr.core_failures},
                                 {"dead_peers", ctr.dead_peers}});
  const auto t0 = Clock::now();
  const bool drained = engine_->shutdown_st(std::chrono::milliseconds(drain_ms));
  publish_stats();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  if (drained) {
    lg().info("drained", {{"ms", ms},
                          {"quiesce_timeouts", engine_->counters().quiesce_timeouts},
                          {"close_rekicks", engine_->counters().close_rekicks}});
  } else {
    // shutdown_st stopped the cores, so the description includes each core's view.
    std::string left = engine_->describe_connections_st(8);
    for (char& ch : left) ch = ch == '\n' ? ';' : ch;
    lg().warn("drain timed out: connections still held at exit",
              {{"ms", ms}, {"connections", engine_->connection_count()}, {"left", left}});
  }
  lg().info("exiting", {{"code", 0}});
  return 0;
}

int Gateway::run() {
  publish_stats();
  // The listeners are up: /readyz says so just before READY=1 goes out. The other order left a window in
  // which a client that had received READY=1 was told 503 "listeners not up" (seen in the guest, where the
  // notified process preempted this thread between the two); a probe that sees ready a few microseconds
  // before systemd does is harmless.
  health_->set_listeners_up(true);
  notify("READY=1\nSTATUS=listening on port " + std::to_string(loaded_.config.listen.port));
  // WATCHDOG_USEC is set by systemd for WatchdogSec=; the first check comes at once, as systemd starts
  // counting at READY=1.
  if (sd_watchdog_enabled(0, &watchdog_usec_) <= 0) watchdog_usec_ = 0;
  const auto watchdog_every = watchdog_ping_interval(watchdog_usec_);
  lg().info("ready", {{"version", version_string()},
                      {"pid", static_cast<long>(getpid())},
                      {"watchdog_usec", watchdog_usec_}});
  // The loop sleeps in poll_st until an fd (rdma_cm, async events, the signalfd), a core's reply or the
  // earliest deadline: nothing wakes it on a tick.
  const Clock::time_point start = engine_->now_st();
  auto next_publish = start + kPublishEvery;
  auto next_port_check = start + kPortCheckEvery;
  std::optional<Clock::time_point> next_watchdog;
  if (watchdog_usec_ != 0) next_watchdog = start;
  for (;;) {
    engine_->set_deadline_st(next_watchdog ? std::min(next_publish, *next_watchdog) : next_publish);
    engine_->poll_st(-1);
    const auto now = engine_->now_st();
    // By index: stop's drain turns may still append to it.
    for (std::size_t i = 0; i < pending_signals_.size(); ++i) {
      const int signo = pending_signals_[i];
      if (signo == SIGTERM || signo == SIGINT) return stop(signo);
      if (signo == SIGHUP) reload();
    }
    pending_signals_.clear();
    if (now >= next_publish) {
      publish_stats();
      check_store();
      next_publish = now + kPublishEvery;
      if (now >= next_port_check) {
        check_port();
        next_port_check = now + kPortCheckEvery;
      }
    }
    if (next_watchdog && now >= *next_watchdog) {
      check_watchdog(now);
      next_watchdog = now + watchdog_every;
    }
  }
}

}  // namespace rdmagate::control

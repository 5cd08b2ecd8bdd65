#pragma once
// The rdmagate daemon: a passive Engine whose cores run the object service over the embedded store, built
// from one loaded conf::Config, plus the control loop that drives it (signals, reload, telemetry).
//
// Startup order (each step logs; a failure returns an error naming the key or the call):
//   0. every setting below is planned from the config alone (plan_gateway, daemon/gateway_settings.hpp);
//      the steps only build what the plan says;
//   1. the RDMA device (device.name, or the only one) is opened and checked against the config
//      (conf::validateAgainstDevice) before EAL starts or anything is created on it;
//   2. EAL (eal.*: lcores, main lcore, hugepages with the --no-huge fallback in auto, memory, prefix);
//   3. the store on one HugeBuffer of store.capacity_mib plus its metadata;
//   4. the engine (one core per dataplane.cores entry), the store arena registered IBV_ACCESS_LOCAL_WRITE;
//   5. telemetry (/metrics, /healthz, /readyz), then the cores launch, then the thread placement check
//      (daemon/placement.hpp: no other thread may run on a polling core's CPU), then the listeners;
//   6. READY=1 to systemd once the listeners are up and every core runs; then, when the unit sets
//      WatchdogSec=, WATCHDOG=1 at half that interval for as long as every core makes progress
//      (daemon/watchdog.hpp).
//
// Threads: everything here runs on the main lcore (the control thread), except the data-plane cores and
// civetweb's HTTP threads (pinned to the main lcore's CPUs, as are the RADOS worker and librados' threads).
// SIGTERM, SIGINT and SIGHUP are blocked in every thread (block_daemon_signals, called before EAL creates its
// threads) and read from a signalfd, which the engine's epoll watches, so run() sleeps until a signal, an
// engine event or its next deadline (stats publication, watchdog ping): nothing wakes it on a tick.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conf/conf.hpp"
#include "daemon/watchdog.hpp"
#include "dataplane/auth_registry.hpp"
#include "dataplane/fault_rules.hpp"

namespace rdmagate::dataplane {
class EalRuntime;
class HugeBuffer;
class ObjectService;
}  // namespace rdmagate::dataplane
namespace rdmagate::store {
class Store;
}  // namespace rdmagate::store
namespace rdmagate::storage::rados {
class RadosStore;
}  // namespace rdmagate::storage::rados
namespace rdmagate::telemetry {
struct CoreStats;
class StatsCollector;
class GatewayState;
class ProcessCollector;
class HealthState;
class HttpServer;
}  // namespace rdmagate::telemetry

namespace rdmagate::control {

class Engine;

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and returns a non-blocking signalfd for them.
// Call it in main() before any thread exists, so that every thread (EAL's lcores, civetweb's workers)
// inherits the mask and only the signalfd sees those signals. -1 and *error on failure.
int block_daemon_signals(std::string* error);

class Gateway {
 public:
  struct Options {
    std::string config_path;  // re-read on SIGHUP
    conf::LoadOptions load;   // the --set overrides, kept for the reload
    int signal_fd = -1;       // from block_daemon_signals
  };

  // Steps 1 to 5 above. nullptr and *error on failure; whatever was built is torn down again.
  static std::unique_ptr<Gateway> start(const conf::LoadedConfig& loaded, Options options,
                                        std::string* error);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // The control loop: READY=1, then engine turns, signals, stats publication and port checks until SIGTERM
  // or SIGINT, then the drain. Returns the process exit code (0 after a drain, timed out or not).
  int run();

 private:
  Gateway();
  bool admit(const void* peer_sockaddr) const;
  bool check_placement(std::string* error) const;
  void apply_live(const conf::Config& next);
  void install_faults(const dataplane::FaultTable& t);
  void reload();
  void publish_stats();
  void check_port();
  void check_store();
  void check_watchdog(std::chrono::steady_clock::time_point now);
  int stop(int signo);

  conf::LoadedConfig loaded_;  // the running configuration (restart-only keys as started)
  Options opts_;
  std::vector<conf::Cidr> allowed_;  // security.allowed_clients; control thread only (read by admit)
  bool port_active_ = false;
  // systemd's watchdog: WATCHDOG_USEC (0: WatchdogSec= not set), the samples of the last check, and whether
  // the ping is being withheld (logged once per stall). Control thread only.
  std::uint64_t watchdog_usec_ = 0;
  std::vector<CoreSeen> watchdog_seen_;
  bool watchdog_withheld_ = false;
  std::vector<int> pending_signals_;  // read from the signalfd inside the engine's poll_st, handled by run()

  // Declaration order is teardown order reversed: the HTTP server goes first (it reads the stats blocks),
  // the engine before the services, store and region it uses, EAL last.
  std::unique_ptr<dataplane::EalRuntime> eal_;
  // Tenant ids and usage counters by name for the process: every AuthTable (the engine keeps them until
  // the cores moved on) points into it, so it outlives the engine.
  dataplane::AuthRegistry auth_registry_;
  std::unique_ptr<dataplane::HugeBuffer> region_;
  std::unique_ptr<store::Store> store_;                // store.backend: rados: the cache in front of rados_
  std::unique_ptr<storage::rados::RadosStore> rados_;  // after the cores stopped, before its cache goes
  const char* store_not_ready_ = nullptr;              // the last readiness published; control thread only
  std::vector<std::unique_ptr<telemetry::CoreStats>> core_stats_;
  std::unique_ptr<telemetry::CoreStats> control_stats_;
  std::vector<std::unique_ptr<dataplane::ObjectService>> services_;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<telemetry::StatsCollector> collector_;
  // Readiness, port, reloads, registered memory, hugepage fallback: set by this thread, read at scrape.
  std::shared_ptr<telemetry::GatewayState> state_;
  std::shared_ptr<telemetry::ProcessCollector> process_;
  std::unique_ptr<telemetry::HealthState> health_;
  std::unique_ptr<telemetry::HttpServer> http_;
};

}  // namespace rdmagate::control

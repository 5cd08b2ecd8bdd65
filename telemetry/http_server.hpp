#pragma once
// HTTP front of telemetry: /metrics, /healthz and /readyz on one civetweb listener, and optionally the
// probes alone on a second one.
//
// Why civetweb directly and not prometheus::Exposer: Exposer keeps its CivetServer private and its
// RegisterCollectable endpoints always answer 200 with exposition text, so /healthz and /readyz could not
// return 503. The only other hook, CivetCallbacks::begin_request, carries no user pointer (the context's
// user data is Exposer's own CivetServer), which would force global state. One mg_context of our own serves
// all endpoints on the caller's single address, uses the same civetweb library prometheus-cpp-pull already
// links, serialises /metrics with serialize_text (text_format.hpp), and reports a busy port as an error
// string instead of a CivetException.
//
// Bounded against hostile or broken HTTP clients (issue 15): civetweb's default request timeout is 30 s, so
// two idle TCP connections held both threads and the liveness probe failed, which restarts the pod and drops
// every RDMA session. Every connection now lasts at most request_timeout for its request headers (counted
// from accept, so a slow-loris trickle does not extend it) and each response write that makes no progress
// for that long is abandoned; keep-alive is off. A waiting probe still queues behind the clients ahead of
// it, up to (clients / threads) x request_timeout, so the probes get a listener of their own (probe_port)
// with threads nobody else's request can hold: a flood or slow-loris of /metrics never reaches them.
//
// Its routes are its begin_request callback (the context's user data is this server), not
// mg_set_request_handler: callbacks are part of the context before it listens, while handlers can only be
// added to a context that is already serving, and a probe that came in between got 404.

#include <prometheus/collectable.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "telemetry/collector.hpp"

struct mg_context;
struct mg_connection;

namespace rdmagate::telemetry {

struct Verdict {
  bool ok = false;
  std::string reason;  // one line, ends without a newline
};

// Liveness and readiness inputs. The daemon sets the flags from whichever thread learns the fact; the
// HTTP threads evaluate them per request.
class HealthState {
 public:
  using Clock = std::chrono::steady_clock;

  // A core is live while its poll counter moved within liveness_threshold. The check samples the counter
  // when asked, so a probe period below the threshold is what makes a stall visible within 2 thresholds.
  // Any number of callers may sample (the probes, and the scrape for rdmagate_ready): a core is judged
  // stalled only when its counter stood still across samples more than the threshold apart, so more
  // samples can show a stall sooner but never invent one, nor hide or delay one another caller would see.
  HealthState(const StatsCollector& stats, std::chrono::nanoseconds liveness_threshold);

  void set_listeners_up(bool up) noexcept { listeners_up_.store(up, std::memory_order_relaxed); }
  void set_port_active(bool active) noexcept { port_active_.store(active, std::memory_order_relaxed); }
  // The storage backend's readiness: null when ready, else why not (a string with static lifetime).
  void set_store_not_ready(const char* reason) noexcept {
    store_not_ready_.store(reason, std::memory_order_relaxed);
  }
  // telemetry.core_stall_ms is reloadable (SIGHUP): the next check uses the new threshold.
  void set_liveness_threshold(std::chrono::nanoseconds t) noexcept {
    threshold_ns_.store(t.count(), std::memory_order_relaxed);
  }

  Verdict check_live(Clock::time_point now);
  // Ready: listeners up, the device port active, the storage backend ready, at least one core, and every
  // core polled and is live.
  Verdict check_ready(Clock::time_point now);

 private:
  struct Seen {
    unsigned core = 0;
    std::uint64_t polls = 0;
    Clock::time_point changed{};
  };
  // Updates the samples and returns the cores whose counter stood still longer than the threshold.
  std::vector<unsigned> stale_cores(Clock::time_point now,
                                    std::vector<StatsCollector::CoreProgress>& progress);

  const StatsCollector& stats_;
  std::atomic<std::chrono::nanoseconds::rep> threshold_ns_;
  std::atomic<bool> listeners_up_{false};
  std::atomic<bool> port_active_{false};
  std::atomic<const char*> store_not_ready_{nullptr};
  std::mutex mutex_;
  std::vector<Seen> seen_;
};

struct HttpOptions {
  std::string bind_address = "127.0.0.1";  // IPv4 literal, or IPv6 literal without brackets
  std::uint16_t port = 0;                  // 0: any free port (see HttpServer::port())
  unsigned threads = 4;                    // telemetry.threads: of the main listener
  // CPUs for civetweb's threads; unset: the starting thread's. The daemon passes the main lcore's set so
  // that serving a scrape never takes time from a data-plane core's CPU.
  std::optional<cpu_set_t> cpus;
  // telemetry.request_timeout_ms: the most a client may take to send its request headers, and the most one
  // response write may wait for the client to read; then the connection is closed. Both listeners.
  std::chrono::milliseconds request_timeout{1000};
  // telemetry.probe_port: a second listener on bind_address serving only /healthz and /readyz, with
  // kProbeThreads of its own. Unset: none (the probes are served on port only); 0: any free port.
  std::optional<std::uint16_t> probe_port;
};

// The kubelet runs the liveness and the readiness probe independently: one thread each, so neither waits
// for the other.
inline constexpr unsigned kProbeThreads = 2;

class HttpServer {
 public:
  // Starts listening. On failure returns nullptr and sets error to one line naming the address; never
  // throws. extra may add slow-path collectables (e.g. a prometheus::Registry) to /metrics. health must
  // outlive the server; the destructor joins civetweb's threads (about 2 s: their poll timeout).
  // With probe_port set both listeners start, or neither.
  static std::unique_ptr<HttpServer> start(const HttpOptions& options, std::shared_ptr<StatsCollector> stats,
                                           HealthState& health, std::string& error,
                                           std::vector<std::shared_ptr<prometheus::Collectable>> extra = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  // The probe listener's port; 0 when HttpOptions::probe_port was unset.
  std::uint16_t probe_port() const noexcept { return probe_port_; }

 private:
  HttpServer(std::shared_ptr<StatsCollector> stats, HealthState& health,
             std::vector<std::shared_ptr<prometheus::Collectable>> extra);
  // Starts one civetweb context serving `router` on `where`; `what` names it in errors.
  mg_context* listen(const std::string& where, const char* what, unsigned threads,
                     std::chrono::milliseconds request_timeout, int (*router)(mg_connection*),
                     std::uint16_t& port, std::string& error);
  static int route(mg_connection* conn) noexcept;
  static int route_probes(mg_connection* conn) noexcept;
  int handle_metrics(mg_connection* conn) noexcept;
  int handle_healthz(mg_connection* conn) noexcept;
  int handle_readyz(mg_connection* conn) noexcept;

  std::shared_ptr<StatsCollector> stats_;
  HealthState& health_;
  std::vector<std::shared_ptr<prometheus::Collectable>> extra_;
  mg_context* ctx_ = nullptr;
  mg_context* probe_ctx_ = nullptr;
  std::uint16_t port_ = 0;
  std::uint16_t probe_port_ = 0;
};

}  // namespace rdmagate::telemetry

#include "telemetry/http_server.hpp"

#include <civetweb.h>
#include <pthread.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <string_view>

#include "telemetry/text_format.hpp"

namespace rdmagate::telemetry {
namespace {

void send(mg_connection* conn, int status, const char* status_text, const char* content_type,
          const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
            "Connection: close\r\n\r\n",
            status, status_text, content_type, body.size());
  mg_write(conn, body.data(), body.size());
}

void send_verdict(mg_connection* conn, const Verdict& v) {
  send(conn, v.ok ? 200 : 503, v.ok ? "OK" : "Service Unavailable", "text/plain; charset=utf-8",
       v.reason + "\n");
}

std::string join_cores(const std::vector<unsigned>& cores) {
  std::string s;
  for (const unsigned c : cores) {
    if (!s.empty()) s += ',';
    s += std::to_string(c);
  }
  return s;
}

std::string cpu_list(const cpu_set_t& set) {
  std::string s;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    if (!s.empty()) s += ',';
    s += std::to_string(cpu);
  }
  return s.empty() ? "(none)" : s;
}

}  // namespace

HealthState::HealthState(const StatsCollector& stats, std::chrono::nanoseconds liveness_threshold)
    : stats_(stats), threshold_ns_(liveness_threshold.count()) {}

std::vector<unsigned> HealthState::stale_cores(Clock::time_point now,
                                               std::vector<StatsCollector::CoreProgress>& progress) {
  std::vector<unsigned> stale;
  const std::lock_guard lock(mutex_);
  // Read under the lock, so the samples of concurrent callers (probes, scrapes) are applied in the order
  // they were read and a late caller never overwrites a newer count with an older one.
  progress = stats_.core_progress();
  for (const auto& p : progress) {
    auto it = std::find_if(seen_.begin(), seen_.end(), [&](const Seen& s) { return s.core == p.core; });
    if (it == seen_.end()) {
      // First sight: give the core a full threshold from now rather than judging an unknown past.
      seen_.push_back({p.core, p.polls, now});
      continue;
    }
    if (it->polls != p.polls) {
      it->polls = p.polls;
      // A caller may have taken its `now` before another's: the time a change was seen never goes back.
      it->changed = std::max(it->changed, now);
    } else if (now - it->changed > std::chrono::nanoseconds(threshold_ns_.load(std::memory_order_relaxed))) {
      stale.push_back(p.core);
    }
  }
  return stale;
}

Verdict HealthState::check_live(Clock::time_point now) {
  std::vector<StatsCollector::CoreProgress> progress;
  const auto stale = stale_cores(now, progress);
  if (progress.empty()) return {false, "not live: no data-plane core registered"};
  if (!stale.empty()) return {false, "not live: no progress within threshold on core " + join_cores(stale)};
  return {true, "live: " + std::to_string(progress.size()) + " cores making progress"};
}

Verdict HealthState::check_ready(Clock::time_point now) {
  std::vector<StatsCollector::CoreProgress> progress;
  const auto stale = stale_cores(now, progress);
  std::string why;
  auto add = [&](const std::string& s) { why += why.empty() ? s : "; " + s; };
  if (!listeners_up_.load(std::memory_order_relaxed)) add("listeners not up");
  if (!port_active_.load(std::memory_order_relaxed)) add("device port not active");
  if (const char* store = store_not_ready_.load(std::memory_order_relaxed))
    add(std::string("store ") + store);
  if (progress.empty()) add("no data-plane core registered");
  std::vector<unsigned> not_polling;
  for (const auto& p : progress)
    if (p.polls == 0) not_polling.push_back(p.core);
  if (!not_polling.empty()) add("core " + join_cores(not_polling) + " not polling");
  if (!stale.empty()) add("core " + join_cores(stale) + " stalled");
  // One core that lost its CQ leaves the others serving (an alert, not a probe, reports it); all of them
  // leave no core a connection could be placed on.
  if (!progress.empty() &&
      std::all_of(progress.begin(), progress.end(), [](const auto& p) { return p.out_of_service; }))
    add("no core in service (each lost its completion queue)");
  if (!why.empty()) return {false, "not ready: " + why};
  return {true, "ready"};
}

HttpServer::HttpServer(std::shared_ptr<StatsCollector> stats, HealthState& health,
                       std::vector<std::shared_ptr<prometheus::Collectable>> extra)
    : stats_(std::move(stats)), health_(health), extra_(std::move(extra)) {}

HttpServer::~HttpServer() {
  // mg_stop joins the context's threads: no handler runs after this.
  if (probe_ctx_ != nullptr) mg_stop(probe_ctx_);
  if (ctx_ != nullptr) mg_stop(ctx_);
}

mg_context* HttpServer::listen(const std::string& where, const char* what, unsigned threads,
                               std::chrono::milliseconds request_timeout, int (*router)(mg_connection*),
                               std::uint16_t& port, std::string& error) {
  const std::string nthreads = std::to_string(threads == 0 ? 1 : threads);
  const std::string timeout =
      std::to_string(std::max<std::chrono::milliseconds::rep>(request_timeout.count(), 1));
  // No linger_timeout_ms: with it civetweb's close blocks the thread until the client has read the answer.
  // clang-format off
  std::array<const char*, 9> opts = {
      "listening_ports",    where.c_str(),
      "num_threads",        nthreads.c_str(),
      "request_timeout_ms", timeout.c_str(),
      "enable_keep_alive",  "no",
      nullptr};
  // clang-format on
  std::array<char, 256> text{};
  unsigned code = 0;
  mg_error_data err{&code, text.data(), text.size()};
  mg_callbacks callbacks{};
  // Default logging goes to stderr in civetweb's own format; the caller prints our one-line error.
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  callbacks.begin_request = router;
  mg_init_data init{&callbacks, this, opts.data()};
  mg_context* ctx = mg_start2(&init, &err);
  if (ctx == nullptr) {
    error = "telemetry: cannot listen on " + where + what + ": " +
            (text[0] != '\0' ? std::string(text.data()) : std::string("civetweb failed to start")) +
            " (is the port in use?)";
    return nullptr;
  }
  std::array<mg_server_port, 4> ports{};
  if (mg_get_server_ports(ctx, static_cast<int>(ports.size()), ports.data()) < 1) {
    error = "telemetry: listening on " + where + what + " but cannot tell which port";
    return ctx;  // the destructor stops it
  }
  port = static_cast<std::uint16_t>(ports[0].port);
  return ctx;
}

std::unique_ptr<HttpServer> HttpServer::start(const HttpOptions& options,
                                              std::shared_ptr<StatsCollector> stats, HealthState& health,
                                              std::string& error,
                                              std::vector<std::shared_ptr<prometheus::Collectable>> extra) {
  try {
    static const unsigned kInit = mg_init_library(0);  // once per process; thread-safe via static init
    (void)kInit;
    const bool v6 = options.bind_address.find(':') != std::string::npos;
    // civetweb spells an IPv6 listener with a leading '+' only for dual-stack; a bracketed literal binds v6.
    const auto where = [&](std::uint16_t port) {
      return v6 ? "[" + options.bind_address + "]:" + std::to_string(port)
                : options.bind_address + ":" + std::to_string(port);
    };
    std::unique_ptr<HttpServer> server(new HttpServer(std::move(stats), health, std::move(extra)));

    // civetweb's threads (and any they start) inherit the affinity of the thread that creates them, so this
    // thread takes options.cpus while the listeners start. Pinning inside civetweb's init_thread callback
    // could only fail silently, on a thread that is already serving.
    const pthread_t self = pthread_self();
    cpu_set_t saved;
    if (options.cpus) {
      int rc = pthread_getaffinity_np(self, sizeof saved, &saved);
      if (rc == 0) rc = pthread_setaffinity_np(self, sizeof *options.cpus, &*options.cpus);
      if (rc != 0) {
        error = "telemetry: cannot run the http threads on CPUs " + cpu_list(*options.cpus) + ": " +
                std::strerror(rc);
        return nullptr;
      }
    }
    server->ctx_ = server->listen(where(options.port), "", options.threads, options.request_timeout,
                                  &HttpServer::route, server->port_, error);
    if (server->port_ != 0 && options.probe_port) {
      server->probe_ctx_ =
          server->listen(where(*options.probe_port), " (probes)", kProbeThreads, options.request_timeout,
                         &HttpServer::route_probes, server->probe_port_, error);
    }
    if (options.cpus) {
      if (const int rc = pthread_setaffinity_np(self, sizeof saved, &saved); rc != 0) {
        error = std::string("telemetry: cannot restore the starting thread's CPUs: ") + std::strerror(rc);
        return nullptr;  // the destructor stops civetweb
      }
    }
    if (server->port_ == 0 || (options.probe_port && server->probe_port_ == 0)) return nullptr;
    return server;
  } catch (const std::exception& e) {
    error = std::string("telemetry: cannot start http server: ") + e.what();
    return nullptr;
  }
}

int HttpServer::route(mg_connection* conn) noexcept {
  const mg_request_info* ri = mg_get_request_info(conn);
  auto* s = static_cast<HttpServer*>(ri->user_data);
  const std::string_view uri = ri->local_uri != nullptr ? ri->local_uri : "";
  if (uri == "/metrics") return s->handle_metrics(conn);
  if (uri == "/healthz") return s->handle_healthz(conn);
  if (uri == "/readyz") return s->handle_readyz(conn);
  return 0;  // civetweb answers 404: there is no document root
}

int HttpServer::route_probes(mg_connection* conn) noexcept {
  const mg_request_info* ri = mg_get_request_info(conn);
  auto* s = static_cast<HttpServer*>(ri->user_data);
  const std::string_view uri = ri->local_uri != nullptr ? ri->local_uri : "";
  if (uri == "/healthz") return s->handle_healthz(conn);
  if (uri == "/readyz") return s->handle_readyz(conn);
  return 0;  // 404: /metrics stays off the probes' threads
}

int HttpServer::handle_metrics(mg_connection* conn) noexcept {
  try {
    auto families = stats_->Collect();
    for (const auto& c : extra_) {
      auto more = c->Collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()),
                      std::make_move_iterator(more.end()));
    }
    send(conn, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", serialize_text(families));
  } catch (const std::exception& e) {
    send(conn, 500, "Internal Server Error", "text/plain; charset=utf-8", std::string(e.what()) + "\n");
  }
  return 200;
}

int HttpServer::handle_healthz(mg_connection* conn) noexcept {
  try {
    send_verdict(conn, health_.check_live(HealthState::Clock::now()));
  } catch (const std::exception& e) {
    send(conn, 500, "Internal Server Error", "text/plain; charset=utf-8", std::string(e.what()) + "\n");
  }
  return 200;
}

int HttpServer::handle_readyz(mg_connection* conn) noexcept {
  try {
    send_verdict(conn, health_.check_ready(HealthState::Clock::now()));
  } catch (const std::exception& e) {
    send(conn, 500, "Internal Server Error", "text/plain; charset=utf-8", std::string(e.what()) + "\n");
  }
  return 200;
}

}  // namespace rdmagate::telemetry

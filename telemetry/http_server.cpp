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
  if (!why.empty()) return {false, "not ready: " + why};
  return {true, "ready"};
}

HttpServer::HttpServer(std::shared_ptr<StatsCollector> stats, HealthState& health,
                       std::vector<std::shared_ptr<prometheus::Collectable>> extra)
    : stats_(std::move(stats)), health_(health), extra_(std::move(extra)) {}

HttpServer::~HttpServer() {
  if (ctx_ != nullptr) mg_stop(ctx_);  // joins the worker threads: no handler runs after this
}

std::unique_ptr<HttpServer> HttpServer::start(const HttpOptions& options,
                                              std::shared_ptr<StatsCollector> stats, HealthState& health,
                                              std::string& error,
                                              std::vector<std::shared_ptr<prometheus::Collectable>> extra) {
  try {
    static const unsigned kInit = mg_init_library(0);  // once per process; thread-safe via static init
    (void)kInit;
    const bool v6 = options.bind_address.find(':') != std::string::npos;
    const std::string where = v6 ? "[" + options.bind_address + "]:" + std::to_string(options.port)
                                 : options.bind_address + ":" + std::to_string(options.port);
    // civetweb spells an IPv6 listener with a leading '+' only for dual-stack; a bracketed literal binds v6.
    const std::string threads = std::to_string(options.threads == 0 ? 1 : options.threads);
    std::array<const char*, 7> opts = {"listening_ports",   where.c_str(), "num_threads", threads.c_str(),
                                       "enable_keep_alive", "no",          nullptr};

    std::unique_ptr<HttpServer> server(new HttpServer(std::move(stats), health, std::move(extra)));
    std::array<char, 256> text{};
    unsigned code = 0;
    mg_error_data err{&code, text.data(), text.size()};
    mg_callbacks callbacks{};
    // Default logging goes to stderr in civetweb's own format; the caller prints our one-line error.
    callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
    callbacks.begin_request = &HttpServer::route;
    mg_init_data init{&callbacks, server.get(), opts.data()};

    // civetweb's threads (and any they start) inherit the affinity of the thread that creates them, so this
    // thread takes options.cpus for the duration of mg_start2. Pinning inside civetweb's init_thread callback
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
    server->ctx_ = mg_start2(&init, &err);
    if (options.cpus) {
      if (const int rc = pthread_setaffinity_np(self, sizeof saved, &saved); rc != 0) {
        error = std::string("telemetry: cannot restore the starting thread's CPUs: ") + std::strerror(rc);
        return nullptr;  // the destructor stops civetweb
      }
    }
    if (server->ctx_ == nullptr) {
      error = "telemetry: cannot listen on " + where + ": " +
              (text[0] != '\0' ? std::string(text.data()) : std::string("civetweb failed to start")) +
              " (is the port in use?)";
      return nullptr;
    }
    std::array<mg_server_port, 4> ports{};
    const int n = mg_get_server_ports(server->ctx_, static_cast<int>(ports.size()), ports.data());
    if (n < 1) {
      error = "telemetry: listening on " + where + " but cannot tell which port";
      return nullptr;  // the destructor stops civetweb
    }
    server->port_ = static_cast<std::uint16_t>(ports[0].port);
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

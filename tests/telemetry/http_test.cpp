#include <arpa/inet.h>
#include <civetweb.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exposition_util.hpp"
#include "hostile_http.hpp"
#include "telemetry/gateway_state.hpp"
#include "telemetry/http_server.hpp"
#include "telemetry/process_metrics.hpp"

namespace rdmagate::telemetry {
namespace {

using namespace std::chrono_literals;
using testfix::http::Attack;
using testfix::http::closed_by_server;
using testfix::http::connect_loopback;

struct Response {
  int status = 0;
  std::string body;
};

// Tiny HTTP/1.0 client: enough for GET against 127.0.0.1.
Response http_get(std::uint16_t port, const std::string& path) {
  Response r;
  const int fd = connect_loopback(port);
  if (fd < 0) return r;
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return r;
  }
  std::string all;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    all.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (all.rfind("HTTP/1.", 0) != 0 || all.size() < 12) return r;
  r.status = std::stoi(all.substr(9, 3));
  const auto hdr_end = all.find("\r\n\r\n");
  if (hdr_end != std::string::npos) r.body = all.substr(hdr_end + 4);
  return r;
}

struct Fixture {
  std::shared_ptr<StatsCollector> stats = std::make_shared<StatsCollector>("9.9.9", 1'000'000'000);
  CoreStats core0, core1;
  HealthState health{*stats, 10s};
  Fixture() {
    stats->register_core(0, core0);
    stats->register_core(1, core1);
  }
};

TEST(HealthState, LivenessFollowsProgress) {
  Fixture f;
  HealthState h(*f.stats, 100ms);
  const auto t0 = HealthState::Clock::now();
  EXPECT_TRUE(h.check_live(t0).ok);  // first sight: benefit of the doubt
  f.core0.add(Stat::kPolls);
  const auto v1 = h.check_live(t0 + 150ms);  // core 1 stood still for > 100 ms
  EXPECT_FALSE(v1.ok);
  EXPECT_NE(v1.reason.find("core 1"), std::string::npos) << v1.reason;
  EXPECT_EQ(v1.reason.find("core 0"), std::string::npos) << v1.reason;
  f.core1.add(Stat::kPolls);
  f.core0.add(Stat::kPolls);
  EXPECT_TRUE(h.check_live(t0 + 200ms).ok);
  EXPECT_TRUE(h.check_live(t0 + 290ms).ok);
  const auto v2 = h.check_live(t0 + 400ms);
  EXPECT_FALSE(v2.ok);
  EXPECT_NE(v2.reason.find("0,1"), std::string::npos) << v2.reason;
}

TEST(HealthState, NoCoresIsNotLive) {
  StatsCollector empty("x", 1);
  HealthState h(empty, 1s);
  const auto v = h.check_live(HealthState::Clock::now());
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("no data-plane core"), std::string::npos);
}

TEST(HealthState, ReadinessListsEveryMissingInput) {
  Fixture f;
  const auto t0 = HealthState::Clock::now();
  auto v = f.health.check_ready(t0);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("listeners not up"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("device port not active"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("core 0,1 not polling"), std::string::npos) << v.reason;
  f.health.set_listeners_up(true);
  f.health.set_port_active(true);
  f.core0.add(Stat::kPolls);
  v = f.health.check_ready(t0 + 1ms);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("core 1 not polling"), std::string::npos) << v.reason;
  EXPECT_EQ(v.reason.find("listeners"), std::string::npos) << v.reason;
  f.core1.add(Stat::kPolls);
  v = f.health.check_ready(t0 + 2ms);
  EXPECT_TRUE(v.ok) << v.reason;
  EXPECT_EQ(v.reason, "ready");
  f.health.set_port_active(false);
  v = f.health.check_ready(t0 + 3ms);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.reason, "not ready: device port not active");
  f.health.set_port_active(true);
  f.health.set_store_not_ready("probe_failed");  // store.backend rados: the cluster takes no writes
  v = f.health.check_ready(t0 + 4ms);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.reason, "not ready: store probe_failed");
  f.health.set_store_not_ready(nullptr);
  EXPECT_TRUE(f.health.check_ready(t0 + 5ms).ok);
  // A core that lost its CQ (it still turns): the other serves, so still ready; with both out, not.
  f.core0.set(Stat::kCoreOutOfService, 1);
  f.core0.add(Stat::kPolls);
  f.core1.add(Stat::kPolls);
  v = f.health.check_ready(t0 + 6ms);
  EXPECT_TRUE(v.ok) << v.reason;
  EXPECT_TRUE(f.health.check_live(t0 + 6ms).ok);
  f.core1.set(Stat::kCoreOutOfService, 1);
  v = f.health.check_ready(t0 + 7ms);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.reason, "not ready: no core in service (each lost its completion queue)");
  EXPECT_TRUE(f.health.check_live(t0 + 7ms).ok) << "out of service is not stuck";
}

TEST(HttpServer, ServesMetricsHealthzReadyz) {
  Fixture f;
  std::string error;
  auto server = HttpServer::start(HttpOptions{"127.0.0.1", 0, 2, {}, 1000ms, {}}, f.stats, f.health, error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_NE(server->port(), 0);

  f.core0.add(Stat::kPolls, 7);
  f.core1.add(Stat::kAccepts, 3);
  const auto m = http_get(server->port(), "/metrics");
  ASSERT_EQ(m.status, 200);
  const auto e = test::parse_exposition(m.body);
  ASSERT_NE(
      test::find_sample(e, "rdmagate_build_info",
                        {{"version", "9.9.9"}, {"commit", std::string(StatsCollector::build_commit())}}),
      nullptr);
  ASSERT_NE(test::find_sample(e, "rdmagate_poller_polls_total", {{"core", "0"}}), nullptr);
  EXPECT_EQ(test::find_sample(e, "rdmagate_poller_polls_total", {{"core", "0"}})->value, 7);
  EXPECT_EQ(test::find_sample(e, "rdmagate_connection_accepts_total", {})->value, 3);

  auto r = http_get(server->port(), "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("not ready: listeners not up"), std::string::npos) << r.body;

  f.health.set_listeners_up(true);
  f.health.set_port_active(true);
  f.core1.add(Stat::kPolls);
  r = http_get(server->port(), "/readyz");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "ready\n");

  r = http_get(server->port(), "/healthz");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("live"), std::string::npos);

  EXPECT_EQ(http_get(server->port(), "/nope").status, 404);
}

// What the daemon serves: the per-core families plus the gateway state and the process metrics, in the
// text format whose bucket bounds are exact; rdmagate_ready agrees with /readyz.
TEST(HttpServer, MetricsCarryGatewayStateAndProcessFamilies) {
  Fixture f;
  auto state = std::make_shared<GatewayState>();
  state->set_health(f.health);
  state->set_port_identity("rxe0", 1, "verbs");
  state->set_port(PortState::kActive, LinkLayer::kEthernet);
  state->config_loaded(1'765'000'000);
  std::string error;
  auto server = HttpServer::start(HttpOptions{"127.0.0.1", 0, 2, {}, 1000ms, {}}, f.stats, f.health, error,
                                  {state, std::make_shared<ProcessCollector>()});
  ASSERT_NE(server, nullptr) << error;

  f.core0.observe_request_ns(protocol::ObjectOp::kGet, 8'000'000);
  auto m = http_get(server->port(), "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("rdmagate_request_duration_seconds_bucket{op=\"get\",le=\"0.008388608\"} 1\n"),
            std::string::npos)
      << m.body;
  auto e = test::parse_exposition(m.body);
  EXPECT_EQ(test::find_sample(e, "rdmagate_ready", {})->value, 0);
  EXPECT_EQ(http_get(server->port(), "/readyz").status, 503);
  for (const char* name : {"process_start_time_seconds", "process_cpu_seconds_total", "process_open_fds",
                           "process_max_fds", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                           "rdmagate_port_info", "rdmagate_config_last_reload_successful"})
    EXPECT_EQ(e.types.count(name), 1u) << name;

  f.health.set_listeners_up(true);
  f.health.set_port_active(true);
  f.core0.add(Stat::kPolls);
  f.core1.add(Stat::kPolls);
  EXPECT_EQ(http_get(server->port(), "/readyz").status, 200);
  e = test::parse_exposition(http_get(server->port(), "/metrics").body);
  EXPECT_EQ(test::find_sample(e, "rdmagate_ready", {})->value, 1);
}

// A free loopback port, for a test that must know the port before the server opens it.
std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  return ok ? ntohs(addr.sin_port) : 0;
}

// When set, civetweb's mg_start2 does not return (its listener is accepting and serving by then) until the
// flag turns true or 10 s pass, so a test can probe the server while HttpServer::start is still running. The
// test executable's definition wins over libcivetweb's for calls from the statically linked telemetry
// library; RTLD_NEXT finds the real one.
std::atomic<std::atomic<bool>*> g_start2_hold_until{nullptr};

}  // namespace
}  // namespace rdmagate::telemetry

extern "C" mg_context* mg_start2(mg_init_data* init, mg_error_data* error) {
  using Start2 = mg_context* (*)(mg_init_data*, mg_error_data*);
  static const auto real = reinterpret_cast<Start2>(::dlsym(RTLD_NEXT, "mg_start2"));
  if (real == nullptr) std::abort();  // not linked against a shared civetweb: the wrapper cannot work
  mg_context* ctx = real(init, error);
  if (const std::atomic<bool>* until = rdmagate::telemetry::g_start2_hold_until.load()) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!until->load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return ctx;
}

namespace rdmagate::telemetry {
namespace {

// A probe that reaches the server before start() returns must be routed: 200 or 503, never the 404 of an
// unknown path. The routes used to be added after civetweb was already serving, so an early /readyz or
// /healthz could get 404.
TEST(HttpServer, ProbeDuringStartIsRouted) {
  Fixture f;
  const std::uint16_t port = free_port();
  ASSERT_NE(port, 0);
  std::atomic<bool> answered{false};
  Response health, ready;
  std::thread prober([&] {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (health.status == 0 && std::chrono::steady_clock::now() < deadline) {
      health = http_get(port, "/healthz");
      if (health.status == 0) std::this_thread::sleep_for(1ms);
    }
    ready = http_get(port, "/readyz");
    answered = true;
  });
  g_start2_hold_until = &answered;
  std::string error;
  auto server =
      HttpServer::start(HttpOptions{"127.0.0.1", port, 2, {}, 1000ms, {}}, f.stats, f.health, error);
  g_start2_hold_until = nullptr;
  // Both answers came while start() was held, or the race this test sets up did not happen.
  EXPECT_TRUE(answered.load());
  prober.join();
  ASSERT_NE(server, nullptr) << error;
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("not ready: listeners not up"), std::string::npos) << ready.body;
}

std::vector<pid_t> thread_ids() {
  std::vector<pid_t> ids;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
    ids.push_back(static_cast<pid_t>(std::stoi(e.path().filename().string())));
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The daemon puts civetweb's threads on the main lcore's CPUs (HttpOptions::cpus) so that a scrape never
// runs on a data-plane core's CPU; the starting thread keeps its own CPUs.
TEST(HttpServer, ThreadsRunOnTheGivenCpus) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  if (CPU_COUNT(&mine) < 2) GTEST_SKIP() << "needs 2 CPUs to tell a pinned thread from an inherited one";
  int last = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mine)) last = cpu;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(last, &one);

  Fixture f;
  const auto before = thread_ids();
  std::string error;
  auto server = HttpServer::start(HttpOptions{"127.0.0.1", 0, 2, one, 1000ms, {}}, f.stats, f.health, error);
  ASSERT_NE(server, nullptr) << error;
  std::vector<pid_t> started;
  const auto after = thread_ids();
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(started));
  EXPECT_GE(started.size(), 3u) << "a master and 2 workers";
  for (const pid_t tid : started) {
    cpu_set_t got;
    ASSERT_EQ(::sched_getaffinity(tid, sizeof got, &got), 0) << tid;
    EXPECT_TRUE(CPU_EQUAL(&got, &one)) << "thread " << tid << " may run on " << CPU_COUNT(&got) << " CPUs";
  }
  cpu_set_t now;
  ASSERT_EQ(::sched_getaffinity(0, sizeof now, &now), 0);
  EXPECT_TRUE(CPU_EQUAL(&now, &mine)) << "the starting thread's CPUs were not restored";
  EXPECT_EQ(http_get(server->port(), "/healthz").status, 200);
}

TEST(HttpServer, CpusItCannotUseAreAClearError) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  cpu_set_t none;
  CPU_ZERO(&none);
  Fixture f;
  std::string error;
  auto server = HttpServer::start(HttpOptions{"127.0.0.1", 0, 1, none, 1000ms, {}}, f.stats, f.health, error);
  EXPECT_EQ(server, nullptr);
  EXPECT_NE(error.find("cannot run the http threads on CPUs (none)"), std::string::npos) << error;
  cpu_set_t now;
  ASSERT_EQ(::sched_getaffinity(0, sizeof now, &now), 0);
  EXPECT_TRUE(CPU_EQUAL(&now, &mine));
}

TEST(HttpServer, HealthzTurns503WhenACoreStalls) {
  Fixture f;
  HealthState h(*f.stats, 50ms);
  std::string error;
  auto server = HttpServer::start(HttpOptions{}, f.stats, h, error);
  ASSERT_NE(server, nullptr) << error;
  std::atomic<bool> stop{false};
  std::thread core0([&] {
    while (!stop.load()) {
      f.core0.add(Stat::kPolls);
      std::this_thread::sleep_for(1ms);
    }
  });
  std::thread core1([&] {
    while (!stop.load()) {
      f.core1.add(Stat::kPolls);
      std::this_thread::sleep_for(1ms);
    }
  });
  EXPECT_EQ(http_get(server->port(), "/healthz").status, 200);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(http_get(server->port(), "/healthz").status, 200);
  stop = true;
  core0.join();
  core1.join();
  (void)http_get(server->port(), "/healthz");  // samples the final counters
  std::this_thread::sleep_for(120ms);
  const auto r = http_get(server->port(), "/healthz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("not live: no progress within threshold on core 0,1"), std::string::npos) << r.body;
}

TEST(HttpServer, BusyPortIsAClearError) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::uint16_t busy = ntohs(addr.sin_port);

  Fixture f;
  std::string error;
  std::unique_ptr<HttpServer> server;
  EXPECT_NO_THROW(server = HttpServer::start(HttpOptions{"127.0.0.1", busy, 1, {}, 1000ms, {}}, f.stats,
                                             f.health, error));
  EXPECT_EQ(server, nullptr);
  EXPECT_NE(error.find("cannot listen on 127.0.0.1:" + std::to_string(busy)), std::string::npos) << error;
  ::close(fd);
}

TEST(HttpServer, BadAddressIsAClearError) {
  Fixture f;
  std::string error;
  auto server =
      HttpServer::start(HttpOptions{"not-an-address", 0, 1, {}, 1000ms, {}}, f.stats, f.health, error);
  EXPECT_EQ(server, nullptr);
  EXPECT_NE(error.find("cannot listen on not-an-address:0"), std::string::npos) << error;
}

struct Timed {
  Response r;
  std::chrono::steady_clock::duration took{};
};
Timed timed_get(std::uint16_t port, const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  Timed t{http_get(port, path), {}};
  t.took = std::chrono::steady_clock::now() - t0;
  return t;
}
double ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// The failure of issue 15: civetweb's 30 s default request timeout let two idle connections hold both
// threads, the liveness probe failed and the pod was restarted. Now every connection gets request_timeout
// for its whole request: an idle one and a slow-loris one are both closed by the server after it (a
// trickle does not extend it), long before civetweb's 30 s.
TEST(HttpServer, IdleAndSlowLorisConnectionsAreClosedAfterTheRequestTimeout) {
  Fixture f;
  HttpOptions o;
  o.bind_address = "127.0.0.1";
  o.request_timeout = 300ms;
  std::string error;
  auto server = HttpServer::start(o, f.stats, f.health, error);
  ASSERT_NE(server, nullptr) << error;

  const auto t0 = std::chrono::steady_clock::now();
  const int idle = connect_loopback(server->port());
  const int loris = connect_loopback(server->port());
  ASSERT_GE(idle, 0);
  ASSERT_GE(loris, 0);
  std::atomic<bool> stop{false};
  std::atomic<int> trickled{0};
  std::thread trickle([&] {
    const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for (std::size_t i = 0; !stop.load(); ++i) {
      const char c = i < req.size() ? req[i] : 'a';
      if (::send(loris, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) break;
      trickled.fetch_add(1);
      std::this_thread::sleep_for(20ms);
    }
  });
  const bool idle_closed = closed_by_server(idle, 5s);
  const auto idle_took = std::chrono::steady_clock::now() - t0;
  const bool loris_closed = closed_by_server(loris, 5s);
  const auto loris_took = std::chrono::steady_clock::now() - t0;
  stop = true;
  trickle.join();
  ::close(idle);
  ::close(loris);
  std::printf(
      "http: request_timeout 300 ms: idle closed after %.0f ms, slow-loris after %.0f ms (%d bytes)\n",
      ms(idle_took), ms(loris_took), trickled.load());
  EXPECT_TRUE(idle_closed) << "an idle connection was still open after 5 s";
  EXPECT_TRUE(loris_closed) << "a slow-loris connection was still open after 5 s";
  EXPECT_GE(idle_took, 300ms) << "closed before the timeout: something else closed it";
  EXPECT_GE(trickled.load(), 5) << "the slow-loris did not trickle: the test proved nothing about it";
  EXPECT_EQ(http_get(server->port(), "/healthz").status, 200) << "the listener serves again";
}

// The probe listener serves the probes and nothing else, on a port of its own.
TEST(HttpServer, ProbeListenerServesOnlyTheProbes) {
  Fixture f;
  HttpOptions o;
  o.probe_port = 0;
  std::string error;
  auto server = HttpServer::start(o, f.stats, f.health, error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_NE(server->probe_port(), 0);
  EXPECT_NE(server->probe_port(), server->port());
  EXPECT_EQ(http_get(server->probe_port(), "/healthz").status, 200);
  const auto r = http_get(server->probe_port(), "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("not ready: listeners not up"), std::string::npos) << r.body;
  EXPECT_EQ(http_get(server->probe_port(), "/metrics").status, 404);
  EXPECT_EQ(http_get(server->port(), "/metrics").status, 200);
  EXPECT_EQ(http_get(server->port(), "/healthz").status, 200) << "the main port keeps the probes too";

  // Without probe_port there is no second listener.
  auto single = HttpServer::start(HttpOptions{}, f.stats, f.health, error);
  ASSERT_NE(single, nullptr) << error;
  EXPECT_EQ(single->probe_port(), 0);
}

TEST(HttpServer, BusyProbePortIsAClearError) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::uint16_t busy = ntohs(addr.sin_port);

  Fixture f;
  HttpOptions o;
  o.probe_port = busy;
  std::string error;
  auto server = HttpServer::start(o, f.stats, f.health, error);
  EXPECT_EQ(server, nullptr);
  EXPECT_NE(error.find("cannot listen on 127.0.0.1:" + std::to_string(busy) + " (probes)"), std::string::npos)
      << error;
  ::close(fd);
}

// The acceptance of issue 15: while the main listener is held by idle connections, slow-loris requests and a
// /metrics flood (more clients than it has threads, each replaced as soon as the server drops it), /healthz
// and /readyz on the probe listener answer, each within 1 s (a bound from the issue, generous enough for a
// loaded host; speed is measured elsewhere).
TEST(HttpServer, ProbesAnswerWithinASecondWhileMetricsIsFloodedAndSlowLorised) {
  Fixture f;
  f.health.set_listeners_up(true);
  f.health.set_port_active(true);
  f.core0.add(Stat::kPolls);
  f.core1.add(Stat::kPolls);
  HttpOptions o;  // the daemon's defaults: 4 threads, 1 s request timeout
  o.probe_port = 0;
  std::string error;
  auto server = HttpServer::start(o, f.stats, f.health, error);
  ASSERT_NE(server, nullptr) << error;

  std::vector<Timed> probes, shared;
  {
    Attack attack(server->port(), 64, 16, 4);
    // Long enough for every held connection to be dropped by the timeout and replaced at least twice.
    const auto until = std::chrono::steady_clock::now() + 3500ms;
    while (std::chrono::steady_clock::now() < until) {
      probes.push_back(timed_get(server->probe_port(), "/healthz"));
      probes.push_back(timed_get(server->probe_port(), "/readyz"));
      std::this_thread::sleep_for(50ms);
    }
    // For the record only: the main port's probe waits behind the attackers (not asserted: how long is
    // the scheduler's business).
    shared.push_back(timed_get(server->port(), "/healthz"));
    std::printf(
        "http: attack on the main port: %llu connections opened, %llu dropped by the server, "
        "%llu scrapes answered\n",
        attack.connections(), attack.closed_by_server(), attack.scrapes());
    EXPECT_GE(attack.connections(), 80u) << "the attack never held the listener";
    // 4 threads each drop a held connection after 1 s: about 4 a second, so a probe queued behind 80 of
    // them on the main port would wait about 20 s. That is why the probes have a listener of their own.
    EXPECT_GE(attack.closed_by_server(), 8u) << "held connections were not dropped by the request timeout";
  }
  std::chrono::steady_clock::duration worst{};
  double sum = 0;
  for (const Timed& t : probes) {
    worst = std::max(worst, t.took);
    sum += ms(t.took);
  }
  std::printf(
      "http: %zu probes on the probe listener under attack: mean %.1f ms, max %.1f ms; "
      "/healthz on the attacked main port: %d after %.0f ms\n",
      probes.size(), sum / static_cast<double>(probes.size()), ms(worst), shared[0].r.status,
      ms(shared[0].took));
  ASSERT_GE(probes.size(), 20u);
  for (std::size_t i = 0; i < probes.size(); ++i) {
    EXPECT_EQ(probes[i].r.status, 200)
        << (i % 2 == 0 ? "/healthz " : "/readyz ") << i << ": " << probes[i].r.body;
    EXPECT_LT(probes[i].took, 1s) << (i % 2 == 0 ? "/healthz " : "/readyz ") << i << " took "
                                  << ms(probes[i].took) << " ms";
  }
}

}  // namespace
}  // namespace rdmagate::telemetry

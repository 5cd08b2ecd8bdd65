#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "exposition_util.hpp"
#include "telemetry/http_server.hpp"

namespace rdmagate::telemetry {
namespace {

using namespace std::chrono_literals;

struct Response {
  int status = 0;
  std::string body;
};

// Tiny HTTP/1.0 client: enough for GET against 127.0.0.1.
Response http_get(std::uint16_t port, const std::string& path) {
  Response r;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return r;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return r;
  }
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
}

TEST(HttpServer, ServesMetricsHealthzReadyz) {
  Fixture f;
  std::string error;
  auto server = HttpServer::start(HttpOptions{"127.0.0.1", 0, 2}, f.stats, f.health, error);
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
  EXPECT_NO_THROW(server = HttpServer::start(HttpOptions{"127.0.0.1", busy, 1}, f.stats, f.health, error));
  EXPECT_EQ(server, nullptr);
  EXPECT_NE(error.find("cannot listen on 127.0.0.1:" + std::to_string(busy)), std::string::npos) << error;
  ::close(fd);
}

TEST(HttpServer, BadAddressIsAClearError) {
  Fixture f;
  std::string error;
  auto server = HttpServer::start(HttpOptions{"not-an-address", 0, 1}, f.stats, f.health, error);
  EXPECT_EQ(server, nullptr);
  EXPECT_NE(error.find("cannot listen on not-an-address:0"), std::string::npos) << error;
}

}  // namespace
}  // namespace rdmagate::telemetry

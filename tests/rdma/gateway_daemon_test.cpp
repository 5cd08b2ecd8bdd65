// The rdmagate daemon as a process (rxe guest): started from a YAML file plus --set, watched through its
// telemetry (/readyz, /healthz, /metrics over a plain socket), its sd_notify messages (a NOTIFY_SOCKET this
// test binds) and its structured log; loaded by an echo client (engine_peer) and, when the client library is
// built, an object client (PUT / GET / DELETE, inline and chunked); reloaded with SIGHUP (a broken file
// among the reloads; a narrowed security.allowed_clients closes the established client within a second,
// logged and counted, issue 14); stopped with SIGTERM under load. Its gateway-state and process metrics are
// checked against /readyz, the device port, the log, the reloads and the clock. With WATCHDOG_USEC set, its
// watchdog pings stop while ptrace holds its data-plane core's thread and resume after. The device backend
// `auto` picks is checked in the log and on /metrics, and an explicit `dataplane.backend: mlx5dv` on a device
// that is not an mlx5 NIC (rxe) must stop the daemon at start.
//
// The parent never initialises EAL. It re-executes itself as the daemon ("gateway_daemon_test daemon
// --config ...": daemon/gateway_main.cpp linked in), as the echo client ("... peer client ...":
// engine_peer.cpp) and as the object client ("... objects ..."), so the manifest's one binary and its library
// closure are all the guest needs. RDMAGATE_DAEMON_BIN=<path> runs that binary as the daemon instead (e.g.
// build/daemon/rdmagate).
//
// Lcores (2 vCPUs): the daemon's control thread on CPU 0 and its core on CPU 1; each client puts its control
// thread on CPU 1 and its core on CPU 0. Every poller yields when idle.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "control/rdma_device.hpp"
#include "dataplane/backend/mlx5_datapath.hpp"
#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tests/rdma/status_file.hpp"

#ifdef RDMAGATE_DAEMON_TEST_CLIENT
#include "client/client.hpp"
#include "tests/rdma/client_process.hpp"
#endif

extern char** environ;

int rdmagate_main(int argc, char** argv);
int engine_peer_main(int argc, char** argv);

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using rdmagate::testfix::num;
using rdmagate::testfix::read_status;

std::string g_self;
std::string g_device;        // the device the probe found (the daemon's device.name auto picks the same one)
std::string g_auto_backend;  // what dataplane.backend auto must pick on it: mlx5dv on an mlx5 NIC, else verbs
std::string g_link_layer;    // port 1's link layer as rdmagate_port_info spells it (rxe: ethernet)
int g_rdma_port = 7600;
int g_http_port = 19464;

using rdmagate::testfix::rxe_addr;

using rdmagate::testfix::proc::Child;
using rdmagate::testfix::proc::HttpReply;
using rdmagate::testfix::proc::metric;
using rdmagate::testfix::proc::read_file;
using rdmagate::testfix::proc::spawn;
using rdmagate::testfix::proc::wait_for;
using rdmagate::testfix::proc::write_file;

HttpReply http_get(const std::string& path) {
  return rdmagate::testfix::proc::http_get(g_http_port, path);
}

// ---- sd_notify ------------------------------------------------------------------------------------------

class NotifySocket {
 public:
  NotifySocket() {
    path_ = "/tmp/gwd_notify_" + std::to_string(getpid()) + ".sock";
    unlink(path_.c_str());
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path_.c_str());
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }
  // Waits for a datagram containing `what` (a line such as "READY=1"); every datagram read is kept.
  bool wait(const std::string& what, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      for (std::size_t i = seen_; i < msgs_.size(); ++i) {
        if (has_line(msgs_[i], what)) {
          seen_ = i + 1;
          return true;
        }
      }
      seen_ = msgs_.size();
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) msgs_.emplace_back(buf, static_cast<std::size_t>(n));
    }
  }
  // Takes in every datagram already queued without matching any: the next wait sees only later ones.
  void skip_queued() {
    char buf[4096];
    for (ssize_t n; (n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT)) > 0;) {
      msgs_.emplace_back(buf, static_cast<std::size_t>(n));
    }
    seen_ = msgs_.size();
  }
  const std::vector<std::string>& messages() const { return msgs_; }

 private:
  static bool has_line(const std::string& msg, const std::string& line) {
    std::istringstream in(msg);
    std::string l;
    while (std::getline(in, l)) {
      if (l == line || l.rfind(line, 0) == 0) return true;
    }
    return false;
  }
  std::string path_;
  int fd_ = -1;
  bool ok_ = false;
  std::vector<std::string> msgs_;
  std::size_t seen_ = 0;  // messages already matched or skipped by the previous wait
};

// Wall-clock seconds, as the daemon stamps its config loads and as process_start_time_seconds counts.
double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The value of `field` on the first log line starting with `msg` (e.g. "msg=store "); empty if none.
std::string log_field(const std::string& log, const std::string& msg, const std::string& field) {
  const auto at = log.find(msg);
  if (at == std::string::npos) return "";
  const std::string line = log.substr(at, log.find('\n', at) - at);
  const auto f = line.find(" " + field + "=");
  if (f == std::string::npos) return "";
  const auto v = f + field.size() + 2;
  return line.substr(v, line.find(' ', v) - v);
}

std::string config_text(const std::string& level, const std::string& allowed, std::uint32_t queue_depth) {
  std::ostringstream y;
  y << "# gateway_daemon_test\n"
       "eal:\n  main_lcore: 0\n"
       "listen:\n  addresses: [\""
    << rxe_addr() << "\"]\n  port: " << g_rdma_port
    << "\n"
       "dataplane:\n  cores: [1]\n  idle_policy: busy\n  max_connections_per_core: 8\n  queue_depth: "
    << queue_depth
    << "\n"
       "protocol:\n  drain_timeout_ms: 5000\n"
       "store:\n  capacity_mib: 32\n"
       "telemetry:\n  bind_address: \"127.0.0.1\"\n  port: "
    << g_http_port
    << "\n"
       "security:\n  authentication: \"off\"\n  allowed_clients: "
    << allowed
    << "\n"
       "logging:\n  level: "
    << level << "\n";
  return y.str();
}

// A backend named by hand that cannot drive the device is a startup error before EAL, telemetry or any
// listener, with the startup-failure exit code (1: the file is valid), and the message says what the backend
// needs and what would run.
TEST(GatewayDaemon, Mlx5dvOnANonMlx5DeviceFailsAtStart) {
  if (g_auto_backend == "mlx5dv") GTEST_SKIP() << g_device << " is an mlx5 NIC: mlx5dv runs on it";
  const std::string tag = std::to_string(getpid());
  const std::string yaml = "/tmp/gwd_mlx5_" + tag + ".yaml";
  const std::string log = "/tmp/gwd_mlx5_" + tag + ".log";
  std::remove(log.c_str());
  write_file(yaml, config_text("info", "[\"198.18.0.0/15\"]", 64));
  Child daemon;
  ASSERT_TRUE(spawn(&daemon, {g_self, "daemon", "--config", yaml, "--set", "dataplane.backend=mlx5dv"}, log));
  const int rc = daemon.wait_exit(60s);
  const std::string out = read_file(log);
  EXPECT_EQ(rc, 1) << "the exit code of a startup failure (the file itself is valid); log:\n" << out;
  const std::string want = "dataplane.backend mlx5dv cannot drive device " + g_device +
                           ": mlx5dv needs an mlx5 NIC (ConnectX or BlueField";
  const auto line_at = out.find("msg=\"startup failed\"");
  ASSERT_NE(line_at, std::string::npos) << out;
  const std::string line = out.substr(line_at, out.find('\n', line_at) - line_at);
  EXPECT_NE(line.find(want), std::string::npos) << line;
  EXPECT_NE(line.find("set dataplane.backend to auto or verbs"), std::string::npos) << line;
  EXPECT_EQ(out.find("msg=\"eal up\""), std::string::npos) << "EAL started before the backend check:\n"
                                                           << out;
  EXPECT_EQ(out.find("msg=listening"), std::string::npos) << out;
  EXPECT_EQ(http_get("/readyz").status, 0) << "telemetry came up";
  std::printf("gateway_daemon: dataplane.backend=mlx5dv on %s: exit %d, %s\n", g_device.c_str(), rc,
              line.c_str());
  std::remove(yaml.c_str());
}

TEST(GatewayDaemon, StartLoadMetricsReloadAndSigtermDrain) {
  const std::string tag = std::to_string(getpid());
  const std::string yaml = "/tmp/gwd_" + tag + ".yaml";
  const std::string log = "/tmp/gwd_" + tag + ".log";
  const std::string peer_log = "/tmp/gwd_peer_" + tag + ".log";
  const std::string status1 = "/tmp/gwd_c1_" + tag, status2 = "/tmp/gwd_c2_" + tag;
  std::remove(log.c_str());
  write_file(yaml, config_text("info", "[\"198.18.0.0/15\", \"127.0.0.0/8\"]", 64));

  NotifySocket notify;
  ASSERT_TRUE(notify.ok()) << "cannot bind " << notify.path() << ": " << std::strerror(errno);

  // Before the daemon runs nothing answers on the telemetry port.
  EXPECT_EQ(http_get("/readyz").status, 0) << "something already listens on port " << g_http_port;

  Child daemon;
  const char* bin = std::getenv("RDMAGATE_DAEMON_BIN");
  std::vector<std::string> dargs = bin != nullptr && *bin != '\0'
                                       ? std::vector<std::string>{bin}
                                       : std::vector<std::string>{g_self, "daemon"};
  for (const char* a : {"--config", yaml.c_str(), "--set", "dataplane.idle_policy=yield"})
    dargs.emplace_back(a);
  const auto t_start = Clock::now();
  const double wall_spawn = unix_now();
  ASSERT_TRUE(spawn(&daemon, dargs, log, {"NOTIFY_SOCKET=" + notify.path()}));

  // While it starts, /readyz is unreachable or 503 with a reason, never 200 before READY=1.
  std::vector<std::string> early;
  bool ready = false;
  while (!ready && Clock::now() - t_start < 90s && daemon.running()) {
    const HttpReply r = http_get("/readyz");
    // The daemon marks itself ready only after sending READY=1: a 200 here means the datagram is queued.
    ready = notify.wait("READY=1", 100ms);
    if (!ready) {
      EXPECT_NE(r.status, 200) << "ready before READY=1";
      const std::string seen = std::to_string(r.status) + " " + r.body;
      if (r.status != 0 && (early.empty() || early.back() != seen)) early.push_back(seen);
    }
  }
  ASSERT_TRUE(ready) << "no READY=1 within 90 s; log:\n" << read_file(log);
  const double start_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  for (const std::string& e : early) std::printf("gateway_daemon: /readyz during startup: %s", e.c_str());
  const HttpReply readyz = http_get("/readyz");
  EXPECT_EQ(readyz.status, 200) << readyz.body;
  const HttpReply healthz = http_get("/healthz");
  EXPECT_EQ(healthz.status, 200) << healthz.body;
  std::printf("gateway_daemon: READY=1 after %.1f s; /readyz %d %s", start_s, readyz.status,
              readyz.body.c_str());
  const std::string started = read_file(log);
  EXPECT_NE(started.find("msg=listening addr=" + rxe_addr() + " port=" + std::to_string(g_rdma_port)),
            std::string::npos)
      << started;
  EXPECT_NE(started.find("idle_policy=yield"), std::string::npos) << "--set did not apply:\n" << started;

  const std::string m0 = http_get("/metrics").body;
  ASSERT_GT(metric(m0, "rdmagate_poller_polls_total"), 0) << m0.substr(0, 2000);
  // The config leaves dataplane.backend at auto: on rxe that is verbs, logged and exported.
  EXPECT_EQ(
      metric(m0, "rdmagate_dataplane_backend_info", {{"backend", g_auto_backend}, {"configured", "auto"}}), 1)
      << m0.substr(0, 2000);
  EXPECT_NE(started.find("msg=\"dataplane backend\" backend=" + g_auto_backend + " configured=auto"),
            std::string::npos)
      << started;
  std::printf("gateway_daemon: dataplane.backend auto on %s picked %s\n", g_device.c_str(),
              g_auto_backend.c_str());
  EXPECT_EQ(metric(m0, "rdmagate_connection_accepts_total"), 0);
  EXPECT_EQ(metric(m0, "rdmagate_store_capacity_bytes"), 32.0 * 1024 * 1024);

  // Gateway state (docs/metrics.md): rdmagate_ready is the /readyz check run at scrape, so both say ready.
  const double wall_m0 = unix_now();
  const HttpReply readyz_m0 = http_get("/readyz");
  EXPECT_EQ(metric(m0, "rdmagate_ready"), 1) << m0.substr(0, 2000);
  EXPECT_EQ(readyz_m0.status, 200) << readyz_m0.body;
  // One port series: the port the daemon serves (device.port defaults to 1), as ibv_query_port reports it.
  EXPECT_EQ(metric(m0, "rdmagate_port_info",
                   {{"device", g_device},
                    {"port", "1"},
                    {"state", "active"},
                    {"link_layer", g_link_layer},
                    {"backend", g_auto_backend}}),
            1)
      << m0.substr(0, 4000);
  EXPECT_EQ(metric(m0, "rdmagate_port_info"), 1) << "more than one port series";
  EXPECT_EQ(metric(m0, "rdmagate_port_active", {{"device", g_device}, {"port", "1"}}), 1);
  // The start counts as a successful load, stamped with the wall clock between the spawn and this scrape.
  const double load_t0 = metric(m0, "rdmagate_config_last_reload_success_timestamp_seconds");
  EXPECT_EQ(metric(m0, "rdmagate_config_last_reload_successful"), 1);
  EXPECT_GE(load_t0, wall_spawn);
  EXPECT_LE(load_t0, wall_m0);
  // The store's arena and the core's buffer region are registered.
  const double arena = std::strtod(log_field(started, "msg=store ", "arena_bytes").c_str(), nullptr);
  const double registered = metric(m0, "rdmagate_memory_registered_bytes");
  EXPECT_GT(arena, 0) << "no arena_bytes on the store line:\n" << started;
  EXPECT_GT(registered, arena) << "the arena plus the core's buffers";
  const bool no_hugepages_logged = started.find("running without hugepages") != std::string::npos;
  EXPECT_EQ(metric(m0, "rdmagate_hugepages_fallback"), no_hugepages_logged ? 1 : 0) << started;
  // The standard process metrics, of this daemon: started after the spawn (the kernel's boot time is whole
  // seconds, so the start may read up to 1 s early), within a minute of now.
  const double proc_start = metric(m0, "process_start_time_seconds");
  const double cpu = metric(m0, "process_cpu_seconds_total");
  const double rss = metric(m0, "process_resident_memory_bytes");
  const double vsize = metric(m0, "process_virtual_memory_bytes");
  const double fds = metric(m0, "process_open_fds");
  const double max_fds = metric(m0, "process_max_fds");
  EXPECT_GE(proc_start, wall_spawn - 2) << m0;
  EXPECT_LT(std::abs(wall_m0 - proc_start), 60) << m0;
  EXPECT_GT(cpu, 0) << "EAL init and a polling core take CPU time";
  EXPECT_GT(rss, 0);
  EXPECT_GE(vsize, rss);
  EXPECT_GT(fds, 0);
  EXPECT_GT(max_fds, 0);
  EXPECT_LE(fds, max_fds);
  const double pinned = metric(m0, "rdmagate_memory_pinned_bytes");
  std::printf(
      "gateway_daemon: gateway state: rdmagate_ready %.0f with /readyz %d; rdmagate_port_info{device=\"%s\","
      "port=\"1\",state=\"active\",link_layer=\"%s\",backend=\"%s\"} %.0f, port_active %.0f; "
      "reload_successful %.0f at %.3f (spawned %.3f); registered_bytes %.0f (arena_bytes %.0f), pinned_bytes "
      "%.0f; hugepages_fallback %.0f (\"running without hugepages\" %s); process_start_time_seconds %.2f "
      "(%.1f s before the scrape), cpu_seconds %.2f, resident %.0f, virtual %.0f, open_fds %.0f of max "
      "%.0f\n",
      metric(m0, "rdmagate_ready"), readyz_m0.status, g_device.c_str(), g_link_layer.c_str(),
      g_auto_backend.c_str(), metric(m0, "rdmagate_port_info"),
      metric(m0, "rdmagate_port_active", {{"device", g_device}, {"port", "1"}}),
      metric(m0, "rdmagate_config_last_reload_successful"), load_t0, wall_spawn, registered, arena, pinned,
      metric(m0, "rdmagate_hugepages_fallback"), no_hugepages_logged ? "logged" : "not logged", proc_start,
      wall_m0 - proc_start, cpu, rss, vsize, fds, max_fds);

  // Echo load: engine_peer's verifying client (ObjectService answers opcode 1 = ECHO).
  Child c1;
  ASSERT_TRUE(spawn(
      &c1,
      {g_self, "peer", "client", "--addr", rxe_addr(), "--port", std::to_string(g_rdma_port), "--lcores",
       "0@1,1@0", "--window", "8", "--status", status1, "--backoff-min-ms", "200", "--backoff-max-ms", "400"},
      peer_log));
  ASSERT_TRUE(wait_for(
      [&] {
        const auto v = num(read_status(status1), "rx");
        return v != UINT64_MAX && v > 2000;
      },
      60s))
      << "no echo traffic; daemon log:\n"
      << read_file(log) << "\nclient log:\n"
      << read_file(peer_log);

#ifdef RDMAGATE_DAEMON_TEST_CLIENT
  // Object load: PUT / GET / DELETE, inline (100 B) and chunked (64 KiB: RDMA READ / WRITE).
  Child objs;
  const std::string obj_status = "/tmp/gwd_obj_" + tag;
  ASSERT_TRUE(
      spawn(&objs, {g_self, "objects", rxe_addr(), std::to_string(g_rdma_port), obj_status}, peer_log));
  EXPECT_EQ(objs.wait_exit(120s), 0) << "object client failed:\n" << read_file(peer_log);
  const auto ost = read_status(obj_status);
  std::printf("gateway_daemon: object client: %s", read_file(obj_status).c_str());
#endif

  // Counters the load implies. The stats reach /metrics within ~100 ms (core) and ~100 ms (control).
  std::this_thread::sleep_for(400ms);
  const std::uint64_t client_rx = num(read_status(status1), "rx");
  const std::string m1 = http_get("/metrics").body;
  const double req_rx =
      metric(m1, "rdmagate_transport_messages_total", {{"type", "inline_request"}, {"direction", "rx"}});
  const double resp_tx =
      metric(m1, "rdmagate_transport_messages_total", {{"type", "inline_response"}, {"direction", "tx"}});
  const double req_bytes =
      metric(m1, "rdmagate_transport_message_bytes_total", {{"type", "inline_request"}, {"direction", "rx"}});
  const double established = metric(m1, "rdmagate_connections", {{"state", "established"}});
  const double accepts = metric(m1, "rdmagate_connection_accepts_total");
  std::printf(
      "gateway_daemon: echo client rx %llu; gateway inline_request rx %.0f (%.0f bytes), inline_response "
      "tx %.0f, accepts %.0f, established %.0f\n",
      static_cast<unsigned long long>(client_rx), req_rx, req_bytes, resp_tx, accepts, established);
  EXPECT_GE(req_rx, static_cast<double>(client_rx))
      << "every echo the client got was a request the gateway took";
  EXPECT_GE(resp_tx, static_cast<double>(client_rx));
  EXPECT_GT(req_bytes, req_rx * 16) << "a request carries at least its header";
  EXPECT_GE(accepts, 1);
  EXPECT_EQ(established, 1) << "the echo client's connection (the object client's closed)";
#ifdef RDMAGATE_DAEMON_TEST_CLIENT
  EXPECT_GE(accepts, 2) << "echo client and object client";
  EXPECT_EQ(metric(m1, "rdmagate_store_operations_total", {{"op", "put"}, {"status", "ok"}}),
            static_cast<double>(num(ost, "puts")));
  EXPECT_EQ(metric(m1, "rdmagate_store_operations_total", {{"op", "get"}, {"status", "ok"}}),
            static_cast<double>(num(ost, "gets")));
  EXPECT_EQ(metric(m1, "rdmagate_store_operations_total", {{"op", "delete"}, {"status", "ok"}}),
            static_cast<double>(num(ost, "dels")));
  EXPECT_EQ(metric(m1, "rdmagate_store_objects"), static_cast<double>(num(ost, "objects_left")));
  EXPECT_GE(metric(m1, "rdmagate_transport_read_chunks_total"),
            static_cast<double>(num(ost, "chunked_puts")));
  EXPECT_GE(metric(m1, "rdmagate_transport_write_chunks_total"),
            static_cast<double>(num(ost, "chunked_gets")));
  EXPECT_GT(num(ost, "chunked_puts"), 0u);
  EXPECT_GT(num(ost, "chunked_gets"), 0u);
#endif

  // SIGHUP 1: logging.level info -> debug (live), queue_depth 64 -> 128 (restart only: ignored, logged).
  write_file(yaml, config_text("debug", "[\"198.18.0.0/15\", \"127.0.0.0/8\"]", 128));
  kill(daemon.pid, SIGHUP);
  EXPECT_TRUE(notify.wait("RELOADING=1", 20s)) << "no RELOADING=1";
  EXPECT_TRUE(notify.wait("READY=1", 20s)) << "no READY=1 after the reload";
  EXPECT_TRUE(wait_for([&] { return read_file(log).find("msg=reloaded") != std::string::npos; }, 10s));
  const std::string after1 = read_file(log);
  EXPECT_NE(after1.find("msg=\"config change applied\" key=logging.level before=info after=debug"),
            std::string::npos)
      << after1;
  EXPECT_NE(after1.find("msg=\"config change ignored: needs a restart\" key=dataplane.queue_depth running=64 "
                        "file=128"),
            std::string::npos)
      << after1;
  // A reload is a load: stamped later than the start (the stamp has sub-second resolution).
  const std::string m_reload1 = http_get("/metrics").body;
  const double load_t1 = metric(m_reload1, "rdmagate_config_last_reload_success_timestamp_seconds");
  EXPECT_EQ(metric(m_reload1, "rdmagate_config_last_reload_successful"), 1);
  EXPECT_GT(load_t1, load_t0);

  // A SIGHUP with a broken file (an unclosed flow sequence) is rejected: the running configuration stays,
  // the reload metric says so, the last success time stays that of the last good load.
  write_file(yaml, config_text("debug", "[\"10.0.0.0/8\"", 128));
  kill(daemon.pid, SIGHUP);
  EXPECT_TRUE(notify.wait("RELOADING=1", 20s)) << "no RELOADING=1 for the broken file";
  EXPECT_TRUE(notify.wait("READY=1", 20s)) << "no READY=1 after the rejected reload";
  EXPECT_TRUE(wait_for(
      [&] {
        return read_file(log).find("msg=\"reload failed: keeping the running configuration\"") !=
               std::string::npos;
      },
      10s))
      << read_file(log);
  const std::string after_bad = read_file(log);
  const std::string m_bad = http_get("/metrics").body;
  EXPECT_EQ(metric(m_bad, "rdmagate_config_last_reload_successful"), 0);
  EXPECT_EQ(metric(m_bad, "rdmagate_config_last_reload_success_timestamp_seconds"), load_t1);
  const HttpReply readyz_bad = http_get("/readyz");
  EXPECT_EQ(readyz_bad.status, 200) << "a rejected reload leaves the gateway serving: " << readyz_bad.body;
  const auto bad_at = after_bad.find("msg=\"reload: config error\"");
  const std::string bad_line = bad_at == std::string::npos
                                   ? std::string("(no \"reload: config error\" line)")
                                   : after_bad.substr(bad_at, after_bad.find('\n', bad_at) - bad_at);
  EXPECT_NE(bad_at, std::string::npos) << after_bad;

  // SIGHUP 2: the allow list no longer admits the fabric: the established echo client is closed in the
  // reload's turn (revoked, logged, counted), and a new client is rejected "not allowed".
  const double revoked0 = metric(http_get("/metrics").body, "rdmagate_connections_revoked_total",
                                 {{"reason", "allowed_clients"}});
  EXPECT_EQ(revoked0, 0);
  write_file(yaml, config_text("debug", "[\"10.0.0.0/8\"]", 128));
  const auto t_revoke = Clock::now();
  kill(daemon.pid, SIGHUP);
  EXPECT_TRUE(notify.wait("READY=1", 20s)) << "no READY=1 after the second reload";
  // The daemon stamps the load before READY=1: the good file makes the last reload a success again.
  const std::string m_reload2 = http_get("/metrics").body;
  const double load_t2 = metric(m_reload2, "rdmagate_config_last_reload_success_timestamp_seconds");
  EXPECT_EQ(metric(m_reload2, "rdmagate_config_last_reload_successful"), 1);
  EXPECT_GT(load_t2, load_t1);
  std::printf(
      "gateway_daemon: reloads: start ok at %.3f; good SIGHUP ok at %.3f; broken SIGHUP successful %.0f, "
      "timestamp %.3f (%s); good SIGHUP successful %.0f at %.3f\n",
      load_t0, load_t1, metric(m_bad, "rdmagate_config_last_reload_successful"),
      metric(m_bad, "rdmagate_config_last_reload_success_timestamp_seconds"), bad_line.c_str(),
      metric(m_reload2, "rdmagate_config_last_reload_successful"), load_t2);
  // Revocation within a second of the SIGHUP: the counter (published every 100 ms) and the client, whose
  // status reports the closed connection's requests once it saw the close.
  EXPECT_TRUE(wait_for(
      [&] {
        return metric(http_get("/metrics").body, "rdmagate_connections_revoked_total",
                      {{"reason", "allowed_clients"}}) == 1;
      },
      1s))
      << "the established echo client was not revoked within 1 s; log:\n"
      << read_file(log);
  const double revoke_s = std::chrono::duration<double>(Clock::now() - t_revoke).count();
  EXPECT_TRUE(wait_for(
      [&] {
        const auto v = num(read_status(status1), "sent");
        return v != 0 && v != UINT64_MAX;
      },
      10s))
      << "the echo client never saw its connection close";
  const std::string after_revoke = read_file(log);
  EXPECT_NE(after_revoke.find("revoked " + rxe_addr()), std::string::npos) << after_revoke;
  std::printf(
      "gateway_daemon: allowed_clients narrowed: the established client revoked and counted within %.2f s\n",
      revoke_s);
  // The revoked client gives up at its first not_allowed reject (final). It goes first, so that the reject
  // counted below is the new client's.
  kill(c1.pid, SIGTERM);
  EXPECT_EQ(c1.wait_exit(30s), 0) << "the revoked echo client; its log:\n" << read_file(peer_log);
  const double not_allowed0 =
      metric(http_get("/metrics").body, "rdmagate_connection_rejects_total", {{"reason", "not_allowed"}});
  Child c2;
  ASSERT_TRUE(spawn(
      &c2,
      {g_self, "peer", "client", "--addr", rxe_addr(), "--port", std::to_string(g_rdma_port), "--lcores",
       "0@1,1@0", "--status", status2, "--backoff-min-ms", "200", "--backoff-max-ms", "400"},
      peer_log));
  EXPECT_TRUE(wait_for(
      [&] {
        return metric(http_get("/metrics").body, "rdmagate_connection_rejects_total",
                      {{"reason", "not_allowed"}}) >= not_allowed0 + 1;
      },
      30s))
      << "no not_allowed reject; daemon log:\n"
      << read_file(log);
  kill(c2.pid, SIGTERM);
  EXPECT_EQ(c2.wait_exit(30s), 0);
  // A new client comes in once the list admits the fabric again.
  write_file(yaml, config_text("debug", "[\"198.18.0.0/15\", \"127.0.0.0/8\"]", 128));
  kill(daemon.pid, SIGHUP);
  EXPECT_TRUE(notify.wait("READY=1", 20s)) << "no READY=1 after the third reload";
  const std::string status3 = "/tmp/gwd_c3_" + tag;
  Child c3;
  ASSERT_TRUE(spawn(
      &c3,
      {g_self, "peer", "client", "--addr", rxe_addr(), "--port", std::to_string(g_rdma_port), "--lcores",
       "0@1,1@0", "--window", "8", "--status", status3, "--backoff-min-ms", "200", "--backoff-max-ms", "400"},
      peer_log));
  EXPECT_TRUE(wait_for(
      [&] {
        const auto v = num(read_status(status3), "rx");
        return v != UINT64_MAX && v > 500;
      },
      30s))
      << "no echo traffic after the allow list admitted the fabric again";

  // SIGTERM under load: STOPPING=1, drain, exit 0; the client's requests all answered (echoed or refused).
  kill(daemon.pid, SIGTERM);
  const auto t_stop = Clock::now();
  EXPECT_TRUE(notify.wait("STOPPING=1", 20s)) << "no STOPPING=1";
  // The daemon takes its listeners down before it logs "stopping": from then on, while telemetry still
  // answers (the drain may end first), /readyz and rdmagate_ready both say not ready.
  EXPECT_TRUE(wait_for([&] { return read_file(log).find("msg=stopping") != std::string::npos; }, 20s));
  const HttpReply readyz_stop = http_get("/readyz");
  const HttpReply metrics_stop = http_get("/metrics");
  const double ready_stop = metrics_stop.status == 200 ? metric(metrics_stop.body, "rdmagate_ready") : -1;
  if (readyz_stop.status != 0) {
    EXPECT_EQ(readyz_stop.status, 503) << readyz_stop.body;
  }
  if (metrics_stop.status == 200) {
    EXPECT_EQ(ready_stop, 0);
  }
  std::printf("gateway_daemon: draining: /readyz %d, rdmagate_ready %.0f (-1: telemetry already down)\n",
              readyz_stop.status, ready_stop);
  EXPECT_EQ(daemon.wait_exit(60s), 0) << read_file(log);
  const double stop_s = std::chrono::duration<double>(Clock::now() - t_stop).count();
  const std::string final_log = read_file(log);
  EXPECT_NE(final_log.find("msg=stopping signal=SIGTERM connections=1"), std::string::npos) << final_log;
  EXPECT_NE(final_log.find("msg=drained"), std::string::npos) << final_log;
  EXPECT_NE(final_log.find("level=debug"), std::string::npos) << "the debug level never took effect";
  EXPECT_TRUE(wait_for(
      [&] {
        const auto v = num(read_status(status3), "sent");
        return v != 0 && v != UINT64_MAX;
      },
      20s))
      << "the echo client never saw its connection close";
  kill(c3.pid, SIGTERM);
  EXPECT_EQ(c3.wait_exit(30s), 0);
  const auto cst = read_status(status3);
  std::printf(
      "gateway_daemon: SIGTERM under load: exit in %.2f s; client sent %llu, answered %llu (refused %llu), "
      "lost %llu, mismatches %llu\n",
      stop_s, static_cast<unsigned long long>(num(cst, "sent")),
      static_cast<unsigned long long>(num(cst, "answered")),
      static_cast<unsigned long long>(num(cst, "refused")), static_cast<unsigned long long>(num(cst, "lost")),
      static_cast<unsigned long long>(num(cst, "mismatches")));
  EXPECT_EQ(num(cst, "mismatches"), 0u);
  EXPECT_EQ(num(cst, "sent"), num(cst, "answered")) << "a request was lost in the drain";
  EXPECT_EQ(http_get("/readyz").status, 0) << "telemetry still up after exit";
  std::printf("gateway_daemon: sd_notify messages:");
  for (const std::string& m : notify.messages()) {
    std::string one = m;
    for (char& ch : one) ch = ch == '\n' ? ' ' : ch;
    std::printf(" [%s]", one.c_str());
  }
  std::printf("\n");
  std::remove(yaml.c_str());
}

// The one thread of `pid` allowed to run on `cpus` alone (Cpus_allowed_list): the data-plane core EAL pinned
// there. 0 if there is not exactly one; `*seen` lists every thread's name and CPUs for the failure message.
pid_t thread_pinned_to(pid_t pid, const std::string& cpus, std::string* seen) {
  pid_t found = 0;
  int matches = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::string comm = read_file(e.path().string() + "/comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    std::istringstream status(read_file(e.path().string() + "/status"));
    std::string line, allowed;
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) allowed = line.substr(line.find_first_not_of(" \t", 18));
    }
    *seen += " " + e.path().filename().string() + "(" + comm + ", cpus " + allowed + ")";
    if (allowed == cpus) {
      found = static_cast<pid_t>(std::stol(e.path().filename().string()));
      ++matches;
    }
  }
  return matches == 1 ? found : 0;
}

// The systemd watchdog (daemon/watchdog.hpp) with WATCHDOG_USEC as systemd sets it for WatchdogSec=: pings
// every half interval; none while the data-plane core is frozen (ptrace stops that one thread, so the control
// thread, which sends the pings, runs on), one error line naming the core, /healthz 503; pings again once the
// core runs.
TEST(GatewayDaemon, WatchdogWithheldWhileTheCoreIsFrozen) {
  const std::string tag = std::to_string(getpid());
  const std::string yaml = "/tmp/gwd_wd_" + tag + ".yaml";
  const std::string log = "/tmp/gwd_wd_" + tag + ".log";
  std::remove(log.c_str());
  write_file(yaml, config_text("info", "[\"198.18.0.0/15\"]", 64));
  NotifySocket notify;
  ASSERT_TRUE(notify.ok()) << "cannot bind " << notify.path() << ": " << std::strerror(errno);
  Child daemon;
  ASSERT_TRUE(spawn(&daemon, {g_self, "daemon", "--config", yaml, "--set", "telemetry.core_stall_ms=300"},
                    log, {"NOTIFY_SOCKET=" + notify.path(), "WATCHDOG_USEC=1000000"}));
  ASSERT_TRUE(notify.wait("READY=1", 90s)) << "no READY=1; log:\n" << read_file(log);
  const auto t_ready = Clock::now();
  ASSERT_TRUE(notify.wait("WATCHDOG=1", 2s)) << "no WATCHDOG=1 after READY=1; log:\n" << read_file(log);
  ASSERT_TRUE(notify.wait("WATCHDOG=1", 2s)) << "no second WATCHDOG=1";
  const double two_pings_s = std::chrono::duration<double>(Clock::now() - t_ready).count();
  EXPECT_NE(read_file(log).find("watchdog_usec=1000000"), std::string::npos) << read_file(log);

  // The liveness check compares each core's polls with what the previous probe saw (a core seen for the first
  // time gets a full threshold), as a kubelet probing periodically drives it: a probe before the freeze, and
  // the second probe into it (the first may still see polls published after the one before) must fail.
  const HttpReply healthy = http_get("/healthz");
  EXPECT_EQ(healthy.status, 200) << healthy.body;

  // config_text puts the one data-plane core on CPU 1.
  std::string threads;
  const pid_t core = thread_pinned_to(daemon.pid, "1", &threads);
  ASSERT_GT(core, 0) << "no single thread pinned to CPU 1:" << threads;
  ASSERT_EQ(ptrace(PTRACE_SEIZE, core, nullptr, nullptr), 0) << "PTRACE_SEIZE: " << std::strerror(errno);
  ASSERT_EQ(ptrace(PTRACE_INTERRUPT, core, nullptr, nullptr), 0) << std::strerror(errno);
  int st = 0;
  ASSERT_EQ(waitpid(core, &st, __WALL), core) << std::strerror(errno);
  const auto t_frozen = Clock::now();
  const bool withheld =
      wait_for([&] { return read_file(log).find("watchdog withheld") != std::string::npos; }, 5s);
  const double withheld_s = std::chrono::duration<double>(Clock::now() - t_frozen).count();
  // Pings sent before the line was written are still queued; any later one is a ping for a frozen core.
  notify.skip_queued();
  const bool quiet = !notify.wait("WATCHDOG=1", 1500ms);
  HttpReply healthz = http_get("/healthz");
  int probes = 1;
  for (; healthz.status != 503 && probes < 3; ++probes) {
    std::this_thread::sleep_for(400ms);
    healthz = http_get("/healthz");
  }
  ASSERT_EQ(ptrace(PTRACE_DETACH, core, nullptr, nullptr), 0) << std::strerror(errno);

  const std::string frozen_log = read_file(log);
  ASSERT_TRUE(withheld) << "no \"watchdog withheld\" within 5 s of freezing thread " << core << ":\n"
                        << frozen_log;
  EXPECT_TRUE(quiet) << "WATCHDOG=1 while the core was frozen";
  EXPECT_EQ(healthz.status, 503) << healthz.body;
  EXPECT_LE(probes, 2) << "probes 400 ms apart before /healthz failed";
  const auto at = frozen_log.find("watchdog withheld");
  const std::string line = frozen_log.substr(frozen_log.rfind('\n', at) + 1,
                                             frozen_log.find('\n', at) - frozen_log.rfind('\n', at) - 1);
  for (const char* field : {"level=error", " cores=1 ", "core_stall_ms=300", "watchdog_usec=1000000"}) {
    EXPECT_NE(line.find(field), std::string::npos) << field << " missing: " << line;
  }
  EXPECT_EQ(frozen_log.find("watchdog withheld", at + 1), std::string::npos) << "logged more than once";

  EXPECT_TRUE(notify.wait("WATCHDOG=1", 3s)) << "no WATCHDOG=1 after the core resumed";
  EXPECT_TRUE(wait_for([&] { return read_file(log).find("watchdog resumed") != std::string::npos; }, 3s))
      << read_file(log);
  kill(daemon.pid, SIGTERM);
  EXPECT_EQ(daemon.wait_exit(60s), 0) << read_file(log);
  std::string reason = healthz.body;
  if (!reason.empty() && reason.back() == '\n') reason.pop_back();
  std::printf(
      "gateway_daemon: watchdog: WATCHDOG_USEC=1000000, 2 pings %.2f s after READY=1; core thread %d frozen: "
      "withheld after %.2f s, no ping for 1.5 s, /healthz %d after %d probe(s) (%s); pings again after the "
      "detach\n"
      "gateway_daemon: %s\n",
      two_pings_s, static_cast<int>(core), withheld_s, healthz.status, probes, reason.c_str(), line.c_str());
  std::remove(yaml.c_str());
}

#ifdef RDMAGATE_DAEMON_TEST_CLIENT
// "objects ADDR PORT STATUS": PUT 50 inline and 10 chunked values, GET and verify each, DELETE the chunked
// ones; writes "puts= gets= dels= objects_left= chunked_puts= chunked_gets= errors= mismatches=" to STATUS.
int objects_main(int argc, char** argv) {
  using namespace rdmagate;
  if (argc != 4) return 2;
  auto eal = testfix::proc::client_eal("objects", "0@1,1@0", 192);
  if (!eal) return 1;
  auto cl = testfix::proc::connect_client("objects", argv[1], std::atoi(argv[2]), 1);
  if (!cl) return 1;
  constexpr std::size_t kSmall = 100, kBig = 64 * 1024;
  std::uint64_t puts = 0, gets = 0, dels = 0, errors = 0, mismatches = 0;
  const auto fill = [](std::byte* p, std::size_t n, unsigned seed) {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  };
  std::vector<std::byte> small(kSmall), got(kSmall);
  std::span<std::byte> big = cl->alloc_buffer(kBig), big_got = cl->alloc_buffer(kBig);
  if (big.size() < kBig || big_got.size() < kBig) return 1;
  for (unsigned i = 0; i < 50; ++i) {
    fill(small.data(), kSmall, i);
    const std::string key = "small-" + std::to_string(i);
    errors += cl->put(key, small.data(), kSmall).status != client::Status::kOk;
    ++puts;
    const client::Result r = cl->get(key, got.data(), got.size());
    ++gets;
    errors += r.status != client::Status::kOk;
    mismatches += r.size != kSmall || got != small;
  }
  for (unsigned i = 0; i < 10; ++i) {
    fill(big.data(), kBig, i + 100);
    const std::string key = "big-" + std::to_string(i);
    errors += cl->put(key, big.data(), kBig).status != client::Status::kOk;
    ++puts;
    const client::Result r = cl->get(key, big_got.data(), big_got.size());
    ++gets;
    errors += r.status != client::Status::kOk;
    mismatches += r.size != kBig || std::memcmp(big.data(), big_got.data(), kBig) != 0;
    errors += cl->del(key).status != client::Status::kOk;
    ++dels;
  }
  const client::ClientStats st = cl->stats();
  FILE* f = std::fopen(argv[3], "w");
  if (f != nullptr) {
    std::fprintf(
        f,
        "puts=%llu gets=%llu dels=%llu objects_left=50 chunked_puts=%llu chunked_gets=%llu errors=%llu "
        "mismatches=%llu\n",
        static_cast<unsigned long long>(puts), static_cast<unsigned long long>(gets),
        static_cast<unsigned long long>(dels), static_cast<unsigned long long>(st.chunked_puts),
        static_cast<unsigned long long>(st.chunked_gets), static_cast<unsigned long long>(errors),
        static_cast<unsigned long long>(mismatches));
    std::fclose(f);
  }
  cl.reset();
  (void)eal.release();  // exits right away; EAL's cleanup is not needed for that
  return errors == 0 && mismatches == 0 ? 0 : 1;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  if (argc > 1 && std::strcmp(argv[1], "peer") == 0) return engine_peer_main(argc - 1, argv + 1);
#ifdef RDMAGATE_DAEMON_TEST_CLIENT
  if (argc > 1 && std::strcmp(argv[1], "objects") == 0) return objects_main(argc - 1, argv + 1);
#endif
  // No EAL here: the daemon and the clients (this binary, re-executed) start their own.
  return rdmagate::testfix::rdma_test_main(
      argc, argv, "gateway_daemon_test", /*eal_lcores=*/nullptr,
      [](const rdmagate::control::RdmaProbe& probe) {
        g_self = rdmagate::testfix::self_exe("gateway_daemon_test");
        if (g_self.empty()) return 1;
        g_device = probe.device;
        rdmagate::control::RdmaProbe again;
        auto dev = rdmagate::control::RdmaDevice::open(g_device, &again);
        if (!dev) {
          std::fprintf(stderr, "gateway_daemon_test: %s\n", again.message.c_str());
          return 1;
        }
        g_auto_backend = rdmagate::dataplane::Mlx5Backend::supports(dev->context()) ? "mlx5dv" : "verbs";
        const std::uint8_t ll =
            dev->ports().empty() ? std::uint8_t{IBV_LINK_LAYER_UNSPECIFIED} : dev->ports()[0].link_layer;
        g_link_layer = ll == IBV_LINK_LAYER_ETHERNET     ? "ethernet"
                       : ll == IBV_LINK_LAYER_INFINIBAND ? "infiniband"
                                                         : "unspecified";
        g_rdma_port = 7600 + static_cast<int>(getpid() % 300) * 2;
        g_http_port = 19000 + static_cast<int>(getpid() % 1000);
        return 0;
      });
}

// The rdmagate daemon with store.backend: rados, as processes in the rxe guest, against a single-node
// Ceph cluster started in the same guest (tools/ceph-cluster, BlueStore so that an OSD survives kill -9):
//   - two gateways on one pool: PUT through one, GET through the other, with overwrites and deletes: 0
//     stale reads;
//   - a gateway SIGKILLed in the middle of a verified PUT stream: after a restart every acknowledged PUT
//     reads back with exactly its bytes (acknowledged-but-lost printed, must be 0);
//   - the OSD killed (SIGKILL) and restarted under the same stream: requests answer unavailable within the
//     op timeout, /readyz 503 and /healthz 200 (the core never stalls) meanwhile, recovery after, and again
//     no acknowledged PUT lost.
// The binary re-executes itself as the daemon ("daemon ...", daemon/gateway_main.cpp linked in) and as the
// client ("client ...": the client library, one Client per gateway).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "client/client.hpp"
#include "control/rdma_device.hpp"
#include "dataplane/eal_runtime.hpp"
#include "tests/rdma/client_process.hpp"
#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tests/rdma/status_file.hpp"

int rdmagate_main(int argc, char** argv);

namespace {

using namespace std::chrono_literals;
using rdmagate::testfix::num;
using rdmagate::testfix::read_status;
using rdmagate::testfix::rxe_addr;
using rdmagate::testfix::proc::Child;
using rdmagate::testfix::proc::http_get;
using rdmagate::testfix::proc::metric;
using rdmagate::testfix::proc::read_file;
using rdmagate::testfix::proc::spawn;
using rdmagate::testfix::proc::wait_for;
using rdmagate::testfix::proc::write_file;
using Clock = std::chrono::steady_clock;

std::string g_self;
std::string g_ceph_dir;  // the cluster of this run (one per binary run: every test uses its own namespace)
int g_port_base = 7700;

constexpr std::uint32_t kOpTimeoutMs = 2000;

std::string ceph_cluster(const std::string& args) {
  return std::string("RDMAGATE_CEPH_PROBE=") + RDMAGATE_CEPH_PROBE_PATH + " " + RDMAGATE_SOURCE_DIR +
         "/tools/ceph-cluster " + args + " --dir " + g_ceph_dir;
}

struct Gateway {
  int rdma_port = 0;
  int http_port = 0;
  std::string yaml, log;
  Child proc;
};

// A gateway of the cluster's pool in namespace `ns` (one per test, so tests never see each other's objects).
bool start_gateway(Gateway* g, int index, const std::string& ns, const std::string& idle = "yield") {
  g->rdma_port = g_port_base + index * 2;
  g->http_port = g_port_base + 100 + index;
  const std::string tag = std::to_string(getpid()) + "_" + std::to_string(index);
  g->yaml = "/tmp/rgw_" + tag + ".yaml";
  if (g->log.empty()) g->log = "/tmp/rgw_" + tag + ".log";
  std::ostringstream y;
  y << "eal:\n  main_lcore: 0\n"
    << "listen:\n  addresses: [\"" << rxe_addr() << "\"]\n  port: " << g->rdma_port << "\n"
    << "dataplane:\n  cores: [1]\n  idle_policy: " << idle
    << "\n  idle_event_after_us: 100\n  max_connections_per_core: 8\n  queue_depth: 32\n"
    << "store:\n  backend: rados\n  capacity_mib: 16\n  rados:\n"
    << "    conf_file: " << g_ceph_dir << "/ceph.conf\n"
    << "    client: client.rdmagate\n    keyring: " << g_ceph_dir << "/client.rdmagate.keyring\n"
    << "    pool: rdmagate\n    namespace: " << ns << "\n"
    << "    op_timeout_ms: " << kOpTimeoutMs << "\n    notify_timeout_ms: 1000\n    cache_lease_ms: 3000\n"
    << "telemetry:\n  bind_address: \"127.0.0.1\"\n  port: " << g->http_port << "\n"
    << "security:\n  allowed_clients: [\"198.18.0.0/15\"]\n  authentication: off\nlogging:\n  level: info\n";
  write_file(g->yaml, y.str());
  if (!spawn(&g->proc, {g_self, "daemon", "--config", g->yaml}, g->log)) return false;
  const int port = g->http_port;
  return wait_for([&] { return !g->proc.running() || http_get(port, "/readyz").status == 200; }, 120s) &&
         g->proc.running();
}

// ---- the client process ---------------------------------------------------------------------------------

std::vector<std::byte> value_of(const std::string& key, std::uint64_t version, std::size_t size) {
  std::vector<std::byte> v(size);
  std::uint64_t x = std::hash<std::string>{}(key) ^ (version * 0x9e3779b97f4a7c15ull);
  for (auto& b : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<std::byte>(x >> 56);
  }
  return v;
}

std::unique_ptr<rdmagate::client::Client> connect_client(int port, unsigned lcore) {
  return rdmagate::testfix::proc::connect_client("client", rxe_addr(), port, lcore);
}

// "client coherence PORT_A PORT_B ROUNDS STATUS": writes alternate between the gateways, every write is read
// back through both; a DELETE every fifth round. Status: rounds= stale= errors=.
int coherence(rdmagate::client::Client& a, rdmagate::client::Client& b, int rounds, const char* status) {
  using rdmagate::client::Status;
  std::uint64_t stale = 0, errors = 0;
  std::vector<std::byte> got(70000);
  for (int r = 0; r < rounds; ++r) {
    const std::string key = "key-" + std::to_string(r % 7);
    auto& writer = r % 2 == 0 ? a : b;
    const auto v =
        value_of(key, static_cast<std::uint64_t>(r), r % 3 == 0 ? 20000 : 200 + static_cast<std::size_t>(r));
    errors += writer.put(key, v.data(), v.size()).status != Status::kOk;
    for (auto* reader : {&a, &b}) {
      const auto res = reader->get(key, got.data(), got.size());
      if (res.status != Status::kOk) {
        ++errors;
      } else if (res.size != v.size() || std::memcmp(got.data(), v.data(), v.size()) != 0) {
        ++stale;
      }
    }
    if (r % 5 == 4) {
      errors += writer.del(key).status != Status::kOk;
      for (auto* reader : {&a, &b})
        stale += reader->get(key, got.data(), got.size()).status != Status::kNotFound;
    }
  }
  FILE* f = std::fopen(status, "w");
  if (f == nullptr) return 1;
  std::fprintf(f, "rounds=%d stale=%llu errors=%llu\n", rounds, static_cast<unsigned long long>(stale),
               static_cast<unsigned long long>(errors));
  std::fclose(f);
  return 0;
}

// "client stream PORT ACKS SECONDS": PUTs key stream-<seq> (4 KiB or 64 KiB values of seq) one after another
// for SECONDS, until the file ACKS.stop appears, or until the gateway goes away; appends "<seq>\n" to ACKS
// after each ok (a write(2) of its own, so a SIGKILL of the gateway loses nothing this process recorded).
// Counts unavailable answers and the longest one. Status in ACKS.status: "ok= unavailable= other=
// max_unavailable_ms=".
int stream(rdmagate::client::Client& c, const char* acks, int seconds) {
  using rdmagate::client::Status;
  const int fd = ::open(acks, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return 1;
  std::uint64_t ok = 0, unavailable = 0, other = 0, max_unavail_ms = 0;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  const std::string stop = std::string(acks) + ".stop";
  for (std::uint64_t seq = 0; Clock::now() < end && ::access(stop.c_str(), F_OK) != 0; ++seq) {
    const std::string key = "stream-" + std::to_string(seq);
    const auto v = value_of(key, seq, seq % 4 == 3 ? 65536 : 4096);
    const auto t0 = Clock::now();
    const auto r = c.put(key, v.data(), v.size());
    const auto ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
    if (r.status == Status::kOk) {
      ++ok;
      const std::string line = std::to_string(seq) + "\n";
      if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 1;
    } else if (r.status == Status::kStoreUnavailable) {
      ++unavailable;
      max_unavail_ms = std::max(max_unavail_ms, ms);
    } else {
      ++other;
      if (r.status == Status::kConnectionLost || r.status == Status::kUnavailable ||
          r.status == Status::kTimeout) {
        break;  // the gateway is gone: what was acknowledged is in ACKS
      }
    }
  }
  ::close(fd);
  FILE* f = std::fopen((std::string(acks) + ".status").c_str(), "w");
  if (f == nullptr) return 1;
  std::fprintf(f, "ok=%llu unavailable=%llu other=%llu max_unavailable_ms=%llu\n",
               static_cast<unsigned long long>(ok), static_cast<unsigned long long>(unavailable),
               static_cast<unsigned long long>(other), static_cast<unsigned long long>(max_unavail_ms));
  std::fclose(f);
  return 0;
}

// "client verify PORT ACKS STATUS": GETs every acknowledged key and compares its bytes.
int verify(rdmagate::client::Client& c, const char* acks, const char* status) {
  std::ifstream in(acks);
  std::string line;
  std::uint64_t acked = 0, lost = 0, wrong = 0;
  std::vector<std::byte> got(70000);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::uint64_t seq = std::strtoull(line.c_str(), nullptr, 10);
    const std::string key = "stream-" + std::to_string(seq);
    const auto v = value_of(key, seq, seq % 4 == 3 ? 65536 : 4096);
    ++acked;
    const auto r = c.get(key, got.data(), got.size());
    if (r.status != rdmagate::client::Status::kOk) {
      ++lost;
      std::fprintf(stderr, "verify: %s: %s\n", key.c_str(), rdmagate::client::status_name(r.status));
    } else if (r.size != v.size() || std::memcmp(got.data(), v.data(), v.size()) != 0) {
      ++wrong;
    }
  }
  FILE* f = std::fopen(status, "w");
  if (f == nullptr) return 1;
  std::fprintf(f, "acked=%llu lost=%llu wrong=%llu\n", static_cast<unsigned long long>(acked),
               static_cast<unsigned long long>(lost), static_cast<unsigned long long>(wrong));
  std::fclose(f);
  return 0;
}

int client_main(int argc, char** argv) {
  if (argc < 3) return 2;
  auto eal = rdmagate::testfix::proc::client_eal("rados_client", "0@1,1@0,2@1", 256);
  if (!eal) return 1;
  const std::string mode = argv[1];
  int rc = 2;
  if (mode == "coherence" && argc == 6) {
    auto a = connect_client(std::atoi(argv[2]), 1);
    auto b = connect_client(std::atoi(argv[3]), 2);
    rc = a && b ? coherence(*a, *b, std::atoi(argv[4]), argv[5]) : 1;
  } else if (mode == "stream" && argc == 5) {
    auto c = connect_client(std::atoi(argv[2]), 1);
    rc = c ? stream(*c, argv[3], std::atoi(argv[4])) : 1;
  } else if (mode == "verify" && argc == 5) {
    auto c = connect_client(std::atoi(argv[2]), 1);
    rc = c ? verify(*c, argv[3], argv[4]) : 1;
  }
  (void)eal.release();
  std::fflush(nullptr);
  _exit(rc);
}

int run_client(const std::vector<std::string>& args, const std::string& log, std::chrono::seconds limit) {
  Child c;
  std::vector<std::string> argv{g_self, "client"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (!spawn(&c, argv, log)) return -1;
  return c.wait_exit(limit);
}

std::size_t acked_lines(const std::string& acks) {
  const std::string s = read_file(acks);
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

// ---- tests ------------------------------------------------------------------------------------------------

TEST(RadosGateway, TwoGatewaysOnOnePoolServeNoStaleRead) {
  Gateway a, b;
  ASSERT_TRUE(start_gateway(&a, 0, "coherence")) << read_file(a.log);
  // b sleeps when idle, also while its RADOS ops are in flight: their completions ring its core's bell.
  ASSERT_TRUE(start_gateway(&b, 1, "coherence", "event")) << read_file(b.log);
  const std::string status = "/tmp/rgw_coherence_" + std::to_string(getpid());
  const std::string log = status + ".log";
  ASSERT_EQ(run_client({"coherence", std::to_string(a.rdma_port), std::to_string(b.rdma_port), "60", status},
                       log, 600s),
            0)
      << read_file(log);
  const auto st = read_status(status);
  std::printf("rados_gateway: two gateways: %s", read_file(status).c_str());
  EXPECT_EQ(num(st, "stale"), 0u);
  EXPECT_EQ(num(st, "errors"), 0u);
  // The GETs after the first of each value were cache hits: coherence came from the invalidations.
  const std::string ma = http_get(a.http_port, "/metrics").body;
  const std::string mb = http_get(b.http_port, "/metrics").body;
  EXPECT_GT(metric(ma, "rdmagate_store_cache_hits_total") + metric(mb, "rdmagate_store_cache_hits_total"), 0);
  EXPECT_GT(metric(ma, "rdmagate_store_cache_invalidations_total"), 0);
  EXPECT_EQ(
      metric(ma, "rdmagate_rados_notify_timeouts_total") + metric(mb, "rdmagate_rados_notify_timeouts_total"),
      0);
  EXPECT_GT(metric(mb, "rdmagate_poller_wakeups_total", {{"source", "storage"}}), 0)
      << "b's core slept through a RADOS op and its completion woke it";
  EXPECT_EQ(metric(ma, "rdmagate_poller_wakeups_total", {{"source", "storage"}}), 0) << "a never sleeps";
}

TEST(RadosGateway, SigkillMidStreamLosesNoAcknowledgedPut) {
  Gateway g;
  ASSERT_TRUE(start_gateway(&g, 2, "sigkill")) << read_file(g.log);
  const std::string acks = "/tmp/rgw_sigkill_" + std::to_string(getpid()) + ".acks";
  std::remove(acks.c_str());
  Child client;
  ASSERT_TRUE(
      spawn(&client, {g_self, "client", "stream", std::to_string(g.rdma_port), acks, "60"}, acks + ".log"));
  // Let the stream run, then kill the gateway mid-flight.
  ASSERT_TRUE(wait_for([&] { return acked_lines(acks) >= 40; }, 120s))
      << read_file(acks + ".log") << read_file(g.log);
  kill(g.proc.pid, SIGKILL);
  EXPECT_EQ(g.proc.wait_exit(10s), -1);  // killed
  EXPECT_EQ(client.wait_exit(60s), 0) << read_file(acks + ".log");
  // A new gateway process on the same pool (its cache is empty: every GET reads RADOS).
  Gateway again;
  again.log = g.log;
  ASSERT_TRUE(start_gateway(&again, 2, "sigkill")) << read_file(again.log);
  const std::string status = acks + ".verify";
  ASSERT_EQ(run_client({"verify", std::to_string(again.rdma_port), acks, status}, status + ".log", 600s), 0)
      << read_file(status + ".log");
  const auto st = read_status(status);
  std::printf("rados_gateway: SIGKILL mid-stream: %s", read_file(status).c_str());
  EXPECT_GE(num(st, "acked"), 40u);
  EXPECT_EQ(num(st, "lost"), 0u) << "acknowledged-but-lost PUTs";
  EXPECT_EQ(num(st, "wrong"), 0u);
}

TEST(RadosGateway, OsdKilledUnderLoadAnswersUnavailableThenRecovers) {
  Gateway g;
  ASSERT_TRUE(start_gateway(&g, 3, "osdkill")) << read_file(g.log);
  const std::string acks = "/tmp/rgw_osd_" + std::to_string(getpid()) + ".acks";
  std::remove(acks.c_str());
  std::remove((acks + ".stop").c_str());
  Child client;
  ASSERT_TRUE(
      spawn(&client, {g_self, "client", "stream", std::to_string(g.rdma_port), acks, "90"}, acks + ".log"));
  ASSERT_TRUE(wait_for([&] { return acked_lines(acks) >= 20; }, 120s)) << read_file(acks + ".log");
  ASSERT_EQ(std::system(ceph_cluster("kill-osd").c_str()), 0);
  // Not ready while RADOS takes no writes; live all along (the core keeps polling).
  const bool not_ready = wait_for([&] { return http_get(g.http_port, "/readyz").status == 503; }, 60s);
  EXPECT_TRUE(not_ready) << read_file(g.log);
  const std::string readyz = http_get(g.http_port, "/readyz").body;
  EXPECT_EQ(http_get(g.http_port, "/healthz").status, 200);
  std::this_thread::sleep_for(3s);  // several op timeouts' worth of unavailable answers
  EXPECT_EQ(http_get(g.http_port, "/healthz").status, 200);
  ASSERT_EQ(std::system(ceph_cluster("start-osd --timeout 240").c_str()), 0);
  EXPECT_TRUE(wait_for([&] { return http_get(g.http_port, "/readyz").status == 200; }, 120s))
      << read_file(g.log);
  const std::size_t before = acked_lines(acks);
  EXPECT_TRUE(wait_for([&] { return acked_lines(acks) >= before + 20; }, 120s)) << "PUTs did not resume";
  write_file(acks + ".stop", "");
  EXPECT_EQ(client.wait_exit(60s), 0) << read_file(acks + ".log");
  const auto stream_st = read_status(acks + ".status");
  std::printf("rados_gateway: OSD killed: readyz \"%s\"; stream %s", readyz.c_str(),
              read_file(acks + ".status").c_str());
  // Every unavailable answer came within the op timeout and its retries' slack, never a hang.
  EXPECT_LT(num(stream_st, "max_unavailable_ms"), 3u * kOpTimeoutMs + 2000)
      << "an unavailable answer took too long";
  const std::string status = acks + ".verify";
  ASSERT_EQ(run_client({"verify", std::to_string(g.rdma_port), acks, status}, status + ".log", 600s), 0)
      << read_file(status + ".log");
  const auto st = read_status(status);
  EXPECT_EQ(num(st, "lost"), 0u) << "acknowledged-but-lost PUTs";
  EXPECT_EQ(num(st, "wrong"), 0u);
  const std::string m = http_get(g.http_port, "/metrics").body;
  EXPECT_GT(metric(m, "rdmagate_store_operations_total", {{"op", "put"}, {"status", "unavailable"}}), 0)
      << "no PUT was answered unavailable while the OSD was down";
  std::printf("rados_gateway: OSD killed: %s", read_file(status).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  if (argc > 1 && std::strcmp(argv[1], "client") == 0) return client_main(argc - 1, argv + 1);
  return rdmagate::testfix::rdma_test_main(
      argc, argv, "rados_gateway_test", /*eal_lcores=*/nullptr, [](const rdmagate::control::RdmaProbe&) {
        g_self = rdmagate::testfix::self_exe("rados_gateway_test");
        if (g_self.empty()) return 1;
        g_port_base = 7700 + static_cast<int>(getpid() % 100) * 8;
        g_ceph_dir = "/tmp/rgw_ceph_" + std::to_string(getpid());
        // BlueStore: the OSD test kills it with SIGKILL and its objects must survive.
        if (std::system(ceph_cluster("start --store bluestore --timeout 240").c_str()) != 0) {
          std::fprintf(stderr, "rados_gateway_test: the Ceph cluster did not start\n");
          return 1;
        }
        std::atexit([] { (void)!std::system(ceph_cluster("stop").c_str()); });
        return 0;
      });
}

// rdmagate-bench as a user runs it, in the guest: the real daemon, then the bench's own main with perftest's
// short flags, a preset and --json, and the JSON read back: version, device, UTC time, host, every setting,
// perftest's latency statistics per row, and no error. The test re-executes itself as the daemon
// (daemon/gateway_main.cpp) and as the bench (tools/bench/rdmagate_bench.cpp), so this binary and its
// library closure are all the guest needs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tools/bench/bench_options.hpp"

int rdmagate_main(int argc, char** argv);
int rdmagate_bench_main(int argc, char** argv);

namespace {

using namespace std::chrono_literals;
using namespace rdmagate::testfix::proc;
using nlohmann::json;
using rdmagate::testfix::rxe_addr;

std::string g_self;
int g_rdma_port = 7700;
int g_http_port = 19000;

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/bench_cli_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(mkdir(dir_.c_str(), 0755), 0) << dir_ << ": " << std::strerror(errno);
    // The gateway's shipped defaults where they matter here: control on CPU 0, its core on CPU 1.
    const std::string yaml = dir_ + "/rdmagate.yaml";
    gw_log_ = dir_ + "/rdmagate.log";
    ASSERT_TRUE(start_test_gateway(
        &gw_, g_self, yaml, test_gateway_yaml(rxe_addr(), g_rdma_port, g_http_port), gw_log_, g_http_port))
        << "the gateway did not become ready; log:\n"
        << read_file(gw_log_);
  }
  void TearDown() override {
    if (gw_.pid > 0) {
      kill(gw_.pid, SIGTERM);
      EXPECT_EQ(gw_.wait_exit(60s), 0) << "the gateway's SIGTERM drain; log:\n" << read_file(gw_log_);
    }
  }

  // Runs the bench with `args`; its stdout and stderr in *output. The exit code.
  int bench(std::vector<std::string> args, std::string* output) {
    const std::string log = dir_ + "/bench-" + std::to_string(++runs_) + ".log";
    args.insert(args.begin(), {g_self, "bench"});
    Child c;
    if (!spawn(&c, args, log)) return -1;
    const int rc = c.wait_exit(180s);
    *output = read_file(log);
    return rc;
  }

  std::string dir_, gw_log_;
  Child gw_;
  int runs_ = 0;
};

void expect_common_fields(const json& j) {
  EXPECT_EQ(j.at("tool"), "rdmagate-bench");
  EXPECT_EQ(j.at("version"), rdmagate::bench::version_string());
  EXPECT_EQ(j.at("device"), rdmagate::testfix::rdma_device());
  const std::string ts = j.at("timestamp");
  EXPECT_TRUE(std::regex_match(ts, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << ts;
  EXPECT_FALSE(j.at("host").get<std::string>().empty());
  EXPECT_EQ(j.at("latency"), "round_trip");
  EXPECT_TRUE(j.at("ok").get<bool>()) << j.dump(2);
  EXPECT_EQ(j.at("errors"), 0);
  EXPECT_EQ(j.at("mismatches"), 0);
  const json& s = j.at("settings");
  for (const char* k : {"mode",        "preset",
                        "server",      "port",
                        "device",      "sizes",
                        "all_sizes",   "connections",
                        "qd",          "iterations",
                        "duration_s",  "warmup_s",
                        "keys",        "ratio",
                        "cores",       "lcores",
                        "data_lcores", "progress",
                        "yield",       "verify",
                        "max_message", "connect_timeout_s",
                        "quiet",       "json"}) {
    EXPECT_TRUE(s.contains(k)) << "settings." << k << " missing";
  }
  EXPECT_EQ(s.at("server"), rxe_addr());
  EXPECT_EQ(s.at("port"), g_rdma_port);
  // The default placement never puts the bench's core on the gateway's default core (CPU 1), nor its main
  // (control) lcore on its core's CPU.
  const std::string lcores = s.at("lcores");
  const rdmagate::bench::LcoreCheck placed = rdmagate::bench::check_lcores(lcores);
  ASSERT_TRUE(placed.parsed) << lcores;
  EXPECT_FALSE(placed.on_gateway_core) << lcores;
  EXPECT_FALSE(placed.shares_main) << lcores;
}

TEST_F(BenchCli, EchoWithPerftestShortFlagsWritesTheJson) {
  const std::string out = dir_ + "/echo.json";
  std::string text;
  const int rc = bench({"echo",
                        "-s",
                        "64,256",
                        "-n",
                        "2000",
                        "-q",
                        "1",
                        "-t",
                        "1",
                        "-d",
                        rdmagate::testfix::rdma_device(),
                        "-p",
                        std::to_string(g_rdma_port),
                        "-R",
                        "-F",
                        "--warmup=0.2",
                        "--quiet",
                        "--json",
                        out,
                        rxe_addr()},
                       &text);
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("t_stdev[us]"), std::string::npos) << "the table still goes to stdout:\n" << text;
  const json j = json::parse(read_file(out));
  expect_common_fields(j);
  const json& s = j.at("settings");
  EXPECT_EQ(s.at("mode"), "echo");
  EXPECT_EQ(s.at("sizes"), json::array({64, 256}));
  EXPECT_EQ(s.at("iterations"), 2000);
  EXPECT_EQ(s.at("connections"), 1);
  EXPECT_EQ(s.at("qd"), 1);
  EXPECT_TRUE(s.at("progress").is_null()) << "echo does not use the client library";
  ASSERT_EQ(j.at("rows").size(), 2u);
  for (const json& row : j.at("rows")) {
    EXPECT_GE(row.at("ops").get<std::uint64_t>(), 2000u);
    const json& l = row.at("latency");
    for (const char* k : {"min_us", "p50_us", "avg_us", "stdev_us", "p99_us", "p999_us", "max_us"}) {
      ASSERT_TRUE(l.at(k).is_number()) << k << " in " << row.dump();
    }
    EXPECT_GT(l.at("min_us").get<double>(), 0.0);
    EXPECT_LE(l.at("min_us").get<double>(), l.at("p50_us").get<double>());
    EXPECT_LE(l.at("p50_us").get<double>(), l.at("max_us").get<double>());
    EXPECT_LE(l.at("min_us").get<double>(), l.at("avg_us").get<double>());
  }
}

TEST_F(BenchCli, GetWithTheBandwidthPresetAndLongEqualsFlags) {
  const std::string out = dir_ + "/get.json";
  std::string text;
  const int rc =
      bench({"get", "--preset=bw", "--size=64k", "-D", "1", "--warmup=0.2", "--server=" + rxe_addr(),
             "--port=" + std::to_string(g_rdma_port), "--device=" + rdmagate::testfix::rdma_device(),
             "--verify", "--quiet", "--json=" + out},
            &text);
  ASSERT_EQ(rc, 0) << text;
  const json j = json::parse(read_file(out));
  expect_common_fields(j);
  const json& s = j.at("settings");
  EXPECT_EQ(s.at("preset"), "bw");
  EXPECT_EQ(s.at("sizes"), json::array({65536})) << "an explicit -s wins over the preset's 1 MiB";
  EXPECT_EQ(s.at("qd"), 8) << "the preset's depth";
  EXPECT_EQ(s.at("progress"), "eal") << "the bench's default: the high-rate mode";
  EXPECT_TRUE(s.at("verify").get<bool>());
  ASSERT_EQ(j.at("rows").size(), 1u);
  EXPECT_GT(j.at("rows").at(0).at("mb_per_s").get<double>(), 0.0);
}

// A put run leaves the store as it found it, and its cleanup DELETEs only the keys it PUT: over RADOS a
// DELETE of a key never written still costs an OSD op, and a timed run writes a fraction of its key space.
// About 20 PUTs a size over 1,000 keys (-n counts from the moment the budget is set, so a slot's first PUT
// may come before it): every object gone, and no more DELETEs than PUTs, where every key's would be 2,000.
TEST_F(BenchCli, APutRunDeletesOnlyTheKeysItWrote) {
  const std::string out = dir_ + "/put.json";
  std::string text;
  const int rc = bench({"put",
                        "-s",
                        "64,64k",
                        "-n",
                        "20",
                        "-t",
                        "1",
                        "--keys",
                        "1000",
                        "--warmup",
                        "0",
                        "--progress",
                        "thread",
                        "-d",
                        rdmagate::testfix::rdma_device(),
                        "-p",
                        std::to_string(g_rdma_port),
                        "--quiet",
                        "--json",
                        out,
                        rxe_addr()},
                       &text);
  ASSERT_EQ(rc, 0) << text;
  const json j = json::parse(read_file(out));
  expect_common_fields(j);
  ASSERT_EQ(j.at("rows").size(), 2u);
  const HttpReply m = http_get(g_http_port, "/metrics");
  ASSERT_EQ(m.status, 200);
  const double puts = metric(m.body, "rdmagate_store_operations_total", {{"op", "put"}});
  const double deletes = metric(m.body, "rdmagate_store_operations_total", {{"op", "delete"}});
  EXPECT_GE(puts, 40.0);
  EXPECT_LT(puts, 100.0);
  EXPECT_GT(deletes, 0.0);
  EXPECT_LE(deletes, puts) << "the cleanup deleted keys no PUT was sent for";
  EXPECT_EQ(metric(m.body, "rdmagate_store_objects"), 0.0) << "a key the run wrote was left behind";
}

// --progress picks the client library's mode: each moves verified mixed traffic, inline and chunked, and the
// JSON names the mode it ran.
TEST_F(BenchCli, EveryClientProgressModeMovesVerifiedTraffic) {
  for (const char* mode : {"eal", "thread", "caller"}) {
    const std::string out = dir_ + "/mixed-" + mode + ".json";
    std::string text;
    const int rc = bench({"mixed",      "--verify",
                          "-s",         "64,64k",
                          "-n",         "3000",
                          "-t",         "4",
                          "--warmup",   "0.2",
                          "--progress", mode,
                          "-d",         rdmagate::testfix::rdma_device(),
                          "-p",         std::to_string(g_rdma_port),
                          "--quiet",    "--json",
                          out,          rxe_addr()},
                         &text);
    ASSERT_EQ(rc, 0) << mode << ":\n" << text;
    const json j = json::parse(read_file(out));
    expect_common_fields(j);
    EXPECT_EQ(j.at("settings").at("progress"), mode);
    ASSERT_EQ(j.at("rows").size(), 2u) << mode;
    for (const json& row : j.at("rows")) {
      EXPECT_GE(row.at("ops").get<std::uint64_t>(), 3000u) << mode;
      EXPECT_GT(row.at("gets").get<std::uint64_t>(), 0u) << mode;
      EXPECT_GT(row.at("puts").get<std::uint64_t>(), 0u) << mode;
    }
  }
}

// connect: every connection through the handshake and verified by its echo, each of cmtime's steps timed for
// every one of them, the rate in the JSON; and a connection the gateway refuses (its 8 per core are taken) is
// counted as an error, never as set up. The bench's warm-up connection is closed on its side before the
// measured ones start, but the gateway may still hold its slot for a moment: 7 measured leave room for it.
TEST_F(BenchCli, ConnectTimesEveryStepOfEveryVerifiedConnection) {
  const std::string out = dir_ + "/connect.json";
  std::string text;
  const std::vector<std::string> common = {"-d", rdmagate::testfix::rdma_device(), "-p",
                                           std::to_string(g_rdma_port), rxe_addr()};
  std::vector<std::string> args = {"connect", "-n", "7", "--json", out};
  args.insert(args.end(), common.begin(), common.end());
  ASSERT_EQ(bench(args, &text), 0) << text;
  for (const char* step : {"step              total ms     max ms     min us  us / conn",
                           "create id    :", "resolve addr :", "resolve route:", "connect      :",
                           "first echo   :", "full connect :", "disconnect   :", "connections/s"}) {
    EXPECT_NE(text.find(step), std::string::npos) << step << " missing from\n" << text;
  }
  const json j = json::parse(read_file(out));
  expect_common_fields(j);
  EXPECT_EQ(j.at("settings").at("mode"), "connect");
  EXPECT_EQ(j.at("settings").at("connections"), 7);
  const json& c = j.at("connect");
  EXPECT_EQ(c.at("requested"), 7);
  EXPECT_EQ(c.at("verified"), 7);
  EXPECT_GT(c.at("connections_per_s").get<double>(), 0.0);
  EXPECT_GT(c.at("setup_s").get<double>(), 0.0);
  ASSERT_EQ(c.at("steps").size(), 7u) << c.dump(2);
  double setup_max_ms = 0;
  for (const json& st : c.at("steps")) {
    EXPECT_EQ(st.at("connections"), 7) << st.dump();
    EXPECT_GT(st.at("total_ms").get<double>(), 0.0) << st.dump();
    EXPECT_LE(st.at("min_us").get<double>(), st.at("max_ms").get<double>() * 1000.0) << st.dump();
    if (st.at("step") == "full connect") setup_max_ms = st.at("max_ms").get<double>();
  }
  // No connection took longer than the whole setup.
  EXPECT_LE(setup_max_ms, c.at("setup_s").get<double>() * 1000.0 + 1e-3) << c.dump(2);

  args = {"connect", "-n", "10", "--quiet"};
  args.insert(args.end(), common.begin(), common.end());
  EXPECT_EQ(bench(args, &text), 1) << "two connections past the gateway's 8 per core:\n" << text;
  // At least the two past 8 are refused (a third when the warm-up's slot is still held), and every one of
  // the 10 is either verified or counted as failed.
  unsigned failed = 0, verified = 0, of = 0;
  const std::size_t f = text.find("connect_failed=");
  ASSERT_NE(f, std::string::npos) << text;
  ASSERT_EQ(std::sscanf(text.c_str() + f, "connect_failed=%u", &failed), 1) << text;
  const std::size_t v = text.find(" connections verified");
  ASSERT_NE(v, std::string::npos) << text;
  const std::size_t line = text.rfind(':', v);
  ASSERT_NE(line, std::string::npos) << text;
  ASSERT_EQ(std::sscanf(text.c_str() + line + 1, " %u of %u", &verified, &of), 2) << text;
  EXPECT_EQ(of, 10u) << text;
  EXPECT_GE(failed, 2u) << text;
  EXPECT_LE(verified, 8u) << text;
  EXPECT_EQ(verified + failed, 10u) << text;
}

TEST_F(BenchCli, UsageErrorsExitTwoBeforeTouchingTheDevice) {
  std::string text;
  EXPECT_EQ(bench({"get", rxe_addr(), "--bogus"}, &text), 2);
  EXPECT_NE(text.find("unknown or ambiguous option --bogus"), std::string::npos) << text;
  EXPECT_EQ(bench({"get", rxe_addr(), "-q"}, &text), 2);
  EXPECT_NE(text.find("-q/--connections needs a value"), std::string::npos) << text;
  EXPECT_EQ(bench({"connect", rxe_addr(), "-D", "2"}, &text), 2);
  EXPECT_NE(text.find("does not apply to connect"), std::string::npos) << text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) return rdmagate_bench_main(argc - 1, argv + 1);
  // No EAL here: the daemon and the bench (this binary, re-executed) start their own.
  return rdmagate::testfix::rdma_test_main(argc, argv, "bench_cli_test", /*eal_lcores=*/nullptr,
                                           [](const rdmagate::control::RdmaProbe&) {
                                             g_self = rdmagate::testfix::self_exe("bench_cli_test");
                                             if (g_self.empty()) return 1;
                                             g_rdma_port = 7300 + static_cast<int>(getpid() % 200) * 2;
                                             g_http_port = 18000 + static_cast<int>(getpid() % 500);
                                             return 0;
                                           });
}

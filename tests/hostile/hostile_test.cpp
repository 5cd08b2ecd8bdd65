// Adversarial guest tests of the rdmagate daemon (issue 15), each against a daemon this binary re-executes
// itself as ("hostile_test daemon ...": daemon/gateway_main.cpp linked in). Built in an ASan+UBSan tree the
// daemon runs under the sanitizers, and every test fails on a sanitizer report in its log.
//
// LiveFuzz.HostileClientBesideAVerifyingOne: the live fuzzer (live_fuzzer.cpp, "hostile_test fuzz ...") for
//   RDMAGATE_LIVE_FUZZ_SECONDS (60) with RDMAGATE_LIVE_FUZZ_SEED (else drawn and printed), while
//   rdmagate-bench mixed --verify ("hostile_test bench ...", the client library) checks every byte of its own
//   load. Pass: the fuzzer ran to its end, the bench saw 0 errors and 0 mismatches, the daemon still runs and
//   answers /readyz 200, drains on SIGTERM with exit 0, and its log holds no sanitizer report
//   (LeakSanitizer's at exit included).
// ChurnSoak.KilledClientsLeaveNothingBehind: RDMAGATE_SOAK_CYCLES (200) cycles, or RDMAGATE_SOAK_MINUTES of
//   them, of: a verifying client (the fuzzer's good mode) connects, loads mixed PUT/GET/DELETE, inline and
//   chunked, and is SIGKILLed at a random point; two more verifying clients run beside it all along. Before
//   and after (no client connected, after a settle) the gateway's connections, store objects, bytes and
//   charged bytes (reservations and pins are charged there), registered and pinned memory are equal and its
//   RSS has not grown by more than 16 MiB + 10% (the allocator's and ASan's caches). The table is printed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"

int rdmagate_main(int argc, char** argv);
int rdmagate_bench_main(int argc, char** argv);
int live_fuzzer_main(int argc, char** argv);

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using rdmagate::testfix::rxe_addr;
using rdmagate::testfix::proc::Child;
using rdmagate::testfix::proc::metric;
using rdmagate::testfix::proc::read_file;
using rdmagate::testfix::proc::spawn;
using rdmagate::testfix::proc::wait_for;

std::string g_self;
int g_rdma_port = 0;
int g_http_port = 0;

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 0) : fallback;
}

// A sanitizer's report in a log (ASan, LSan, UBSan's "runtime error:"), the first line of it; empty if none.
std::string sanitizer_report(const std::string& log) {
  for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"}) {
    const auto at = log.find(marker);
    if (at != std::string::npos) return log.substr(at, log.find('\n', at) - at);
  }
  return "";
}

// The daemon under test, started from test_gateway_yaml with its sanitizer options; stopped with SIGTERM.
class Daemon {
 public:
  explicit Daemon(const std::string& tag) {
    yaml_ = "/tmp/hostile_" + tag + "_" + std::to_string(getpid()) + ".yaml";
    log_ = "/tmp/hostile_" + tag + "_" + std::to_string(getpid()) + ".log";
    std::remove(log_.c_str());
  }
  bool start() {
    // The store a little larger than the test default, so that the bench's and the fuzzer's keys together
    // stay far from no_space.
    const std::string yaml = rdmagate::testfix::proc::test_gateway_yaml(rxe_addr(), g_rdma_port, g_http_port);
    rdmagate::testfix::proc::write_file(yaml_, yaml);
    // halt_on_error: the first report ends the daemon (the test sees it gone and reads the report).
    return spawn(&child_, {g_self, "daemon", "--config", yaml_}, log_,
                 {"ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:quarantine_size_mb=16:malloc_context_size=20",
                  "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"}) &&
           wait_for([&] { return !child_.running() || http(g_http_port, "/readyz").status == 200; }, 180s) &&
           child_.running();
  }
  static rdmagate::testfix::proc::HttpReply http(int port, const std::string& path) {
    return rdmagate::testfix::proc::http_get(port, path);
  }
  bool running() { return child_.running(); }
  std::string log() const { return read_file(log_); }
  // SIGTERM, then the exit code (-1: killed by a signal or not gone within the timeout).
  int stop() {
    if (child_.pid <= 0) return -1;
    kill(child_.pid, SIGTERM);
    return child_.wait_exit(60s);
  }

 private:
  std::string yaml_, log_;
  Child child_;
};

std::string metrics_text() {
  return Daemon::http(g_http_port, "/metrics").body;
}

// ---- live fuzzer
// -------------------------------------------------------------------------------------------

TEST(LiveFuzz, HostileClientBesideAVerifyingOne) {
  const std::uint64_t seconds = env_u64("RDMAGATE_LIVE_FUZZ_SECONDS", 60);
  std::uint64_t seed = env_u64("RDMAGATE_LIVE_FUZZ_SEED", 0);
  if (seed == 0) seed = std::random_device{}() * 0x100000001ull ^ static_cast<std::uint64_t>(getpid());
  char seed_text[32];
  std::snprintf(seed_text, sizeof(seed_text), "0x%016" PRIx64, seed);
  std::printf("live fuzz: %" PRIu64 " s, seed %s (replay: RDMAGATE_LIVE_FUZZ_SEED=%s)\n", seconds, seed_text,
              seed_text);
  std::fflush(stdout);

  Daemon d("fuzz");
  ASSERT_TRUE(d.start()) << d.log();

  // The verifying client first, so that its connections are in before the fuzzer takes slots.
  const std::string tag = std::to_string(getpid());
  const std::string bench_json = "/tmp/hostile_bench_" + tag + ".json";
  const std::string bench_log = "/tmp/hostile_bench_" + tag + ".log";
  const std::string fuzz_log = "/tmp/hostile_fuzzer_" + tag + ".log";
  std::remove(bench_log.c_str());
  const double per_size = std::max(1.0, static_cast<double>(seconds) / 2.0);
  Child bench;
  ASSERT_TRUE(spawn(&bench,
                    {g_self,
                     "bench",
                     "mixed",
                     "--verify",
                     "-s",
                     "64,65536",
                     "-q",
                     "2",
                     "-t",
                     "4",
                     "-D",
                     std::to_string(per_size),
                     "--warmup",
                     "0.5",
                     "--keys",
                     "200",
                     "--yield",
                     "-d",
                     rdmagate::testfix::rdma_device(),
                     "-p",
                     std::to_string(g_rdma_port),
                     "--quiet",
                     "--json",
                     bench_json,
                     rxe_addr()},
                    bench_log));
  // Two hostile clients at once, seeds S and S + 1: a connection of one may hold gateway resources while the
  // other's handshakes and aborts run.
  constexpr int kFuzzers = 2;
  std::vector<std::unique_ptr<Child>> fuzzers;
  std::vector<std::string> fuzz_logs, fuzz_seeds;
  for (int i = 0; i < kFuzzers; ++i) {
    char s[32];
    std::snprintf(s, sizeof(s), "0x%016" PRIx64, seed + static_cast<std::uint64_t>(i));
    fuzz_seeds.emplace_back(s);
    fuzz_logs.push_back(fuzz_log + "." + std::to_string(i));
    std::remove(fuzz_logs.back().c_str());
    fuzzers.push_back(std::make_unique<Child>());
    ASSERT_TRUE(spawn(fuzzers.back().get(),
                      {g_self, "fuzz", "--addr", rxe_addr(), "--port", std::to_string(g_rdma_port),
                       "--seconds", std::to_string(seconds), "--seed", s},
                      fuzz_logs.back()));
  }
  const auto limit = std::chrono::seconds(seconds + 180);
  std::vector<int> fuzz_rc;
  for (auto& f : fuzzers) fuzz_rc.push_back(f->wait_exit(limit));
  const int bench_rc = bench.wait_exit(limit);
  for (int i = 0; i < kFuzzers; ++i) {
    const std::string flog = read_file(fuzz_logs[i]);
    std::printf("%s", flog.c_str());
    EXPECT_EQ(fuzz_rc[i], 0) << "fuzzer " << i << " (seed " << fuzz_seeds[i] << ") exited " << fuzz_rc[i]
                             << ":\n"
                             << flog;
  }
  const bool alive = d.running();
  const int ready = alive ? Daemon::http(g_http_port, "/readyz").status : 0;
  const std::string m = alive ? metrics_text() : "";
  EXPECT_TRUE(alive) << "the gateway died under the fuzzer (seed " << seed_text << "):\n" << d.log();
  EXPECT_EQ(ready, 200) << "seed " << seed_text;
  EXPECT_EQ(bench_rc, 0) << read_file(bench_log);
  if (bench_rc == 0) {
    const auto j = nlohmann::json::parse(read_file(bench_json), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << read_file(bench_log);
    EXPECT_EQ(j.value("errors", -1), 0) << j.dump();
    EXPECT_EQ(j.value("mismatches", -1), 0) << j.dump();
    std::uint64_t ops = 0;
    for (const auto& row : j.at("rows")) ops += row.value("ops", 0ull);
    std::printf("live fuzz: verifying client: %" PRIu64 " ops, errors %d, mismatches %d\n", ops,
                j.value("errors", -1), j.value("mismatches", -1));
    EXPECT_GT(ops, 0u);
  }
  if (!m.empty()) {
    std::printf(
        "live fuzz: gateway: accepts %.0f, rejects %.0f, failures %.0f, protocol violations %.0f\n",
        metric(m, "rdmagate_connection_accepts_total"), metric(m, "rdmagate_connection_rejects_total"),
        metric(m, "rdmagate_connection_failures_total"), metric(m, "rdmagate_protocol_violations_total"));
  }
  const int exit_code = d.stop();
  const std::string log = d.log();
  EXPECT_EQ(sanitizer_report(log), "") << "seed " << seed_text << "; the gateway's log:\n" << log;
  EXPECT_EQ(exit_code, 0) << log;
}

// ---- churn soak
// --------------------------------------------------------------------------------------------

struct Gauges {
  std::map<std::string, double> v;
};

// The gauges that must come back; each a sum over its labels.
const char* const kSoakGauges[] = {"rdmagate_connections",           "rdmagate_connections_unplaced",
                                   "rdmagate_store_objects",         "rdmagate_store_bytes",
                                   "rdmagate_store_allocated_bytes", "rdmagate_memory_registered_bytes",
                                   "rdmagate_memory_pinned_bytes",   "process_resident_memory_bytes"};

Gauges read_gauges() {
  Gauges g;
  const std::string m = metrics_text();
  for (const char* name : kSoakGauges) g.v[name] = metric(m, name);
  return g;
}

// No connection in any state, no store charge beyond the empty store: what a gateway with no clients settles
// to.
bool settled(const Gauges& g, const Gauges& base) {
  return g.v.at("rdmagate_connections") <= 0 && g.v.at("rdmagate_connections_unplaced") <= 0 &&
         g.v.at("rdmagate_store_allocated_bytes") == base.v.at("rdmagate_store_allocated_bytes");
}

TEST(ChurnSoak, KilledClientsLeaveNothingBehind) {
  const std::uint64_t minutes = env_u64("RDMAGATE_SOAK_MINUTES", 0);
  const std::uint64_t cycles_wanted = minutes > 0 ? ~0ull : env_u64("RDMAGATE_SOAK_CYCLES", 200);
  const auto soak_end = Clock::now() + std::chrono::minutes(minutes > 0 ? minutes : 24 * 60);
  std::uint64_t seed = env_u64("RDMAGATE_SOAK_SEED", 0);
  if (seed == 0) seed = std::random_device{}() ^ static_cast<std::uint64_t>(getpid());
  std::printf("churn soak: %s, seed 0x%" PRIx64 "\n",
              minutes > 0 ? (std::to_string(minutes) + " min").c_str()
                          : (std::to_string(cycles_wanted) + " cycles").c_str(),
              seed);
  std::fflush(stdout);
  std::mt19937_64 rng(seed);

  Daemon d("soak");
  ASSERT_TRUE(d.start()) << d.log();
  const std::string tag = std::to_string(getpid());
  auto good_args = [&](const std::string& prefix, double seconds) {
    return std::vector<std::string>{g_self,         "fuzz",
                                    "--mode",       "good",
                                    "--addr",       rxe_addr(),
                                    "--port",       std::to_string(g_rdma_port),
                                    "--seconds",    std::to_string(seconds),
                                    "--seed",       std::to_string(rng()),
                                    "--key-prefix", prefix};
  };

  // The empty gateway's values, after one complete client run warmed every path (first registrations, the
  // allocator's first arenas).
  {
    Child warm;
    const std::string wlog = "/tmp/hostile_warm_" + tag + ".log";
    ASSERT_TRUE(spawn(&warm, good_args("warm-", 3), wlog));
    ASSERT_EQ(warm.wait_exit(120s), 0) << read_file(wlog);
  }
  Gauges empty = read_gauges();
  ASSERT_TRUE(wait_for([&] { return settled(empty = read_gauges(), empty); }, 30s));
  for (const char* name : kSoakGauges) ASSERT_GE(empty.v[name], 0) << name << " is not on /metrics";

  // Mixed load beside the churn: two verifying clients that live through the whole soak.
  std::vector<std::string> bg_logs;
  std::vector<std::unique_ptr<Child>> bg;
  for (int i = 0; i < 2; ++i) {
    bg_logs.push_back("/tmp/hostile_bg" + std::to_string(i) + "_" + tag + ".log");
    std::remove(bg_logs.back().c_str());
    bg.push_back(std::make_unique<Child>());
    ASSERT_TRUE(
        spawn(bg.back().get(), good_args("bg" + std::to_string(i) + "-", 24 * 3600.0), bg_logs.back()));
  }

  const std::string clog = "/tmp/hostile_churn_" + tag + ".log";
  std::uint64_t cycles = 0, killed_loaded = 0;
  const auto t0 = Clock::now();
  for (; cycles < cycles_wanted && Clock::now() < soak_end; ++cycles) {
    std::remove(clog.c_str());
    Child c;
    ASSERT_TRUE(spawn(&c, good_args("churn" + std::to_string(cycles % 4) + "-", 3600), clog));
    // Connected (or gone); then load for a random while, then SIGKILL.
    const bool connected = wait_for(
        [&] { return !c.running() || read_file(clog).find("good: connected") != std::string::npos; }, 30s);
    ASSERT_TRUE(connected && c.running()) << "cycle " << cycles << ": the client did not connect:\n"
                                          << read_file(clog) << "\ngateway:\n"
                                          << d.log();
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 400));
    const bool still_running = c.running();
    kill(c.pid, SIGKILL);
    int st = 0;
    waitpid(c.pid, &st, 0);
    c.pid = -1;
    const std::string out = read_file(clog);
    ASSERT_EQ(out.find("MISMATCH"), std::string::npos) << "cycle " << cycles << ":\n" << out;
    ASSERT_TRUE(still_running) << "cycle " << cycles << ": the client ended on its own:\n" << out;
    if (out.find("good: ops") != std::string::npos) ++killed_loaded;
    for (std::size_t i = 0; i < bg.size(); ++i) {
      ASSERT_TRUE(bg[i]->running()) << "background client " << i << ":\n" << read_file(bg_logs[i]);
    }
    ASSERT_TRUE(d.running()) << "cycle " << cycles << ": the gateway died:\n" << d.log();
    if (cycles % 100 == 99) {
      std::printf("churn soak: %" PRIu64 " cycles in %.0f s\n", cycles + 1,
                  std::chrono::duration<double>(Clock::now() - t0).count());
      std::fflush(stdout);
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  // The background clients end normally: their last answers checked, their keys deleted.
  for (auto& b : bg) kill(b->pid, SIGKILL), waitpid(b->pid, nullptr, 0), b->pid = -1;
  for (std::size_t i = 0; i < bg.size(); ++i) {
    EXPECT_EQ(read_file(bg_logs[i]).find("MISMATCH"), std::string::npos) << read_file(bg_logs[i]);
  }
  // Every prefix a killed client used, emptied by a last complete run of its own.
  for (const std::string prefix : {"churn0-", "churn1-", "churn2-", "churn3-", "bg0-", "bg1-"}) {
    Child last;
    const std::string llog = "/tmp/hostile_last_" + tag + ".log";
    std::remove(llog.c_str());
    ASSERT_TRUE(spawn(&last, good_args(prefix, 0.5), llog));
    ASSERT_EQ(last.wait_exit(120s), 0) << read_file(llog);
  }
  Gauges after;
  const bool back = wait_for([&] { return settled(after = read_gauges(), empty); }, 60s);
  std::printf("churn soak: %" PRIu64 " cycles (%" PRIu64 " killed under load) in %.0f s, seed 0x%" PRIx64
              "\n",
              cycles, killed_loaded, secs, seed);
  std::printf("churn soak: %-36s %16s %16s\n", "gauge", "before", "after");
  for (const char* name : kSoakGauges) {
    std::printf("churn soak: %-36s %16.0f %16.0f\n", name, empty.v[name], after.v[name]);
  }
  EXPECT_TRUE(back) << "the gateway did not settle back to no connection and an empty store";
  for (const char* name : kSoakGauges) {
    if (std::strcmp(name, "process_resident_memory_bytes") == 0) continue;
    EXPECT_EQ(after.v[name], empty.v[name]) << name;
  }
  const double rss0 = empty.v["process_resident_memory_bytes"];
  EXPECT_LE(after.v["process_resident_memory_bytes"], rss0 * 1.10 + 16.0 * 1024 * 1024);
  EXPECT_GE(killed_loaded, cycles / 2) << "most clients must be killed with requests in flight";
  const int exit_code = d.stop();
  const std::string log = d.log();
  EXPECT_EQ(sanitizer_report(log), "") << log;
  EXPECT_EQ(exit_code, 0) << log;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) return rdmagate_bench_main(argc - 1, argv + 1);
  if (argc > 1 && std::strcmp(argv[1], "fuzz") == 0) return live_fuzzer_main(argc - 1, argv + 1);
  // No EAL here: the daemon and the bench (this binary, re-executed) start their own.
  return rdmagate::testfix::rdma_test_main(argc, argv, "hostile_test", /*eal_lcores=*/nullptr,
                                           [](const rdmagate::control::RdmaProbe&) {
                                             g_self = rdmagate::testfix::self_exe("hostile_test");
                                             if (g_self.empty()) return 1;
                                             g_rdma_port = 7700 + static_cast<int>(getpid() % 200) * 2;
                                             g_http_port = 18600 + static_cast<int>(getpid() % 500);
                                             return 0;
                                           });
}

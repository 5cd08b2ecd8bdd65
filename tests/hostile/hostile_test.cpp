// Adversarial guest tests of the rdmagate daemon (issue 15), each against a daemon this binary re-executes
// itself as ("hostile_test daemon ...": daemon/gateway_main.cpp linked in). Built in an ASan+UBSan tree the
// daemon runs under the sanitizers, and every test fails on a sanitizer report in its log.
//
// LiveFuzz.HostileClientBesideAVerifyingOne: the live fuzzer (live_fuzzer.cpp, rdmagate-live-fuzzer) for
//   RDMAGATE_LIVE_FUZZ_SECONDS (60) with RDMAGATE_LIVE_FUZZ_SEED (else drawn and printed), while
//   rdmagate-bench mixed --verify ("hostile_test bench ...", the client library) checks every byte of its own
//   load. Pass: the fuzzer ran to its end, the bench saw 0 errors and 0 mismatches, the daemon still runs and
//   answers /readyz 200, drains on SIGTERM with exit 0, and its log holds no sanitizer report
//   (LeakSanitizer's at exit included).
// LiveFuzz.AuthenticatingGateway: the same against a gateway that requires authentication (docs/protocol.md
//   §11), for half of RDMAGATE_LIVE_FUZZ_SECONDS: two fuzzers authenticate as a principal of their own,
//   validly or with a mutated AUTH, and the fuzzer's good mode, authenticated as a principal of another
//   tenant, checks its own load. Pass: each fuzzer ran to its end with at least one session authenticated,
//   the verifying client ended with ops done and 0 mismatches, the gateway counted ok and denied AUTHs and
//   other refusals, and it still runs, answers /readyz, drains and has no sanitizer report.
// ChurnSoak.KilledClientsLeaveNothingBehind: RDMAGATE_SOAK_CYCLES (200) cycles, or RDMAGATE_SOAK_MINUTES of
//   them, of: a verifying client (the fuzzer's good mode) connects, loads mixed PUT/GET/DELETE, inline and
//   chunked, and is SIGKILLed at a random point while loading, in RDMAGATE_SOAK_LANES (3) lanes side by side;
//   two more verifying clients run beside them all along. After a warm-up phase of the same churn and after
//   the soak (no client connected, their keys deleted, settled) the gateway's connections, store objects,
//   bytes and charged bytes (reservations and pins are charged there), registered and pinned memory are equal
//   and its RSS has not grown by more than 16 MiB + 10% (the allocator's and ASan's caches). The table is
//   printed, and the RSS every 100 cycles.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"

int rdmagate_main(int argc, char** argv);
int rdmagate_bench_main(int argc, char** argv);

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
  // extra_yaml: further top-level sections (e.g. faults:).
  bool start(const std::string& extra_yaml = "") {
    return start_yaml(rdmagate::testfix::proc::test_gateway_yaml(rxe_addr(), g_rdma_port, g_http_port) +
                      extra_yaml);
  }
  bool start_yaml(const std::string& yaml) {
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

// Two hostile clients at once, seeds S and S + 1: a connection of one may hold gateway resources while the
// other's handshakes and aborts run.
class Fuzzers {
 public:
  static constexpr int kCount = 2;
  // `extra`: arguments after --seed (credentials, say).
  bool start(const std::string& log_base, std::uint64_t seed, std::uint64_t seconds,
             const std::vector<std::string>& extra = {}) {
    for (int i = 0; i < kCount; ++i) {
      char s[32];
      std::snprintf(s, sizeof(s), "0x%016" PRIx64, seed + static_cast<std::uint64_t>(i));
      seeds_.emplace_back(s);
      logs_.push_back(log_base + "." + std::to_string(i));
      std::remove(logs_.back().c_str());
      children_.push_back(std::make_unique<Child>());
      std::vector<std::string> args = {
          RDMAGATE_LIVE_FUZZER,    "--addr", rxe_addr(), "--port", std::to_string(g_rdma_port), "--seconds",
          std::to_string(seconds), "--seed", s};
      args.insert(args.end(), extra.begin(), extra.end());
      if (!spawn(children_.back().get(), args, logs_.back())) return false;
    }
    return true;
  }
  // Waits for each, prints its log and expects exit 0; the logs.
  std::vector<std::string> finish(std::chrono::seconds limit) {
    std::vector<std::string> out;
    for (int i = 0; i < kCount; ++i) {
      const int rc = children_[i]->wait_exit(limit);
      out.push_back(read_file(logs_[i]));
      std::printf("%s", out.back().c_str());
      EXPECT_EQ(rc, 0) << "fuzzer " << i << " (seed " << seeds_[i] << ") exited " << rc << ":\n"
                       << out.back();
    }
    return out;
  }

 private:
  std::vector<std::unique_ptr<Child>> children_;
  std::vector<std::string> logs_, seeds_;
};

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
  Fuzzers fuzzers;
  ASSERT_TRUE(fuzzers.start(fuzz_log, seed, seconds));
  const auto limit = std::chrono::seconds(seconds + 180);
  fuzzers.finish(limit);
  const int bench_rc = bench.wait_exit(limit);
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

// Principals of the authenticating gateway: the fuzzers' and the verifying client's, in tenants of their own.
constexpr const char* kFuzzerSecret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
constexpr const char* kVerifierSecret = "f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f";

TEST(LiveFuzz, AuthenticatingGateway) {
  const std::uint64_t seconds = std::max<std::uint64_t>(10, env_u64("RDMAGATE_LIVE_FUZZ_SECONDS", 60) / 2);
  std::uint64_t seed = env_u64("RDMAGATE_LIVE_FUZZ_SEED", 0);
  if (seed == 0) seed = std::random_device{}() * 0x100000001ull ^ static_cast<std::uint64_t>(getpid());
  char seed_text[32];
  std::snprintf(seed_text, sizeof(seed_text), "0x%016" PRIx64, seed);
  std::printf("live fuzz with authentication: %" PRIu64 " s, seed %s (replay: RDMAGATE_LIVE_FUZZ_SEED=%s)\n",
              seconds, seed_text, seed_text);
  std::fflush(stdout);

  const std::string tag = std::to_string(getpid());
  const std::string secrets = "/tmp/hostile_auth_" + tag + ".secrets.yaml";
  rdmagate::testfix::proc::write_file(secrets, std::string("secrets:\n  fuzzer: \"hex:") + kFuzzerSecret +
                                                   "\"\n  verifier: \"hex:" + kVerifierSecret + "\"\n");
  ASSERT_EQ(chmod(secrets.c_str(), 0600), 0);
  std::string yaml = rdmagate::testfix::proc::test_gateway_yaml(rxe_addr(), g_rdma_port, g_http_port);
  const std::string off = "  authentication: off\n";
  const auto at = yaml.find(off);
  ASSERT_NE(at, std::string::npos);
  yaml.replace(at, off.size(),
               "  authentication: required\n  auth_timeout_ms: 1000\n  secrets_file: " + secrets +
                   "\n  tenants:\n    - name: fuzz\n    - name: good\n  principals:\n"
                   "    - name: fuzzer\n      tenant: fuzz\n      permissions: [read, write, delete]\n"
                   "    - name: verifier\n      tenant: good\n      permissions: [read, write, delete]\n");
  Daemon d("auth");
  ASSERT_TRUE(d.start_yaml(yaml)) << d.log();

  const std::string good_log = "/tmp/hostile_auth_good_" + tag + ".log";
  std::remove(good_log.c_str());
  Child good;
  ASSERT_TRUE(spawn(&good,
                    {RDMAGATE_LIVE_FUZZER, "--addr", rxe_addr(), "--port", std::to_string(g_rdma_port),
                     "--seconds", std::to_string(seconds), "--mode", "good", "--principal", "verifier",
                     "--secret", kVerifierSecret, "--key-prefix", "auth-good-"},
                    good_log));
  Fuzzers fuzzers;
  ASSERT_TRUE(fuzzers.start("/tmp/hostile_auth_fuzzer_" + tag, seed, seconds,
                            {"--principal", "fuzzer", "--secret", kFuzzerSecret}));
  const auto limit = std::chrono::seconds(seconds + 180);
  for (const std::string& flog : fuzzers.finish(limit)) {
    EXPECT_NE(flog.find("auth.valid.status_0"), std::string::npos) << "no session authenticated:\n" << flog;
  }
  const int good_rc = good.wait_exit(limit);
  const std::string glog = read_file(good_log);
  EXPECT_EQ(good_rc, 0) << glog;
  EXPECT_NE(glog.find("good: connected, authenticated"), std::string::npos) << glog;
  const auto done = glog.find("good: done, ops ");
  ASSERT_NE(done, std::string::npos) << glog;
  EXPECT_GT(std::strtoull(glog.c_str() + done + 16, nullptr, 10), 0u) << glog;
  EXPECT_NE(glog.find("mismatches 0", done), std::string::npos) << glog;
  const bool alive = d.running();
  EXPECT_TRUE(alive) << "the gateway died under the fuzzer (seed " << seed_text << "):\n" << d.log();
  if (alive) {
    EXPECT_EQ(Daemon::http(g_http_port, "/readyz").status, 200) << "seed " << seed_text;
    const std::string m = metrics_text();
    const double ok = metric(m, "rdmagate_auth_total", {{"result", "ok"}});
    const double denied = metric(m, "rdmagate_auth_total", {{"result", "denied"}});
    const double failures = metric(m, "rdmagate_auth_failures_total");
    std::printf("live fuzz with authentication: gateway: auth ok %.0f, denied %.0f, other refusals %.0f\n",
                ok, denied, failures);
    EXPECT_GT(ok, 1.0) << "the verifying client and at least one fuzz session";
    EXPECT_GT(denied, 0.0) << "mutated AUTHs are answered denied";
    EXPECT_GT(failures, 0.0) << "requests before AUTH, second AUTHs and silence are refused";
  }
  const int exit_code = d.stop();
  const std::string log = d.log();
  EXPECT_EQ(sanitizer_report(log), "") << "seed " << seed_text << "; the gateway's log:\n" << log;
  EXPECT_EQ(exit_code, 0) << log;
  std::remove(secrets.c_str());
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
  auto good_args = [&](const std::string& prefix, double seconds, std::uint64_t client_seed) {
    return std::vector<std::string>{RDMAGATE_LIVE_FUZZER,
                                    "--mode",
                                    "good",
                                    "--addr",
                                    rxe_addr(),
                                    "--port",
                                    std::to_string(g_rdma_port),
                                    "--seconds",
                                    std::to_string(seconds),
                                    "--seed",
                                    std::to_string(client_seed),
                                    "--key-prefix",
                                    prefix};
  };

  const unsigned lanes =
      static_cast<unsigned>(std::clamp<std::uint64_t>(env_u64("RDMAGATE_SOAK_LANES", 3), 1, 4));
  std::uint64_t killed_loaded = 0;
  double secs = 0;
  // One phase: two verifying clients for the whole phase (mixed load beside the churn), and `lanes` lanes of
  // churn side by side, each its own key prefix and one client at a time, until `n` cycles or `until`; then
  // every client gone and a last complete run per prefix deleting what the killed ones left. Empty on
  // success.
  auto phase = [&](std::uint64_t n, Clock::time_point until, std::uint64_t* done) -> std::string {
    std::vector<std::string> bg_logs;
    std::vector<std::unique_ptr<Child>> bg;
    for (int i = 0; i < 2; ++i) {
      bg_logs.push_back("/tmp/hostile_bg" + std::to_string(i) + "_" + tag + ".log");
      std::remove(bg_logs.back().c_str());
      bg.push_back(std::make_unique<Child>());
      if (!spawn(bg.back().get(), good_args("bg" + std::to_string(i) + "-", 24 * 3600.0, rng()),
                 bg_logs.back()))
        return "spawn failed";
    }
    std::atomic<std::uint64_t> cycles{0}, loaded{0};
    std::atomic<bool> stop{false};
    std::mutex failure_mu;
    std::string failure;
    auto fail = [&](const std::string& why) {
      std::lock_guard<std::mutex> lock(failure_mu);
      if (failure.empty()) failure = why;
      stop = true;
    };
    const auto t0 = Clock::now();
    auto lane = [&](unsigned id, std::uint64_t lane_seed) {
      std::mt19937_64 lrng(lane_seed);
      const std::string clog = "/tmp/hostile_churn" + std::to_string(id) + "_" + tag + ".log";
      const std::string prefix = "churn" + std::to_string(id) + "-";
      while (!stop && Clock::now() < until) {
        const std::uint64_t cycle = cycles.fetch_add(1);
        if (cycle >= n) {
          cycles.fetch_sub(1);
          return;
        }
        std::remove(clog.c_str());
        Child c;
        if (!spawn(&c, good_args(prefix, 3600, lrng()), clog)) return fail("spawn failed");
        // Loading (its predecessor's keys deleted, or gone); then a random while of PUT/GET, then SIGKILL.
        // 60 s: the client makes up to three connection attempts of up to 20 s each.
        const bool loading = wait_for(
            [&] { return !c.running() || read_file(clog).find("good: loading") != std::string::npos; }, 60s);
        if (!loading || !c.running()) {
          return fail("cycle " + std::to_string(cycle) + ": the client did not start loading:\n" +
                      read_file(clog));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(lrng() % 400));
        const bool still_running = c.running();
        kill(c.pid, SIGKILL);
        waitpid(c.pid, nullptr, 0);
        c.pid = -1;
        const std::string out = read_file(clog);
        if (out.find("MISMATCH") != std::string::npos)
          return fail("cycle " + std::to_string(cycle) + ":\n" + out);
        if (!still_running)
          return fail("cycle " + std::to_string(cycle) + ": the client ended on its own:\n" + out);
        ++loaded;
        if (cycle % 100 == 99) {
          std::printf("churn soak: %" PRIu64 " cycles in %.0f s, gateway RSS %.1f MiB\n", cycle + 1,
                      std::chrono::duration<double>(Clock::now() - t0).count(),
                      metric(metrics_text(), "process_resident_memory_bytes") / 1048576.0);
          std::fflush(stdout);
        }
      }
    };
    std::vector<std::thread> lane_threads;
    for (unsigned i = 0; i < lanes; ++i) lane_threads.emplace_back(lane, i, rng());
    // This thread watches the gateway and the background clients.
    while (!stop && cycles.load() < n && Clock::now() < until) {
      for (std::size_t i = 0; i < bg.size(); ++i) {
        if (!bg[i]->running())
          fail("background client " + std::to_string(i) + " ended:\n" + read_file(bg_logs[i]));
      }
      if (!d.running()) fail("the gateway died:\n" + d.log());
      std::this_thread::sleep_for(200ms);
    }
    for (auto& t : lane_threads) t.join();
    secs = std::chrono::duration<double>(Clock::now() - t0).count();
    *done = cycles.load();
    killed_loaded = loaded.load();
    // The background clients are killed too (their answers were checked as they came).
    for (auto& b : bg) kill(b->pid, SIGKILL), waitpid(b->pid, nullptr, 0), b->pid = -1;
    for (std::size_t i = 0; i < bg.size(); ++i) {
      if (read_file(bg_logs[i]).find("MISMATCH") != std::string::npos) fail(read_file(bg_logs[i]));
    }
    if (!failure.empty()) return failure;
    std::vector<std::string> prefixes{"bg0-", "bg1-"};
    for (unsigned i = 0; i < lanes; ++i) prefixes.push_back("churn" + std::to_string(i) + "-");
    for (const std::string& prefix : prefixes) {
      Child last;
      const std::string llog = "/tmp/hostile_last_" + tag + ".log";
      std::remove(llog.c_str());
      if (!spawn(&last, good_args(prefix, 0.5, rng()), llog) || last.wait_exit(120s) != 0)
        return "the last run of " + prefix + " failed:\n" + read_file(llog);
    }
    return "";
  };

  // The starting values: after a warm-up phase of 100 cycles of the same churn, so that the first
  // registrations, the allocator's arenas and ASan's quarantine are already in the RSS. Measured: the daemon's
  // RSS rises for about 200 cycles and then stays flat (140.0, 140.3, 140.4 MiB at 200, 300, 400 cycles); a
  // 20-cycle warm-up took the baseline in the middle of that rise.
  std::uint64_t warm_cycles = 0;
  const std::string warm = phase(100, Clock::now() + 10min, &warm_cycles);
  ASSERT_EQ(warm, "") << "warm-up, seed " << seed;
  Gauges empty = read_gauges();
  ASSERT_TRUE(wait_for([&] { return settled(empty = read_gauges(), empty); }, 60s));
  for (const char* name : kSoakGauges) ASSERT_GE(empty.v[name], 0) << name << " is not on /metrics";
  std::printf("churn soak: warm-up of %" PRIu64 " cycles done, gateway RSS %.1f MiB\n", warm_cycles,
              empty.v["process_resident_memory_bytes"] / 1048576.0);

  std::uint64_t cycles = 0;
  const std::string result = phase(cycles_wanted, soak_end, &cycles);
  ASSERT_EQ(result, "") << "seed " << seed;
  ASSERT_TRUE(d.running()) << d.log();
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
  EXPECT_EQ(killed_loaded, cycles) << "every client must be killed while loading";
  const int exit_code = d.stop();
  const std::string log = d.log();
  EXPECT_EQ(sanitizer_report(log), "") << log;
  EXPECT_EQ(exit_code, 0) << log;
}

// ---- message loss
// ------------------------------------------------------------------------------------------

// Loss on the wire cannot be made in the guest: rdma_rxe sends to a GID of its own device through its
// loopback path, never through a netdev, so a netem qdisc never sees a packet (measured:
// docs/reliability.md), and RC would retransmit wire loss invisibly anyway. The gateway's own fault injection
// loses whole messages instead (faults.rules, docs/faults.md), in both directions, at 1% and 5%: requests
// that never reach the service and answers that never leave. The verifying client must see only timeouts
// (errors), never a wrong byte, and finish on time; the gateway stays ready and ends with no connection and
// nothing reserved or pinned beyond its keys.
TEST(Loss, MessageLossUnderLoad) {
  struct Run {
    double rate;
    std::uint64_t ops = 0, errors = 0, mismatches = 0;
    double mb_per_s = 0, drops = 0;
  };
  std::vector<Run> runs{{0.0}, {0.01}, {0.05}};
  const std::string tag = std::to_string(getpid());
  for (Run& run : runs) {
    Daemon d("loss");
    std::string faults = "faults:\n  rules: []\n";
    if (run.rate > 0) {
      char rule[96];
      std::snprintf(rule, sizeof(rule),
                    "faults:\n  rules: [\"drop dir=both type=request,answer rate=%.2f\"]\n", run.rate);
      faults = rule;
    }
    ASSERT_TRUE(d.start(faults)) << d.log();
    const std::string m0 = metrics_text();
    if (run.rate > 0) {
      ASSERT_GE(metric(m0, "rdmagate_fault_rules"), 1)
          << "the daemon did not install faults.rules (no rdmagate_fault_rules gauge at 1):\n"
          << d.log();
    }
    const std::string json = "/tmp/hostile_loss_" + tag + ".json", blog = "/tmp/hostile_loss_" + tag + ".log";
    std::remove(json.c_str());
    std::remove(blog.c_str());
    Child bench;
    ASSERT_TRUE(spawn(&bench,
                      {g_self,
                       "bench",
                       "mixed",
                       "--verify",
                       "-s",
                       "4096,65536",
                       "-q",
                       "2",
                       "-t",
                       "4",
                       "-D",
                       "10",
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
                       json,
                       rxe_addr()},
                      blog));
    // No hang: the bench's 2 x 10 s plus set-up and its requests' timeouts, with room for TCG.
    const int rc = bench.wait_exit(240s);
    ASSERT_NE(rc, -1) << "the bench did not finish at loss " << run.rate << ":\n" << read_file(blog);
    const auto j = nlohmann::json::parse(read_file(json), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << read_file(blog);
    for (const auto& row : j.at("rows")) {
      run.ops += row.value("ops", 0ull);
      run.mb_per_s += row.value("mb_per_s", 0.0) / static_cast<double>(j.at("rows").size());
    }
    run.errors = j.value("errors", 0ull);
    run.mismatches = j.value("mismatches", 0ull);
    const std::string m1 = metrics_text();
    run.drops = std::max(0.0, metric(m1, "rdmagate_faults_injected_total", {{"action", "drop"}}));
    EXPECT_EQ(run.mismatches, 0u) << "loss " << run.rate << ": " << j.dump();
    EXPECT_GT(run.ops, 0u) << "loss " << run.rate;
    if (run.rate == 0) {
      EXPECT_EQ(run.errors, 0u) << j.dump();
    } else {
      EXPECT_GT(run.drops, 0) << "loss " << run.rate << ": nothing was dropped";
    }
    EXPECT_TRUE(d.running()) << d.log();
    EXPECT_EQ(Daemon::http(g_http_port, "/readyz").status, 200);
    EXPECT_TRUE(wait_for([] { return metric(metrics_text(), "rdmagate_connections") <= 0; }, 60s))
        << "connections left after the bench at loss " << run.rate;
    const int exit_code = d.stop();
    EXPECT_EQ(sanitizer_report(d.log()), "") << d.log();
    EXPECT_EQ(exit_code, 0) << d.log();
  }
  std::printf("loss: %-6s %10s %10s %8s %10s %10s\n", "rate", "ops", "MB/s", "errors", "mismatches",
              "dropped");
  for (const Run& r : runs) {
    std::printf("loss: %-6.2f %10" PRIu64 " %10.2f %8" PRIu64 " %10" PRIu64 " %10.0f\n", r.rate, r.ops,
                r.mb_per_s, r.errors, r.mismatches, r.drops);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) return rdmagate_bench_main(argc - 1, argv + 1);
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

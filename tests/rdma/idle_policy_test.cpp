// The idle policies on real RDMA (rxe in the guest): a passive engine whose core runs idle_policy busy,
// backoff or event, and an active engine with the verifying echo client, in one process.
//
// For each policy: an echo run (one request in flight, every byte verified), then one second with the
// connection idle, in which the server core's thread is measured from /proc (CPU time, context switches).
// With event the core must sleep: near-zero CPU and a handful of context switches, and a second connection's
// echo run afterwards (its ADOPT and first request wake the core) is served and verified. The echo round
// trip and the idle CPU of each policy are printed for comparison, not asserted (a guest's timing is not a
// test's business).
//
// Lcores (2 vCPUs): EAL --lcores=0@0,1@1,2@0: the main thread (control loops) and the client core share CPU 0
// (the client core yields), the server core has CPU 1.
//
// Every wait has a deadline. Without RDMA the binary prints one line and exits 77.
#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "control/engine.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "telemetry/stats.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tests/support/test_services.hpp"
#include "tools/bench/echo_client_service.hpp"

namespace {

using namespace rdmagate;
using control::Engine;
using control::EngineConfig;
using Clock = std::chrono::steady_clock;
using rdmagate::testfix::rxe_addr;

std::string g_device;
constexpr unsigned kServerLcore = 1;
constexpr unsigned kClientLcore = 2;
constexpr std::uint32_t kBufSize = 1024;
constexpr std::uint64_t kEchoes = 2000;

// The echo service, recording the thread it runs on (its first request: one gettid per core lifetime).
struct TidEchoService : dataplane::EchoService {
  std::atomic<pid_t> tid{0};
  template <typename Api>
  void on_request_st(Api& api, dataplane::CoreConn& c, const protocol::Message& m) noexcept {
    if (tid.load(std::memory_order_relaxed) == 0) tid.store(gettid(), std::memory_order_relaxed);
    EchoService::on_request_st(api, c, m);
  }
};

EngineConfig engine_config(const char* name, bool passive, unsigned lcore, dataplane::IdlePolicy idle) {
  EngineConfig e;
  e.name = name;
  e.device = g_device;
  e.passive = passive;
  dataplane::CoreConfig c;
  c.lcore = lcore;
  c.max_conns = 8;
  c.rx_per_conn = 32;
  c.tx_per_conn = 96;
  c.buf_size = kBufSize;
  c.idle = idle;
  c.idle_yield_after = 64;
  c.idle_event_after_us = 1000;
  e.cores.push_back(c);
  e.local.params = protocol::ConnParams{32, kBufSize, protocol::kMaxFragments, 1u << 20};
  e.local.min_queue_depth = protocol::kMinCreditQueueDepth;
  e.signal_interval = 8;
  e.handshake_timeout = std::chrono::seconds(10);
  return e;
}

template <typename Pred>
bool poll_both(Engine& a, Engine& b, Pred pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    a.poll_st(1);
    b.poll_st(1);
  }
  return true;
}

// What /proc says of one thread: CPU time (user + system, clock ticks) and context switches.
struct ThreadUsage {
  std::uint64_t cpu_ticks = 0;
  std::uint64_t voluntary = 0;
  std::uint64_t involuntary = 0;
};

ThreadUsage thread_usage(pid_t tid) {
  ThreadUsage u;
  const std::string dir = "/proc/self/task/" + std::to_string(tid) + "/";
  std::ifstream stat(dir + "stat");
  std::string line;
  std::getline(stat, line);
  // Fields after the command (which may hold spaces): state is field 3, utime 14, stime 15.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string f;
  for (int field = 3; field <= 15 && rest >> f; ++field) {
    if (field == 14 || field == 15) u.cpu_ticks += std::stoull(f);
  }
  std::ifstream status(dir + "status");
  while (std::getline(status, line)) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) u.voluntary = std::stoull(line.substr(24));
    if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) u.involuntary = std::stoull(line.substr(27));
  }
  return u;
}

const char* policy_name(dataplane::IdlePolicy p) {
  switch (p) {
    case dataplane::IdlePolicy::kBusy:
      return "busy";
    case dataplane::IdlePolicy::kPause:
      return "pause";
    case dataplane::IdlePolicy::kBackoff:
      return "backoff";
    case dataplane::IdlePolicy::kYield:
      return "yield";
    case dataplane::IdlePolicy::kEvent:
      return "event";
  }
  return "?";
}

class IdlePolicyGuest : public ::testing::TestWithParam<dataplane::IdlePolicy> {};

TEST_P(IdlePolicyGuest, EchoThenIdleThenEchoAgain) {
  const dataplane::IdlePolicy policy = GetParam();
  std::string err;
  std::unique_ptr<Engine> server = Engine::create(engine_config("server", true, kServerLcore, policy), &err);
  ASSERT_TRUE(server) << err;
  std::unique_ptr<Engine> client =
      Engine::create(engine_config("client", false, kClientLcore, dataplane::IdlePolicy::kYield), &err);
  ASSERT_TRUE(client) << err;
  auto block = std::make_unique<telemetry::CoreStats>();
  server->core(0).stats = block.get();
  TidEchoService echo;
  dataplane::EchoClientConfig load;
  load.messages_per_conn = kEchoes;
  load.max_payload = 512;
  load.window = 1;  // one request in flight: the round trip is the echo latency
  dataplane::EchoClientResults results;
  dataplane::EchoClientService client_svc(load, results);
  {
    std::vector<std::unique_ptr<control::CoreRunner>> sr, cr;
    sr.push_back(dataplane::make_core_runner(server->backend_kind(), server->core(0), echo));
    cr.push_back(dataplane::make_core_runner(client->backend_kind(), client->core(0), client_svc));
    ASSERT_TRUE(server->launch_cores(std::move(sr), &err)) << err;
    ASSERT_TRUE(client->launch_cores(std::move(cr), &err)) << err;
  }
  const std::uint16_t port = server->listen(rxe_addr(), 0, &err);
  ASSERT_NE(port, 0) << err;

  ASSERT_NE(client->connect(rxe_addr(), port, &err), 0u) << err;
  ASSERT_TRUE(poll_both(
      *server, *client, [&] { return results.connections_done.load() == 1; }, std::chrono::seconds(90)))
      << "verified " << results.verified.load();
  EXPECT_EQ(results.verified.load(), kEchoes);
  EXPECT_EQ(results.mismatches.load(), 0u);
  const double rtt_us = static_cast<double>(results.sum_rtt_tsc.load()) / static_cast<double>(kEchoes) /
                        static_cast<double>(rte_get_tsc_hz()) * 1e6;
  const pid_t tid = echo.tid.load();
  ASSERT_NE(tid, 0);

  // The connection idles (the client has sent everything). Give the policy its idle time, then measure.
  const bool event = policy == dataplane::IdlePolicy::kEvent;
  if (event) {
    EXPECT_TRUE(poll_both(
        *server, *client, [&] { return block->load(telemetry::Stat::kSleeping) == 1; },
        std::chrono::seconds(10)))
        << "the event core did not go to sleep";
  }
  const ThreadUsage before = thread_usage(tid);
  const auto t0 = Clock::now();
  poll_both(
      *server, *client, [] { return false; }, std::chrono::seconds(1));
  const ThreadUsage after = thread_usage(tid);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = static_cast<double>(after.cpu_ticks - before.cpu_ticks) /
                     static_cast<double>(sysconf(_SC_CLK_TCK)) / secs;
  const std::uint64_t vol = after.voluntary - before.voluntary;
  const std::uint64_t invol = after.involuntary - before.involuntary;
  const auto state_s = [&](dataplane::PollerState st) {
    return static_cast<double>(block->load(telemetry::poller_state_stat(static_cast<std::size_t>(st)))) /
           static_cast<double>(rte_get_tsc_hz());
  };
  std::printf(
      "idle_policy_test: policy %s: echo round trip %.1f us (avg of %llu, window 1); idle core CPU %.1f %%, "
      "%llu voluntary + %llu involuntary context switches in %.2f s; core time so far: busy %.3f idle %.3f "
      "backoff %.3f sleep %.3f s\n",
      policy_name(policy), rtt_us, static_cast<unsigned long long>(kEchoes), cpu * 100,
      static_cast<unsigned long long>(vol), static_cast<unsigned long long>(invol), secs,
      state_s(dataplane::PollerState::kBusy), state_s(dataplane::PollerState::kIdle),
      state_s(dataplane::PollerState::kBackoff), state_s(dataplane::PollerState::kSleep));
  if (event) {
    EXPECT_LT(cpu, 0.05) << "a sleeping core uses next to no CPU";
    EXPECT_LT(vol + invol, 20u) << "a sleeping core is not woken without cause";

    // A second connection: its ADOPT (a command) and its requests wake the core; every byte verified.
    // Which of the two wakes it first is a race: the peer's first request may reach the CQ before the ADOPT
    // reaches the core, which is then awake when the command arrives. So the wakeups are counted together;
    // the command alone waking a sleeping core is CoreLoopEvent.SleepsWhenIdleAndWakesForACommandAndFor-
    // ACompletion's (host, fake backend).
    const std::uint64_t sleeps = block->load(telemetry::Stat::kSleeps);
    const auto woken = [&] {
      return block->load(telemetry::wakeup_stat(static_cast<std::size_t>(dataplane::WakeSource::kCommand))) +
             block->load(
                 telemetry::wakeup_stat(static_cast<std::size_t>(dataplane::WakeSource::kCompletion)));
    };
    const std::uint64_t woken_before = woken();
    ASSERT_NE(client->connect(rxe_addr(), port, &err), 0u) << err;
    ASSERT_TRUE(poll_both(
        *server, *client, [&] { return results.connections_done.load() == 2; }, std::chrono::seconds(90)))
        << "verified " << results.verified.load();
    EXPECT_EQ(results.verified.load(), 2 * kEchoes);
    EXPECT_EQ(results.mismatches.load(), 0u);
    // The counts reach the block when the core publishes, just before its next sleep.
    EXPECT_TRUE(poll_both(
        *server, *client, [&] { return woken() > woken_before; }, std::chrono::seconds(10)))
        << "the second connection did not wake the sleeping core";
    EXPECT_GT(block->load(telemetry::Stat::kIdleArms), 0u);
    std::printf(
        "idle_policy_test: event: %llu sleeps before the second connection, %llu after; wakeups "
        "completion %llu command %llu timer %llu\n",
        static_cast<unsigned long long>(sleeps),
        static_cast<unsigned long long>(block->load(telemetry::Stat::kSleeps)),
        static_cast<unsigned long long>(block->load(telemetry::wakeup_stat(0))),
        static_cast<unsigned long long>(block->load(telemetry::wakeup_stat(1))),
        static_cast<unsigned long long>(block->load(telemetry::wakeup_stat(2))));
  } else {
    EXPECT_EQ(block->load(telemetry::Stat::kSleeps), 0u) << "only event sleeps";
  }
  EXPECT_EQ(echo.send_failures, 0u);

  client->begin_shutdown_st();
  EXPECT_TRUE(poll_both(
      *server, *client, [&] { return client->drained_st() && server->drained_st(); },
      std::chrono::seconds(30)));
  client->stop_cores_st();
  server->begin_shutdown_st();
  server->stop_cores_st();
  for (std::size_t i = 0; i < dataplane::kCoreErrorCount; ++i) {
    EXPECT_EQ(server->core(0).counters.errors[i], 0u) << "server core error " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, IdlePolicyGuest,
                         ::testing::Values(dataplane::IdlePolicy::kBusy, dataplane::IdlePolicy::kPause,
                                           dataplane::IdlePolicy::kBackoff, dataplane::IdlePolicy::kEvent),
                         [](const ::testing::TestParamInfo<dataplane::IdlePolicy>& i) {
                           return std::string(policy_name(i.param));
                         });

}  // namespace

int main(int argc, char** argv) {
  return rdmagate::testfix::rdma_test_main(argc, argv, "idle_policy_test", "0@0,1@1,2@0",
                                           [](const rdmagate::control::RdmaProbe&) {
                                             g_device = rdmagate::testfix::rdma_device();
                                             return 0;
                                           });
}

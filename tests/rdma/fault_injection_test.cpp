// Runtime fault injection on a running gateway (issue 15, docs/faults.md), in the guest over rxe: the daemon
// (this binary re-executed as "daemon") starts without rules; the test rewrites faults.rules in its file and
// sends SIGHUP, and for each set of rules a client-library client sees the effect and /metrics counts it:
//   - drop every 2nd received GET: the 2nd GET times out (the client closes and reconnects), the 1st and 3rd
//     answer; a PUT's answer delayed 300 ms arrives no sooner;
//   - corrupt the next received message: the connection closes as a protocol violation (bad_magic);
//   - stall the core 1.5 s: counted, the stall time published, the gateway serves after it;
//   - qp_err for the client's address: its connection fails and comes back;
//   - no rules: every request answers again and fault_rules says 0.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/client.hpp"
#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tests/rdma/rdma_test_support.hpp"

int rdmagate_main(int argc, char** argv);

namespace {

using namespace rdmagate;
using namespace std::chrono_literals;
using testfix::proc::Child;
using testfix::proc::http_get;
using testfix::proc::metric;
using testfix::proc::read_file;
using testfix::proc::wait_for;
using Clock = std::chrono::steady_clock;

std::string g_self;
std::string g_device;
int g_rdma_port = 8100;
int g_http_port = 19900;

std::string gateway_yaml(const std::vector<std::string>& rules) {
  std::string y = testfix::proc::test_gateway_yaml(testfix::rxe_addr(), g_rdma_port, g_http_port);
  y += "faults:\n  rules: [";
  for (std::size_t i = 0; i < rules.size(); ++i) y += (i == 0 ? "\"" : ", \"") + rules[i] + "\"";
  y += "]\n";
  return y;
}

double injected(const std::string& m, const char* action, const char* dir) {
  return metric(m, "rdmagate_faults_injected_total", {{"action", action}, {"dir", dir}});
}

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

class FaultInjection : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tag = std::to_string(getpid());
    yaml_ = "/tmp/fit_" + tag + ".yaml";
    log_ = "/tmp/fit_" + tag + ".log";
    ASSERT_TRUE(
        testfix::proc::start_test_gateway(&daemon_, g_self, yaml_, gateway_yaml({}), log_, g_http_port))
        << read_file(log_);
    client::ClientConfig cc;
    cc.progress = client::Progress::kThread;
    cc.gateways.push_back(client::Endpoint{testfix::rxe_addr(), static_cast<std::uint16_t>(g_rdma_port)});
    cc.device = g_device;
    cc.connections_per_gateway = 1;
    cc.pool_bytes = 1u << 20;
    cc.request_timeout = 2s;  // a dropped request is given up on this soon
    std::string err;
    cl_ = client::Client::create(cc, &err);
    ASSERT_TRUE(cl_) << err;
    ASSERT_TRUE(connected()) << read_file(log_);
  }
  void TearDown() override {
    cl_.reset();
    if (daemon_.pid > 0) {
      kill(daemon_.pid, SIGTERM);
      EXPECT_EQ(daemon_.wait_exit(30s), 0) << read_file(log_);
    }
  }

  bool connected() {
    return wait_for([&] { return cl_->stats().connections_up == 1; }, 60s);
  }
  // Rewrites faults.rules and reloads; true once /metrics shows the new rule count.
  bool install(const std::vector<std::string>& rules) {
    testfix::proc::write_file(yaml_, gateway_yaml(rules));
    kill(daemon_.pid, SIGHUP);
    return wait_for(
        [&] {
          return metric(http_get(g_http_port, "/metrics").body, "rdmagate_fault_rules") ==
                 static_cast<double>(rules.size());
        },
        20s);
  }
  client::Status get(const std::string& key, std::string* out) {
    out->assign(64, '\0');
    const client::Result r = cl_->get(key, out->data(), out->size());
    out->resize(r.status == client::Status::kOk ? r.size : 0);
    return r.status;
  }
  std::string metrics() { return http_get(g_http_port, "/metrics").body; }
  // /metrics once `injected(action, where)` shows at least one, or after 2 s. A count shows from the next
  // stats publication (every 100 ms) after the core or control counted it, which the client's next answer
  // may beat.
  std::string metrics_once_injected(const char* action, const char* where) {
    std::string m;
    wait_for(
        [&] {
          m = metrics();
          return injected(m, action, where) >= 1;
        },
        2s);
    return m;
  }

  Child daemon_;
  std::string yaml_, log_;
  std::unique_ptr<client::Client> cl_;
};

TEST_F(FaultInjection, RulesInstalledBySighupActAndAreCounted) {
  const std::string value = "fault injection value";
  std::string got;
  const std::string m0 = metrics();
  EXPECT_EQ(metric(m0, "rdmagate_fault_rules"), 0) << "no rules at start";
  EXPECT_EQ(injected(m0, "drop", "rx"), 0);
  ASSERT_EQ(cl_->put("k", value.data(), value.size()).status, client::Status::kOk);

  // Drop every 2nd received GET; delay every PUT answer 300 ms.
  ASSERT_TRUE(
      install({"drop dir=rx type=request opcode=get every=2", "delay dir=tx type=answer opcode=put ms=300"}))
      << read_file(log_);
  auto t0 = Clock::now();
  ASSERT_EQ(cl_->put("k", value.data(), value.size()).status, client::Status::kOk);
  const double put_ms = ms(Clock::now() - t0);
  EXPECT_GE(put_ms, 300) << "the PUT's answer was not held";
  EXPECT_EQ(get("k", &got), client::Status::kOk);
  EXPECT_EQ(got, value);
  t0 = Clock::now();
  EXPECT_EQ(get("k", &got), client::Status::kTimeout) << "the 2nd GET was answered";
  const double dropped_ms = ms(Clock::now() - t0);
  ASSERT_TRUE(connected()) << "no reconnect after the timeout";
  EXPECT_EQ(get("k", &got), client::Status::kOk);
  EXPECT_EQ(got, value);
  const std::string m1 = metrics();
  EXPECT_EQ(injected(m1, "drop", "rx"), 1);
  EXPECT_EQ(injected(m1, "delay", "tx"), 1);
  std::printf(
      "fault_injection: drop every 2nd GET: 1 dropped (client timeout after %.0f ms), delay PUT answer "
      "300 ms: PUT took %.0f ms\n",
      dropped_ms, put_ms);

  // Corrupt the next received message: its connection closes as a protocol violation.
  const double violations0 = metric(m1, "rdmagate_protocol_violations_total", {{"code", "bad_magic"}});
  ASSERT_TRUE(install({"corrupt dir=rx count=1"})) << read_file(log_);
  const client::Status corrupted = get("k", &got);
  EXPECT_NE(corrupted, client::Status::kOk);
  ASSERT_TRUE(connected()) << "no reconnect after the protocol violation";
  EXPECT_EQ(get("k", &got), client::Status::kOk);  // count=1: spent
  const std::string m2 = metrics_once_injected("corrupt", "rx");
  EXPECT_EQ(injected(m2, "corrupt", "rx"), 1);
  EXPECT_EQ(metric(m2, "rdmagate_protocol_violations_total", {{"code", "bad_magic"}}),
            (violations0 < 0 ? 0 : violations0) + 1);
  std::printf("fault_injection: corrupt: the request ended %s, bad_magic violations %.0f\n",
              client::status_name(corrupted),
              metric(m2, "rdmagate_protocol_violations_total", {{"code", "bad_magic"}}));

  // Stall the core 1.5 s, once.
  t0 = Clock::now();
  ASSERT_TRUE(install({"stall ms=1500 core=0"})) << read_file(log_);
  EXPECT_EQ(get("k", &got), client::Status::kOk);
  // The core counts the stall as it ends, just before it serves the GET.
  const std::string m3 = metrics_once_injected("stall", "core");
  EXPECT_EQ(injected(m3, "stall", "core"), 1);
  EXPECT_GE(metric(m3, "rdmagate_fault_stall_seconds_total"), 1.5);
  std::printf("fault_injection: stall 1500 ms: counted, %.3f s stalled, first GET after %.0f ms\n",
              metric(m3, "rdmagate_fault_stall_seconds_total"), ms(Clock::now() - t0));

  // The client's QP to ERR: its connection fails and comes back.
  const std::uint64_t lost0 = cl_->stats().connection_lost + cl_->stats().reconnects;
  ASSERT_TRUE(install({"qp_err peer=" + testfix::rxe_addr()})) << read_file(log_);
  EXPECT_TRUE(wait_for([&] { return cl_->stats().connection_lost + cl_->stats().reconnects > lost0; }, 20s));
  ASSERT_TRUE(connected()) << "no reconnect after qp_err";
  EXPECT_EQ(get("k", &got), client::Status::kOk);
  EXPECT_GE(injected(metrics_once_injected("qp_err", "peer"), "qp_err", "peer"), 1);

  // No rules: every request answers.
  ASSERT_TRUE(install({})) << read_file(log_);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(get("k", &got), client::Status::kOk) << i;
  const std::string m4 = metrics();
  EXPECT_EQ(injected(m4, "drop", "rx"), 1) << "nothing injected without rules";
  EXPECT_TRUE(daemon_.running()) << read_file(log_);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  // No EAL here: the daemon starts its own; the client runs in kThread mode, without EAL.
  return rdmagate::testfix::rdma_test_main(argc, argv, "fault_injection_test", /*eal_lcores=*/nullptr,
                                           [](const rdmagate::control::RdmaProbe& probe) {
                                             g_self = rdmagate::testfix::self_exe("fault_injection_test");
                                             if (g_self.empty()) return 1;
                                             g_device = probe.device;
                                             g_rdma_port = 8100 + static_cast<int>(getpid() % 40) * 2;
                                             g_http_port = 19900 + static_cast<int>(getpid() % 90);
                                             return 0;
                                           });
}

// The engine across processes (rxe guest): a client killed with SIGKILL mid-stream, a server restarted under a
// reconnecting client, and SIGTERM drains that exit 0. The parent never initialises EAL: it re-executes
// itself as engine peers ("engine_process_test peer server|client ...", tests/rdma/engine_peer.cpp linked in)
// and watches their status files, every wait with a deadline.
//
// Lcores: each process pins its control thread and its core to different vCPUs (server 0@0,1@1; client
// 0@1,1@0); both cores use the yielding idle policy, since the two processes share the guest's 2 vCPUs.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/rdma/rdma_test_main.hpp"
#include "tests/rdma/status_file.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using rdmagate::testfix::num;
using rdmagate::testfix::read_status;
std::string g_peer;
int g_port_base = 7400;

using rdmagate::testfix::rxe_addr;

struct Peer {
  pid_t pid = -1;
  std::string status;
  ~Peer() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

bool spawn_peer(Peer* p, const std::vector<std::string>& args, const std::string& status) {
  std::remove(status.c_str());
  p->status = status;
  std::vector<std::string> full{g_peer, "peer"};
  full.insert(full.end(), args.begin(), args.end());
  full.push_back("--status");
  full.push_back(status);
  std::vector<char*> argv;
  for (auto& s : full) argv.push_back(s.data());
  argv.push_back(nullptr);
  return posix_spawn(&p->pid, g_peer.c_str(), nullptr, nullptr, argv.data(), environ) == 0;
}

template <typename Pred>
bool wait_for(Pred pred, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// Waits for the process to exit; its exit code, or -1 on timeout / signal.
int wait_exit(Peer* p, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int st = 0;
    const pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r == p->pid) {
      p->pid = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

TEST(EngineProcess, ClientKilledMidStreamServerFreesEverything) {
  const std::string port = std::to_string(g_port_base + 1);
  Peer server, client;
  ASSERT_TRUE(spawn_peer(&server, {"server", "--addr", rxe_addr(), "--port", port, "--lcores", "0@0,1@1"},
                         "/tmp/engine_peer_s1"));
  ASSERT_TRUE(wait_for([&] { return num(read_status(server.status), "conns") == 0; }, std::chrono::seconds(20)))
      << "server never came up";
  ASSERT_TRUE(spawn_peer(&client, {"client", "--addr", rxe_addr(), "--port", port, "--lcores", "0@1,1@0"},
                         "/tmp/engine_peer_c1"));
  EXPECT_TRUE(wait_for([&] { return num(read_status(server.status), "rx") + 1 > 2001; }, std::chrono::seconds(30)))
      << "no traffic";
  EXPECT_EQ(num(read_status(server.status), "conns"), 1u);
  kill(client.pid, SIGKILL);
  waitpid(client.pid, nullptr, 0);
  client.pid = -1;
  const auto t0 = Clock::now();
  EXPECT_TRUE(wait_for([&] { return num(read_status(server.status), "conns") == 0; }, std::chrono::seconds(30)))
      << "server still holds the killed client's connection";
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto st = read_status(server.status);
  std::printf("engine_process: client SIGKILLed after %s server rx; server connection count back to %s in %.2f s\n",
              st.at("rx").c_str(), st.at("conns").c_str(), secs);
  kill(server.pid, SIGTERM);
  EXPECT_EQ(wait_exit(&server, std::chrono::seconds(20)), 0);
}

TEST(EngineProcess, ServerRestartClientReconnectsWithBackoffSigtermDrainsExitZero) {
  const std::string port = std::to_string(g_port_base + 2);
  Peer server, client;
  const std::vector<std::string> sargs{"server", "--addr", rxe_addr(), "--port", port, "--lcores", "0@0,1@1"};
  ASSERT_TRUE(spawn_peer(&server, sargs, "/tmp/engine_peer_s2"));
  ASSERT_TRUE(wait_for([&] { return num(read_status(server.status), "conns") == 0; }, std::chrono::seconds(20)));
  ASSERT_TRUE(spawn_peer(&client,
                         {"client", "--addr", rxe_addr(), "--port", port, "--lcores", "0@1,1@0", "--backoff-min-ms",
                          "100", "--backoff-max-ms", "1600"},
                         "/tmp/engine_peer_c2"));
  ASSERT_TRUE(wait_for([&] { return num(read_status(client.status), "rx") + 1 > 2001; }, std::chrono::seconds(30)));

  // SIGTERM under load: the server drains and exits 0.
  kill(server.pid, SIGTERM);
  EXPECT_EQ(wait_exit(&server, std::chrono::seconds(20)), 0) << "server SIGTERM drain";
  EXPECT_EQ(num(read_status("/tmp/engine_peer_s2"), "conns"), 0u);
  const std::uint64_t rx_before = num(read_status(client.status), "rx");
  // Leave the client a few failed attempts, then restart the server on the same port.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  Peer server2;
  ASSERT_TRUE(spawn_peer(&server2, sargs, "/tmp/engine_peer_s3"));
  EXPECT_TRUE(wait_for([&] {
    const auto st = read_status(client.status);
    return num(st, "owned") == 1 && num(st, "rx") != UINT64_MAX && num(st, "rx") > rx_before + 2000;
  }, std::chrono::seconds(40))) << "client did not carry on after the restart";
  const auto cst = read_status(client.status);
  std::printf("engine_process: server restarted; client reconnects %s, backoff delays seen (ms) %s; rx %llu -> %s, "
              "mismatches %s\n",
              cst.at("reconnects").c_str(), cst.at("delays_ms").c_str(), static_cast<unsigned long long>(rx_before),
              cst.at("rx").c_str(), cst.at("mismatches").c_str());
  EXPECT_GE(num(cst, "reconnects"), 2u);
  EXPECT_EQ(num(cst, "mismatches"), 0u);
  EXPECT_EQ(num(read_status(server2.status), "conns"), 1u);

  kill(client.pid, SIGTERM);
  EXPECT_EQ(wait_exit(&client, std::chrono::seconds(20)), 0) << "client SIGTERM drain";
  EXPECT_TRUE(wait_for([&] { return num(read_status(server2.status), "conns") == 0; }, std::chrono::seconds(20)));
  kill(server2.pid, SIGTERM);
  EXPECT_EQ(wait_exit(&server2, std::chrono::seconds(20)), 0);
}

// SIGTERM during load (issue 4): the server stops accepting, quiesces (requests arriving now are answered
// kCompletion kNoResources, never started), lets in-flight ones finish, then disconnects and exits 0. The
// client keeps a window of 16 requests in flight the whole time: every request it sent is answered, either
// echoed (payload verified) or refused with that clear status; none is lost unless the drain timed out.
TEST(EngineProcess, SigtermDuringLoadQuiescesAndAnswersEveryRequest) {
  const std::string port = std::to_string(g_port_base + 3);
  Peer server, client;
  ASSERT_TRUE(spawn_peer(&server, {"server", "--addr", rxe_addr(), "--port", port, "--lcores", "0@0,1@1"},
                         "/tmp/engine_peer_s4"));
  ASSERT_TRUE(wait_for([&] { return num(read_status(server.status), "conns") == 0; }, std::chrono::seconds(20)))
      << "server never came up";
  ASSERT_TRUE(spawn_peer(&client,
                         {"client", "--addr", rxe_addr(), "--port", port, "--lcores", "0@1,1@0", "--window", "16",
                          "--backoff-min-ms", "200", "--backoff-max-ms", "400"},
                         "/tmp/engine_peer_c4"));
  ASSERT_TRUE(wait_for([&] { return num(read_status(server.status), "rx") + 1 > 3001; }, std::chrono::seconds(30)))
      << "no traffic";
  kill(server.pid, SIGTERM);
  const auto t0 = Clock::now();
  EXPECT_EQ(wait_exit(&server, std::chrono::seconds(30)), 0) << "server SIGTERM drain";
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto sst = read_status("/tmp/engine_peer_s4");
  // The client's connection closed (the server disconnected): its totals are in.
  EXPECT_TRUE(wait_for([&] { return num(read_status(client.status), "sent") != 0 &&
                                    num(read_status(client.status), "sent") != UINT64_MAX; },
                       std::chrono::seconds(20)))
      << "the client never saw its connection close";
  kill(client.pid, SIGTERM);
  EXPECT_EQ(wait_exit(&client, std::chrono::seconds(30)), 0) << "client SIGTERM";
  const auto cst = read_status("/tmp/engine_peer_c4");
  std::printf("engine_process: SIGTERM under load: server exit in %.2f s, server rx %s, refused while quiescing %s, "
              "quiesce timeouts %s; client sent %s, answered %s (refused %s), lost %s, mismatches %s\n",
              secs, sst.at("rx").c_str(), sst.at("srv_refused").c_str(), sst.at("quiesce_timeouts").c_str(),
              cst.at("sent").c_str(), cst.at("answered").c_str(), cst.at("refused").c_str(), cst.at("lost").c_str(),
              cst.at("mismatches").c_str());
  EXPECT_EQ(num(sst, "conns"), 0u);
  EXPECT_GT(num(cst, "sent"), 3000u);
  EXPECT_EQ(num(cst, "mismatches"), 0u) << "every echoed payload verified";
  EXPECT_EQ(num(cst, "refused"), num(sst, "srv_refused")) << "every refusal the server sent arrived";
  if (num(sst, "quiesce_timeouts") == 0) {
    EXPECT_EQ(num(cst, "sent"), num(cst, "answered")) << "a request was lost although the drain did not time out";
    EXPECT_EQ(num(cst, "lost"), 0u);
  } else {
    ADD_FAILURE() << "the quiesce hit the drain timeout (echo answers at once: it never should here)";
  }
}

// The drain timeout: a server that holds every request after the first 2000 of a connection (never answers
// them) gets SIGTERM with a 1 s drain timeout. The quiesce cannot finish: it expires (counted), the server
// closes the connection anyway and exits 0; the client's held requests fail with the connection, counted as
// lost (sent == answered + lost), nothing else is lost or corrupted.
TEST(EngineProcess, SigtermDrainTimeoutClosesHeldRequestsCountedAsLost) {
  const std::string port = std::to_string(g_port_base + 4);
  Peer server, client;
  ASSERT_TRUE(spawn_peer(&server,
                         {"server", "--addr", rxe_addr(), "--port", port, "--lcores", "0@0,1@1", "--hold-after",
                          "2000", "--drain-ms", "1000"},
                         "/tmp/engine_peer_s5"));
  ASSERT_TRUE(wait_for([&] { return num(read_status(server.status), "conns") == 0; }, std::chrono::seconds(20)))
      << "server never came up";
  ASSERT_TRUE(spawn_peer(&client,
                         {"client", "--addr", rxe_addr(), "--port", port, "--lcores", "0@1,1@0", "--window", "16",
                          "--backoff-min-ms", "200", "--backoff-max-ms", "400"},
                         "/tmp/engine_peer_c5"));
  ASSERT_TRUE(wait_for([&] { return num(read_status(server.status), "rx") + 1 > 2001; }, std::chrono::seconds(30)))
      << "no traffic";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the client's window fills with held requests
  kill(server.pid, SIGTERM);
  const auto t0 = Clock::now();
  EXPECT_EQ(wait_exit(&server, std::chrono::seconds(30)), 0) << "server SIGTERM drain";
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto sst = read_status("/tmp/engine_peer_s5");
  EXPECT_TRUE(wait_for([&] { const std::uint64_t v = num(read_status(client.status), "sent");
                             return v != 0 && v != UINT64_MAX; },
                       std::chrono::seconds(20)))
      << "the client never saw its connection close";
  kill(client.pid, SIGTERM);
  EXPECT_EQ(wait_exit(&client, std::chrono::seconds(30)), 0) << "client SIGTERM";
  const auto cst = read_status("/tmp/engine_peer_c5");
  std::printf("engine_process: SIGTERM with held requests, drain timeout 1 s: server exit in %.2f s, quiesce "
              "timeouts %s; client sent %s, answered %s, lost with the connection %s, mismatches %s\n",
              secs, sst.at("quiesce_timeouts").c_str(), cst.at("sent").c_str(), cst.at("answered").c_str(),
              cst.at("lost").c_str(), cst.at("mismatches").c_str());
  EXPECT_EQ(num(sst, "quiesce_timeouts"), 1u);
  EXPECT_EQ(num(sst, "conns"), 0u);
  EXPECT_GE(secs, 0.9);
  EXPECT_EQ(num(cst, "answered"), 2000u);
  EXPECT_EQ(num(cst, "sent"), num(cst, "answered") + num(cst, "lost"));
  EXPECT_GE(num(cst, "lost"), 1u);
  EXPECT_LE(num(cst, "lost"), 16u);
  EXPECT_EQ(num(cst, "mismatches"), 0u);
}

}  // namespace

int engine_peer_main(int argc, char** argv);

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "peer") == 0) return engine_peer_main(argc - 1, argv + 1);
  // No EAL here: the peers (this binary, re-executed) start their own.
  return rdmagate::testfix::rdma_test_main(argc, argv, "engine_process_test", /*eal_lcores=*/nullptr,
                                           [](const rdmagate::control::RdmaProbe&) {
                                             g_peer = rdmagate::testfix::self_exe("engine_process_test");
                                             if (g_peer.empty()) return 1;
                                             g_port_base = 7400 + static_cast<int>(getpid() % 500) * 2;
                                             return 0;
                                           });
}

#pragma once
// Helpers of the guest tests that drive the rdmagate daemon as a process: children spawned with their
// output in a log, waiting, files, and the daemon's telemetry read over a plain socket (the guest has no
// HTTP client). Header-only, no EAL, no verbs.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace rdmagate::testfix::proc {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

template <typename Pred>
inline bool wait_for(Pred pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

// ---- child processes ----------------------------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  ~Child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  // Exit code, or -1 on timeout or death by signal.
  int wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      std::this_thread::sleep_for(50ms);
    }
    return -1;
  }
  bool running() {
    int st = 0;
    return pid > 0 && waitpid(pid, &st, WNOHANG) == 0;
  }
};

// argv[0] is the program; stdout and stderr go to `log` (appended); `extra_env` entries are added.
inline bool spawn(Child* c, std::vector<std::string> args, const std::string& log,
                  const std::vector<std::string>& extra_env = {}) {
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_store(extra_env);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  const int rc = posix_spawn(&c->pid, args[0].c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0;
}

// ---- HTTP (plain socket; the guest has no HTTP client) -----------------------------------------------

struct HttpReply {
  int status = 0;  // 0: no connection or no parsable answer
  std::string body;
};

// The body of a "Transfer-Encoding: chunked" answer, its chunks joined.
inline std::string http_dechunk(const std::string& s) {
  std::string out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const std::size_t eol = s.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const std::size_t n = std::strtoul(s.c_str() + pos, nullptr, 16);
    if (n == 0) break;
    out.append(s, eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return out;
}

// One GET to 127.0.0.1:port with "Connection: close", reading until the server closes or `timeout_s` passes
// without data. The daemon answers with a length; Go's servers (Prometheus) may answer chunked.
inline HttpReply http_get(int port, const std::string& path, int timeout_s = 10) {
  HttpReply r;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return r;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return r;
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return r;
  }
  std::string all;
  char buf[16384];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) all.append(buf, static_cast<std::size_t>(n));
  close(fd);
  const std::size_t head_end = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.", 0) != 0 || all.size() < 12 || head_end == std::string::npos) return r;
  r.status = std::atoi(all.c_str() + 9);
  std::string head = all.substr(0, head_end);
  std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::tolower(c); });
  r.body = all.substr(head_end + 4);
  if (head.find("transfer-encoding: chunked") != std::string::npos) r.body = http_dechunk(r.body);
  return r;
}

// Sum of every sample of `name` whose labels include `want` (Prometheus text format); -1 if none matched.
inline double metric(const std::string& exposition, const std::string& name,
                     const std::map<std::string, std::string>& want = {}) {
  std::istringstream in(exposition);
  std::string line;
  double sum = 0;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto brace = line.find('{');
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const std::string n = line.substr(0, std::min(brace, space));
    if (n != name) continue;
    std::map<std::string, std::string> labels;
    if (brace != std::string::npos && brace < space) {
      const std::string ls = line.substr(brace + 1, line.find('}') - brace - 1);
      std::size_t pos = 0;
      while (pos < ls.size()) {
        const auto eq = ls.find('=', pos);
        if (eq == std::string::npos) break;
        const auto q2 = ls.find('"', eq + 2);
        labels[ls.substr(pos, eq - pos)] = ls.substr(eq + 2, q2 - eq - 2);
        pos = q2 + 2;  // past the quote and the comma
      }
    }
    bool match = true;
    for (const auto& [k, v] : want) match = match && labels.count(k) != 0 && labels[k] == v;
    if (!match) continue;
    sum += std::strtod(line.c_str() + space + 1, nullptr);
    found = true;
  }
  return found ? sum : -1;
}

// The config of a gateway under test in the 2-vCPU guest: control on CPU 0 and one core on CPU 1 (the shipped
// placement), yielding when idle so that the test's client processes get CPU time, a 64 MiB store, and
// telemetry on loopback. `store_extra` holds further `store:` keys, each line indented by two spaces.
inline std::string test_gateway_yaml(const std::string& address, int rdma_port, int http_port,
                                     const std::string& store_extra = "") {
  return "eal:\n  main_lcore: 0\nlisten:\n  addresses: [\"" + address +
         "\"]\n  port: " + std::to_string(rdma_port) +
         "\ndataplane:\n  cores: [1]\n  idle_policy: yield\n  max_connections_per_core: 8\n"
         "store:\n  capacity_mib: 64\n" +
         store_extra + "telemetry:\n  bind_address: \"127.0.0.1\"\n  port: " + std::to_string(http_port) +
         "\nsecurity:\n  allowed_clients: [\"198.18.0.0/15\"]\n  authentication: off\nlogging:\n  level: info\n";
}

// Writes `yaml_text` to `yaml`, starts `self daemon --config yaml` (a test binary that embeds the daemon's
// main) and waits until GET /readyz answers 200 on `http_port`. False when the daemon exits or the timeout
// passes first; its log is then in `log`.
inline bool start_test_gateway(Child* c, const std::string& self, const std::string& yaml,
                               const std::string& yaml_text, const std::string& log, int http_port,
                               std::chrono::milliseconds timeout = 120s) {
  write_file(yaml, yaml_text);
  return spawn(c, {self, "daemon", "--config", yaml}, log) &&
         wait_for([&] { return !c->running() || http_get(http_port, "/readyz").status == 200; }, timeout) &&
         c->running();
}

}  // namespace rdmagate::testfix::proc

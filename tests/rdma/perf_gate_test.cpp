// The performance gate (issue 17): for a fixed number of operations, counts per operation that do not depend
// on the machine's speed, checked against the budgets of tools/perf-gate.budgets, with perftest's own counts
// measured in the same boot printed beside them. In the guest, in one go:
//
//   1. perftest on the device: ib_send_lat -s 64 (round trips) and ib_send_bw -s 64 (one-way messages), each
//      twice (a short and a long run): rxe's sent_pkts and the syscalls of both perftest processes per
//      operation, from the difference of the two runs, so that setup (rdma_cm, registration) cancels out.
//   2. The real daemon (this binary re-executed, daemon/gateway_main.cpp) with the busy idle policy, and
//      rdmagate-bench (re-executed too) against it: echo 64 B, sink 64 B, GET and PUT 64 KiB, each a fixed
//      count. Per operation: the gateway's core counters from /metrics (doorbells, send WRs, receive posts,
//      CQEs, NOOPs, credit stalls), rxe's sent_pkts, the syscalls of the gateway's poller thread(s) and their
//      involuntary context switches.
//   3. 64 idle connections (a client engine of this binary, every connection verified with echo traffic
//      first): the context switches (= wakeups) per second of the gateway's control thread.
//
// Syscalls are counted by the kernel (perf_event_open on the raw_syscalls:sys_enter tracepoint, one
// counting event per thread, no sampling, no ptrace stop), so counting changes neither timing nor batching.
// A regression of any budgeted count fails the test with the figure and its budget; the table goes to
// stdout, each line prefixed "perf gate:", for tools/test-all to quote.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <rte_lcore.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "control/engine.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "protocol/object_wire.hpp"
#include "protocol/wire_constants.hpp"
#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tools/bench/echo_client_service.hpp"

int rdmagate_main(int argc, char** argv);
int rdmagate_bench_main(int argc, char** argv);

namespace {

using namespace std::chrono_literals;
using namespace rdmagate;
using namespace rdmagate::testfix::proc;
using nlohmann::json;
using rdmagate::testfix::rxe_addr;

std::string g_self;
int g_rdma_port = 7900;
int g_http_port = 19500;

// ---- fixed workload sizes: the counts are per operation, so only the noise of setup depends on them -------
constexpr std::uint64_t kEchoOps = 20000;
constexpr std::uint64_t kSinkOps = 100000;
constexpr std::uint64_t kObjectOps = 2000;
constexpr unsigned kIdleConnections = 64;
constexpr auto kIdleWindow = 5s;
// perftest's short runs, subtracted from the long ones (the same counts as rdmagate's runs).
constexpr std::uint64_t kPerftestShort = 2000;

// ---- syscalls counted by the kernel -----------------------------------------------------------------------

// The id of a tracepoint (tracefs, mounted here when it is not: the guest mounts only /sys).
std::optional<std::uint64_t> tracepoint_id(const std::string& event, std::string* error) {
  for (const char* root : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    const std::string text = read_file(std::string(root) + "/events/" + event + "/id");
    if (!text.empty()) return std::strtoull(text.c_str(), nullptr, 10);
  }
  if (mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0) {
    const std::string text = read_file("/sys/kernel/tracing/events/" + event + "/id");
    if (!text.empty()) return std::strtoull(text.c_str(), nullptr, 10);
  }
  *error = "no tracepoint " + event +
           " under /sys/kernel/tracing (mount -t tracefs: " + std::strerror(errno) +
           "; the kernel needs CONFIG_FTRACE_SYSCALLS, and this needs root or CAP_PERFMON)";
  return std::nullopt;
}

// What a SyscallCounter counts, each from its own tracepoint.
enum class Sys : std::size_t {
  kAll = 0,  // raw_syscalls:sys_enter: every syscall
  kWrite,    // rxe's send doorbell: libibverbs writes the post-send command to the uverbs fd
  kClock,    // gettimeofday + clock_gettime: real syscalls in the guest (no vDSO clock under TCG)
  kCount,
};
constexpr std::array<const char*, 4> kSysEvents = {"raw_syscalls/sys_enter", "syscalls/sys_enter_write",
                                                   "syscalls/sys_enter_gettimeofday",
                                                   "syscalls/sys_enter_clock_gettime"};

// Counts the syscalls a thread (or a process and every thread it starts, from its exec on) enters.
class SyscallCounter {
 public:
  SyscallCounter() = default;
  SyscallCounter(const SyscallCounter&) = delete;
  SyscallCounter& operator=(const SyscallCounter&) = delete;
  ~SyscallCounter() {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  // child_before_exec: `tid` is a forked child that has not exec'ed yet; count it and its threads from exec.
  bool open(pid_t tid, bool child_before_exec, std::string* error) {
    static std::array<std::optional<std::uint64_t>, kSysEvents.size()> ids;
    for (std::size_t i = 0; i < kSysEvents.size(); ++i) {
      if (!ids[i]) ids[i] = tracepoint_id(kSysEvents[i], error);
      if (!ids[i]) return false;
      fds_[i] = open_one(*ids[i], tid, child_before_exec, error);
      if (fds_[i] < 0) return false;
    }
    return true;
  }
  std::uint64_t count(Sys what) const {
    if (what == Sys::kClock) return read_one(fds_[2]) + read_one(fds_[3]);
    return read_one(fds_[static_cast<std::size_t>(what)]);
  }

 private:
  static int open_one(std::uint64_t id, pid_t tid, bool child_before_exec, std::string* error) {
    perf_event_attr a{};
    a.size = sizeof(a);
    a.type = PERF_TYPE_TRACEPOINT;
    a.config = id;
    a.inherit = child_before_exec ? 1 : 0;
    a.disabled = child_before_exec ? 1 : 0;
    a.enable_on_exec = child_before_exec ? 1 : 0;
    const int fd = static_cast<int>(syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0)
      *error = "perf_event_open(tracepoint " + std::to_string(id) + ", tid " + std::to_string(tid) +
               "): " + std::strerror(errno);
    return fd;
  }
  static std::uint64_t read_one(int fd) {
    std::uint64_t v = 0;
    if (fd < 0 || ::read(fd, &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) return 0;
    return v;
  }
  std::array<int, kSysEvents.size()> fds_ = {-1, -1, -1, -1};
};

// A child whose syscalls are counted from its exec on: it waits on a pipe until the counters are attached.
struct CountedChild {
  Child child;
  SyscallCounter syscalls;
};

bool spawn_counted(CountedChild* c, std::vector<std::string> args, const std::string& log,
                   std::string* error) {
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) {
    *error = std::string("pipe2: ") + std::strerror(errno);
    return false;
  }
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {  // async-signal-safe calls only
    close(gate[1]);
    char b;
    while (::read(gate[0], &b, 1) < 0 && errno == EINTR) {
    }
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(gate[0]);
  c->child.pid = pid;
  const bool ok = c->syscalls.open(pid, true, error);
  close(gate[1]);  // the child execs (or, without counters, is killed by Child's destructor)
  return ok;
}

// ---- /proc: threads and their context switches -----------------------------------------------------------

struct ThreadInfo {
  pid_t tid = 0;
  std::string name;
  std::uint64_t voluntary = 0, involuntary = 0;
};

std::uint64_t status_field(const std::string& status, const std::string& key) {
  const auto p = status.find("\n" + key + ":");
  return p == std::string::npos ? 0 : std::strtoull(status.c_str() + p + key.size() + 2, nullptr, 10);
}

std::vector<ThreadInfo> threads_of(pid_t pid) {
  std::vector<ThreadInfo> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    ThreadInfo t;
    t.tid = static_cast<pid_t>(std::atoi(e->d_name));
    t.name = read_file(dir + "/" + e->d_name + "/comm");
    while (!t.name.empty() && t.name.back() == '\n') t.name.pop_back();
    const std::string st = "\n" + read_file(dir + "/" + e->d_name + "/status");
    t.voluntary = status_field(st, "voluntary_ctxt_switches");
    t.involuntary = status_field(st, "nonvoluntary_ctxt_switches");
    out.push_back(t);
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const ThreadInfo& a, const ThreadInfo& b) { return a.tid < b.tid; });
  return out;
}

std::string thread_names(const std::vector<ThreadInfo>& ts) {
  std::string s;
  for (const ThreadInfo& t : ts) s += (s.empty() ? "" : ", ") + t.name + " (" + std::to_string(t.tid) + ")";
  return s;
}

// The gateway's data-plane threads: EAL's worker lcores (DPDK 22.11 names them rte-worker-<lcore>).
bool is_poller(const ThreadInfo& t) {
  return t.name.rfind("rte-worker-", 0) == 0;
}

// The gateway's control thread: the main lcore, i.e. the process's main thread.
bool is_control(const ThreadInfo& t, pid_t pid) {
  return t.tid == pid;
}

// ---- rxe's packet counter ---------------------------------------------------------------------------------

std::optional<std::uint64_t> sent_pkts() {
  const std::string text = read_file("/sys/class/infiniband/" + rdmagate::testfix::rdma_device() +
                                     "/ports/1/hw_counters/sent_pkts");
  if (text.empty()) return std::nullopt;
  return std::strtoull(text.c_str(), nullptr, 10);
}

// ---- budgets ---------------------------------------------------------------------------------------------

struct Budget {
  double max = 0;
  std::string reason;
};

// tools/perf-gate.budgets: "<workload>.<count> <max per op> <reason>" per line; '#' comments.
std::map<std::string, Budget> load_budgets(const std::string& path, std::string* error) {
  std::map<std::string, Budget> out;
  std::istringstream in(read_file(path));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t") == std::string::npos || line[line.find_first_not_of(" \t")] == '#')
      continue;
    std::istringstream ls(line);
    std::string key, max;
    ls >> key >> max;
    std::string reason;
    std::getline(ls, reason);
    reason.erase(0, std::min(reason.find_first_not_of(" \t"), reason.size()));
    char* end = nullptr;
    const double v = std::strtod(max.c_str(), &end);
    if (key.find('.') == std::string::npos || end == max.c_str() || *end != '\0' || reason.empty()) {
      *error += path + ":" + std::to_string(n) +
                ": want \"<workload>.<count> <max per op> <reason>\": " + line + "\n";
      continue;
    }
    if (out.count(key) != 0) *error += path + ":" + std::to_string(n) + ": " + key + " twice\n";
    out[key] = Budget{v, reason};
  }
  if (out.empty() && error->empty()) *error = path + ": no budget (is the file there?)";
  return out;
}

// ---- the table --------------------------------------------------------------------------------------------

struct Figure {
  std::string workload, count;
  double total = 0;
  double ops = 0;
  std::optional<double> perftest;  // perftest's figure per operation, where it has one
  double per_op() const { return ops > 0 ? total / ops : 0; }
};

struct Gate {
  std::vector<Figure> figures;
  std::map<std::string, std::map<std::string, double>> perftest;  // workload -> count -> per op
  std::vector<std::string> notes;

  void add(const std::string& workload, const std::string& count, double total, double ops) {
    Figure f{workload, count, total, ops, std::nullopt};
    const auto w = perftest.find(workload);
    if (w != perftest.end() && w->second.count(count) != 0) f.perftest = w->second.at(count);
    figures.push_back(f);
  }
};

Gate& gate() {
  static Gate g;
  return g;
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), v >= 100 ? "%.1f" : "%.4f", v);
  return b;
}

// ---- perftest ---------------------------------------------------------------------------------------------

struct PerftestRun {
  std::array<std::uint64_t, static_cast<std::size_t>(Sys::kCount)> sys{};     // server + client
  std::array<std::uint64_t, static_cast<std::size_t>(Sys::kCount)> server{};  // the gateway's counterpart
  std::uint64_t pkts = 0;
};

// `name` found on PATH, or empty.
std::string which(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string p = dir + "/" + name;
    if (!dir.empty() && access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

// Waits until an rdma_cm listener is on `port` (the guest's rxe-wait-listen), else a fixed pause.
void wait_cm_listen(int port) {
  const std::string w = which("rxe-wait-listen");
  if (w.empty() || std::system((w + " --cm " + std::to_string(port) + " 20 >/dev/null 2>&1").c_str()) != 0) {
    std::this_thread::sleep_for(2s);
  }
}

// One perftest pair (server and client on the same device and address), both counted.
bool perftest_pair(const std::string& dir, const std::string& tool, int port, std::uint64_t iters,
                   PerftestRun* r, std::string* error) {
  const std::string bin = which(tool);
  if (bin.empty()) {
    *error = tool + " is not installed (Debian package perftest)";
    return false;
  }
  std::vector<std::string> args = {bin,
                                   "-d",
                                   rdmagate::testfix::rdma_device(),
                                   "-p",
                                   std::to_string(port),
                                   "-s",
                                   "64",
                                   "-n",
                                   std::to_string(iters),
                                   "-R",
                                   "-F"};
  const std::string base = dir + "/" + tool + "-" + std::to_string(iters);
  const auto t0 = std::chrono::steady_clock::now();
  const auto p0 = sent_pkts();
  CountedChild srv, cli;
  if (!spawn_counted(&srv, args, base + ".server", error)) return false;
  wait_cm_listen(port);
  args.push_back(rxe_addr());
  if (!spawn_counted(&cli, args, base + ".client", error)) return false;
  const int crc = cli.child.wait_exit(120s);
  const int src = srv.child.wait_exit(30s);
  const auto p1 = sent_pkts();
  if (crc != 0 || src != 0 || !p0 || !p1) {
    *error = tool + " -n " + std::to_string(iters) + ": client exit " + std::to_string(crc) +
             ", server exit " + std::to_string(src) + (p0 && p1 ? "" : ", no sent_pkts counter") +
             "\nclient:\n" + read_file(base + ".client") + "\nserver:\n" + read_file(base + ".server");
    return false;
  }
  for (std::size_t i = 0; i < r->sys.size(); ++i) {
    r->server[i] = srv.syscalls.count(static_cast<Sys>(i));
    r->sys[i] = r->server[i] + cli.syscalls.count(static_cast<Sys>(i));
  }
  r->pkts = *p1 - *p0;
  gate().notes.push_back(tool + " -n " + std::to_string(iters) + ": " +
                         fmt(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) +
                         " s");
  return true;
}

// perftest's per-operation figures: (long run - short run) / (long - short), so that setup cancels out.
// A second try on another port when the first fails: under emulation a perftest client now and then reaches
// the port before its server listens (rdma_cm's reject 8, invalid service id) despite the wait.
bool perftest_pair_retried(const std::string& dir, const std::string& tool, int port, std::uint64_t iters,
                           PerftestRun* r, std::string* error) {
  if (perftest_pair(dir, tool, port, iters, r, error)) return true;
  gate().notes.push_back(tool + " -n " + std::to_string(iters) +
                         " failed once, tried again: " + error->substr(0, error->find('\n')));
  return perftest_pair(dir, tool, port + 1, iters, r, error);
}

bool perftest_figures(const std::string& dir, const std::string& workload, const std::string& tool, int port,
                      std::uint64_t iters, std::string* error) {
  PerftestRun s, l;
  if (!perftest_pair_retried(dir, tool, port, kPerftestShort, &s, error) ||
      !perftest_pair_retried(dir, tool, port + 2, iters, &l, error)) {
    return false;
  }
  const double n = static_cast<double>(iters - kPerftestShort);
  auto& m = gate().perftest[workload];
  m["sent_pkts"] = (static_cast<double>(l.pkts) - static_cast<double>(s.pkts)) / n;
  // The server's syscalls: it plays the gateway's part (answers the round trips, receives the stream).
  const auto per_op = [&](Sys what) {
    const auto i = static_cast<std::size_t>(what);
    return (static_cast<double>(l.server[i]) - static_cast<double>(s.server[i])) / n;
  };
  // perftest reads the clock in loops while it waits for its peer (a syscall under TCG), so its clock reads
  // depend on time, not on the operations: left out of its figure, printed in the note.
  m["poller_syscalls"] = per_op(Sys::kAll) - per_op(Sys::kClock);
  m["poller_syscalls_not_doorbell"] = per_op(Sys::kAll) - per_op(Sys::kClock) - per_op(Sys::kWrite);
  gate().notes.push_back(tool + ": " + std::to_string(kPerftestShort) + " and " + std::to_string(iters) +
                         " ops: sent_pkts " + std::to_string(s.pkts) + " / " + std::to_string(l.pkts) +
                         ", syscalls (server + client) " + std::to_string(s.sys[0]) + " / " +
                         std::to_string(l.sys[0]) + ", of which write " + std::to_string(s.sys[1]) + " / " +
                         std::to_string(l.sys[1]) + " and clock reads " + std::to_string(s.sys[2]) + " / " +
                         std::to_string(l.sys[2]));
  return true;
}

// ---- the gateway side -------------------------------------------------------------------------------------

// A sum over every sample of `name` with the labels `want`; 0 when absent (a count the build does not export
// is reported missing by the budget check, not here).
double m(const std::string& expo, const std::string& name,
         const std::map<std::string, std::string>& want = {}) {
  return std::max(0.0, metric(expo, name, want));
}
bool has(const std::string& expo, const std::string& name) {
  return expo.find("\n" + name + "{") != std::string::npos ||
         expo.find("\n" + name + " ") != std::string::npos;
}

struct Snapshot {
  std::string metrics;
  std::uint64_t pkts = 0;
  std::vector<ThreadInfo> threads;
  std::chrono::steady_clock::time_point at;
};

class PerfGate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = "/tmp/perf_gate_" + std::to_string(getpid());
    mkdir(dir_.c_str(), 0755);
  }

  // The gateway: the shipped data-plane settings (queue depth, inline threshold, signalling, burst) with the
  // busy idle policy on CPU 1 and control on CPU 0; `dataplane_extra` holds further dataplane keys.
  void start_gateway(const std::string& dataplane_extra = "  max_connections_per_core: 8\n") {
    const std::string yaml = dir_ + "/rdmagate.yaml";
    gw_log_ = dir_ + "/rdmagate.log";
    const std::string text =
        "eal:\n  main_lcore: 0\nlisten:\n  addresses: [\"" + rxe_addr() +
        "\"]\n  port: " + std::to_string(g_rdma_port) + "\ndataplane:\n  cores: [1]\n  idle_policy: busy\n" +
        dataplane_extra + "store:\n  capacity_mib: 32\ntelemetry:\n  bind_address: \"127.0.0.1\"\n  port: " +
        std::to_string(g_http_port) +
        "\nsecurity:\n  allowed_clients: [\"198.18.0.0/15\"]\n  authentication: off\nlogging:\n  level: info\n";
    ASSERT_TRUE(start_test_gateway(&gw_, g_self, yaml, text, gw_log_, g_http_port))
        << "the gateway did not become ready; log:\n"
        << read_file(gw_log_);
    const auto ts = threads_of(gw_.pid);
    pollers_.clear();
    for (const ThreadInfo& t : ts) {
      if (is_poller(t)) pollers_.push_back(t.tid);
    }
    ASSERT_FALSE(pollers_.empty()) << "no poller thread (rte-worker-*) in the gateway: " << thread_names(ts);
    gate().notes.push_back("gateway threads: " + thread_names(ts));
  }

  void stop_gateway() {
    if (gw_.pid <= 0) return;
    kill(gw_.pid, SIGTERM);
    EXPECT_EQ(gw_.wait_exit(60s), 0) << "the gateway's SIGTERM drain; log:\n" << read_file(gw_log_);
  }

  Snapshot snap() {
    Snapshot s;
    s.metrics = "\n" + http_get(g_http_port, "/metrics").body;
    s.pkts = sent_pkts().value_or(0);
    s.threads = threads_of(gw_.pid);
    s.at = std::chrono::steady_clock::now();
    return s;
  }

  // The core publishes its counters about once per millisecond: wait until two scrapes agree.
  Snapshot settled() {
    Snapshot a = snap();
    for (int i = 0; i < 50; ++i) {
      std::this_thread::sleep_for(20ms);
      Snapshot b = snap();
      if (b.metrics.find("rdmagate_transport_messages_total") != std::string::npos &&
          metric(a.metrics, "rdmagate_poller_completions_total") ==
              metric(b.metrics, "rdmagate_poller_completions_total") &&
          metric(a.metrics, "rdmagate_transport_messages_total") ==
              metric(b.metrics, "rdmagate_transport_messages_total")) {
        return b;
      }
      a = std::move(b);
    }
    return a;
  }

  // Runs the bench; the JSON's first row, or a failure naming its output.
  json bench(const std::string& name, std::vector<std::string> args) {
    const std::string out = dir_ + "/" + name + ".json", log = dir_ + "/bench-" + name + ".log";
    args.insert(args.begin(), {g_self, "bench"});
    for (const std::string& a :
         {std::string("-d"), rdmagate::testfix::rdma_device(), std::string("-p"), std::to_string(g_rdma_port),
          std::string("--warmup"), std::string("0"), std::string("--yield"), std::string("--quiet"),
          std::string("--json"), out, rxe_addr()}) {
      args.push_back(a);
    }
    Child c;
    if (!spawn(&c, args, log)) return {};
    const int rc = c.wait_exit(180s);
    EXPECT_EQ(rc, 0) << name << ": rdmagate-bench failed:\n" << read_file(log);
    if (rc != 0) return {};
    const json j = json::parse(read_file(out), nullptr, false);
    if (j.is_discarded() || !j.contains("rows") || j.at("rows").empty()) {
      ADD_FAILURE() << name << ": no JSON row in " << out;
      return {};
    }
    EXPECT_EQ(j.at("errors"), 0) << j.dump();
    EXPECT_EQ(j.at("mismatches"), 0) << j.dump();
    return j.at("rows").at(0);
  }

  // One workload: counters and threads before and after, the pollers' syscalls counted in between. `ops` is
  // what the gateway itself counted (requests received, or store operations), checked against the bench's.
  void workload(const std::string& name, const std::vector<std::string>& args, bool store_ops,
                std::uint64_t want_ops) {
    std::vector<std::unique_ptr<SyscallCounter>> counters;
    const Snapshot a = settled();
    for (pid_t tid : pollers_) {
      counters.push_back(std::make_unique<SyscallCounter>());
      std::string err;
      ASSERT_TRUE(counters.back()->open(tid, false, &err)) << err;
    }
    const json row = bench(name, args);
    ASSERT_FALSE(row.is_null()) << name;
    const Snapshot b = settled();
    std::uint64_t sys = 0;
    for (const auto& c : counters) sys += c->count(Sys::kAll);
    const auto d = [&](const std::string& metric_name, const std::map<std::string, std::string>& want = {}) {
      return m(b.metrics, metric_name, want) - m(a.metrics, metric_name, want);
    };
    const double ops =
        store_ops ? d("rdmagate_store_operations_total")
                  : d("rdmagate_transport_messages_total", {{"direction", "rx"}, {"type", "inline_request"}});
    // The bench counts sink messages from when its connection is up, so it may miss the first few.
    EXPECT_GE(ops, static_cast<double>(want_ops))
        << name << ": the gateway counted fewer operations than asked";
    if (ops <= 0) return;
    Gate& g = gate();
    const bool send_wrs = has(b.metrics, "rdmagate_transport_send_work_requests_total");
    if (has(b.metrics, "rdmagate_transport_doorbells_total")) {
      g.add(name, "send_doorbells", d("rdmagate_transport_doorbells_total", {{"queue", "send"}}), ops);
      g.add(name, "recv_doorbells", d("rdmagate_transport_doorbells_total", {{"queue", "recv"}}), ops);
    }
    if (send_wrs) {
      g.add(name, "send_wrs", d("rdmagate_transport_send_work_requests_total"), ops);
      g.add(name, "recv_posts", d("rdmagate_transport_receive_posts_total"), ops);
    }
    g.add(name, "cqes", d("rdmagate_poller_completions_total"), ops);
    g.add(name, "noops", d("rdmagate_transport_noops_total"), ops);
    g.add(name, "credit_stalls", d("rdmagate_transport_credit_stalls_total"), ops);
    g.add(name, "sent_pkts", static_cast<double>(b.pkts - a.pkts), ops);
    g.add(name, "poller_syscalls", static_cast<double>(sys), ops);
    // With the busy policy a poller's only syscall is rxe's send doorbell (one write each).
    g.add(name, "poller_syscalls_not_doorbell",
          std::max(0.0,
                   static_cast<double>(sys) - d("rdmagate_transport_doorbells_total", {{"queue", "send"}})),
          ops);
    std::uint64_t invol = 0;
    for (const ThreadInfo& t1 : b.threads) {
      if (!is_poller(t1)) continue;
      for (const ThreadInfo& t0 : a.threads) {
        if (t0.tid == t1.tid) invol += t1.involuntary - t0.involuntary;
      }
    }
    g.add(name, "poller_involuntary_cs", static_cast<double>(invol), ops);
    const double secs = std::chrono::duration<double>(b.at - a.at).count();
    g.notes.push_back(name + ": " + fmt(ops) + " ops counted by the gateway, " +
                      std::to_string(row.at("ops").get<std::uint64_t>()) + " by the bench, " + fmt(secs) +
                      " s; poller involuntary context switches " + fmt(invol / secs) + "/s");
  }

  static std::string dir_;
  Child gw_;
  std::string gw_log_;
  std::vector<pid_t> pollers_;
};

std::string PerfGate::dir_;

// perftest first, on a quiet device (no gateway polling yet).
TEST_F(PerfGate, PerftestInTheSameBoot) {
  std::string err;
  EXPECT_TRUE(perftest_figures(dir_, "echo", "ib_send_lat", 18600, kEchoOps, &err)) << err;
  EXPECT_TRUE(perftest_figures(dir_, "sink", "ib_send_bw", 18610, kSinkOps, &err)) << err;
}

TEST_F(PerfGate, GatewayCountsPerOperation) {
  ASSERT_NO_FATAL_FAILURE(start_gateway());
  const std::string n_echo = std::to_string(kEchoOps), n_sink = std::to_string(kSinkOps),
                    n_obj = std::to_string(kObjectOps);
  workload("echo", {"echo", "-s", "64", "-n", n_echo, "-q", "1", "-t", "1"}, false, kEchoOps);
  workload("sink", {"sink", "-s", "64", "-n", n_sink, "-q", "1", "-t", "64"}, false, kSinkOps);
  // 16 keys: GET first PUTs each and every run DELETEs them, all counted as the gateway's store operations.
  workload("get", {"get", "-s", "64k", "-n", n_obj, "-q", "1", "-t", "8", "--keys", "16"}, true, kObjectOps);
  workload("put", {"put", "-s", "64k", "-n", n_obj, "-q", "1", "-t", "8", "--keys", "16"}, true, kObjectOps);
  stop_gateway();
}

// ---- 64 idle connections: this binary as a client engine (subcommand idle-client)
// --------------------------

TEST_F(PerfGate, ControlWakeupsWithIdleConnections) {
  // Queue depth 64 (the shipped 128 would need a CQ larger than rxe's 32767 entries for 64 connections on one
  // core); the control thread's wakeups do not depend on it.
  ASSERT_NO_FATAL_FAILURE(start_gateway(
      "  queue_depth: 64\n  max_connections_per_core: " + std::to_string(kIdleConnections + 2) + "\n"));
  const std::string status = dir_ + "/idle-client.status", log = dir_ + "/idle-client.log";
  Child client;
  ASSERT_TRUE(spawn(&client,
                    {g_self, "idle-client", rxe_addr(), std::to_string(g_rdma_port),
                     std::to_string(kIdleConnections), status},
                    log));
  const bool up = wait_for(
      [&] {
        return !client.running() ||
               read_file(status).find("done=" + std::to_string(kIdleConnections) + " ") != std::string::npos;
      },
      120s);
  ASSERT_TRUE(up && client.running())
      << "the idle client's " << kIdleConnections
      << " connections did not all finish their echo traffic; status: " << read_file(status) << "\nlog:\n"
      << read_file(log);
  std::this_thread::sleep_for(1s);  // the last handshakes' timers and replies
  const Snapshot a = snap();
  std::this_thread::sleep_for(kIdleWindow);
  const Snapshot b = snap();
  const double secs = std::chrono::duration<double>(b.at - a.at).count();
  EXPECT_EQ(metric(b.metrics, "rdmagate_connections", {{"state", "established"}}), kIdleConnections)
      << "connections on the gateway during the idle window";
  std::uint64_t wakeups = 0, invol = 0;
  for (const ThreadInfo& t1 : b.threads) {
    for (const ThreadInfo& t0 : a.threads) {
      if (t0.tid != t1.tid) continue;
      if (is_control(t1, gw_.pid))
        wakeups += (t1.voluntary - t0.voluntary) + (t1.involuntary - t0.involuntary);
      if (is_poller(t1)) invol += t1.involuntary - t0.involuntary;
    }
  }
  gate().add("idle64", "control_wakeups_per_s", static_cast<double>(wakeups), secs);
  gate().add("idle64", "poller_involuntary_cs_per_s", static_cast<double>(invol), secs);
  kill(client.pid, SIGTERM);
  EXPECT_EQ(client.wait_exit(60s), 0) << read_file(log);
  stop_gateway();
}

// Runs last (gtest keeps the order of definition): the table and the budget check.
TEST_F(PerfGate, CountsWithinBudgets) {
  std::string err;
  const std::string path = RDMAGATE_PERF_GATE_BUDGETS;
  const auto budgets = load_budgets(path, &err);
  const Gate& g = gate();
  for (const std::string& n : g.notes) std::printf("perf gate: note: %s\n", n.c_str());
  ASSERT_FALSE(g.figures.empty()) << "nothing was measured (the tests above failed)";
  std::printf("perf gate: counts per operation (gateway side; sent_pkts device-wide), budgets from %s\n",
              "tools/perf-gate.budgets");
  std::printf("perf gate: %-8s %-28s %12s %10s %10s %10s %10s  %s\n", "workload", "count", "total", "ops",
              "per op", "budget", "perftest", "verdict");
  std::set<std::string> measured;
  std::vector<std::string> failures;
  if (!err.empty()) failures.push_back(err);
  for (const Figure& f : g.figures) {
    const std::string key = f.workload + "." + f.count;
    measured.insert(key);
    const auto b = budgets.find(key);
    std::string verdict = "ok";
    if (b == budgets.end()) {
      verdict = "NO BUDGET";
      failures.push_back(key + " = " + fmt(f.per_op()) + " per op has no budget in tools/perf-gate.budgets");
    } else if (f.per_op() > b->second.max) {
      verdict = "OVER BUDGET";
      failures.push_back(key + " = " + fmt(f.per_op()) + " per op, budget " + fmt(b->second.max) + " (" +
                         b->second.reason + ")");
    }
    std::printf("perf gate: %-8s %-28s %12.0f %10.0f %10s %10s %10s  %s\n", f.workload.c_str(),
                f.count.c_str(), f.total, f.ops, fmt(f.per_op()).c_str(),
                b == budgets.end() ? "-" : fmt(b->second.max).c_str(),
                f.perftest ? fmt(*f.perftest).c_str() : "-", verdict.c_str());
  }
  for (const auto& [key, b] : budgets) {
    if (measured.count(key) == 0)
      failures.push_back(key + ": budgeted (" + fmt(b.max) + ") but not measured");
  }
  for (const std::string& f : failures) std::printf("perf gate: FAIL: %s\n", f.c_str());
  std::printf("perf gate: %s (%zu counts, %zu budgets)\n", failures.empty() ? "PASS" : "FAILED",
              g.figures.size(), budgets.size());
  std::fflush(stdout);
  EXPECT_TRUE(failures.empty()) << failures.size() << " count(s) failed the gate (see the perf gate lines)";
}

// ---- the idle client: N connections, each verified with a few echo round trips, then held until SIGTERM
// ----

std::atomic<bool> g_quit{false};
void on_signal(int) {
  g_quit.store(true);
}

int idle_client_main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: perf_gate_test idle-client ADDR PORT CONNECTIONS STATUS_FILE\n");
    return 2;
  }
  const std::string addr = argv[1], status = argv[4];
  const auto port = static_cast<std::uint16_t>(std::atoi(argv[2]));
  const auto conns = static_cast<unsigned>(std::atoi(argv[3]));
  control::RdmaProbe probe;
  if (const int rc = testfix::rdma_gate("perf_gate idle-client", &probe); rc != 0) return rc;
  // Off the gateway's poller CPU; the core yields when idle, which it mostly is.
  auto eal = testfix::start_eal("perf_gate_idle", "0@0,1@0");
  if (!eal) return 1;
  std::signal(SIGTERM, on_signal);
  control::EngineConfig ec;
  ec.name = "idle-client";
  ec.device = testfix::rdma_device();
  ec.passive = false;
  dataplane::CoreConfig c;
  c.lcore = rte_get_next_lcore(static_cast<unsigned>(-1), 1, 0);
  c.max_conns = conns + 2;
  c.rx_per_conn = 16;
  c.tx_per_conn = 48;
  c.buf_size = 4096;
  c.idle = dataplane::IdlePolicy::kYield;
  c.idle_yield_after = 8;
  ec.cores.push_back(c);
  ec.local.params = protocol::ConnParams{16, 4096, protocol::kMaxFragments, 1u << 20};
  ec.local.min_queue_depth = protocol::kMinCreditQueueDepth;
  ec.signal_interval = 8;
  std::string err;
  dataplane::EchoClientResults results;
  dataplane::EchoClientConfig sc;
  sc.messages_per_conn = 4;
  sc.min_payload = sc.max_payload = 64;
  sc.window = 1;
  sc.opcode = static_cast<std::uint16_t>(protocol::ObjectOpcode::kEcho);
  dataplane::EchoClientService svc(sc, results);
  auto engine = control::Engine::create(ec, &err);
  if (!engine) {
    std::fprintf(stderr, "idle-client: %s\n", err.c_str());
    return 1;
  }
  std::vector<std::unique_ptr<control::CoreRunner>> runners;
  runners.push_back(dataplane::make_core_runner(engine->backend_kind(), engine->core(0), svc));
  if (!engine->launch_cores(std::move(runners), &err)) {
    std::fprintf(stderr, "idle-client: %s\n", err.c_str());
    return 1;
  }
  for (unsigned i = 0; i < conns; ++i) {
    if (engine->connect(addr, port, &err, false, 0) == 0) {
      std::fprintf(stderr, "idle-client: connect %u: %s\n", i, err.c_str());
      engine->begin_shutdown_st();
      engine->stop_cores_st();
      return 1;
    }
  }
  auto last = std::chrono::steady_clock::now() - 1s;
  while (!g_quit.load()) {
    engine->poll_st(100);
    if (std::chrono::steady_clock::now() - last >= 200ms) {
      last = std::chrono::steady_clock::now();
      write_file(status + ".tmp", "owned=" + std::to_string(engine->owned_count()) +
                                      " done=" + std::to_string(results.connections_done.load()) +
                                      " mismatches=" + std::to_string(results.mismatches.load()) + " \n");
      std::rename((status + ".tmp").c_str(), status.c_str());
    }
  }
  const bool drained = engine->shutdown_st(10s);
  engine.reset();
  eal.reset();
  return drained && results.mismatches.load() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) return rdmagate_bench_main(argc - 1, argv + 1);
  if (argc > 1 && std::strcmp(argv[1], "idle-client") == 0) return idle_client_main(argc - 1, argv + 1);
  // No EAL here: the daemon, the bench and the idle client (this binary, re-executed) start their own.
  return rdmagate::testfix::rdma_test_main(argc, argv, "perf_gate_test", /*eal_lcores=*/nullptr,
                                           [](const rdmagate::control::RdmaProbe&) {
                                             g_self = rdmagate::testfix::self_exe("perf_gate_test");
                                             if (g_self.empty()) return 1;
                                             g_rdma_port = 7500 + static_cast<int>(getpid() % 200) * 2;
                                             g_http_port = 19500 + static_cast<int>(getpid() % 400);
                                             return 0;
                                           });
}

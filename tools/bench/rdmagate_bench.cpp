// rdmagate-bench: load generator for an rdmagate gateway (bench_core.hpp has the modes and the method,
// bench_options.hpp the command line, docs/bench.md the user's guide).
//
//   rdmagate-bench echo|sink|put|get|mixed [ADDR] [-s 64,4096,1m | -a] [-n N | -D S] [-q CONNS] [-t QD]
//       [-d DEV] [-p PORT] [--preset lat|bw] [--cores N | --lcores MAP] [--idle busy|yield|event] [--verify]
//       [--json FILE|-]
//
// Prints a perftest-like table (one row per size; latency as round trip) on stdout and a progress line per
// second on stderr.
// Exit codes: 0 ran without errors or mismatches; 1 errors, mismatches or a setup failure; 2 usage;
// 77 no RDMA device on this machine (the message says how to run it in the rxe guest).
#include <rte_lcore.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "control/rdma_device.hpp"
#include "dataplane/eal_runtime.hpp"
#include "tools/bench/bench_core.hpp"

namespace {

using rdmagate::bench::Options;

std::atomic<bool> g_interrupt{false};
void on_signal(int) {
  g_interrupt.store(true);
}

std::string self_command(int argc, char** argv) {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  std::string cmd = n > 0 ? std::string(exe, static_cast<std::size_t>(n)) : std::string(argv[0]);
  for (int i = 1; i < argc; ++i) {
    cmd += ' ';
    cmd += argv[i];
  }
  return cmd;
}

std::string utc_timestamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::vector<unsigned> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<unsigned> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

}  // namespace

// Also linked into the guest test of the command line (RDMAGATE_BENCH_MAIN_EMBEDDED), which re-executes
// itself as the bench.
int rdmagate_bench_main(int argc, char** argv) {
  namespace bench = rdmagate::bench;
  // Before getopt permutes argv: the JSON records the command as typed, the skip message the one to re-run.
  const std::string self = self_command(argc, argv);
  std::string typed = "rdmagate-bench";
  for (int i = 1; i < argc; ++i) typed += std::string(" ") + argv[i];

  bench::CliEnv env;
  if (const char* a = std::getenv("RDMAGATE_RXE_ADDR"); a != nullptr) env.server = a;
  env.device = rdmagate::control::device_name_from_env();
  const bench::CliParse cli = bench::parse_cli(argc, argv, env);
  switch (cli.action) {
    case bench::CliAction::kHelp:
      std::fputs(bench::usage_text().c_str(), stdout);
      return 0;
    case bench::CliAction::kVersion:
      std::fputs(bench::version_text().c_str(), stdout);
      return 0;
    case bench::CliAction::kUsageError:
      std::fprintf(stderr, "rdmagate-bench: %s (--help lists the flags)\n", cli.error.c_str());
      return 2;
    case bench::CliAction::kRun:
      break;
  }
  Options o = cli.cli.bench;
  const unsigned cores = cli.cli.cores;
  // Validate what does not need EAL before touching the device (lcores are checked after EAL is up).
  {
    Options probe_opts = o;
    probe_opts.lcores = {1};
    const std::string err = bench::validate(probe_opts);
    if (!err.empty()) {
      std::fprintf(stderr, "rdmagate-bench: %s\n", err.c_str());
      return 2;
    }
  }

  const rdmagate::control::RdmaProbe probe = rdmagate::control::probe_rdma(o.device);
  if (!probe.ok()) {
    if (probe.no_rdma()) {
      std::fprintf(stderr,
                   "rdmagate-bench: no RDMA device on this machine (%s); run it inside the rxe guest: "
                   "tools/rxe-vm/rxe-vm run --share \"$PWD\" -- '%s'\n",
                   rdmagate::control::rdma_status_name(probe.status), self.c_str());
      return rdmagate::control::kSkipExitCode;
    }
    std::fprintf(stderr, "rdmagate-bench: %s\n", probe.message.c_str());
    return 1;
  }
  o.device = probe.device;

  // EAL: the lowest lcore (this thread) drives; one worker lcore per bench core. The default map never puts
  // the main lcore on a poller's CPU (unless the process has one CPU), and keeps the pollers off the
  // gateway's default CPUs whenever this process has CPUs to spare.
  const std::vector<unsigned> cpus = allowed_cpus();
  std::string lcores_map = cli.cli.lcores_map;
  if (lcores_map.empty()) {
    const bench::LcorePlan plan = bench::default_lcores(cores, cpus);
    lcores_map = plan.map;
    // Sharing the main lcore's CPU is said even with --quiet: every figure of the run pays for it.
    if ((o.progress || plan.shares_main) && !plan.note.empty()) {
      std::fprintf(stderr, "rdmagate-bench: %s--lcores %s: %s\n", plan.shares_main ? "warning: " : "",
                   lcores_map.c_str(), plan.note.c_str());
    }
  } else if (const std::string w =
                 bench::lcores_warning(lcores_map, cores, o.idle != bench::BenchIdle::kBusy, cpus);
             !w.empty()) {
    std::fprintf(stderr, "rdmagate-bench: %s\n", w.c_str());
  }
  rdmagate::dataplane::EalOptions eo;
  eo.program_name = "rdmagate-bench";
  eo.lcores = lcores_map;
  std::string err;
  auto eal = rdmagate::dataplane::EalRuntime::init(eo, &err);
  if (!eal) {
    std::fprintf(stderr, "rdmagate-bench: EAL: %s\n", err.c_str());
    return 1;
  }
  unsigned l;
  RTE_LCORE_FOREACH_WORKER(l) {
    if (o.lcores.size() < cores) o.lcores.push_back(l);
  }
  if (o.lcores.size() < cores) {
    std::fprintf(stderr, "rdmagate-bench: --lcores %s has %zu worker lcores, --cores asks for %u\n",
                 lcores_map.c_str(), o.lcores.size(), cores);
    return 2;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  o.interrupt = &g_interrupt;

  bench::RunInfo info;
  info.version = bench::version_string();
  info.timestamp = utc_timestamp();
  info.host = host_name();
  info.command = typed;
  info.preset = cli.cli.preset;
  info.all_sizes = cli.cli.all_sizes;
  info.lcores_map = lcores_map;
  info.json_path = cli.cli.json_path;
  const std::string& json_path = cli.cli.json_path;
  bench::Report report;
  const bool ran = bench::run(o, &report);
  if (json_path != "-") bench::print_table(stdout, report);
  if (!json_path.empty()) {
    const std::string j = bench::to_json(report, info);
    if (json_path == "-") {
      std::printf("%s\n", j.c_str());
    } else {
      std::ofstream f(json_path);
      f << j << "\n";
      if (!f) {
        std::fprintf(stderr, "rdmagate-bench: cannot write %s\n", json_path.c_str());
        return 1;
      }
    }
  }
  std::fflush(stdout);
  if (!ran) {
    std::fprintf(stderr, "rdmagate-bench: %s\n", report.error.c_str());
    return 1;
  }
  return report.ok() ? 0 : 1;
}

#ifndef RDMAGATE_BENCH_MAIN_EMBEDDED
int main(int argc, char** argv) {
  return rdmagate_bench_main(argc, argv);
}
#endif

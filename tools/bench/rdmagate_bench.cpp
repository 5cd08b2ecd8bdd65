// rdmagate-bench: load generator for an rdmagate gateway (bench_core.hpp has the modes and the method).
//
//   rdmagate-bench echo|sink|put|get|mixed --server ADDR [--port 7471] [--sizes 64,4096,1m]
//       [--connections N] [--qd N] [--duration S | --iterations N] [--warmup S] [--keys N] [--ratio R]
//       [--cores N | --lcores EAL_LCORES] [--device NAME] [--yield] [--verify] [--json FILE|-] [--quiet]
//
// Prints a perftest-like table (one row per size) on stdout and a progress line per second on stderr.
// Exit codes: 0 ran without errors or mismatches; 1 errors, mismatches or a setup failure; 2 usage;
// 77 no RDMA device on this machine (the message says how to run it in the rxe guest).
#include <rte_lcore.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "control/rdma_device.hpp"
#include "dataplane/eal_runtime.hpp"
#include "tools/bench/bench_core.hpp"

namespace {

using rdmagate::bench::Mode;
using rdmagate::bench::Options;

std::atomic<bool> g_interrupt{false};
void on_signal(int) {
  g_interrupt.store(true);
}

void usage(std::FILE* f) {
  std::fprintf(
      f,
      "usage: rdmagate-bench MODE --server ADDR [options]   (MODE may come anywhere)\n"
      "  MODE                echo | sink (engine + echo client, inline payloads) | put | get | mixed\n"
      "  --server ADDR       gateway address (default: $RDMAGATE_RXE_ADDR when set)\n"
      "  --port P            gateway rdma_cm port (7471)\n"
      "  --sizes LIST        value/payload sizes, one result row each: 64,4096,1m (k/m suffixes: KiB/MiB)\n"
      "  --connections N     connections (1)\n"
      "  --qd N              requests in flight per connection (1)\n"
      "  --duration S        measured seconds per size (5)\n"
      "  --iterations N      measured operations per size instead of a duration\n"
      "  --warmup S          unmeasured seconds per size before measuring (1)\n"
      "  --keys N            key space (default: about 32 MiB of values, 16..10000 keys)\n"
      "  --ratio R           mixed: fraction of GETs (0.5)\n"
      "  --cores N           data-plane cores of the bench (1)\n"
      "  --lcores L          EAL --lcores map, e.g. 0@0,1@1: lcore 0 drives, the others are the cores\n"
      "  --device NAME       RDMA device (default: $RDMAGATE_RXE_DEV, else the only one)\n"
      "  --yield             yield the CPU when idle (shared CPUs, e.g. the 2-vCPU guest)\n"
      "  --verify            self-describing values; every GET checks every byte\n"
      "  --max-message B     inline threshold offered to the gateway (4096)\n"
      "  --connect-timeout S (20)\n"
      "  --json FILE|-       also write the results as JSON (-: JSON on stdout instead of the table)\n"
      "  --quiet             no progress lines\n");
}

bool parse_u64(const char* s, std::uint64_t* out) {
  if (s == nullptr || *s == '\0' || *s == '-') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s) return false;
  std::uint64_t mul = 1;
  const std::string suffix(end);
  if (suffix == "k" || suffix == "K" || suffix == "KiB")
    mul = 1024;
  else if (suffix == "m" || suffix == "M" || suffix == "MiB")
    mul = 1024 * 1024;
  else if (!suffix.empty())
    return false;
  if (v > UINT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

bool parse_double(const char* s, double* out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

bool parse_sizes(const std::string& s, std::vector<std::uint64_t>* out) {
  out->clear();
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = s.find(',', pos);
    const std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    std::uint64_t v;
    if (!parse_u64(item.c_str(), &v)) return false;
    out->push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return !out->empty();
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  Options o;
  bool have_mode = false;
  if (const char* a = std::getenv("RDMAGATE_RXE_ADDR"); a != nullptr) o.server = a;
  o.device = rdmagate::control::device_name_from_env();
  std::string lcores_map;
  std::string json_path;
  std::uint64_t cores = 0;
  bool bad = false;
  for (int i = 1; i < argc && !bad; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    std::uint64_t u = 0;
    auto need = [&](bool ok) {
      if (!ok) {
        std::fprintf(stderr, "rdmagate-bench: bad or missing value for %s\n", a.c_str());
        bad = true;
      }
      ++i;
    };
    if (a == "--yield")
      o.yield = true;
    else if (a == "--verify")
      o.verify = true;
    else if (a == "--quiet")
      o.progress = false;
    else if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--server")
      need(v != nullptr && *v != '\0' && (o.server = v, true));
    else if (a == "--port")
      need(parse_u64(v, &u) && u > 0 && u < 65536 && (o.port = static_cast<std::uint16_t>(u), true));
    else if (a == "--sizes")
      need(v != nullptr && parse_sizes(v, &o.sizes));
    else if (a == "--connections")
      need(parse_u64(v, &u) && u > 0 && u <= 4096 && (o.connections = static_cast<std::uint32_t>(u), true));
    else if (a == "--qd")
      need(parse_u64(v, &u) && u > 0 && u <= 4096 && (o.qd = static_cast<std::uint32_t>(u), true));
    else if (a == "--duration")
      need(parse_double(v, &o.duration_s) && o.duration_s > 0);
    else if (a == "--iterations")
      need(parse_u64(v, &o.iterations) && o.iterations > 0);
    else if (a == "--warmup")
      need(parse_double(v, &o.warmup_s) && o.warmup_s >= 0);
    else if (a == "--keys")
      need(parse_u64(v, &o.keys) && o.keys > 0 && o.keys < (1ull << 40));
    else if (a == "--ratio")
      need(parse_double(v, &o.ratio) && o.ratio >= 0 && o.ratio <= 1);
    else if (a == "--cores")
      need(parse_u64(v, &cores) && cores > 0 && cores < 64);
    else if (a == "--lcores")
      need(v != nullptr && *v != '\0' && (lcores_map = v, true));
    else if (a == "--device")
      need(v != nullptr && (o.device = v, true));
    else if (a == "--max-message")
      need(parse_u64(v, &u) && u >= 64 && u <= (1u << 20) &&
           (o.max_message = static_cast<std::uint32_t>(u), true));
    else if (a == "--connect-timeout")
      need(parse_double(v, &o.connect_timeout_s) && o.connect_timeout_s > 0);
    else if (a == "--json")
      need(v != nullptr && *v != '\0' && (json_path = v, true));
    else if (a.rfind("-", 0) != 0 && !have_mode) {
      if (!rdmagate::bench::parse_mode(a, &o.mode)) {
        std::fprintf(stderr, "rdmagate-bench: unknown mode '%s' (echo, sink, put, get, mixed)\n", a.c_str());
        return 2;
      }
      have_mode = true;
    } else {
      std::fprintf(stderr, "rdmagate-bench: unknown option %s (--help lists them)\n", a.c_str());
      bad = true;
    }
  }
  if (bad) return 2;
  if (!have_mode) {
    std::fprintf(stderr, "rdmagate-bench: no MODE given (echo, sink, put, get, mixed)\n");
    return 2;
  }
  if (o.mode != Mode::kMixed && o.ratio != 0.5) {
    std::fprintf(stderr, "rdmagate-bench: --ratio applies to mixed only\n");
    return 2;
  }
  if (o.server.empty()) {
    std::fprintf(stderr, "rdmagate-bench: --server ADDR is required\n");
    return 2;
  }
  // Validate what does not need EAL before touching the device (lcores are checked after EAL is up).
  {
    Options probe_opts = o;
    probe_opts.lcores = {1};
    const std::string err = rdmagate::bench::validate(probe_opts);
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
                   rdmagate::control::rdma_status_name(probe.status), self_command(argc, argv).c_str());
      return rdmagate::control::kSkipExitCode;
    }
    std::fprintf(stderr, "rdmagate-bench: %s\n", probe.message.c_str());
    return 1;
  }
  o.device = probe.device;

  // EAL: lcore 0 (this thread) drives; one worker lcore per bench core. Default map: worker i on CPU i mod N.
  if (cores == 0) cores = 1;
  if (lcores_map.empty()) {
    const unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
    lcores_map = "0@0";
    for (unsigned l = 1; l <= cores; ++l)
      lcores_map += "," + std::to_string(l) + "@" + std::to_string(l % ncpu);
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
    std::fprintf(stderr, "rdmagate-bench: --lcores %s has %zu worker lcores, --cores asks for %llu\n",
                 lcores_map.c_str(), o.lcores.size(), static_cast<unsigned long long>(cores));
    return 2;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  o.interrupt = &g_interrupt;

  rdmagate::bench::Report report;
  const bool ran = rdmagate::bench::run(o, &report);
  if (json_path != "-") rdmagate::bench::print_table(stdout, report);
  if (!json_path.empty()) {
    const std::string j = rdmagate::bench::to_json(report);
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

#include "daemon/gateway_cli.hpp"

#include <getopt.h>

#include "conf/host.hpp"

#ifndef RDMAGATE_DAEMON_VERSION
#define RDMAGATE_DAEMON_VERSION "unknown"
#endif

namespace rdmagate::control {

namespace {

enum OptionId : int {
  kOptConfig = 1000,
  kOptCheck,
  kOptPrint,
  kOptHostCpus,
  kOptNoHost,
  kOptSet,
  kOptVersion,
  kOptHelp = 'h'
};

}  // namespace

std::string_view version_string() noexcept {
  return RDMAGATE_DAEMON_VERSION;
}

std::string version_text() {
  return "rdmagate " + std::string(version_string()) + "\n";
}

std::string usage_text(std::string_view program) {
  const std::string p(program.empty() ? "rdmagate" : program);
  const std::string def(kDefaultConfigPath);
  return "usage: " + p + " [--config FILE] [--set KEY=VALUE]...\n" + "       " + p +
         " --check-config FILE [--print] [--host-cpus LIST | --no-host]\n" + "       " +
         std::string(p.size(), ' ') + " [--set KEY=VALUE]...\n" + "       " + p +
         " --version | -h | --help\n"
         "\n"
         "rdmagate: polled-mode RDMA gateway and object store.\n"
         "\n"
         "  --config FILE         run the gateway with the YAML configuration FILE\n"
         "                        (default " +
         def +
         ")\n"
         "  --check-config FILE   load and validate FILE (with the --set overrides), exit 0 if valid, 78 if\n"
         "                        not (every error listed); touches no RDMA device and starts no DPDK.\n"
         "                        It checks FILE against this machine: its CPUs and CPU affinity, and\n"
         "                        that eal.hugepage_dir is a hugetlbfs mount here\n"
         "  --print               with --check-config: also print the effective configuration, every key\n"
         "                        with its value and where that came from (default, file or --set)\n"
         "  --host-cpus LIST      with --check-config: check FILE for a machine whose CPUs are LIST\n"
         "                        (a cpulist such as 0-63 or 0-15,32-47) instead of this one; the other\n"
         "                        checks that read this machine are skipped and named\n"
         "  --no-host             with --check-config: skip every check that reads this machine (CPUs,\n"
         "                        affinity, eal.hugepage_dir) and name them; for a FILE written for\n"
         "                        another machine\n"
         "  --set KEY=VALUE       override one key after the file is read (repeatable; the last one wins);\n"
         "                        VALUE is YAML: --set dataplane.cores=1-3 --set "
         "'listen.addresses=[\"::1\"]'\n"
         "  --version             print the version\n"
         "  -h, --help            print this help\n"
         "\n"
         "Exit status: 0 success (also after a SIGTERM drain); 78 configuration error; 1 startup failure\n"
         "(device, memory, EAL); 2 command-line error.\n"
         "Signals: SIGTERM/SIGINT drain and exit 0; SIGHUP re-reads the file and applies the [live] keys.\n"
         "Logs: one line per event on stderr, logfmt or JSON (logging.format), DPDK's own lines included.\n"
         "The annotated configuration shipped with rdmagate (the container image installs it as\n" +
         def +
         ") describes every key, its unit and its default;\n"
         "--check-config FILE --print shows the values in effect and where each came from.\n";
}

CliParse parse_cli(int argc, char* const* argv) {
  static const option kLong[] = {
      {"config", required_argument, nullptr, kOptConfig},
      {"check-config", required_argument, nullptr, kOptCheck},
      {"print", no_argument, nullptr, kOptPrint},
      {"host-cpus", required_argument, nullptr, kOptHostCpus},
      {"no-host", no_argument, nullptr, kOptNoHost},
      {"set", required_argument, nullptr, kOptSet},
      {"version", no_argument, nullptr, kOptVersion},
      {"help", no_argument, nullptr, kOptHelp},
      {nullptr, 0, nullptr, 0},
  };
  CliParse r;
  CliOptions& o = r.options;
  bool run = false, check = false, version = false, help = false;
  // optind = 0 makes glibc reinitialise its scanner (a parse per test); opterr = 0: errors are ours to word.
  optind = 0;
  opterr = 0;
  // "+": stop at the first non-option, which is then reported as unexpected rather than permuted away.
  // ":" first: a missing argument returns ':' rather than '?', so the two errors read differently.
  // "h": -h is --help (kOptHelp is 'h'), the one short option an operator tries first.
  for (;;) {
    int index = -1;
    const int c = getopt_long(argc, argv, "+:h", kLong, &index);
    if (c == -1) break;
    switch (c) {
      case kOptConfig:
      case kOptCheck: {
        const bool is_check = c == kOptCheck;
        const char* name = is_check ? "--check-config" : "--config";
        if ((is_check && check) || (!is_check && run)) {
          r.error = std::string(name) + " given twice";
          return r;
        }
        if (optarg == nullptr || *optarg == '\0') {
          r.error = std::string(name) + ": empty file name";
          return r;
        }
        (is_check ? check : run) = true;
        o.config_path = optarg;
        break;
      }
      case kOptSet: {
        const std::string_view v = optarg != nullptr ? optarg : "";
        const std::size_t eq = v.find('=');
        if (eq == std::string_view::npos || eq == 0) {
          r.error = "--set " + std::string(v) + ": expected KEY=VALUE, e.g. --set dataplane.queue_depth=128";
          return r;
        }
        o.overrides.emplace_back(v);
        break;
      }
      case kOptPrint:
        o.print_config = true;
        break;
      case kOptHostCpus: {
        if (o.host_cpus) {
          r.error = "--host-cpus given twice";
          return r;
        }
        const std::string_view v = optarg != nullptr ? optarg : "";
        std::string why;
        std::optional<conf::CpuSet> cpus = conf::CpuSet::parse(v, conf::kMaxHostCpus, &why);
        if (!cpus || cpus->empty()) {
          r.error = "--host-cpus " + std::string(v) + ": " + (cpus ? "empty" : why) +
                    "; expected a cpulist, e.g. --host-cpus 0-63";
          return r;
        }
        o.host_cpus = std::move(cpus);
        break;
      }
      case kOptNoHost:
        o.no_host = true;
        break;
      case kOptVersion:
        version = true;
        break;
      case kOptHelp:
        help = true;
        break;
      case ':': {
        // optind has moved past the option that lacked its argument.
        const char* opt = optind >= 1 && optind <= argc ? argv[optind - 1] : "?";
        r.error = std::string(opt) + ": missing argument";
        return r;
      }
      default: {
        const char* opt = optind >= 1 && optind <= argc ? argv[optind - 1] : "?";
        r.error = std::string("unknown option ") + opt;
        return r;
      }
    }
  }
  if (optind < argc) {
    r.error = std::string("unexpected argument \"") + argv[optind] + "\"";
    return r;
  }
  if (help) {
    o.mode = CliMode::kHelp;
  } else if (version) {
    o.mode = CliMode::kVersion;
  } else if (run && check) {
    r.error = "--config and --check-config exclude each other";
    return r;
  } else if (o.print_config && !check) {
    r.error = "--print needs --check-config FILE";
    return r;
  } else if ((o.host_cpus || o.no_host) && !check) {
    // A running gateway runs here: only a check can be about another machine.
    r.error = std::string(o.no_host ? "--no-host" : "--host-cpus") + " needs --check-config FILE";
    return r;
  } else if (o.host_cpus && o.no_host) {
    r.error = "--host-cpus and --no-host exclude each other";
    return r;
  } else if (check) {
    o.mode = CliMode::kCheckConfig;
  } else {
    o.mode = CliMode::kRun;
    if (!run) {
      o.config_path = kDefaultConfigPath;
      o.config_path_is_default = true;
    }
  }
  r.ok = true;
  return r;
}

}  // namespace rdmagate::control

// rdmagate: the gateway daemon. See daemon/gateway_cli.hpp for the command line, daemon/gateway.hpp for
// what starts in which order, conf/README.md for the configuration.
//
// Exit codes: 0 after a SIGTERM/SIGINT drain, after --check-config of a valid file, --help and --version;
// 78 (EX_CONFIG) for a configuration error (every error listed, each naming file, line and key) and for a
// missing default config file, so that a supervisor does not retry what only an edit can fix (the systemd
// unit's RestartPreventExitStatus=78);
// 1 for a startup failure (device, memory, EAL: a retry may succeed); 2 for a command-line error. A
// configuration error is always reported before any device, EAL or thread is touched.
#include <sysexits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "conf/conf.hpp"
#include "daemon/gateway.hpp"
#include "daemon/gateway_cli.hpp"
#include "daemon/log.hpp"
#include "dataplane/eal_runtime.hpp"

// Also linked into the guest test (RDMAGATE_GATEWAY_MAIN_EMBEDDED), which re-executes itself as the daemon,
// so the test binary and its library closure are all the guest needs.
int rdmagate_main(int argc, char** argv) {
  using namespace rdmagate;
  const control::CliParse cli = control::parse_cli(argc, argv);
  if (!cli.ok) {
    std::cerr << "rdmagate: " << cli.error << "\n"
              << "try 'rdmagate --help'\n";
    return 2;
  }
  const control::CliOptions& o = cli.options;
  switch (o.mode) {
    case control::CliMode::kHelp:
      std::cout << control::usage_text("rdmagate");
      return 0;
    case control::CliMode::kVersion:
      std::cout << control::version_text();
      return 0;
    case control::CliMode::kRun:
    case control::CliMode::kCheckConfig:
      break;
  }

  // The loader would say "cannot read: No such file or directory" about a path the operator never typed.
  if (o.config_path_is_default && access(o.config_path.c_str(), F_OK) != 0 && errno == ENOENT) {
    std::cerr << "rdmagate: no --config given and the default configuration " << o.config_path
              << " does not exist; not started\n"
              << "install one there (an empty file selects every default) or give --config FILE\n";
    return EX_CONFIG;
  }

  conf::LoadOptions load;
  load.overrides = o.overrides;
  if (o.host_cpus) {
    load.host = conf::statedHostFacts(*o.host_cpus);
  } else if (!o.no_host) {
    load.host = conf::readHostFacts();
  }
  conf::Result<conf::LoadedConfig> loaded = conf::loadConfigFile(o.config_path, load);
  if (!loaded) {
    std::cerr << conf::formatErrors(loaded.errors());
    std::cerr << "rdmagate: " << o.config_path << ": " << loaded.errors().size()
              << (loaded.errors().size() == 1 ? " error" : " errors") << "; not started\n";
    return EX_CONFIG;
  }
  if (o.mode == control::CliMode::kCheckConfig) {
    // Quiet unless asked: a check before every start (a unit's ExecStartPre, an init container) would
    // otherwise put the whole configuration into the log each time.
    if (o.print_config) std::cout << conf::dumpConfig(loaded->config, &loaded->origins);
    std::cerr << "rdmagate: " << o.config_path << ": configuration is valid";
    // Only when asked for another machine: readHostFacts() leaves a fact out only where this machine
    // cannot tell, which is not worth a line on every check.
    if (o.host_cpus || o.no_host) {
      const std::vector<std::string> skipped = conf::skippedHostChecks(load.host);
      if (o.host_cpus) std::cerr << " for a host with cpus " << o.host_cpus->str();
      if (!skipped.empty()) {
        std::cerr << "; not checked (" << (o.no_host ? "--no-host" : "--host-cpus") << "):";
        for (std::size_t i = 0; i < skipped.size(); ++i) std::cerr << (i == 0 ? " " : "; ") << skipped[i];
      }
    }
    std::cerr << "\n";
    return 0;
  }

  control::log::Logger& lg = control::log::logger();
  lg.configure(loaded->config.logging.format, loaded->config.logging.level);
  lg.info("starting", {{"version", control::version_string()},
                       {"config", o.config_path},
                       {"overrides", static_cast<std::uint64_t>(o.overrides.size())}});
  for (const std::string& s : o.overrides) lg.debug("override", {{"set", s}});
  // DPDK's own lines in the same stream and format, from before rte_eal_init on (EAL logs while it starts).
  std::string route_error;
  const bool routed = dataplane::route_eal_log(
      [](int priority, std::string_view line) {
        control::log::logger().log(control::log::level_of_syslog_priority(priority), line,
                                   {{"component", "dpdk"}});
      },
      &route_error);
  if (!routed) lg.warn("dpdk log lines stay on stderr", {{"error", route_error}});

  // Before EAL or civetweb start a thread: every thread inherits the blocked mask.
  std::string error;
  const int sigfd = control::block_daemon_signals(&error);
  if (sigfd < 0) {
    lg.error("startup failed", {{"error", error}});
    return 1;
  }
  control::Gateway::Options opts;
  opts.config_path = o.config_path;
  opts.load = load;
  opts.signal_fd = sigfd;
  auto gw = control::Gateway::start(*loaded, opts, &error);
  if (!gw) {
    lg.error("startup failed", {{"error", error}});
    return 1;
  }
  const int rc = gw->run();
  gw.reset();
  return rc;
}

#ifndef RDMAGATE_GATEWAY_MAIN_EMBEDDED
int main(int argc, char** argv) {
  return rdmagate_main(argc, argv);
}
#endif

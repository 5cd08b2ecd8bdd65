#pragma once
// The rdmagate command line, parsed without EAL, verbs or a config file, so host unit tests cover it.
//
//   rdmagate [--config FILE] [--set KEY=VALUE]...                 run the gateway (FILE: kDefaultConfigPath)
//   rdmagate --check-config FILE [--print] [--host-cpus LIST | --no-host] [--set KEY=VALUE]...
//                                            load and validate, exit; --print also prints the effective
//                                            config; --host-cpus / --no-host check a config written for
//                                            another machine (its CPUs as stated / no machine facts at all)
//   rdmagate --version | --help | -h
//
// Why getopt_long and not CLI11: CLI11 is not among the build dependencies (Debian 12 packages it, but
// nothing else here needs it), and a handful of options with one repeatable one are what getopt_long does.
// DPDK's own options never reach this parser: the daemon builds EAL's argument vector from the config.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conf/cpuset.hpp"

namespace rdmagate::control {

// Where the packages put the config (the container image, the systemd unit's ExecStart, deploy/README.md).
inline constexpr std::string_view kDefaultConfigPath = "/etc/rdmagate/rdmagate.yaml";

enum class CliMode : unsigned char {
  kRun,          // --config FILE, or no mode option at all
  kCheckConfig,  // --check-config FILE
  kVersion,      // --version
  kHelp,         // --help, -h
};

struct CliOptions {
  CliMode mode = CliMode::kHelp;
  std::string config_path;
  bool config_path_is_default = false;  // kRun without --config: a missing file then needs a hint
  bool print_config = false;            // --print: kCheckConfig prints the effective config
  // kCheckConfig only. --host-cpus: validate against these CPUs instead of this machine's, and skip the
  // other checks that read this machine; --no-host: skip every check that reads this machine.
  std::optional<conf::CpuSet> host_cpus;
  bool no_host = false;
  std::vector<std::string> overrides;  // --set values in order ("key=value"), for conf::LoadOptions
};

struct CliParse {
  bool ok = false;
  CliOptions options;
  std::string error;  // one line, without the program name, when !ok
};

// Parses argv (argv[0] is the program name). Never prints, never exits; resets getopt's state first, so it
// can run more than once per process (tests).
CliParse parse_cli(int argc, char* const* argv);

// The --help text and the --version line ("rdmagate 0.1.0 (v0.1.0-12-gabcdef)").
std::string usage_text(std::string_view program);
std::string version_text();
// The version alone, as CMake gave it: project version plus `git describe` at configure time when known.
std::string_view version_string() noexcept;

}  // namespace rdmagate::control

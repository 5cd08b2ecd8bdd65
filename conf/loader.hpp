#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "conf/host.hpp"
#include "conf/origins.hpp"
#include "conf/result.hpp"

namespace rdmagate::conf {

// Config files are small; anything bigger is not a config file (or is an attack on the parser).
inline constexpr std::size_t kMaxConfigBytes = 1 << 20;

struct LoadOptions {
  // Single-key overrides exactly as given after --set: "dataplane.queue_depth=256". The value is parsed
  // as YAML (so "[1, 2]" is a list and "'7'" a string) and checked like the file's. Applied in order
  // after the file; a later one wins.
  std::vector<std::string> overrides;
  // Facts the checks depend on; readHostFacts() for the running machine. Left empty, the CPU checks
  // are skipped.
  HostFacts host;
};

// Loads, overrides and validates in one pass and reports every error found, each naming the file, line,
// column and key (or the --set). Never throws: yaml-cpp's exceptions become errors with their position.
// On success eal.lcores is resolved (never empty).
Result<LoadedConfig> loadConfigFile(const std::string& path, const LoadOptions& options);

// The same from text in memory; `source_name` stands for the file name in messages.
Result<LoadedConfig> loadConfigText(std::string_view yaml, std::string_view source_name,
                                    const LoadOptions& options);

}  // namespace rdmagate::conf

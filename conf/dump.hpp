#pragma once

#include <string>
#include <vector>

#include "conf/config.hpp"
#include "conf/origins.hpp"
#include "conf/schema.hpp"

namespace rdmagate::conf {

// The effective configuration as YAML, every key present, in file order, for --check-config. The output
// loads back to the same Config. With `origins`, each line ends in a comment saying where the value came
// from ("# conf/x.yaml:12:3", "# --set ...", "# default").
std::string dumpConfig(const Config& config, const ConfigOrigins* origins = nullptr);

// One key whose value differs between two configs, for the SIGHUP log.
struct ConfigChange {
  std::string key;     // "protocol.keepalive_ms"
  std::string before;  // values as one-line YAML
  std::string after;
  Reload reload;  // kRestart: the running gateway keeps `before` until restarted
};

// Every key that differs, in file order.
std::vector<ConfigChange> diffConfig(const Config& running, const Config& next);

// `running` with only the live-reloadable keys taken from `next`. Live keys never take part in a
// cross-check with a restart-only key, so if both inputs are valid, so is the result.
Config applyLiveChanges(const Config& running, const Config& next);

}  // namespace rdmagate::conf

#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rdmagate::conf {

// Where a setting's value came from. Kept for every key after loading so that checks which run later
// (against the device, after a SIGHUP merge) still point at the line an operator has to edit.
enum class OriginKind : std::uint8_t {
  kDefault,   // the key was not set; `source` names the config file the default stands in for
  kFile,      // a line of the config file
  kOverride,  // a --set option on the command line
};

struct Origin {
  OriginKind kind = OriginKind::kDefault;
  std::string source;  // file path (kDefault, kFile) or the full "key=value" override text (kOverride)
  int line = 0;        // 1-based; 0 when unknown
  int column = 0;      // 1-based; 0 when unknown

  // "conf/x.yaml:12:3", "--set dataplane.queue_depth=256", or "default".
  std::string str() const;
  bool operator==(const Origin&) const = default;
};

struct ConfigError {
  Origin origin;
  std::string
      key;  // full key path ("dataplane.queue_depth", "listen.addresses[1]"); empty for file-level errors
  std::string message;

  // Compiler style, one line:
  //   conf/x.yaml:12:3: dataplane.queue_depth: 70000 is out of range [4, 16384]
  //   --set dataplane.queue_depth: 70000 is out of range [4, 16384]
  //   conf/x.yaml: dataplane.cores (default): cpu 1 does not exist on this host (online cpus: 0)
  std::string str() const;
};

// One error per line, each ending in '\n'.
std::string formatErrors(const std::vector<ConfigError>& errors);

}  // namespace rdmagate::conf

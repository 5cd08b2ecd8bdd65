#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::conf {

// What a SIGHUP can change in a running gateway. Everything else needs a restart: it sized memory, pinned
// threads, was negotiated with peers, or was handed to EAL.
enum class Reload : std::uint8_t { kLive, kRestart };

std::string_view toString(Reload r) noexcept;  // "live", "restart"

// Reference data for one key, generated from the same table the parser uses, so documentation and help
// output cannot drift from what is enforced.
struct KeyInfo {
  std::string_view key;       // full path, e.g. "dataplane.queue_depth", "store.rados.pool"
  std::string_view type;      // "integer", "boolean", "string", "enum", "cpu list", ...
  std::string_view units;     // "ms", "bytes", "MiB", ... ; empty when unitless
  std::string default_value;  // as YAML, e.g. "64", "[1]", "\"auto\""
  std::string range;          // e.g. "[4, 16384]", "trace | debug | info | warn | error"
  Reload reload;
  std::string_view description;
};

// Every key, in file order (section by section). A key of a nested section has a three-part path:
// "store.rados.pool" is `pool` in the mapping `rados` under `store`.
const std::vector<KeyInfo>& schema();
// The top-level section names, in file order; nested sections appear only in their keys' paths.
const std::vector<std::string_view>& schemaSections();

}  // namespace rdmagate::conf

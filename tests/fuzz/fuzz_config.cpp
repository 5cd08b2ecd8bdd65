// libFuzzer target for the configuration loader (conf/): whatever an operator's file holds, loading it
// either succeeds or returns errors that say where, and never crashes, hangs or throws. What loads must
// dump (--check-config) to YAML that loads back to the same configuration.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "conf/dump.hpp"
#include "conf/loader.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

rdmagate::conf::LoadOptions options() {
  rdmagate::conf::LoadOptions o;
  // A fixed 16-CPU host, so the CPU checks run (and the result does not depend on the fuzzing machine).
  for (std::uint32_t c = 0; c < 16; ++c) o.host.online_cpus.insert(c);
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmagate::conf;
  static const LoadOptions opts = options();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const Result<LoadedConfig> loaded = loadConfigText(text, "fuzz.yaml", opts);
  if (!loaded) {
    RDMAGATE_FUZZ_CHECK(!loaded.errors().empty());
    for (const ConfigError& e : loaded.errors()) {
      const std::string line = e.str();
      RDMAGATE_FUZZ_CHECK(line.rfind("fuzz.yaml", 0) == 0);  // every error names the file
      RDMAGATE_FUZZ_CHECK(!e.message.empty());
    }
    return 0;
  }
  const std::string dumped = dumpConfig(loaded.value().config);
  const Result<LoadedConfig> again = loadConfigText(dumped, "dump.yaml", opts);
  if (!again) {
    for (const ConfigError& e : again.errors()) std::fprintf(stderr, "%s\n", e.str().c_str());
    std::fprintf(stderr, "--- dump:\n%s\n", dumped.c_str());
  }
  RDMAGATE_FUZZ_CHECK(again.ok());
  RDMAGATE_FUZZ_CHECK(diffConfig(loaded.value().config, again.value().config).empty());
  return 0;
}

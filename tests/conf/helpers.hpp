#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conf/conf.hpp"

namespace rdmagate::conf::testing {

inline constexpr std::string_view kSource = "conf/x.yaml";

// A 16-CPU host with no affinity restriction: the host checks run, deterministically.
inline HostFacts host16() {
  HostFacts h;
  for (std::uint32_t c = 0; c < 16; ++c) h.online_cpus.insert(c);
  return h;
}

// Raw string literals in the tests start with a newline so the YAML lines up in the source; dropping it
// makes the first YAML line line 1.
inline std::string_view yaml(std::string_view text) {
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  return text;
}

inline Result<LoadedConfig> load(std::string_view text, std::vector<std::string> overrides = {},
                                 HostFacts host = host16()) {
  LoadOptions opts;
  opts.overrides = std::move(overrides);
  opts.host = std::move(host);
  return loadConfigText(yaml(text), kSource, opts);
}

// Every error as the operator sees it; empty when the config loads.
inline std::vector<std::string> errorsOf(std::string_view text, std::vector<std::string> overrides = {},
                                         HostFacts host = host16()) {
  auto r = load(text, std::move(overrides), std::move(host));
  std::vector<std::string> out;
  if (!r) {
    for (const auto& e : r.errors()) out.push_back(e.str());
  }
  return out;
}

// The config an empty file produces on host16(): the struct defaults with eal.lcores resolved.
inline Config loadedDefaults() {
  Config c;
  c.eal.lcores = CpuSet{0, 1};
  return c;
}

}  // namespace rdmagate::conf::testing

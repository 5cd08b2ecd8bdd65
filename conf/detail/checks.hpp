#pragma once

// Internal to rdmagate_conf.

#include <set>
#include <string>
#include <vector>

#include "conf/config.hpp"
#include "conf/error.hpp"
#include "conf/host.hpp"
#include "conf/origins.hpp"

namespace rdmagate::conf::detail {

// validateConfig, skipping every check that involves a key in `failed` (its value was rejected, so the
// default it kept would only produce misleading follow-on errors).
void validateInto(const Config& config, const ConfigOrigins& origins, const HostFacts& host,
                  const std::set<std::string>& failed, std::vector<ConfigError>& out);

// Orders errors as an operator reads them: file errors by line, then overrides in command-line order,
// then errors about keys left at their defaults.
void sortErrors(std::vector<ConfigError>& errors);

}  // namespace rdmagate::conf::detail

#pragma once

// The configuration library in one include. Typical daemon use:
//
//   conf::LoadOptions opts{.overrides = set_args, .host = conf::readHostFacts()};
//   auto loaded = conf::loadConfigFile(path, opts);
//   if (!loaded) { std::cerr << conf::formatErrors(loaded.errors()); return 2; }
//   if (check_only) { std::cout << conf::dumpConfig(loaded->config, &loaded->origins); return 0; }
//   ... open the device, read its limits ...
//   if (auto errs = conf::validateAgainstDevice(*loaded, limits); !errs.empty()) { ...; return 2; }

#include "conf/config.hpp"
#include "conf/cpuset.hpp"
#include "conf/dump.hpp"
#include "conf/error.hpp"
#include "conf/host.hpp"
#include "conf/loader.hpp"
#include "conf/net.hpp"
#include "conf/origins.hpp"
#include "conf/result.hpp"
#include "conf/schema.hpp"
#include "conf/secrets.hpp"
#include "conf/validate.hpp"

#include "conf/dump.hpp"

#include <yaml-cpp/yaml.h>

#include "conf/detail/keys.hpp"

namespace rdmagate::conf {

std::string dumpConfig(const Config& config, const ConfigOrigins* origins) {
  YAML::Emitter out;
  out.SetIndent(2);
  out << YAML::BeginMap;
  std::string_view section;
  for (const detail::Key* k : detail::allKeys()) {
    if (k->section() != section) {
      if (!section.empty()) out << YAML::EndMap;
      section = k->section();
      out << YAML::Key << std::string(section) << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << std::string(k->name()) << YAML::Value;
    k->emitValue(out, config);
    if (origins != nullptr) out << YAML::Comment(origins->of(k->path()).str());
  }
  if (!section.empty()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<ConfigChange> diffConfig(const Config& running, const Config& next) {
  std::vector<ConfigChange> out;
  for (const detail::Key* k : detail::allKeys()) {
    if (!k->equal(running, next)) {
      out.push_back(ConfigChange{std::string(k->path()), k->format(running), k->format(next), k->reload()});
    }
  }
  return out;
}

Config applyLiveChanges(const Config& running, const Config& next) {
  Config merged = running;
  for (const detail::Key* k : detail::allKeys()) {
    if (k->reload() == Reload::kLive) k->copy(merged, next);
  }
  return merged;
}

}  // namespace rdmagate::conf

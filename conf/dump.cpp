#include "conf/dump.hpp"

#include <yaml-cpp/yaml.h>

#include <string_view>
#include <vector>

#include "conf/detail/keys.hpp"

namespace rdmagate::conf {

namespace {

// "store.rados" -> {"store", "rados"}.
std::vector<std::string_view> parts(std::string_view section) {
  std::vector<std::string_view> out;
  for (std::size_t start = 0;;) {
    const std::size_t dot = section.find('.', start);
    out.push_back(section.substr(start, dot - start));
    if (dot == std::string_view::npos) return out;
    start = dot + 1;
  }
}

}  // namespace

std::string dumpConfig(const Config& config, const ConfigOrigins* origins) {
  YAML::Emitter out;
  out.SetIndent(2);
  out << YAML::BeginMap;
  // The sections whose mappings are open, outermost first. A nested section's keys follow its parent's
  // in the table, so it is written as the parent's last entry.
  std::vector<std::string_view> open;
  for (const detail::Key* k : detail::allKeys()) {
    const std::vector<std::string_view> want = parts(k->section());
    std::size_t common = 0;
    while (common < open.size() && common < want.size() && open[common] == want[common]) ++common;
    for (; open.size() > common; open.pop_back()) out << YAML::EndMap;
    for (; open.size() < want.size(); open.push_back(want[open.size()])) {
      out << YAML::Key << std::string(want[open.size()]) << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << std::string(k->name()) << YAML::Value;
    k->emitValue(out, config);
    if (origins != nullptr) out << YAML::Comment(origins->of(k->path()).str());
  }
  for (; !open.empty(); open.pop_back()) out << YAML::EndMap;
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

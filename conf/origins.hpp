#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "conf/config.hpp"
#include "conf/error.hpp"

namespace rdmagate::conf {

// Where each key of a loaded Config came from. Lists also remember each element's line, so an error about
// one address or one CPU points at that element. For CPU lists the element index is the CPU id (the set
// is stored sorted, so a position would not match the file); for other lists it is the list position.
class ConfigOrigins {
 public:
  ConfigOrigins() = default;
  // `default_source` names the file that defaulted keys stand in for, so their errors still name it.
  explicit ConfigOrigins(std::string default_source) : default_source_(std::move(default_source)) {}

  Origin of(std::string_view key) const;
  // Falls back to the key's own origin when the element has none (a list given as one string).
  Origin ofElement(std::string_view key, std::size_t index) const;
  bool isDefault(std::string_view key) const { return of(key).kind == OriginKind::kDefault; }

  void set(std::string_view key, Origin origin);  // also forgets the key's element origins
  void setElement(std::string_view key, std::size_t index, Origin origin);

  const std::string& defaultSource() const noexcept { return default_source_; }

 private:
  std::string default_source_;
  std::map<std::string, Origin, std::less<>> map_;
};

// A Config together with where its values came from; what the loader returns.
struct LoadedConfig {
  Config config;
  ConfigOrigins origins;
};

}  // namespace rdmagate::conf

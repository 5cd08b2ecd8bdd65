#pragma once

// Internal to rdmagate_conf: the typed key table that parsing, validation, dumping and diffing share.

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "conf/config.hpp"
#include "conf/error.hpp"
#include "conf/origins.hpp"
#include "conf/schema.hpp"

namespace rdmagate::conf::detail {

class Diagnostics {
 public:
  void error(const Origin& at, std::string key, std::string message) {
    errors_.push_back(ConfigError{at, std::move(key), std::move(message)});
  }
  // Keys whose value was rejected: they keep their previous value, and cross-key checks involving them
  // are skipped so that one typo does not also produce a cascade of misleading consistency errors.
  void markFailed(std::string_view key) { failed_.emplace(key); }
  // A later override that parses repairs the key; the errors already reported stay.
  void clearFailed(std::string_view key) { failed_.erase(std::string(key)); }
  bool failed(std::string_view key) const { return failed_.count(std::string(key)) != 0; }

  std::vector<ConfigError>& errors() { return errors_; }
  const std::set<std::string>& failedKeys() const { return failed_; }

 private:
  std::vector<ConfigError> errors_;
  std::set<std::string> failed_;
};

// The origin of a YAML node inside the file `base` describes; overrides have no lines to refine.
Origin originOf(const Origin& base, const YAML::Node& node);

class Key {
 public:
  Key(std::string_view path, std::string_view type, std::string_view units, Reload reload,
      std::string_view description);
  virtual ~Key() = default;
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;

  std::string_view path() const noexcept { return path_; }
  // "store" and "capacity_mib" for store.capacity_mib; "store.rados" and "pool" for store.rados.pool.
  std::string_view section() const noexcept { return std::string_view(path_).substr(0, dot_); }
  std::string_view name() const noexcept { return std::string_view(path_).substr(dot_ + 1); }
  Reload reload() const noexcept { return reload_; }
  KeyInfo info() const;

  // Parses `value` into `cfg` and records its origin (`at`, the key's position) and its elements'.
  // Reports every problem in the value; on any, leaves cfg and origins untouched and returns false.
  virtual bool parse(const YAML::Node& value, const Origin& at, Config& cfg, ConfigOrigins& origins,
                     Diagnostics& diag) const = 0;
  // Writes the value (not the key) in a form parse() accepts back.
  virtual void emitValue(YAML::Emitter& out, const Config& cfg) const = 0;
  virtual bool equal(const Config& a, const Config& b) const = 0;
  virtual void copy(Config& dst, const Config& src) const = 0;
  virtual std::string range() const = 0;

  // The value on one line, as YAML flow ("64", "[1, 2]", "\"auto\"").
  std::string format(const Config& cfg) const;

 private:
  std::string path_;
  std::size_t dot_;
  std::string_view type_;
  std::string_view units_;
  Reload reload_;
  std::string_view description_;
};

const std::vector<const Key*>& allKeys();
const Key* findKey(std::string_view path);
// Sections are named by their path: "store", and "store.rados" for the one nested in it.
bool isSection(std::string_view name);
// Every section, nested ones included, in file order (schemaSections() has only the top-level ones).
const std::vector<std::string_view>& allSections();
// Whether `k` is in `section` or in a section nested in it.
bool inSection(const Key& k, std::string_view section);

// The nearest candidate by edit distance, or one the word is a prefix of ("keepalive" for
// "keepalive_ms"); empty when nothing is close enough to be a plausible typo.
std::string closestMatch(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace rdmagate::conf::detail

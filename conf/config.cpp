#include "conf/config.hpp"

#include "conf/origins.hpp"

namespace rdmagate::conf {

std::string_view toString(HugepageMode v) noexcept {
  switch (v) {
    case HugepageMode::kAuto:
      return "auto";
    case HugepageMode::kRequired:
      return "required";
    case HugepageMode::kDisabled:
      return "disabled";
  }
  return "?";
}

std::string_view toString(IdlePolicy v) noexcept {
  switch (v) {
    case IdlePolicy::kBusy:
      return "busy";
    case IdlePolicy::kPause:
      return "pause";
    case IdlePolicy::kYield:
      return "yield";
    case IdlePolicy::kBackoff:
      return "backoff";
    case IdlePolicy::kEvent:
      return "event";
  }
  return "?";
}

std::string_view toString(SrqMode v) noexcept {
  switch (v) {
    case SrqMode::kAuto:
      return "auto";
    case SrqMode::kRequired:
      return "required";
    case SrqMode::kDisabled:
      return "disabled";
  }
  return "?";
}

std::string_view toString(DataplaneBackend v) noexcept {
  switch (v) {
    case DataplaneBackend::kAuto:
      return "auto";
    case DataplaneBackend::kVerbs:
      return "verbs";
    case DataplaneBackend::kMlx5dv:
      return "mlx5dv";
  }
  return "?";
}

std::string_view toString(StoreBackend v) noexcept {
  switch (v) {
    case StoreBackend::kMemory:
      return "memory";
    case StoreBackend::kRados:
      return "rados";
  }
  return "?";
}

std::string_view toString(Authentication v) noexcept {
  switch (v) {
    case Authentication::kRequired:
      return "required";
    case Authentication::kOff:
      return "off";
  }
  return "?";
}

std::string_view toString(LogLevel v) noexcept {
  switch (v) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

std::string_view toString(LogFormat v) noexcept {
  switch (v) {
    case LogFormat::kLogfmt:
      return "logfmt";
    case LogFormat::kJson:
      return "json";
  }
  return "?";
}

std::vector<Cidr> defaultAllowedClients() {
  std::array<std::uint8_t, 16> fc00{0xfc};
  std::array<std::uint8_t, 16> fe80{0xfe, 0x80};
  std::array<std::uint8_t, 16> loopback6{};
  loopback6[15] = 1;
  return {
      Cidr::of(IpAddress::v4(10, 0, 0, 0), 8),     Cidr::of(IpAddress::v4(172, 16, 0, 0), 12),
      Cidr::of(IpAddress::v4(192, 168, 0, 0), 16), Cidr::of(IpAddress::v4(169, 254, 0, 0), 16),
      Cidr::of(IpAddress::v4(127, 0, 0, 0), 8),    Cidr::of(IpAddress::v4(198, 18, 0, 0), 15),
      Cidr::of(IpAddress::v6(fc00), 7),            Cidr::of(IpAddress::v6(fe80), 10),
      Cidr::of(IpAddress::v6(loopback6), 128),
  };
}

// --- ConfigOrigins -----------------------------------------------------------------------------------

namespace {
std::string elementKey(std::string_view key, std::size_t index) {
  return std::string(key) + "[" + std::to_string(index) + "]";
}
}  // namespace

Origin ConfigOrigins::of(std::string_view key) const {
  if (auto it = map_.find(key); it != map_.end()) return it->second;
  return Origin{OriginKind::kDefault, default_source_, 0, 0};
}

Origin ConfigOrigins::ofElement(std::string_view key, std::size_t index) const {
  if (auto it = map_.find(elementKey(key, index)); it != map_.end()) return it->second;
  return of(key);
}

void ConfigOrigins::set(std::string_view key, Origin origin) {
  const std::string prefix = std::string(key) + "[";
  for (auto it = map_.lower_bound(prefix);
       it != map_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    it = map_.erase(it);
  }
  map_.insert_or_assign(std::string(key), std::move(origin));
}

void ConfigOrigins::setElement(std::string_view key, std::size_t index, Origin origin) {
  map_.insert_or_assign(elementKey(key, index), std::move(origin));
}

// --- errors ------------------------------------------------------------------------------------------

std::string Origin::str() const {
  switch (kind) {
    case OriginKind::kDefault:
      return "default";
    case OriginKind::kOverride:
      return "--set " + source;
    case OriginKind::kFile:
      break;
  }
  std::string out = source;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (column > 0) out += ":" + std::to_string(column);
  }
  return out;
}

std::string ConfigError::str() const {
  std::string out;
  switch (origin.kind) {
    case OriginKind::kOverride:
      // The override text may carry a long value; the key alone says which --set it was.
      out = "--set " + (key.empty() ? origin.source : key) + ": ";
      return out + message;
    case OriginKind::kDefault:
      if (!origin.source.empty()) out = origin.source + ": ";
      if (!key.empty()) out += key + " (default): ";
      return out + message;
    case OriginKind::kFile:
      break;
  }
  out = origin.str() + ": ";
  if (!key.empty()) out += key + ": ";
  return out + message;
}

std::string formatErrors(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const auto& e : errors) out += e.str() + "\n";
  return out;
}

}  // namespace rdmagate::conf

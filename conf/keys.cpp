#include "conf/detail/keys.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "conf/secrets.hpp"

namespace rdmagate::conf::detail {
namespace {

// ---------------------------------------------------------------------------------------------------
// Scalars. yaml-cpp gives every scalar as text plus a tag: "?" for a plain scalar, "!" for a quoted
// one. Typing is ours, and strict: an integer key takes a plain decimal integer, never a quoted string,
// because a quoted number usually means a templating tool produced something other than intended.

struct Scalar {
  std::string text;
  bool quoted = false;
};

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "an empty value";
    case YAML::NodeType::Scalar:
      break;
  }
  if (n.Tag() == "!") return "the quoted string \"" + n.Scalar() + "\"";
  return "\"" + n.Scalar() + "\"";
}

std::optional<Scalar> scalarOf(const YAML::Node& n, const Origin& at, std::string_view key,
                               std::string_view expected, Diagnostics& diag) {
  if (n.Type() != YAML::NodeType::Scalar) {
    diag.error(at, std::string(key), "expected " + std::string(expected) + ", got " + describe(n));
    return std::nullopt;
  }
  const std::string& tag = n.Tag();
  Scalar s{n.Scalar(), false};
  if (tag == "!" || tag == "tag:yaml.org,2002:str") {
    s.quoted = true;
  } else if (tag != "?" && tag != "tag:yaml.org,2002:int" && tag != "tag:yaml.org,2002:bool") {
    diag.error(at, std::string(key), "unsupported YAML tag \"" + tag + "\"");
    return std::nullopt;
  }
  return s;
}

std::string rangeText(std::uint64_t lo, std::uint64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

// Decimal only. A leading zero is refused because YAML 1.1 reads "010" as octal 8 and YAML 1.2 as 10.
std::optional<std::uint64_t> parseUnsigned(const Scalar& s, std::uint64_t lo, std::uint64_t hi,
                                           std::string* why) {
  const std::string& t = s.text;
  if (s.quoted) {
    *why = "expected an integer, got the quoted string \"" + t + "\"";
    return std::nullopt;
  }
  bool negative = !t.empty() && t.front() == '-';
  std::string_view digits = std::string_view(t).substr(negative ? 1 : 0);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    *why = "expected an integer, got \"" + t + "\"";
    return std::nullopt;
  }
  if (digits.size() > 1 && digits.front() == '0') {
    *why = "\"" + t + "\" has a leading zero (octal in YAML 1.1); write it without";
    return std::nullopt;
  }
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  bool zero = ec == std::errc() && v == 0;
  if ((negative && !zero) || ec != std::errc() || ptr != digits.data() + digits.size() || v < lo || v > hi) {
    *why = t + " is out of range " + rangeText(lo, hi);
    return std::nullopt;
  }
  return v;
}

std::string joinNames(const std::vector<std::string_view>& names, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += sep;
    out += names[i];
  }
  return out;
}

void emitFlowStrings(YAML::Emitter& out, const std::vector<std::string>& items) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const auto& s : items) out << YAML::DoubleQuoted << s;
  out << YAML::EndSeq;
}

// ---------------------------------------------------------------------------------------------------
// Key kinds. Each binds one member of one section of Config.

// Where a section lives in Config: a member of it (&Config::eal), or, for a section nested in another
// (store.rados), a function that reaches it. Member pointers do not compose, hence the function.
template <class S>
class Section {
 public:
  Section(S Config::*member) : member_(member) {}   // NOLINT(google-explicit-constructor)
  Section(S& (*reach)(Config&)) : reach_(reach) {}  // NOLINT(google-explicit-constructor)
  S& of(Config& c) const { return member_ != nullptr ? c.*member_ : reach_(c); }
  // reach_ only forms a reference; reading through it never writes the const Config.
  const S& of(const Config& c) const { return of(const_cast<Config&>(c)); }

 private:
  S Config::*member_ = nullptr;
  S& (*reach_)(Config&) = nullptr;
};

template <class S, class T>
class FieldKey : public Key {
 public:
  FieldKey(Section<S> section, T S::*field, std::string_view path, std::string_view type,
           std::string_view units, Reload reload, std::string_view description)
      : Key(path, type, units, reload, description), section_(section), field_(field) {}

  bool equal(const Config& a, const Config& b) const override { return get(a) == get(b); }
  void copy(Config& dst, const Config& src) const override { ref(dst) = get(src); }

 protected:
  const T& get(const Config& c) const { return section_.of(c).*field_; }
  T& ref(Config& c) const { return section_.of(c).*field_; }

  // Commits a parsed value: the only place parse() writes.
  bool commit(Config& cfg, ConfigOrigins& origins, const Origin& at, T value) const {
    ref(cfg) = std::move(value);
    origins.set(path(), at);
    return true;
  }

 private:
  Section<S> section_;
  T S::*field_;
};

template <class S, class T>
class UnsignedKey final : public FieldKey<S, T> {
 public:
  // Extra rule beyond the range; returns an error message, or empty when the value is fine.
  using Rule = std::string (*)(std::uint64_t);

  UnsignedKey(Section<S> section, T S::*field, std::string_view path, std::string_view units, T lo, T hi,
              Reload reload, std::string_view description, Rule rule = nullptr,
              std::string_view rule_note = {})
      : FieldKey<S, T>(section, field, path, "integer", units, reload, description),
        lo_(lo),
        hi_(hi),
        rule_(rule),
        rule_note_(rule_note) {
    static_assert(std::is_unsigned_v<T>);
  }

  bool parse(const YAML::Node& value, const Origin& at, Config& cfg, ConfigOrigins& origins,
             Diagnostics& diag) const override {
    auto s = scalarOf(value, at, this->path(), "an integer", diag);
    if (!s) return false;
    std::string why;
    auto v = parseUnsigned(*s, lo_, hi_, &why);
    if (!v) {
      diag.error(at, std::string(this->path()), why);
      return false;
    }
    if (rule_) {
      if (std::string bad = rule_(*v); !bad.empty()) {
        diag.error(at, std::string(this->path()), s->text + " " + bad);
        return false;
      }
    }
    return this->commit(cfg, origins, at, static_cast<T>(*v));
  }
  void emitValue(YAML::Emitter& out, const Config& cfg) const override {
    out << static_cast<std::uint64_t>(this->get(cfg));
  }
  std::string range() const override {
    return rangeText(lo_, hi_) + (rule_note_.empty() ? "" : ", " + std::string(rule_note_));
  }

 private:
  T lo_;
  T hi_;
  Rule rule_;
  std::string_view rule_note_;
};

template <class S>
class BoolKey final : public FieldKey<S, bool> {
 public:
  BoolKey(Section<S> section, bool S::*field, std::string_view path, Reload reload,
          std::string_view description)
      : FieldKey<S, bool>(section, field, path, "boolean", "", reload, description) {}

  bool parse(const YAML::Node& value, const Origin& at, Config& cfg, ConfigOrigins& origins,
             Diagnostics& diag) const override {
    auto s = scalarOf(value, at, this->path(), "true or false", diag);
    if (!s) return false;
    const std::string& t = s->text;
    if (!s->quoted) {
      if (t == "true" || t == "True" || t == "TRUE") return this->commit(cfg, origins, at, true);
      if (t == "false" || t == "False" || t == "FALSE") return this->commit(cfg, origins, at, false);
    }
    static const std::set<std::string> kYaml11 = {"yes", "Yes", "YES", "no",  "No", "NO", "on", "On",
                                                  "ON",  "off", "Off", "OFF", "y",  "Y",  "n",  "N"};
    std::string msg = "expected true or false, got " + describe(value);
    if (!s->quoted && kYaml11.count(t)) msg += " (YAML 1.1 booleans are not accepted)";
    diag.error(at, std::string(this->path()), msg);
    return false;
  }
  void emitValue(YAML::Emitter& out, const Config& cfg) const override {
    out << YAML::TrueFalseBool << this->get(cfg);
  }
  std::string range() const override { return "true, false"; }
};

template <class S>
class StringKey final : public FieldKey<S, std::string> {
 public:
  using Rule = std::string (*)(std::string_view);  // error message or empty

  StringKey(Section<S> section, std::string S::*field, std::string_view path, Reload reload,
            std::string_view range_text, std::string_view description, Rule rule)
      : FieldKey<S, std::string>(section, field, path, "string", "", reload, description),
        range_(range_text),
        rule_(rule) {}

  bool parse(const YAML::Node& value, const Origin& at, Config& cfg, ConfigOrigins& origins,
             Diagnostics& diag) const override {
    auto s = scalarOf(value, at, this->path(), "a string", diag);
    if (!s) return false;
    if (std::string bad = rule_(s->text); !bad.empty()) {
      diag.error(at, std::string(this->path()), "\"" + s->text + "\" " + bad);
      return false;
    }
    return this->commit(cfg, origins, at, s->text);
  }
  void emitValue(YAML::Emitter& out, const Config& cfg) const override {
    out << YAML::DoubleQuoted << this->get(cfg);
  }
  std::string range() const override { return std::string(range_); }

 private:
  std::string_view range_;
  Rule rule_;
};

template <class S, class E>
class EnumKey final : public FieldKey<S, E> {
 public:
  EnumKey(Section<S> section, E S::*field, std::string_view path, std::vector<E> values, Reload reload,
          std::string_view description)
      : FieldKey<S, E>(section, field, path, "enum", "", reload, description), values_(std::move(values)) {
    for (E v : values_) names_.push_back(toString(v));
  }

  bool parse(const YAML::Node& value, const Origin& at, Config& cfg, ConfigOrigins& origins,
             Diagnostics& diag) const override {
    auto s = scalarOf(value, at, this->path(), "one of " + joinNames(names_, ", "), diag);
    if (!s) return false;
    for (E v : values_) {
      if (toString(v) == s->text) return this->commit(cfg, origins, at, v);
    }
    std::string msg = "\"" + s->text + "\" is not one of " + joinNames(names_, ", ");
    if (std::string near = closestMatch(s->text, names_); !near.empty())
      msg += "; did you mean \"" + near + "\"?";
    diag.error(at, std::string(this->path()), msg);
    return false;
  }
  void emitValue(YAML::Emitter& out, const Config& cfg) const override {
    out << std::string(toString(this->get(cfg)));
  }
  std::string range() const override { return joinNames(names_, ", "); }

 private:
  std::vector<E> values_;
  std::vector<std::string_view> names_;
};

// A CPU list: a YAML list of integers ([1, 2]) or a kernel cpulist string ("1-3,6"). With `allow_auto`
// the word "auto" means "derive it", stored as an empty set.
template <class S>
class CpuListKey final : public FieldKey<S, CpuSet> {
 public:
  CpuListKey(Section<S> section, CpuSet S::*field, std::string_view path, bool allow_auto, Reload reload,
             std::string_view description)
      : FieldKey<S, CpuSet>(section, field, path, "cpu list", "cpu ids", reload, description),
        allow_auto_(allow_auto) {}

  bool parse(const YAML::Node& value, const Origin& at, Config& cfg, ConfigOrigins& origins,
             Diagnostics& diag) const override {
    const std::string key(this->path());
    const std::string expected = allow_auto_ ? "a list of cpu ids, a cpulist string such as \"1-3\", or auto"
                                             : "a list of cpu ids or a cpulist string such as \"1-3\"";
    if (value.IsSequence()) {
      CpuSet set;
      std::vector<std::pair<std::uint32_t, Origin>> elements;
      bool ok = true;
      for (const auto& item : value) {
        Origin item_at = originOf(at, item);
        auto s = scalarOf(item, item_at, key, "a cpu id", diag);
        if (!s) {
          ok = false;
          continue;
        }
        std::string why;
        auto v = parseUnsigned(*s, 0, kMaxLcores - 1, &why);
        if (!v) {
          // "cpu 128 is out of range [0, 127]", but not "cpu expected an integer".
          bool range_error = why.find(" is out of range ") != std::string::npos;
          diag.error(item_at, key, (range_error ? "cpu " : "") + why);
          ok = false;
          continue;
        }
        auto cpu = static_cast<std::uint32_t>(*v);
        if (!set.insert(cpu)) {
          diag.error(item_at, key, "cpu " + std::to_string(cpu) + " is listed twice");
          ok = false;
          continue;
        }
        elements.emplace_back(cpu, item_at);
      }
      if (ok && set.empty()) {
        diag.error(at, key,
                   allow_auto_ ? "an empty list starts no lcore; omit the key or write auto"
                               : "needs at least one cpu");
        ok = false;
      }
      if (!ok) return false;
      this->commit(cfg, origins, at, std::move(set));
      for (auto& [cpu, where] : elements) origins.setElement(key, cpu, where);
      return true;
    }
    auto s = scalarOf(value, at, key, expected, diag);
    if (!s) return false;
    if (allow_auto_ && s->text == "auto") return this->commit(cfg, origins, at, CpuSet{});
    std::string why;
    auto set = CpuSet::parse(s->text, kMaxLcores, &why);
    if (!set) {
      diag.error(at, key, "\"" + s->text + "\": " + why);
      return false;
    }
    return this->commit(cfg, origins, at, std::move(*set));
  }
  void emitValue(YAML::Emitter& out, const Config& cfg) const override {
    const CpuSet& set = this->get(cfg);
    if (set.empty() && allow_auto_) {
      out << "auto";
      return;
    }
    out << YAML::Flow << YAML::BeginSeq;
    for (std::uint32_t c : set) out << c;
    out << YAML::EndSeq;
  }
  std::string range() const override {
    return "cpu ids in [0, " + std::to_string(kMaxLcores - 1) + "]" + (allow_auto_ ? ", or auto" : "");
  }

 private:
  bool allow_auto_;
};

// Per-address rules of a listen address; an error message or empty.
std::string listenAddressProblem(const IpAddress& a) {
  if (a.isMulticast()) return "is a multicast address";
  if (a.isLinkLocal() && a.zone().empty()) return "is link-local and needs a zone, e.g. fe80::1%eth0";
  if (!a.zone().empty() && !a.isLinkLocal()) return "has a zone, which only link-local addresses take";
  return {};
}

std::string ipv6QuoteHint(const YAML::Node& n) {
  // "- ::" in block style is a mapping with key ":" to YAML: the commonest IPv6 trap.
  return n.IsMap() ? " (quote IPv6 addresses that start with ':', e.g. \"::\")" : "";
}

template <class S>
class AddressKey final : public FieldKey<S, IpAddress> {
 public:
  AddressKey(Section<S> section, IpAddress S::*field, std::string_view path, Reload reload,
             std::string_view description)
      : FieldKey<S, IpAddress>(section, field, path, "IP address", "", reload, description) {}

  bool parse(const YAML::Node& value, const Origin& at, Config& cfg, ConfigOrigins& origins,
             Diagnostics& diag) const override {
    const std::string key(this->path());
    if (value.IsMap()) {
      diag.error(at, key, "expected an IP address, got a mapping" + ipv6QuoteHint(value));
      return false;
    }
    auto s = scalarOf(value, at, key, "an IP address", diag);
    if (!s) return false;
    std::string why;
    auto a = IpAddress::parse(s->text, IpAddress::Zone::kReject, &why);
    if (!a) {
      diag.error(at, key, why);
      return false;
    }
    if (a->isMulticast()) {
      diag.error(at, key, "\"" + s->text + "\" is a multicast address");
      return false;
    }
    return this->commit(cfg, origins, at, std::move(*a));
  }
  void emitValue(YAML::Emitter& out, const Config& cfg) const override {
    out << YAML::DoubleQuoted << this->get(cfg).str();
  }
  std::string range() const override { return "IPv4 or IPv6 literal"; }
};

// Shared shape of list keys: a YAML list, each element parsed on its own so every bad element is
// reported, then rules over the whole list.
template <class S, class E>
class ListKey : public FieldKey<S, std::vector<E>> {
 public:
  ListKey(Section<S> section, std::vector<E> S::*field, std::string_view path, std::string_view type,
          std::size_t min_count, std::size_t max_count, Reload reload, std::string_view description)
      : FieldKey<S, std::vector<E>>(section, field, path, type, "", reload, description),
        min_(min_count),
        max_(max_count) {}

  bool parse(const YAML::Node& value, const Origin& at, Config& cfg, ConfigOrigins& origins,
             Diagnostics& diag) const override {
    const std::string key(this->path());
    if (!value.IsSequence()) {
      std::string msg = "expected a list of " + std::string(pluralName()) + ", got " + describe(value);
      if (value.IsScalar()) msg += " (write [" + value.Scalar() + "])";
      diag.error(at, key, msg);
      return false;
    }
    std::vector<E> items;
    std::vector<Origin> where;
    std::vector<std::size_t> positions;  // of each accepted item in the YAML list
    bool ok = true;
    std::size_t index = 0;
    for (const auto& item : value) {
      Origin item_at = originOf(at, item);
      std::string item_key = key + "[" + std::to_string(index++) + "]";
      if (!item.IsScalar()) {
        diag.error(
            item_at, item_key,
            "expected " + std::string(elementName()) + ", got " + describe(item) + ipv6QuoteHint(item));
        ok = false;
        continue;
      }
      auto s = scalarOf(item, item_at, item_key, elementName(), diag);
      if (!s) {
        ok = false;
        continue;
      }
      std::string why;
      auto e = parseElement(s->text, &why);
      if (!e) {
        diag.error(item_at, item_key, why);
        ok = false;
        continue;
      }
      auto dup = std::find(items.begin(), items.end(), *e);
      if (dup != items.end()) {
        std::size_t first = positions[static_cast<std::size_t>(dup - items.begin())];
        diag.error(item_at, item_key,
                   "\"" + s->text + "\" is already listed as " + key + "[" + std::to_string(first) + "]");
        ok = false;
        continue;
      }
      if (std::string bad = checkAgainst(*e, items); !bad.empty()) {
        diag.error(item_at, item_key, "\"" + s->text + "\" " + bad);
        ok = false;
        continue;
      }
      items.push_back(std::move(*e));
      where.push_back(item_at);
      positions.push_back(index - 1);
    }
    if (ok && (items.size() < min_ || items.size() > max_)) {
      diag.error(at, key, "has " + std::to_string(items.size()) + " entries; expected " + countText());
      ok = false;
    }
    if (!ok) return false;
    this->commit(cfg, origins, at, std::move(items));
    for (std::size_t i = 0; i < where.size(); ++i) origins.setElement(key, i, where[i]);
    return true;
  }
  void emitValue(YAML::Emitter& out, const Config& cfg) const override {
    std::vector<std::string> texts;
    for (const E& e : this->get(cfg)) texts.push_back(e.str());
    emitFlowStrings(out, texts);
  }

 protected:
  std::string countText() const {
    return min_ == max_ ? std::to_string(min_)
                        : "between " + std::to_string(min_) + " and " + std::to_string(max_);
  }
  virtual std::string_view elementName() const = 0;  // "an IP address"
  virtual std::string_view pluralName() const = 0;   // "IP addresses"
  virtual std::optional<E> parseElement(const std::string& text, std::string* why) const = 0;
  // A rule relating a new element to the ones before it; message or empty.
  virtual std::string checkAgainst(const E&, const std::vector<E>&) const { return {}; }

 private:
  std::size_t min_;
  std::size_t max_;
};

template <class S>
class ListenAddressesKey final : public ListKey<S, IpAddress> {
 public:
  using ListKey<S, IpAddress>::ListKey;
  std::string range() const override { return this->countText() + " IPv4/IPv6 literals"; }

 protected:
  std::string_view elementName() const override { return "an IP address"; }
  std::string_view pluralName() const override { return "IP addresses"; }
  std::optional<IpAddress> parseElement(const std::string& text, std::string* why) const override {
    auto a = IpAddress::parse(text, IpAddress::Zone::kAllow, why);
    if (!a) return std::nullopt;
    if (std::string bad = listenAddressProblem(*a); !bad.empty()) {
      *why = "\"" + text + "\" " + bad;
      return std::nullopt;
    }
    return a;
  }
  // A wildcard and a specific address of the same family on one port: the second bind fails with
  // EADDRINUSE at startup, after the device is already open.
  std::string checkAgainst(const IpAddress& a, const std::vector<IpAddress>& before) const override {
    for (const IpAddress& b : before) {
      if (a.family() != b.family()) continue;
      if (a.isUnspecified() != b.isUnspecified()) {
        return "overlaps \"" + b.str() + "\" on the same port (a wildcard already covers every address of " +
               (a.family() == IpFamily::kIpv4 ? "IPv4" : "IPv6") + ")";
      }
    }
    return {};
  }
};

template <class S>
class CidrListKey final : public ListKey<S, Cidr> {
 public:
  using ListKey<S, Cidr>::ListKey;
  std::string range() const override { return this->countText() + " IPv4/IPv6 prefixes"; }

 protected:
  std::string_view elementName() const override { return "a CIDR prefix"; }
  std::string_view pluralName() const override { return "CIDR prefixes"; }
  std::optional<Cidr> parseElement(const std::string& text, std::string* why) const override {
    return Cidr::parse(text, why);
  }
};

template <class S>
class FaultRuleListKey final : public ListKey<S, FaultRuleText> {
 public:
  using ListKey<S, FaultRuleText>::ListKey;
  std::string range() const override { return this->countText() + " rules of 1 to 256 printable characters"; }

 protected:
  std::string_view elementName() const override { return "a fault rule"; }
  std::string_view pluralName() const override { return "fault rules"; }
  std::optional<FaultRuleText> parseElement(const std::string& text, std::string* why) const override {
    if (text.empty() || text.size() > 256) {
      *why = "must be 1 to 256 characters (docs/faults.md)";
      return std::nullopt;
    }
    if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c <= 0x7e; })) {
      *why = "may only contain printable ASCII (docs/faults.md)";
      return std::nullopt;
    }
    return FaultRuleText{text};
  }
};

// ---------------------------------------------------------------------------------------------------
// Lists of records (security.tenants, security.principals): a YAML list of mappings with named fields. Each
// entry is checked on its own so every bad one is reported, its errors naming the field
// ("security.principals[1].permissions"); then names must be unique within the list. References between
// the lists (a principal's tenant) are a cross-key check (validate.cpp), since an override may set either.

// "1GiB", "512MiB", "4096" -> bytes. Binary suffixes only, so that "1GB" is not silently 10^9 or 2^30.
std::optional<std::uint64_t> parseSize(const Scalar& s, std::string* why) {
  static constexpr std::pair<std::string_view, unsigned> kSuffixes[] = {
      {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
  std::string_view t = s.text;
  unsigned shift = 0;
  for (const auto& [suffix, bits] : kSuffixes) {
    if (t.size() > suffix.size() && t.substr(t.size() - suffix.size()) == suffix) {
      t.remove_suffix(suffix.size());
      shift = bits;
      break;
    }
  }
  if (s.quoted && shift == 0) {
    *why = "expected a size, got the quoted string \"" + s.text + "\"";
    return std::nullopt;
  }
  const std::uint64_t hi = std::numeric_limits<std::uint64_t>::max() >> shift;
  auto v = parseUnsigned(Scalar{std::string(t), false}, 0, hi, why);
  if (!v) {
    if (why->find(" is out of range ") != std::string::npos) *why = s.text + " does not fit in 64 bits";
    return std::nullopt;
  }
  return *v << shift;
}

// One record's fields, in the order the dump writes them.
struct FieldSpec {
  std::string_view name;
  bool required;
};

// Walks a record mapping: unknown and duplicate fields are errors (with a near name suggested), missing
// required ones too. `take` parses one known field and returns false when it reported an error.
template <class Take>
bool walkRecord(const YAML::Node& item, const Origin& item_at, const std::string& item_key,
                std::initializer_list<FieldSpec> fields, Diagnostics& diag, Take take) {
  std::vector<std::string_view> names;
  for (const FieldSpec& f : fields) names.push_back(f.name);
  std::set<std::string> seen;
  bool ok = true;
  for (auto it = item.begin(); it != item.end(); ++it) {
    const Origin field_at = originOf(item_at, it->first);
    if (!it->first.IsScalar()) {
      diag.error(field_at, item_key, "a field name must be a plain name, not a list or mapping");
      ok = false;
      continue;
    }
    const std::string field = it->first.Scalar();
    const std::string field_key = item_key + "." + field;
    if (std::find(names.begin(), names.end(), field) == names.end()) {
      std::string msg = "unknown field; the fields are " + joinNames(names, ", ");
      if (std::string near = closestMatch(field, names); !near.empty())
        msg += " (did you mean " + near + "?)";
      diag.error(field_at, field_key, msg);
      ok = false;
      continue;
    }
    if (!seen.insert(field).second) {
      diag.error(field_at, field_key, "duplicate field");
      ok = false;
      continue;
    }
    const YAML::Node value = it->second;
    if (!take(field, value, originOf(item_at, value), field_key)) ok = false;
  }
  for (const FieldSpec& f : fields) {
    if (f.required && seen.count(std::string(f.name)) == 0) {
      diag.error(item_at, item_key, "needs a " + std::string(f.name));
      ok = false;
    }
  }
  return ok;
}

bool authNameField(const YAML::Node& value, const Origin& at, const std::string& key, Diagnostics& diag,
                   std::string* out) {
  auto s = scalarOf(value, at, key, "a name", diag);
  if (!s) return false;
  if (!validAuthName(s->text)) {
    diag.error(at, key, "\"" + s->text + "\" must be 1 to 64 characters of A-Z a-z 0-9 . _ @ -");
    return false;
  }
  *out = s->text;
  return true;
}

template <class T>
bool unsignedField(const YAML::Node& value, const Origin& at, const std::string& key, std::uint64_t hi,
                   Diagnostics& diag, T* out) {
  auto s = scalarOf(value, at, key, "an integer", diag);
  if (!s) return false;
  std::string why;
  auto v = parseUnsigned(*s, 0, hi, &why);
  if (!v) {
    diag.error(at, key, why);
    return false;
  }
  *out = static_cast<T>(*v);
  return true;
}

constexpr std::uint64_t kMaxObjectsQuota = 0xffffffffu;
constexpr std::uint64_t kMaxPrincipalConnections = 1048576;

struct PermissionWord {
  std::string_view word;
  std::uint8_t bit;
};
constexpr PermissionWord kPermissionWords[] = {
    {"read", kPermissionRead}, {"write", kPermissionWrite}, {"delete", kPermissionDelete}};

template <class S, class E>
class RecordListKey : public FieldKey<S, std::vector<E>> {
 public:
  RecordListKey(Section<S> section, std::vector<E> S::*field, std::string_view path, std::string_view type,
                std::size_t max_count, Reload reload, std::string_view description)
      : FieldKey<S, std::vector<E>>(section, field, path, type, "", reload, description), max_(max_count) {}

  bool parse(const YAML::Node& value, const Origin& at, Config& cfg, ConfigOrigins& origins,
             Diagnostics& diag) const override {
    const std::string key(this->path());
    if (!value.IsSequence()) {
      diag.error(
          at, key,
          "expected a list of " + std::string(pluralName()) + " (each a mapping), got " + describe(value));
      return false;
    }
    std::vector<E> items;
    std::vector<Origin> where;
    std::map<std::string, std::size_t> first_at;  // name -> list position
    bool ok = true;
    std::size_t index = 0;
    for (const auto& item : value) {
      const Origin item_at = originOf(at, item);
      const std::string item_key = key + "[" + std::to_string(index++) + "]";
      if (!item.IsMap()) {
        diag.error(item_at, item_key, "expected a mapping (name: ...), got " + describe(item));
        ok = false;
        continue;
      }
      std::optional<E> e = parseRecord(item, item_at, item_key, diag);
      if (!e) {
        ok = false;
        continue;
      }
      if (auto [pos, fresh] = first_at.emplace(e->name, index - 1); !fresh) {
        diag.error(
            item_at, item_key + ".name",
            "\"" + e->name + "\" is already named by " + key + "[" + std::to_string(pos->second) + "]");
        ok = false;
        continue;
      }
      items.push_back(std::move(*e));
      where.push_back(item_at);
    }
    if (ok && items.size() > max_) {
      diag.error(at, key,
                 "has " + std::to_string(items.size()) + " entries; at most " + std::to_string(max_));
      ok = false;
    }
    if (!ok) return false;
    this->commit(cfg, origins, at, std::move(items));
    for (std::size_t i = 0; i < where.size(); ++i) origins.setElement(key, i, where[i]);
    return true;
  }
  void emitValue(YAML::Emitter& out, const Config& cfg) const override {
    out << YAML::Flow << YAML::BeginSeq;
    for (const E& e : this->get(cfg)) {
      out << YAML::Flow << YAML::BeginMap;
      emitRecord(out, e);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }

 protected:
  std::size_t maxCount() const { return max_; }
  virtual std::string_view pluralName() const = 0;
  virtual std::optional<E> parseRecord(const YAML::Node& item, const Origin& at, const std::string& item_key,
                                       Diagnostics& diag) const = 0;
  virtual void emitRecord(YAML::Emitter& out, const E& e) const = 0;

 private:
  std::size_t max_;
};

template <class S>
class TenantListKey final : public RecordListKey<S, TenantConfig> {
 public:
  using RecordListKey<S, TenantConfig>::RecordListKey;
  std::string range() const override {
    return "at most " + std::to_string(this->maxCount()) +
           " of {name, max_bytes, max_objects}; names unique, 1-64 of [A-Za-z0-9._@-]";
  }

 protected:
  std::string_view pluralName() const override { return "tenants"; }
  std::optional<TenantConfig> parseRecord(const YAML::Node& item, const Origin& at,
                                          const std::string& item_key, Diagnostics& diag) const override {
    TenantConfig t;
    const bool ok = walkRecord(
        item, at, item_key, {{"name", true}, {"max_bytes", false}, {"max_objects", false}}, diag,
        [&](const std::string& field, const YAML::Node& v, const Origin& v_at, const std::string& k) {
          if (field == "name") return authNameField(v, v_at, k, diag, &t.name);
          if (field == "max_objects")
            return unsignedField(v, v_at, k, kMaxObjectsQuota, diag, &t.max_objects);
          auto s = scalarOf(v, v_at, k, "a size", diag);
          if (!s) return false;
          std::string why;
          auto bytes = parseSize(*s, &why);
          if (!bytes) {
            diag.error(v_at, k, why);
            return false;
          }
          t.max_bytes = *bytes;
          return true;
        });
    if (!ok) return std::nullopt;
    return t;
  }
  void emitRecord(YAML::Emitter& out, const TenantConfig& t) const override {
    out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << t.name;
    out << YAML::Key << "max_bytes" << YAML::Value << t.max_bytes;
    out << YAML::Key << "max_objects" << YAML::Value << t.max_objects;
  }
};

template <class S>
class PrincipalListKey final : public RecordListKey<S, PrincipalConfig> {
 public:
  using RecordListKey<S, PrincipalConfig>::RecordListKey;
  std::string range() const override {
    return "at most " + std::to_string(this->maxCount()) +
           " of {name, tenant, permissions: [read, write, delete], max_connections}; names unique";
  }

 protected:
  std::string_view pluralName() const override { return "principals"; }
  std::optional<PrincipalConfig> parseRecord(const YAML::Node& item, const Origin& at,
                                             const std::string& item_key, Diagnostics& diag) const override {
    PrincipalConfig p;
    const bool ok = walkRecord(
        item, at, item_key,
        {{"name", true}, {"tenant", true}, {"permissions", true}, {"max_connections", false}}, diag,
        [&](const std::string& field, const YAML::Node& v, const Origin& v_at, const std::string& k) {
          if (field == "name") return authNameField(v, v_at, k, diag, &p.name);
          if (field == "tenant") return authNameField(v, v_at, k, diag, &p.tenant);
          if (field == "max_connections") {
            return unsignedField(v, v_at, k, kMaxPrincipalConnections, diag, &p.max_connections);
          }
          return permissions(v, v_at, k, diag, &p.permissions);
        });
    if (!ok) return std::nullopt;
    return p;
  }
  void emitRecord(YAML::Emitter& out, const PrincipalConfig& p) const override {
    out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << p.name;
    out << YAML::Key << "tenant" << YAML::Value << YAML::DoubleQuoted << p.tenant;
    out << YAML::Key << "permissions" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const PermissionWord& w : kPermissionWords) {
      if ((p.permissions & w.bit) != 0) out << std::string(w.word);
    }
    out << YAML::EndSeq;
    out << YAML::Key << "max_connections" << YAML::Value << p.max_connections;
  }

 private:
  static bool permissions(const YAML::Node& v, const Origin& at, const std::string& key, Diagnostics& diag,
                          std::uint8_t* out) {
    if (!v.IsSequence()) {
      std::string msg = "expected a list of read, write, delete, got " + describe(v);
      if (v.IsScalar()) msg += " (write [" + v.Scalar() + "])";
      diag.error(at, key, msg);
      return false;
    }
    std::vector<std::string_view> words;
    for (const PermissionWord& w : kPermissionWords) words.push_back(w.word);
    std::uint8_t mask = 0;
    bool ok = true;
    std::size_t index = 0;
    for (const auto& item : v) {
      const Origin item_at = originOf(at, item);
      const std::string item_key = key + "[" + std::to_string(index++) + "]";
      auto s = scalarOf(item, item_at, item_key, "read, write or delete", diag);
      if (!s) {
        ok = false;
        continue;
      }
      const auto w = std::find_if(std::begin(kPermissionWords), std::end(kPermissionWords),
                                  [&](const PermissionWord& pw) { return pw.word == s->text; });
      if (w == std::end(kPermissionWords)) {
        std::string msg = "\"" + s->text + "\" is not a permission; the permissions are read, write, delete";
        if (std::string near = closestMatch(s->text, words); !near.empty())
          msg += " (did you mean " + near + "?)";
        diag.error(item_at, item_key, msg);
        ok = false;
        continue;
      }
      if ((mask & w->bit) != 0) {
        diag.error(item_at, item_key, "\"" + s->text + "\" is listed twice");
        ok = false;
        continue;
      }
      mask = static_cast<std::uint8_t>(mask | w->bit);
    }
    if (ok) *out = mask;
    return ok;
  }
};

// ---------------------------------------------------------------------------------------------------
// String and integer rules.

std::string powerOfTwo(std::uint64_t v) {
  return (v & (v - 1)) == 0 ? "" : "is not a power of two (the core masks its loop counter with it)";
}

// A shared pool below 16 receives cannot hold one connection at the protocol's smallest queue depth with a
// refill watermark; 0 keeps the derived size.
std::string zeroOrAtLeast16(std::uint64_t v) {
  return v == 0 || v >= 16 ? "" : "is below 16 (a pool smaller than one connection's credits plus a refill)";
}

bool nameChars(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

std::string hugepageDirRule(std::string_view s) {
  if (s.empty()) return {};
  if (s.front() != '/') return "is not an absolute path";
  if (s.size() > 4095) return "is longer than PATH_MAX";
  if (s.find_first_of(std::string_view("\0\n,", 3)) != std::string_view::npos) {
    return "contains a newline, NUL or comma (EAL splits its options on commas)";
  }
  return {};
}

std::string filePrefixRule(std::string_view s) {
  if (s.empty() || s.size() > 64) return "must be 1 to 64 characters";
  if (!nameChars(s) || s.front() == '.' || s.front() == '-') {
    return "may only contain letters, digits, '_', '-' and '.', and not start with '.' or '-'";
  }
  return {};
}

std::string deviceNameRule(std::string_view s) {
  if (s == "auto") return {};
  // IBV_SYSFS_NAME_MAX is 64 including the terminator.
  if (s.empty() || s.size() > 63) return "must be \"auto\" or a device name of 1 to 63 characters";
  if (!nameChars(s)) return "is not a valid RDMA device name";
  return {};
}

// store.rados. Control characters are C0, DEL and C1 (U+0080..U+009F: 0xc2 0x80..0x9f in UTF-8, which the
// loader has already checked): none belongs in a path or an object locator, and a newline in one would
// split a log line.
bool hasControlChar(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x20 || b == 0x7f) return true;
    if (b == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9f) return true;
  }
  return false;
}

std::string cephPathRule(std::string_view s) {
  if (s.front() != '/') return "is not an absolute path";
  if (s.size() > 4095) return "is longer than PATH_MAX";
  if (hasControlChar(s)) return "contains a control character";
  return {};
}

std::string cephConfRule(std::string_view s) {
  if (s.empty()) return "must name a ceph.conf (an absolute path)";
  return cephPathRule(s);
}

std::string keyringRule(std::string_view s) {
  if (s.empty()) return {};
  if (std::string bad = cephPathRule(s); !bad.empty()) return bad;
  // Ceph reads a comma-separated keyring option as a list of files to try.
  if (s.find(',') != std::string_view::npos) return "contains a comma (Ceph would read a list of keyrings)";
  return {};
}

std::string cephClientRule(std::string_view s) {
  constexpr std::string_view kPrefix = "client.";
  if (s.substr(0, kPrefix.size()) != kPrefix) {
    return "must start with \"client.\" (a cephx client entity, e.g. client.rdmagate)";
  }
  if (s.size() == kPrefix.size()) return "needs an id after \"client.\"";
  if (!nameChars(s)) return "may only contain letters, digits, '_', '-' and '.'";
  return {};
}

std::string poolRule(std::string_view s) {
  if (s.empty() || s.size() > 255) return "must be 1 to 255 bytes";
  if (s.find('/') != std::string_view::npos) return "contains a '/'";
  if (hasControlChar(s)) return "contains a control character";
  return {};
}

std::string radosNamespaceRule(std::string_view s) {
  if (s.size() > 255) return "is longer than 255 bytes";
  if (hasControlChar(s)) return "contains a control character";
  return {};
}

// Empty (no secrets file: only valid without principals) or an absolute path.
std::string secretsFileRule(std::string_view s) {
  if (s.empty()) return {};
  return cephPathRule(s);
}

RadosConfig& radosSection(Config& c) {
  return c.store.rados;
}

// ---------------------------------------------------------------------------------------------------
// The table. Order is file order; conf/README.md and conf/rdmagate.yaml follow it.

class Table {
 public:
  Table() {
    constexpr Reload R = Reload::kRestart;
    constexpr Reload L = Reload::kLive;
    using E = EalConfig;
    using D = DeviceConfig;
    using N = ListenConfig;
    using P = DataplaneConfig;
    using Pr = ProtocolConfig;
    using St = StoreConfig;
    using T = TelemetryConfig;
    using Se = SecurityConfig;
    using Lg = LoggingConfig;
    using F = FaultsConfig;
    using Ra = RadosConfig;
    add<CpuListKey<E>>(&Config::eal, &E::lcores, "eal.lcores", true, R,
                       "every lcore EAL starts; auto = eal.main_lcore plus dataplane.cores");
    add<UnsignedKey<E, std::uint32_t>>(&Config::eal, &E::main_lcore, "eal.main_lcore", "cpu id", 0u,
                                       kMaxLcores - 1, R, "the control-plane lcore");
    add<EnumKey<E, HugepageMode>>(
        &Config::eal, &E::hugepages, "eal.hugepages",
        std::vector<HugepageMode>{HugepageMode::kAuto, HugepageMode::kRequired, HugepageMode::kDisabled}, R,
        "auto: hugepages if present, else --no-huge with a warning");
    add<StringKey<E>>(&Config::eal, &E::hugepage_dir, "eal.hugepage_dir", R, "empty or an absolute path",
                      "hugetlbfs mount (--huge-dir); empty = EAL's choice", hugepageDirRule);
    add<UnsignedKey<E, std::uint32_t>>(
        &Config::eal, &E::memory_mib, "eal.memory_mib", "MiB", 0u, 1048576u, R,
        "EAL memory (-m); 0 = sized by the engine; must exceed store.capacity_mib");
    add<StringKey<E>>(&Config::eal, &E::file_prefix, "eal.file_prefix", R, "1-64 of [A-Za-z0-9_.-]",
                      "EAL runtime file prefix (--file-prefix)", filePrefixRule);
    add<BoolKey<E>>(&Config::eal, &E::in_memory, "eal.in_memory", R,
                    "--in-memory: no runtime files; must be false when hugepages are disabled");

    add<StringKey<D>>(&Config::device, &D::name, "device.name", R, "\"auto\" or an RDMA device name",
                      "RDMA device; auto = the only one present", deviceNameRule);
    add<UnsignedKey<D, std::uint32_t>>(&Config::device, &D::port, "device.port", "port number", 1u, 255u, R,
                                       "device port (1-based)");

    add<ListenAddressesKey<N>>(&Config::listen, &N::addresses, "listen.addresses", "list of IP addresses", 1,
                               16, R, "IP literals rdma_cm listens on; a wildcard covers its family");
    add<UnsignedKey<N, std::uint16_t>>(&Config::listen, &N::port, "listen.port", "port", std::uint16_t{1},
                                       std::uint16_t{65535}, R, "rdma_cm port");
    add<UnsignedKey<N, std::uint32_t>>(&Config::listen, &N::backlog, "listen.backlog", "connection requests",
                                       1u, 65535u, R,
                                       "rdma_listen backlog; as many more wait in the gateway's own queue");

    add<CpuListKey<P>>(&Config::dataplane, &P::cores, "dataplane.cores", false, R,
                       "data-plane lcores, one poll loop each; not eal.main_lcore");
    add<UnsignedKey<P, std::uint32_t>>(&Config::dataplane, &P::queue_depth, "dataplane.queue_depth",
                                       "credits", kMinQueueDepth, kMaxQueueDepth, R,
                                       "credits (receive buffers) per connection");
    add<UnsignedKey<P, std::uint32_t>>(&Config::dataplane, &P::inline_threshold_bytes,
                                       "dataplane.inline_threshold_bytes", "bytes", kMinInlineThresholdBytes,
                                       kMaxInlineThresholdBytes, R,
                                       "largest message sent in one SEND; the receive buffer size");
    add<UnsignedKey<P, std::uint32_t>>(
        &Config::dataplane, &P::send_inline_bytes, "dataplane.send_inline_bytes", "bytes", 0u, 1024u, R,
        "payloads up to this size use IBV_SEND_INLINE; 0 = never; at most inline_threshold_bytes");
    add<UnsignedKey<P, std::uint32_t>>(&Config::dataplane, &P::max_fragments, "dataplane.max_fragments",
                                       "fragments", 1u, kMaxChunkFragments, R,
                                       "fragments per read or write chunk");
    add<UnsignedKey<P, std::uint32_t>>(&Config::dataplane, &P::signal_interval, "dataplane.signal_interval",
                                       "sends", 1u, 1024u, R, "one signaled send per N; below queue_depth");
    add<UnsignedKey<P, std::uint32_t>>(&Config::dataplane, &P::poll_burst, "dataplane.poll_burst",
                                       "completions", 1u, 256u, R, "completions per CQ poll");
    add<UnsignedKey<P, std::uint32_t>>(
        &Config::dataplane, &P::control_check_interval, "dataplane.control_check_interval", "loop iterations",
        1u, 65536u, R, "loop iterations between control-ring checks", powerOfTwo, "a power of two");
    add<UnsignedKey<P, std::uint32_t>>(&Config::dataplane, &P::max_connections_per_core,
                                       "dataplane.max_connections_per_core", "connections", 1u,
                                       kMaxConnectionsPerCore, R,
                                       "per-core pool size");
    add<EnumKey<P, IdlePolicy>>(
        &Config::dataplane, &P::idle_policy, "dataplane.idle_policy",
        std::vector<IdlePolicy>{IdlePolicy::kBusy, IdlePolicy::kPause, IdlePolicy::kYield, IdlePolicy::kBackoff,
                                IdlePolicy::kEvent},
        R, "what a core does after an empty poll");
    add<UnsignedKey<P, std::uint32_t>>(&Config::dataplane, &P::idle_yield_after, "dataplane.idle_yield_after",
                                       "polls", 1u, 1000000u, R,
                                       "idle_policy yield: empty polls in a row before a sched_yield");
    add<UnsignedKey<P, std::uint32_t>>(&Config::dataplane, &P::idle_backoff_max_pauses,
                                       "dataplane.idle_backoff_max_pauses", "pauses", 1u, 65536u, R,
                                       "idle_policy backoff/event: the longest run of pause instructions "
                                       "between two empty polls (runs double from 1, reset on work)");
    add<UnsignedKey<P, std::uint32_t>>(&Config::dataplane, &P::idle_event_after_us,
                                       "dataplane.idle_event_after_us", "us", 1u, 10000000u, R,
                                       "idle_policy event: time without work before the core arms CQ "
                                       "notification and sleeps");
    add<EnumKey<P, SrqMode>>(&Config::dataplane, &P::srq, "dataplane.srq",
                             std::vector<SrqMode>{SrqMode::kAuto, SrqMode::kRequired, SrqMode::kDisabled}, R,
                             "one shared receive queue per core (auto: where the device and backend can; "
                             "required: or an error at start; disabled: one per connection)");
    add<UnsignedKey<P, std::uint32_t>>(&Config::dataplane, &P::srq_receives, "dataplane.srq_receives",
                                       "receives", 0u, 1048576u, R,
                                       "receive buffers in each core's shared pool; 0: "
                                       "max_connections_per_core x queue_depth",
                                       zeroOrAtLeast16, "0 or at least 16");
    add<EnumKey<P, DataplaneBackend>>(
        &Config::dataplane, &P::backend, "dataplane.backend",
        std::vector<DataplaneBackend>{DataplaneBackend::kAuto, DataplaneBackend::kVerbs,
                                      DataplaneBackend::kMlx5dv},
        R, "device backend of the cores (auto: mlx5dv on an mlx5 NIC, verbs otherwise)");

    add<UnsignedKey<Pr, std::uint32_t>>(&Config::protocol, &Pr::keepalive_ms, "protocol.keepalive_ms", "ms",
                                        10u, 3600000u, L, "idle time before a keepalive");
    add<UnsignedKey<Pr, std::uint32_t>>(&Config::protocol, &Pr::dead_peer_timeout_ms,
                                        "protocol.dead_peer_timeout_ms", "ms", 20u, 86400000u, L,
                                        "silence after which a peer is dead; above keepalive_ms");
    add<UnsignedKey<Pr, std::uint32_t>>(&Config::protocol, &Pr::reconnect_min_ms, "protocol.reconnect_min_ms",
                                        "ms", 1u, 3600000u, L, "first reconnect delay; doubles per failure");
    add<UnsignedKey<Pr, std::uint32_t>>(&Config::protocol, &Pr::reconnect_max_ms, "protocol.reconnect_max_ms",
                                        "ms", 1u, 3600000u, L,
                                        "reconnect delay cap; at least reconnect_min_ms");
    add<UnsignedKey<Pr, std::uint32_t>>(&Config::protocol, &Pr::handshake_timeout_ms,
                                        "protocol.handshake_timeout_ms", "ms", 100u, 600000u, L,
                                        "connection setup limit per attempt");
    add<UnsignedKey<Pr, std::uint32_t>>(&Config::protocol, &Pr::drain_timeout_ms, "protocol.drain_timeout_ms",
                                        "ms", 0u, 300000u, L,
                                        "SIGTERM drain: limit of each phase (quiesce, then close)");
    add<UnsignedKey<Pr, std::uint32_t>>(&Config::protocol, &Pr::bulk_timeout_ms, "protocol.bulk_timeout_ms",
                                        "ms", 1u, 600000u, L,
                                        "an RDMA READ/WRITE chain still running after this fails its connection");
    add<BoolKey<Pr>>(&Config::protocol, &Pr::checksum, "protocol.checksum", R, "checksum message payloads");

    add<EnumKey<St, StoreBackend>>(
        &Config::store, &St::backend, "store.backend",
        std::vector<StoreBackend>{StoreBackend::kMemory, StoreBackend::kRados}, R,
        "storage backend; rados: Ceph RADOS (store.rados) behind a hugepage cache");
    add<UnsignedKey<St, std::uint64_t>>(
        &Config::store, &St::capacity_mib, "store.capacity_mib", "MiB", std::uint64_t{1},
        std::uint64_t{1048576}, R, "store memory; with backend rados, the hugepage cache in front of RADOS");
    add<UnsignedKey<St, std::uint64_t>>(&Config::store, &St::max_value_bytes, "store.max_value_bytes",
                                        "bytes", std::uint64_t{1}, std::uint64_t{1} << 30, R,
                                        "largest value; at most the capacity");

    // A nested section: its keys follow the parent's, so a dump writes it as the last mapping of store.
    add<StringKey<Ra>>(&radosSection, &Ra::conf_file, "store.rados.conf_file", R, "an absolute path",
                       "the ceph.conf librados reads (mon addresses, auth)", cephConfRule);
    add<StringKey<Ra>>(&radosSection, &Ra::client, "store.rados.client", R,
                       "\"client.\" and an id, of [A-Za-z0-9_.-]", "the cephx entity the gateway connects as",
                       cephClientRule);
    add<StringKey<Ra>>(&radosSection, &Ra::keyring, "store.rados.keyring", R, "empty or an absolute path",
                       "keyring file; empty = whatever ceph.conf says", keyringRule);
    add<StringKey<Ra>>(&radosSection, &Ra::pool, "store.rados.pool", R,
                       "1-255 bytes, no '/', no control characters", "the RADOS pool objects are stored in",
                       poolRule);
    add<StringKey<Ra>>(
        &radosSection, &Ra::ns, "store.rados.namespace", R, "0-255 bytes, no control characters",
        "the RADOS namespace of every object; empty = the pool's default namespace", radosNamespaceRule);
    add<UnsignedKey<Ra, std::uint32_t>>(&radosSection, &Ra::op_timeout_ms, "store.rados.op_timeout_ms", "ms",
                                        100u, 600000u, R,
                                        "rados_osd_op_timeout, rados_mon_op_timeout and "
                                        "client_mount_timeout; a request whose op takes longer is "
                                        "answered unavailable");
    add<UnsignedKey<Ra, std::uint32_t>>(
        &radosSection, &Ra::notify_timeout_ms, "store.rados.notify_timeout_ms", "ms", 1000u, 60000u, R,
        "how long a PUT or DELETE waits for the other gateways to acknowledge the cache invalidation; "
        "rounded up to whole seconds");
    add<UnsignedKey<Ra, std::uint32_t>>(
        &radosSection, &Ra::cache_lease_ms, "store.rados.cache_lease_ms", "ms", 1500u, 600000u, R,
        "how long the cache is served after the watch was last confirmed; above notify_timeout_ms");

    add<BoolKey<T>>(&Config::telemetry, &T::enabled, "telemetry.enabled", R,
                    "serve /metrics, /healthz, /readyz");
    add<AddressKey<T>>(&Config::telemetry, &T::bind_address, "telemetry.bind_address", R,
                       "HTTP bind address");
    add<UnsignedKey<T, std::uint16_t>>(&Config::telemetry, &T::port, "telemetry.port", "port",
                                       std::uint16_t{0}, std::uint16_t{65535}, R,
                                       "HTTP port; 0 = any free port");
    add<UnsignedKey<T, std::uint32_t>>(&Config::telemetry, &T::core_stall_ms, "telemetry.core_stall_ms", "ms",
                                       10u, 600000u, L,
                                       "/healthz fails when a core has not looped for this long");
    add<UnsignedKey<T, std::uint32_t>>(&Config::telemetry, &T::request_timeout_ms,
                                       "telemetry.request_timeout_ms", "ms", 100u, 60000u, R,
                                       "an HTTP client's whole request, and each response write, within this; "
                                       "else the connection is closed");
    add<UnsignedKey<T, std::uint32_t>>(&Config::telemetry, &T::threads, "telemetry.threads", "threads", 1u,
                                       64u, R, "threads serving telemetry.port");
    add<UnsignedKey<T, std::uint16_t>>(&Config::telemetry, &T::probe_port, "telemetry.probe_port", "port",
                                       std::uint16_t{0}, std::uint16_t{65535}, R,
                                       "a second listener serving only /healthz and /readyz; 0 = none");

    add<CidrListKey<Se>>(&Config::security, &Se::allowed_clients, "security.allowed_clients", "list of CIDRs",
                         0, 1024, L, "client prefixes allowed to connect; [] rejects all");
    add<UnsignedKey<Se, std::uint32_t>>(&Config::security, &Se::connections_per_source,
                                        "security.connections_per_source", "connections", 1u, 65535u, L,
                                        "connections one source address may hold (any state); "
                                        "beyond: rejected source_limit");
    add<UnsignedKey<Se, std::uint32_t>>(&Config::security, &Se::connect_rate, "security.connect_rate",
                                        "requests per second", 1u, 100000u, L,
                                        "connection requests per second one source address may make "
                                        "(token bucket refill); beyond: rejected source_limit");
    add<UnsignedKey<Se, std::uint32_t>>(&Config::security, &Se::connect_burst, "security.connect_burst",
                                        "requests", 1u, 100000u, L,
                                        "connection requests one source address may make at once "
                                        "(token bucket size)");
    add<EnumKey<Se, Authentication>>(
        &Config::security, &Se::authentication, "security.authentication",
        std::vector<Authentication>{Authentication::kRequired, Authentication::kOff}, L,
        "required: every connection authenticates as a principal before any "
        "request; off: any admitted peer may do anything (warned at every start)");
    add<UnsignedKey<Se, std::uint32_t>>(&Config::security, &Se::auth_timeout_ms, "security.auth_timeout_ms",
                                        "ms", 100u, 600000u, L,
                                        "a connection that has not authenticated this long after it was "
                                        "established is closed");
    add<StringKey<Se>>(&Config::security, &Se::secrets_file, "security.secrets_file", L,
                       "empty or an absolute path",
                       "YAML file of principal secrets (secrets: {name: \"hex:...\"}); mode 0600 or "
                       "narrower, owned by the daemon's user or root; re-read on every SIGHUP",
                       secretsFileRule);
    add<TenantListKey<Se>>(&Config::security, &Se::tenants, "security.tenants", "list of tenants",
                           kMaxTenants, L,
                           "key namespaces with quotas; max_bytes and max_objects 0 or absent: unlimited");
    add<PrincipalListKey<Se>>(&Config::security, &Se::principals, "security.principals", "list of principals",
                              kMaxPrincipals, L,
                              "who may connect: tenant, permissions, max_connections (0 or absent: "
                              "unlimited); each needs a secret in secrets_file");

    add<EnumKey<Lg, LogLevel>>(&Config::logging, &Lg::level, "logging.level",
                               std::vector<LogLevel>{LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo,
                                                     LogLevel::kWarn, LogLevel::kError},
                               L, "least severe level written");
    add<EnumKey<Lg, LogFormat>>(&Config::logging, &Lg::format, "logging.format",
                                std::vector<LogFormat>{LogFormat::kLogfmt, LogFormat::kJson}, R,
                                "log line format");

    add<FaultRuleListKey<F>>(&Config::faults, &F::rules, "faults.rules", "list of strings", 0, 16, L,
                             "fault-injection rules (docs/faults.md); empty in production");
  }

  std::vector<const Key*> keys;
  std::vector<std::string_view> sections;      // every section, nested ones ("store.rados") included
  std::vector<std::string_view> top_sections;  // the top-level ones: schemaSections()

 private:
  template <class K, class... A>
  void add(A&&... args) {
    owned_.push_back(std::make_unique<K>(std::forward<A>(args)...));
    const Key* k = owned_.back().get();
    keys.push_back(k);
    if (sections.empty() || sections.back() != k->section()) sections.push_back(k->section());
    const std::string_view top = k->section().substr(0, k->section().find('.'));
    if (top_sections.empty() || top_sections.back() != top) top_sections.push_back(top);
  }

  std::vector<std::unique_ptr<Key>> owned_;
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

Origin originOf(const Origin& base, const YAML::Node& node) {
  Origin o = base;
  if (base.kind == OriginKind::kFile && node.Mark().line >= 0) {
    o.line = node.Mark().line + 1;
    o.column = node.Mark().column + 1;
  }
  return o;
}

Key::Key(std::string_view path, std::string_view type, std::string_view units, Reload reload,
         std::string_view description)
    : path_(path),
      dot_(path_.rfind('.')),
      type_(type),
      units_(units),
      reload_(reload),
      description_(description) {}

std::string Key::format(const Config& cfg) const {
  YAML::Emitter out;
  out.SetSeqFormat(YAML::Flow);
  out.SetMapFormat(YAML::Flow);
  emitValue(out, cfg);
  return out.c_str();
}

KeyInfo Key::info() const {
  return KeyInfo{path_, type_, units_, format(Config{}), range(), reload_, description_};
}

const std::vector<const Key*>& allKeys() {
  return table().keys;
}

const Key* findKey(std::string_view path) {
  for (const Key* k : table().keys) {
    if (k->path() == path) return k;
  }
  return nullptr;
}

bool isSection(std::string_view name) {
  const auto& s = table().sections;
  return std::find(s.begin(), s.end(), name) != s.end();
}

const std::vector<std::string_view>& allSections() {
  return table().sections;
}

bool inSection(const Key& k, std::string_view section) {
  const std::string_view path = k.path();
  return path.size() > section.size() && path.substr(0, section.size()) == section &&
         path[section.size()] == '.';
}

std::string closestMatch(std::string_view word, const std::vector<std::string_view>& candidates) {
  // Optimal string alignment distance: Levenshtein plus adjacent transpositions ("qeuue").
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      for (std::size_t j = 1; j <= b.size(); ++j) {
        std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.size()][b.size()];
  };
  if (word.empty() || word.size() > 128) return {};
  // A missing or different unit suffix ("keepalive", "keepalive_s") is the commonest near miss.
  auto stem = [](std::string_view s) -> std::string_view {
    static constexpr std::string_view kUnits[] = {
        "ms", "us", "ns", "s", "sec", "secs", "seconds", "bytes", "kib", "mib", "gib", "kb", "mb", "gb", "b"};
    std::size_t underscore = s.rfind('_');
    if (underscore == std::string_view::npos || underscore == 0) return {};
    std::string_view unit = s.substr(underscore + 1);
    for (std::string_view u : kUnits) {
      if (unit == u) return s.substr(0, underscore);
    }
    return {};
  };
  for (std::string_view c : candidates) {
    std::string_view c_stem = stem(c);
    if (!c_stem.empty() && (c_stem == word || c_stem == stem(word))) return std::string(c);
  }
  // An abbreviation or an extension of a word ("warning" for "warn").
  if (word.size() >= 3) {
    for (std::string_view c : candidates) {
      if (c.size() >= 3 && (c.substr(0, word.size()) == word || word.substr(0, c.size()) == c))
        return std::string(c);
    }
  }
  std::size_t best = std::numeric_limits<std::size_t>::max();
  std::string_view best_c;
  for (std::string_view c : candidates) {
    std::size_t dist = distance(word, c);
    if (dist < best) {
      best = dist;
      best_c = c;
    }
  }
  std::size_t allowed = std::max<std::size_t>(1, std::min<std::size_t>(3, word.size() / 3));
  return best <= allowed ? std::string(best_c) : std::string();
}

}  // namespace rdmagate::conf::detail

namespace rdmagate::conf {

std::string_view toString(Reload r) noexcept {
  return r == Reload::kLive ? "live" : "restart";
}

const std::vector<KeyInfo>& schema() {
  static const std::vector<KeyInfo> infos = [] {
    std::vector<KeyInfo> v;
    for (const detail::Key* k : detail::allKeys()) v.push_back(k->info());
    return v;
  }();
  return infos;
}

const std::vector<std::string_view>& schemaSections() {
  return detail::table().top_sections;
}

}  // namespace rdmagate::conf

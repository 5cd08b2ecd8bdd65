#include "conf/cpuset.hpp"

#include <algorithm>
#include <charconv>

namespace rdmagate::conf {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

// Decimal only, no sign, no leading zeros: "010" would be octal to some tools and decimal to others.
bool parseId(std::string_view s, std::uint32_t limit, std::uint32_t* out, std::string* why) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (why) *why = "\"" + std::string(s) + "\" is not a cpu number";
    return false;
  }
  if (s.size() > 1 && s.front() == '0') {
    if (why) *why = "\"" + std::string(s) + "\" has a leading zero";
    return false;
  }
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v >= limit) {
    if (why) *why = "cpu " + std::string(s) + " is out of range [0, " + std::to_string(limit - 1) + "]";
    return false;
  }
  *out = static_cast<std::uint32_t>(v);
  return true;
}

}  // namespace

CpuSet::CpuSet(std::initializer_list<std::uint32_t> cpus) {
  for (std::uint32_t c : cpus) insert(c);
}

std::optional<CpuSet> CpuSet::parse(std::string_view text, std::uint32_t limit, std::string* why) {
  CpuSet set;
  std::string_view rest = trim(text);
  if (rest.empty()) {
    if (why) *why = "empty cpu list";
    return std::nullopt;
  }
  while (true) {
    std::size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    std::size_t dash = item.find('-');
    std::uint32_t lo = 0;
    std::uint32_t hi = 0;
    if (dash == std::string_view::npos) {
      if (!parseId(item, limit, &lo, why)) return std::nullopt;
      hi = lo;
    } else {
      if (!parseId(trim(item.substr(0, dash)), limit, &lo, why)) return std::nullopt;
      if (!parseId(trim(item.substr(dash + 1)), limit, &hi, why)) return std::nullopt;
      if (hi < lo) {
        if (why) *why = "range \"" + std::string(item) + "\" is descending";
        return std::nullopt;
      }
    }
    for (std::uint32_t c = lo;; ++c) {
      if (!set.insert(c)) {
        if (why) *why = "cpu " + std::to_string(c) + " is listed twice";
        return std::nullopt;
      }
      if (c == hi) break;
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return set;
}

bool CpuSet::insert(std::uint32_t cpu) {
  auto it = std::lower_bound(cpus_.begin(), cpus_.end(), cpu);
  if (it != cpus_.end() && *it == cpu) return false;
  cpus_.insert(it, cpu);
  return true;
}

bool CpuSet::contains(std::uint32_t cpu) const {
  return std::binary_search(cpus_.begin(), cpus_.end(), cpu);
}

CpuSet CpuSet::unionWith(const CpuSet& other) const {
  CpuSet out = *this;
  for (std::uint32_t c : other.cpus_) out.insert(c);
  return out;
}

std::string CpuSet::str() const {
  std::string out;
  for (std::size_t i = 0; i < cpus_.size();) {
    std::size_t j = i;
    while (j + 1 < cpus_.size() && cpus_[j + 1] == cpus_[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus_[i]);
    if (j > i) out += '-' + std::to_string(cpus_[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace rdmagate::conf

#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::conf {

// A set of CPU (= DPDK lcore) ids, kept sorted and unique. The text form is the kernel's cpulist format
// ("0-3,8,10-11"), as in /sys/devices/system/cpu/online, taskset -c and DPDK's -l.
class CpuSet {
 public:
  CpuSet() = default;
  CpuSet(std::initializer_list<std::uint32_t> cpus);

  // Parses a cpulist. Whitespace around items is allowed. Ranges must be ascending, and no CPU may be
  // named twice ("0-3,2" is an error: it usually means a typo). Every id must be below `limit`.
  // On failure returns nullopt and sets *why (when non-null).
  static std::optional<CpuSet> parse(std::string_view text, std::uint32_t limit, std::string* why);

  bool insert(std::uint32_t cpu);  // false when already present
  bool contains(std::uint32_t cpu) const;
  bool empty() const noexcept { return cpus_.empty(); }
  std::size_t size() const noexcept { return cpus_.size(); }
  const std::vector<std::uint32_t>& cpus() const noexcept { return cpus_; }
  auto begin() const noexcept { return cpus_.begin(); }
  auto end() const noexcept { return cpus_.end(); }

  CpuSet unionWith(const CpuSet& other) const;

  std::string str() const;  // cpulist form; "" when empty

  bool operator==(const CpuSet&) const = default;

 private:
  std::vector<std::uint32_t> cpus_;
};

}  // namespace rdmagate::conf

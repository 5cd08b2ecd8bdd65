#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "conf/cpuset.hpp"

namespace rdmagate::conf {

// Bounds the kernel's own CPU numbering (CONFIG_NR_CPUS tops out at 8192), not DPDK's: a host's CPU list,
// read or stated (--host-cpus), may name CPUs no config may use.
inline constexpr std::uint32_t kMaxHostCpus = 8192;

// What a path is on the host, for eal.hugepage_dir.
enum class DirState : std::uint8_t {
  kMissing,         // nothing there (or not reachable: a parent is not searchable)
  kNotDirectory,    // something that is not a directory
  kDirectory,       // a directory, but not a hugetlbfs mount point (EAL's --huge-dir wants one)
  kHugetlbfsMount,  // a mount point of hugetlbfs in /proc/mounts
};

// Facts about the machine that validation depends on. They come in as a value, never read inside the
// validator, so the same file validates the same way in a unit test on any machine. A fact left empty is
// unknown and skips its check: `rdmagate --check-config --no-host` leaves them all empty to check a file
// written for another machine, `--host-cpus LIST` states that machine's CPUs.
struct HostFacts {
  CpuSet online_cpus;   // CPUs that exist and are online; empty: unknown, the check is skipped
  CpuSet allowed_cpus;  // this process's CPU affinity (taskset, cgroup cpuset); empty: unknown
  // online_cpus was stated by the operator (--host-cpus) rather than read from this machine: the errors say
  // so, since "does not exist on this host" would be about the wrong host.
  bool cpus_stated = false;
  // What a path is on this machine; null: unknown, the eal.hugepage_dir check is skipped.
  std::function<DirState(const std::string& path)> dir_state;
};

// The running host: /sys/devices/system/cpu/online (sysconf as a fallback), sched_getaffinity(), and for
// dir_state stat(2) and the hugetlbfs entries of /proc/mounts. A fact that cannot be read is left empty,
// which skips its check rather than rejecting a good config.
HostFacts readHostFacts();

// The host checks that `host` leaves out, one phrase each ("the CPU affinity of dataplane.cores and
// eal.main_lcore"), in a fixed order; empty when every host check runs. --check-config names them, so a
// pass against another host's facts is not mistaken for a full one.
std::vector<std::string> skippedHostChecks(const HostFacts& host);

// The facts of a machine whose CPUs are `cpus` (--host-cpus): nothing else about it is known.
HostFacts statedHostFacts(const CpuSet& cpus);

}  // namespace rdmagate::conf

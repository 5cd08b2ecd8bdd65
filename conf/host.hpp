#pragma once

#include "conf/cpuset.hpp"

namespace rdmagate::conf {

// Facts about the machine that validation depends on. They come in as a value, never read inside the
// validator, so the same file validates the same way in a unit test on any machine.
struct HostFacts {
  CpuSet online_cpus;   // CPUs that exist and are online; empty: unknown, the check is skipped
  CpuSet allowed_cpus;  // this process's CPU affinity (taskset, cgroup cpuset); empty: unknown
};

// The running host: /sys/devices/system/cpu/online (sysconf as a fallback) and sched_getaffinity().
// A fact that cannot be read is left empty, which skips its check rather than rejecting a good config.
HostFacts readHostFacts();

}  // namespace rdmagate::conf

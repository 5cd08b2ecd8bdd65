#include "conf/host.hpp"

#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

namespace rdmagate::conf {
namespace {

// Bounds the kernel's own CPU numbering (CONFIG_NR_CPUS tops out at 8192), not DPDK's.
constexpr std::uint32_t kMaxHostCpus = 8192;

CpuSet readOnline() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (auto set = CpuSet::parse(text, kMaxHostCpus, nullptr)) return *set;
  CpuSet fallback;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  for (long i = 0; i < n && i < static_cast<long>(kMaxHostCpus); ++i)
    fallback.insert(static_cast<std::uint32_t>(i));
  return fallback;
}

CpuSet readAffinity() {
  CpuSet out;
  cpu_set_t* mask = CPU_ALLOC(kMaxHostCpus);
  if (mask == nullptr) return out;
  std::size_t size = CPU_ALLOC_SIZE(kMaxHostCpus);
  CPU_ZERO_S(size, mask);
  if (sched_getaffinity(0, size, mask) == 0) {
    for (std::uint32_t c = 0; c < kMaxHostCpus; ++c) {
      if (CPU_ISSET_S(c, size, mask)) out.insert(c);
    }
  }
  CPU_FREE(mask);
  return out;
}

}  // namespace

HostFacts readHostFacts() {
  return HostFacts{readOnline(), readAffinity()};
}

}  // namespace rdmagate::conf

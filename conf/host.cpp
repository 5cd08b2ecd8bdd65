#include "conf/host.hpp"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace rdmagate::conf {
namespace {

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

// /proc/mounts escapes blanks and backslashes in a path as \ooo.
std::string unescapeMountField(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// The mount point itself, as the EAL runtime's hugepage probe compares it: a directory below a hugetlbfs
// mount is not one EAL would use.
bool isHugetlbfsMount(const std::string& path) {
  std::ifstream in("/proc/mounts");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string device, dir, type;
    if (fields >> device >> dir >> type && type == "hugetlbfs" && unescapeMountField(dir) == path)
      return true;
  }
  return false;
}

DirState readDirState(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return DirState::kMissing;
  if (!S_ISDIR(st.st_mode)) return DirState::kNotDirectory;
  return isHugetlbfsMount(path) ? DirState::kHugetlbfsMount : DirState::kDirectory;
}

}  // namespace

HostFacts readHostFacts() {
  return HostFacts{readOnline(), readAffinity(), false, readDirState};
}

HostFacts statedHostFacts(const CpuSet& cpus) {
  HostFacts h;
  h.online_cpus = cpus;
  h.cpus_stated = true;
  return h;
}

std::vector<std::string> skippedHostChecks(const HostFacts& host) {
  std::vector<std::string> out;
  if (host.online_cpus.empty()) out.emplace_back("that the CPUs of eal.main_lcore and dataplane.cores exist");
  if (host.allowed_cpus.empty()) {
    out.emplace_back("that those CPUs are in the process's CPU affinity");
  }
  if (!host.dir_state) out.emplace_back("that eal.hugepage_dir is a hugetlbfs mount");
  return out;
}

}  // namespace rdmagate::conf

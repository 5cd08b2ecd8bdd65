#include "daemon/placement.hpp"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <optional>

namespace rdmagate::control {

namespace {

bool has(const std::vector<int>& cpus, int cpu) {
  return std::find(cpus.begin(), cpus.end(), cpu) != cpus.end();
}

std::vector<int> sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// The number a thread name ends in ("lcore-worker-3", "dpdk-worker3"), if any.
std::optional<unsigned> trailing_number(const std::string& name) {
  std::size_t i = name.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1])) != 0) --i;
  if (i == name.size()) return std::nullopt;
  return static_cast<unsigned>(std::strtoul(name.c_str() + i, nullptr, 10));
}

// The index in `threads` of lcore p's own poller thread, if one can be told apart.
std::optional<std::size_t> poller_thread(const PollerCpus& p, const std::vector<ThreadCpus>& threads) {
  const std::vector<int> want = sorted(p.cpus);
  std::vector<std::size_t> exact;
  for (std::size_t i = 0; i < threads.size(); ++i) {
    if (sorted(threads[i].cpus) == want) exact.push_back(i);
  }
  for (std::size_t i : exact) {
    if (trailing_number(threads[i].name) == p.lcore) return i;
  }
  if (exact.size() == 1) return exact.front();
  return std::nullopt;
}

// The first CPU of the process's threads that no poller uses, as the fix's example; -1 if none.
int free_cpu(const std::vector<PollerCpus>& pollers, const std::vector<ThreadCpus>& threads) {
  std::vector<int> all;
  for (const ThreadCpus& t : threads) all.insert(all.end(), t.cpus.begin(), t.cpus.end());
  for (int cpu : sorted(all)) {
    bool polled = false;
    for (const PollerCpus& p : pollers) polled = polled || has(p.cpus, cpu);
    if (!polled) return cpu;
  }
  return -1;
}

}  // namespace

std::string cpu_list_string(const std::vector<int>& cpus) {
  const std::vector<int> v = sorted(cpus);
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]);
    if (j > i) out += '-' + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

std::vector<std::string> placement_conflicts(unsigned main_lcore, const std::vector<int>& main_cpus,
                                             const std::vector<PollerCpus>& pollers,
                                             const std::vector<ThreadCpus>& threads) {
  std::vector<std::string> out;
  const std::string housekeeping =
      " (reserve it for housekeeping: systemd CPUAffinity=, kubelet reservedSystemCPUs with the static CPU "
      "manager policy)";
  for (const PollerCpus& p : pollers) {
    for (int cpu : sorted(p.cpus)) {
      if (!has(main_cpus, cpu)) continue;
      const int spare = free_cpu(pollers, threads);
      out.push_back("eal.main_lcore " + std::to_string(main_lcore) + " may run on CPU " +
                    std::to_string(cpu) + ", which data-plane lcore " + std::to_string(p.lcore) +
                    " busy-polls: the control thread, and the HTTP and RADOS threads that keep to its CPUs, "
                    "would preempt the poller. Fix: give eal.main_lcore a CPU outside dataplane.cores" +
                    (spare >= 0 ? ", e.g. eal.main_lcore: " + std::to_string(spare) : std::string()) +
                    housekeeping);
    }
  }
  for (std::size_t a = 0; a < pollers.size(); ++a) {
    for (std::size_t b = a + 1; b < pollers.size(); ++b) {
      for (int cpu : sorted(pollers[a].cpus)) {
        if (!has(pollers[b].cpus, cpu)) continue;
        out.push_back(
            "data-plane lcores " + std::to_string(pollers[a].lcore) + " and " +
            std::to_string(pollers[b].lcore) + " may both run on CPU " + std::to_string(cpu) +
            ": two busy-polling loops would share it. Fix: give every dataplane.cores entry a CPU of "
            "its own (eal.lcores must not map two lcores to one CPU)");
      }
    }
  }
  const std::string main_list = cpu_list_string(main_cpus);
  for (const PollerCpus& p : pollers) {
    const std::optional<std::size_t> own = poller_thread(p, threads);
    for (std::size_t i = 0; i < threads.size(); ++i) {
      if (own == i) continue;
      const ThreadCpus& t = threads[i];
      // The main lcore's own conflict is reported above, by its key.
      if (sorted(t.cpus) == sorted(main_cpus) && !main_cpus.empty()) continue;
      for (int cpu : sorted(p.cpus)) {
        if (!has(t.cpus, cpu)) continue;
        out.push_back("thread '" + t.name + "' (tid " + std::to_string(t.tid) + ") may run on CPUs " +
                      cpu_list_string(t.cpus) + ", including CPU " + std::to_string(cpu) +
                      ", which data-plane lcore " + std::to_string(p.lcore) +
                      " busy-polls. Fix: helper threads keep to the main lcore's CPUs (eal.main_lcore " +
                      std::to_string(main_lcore) + ": CPUs " + main_list +
                      "); start rdmagate with a CPU affinity of the lcores' CPUs and housekeeping CPUs only "
                      "(systemd CPUAffinity=, taskset -c), so that nothing inherits a polling CPU");
        break;
      }
    }
  }
  return out;
}

std::vector<ThreadCpus> process_threads() {
  std::vector<ThreadCpus> out;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    ThreadCpus t;
    t.tid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
    cpu_set_t set;
    CPU_ZERO(&set);
    if (t.tid <= 0 || sched_getaffinity(t.tid, sizeof(set), &set) != 0) continue;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) t.cpus.push_back(c);
    }
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::getline(comm, t.name);
    out.push_back(std::move(t));
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const ThreadCpus& a, const ThreadCpus& b) { return a.tid < b.tid; });
  return out;
}

}  // namespace rdmagate::control

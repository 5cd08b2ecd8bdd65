#pragma once
// Thread placement: a busy-polling data-plane core must have its CPUs to itself. The control thread (EAL's
// main lcore), civetweb's HTTP threads, the RADOS worker and librados' threads (the daemon pins the last
// three to the main lcore's CPUs), EAL's own threads and any other thread of the process each preempt a
// poller whose CPU they may run on: the issue-17 measurement saw a control thread on the poller's CPU cost
// 17-26% of sink throughput. conf/ already refuses eal.main_lcore among dataplane.cores; this checks what
// the process really got once every thread exists (EAL's lcore-to-CPU maps, inherited affinities), and the
// daemon refuses to serve when it finds a conflict.
//
// Verbs- and EAL-free (the daemon passes EAL's lcore CPU sets in), so host tests cover the rules.

#include <sys/types.h>

#include <string>
#include <vector>

namespace rdmagate::control {

// A polling lcore and the CPUs its thread may run on (EAL's rte_lcore_cpuset).
struct PollerCpus {
  unsigned lcore = 0;
  std::vector<int> cpus;
};

// One thread of the process: its id, its name (/proc/self/task/<tid>/comm) and the CPUs it may run on.
struct ThreadCpus {
  pid_t tid = 0;
  std::string name;
  std::vector<int> cpus;
};

// Every conflict, one message each naming the thread or lcore, the CPU, the poller and the fix; empty when
// the placement is clean. Rules: the main lcore shares no CPU with a poller; no two pollers share a CPU;
// on each poller's CPUs no thread may run but that poller's own. A poller's own thread is the one whose
// CPU set is exactly the lcore's and whose name ends in the lcore number (EAL names its workers
// "lcore-worker-N" or "dpdk-worker<N>"), or, failing a name, the only thread with exactly that CPU set.
std::vector<std::string> placement_conflicts(unsigned main_lcore, const std::vector<int>& main_cpus,
                                             const std::vector<PollerCpus>& pollers,
                                             const std::vector<ThreadCpus>& threads);

// The calling process's threads from /proc/self/task (name and sched_getaffinity); threads that exit
// while being read are left out.
std::vector<ThreadCpus> process_threads();

// "0-2,5": a CPU list as the kernel and taskset write it.
std::string cpu_list_string(const std::vector<int>& cpus);

}  // namespace rdmagate::control

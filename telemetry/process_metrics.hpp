#pragma once
// The standard process metrics of the Prometheus client libraries (process_start_time_seconds,
// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes, process_open_fds,
// process_max_fds), with their names, help and semantics as Go's client_golang exports them on Linux.
// prometheus-cpp 1.0 has no process collector. Everything is read from /proc at scrape time, on the HTTP
// thread; a file that cannot be read leaves its series out of that scrape rather than exporting a zero.

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace rdmagate::telemetry {

// The fields of /proc/<pid>/stat the metrics use, converted to seconds and bytes.
struct ProcStat {
  double cpu_seconds = 0;            // utime + stime
  double start_seconds = 0;          // starttime: since boot
  std::uint64_t virtual_bytes = 0;   // vsize
  std::uint64_t resident_bytes = 0;  // rss (pages) * page size
};

// Parses the text of /proc/<pid>/stat (the command name may hold spaces and parentheses). nullopt when
// fields are missing or not numbers.
std::optional<ProcStat> parse_proc_stat(std::string_view text, long ticks_per_second, long page_size);
// The `btime` line of /proc/stat: the boot time in seconds since the epoch.
std::optional<double> parse_boot_time(std::string_view proc_stat_text);
// A "Name:   1234 kB" line of /proc/<pid>/status, in bytes.
std::optional<std::uint64_t> parse_status_bytes(std::string_view status_text, std::string_view field);

// Bytes the kernel holds pinned for this process (VmPin of /proc/self/status: pages pinned by RDMA memory
// registrations, charged against RLIMIT_MEMLOCK), or nullopt when unreadable.
std::optional<std::uint64_t> read_pinned_bytes();

class ProcessCollector final : public prometheus::Collectable {
 public:
  // Reads the boot time and the process's start once: neither changes.
  ProcessCollector();
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  long ticks_per_second_;
  long page_size_;
  std::optional<double> start_time_;  // seconds since the epoch
};

}  // namespace rdmagate::telemetry

#include "telemetry/process_metrics.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace rdmagate::telemetry {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

std::optional<std::string> slurp(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

template <typename T>
std::optional<T> to_number(std::string_view s) {
  T v{};
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Splits on runs of spaces.
std::vector<std::string_view> fields(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\n' && s[i] != '\t') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::optional<std::size_t> open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return std::nullopt;
  std::size_t n = 0;
  // Counts the directory's own descriptor too, as client_golang does (it lists the same directory).
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

void add_gauge(std::vector<MetricFamily>& out, const char* name, const char* help, double v) {
  ClientMetric m;
  m.gauge.value = v;
  out.push_back(MetricFamily{name, help, MetricType::Gauge, {std::move(m)}});
}

}  // namespace

std::optional<ProcStat> parse_proc_stat(std::string_view text, long ticks_per_second, long page_size) {
  // "pid (comm) state ppid ...": comm may contain ") ", so the fields start after the last ')'.
  const std::size_t close = text.rfind(')');
  if (close == std::string_view::npos || ticks_per_second <= 0 || page_size <= 0) return std::nullopt;
  const auto f = fields(text.substr(close + 1));
  // f[0] is field 3 (state); field n is f[n - 3]: utime 14, stime 15, starttime 22, vsize 23, rss 24.
  if (f.size() < 22) return std::nullopt;
  const auto utime = to_number<std::uint64_t>(f[11]);
  const auto stime = to_number<std::uint64_t>(f[12]);
  const auto start = to_number<std::uint64_t>(f[19]);
  const auto vsize = to_number<std::uint64_t>(f[20]);
  const auto rss = to_number<std::int64_t>(f[21]);
  if (!utime || !stime || !start || !vsize || !rss || *rss < 0) return std::nullopt;
  const auto hz = static_cast<double>(ticks_per_second);
  ProcStat s;
  s.cpu_seconds = static_cast<double>(*utime + *stime) / hz;
  s.start_seconds = static_cast<double>(*start) / hz;
  s.virtual_bytes = *vsize;
  s.resident_bytes = static_cast<std::uint64_t>(*rss) * static_cast<std::uint64_t>(page_size);
  return s;
}

std::optional<double> parse_boot_time(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const auto f = fields(text.substr(pos, end - pos));
    if (f.size() == 2 && f[0] == "btime") {
      if (const auto v = to_number<std::uint64_t>(f[1])) return static_cast<double>(*v);
      return std::nullopt;
    }
    pos = end + 1;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> parse_status_bytes(std::string_view text, std::string_view field) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    if (line.size() > field.size() && line.substr(0, field.size()) == field && line[field.size()] == ':') {
      const auto f = fields(line.substr(field.size() + 1));
      if (f.size() != 2 || f[1] != "kB") return std::nullopt;
      const auto kib = to_number<std::uint64_t>(f[0]);
      if (!kib) return std::nullopt;
      return *kib * 1024;
    }
    pos = end + 1;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> read_pinned_bytes() {
  const auto status = slurp("/proc/self/status");
  if (!status) return std::nullopt;
  return parse_status_bytes(*status, "VmPin");
}

ProcessCollector::ProcessCollector()
    : ticks_per_second_(sysconf(_SC_CLK_TCK)), page_size_(sysconf(_SC_PAGESIZE)) {
  const auto proc_stat = slurp("/proc/stat");
  const auto self_stat = slurp("/proc/self/stat");
  if (!proc_stat || !self_stat) return;
  const auto boot = parse_boot_time(*proc_stat);
  const auto s = parse_proc_stat(*self_stat, ticks_per_second_, page_size_);
  if (boot && s) start_time_ = *boot + s->start_seconds;
}

std::vector<MetricFamily> ProcessCollector::Collect() const {
  std::vector<MetricFamily> out;
  if (const auto text = slurp("/proc/self/stat")) {
    if (const auto s = parse_proc_stat(*text, ticks_per_second_, page_size_)) {
      ClientMetric cpu;
      cpu.counter.value = s->cpu_seconds;
      out.push_back(MetricFamily{"process_cpu_seconds_total",
                                 "Total user and system CPU time spent in seconds.",
                                 MetricType::Counter,
                                 {std::move(cpu)}});
      add_gauge(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
                static_cast<double>(s->virtual_bytes));
      add_gauge(out, "process_resident_memory_bytes", "Resident memory size in bytes.",
                static_cast<double>(s->resident_bytes));
    }
  }
  if (start_time_) {
    add_gauge(out, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
              *start_time_);
  }
  if (const auto n = open_fds()) {
    add_gauge(out, "process_open_fds", "Number of open file descriptors.", static_cast<double>(*n));
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    add_gauge(out, "process_max_fds", "Maximum number of open file descriptors.",
              lim.rlim_cur == RLIM_INFINITY ? std::numeric_limits<double>::infinity()
                                            : static_cast<double>(lim.rlim_cur));
  }
  return out;
}

}  // namespace rdmagate::telemetry

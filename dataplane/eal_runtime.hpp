// DPDK EAL bring-up for rdmagate: one initialisation per process, hugepages when the host has them.
//
// EAL can be initialised exactly once per process (a second rte_eal_init fails with EALREADY, even after
// rte_eal_cleanup), so a process creates one EalRuntime in main() and keeps it until exit. The runtime
// picks its memory mode from what the machine offers:
//   hugepages free and a hugetlbfs mounted -> --in-memory --no-pci --iova-mode=va (one contiguous chunk)
//   otherwise                              -> --no-huge --no-pci --no-shconf, with one warning line
// and always passes --no-telemetry.
//
// DPDK's own log lines (EAL: ...) go wherever route_eal_log() says, so that a daemon's log stays one format;
// before that call, or without it, DPDK writes to stderr (and syslog) as it always does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::dataplane {

enum class HugepagePolicy : uint8_t {
  kAuto = 1,     // use hugepages when usable, else fall back to --no-huge with one warning line
  kRequire = 2,  // fail init when hugepages are not usable
  kNever = 3,    // always --no-huge (no warning)
};

enum class EalMemoryMode : uint8_t {
  kHugepages = 1,  // --in-memory (or --file-prefix) on hugetlbfs, IOVA as VA
  kNoHuge = 2,     // --no-huge: anonymous 4 KiB pages, fixed-size heap (-m, 64 MiB by default)
};

struct EalOptions {
  std::string program_name{"rdmagate"};  // argv[0] as EAL sees it
  std::string lcores{"0"};               // -l: "0-1", "0,2"; with @ or (): --lcores ("0@0,1@1,2@0")
  int main_lcore{-1};                    // --main-lcore; -1: the first lcore of the list
  unsigned memory_mb{0};                 // -m; 0: EAL default (on demand / 64 MiB heap without hugepages)
  std::string file_prefix;               // --file-prefix (shared config); empty: --in-memory / --no-shconf
  std::string huge_dir;                  // --huge-dir; empty: any hugetlbfs mount of the default page size
  HugepagePolicy hugepages{HugepagePolicy::kAuto};
  std::string eal_log_level{"warning"};  // --log-level=lib.eal:<level>; empty: EAL default (info)
  std::vector<std::string> extra_args;   // appended last, so they override the above
};

// Where DPDK's log lines and this runtime's own warnings go: one call per line, without its newline, with the
// line's syslog priority (3 error ... 7 debug; DPDK's RTE_LOG_* levels are these plus one). May be called
// from any thread that logs through DPDK, one line at a time.
using EalLogSink = std::function<void(int syslog_priority, std::string_view line)>;

// Routes DPDK's log stream (rte_openlog_stream, which is process-wide) to `sink`, now: call it before
// EalRuntime::init, since EAL logs while it initialises. A later call replaces the sink; a null sink sends
// lines back to stderr. Returns false with *error when the stream cannot be made (no memory).
bool route_eal_log(EalLogSink sink, std::string* error);

// The syslog priority of a DPDK log level (RTE_LOG_EMERG 1 .. RTE_LOG_DEBUG 8); 6 (info) when unknown.
int syslog_priority_of_rte_level(int rte_level) noexcept;

// What the machine offers, read from /proc/meminfo and /proc/mounts.
struct HugepageProbe {
  uint64_t total_pages{0};
  uint64_t free_pages{0};
  uint64_t page_size_bytes{0};  // Hugepagesize
  std::string mount_dir;        // a hugetlbfs mount of the default page size (or the requested huge_dir)
  bool mount_writable{false};
  bool usable{false};
  // When !usable: why. When too few pages are free: how many of which size -m needs, how many are free,
  // and the two ways out (reserve more, or ask for less memory).
  std::string reason;
};

// Pure parsers, exposed for tests.
HugepageProbe parse_hugepage_probe(std::string_view meminfo, std::string_view mounts,
                                   std::string_view want_dir, uint64_t need_bytes);
HugepageProbe probe_hugepages(std::string_view want_dir, uint64_t need_bytes);
// The warning eal.hugepages: auto gives when it falls back to --no-huge: the probe's reason, what the
// fallback costs, and the commands that would make hugepages usable for `need_bytes` (0: EAL's default).
std::string hugepage_fallback_warning(const HugepageProbe& probe, uint64_t need_bytes);

// The EAL argument vector for the options and the probe (argv[0] included). Pure; exposed for tests.
std::vector<std::string> build_eal_args(const EalOptions& opts, EalMemoryMode mode);

class EalRuntime {
 public:
  // Initialises EAL. Returns nullptr and fills *error with one line on failure. Only one call per
  // process can succeed; a later call fails with a clear message.
  static std::unique_ptr<EalRuntime> init(const EalOptions& opts, std::string* error);

  ~EalRuntime();  // rte_eal_cleanup
  EalRuntime(const EalRuntime&) = delete;
  EalRuntime& operator=(const EalRuntime&) = delete;

  EalMemoryMode memory_mode() const { return mode_; }
  bool hugepages() const { return mode_ == EalMemoryMode::kHugepages; }
  const HugepageProbe& probe() const { return probe_; }
  const std::vector<std::string>& args() const { return args_; }
  std::string args_line() const;  // the argument vector joined with spaces, for logs
  unsigned lcore_count() const;
  unsigned main_lcore() const;
  double init_seconds() const { return init_seconds_; }

  // True once some EalRuntime::init succeeded in this process (EAL stays "used" after cleanup).
  static bool initialised_in_process();

 private:
  EalRuntime() = default;

  EalMemoryMode mode_{EalMemoryMode::kNoHuge};
  HugepageProbe probe_;
  std::vector<std::string> args_;
  std::vector<char*> argv_;  // rte_eal_init may permute it and keep argv[0]: lives as long as EAL
  double init_seconds_{0};
  bool owns_eal_{false};  // this object's init succeeded: it runs rte_eal_cleanup
};

}  // namespace rdmagate::dataplane

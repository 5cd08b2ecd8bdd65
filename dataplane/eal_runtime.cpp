#include "dataplane/eal_runtime.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

namespace rdmagate::dataplane {
namespace {

std::atomic<bool> g_eal_initialised{false};
std::atomic<bool> g_eal_attempted{false};

std::string read_text_file(const char* path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// /proc/mounts escapes blanks and backslashes as \ooo.
std::string unescape_mount_field(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const char a = s[i + 1], b = s[i + 2], c = s[i + 3];
      if (a >= '0' && a <= '3' && b >= '0' && b <= '7' && c >= '0' && c <= '7') {
        out.push_back(static_cast<char>((a - '0') * 64 + (b - '0') * 8 + (c - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// "2M", "1G", "2048k" -> bytes; 0 when unparsable.
uint64_t parse_size_suffix(std::string_view s) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) v = v * 10 + static_cast<uint64_t>(s[i] - '0');
  if (i == 0) return 0;
  if (i == s.size()) return v;
  switch (s[i]) {
    case 'k': case 'K': return v << 10;
    case 'm': case 'M': return v << 20;
    case 'g': case 'G': return v << 30;
    default: return 0;
  }
}

std::vector<std::string_view> split_ws(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    fn(text.substr(pos, end - pos));
    pos = end + 1;
  }
}

// The FILE* DPDK writes its log to once route_eal_log ran, and where its lines go. Created once and never
// closed: DPDK keeps the pointer for the life of the process and may log while it exits.
struct EalLogRoute {
  std::mutex mutex;  // the sink, and one line at a time into it
  EalLogSink sink;
  FILE* stream = nullptr;
};

EalLogRoute& eal_log_route() {
  static EalLogRoute* route = new EalLogRoute();
  return *route;
}

// What a thread has written since its last newline. Per thread because DPDK's message level is per thread
// (rte_log_cur_msg_loglevel) and two threads' partial lines must not mix; the stream is unbuffered, so each
// vfprintf reaches the cookie from the thread that made it.
thread_local std::string t_eal_partial;

// The cookie's write: whole lines to the sink, the rest kept for the next write.
ssize_t eal_log_write(void* /*cookie*/, const char* buf, size_t size) {
  const int priority = syslog_priority_of_rte_level(rte_log_cur_msg_loglevel());
  std::string& pending = t_eal_partial;
  pending.append(buf, size);
  size_t start = 0;
  for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(pending.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    EalLogRoute& r = eal_log_route();
    const std::lock_guard lock(r.mutex);
    if (r.sink) {
      r.sink(priority, line);
    } else {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    }
  }
  pending.erase(0, start);
  return static_cast<ssize_t>(size);
}

// This runtime's own warnings: to the routed sink when there is one, else stderr.
void eal_warn(const std::string& text) {
  EalLogRoute& r = eal_log_route();
  const std::lock_guard lock(r.mutex);
  if (r.sink) {
    r.sink(4, text);
  } else {
    std::fprintf(stderr, "rdmagate: warning: %s\n", text.c_str());
  }
}

// "2 MiB", "1 GiB", "64 KiB".
std::string size_text(uint64_t bytes) {
  if (bytes != 0 && bytes % (uint64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes != 0 && bytes % (uint64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

// EAL writes its runtime directory under /var/run when it can; a minimal guest has no /var at all.
void ensure_var_run() {
  struct stat st {};
  if (stat("/var/run", &st) == 0) return;
  if (errno != ENOENT) return;
  (void)mkdir("/var", 0755);
  if (mkdir("/var/run", 0755) != 0 && errno != EEXIST && geteuid() == 0) {
    eal_warn(std::string("cannot create /var/run: ") + std::strerror(errno));
  }
}

}  // namespace

int syslog_priority_of_rte_level(int rte_level) noexcept {
  // RTE_LOG_EMERG (1) .. RTE_LOG_DEBUG (8) are LOG_EMERG (0) .. LOG_DEBUG (7) shifted by one.
  if (rte_level < static_cast<int>(RTE_LOG_EMERG) || rte_level > static_cast<int>(RTE_LOG_DEBUG)) return 6;
  return rte_level - 1;
}

bool route_eal_log(EalLogSink sink, std::string* error) {
  EalLogRoute& r = eal_log_route();
  const std::lock_guard lock(r.mutex);
  if (r.stream == nullptr) {
    cookie_io_functions_t io{};
    io.write = eal_log_write;
    FILE* f = fopencookie(nullptr, "w", io);
    if (f == nullptr) {
      if (error) *error = std::string("eal log: fopencookie: ") + std::strerror(errno);
      return false;
    }
    // Unbuffered: each of DPDK's vfprintf calls reaches eal_log_write from the logging thread, which is what
    // makes the per-thread level and partial line right.
    std::setvbuf(f, nullptr, _IONBF, 0);
    if (rte_openlog_stream(f) != 0) {
      std::fclose(f);
      if (error) *error = "eal log: rte_openlog_stream failed";
      return false;
    }
    r.stream = f;
  }
  r.sink = std::move(sink);
  return true;
}

HugepageProbe parse_hugepage_probe(std::string_view meminfo, std::string_view mounts,
                                   std::string_view want_dir, uint64_t need_bytes) {
  HugepageProbe p;
  for_each_line(meminfo, [&](std::string_view line) {
    const auto f = split_ws(line);
    if (f.size() < 2) return;
    const uint64_t v = parse_size_suffix(f[1]);
    if (f[0] == "HugePages_Total:") p.total_pages = v;
    if (f[0] == "HugePages_Free:") p.free_pages = v;
    if (f[0] == "Hugepagesize:") p.page_size_bytes = (f.size() >= 3 && f[2] == "kB") ? v << 10 : v;
  });

  for_each_line(mounts, [&](std::string_view line) {
    if (!p.mount_dir.empty()) return;
    const auto f = split_ws(line);
    if (f.size() < 4 || f[2] != "hugetlbfs") return;
    const std::string dir = unescape_mount_field(f[1]);
    if (!want_dir.empty() && dir != want_dir) return;
    uint64_t mount_page = p.page_size_bytes;  // no pagesize= option: the default size
    std::string_view opts = f[3];
    const size_t at = opts.find("pagesize=");
    if (at != std::string_view::npos) {
      std::string_view v = opts.substr(at + 9);
      v = v.substr(0, v.find(','));
      mount_page = parse_size_suffix(v);
    }
    if (mount_page != p.page_size_bytes) return;
    p.mount_dir = dir;
  });

  if (p.page_size_bytes == 0) {
    p.reason = "no Hugepagesize in /proc/meminfo";
  } else if (p.free_pages == 0) {
    p.reason = p.total_pages == 0 ? "HugePages_Total is 0 in /proc/meminfo"
                                  : "HugePages_Free is 0 in /proc/meminfo";
  } else if (p.mount_dir.empty()) {
    p.reason = want_dir.empty() ? "hugepages are reserved but no hugetlbfs is mounted"
                                : "no hugetlbfs of the default page size is mounted on " + std::string(want_dir);
  } else if (need_bytes > p.free_pages * p.page_size_bytes) {
    // The gateway derives -m from store.capacity_mib unless eal.memory_mib sets it: both ways out are named,
    // since "no usable hugepages" with hundreds of MiB free reads like a broken host.
    const uint64_t need_pages = (need_bytes + p.page_size_bytes - 1) / p.page_size_bytes;
    const uint64_t missing = need_pages - p.free_pages;
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "%" PRIu64 " MiB of EAL memory (-m) needs %" PRIu64 " hugepages of %s, only %" PRIu64
                  " are free (%" PRIu64 " MiB); reserve %" PRIu64 " more (echo %" PRIu64
                  " > /proc/sys/vm/nr_hugepages), or lower store.capacity_mib (eal.memory_mib: 0 derives -m "
                  "from it) or eal.memory_mib to fit in %" PRIu64 " MiB",
                  need_bytes >> 20, need_pages, size_text(p.page_size_bytes).c_str(), p.free_pages,
                  (p.free_pages * p.page_size_bytes) >> 20, missing, p.total_pages + missing,
                  (p.free_pages * p.page_size_bytes) >> 20);
    p.reason = buf;
  } else {
    p.usable = true;
  }
  return p;
}

HugepageProbe probe_hugepages(std::string_view want_dir, uint64_t need_bytes) {
  const std::string meminfo = read_text_file("/proc/meminfo");
  const std::string mounts = read_text_file("/proc/mounts");
  HugepageProbe p = parse_hugepage_probe(meminfo, mounts, want_dir, need_bytes);
  if (!p.mount_dir.empty()) {
    p.mount_writable = access(p.mount_dir.c_str(), W_OK) == 0;
    if (p.usable && !p.mount_writable) {
      p.usable = false;
      p.reason = "hugetlbfs " + p.mount_dir + " is not writable by this user";
    }
  }
  return p;
}

std::string hugepage_fallback_warning(const HugepageProbe& p, uint64_t need_bytes) {
  std::string w = "no usable hugepages (" + p.reason +
                  "); eal falls back to --no-huge: 4 KiB pages, slow ibv_reg_mr, fixed heap";
  // The shortage case already says what to do (its reason names the pages and the keys).
  if (p.page_size_bytes != 0 && p.free_pages != 0 && !p.mount_dir.empty()) return w;
  const uint64_t page = p.page_size_bytes != 0 ? p.page_size_bytes : uint64_t{2} << 20;
  const uint64_t need_pages = need_bytes != 0 ? (need_bytes + page - 1) / page : 128;
  if (p.free_pages == 0) {
    w += "; reserve " + std::to_string(need_pages) + " hugepages of " + size_text(page) + " (echo " +
         std::to_string(p.total_pages + need_pages) + " > /proc/sys/vm/nr_hugepages)";
  }
  if (p.mount_dir.empty()) w += "; mount hugetlbfs (mount -t hugetlbfs nodev /dev/hugepages)";
  return w;
}

std::vector<std::string> build_eal_args(const EalOptions& opts, EalMemoryMode mode) {
  std::vector<std::string> a;
  a.push_back(opts.program_name.empty() ? "rdmagate" : opts.program_name);
  // A layout that maps lcores onto CPUs ("0@0,1@1,2@0": more lcores than CPUs, as in the 2-vCPU guest) needs
  // --lcores; a plain list or range goes to -l.
  const bool mapped = opts.lcores.find_first_of("@()") != std::string::npos;
  if (mapped) {
    a.push_back("--lcores=" + opts.lcores);
  } else {
    a.push_back("-l");
    a.push_back(opts.lcores.empty() ? "0" : opts.lcores);
  }
  if (opts.main_lcore >= 0) {
    a.push_back("--main-lcore");
    a.push_back(std::to_string(opts.main_lcore));
  }
  if (opts.memory_mb > 0) {
    a.push_back("-m");
    a.push_back(std::to_string(opts.memory_mb));
  }
  a.push_back("--no-pci");
  a.push_back("--no-telemetry");
  if (mode == EalMemoryMode::kHugepages) {
    if (opts.file_prefix.empty()) {
      a.push_back("--in-memory");
    } else {
      a.push_back("--file-prefix");
      a.push_back(opts.file_prefix);
    }
    a.push_back("--iova-mode=va");
    if (!opts.huge_dir.empty()) {
      a.push_back("--huge-dir");
      a.push_back(opts.huge_dir);
    }
  } else {
    // --no-huge --in-memory is rejected by 22.11; --no-shconf lets two processes coexist.
    a.push_back("--no-huge");
    a.push_back("--no-shconf");
    if (!opts.file_prefix.empty()) {
      a.push_back("--file-prefix");
      a.push_back(opts.file_prefix);
    }
  }
  if (!opts.eal_log_level.empty()) a.push_back("--log-level=lib.eal:" + opts.eal_log_level);
  for (const auto& x : opts.extra_args) a.push_back(x);
  return a;
}

std::unique_ptr<EalRuntime> EalRuntime::init(const EalOptions& opts, std::string* error) {
  if (g_eal_initialised.load()) {
    if (error) *error = "eal init: already initialised in this process (eal initialises once per process)";
    return nullptr;
  }
  std::unique_ptr<EalRuntime> rt(new EalRuntime());

  const uint64_t need_bytes = static_cast<uint64_t>(opts.memory_mb) << 20;
  rt->probe_ = probe_hugepages(opts.huge_dir, need_bytes);
  switch (opts.hugepages) {
    case HugepagePolicy::kNever:
      rt->mode_ = EalMemoryMode::kNoHuge;
      break;
    case HugepagePolicy::kRequire:
      if (!rt->probe_.usable) {
        if (error) *error = "eal init: hugepages required but not usable: " + rt->probe_.reason;
        return nullptr;
      }
      rt->mode_ = EalMemoryMode::kHugepages;
      break;
    case HugepagePolicy::kAuto:
      if (rt->probe_.usable) {
        rt->mode_ = EalMemoryMode::kHugepages;
      } else {
        rt->mode_ = EalMemoryMode::kNoHuge;
        eal_warn(hugepage_fallback_warning(rt->probe_, need_bytes));
      }
      break;
  }

  rt->args_ = build_eal_args(opts, rt->mode_);
  rt->argv_.reserve(rt->args_.size() + 1);
  for (auto& s : rt->args_) rt->argv_.push_back(s.data());
  rt->argv_.push_back(nullptr);

  ensure_var_run();

  if (g_eal_attempted.exchange(true)) {
    // A failed rte_eal_init may leave EAL half-initialised; let EAL itself decide, but say why.
    eal_warn("eal init retried after an earlier failure in this process");
  }
  const auto t0 = std::chrono::steady_clock::now();
  rte_errno = 0;
  const int ret = rte_eal_init(static_cast<int>(rt->args_.size()), rt->argv_.data());
  if (ret < 0) {
    const int e = rte_errno;
    if (error) {
      *error = "eal init failed: ";
      *error += e != 0 ? rte_strerror(e) : "unknown reason (rte_errno 0; often a stale /var/run/dpdk config)";
      *error += " (rte_errno " + std::to_string(e) + "); eal args: " + rt->args_line();
    }
    // argv_ may be referenced by a half-initialised EAL: keep it alive for the process.
    static std::vector<std::unique_ptr<EalRuntime>> failed;
    failed.push_back(std::move(rt));
    return nullptr;
  }
  rt->init_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rt->owns_eal_ = true;
  g_eal_initialised.store(true);
  return rt;
}

EalRuntime::~EalRuntime() {
  if (owns_eal_) {
    const int ret = rte_eal_cleanup();
    if (ret != 0) eal_warn(std::string("eal cleanup failed: ") + rte_strerror(-ret));
  }
}

std::string EalRuntime::args_line() const {
  std::string s;
  for (const auto& a : args_) {
    if (!s.empty()) s.push_back(' ');
    s += a;
  }
  return s;
}

unsigned EalRuntime::lcore_count() const { return rte_lcore_count(); }
unsigned EalRuntime::main_lcore() const { return rte_get_main_lcore(); }
bool EalRuntime::initialised_in_process() { return g_eal_initialised.load(); }

}  // namespace rdmagate::dataplane

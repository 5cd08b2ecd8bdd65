#include "dataplane/eal_runtime.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

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

// EAL writes its runtime directory under /var/run when it can; a minimal guest has no /var at all.
void ensure_var_run() {
  struct stat st {};
  if (stat("/var/run", &st) == 0) return;
  if (errno != ENOENT) return;
  (void)mkdir("/var", 0755);
  if (mkdir("/var/run", 0755) != 0 && errno != EEXIST && geteuid() == 0) {
    std::fprintf(stderr, "rdmagate: warning: cannot create /var/run: %s\n", std::strerror(errno));
  }
}

}  // namespace

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
    char buf[160];
    std::snprintf(buf, sizeof(buf), "only %" PRIu64 " MiB of hugepages free, %" PRIu64 " MiB requested",
                  (p.free_pages * p.page_size_bytes) >> 20, need_bytes >> 20);
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
        std::fprintf(stderr,
                     "rdmagate: warning: no usable hugepages (%s); eal falls back to --no-huge: 4 KiB pages, "
                     "slow ibv_reg_mr, fixed heap; reserve some with 'echo 256 > /proc/sys/vm/nr_hugepages' "
                     "and 'mount -t hugetlbfs nodev /dev/hugepages'\n",
                     rt->probe_.reason.c_str());
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
    std::fprintf(stderr, "rdmagate: warning: eal init retried after an earlier failure in this process\n");
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
    if (ret != 0) std::fprintf(stderr, "rdmagate: eal cleanup failed: %s\n", rte_strerror(-ret));
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

#include "conf/validate.hpp"

#include <algorithm>
#include <set>
#include <string_view>

#include "conf/detail/checks.hpp"
#include "conf/detail/keys.hpp"

namespace rdmagate::conf {
namespace detail {
namespace {

class Checker {
 public:
  Checker(const Config& c, const ConfigOrigins& o, const std::set<std::string>& failed,
          std::vector<ConfigError>& out)
      : c_(c), o_(o), failed_(failed), out_(out) {}

  bool usable(std::initializer_list<std::string_view> keys) const {
    return std::none_of(keys.begin(), keys.end(),
                        [&](std::string_view k) { return failed_.count(std::string(k)); });
  }

  void report(std::string_view key, std::string message) { reportAt(o_.of(key), key, std::move(message)); }
  void reportAt(const Origin& at, std::string_view key, std::string message) {
    out_.push_back(ConfigError{at, std::string(key), std::move(message)});
  }

  // "protocol.keepalive_ms = 20000 (line 7)": another key, its value and where it was set, so the
  // operator sees both sides of a conflict from one line.
  std::string other(std::string_view key) const {
    const Key* k = findKey(key);
    std::string out = std::string(key) + " = " + (k ? k->format(c_) : "?");
    return out + " (" + where(o_.of(key)) + ")";
  }
  std::string where(const Origin& at) const {
    switch (at.kind) {
      case OriginKind::kDefault:
        return "default";
      case OriginKind::kOverride:
        return "--set";
      case OriginKind::kFile:
        break;
    }
    return at.line > 0 ? "line " + std::to_string(at.line) : at.source;
  }

  // A conflict between two keys is reported against `primary`, unless only `secondary` was set by the
  // operator: then that is the line to edit. Each message is phrased from the blamed key's side, with
  // "{other}" standing for the other key, its value and origin.
  void conflict(std::string_view primary, std::string_view secondary, const std::string& primary_says,
                const std::string& secondary_says) {
    if (o_.isDefault(primary) && !o_.isDefault(secondary)) {
      report(secondary, fill(secondary_says, primary));
    } else {
      report(primary, fill(primary_says, secondary));
    }
  }

  const Config& c() const { return c_; }
  std::string fill(std::string text, std::string_view other_key) const {
    static constexpr std::string_view kHole = "{other}";
    if (std::size_t pos = text.find(kHole); pos != std::string::npos)
      text.replace(pos, kHole.size(), other(other_key));
    return text;
  }
  const ConfigOrigins& origins() const { return o_; }

 private:
  const Config& c_;
  const ConfigOrigins& o_;
  const std::set<std::string>& failed_;
  std::vector<ConfigError>& out_;
};

void checkCores(Checker& k, const HostFacts& host) {
  const Config& c = k.c();
  const EalConfig& eal = c.eal;
  const CpuSet& cores = c.dataplane.cores;
  const bool cores_ok = k.usable({"dataplane.cores"});
  const bool main_ok = k.usable({"eal.main_lcore"});

  if (cores_ok && main_ok && cores.contains(eal.main_lcore)) {
    const std::string cpu = std::to_string(eal.main_lcore);
    if (k.origins().isDefault("dataplane.cores") || !k.origins().isDefault("eal.main_lcore")) {
      k.report("eal.main_lcore", "cpu " + cpu + " is also a data-plane core in " +
                                     k.other("dataplane.cores") +
                                     "; the main lcore runs the control plane and cannot also poll");
    } else {
      k.reportAt(k.origins().ofElement("dataplane.cores", eal.main_lcore), "dataplane.cores",
                 "includes cpu " + cpu + ", which is " + k.other("eal.main_lcore") +
                     "; the main lcore runs the control plane and cannot also poll");
    }
  }

  if (!eal.lcores.empty() && k.usable({"eal.lcores"}) && cores_ok && main_ok) {
    if (!eal.lcores.contains(eal.main_lcore)) {
      k.report("eal.lcores", "does not include the main lcore, " + k.other("eal.main_lcore"));
    }
    for (std::uint32_t cpu : cores) {
      if (!eal.lcores.contains(cpu)) {
        k.report("eal.lcores", "does not include data-plane core " + std::to_string(cpu) + " of " +
                                   k.other("dataplane.cores"));
      }
    }
    for (std::uint32_t cpu : eal.lcores) {
      if (cpu != eal.main_lcore && !cores.contains(cpu)) {
        k.reportAt(
            k.origins().ofElement("eal.lcores", cpu), "eal.lcores",
            "cpu " + std::to_string(cpu) +
                " is neither eal.main_lcore nor a data-plane core, so its lcore would idle; write auto to "
                "derive the list");
      }
    }
  }

  // Only the CPUs the process will run on: lcores beyond them were reported above.
  auto checkCpu = [&](std::uint32_t cpu, std::string_view key, const Origin& at) {
    if (!host.online_cpus.empty() && !host.online_cpus.contains(cpu)) {
      k.reportAt(
          at, key,
          "cpu " + std::to_string(cpu) +
              (host.cpus_stated
                   ? " is not among the host's cpus given by --host-cpus (" + host.online_cpus.str() + ")"
                   : " does not exist on this host (online cpus: " + host.online_cpus.str() + ")"));
    } else if (!host.allowed_cpus.empty() && !host.allowed_cpus.contains(cpu)) {
      k.reportAt(at, key,
                 "cpu " + std::to_string(cpu) +
                     " is outside this process's CPU affinity (allowed: " + host.allowed_cpus.str() + ")");
    }
  };
  if (main_ok) checkCpu(eal.main_lcore, "eal.main_lcore", k.origins().of("eal.main_lcore"));
  if (cores_ok) {
    for (std::uint32_t cpu : cores)
      checkCpu(cpu, "dataplane.cores", k.origins().ofElement("dataplane.cores", cpu));
  }
}

void checkEal(Checker& k, const HostFacts& host) {
  const Config& c = k.c();
  if (k.usable({"eal.in_memory", "eal.hugepages"}) && c.eal.in_memory &&
      c.eal.hugepages == HugepageMode::kDisabled) {
    k.conflict(
        "eal.in_memory", "eal.hugepages",
        "true needs hugepages, but {other}; DPDK 22.11 rejects --in-memory with --no-huge: set it to false",
        "disabled conflicts with {other}; DPDK 22.11 rejects --in-memory with --no-huge: set "
        "eal.in_memory: false");
  }
  if (k.usable({"eal.hugepage_dir", "eal.hugepages"}) && !c.eal.hugepage_dir.empty() &&
      c.eal.hugepages == HugepageMode::kDisabled) {
    k.conflict("eal.hugepage_dir", "eal.hugepages", "is set, but {other} uses no hugepages",
               "disabled uses no hugepages, but {other} is set");
  } else if (host.dir_state && k.usable({"eal.hugepage_dir"}) && !c.eal.hugepage_dir.empty()) {
    // The EAL runtime's probe wants exactly a hugetlbfs mount point; anything else would fall back to
    // --no-huge (eal.hugepages: auto) or fail at start (required), long after --check-config said yes.
    const std::string& dir = c.eal.hugepage_dir;
    switch (host.dir_state(dir)) {
      case DirState::kMissing:
        k.report("eal.hugepage_dir", "\"" + dir + "\" does not exist on this host");
        break;
      case DirState::kNotDirectory:
        k.report("eal.hugepage_dir", "\"" + dir + "\" is not a directory");
        break;
      case DirState::kDirectory:
        k.report("eal.hugepage_dir",
                 "\"" + dir +
                     "\" is not a hugetlbfs mount point; mount one there (mount -t hugetlbfs "
                     "nodev " +
                     dir + ") or leave the key empty for the default mount");
        break;
      case DirState::kHugetlbfsMount:
        break;
    }
  }
  if (k.usable({"store.capacity_mib", "eal.memory_mib"}) && c.eal.memory_mib != 0 &&
      c.store.capacity_mib >= c.eal.memory_mib) {
    k.conflict(
        "store.capacity_mib", "eal.memory_mib",
        std::to_string(c.store.capacity_mib) +
            " MiB does not fit in {other}, which also holds the per-core pools",
        std::to_string(c.eal.memory_mib) + " MiB cannot hold the store, {other}, plus the per-core pools");
  }
}

void checkDataplane(Checker& k) {
  const DataplaneConfig& d = k.c().dataplane;
  if (k.usable({"dataplane.signal_interval", "dataplane.queue_depth"}) &&
      d.signal_interval >= d.queue_depth) {
    k.conflict("dataplane.signal_interval", "dataplane.queue_depth",
               std::to_string(d.signal_interval) +
                   " must be below {other}, or unsignaled sends can overflow the send queue",
               std::to_string(d.queue_depth) +
                   " must be above {other}, or unsignaled sends can overflow the send queue");
  }
  if (k.usable({"dataplane.send_inline_bytes", "dataplane.inline_threshold_bytes"}) &&
      d.send_inline_bytes > d.inline_threshold_bytes) {
    k.conflict(
        "dataplane.send_inline_bytes", "dataplane.inline_threshold_bytes",
        std::to_string(d.send_inline_bytes) + " exceeds the largest message, {other}",
        std::to_string(d.inline_threshold_bytes) + " is smaller than {other}, which must fit in a message");
  }
  if (k.usable({"dataplane.idle_policy", "dataplane.backend"}) && d.idle_policy == IdlePolicy::kEvent &&
      d.backend == DataplaneBackend::kMlx5dv) {
    k.conflict("dataplane.idle_policy", "dataplane.backend",
               "event needs CQ notification, which the mlx5dv backend ({other}) cannot arm; set "
               "dataplane.backend: verbs or another idle_policy",
               "mlx5dv cannot arm CQ notification, which {other} needs; set dataplane.backend: verbs or "
               "another idle_policy");
  }
  if (k.usable({"dataplane.srq_receives", "dataplane.queue_depth"}) && d.srq_receives != 0 &&
      d.srq_receives < d.queue_depth) {
    k.conflict("dataplane.srq_receives", "dataplane.queue_depth",
               std::to_string(d.srq_receives) + " cannot cover one connection's credits, {other}",
               std::to_string(d.queue_depth) + " credits do not fit in one core's shared pool, {other}");
  }
}

void checkProtocol(Checker& k) {
  const ProtocolConfig& p = k.c().protocol;
  if (k.usable({"protocol.dead_peer_timeout_ms", "protocol.keepalive_ms"}) &&
      p.dead_peer_timeout_ms <= p.keepalive_ms) {
    k.conflict(
        "protocol.dead_peer_timeout_ms", "protocol.keepalive_ms",
        std::to_string(p.dead_peer_timeout_ms) +
            " must be greater than {other}, or idle peers are declared dead",
        std::to_string(p.keepalive_ms) + " must be less than {other}, or idle peers are declared dead");
  }
  if (k.usable({"protocol.reconnect_min_ms", "protocol.reconnect_max_ms"}) &&
      p.reconnect_min_ms > p.reconnect_max_ms) {
    k.conflict("protocol.reconnect_min_ms", "protocol.reconnect_max_ms",
               std::to_string(p.reconnect_min_ms) + " is greater than {other}",
               std::to_string(p.reconnect_max_ms) + " is less than {other}");
  }
}

void checkTelemetry(Checker& k) {
  const TelemetryConfig& t = k.c().telemetry;
  if (k.usable({"telemetry.probe_port", "telemetry.port"}) && t.probe_port != 0 && t.probe_port == t.port) {
    k.conflict("telemetry.probe_port", "telemetry.port",
               std::to_string(t.probe_port) + " is {other}: the probe listener needs a port of its own",
               std::to_string(t.port) + " is also {other}: the probe listener needs a port of its own");
  }
}

void checkStore(Checker& k) {
  const StoreConfig& s = k.c().store;
  if (k.usable({"store.max_value_bytes", "store.capacity_mib"}) &&
      s.max_value_bytes > s.capacity_mib * kMiB) {
    k.conflict("store.max_value_bytes", "store.capacity_mib",
               std::to_string(s.max_value_bytes) + " is larger than the whole store, {other}",
               std::to_string(s.capacity_mib) + " MiB cannot hold one value of {other}");
  }
  // store.rados is checked whatever the backend: a section left for a later switch to rados must not hide
  // an error until then.
  const RadosConfig& r = s.rados;
  if (k.usable({"store.rados.cache_lease_ms", "store.rados.notify_timeout_ms"}) &&
      r.cache_lease_ms <= r.notify_timeout_used_ms()) {
    const std::string used =
        r.notify_timeout_ms % 1000 == 0
            ? std::string()
            : " (" + std::to_string(r.notify_timeout_used_ms()) + " used: librados counts seconds)";
    k.conflict("store.rados.cache_lease_ms", "store.rados.notify_timeout_ms",
               std::to_string(r.cache_lease_ms) + " must be greater than {other}" + used +
                   ", the longest a PUT or DELETE waits for the other gateways' "
                   "acknowledgements",
               std::to_string(r.notify_timeout_ms) + used +
                   " must be less than {other}, the time a gateway may "
                   "serve its cache after its watch was "
                   "last confirmed");
  }
}

// A principal's tenant must be a listed tenant; principals need a secrets file to take their secrets from
// (which secrets it holds is checked when the daemon reads it: --check-config may run where it is not).
void checkSecurity(Checker& k) {
  const SecurityConfig& s = k.c().security;
  if (k.usable({"security.principals", "security.tenants"})) {
    std::set<std::string_view> tenants;
    for (const TenantConfig& t : s.tenants) tenants.insert(t.name);
    for (std::size_t i = 0; i < s.principals.size(); ++i) {
      const PrincipalConfig& p = s.principals[i];
      if (tenants.count(p.tenant) != 0) continue;
      k.reportAt(k.origins().ofElement("security.principals", i),
                 "security.principals[" + std::to_string(i) + "].tenant",
                 "\"" + p.tenant + "\" is not a tenant in security.tenants (principal \"" + p.name + "\")");
    }
  }
  // The RADOS backend cannot say what a write or remove replaced, so the object service counts tenants' usage
  // only in the memory store (docs/store.md); a quota it would not enforce must not look enforced.
  if (k.usable({"security.tenants", "store.backend"}) && k.c().store.backend == StoreBackend::kRados) {
    for (std::size_t i = 0; i < s.tenants.size(); ++i) {
      const TenantConfig& t = s.tenants[i];
      if (t.max_bytes == 0 && t.max_objects == 0) continue;
      k.reportAt(
          k.origins().ofElement("security.tenants", i),
          "security.tenants[" + std::to_string(i) + (t.max_bytes != 0 ? "].max_bytes" : "].max_objects"),
          "quotas are enforced only with store.backend memory (the RADOS backend cannot account replaced "
          "values); " +
              k.other("store.backend"));
    }
  }
  if (k.usable({"security.principals", "security.secrets_file", "security.authentication"}) &&
      s.authentication_required() && !s.principals.empty() && s.secrets_file.empty()) {
    k.conflict("security.secrets_file", "security.principals",
               "is empty, but {other} lists principals whose secrets it must hold",
               "lists principals, but security.secrets_file is empty: name the file holding their secrets");
  }
}

}  // namespace

void validateInto(const Config& config, const ConfigOrigins& origins, const HostFacts& host,
                  const std::set<std::string>& failed, std::vector<ConfigError>& out) {
  Checker k(config, origins, failed, out);
  checkCores(k, host);
  checkEal(k, host);
  checkDataplane(k);
  checkProtocol(k);
  checkStore(k);
  checkTelemetry(k);
  checkSecurity(k);
}

void sortErrors(std::vector<ConfigError>& errors) {
  auto rank = [](const ConfigError& e) {
    switch (e.origin.kind) {
      case OriginKind::kFile:
        return 0;
      case OriginKind::kOverride:
        return 1;
      case OriginKind::kDefault:
        return 2;
    }
    return 3;
  };
  std::stable_sort(errors.begin(), errors.end(), [&](const ConfigError& a, const ConfigError& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (a.origin.kind != OriginKind::kFile) return false;
    if (a.origin.line != b.origin.line) return a.origin.line < b.origin.line;
    return a.origin.column < b.origin.column;
  });
}

}  // namespace detail

std::vector<ConfigError> validateConfig(const Config& config, const ConfigOrigins& origins,
                                        const HostFacts& host) {
  std::vector<ConfigError> out;
  detail::validateInto(config, origins, host, {}, out);
  detail::sortErrors(out);
  return out;
}

std::vector<ConfigError> validateAgainstDevice(const LoadedConfig& loaded, const DeviceLimits& device) {
  const Config& c = loaded.config;
  std::vector<ConfigError> out;
  const std::string dev = "device " + (device.name.empty() ? std::string("?") : device.name);
  auto check = [&](std::string_view key, std::uint64_t value, const auto& limit, std::string_view limit_name,
                   std::string_view hint) {
    if (!limit || value <= *limit) return;
    out.push_back(ConfigError{loaded.origins.of(key), std::string(key),
                              std::to_string(value) + " exceeds " + dev + "'s " + std::string(limit_name) +
                                  " " + std::to_string(*limit) + std::string(hint)});
  };
  check("device.port", c.device.port, device.port_count, "port count", "");
  check("dataplane.queue_depth", c.dataplane.queue_depth, device.max_qp_wr, "max_qp_wr", "");
  check("dataplane.send_inline_bytes", c.dataplane.send_inline_bytes, device.max_inline_data,
        "max_inline_data", "; 0 disables inline sends");
  check("dataplane.max_fragments", c.dataplane.max_fragments, device.max_sge, "max_sge", "");
  check("dataplane.inline_threshold_bytes", c.dataplane.inline_threshold_bytes, device.max_msg_size,
        "max_msg_sz", "");
  check("store.max_value_bytes", c.store.max_value_bytes, device.max_msg_size, "max_msg_sz",
        " (one fragment may carry a whole value)");
  detail::sortErrors(out);
  return out;
}

}  // namespace rdmagate::conf

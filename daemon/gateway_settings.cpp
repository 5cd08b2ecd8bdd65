#include "daemon/gateway_settings.hpp"

#include <algorithm>

#include "dataplane/core_resources.hpp"
#include "protocol/params.hpp"
#include "protocol/wire_constants.hpp"

namespace rdmagate::control {

namespace {

// Per-connection transmit descriptors: the responses a full window of requests needs, plus NOOPs and
// completions behind them (the engine tests run 32 deep with 96).
std::uint32_t tx_per_conn(std::uint32_t depth) {
  static_assert(3 * conf::kMaxQueueDepth <= dataplane::kMaxTxPerConn,
                "tx descriptor indices must stay below the SQ FIFO markers");
  return std::min<std::uint32_t>(3 * depth, 3 * conf::kMaxQueueDepth);
}

store::StoreConfig store_config(const conf::Config& cfg) {
  store::StoreConfig s;
  s.capacity_bytes = cfg.store.capacity_mib * conf::kMiB;
  s.max_value = cfg.store.max_value_bytes;
  // One object per 4 KiB of capacity, within bounds that keep the index small and useful.
  s.max_objects =
      static_cast<std::uint32_t>(std::clamp<std::uint64_t>(s.capacity_bytes / 4096, 4096, 1u << 22));
  // One stats row per core, and with rados one more for its worker (which fills the cache).
  s.max_cores = std::max<std::uint32_t>(64, static_cast<std::uint32_t>(cfg.dataplane.cores.size()) + 1);
  s.evict = cfg.store.backend == conf::StoreBackend::kRados;
  return s;
}

// The store's region: the capacity for values plus the fixed metadata carved in front of the arena (which
// itself grows a little with the region: the allocator's map).
std::uint64_t store_region_bytes(const conf::Config& cfg) {
  const store::StoreConfig s = store_config(cfg);
  std::uint64_t region = s.capacity_bytes + store::Store::metadata_bytes(s, s.capacity_bytes);
  region = s.capacity_bytes + store::Store::metadata_bytes(s, region) + 4096;
  return (region + 4095) & ~std::uint64_t{4095};
}

std::uint64_t core_region_bytes(const conf::Config& cfg) {
  const std::uint64_t depth = cfg.dataplane.queue_depth;
  return std::uint64_t{cfg.dataplane.max_connections_per_core} *
         (depth + tx_per_conn(cfg.dataplane.queue_depth)) * cfg.dataplane.inline_threshold_bytes;
}

dataplane::HugepagePolicy hugepage_policy(conf::HugepageMode m) {
  switch (m) {
    case conf::HugepageMode::kRequired:
      return dataplane::HugepagePolicy::kRequire;
    case conf::HugepageMode::kDisabled:
      return dataplane::HugepagePolicy::kNever;
    case conf::HugepageMode::kAuto:
      break;
  }
  return dataplane::HugepagePolicy::kAuto;
}

dataplane::IdlePolicy idle_policy(conf::IdlePolicy p) {
  switch (p) {
    case conf::IdlePolicy::kYield:
      return dataplane::IdlePolicy::kYield;
    case conf::IdlePolicy::kPause:
      return dataplane::IdlePolicy::kPause;
    case conf::IdlePolicy::kBackoff:
      return dataplane::IdlePolicy::kBackoff;
    case conf::IdlePolicy::kEvent:
      return dataplane::IdlePolicy::kEvent;
    case conf::IdlePolicy::kBusy:
      break;
  }
  return dataplane::IdlePolicy::kBusy;
}

dataplane::SrqMode srq_mode(conf::SrqMode m) {
  switch (m) {
    case conf::SrqMode::kRequired:
      return dataplane::SrqMode::kOn;
    case conf::SrqMode::kDisabled:
      return dataplane::SrqMode::kOff;
    case conf::SrqMode::kAuto:
      break;
  }
  return dataplane::SrqMode::kAuto;
}

dataplane::EalOptions eal_options(const conf::Config& cfg) {
  dataplane::EalOptions eo;
  eo.program_name = "rdmagate";
  eo.lcores = cfg.eal.lcores.str();
  eo.main_lcore = static_cast<int>(cfg.eal.main_lcore);
  const std::uint64_t mem_mib = cfg.eal.memory_mib != 0 ? cfg.eal.memory_mib : derived_eal_memory_mib(cfg);
  eo.memory_mb = static_cast<unsigned>(mem_mib);
  eo.file_prefix = cfg.eal.in_memory ? std::string() : cfg.eal.file_prefix;
  eo.huge_dir = cfg.eal.hugepage_dir;
  eo.hugepages = hugepage_policy(cfg.eal.hugepages);
  return eo;
}

EngineConfig engine_config(const conf::Config& cfg) {
  const TimeoutSettings t = plan_timeouts(cfg.protocol);
  EngineConfig ec;
  ec.name = "gateway";
  ec.device = cfg.device.name == "auto" ? std::string() : cfg.device.name;
  ec.passive = true;
  ec.backend = std::string(conf::toString(cfg.dataplane.backend));
  for (const std::uint32_t lcore : cfg.dataplane.cores) {
    dataplane::CoreConfig cc;
    cc.lcore = lcore;
    cc.max_conns = cfg.dataplane.max_connections_per_core;
    cc.rx_per_conn = cfg.dataplane.queue_depth;
    cc.tx_per_conn = tx_per_conn(cfg.dataplane.queue_depth);
    cc.buf_size = cfg.dataplane.inline_threshold_bytes;
    cc.poll_burst = cfg.dataplane.poll_burst;
    cc.idle = idle_policy(cfg.dataplane.idle_policy);
    cc.idle_yield_after = cfg.dataplane.idle_yield_after;
    cc.idle_backoff_max_pauses = cfg.dataplane.idle_backoff_max_pauses;
    cc.idle_event_after_us = cfg.dataplane.idle_event_after_us;
    cc.srq = srq_mode(cfg.dataplane.srq);
    cc.srq_receives = cfg.dataplane.srq_receives;
    cc.check_every = cfg.dataplane.control_check_interval;
    cc.bulk_bytes_per_conn = 0;  // chunks move between the peer's memory and the store arena directly
    cc.keepalive_us = t.keepalive_us;
    cc.dead_peer_us = t.dead_peer_us;
    cc.bulk_timeout_us = t.bulk_timeout_us;
    cc.auth_timeout_us = plan_auth_timeout_us(cfg.security);
    ec.cores.push_back(cc);
  }
  const std::uint64_t max_bulk = std::min<std::uint64_t>(0xffffffffu, 2 * cfg.store.max_value_bytes);
  ec.local.params = protocol::ConnParams{
      static_cast<std::uint16_t>(cfg.dataplane.queue_depth), cfg.dataplane.inline_threshold_bytes,
      static_cast<std::uint16_t>(cfg.dataplane.max_fragments), static_cast<std::uint32_t>(max_bulk)};
  ec.local.min_queue_depth = protocol::kMinCreditQueueDepth;
  ec.local.want_checksum = cfg.protocol.checksum;
  // Announced in the accept (protocol 1.1), so a peer learns them before its first message.
  ec.local.timers = protocol::Timers{cfg.protocol.keepalive_ms, cfg.protocol.dead_peer_timeout_ms};
  ec.local.limits.bulk_deadline_ms = cfg.protocol.bulk_timeout_ms;
  ec.local.limits.max_value_bytes =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(cfg.store.max_value_bytes, 0xffffffffu));
  ec.local.limits.chunk_queue = static_cast<std::uint16_t>(dataplane::kChunkQueue);
  ec.local.limits.max_conns_per_source =
      static_cast<std::uint16_t>(std::min<std::uint32_t>(cfg.security.connections_per_source, 0xffffu));
  ec.signal_interval = static_cast<std::uint16_t>(cfg.dataplane.signal_interval);
  ec.send_inline_bytes = cfg.dataplane.send_inline_bytes;
  ec.handshake_timeout = t.handshake_timeout;
  const AdmissionSettings a = plan_admission(cfg.security);
  ec.max_conns_per_source = a.per_source;
  ec.connect_rate = a.rate;
  ec.connect_burst = a.burst;
  ec.backoff = t.backoff;
  return ec;
}

}  // namespace

std::uint64_t derived_eal_memory_mib(const conf::Config& cfg) {
  const std::uint64_t cores = cfg.dataplane.cores.size();
  // Per core besides its buffers: CQ, handoff rings and descriptor tables, a few MiB at most.
  const std::uint64_t bytes = store_region_bytes(cfg) + cores * (core_region_bytes(cfg) + 4 * conf::kMiB);
  // Headroom for EAL's own heap use (memzones, malloc heap metadata) and fragmentation.
  return (bytes + conf::kMiB - 1) / conf::kMiB + 64;
}

TimeoutSettings plan_timeouts(const conf::ProtocolConfig& p) {
  TimeoutSettings t;
  t.handshake_timeout = std::chrono::milliseconds(p.handshake_timeout_ms);
  t.backoff.min = std::chrono::milliseconds(p.reconnect_min_ms);
  t.backoff.max = std::chrono::milliseconds(p.reconnect_max_ms);
  t.keepalive_us = std::uint64_t{p.keepalive_ms} * 1000;
  t.dead_peer_us = std::uint64_t{p.dead_peer_timeout_ms} * 1000;
  t.bulk_timeout_us = std::uint64_t{p.bulk_timeout_ms} * 1000;
  return t;
}

AdmissionSettings plan_admission(const conf::SecurityConfig& s) {
  return AdmissionSettings{s.connections_per_source, static_cast<double>(s.connect_rate), s.connect_burst};
}

std::uint64_t plan_auth_timeout_us(const conf::SecurityConfig& s) {
  return std::uint64_t{s.auth_timeout_ms} * 1000;
}

std::unique_ptr<dataplane::AuthTable> load_auth_table(const conf::SecurityConfig& s,
                                                      dataplane::AuthRegistry& registry, std::string* error) {
  conf::Secrets secrets;
  // Without principals there is nothing to read (every AUTH is denied); with them the loader has already
  // refused an empty secrets_file.
  if (s.authentication_required() && !s.secrets_file.empty()) {
    std::optional<conf::Secrets> read = conf::loadSecretsFile(s.secrets_file, error);
    if (!read) return nullptr;
    secrets = std::move(*read);
  }
  return registry.build(s, secrets, error);
}

std::optional<dataplane::FaultTable> plan_faults(const conf::FaultsConfig& f, std::string* error) {
  std::vector<std::string> lines;
  lines.reserve(f.rules.size());
  for (const conf::FaultRuleText& r : f.rules) lines.push_back(r.text);
  dataplane::FaultTable table;
  if (!dataplane::parse_fault_rules(lines, table, error)) return std::nullopt;
  return table;
}

std::optional<GatewaySettings> plan_gateway(const conf::Config& cfg, std::string* error) {
  static_assert(conf::kMaxConnectionsPerCore == dataplane::kMaxConnsPerCore,
                "the config's range must be what the engine can hold");
  if (cfg.dataplane.max_connections_per_core > dataplane::kMaxConnsPerCore) {
    *error = "dataplane.max_connections_per_core: " + std::to_string(cfg.dataplane.max_connections_per_core) +
             " is above the engine's limit of " + std::to_string(dataplane::kMaxConnsPerCore) + " per core";
    return std::nullopt;
  }
  GatewaySettings s;
  s.eal = eal_options(cfg);
  s.eal_memory_derived = cfg.eal.memory_mib == 0;
  s.store = store_config(cfg);
  s.store_region_bytes = store_region_bytes(cfg);
  switch (cfg.store.backend) {
    case conf::StoreBackend::kMemory:
      break;
    case conf::StoreBackend::kRados: {
      storage::rados::RadosSettings r;
      const conf::RadosConfig& c = cfg.store.rados;
      r.conf_file = c.conf_file;
      r.client = c.client;
      r.keyring = c.keyring;
      r.pool = c.pool;
      r.ns = c.ns;
      r.op_timeout_ms = c.op_timeout_ms;
      r.notify_timeout_ms = c.notify_timeout_ms;
      r.cache_lease_ms = c.cache_lease_ms;
      r.cores = static_cast<std::uint32_t>(cfg.dataplane.cores.size());
      r.cache_core = r.cores;
      r.max_value = cfg.store.max_value_bytes;
      s.rados = std::move(r);
      break;
    }
  }
  s.engine = engine_config(cfg);
  for (const conf::IpAddress& a : cfg.listen.addresses) {
    s.listeners.push_back({a.str(), cfg.listen.port, static_cast<int>(cfg.listen.backlog)});
  }
  if (cfg.telemetry.enabled) {
    telemetry::HttpOptions ho;
    ho.bind_address = cfg.telemetry.bind_address.str();
    ho.port = cfg.telemetry.port;
    ho.threads = cfg.telemetry.threads;
    ho.request_timeout = std::chrono::milliseconds(cfg.telemetry.request_timeout_ms);
    if (cfg.telemetry.probe_port != 0) ho.probe_port = cfg.telemetry.probe_port;
    s.http = ho;
  }
  s.core_stall = std::chrono::milliseconds(cfg.telemetry.core_stall_ms);
  std::optional<dataplane::FaultTable> faults = plan_faults(cfg.faults, error);
  if (!faults) return std::nullopt;
  s.faults = *faults;
  return s;
}

}  // namespace rdmagate::control

#pragma once
// What the daemon builds, planned from one conf::Config before anything is built: the EAL options, the
// store's sizing, the engine and its cores, the listeners and the telemetry server. Pure (no device, EAL,
// threads or I/O) so that every key's effect is unit-tested on the host (tests/daemon); Gateway::start only
// wires what this returns.
//
// Not planned here, because only the running process knows it: the engine's admission and log callbacks
// (they reach the Gateway), the CPUs of civetweb's threads (EAL's main lcore, known after rte_eal_init), and
// everything the device says (conf::validateAgainstDevice checks the config against it; nothing here is
// derived from it).
//
// The headers below bring in verbs and DPDK declarations for the settings' types; the mapping calls neither,
// so its library and tests link without libibverbs or EAL.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conf/config.hpp"
#include "control/engine.hpp"
#include "dataplane/auth_registry.hpp"
#include "dataplane/eal_runtime.hpp"
#include "dataplane/fault_rules.hpp"
#include "services/storage/memory/store.hpp"
#include "services/storage/rados/rados_store.hpp"
#include "telemetry/http_server.hpp"

namespace rdmagate::control {

struct ListenerSettings {
  std::string address;  // IP literal, as rdma_cm takes it
  std::uint16_t port = 0;
  int backlog = 0;
};

// The liveness and reconnect timing, which a SIGHUP applies to the running engine as well.
struct TimeoutSettings {
  Duration handshake_timeout{};
  BackoffPolicy backoff{};
  std::uint64_t keepalive_us = 0;
  std::uint64_t dead_peer_us = 0;
  std::uint64_t bulk_timeout_us = 0;  // protocol.bulk_timeout_ms
};

// Admission per source address (security.*), which a SIGHUP applies to the running engine as well.
struct AdmissionSettings {
  std::uint32_t per_source = 0;  // connections one source address may hold
  double rate = 0;               // connection requests per second per source address
  std::uint32_t burst = 0;       // token bucket size
};

struct GatewaySettings {
  dataplane::EalOptions eal;
  bool eal_memory_derived = false;  // eal.memory_mib was 0: eal.memory_mb is derived_eal_memory_mib
  store::StoreConfig store;
  std::uint64_t store_region_bytes = 0;  // the store's one HugeBuffer: capacity plus metadata, page-rounded
  // store.backend: rados only (`store` is then its cache); cpus unset: the daemon adds the main lcore's.
  std::optional<storage::rados::RadosSettings> rados;
  EngineConfig engine;                   // admit and log_sink unset
  std::vector<ListenerSettings> listeners;
  std::optional<telemetry::HttpOptions> http;  // unset: telemetry.enabled is false; cpus unset
  std::chrono::milliseconds core_stall{};      // HealthState's liveness threshold
  dataplane::FaultTable faults;                // faults.rules, parsed (count 0: none installed)
};

// nullopt and *error (naming the key) when the config asks for what this build's engine cannot hold.
std::optional<GatewaySettings> plan_gateway(const conf::Config& cfg, std::string* error);

TimeoutSettings plan_timeouts(const conf::ProtocolConfig& p);
AdmissionSettings plan_admission(const conf::SecurityConfig& s);
// faults.rules parsed into the table the engine installs at start and on SIGHUP; nullopt and *error naming
// the entry ("faults.rules[2]: ...") when a rule does not parse, so a start or a reload refuses it.
std::optional<dataplane::FaultTable> plan_faults(const conf::FaultsConfig& f, std::string* error);

// security.auth_timeout_ms in us: each core's CoreConfig::auth_timeout_us at start,
// Engine::set_auth_timeout_st on SIGHUP.
std::uint64_t plan_auth_timeout_us(const conf::SecurityConfig& s);

// The AuthTable for the engine (Engine::set_auth_table_st), at start and on every SIGHUP: with
// security.authentication required, security.secrets_file is read (conf::loadSecretsFile: one open, the
// mode checked on that descriptor) and `registry` builds the table, keeping tenant ids and usage across
// reloads. With authentication off nothing is read: a table with required false. nullptr and *error naming
// the key or the file when it is refused; the start then fails, a reload keeps the running table. Reads a
// file, unlike the rest of this header's plans, because the secrets never pass through conf::Config.
std::unique_ptr<dataplane::AuthTable> load_auth_table(const conf::SecurityConfig& s,
                                                      dataplane::AuthRegistry& registry, std::string* error);

// Logged at warn at every start with authentication off.
inline constexpr std::string_view kAuthOffWarning =
    "authentication is off: any admitted peer may read, overwrite and delete every object";

// EAL memory (-m, MiB) when eal.memory_mib is 0: the store's region plus every core's buffers and rings,
// with headroom for EAL's own allocations.
std::uint64_t derived_eal_memory_mib(const conf::Config& cfg);

}  // namespace rdmagate::control

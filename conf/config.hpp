#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "conf/cpuset.hpp"
#include "conf/net.hpp"
#include "protocol/wire_constants.hpp"

// The effective configuration of one rdmagate process: plain values only, every member holding its
// default until a file or an override says otherwise. conf/README.md is the reference for each key
// (units, ranges, reload behaviour); the defaults below and the table there are kept in step by a test.
namespace rdmagate::conf {

// DPDK's RTE_MAX_LCORE in Debian 12's build: lcore ids at or above it are rejected by rte_eal_init.
inline constexpr std::uint32_t kMaxLcores = 128;

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;

// Ranges of the dataplane keys that end up in the handshake. The protocol's limits come from
// protocol/wire_constants.hpp (header-only, so no link dependency), so a value the file accepts is
// always one the handshake can carry and the credit machine can run; conf only narrows them.
// Queue depth: the credit rules' floor; the top is a memory bound (depth x message size of receive
// buffers per connection), far below what the 16-bit wire field carries.
inline constexpr std::uint32_t kMinQueueDepth = protocol::kMinCreditQueueDepth;
inline constexpr std::uint32_t kMaxQueueDepth = 16384;
// Message size (inline threshold): the bottom holds a chunk request with every fragment, so
// max_fragments never needs a cross-check; the top bounds receive-buffer memory like the depth.
inline constexpr std::uint32_t kMinInlineThresholdBytes = 512;
inline constexpr std::uint32_t kMaxInlineThresholdBytes = 65536;
// Fragments: the compile-time capacity of a decoded chunk.
inline constexpr std::uint32_t kMaxChunkFragments = protocol::kMaxFragments;
// Connections per core: the engine's fixed reply FIFO is sized for this many (dataplane::kMaxConnsPerCore;
// the gateway static_asserts that the two agree), so --check-config refuses more, not only startup.
inline constexpr std::uint32_t kMaxConnectionsPerCore = 512;

static_assert(kMaxQueueDepth <= protocol::kMaxQueueDepthCap, "the queue depth field is 16 bits wide");
static_assert(kMinInlineThresholdBytes >= protocol::kMinMessageSize &&
              kMaxInlineThresholdBytes <= protocol::kMaxMessageSizeCap);
static_assert(protocol::fragments_fitting(kMinInlineThresholdBytes) == kMaxChunkFragments,
              "every max_fragments value must fit the smallest inline threshold");

// The names avoid "on"/"off": YAML 1.1 tools read those as booleans.
enum class HugepageMode : std::uint8_t {
  kAuto,      // use hugepages when EAL finds them; otherwise run with --no-huge after one warning
  kRequired,  // startup fails without hugepages
  kDisabled,  // always --no-huge (development, containers without hugetlbfs)
};

enum class IdlePolicy : std::uint8_t {
  kBusy,   // spin: lowest latency, the core shows 100% busy
  kPause,  // spin with a pause instruction between empty polls: same latency class, less power
  kYield,  // sched_yield() after an empty burst: shares the core, costs microseconds of latency
  kBackoff,  // pause runs doubling up to idle_backoff_max_pauses, reset on work: no syscall, less power
  kEvent,    // backoff, then after idle_event_after_us arm CQ notification and sleep (verbs backend only)
};

// The shared receive queue of each core (one SRQ per core, its buffers shared by the core's connections).
enum class SrqMode : std::uint8_t {
  kAuto,      // where the device has SRQs and the backend can drive one (verbs); else an RQ per connection
  kRequired,  // an SRQ or an error at start
  kDisabled,  // a receive queue and buffers per connection
};

// The device backend the cores run (dataplane/backend/).
enum class DataplaneBackend : std::uint8_t {
  kAuto,    // the most direct backend that supports the device: mlx5dv on an mlx5 NIC, verbs otherwise
  kVerbs,   // generic libibverbs: every device
  kMlx5dv,  // mlx5 direct verbs (the core writes WQEs, parses CQEs): mlx5 NICs only, else an error at start
};

enum class StoreBackend : std::uint8_t {
  kMemory,  // the in-hugepage store shared by all data-plane cores (services/storage/memory/)
  kRados,   // Ceph RADOS through librados (services/storage/rados/), behind a hugepage cache of capacity_mib
};

// security.authentication. "off" is a boolean to YAML 1.1 tools; this loader reads it as the word it is, and
// a template tool that rewrites the file should be told to keep it a string (quote it: "off").
enum class Authentication : std::uint8_t {
  kRequired,  // every connection proves a principal's secret before any object request (docs/protocol.md §11)
  kOff,       // any admitted peer may do anything; the daemon warns at every start
};

enum class LogLevel : std::uint8_t { kTrace, kDebug, kInfo, kWarn, kError };
enum class LogFormat : std::uint8_t { kLogfmt, kJson };

std::string_view toString(HugepageMode v) noexcept;
std::string_view toString(IdlePolicy v) noexcept;
std::string_view toString(SrqMode v) noexcept;
std::string_view toString(DataplaneBackend v) noexcept;
std::string_view toString(StoreBackend v) noexcept;
std::string_view toString(Authentication v) noexcept;
std::string_view toString(LogLevel v) noexcept;
std::string_view toString(LogFormat v) noexcept;

struct EalConfig {
  // Every lcore EAL starts (-l). Empty in a file means "derive it": main_lcore plus dataplane.cores. The
  // loader always resolves it, so a loaded Config never has it empty.
  CpuSet lcores;
  std::uint32_t main_lcore = 0;  // runs the control plane (rdma_cm, timers); never polls a CQ
  HugepageMode hugepages = HugepageMode::kAuto;
  std::string hugepage_dir;      // --huge-dir; empty: EAL picks the mounted hugetlbfs
  std::uint32_t memory_mib = 0;  // -m; 0: the engine sizes it from the store and the per-core pools
  std::string file_prefix = "rdmagate";
  // --in-memory: no files under /var/run/dpdk, so several gateways can share a host. We never start
  // DPDK secondary processes, which are the only thing it takes away.
  bool in_memory = true;

  bool operator==(const EalConfig&) const = default;
};

struct DeviceConfig {
  std::string name = "auto";  // an ibv device name (mlx5_0, rxe0) or "auto": the only device present
  std::uint32_t port = 1;     // ibv port number, 1-based

  bool operator==(const DeviceConfig&) const = default;
};

struct ListenConfig {
  std::vector<IpAddress> addresses{IpAddress::v4Any()};
  std::uint16_t port = 7471;
  std::uint32_t backlog = 128;  // rdma_listen() backlog: connection requests not yet handled

  bool operator==(const ListenConfig&) const = default;
};

struct DataplaneConfig {
  CpuSet cores{1};
  std::uint32_t queue_depth = 128;              // credits per connection, each one receive buffer
  std::uint32_t inline_threshold_bytes = 4096;  // largest message sent in one SEND (= receive buffer size)
  std::uint32_t send_inline_bytes = 236;        // payloads up to this go IBV_SEND_INLINE (perftest's default)
  std::uint32_t max_fragments = 16;             // fragments per read or write chunk
  std::uint32_t signal_interval = 16;           // one signaled send per N
  std::uint32_t poll_burst = 32;                // completions per CQ poll
  std::uint32_t control_check_interval = 16;    // loop iterations between control-ring checks
  std::uint32_t max_connections_per_core = 64;  // sizes the per-core pools, allocated once at startup
  IdlePolicy idle_policy = IdlePolicy::kBusy;
  std::uint32_t idle_yield_after = 256;  // idle_policy yield: empty polls in a row before sched_yield
  std::uint32_t idle_backoff_max_pauses = 64;  // idle_policy backoff/event: longest pause run
  std::uint32_t idle_event_after_us = 1000;    // idle_policy event: idle time before the core sleeps
  SrqMode srq = SrqMode::kAuto;
  std::uint32_t srq_receives = 0;  // receive buffers in each core's shared pool; 0: connections x queue_depth
  DataplaneBackend backend = DataplaneBackend::kAuto;

  bool operator==(const DataplaneConfig&) const = default;
};

struct ProtocolConfig {
  std::uint32_t keepalive_ms = 1000;           // idle time before a keepalive NOOP goes out
  std::uint32_t dead_peer_timeout_ms = 10000;  // silence after which the peer is declared dead
  std::uint32_t reconnect_min_ms = 100;        // first reconnect delay; doubles per failure
  std::uint32_t reconnect_max_ms = 5000;       // cap of the reconnect delay
  std::uint32_t handshake_timeout_ms = 10000;  // address/route resolution plus connect, per attempt
  // SIGTERM drain: bounds each of its two phases (quiesce: in-flight requests finish; close: connections
  // disconnect). 0 skips the wait: in-flight requests fail with their connection.
  std::uint32_t drain_timeout_ms = 10000;
  // An RDMA READ/WRITE chain (one bulk transfer) still on the device after this long fails its connection:
  // the reservation or pin it holds is the one resource a silent peer could otherwise keep forever.
  std::uint32_t bulk_timeout_ms = 5000;
  bool checksum = false;                       // message payload checksums

  bool operator==(const ProtocolConfig&) const = default;
};

// store.rados: where and how the rados backend keeps objects. Parsed and checked whatever store.backend
// says (so switching the backend never uncovers a latent error), used only when it is kRados. Whether
// conf_file and keyring exist is checked by the daemon at start, not here (--check-config may run
// elsewhere), like eal.hugepage_dir.
struct RadosConfig {
  std::string conf_file = "/etc/ceph/ceph.conf";  // the ceph.conf librados reads: mon addresses, auth
  std::string client = "client.rdmagate";         // cephx entity: "client." and a non-empty id
  std::string keyring;                            // keyring file; empty: whatever ceph.conf says
  std::string pool = "rdmagate";
  std::string ns;  // key "namespace": the RADOS namespace every object goes into; empty: the default one
  // rados_osd_op_timeout, rados_mon_op_timeout and client_mount_timeout: a request whose RADOS op does
  // not end within it is answered unavailable.
  std::uint32_t op_timeout_ms = 5000;
  // How long a PUT or DELETE waits for the other gateways to acknowledge its cache invalidation
  // (watch/notify). librados counts it in whole seconds (it divides by 1000, and the OSD takes 0 for its
  // own 30 s default), so it is at least 1000 and used rounded up: notify_timeout_used_ms.
  std::uint32_t notify_timeout_ms = 2000;
  // How long this gateway may serve its cache after its watch was last confirmed; above notify_timeout_ms.
  std::uint32_t cache_lease_ms = 5000;

  std::uint32_t notify_timeout_used_ms() const noexcept { return (notify_timeout_ms + 999) / 1000 * 1000; }

  bool operator==(const RadosConfig&) const = default;
};

struct StoreConfig {
  StoreBackend backend = StoreBackend::kMemory;
  // kMemory: the store itself. kRados: the hugepage cache in front of RADOS.
  std::uint64_t capacity_mib = 256;
  std::uint64_t max_value_bytes = 4 * kMiB;
  RadosConfig rados;

  bool operator==(const StoreConfig&) const = default;
};

struct TelemetryConfig {
  bool enabled = true;
  IpAddress bind_address = IpAddress::v4(127, 0, 0, 1);
  std::uint16_t port = 9464;  // 0: any free port (tests)
  // /healthz fails when a data-plane core has not completed a loop iteration for this long.
  std::uint32_t core_stall_ms = 1000;
  // An idle or slow HTTP client holds a serving thread at most this long (civetweb's default was 30 s: two
  // idle connections starved the liveness probe).
  std::uint32_t request_timeout_ms = 1000;
  std::uint32_t threads = 4;     // serving `port`
  std::uint16_t probe_port = 0;  // a second listener for /healthz and /readyz only; 0: none

  bool operator==(const TelemetryConfig&) const = default;
};

// Private (RFC 1918, RFC 4193), link-local and loopback ranges, and RFC 2544's benchmarking range
// 198.18.0.0/15 (the rxe guest's fabric; not routed on the internet): enough for a lab fabric or the rxe
// guest, never the open internet by accident.
std::vector<Cidr> defaultAllowedClients();

// A principal's rights (security.principals[].permissions) as a mask; dataplane::Permission has the same
// values (static_asserted where the two meet, dataplane/auth_registry.cpp).
inline constexpr std::uint8_t kPermissionRead = 1;
inline constexpr std::uint8_t kPermissionWrite = 2;
inline constexpr std::uint8_t kPermissionDelete = 4;

// Entries of security.tenants and security.principals; their names follow validAuthName (conf/secrets.hpp).
inline constexpr std::size_t kMaxTenants = 4096;
inline constexpr std::size_t kMaxPrincipals = 4096;

// One key namespace with its quotas (security.tenants[]).
struct TenantConfig {
  std::string name;
  std::uint64_t max_bytes = 0;    // value bytes stored; 0: unlimited
  std::uint64_t max_objects = 0;  // 0: unlimited

  bool operator==(const TenantConfig&) const = default;
};

// Who may connect (security.principals[]). The secret is not here: it lives in security.secrets_file, which
// never passes through Config, so no dump, diff or log line of the config can carry it.
struct PrincipalConfig {
  std::string name;
  std::string tenant;                 // a security.tenants[] name
  std::uint8_t permissions = 0;       // kPermission* mask
  std::uint32_t max_connections = 0;  // open connections at once; 0: unlimited

  bool operator==(const PrincipalConfig&) const = default;
};

struct SecurityConfig {
  std::vector<Cidr> allowed_clients = defaultAllowedClients();  // empty: every client is rejected
  // Admission per source address, checked before anything is allocated for a connection request: together
  // with one bulk transfer per connection they bound what one source can make the gateway hold.
  std::uint32_t connections_per_source = 64;  // connections in any state, the handshake included
  std::uint32_t connect_rate = 100;           // connection requests per second (token bucket refill)
  std::uint32_t connect_burst = 200;          // token bucket size
  // Authentication, tenants and principals (docs/protocol.md §11, conf/README.md "Authentication").
  Authentication authentication = Authentication::kRequired;  // off only when a config says so
  std::uint32_t auth_timeout_ms = 5000;  // ADOPT to AUTH; a connection that has not authenticated is closed
  std::string secrets_file;              // YAML of principal secrets; mode 0600 or narrower
  std::vector<TenantConfig> tenants;
  std::vector<PrincipalConfig> principals;

  bool authentication_required() const noexcept { return authentication == Authentication::kRequired; }
  bool operator==(const SecurityConfig&) const = default;
};

struct LoggingConfig {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kLogfmt;

  bool operator==(const LoggingConfig&) const = default;
};

// One fault-injection rule as written. conf checks only its shape (printable, bounded); its meaning is
// dataplane/fault_rules.hpp's, which the daemon applies at start and on SIGHUP (docs/faults.md).
struct FaultRuleText {
  std::string text;

  const std::string& str() const noexcept { return text; }
  bool operator==(const FaultRuleText&) const = default;
};

struct FaultsConfig {
  std::vector<FaultRuleText> rules;  // empty in production

  bool operator==(const FaultsConfig&) const = default;
};

struct Config {
  EalConfig eal;
  DeviceConfig device;
  ListenConfig listen;
  DataplaneConfig dataplane;
  ProtocolConfig protocol;
  StoreConfig store;
  TelemetryConfig telemetry;
  SecurityConfig security;
  LoggingConfig logging;
  FaultsConfig faults;

  bool operator==(const Config&) const = default;
};

}  // namespace rdmagate::conf

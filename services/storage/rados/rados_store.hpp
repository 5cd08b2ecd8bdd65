#pragma once
// store.backend: rados. Objects live in a Ceph RADOS pool; the embedded hugepage store (store::Store, with
// eviction on) is a write-through cache in front of it and the pool every lease comes from. docs/store.md
// "The RADOS backend" has the design, the consistency model across gateways and the on-RADOS format.
//
// Threads: each data-plane core calls its RadosCoreStorage (core(i)); cache hits end at once, the rest is
// handed by value through a per-core SPSC ring to one worker thread, which alone calls librados.
// librados' callback threads only push events onto rings the worker drains; the worker pushes each op's
// storage::Completion onto the owning core's CompletionQueue. No core ever blocks on RADOS or takes a lock
// a librados thread holds.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/object_op.hpp"
#include "services/storage/storage.hpp"
#include "telemetry/stats.hpp"

namespace rdmagate::store {
class Store;
}  // namespace rdmagate::store

namespace rdmagate::storage::rados {

struct RadosSettings {
  std::string conf_file = "/etc/ceph/ceph.conf";
  std::string client = "client.rdmagate";  // the cephx entity (rados_create2's name)
  std::string keyring;                     // empty: what conf_file says
  std::string pool = "rdmagate";
  std::string ns;  // RADOS namespace of every object, internal ones included
  std::uint32_t op_timeout_ms = 5000;
  std::uint32_t notify_timeout_ms = 2000;
  std::uint32_t cache_lease_ms = 5000;
  std::uint32_t cores = 1;            // data-plane cores: core(0..cores-1)
  std::uint32_t max_requests = 1024;  // ops one core keeps pending at most (its CompletionQueue's capacity)
  std::uint32_t cache_core = 0;       // the cache's stats row the worker uses (not a data-plane core's)
  std::uint64_t max_value = std::uint64_t{4} << 20;
  // CPUs of the worker and of the threads librados starts from it (they inherit its affinity); empty: the
  // creating thread's.
  std::vector<int> cpus;
};

// Why the backend is not ready (/readyz) or kReady.
enum class Health : std::uint8_t {
  kConnecting = 0,   // rados_connect has not succeeded yet (or is being retried)
  kReady = 1,        // connected, cache watch registered and announced, the last probe write committed
  kProbeFailed = 2,  // the periodic probe write failed or timed out: the cluster does not take writes
  kWatchLost = 3,    // the cache-invalidation watch broke; the cache is off until it is re-registered
  kAnnouncing = 4,   // the watch is registered, but not every watcher acked our hello yet: the cache is off
};
const char* health_name(Health h) noexcept;

// Counters as the worker keeps them (single writer, relaxed) and stats() reads them.
struct RadosStats {
  std::uint64_t ops[protocol::kObjectOpCount][kStatusCount] = {};  // by op, then outcome, as store ops
  std::uint64_t cache_hits = 0;                                    // GETs answered from the cache
  std::uint64_t cache_misses = 0;                                  // GETs sent to RADOS
  std::uint64_t cache_fills = 0;             // misses whose value was published into the cache
  std::uint64_t cache_fill_skipped = 0;      // misses not cached: the key was invalidated meanwhile
  std::uint64_t invalidations_received = 0;  // notifies from any gateway, this one's included
  std::uint64_t notifies_sent = 0;
  std::uint64_t notify_timeouts = 0;  // a gateway did not ack an invalidation in time
  std::uint64_t notify_resends = 0;   // invalidations sent again after the commit (settle_mutation)
  std::uint64_t cache_resets = 0;     // whole-cache drops (watch lost, notify ring overflow)
  std::uint64_t crc_mismatches = 0;
  std::uint64_t rados_errors = 0;    // librados ops that ended with an error other than ENOENT
  std::uint64_t worker_wakeups = 0;  // futex wakes the cores issued (the worker was asleep)
  std::uint64_t rados_ops_inflight = 0;
  // librados op latency (submit to callback) by telemetry::kRadosOpKindNames: read, write, remove, notify.
  std::array<telemetry::LatencyHistogram, telemetry::kRadosOpKindNames.size()> latency{};
  Health health = Health::kConnecting;
};

class Worker;

class RadosStore {
 public:
  // Starts the worker, which connects in the background: until it is connected, ops answer kUnavailable
  // at once. Null and *error when the settings are unusable (e.g. conf_file unreadable) or a thread or
  // ring cannot be made. `cache` must outlive the store and have eviction on and max_cores > cache_core.
  static std::unique_ptr<RadosStore> create(const RadosSettings& settings, store::Store& cache,
                                            std::string* error);
  ~RadosStore();  // stops the worker after every submitted op ended (with kUnavailable if it must)
  RadosStore(const RadosStore&) = delete;
  RadosStore& operator=(const RadosStore&) = delete;

  CoreStorage& core(std::uint32_t index) noexcept;
  Health health() const noexcept;
  RadosStats stats() const noexcept;
  std::string last_error() const;  // why the last connection attempt failed; empty once connected

 private:
  explicit RadosStore(std::unique_ptr<Worker> w) noexcept;
  std::unique_ptr<Worker> worker_;
};

// The on-RADOS object name of a key: "o/" then the key with every byte outside [A-Za-z0-9_.-] as %XX
// (RADOS names are C strings; keys are any bytes). Internal objects start "rdmagate." and so never collide.
// That is the unauthenticated namespace's (storage::Namespace{}); a tenant's key is "t/", the tenant's
// name (no '/' in it), "/", then the escaped key: "t/app/x" for tenant app's key x. No name of one form is
// a name of the other, and a name says its tenant and key unambiguously.
std::string object_name(std::string_view key);
std::string object_name(std::string_view tenant, std::string_view key);

// CRC32C (Castagnoli), as iSCSI and ext4 use it: init ~0, final xor ~0. "123456789" -> 0xe3069283. Stored
// as 8 lowercase hex digits in the object's xattr "rdmagate.crc32c".
std::uint32_t crc32c(const std::byte* data, std::size_t len) noexcept;

}  // namespace rdmagate::storage::rados

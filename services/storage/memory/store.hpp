// The embedded object store: a concurrent key/value store over caller-provided memory, shared by all
// data-plane cores. No OS locks, no syscalls and no allocation after create(); builds without DPDK. The
// object service reaches it through storage::CoreStorage (core(i)), where every op ends at once.
//
// Values are copy-on-write: a PUT fills a fresh block and publishes it by swapping the index slot, so a
// published value is immutable until it is freed. A GET pins the block it found (a reference count); the
// block is freed when the last pin drops, so the engine may hold a pin across an asynchronous RDMA WRITE.
// With StoreConfig::evict the store is a cache: a PUT that finds it full evicts values chosen by CLOCK.
// See docs/store.md for the concurrency argument, capacity accounting and eviction.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "protocol/object_op.hpp"
#include "services/storage/memory/block_allocator.hpp"
#include "services/storage/storage.hpp"

namespace rdmagate::store {

// The storage interface's statuses; the store never returns kPending.
using storage::kStatusCount;
using storage::Status;
using storage::status_name;

struct StoreConfig {
  uint64_t max_value = uint64_t{4} << 20;  // bytes; at most 2 GiB
  uint32_t max_objects = 1u << 16;         // published objects (sizes the index and descriptor table)
  uint32_t max_inflight = 4096;            // reservations plus overwritten-but-still-pinned values
  uint64_t capacity_bytes = 0;             // values (class size) + metadata; 0: whatever the region holds
  uint32_t max_cores = 64;                 // core indices passed to operations are below this
  // A cache: a PUT short of capacity, a descriptor, a block or an index slot evicts published values
  // (CLOCK) instead of answering kNoSpace. Off: a full store answers kNoSpace and nothing is evicted.
  bool evict = false;
};

// A GET's result: the value stays valid and unchanged until unpin(), whatever other cores do meanwhile.
struct PinnedValue {
  const std::byte* data = nullptr;
  uint32_t size = 0;
  uint32_t token = kNoToken;  // descriptor index; kNoToken when nothing is pinned
  static constexpr uint32_t kNoToken = 0xffffffffu;
};

// A PUT in progress: `data` has room for `size` bytes, private to the reserver until commit() or abort().
struct Reservation {
  std::byte* data = nullptr;
  uint32_t size = 0;
  uint32_t token = PinnedValue::kNoToken;
};

struct StoreStats {
  uint64_t objects = 0;      // published keys
  uint64_t value_bytes = 0;  // sum of published value lengths
  uint64_t used_bytes = 0;   // charged capacity: class sizes + metadata, including pinned/reserved
  uint64_t capacity_bytes = 0;
  // By protocol::ObjectOp, then Status. A PUT counts once per put() or reserve() + commit() (a failed
  // reserve counts its status).
  uint64_t ops[protocol::kObjectOpCount][kStatusCount] = {};
  uint64_t evictions = 0;  // values unpublished to make room (StoreConfig::evict)
  // PUTs refused kNoSpace because every slot of the key's probe window was taken (also in ops): not a
  // shortage of capacity. With the keyed hash only a very full index gets there.
  uint64_t window_full = 0;
  uint64_t drops = 0;  // values unpublished by drop() or drop_all(); not in ops
};

class Store;

// One core's handle on the store: the storage interface over the calls below with that core's stats row.
// Namespaces are the store's tenant ids (storage::Namespace::id); it reports what a PUT or DELETE replaced.
class MemoryCoreStorage final : public storage::CoreStorage {
 public:
  using storage::CoreStorage::commit;
  using storage::CoreStorage::get;
  using storage::CoreStorage::put;
  using storage::CoreStorage::remove;
  using storage::CoreStorage::reserve;
  storage::Status get(const storage::Namespace& ns, std::string_view key, std::uint64_t tag,
                      storage::Lease* out) noexcept override;
  storage::Status put(const storage::Namespace& ns, std::string_view key, std::span<const std::byte> value,
                      std::uint64_t tag, storage::Prior* prior) noexcept override;
  storage::Status remove(const storage::Namespace& ns, std::string_view key, std::uint64_t tag,
                         storage::Prior* prior) noexcept override;
  storage::Status reserve(const storage::Namespace& ns, std::string_view key, std::uint64_t size,
                          std::uint64_t tag, storage::Lease* out) noexcept override;
  storage::Status commit(const storage::Namespace& ns, storage::Lease* lease, std::uint64_t tag,
                         storage::Prior* prior) noexcept override;
  void abort(storage::Lease* lease) noexcept override;
  void release(storage::Lease* lease) noexcept override;
  bool reports_prior() const noexcept override { return true; }
  storage::Prior peek(const storage::Namespace& ns, std::string_view key) noexcept override;
  storage::CompletionQueue* completions() noexcept override { return nullptr; }  // every op ends at once

 private:
  friend class Store;
  Store* store_ = nullptr;
  uint32_t core_ = 0;
};

class Store {
 public:
  // Bytes of fixed metadata (index, descriptor table, allocator map) create() carves from the region
  // before the value arena, for `config`. A region must be larger than this to hold any value.
  static uint64_t metadata_bytes(const StoreConfig& config, uint64_t region_bytes);

  // `region` must stay valid for the store's lifetime; it is 64-byte aligned by create() if needed.
  // Returns null and fills *error when the config is invalid or the region too small.
  static std::unique_ptr<Store> create(const StoreConfig& config, std::span<std::byte> region,
                                       std::string* error);

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // All operations are safe from any thread concurrently; `core` selects the stats row (one thread per
  // core index at a time) and must be < max_cores. Every key lives in a tenant namespace (`tenant`, a
  // storage::Namespace id): equal keys of two tenants are different objects. The calls without a tenant
  // use tenant 0, the namespace of unauthenticated connections. A PUT or DELETE ending kOk fills *prior
  // (when not null) with what it replaced.
  Status put(uint32_t core, std::string_view key, std::span<const std::byte> value) {
    return put(core, 0, key, value, nullptr);
  }
  Status put(uint32_t core, uint16_t tenant, std::string_view key, std::span<const std::byte> value,
             storage::Prior* prior);
  Status get(uint32_t core, std::string_view key, PinnedValue* out) { return get(core, 0, key, out); }
  Status get(uint32_t core, uint16_t tenant, std::string_view key, PinnedValue* out);  // pins on kOk
  Status remove(uint32_t core, std::string_view key) { return remove(core, 0, key, nullptr); }
  Status remove(uint32_t core, uint16_t tenant, std::string_view key, storage::Prior* prior);
  // What the key holds now, without counting an op (quota accounting's look before a PUT).
  storage::Prior peek(uint16_t tenant, std::string_view key);
  void unpin(PinnedValue* v);  // no-op on an empty PinnedValue; empties it

  // Two-phase PUT for a value that arrives by RDMA READ: reserve, let the NIC fill `data`, then commit
  // (publish; last committer wins) or abort (frees). commit() returns kNoSpace when the index is full,
  // and then has already released the reservation.
  Status reserve(uint32_t core, std::string_view key, uint64_t value_size, Reservation* out) {
    return reserve(core, 0, key, value_size, out);
  }
  Status reserve(uint32_t core, uint16_t tenant, std::string_view key, uint64_t value_size, Reservation* out);
  Status commit(uint32_t core, Reservation* r);
  void abort(Reservation* r);
  // commit() that also pins what it published, as get() would, on kOk (*pin is empty otherwise): the pin
  // is taken before the value becomes visible, so no evictor or remover can free it in between.
  Status commit(uint32_t core, Reservation* r, PinnedValue* pin);
  // And fills *prior (when not null) on kOk with what it replaced.
  Status commit(uint32_t core, Reservation* r, PinnedValue* pin, storage::Prior* prior);

  // Cache invalidation: unpublish like remove() (tenant 0, the RADOS cache's only namespace), but not
  // counted as a client DELETE in ops (in drops). kOk, or kNotFound (also for a key no value can have).
  // Pinned readers keep their copy.
  Status drop(std::string_view key);
  // Unpublishes every value published when the call starts and not replaced meanwhile; returns how many.
  // Safe concurrently with every other operation; values committed during the call may stay.
  uint64_t drop_all();

  // The handle for core index `index` (< max_cores); one thread per index at a time, as for the calls above.
  storage::CoreStorage& core(uint32_t index) { return cores_[index]; }

  StoreStats stats() const;
  uint64_t max_value() const { return config_.max_value; }
  uint64_t capacity_bytes() const { return capacity_; }
  bool evicts() const { return config_.evict; }
  // The key a live reservation was made for (valid until it is committed or aborted): what a backend that
  // commits elsewhere first (RADOS) needs when the service hands it only the lease.
  std::string_view reserved_key(const Reservation& r) const;
  uint64_t charge_for(uint64_t value_size) const;  // capacity one object of that size costs
  // The value arena: the engine registers [arena_base, arena_base + arena_bytes) once for RDMA.
  std::byte* arena_base() const { return allocator_.address(0); }
  uint64_t arena_bytes() const { return allocator_.arena_bytes(); }

 private:
  friend class StoreTestPeer;
  struct Descriptor;
  struct Bucket;
  struct CoreStats;
  using HashSeed = std::array<unsigned char, 16>;  // a SipHash-2-4 key

  uint64_t hash_key(uint16_t tenant, std::string_view key) const;  // slot hash under this process's seed

  Store() = default;
  Status put_status(uint32_t core, Status s) { return count(core, protocol::ObjectOp::kPut, s); }
  Status count(uint32_t core, protocol::ObjectOp op, Status s);
  void add_published(uint32_t core, int64_t objects, int64_t bytes);
  bool try_pin(uint32_t id);
  bool try_reserve(uint16_t tenant, std::string_view key, uint64_t hash, uint64_t value_size, uint64_t charge,
                   Reservation* out);
  bool evict_next(uint32_t core, uint64_t* examined);
  void evict_from_window(uint32_t core, uint64_t home);
  bool evict(uint32_t core, uint32_t id);
  bool unpublish(uint16_t tenant, std::string_view key, uint64_t hash, int64_t* old_len);
  void release(uint32_t id);  // drops one reference; frees block and descriptor at zero
  uint32_t pop_descriptor();
  void push_descriptor(uint32_t id);
  void lock_bucket(Bucket* b);
  void unlock_bucket(Bucket* b);
  bool key_equals(uint32_t id, uint16_t tenant, std::string_view key) const;
  struct Found {  // a slot holding the key, the value seen in it, and a pin on that descriptor
    std::atomic<uint64_t>* slot = nullptr;
    uint64_t value = 0;
    uint32_t id = 0;
  };
  Found lookup(uint16_t tenant, std::string_view key, uint64_t hash);
  // For StoreTestPeer: only meaningful while the store is quiescent.
  uint32_t count_free_descriptors() const;
  uint32_t refs_of(uint32_t token) const;

  StoreConfig config_{};
  uint64_t capacity_{0};
  Descriptor* descriptors_{nullptr};
  uint32_t descriptor_count_{0};
  Bucket* buckets_{nullptr};
  uint64_t bucket_mask_{0};
  CoreStats* core_stats_{nullptr};
  std::unique_ptr<std::byte[]> core_stats_storage_;
  std::unique_ptr<MemoryCoreStorage[]> cores_;
  BlockAllocator allocator_;
  uint32_t max_order_{0};
  HashSeed hash_seed_{};
  alignas(64) std::atomic<uint64_t> free_head_{0};  // tag << 32 | descriptor index (ABA-safe Treiber stack)
  alignas(64) std::atomic<uint64_t> used_{0};
  alignas(64) std::atomic<uint64_t> hand_{0};  // CLOCK hand: position in the descriptor table, never wraps
  // drop() and drop_all() have no core, hence no stats row: their counts live here (not the hot path).
  alignas(64) std::atomic<uint64_t> drops_{0};
  std::atomic<int64_t> dropped_bytes_{0};
};

}  // namespace rdmagate::store

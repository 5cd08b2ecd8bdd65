#include "services/storage/memory/store.hpp"

#include <sodium.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace rdmagate::store {

using protocol::ObjectOp;

namespace {

constexpr uint32_t kSlotsPerBucket = 7;  // + the lock word: one 64-byte line per bucket
constexpr uint32_t kProbeBuckets = 4;    // a key lives in its home bucket or one of the next 3
constexpr uint8_t kNoOrder = 0xff;       // zero-length value: no block
constexpr uint32_t kNil = 0xffffffffu;
constexpr uint64_t kMaxValueLimit = uint64_t{1} << 31;
constexpr uint32_t kClockSweeps = 2;  // a PUT's hand budget: the first sweep clears bits, the second evicts
constexpr uint32_t kWindowEvictions = 4;  // a commit's tries at freeing a slot of a full probe window
constexpr uint32_t kRetryEvery = 64;  // positions the hand passes without a victim before a PUT looks again

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// A slot holds tag (high hash bits, to skip most non-matching keys without touching the descriptor) and
// descriptor index + 1 (so 0 means empty).
inline uint64_t make_slot(uint64_t hash, uint32_t id) {
  return (hash & 0xffffffff00000000ull) | (uint64_t{id} + 1);
}
inline uint32_t slot_id(uint64_t v) {
  return static_cast<uint32_t>(v) - 1;
}
inline bool slot_tag_matches(uint64_t v, uint64_t hash) {
  return (v >> 32) == (hash >> 32);
}

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) & ~(a - 1);
}

uint64_t bucket_count_for(uint32_t max_objects) {
  // At most a quarter of the slots in use with max_objects published, so a store filled to max_objects
  // does not meet a full probe window (docs/store.md has the figures: half full, most such fills did).
  const uint64_t want = (uint64_t{max_objects} * 4 + kSlotsPerBucket - 1) / kSlotsPerBucket;
  uint64_t n = kProbeBuckets;
  while (n < want) n <<= 1;
  return n;
}

}  // namespace

// Type-stable: a descriptor is only ever a descriptor, so a reader may touch `refs` of one that was freed
// and reused under it (increment-if-nonzero, then validate against the slot). The key and value fields are
// written only while the descriptor is private to a reserver and read only under a pin. `referenced` is
// CLOCK's bit: set by a GET hit, cleared by the passing hand; an atomic, so either may touch it at any time.
// It shares the line of `refs`, which a GET has just written anyway.
struct alignas(64) Store::Descriptor {
  std::atomic<uint32_t> refs{0};
  std::atomic<uint32_t> next_free{kNil};
  uint32_t value_len = 0;
  uint32_t unit = 0;
  uint64_t hash = 0;
  uint64_t charge = 0;
  uint8_t order = kNoOrder;
  uint8_t key_len = 0;
  std::atomic<uint8_t> referenced{0};
  uint16_t tenant = 0;  // the key's namespace: part of its identity (key_equals)
  char key[protocol::kMaxKeyLength] = {};
};

struct alignas(64) Store::Bucket {
  std::atomic<uint32_t> lock{0};  // writers whose key's home is this bucket; readers never take it
  uint32_t pad = 0;
  std::atomic<uint64_t> slots[kSlotsPerBucket];
};

struct alignas(64) Store::CoreStats {
  // Written by one core only (plain load + store, no RMW); atomics so a scrape may read them.
  std::atomic<uint64_t> ops[protocol::kObjectOpCount][kStatusCount];
  std::atomic<int64_t> objects;
  std::atomic<int64_t> value_bytes;
  std::atomic<uint64_t> evictions;
  std::atomic<uint64_t> window_full;
};

uint64_t Store::hash_key(uint16_t tenant, std::string_view key) const {
  static_assert(sizeof(HashSeed) == crypto_shorthash_KEYBYTES, "the seed is a SipHash-2-4 key");
  static_assert(crypto_shorthash_BYTES == sizeof(uint64_t), "the slot hash is 64 bits");
  // SipHash-2-4 keyed with this process's seed: a peer that cannot learn the seed cannot choose keys that
  // share a probe window, so it cannot fill the window of a key it wants to refuse (docs/store.md).
  // A tenant's keys hash with its id in front, so one tenant's keys do not share the windows of another's
  // equal keys (the id's two bytes are not what makes them different objects: key_equals compares it).
  unsigned char out[crypto_shorthash_BYTES];
  if (tenant == 0) {
    crypto_shorthash(out, reinterpret_cast<const unsigned char*>(key.data()), key.size(), hash_seed_.data());
  } else {
    unsigned char buf[2 + protocol::kMaxKeyLength];
    buf[0] = static_cast<unsigned char>(tenant & 0xff);
    buf[1] = static_cast<unsigned char>(tenant >> 8);
    std::memcpy(buf + 2, key.data(), key.size());
    crypto_shorthash(out, buf, 2 + key.size(), hash_seed_.data());
  }
  uint64_t h;
  std::memcpy(&h, out, sizeof(h));
  return h;
}

uint64_t Store::metadata_bytes(const StoreConfig& config, uint64_t region_bytes) {
  const uint64_t descriptors = (uint64_t{config.max_objects} + config.max_inflight) * sizeof(Descriptor);
  const uint64_t buckets = bucket_count_for(config.max_objects) * sizeof(Bucket);
  const uint64_t fixed = 64 + descriptors + buckets;
  if (region_bytes <= fixed) return fixed;
  // The allocator map costs one byte per 64-byte unit of whatever arena remains.
  return fixed + (region_bytes - fixed) / (BlockAllocator::kUnitBytes + 1) + 64;
}

std::unique_ptr<Store> Store::create(const StoreConfig& config, std::span<std::byte> region,
                                     std::string* error) {
  static_assert(sizeof(Bucket) == 64, "a bucket is one cache line");
  static_assert(sizeof(Descriptor) == 320, "docs/store.md charges 320 B of metadata per object");
  auto fail = [&](const char* what) -> std::unique_ptr<Store> {
    if (error) *error = what;
    return nullptr;
  };
  if (config.max_objects == 0) return fail("store: max_objects must be at least 1");
  if (config.max_cores == 0) return fail("store: max_cores must be at least 1");
  if (config.max_value > kMaxValueLimit) return fail("store: max_value above 2 GiB");
  const uint64_t descriptor_count = uint64_t{config.max_objects} + config.max_inflight;
  if (descriptor_count >= kNil) return fail("store: max_objects + max_inflight too large");

  const uint64_t nbuckets = bucket_count_for(config.max_objects);
  auto base = reinterpret_cast<uintptr_t>(region.data());
  const uintptr_t end = base + region.size();
  uintptr_t p = align_up(base, 64);
  const uint64_t fixed = descriptor_count * sizeof(Descriptor) + nbuckets * sizeof(Bucket);
  if (p > end || end - p < fixed + 2 * BlockAllocator::kUnitBytes)
    return fail("store: region too small for the index");

  std::unique_ptr<Store> s(new (std::nothrow) Store());
  if (!s) return fail("store: out of memory");
  s->config_ = config;
  s->descriptor_count_ = static_cast<uint32_t>(descriptor_count);
  s->descriptors_ = reinterpret_cast<Descriptor*>(p);
  for (uint64_t i = 0; i < descriptor_count; ++i) new (&s->descriptors_[i]) Descriptor();
  p += descriptor_count * sizeof(Descriptor);
  s->buckets_ = reinterpret_cast<Bucket*>(p);
  for (uint64_t i = 0; i < nbuckets; ++i) {
    Bucket* b = new (&s->buckets_[i]) Bucket();
    for (auto& slot : b->slots) slot.store(0, std::memory_order_relaxed);
  }
  s->bucket_mask_ = nbuckets - 1;
  p += nbuckets * sizeof(Bucket);

  // The rest: a map byte per 64-byte unit, then the arena (64-byte aligned).
  const uint64_t rest = end - p;
  uint64_t arena_bytes = (rest - 64) / (BlockAllocator::kUnitBytes + 1) * BlockAllocator::kUnitBytes;
  auto* map = reinterpret_cast<uint8_t*>(p);
  uintptr_t arena = align_up(p + BlockAllocator::map_bytes(arena_bytes), 64);
  if (arena + arena_bytes > end) arena_bytes = (end - arena) & ~(BlockAllocator::kUnitBytes - 1);
  s->max_order_ = BlockAllocator::order_for(config.max_value == 0 ? 1 : config.max_value);
  s->allocator_.init(reinterpret_cast<std::byte*>(arena), arena_bytes, map, s->max_order_);

  // Descriptors go on the free stack in index order (pushing in reverse so pops start at 0).
  s->free_head_.store(kNil, std::memory_order_relaxed);
  for (uint64_t i = descriptor_count; i-- > 0;) s->push_descriptor(static_cast<uint32_t>(i));

  const uint64_t whole = s->allocator_.arena_bytes() + descriptor_count * sizeof(Descriptor);
  s->capacity_ = config.capacity_bytes == 0 || config.capacity_bytes > whole ? whole : config.capacity_bytes;

  // Drawn once per store (one per process) and never written anywhere: slots live only in memory, and RADOS
  // names its objects by the key itself, so nothing persisted depends on the seed.
  for (size_t got = 0; got < s->hash_seed_.size();) {
    const ssize_t n = getrandom(s->hash_seed_.data() + got, s->hash_seed_.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("store: getrandom() for the hash seed failed");
    got += static_cast<size_t>(n);
  }

  s->core_stats_storage_.reset(new (std::nothrow) std::byte[sizeof(CoreStats) * config.max_cores + 64]);
  if (!s->core_stats_storage_) return fail("store: out of memory");
  auto cs = align_up(reinterpret_cast<uintptr_t>(s->core_stats_storage_.get()), 64);
  s->core_stats_ = reinterpret_cast<CoreStats*>(cs);
  for (uint32_t c = 0; c < config.max_cores; ++c) {
    CoreStats* st = new (&s->core_stats_[c]) CoreStats();
    for (auto& row : st->ops)
      for (auto& v : row) v.store(0, std::memory_order_relaxed);
    st->objects.store(0, std::memory_order_relaxed);
    st->value_bytes.store(0, std::memory_order_relaxed);
    st->evictions.store(0, std::memory_order_relaxed);
    st->window_full.store(0, std::memory_order_relaxed);
  }
  s->cores_.reset(new (std::nothrow) MemoryCoreStorage[config.max_cores]);
  if (!s->cores_) return fail("store: out of memory");
  for (uint32_t c = 0; c < config.max_cores; ++c) {
    s->cores_[c].store_ = s.get();
    s->cores_[c].core_ = c;
  }
  return s;
}

Store::~Store() = default;  // everything lives in the caller's region or is trivially destructible

uint64_t Store::charge_for(uint64_t value_size) const {
  const uint64_t block =
      value_size == 0 ? 0 : BlockAllocator::order_bytes(BlockAllocator::order_for(value_size));
  return block + sizeof(Descriptor);
}

Status Store::count(uint32_t core, protocol::ObjectOp op, Status s) {
  auto& c = core_stats_[core].ops[static_cast<uint32_t>(op)][static_cast<uint32_t>(s)];
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return s;
}

void Store::add_published(uint32_t core, int64_t objects, int64_t bytes) {
  CoreStats& c = core_stats_[core];
  c.objects.store(c.objects.load(std::memory_order_relaxed) + objects, std::memory_order_relaxed);
  c.value_bytes.store(c.value_bytes.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
}

bool Store::try_pin(uint32_t id) {
  // Increment only if nonzero: a count of zero means free (or being freed), and must never come back to
  // life through a reader; only reserve() revives a descriptor.
  std::atomic<uint32_t>& refs = descriptors_[id].refs;
  uint32_t r = refs.load(std::memory_order_relaxed);
  while (r != 0) {
    if (refs.compare_exchange_weak(r, r + 1, std::memory_order_acquire, std::memory_order_relaxed))
      return true;
  }
  return false;
}

void Store::release(uint32_t id) {
  Descriptor& d = descriptors_[id];
  if (d.refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (d.order != kNoOrder) allocator_.free(d.unit, d.order);
  used_.fetch_sub(d.charge, std::memory_order_relaxed);
  push_descriptor(id);
}

uint32_t Store::pop_descriptor() {
  uint64_t h = free_head_.load(std::memory_order_acquire);
  for (;;) {
    const auto idx = static_cast<uint32_t>(h);
    if (idx == kNil) return kNil;
    const uint32_t next = descriptors_[idx].next_free.load(std::memory_order_relaxed);
    const uint64_t nh = (((h >> 32) + 1) << 32) | next;  // the tag defeats ABA on the head
    if (free_head_.compare_exchange_weak(h, nh, std::memory_order_acquire, std::memory_order_acquire))
      return idx;
  }
}

void Store::push_descriptor(uint32_t id) {
  uint64_t h = free_head_.load(std::memory_order_relaxed);
  for (;;) {
    descriptors_[id].next_free.store(static_cast<uint32_t>(h), std::memory_order_relaxed);
    const uint64_t nh = (((h >> 32) + 1) << 32) | id;
    if (free_head_.compare_exchange_weak(h, nh, std::memory_order_release, std::memory_order_relaxed)) return;
  }
}

void Store::lock_bucket(Bucket* b) {
  for (;;) {
    if (b->lock.exchange(1, std::memory_order_acquire) == 0) return;
    while (b->lock.load(std::memory_order_relaxed) != 0) cpu_relax();
  }
}

void Store::unlock_bucket(Bucket* b) {
  b->lock.store(0, std::memory_order_release);
}

std::string_view Store::reserved_key(const Reservation& r) const {
  const Descriptor& d = descriptors_[r.token];
  return {d.key, d.key_len};
}

bool Store::key_equals(uint32_t id, uint16_t tenant, std::string_view key) const {
  const Descriptor& d = descriptors_[id];
  return d.tenant == tenant && d.key_len == key.size() && std::memcmp(d.key, key.data(), key.size()) == 0;
}

Store::Found Store::lookup(uint16_t tenant, std::string_view key, uint64_t hash) {
  const uint64_t home = hash & bucket_mask_;
  for (uint32_t p = 0; p < kProbeBuckets; ++p) {
    Bucket& b = buckets_[(home + p) & bucket_mask_];
    for (auto& slot : b.slots) {
      uint64_t v = slot.load(std::memory_order_acquire);
      while (v != 0 && slot_tag_matches(v, hash)) {
        const uint32_t id = slot_id(v);
        if (!try_pin(id)) {  // freed since we loaded the slot: the slot has moved on, look again
          v = slot.load(std::memory_order_acquire);
          continue;
        }
        // Validate after increment: if the slot still holds this descriptor, it is the published one
        // (publication owns a reference, so it cannot have been freed), and the acquire load orders the
        // publisher's writes of key and value before our reads.
        const uint64_t again = slot.load(std::memory_order_acquire);
        if (again != v) {
          release(id);
          v = again;
          continue;
        }
        if (!key_equals(id, tenant, key)) {
          release(id);
          break;
        }
        return Found{&slot, v, id};
      }
    }
  }
  return Found{};
}

Status Store::get(uint32_t core, uint16_t tenant, std::string_view key, PinnedValue* out) {
  if (key.empty() || key.size() > protocol::kMaxKeyLength)
    return count(core, ObjectOp::kGet, Status::kBadRequest);
  const Found f = lookup(tenant, key, hash_key(tenant, key));
  if (f.slot == nullptr) return count(core, ObjectOp::kGet, Status::kNotFound);
  Descriptor& d = descriptors_[f.id];
  // Second chance for the evicting hand. Load first: a hot key's bit is already set, and a store would
  // write the line on every GET for nothing (the pin's CAS has it exclusive, but only for the moment).
  if (d.referenced.load(std::memory_order_relaxed) == 0) d.referenced.store(1, std::memory_order_relaxed);
  out->data = d.order == kNoOrder ? nullptr : allocator_.address(d.unit);
  out->size = d.value_len;
  out->token = f.id;
  return count(core, ObjectOp::kGet, Status::kOk);
}

storage::Prior Store::peek(uint16_t tenant, std::string_view key) {
  if (key.empty() || key.size() > protocol::kMaxKeyLength) return {};
  const Found f = lookup(tenant, key, hash_key(tenant, key));
  if (f.slot == nullptr) return {};
  const storage::Prior p{true, descriptors_[f.id].value_len};
  release(f.id);  // lookup's pin
  return p;
}

void Store::unpin(PinnedValue* v) {
  if (v->token == PinnedValue::kNoToken) return;
  release(v->token);
  *v = PinnedValue{};
}

Status Store::reserve(uint32_t core, uint16_t tenant, std::string_view key, uint64_t value_size,
                      Reservation* out) {
  if (key.empty() || key.size() > protocol::kMaxKeyLength) return put_status(core, Status::kBadRequest);
  if (value_size > config_.max_value) return put_status(core, Status::kTooLarge);
  const uint64_t charge = charge_for(value_size);
  // A value that could never fit fails at once: evicting the whole cache for it would help nobody.
  const uint64_t block = charge - sizeof(Descriptor);  // charge_for(): class size + descriptor
  if (charge > capacity_ || block > arena_bytes()) return put_status(core, Status::kNoSpace);
  const uint64_t hash = hash_key(tenant, key);
  uint64_t examined = 0;  // this call's share of the hand, which bounds its work
  bool swept = !config_.evict;
  for (;;) {
    if (try_reserve(tenant, key, hash, value_size, charge, out)) return Status::kOk;
    if (swept) return put_status(core, Status::kNoSpace);
    // One more try even when the budget is spent: a remove, drop or unpin elsewhere may have made room
    // while the hand found nothing to take.
    swept = !evict_next(core, &examined);
  }
}

bool Store::try_reserve(uint16_t tenant, std::string_view key, uint64_t hash, uint64_t value_size,
                        uint64_t charge, Reservation* out) {
  // Charge first, with a CAS so the count never exceeds the capacity even for a moment (a scrape or a
  // concurrent reserver never sees a phantom overshoot).
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used + charge > capacity_) return false;
  } while (!used_.compare_exchange_weak(used, used + charge, std::memory_order_relaxed));
  const uint32_t id = pop_descriptor();
  if (id == kNil) {
    used_.fetch_sub(charge, std::memory_order_relaxed);
    return false;
  }
  Descriptor& d = descriptors_[id];
  d.order = kNoOrder;
  d.unit = 0;
  if (value_size > 0) {
    const uint32_t order = BlockAllocator::order_for(value_size);
    const uint32_t unit = allocator_.alloc(order);
    if (unit == BlockAllocator::kNoBlock) {  // buddy fragmentation: charged capacity was not the limit
      push_descriptor(id);
      used_.fetch_sub(charge, std::memory_order_relaxed);
      return false;
    }
    d.order = static_cast<uint8_t>(order);
    d.unit = unit;
  }
  d.value_len = static_cast<uint32_t>(value_size);
  d.charge = charge;
  d.hash = hash;
  d.key_len = static_cast<uint8_t>(key.size());
  d.tenant = tenant;
  // Unread so far: the hand may take it on its next pass, unless a GET comes first.
  d.referenced.store(0, std::memory_order_relaxed);
  std::memcpy(d.key, key.data(), key.size());
  // Readers that race on this descriptor's stale slot may pin it from here on, but the slot check sends
  // them away; the count only has to be nonzero.
  d.refs.store(1, std::memory_order_release);
  out->data = d.order == kNoOrder ? nullptr : allocator_.address(d.unit);
  out->size = d.value_len;
  out->token = id;
  return true;
}

bool Store::evict_next(uint32_t core, uint64_t* examined) {
  // CLOCK over the descriptor table, whose every entry is a published value, a reservation, an unpublished
  // but pinned value, or free. The hand is shared: concurrent evictors each take the next position.
  // True when it evicted, or passed kRetryEvery positions in vain (space may have come back meanwhile);
  // false when this PUT's budget of kClockSweeps sweeps is spent.
  const uint64_t n = descriptor_count_;
  for (uint32_t in_vain = 0; *examined < kClockSweeps * n; ++in_vain) {
    if (in_vain == kRetryEvery) return true;
    const bool first_sweep = *examined < n;
    ++*examined;
    const auto id = static_cast<uint32_t>(hand_.fetch_add(1, std::memory_order_relaxed) % n);
    Descriptor& d = descriptors_[id];
    // Plain looks at a descriptor we do not pin: both are atomics of a type-stable table, and a wrong
    // guess costs only a wasted evict() or a skipped candidate.
    const uint32_t refs = d.refs.load(std::memory_order_relaxed);
    if (refs == 0) continue;
    if (d.referenced.load(std::memory_order_relaxed) != 0) {
      d.referenced.store(0, std::memory_order_relaxed);
      continue;
    }
    // A pinned victim's space stays charged until its last unpin, so it would not make room now.
    if (first_sweep && refs > 1) continue;
    if (evict(core, id)) return true;
  }
  return false;
}

void Store::evict_from_window(uint32_t core, uint64_t home) {
  // Frees a slot of a full window: its first unreferenced entry, else its first one. A pin does not
  // matter here: what is short is the slot, which the eviction frees at once.
  uint32_t fallback = kNil;
  for (uint32_t p = 0; p < kProbeBuckets; ++p) {
    for (auto& slot : buckets_[(home + p) & bucket_mask_].slots) {
      const uint64_t v = slot.load(std::memory_order_relaxed);
      if (v == 0) return;  // freed meanwhile: worth another try as it is
      const uint32_t id = slot_id(v);
      if (descriptors_[id].referenced.load(std::memory_order_relaxed) == 0) {
        evict(core, id);
        return;
      }
      if (fallback == kNil) fallback = id;
    }
  }
  evict(core, fallback);
}

bool Store::evict(uint32_t core, uint32_t id) {
  // Our pin keeps this incarnation of the descriptor (and so its hash and length) from being freed and
  // reused while we look for its slot; a reservation or an unpublished value is simply not found.
  if (!try_pin(id)) return false;
  const Descriptor& d = descriptors_[id];
  const uint64_t hash = d.hash;
  const int64_t len = d.value_len;
  const uint64_t want = make_slot(hash, id);
  Bucket* hb = &buckets_[hash & bucket_mask_];
  std::atomic<uint64_t>* found = nullptr;
  // A slot holding a value changes only under its key's home lock, which we take: the check below and the
  // store cannot race an overwrite or a remove of the same key.
  lock_bucket(hb);
  for (uint32_t p = 0; p < kProbeBuckets && found == nullptr; ++p) {
    for (auto& slot : buckets_[((hash & bucket_mask_) + p) & bucket_mask_].slots) {
      if (slot.load(std::memory_order_relaxed) == want) {
        found = &slot;
        break;
      }
    }
  }
  if (found != nullptr) found->store(0, std::memory_order_release);
  unlock_bucket(hb);
  release(id);  // our pin
  if (found == nullptr) return false;
  release(id);  // the slot's reference: a reader's pin keeps the block alive past this point
  add_published(core, -1, -len);
  std::atomic<uint64_t>& e = core_stats_[core].evictions;
  e.store(e.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return true;
}

void Store::abort(Reservation* r) {
  if (r->token == PinnedValue::kNoToken) return;
  release(r->token);
  *r = Reservation{};
}

Status Store::commit(uint32_t core, Reservation* r) {
  return commit(core, r, nullptr);
}

Status Store::commit(uint32_t core, Reservation* r, PinnedValue* pin) {
  return commit(core, r, pin, nullptr);
}

Status Store::commit(uint32_t core, Reservation* r, PinnedValue* pin, storage::Prior* prior) {
  const uint32_t id = r->token;
  Descriptor& d = descriptors_[id];
  const std::string_view key(d.key, d.key_len);
  const uint16_t tenant = d.tenant;
  const uint64_t hash = d.hash;
  const uint64_t home = hash & bucket_mask_;
  const uint64_t nv = make_slot(hash, id);
  // Once published, the descriptor may be replaced and reused by other cores at any moment: read what we
  // need of it now.
  const int64_t new_len = d.value_len;
  Bucket* hb = &buckets_[home];
  if (pin != nullptr) {
    // The reservation's reference moves to the slot at the store below; the caller's must exist before
    // that, since an evictor or a remover may drop the slot's reference the moment the value is visible.
    d.refs.fetch_add(1, std::memory_order_relaxed);
    *pin = PinnedValue{r->data, r->size, id};
  }

  // Writers of one key share its home bucket's lock, so they serialise: the later commit wins, and a key
  // is never inserted twice. Slots outside the home bucket may be contended by other homes' writers only
  // while empty, which the CAS below settles.
  for (uint32_t attempt = 0;; ++attempt) {
    lock_bucket(hb);
    const Found f = lookup(tenant, key, hash);
    if (f.slot != nullptr) {
      const uint32_t old_len = descriptors_[f.id].value_len;
      f.slot->store(nv, std::memory_order_release);  // publish: the reservation's reference moves to the slot
      unlock_bucket(hb);
      release(f.id);  // our lookup pin
      release(f.id);  // the slot's reference
      add_published(core, 0, new_len - int64_t{old_len});
      if (prior != nullptr) *prior = storage::Prior{true, old_len};
      *r = Reservation{};
      return put_status(core, Status::kOk);
    }
    for (uint32_t p = 0; p < kProbeBuckets; ++p) {
      Bucket& b = buckets_[(home + p) & bucket_mask_];
      for (auto& slot : b.slots) {
        uint64_t expected = 0;
        if (slot.load(std::memory_order_relaxed) == 0 &&
            slot.compare_exchange_strong(expected, nv, std::memory_order_release,
                                         std::memory_order_relaxed)) {
          unlock_bucket(hb);
          add_published(core, 1, new_len);
          if (prior != nullptr) *prior = storage::Prior{};
          *r = Reservation{};
          return put_status(core, Status::kOk);
        }
      }
    }
    unlock_bucket(hb);
    // Evicting takes the victim's home lock, so ours must be free by then (one bucket lock at a time).
    if (!config_.evict || attempt == kWindowEvictions) break;
    evict_from_window(core, home);
  }
  if (pin != nullptr) unpin(pin);
  abort(r);
  std::atomic<uint64_t>& w = core_stats_[core].window_full;
  w.store(w.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return put_status(core, Status::kNoSpace);
}

Status Store::put(uint32_t core, uint16_t tenant, std::string_view key, std::span<const std::byte> value,
                  storage::Prior* prior) {
  Reservation r;
  const Status s = reserve(core, tenant, key, value.size(), &r);
  if (s != Status::kOk) return s;
  if (!value.empty()) std::memcpy(r.data, value.data(), value.size());
  return commit(core, &r, nullptr, prior);
}

bool Store::unpublish(uint16_t tenant, std::string_view key, uint64_t hash, int64_t* old_len) {
  Bucket* hb = &buckets_[hash & bucket_mask_];
  lock_bucket(hb);
  const Found f = lookup(tenant, key, hash);
  if (f.slot == nullptr) {
    unlock_bucket(hb);
    return false;
  }
  *old_len = descriptors_[f.id].value_len;
  f.slot->store(0, std::memory_order_release);
  unlock_bucket(hb);
  release(f.id);
  release(f.id);  // a reader's pin keeps the block alive past this point; the last unpin frees it
  return true;
}

Status Store::remove(uint32_t core, uint16_t tenant, std::string_view key, storage::Prior* prior) {
  if (key.empty() || key.size() > protocol::kMaxKeyLength)
    return count(core, ObjectOp::kDelete, Status::kBadRequest);
  int64_t old_len = 0;
  if (!unpublish(tenant, key, hash_key(tenant, key), &old_len))
    return count(core, ObjectOp::kDelete, Status::kNotFound);
  add_published(core, -1, -old_len);
  if (prior != nullptr) *prior = storage::Prior{true, static_cast<uint32_t>(old_len)};
  return count(core, ObjectOp::kDelete, Status::kOk);
}

Status Store::drop(std::string_view key) {
  if (key.empty() || key.size() > protocol::kMaxKeyLength) return Status::kNotFound;
  int64_t old_len = 0;
  if (!unpublish(0, key, hash_key(0, key), &old_len)) return Status::kNotFound;
  dropped_bytes_.fetch_add(old_len, std::memory_order_relaxed);
  drops_.fetch_add(1, std::memory_order_relaxed);
  return Status::kOk;
}

uint64_t Store::drop_all() {
  uint64_t dropped = 0;
  int64_t bytes = 0;
  for (uint64_t b = 0; b <= bucket_mask_; ++b) {
    for (auto& slot : buckets_[b].slots) {
      const uint64_t v = slot.load(std::memory_order_acquire);
      if (v == 0) continue;
      // One try per slot: if the slot no longer holds v (or v's descriptor is already free), v is no
      // longer published, and whatever replaced it was committed during this call.
      const uint32_t id = slot_id(v);
      if (!try_pin(id)) continue;
      if (slot.load(std::memory_order_acquire) != v) {
        release(id);
        continue;
      }
      // Pinned and still in the slot: the published incarnation, whose hash names the home lock.
      const Descriptor& d = descriptors_[id];
      const int64_t len = d.value_len;
      Bucket* hb = &buckets_[d.hash & bucket_mask_];
      lock_bucket(hb);
      const bool still = slot.load(std::memory_order_relaxed) == v;
      if (still) slot.store(0, std::memory_order_release);
      unlock_bucket(hb);
      release(id);
      if (!still) continue;
      release(id);
      ++dropped;
      bytes += len;
    }
  }
  dropped_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  drops_.fetch_add(dropped, std::memory_order_relaxed);
  return dropped;
}

uint32_t Store::count_free_descriptors() const {
  uint32_t n = 0;
  for (auto idx = static_cast<uint32_t>(free_head_.load(std::memory_order_acquire)); idx != kNil;
       idx = descriptors_[idx].next_free.load(std::memory_order_relaxed)) {
    ++n;
  }
  return n;
}

uint32_t Store::refs_of(uint32_t token) const {
  return descriptors_[token].refs.load(std::memory_order_relaxed);
}

StoreStats Store::stats() const {
  StoreStats s;
  int64_t objects = 0;
  int64_t bytes = 0;
  for (uint32_t c = 0; c < config_.max_cores; ++c) {
    const CoreStats& cs = core_stats_[c];
    for (uint32_t o = 0; o < protocol::kObjectOpCount; ++o)
      for (uint32_t st = 0; st < kStatusCount; ++st)
        s.ops[o][st] += cs.ops[o][st].load(std::memory_order_relaxed);
    objects += cs.objects.load(std::memory_order_relaxed);
    bytes += cs.value_bytes.load(std::memory_order_relaxed);
    s.evictions += cs.evictions.load(std::memory_order_relaxed);
    s.window_full += cs.window_full.load(std::memory_order_relaxed);
  }
  s.drops = drops_.load(std::memory_order_relaxed);
  objects -= static_cast<int64_t>(s.drops);  // each drop unpublished one object
  bytes -= dropped_bytes_.load(std::memory_order_relaxed);
  s.objects = objects > 0 ? static_cast<uint64_t>(objects) : 0;
  s.value_bytes = bytes > 0 ? static_cast<uint64_t>(bytes) : 0;
  s.used_bytes = used_.load(std::memory_order_relaxed);
  s.capacity_bytes = capacity_;
  return s;
}

// ---- the storage interface: each call is the store's own, ended at once -------------------------------

storage::Status MemoryCoreStorage::get(const storage::Namespace& ns, std::string_view key, std::uint64_t,
                                       storage::Lease* out) noexcept {
  PinnedValue v;
  const Status st = store_->get(core_, ns.id, key, &v);
  if (st == Status::kOk) *out = storage::Lease{const_cast<std::byte*>(v.data), v.size, v.token};
  return st;
}

storage::Status MemoryCoreStorage::put(const storage::Namespace& ns, std::string_view key,
                                       std::span<const std::byte> value, std::uint64_t,
                                       storage::Prior* prior) noexcept {
  return store_->put(core_, ns.id, key, value, prior);
}

storage::Status MemoryCoreStorage::remove(const storage::Namespace& ns, std::string_view key, std::uint64_t,
                                          storage::Prior* prior) noexcept {
  return store_->remove(core_, ns.id, key, prior);
}

storage::Status MemoryCoreStorage::reserve(const storage::Namespace& ns, std::string_view key,
                                           std::uint64_t size, std::uint64_t, storage::Lease* out) noexcept {
  Reservation r;
  const Status st = store_->reserve(core_, ns.id, key, size, &r);
  if (st == Status::kOk) *out = storage::Lease{r.data, r.size, r.token};
  return st;
}

// The reservation's descriptor holds its tenant: `ns` adds nothing here.
storage::Status MemoryCoreStorage::commit(const storage::Namespace&, storage::Lease* lease, std::uint64_t,
                                          storage::Prior* prior) noexcept {
  Reservation r{lease->data, lease->size, lease->token};
  *lease = storage::Lease{};
  return store_->commit(core_, &r, nullptr, prior);
}

storage::Prior MemoryCoreStorage::peek(const storage::Namespace& ns, std::string_view key) noexcept {
  return store_->peek(ns.id, key);
}

void MemoryCoreStorage::abort(storage::Lease* lease) noexcept {
  Reservation r{lease->data, lease->size, lease->token};
  *lease = storage::Lease{};
  store_->abort(&r);
}

void MemoryCoreStorage::release(storage::Lease* lease) noexcept {
  PinnedValue v{lease->data, lease->size, lease->token};
  *lease = storage::Lease{};
  store_->unpin(&v);
}

}  // namespace rdmagate::store

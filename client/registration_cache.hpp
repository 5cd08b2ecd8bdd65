#pragma once
// The client's registrations of caller memory (docs/client-internals.md "Key scope"): the shared cache that
// caller threads fill and a core copies from, and each core's lock-free copy. Verbs-free: the registration
// itself is the Registrar's (ibv_reg_mr in the client, a fake in the host test that runs the cache under
// ThreadSanitizer, tests/client/registration_cache_test.cpp).

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace rdmagate::client {

// A core's copy of the registrations that callbacks on it used for chunked requests (docs/client.md "Key
// scope"), so such a submit finds its keys with no lock and no syscall. Plain arrays sized at compile time,
// touched by its core only. Set-associative by the buffer's first page: a lookup reads one set of kWays
// entries, and a core cycling through more buffers than a direct list could hold (rdmagate-bench with a deep
// queue) still hits. Stale entries are never handed out: the client bumps a generation before release_buffer
// deregisters anything, and the cache empties itself when the generation it was filled under differs.
class CoreRegCache {
 public:
  static constexpr std::uint32_t kWays = 4;
  static constexpr std::uint32_t kSetBits = 5;
  static constexpr std::uint32_t kSets = 1u << kSetBits;  // 128 entries, 4 KiB per core
  struct Entry {
    std::uintptr_t start = 0;
    std::uintptr_t end = 0;  // 0: empty
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;
    // The registration itself (the Registrar's Handle): what a memory window binds to.
    void* handle = nullptr;
    bool writable = false;  // LOCAL_WRITE|REMOTE_WRITE (a GET's); else REMOTE_READ only (a PUT's)
  };

  enum class Outcome : std::uint8_t {
    kHit,           // this core's cache had it
    kFill,          // copied from the shared cache (the rare lock)
    kUnregistered,  // nobody registered it from a caller thread: kRegistration, never ibv_reg_mr here
  };

  // Empties the cache unless its entries were copied under `generation`.
  void sync(std::uint64_t generation) noexcept {
    if (generation == generation_) return;
    sets_.fill(Set{});
    generation_ = generation;
  }

  // An entry covering [a, a + len) (the caller checked that a + len does not wrap) with exactly the access
  // asked for.
  const Entry* find(std::uintptr_t a, std::size_t len, bool writable) const noexcept {
    const Set& s = sets_[set_of(a)];
    for (const Entry& e : s.ways) {
      if (e.end != 0 && e.start <= a && a + len <= e.end && e.writable == writable) return &e;
    }
    return nullptr;
  }

  // Files `e` under the page of `a` (the address it was looked up for), evicting round robin within the set.
  void insert(std::uintptr_t a, const Entry& e) noexcept {
    Set& s = sets_[set_of(a)];
    s.ways[s.next] = e;
    s.next = (s.next + 1) % kWays;
  }

 private:
  struct Set {
    std::array<Entry, kWays> ways{};
    std::uint32_t next = 0;
  };
  static std::uint32_t set_of(std::uintptr_t a) noexcept {
    // Fibonacci hashing of the 4 KiB page number: consecutive buffers land in different sets.
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(a >> 12) * 0x9e3779b97f4a7c15ull) >>
                                      (64 - kSetBits));
  }

  std::array<Set, kSets> sets_{};
  std::uint64_t generation_ = 0;
};

// The shared cache: registrations keyed by their first page. Caller threads look up and insert, registering
// outside the lock (ibv_reg_mr pins pages: milliseconds for a large buffer, and a core copying an entry waits
// for the lock); a core only copies an entry out, once per buffer per core, into its CoreRegCache and never
// registers. release() moves the generation before anything is deregistered, so a core's copy made under the
// old generation is emptied before its next lookup.
//
// Each registration grants the gateway one access, the one its request needs (docs/client-internals.md "Key
// scope"): a GET's destination remote write (and the local write that requires), a PUT's source remote read
// only. A miss registers the pages both ways at once (the write one only where the memory allows it), so a
// callback may use a buffer for either kind after a caller thread used it for one; each request still hands
// the gateway only the key of its own kind.
//
// Registrar: `using Handle` (pointer-like, null on failure); `Handle reg(std::uintptr_t start, std::size_t
// len, bool writable)` (writable: local and remote write; else remote read only); `void dereg(Handle)`;
// `std::uint32_t lkey(Handle)`, `rkey(Handle)`. Handle is a pointer: the lookups also hand it out (`handle`,
// optional), since a memory window is bound to the registration itself.
template <typename Registrar>
class RegistrationCache {
 public:
  using Handle = typename Registrar::Handle;

  RegistrationCache(Registrar registrar, std::uintptr_t page)
      : registrar_(std::move(registrar)), page_(page) {}
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;
  ~RegistrationCache() { clear(); }

  enum class Found : std::uint8_t { kCached, kRegistered, kFailed };

  // On a caller thread: keys covering [a, a + len) (the caller checked that it does not wrap) with the access
  // asked for (writable: GET destinations), from the cache or new registrations of the covering pages, one
  // per access. Two threads registering the same range at once both insert; either entry is valid, and
  // release() drops both. Read-only memory (a PUT of a string literal) registers for reading only.
  Found keys_for(std::uintptr_t a, std::size_t len, bool writable, std::uint32_t* lkey, std::uint32_t* rkey,
                 void** handle = nullptr) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::uintptr_t found_start = 0;
      if (const Entry* e = find_locked(a, len, writable, &found_start)) {
        *lkey = Registrar::lkey(e->handle);
        *rkey = Registrar::rkey(e->handle);
        if (handle != nullptr) *handle = e->handle;
        return Found::kCached;
      }
    }
    const std::uintptr_t start = a / page_ * page_;
    const std::uintptr_t end = (a + len + page_ - 1) / page_ * page_;
    Handle h = registrar_.reg(start, end - start, writable);
    if (!h) return Found::kFailed;
    Handle other = registrar_.reg(start, end - start, !writable);  // null: read-only memory, read only
    // The keys are read while the handle is still this thread's alone: once it is in reg_, a release() of
    // an overlapping buffer on another thread may deregister it (and the registrar free it) at any time.
    *lkey = Registrar::lkey(h);
    *rkey = Registrar::rkey(h);
    if (handle != nullptr) *handle = h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reg_.emplace(start, Entry{end, h, writable});
      if (other) reg_.emplace(start, Entry{end, other, !writable});
      max_len_ = std::max(max_len_, end - start);
    }
    return Found::kRegistered;
  }

  // On a core: the same keys without a syscall, and without a lock except once per buffer per core (a
  // kFill). The lock is not a try_lock that fails with kBusy: a callback has no way to retry later, and the
  // first round of a callback-driven load meets caller threads registering. Never registers: a buffer no
  // caller thread registered is kUnregistered.
  CoreRegCache::Outcome core_keys_for(CoreRegCache& cache, std::uintptr_t a, std::size_t len, bool writable,
                                      std::uint32_t* lkey, std::uint32_t* rkey,
                                      void** handle = nullptr) noexcept {
    cache.sync(gen_.load(std::memory_order_acquire));
    if (const CoreRegCache::Entry* e = cache.find(a, len, writable)) {
      *lkey = e->lkey;
      *rkey = e->rkey;
      if (handle != nullptr) *handle = e->handle;
      return CoreRegCache::Outcome::kHit;
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::uintptr_t start = 0;
    const Entry* e = find_locked(a, len, writable, &start);
    if (e == nullptr) return CoreRegCache::Outcome::kUnregistered;
    // The generation cannot move while we hold the lock: the copy is filed under the one it belongs to.
    cache.sync(gen_.load(std::memory_order_relaxed));
    *lkey = Registrar::lkey(e->handle);
    *rkey = Registrar::rkey(e->handle);
    if (handle != nullptr) *handle = e->handle;
    cache.insert(a, CoreRegCache::Entry{start, e->end, *lkey, *rkey, e->handle, e->writable});
    return CoreRegCache::Outcome::kFill;
  }

  // Drops every registration whose range holds `a`. The generation moves before any goes: from then on a
  // core's lookup empties its copy first, and a core copying from the cache no longer finds the entry. A core
  // still using the old keys can only be one racing this call with a request on the buffer, which the API
  // forbids (release only what no request in flight uses). Deregistered outside the lock (a syscall; a core
  // may be waiting for it).
  void release(std::uintptr_t a) {
    std::vector<Handle> dead;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = reg_.begin(); it != reg_.end();) {
        if (it->first <= a && a < it->second.end) {
          if (dead.empty()) gen_.fetch_add(1, std::memory_order_release);
          dead.push_back(it->second.handle);
          it = reg_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (Handle h : dead) registrar_.dereg(h);
  }

  // Deregisters everything (the client's end, once no core runs).
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [start, e] : reg_) registrar_.dereg(e.handle);
    reg_.clear();
  }

 private:
  struct Entry {
    std::uintptr_t end = 0;
    Handle handle{};
    bool writable = false;  // see CoreRegCache::Entry::writable
  };

  // The entry covering [a, a + len) with exactly the access asked for, or nullptr. Under mu_.
  const Entry* find_locked(std::uintptr_t a, std::size_t len, bool writable, std::uintptr_t* start) const {
    // Entries start at or below a; a covering one starts no further back than the longest entry.
    for (auto it = reg_.upper_bound(a); it != reg_.begin();) {
      --it;
      if (a - it->first > max_len_) break;
      if (it->second.end >= a + len && it->second.writable == writable) {
        *start = it->first;
        return &it->second;
      }
    }
    return nullptr;
  }

  Registrar registrar_;
  const std::uintptr_t page_;
  std::mutex mu_;
  std::multimap<std::uintptr_t, Entry> reg_;
  std::uintptr_t max_len_ = 0;
  std::atomic<std::uint64_t> gen_{0};
};

}  // namespace rdmagate::client

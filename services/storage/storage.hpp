#pragma once
// The object service's storage, as one data-plane core sees it (docs/store.md "The storage interface").
//
// Every core gets its own CoreStorage handle from the backend. An op either ends at once (a final Status)
// or returns kPending: it then ends later, on whatever thread the backend uses, with one Completion pushed
// onto the handle's CompletionQueue (MP/SC), which the owning core drains when it polls. The core never
// waits, locks or allocates for a storage op; a backend whose library does any of that on its submit path
// (librados: aio_* allocates and takes locks) submits from a thread of its own and keeps the core's side to
// a ring push.
//
// Memory the NIC moves lives in a Lease: the block of a pinned published value (GET) or a reserved block
// for a value arriving by RDMA READ (PUT). A lease stays valid, and its bytes unchanged except by the NIC's
// READ into a reservation, until the service gives it back (release, abort, or commit, which takes it);
// the service gives it back only once the NIC is provably done with it (the core's bulk hooks). Every lease
// lies in memory the daemon registered once, before the cores start.
//
// Why a virtual interface rather than a template parameter: the backend is chosen from the configuration
// at startup (store.backend). As a template it would become part of the service's type and so of the core
// loop's (CoreLoop<VerbsBackend, ObjectService<Backend>>): the daemon would build one loop per backend and
// a new backend would touch the engine and the daemon. The price is one indirect call per storage op, next
// to an op that costs 40 to 170 ns in the memory store and microseconds in a remote one; the per-poll path
// never calls the backend (the service drains the ring itself, and only while it has ops pending). The
// transport stays a template (CoreLoop<Backend, Service>) because it is called per completion.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace rdmagate::storage {

// How an op ended. The first five are outcomes, in the order of the store metrics' `status` label
// (telemetry::kStoreStatusNames); kPending is not an outcome and never counted: the op's Completion comes
// later.
enum class Status : std::uint8_t {
  kOk = 0,
  kNotFound = 1,     // GET or DELETE of a key that is not there
  kTooLarge = 2,     // PUT of a value above the backend's max value size
  kNoSpace = 3,      // capacity, index or descriptors exhausted (and nothing could be evicted)
  kBadRequest = 4,   // key length outside 1..protocol::kMaxKeyLength
  kUnavailable = 5,  // a remote backend did not answer within its timeout, or refused; retrying may work
  kCorrupt = 6,      // the stored bytes do not match the checksum stored with them; nothing is returned
  kPending = 7,
};
inline constexpr std::uint32_t kStatusCount = 7;  // outcomes

constexpr const char* status_name(Status s) noexcept {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kNotFound:
      return "not_found";
    case Status::kTooLarge:
      return "too_large";
    case Status::kNoSpace:
      return "no_space";
    case Status::kBadRequest:
      return "bad_request";
    case Status::kUnavailable:
      return "unavailable";
    case Status::kCorrupt:
      return "corrupt";
    case Status::kPending:
      return "pending";
  }
  return "unknown";
}

// Memory a backend lends one request. A GET's lease is only read (by the NIC's RDMA WRITE or a copy into a
// response); a reservation's is written by the NIC's RDMA READ.
struct Lease {
  static constexpr std::uint32_t kNoToken = 0xffffffffu;
  std::byte* data = nullptr;
  std::uint32_t size = 0;
  std::uint32_t token = kNoToken;  // the backend's name for it; kNoToken: nothing lent
};

// The tenant namespace a key lives in (docs/store.md "Tenant namespaces"). Two namespaces' equal keys are
// different objects and no key of one names an object of another. Namespace{} (id 0, no name) is that of
// unauthenticated connections (authentication off): its objects keep exactly the store keys and RADOS
// object names they had before namespaces existed.
inline constexpr std::size_t kMaxNamespaceName = 64;  // a tenant name: [A-Za-z0-9._@-]{1,64}
struct Namespace {
  std::uint16_t id = 0;   // the process's tenant id (never reused while it runs): the memory store's
  std::string_view name;  // the tenant's configured name, stable across restarts: RADOS object names
};

// What a PUT or DELETE that ended kOk replaced, for a tenant's quota accounting (only from a backend whose
// reports_prior() is true).
struct Prior {
  bool existed = false;     // the key held a value
  std::uint32_t bytes = 0;  // its length
};

// The end of a pending op. `tag` is what the service passed with the op; `lease` is set when a get or a
// reserve ends kOk.
struct Completion {
  std::uint64_t tag = 0;
  Lease lease{};
  Status status = Status::kOk;
  // A Prior, flattened so that a Completion keeps its 32 bytes (a ring slot): set by put, commit and
  // remove ending kOk on a backend that reports_prior().
  bool prior_existed = false;
  std::uint32_t prior_bytes = 0;
  Prior prior() const noexcept { return {prior_existed, prior_bytes}; }
  void set_prior(const Prior& p) noexcept {
    prior_existed = p.existed;
    prior_bytes = p.bytes;
  }
};

class CompletionQueue;  // completion_queue.hpp: the MP/SC ring a handle's completions arrive on

// One core's handle. Every call is made on the owning core only; `key` and `value` are valid only during
// the call (a backend that completes later copies what it needs, the namespace's name included). `tag`
// comes back in the Completion when the call returns kPending; `*out` is set only when it returns kOk, and
// `*prior` (when not null) only when a put, commit or remove ends kOk at once on a backend that
// reports_prior().
class CoreStorage {
 public:
  virtual ~CoreStorage() = default;

  virtual Status get(const Namespace& ns, std::string_view key, std::uint64_t tag, Lease* out) noexcept = 0;
  virtual Status put(const Namespace& ns, std::string_view key, std::span<const std::byte> value,
                     std::uint64_t tag, Prior* prior) noexcept = 0;
  virtual Status remove(const Namespace& ns, std::string_view key, std::uint64_t tag,
                        Prior* prior) noexcept = 0;
  // Two-phase PUT for a value the NIC brings: reserve room for `size` bytes, let the NIC fill it, then
  // commit (publish; the last committer wins) or abort. commit takes the lease whatever its outcome; `ns`
  // must be the reservation's.
  virtual Status reserve(const Namespace& ns, std::string_view key, std::uint64_t size, std::uint64_t tag,
                         Lease* out) noexcept = 0;
  virtual Status commit(const Namespace& ns, Lease* lease, std::uint64_t tag, Prior* prior) noexcept = 0;
  // Give a lease back at once (never pending): abort a reservation, release a GET's pin. Empties *lease.
  virtual void abort(Lease* lease) noexcept = 0;
  virtual void release(Lease* lease) noexcept = 0;

  // Whether a put/commit/remove says what it replaced (Prior) and peek() can tell what a key holds at
  // once: what a tenant's quota accounting needs. The memory store can; RADOS cannot without a round trip
  // (docs/store.md "Quotas").
  virtual bool reports_prior() const noexcept = 0;
  // What `key` holds now (existed false: nothing), at once; only on a backend that reports_prior().
  virtual Prior peek(const Namespace& ns, std::string_view key) noexcept = 0;

  // Where this handle's completions arrive; null when every op ends at once. A backend never keeps more
  // ops pending on one core than the queue holds (the service starts at most capacity() at a time).
  virtual CompletionQueue* completions() noexcept = 0;

  // The unauthenticated namespace, nothing reported: the calls of tools and tests that know no tenants.
  Status get(std::string_view key, std::uint64_t tag, Lease* out) noexcept { return get({}, key, tag, out); }
  Status put(std::string_view key, std::span<const std::byte> value, std::uint64_t tag) noexcept {
    return put({}, key, value, tag, nullptr);
  }
  Status remove(std::string_view key, std::uint64_t tag) noexcept { return remove({}, key, tag, nullptr); }
  Status reserve(std::string_view key, std::uint64_t size, std::uint64_t tag, Lease* out) noexcept {
    return reserve({}, key, size, tag, out);
  }
  Status commit(Lease* lease, std::uint64_t tag) noexcept { return commit({}, lease, tag, nullptr); }
};

}  // namespace rdmagate::storage

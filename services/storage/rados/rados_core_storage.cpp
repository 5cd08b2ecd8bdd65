// The data-plane core's side of the RADOS backend: cache hits and reservations end here at once; every
// other op is copied onto the core's ring to the worker and ends later. No syscall (but the futex wake of
// a parked worker), no lock, no allocation.
#include <cstring>

#include "services/storage/rados/rados_internal.hpp"

namespace rdmagate::storage::rados {

namespace {
bool bad_key(const Namespace& ns, std::string_view key) noexcept {
  return key.empty() || key.size() > protocol::kMaxKeyLength || ns.name.size() > kMaxNamespaceName;
}
}  // namespace

Status RadosCoreStorage::submit(OpKind kind, const Namespace& ns, std::string_view key, std::uint64_t tag,
                                const store::Reservation& value) noexcept {
  Submission s;
  s.tag = tag;
  s.value = value;
  s.core = core_;
  s.kind = kind;
  s.key_len = static_cast<std::uint8_t>(key.size());
  std::memcpy(s.key, key.data(), key.size());
  s.ns_len = static_cast<std::uint8_t>(ns.name.size());
  // The unauthenticated namespace's name is empty, and may have no data pointer: memcpy must not see it.
  if (!ns.name.empty()) std::memcpy(s.ns, ns.name.data(), ns.name.size());
  // The service keeps at most max_requests ops pending here, the ring's capacity: a full ring is a bug in
  // that accounting, and answering unavailable keeps every lease accounted for.
  if (!sq_.push(s)) return count(kind, Status::kUnavailable);
  worker_->wake();
  return Status::kPending;
}

Status RadosCoreStorage::get(const Namespace& ns, std::string_view key, std::uint64_t tag,
                             Lease* out) noexcept {
  if (bad_key(ns, key)) return count(OpKind::kGet, Status::kBadRequest);
  if (!worker_->accepting()) return count(OpKind::kGet, Status::kUnavailable);
  if (ns.name.empty() && worker_->cache_trusted()) {
    store::PinnedValue pin;
    if (cache_->get(core_, key, &pin) == Status::kOk) {
      *out = Lease{const_cast<std::byte*>(pin.data), pin.size, pin.token};
      bump(hits_);
      return count(OpKind::kGet, Status::kOk);
    }
  }
  return submit(OpKind::kGet, ns, key, tag, {});
}

Status RadosCoreStorage::put(const Namespace& ns, std::string_view key, std::span<const std::byte> value,
                             std::uint64_t tag, Prior*) noexcept {
  if (bad_key(ns, key)) return count(OpKind::kPut, Status::kBadRequest);
  if (value.size() > max_value_) return count(OpKind::kPut, Status::kTooLarge);
  if (!worker_->accepting()) return count(OpKind::kPut, Status::kUnavailable);
  store::Reservation r;
  const Status st = cache_->reserve(core_, key, value.size(), &r);
  if (st != Status::kOk) return count(OpKind::kPut, st);
  if (!value.empty()) std::memcpy(r.data, value.data(), value.size());
  const Status s = submit(OpKind::kPut, ns, key, tag, r);
  if (s != Status::kPending) cache_->abort(&r);
  return s;
}

Status RadosCoreStorage::remove(const Namespace& ns, std::string_view key, std::uint64_t tag,
                                Prior*) noexcept {
  if (bad_key(ns, key)) return count(OpKind::kDelete, Status::kBadRequest);
  if (!worker_->accepting()) return count(OpKind::kDelete, Status::kUnavailable);
  return submit(OpKind::kDelete, ns, key, tag, {});
}

// The cache block is only where the value waits for RADOS (it is published in the cache only for the
// unauthenticated namespace, by the worker): it is reserved under the bare key whatever the namespace.
Status RadosCoreStorage::reserve(const Namespace& ns, std::string_view key, std::uint64_t size, std::uint64_t,
                                 Lease* out) noexcept {
  if (bad_key(ns, key)) return count(OpKind::kPut, Status::kBadRequest);
  if (size > max_value_) return count(OpKind::kPut, Status::kTooLarge);
  if (!worker_->accepting()) return count(OpKind::kPut, Status::kUnavailable);
  store::Reservation r;
  const Status st = cache_->reserve(core_, key, size, &r);
  if (st != Status::kOk) return count(OpKind::kPut, st);
  *out = Lease{r.data, r.size, r.token | kReservationBit};
  return Status::kOk;
}

Status RadosCoreStorage::commit(const Namespace& ns, Lease* lease, std::uint64_t tag, Prior*) noexcept {
  store::Reservation r{lease->data, lease->size, lease->token & ~kReservationBit};
  *lease = Lease{};
  if (!worker_->accepting()) {
    cache_->abort(&r);
    return count(OpKind::kPut, Status::kUnavailable);
  }
  if (ns.name.size() > kMaxNamespaceName) {
    cache_->abort(&r);
    return count(OpKind::kPut, Status::kBadRequest);
  }
  const Status s = submit(OpKind::kPut, ns, cache_->reserved_key(r), tag, r);
  if (s != Status::kPending) cache_->abort(&r);
  return s;
}

void RadosCoreStorage::abort(Lease* lease) noexcept {
  release(lease);
}

void RadosCoreStorage::release(Lease* lease) noexcept {
  if (lease->token == Lease::kNoToken) return;
  if ((lease->token & kReservationBit) != 0) {
    store::Reservation r{lease->data, lease->size, lease->token & ~kReservationBit};
    cache_->abort(&r);
  } else {
    store::PinnedValue p{lease->data, lease->size, lease->token};
    cache_->unpin(&p);
  }
  *lease = Lease{};
}

void Worker::wake() noexcept {
  // An eventcount with park(): the increment publishes our push (the worker's acquire of the word then sees
  // it) and changes the value the worker's futex_wait compares, so a wait that starts after it returns at
  // once. Both words are seq_cst: if we read parked_ false, the worker's second look at the word comes after
  // our increment and it does not sleep; so the syscall is made only for a worker that may be asleep.
  wake_word_.fetch_add(1, std::memory_order_seq_cst);
  if (!parked_.load(std::memory_order_seq_cst)) return;
  futex_wake(&wake_word_);
  wakeups_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace rdmagate::storage::rados

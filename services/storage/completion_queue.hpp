#pragma once
// The ring on which a storage backend hands completions of pending ops to the core that submitted them:
// multi-producer (any backend thread, e.g. librados' callback threads) / single-consumer (the owning core,
// from the object service's on_poll_st). An rte_ring formatted with rte_ring_init on a heap block, as the
// handoff rings are (dataplane/handoff_ring.hpp): no EAL needed, so host tests run it as production does.
//
// The core never waits on it: a dequeue takes what is there. A producer never finds it full as long as the
// backend keeps at most capacity() ops pending on that core, which the object service guarantees by
// starting no more than that. A core that sleeps when idle (idle_policy event) hands it its storage doorbell
// (set_wake): every push then rings it, which costs the producer a write only while that core sleeps, and
// the core may sleep with ops pending (ObjectService::idle_st).

#include <rte_ring.h>
#include <rte_ring_elem.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "dataplane/doorbell.hpp"
#include "dataplane/handoff_ring.hpp"
#include "services/storage/storage.hpp"

namespace rdmagate::storage {

static_assert(sizeof(Completion) == 32 && alignof(Completion) == 8, "a ring slot of 32 bytes");

class CompletionQueue {
 public:
  // A queue of exactly `capacity` slots (setup only: it allocates). Null and *error on failure.
  static std::unique_ptr<CompletionQueue> create(std::uint32_t capacity, std::string* error) {
    if (capacity == 0 || capacity > dataplane::kMaxRingCapacity) {
      *error = "completion queue: capacity " + std::to_string(capacity) + " out of range";
      return nullptr;
    }
    const ssize_t bytes = rte_ring_get_memsize_elem(sizeof(Completion), ring_count(capacity));
    std::unique_ptr<CompletionQueue> q(new CompletionQueue(static_cast<std::size_t>(bytes)));
    if (!q->mem_) {
      *error = "completion queue: out of memory";
      return nullptr;
    }
    q->ring_ = reinterpret_cast<rte_ring*>(q->mem_.data());
    if (rte_ring_init(q->ring_, "storage_cq", capacity, RING_F_SC_DEQ | RING_F_EXACT_SZ) != 0) {
      *error = "completion queue: rte_ring_init failed";
      return nullptr;
    }
    return q;
  }

  // Setup, before any push: the sleeping core's doorbell (CoreSleeper::storage_bell), rung after each push.
  void set_wake(dataplane::Doorbell* bell) noexcept { wake_ = bell; }
  // Whether a push wakes the owning core: only then may it sleep with ops pending.
  bool wakes() const noexcept { return wake_ != nullptr; }

  // Any thread. False only when full (a backend that breaks the capacity rule).
  [[nodiscard]] bool push(const Completion& c) noexcept {
    if (rte_ring_mp_enqueue_bulk_elem(ring_, &c, sizeof(Completion), 1, nullptr) != 1) return false;
    if (wake_ != nullptr) wake_->ring();
    return true;
  }

  // Owning core: takes up to out.size() completions, oldest first.
  std::uint32_t pop_burst_st(std::span<Completion> out) noexcept {
    return rte_ring_sc_dequeue_burst_elem(ring_, out.data(), sizeof(Completion),
                                          static_cast<unsigned>(out.size()), nullptr);
  }

  std::uint32_t capacity() const noexcept { return rte_ring_get_capacity(ring_); }

 private:
  explicit CompletionQueue(std::size_t bytes) noexcept : mem_(bytes) {}
  // RING_F_EXACT_SZ rounds the slot count up to a power of two above the capacity.
  static unsigned ring_count(std::uint32_t capacity) noexcept { return rte_align32pow2(capacity + 1); }

  dataplane::RingStorage mem_;
  rte_ring* ring_ = nullptr;
  dataplane::Doorbell* wake_ = nullptr;
};

}  // namespace rdmagate::storage

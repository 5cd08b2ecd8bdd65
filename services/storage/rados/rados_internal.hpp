#pragma once
// What the cores, the worker and librados' callback threads of the RADOS backend share: the rings between
// them, the values on those rings, the per-core handle and the worker. Only rados_*.cpp include it.

#include <linux/futex.h>
#include <rados/librados.h>
#include <rte_cycles.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "dataplane/handoff_ring.hpp"
#include "protocol/object_wire.hpp"
#include "services/storage/completion_queue.hpp"
#include "services/storage/memory/store.hpp"
#include "services/storage/rados/invalidation.hpp"
#include "services/storage/rados/rados_store.hpp"

namespace rdmagate::storage::rados {

// A ring of values copied in and out (rte_ring's elem API) over a heap block; no EAL needed.
template <typename T>
class ValueRing {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 4 == 0);

 public:
  bool init(std::uint32_t capacity, unsigned flags, std::string* error) {
    const unsigned count = rte_align32pow2(capacity + 1);
    const ssize_t bytes = rte_ring_get_memsize_elem(sizeof(T), count);
    if (bytes < 0) return fail(error, "ring size");
    mem_ = dataplane::RingStorage(static_cast<std::size_t>(bytes));
    if (!mem_) return fail(error, "out of memory");
    ring_ = reinterpret_cast<rte_ring*>(mem_.data());
    if (rte_ring_init(ring_, "rados", capacity, flags | RING_F_EXACT_SZ) != 0)
      return fail(error, "rte_ring_init");
    return true;
  }
  [[nodiscard]] bool push(const T& v) noexcept {
    return rte_ring_enqueue_bulk_elem(ring_, &v, sizeof(T), 1, nullptr) == 1;
  }
  std::uint32_t pop_burst(T* out, std::uint32_t n) noexcept {
    return rte_ring_dequeue_burst_elem(ring_, out, sizeof(T), n, nullptr);
  }
  // rte_ring_empty reads the tails with plain loads (DPDK relies on volatile); atomic loads say the same
  // without a data race, so ThreadSanitizer can check the worker's park protocol.
  bool empty() const noexcept {
    return __atomic_load_n(&ring_->prod.tail, __ATOMIC_ACQUIRE) ==
           __atomic_load_n(&ring_->cons.tail, __ATOMIC_ACQUIRE);
  }

 private:
  static bool fail(std::string* error, const char* what) {
    *error = std::string("rados ring: ") + what;
    return false;
  }
  dataplane::RingStorage mem_;
  rte_ring* ring_ = nullptr;
};

enum class OpKind : std::uint8_t { kGet = 0, kPut = 1, kDelete = 2 };

constexpr protocol::ObjectOp object_op(OpKind k) noexcept {
  switch (k) {
    case OpKind::kGet:
      return protocol::ObjectOp::kGet;
    case OpKind::kPut:
      return protocol::ObjectOp::kPut;
    case OpKind::kDelete:
      return protocol::ObjectOp::kDelete;
  }
  return protocol::ObjectOp::kGet;
}

// One op, core -> worker, by value. A PUT's value travels as the cache reservation holding it.
struct Submission {
  std::uint64_t tag = 0;
  store::Reservation value{};
  std::uint32_t core = 0;
  OpKind kind = OpKind::kGet;
  std::uint8_t key_len = 0;
  std::uint8_t ns_len = 0;  // 0: the unauthenticated namespace, the only one the cache holds
  std::uint8_t pad = 0;
  char key[protocol::kMaxKeyLength + 2] = {};
  char ns[kMaxNamespaceName] = {};  // the tenant's name (storage::Namespace::name)
  std::string_view key_view() const noexcept { return {key, key_len}; }
  std::string_view ns_view() const noexcept { return {ns, ns_len}; }
  // Only the unauthenticated namespace goes through the cache (docs/store.md "Tenant namespaces"): the
  // cache's keys and the invalidations between gateways name keys without a tenant.
  bool cacheable() const noexcept { return ns_len == 0; }
};
static_assert(sizeof(Submission) % 4 == 0);

// A watch notify, librados callback thread -> worker.

struct NotifyEvent {
  std::uint64_t notify_id = 0;
  std::uint64_t cookie = 0;
  std::uint32_t len = 0;   // payload bytes; 0: not a gateway's invalidation, forget the whole cache
  std::uint32_t self = 0;  // our own notify: the ops that sent it update the cache themselves
  char payload[kNotifyPayload] = {};
};
static_assert(sizeof(NotifyEvent) % 4 == 0);

// A lease the core hands the service names a cache pin (token = the pin's) or, with this bit, an
// unpublished cache reservation (a GET whose value could not be cached). Store tokens are descriptor
// indices, far below 2^31.
inline constexpr std::uint32_t kReservationBit = 0x80000000u;

// Single-writer counters a scrape reads.
inline void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

inline std::uint64_t steady_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// The worker parks on a futex when idle; a core wakes it only when it is parked (Worker::wake).
inline void futex_wake(std::atomic<std::uint32_t>* word) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}
inline void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                       std::uint64_t timeout_ns) noexcept {
  timespec ts{static_cast<time_t>(timeout_ns / 1000000000u), static_cast<long>(timeout_ns % 1000000000u)};
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

class Worker;

// A tenant's objects are named in its namespace (object_name); RADOS says nothing of what a write or a
// remove replaced, so no Prior is reported (a tenant's quota is not accounted with this backend).
class RadosCoreStorage final : public CoreStorage {
 public:
  using CoreStorage::commit;
  using CoreStorage::get;
  using CoreStorage::put;
  using CoreStorage::remove;
  using CoreStorage::reserve;
  Status get(const Namespace& ns, std::string_view key, std::uint64_t tag, Lease* out) noexcept override;
  Status put(const Namespace& ns, std::string_view key, std::span<const std::byte> value, std::uint64_t tag,
             Prior* prior) noexcept override;
  Status remove(const Namespace& ns, std::string_view key, std::uint64_t tag, Prior* prior) noexcept override;
  Status reserve(const Namespace& ns, std::string_view key, std::uint64_t size, std::uint64_t tag,
                 Lease* out) noexcept override;
  Status commit(const Namespace& ns, Lease* lease, std::uint64_t tag, Prior* prior) noexcept override;
  void abort(Lease* lease) noexcept override;
  void release(Lease* lease) noexcept override;
  bool reports_prior() const noexcept override { return false; }
  Prior peek(const Namespace&, std::string_view) noexcept override { return {}; }
  CompletionQueue* completions() noexcept override { return cq_.get(); }

 private:
  friend class Worker;
  Status submit(OpKind kind, const Namespace& ns, std::string_view key, std::uint64_t tag,
                const store::Reservation& value) noexcept;
  Status count(OpKind kind, Status s) noexcept {
    bump(ops_[static_cast<unsigned>(object_op(kind))][static_cast<unsigned>(s)]);
    return s;
  }

  Worker* worker_ = nullptr;
  store::Store* cache_ = nullptr;
  std::uint32_t core_ = 0;
  std::uint64_t max_value_ = 0;
  std::unique_ptr<CompletionQueue> cq_;
  ValueRing<Submission> sq_;  // to the worker, SP/SC
  // Outcomes this core decided itself (cache hits, refusals); the worker counts the rest.
  std::atomic<std::uint64_t> ops_[protocol::kObjectOpCount][kStatusCount] = {};
  std::atomic<std::uint64_t> hits_{0};
};

// Where a pending op is.
enum class Phase : std::uint8_t {
  kFree = 0,
  kProbe,   // GET: stat + xattrs + the first kInlineRead bytes (or the hinted size, into the cache block)
  kRead,    // GET: the whole value into a cache reservation
  kWrite,   // PUT: write_full + the checksum xattr (its invalidation goes out meanwhile)
  kRemove,  // DELETE (likewise)
  kNotify,  // PUT/DELETE committed: waiting for its invalidation, or for a second one sent after the commit
  kFence,   // a gateway did not ack the invalidation: waiting until its cache lease has surely run out
};

// What a PUT/DELETE still waits for before it is settled (Worker::settle_mutation).
inline constexpr std::uint8_t kWaitWrite = 1, kWaitNotify = 2;

// What a librados completion callback gets: which op slot (or batch, or the worker's own op) ended.
struct CallbackArg {
  Worker* worker = nullptr;
  std::uint32_t slot = 0;
};

// One notify of ours in flight, for the writes whose keys it names.
struct NotifyBatch {
  rados_completion_t comp = nullptr;
  CallbackArg arg{};
  char* reply = nullptr;
  std::size_t reply_len = 0;
  std::uint64_t started_ns = 0;
  std::uint64_t peer_epoch = 0;  // Worker::peer_epoch_ when it went out
  bool hello = false;            // no keys: announces our watch (Worker::hello_)
  std::vector<std::uint32_t> slots;
  std::size_t len = 0;
  char payload[kNotifyPayload] = {};
};

struct PendingOp {
  Submission sub;
  Phase phase = Phase::kFree;
  std::uint32_t attempts = 0;
  std::uint64_t key_gen = 0;  // the key's invalidation generation when the op started
  std::uint64_t rados_started_ns = 0;
  std::uint64_t fence_until_ns = 0;
  std::uint64_t committed_ns = 0;    // PUT/DELETE: when RADOS answered the write
  std::uint64_t notify_sent_ns = 0;  // PUT/DELETE: when the newest invalidation naming it went out
  int write_ret = 0;
  int notify_ret = 0;
  std::uint8_t waiting = 0;      // kWaitWrite | kWaitNotify
  bool unannounced = false;      // started while no other watcher existed: no notify sent (Worker::alone_)
  std::uint64_t peer_epoch = 0;  // Worker::peer_epoch_ when it started
  rados_completion_t comp = nullptr;
  rados_read_op_t read_op = nullptr;
  rados_write_op_t write_op = nullptr;
  rados_xattrs_iter_t xattrs = nullptr;
  std::uint64_t size = 0;
  time_t mtime = 0;
  int stat_rval = 0;
  int xattr_rval = 0;
  int read_rval = 0;
  std::size_t bytes_read = 0;
  std::uint32_t crc = 0;
  bool has_crc = false;
  char crc_text[12] = {};
  store::Reservation fill{};     // GET: the cache block the value is read into
  bool hinted = false;           // GET: the probe reads straight into fill, sized by the key's size hint
  std::byte* scratch = nullptr;  // kInlineRead bytes of the worker's scratch arena
  CallbackArg arg{};
};

class Worker {
 public:
  static constexpr std::uint32_t kInlineRead = 4096;  // a GET's first op reads this much with the stat
  static constexpr std::uint32_t kMaxReadAttempts = 3;
  // Last sizes seen of values over kInlineRead, by key hash (8 bytes each): a GET miss whose hint holds
  // reads the whole value with its stat and checksum in one op instead of two round trips.
  static constexpr std::size_t kSizeHints = 65536;
  static constexpr std::size_t kGenSlots = 4096;     // invalidation generations by key hash
  static constexpr std::uint32_t kNotifyRing = 256;  // notifies received, not yet handled (x 4 KiB)
  // Notifies of ours in flight at once; writes that commit while all are out wait and go together in the
  // next (group commit), since each notify costs the OSD an op and an ack op per gateway. With notifies sent
  // beside the write, 1, 2 and 4 measured within the run-to-run noise on the host (docs/store.md); 4 keeps a
  // slow notify from holding up every later write.
  static constexpr std::uint32_t kBatches = 4;
  static constexpr std::uint32_t kBurst = 32;
  static constexpr const char* kCrcXattr = "rdmagate.crc32c";
  static constexpr const char* kWatchObject = "rdmagate.cache";
  // Done-ring ids of the worker's own librados ops, after the op slots.
  std::uint32_t kWatchSlot = 0, kUnwatchSlot = 0, kProbeSlot = 0, kBatchSlotFirst = 0;

  Worker(const RadosSettings& s, store::Store& cache) : s_(s), cache_(cache) {
    // librados passes a notify's timeout to the OSD in whole seconds (timeout_ms / 1000, and 0 means the
    // OSD's 30 s default): round up here so the wait and the window we announce are the real ones.
    s_.notify_timeout_ms = (std::max<std::uint32_t>(s_.notify_timeout_ms, 1) + 999) / 1000 * 1000;
  }
  ~Worker();
  bool init(std::string* error);  // rings, tables, the thread

  RadosCoreStorage& core(std::uint32_t i) noexcept { return cores_[i]; }
  bool accepting() const noexcept { return accepting_.load(std::memory_order_acquire); }
  // Whether a core may answer a GET from the cache now: the watch was confirmed recently enough that any
  // invalidation for us either reached us or makes its writer wait out our lease.
  // The clock is the TSC (no vDSO or syscall on a core's GET); the worker converts the deadline.
  bool cache_trusted() const noexcept {
    return rte_rdtsc() < trusted_until_tsc_.load(std::memory_order_acquire);
  }
  void wake() noexcept;  // after a producer's push
  Health health() const noexcept { return health_.load(std::memory_order_acquire); }
  RadosStats stats() const noexcept;
  std::string last_error() const;

  // librados callback threads.
  static void on_complete(rados_completion_t c, void* arg);
  static void on_notify(void* arg, uint64_t notify_id, uint64_t handle, uint64_t notifier_id, void* data,
                        size_t data_len);
  static void on_watch_error(void* arg, uint64_t cookie, int err);

 private:
  void run();
  bool connect();  // rados_create2 .. ioctx; false while the cluster cannot be reached
  void disconnect();
  bool drain_submissions();
  bool drain_done();
  bool drain_notifies();
  void tick(std::uint64_t now);
  void park(std::uint64_t timeout_ns);

  void start(const Submission& s);
  void start_probe(PendingOp& op);
  void start_read(PendingOp& op);
  void start_read_op(PendingOp& op, Phase phase, std::byte* into, std::size_t len);
  void start_write(PendingOp& op);
  void start_remove(PendingOp& op);
  bool flush_notifies();
  bool send_batch(NotifyBatch& b);  // false: it could not go out (batch_done ran)
  void batch_done(NotifyBatch& b, int ret);
  bool reply_names_only_us(const NotifyBatch& b) const;
  void peer_seen() noexcept;
  bool invalidate_all_of(const NotifyEvent& e);
  void on_done(std::uint32_t slot);
  void probe_done(PendingOp& op, int ret);
  void read_done(PendingOp& op, int ret);
  void write_done(PendingOp& op, int ret);
  void queue_notify(PendingOp& op);
  void notify_done(PendingOp& op, int ret, std::uint64_t sent_ns);
  void settle_mutation(PendingOp& op);  // PUT/DELETE: its write and its invalidation both ended
  void finish_mutation(PendingOp& op);  // PUT/DELETE: everyone told; update the local cache, answer
  bool verify_and_answer(PendingOp& op);
  void finish(PendingOp& op, Status s, Lease lease = {});
  bool new_completion(PendingOp& op);
  void release_rados(PendingOp& op);
  bool parse_crc(PendingOp& op);

  static std::size_t gen_slot(std::string_view key) noexcept;  // the key's slot in gens_ and mutating_
  std::uint64_t size_hint(const Submission& s) const noexcept;           // 0: none
  void set_size_hint(const Submission& s, std::uint64_t size) noexcept;  // at most kInlineRead: forget
  std::uint64_t key_gen(std::string_view key) const noexcept;
  // Whether a value read or written by a librados op started at `started_ns` may go into the cache as far
  // as other gateways' invalidation windows go (generations and local writes are checked by the callers).
  bool outside_windows(std::string_view key, std::uint64_t started_ns) const noexcept;
  void invalidate(std::string_view key, std::uint64_t until_ns);  // 0: no window
  void reset_cache();
  void set_health(Health h) noexcept { health_.store(h, std::memory_order_release); }
  void observe(std::size_t kind, std::uint64_t ns) noexcept;
  void start_watch();
  void start_probe_write(std::uint64_t now);

  RadosSettings s_;
  store::Store& cache_;
  std::unique_ptr<RadosCoreStorage[]> cores_;
  std::vector<PendingOp> ops_;
  std::vector<std::uint32_t> free_;
  std::vector<std::uint32_t> fenced_;
  std::unique_ptr<std::byte[]> scratch_;
  std::vector<std::uint64_t> size_hints_;  // key fingerprint << 32 | size; 0: none
  ValueRing<std::uint32_t> done_;    // slots whose librados op ended, MP/SC
  ValueRing<NotifyEvent> notifies_;  // MP/SC
  NotifyEvent notify_burst_;         // the one being handled (too large for the stack of a burst)
  std::vector<NotifyBatch> batches_;
  std::vector<std::uint32_t> free_batches_;
  std::vector<std::uint32_t> to_notify_;  // committed PUT/DELETEs waiting for the next batch
  std::atomic<bool> notify_overflow_{false};
  std::atomic<int> watch_error_{0};

  mutable std::mutex error_mu_;  // last_error_ only: the worker writes it, the daemon's log reads it
  std::string last_error_;
  rados_t cluster_ = nullptr;
  rados_ioctx_t io_ = nullptr;
  std::uint64_t instance_id_ = 0;
  std::string probe_oid_;
  std::uint64_t watch_cookie_ = 0;
  enum class WatchState : std::uint8_t {
    kNone,
    kRegistering,
    kActive,
    kUnregistering
  } watch_ = WatchState::kNone;
  rados_completion_t watch_comp_ = nullptr;
  CallbackArg watch_arg_{};
  CallbackArg unwatch_arg_{};
  std::uint64_t next_rewatch_ns_ = 0;
  rados_completion_t probe_comp_ = nullptr;
  CallbackArg probe_arg_{};
  std::uint64_t next_probe_ns_ = 0;
  bool probe_ok_ = false;
  std::uint64_t next_connect_ns_ = 0;
  std::uint64_t next_tick_ns_ = 0;

  std::array<std::uint32_t, kGenSlots> gens_{};
  std::array<std::uint32_t, kGenSlots> mutating_{};  // this gateway's PUT/DELETEs in flight, by key hash
  std::array<std::uint64_t, kGenSlots> no_cache_until_ns_{};  // other gateways' windows, by key hash
  std::uint64_t no_cache_all_until_ns_ = 0;                   // after a notify we could not read: every key
  // Whether the last notify of ours that came back was acked by our watch alone, with no other watcher and
  // nothing heard from another gateway since it went out: a PUT or DELETE then notifies nobody. Any sign
  // of another watcher bumps peer_epoch_, and a write started before that notifies after its commit.
  bool alone_ = false;
  std::uint64_t peer_epoch_ = 0;
  // A gateway announces its watch (a notify without keys) and serves or fills its cache only once every
  // watcher acked that: a gateway that was alone learns of it before it can matter.
  enum class Hello : std::uint8_t { kNone, kNeeded, kSent, kDone } hello_ = Hello::kNone;
  std::uint64_t epoch_ = 0;

  std::atomic<bool> accepting_{false};
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> trusted_until_tsc_{0};
  double tsc_per_ns_ = 0;  // dataplane::tsc_hz() per nanosecond, read at init
  std::atomic<Health> health_{Health::kConnecting};
  std::atomic<bool> parked_{false};
  std::atomic<std::uint32_t> wake_word_{0};
  std::atomic<std::uint64_t> wakeups_{0};
  std::thread thread_;

  // Worker-written counters.
  std::atomic<std::uint64_t> ops_count_[protocol::kObjectOpCount][kStatusCount] = {};
  std::atomic<std::uint64_t> misses_{0}, fills_{0}, fill_skipped_{0}, inval_rx_{0}, notifies_sent_{0},
      notify_timeouts_{0}, notify_resends_{0}, resets_{0}, crc_bad_{0}, rados_errors_{0}, inflight_{0};
  std::array<telemetry::LatencyHistogram, telemetry::kRadosOpKindNames.size()> latency_{};  // single writer
};

}  // namespace rdmagate::storage::rados

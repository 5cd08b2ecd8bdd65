// The RADOS backend's worker thread: the only thread that calls librados for objects. It takes the cores'
// ops off their rings, runs each as a small state machine over librados aio ops, keeps the cache coherent
// with the other gateways (watch/notify) and answers on the owning core's CompletionQueue. docs/store.md
// "The RADOS backend" explains the phases and why the cache may be trusted.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "services/storage/rados/rados_internal.hpp"

namespace rdmagate::storage::rados {

namespace {
constexpr std::uint64_t kMs = 1000000;
constexpr std::uint64_t kTickNs = 10 * kMs;
constexpr std::uint64_t kSpinNs = 20000;  // keep polling this long after the last work before parking
constexpr std::uint64_t kProbeEveryNs = 1000 * kMs;
constexpr std::uint64_t kRewatchEveryNs = 500 * kMs;

std::size_t hash_key(std::string_view key) noexcept {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a: only spreads keys over the generation slots
  for (const char c : key) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return static_cast<std::size_t>(h ^ (h >> 29));
}
}  // namespace

// ---- librados callback threads: push and wake, nothing else ----

void Worker::on_complete(rados_completion_t, void* arg) {
  auto* a = static_cast<CallbackArg*>(arg);
  // The done ring holds every slot at once, so this push cannot fail.
  (void)a->worker->done_.push(a->slot);
  a->worker->wake();
}

void Worker::on_notify(void* arg, uint64_t notify_id, uint64_t handle, uint64_t notifier_id, void* data,
                       size_t data_len) {
  auto* w = static_cast<Worker*>(arg);
  NotifyEvent e;
  e.notify_id = notify_id;
  e.cookie = handle;
  e.self = notifier_id == w->instance_id_ ? 1 : 0;
  if (data_len == 0 || data_len > kNotifyPayload || data == nullptr) {
    // Not a gateway's invalidation: we cannot tell what changed, so forget everything. The notifier still
    // gets our ack, after the reset (len 0 asks for it).
    e.len = 0;
  } else {
    e.len = static_cast<std::uint32_t>(data_len);
    std::memcpy(e.payload, data, data_len);
  }
  // A full ring: we cannot ack this notify, so its writer times out and waits out our lease; we reset the
  // cache as soon as the worker sees the flag.
  if (!w->notifies_.push(e)) w->notify_overflow_.store(true, std::memory_order_release);
  w->wake();
}

void Worker::on_watch_error(void* arg, uint64_t, int err) {
  auto* w = static_cast<Worker*>(arg);
  w->watch_error_.store(err != 0 ? err : -EIO, std::memory_order_release);
  w->wake();
}

// ---- the loop ----

void Worker::run() {
  if (!s_.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const int c : s_.cpus) CPU_SET(c, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  std::uint64_t last_work = steady_ns();
  std::uint64_t stop_deadline = 0;
  for (;;) {
    std::uint64_t now = steady_ns();
    const bool stopping = stop_.load(std::memory_order_acquire);
    if (stopping && stop_deadline == 0) {
      accepting_.store(false, std::memory_order_release);
      stop_deadline = now +
                      (std::uint64_t{s_.op_timeout_ms} * 2 + s_.notify_timeout_ms + s_.cache_lease_ms) * kMs +
                      5000 * kMs;
    }
    if (io_ == nullptr) {
      if (stopping) break;
      if (now >= next_connect_ns_ && !connect()) next_connect_ns_ = steady_ns() + 1000 * kMs;
      if (io_ == nullptr)
        park(std::min<std::uint64_t>(next_connect_ns_ - std::min(next_connect_ns_, now), 100 * kMs));
      continue;
    }
    bool did = drain_submissions();
    did |= drain_done();
    did |= drain_notifies();
    did |= flush_notifies();
    now = steady_ns();
    if (now >= next_tick_ns_) {
      tick(now);
      next_tick_ns_ = now + kTickNs;
    }
    if (stopping) {
      const bool idle = free_.size() == ops_.size() && free_batches_.size() == batches_.size() &&
                        probe_comp_ == nullptr && watch_comp_ == nullptr;
      if (idle || now >= stop_deadline) break;
    }
    if (did) {
      last_work = now;
    } else if (now - last_work > kSpinNs) {
      park(next_tick_ns_ > now ? next_tick_ns_ - now : 0);
    }
  }
  disconnect();
}

void Worker::park(std::uint64_t timeout_ns) {
  if (timeout_ns == 0) return;
  // Worker::wake has the other half of this protocol.
  const std::uint32_t word = wake_word_.load(std::memory_order_seq_cst);
  bool work = !done_.empty() || !notifies_.empty() || stop_.load(std::memory_order_relaxed) ||
              watch_error_.load(std::memory_order_relaxed) != 0;
  for (std::uint32_t c = 0; c < s_.cores && !work; ++c) work = !cores_[c].sq_.empty();
  if (work) return;
  parked_.store(true, std::memory_order_seq_cst);
  if (wake_word_.load(std::memory_order_seq_cst) == word) futex_wait(&wake_word_, word, timeout_ns);
  parked_.store(false, std::memory_order_relaxed);
}

bool Worker::drain_submissions() {
  bool did = false;
  Submission burst[kBurst];
  for (std::uint32_t c = 0; c < s_.cores; ++c) {
    const std::uint32_t n = cores_[c].sq_.pop_burst(burst, kBurst);
    for (std::uint32_t i = 0; i < n; ++i) start(burst[i]);
    did |= n != 0;
  }
  return did;
}

bool Worker::drain_done() {
  std::uint32_t slots[kBurst];
  const std::uint32_t n = done_.pop_burst(slots, kBurst);
  for (std::uint32_t i = 0; i < n; ++i) on_done(slots[i]);
  return n != 0;
}

bool Worker::drain_notifies() {
  bool did = false;
  if (notify_overflow_.exchange(false, std::memory_order_acq_rel)) {
    reset_cache();
    did = true;
  }
  std::uint32_t n = 0;
  for (; n < 8; ++n) {
    NotifyEvent& e = notify_burst_;
    if (notifies_.pop_burst(&e, 1) == 0) break;
    bump(inval_rx_);
    // Our own notify: the ops that sent it invalidate after every ack is in (finish_mutation), and a fill
    // racing them is kept out of the cache by mutating_. Another's (invalidation.hpp): its keys, and a
    // window in which nothing read or written of them may enter our cache, because its writes may commit
    // only after our ack; anything else makes us forget the whole cache and fill nothing for as long as
    // our own window.
    if (e.self == 0) peer_seen();
    if (e.self == 0 && !invalidate_all_of(e)) {
      reset_cache();
      no_cache_all_until_ns_ = steady_ns() + std::uint64_t{s_.notify_timeout_ms} * kMs;
    }
    // Acked only once our cache no longer holds the key: the notifier answers its client after every ack.
    rados_notify_ack(io_, kWatchObject, e.notify_id, e.cookie, nullptr, 0);
  }
  return did || n != 0;
}

void Worker::tick(std::uint64_t now) {
  const int err = watch_error_.exchange(0, std::memory_order_acq_rel);
  if (err != 0 && watch_ == WatchState::kActive) {
    // Notifies may have been missed: nothing cached can be trusted any more.
    trusted_until_tsc_.store(0, std::memory_order_release);
    reset_cache();
    peer_seen();
    hello_ = Hello::kNone;
    watch_ = WatchState::kUnregistering;
    if (rados_aio_create_completion2(&unwatch_arg_, on_complete, &watch_comp_) == 0) {
      if (rados_aio_unwatch(io_, watch_cookie_, watch_comp_) != 0) {
        rados_aio_release(watch_comp_);
        watch_comp_ = nullptr;
        watch_ = WatchState::kNone;
      }
    } else {
      watch_comp_ = nullptr;
      watch_ = WatchState::kNone;
    }
  }
  if (watch_ == WatchState::kActive) {
    const int ms = rados_watch_check(io_, watch_cookie_);
    if (ms < 0) {
      watch_error_.store(ms, std::memory_order_release);
    } else if (hello_ != Hello::kDone) {
      trusted_until_tsc_.store(0, std::memory_order_release);
    } else {
      // Trusted until the last confirmation plus 90% of the lease (the rest covers the OSD's clock rate).
      const std::uint64_t confirmed = now - std::min<std::uint64_t>(now, std::uint64_t(ms) * kMs);
      const std::uint64_t until = confirmed + std::uint64_t{s_.cache_lease_ms} * kMs * 9 / 10;
      const std::uint64_t left = until > now ? until - now : 0;  // `now` is this tick's clock read
      trusted_until_tsc_.store(
          left == 0 ? 0 : rte_rdtsc() + static_cast<std::uint64_t>(static_cast<double>(left) * tsc_per_ns_),
          std::memory_order_release);
    }
  } else if (watch_ == WatchState::kNone && !stop_.load(std::memory_order_relaxed) &&
             now >= next_rewatch_ns_) {
    start_watch();
    next_rewatch_ns_ = now + kRewatchEveryNs;
  }
  if (probe_comp_ == nullptr && now >= next_probe_ns_ && !stop_.load(std::memory_order_relaxed))
    start_probe_write(now);
  for (std::size_t i = 0; i < fenced_.size();) {
    PendingOp& op = ops_[fenced_[i]];
    if (op.fence_until_ns <= now || stop_.load(std::memory_order_relaxed)) {
      fenced_[i] = fenced_.back();
      fenced_.pop_back();
      finish_mutation(op);
    } else {
      ++i;
    }
  }
  Health h = Health::kReady;
  if (watch_ != WatchState::kActive) {
    h = Health::kWatchLost;
  } else if (hello_ != Hello::kDone) {
    h = Health::kAnnouncing;
  } else if (!probe_ok_) {
    h = Health::kProbeFailed;
  }
  set_health(h);
}

void Worker::start_watch() {
  watch_ = WatchState::kRegistering;
  if (rados_aio_create_completion2(&watch_arg_, on_complete, &watch_comp_) != 0) {
    watch_comp_ = nullptr;
    watch_ = WatchState::kNone;
    return;
  }
  // The OSD keeps our watch this long after losing us; twice the lease, so that it never drops us (and so
  // stops waiting for our acks) while we may still trust our cache.
  const std::uint32_t timeout_s = (2 * s_.cache_lease_ms + 999) / 1000;
  if (rados_aio_watch2(io_, kWatchObject, watch_comp_, &watch_cookie_, on_notify, on_watch_error, timeout_s,
                       this) != 0) {
    rados_aio_release(watch_comp_);
    watch_comp_ = nullptr;
    watch_ = WatchState::kNone;
  }
}

void Worker::start_probe_write(std::uint64_t now) {
  if (rados_aio_create_completion2(&probe_arg_, on_complete, &probe_comp_) != 0) {
    probe_comp_ = nullptr;
    return;
  }
  char stamp[24];
  const int n = std::snprintf(stamp, sizeof stamp, "%llu", static_cast<unsigned long long>(now));
  if (rados_aio_write_full(io_, probe_oid_.c_str(), probe_comp_, stamp, static_cast<size_t>(n)) != 0) {
    rados_aio_release(probe_comp_);
    probe_comp_ = nullptr;
    probe_ok_ = false;
  }
  next_probe_ns_ = now + kProbeEveryNs;
}

// ---- ops ----

bool Worker::new_completion(PendingOp& op) {
  if (rados_aio_create_completion2(&op.arg, on_complete, &op.comp) != 0) {
    op.comp = nullptr;
    return false;
  }
  op.rados_started_ns = steady_ns();
  inflight_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Worker::start(const Submission& s) {
  if (free_.empty()) {  // cannot happen while the service keeps its request bound; stay exact anyway
    store::Reservation v = s.value;
    if (s.kind == OpKind::kPut) cache_.abort(&v);
    if (!cores_[s.core].cq_->push(Completion{s.tag, {}, Status::kUnavailable})) return;
    bump(ops_count_[static_cast<unsigned>(object_op(s.kind))][static_cast<unsigned>(Status::kUnavailable)]);
    return;
  }
  const std::uint32_t slot = free_.back();
  free_.pop_back();
  PendingOp& op = ops_[slot];
  op.sub = s;
  op.attempts = 0;
  op.fill = {};
  op.hinted = false;
  switch (s.kind) {
    case OpKind::kGet:
      bump(misses_);
      op.key_gen = key_gen(s.key_view());
      start_probe(op);
      break;
    case OpKind::kPut:
    case OpKind::kDelete:
      if (!s.cacheable()) {
        // No gateway caches a tenant's objects: nobody to tell, no cached value to keep out.
        op.write_ret = 0;
        op.unannounced = false;
        op.waiting = kWaitWrite;
        if (s.kind == OpKind::kPut) {
          start_write(op);
        } else {
          start_remove(op);
        }
        break;
      }
      // Remote changes to the key seen after this (gen) or a local mutation beside this one (mutating_)
      // keep the result out of the cache: only a lone writer knows its value is RADOS's newest.
      op.key_gen = key_gen(s.key_view());
      ++mutating_[gen_slot(s.key_view())];
      // The invalidation goes out beside the write rather than after it, so a PUT costs the longer of the
      // two instead of their sum; settle_mutation says when that was enough.
      op.write_ret = 0;
      op.notify_ret = 0;
      op.peer_epoch = peer_epoch_;
      op.unannounced = alone_;
      if (alone_) {
        op.waiting = kWaitWrite;
      } else {
        op.waiting = kWaitWrite | kWaitNotify;
        queue_notify(op);
      }
      if (s.kind == OpKind::kPut) {
        start_write(op);
      } else {
        start_remove(op);
      }
      break;
  }
}

// A value over kInlineRead would take a second op once the probe told its size; when the key's size is
// known from an earlier op, the probe reads that many bytes straight into the cache block instead. A wrong
// hint costs what no hint does (probe_done falls back), so hints are never invalidated, only replaced.
void Worker::start_probe(PendingOp& op) {
  const std::uint64_t hint = op.attempts == 0 ? size_hint(op.sub) : 0;
  op.hinted = hint != 0 && cache_.reserve(s_.cache_core, op.sub.key_view(), hint, &op.fill) == Status::kOk;
  if (op.hinted) return start_read_op(op, Phase::kProbe, op.fill.data, op.fill.size);
  start_read_op(op, Phase::kProbe, op.scratch, kInlineRead);
}

void Worker::start_read(PendingOp& op) {
  start_read_op(op, Phase::kRead, op.fill.data, op.fill.size);
}

// One read op: stat, every xattr (the checksum) and the first `len` bytes into `into`, atomically.
void Worker::start_read_op(PendingOp& op, Phase phase, std::byte* into, std::size_t len) {
  op.phase = phase;
  if (!new_completion(op)) return read_done(op, -ENOMEM);
  op.read_op = rados_create_read_op();
  op.xattrs = nullptr;
  rados_read_op_stat(op.read_op, &op.size, &op.mtime, &op.stat_rval);
  rados_read_op_getxattrs(op.read_op, &op.xattrs, &op.xattr_rval);
  rados_read_op_read(op.read_op, 0, len, reinterpret_cast<char*>(into), &op.bytes_read, &op.read_rval);
  const std::string oid = object_name(op.sub.ns_view(), op.sub.key_view());
  if (rados_aio_read_op_operate(op.read_op, io_, op.comp, oid.c_str(), 0) != 0) read_done(op, -EIO);
}

void Worker::start_write(PendingOp& op) {
  op.phase = Phase::kWrite;
  const store::Reservation& v = op.sub.value;
  op.crc = crc32c(v.data, v.size);
  std::snprintf(op.crc_text, sizeof op.crc_text, "%08x", op.crc);
  if (!new_completion(op)) return write_done(op, -ENOMEM);
  op.write_op = rados_create_write_op();
  // librados copies the bytes into its own buffer here (the C API's write_full appends to a bufferlist);
  // docs/store.md says why we do not hand it the cache block itself.
  static const char kEmpty[1] = {0};
  rados_write_op_write_full(op.write_op, v.size == 0 ? kEmpty : reinterpret_cast<const char*>(v.data),
                            v.size);
  rados_write_op_setxattr(op.write_op, kCrcXattr, op.crc_text, 8);
  const std::string oid = object_name(op.sub.ns_view(), op.sub.key_view());
  if (rados_aio_write_op_operate(op.write_op, io_, op.comp, oid.c_str(), nullptr, 0) != 0)
    write_done(op, -EIO);
}

void Worker::start_remove(PendingOp& op) {
  op.phase = Phase::kRemove;
  if (!new_completion(op)) return write_done(op, -ENOMEM);
  op.write_op = rados_create_write_op();
  rados_write_op_remove(op.write_op);
  const std::string oid = object_name(op.sub.ns_view(), op.sub.key_view());
  if (rados_aio_write_op_operate(op.write_op, io_, op.comp, oid.c_str(), nullptr, 0) != 0)
    write_done(op, -EIO);
}

// The invalidations of every write that committed in one turn go out as one notify: a notify costs the OSD
// an op plus one ack op per gateway, so one per write would cost three times what the write does.
bool Worker::flush_notifies() {
  bool did = false;
  if (hello_ == Hello::kNeeded && watch_ == WatchState::kActive && !free_batches_.empty()) {
    NotifyBatch& b = batches_[free_batches_.back()];
    free_batches_.pop_back();
    b.slots.clear();
    b.len = begin_invalidation(b.payload, s_.notify_timeout_ms);
    b.hello = true;
    hello_ = Hello::kSent;
    send_batch(b);
    did = true;
  }
  while (!to_notify_.empty() && !free_batches_.empty()) {
    NotifyBatch& b = batches_[free_batches_.back()];
    free_batches_.pop_back();
    b.slots.clear();
    b.len = begin_invalidation(b.payload, s_.notify_timeout_ms);
    b.hello = false;
    std::size_t taken = 0;
    for (; taken < to_notify_.size(); ++taken) {
      const std::size_t len = append_key(b.payload, b.len, ops_[to_notify_[taken]].sub.key_view());
      if (len == 0) break;  // full (keys are 1..250 bytes: the service checked them)
      b.len = len;
      b.slots.push_back(to_notify_[taken]);
    }
    to_notify_.erase(to_notify_.begin(), to_notify_.begin() + static_cast<std::ptrdiff_t>(taken));
    send_batch(b);
    did = true;
  }
  return did;
}

bool Worker::send_batch(NotifyBatch& b) {
  bump(notifies_sent_);
  b.reply = nullptr;
  b.reply_len = 0;
  b.started_ns = steady_ns();
  b.peer_epoch = peer_epoch_;
  if (rados_aio_create_completion2(&b.arg, on_complete, &b.comp) != 0) {
    b.comp = nullptr;
    batch_done(b, -ENOMEM);
    return false;
  }
  if (rados_aio_notify(io_, kWatchObject, b.comp, b.payload, static_cast<int>(b.len), s_.notify_timeout_ms,
                       &b.reply, &b.reply_len) != 0) {
    batch_done(b, -EIO);
    return false;
  }
  return true;
}

void Worker::batch_done(NotifyBatch& b, int ret) {
  if (b.comp != nullptr) {
    rados_aio_release(b.comp);
    b.comp = nullptr;
    observe(3, steady_ns() - b.started_ns);
  }
  if (ret >= 0 && reply_names_only_us(b)) {
    alone_ = b.peer_epoch == peer_epoch_;
  } else {
    peer_seen();
  }
  if (b.hello) {
    if (ret >= 0) {
      hello_ = Hello::kDone;
      no_cache_all_until_ns_ = steady_ns();  // what we read before every watcher knew of us stays out
    } else if (hello_ == Hello::kSent) {
      hello_ = Hello::kNeeded;
    }
    b.hello = false;
  }
  if (b.reply != nullptr) rados_buffer_free(b.reply);
  b.reply = nullptr;
  for (const std::uint32_t slot : b.slots) notify_done(ops_[slot], ret, b.started_ns);
  b.slots.clear();
  free_batches_.push_back(b.arg.slot - kBatchSlotFirst);
}

void Worker::release_rados(PendingOp& op) {
  if (op.xattrs != nullptr) {
    rados_getxattrs_end(op.xattrs);
    op.xattrs = nullptr;
  }
  if (op.read_op != nullptr) {
    rados_release_read_op(op.read_op);
    op.read_op = nullptr;
  }
  if (op.write_op != nullptr) {
    rados_release_write_op(op.write_op);
    op.write_op = nullptr;
  }
  if (op.comp != nullptr) {
    rados_aio_release(op.comp);
    op.comp = nullptr;
    inflight_.fetch_sub(1, std::memory_order_relaxed);
  }
}

void Worker::on_done(std::uint32_t slot) {
  if (slot == kWatchSlot || slot == kUnwatchSlot) {
    const int r = rados_aio_get_return_value(watch_comp_);
    rados_aio_release(watch_comp_);
    watch_comp_ = nullptr;
    if (slot == kWatchSlot && r == 0) {
      // Whatever was cached before this watch existed may have missed notifies; and until every watcher
      // acked our hello, one that believes itself alone may not tell us of its writes.
      reset_cache();
      peer_seen();
      hello_ = Hello::kNeeded;
      no_cache_all_until_ns_ = UINT64_MAX;
      watch_ = WatchState::kActive;
    } else {
      watch_ = WatchState::kNone;
    }
    return;
  }
  if (slot == kProbeSlot) {
    probe_ok_ = rados_aio_get_return_value(probe_comp_) == 0;
    rados_aio_release(probe_comp_);
    probe_comp_ = nullptr;
    return;
  }
  if (slot >= kBatchSlotFirst) {
    NotifyBatch& b = batches_[slot - kBatchSlotFirst];
    const int ret = rados_aio_get_return_value(b.comp);
    if (ret < 0 && ret != -ETIMEDOUT) bump(rados_errors_);
    batch_done(b, ret);
    return;
  }
  PendingOp& op = ops_[slot];
  const int ret = rados_aio_get_return_value(op.comp);
  const std::uint64_t ns = steady_ns() - op.rados_started_ns;
  switch (op.phase) {
    case Phase::kProbe:
    case Phase::kRead:
      observe(0, ns);
      break;
    case Phase::kWrite:
      observe(1, ns);
      break;
    case Phase::kRemove:
      observe(2, ns);
      break;
    case Phase::kFree:
    case Phase::kNotify:
    case Phase::kFence:
      return;  // no librados op of the op's own runs in these phases (a notify is its batch's)
  }
  if (ret < 0 && ret != -ENOENT && ret != -ETIMEDOUT) bump(rados_errors_);
  switch (op.phase) {
    case Phase::kProbe:
      probe_done(op, ret);
      break;
    case Phase::kRead:
      read_done(op, ret);
      break;
    case Phase::kWrite:
    case Phase::kRemove:
      write_done(op, ret);
      break;
    case Phase::kFree:
    case Phase::kNotify:
    case Phase::kFence:
      break;
  }
}

bool Worker::parse_crc(PendingOp& op) {
  op.has_crc = false;
  if (op.xattrs == nullptr || op.xattr_rval < 0) return false;
  for (;;) {
    const char* name = nullptr;
    const char* val = nullptr;
    std::size_t len = 0;
    if (rados_getxattrs_next(op.xattrs, &name, &val, &len) != 0 || name == nullptr) break;
    if (std::strcmp(name, kCrcXattr) != 0 || len != 8) continue;
    std::uint32_t v = 0;
    bool ok = true;
    for (std::size_t i = 0; i < 8; ++i) {
      const char c = val[i];
      std::uint32_t d;
      if (c >= '0' && c <= '9') {
        d = static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<std::uint32_t>(c - 'a' + 10);
      } else {
        ok = false;
        break;
      }
      v = v << 4 | d;
    }
    if (ok) {
      op.crc = v;
      op.has_crc = true;
    }
  }
  return op.has_crc;
}

void Worker::probe_done(PendingOp& op, int ret) {
  const bool has_crc = ret >= 0 && parse_crc(op);
  release_rados(op);
  if (ret < 0 || !has_crc || op.size > s_.max_value) cache_.abort(&op.fill);  // a no-op unless hinted
  if (ret == -ENOENT) {
    set_size_hint(op.sub, 0);
    return finish(op, Status::kNotFound);
  }
  if (ret < 0) return finish(op, Status::kUnavailable);
  if (!has_crc) {  // not written by a gateway, or its checksum was removed: the bytes cannot be vouched for
    bump(crc_bad_);
    return finish(op, Status::kCorrupt);
  }
  if (op.size > s_.max_value) return finish(op, Status::kTooLarge);
  if (op.hinted) {
    op.hinted = false;
    if (op.size == op.fill.size && op.bytes_read == op.size) {  // the whole value in one op
      verify_and_answer(op);
      return;
    }
    cache_.abort(&op.fill);
    if (op.size <= kInlineRead) {  // its bytes went into the block just given back: read them again
      if (++op.attempts >= kMaxReadAttempts) return finish(op, Status::kUnavailable);
      return start_probe(op);
    }
  }
  const Status st = cache_.reserve(s_.cache_core, op.sub.key_view(), op.size, &op.fill);
  if (st != Status::kOk) return finish(op, st);
  if (op.size <= kInlineRead) {
    if (op.bytes_read != op.size) {  // stat and read disagree: the object changed within the op
      cache_.abort(&op.fill);
      if (++op.attempts >= kMaxReadAttempts) return finish(op, Status::kUnavailable);
      return start_probe(op);
    }
    if (op.size != 0) std::memcpy(op.fill.data, op.scratch, op.size);
    verify_and_answer(op);
    return;
  }
  start_read(op);
}

// Also the failure of a read op that could not be submitted (either phase; only kRead holds a fill).
void Worker::read_done(PendingOp& op, int ret) {
  const bool has_crc = ret >= 0 && parse_crc(op);
  release_rados(op);
  if (ret < 0) {
    cache_.abort(&op.fill);  // a no-op in the probe phase, which holds none
    return finish(op, ret == -ENOENT ? Status::kNotFound : Status::kUnavailable);
  }
  if (!has_crc) {
    cache_.abort(&op.fill);
    bump(crc_bad_);
    return finish(op, Status::kCorrupt);
  }
  if (op.size != op.fill.size || op.bytes_read != op.size) {  // overwritten between our two ops
    cache_.abort(&op.fill);
    if (++op.attempts >= kMaxReadAttempts) return finish(op, Status::kUnavailable);
    return start_probe(op);
  }
  verify_and_answer(op);
}

bool Worker::verify_and_answer(PendingOp& op) {
  if (crc32c(op.fill.data, op.fill.size) != op.crc) {
    cache_.abort(&op.fill);
    bump(crc_bad_);
    finish(op, Status::kCorrupt);
    return false;
  }
  set_size_hint(op.sub, op.fill.size);
  const std::string_view key = op.sub.key_view();
  if (!op.sub.cacheable()) {  // a tenant's value: handed over in its unpublished block, never cached
    const Lease lease{op.fill.data, op.fill.size, op.fill.token | kReservationBit};
    op.fill = {};
    finish(op, Status::kOk, lease);
    return true;
  }
  if (op.key_gen == key_gen(key) && mutating_[gen_slot(key)] == 0 &&
      outside_windows(key, op.rados_started_ns) && cache_trusted()) {
    store::PinnedValue pin;
    const Status st = cache_.commit(s_.cache_core, &op.fill, &pin);
    op.fill = {};
    if (st != Status::kOk) {  // the cache's index window is full; commit has released the block
      finish(op, st);
      return false;
    }
    bump(fills_);
    finish(op, Status::kOk, Lease{const_cast<std::byte*>(pin.data), pin.size, pin.token});
    return true;
  }
  bump(fill_skipped_);
  const Lease lease{op.fill.data, op.fill.size, op.fill.token | kReservationBit};
  op.fill = {};
  finish(op, Status::kOk, lease);
  return true;
}

void Worker::write_done(PendingOp& op, int ret) {
  release_rados(op);
  op.write_ret = ret;
  op.committed_ns = steady_ns();
  op.waiting &= static_cast<std::uint8_t>(~kWaitWrite);
  op.phase = Phase::kNotify;
  if (op.waiting == 0) settle_mutation(op);
}

void Worker::queue_notify(PendingOp& op) {
  to_notify_.push_back(static_cast<std::uint32_t>(&op - ops_.data()));
}

void Worker::notify_done(PendingOp& op, int ret, std::uint64_t sent_ns) {
  if (ret < 0) bump(notify_timeouts_);
  op.notify_ret = ret;
  op.notify_sent_ns = sent_ns;
  op.waiting &= static_cast<std::uint8_t>(~kWaitNotify);
  if (op.waiting == 0) settle_mutation(op);
}

// Every gateway that acked our invalidation dropped the key and then, for the window it carries, caches
// nothing of it from ops it starts. A write that committed within 90% of that window after the notify went
// out (the rest covers the clocks' rates) is therefore invisible to no cache: any read they start later
// sees it. A later commit, or an invalidation some gateway did not ack while the write was still in flight,
// needs a second notify after the commit (the plain protocol: drop, then ack); only when that one is not
// acked do we wait out the lease.
void Worker::settle_mutation(PendingOp& op) {
  const bool is_put = op.sub.kind == OpKind::kPut;
  if (op.write_ret < 0) {
    if (op.sub.cacheable()) --mutating_[gen_slot(op.sub.key_view())];
    if (is_put) cache_.abort(&op.sub.value);
    if (op.write_ret == -ENOENT && !is_put) return finish(op, Status::kNotFound);
    return finish(
        op, op.write_ret == -EFBIG || op.write_ret == -EMSGSIZE ? Status::kTooLarge : Status::kUnavailable);
  }
  set_size_hint(op.sub, is_put ? op.sub.value.size : 0);
  if (!op.sub.cacheable()) {
    if (is_put) cache_.abort(&op.sub.value);
    return finish(op, Status::kOk);
  }
  if (op.unannounced) {
    // Nobody else watched when it started; if nobody appeared before its commit was seen here, a newcomer
    // acks its hello (and so may fill its cache) only after that, from RADOS' new value.
    op.unannounced = false;
    if (op.peer_epoch == peer_epoch_) return finish_mutation(op);
    bump(notify_resends_);
    op.waiting = kWaitNotify;
    op.notify_sent_ns = 0;
    return queue_notify(op);
  }
  const std::uint64_t window_ns = std::uint64_t{s_.notify_timeout_ms} * kMs * 9 / 10;
  const bool after_commit = op.notify_sent_ns >= op.committed_ns;
  if (op.notify_ret >= 0 && (after_commit || op.committed_ns - op.notify_sent_ns <= window_ns))
    return finish_mutation(op);
  if (!after_commit) {
    bump(notify_resends_);
    op.waiting = kWaitNotify;
    return queue_notify(op);
  }
  // Some gateway did not ack (dead, partitioned, or its watch broken): it may still serve the old value
  // from its cache, but never past its lease, counted from before now. Answer once that has run out.
  op.phase = Phase::kFence;
  op.fence_until_ns = steady_ns() + std::uint64_t{s_.cache_lease_ms} * kMs + 100 * kMs;
  fenced_.push_back(static_cast<std::uint32_t>(&op - ops_.data()));
}

void Worker::finish_mutation(PendingOp& op) {
  const std::string_view key = op.sub.key_view();
  std::uint32_t& mutating = mutating_[gen_slot(key)];
  const bool alone = mutating == 1 && op.key_gen == key_gen(key) && outside_windows(key, op.rados_started_ns);
  --mutating;
  invalidate(key, 0);
  if (op.sub.kind == OpKind::kPut) {
    if (alone && cache_trusted()) {
      (void)cache_.commit(s_.cache_core, &op.sub.value);  // takes the reservation whatever the outcome
    } else {
      cache_.abort(&op.sub.value);
    }
  }
  finish(op, Status::kOk);
}

void Worker::finish(PendingOp& op, Status s, Lease lease) {
  const Submission& sub = op.sub;
  bump(ops_count_[static_cast<unsigned>(object_op(sub.kind))][static_cast<unsigned>(s)]);
  if (!cores_[sub.core].cq_->push(Completion{sub.tag, lease, s})) {
    // Cannot happen (the queue holds every op the core may have pending); never strand the lease.
    RadosCoreStorage& c = cores_[sub.core];
    c.release(&lease);
  }
  op.phase = Phase::kFree;
  free_.push_back(static_cast<std::uint32_t>(&op - ops_.data()));
}

std::size_t Worker::gen_slot(std::string_view key) noexcept {
  return hash_key(key) % kGenSlots;
}

namespace {
// The hint table's slot and a fingerprint (never 0) of the object the submission names.
struct HintKey {
  std::size_t slot;
  std::uint64_t tag;
};
HintKey hint_key(const Submission& s) noexcept {
  std::uint64_t h = hash_key(s.key_view());
  if (s.ns_len != 0) h ^= hash_key(s.ns_view()) * 0x9e3779b97f4a7c15ull;
  return {static_cast<std::size_t>(h % Worker::kSizeHints), (h >> 32 | 1) << 32};
}
}  // namespace

std::uint64_t Worker::size_hint(const Submission& s) const noexcept {
  const HintKey k = hint_key(s);
  const std::uint64_t e = size_hints_[k.slot];
  return (e & ~0xffffffffull) == k.tag ? e & 0xffffffffull : 0;
}

void Worker::set_size_hint(const Submission& s, std::uint64_t size) noexcept {
  const HintKey k = hint_key(s);
  std::uint64_t& e = size_hints_[k.slot];
  if (size > kInlineRead && size <= 0xffffffffull) {
    e = k.tag | size;
  } else if ((e & ~0xffffffffull) == k.tag) {
    e = 0;
  }
}

std::uint64_t Worker::key_gen(std::string_view key) const noexcept {
  return epoch_ << 32 | gens_[gen_slot(key)];
}

bool Worker::invalidate_all_of(const NotifyEvent& e) {
  std::uint32_t window_ms = 0;
  const std::uint64_t now = steady_ns();
  // The window is only known once the header is read, which parse_invalidation does before the first key.
  return parse_invalidation({e.payload, e.len}, &window_ms, [&](std::string_view key) {
    invalidate(key, now + std::uint64_t{window_ms} * kMs);
  });
}

void Worker::invalidate(std::string_view key, std::uint64_t until_ns) {
  const std::size_t slot = gen_slot(key);
  ++gens_[slot];
  no_cache_until_ns_[slot] = std::max(no_cache_until_ns_[slot], until_ns);
  (void)cache_.drop(key);
}

// The reply lists who acked and who timed out: alone when that is our own watch only.
bool Worker::reply_names_only_us(const NotifyBatch& b) const {
  if (b.reply == nullptr || watch_ != WatchState::kActive) return false;
  notify_ack_t* acks = nullptr;
  notify_timeout_t* timeouts = nullptr;
  std::size_t n_acks = 0, n_timeouts = 0;
  if (rados_decode_notify_response(b.reply, b.reply_len, &acks, &n_acks, &timeouts, &n_timeouts) != 0)
    return false;
  const bool only_us = n_acks == 1 && n_timeouts == 0 && acks[0].notifier_id == instance_id_ &&
                       acks[0].cookie == watch_cookie_;
  rados_free_notify_response(acks, n_acks, timeouts);
  return only_us;
}

void Worker::peer_seen() noexcept {
  alone_ = false;
  ++peer_epoch_;
}

bool Worker::outside_windows(std::string_view key, std::uint64_t started_ns) const noexcept {
  return started_ns >= no_cache_until_ns_[gen_slot(key)] && started_ns >= no_cache_all_until_ns_;
}

void Worker::reset_cache() {
  ++epoch_;
  cache_.drop_all();
  bump(resets_);
}

void Worker::observe(std::size_t kind, std::uint64_t ns) noexcept {
  latency_[kind].observe_ns(ns);
}

}  // namespace rdmagate::storage::rados

// Setup and teardown of the RADOS backend: the worker's tables and rings, the connection to the cluster
// (made by the worker, retried until it succeeds), the object naming and the checksum.
#include "services/storage/rados/rados_store.hpp"

#include <isa-l/crc.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dataplane/tsc.hpp"
#include "services/storage/rados/rados_internal.hpp"

namespace rdmagate::storage::rados {

const char* health_name(Health h) noexcept {
  switch (h) {
    case Health::kConnecting:
      return "connecting";
    case Health::kReady:
      return "ready";
    case Health::kProbeFailed:
      return "probe_failed";
    case Health::kWatchLost:
      return "watch_lost";
    case Health::kAnnouncing:
      return "announcing";
  }
  return "unknown";
}

std::string object_name(std::string_view key) {
  return object_name({}, key);
}

std::string object_name(std::string_view tenant, std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(4 + (tenant.size() + key.size()) * 3);
  // Escaped like the key, so that no tenant name can hold the '/' that ends it (configured names cannot
  // anyway: [A-Za-z0-9._@-], where only '@' is escaped, as %40).
  const auto escape = [&](std::string_view bytes) {
    for (const char ch : bytes) {
      const auto c = static_cast<unsigned char>(ch);
      const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                         c == '_' || c == '.' || c == '-';
      if (plain) {
        out += static_cast<char>(c);
      } else {
        out += '%';
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
    }
  };
  if (tenant.empty()) {
    out += "o/";
  } else {
    out += "t/";
    escape(tenant);
    out += '/';
  }
  escape(key);
  return out;
}

// ISA-L's crc32_iscsi is CRC32C without the inversions, folding several streams of the crc32 instruction
// at once (a single stream, as rte_hash_crc runs it, took 180 us per MiB on the worker, a fifth of its
// time under 1 MiB GETs). Ceph and SPDK use it for the same checksum.
std::uint32_t crc32c(const std::byte* data, std::size_t len) noexcept {
  std::uint32_t crc = 0xffffffffu;
  while (len > 0) {
    const auto n = static_cast<int>(std::min<std::size_t>(len, 1u << 30));
    crc = crc32_iscsi(const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(data)), n, crc);
    data += n;
    len -= static_cast<std::size_t>(n);
  }
  return ~crc;
}

bool Worker::init(std::string* error) {
  if (s_.cores == 0 || s_.max_requests == 0) {
    *error = "rados: cores and max_requests must be at least 1";
    return false;
  }
  const std::uint64_t slots = std::uint64_t{s_.cores} * s_.max_requests;
  if (slots > dataplane::kMaxRingCapacity - 8 - kBatches) {
    *error = "rados: cores x max_requests too large";
    return false;
  }
  kWatchSlot = static_cast<std::uint32_t>(slots);
  kUnwatchSlot = kWatchSlot + 1;
  kProbeSlot = kWatchSlot + 2;
  kBatchSlotFirst = kWatchSlot + 3;
  watch_arg_ = {this, kWatchSlot};
  unwatch_arg_ = {this, kUnwatchSlot};
  probe_arg_ = {this, kProbeSlot};

  ops_.resize(slots);
  scratch_.reset(new (std::nothrow) std::byte[slots * kInlineRead]);
  if (!scratch_) {
    *error = "rados: out of memory for the read scratch";
    return false;
  }
  size_hints_.assign(kSizeHints, 0);
  free_.reserve(slots);
  fenced_.reserve(slots);
  for (std::uint64_t i = slots; i-- > 0;) {
    ops_[i].arg = {this, static_cast<std::uint32_t>(i)};
    ops_[i].scratch = scratch_.get() + i * kInlineRead;
    free_.push_back(static_cast<std::uint32_t>(i));
  }
  batches_.resize(kBatches);
  free_batches_.reserve(kBatches);
  for (std::uint32_t b = kBatches; b-- > 0;) {
    batches_[b].arg = {this, kBatchSlotFirst + b};
    batches_[b].slots.reserve(slots);
    free_batches_.push_back(b);
  }
  to_notify_.reserve(slots);
  if (!done_.init(static_cast<std::uint32_t>(slots + 3 + kBatches), RING_F_SC_DEQ, error)) return false;
  if (!notifies_.init(kNotifyRing, RING_F_SC_DEQ, error)) return false;

  cores_.reset(new (std::nothrow) RadosCoreStorage[s_.cores]);
  if (!cores_) {
    *error = "rados: out of memory";
    return false;
  }
  for (std::uint32_t c = 0; c < s_.cores; ++c) {
    RadosCoreStorage& h = cores_[c];
    h.worker_ = this;
    h.cache_ = &cache_;
    h.core_ = c;
    h.max_value_ = s_.max_value;
    h.cq_ = CompletionQueue::create(s_.max_requests, error);
    if (!h.cq_) return false;
    if (!h.sq_.init(s_.max_requests, RING_F_SP_ENQ | RING_F_SC_DEQ, error)) return false;
  }
  // The TSC rate, for the cores' cache-trust check: EAL's, or measured once against steady_clock without
  // EAL (within 0.1%, far inside the 10% of the lease kept as margin).
  tsc_per_ns_ = static_cast<double>(dataplane::tsc_hz()) / 1e9;
  thread_ = std::thread([this] { run(); });
  // Named for top -H and /proc/<pid>/task/*/comm; librados' own threads (msgr-worker-N, io_context_pool)
  // are named by librados.
  pthread_setname_np(thread_.native_handle(), "rados-worker");
  return true;
}

Worker::~Worker() {
  stop_.store(true, std::memory_order_release);
  wake_word_.fetch_add(1, std::memory_order_relaxed);
  futex_wake(&wake_word_);
  if (thread_.joinable()) thread_.join();
}

bool Worker::connect() {
  set_health(Health::kConnecting);
  rados_t c = nullptr;
  auto fail = [&](const char* what, int r) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s: %s", what, std::strerror(-r));
    {
      std::lock_guard<std::mutex> g(error_mu_);
      last_error_ = buf;
    }
    if (c != nullptr) rados_shutdown(c);
    return false;
  };
  int r = rados_create2(&c, "ceph", s_.client.c_str(), 0);
  if (r < 0) {
    c = nullptr;
    return fail("rados_create2", r);
  }
  if ((r = rados_conf_read_file(c, s_.conf_file.c_str())) < 0)
    return fail("reading store.rados.conf_file", r);
  if (!s_.keyring.empty() && (r = rados_conf_set(c, "keyring", s_.keyring.c_str())) < 0) {
    return fail("store.rados.keyring", r);
  }
  // librados takes these three in whole seconds: op_timeout_ms is rounded up.
  char secs[32];
  std::snprintf(secs, sizeof secs, "%u", (s_.op_timeout_ms + 999) / 1000);
  for (const char* opt : {"rados_osd_op_timeout", "rados_mon_op_timeout", "client_mount_timeout"}) {
    if ((r = rados_conf_set(c, opt, secs)) < 0) return fail(opt, r);
  }
  // The watch is confirmed (rados_watch_check) at the objecter's tick: several ticks per cache lease.
  std::snprintf(secs, sizeof secs, "%.3f", std::min(1.0, s_.cache_lease_ms / 4000.0));
  if ((r = rados_conf_set(c, "objecter_tick_interval", secs)) < 0) return fail("objecter_tick_interval", r);
  // An op unanswered this long makes the objecter ask the mons for a newer OSD map: a restarted OSD on the
  // same address is found within half the op timeout rather than the default 10 s.
  std::snprintf(secs, sizeof secs, "%.3f", std::max(0.5, s_.op_timeout_ms / 2000.0));
  if ((r = rados_conf_set(c, "objecter_timeout", secs)) < 0) return fail("objecter_timeout", r);
  if ((r = rados_connect(c)) < 0) return fail("rados_connect", r);
  rados_ioctx_t io = nullptr;
  if ((r = rados_ioctx_create(c, s_.pool.c_str(), &io)) < 0) return fail("opening store.rados.pool", r);
  rados_ioctx_set_namespace(io, s_.ns.empty() ? nullptr : s_.ns.c_str());
  // The object every gateway of this pool and namespace watches; creating it is idempotent.
  rados_write_op_t w = rados_create_write_op();
  rados_write_op_create(w, LIBRADOS_CREATE_IDEMPOTENT, nullptr);
  r = rados_write_op_operate(w, io, kWatchObject, nullptr, 0);
  rados_release_write_op(w);
  if (r < 0) {
    rados_ioctx_destroy(io);
    return fail("creating the cache watch object", r);
  }
  cluster_ = c;
  io_ = io;
  instance_id_ = rados_get_instance_id(c);
  probe_oid_ = "rdmagate.probe." + std::to_string(instance_id_);
  {
    std::lock_guard<std::mutex> g(error_mu_);
    last_error_.clear();
  }
  start_watch();
  start_probe_write(steady_ns());
  accepting_.store(true, std::memory_order_release);
  return true;
}

void Worker::disconnect() {
  if (io_ == nullptr) return;
  trusted_until_tsc_.store(0, std::memory_order_release);
  if (watch_ == WatchState::kActive) rados_unwatch2(io_, watch_cookie_);
  rados_watch_flush(cluster_);
  rados_remove(io_, probe_oid_.c_str());
  rados_ioctx_destroy(io_);
  rados_shutdown(cluster_);
  io_ = nullptr;
  cluster_ = nullptr;
}

std::string Worker::last_error() const {
  std::lock_guard<std::mutex> g(error_mu_);
  return last_error_;
}

RadosStats Worker::stats() const noexcept {
  RadosStats st;
  for (unsigned o = 0; o < protocol::kObjectOpCount; ++o) {
    for (unsigned s = 0; s < kStatusCount; ++s) {
      std::uint64_t v = ops_count_[o][s].load(std::memory_order_relaxed);
      for (std::uint32_t c = 0; c < s_.cores; ++c) v += cores_[c].ops_[o][s].load(std::memory_order_relaxed);
      st.ops[o][s] = v;
    }
  }
  for (std::uint32_t c = 0; c < s_.cores; ++c)
    st.cache_hits += cores_[c].hits_.load(std::memory_order_relaxed);
  st.cache_misses = misses_.load(std::memory_order_relaxed);
  st.cache_fills = fills_.load(std::memory_order_relaxed);
  st.cache_fill_skipped = fill_skipped_.load(std::memory_order_relaxed);
  st.invalidations_received = inval_rx_.load(std::memory_order_relaxed);
  st.notifies_sent = notifies_sent_.load(std::memory_order_relaxed);
  st.notify_timeouts = notify_timeouts_.load(std::memory_order_relaxed);
  st.notify_resends = notify_resends_.load(std::memory_order_relaxed);
  st.cache_resets = resets_.load(std::memory_order_relaxed);
  st.crc_mismatches = crc_bad_.load(std::memory_order_relaxed);
  st.rados_errors = rados_errors_.load(std::memory_order_relaxed);
  st.worker_wakeups = wakeups_.load(std::memory_order_relaxed);
  st.rados_ops_inflight = inflight_.load(std::memory_order_relaxed);
  for (std::size_t k = 0; k < latency_.size(); ++k) {
    for (std::size_t b = 0; b < telemetry::LatencyHistogram::kBuckets; ++b) {
      st.latency[k].buckets[b] = telemetry::LatencyHistogram::read(latency_[k].buckets[b]);
    }
    st.latency[k].sum_ns = telemetry::LatencyHistogram::read(latency_[k].sum_ns);
  }
  st.health = health();
  return st;
}

std::unique_ptr<RadosStore> RadosStore::create(const RadosSettings& settings, store::Store& cache,
                                               std::string* error) {
  if (::access(settings.conf_file.c_str(), R_OK) != 0) {
    *error = "store.rados.conf_file " + settings.conf_file + ": " + std::strerror(errno);
    return nullptr;
  }
  if (!settings.keyring.empty() && ::access(settings.keyring.c_str(), R_OK) != 0) {
    *error = "store.rados.keyring " + settings.keyring + ": " + std::strerror(errno);
    return nullptr;
  }
  if (!cache.evicts()) {
    *error = "rados: the cache store must evict";
    return nullptr;
  }
  auto w = std::make_unique<Worker>(settings, cache);
  if (!w->init(error)) return nullptr;
  return std::unique_ptr<RadosStore>(new RadosStore(std::move(w)));
}

RadosStore::RadosStore(std::unique_ptr<Worker> w) noexcept : worker_(std::move(w)) {}
RadosStore::~RadosStore() = default;
CoreStorage& RadosStore::core(std::uint32_t index) noexcept {
  return worker_->core(index);
}
Health RadosStore::health() const noexcept {
  return worker_->health();
}
RadosStats RadosStore::stats() const noexcept {
  return worker_->stats();
}
std::string RadosStore::last_error() const {
  return worker_->last_error();
}

}  // namespace rdmagate::storage::rados

// The client library (client/client.hpp; design in docs/client.md): caller-side submission, registration
// and buffer pool; the engine (active side) with one ObjectClientService per core; the control thread.
#include "client/client.hpp"

#include <infiniband/verbs.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "client/object_client_service.hpp"
#include "client/placement.hpp"
#include "conf/secrets.hpp"
#include "control/engine.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "dataplane/doorbell.hpp"
#include "dataplane/eal_runtime.hpp"
#include "dataplane/huge_buffer.hpp"
#include "dataplane/tsc.hpp"
#include "protocol/auth.hpp"
#include "protocol/object_wire.hpp"

namespace rdmagate::client {

const char* status_name(Status s) noexcept {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kNotFound: return "not_found";
    case Status::kTooLarge: return "too_large";
    case Status::kNoSpace: return "no_space";
    case Status::kBadRequest: return "bad_request";
    case Status::kTooSmall: return "too_small";
    case Status::kNoResources: return "no_resources";
    case Status::kBulkFailed: return "bulk_failed";
    case Status::kConnectionLost: return "connection_lost";
    case Status::kUnavailable: return "unavailable";
    case Status::kTimeout: return "timeout";
    case Status::kBusy: return "busy";
    case Status::kRegistration: return "registration";
    case Status::kShutdown: return "shutdown";
    case Status::kStoreUnavailable: return "store_unavailable";
    case Status::kCorrupt: return "corrupt";
    case Status::kProtocol: return "protocol";
    case Status::kAuthRequired:
      return "auth_required";
    case Status::kAuthDenied:
      return "auth_denied";
    case Status::kAuthConnectionLimit:
      return "auth_connection_limit";
    case Status::kAuthGatewayUnproven:
      return "auth_gateway_unproven";
    case Status::kForbidden:
      return "forbidden";
    case Status::kQuotaExceeded:
      return "quota_exceeded";
  }
  return "unknown";
}

namespace {


std::atomic<std::uint64_t> g_next_client_id{1};

// A 1.0 gateway announces no timers (docs/protocol.md §3.8): keep every connection alive at its default
// keepalive interval, well inside its default dead-peer timeout of 10 s. A 1.1 gateway's interval replaces it.
constexpr std::uint32_t kMinor0KeepaliveMs = 1000;

// The CPU the gateway's shipped configuration polls on (conf/rdmagate.yaml dataplane.cores: [1]).
constexpr unsigned kGatewayDefaultCpu = 1;

// EAL belongs to the process: once initialised here it stays up until exit (it cannot be initialised twice,
// not even after rte_eal_cleanup), so a later client in the same process reuses it.
std::mutex g_eal_mu;
dataplane::EalRuntime* g_eal = nullptr;              // deliberately never freed
std::vector<std::string>* g_eal_argv_store = nullptr;  // rte_eal_init keeps pointers into argv
std::vector<char*>* g_eal_argv = nullptr;

// The client's credentials from its configuration (docs/client.md "Authentication"): a principal with its
// secret given directly or read from a secrets file in the gateway's format. *error names the field.
bool load_credentials(const ClientConfig& c, Credentials* out, std::string* error) {
  if (c.principal.empty()) {
    if (!c.secret.empty() || !c.secrets_file.empty()) {
      return *error = "client: secret or secrets_file given without a principal", false;
    }
    return true;
  }
  if (!protocol::auth::valid_principal_name(c.principal)) {
    return *error = "client: principal \"" + c.principal + "\" is not 1..64 bytes of [A-Za-z0-9._@-]", false;
  }
  if (!c.secret.empty() && !c.secrets_file.empty()) {
    return *error = "client: give the principal's secret or a secrets_file, not both", false;
  }
  out->principal = c.principal;
  if (!c.secrets_file.empty()) {
    std::optional<conf::Secrets> file = conf::loadSecretsFile(c.secrets_file, error);
    if (!file) {
      // The parser names the gateway's key; the client's option is secrets_file.
      constexpr std::string_view kGatewayKey = "security.secrets_file: ";
      if (error->starts_with(kGatewayKey)) error->erase(0, kGatewayKey.size());
      return *error = "client: secrets_file: " + *error, false;
    }
    const conf::PrincipalSecret* e = file->find(c.principal);
    if (e == nullptr) {
      return *error =
                 "client: secrets_file " + c.secrets_file + " has no secret for principal " + c.principal,
             false;
    }
    out->secret = e->secret;
  } else {
    out->secret = c.secret;
  }
  if (out->secret.size() < protocol::auth::kMinSecret || out->secret.size() > protocol::auth::kMaxSecret) {
    const std::size_t n = out->secret.size();
    OPENSSL_cleanse(out->secret.data(), n);
    return *error = "client: the secret of principal " + c.principal + " is " + std::to_string(n) +
                    " bytes, want 16..64",
           false;
  }
  if (c.max_message < protocol::kAuthMaxSize) {
    return *error = "client: max_message below " + std::to_string(protocol::kAuthMaxSize) +
                    " cannot carry the AUTH message (credentials are set)",
           false;
  }
  return true;
}

bool eal_up() { return dataplane::EalRuntime::initialised_in_process() || rte_lcore_count() > 0; }

bool ensure_eal(const ClientConfig& cfg, std::string* error) {
  std::lock_guard<std::mutex> lock(g_eal_mu);
  if (eal_up()) return true;
  if (!cfg.eal_args.empty()) {
    g_eal_argv_store = new std::vector<std::string>();
    g_eal_argv_store->push_back("rdmagate-client");
    for (const auto& a : cfg.eal_args) g_eal_argv_store->push_back(a);
    g_eal_argv = new std::vector<char*>();
    for (auto& a : *g_eal_argv_store) g_eal_argv->push_back(a.data());
    g_eal_argv->push_back(nullptr);
    if (rte_eal_init(static_cast<int>(g_eal_argv->size() - 1), g_eal_argv->data()) < 0) {
      *error = std::string("rte_eal_init: ") + rte_strerror(rte_errno);
      return false;
    }
    return true;
  }
  // Derived: lcore 0 (the caller's thread) on CPU 0, and the data-plane lcores on the highest CPUs, never on
  // CPU kGatewayDefaultCpu (the gateway's shipped default data-plane core, conf/rdmagate.yaml
  // dataplane.cores [1]): a client polling on the gateway's polling CPU halves both on a small machine (echo
  // p50 349 us instead of 34 us in the 2-vCPU guest). With 2 CPUs they share CPU 0 with the client's main
  // lcore and the gateway's control thread, which sleep.
  unsigned top = cfg.cores;
  for (unsigned l : cfg.lcores) top = std::max(top, l);
  const unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  std::vector<unsigned> cpus;
  for (unsigned c = ncpu; c-- > 0;) {
    if (c != kGatewayDefaultCpu || ncpu == 1) cpus.push_back(c);
  }
  dataplane::EalOptions opts;
  opts.program_name = "rdmagate-client";
  opts.lcores = "0@0";
  for (unsigned l = 1; l <= top; ++l) {
    opts.lcores += "," + std::to_string(l) + "@" + std::to_string(cpus[(l - 1) % cpus.size()]);
  }
  opts.main_lcore = 0;
  auto eal = dataplane::EalRuntime::init(opts, error);
  if (!eal) return false;
  g_eal = eal.release();
  return true;
}

void sync_done(void* arg, const Result& r);

struct SyncWait {
  std::atomic<bool> done{false};
  Result result;
};

void sync_done(void* arg, const Result& r) {
  auto* w = static_cast<SyncWait*>(arg);
  w->result = r;
  w->done.store(true, std::memory_order_release);
}

// A ring of descriptor pointers holding up to `count` entries, formatted with rte_ring_init in ordinary
// memory (`mem` keeps it): no EAL and no memzone needed, in every progress mode.
rte_ring* make_ring(const char* name, std::uint32_t count, unsigned flags, dataplane::HugeBuffer* mem,
                    std::string* error) {
  const ssize_t bytes = rte_ring_get_memsize(rte_align32pow2(count + 1));
  if (bytes < 0) return *error = std::string("client: ring ") + name + ": bad size", nullptr;
  *mem = dataplane::HugeBuffer::allocate(static_cast<std::size_t>(bytes), -1, RTE_CACHE_LINE_SIZE, error,
                                         dataplane::HugeBufferKind::kHeap);
  if (!*mem) return nullptr;
  auto* r = static_cast<rte_ring*>(mem->data());
  if (const int rc = rte_ring_init(r, name, count, flags | RING_F_EXACT_SZ); rc != 0) {
    return *error = std::string("client: rte_ring_init ") + name + ": " + std::strerror(-rc), nullptr;
  }
  return r;
}

// Caller threads pick a core once per client, round robin, so two threads land on different cores.
struct ThreadCore {
  std::uint64_t client_id = 0;
  unsigned core = 0;
};
thread_local ThreadCore tl_core;

constexpr std::size_t kPoolAlign = 64;

// Owner-driven progress waiting for completions (kCaller's sync calls, kThread's thread): spin, yield after
// kYieldUs, sleep on the event fd after kSleepAfterUs. On rxe a CQ event's wakeup can take milliseconds (the
// kernel's tasklet behind it competes with polling threads), far more than a round trip, so the spin covers
// several round trips before the fd is trusted.
constexpr std::uint64_t kYieldUs = 20;
constexpr std::uint64_t kSleepAfterUs = 1000;

}  // namespace

// ---- the implementation ----------------------------------------------------------------------------------

class ClientImpl {
 public:
  explicit ClientImpl(const ClientConfig& cfg)
      : cfg_(cfg),
        id_(g_next_client_id.fetch_add(1)),
        mode_(cfg.progress),
        owner_driven_(cfg.progress == Progress::kCaller || cfg.progress == Progress::kThread) {}
  ~ClientImpl();

  bool start(std::string* error);
  bool wait_connected(std::chrono::milliseconds timeout);
  std::span<std::byte> alloc_buffer(std::size_t bytes);
  void free_buffer(std::span<std::byte> buffer);
  void release_buffer(const void* data);
  Status submit(protocol::ObjectOp op, std::string_view key, void* buf, std::size_t size, Callback cb,
                void* arg);
  Result submit_sync(protocol::ObjectOp op, std::string_view key, void* buf, std::size_t size);
  std::uint32_t max_inline_put(std::size_t key_len) const {
    return protocol::max_inline_put_value(min_message_.load(std::memory_order_acquire), key_len);
  }
  std::uint32_t max_inline_get() const {
    return protocol::max_inline_get_value(min_message_.load(std::memory_order_acquire));
  }
  ClientStats stats() const;
  std::string auth_error(Status* why) const;

  // Progress (client.hpp). progress_turn and arm_st serve both owner-driven modes: the caller's thread in
  // kCaller, the progress thread in kThread.
  unsigned progress();
  int event_fd() const { return mode_ == Progress::kCaller ? efd_ : -1; }
  Status arm() { return mode_ == Progress::kCaller ? arm_st() : Status::kOk; }

 private:
  unsigned progress_turn();
  Status arm_st();
  // Woken (or about to poll after an arm): disarms the bell, takes the CQ events, reads the timer.
  void disarm_st();
  // Sleeps on efd_ up to timeout_ms (-1: no limit) if arm_st allows it.
  void sleep_st(int timeout_ms);
  void progress_thread_main();

  // Registrations of caller memory on the client's protection domain.
  // With memory windows a registration grants the peer nothing itself: its key is never sent, and a window
  // bound to it grants one request's access (binding one that grants remote write needs local write here).
  struct VerbsRegistrar {
    using Handle = ibv_mr*;
    ibv_pd* pd = nullptr;
    bool windows = false;
    static int access(bool writable, bool windows) {
      if (windows) return writable ? (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND) : IBV_ACCESS_MW_BIND;
      return writable ? (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : IBV_ACCESS_REMOTE_READ;
    }
    ibv_mr* reg(std::uintptr_t start, std::size_t len, bool writable) const {
      return ibv_reg_mr(pd, reinterpret_cast<void*>(start), len, access(writable, windows));
    }
    void dereg(ibv_mr* mr) const { ibv_dereg_mr(mr); }
    static std::uint32_t lkey(ibv_mr* mr) { return mr->lkey; }
    static std::uint32_t rkey(ibv_mr* mr) { return mr->rkey; }
  };

  void control_main();
  void publish_st();
  // The pool's keys for the access asked for if [p, p + len) lies in the pool (lock-free: the pool MRs live
  // as long as the client).
  bool pool_keys(std::uintptr_t a, std::size_t len, bool writable, std::uint32_t* lkey, std::uint32_t* rkey,
                 ibv_mr** mr) const noexcept;
  // On a caller thread: the keys of a registration covering [p, p + len) (writable: GET destinations): the
  // pool's, a cached one, or a new one. kOk or kRegistration.
  Status keys_for(const void* p, std::size_t len, bool writable, std::uint32_t* lkey, std::uint32_t* rkey,
                  ibv_mr** mr);
  // On core `svc` (a callback that submits): the same keys without a syscall, and without a lock except
  // once per buffer per core. kOk or kRegistration (never registers).
  Status core_keys_for(ObjectClientService& svc, const void* p, std::size_t len, bool writable,
                       std::uint32_t* lkey, std::uint32_t* rkey, ibv_mr** mr) noexcept;

  ClientConfig cfg_;            // its secret is wiped once copied into creds_
  Credentials creds_;           // the services read it for the client's life; wiped in the destructor
  placement::Table placement_;  // the gateways' identities, hashed once (docs/placement.md)
  const std::uint64_t id_;
  const Progress mode_;
  const bool owner_driven_;  // kCaller or kThread: the engine's one core is driven by progress_turn
  unsigned cores_ = 1;
  std::uint64_t tsc_hz_ = 1;
  std::unique_ptr<control::Engine> engine_;
  std::vector<std::unique_ptr<ObjectClientService>> services_;
  std::vector<rte_ring*> submit_rings_;
  rte_ring* free_ring_ = nullptr;
  std::vector<dataplane::HugeBuffer> ring_mem_;
  std::vector<RequestDesc> descs_;
  std::uint32_t pool_size_ = 0;

  // Connections: index i = gateway * per_gateway + j, pinned to core j % cores.
  std::uint32_t per_gateway_ = 1;
  std::vector<std::uint64_t> conn_ids_;
  std::vector<std::uint32_t> conn_gateway_, conn_core_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> close_request_;  // a dataplane::CloseReason, 0: none
  std::unique_ptr<std::atomic<bool>[]> ready_;  // per connection: takes requests (authenticated if asked)
  // Per gateway: the Status of its latest authentication failure (0: none); written by the cores.
  std::unique_ptr<std::atomic<std::uint32_t>[]> auth_failures_;

  // Owner-driven progress: the core's doorbell (control's commands; submissions from other threads), the
  // timer for request deadlines, and the epoll fd over them and the CQ's completion channel (event_fd()).
  dataplane::CoreRunner* runner_ = nullptr;
  ibv_cq* armable_cq_ = nullptr;
  dataplane::Doorbell core_bell_;
  int timerfd_ = -1;
  int efd_ = -1;
  bool armed_ = false;      // arm_st ran and nothing has disarmed since
  bool timers_due_ = false;  // the deadline timer fired: the service's timeout scan runs at the next turn
  bool in_progress_ = false;  // a progress turn (and so maybe a callback) is running on this thread
  std::thread progress_thread_;  // kThread
  std::atomic<bool> stop_progress_{false};

  // Control thread and teardown.
  std::thread control_;
  std::atomic<bool> stop_control_{false};
  std::atomic<int> phase_{0};  // 1: begin the engine's shutdown; 2: every connection is gone
  std::atomic<bool> shutting_{false};     // refuse new submissions
  std::atomic<bool> svc_shutdown_{false};  // the services fail what they hold with kShutdown

  // Published by the control thread.
  std::unique_ptr<std::atomic<bool>[]> up_;  // [gateway * cores + core]: a connection of that pair is up
  std::atomic<std::uint32_t> connections_up_{0};
  std::atomic<std::uint32_t> min_message_{0};
  // The shortest keepalive interval of the connections up (0: none up): an owner-driven core must wake for
  // it while the application sleeps on the event fd.
  std::atomic<std::uint32_t> keepalive_ms_{0};
  std::atomic<std::uint64_t> reconnects_{0};

  // Buffer pool: one hugepage region, registered twice (a PUT's key grants remote read only, a GET's remote
  // write only); first-fit ranges under a mutex (caller threads only).
  dataplane::HugeBuffer pool_;
  ibv_mr* pool_read_mr_ = nullptr;
  ibv_mr* pool_write_mr_ = nullptr;
  bool windows_ = false;  // chunked requests go through memory windows (the cores' QPs have them)
  std::mutex pool_mu_;
  std::map<std::size_t, std::size_t> pool_free_;            // offset -> bytes
  std::unordered_map<std::size_t, std::size_t> pool_used_;  // offset -> bytes

  // Registrations of caller memory (client/registration_cache.hpp): made once the engine's PD exists, emptied
  // before the engine goes.
  std::optional<RegistrationCache<VerbsRegistrar>> reg_;
  std::uintptr_t page_ = 4096;

  std::atomic<std::uint64_t> submitted_{0}, busy_{0}, registrations_{0}, cache_hits_{0};
  std::atomic<unsigned> next_core_{0};
};

bool ClientImpl::start(std::string* error) {
  const ClientConfig& c = cfg_;
  if (c.gateways.empty()) return *error = "client: no gateway configured", false;
  std::vector<std::string> identities;
  for (std::size_t g = 0; g < c.gateways.size(); ++g) {
    std::string id, why;
    if (!placement::identity(c.gateways[g].address, c.gateways[g].port, &id, &why)) {
      return *error = "client: gateways[" + std::to_string(g) + "]: " + why, false;
    }
    identities.push_back(std::move(id));
  }
  if (std::string why; !placement_.assign(identities, &why)) return *error = "client: " + why, false;
  if (c.cores == 0) return *error = "client: cores must be >= 1", false;
  if (c.connections_per_gateway == 0) return *error = "client: connections_per_gateway must be >= 1", false;
  if (c.max_inflight_per_conn == 0 || c.max_inflight_per_conn > 0xffff) {
    return *error = "client: max_inflight_per_conn must be 1..65535", false;
  }
  if (c.queue_depth < protocol::kMinCreditQueueDepth) return *error = "client: queue_depth below 4", false;
  if (c.max_message < protocol::kMinMessageSize || c.max_message > protocol::kMaxMessageSizeCap) {
    return *error = "client: max_message outside 64..1 MiB", false;
  }
  if (!load_credentials(c, &creds_, error)) return false;
  OPENSSL_cleanse(cfg_.secret.data(), cfg_.secret.size());
  cfg_.secret.clear();
  if (mode_ != Progress::kCaller && mode_ != Progress::kThread && mode_ != Progress::kEalLcores) {
    return *error = "client: progress must be kCaller, kThread or kEalLcores", false;
  }
  if (owner_driven_ && c.cores != 1) {
    return *error = "client: progress kCaller and kThread run exactly one core (cores must be 1; kEalLcores for more)",
           false;
  }
  if (!owner_driven_ && !c.lcores.empty() && c.lcores.size() != c.cores) {
    return *error = "client: lcores names " + std::to_string(c.lcores.size()) + " lcores for " +
                    std::to_string(c.cores) + " cores", false;
  }
  cores_ = c.cores;
  const long pg = sysconf(_SC_PAGESIZE);
  page_ = pg > 0 ? static_cast<std::uintptr_t>(pg) : 4096;
  if (!owner_driven_ && !ensure_eal(c, error)) return false;
  tsc_hz_ = dataplane::tsc_hz();
  min_message_.store(c.max_message, std::memory_order_release);

  std::vector<unsigned> lcores = c.lcores;
  if (owner_driven_) {
    lcores.assign(1, 0);  // names no lcore: nothing is launched
  } else if (lcores.empty()) {
    unsigned l;
    RTE_LCORE_FOREACH_WORKER(l) {
      if (lcores.size() == c.cores) break;
      lcores.push_back(l);
    }
    if (lcores.size() != c.cores) {
      return *error = "client: EAL has " + std::to_string(lcores.size()) + " worker lcores, need " +
                      std::to_string(c.cores), false;
    }
  }

  // Every core keeps a connection to every gateway (a request is sent by the core it was submitted to).
  per_gateway_ = std::max(c.connections_per_gateway, c.cores);
  const std::uint32_t conns = static_cast<std::uint32_t>(c.gateways.size()) * per_gateway_;
  const std::uint32_t conns_per_core = (conns + c.cores - 1) / c.cores;

  control::EngineConfig ec;
  ec.name = "client";
  ec.device = c.device;
  ec.passive = false;
  ec.expose_core_region = false;
  if (owner_driven_) {
    ec.driver = control::CoreDriver::kOwner;
    // The core sleeps on its CQ's completion channel: the verbs backend's CQs can be armed (mlx5 direct
    // polling never moves the consumer index that arming reads).
    ec.backend = "verbs";
  }
  const dataplane::HugeBufferKind memory =
      owner_driven_ ? dataplane::HugeBufferKind::kAnonymous : dataplane::HugeBufferKind::kMalloc;
  for (unsigned i = 0; i < c.cores; ++i) {
    dataplane::CoreConfig cc;
    cc.lcore = lcores[i];
    cc.max_conns = conns_per_core + 2;
    cc.rx_per_conn = c.queue_depth;
    cc.tx_per_conn = 2u * c.queue_depth + 16;
    cc.buf_size = c.max_message;
    cc.idle = c.yield_when_idle ? dataplane::IdlePolicy::kYield : dataplane::IdlePolicy::kBusy;
    cc.idle_yield_after = 64;
    cc.bulk_bytes_per_conn = 0;  // chunks name the caller's memory; the client has no bounce buffer
    cc.keepalive_us = std::uint64_t{kMinor0KeepaliveMs} * 1000;
    cc.dead_peer_us = 0;  // a silent gateway fails the requests it holds at request_timeout
    cc.memory = memory;
    // A window per chunk request a connection may have in flight (ServiceConfig::max_chunked_per_conn); the
    // engine drops them where the device has none.
    cc.windows_per_conn = c.memory_windows ? dataplane::kChunkQueue : 0;
    ec.cores.push_back(cc);
  }
  ec.local.params = protocol::ConnParams{c.queue_depth, c.max_message, protocol::kMaxFragments, 0xffffffffu};
  // No keepalive preference and no dead-peer timeout of our own: a 1.1 gateway's announced interval becomes
  // the connection's (protocol §3.8), and the client keeps each connection alive at it.
  ec.local.timers = protocol::Timers{0, 0};
  ec.backoff.min = std::chrono::milliseconds(50);
  ec.backoff.max = std::chrono::seconds(2);
  ec.handshake_timeout = c.connect_timeout;
  engine_ = control::Engine::create(ec, error);
  if (!engine_) return false;
  windows_ = engine_->core(0).config().windows_per_conn != 0;
  if (c.memory_windows && !windows_) {
    // Said at every start: the gateway can reach every registered buffer, not only the request's.
    std::fprintf(
        stderr,
        "rdmagate client: warning: device %s has no type-2 memory windows: chunked requests hand out the "
        "keys of whole registrations (docs/client.md \"Key scope\")\n",
        engine_->device().name().c_str());
  }
  reg_.emplace(VerbsRegistrar{engine_->pd(), windows_}, page_);

  if (c.pool_bytes != 0) {
    pool_ = dataplane::HugeBuffer::allocate(c.pool_bytes, -1, 4096, error, memory);
    if (!pool_) return *error = "client: buffer pool: " + *error, false;
    pool_read_mr_ =
        ibv_reg_mr(engine_->pd(), pool_.data(), pool_.size(), VerbsRegistrar::access(false, windows_));
    if (pool_read_mr_ == nullptr) {
      return *error = std::string("client: ibv_reg_mr(pool, remote read): ") + std::strerror(errno), false;
    }
    pool_write_mr_ =
        ibv_reg_mr(engine_->pd(), pool_.data(), pool_.size(), VerbsRegistrar::access(true, windows_));
    if (pool_write_mr_ == nullptr) {
      return *error = std::string("client: ibv_reg_mr(pool, remote write): ") + std::strerror(errno), false;
    }
    pool_free_[0] = pool_.size();
  }

  // Descriptors: enough for every connection's table twice over (the rest wait in the FIFOs).
  pool_size_ = std::max<std::uint32_t>(1024, 2 * conns * c.max_inflight_per_conn);
  descs_ = std::vector<RequestDesc>(pool_size_);
  ring_mem_.resize(1 + c.cores);
  free_ring_ = make_ring("rgc_free", pool_size_, 0, &ring_mem_[0], error);
  if (free_ring_ == nullptr) return false;
  for (RequestDesc& d : descs_) {
    if (rte_ring_mp_enqueue(free_ring_, &d) != 0) return *error = "client: free ring too small", false;
  }
  for (unsigned i = 0; i < c.cores; ++i) {
    rte_ring* r = make_ring("rgc_submit", pool_size_, RING_F_SC_DEQ, &ring_mem_[1 + i], error);
    if (r == nullptr) return false;
    submit_rings_.push_back(r);
  }

  // Connections first (the control loop does not run yet, so none can reach a core before the services
  // know their handles), then the services, then the cores and the control thread.
  close_request_ = std::make_unique<std::atomic<std::uint8_t>[]>(conns);
  ready_ = std::make_unique<std::atomic<bool>[]>(conns);
  auth_failures_ = std::make_unique<std::atomic<std::uint32_t>[]>(c.gateways.size());
  up_ = std::make_unique<std::atomic<bool>[]>(c.gateways.size() * c.cores);
  std::vector<ServiceConfig> scfg(c.cores);
  for (unsigned i = 0; i < c.cores; ++i) {
    ServiceConfig& s = scfg[i];
    s.core = i;
    s.owner_id = id_;
    s.submit = submit_rings_[i];
    s.free_descs = free_ring_;
    s.gateways = static_cast<std::uint32_t>(c.gateways.size());
    s.pool_size = pool_size_;
    s.max_inflight_per_conn = c.max_inflight_per_conn;
    s.timeout_tsc = static_cast<std::uint64_t>(c.request_timeout.count()) * tsc_hz_ / 1000;
    s.shutdown = &svc_shutdown_;
    s.wake_control = [](void* e) noexcept { static_cast<control::Engine*>(e)->wake(); };
    s.wake_control_arg = engine_.get();
    s.credentials = &creds_;
    s.auth_failures = auth_failures_.get();
  }
  for (std::uint32_t g = 0; g < c.gateways.size(); ++g) {
    for (std::uint32_t j = 0; j < per_gateway_; ++j) {
      const unsigned core = j % c.cores;
      const std::uint64_t id = engine_->connect(c.gateways[g].address, c.gateways[g].port, error, true,
                                                static_cast<int>(core));
      if (id == 0) return false;
      const std::size_t idx = conn_ids_.size();
      conn_ids_.push_back(id);
      conn_gateway_.push_back(g);
      conn_core_.push_back(core);
      scfg[core].conns.push_back(
          ServiceConnSpec{engine_->find(id)->handle().value, g, &close_request_[idx], &ready_[idx]});
    }
  }
  std::vector<std::unique_ptr<control::CoreRunner>> runners;
  for (unsigned i = 0; i < c.cores; ++i) {
    services_.push_back(std::make_unique<ObjectClientService>(std::move(scfg[i])));
    runners.push_back(dataplane::make_core_runner(engine_->backend_kind(), engine_->core(i), *services_.back()));
  }
  if (!engine_->launch_cores(std::move(runners), error)) return false;
  if (owner_driven_) {
    runner_ = &engine_->runner(0);
    armable_cq_ = engine_->core(0).cq().armable;
    engine_->core(0).control_mailbox().set_wake(&core_bell_);
    timerfd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    efd_ = epoll_create1(EPOLL_CLOEXEC);
    if (armable_cq_ == nullptr || !core_bell_.valid() || timerfd_ < 0 || efd_ < 0) {
      return *error = std::string("client: event fd setup: ") + std::strerror(errno), false;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    int rc = epoll_ctl(efd_, EPOLL_CTL_ADD, engine_->cq_channel()->fd, &ev);
    rc |= epoll_ctl(efd_, EPOLL_CTL_ADD, core_bell_.fd(), &ev);
    rc |= epoll_ctl(efd_, EPOLL_CTL_ADD, timerfd_, &ev);
    if (rc != 0) return *error = std::string("client: epoll_ctl: ") + std::strerror(errno), false;
    if (mode_ == Progress::kThread) {
      progress_thread_ = std::thread([this] { progress_thread_main(); });
      pthread_setname_np(progress_thread_.native_handle(), "rg-progress");
    }
  }
  control_ = std::thread([this] { control_main(); });
  // Named for top/ps and /proc/<pid>/task/*/comm (the idle-cost figures find them by these names).
  pthread_setname_np(control_.native_handle(), "rg-control");
  return true;
}

// ---- owner-driven progress --------------------------------------------------------------------------------

unsigned ClientImpl::progress_turn() {
  if (in_progress_) return 0;  // from a callback: the turn that runs it is not finished
  in_progress_ = true;
  if (armed_) disarm_st();
  ObjectClientService& svc = *services_[0];
  const std::uint64_t before = svc.counters().completed.load(std::memory_order_relaxed);
  runner_->progress_st();
  if (timers_due_) {
    timers_due_ = false;
    svc.run_timers_st();
  }
  in_progress_ = false;
  return static_cast<unsigned>(svc.counters().completed.load(std::memory_order_relaxed) - before);
}

unsigned ClientImpl::progress() { return mode_ == Progress::kCaller ? progress_turn() : 0; }

void ClientImpl::disarm_st() {
  armed_ = false;
  core_bell_.disarm();
  // Every CQ event is acknowledged (ibv_destroy_cq waits for them); the CQ stays disarmed until arm_st.
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(engine_->cq_channel(), &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
  std::uint64_t ticks = 0;
  if (read(timerfd_, &ticks, sizeof(ticks)) == static_cast<ssize_t>(sizeof(ticks))) timers_due_ = true;
}

Status ClientImpl::arm_st() {
  if (in_progress_) return Status::kBusy;  // from a callback: the turn must finish first
  // Wakeups first, then the last look: anything that arrives after the look rings the bell or raises a CQ
  // event; anything before it is found by the look.
  armed_ = true;
  core_bell_.arm();
  if (ibv_req_notify_cq(armable_cq_, 0) != 0) return Status::kBusy;
  ObjectClientService& svc = *services_[0];
  // stop_progress_ too: the destructor's ring may come before this arm (kThread's loop checked it earlier).
  const bool idle = !timers_due_ && !stop_progress_.load(std::memory_order_acquire) &&
                    runner_->idle_for_sleep_st() && !svc.submissions_waiting_st();
  // Request deadlines: while requests are open the timer fires every request_timeout / 8 (at least 1 ms),
  // so a timeout is seen at most that late. Keepalives: while a connection is up, every quarter of its
  // keepalive interval, so that our NOOP leaves at most a quarter late (the gateway closes a connection it
  // hears nothing from for its dead-peer timeout, protocol §3.8); the gateway's own keepalives wake us too.
  // With no connection up and nothing open the timer is off and an idle client never wakes.
  itimerspec its{};
  std::chrono::nanoseconds period{0};
  if (idle && svc.requests_open_st()) {
    period = std::max<std::chrono::nanoseconds>(std::chrono::milliseconds(1), cfg_.request_timeout / 8);
  }
  if (const std::uint32_t k = keepalive_ms_.load(std::memory_order_acquire); idle && k != 0) {
    const auto quarter =
        std::max<std::chrono::nanoseconds>(std::chrono::milliseconds(1), std::chrono::milliseconds(k) / 4);
    if (period.count() == 0 || quarter < period) period = quarter;
  }
  its.it_value.tv_sec = static_cast<time_t>(period.count() / 1'000'000'000);
  its.it_value.tv_nsec = static_cast<long>(period.count() % 1'000'000'000);
  timerfd_settime(timerfd_, 0, &its, nullptr);
  return idle ? Status::kOk : Status::kBusy;
}

void ClientImpl::sleep_st(int timeout_ms) {
  if (arm_st() != Status::kOk) return;
  epoll_event ev{};
  epoll_wait(efd_, &ev, 1, timeout_ms);
}

void ClientImpl::progress_thread_main() {
  // Turn while there is traffic; after kSleepAfterUs without a completion, sleep on the event fd (an idle
  // client costs no CPU). Yielding in between lets the callers' threads and the kernel's RDMA work share the
  // CPU. Timed, not counted: a turn on an empty CQ takes tens of nanoseconds.
  const std::uint64_t yield_after = tsc_hz_ * kYieldUs / 1'000'000;
  const std::uint64_t sleep_after = tsc_hz_ * kSleepAfterUs / 1'000'000;
  std::uint64_t last = rte_rdtsc();
  while (!stop_progress_.load(std::memory_order_acquire)) {
    if (progress_turn() != 0) {
      last = rte_rdtsc();
      continue;
    }
    const std::uint64_t idle = rte_rdtsc() - last;
    if (idle >= sleep_after) {
      sleep_st(-1);
      last = rte_rdtsc();
    } else if (idle >= yield_after) {
      std::this_thread::yield();
    }
  }
}

void ClientImpl::control_main() {
  bool begun = false;
  while (!stop_control_.load(std::memory_order_acquire)) {
    // Sleeps until rdma_cm, a core's reply, a timer or wake() (close requests, teardown) needs it.
    engine_->poll_st(-1);
    for (std::size_t i = 0; i < conn_ids_.size(); ++i) {
      if (const std::uint8_t why = close_request_[i].exchange(0, std::memory_order_acq_rel); why != 0) {
        engine_->close_st(conn_ids_[i], static_cast<dataplane::CloseReason>(why));
      }
    }
    publish_st();
    if (!begun && phase_.load(std::memory_order_acquire) == 1) {
      engine_->begin_shutdown_st();
      begun = true;
    }
    if (begun && engine_->drained_st()) phase_.store(2, std::memory_order_release);
  }
}

void ClientImpl::publish_st() {
  const std::size_t pairs = cfg_.gateways.size() * cores_;
  std::vector<bool> up(pairs, false);
  std::uint32_t n = 0;
  std::uint32_t min_msg = 0;
  std::uint32_t min_keepalive = 0;
  for (std::size_t i = 0; i < conn_ids_.size(); ++i) {
    const control::Connection* c = engine_->find(conn_ids_[i]);
    // Up = the core owns it and it takes requests (authenticated, when the gateway asked for it).
    if (c == nullptr || c->lifecycle().state() != control::State::kOwnedByCore ||
        !ready_[i].load(std::memory_order_acquire)) {
      continue;
    }
    ++n;
    up[conn_gateway_[i] * cores_ + conn_core_[i]] = true;
    const std::uint32_t m = c->session().params.max_message_size;
    if (min_msg == 0 || m < min_msg) min_msg = m;
    const std::uint32_t k = c->session().keepalive_ms != 0 ? c->session().keepalive_ms : kMinor0KeepaliveMs;
    if (min_keepalive == 0 || k < min_keepalive) min_keepalive = k;
  }
  keepalive_ms_.store(min_keepalive, std::memory_order_release);
  for (std::size_t i = 0; i < pairs; ++i) up_[i].store(up[i], std::memory_order_release);
  connections_up_.store(n, std::memory_order_release);
  // Keep the last known value while nothing is up: the threshold decides which buffers get registered.
  if (min_msg != 0) min_message_.store(min_msg, std::memory_order_release);
  reconnects_.store(engine_->counters().reconnects, std::memory_order_relaxed);
}

ClientImpl::~ClientImpl() {
  shutting_.store(true, std::memory_order_release);
  svc_shutdown_.store(true, std::memory_order_release);
  if (control_.joinable()) {
    phase_.store(1, std::memory_order_release);
    engine_->wake();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (phase_.load(std::memory_order_acquire) != 2 && std::chrono::steady_clock::now() < deadline) {
      // kCaller: nobody else turns the core, and the closes need it (CLOSE in, CLOSED out).
      if (mode_ == Progress::kCaller && runner_ != nullptr) {
        progress_turn();
        sleep_st(1);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    stop_control_.store(true, std::memory_order_release);
    engine_->wake();
    control_.join();
  }
  if (progress_thread_.joinable()) {
    stop_progress_.store(true, std::memory_order_release);
    core_bell_.ring();
    progress_thread_.join();
  }
  if (runner_ != nullptr) disarm_st();  // every CQ event read is acknowledged before the CQ goes
  if (engine_) engine_->stop_cores_st();
  // The cores have stopped: whatever a core still held (a connection that did not close in time, a
  // submission that raced the shutdown) fails here, on this thread.
  for (auto& s : services_) s->fail_all_after_stop(Status::kShutdown);
  reg_.reset();
  for (ibv_mr** mr : {&pool_read_mr_, &pool_write_mr_}) {
    if (*mr != nullptr) ibv_dereg_mr(*mr);
    *mr = nullptr;
  }
  engine_.reset();  // QPs, CQs, PD
  services_.clear();
  if (timerfd_ >= 0) close(timerfd_);
  if (efd_ >= 0) close(efd_);
  pool_.reset();
  OPENSSL_cleanse(creds_.secret.data(), creds_.secret.size());
}

bool ClientImpl::wait_connected(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::size_t pairs = cfg_.gateways.size() * cores_;
  for (;;) {
    bool all = up_ != nullptr;
    for (std::size_t i = 0; all && i < pairs; ++i) all = up_[i].load(std::memory_order_acquire);
    if (all) return true;
    // A gateway that refused our authentication with no connection of it taking requests: waiting longer
    // would not change the answer (auth_error() says why).
    for (std::size_t g = 0; g < cfg_.gateways.size(); ++g) {
      if (auth_failures_[g].load(std::memory_order_relaxed) == 0) continue;
      bool any = false;
      for (std::size_t i = 0; i < conn_ids_.size(); ++i)
        any |= conn_gateway_[i] == g && ready_[i].load(std::memory_order_acquire);
      if (!any) return false;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (mode_ == Progress::kCaller) {
      // The connection reaches the core through its ring (ADOPT): this thread is the core.
      progress_turn();
      sleep_st(1);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

std::span<std::byte> ClientImpl::alloc_buffer(std::size_t bytes) {
  if (!pool_ || bytes == 0) return {};
  const std::size_t need = (bytes + kPoolAlign - 1) / kPoolAlign * kPoolAlign;
  std::lock_guard<std::mutex> lock(pool_mu_);
  for (auto it = pool_free_.begin(); it != pool_free_.end(); ++it) {
    if (it->second < need) continue;
    const std::size_t off = it->first;
    const std::size_t left = it->second - need;
    pool_free_.erase(it);
    if (left != 0) pool_free_[off + need] = left;
    pool_used_[off] = need;
    return {reinterpret_cast<std::byte*>(pool_.bytes() + off), bytes};
  }
  return {};
}

void ClientImpl::free_buffer(std::span<std::byte> buffer) {
  if (!pool_ || buffer.data() == nullptr) return;
  const auto* p = reinterpret_cast<const std::uint8_t*>(buffer.data());
  if (p < pool_.bytes() || p >= pool_.bytes() + pool_.size()) return;
  const std::size_t off = static_cast<std::size_t>(p - pool_.bytes());
  std::lock_guard<std::mutex> lock(pool_mu_);
  auto used = pool_used_.find(off);
  if (used == pool_used_.end()) return;  // not ours, or freed twice
  std::size_t start = off;
  std::size_t len = used->second;
  pool_used_.erase(used);
  // Coalesce with the neighbours.
  auto next = pool_free_.lower_bound(start);
  if (next != pool_free_.end() && next->first == start + len) {
    len += next->second;
    next = pool_free_.erase(next);
  }
  if (next != pool_free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      len += prev->second;
      pool_free_.erase(prev);
    }
  }
  pool_free_[start] = len;
}

void ClientImpl::release_buffer(const void* data) {
  if (reg_) reg_->release(reinterpret_cast<std::uintptr_t>(data));
}

bool ClientImpl::pool_keys(std::uintptr_t a, std::size_t len, bool writable, std::uint32_t* lkey,
                           std::uint32_t* rkey, ibv_mr** mr) const noexcept {
  const auto base = reinterpret_cast<std::uintptr_t>(pool_.data());
  if (!pool_ || a < base || len > pool_.size() || a - base > pool_.size() - len) return false;
  ibv_mr* const m = writable ? pool_write_mr_ : pool_read_mr_;
  *lkey = m->lkey;
  *rkey = m->rkey;
  *mr = m;
  return true;
}

Status ClientImpl::keys_for(const void* p, std::size_t len, bool writable, std::uint32_t* lkey,
                            std::uint32_t* rkey, ibv_mr** mr) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (pool_keys(a, len, writable, lkey, rkey, mr)) return Status::kOk;
  if (a + len < a || !reg_) return Status::kRegistration;
  void* h = nullptr;
  const auto found = reg_->keys_for(a, len, writable, lkey, rkey, &h);
  *mr = static_cast<ibv_mr*>(h);
  switch (found) {
    case RegistrationCache<VerbsRegistrar>::Found::kCached:
      cache_hits_.fetch_add(1, std::memory_order_relaxed);
      return Status::kOk;
    case RegistrationCache<VerbsRegistrar>::Found::kRegistered:
      registrations_.fetch_add(1, std::memory_order_relaxed);
      return Status::kOk;
    case RegistrationCache<VerbsRegistrar>::Found::kFailed:
      break;
  }
  return Status::kRegistration;
}

Status ClientImpl::core_keys_for(ObjectClientService& svc, const void* p, std::size_t len, bool writable,
                                 std::uint32_t* lkey, std::uint32_t* rkey, ibv_mr** mr) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (pool_keys(a, len, writable, lkey, rkey, mr)) return Status::kOk;
  if (a + len < a || !reg_) return Status::kRegistration;
  void* h = nullptr;
  const CoreRegCache::Outcome o = reg_->core_keys_for(svc.reg_cache_st(), a, len, writable, lkey, rkey, &h);
  *mr = static_cast<ibv_mr*>(h);
  svc.count_reg_st(o);
  return o == CoreRegCache::Outcome::kUnregistered ? Status::kRegistration : Status::kOk;
}

Status ClientImpl::submit(protocol::ObjectOp op, std::string_view key, void* buf, std::size_t size,
                          Callback cb, void* arg) {
  if (shutting_.load(std::memory_order_acquire)) return Status::kShutdown;
  if (key.empty() || key.size() > protocol::kMaxKeyLength || cb == nullptr) return Status::kBadRequest;
  if (op != protocol::ObjectOp::kDelete && size != 0 && buf == nullptr) return Status::kBadRequest;
  const std::uint32_t msg = min_message_.load(std::memory_order_acquire);
  const bool chunk =
      (op == protocol::ObjectOp::kPut && size > protocol::max_inline_put_value(msg, key.size())) ||
      (op == protocol::ObjectOp::kGet && size > protocol::max_inline_get_value(msg));
  // A callback on one of our cores: its keys come from the core's cache, and the descriptor skips the ring.
  // kCaller: this thread is the core (callback or not), and may register.
  ObjectClientService* const core = mode_ == Progress::kCaller ? services_[0].get() : ObjectClientService::current(id_);
  std::uint32_t lkey = 0, rkey = 0;
  ibv_mr* mr = nullptr;
  if (chunk) {
    const bool writable = op == protocol::ObjectOp::kGet;
    const Status st = core != nullptr && mode_ != Progress::kCaller
                          ? core_keys_for(*core, buf, size, writable, &lkey, &rkey, &mr)
                          : keys_for(buf, size, writable, &lkey, &rkey, &mr);
    if (st != Status::kOk) return st;
  }
  void* slot = nullptr;
  if (rte_ring_mc_dequeue(free_ring_, &slot) != 0) {
    busy_.fetch_add(1, std::memory_order_relaxed);
    return Status::kBusy;
  }
  auto* d = static_cast<RequestDesc*>(slot);
  d->op = op;
  d->key_len = static_cast<std::uint8_t>(key.size());
  std::memcpy(d->key, key.data(), key.size());
  d->registered = chunk;
  d->gateway = static_cast<std::uint32_t>(placement_.pick(key));
  d->buf = buf;
  d->size = size;
  d->lkey = lkey;
  d->rkey = rkey;
  d->mr = mr;
  d->cb = cb;
  d->arg = arg;
  d->submit_tsc = rte_rdtsc();
  submitted_.fetch_add(1, std::memory_order_relaxed);
  if (core != nullptr) {
    core->submit_direct_st(d);
    return Status::kOk;
  }
  if (tl_core.client_id != id_) {
    tl_core.client_id = id_;
    tl_core.core = next_core_.fetch_add(1, std::memory_order_relaxed) % cores_;
  }
  if (rte_ring_mp_enqueue(submit_rings_[tl_core.core], d) != 0) {
    // Cannot happen (the ring holds the whole pool); never lose the descriptor if it does.
    submitted_.fetch_sub(1, std::memory_order_relaxed);
    rte_ring_mp_enqueue(free_ring_, d);
    busy_.fetch_add(1, std::memory_order_relaxed);
    return Status::kBusy;
  }
  core_bell_.ring();  // kThread: the progress thread may sleep (one relaxed load when it does not)
  return Status::kOk;
}

Result ClientImpl::submit_sync(protocol::ObjectOp op, std::string_view key, void* buf, std::size_t size) {
  Result r;
  if (mode_ == Progress::kCaller ? in_progress_ : ObjectClientService::current(id_) != nullptr) {
    r.status = Status::kBadRequest;  // on one of our cores the answer could never be polled: refuse
    return r;
  }
  SyncWait w;
  const Status st = submit(op, key, buf, size, sync_done, &w);
  if (st != Status::kOk) {
    r.status = st;
    return r;
  }
  if (mode_ == Progress::kCaller) {
    // This thread is the core: turn it until the answer. Spin (an inline answer takes tens of microseconds),
    // yielding after the first kYieldUs so that kernel work on this CPU (rxe's, the gateway's) runs, then
    // sleep on the event fd. Timed, not counted: a turn on an empty CQ takes tens of nanoseconds.
    const std::uint64_t yield_after = tsc_hz_ * kYieldUs / 1'000'000;
    const std::uint64_t sleep_after = tsc_hz_ * kSleepAfterUs / 1'000'000;
    std::uint64_t t0 = rte_rdtsc();
    while (!w.done.load(std::memory_order_acquire)) {
      if (progress_turn() != 0) continue;
      const std::uint64_t spent = rte_rdtsc() - t0;
      if (spent >= sleep_after) {
        sleep_st(-1);
        t0 = rte_rdtsc();
      } else if (spent >= yield_after) {
        std::this_thread::yield();
      }
    }
    return w.result;
  }
  // Spin briefly (a core with a CPU of its own answers in microseconds), yield a little, then sleep with
  // doubling naps (10 us .. 1 ms). A waiter that keeps yielding or waking every few microseconds steals the
  // CPU it shares with a polling core and the kernel's softirq work: in the 2-vCPU guest, 20 us naps made
  // a sync DELETE take 11 ms, 1 ms naps 0.75 ms (docs/client.md "Sync calls").
  unsigned nap_us = 10;
  for (unsigned i = 0; !w.done.load(std::memory_order_acquire); ++i) {
    if (i < 512) {
      rte_pause();
    } else if (i < 512 + 16) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(nap_us));
      nap_us = std::min(nap_us * 2, 1000u);
    }
  }
  return w.result;
}

ClientStats ClientImpl::stats() const {
  ClientStats s;
  for (const auto& svc : services_) {
    const ServiceCounters& c = svc->counters();
    s.completed += c.completed.load(std::memory_order_relaxed);
    s.inline_puts += c.inline_puts.load(std::memory_order_relaxed);
    s.chunked_puts += c.chunked_puts.load(std::memory_order_relaxed);
    s.inline_gets += c.inline_gets.load(std::memory_order_relaxed);
    s.chunked_gets += c.chunked_gets.load(std::memory_order_relaxed);
    s.connection_lost += c.connection_lost.load(std::memory_order_relaxed);
    s.timeouts += c.timeouts.load(std::memory_order_relaxed);
    s.unavailable += c.unavailable.load(std::memory_order_relaxed);
    s.shutdown += c.shutdown.load(std::memory_order_relaxed);
    s.protocol_errors += c.protocol_errors.load(std::memory_order_relaxed);
    s.stale_answers += c.stale_answers.load(std::memory_order_relaxed);
    s.pending_parked += c.pending_parked.load(std::memory_order_relaxed);
    s.sent += c.inline_puts.load(std::memory_order_relaxed) + c.chunked_puts.load(std::memory_order_relaxed) +
              c.inline_gets.load(std::memory_order_relaxed) + c.chunked_gets.load(std::memory_order_relaxed) +
              c.deletes.load(std::memory_order_relaxed);
    s.answered += c.answered.load(std::memory_order_relaxed);
    s.queue_us_total += c.queue_tsc.load(std::memory_order_relaxed) * 1'000'000 / tsc_hz_;
    s.answer_us_total += c.answer_tsc.load(std::memory_order_relaxed) * 1'000'000 / tsc_hz_;
    s.core_registration_hits += c.reg_core_hits.load(std::memory_order_relaxed);
    s.core_registration_fills += c.reg_core_fills.load(std::memory_order_relaxed);
    s.core_registration_unregistered += c.reg_core_unregistered.load(std::memory_order_relaxed);
    s.auth_ok += c.auth_ok.load(std::memory_order_relaxed);
    s.auth_failures += c.auth_failures.load(std::memory_order_relaxed);
    s.protocol_errors += c.auth_violations.load(std::memory_order_relaxed);
    s.window_requests += c.window_requests.load(std::memory_order_relaxed);
    s.unscoped_requests += c.unscoped_requests.load(std::memory_order_relaxed);
  }
  s.memory_windows = windows_;
  // Read after the completions: submitted >= completed in every snapshot.
  s.submitted = submitted_.load(std::memory_order_acquire);
  s.busy = busy_.load(std::memory_order_relaxed);
  s.registrations = registrations_.load(std::memory_order_relaxed);
  s.registration_cache_hits =
      cache_hits_.load(std::memory_order_relaxed) + s.core_registration_hits + s.core_registration_fills;
  s.reconnects = reconnects_.load(std::memory_order_relaxed);
  s.connections_up = connections_up_.load(std::memory_order_acquire);
  return s;
}

std::string ClientImpl::auth_error(Status* out) const {
  if (out != nullptr) *out = Status::kOk;
  for (std::size_t g = 0; g < cfg_.gateways.size(); ++g) {
    const auto why = static_cast<Status>(auth_failures_[g].load(std::memory_order_relaxed));
    if (why == Status::kOk) continue;
    if (out != nullptr) *out = why;
    const std::string gw =
        "gateway " + cfg_.gateways[g].address + ":" + std::to_string(cfg_.gateways[g].port);
    switch (why) {
      case Status::kAuthRequired:
        return gw +
               " requires authentication and no credentials are configured (principal and secret or "
               "secrets_file)";
      case Status::kAuthDenied:
        return gw + ": authentication denied for principal " + creds_.principal +
               " (unknown principal or wrong secret)";
      case Status::kAuthConnectionLimit:
        return gw + ": principal " + creds_.principal + " holds its maximum number of connections";
      case Status::kAuthGatewayUnproven:
        return gw + " failed to prove the shared secret (wrong secret on the gateway, or not the gateway)";
      default:
        return gw + ": authentication failed (" + status_name(why) + ")";
    }
  }
  return {};
}

// ---- Client ------------------------------------------------------------------------------------------------

Client::Client(std::unique_ptr<ClientImpl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

std::unique_ptr<Client> Client::create(const ClientConfig& config, std::string* error) {
  std::string local;
  if (error == nullptr) error = &local;
  auto impl = std::make_unique<ClientImpl>(config);
  if (!impl->start(error)) return nullptr;
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

bool Client::wait_connected(std::chrono::milliseconds timeout) { return impl_->wait_connected(timeout); }
std::span<std::byte> Client::alloc_buffer(std::size_t bytes) { return impl_->alloc_buffer(bytes); }
void Client::free_buffer(std::span<std::byte> buffer) { impl_->free_buffer(buffer); }
void Client::release_buffer(const void* data) { impl_->release_buffer(data); }

Status Client::put_async(std::string_view key, const void* value, std::size_t size, Callback cb, void* arg) {
  // The descriptor carries one pointer for both directions; a PUT's value is only ever read.
  return impl_->submit(protocol::ObjectOp::kPut, key, const_cast<void*>(value), size, cb, arg);
}
Status Client::get_async(std::string_view key, void* buffer, std::size_t capacity, Callback cb, void* arg) {
  return impl_->submit(protocol::ObjectOp::kGet, key, buffer, capacity, cb, arg);
}
Status Client::del_async(std::string_view key, Callback cb, void* arg) {
  return impl_->submit(protocol::ObjectOp::kDelete, key, nullptr, 0, cb, arg);
}
Result Client::put(std::string_view key, const void* value, std::size_t size) {
  return impl_->submit_sync(protocol::ObjectOp::kPut, key, const_cast<void*>(value), size);
}
Result Client::get(std::string_view key, void* buffer, std::size_t capacity) {
  return impl_->submit_sync(protocol::ObjectOp::kGet, key, buffer, capacity);
}
Result Client::del(std::string_view key) {
  return impl_->submit_sync(protocol::ObjectOp::kDelete, key, nullptr, 0);
}

std::uint32_t Client::max_inline_put(std::size_t key_len) const { return impl_->max_inline_put(key_len); }
std::uint32_t Client::max_inline_get() const { return impl_->max_inline_get(); }
ClientStats Client::stats() const { return impl_->stats(); }
std::string Client::auth_error(Status* why) const {
  return impl_->auth_error(why);
}
unsigned Client::progress() { return impl_->progress(); }
int Client::event_fd() const { return impl_->event_fd(); }
Status Client::arm() { return impl_->arm(); }

}  // namespace rdmagate::client

#pragma once
// rdmagate client library: connect to one or more gateways and PUT / GET / DELETE objects, synchronously
// or asynchronously. Built on the same engine as the gateway (control::Engine, active side, with
// client/object_client_service.hpp as the data-plane service), so it polls (and, in kCaller and kThread,
// sleeps on completion events when idle) and keeps to the same credit and protocol rules.
//
// Threads (ClientConfig::progress, chosen at create()):
//   - kCaller (default): no EAL, no hugepages needed, no pinned lcore. The one data-plane core runs when the
//     caller calls progress() (sync calls call it themselves); callbacks run inside progress() on the
//     caller's thread, and may submit (not call sync functions). One thread at a time uses the client. To
//     sleep in an event loop: arm(); on kOk wait for event_fd() to become readable; then progress().
//   - kThread: no EAL either; one internal, unpinned thread runs the core and the callbacks, and sleeps on
//     the same event fd when idle. Any thread may call.
//   - kEalLcores: create() initialises DPDK EAL if the process has not (a client embedded in a DPDK
//     application reuses its EAL) and starts `cores` polling lcores. Callbacks run on a data-plane lcore.
//     Derived EAL lcores (empty eal_args) keep off CPU 1, the gateway's default polling core.
// Every mode has one control thread (rdma_cm, reconnects; "rg-control"), which sleeps when idle. Callbacks
// must be short and must not block; they may issue further *_async calls, which then skip the submission
// ring. Sync calls may be made from any thread but a data-plane one (kCaller: not from a callback).
//
// Inline or chunked: a PUT whose value fits the negotiated inline size is copied into the request; a
// larger one is sent as a read chunk naming the caller's buffer (the gateway RDMA-READs it). A GET whose
// buffer is larger than the inline size passes it as a write chunk (the gateway RDMA-WRITEs into it);
// otherwise the value comes back inline and is copied into the buffer.
//
// Buffers: alloc_buffer() carves from the client's pool (EAL hugepages in kEalLcores; ordinary pages, 2 MiB
// ones when the system has them free, in kCaller and kThread), registered once. Any other buffer is
// registered on first use and cached (by page range) until release_buffer() or the client's end. Caller
// memory must stay valid and untouched until the request's callback has run. A callback (but in kCaller,
// where it runs on the caller's thread) never registers: non-pool memory it uses for a chunked request
// must have been used from a caller thread first (else kRegistration).
//
// Keys: see docs/client.md "Key scope" for which remote keys are exposed, when, and what remains to do.
//
// Authentication (protocol 1.2, docs/protocol.md §11; docs/client.md "Authentication"): with a principal and
// its secret (ClientConfig::principal plus secret or secrets_file) every connection to a gateway that
// requires authentication sends AUTH first and carries no request until the gateway has answered ok and
// proved the same secret (checked in constant time). A refusal fails the requests for that gateway with
// kAuthDenied, kAuthConnectionLimit, kAuthGatewayUnproven or, without credentials, kAuthRequired;
// auth_error() says why.
//
// Gateways: a key lives on the gateway that rendezvous hashing over XXH64 picks (docs/placement.md; the
// list's order does not matter, and every client must list the same gateways); each gateway gets
// `connections_per_gateway` connections spread over the cores. A lost connection reconnects by itself with
// backoff; requests that were in flight on it fail with kConnectionLost (never silently dropped, never
// retried behind the caller's back: a PUT may or may not have been applied).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::client {

enum class Status : std::uint32_t {
  kOk = 0,
  kNotFound,          // GET/DELETE: no such key
  kTooLarge,          // PUT: value above the gateway's max value size
  kNoSpace,           // PUT: gateway store full
  kBadRequest,        // the gateway refused the request as malformed (or the key length is invalid)
  kTooSmall,          // GET: the buffer is too small; Result::size is the size needed, nothing was written
  kNoResources,       // the gateway did not start the request (draining, busy); retrying may work
  kBulkFailed,        // the gateway could not RDMA READ/WRITE our buffer
  kConnectionLost,    // the connection carrying the request failed before the answer; outcome unknown
  kUnavailable,       // no connection to the key's gateway came up within request_timeout
  kTimeout,           // no answer within request_timeout (the connection is closed and reconnected)
  kBusy,              // the submission ring or the request table is full; retry later
  kRegistration,      // the caller's buffer could not be registered (ibv_reg_mr failed; or, from a callback,
                      // the buffer was never used from a caller thread: see docs/client.md "Key scope")
  kShutdown,          // the client is shutting down
  kProtocol,          // the gateway answered with something this client does not understand
  kStoreUnavailable,  // the gateway's backing store (RADOS) did not answer in time; retrying may work
  kCorrupt,           // the gateway found the stored value damaged (checksum mismatch); nothing was written
  // Authentication (the connection is closed and retried with backoff; requests for that gateway fail with
  // the status until a connection authenticates; Client::auth_error() has the text):
  kAuthRequired,         // the gateway requires authentication and this client has no credentials
  kAuthDenied,           // the gateway refused our principal or proof (unknown name or wrong secret)
  kAuthConnectionLimit,  // the principal already holds its max_connections at the gateway; retry later
  kAuthGatewayUnproven,  // the gateway answered ok but failed to prove the shared secret: not trusted
  kForbidden,            // the principal lacks the permission for the op (read, write or delete)
  kQuotaExceeded,        // PUT: the tenant's max_bytes or max_objects would be exceeded
};
const char* status_name(Status s) noexcept;

struct Result {
  Status status = Status::kOk;
  // PUT: bytes stored. GET: value size (kOk: bytes written to the buffer; kTooSmall: bytes needed).
  std::uint64_t size = 0;
  // Gateway status as received (protocol::ObjectStatus), for diagnostics.
  std::uint32_t wire_status = 0;
};

// SPDK-style completion: a function pointer and an argument, so no allocation per request.
using Callback = void (*)(void* arg, const Result& result);

struct Endpoint {
  std::string address;  // IPv4 or IPv6 literal
  std::uint16_t port = 7471;
};

// How the client's data-plane core runs (chosen at create(), never switched on the data path).
enum class Progress : std::uint8_t {
  kCaller = 1,     // default: no EAL, no hugepages, no pinned lcores; progress runs on the caller's thread
  kThread = 2,     // no EAL: one internal, unpinned progress thread runs completions and callbacks
  kEalLcores = 3,  // EAL, hugepage pool, pinned polling lcores (cores, lcores, eal_args): for high-rate clients
};

struct ClientConfig {
  std::vector<Endpoint> gateways;
  // kCaller and kThread run exactly one core (`cores` must be 1) on ordinary memory and ignore the EAL
  // fields below; kEalLcores uses them all.
  Progress progress = Progress::kCaller;
  std::string device;                    // ibv device name; empty: the only device
  // EAL: used only when the process has not initialised EAL yet.
  std::vector<std::string> eal_args;     // e.g. {"--lcores=0@0,1@1", "--in-memory", "--no-huge"}; empty: derived
  std::vector<unsigned> lcores;          // data-plane lcores; empty: the first `cores` worker lcores
  unsigned cores = 1;
  bool yield_when_idle = false;          // sched_yield after empty polls (more pollers than CPUs)
  std::uint32_t connections_per_gateway = 1;
  std::uint16_t queue_depth = 64;        // credits per connection
  std::uint32_t max_message = 4096;      // inline threshold offered in the handshake
  std::uint32_t max_inflight_per_conn = 32;
  std::size_t pool_bytes = 64u << 20;    // pool for alloc_buffer()
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds connect_timeout{10000};
  // Credentials (docs/client.md "Authentication"). principal: 1..64 bytes of [A-Za-z0-9._@-]; empty: none (a
  // gateway that requires authentication then fails with kAuthRequired). Its secret (16..64 bytes) either
  // here or from secrets_file, a YAML file in the gateway's format (`secrets: {<name>: "hex:..."}`) that
  // grants group and others no permission bit. Both set: create() refuses.
  std::string principal;
  std::vector<std::uint8_t> secret;
  std::string secrets_file;
  // Per-request keys (docs/client.md "Key scope"): each chunked request exposes only its own buffer, through
  // a type-2 memory window bound for it and invalidated before its callback runs. Where the device has no
  // type-2 windows the client logs so and hands out its registrations' keys (ClientStats::memory_windows
  // says which). false: the registrations' keys always (an operator who measured the windows' cost).
  bool memory_windows = true;
};

struct ClientStats {
  std::uint64_t submitted = 0, completed = 0;
  std::uint64_t inline_puts = 0, chunked_puts = 0, inline_gets = 0, chunked_gets = 0;
  std::uint64_t connection_lost = 0, timeouts = 0, busy = 0;
  std::uint64_t registrations = 0, registration_cache_hits = 0;
  std::uint64_t reconnects = 0;
  std::uint32_t connections_up = 0;
  // Added by the implementation (docs/client.md "Counters"): completions by cause, and answers that did
  // not fit the protocol.
  std::uint64_t unavailable = 0, shutdown = 0;
  std::uint64_t protocol_errors = 0;  // answers completed kProtocol
  std::uint64_t stale_answers = 0;    // answers naming no request in flight (ignored)
  std::uint64_t pending_parked = 0;   // requests that waited for a connection with room
  // Where the time goes, summed over requests (microseconds): submission to send (ring, pending FIFO) and
  // send to answer (wire, gateway). Divide by sent / answered.
  std::uint64_t sent = 0, answered = 0;
  std::uint64_t queue_us_total = 0, answer_us_total = 0;
  // Chunked requests with non-pool memory submitted by callbacks (docs/client.md "Key scope"): keys found in
  // the core's own cache (no lock), copied from the shared cache (its lock, once per buffer per core),
  // refused kRegistration (never used from a caller thread). registration_cache_hits includes the first two.
  std::uint64_t core_registration_hits = 0, core_registration_fills = 0, core_registration_unregistered = 0;
  // Authentication: connections that authenticated, and those that failed it (any of the kAuth* causes).
  std::uint64_t auth_ok = 0, auth_failures = 0;
  // Key scope: whether chunked requests go through memory windows (false: the registrations' keys, because
  // ClientConfig::memory_windows is false or the device has no type-2 windows); chunked requests sent each
  // way.
  bool memory_windows = false;
  std::uint64_t window_requests = 0, unscoped_requests = 0;
};

class ClientImpl;

class Client {
 public:
  static std::unique_ptr<Client> create(const ClientConfig& config, std::string* error);
  ~Client();  // fails what is still in flight with kShutdown, closes connections, stops the cores
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // True once every gateway has at least one connection up on every core (each core keeps its own connection
  // to each gateway, docs/client.md), or false at the timeout.
  bool wait_connected(std::chrono::milliseconds timeout);

  // Registered memory from the client's pool; empty span when the pool is exhausted.
  std::span<std::byte> alloc_buffer(std::size_t bytes);
  void free_buffer(std::span<std::byte> buffer);
  // Drops the cached registration covering `data` (call before freeing memory that was used in requests).
  void release_buffer(const void* data);

  // Async: returns kOk when the request was accepted (cb will run exactly once), otherwise the reason and
  // cb is never called.
  Status put_async(std::string_view key, const void* value, std::size_t size, Callback cb, void* arg);
  Status get_async(std::string_view key, void* buffer, std::size_t capacity, Callback cb, void* arg);
  Status del_async(std::string_view key, Callback cb, void* arg);

  // Sync: submit and wait for the answer (kCaller: turns the core, then sleeps on the event fd; other modes:
  // busy-waits with yields and naps; never from a data-plane thread or a callback).
  Result put(std::string_view key, const void* value, std::size_t size);
  Result get(std::string_view key, void* buffer, std::size_t capacity);
  Result del(std::string_view key);

  // Negotiated inline sizes (the smallest over the connections up), for callers that size buffers.
  std::uint32_t max_inline_put(std::size_t key_len) const;
  std::uint32_t max_inline_get() const;

  ClientStats stats() const;

  // Why the latest authentication failure happened, naming the gateway and the cause (e.g. "gateway
  // 10.0.0.2:7471: authentication denied for principal app-writer"); empty when none failed. `why`, when not
  // null, gets its Status (kOk when none failed).
  std::string auth_error(Status* why = nullptr) const;

  // kCaller: polls the core once (completions, their callbacks, submissions) and returns the completions
  // run; sync calls call it themselves. 0 in the other modes (their own threads progress).
  unsigned progress();
  // kCaller: a file descriptor that becomes readable when progress() has work (completions, a connection
  // handed over or back, a request deadline). -1 in the other modes. Never read it; call arm() again.
  int event_fd() const;
  // kCaller: kOk = armed, safe to sleep on event_fd() (poll/epoll for readability); kBusy = work is pending,
  // call progress() first (the ucp_worker_arm pattern). kOk in the other modes.
  Status arm();

 private:
  explicit Client(std::unique_ptr<ClientImpl> impl);
  std::unique_ptr<ClientImpl> impl_;
};

}  // namespace rdmagate::client

#pragma once
// The client library's data-plane service (docs/client.md): one per client core, run by
// CoreLoop<Backend, ObjectClientService>. Active side of the object protocol (protocol/object_wire.hpp).
//
// Each loop iteration (on_poll_st) it takes requests from
//   - its direct FIFO (requests issued by callbacks running on this core: no ring, no atomics),
//   - its submission ring (MPSC rte_ring of RequestDesc*, filled by caller threads),
//   - its per-gateway pending FIFOs (requests that found no connection with room),
// sends each on the connection to the key's gateway, pinned to this core, with the fewest requests in flight.
// The send half of the protocol is dataplane::ObjectRequester (services/object/object_requester.hpp): it
// builds the message (inline or by chunk), keeps the request in that connection's in-flight table (indexed
// by the cookie's low 16 bits; the high bits are a sequence number, so a late or forged answer never
// completes the wrong request) and checks the answer. This service maps the answer to a Status and runs the
// caller's callback here, on the core.
//
// Nothing is dropped: every accepted request is completed exactly once (answer, kConnectionLost when its
// connection closes, kTimeout when it outlived request_timeout (its connection is then closed, and the
// request completes at the close, once the QP is in ERR and the gateway can no longer touch the caller's
// buffer), kUnavailable when no connection took it in time, kShutdown when the client goes away).
//
// Authentication (docs/protocol.md §11): on a connection whose accept said `auth`, on_adopt_st sends AUTH
// first and the connection takes no request (pick_st skips it) until on_auth_answer_st has an ok answer whose
// gateway proof verifies. A refusal records its Status for the gateway (ServiceConfig::auth_failures), fails
// the requests waiting for that gateway with it and asks control to close the connection (it reconnects with
// backoff). The proofs cost two HMACs per connection, at adoption; nothing on the per-request path.
//
// Hot path rules: no allocation (every table is sized in the constructor), no locks, no syscalls.

#include <rte_cycles.h>
#include <rte_ring.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "client/client.hpp"
#include "client/registration_cache.hpp"
#include "dataplane/core_conn.hpp"
#include "protocol/auth.hpp"
#include "protocol/message.hpp"
#include "protocol/object_wire.hpp"
#include "services/object/object_requester.hpp"

namespace rdmagate::client {

// One request, from submission to completion. Filled on the caller's thread (the ring's release/acquire
// publishes it), owned by one core from dequeue to completion, then returned to the free ring.
struct alignas(64) RequestDesc {
  protocol::ObjectOp op = protocol::ObjectOp::kGet;
  std::uint8_t key_len = 0;
  bool registered = false;      // lkey/rkey name a registration covering [buf, buf + size)
  std::uint32_t gateway = 0;    // hash(key) % gateways, computed by the caller
  void* buf = nullptr;          // PUT: the value; GET: the destination
  std::uint64_t size = 0;       // PUT: value bytes; GET: capacity
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
  ibv_mr* mr = nullptr;  // the registration lkey/rkey belong to (what a memory window is bound to)
  Callback cb = nullptr;
  void* arg = nullptr;
  std::uint64_t submit_tsc = 0;
  char key[protocol::kMaxKeyLength];
};

// Counters of one core's service: written by that core only (relaxed load + store), read by anyone. The
// requester's (sends by kind, send_refused -> kBadRequest, unregistered -> kRegistration, stale_answers,
// protocol_errors -> kProtocol, answered, answer_tsc) come first, from the base.
struct ServiceCounters : dataplane::ObjectRequesterCounters {
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> connection_lost{0}, timeouts{0}, unavailable{0}, shutdown{0};
  std::atomic<std::uint64_t> unknown_conns{0};   // adopted a connection that is not in our table
  std::atomic<std::uint64_t> unexpected{0};      // requests from the gateway
  std::atomic<std::uint64_t> close_requests{0};  // connections we asked control to close (timeouts)
  std::atomic<std::uint64_t> pending_parked{0};  // requests that had to wait for a connection
  std::atomic<std::uint64_t> queue_tsc{0};       // sum over sent requests: submission -> send (TSC cycles)
  // Keys of chunked requests submitted by callbacks on this core (non-pool memory; CoreRegCache).
  std::atomic<std::uint64_t> reg_core_hits{0};          // found in this core's cache: no lock
  std::atomic<std::uint64_t> reg_core_fills{0};         // copied from the client's shared cache
  std::atomic<std::uint64_t> reg_core_unregistered{0};  // no caller thread registered it: kRegistration
  // Authentication: connections that authenticated; those that failed it (any cause); answers or requests
  // that broke the exchange (an AUTH_ANSWER nobody awaited, an answer before authentication).
  std::atomic<std::uint64_t> auth_ok{0}, auth_failures{0}, auth_violations{0};
};

inline void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// A connection of this core as the client set it up: control fills it before the cores are launched.
struct ServiceConnSpec {
  std::uint64_t handle = 0;          // ConnHandle::value of the engine connection (stable over reconnects)
  std::uint32_t gateway = 0;
  // Set by the core to the dataplane::CloseReason control closes the connection with (0: none). The reason
  // decides the reconnect's delay: after an authentication failure or a protocol violation the backoff
  // keeps growing (control::backoff_resets_after).
  std::atomic<std::uint8_t>* close_request = nullptr;
  // Set by the core while the connection takes requests (adopted, and authenticated when the gateway asked
  // for it); wait_connected and the published counts read it.
  std::atomic<bool>* ready = nullptr;
};

// The principal a client authenticates as (ClientConfig::principal and its secret). Empty name: none.
struct Credentials {
  std::string principal;
  std::vector<std::uint8_t> secret;  // protocol::auth::kMinSecret..kMaxSecret bytes
};

struct ServiceConfig {
  unsigned core = 0;
  std::uint64_t owner_id = 0;    // the client's process-unique id (callbacks on this core submit directly)
  rte_ring* submit = nullptr;    // MPSC: caller threads -> this core
  rte_ring* free_descs = nullptr;  // MPMC: descriptors back to the pool
  std::uint32_t gateways = 1;
  std::uint32_t pool_size = 1024;  // descriptors in the pool: no FIFO here can hold more
  std::uint32_t max_inflight_per_conn = 32;
  // Chunk requests a connection may have in flight: a core runs one transfer at a time and queues
  // dataplane::kChunkQueue more; beyond that the gateway answers kNoResources. The rest wait here.
  std::uint32_t max_chunked_per_conn = dataplane::kChunkQueue;
  std::uint64_t timeout_tsc = 0;
  std::vector<ServiceConnSpec> conns;
  const std::atomic<bool>* shutdown = nullptr;  // the client is going away: fail everything with kShutdown
  const Credentials* credentials = nullptr;     // the client's (outlives the service); nullptr: none
  // One per gateway: the Status of its latest authentication failure, kOk once a connection authenticated
  // again. Written by the cores, read by Client::auth_error().
  std::atomic<std::uint32_t>* auth_failures = nullptr;
  // Called after a close request is set, so a control thread that sleeps looks at it (Engine::wake).
  void (*wake_control)(void* arg) noexcept = nullptr;
  void* wake_control_arg = nullptr;
};

inline Status map_object_status(std::uint32_t s) noexcept {
  using protocol::ObjectStatus;
  switch (static_cast<ObjectStatus>(s)) {
    case ObjectStatus::kOk: return Status::kOk;
    case ObjectStatus::kBulkFailed: return Status::kBulkFailed;
    case ObjectStatus::kTooSmall: return Status::kTooSmall;
    case ObjectStatus::kNoResources: return Status::kNoResources;
    case ObjectStatus::kBadRequest: return Status::kBadRequest;
    case ObjectStatus::kNotFound: return Status::kNotFound;
    case ObjectStatus::kTooLarge: return Status::kTooLarge;
    case ObjectStatus::kNoSpace: return Status::kNoSpace;
    case ObjectStatus::kUnavailable: return Status::kStoreUnavailable;
    case ObjectStatus::kCorrupt: return Status::kCorrupt;
    case ObjectStatus::kForbidden:
      return Status::kForbidden;
    case ObjectStatus::kQuotaExceeded:
      return Status::kQuotaExceeded;
    case ObjectStatus::kUnknownOpcode: return Status::kProtocol;
  }
  return Status::kProtocol;
}

class ObjectClientService {
 public:
  static constexpr std::uint32_t kBurst = 32;
  static constexpr std::uint32_t kTimerEvery = 1024;  // loop iterations between timeout scans
  static constexpr std::uint32_t kTxSpare = 2;        // tx descriptors left for NOOPs

  explicit ObjectClientService(ServiceConfig cfg)
      : cfg_(std::move(cfg)), req_(requester_config(cfg_, &cnt_)) {
    slots_.resize(cfg_.conns.size());
    by_gateway_.resize(cfg_.gateways);
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      s.spec = cfg_.conns[i];
      if (s.spec.gateway < cfg_.gateways) by_gateway_[s.spec.gateway].push_back(static_cast<std::uint32_t>(i));
    }
    pending_.resize(cfg_.gateways);
    for (Fifo& f : pending_) f.buf.resize(cfg_.pool_size);
    gateway_auth_.assign(cfg_.gateways, Status::kOk);
    direct_.buf.resize(cfg_.pool_size);
  }
  ObjectClientService(const ObjectClientService&) = delete;
  ObjectClientService& operator=(const ObjectClientService&) = delete;

  // ---- the thread-local core context (callbacks that submit skip the ring) --------------------------------

  // The service of client `owner_id` whose core is the calling thread, or nullptr (caller threads, or the
  // core of another client). Compares the id before touching the pointer: a thread may outlive its service.
  static ObjectClientService* current(std::uint64_t owner_id) noexcept {
    return tl_owner_id_ == owner_id ? tl_current_ : nullptr;
  }
  unsigned core() const noexcept { return cfg_.core; }

  // From a callback on this core: queue `d`; it starts at the next loop iteration. Never fails: the FIFO holds
  // the whole pool.
  void submit_direct_st(RequestDesc* d) noexcept { direct_.push(d); }

  const ServiceCounters& counters() const noexcept { return cnt_; }
  // The send half: connection i of ServiceConfig::conns is the requester's link i.
  const dataplane::ObjectRequester<RequestDesc>& requester() const noexcept { return req_; }

  // From a submit on this core (a callback): the core's registration cache, and what a lookup came to.
  CoreRegCache& reg_cache_st() noexcept { return reg_cache_; }
  void count_reg_st(CoreRegCache::Outcome o) noexcept {
    switch (o) {
      case CoreRegCache::Outcome::kHit:
        bump(cnt_.reg_core_hits);
        break;
      case CoreRegCache::Outcome::kFill:
        bump(cnt_.reg_core_fills);
        break;
      case CoreRegCache::Outcome::kUnregistered:
        bump(cnt_.reg_core_unregistered);
        break;
    }
  }

  // ---- CoreService ------------------------------------------------------------------------------------------

  // A connection's place in our table: slot index + 1 (0: not one of ours, or closed). Slot i is the
  // requester's link i.
  struct ConnState {
    std::uint64_t slot = 0;
  };

  template <typename Api>
  void on_adopt_st(Api& api, dataplane::CoreConn& c) noexcept {
    ConnState& st = c.svc.reset<ConnState>();
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (s.spec.handle != c.handle.value) continue;
      req_.attach_st(static_cast<std::uint32_t>(i), c, api.windows_st(c));
      s.close_requested = false;
      st.slot = i + 1;
      if (c.session.auth_required) {
        start_auth_st(api, static_cast<std::uint32_t>(i), c);
      } else {
        set_open_st(s);
      }
      return;
    }
    bump(cnt_.unknown_conns);
  }

  // The gateway's AUTH_ANSWER (the core hands it here; protocol 1.2 §11.2). Ok with a verified proof opens
  // the connection; anything else fails it. Not awaited (no AUTH sent, or a second answer): a protocol error.
  template <typename Api>
  void on_auth_answer_st(Api& api, dataplane::CoreConn& c, const protocol::Message& m) noexcept {
    const std::uint32_t link = link_of(c);
    if (link == Requester::kNoLink) return;
    Slot& s = slots_[link];
    if (s.auth != AuthPhase::kAwaiting || m.cookie != kAuthCookie) {
      bump(cnt_.auth_violations);
      request_close_st(s, dataplane::CloseReason::kProtocolError);
      return;
    }
    switch (static_cast<protocol::auth::AuthStatus>(m.auth_status)) {
      case protocol::auth::AuthStatus::kOk:
        // Constant time: a gateway that guesses must learn nothing from how long we took to refuse it.
        if (!protocol::auth::proofs_equal(m.auth_proof, s.expected_pg)) {
          fail_auth_st(link, Status::kAuthGatewayUnproven);
          return;
        }
        bump(cnt_.auth_ok);
        gateway_auth_[s.spec.gateway] = Status::kOk;
        if (cfg_.auth_failures != nullptr)
          cfg_.auth_failures[s.spec.gateway].store(0, std::memory_order_relaxed);
        set_open_st(s);
        if (pending_total_ != 0) drain_pending_st(api);  // what waited for this connection goes now
        return;
      case protocol::auth::AuthStatus::kConnectionLimit:
        fail_auth_st(link, Status::kAuthConnectionLimit);
        return;
      case protocol::auth::AuthStatus::kDenied:
        break;
    }
    fail_auth_st(link, Status::kAuthDenied);  // denied, or a status this client does not know
  }

  template <typename Api>
  void on_request_st(Api&, dataplane::CoreConn&, const protocol::Message&) noexcept {
    bump(cnt_.unexpected);
  }

  template <typename Api>
  void on_response_st(Api& api, dataplane::CoreConn& c, const protocol::Message& m) noexcept {
    const std::uint32_t link = link_of(c);
    // Nothing but AUTH_ANSWER may come before authentication (no request was sent, so no answer is due).
    if (link != Requester::kNoLink && slots_[link].auth != AuthPhase::kOpen) [[unlikely]] {
      bump(cnt_.auth_violations);
      request_close_st(slots_[link], dataplane::CloseReason::kProtocolError);
      return;
    }
    // No user: stale (counted by the requester), or kept until its memory window's invalidation completes.
    deliver_st(req_.on_answer_st(api, link, c, m));
  }

  // Optional hook: a memory window's invalidation completed; the request it served gets its answer now.
  template <typename Api>
  void on_window_invalidated_st(Api&, dataplane::CoreConn& c, std::uint32_t window) noexcept {
    deliver_st(req_.on_window_invalidated_st(link_of(c), c, window));
  }

  template <typename Api>
  void on_close_st(Api&, dataplane::CoreConn& c) noexcept {
    const std::uint32_t link = link_of(c);
    if (!req_.carries_st(link, c)) return;
    // The QP is in ERR now: the gateway can no longer touch the buffers of what was in flight.
    const bool shutting = cfg_.shutdown->load(std::memory_order_relaxed);
    req_.fail_all_st(
        link,
        [&](RequestDesc* d, bool timed_out) {
          Result r;
          if (shutting) {
            r.status = Status::kShutdown;
            bump(cnt_.shutdown);
          } else if (timed_out) {
            r.status = Status::kTimeout;
          } else {
            r.status = Status::kConnectionLost;
            bump(cnt_.connection_lost);
          }
          complete_st(d, r);
        },
        [&](const dataplane::ObjectAnswer<RequestDesc>& a) { deliver_st(a); });
    Slot& s = slots_[link];
    s.close_requested = false;
    s.auth = AuthPhase::kClosed;
    if (s.spec.ready != nullptr) s.spec.ready->store(false, std::memory_order_release);
    c.svc.reset<ConnState>();
  }

  // Optional hook: once per loop iteration.
  template <typename Api>
  bool on_poll_st(Api& api) noexcept {
    if (!bound_) [[unlikely]] {
      tl_current_ = this;
      tl_owner_id_ = cfg_.owner_id;
      bound_ = true;
    }
    if (cfg_.shutdown->load(std::memory_order_relaxed)) [[unlikely]] {
      fail_queued_st(Status::kShutdown);
      return false;
    }
    bool sent = false;
    while (direct_.count != 0) sent |= start_st(api, direct_.pop());
    void* burst[kBurst];
    const unsigned n = rte_ring_sc_dequeue_burst(cfg_.submit, burst, kBurst, nullptr);
    for (unsigned i = 0; i < n; ++i) sent |= start_st(api, static_cast<RequestDesc*>(burst[i]));
    if (pending_total_ != 0) sent |= drain_pending_st(api);
    if (++polls_ % kTimerEvery == 0) [[unlikely]] timers_st();
    return sent;
  }

  // ---- a core its owner drives and lets sleep (the client's kCaller / kThread modes), on the core's thread ----

  // Submissions not yet taken: the core must run before its owner sleeps.
  bool submissions_waiting_st() const noexcept { return direct_.count != 0 || rte_ring_count(cfg_.submit) != 0; }
  // Requests accepted and not completed (in flight or parked): their timeouts need a timer while the owner
  // sleeps.
  bool requests_open_st() const noexcept {
    if (pending_total_ != 0) return true;
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
      if (req_.inflight_st(i) != 0) return true;
    }
    return false;
  }
  // The timeout scan now (on_poll_st runs it every kTimerEvery polls, which a sleeping core may not reach).
  void run_timers_st() noexcept { timers_st(); }

  // After the core stopped (client teardown, on the destroying thread): fail whatever is left.
  void fail_all_after_stop(Status why) noexcept {
    fail_queued_st(why);
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
      req_.fail_all_st(
          i,
          [&](RequestDesc* d, bool) {
            Result r;
            r.status = why;
            bump(cnt_.shutdown);
            complete_st(d, r);
          },
          [&](const dataplane::ObjectAnswer<RequestDesc>& a) { deliver_st(a); });
    }
  }

 private:
  using Requester = dataplane::ObjectRequester<RequestDesc>;
  // Where a connection stands with authentication (the gateway's, docs/protocol.md §11.2).
  enum class AuthPhase : std::uint8_t {
    kClosed,    // no connection adopted
    kAwaiting,  // AUTH sent, no answer yet: takes no request
    kOpen,      // authenticated, or the gateway did not ask: takes requests
    kFailed,    // refused or unproven: closing, takes no request
  };
  // AUTH's cookie: the answer must echo it (there is only ever one AUTH per connection).
  static constexpr std::uint64_t kAuthCookie = 0x4854554147444752ull;  // "RGDGAUTH"

  struct Slot {
    ServiceConnSpec spec;  // its connection (while this core owns it) and in-flight table: the requester's
    bool close_requested = false;
    AuthPhase auth = AuthPhase::kClosed;
    protocol::auth::Proof expected_pg{};  // the gateway's proof we expect, computed with the AUTH
  };
  struct Fifo {
    std::vector<RequestDesc*> buf;
    std::uint32_t head = 0, count = 0;
    void push(RequestDesc* d) noexcept {
      buf[(head + count) % buf.size()] = d;
      ++count;
    }
    RequestDesc* front() const noexcept { return buf[head]; }
    RequestDesc* pop() noexcept {
      RequestDesc* d = buf[head];
      head = static_cast<std::uint32_t>((head + 1) % buf.size());
      --count;
      return d;
    }
  };
  enum class Start : std::uint8_t { kSent, kNoConn, kDone };

  static dataplane::ObjectRequesterConfig requester_config(const ServiceConfig& cfg,
                                                           dataplane::ObjectRequesterCounters* counters) {
    dataplane::ObjectRequesterConfig rc;
    rc.links = static_cast<std::uint32_t>(cfg.conns.size());
    rc.max_inflight = cfg.max_inflight_per_conn;
    rc.max_chunked = cfg.max_chunked_per_conn;
    rc.counters = counters;
    return rc;
  }

  // The connection takes requests from now on. Control publishes what is up (wait_connected, the inline
  // sizes) when it wakes, and nothing else wakes it when authentication ends after the adoption: ring it.
  void set_open_st(Slot& s) noexcept {
    s.auth = AuthPhase::kOpen;
    if (s.spec.ready != nullptr) s.spec.ready->store(true, std::memory_order_release);
    if (cfg_.wake_control != nullptr) cfg_.wake_control(cfg_.wake_control_arg);
  }

  void request_close_st(Slot& s, dataplane::CloseReason why = dataplane::CloseReason::kLocal) noexcept {
    if (s.close_requested) return;
    s.close_requested = true;
    bump(cnt_.close_requests);
    s.spec.close_request->store(static_cast<std::uint8_t>(why), std::memory_order_release);
    if (cfg_.wake_control != nullptr) cfg_.wake_control(cfg_.wake_control_arg);
  }

  // AUTH as the connection's first message (protocol §11.2): a fresh client nonce, our proof, and the proof
  // we will require of the gateway, over the transcript both sides can build from the handshake.
  template <typename Api>
  void start_auth_st(Api& api, std::uint32_t link, dataplane::CoreConn& c) noexcept {
    Slot& s = slots_[link];
    const Credentials* cr = cfg_.credentials;
    if (cr == nullptr || cr->principal.empty()) {
      fail_auth_st(link, Status::kAuthRequired);
      return;
    }
    protocol::auth::Transcript t{
        c.session.local_incarnation, c.session.peer_incarnation, c.session.gateway_nonce, {}, cr->principal};
    protocol::auth::Proof pc{};
    if (!protocol::auth::random_nonce(&t.client_nonce) ||
        !protocol::auth::compute_proof(protocol::auth::Role::kClient, cr->secret, t, &pc) ||
        !protocol::auth::compute_proof(protocol::auth::Role::kGateway, cr->secret, t, &s.expected_pg)) {
      fail_auth_st(link, Status::kAuthDenied);  // libcrypto failed (never expected): we cannot authenticate
      return;
    }
    s.auth = AuthPhase::kAwaiting;
    const protocol::Message m = protocol::make_auth_message(
        kAuthCookie, static_cast<std::uint8_t>(protocol::auth::Mechanism::kHmacSha256), cr->principal,
        t.client_nonce, pc);
    if (!api.send_built_st(c, m)) fail_auth_st(link, Status::kAuthDenied);
  }

  // The connection cannot authenticate: record why for its gateway, fail what waits for that gateway unless
  // another of its connections on this core is open, and have control close this one (it reconnects, with a
  // backoff that goes on growing while every session fails so).
  void fail_auth_st(std::uint32_t link, Status why) noexcept {
    Slot& s = slots_[link];
    s.auth = AuthPhase::kFailed;
    bump(cnt_.auth_failures);
    const std::uint32_t g = s.spec.gateway;
    gateway_auth_[g] = why;
    if (cfg_.auth_failures != nullptr) {
      cfg_.auth_failures[g].store(static_cast<std::uint32_t>(why), std::memory_order_relaxed);
    }
    if (!gateway_open_st(g)) {
      Fifo& p = pending_[g];
      while (p.count != 0) {
        --pending_total_;
        fail_now_st(p.pop(), why);
      }
    }
    request_close_st(s, dataplane::CloseReason::kAuthDenied);
  }

  bool gateway_open_st(std::uint32_t g) const noexcept {
    for (const std::uint32_t i : by_gateway_[g])
      if (slots_[i].auth == AuthPhase::kOpen && req_.conn_st(i) != nullptr) return true;
    return false;
  }

  // The requester's link of `c` (kNoLink: not one of ours, or closed); on_answer_st and carries_st check
  // that the link still carries `c`.
  std::uint32_t link_of(const dataplane::CoreConn& c) const noexcept {
    const std::uint64_t i = c.svc.as<ConnState>().slot;
    return i != 0 && i <= slots_.size() ? static_cast<std::uint32_t>(i - 1) : Requester::kNoLink;
  }

  // An answer the requester hands back (user == nullptr: nothing to complete).
  void deliver_st(const dataplane::ObjectAnswer<RequestDesc>& a) noexcept {
    if (a.user == nullptr) return;
    Result r;
    r.status = a.malformed ? Status::kProtocol : map_object_status(static_cast<std::uint32_t>(a.status));
    r.size = a.size;
    r.wire_status = a.wire_status;
    complete_st(a.user, r);
  }

  void complete_st(RequestDesc* d, const Result& r) noexcept {
    const Callback cb = d->cb;
    void* const arg = d->arg;
    bump(cnt_.completed);
    // Back to the pool before the callback, so a callback that submits again finds a descriptor.
    rte_ring_mp_enqueue(cfg_.free_descs, d);
    cb(arg, r);
  }

  // A request arriving at this core: behind the pending ones of its gateway (per-gateway FIFO order), or sent.
  template <typename Api>
  bool start_st(Api& api, RequestDesc* d) noexcept {
    Fifo& p = pending_[d->gateway];
    if (p.count == 0) {
      const Start st = try_send_st(api, d);
      if (st != Start::kNoConn) return st == Start::kSent;
    }
    // The gateway refused our authentication and no connection to it is open: waiting would only end in
    // kUnavailable, so say why now.
    if (const Status why = gateway_auth_[d->gateway]; why != Status::kOk) [[unlikely]] {
      if (!gateway_open_st(d->gateway)) {
        fail_now_st(d, why);
        return false;
      }
    }
    p.push(d);
    ++pending_total_;
    bump(cnt_.pending_parked);
    return false;
  }

  template <typename Api>
  bool drain_pending_st(Api& api) noexcept {
    bool sent = false;
    for (Fifo& p : pending_) {
      while (p.count != 0) {
        const Start st = try_send_st(api, p.front());
        if (st == Start::kNoConn) break;
        p.pop();
        --pending_total_;
        sent |= st == Start::kSent;
      }
    }
    return sent;
  }

  // The owned connection to `gateway` with room (for a chunk request, if `chunked`) and the fewest requests
  // in flight: its link, or kNoLink.
  template <typename Api>
  std::uint32_t pick_st(Api& api, std::uint32_t gateway, bool chunked) noexcept {
    std::uint32_t best = Requester::kNoLink;
    for (const std::uint32_t i : by_gateway_[gateway]) {
      const dataplane::CoreConn* conn = req_.conn_st(i);
      if (conn == nullptr || slots_[i].close_requested || slots_[i].auth != AuthPhase::kOpen ||
          !req_.room_st(i, chunked) || conn->state != dataplane::CoreConnState::kOwned ||
          api.tx_available_st(*conn) <= kTxSpare) {
        continue;
      }
      if (best == Requester::kNoLink || req_.inflight_st(i) < req_.inflight_st(best)) best = i;
    }
    return best;
  }

  template <typename Api>
  Start try_send_st(Api& api, RequestDesc* d) noexcept {
    // Whether it will need a chunk, judged by the registration the caller made (the caller registers
    // whatever the smallest negotiated inline size cannot carry): a connection must have chunk room for it.
    const std::uint32_t link = pick_st(api, d->gateway, d->registered);
    if (link == Requester::kNoLink) return Start::kNoConn;
    dataplane::OutboundObjectRequest<RequestDesc> out;
    out.user = d;
    out.op = d->op;
    out.key = std::string_view(d->key, d->key_len);
    out.buf = d->buf;
    out.size = d->size;
    out.registered = d->registered;
    out.rkey = d->rkey;
    out.mr = d->mr;
    const dataplane::ObjectSendResult sent = req_.send_st(api, link, out);
    switch (sent.status) {
      case dataplane::ObjectSendStatus::kSent:
        bump(cnt_.queue_tsc, sent.sent_tsc - d->submit_tsc);
        return Start::kSent;
      case dataplane::ObjectSendStatus::kNoRoom:  // pick_st checked the room: not reached
        return Start::kNoConn;
      case dataplane::ObjectSendStatus::kTooLarge:
        return fail_now_st(d, Status::kTooLarge);
      case dataplane::ObjectSendStatus::kUnregistered:
        // Possible only if a connection negotiated a smaller message than any published before.
        return fail_now_st(d, Status::kRegistration);
      case dataplane::ObjectSendStatus::kRefused:
        return fail_now_st(d, Status::kBadRequest);
    }
    return fail_now_st(d, Status::kBadRequest);
  }

  Start fail_now_st(RequestDesc* d, Status why) noexcept {
    Result r;
    r.status = why;
    complete_st(d, r);
    return Start::kDone;
  }

  // Requests in flight past the timeout close their connection (they complete kTimeout at the close); requests
  // still waiting for a connection past the timeout complete kUnavailable (kTimeout if one was up).
  void timers_st() noexcept {
    const std::uint64_t now = rte_rdtsc();
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (req_.conn_st(i) == nullptr || req_.inflight_st(i) == 0) continue;
      const std::uint32_t n =
          req_.mark_if_st(i, [&](const RequestDesc* d) { return now - d->submit_tsc > cfg_.timeout_tsc; });
      if (n == 0) continue;
      bump(cnt_.timeouts, n);
      request_close_st(s);
    }
    for (std::uint32_t g = 0; g < pending_.size(); ++g) {
      Fifo& p = pending_[g];
      while (p.count != 0 && now - p.front()->submit_tsc > cfg_.timeout_tsc) {
        RequestDesc* d = p.pop();
        --pending_total_;
        bool up = false;
        for (const std::uint32_t i : by_gateway_[g]) up |= req_.conn_st(i) != nullptr;
        if (up) {
          bump(cnt_.timeouts);
        } else {
          bump(cnt_.unavailable);
        }
        fail_now_st(d, up ? Status::kTimeout : Status::kUnavailable);
      }
    }
  }

  // Everything not yet sent: the direct FIFO, the ring, the pending FIFOs.
  void fail_queued_st(Status why) noexcept {
    Result r;
    r.status = why;
    while (direct_.count != 0) {
      bump(cnt_.shutdown);
      complete_st(direct_.pop(), r);
    }
    void* burst[kBurst];
    for (;;) {
      const unsigned n = rte_ring_sc_dequeue_burst(cfg_.submit, burst, kBurst, nullptr);
      if (n == 0) break;
      for (unsigned i = 0; i < n; ++i) {
        bump(cnt_.shutdown);
        complete_st(static_cast<RequestDesc*>(burst[i]), r);
      }
    }
    for (Fifo& p : pending_) {
      while (p.count != 0) {
        --pending_total_;
        bump(cnt_.shutdown);
        complete_st(p.pop(), r);
      }
    }
  }

  ServiceConfig cfg_;
  ServiceCounters cnt_;  // before req_, which counts into it
  Requester req_;
  std::vector<Slot> slots_;
  std::vector<std::vector<std::uint32_t>> by_gateway_;
  std::vector<Fifo> pending_;
  std::uint32_t pending_total_ = 0;
  std::vector<Status> gateway_auth_;  // per gateway: this core's latest authentication failure (kOk: none)
  Fifo direct_;
  std::uint64_t polls_ = 0;
  bool bound_ = false;
  CoreRegCache reg_cache_;
  static inline thread_local ObjectClientService* tl_current_ = nullptr;
  static inline thread_local std::uint64_t tl_owner_id_ = 0;
};

}  // namespace rdmagate::client

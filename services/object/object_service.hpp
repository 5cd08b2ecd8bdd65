#pragma once
// The gateway's object service (docs/protocol.md §8): PUT / GET / DELETE over a storage backend
// (services/storage/storage.hpp), plus the ECHO and SINK opcodes, as a CoreLoop service (one instance per
// data-plane core; every method _st).
//
// Zero copy: chunked values move by RDMA straight between the requester's memory and the backend's leases
// (the store arena, which the gateway registers once, IBV_ACCESS_LOCAL_WRITE only).
//   PUT, read chunk:  reserve(chunk length) -> RDMA READ into the lease -> commit -> Completion. The
//                     reservation is private until commit, so nobody sees a half-read value.
//   GET, write chunk: get (pins the published value) -> RDMA WRITE from it -> Completion(kOk, size) sent at
//                     once (it travels behind the WRITEs on the same QP) -> release when the WRITE
//                     completes. The store is copy-on-write: an overwrite or delete meanwhile publishes or
//                     unpublishes another block and leaves the pinned one intact until the release.
// A lease the NIC may touch is given back only in the core's bulk hooks, which the core calls exactly once
// per started transfer, before the connection is answered CLOSED, even when it fails or closes
// mid-transfer; so the NIC never touches a block after it went back to the backend.
//
// Ops that end later. Any storage call may return kPending; its Completion arrives on the backend's queue,
// which on_poll_st drains (only while something is pending, so the memory store, which ends every op at
// once, costs nothing there). A request that outlives the call that started it (its storage op pends, it
// waits for the bulk engine, or its transfer runs) takes a slot of this core's request table; the tag
// given to the backend is the slot and its generation, never a pointer, and a connection's requests hang
// off its ConnState. A connection that closes detaches its pending requests (their completion then only
// gives back what it lends) and drops the chunk requests still waiting; so no completion ever reaches a
// CoreConn that control may have freed.
//
// Per-connection bounds: a connection holds at most one lease for a transfer (a reservation of a PUT or a
// pin of a GET, at most max_value bytes: the backend refuses more) from its chunk request's storage call
// until the core's bulk hook ends the transfer. A chunk request that arrives while another of the same
// connection is open (its storage op pends, its transfer runs, or its commit pends) waits here without a
// lease and without a storage call, at most kChunkQueue of them per connection (more are answered
// no_resources), and starts when the open one ended. Only a backend whose ops pend (RADOS) makes any wait:
// with the memory store the transfer starts inside the call and the core hands over no chunk request while
// it runs.
//
// Latency: from the poll that delivered the request to its answer, observed in ObjectServiceConfig::stats
// by op.
//
// Tenants (docs/store.md "Tenant namespaces, permissions and quotas"). A connection's keys live in its
// tenant's namespace (storage::Namespace from CoreConn::tenant_id and the principal's tenant name; the
// unauthenticated namespace when authentication is off), so the peer's key reaches the backend unchanged
// and two tenants' equal keys are different objects. GET needs kPermRead, PUT kPermWrite, DELETE
// kPermDelete (CoreConn::perms, all bits when authentication is off), else the answer is forbidden before
// any storage call or transfer; ECHO and SINK need none. A PUT holds what it may add to its tenant's usage
// (TenantUsage, shared by every core) with a compare-exchange against the tenant's limits before its store
// call or READ, else quota_exceeded; its end turns the hold into what it really changed (the backend's
// Prior) or gives it back, on every path (a failed call, a failed or abandoned READ, a closed connection).
// A DELETE gives back what it removed. Only with a backend that reports_prior() (the memory store).

#include <rte_cycles.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "dataplane/auth_table.hpp"
#include "dataplane/core_conn.hpp"
#include "protocol/message.hpp"
#include "protocol/object_wire.hpp"
#include "services/storage/completion_queue.hpp"
#include "services/storage/storage.hpp"
#include "telemetry/stats.hpp"

namespace rdmagate::dataplane {

struct ObjectServiceConfig {
  storage::CoreStorage* storage = nullptr;  // this core's handle (store::Store::core(i) for the memory store)
  std::uint32_t arena_lkey = 0;             // lkey of the registration covering every lease
  // Requests a core keeps open at once (a storage op pending, a transfer running or waiting to); more are
  // answered no_resources. Capped by the backend's completion queue, so that a completion always has room.
  std::uint32_t max_requests = 1024;
  telemetry::CoreStats* stats = nullptr;  // optional: request latency by op (observe_request_ns)
};

// Answer statuses as counters index them: ObjectStatus 0..5, then the application ones 0x100..0x106.
inline constexpr std::size_t kObjectStatusSlots = 13;
constexpr std::size_t object_status_slot(protocol::ObjectStatus s) noexcept {
  const auto v = static_cast<std::uint32_t>(s);
  if (v < protocol::kStatusApplicationBase) return v < 6 ? v : 5;
  const std::uint32_t app = v - protocol::kStatusApplicationBase;
  return app < kObjectStatusSlots - 6 ? 6 + app : 5;
}
static_assert(object_status_slot(protocol::ObjectStatus::kQuotaExceeded) == kObjectStatusSlots - 1);

// The permission an object op needs (dataplane::Permission).
constexpr std::uint8_t permission_for(protocol::ObjectOp op) noexcept {
  switch (op) {
    case protocol::ObjectOp::kGet:
      return kPermRead;
    case protocol::ObjectOp::kPut:
      return kPermWrite;
    case protocol::ObjectOp::kDelete:
      return kPermDelete;
  }
  return kPermAll;
}

// Plain per-core counters: only the owning core writes them; read them after the core stopped (or tolerate
// torn values).
struct ObjectServiceCounters {
  std::array<std::uint64_t, protocol::kObjectOpCount> requests{};  // well-formed object requests, by op
  // Answers by op, then object_status_slot.
  std::array<std::array<std::uint64_t, kObjectStatusSlots>, protocol::kObjectOpCount> statuses{};
  std::array<std::uint64_t, protocol::kObjectParseErrorCount> parse_errors{};  // refused payloads, by reason
  std::uint64_t echo = 0;
  std::uint64_t sink = 0;
  std::uint64_t bytes_in = 0;       // value bytes stored (committed PUTs)
  std::uint64_t bytes_out = 0;      // value bytes returned (inline or written)
  std::uint64_t send_failures = 0;  // an answer could not be sent (connection not owned, no descriptor)
  std::uint64_t bulk_failures = 0;  // transfers that ended failed (a READ/WRITE error, a lost connection)
  // Chunk requests that waited for their connection's open one, dropped unanswered by on_close_st. They
  // hold no lease: nothing is given back at the close (the name is older than that rule).
  std::uint64_t released_at_close = 0;
  // Answers received (inline responses and completions): a gateway sends no requests, so every one is
  // unsolicited. Ignored and counted (by type in the core's stats block).
  std::uint64_t unexpected = 0;
  std::uint64_t storage_pending = 0;    // storage calls that returned kPending
  std::uint64_t deferred = 0;           // chunk requests that waited for their connection's open one
  std::uint64_t deferred_full = 0;      // chunk requests answered no_resources: kChunkQueue already waited
  std::uint64_t table_full = 0;         // requests answered no_resources: max_requests were open
  std::uint64_t orphaned = 0;           // completions whose connection had closed: only given back
  std::uint64_t stale_completions = 0;  // completions naming no pending request (a backend bug): dropped
};

class ObjectService {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  // Setup: sizes the request table (the only allocation).
  explicit ObjectService(const ObjectServiceConfig& cfg)
      : cfg_(cfg),
        storage_(*cfg.storage),
        cq_(storage_.completions()),
        accounting_(storage_.reports_prior()) {
    std::uint32_t n = std::max<std::uint32_t>(1, cfg.max_requests);
    if (cq_ != nullptr) n = std::min(n, cq_->capacity());
    reqs_.resize(n);
    free_.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) free_[i] = n - 1 - i;  // slot 0 on top
    free_top_ = n;
  }

  const ObjectServiceCounters& counters() const noexcept { return cnt_; }
  const ObjectServiceConfig& config() const noexcept { return cfg_; }
  // Requests open on this core (pending, waiting or transferring), and of them those whose storage op pends.
  std::uint32_t open_requests() const noexcept {
    return static_cast<std::uint32_t>(reqs_.size()) - free_top_;
  }
  std::uint32_t pending_storage_ops() const noexcept { return pending_; }

  struct ConnState {
    std::uint32_t first = kNone;         // the connection's open requests (Request::prev/next)
    std::uint32_t chunk = kNone;         // the open chunk request: the only one that may hold a lease
    std::uint32_t transfer = kNone;      // the request whose lease the bulk engine moves (== chunk)
    std::uint32_t waiting_head = kNone;  // chunk requests waiting for `chunk` to end, oldest first
    std::uint32_t waiting_tail = kNone;
    std::uint32_t waiting = 0;
    std::uint32_t open = 0;  // requests on the list
    bool starting = false;   // start_waiting_st is running (a request ending inside it starts no other)
  };

  template <typename Api>
  void on_adopt_st(Api& api, CoreConn& c) noexcept {
    if (!tsc_) tsc_.emplace(api.tsc_hz());
    c.svc.reset<ConnState>();
  }

  template <typename Api>
  void on_request_st(Api& api, CoreConn& c, const protocol::Message& m) noexcept {
    using protocol::ObjectOpcode;
    if (m.opcode == static_cast<std::uint16_t>(ObjectOpcode::kEcho)) {
      ++cnt_.echo;
      if (!api.send_st(c, protocol::MessageType::kInlineResponse, m.opcode, m.cookie, m.payload)) {
        ++cnt_.send_failures;
      }
      return;
    }
    if (m.opcode == static_cast<std::uint16_t>(ObjectOpcode::kSink)) {
      ++cnt_.sink;
      return;
    }
    const std::uint64_t start = api.now_tsc_st();
    protocol::ObjectRequest req;
    const protocol::ObjectParseError pe = protocol::parse_object_request(m.type, m.opcode, m.payload, req);
    if (pe != protocol::ObjectParseError::kOk) {
      refuse_st(api, c, m.opcode, m.cookie, pe);
      return;
    }
    if ((c.perms & permission_for(req.op)) == 0) {
      forbid_st(api, c, req.op, m.opcode, m.cookie, start);
      return;
    }
    const std::uint32_t i = next_request_st(api, c, req.op, m.opcode, m.cookie, start);
    if (i == kNone) return;
    Request& r = reqs_[i];
    r.chunked = false;
    const storage::Namespace ns = namespace_of(c);
    storage::Lease lease;
    storage::Prior prior;
    storage::Status st = storage::Status::kOk;
    switch (req.op) {
      case protocol::ObjectOp::kPut:
        r.call = Call::kPut;
        r.bytes = static_cast<std::uint32_t>(req.value.size());
        if (!hold_quota(c, ns, req.key, r)) {
          over_quota_st(api, c, r);
          return;  // the slot was never taken
        }
        st = storage_.put(ns, req.key, std::as_bytes(req.value), tag(i), &prior);
        break;
      case protocol::ObjectOp::kGet:
        r.call = Call::kGet;
        st = storage_.get(ns, req.key, tag(i), &lease);
        break;
      case protocol::ObjectOp::kDelete:
        r.call = Call::kRemove;
        if (accounting_ && c.principal != nullptr && c.principal->tenant != nullptr) {
          r.usage = c.principal->tenant->usage;
        }
        st = storage_.remove(ns, req.key, tag(i), &prior);
        break;
    }
    after_call_st(api, c, i, st, lease, prior);
  }

  template <typename Api>
  void on_chunk_request_st(Api& api, CoreConn& c, const ChunkRequest& cr) noexcept {
    const std::uint64_t start = api.now_tsc_st();
    protocol::ObjectRequest req;
    const protocol::ObjectParseError pe = parse_chunk(cr, req);
    if (pe != protocol::ObjectParseError::kOk) {
      refuse_st(api, c, cr.opcode, cr.cookie, pe);
      return;
    }
    if ((c.perms & permission_for(req.op)) == 0) {
      forbid_st(api, c, req.op, cr.opcode, cr.cookie, start);
      return;
    }
    ConnState& cs = c.svc.as<ConnState>();
    if (cs.chunk != kNone && cs.waiting == kChunkQueue) {
      ++cnt_.deferred_full;
      count_answer(req.op, protocol::ObjectStatus::kNoResources);
      send_completion_st(api, c, cr.opcode, cr.cookie, protocol::ObjectStatus::kNoResources, 0);
      observe_st(req.op, start);
      return;
    }
    const std::uint32_t i = next_request_st(api, c, req.op, cr.opcode, cr.cookie, start);
    if (i == kNone) return;
    Request& r = reqs_[i];
    r.chunked = true;
    r.cr = cr;
    if (cs.chunk == kNone) {
      start_chunk_st(api, c, i);
      return;
    }
    // Another chunk request of the connection is open: this one waits, holding nothing but its slot.
    take(c, i);
    r.state = ReqState::kWaiting;
    r.wait_next = kNone;
    if (cs.waiting_tail == kNone) {
      cs.waiting_head = i;
    } else {
      reqs_[cs.waiting_tail].wait_next = i;
    }
    cs.waiting_tail = i;
    ++cs.waiting;
    ++cnt_.deferred;
  }

  // Whether a core with idle_policy event may sleep as far as storage goes: no op pending, or the backend's
  // completion queue rings the core's storage doorbell (CompletionQueue::set_wake), so a completion wakes it.
  bool idle_st() const noexcept { return pending_ == 0 || cq_->wakes(); }

  // Completions of pending storage ops. Returns true when it may have staged sends or transfers.
  template <typename Api>
  bool on_poll_st(Api& api) noexcept {
    if (pending_ == 0) return false;
    std::array<storage::Completion, kPollBurst> batch;
    const std::uint32_t n = cq_->pop_burst_st(batch);
    for (std::uint32_t k = 0; k < n; ++k) complete_st(api, batch[k]);
    return n != 0;
  }

  // Every READ of a PUT landed in the reservation: publish it.
  template <typename Api>
  void on_bulk_read_done_st(Api& api, CoreConn& c, const BulkOp& op) noexcept {
    const std::uint32_t i = end_transfer(c);
    if (i == kNone) return;
    Request& r = reqs_[i];
    r.call = Call::kCommit;
    r.bytes = op.bytes;
    storage::Prior prior;
    // Takes the lease whatever the outcome.
    const storage::Status st = storage_.commit(namespace_of(c), &r.lease, tag(i), &prior);
    if (st == storage::Status::kPending) {
      r.state = ReqState::kStorage;
      ++pending_;
      ++cnt_.storage_pending;
    } else {
      on_result_st(api, c, i, st, storage::Lease{}, prior);
    }
  }

  // A READ failed or the connection went away mid-transfer: the NIC is done with the reservation now.
  template <typename Api>
  void on_bulk_read_failed_st(Api& api, CoreConn& c, const BulkOp&) noexcept {
    ++cnt_.bulk_failures;
    const std::uint32_t i = end_transfer(c);
    if (i == kNone) return;
    Request& r = reqs_[i];
    storage_.abort(&r.lease);
    settle_usage(r, false, {});
    // Answered only if the connection still can (it normally cannot: a failed READ fails the connection).
    if (c.state == CoreConnState::kOwned) {
      answer_st(api, c, r, protocol::ObjectStatus::kBulkFailed, 0);
    }
    drop_st(api, c, i);
  }

  // The last WRITE of a GET completed (or flushed): the pin can go.
  template <typename Api>
  void on_bulk_write_done_st(Api& api, CoreConn& c, const BulkOp& op) noexcept {
    if (op.failed) {
      ++cnt_.bulk_failures;
    } else {
      cnt_.bytes_out += op.bytes;
    }
    const std::uint32_t i = end_transfer(c);
    if (i == kNone) return;
    storage_.release(&reqs_[i].lease);
    drop_st(api, c, i);
  }

  // A transfer still in flight keeps its lease: the core ends it (read-failed / write-done) before CLOSED,
  // after every posted READ/WRITE completed or flushed (also when the bulk deadline failed the connection).
  // Waiting chunk requests are dropped (they hold no lease); pending ones are detached and end when their
  // completion arrives.
  template <typename Api>
  void on_close_st(Api&, CoreConn& c) noexcept {
    ConnState& cs = c.svc.as<ConnState>();
    for (std::uint32_t i = cs.first; i != kNone;) {
      Request& r = reqs_[i];
      const std::uint32_t next = r.next;
      switch (r.state) {
        case ReqState::kStorage:
          unlink(cs, i);
          r.conn = nullptr;
          break;
        case ReqState::kWaiting:
          ++cnt_.released_at_close;
          unlink(cs, i);
          free_slot(i);
          break;
        case ReqState::kTransfer:
        case ReqState::kFree:
          break;
      }
      i = next;
    }
    cs.waiting_head = cs.waiting_tail = kNone;
    cs.waiting = 0;
  }

  // Open requests of the connection (the core's quiesce waits for none).
  std::uint64_t pending_st(const CoreConn& c) const noexcept { return c.svc.as<ConnState>().open; }

  // The gateway never sends a request, so no answer is ever awaited: an inline response or a completion
  // (whatever its cookie, a repeated one included) is unsolicited. It is ignored (it held only the receive
  // the core already re-posted, and cost the peer a credit) and counted, so a broken peer shows.
  template <typename Api>
  void on_response_st(Api&, CoreConn&, const protocol::Message& m) noexcept {
    ++cnt_.unexpected;
    if (cfg_.stats != nullptr) {
      cfg_.stats->add(m.type == protocol::MessageType::kCompletion
                          ? telemetry::Stat::kUnsolicitedCompletions
                          : telemetry::Stat::kUnsolicitedInlineResponses);
    }
  }

 private:
  static constexpr std::uint32_t kPollBurst = 32;

  enum class ReqState : std::uint8_t {
    kFree = 0,
    kStorage = 1,   // a storage call of it is pending: its Completion comes through the queue
    kWaiting = 2,   // a chunk request waiting for its connection's open one; no storage call, no lease
    kTransfer = 3,  // its lease is the bulk engine's until a bulk hook ends the transfer
  };
  // The storage call a request made last.
  enum class Call : std::uint8_t { kGet = 0, kPut = 1, kRemove = 2, kReserve = 3, kCommit = 4 };

  struct Request {
    ReqState state = ReqState::kFree;
    Call call = Call::kGet;
    protocol::ObjectOp op = protocol::ObjectOp::kGet;
    bool chunked = false;
    std::uint16_t opcode = 0;
    std::uint32_t gen = 0;                     // bumped at every free: a tag names one use of the slot
    std::uint32_t prev = kNone, next = kNone;  // the connection's requests
    std::uint32_t wait_next = kNone;
    std::uint32_t bytes = 0;   // PUT: the value's length (the answer's byte count)
    CoreConn* conn = nullptr;  // null once its connection closed: the completion only gives back
    std::uint64_t cookie = 0;
    std::uint64_t start = 0;
    // The tenant a PUT holds quota of (held_*: what it may add) or a DELETE gives back to; null: nothing to
    // account (authentication off, or a backend without Prior). settle_usage clears it.
    TenantUsage* usage = nullptr;
    std::uint64_t held_bytes = 0;
    std::uint64_t held_objects = 0;
    storage::Lease lease{};
    ChunkRequest cr{};  // chunked: the request (fragments and key), kept while it waits or transfers
  };

  // The slot on top of the free stack, filled with what every request has, or kNone (answered no_resources).
  // It is filled before the storage call so that the call gets its tag, and taken only if the request
  // outlives the call.
  template <typename Api>
  std::uint32_t next_request_st(Api& api, CoreConn& c, protocol::ObjectOp op, std::uint16_t opcode,
                                std::uint64_t cookie, std::uint64_t start) noexcept {
    if (free_top_ == 0) {
      table_full_st(api, c, op, opcode, cookie, start);
      return kNone;
    }
    const std::uint32_t i = free_[free_top_ - 1];
    Request& r = reqs_[i];
    r.op = op;
    r.opcode = opcode;
    r.cookie = cookie;
    r.start = start;
    r.usage = nullptr;
    r.held_bytes = r.held_objects = 0;
    return i;
  }

  // The store namespace of the connection's keys: its tenant's, or the unauthenticated one (no principal:
  // authentication off, tenant_id 0).
  static storage::Namespace namespace_of(const CoreConn& c) noexcept {
    if (c.principal == nullptr || c.principal->tenant == nullptr) return {};
    return storage::Namespace{c.tenant_id, c.principal->tenant->name};
  }

  // PUT r (r.bytes long, of `key`) holds what it may add to its tenant's usage, within the tenant's limits:
  // its length minus what the key holds now, and an object if it holds none. False: the PUT would pass a
  // limit (exactly at it is fine). Each figure is reserved by a compare-exchange on the tenant's shared
  // counter, so the PUTs of one tenant on every core never pass a limit together. The look at the key
  // (peek) is made only when the tenant has a limit; settle_usage trues the hold up with what the store
  // really replaced either way, so the count stays exact.
  bool hold_quota(const CoreConn& c, const storage::Namespace& ns, std::string_view key,
                  Request& r) noexcept {
    if (!accounting_ || c.principal == nullptr || c.principal->tenant == nullptr) return true;
    const TenantEntry& t = *c.principal->tenant;
    if (t.usage == nullptr) return true;
    if (t.max_bytes != 0 || t.max_objects != 0) {
      const storage::Prior now = storage_.peek(ns, key);
      const std::uint64_t add_bytes = r.bytes > now.bytes ? r.bytes - now.bytes : 0;
      const std::uint64_t add_objects = now.existed ? 0 : 1;
      if (!reserve_within(t.usage->bytes, add_bytes, t.max_bytes)) return false;
      if (!reserve_within(t.usage->objects, add_objects, t.max_objects)) {
        t.usage->bytes.fetch_sub(add_bytes, std::memory_order_relaxed);
        return false;
      }
      r.held_bytes = add_bytes;
      r.held_objects = add_objects;
    }
    r.usage = t.usage;
    return true;
  }

  static bool reserve_within(std::atomic<std::uint64_t>& used, std::uint64_t n,
                             std::uint64_t limit) noexcept {
    if (n == 0) return true;  // adds nothing: allowed even above a limit a reload lowered
    std::uint64_t cur = used.load(std::memory_order_relaxed);
    do {
      if (limit != 0 && (cur > limit || n > limit - cur)) return false;
    } while (!used.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
    return true;
  }

  // The end of request r for its tenant's usage (a no-op without one): a stored PUT turns its hold into
  // what it changed (its length minus the value it replaced, an object if it replaced none), a PUT that
  // stored nothing gives its hold back, a DELETE gives back what it removed.
  static void settle_usage(Request& r, bool ok, const storage::Prior& prior) noexcept {
    TenantUsage* u = r.usage;
    if (u == nullptr) return;
    r.usage = nullptr;
    std::uint64_t bytes = 0;  // added (modulo 2^64, so a decrease wraps)
    std::uint64_t objects = 0;
    if (r.op == protocol::ObjectOp::kPut) {
      if (ok) {
        bytes = std::uint64_t{r.bytes} - prior.bytes;
        objects = prior.existed ? 0 : 1;
      }
      bytes -= r.held_bytes;
      objects -= r.held_objects;
    } else if (ok && prior.existed) {  // DELETE
      bytes = 0 - std::uint64_t{prior.bytes};
      objects = 0 - std::uint64_t{1};
    }
    r.held_bytes = r.held_objects = 0;
    if (bytes != 0) u->bytes.fetch_add(bytes, std::memory_order_relaxed);
    if (objects != 0) u->objects.fetch_add(objects, std::memory_order_relaxed);
  }

  static std::uint64_t tag_of(std::uint32_t i, std::uint32_t gen) noexcept {
    return std::uint64_t{gen} << 32 | i;
  }
  std::uint64_t tag(std::uint32_t i) const noexcept { return tag_of(i, reqs_[i].gen); }

  // A storage call returned: it pends, or the request goes on now.
  template <typename Api>
  void after_call_st(Api& api, CoreConn& c, std::uint32_t i, storage::Status st, const storage::Lease& lease,
                     const storage::Prior& prior) noexcept {
    if (st == storage::Status::kPending) {
      take(c, i);
      reqs_[i].state = ReqState::kStorage;
      ++pending_;
      ++cnt_.storage_pending;
      return;
    }
    on_result_st(api, c, i, st, lease, prior);
  }

  template <typename Api>
  void complete_st(Api& api, const storage::Completion& done) noexcept {
    const auto i = static_cast<std::uint32_t>(done.tag);
    if (i >= reqs_.size() || tag(i) != done.tag || reqs_[i].state != ReqState::kStorage ||
        done.status == storage::Status::kPending) {
      ++cnt_.stale_completions;
      return;
    }
    --pending_;
    Request& r = reqs_[i];
    if (r.conn == nullptr) {
      ++cnt_.orphaned;
      if (done.status == storage::Status::kOk) {
        storage::Lease lease = done.lease;
        give_back(r, lease);
      }
      // A PUT or DELETE that ended kOk changed the store all the same; a reserve's hold goes back with it.
      settle_usage(r, done.status == storage::Status::kOk && r.call != Call::kReserve, done.prior());
      free_slot(i);
      return;
    }
    on_result_st(api, *r.conn, i, done.status, done.lease, done.prior());
  }

  // Gives back what a get or a reserve lent (nothing for the other calls).
  void give_back(const Request& r, storage::Lease& lease) noexcept {
    if (r.call == Call::kGet) {
      storage_.release(&lease);
    } else if (r.call == Call::kReserve) {
      storage_.abort(&lease);
    }
  }

  // The outcome of request i's last storage call (not kPending), now or from its Completion.
  template <typename Api>
  void on_result_st(Api& api, CoreConn& c, std::uint32_t i, storage::Status st, const storage::Lease& lease,
                    const storage::Prior& prior) noexcept {
    Request& r = reqs_[i];
    const bool ok = st == storage::Status::kOk;
    switch (r.call) {
      case Call::kPut:
      case Call::kCommit:
        if (ok) cnt_.bytes_in += r.bytes;
        settle_usage(r, ok, prior);
        answer_st(api, c, r, map_status(st), ok ? r.bytes : 0);
        drop_st(api, c, i);
        return;
      case Call::kRemove:
        settle_usage(r, ok, prior);
        answer_st(api, c, r, map_status(st), 0);
        drop_st(api, c, i);
        return;
      case Call::kGet:
        if (!ok) {
          answer_st(api, c, r, map_status(st), 0);
          drop_st(api, c, i);
        } else if (r.chunked) {
          chunk_get_found_st(api, c, i, lease);
        } else {
          inline_get_found_st(api, c, i, lease);
        }
        return;
      case Call::kReserve:
        if (!ok) {
          settle_usage(r, false, {});
          answer_st(api, c, r, map_status(st), 0);
          drop_st(api, c, i);
          return;
        }
        r.lease = lease;
        take(c, i);
        start_transfer_st(api, c, i);
        return;
    }
  }

  template <typename Api>
  void inline_get_found_st(Api& api, CoreConn& c, std::uint32_t i, storage::Lease lease) noexcept {
    Request& r = reqs_[i];
    if (lease.size > protocol::max_inline_get_value(c.session.params.max_message_size)) {
      const std::uint32_t need = lease.size;
      storage_.release(&lease);
      answer_st(api, c, r, protocol::ObjectStatus::kTooSmall, need);
      drop_st(api, c, i);
      return;
    }
    count_answer(protocol::ObjectOp::kGet, protocol::ObjectStatus::kOk);
    // encode_message copies the value into the send buffer, so the lease ends right here.
    const bool sent = api.send_st(
        c, protocol::MessageType::kInlineResponse, r.opcode, r.cookie,
        std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(lease.data), lease.size));
    if (sent) {
      cnt_.bytes_out += lease.size;
    } else {
      ++cnt_.send_failures;
    }
    storage_.release(&lease);
    observe_st(protocol::ObjectOp::kGet, r.start);
    drop_st(api, c, i);
  }

  template <typename Api>
  void chunk_get_found_st(Api& api, CoreConn& c, std::uint32_t i, storage::Lease lease) noexcept {
    Request& r = reqs_[i];
    const std::uint32_t size = lease.size;
    if (r.cr.chunk.total_length() < size) {  // nothing is written; the requester learns the size it needs
      storage_.release(&lease);
      answer_st(api, c, r, protocol::ObjectStatus::kTooSmall, size);
      drop_st(api, c, i);
      return;
    }
    if (size == 0) {  // nothing to write
      storage_.release(&lease);
      answer_st(api, c, r, protocol::ObjectStatus::kOk, 0);
      drop_st(api, c, i);
      return;
    }
    r.lease = lease;
    take(c, i);
    start_transfer_st(api, c, i);
  }

  static protocol::ObjectParseError parse_chunk(const ChunkRequest& cr,
                                                protocol::ObjectRequest& req) noexcept {
    using protocol::ObjectOpcode;
    if (cr.opcode == static_cast<std::uint16_t>(ObjectOpcode::kEcho) ||
        cr.opcode == static_cast<std::uint16_t>(ObjectOpcode::kSink)) {
      return protocol::ObjectParseError::kWrongType;  // inline-only opcodes
    }
    const protocol::ObjectParseError pe =
        protocol::parse_object_request(cr.type, cr.opcode, cr.payload(), req);
    // A payload longer than the kept bytes is longer than any valid key prefix (kChunkPayloadMax).
    if (pe == protocol::ObjectParseError::kOk && !cr.payload_complete()) {
      return protocol::ObjectParseError::kTrailingBytes;
    }
    return pe;
  }

  // Chunk request i (its ChunkRequest kept in the slot, parsed once already) becomes its connection's open
  // one and makes its storage call: reserve for a PUT, get for a GET.
  template <typename Api>
  void start_chunk_st(Api& api, CoreConn& c, std::uint32_t i) noexcept {
    Request& r = reqs_[i];
    protocol::ObjectRequest req;
    (void)parse_chunk(r.cr, req);  // accepted when it arrived; the key is a view into r.cr
    c.svc.as<ConnState>().chunk = i;
    const storage::Namespace ns = namespace_of(c);
    storage::Lease lease;
    storage::Status st;
    if (req.op == protocol::ObjectOp::kPut) {
      r.call = Call::kReserve;
      const std::uint64_t total = r.cr.chunk.total_length();
      // Above 4 GiB no backend takes it (the reserve answers too_large): nothing to hold.
      r.bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(total, UINT32_MAX));
      if (total <= UINT32_MAX && !hold_quota(c, ns, req.key, r)) {
        over_quota_st(api, c, r);
        drop_st(api, c, i);
        return;
      }
      st = storage_.reserve(ns, req.key, total, tag(i), &lease);
    } else {
      r.call = Call::kGet;
      st = storage_.get(ns, req.key, tag(i), &lease);
    }
    after_call_st(api, c, i, st, lease, storage::Prior{});
  }

  // The connection's open chunk request ended: the oldest waiting one starts (and, if it ends inside its
  // call, the next), unless the connection stopped being owned (on_close_st drops them).
  template <typename Api>
  void start_waiting_st(Api& api, CoreConn& c) noexcept {
    ConnState& cs = c.svc.as<ConnState>();
    cs.chunk = kNone;
    if (cs.starting) return;  // the loop below is on the stack: it goes on
    cs.starting = true;
    while (cs.chunk == kNone && cs.waiting_head != kNone && c.state == CoreConnState::kOwned) {
      const std::uint32_t i = cs.waiting_head;
      cs.waiting_head = reqs_[i].wait_next;
      if (cs.waiting_head == kNone) cs.waiting_tail = kNone;
      --cs.waiting;
      reqs_[i].state = ReqState::kTransfer;  // taken; after_call_st or on_result_st says what it becomes
      start_chunk_st(api, c, i);
    }
    cs.starting = false;
  }

  template <typename Api>
  void start_transfer_st(Api& api, CoreConn& c, std::uint32_t i) noexcept {
    Request& r = reqs_[i];
    const ChunkRequest& cr = r.cr;
    auto* local = reinterpret_cast<std::uint8_t*>(r.lease.data);
    if (r.op == protocol::ObjectOp::kPut) {
      if (!api.bulk_read_st(c, cr, local, cfg_.arena_lkey)) {
        storage_.abort(&r.lease);
        settle_usage(r, false, {});
        answer_st(api, c, r, protocol::ObjectStatus::kNoResources, 0);
        drop_st(api, c, i);
        return;
      }
      // answered once the READs landed and the commit ended
    } else {
      if (!api.bulk_write_st(c, cr, local, cfg_.arena_lkey, r.lease.size)) {
        storage_.release(&r.lease);
        answer_st(api, c, r, protocol::ObjectStatus::kNoResources, 0);
        drop_st(api, c, i);
        return;
      }
      // The completion travels behind the WRITEs on the same QP: the requester sees the data first. The
      // lease stays until on_bulk_write_done_st.
      answer_st(api, c, r, protocol::ObjectStatus::kOk, r.lease.size);
    }
    r.state = ReqState::kTransfer;
    c.svc.as<ConnState>().transfer = i;
  }

  // The request of the transfer that just ended (kNone if the service started none: cannot happen).
  std::uint32_t end_transfer(CoreConn& c) noexcept {
    ConnState& cs = c.svc.as<ConnState>();
    const std::uint32_t i = cs.transfer;
    cs.transfer = kNone;
    return i;
  }

  // Request i outlives the call that started it: its slot (the free stack's top) is taken and linked to
  // the connection. A no-op when it already is.
  void take(CoreConn& c, std::uint32_t i) noexcept {
    Request& r = reqs_[i];
    if (r.state != ReqState::kFree) return;
    --free_top_;
    r.conn = &c;
    ConnState& cs = c.svc.as<ConnState>();
    r.prev = kNone;
    r.next = cs.first;
    if (cs.first != kNone) reqs_[cs.first].prev = i;
    cs.first = i;
    ++cs.open;
    r.state = ReqState::kTransfer;  // the caller says what it is
  }

  void unlink(ConnState& cs, std::uint32_t i) noexcept {
    Request& r = reqs_[i];
    if (r.prev != kNone) {
      reqs_[r.prev].next = r.next;
    } else {
      cs.first = r.next;
    }
    if (r.next != kNone) reqs_[r.next].prev = r.prev;
    r.prev = r.next = kNone;
    --cs.open;
  }

  // Request i is answered and holds nothing: its slot goes back (if it ever took one). A chunk request
  // ending lets its connection's next waiting one start.
  template <typename Api>
  void drop_st(Api& api, CoreConn& c, std::uint32_t i) noexcept {
    Request& r = reqs_[i];
    const bool chunk = r.chunked;
    if (r.state != ReqState::kFree) {
      if (r.conn != nullptr) unlink(c.svc.as<ConnState>(), i);
      free_slot(i);
    }
    if (chunk) start_waiting_st(api, c);
  }

  void free_slot(std::uint32_t i) noexcept {
    Request& r = reqs_[i];
    r.state = ReqState::kFree;
    r.conn = nullptr;
    ++r.gen;
    free_[free_top_++] = i;
  }

  template <typename Api>
  void table_full_st(Api& api, CoreConn& c, protocol::ObjectOp op, std::uint16_t opcode, std::uint64_t cookie,
                     std::uint64_t start) noexcept {
    ++cnt_.table_full;
    count_answer(op, protocol::ObjectStatus::kNoResources);
    send_completion_st(api, c, opcode, cookie, protocol::ObjectStatus::kNoResources, 0);
    observe_st(op, start);
  }

  // A request the connection's principal may not make: answered forbidden before any storage call.
  template <typename Api>
  void forbid_st(Api& api, CoreConn& c, protocol::ObjectOp op, std::uint16_t opcode, std::uint64_t cookie,
                 std::uint64_t start) noexcept {
    if (cfg_.stats != nullptr) cfg_.stats->add(telemetry::Stat::kObjectForbidden);
    count_answer(op, protocol::ObjectStatus::kForbidden);
    send_completion_st(api, c, opcode, cookie, protocol::ObjectStatus::kForbidden, 0);
    observe_st(op, start);
  }

  template <typename Api>
  void over_quota_st(Api& api, CoreConn& c, const Request& r) noexcept {
    if (cfg_.stats != nullptr) cfg_.stats->add(telemetry::Stat::kObjectQuotaExceeded);
    answer_st(api, c, r, protocol::ObjectStatus::kQuotaExceeded, 0);
  }

  template <typename Api>
  void refuse_st(Api& api, CoreConn& c, std::uint16_t opcode, std::uint64_t cookie,
                 protocol::ObjectParseError pe) noexcept {
    ++cnt_.parse_errors[static_cast<std::size_t>(pe) < cnt_.parse_errors.size() ? static_cast<std::size_t>(pe)
                                                                                : 0];
    const protocol::ObjectStatus st = pe == protocol::ObjectParseError::kUnknownOpcode
                                          ? protocol::ObjectStatus::kUnknownOpcode
                                          : protocol::ObjectStatus::kBadRequest;
    send_completion_st(api, c, opcode, cookie, st, 0);
  }

  // Counts, answers request r with a completion and observes its latency.
  template <typename Api>
  void answer_st(Api& api, CoreConn& c, const Request& r, protocol::ObjectStatus st,
                 std::uint32_t bytes) noexcept {
    count_answer(r.op, st);
    send_completion_st(api, c, r.opcode, r.cookie, st, bytes);
    observe_st(r.op, r.start);
  }

  template <typename Api>
  void send_completion_st(Api& api, CoreConn& c, std::uint16_t opcode, std::uint64_t cookie,
                          protocol::ObjectStatus st, std::uint32_t bytes) noexcept {
    if (!api.send_st(c, protocol::MessageType::kCompletion, opcode, cookie, {},
                     static_cast<std::uint32_t>(st), bytes)) {
      ++cnt_.send_failures;
    }
  }

  void count_answer(protocol::ObjectOp op, protocol::ObjectStatus st) noexcept {
    const auto i = static_cast<std::size_t>(op);
    ++cnt_.requests[i];
    ++cnt_.statuses[i][object_status_slot(st)];
  }

  // From the poll that delivered the request (the core's cached TSC) to now: a fresh TSC read, since an
  // inline answer is sent within the same burst and the cached value would measure nothing. Only with stats
  // on.
  void observe_st(protocol::ObjectOp op, std::uint64_t start) noexcept {
    if (cfg_.stats == nullptr || !tsc_) return;
    const std::uint64_t now = rte_rdtsc();
    cfg_.stats->observe_request_ns(op, tsc_->ns(now > start ? now - start : 0));
  }

  // kPending never reaches an answer (after_call_st and complete_st take it first).
  static protocol::ObjectStatus map_status(storage::Status s) noexcept {
    switch (s) {
      case storage::Status::kOk:
        return protocol::ObjectStatus::kOk;
      case storage::Status::kNotFound:
        return protocol::ObjectStatus::kNotFound;
      case storage::Status::kTooLarge:
        return protocol::ObjectStatus::kTooLarge;
      case storage::Status::kNoSpace:
        return protocol::ObjectStatus::kNoSpace;
      case storage::Status::kUnavailable:
        return protocol::ObjectStatus::kUnavailable;
      case storage::Status::kCorrupt:
        return protocol::ObjectStatus::kCorrupt;
      case storage::Status::kBadRequest:
      case storage::Status::kPending:
        break;
    }
    return protocol::ObjectStatus::kBadRequest;
  }

  ObjectServiceConfig cfg_;
  storage::CoreStorage& storage_;
  storage::CompletionQueue* cq_;
  const bool accounting_;  // the backend reports_prior(): tenants' usage is counted and their limits held
  ObjectServiceCounters cnt_{};
  std::vector<Request> reqs_;
  std::vector<std::uint32_t> free_;  // free slots (a stack)
  std::uint32_t free_top_ = 0;
  std::uint32_t pending_ = 0;  // requests in kStorage, orphans included
  std::optional<telemetry::TscToNs> tsc_;
};

}  // namespace rdmagate::dataplane

#pragma once
// The active side of the object protocol (protocol/object_wire.hpp) as a component any CoreLoop service can
// own, so that a service acts as a client on its own core: the client library's ObjectClientService
// (client/object_client_service.hpp) uses it for every request it sends, and a forwarding service would use
// it for the requests it passes on. It knows nothing about where requests come from or what their owner does
// with the outcome: a request carries an opaque `User*` (the client's RequestDesc, a forwarding service's own
// request) that is handed back, never dereferenced.
//
// What it does, on the connections ("links") its owner tells it about:
//   - send_st builds a PUT / GET / DELETE inline or with one read/write chunk fragment naming the caller's
//     memory, as the session's negotiated sizes ask, and sends it through the core's api.send_st;
//   - it keeps each sent request in the link's in-flight table, indexed by the cookie's low 16 bits; the high
//     48 bits are a sequence number, so a late, duplicated or forged answer never completes another request
//     (counted stale_answers);
//   - on_answer_st matches an answer to its request, checks it against the request (opcode, message type,
//     byte counts) and maps it to an ObjectAnswer; an inline GET's value is copied into the caller's buffer;
//   - fail_all_st hands every request still in flight back exactly once, when the link's connection closed
//     (the QP is in ERR: the peer can no longer touch the requests' memory).
// Keys (docs/client-internals.md "Key scope"): on a link attached with memory windows, a chunk names a window
// bound to the request's buffer alone, just before the request's send, with a key no earlier request had;
// the answer invalidates it, and the request is handed back (on_window_invalidated_st) only once that
// completed, so the peer can no longer touch the buffer the owner gets back. On a link without windows (the
// device or backend has none) the chunk names the owner's registration key, as given.
// Links are numbered 0..links-1 by the owner (who keeps the number in its ConnState); attach_st binds a
// link to the connection the core adopted. Every table is sized in the constructor: no allocation, lock or
// syscall afterwards; every method _st runs on the owner's core.

#include <rte_cycles.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "dataplane/core_conn.hpp"
#include "protocol/message.hpp"
#include "protocol/object_wire.hpp"

namespace rdmagate::dataplane {

// Counters of one requester: written by its core only (relaxed load + store), readable from any thread. An
// owner may embed them in its own counters block (ObjectRequesterConfig::counters).
struct ObjectRequesterCounters {
  // Requests send_st built, by kind (a request refused after its kind was known still counts).
  std::atomic<std::uint64_t> inline_puts{0}, chunked_puts{0}, inline_gets{0}, chunked_gets{0}, deletes{0};
  std::atomic<std::uint64_t> send_refused{0};     // the payload could not be encoded or api.send_st refused
  std::atomic<std::uint64_t> unregistered{0};     // a chunk was needed but the request was not registered
  std::atomic<std::uint64_t> stale_answers{0};    // answers naming no request in flight (ignored)
  std::atomic<std::uint64_t> protocol_errors{0};  // answers that broke the protocol (ObjectAnswer::malformed)
  std::atomic<std::uint64_t> answered{0};         // answers that completed a request
  std::atomic<std::uint64_t> answer_tsc{0};       // sum over answered requests: send -> answer (TSC cycles)
  // Memory windows: chunk requests sent through one (scoped keys), and those sent with the registration's key
  // on a link without windows.
  std::atomic<std::uint64_t> window_requests{0}, unscoped_requests{0};
};

struct ObjectRequesterConfig {
  std::uint32_t links = 0;          // connections the owner may attach at once, numbered 0..links-1
  std::uint32_t max_inflight = 32;  // per link; at most 65535 (the cookie's low 16 bits; 0xffff: none)
  // Chunk requests a link may have in flight: a gateway core runs one transfer at a time and queues
  // dataplane::kChunkQueue more; beyond that it answers kNoResources.
  std::uint32_t max_chunked = kChunkQueue;
  std::uint32_t scratch_bytes = protocol::kMaxMessageSizeCap;  // payload staging (bounds inline requests)
  ObjectRequesterCounters* counters = nullptr;                 // nullptr: the requester's own
};

// One request to send. `buf` stays the caller's until the request is answered or failed: the peer may RDMA
// READ it (PUT by chunk) or WRITE it (GET by chunk), and an inline GET answer is copied into it.
template <typename User>
struct OutboundObjectRequest {
  User* user = nullptr;  // handed back with the answer or the failure; never dereferenced
  protocol::ObjectOp op = protocol::ObjectOp::kGet;
  std::string_view key;     // 1..kMaxKeyLength bytes; copied into the message
  void* buf = nullptr;      // PUT: the value; GET: the destination
  std::uint64_t size = 0;   // PUT: value bytes; GET: capacity
  bool registered = false;  // `rkey` covers [buf, buf + size): the request may travel with a chunk
  std::uint32_t rkey = 0;
  // The registration covering [buf, buf + size), registered for window binding: what a link with windows
  // binds its window to (its own key then grants the peer nothing).
  ibv_mr* mr = nullptr;
};

enum class ObjectSendStatus : std::uint8_t {
  kSent = 0,
  kNoRoom = 1,        // link not attached, its table full, or a chunk needed and max_chunked in flight;
                      // nothing was counted or sent: try later or on another link
  kTooLarge = 2,      // PUT value above the session's max_bulk_size
  kUnregistered = 3,  // the request needs a chunk and is not registered (counted unregistered)
  kRefused = 4,       // the payload could not be encoded or api.send_st refused (counted send_refused)
};

struct ObjectSendResult {
  ObjectSendStatus status = ObjectSendStatus::kNoRoom;
  bool chunked = false;        // kSent: it travelled as a chunk request
  std::uint64_t cookie = 0;    // kSent: the cookie the answer must carry
  std::uint64_t sent_tsc = 0;  // kSent: rte_rdtsc() right after the send
};

// What an answer came to. user == nullptr: stale (no request in flight had its cookie), nothing completed.
// Otherwise the request is no longer in flight, and:
//   malformed: the answer broke the protocol (wrong opcode or message type for the request, a byte count
//              the request cannot have, a status that is not an object status or is kUnknownOpcode, kTooSmall
//              for anything but a GET); counted protocol_errors;
//   else `status` is the peer's verdict (kOk, kNotFound, ...). An inline GET answer larger than the buffer
//   comes as kTooSmall with the size needed and leaves the buffer untouched (an inline GET carries no
//   capacity, so the peer cannot know).
template <typename User>
struct ObjectAnswer {
  User* user = nullptr;
  bool malformed = false;
  protocol::ObjectStatus status = protocol::ObjectStatus::kOk;
  std::uint64_t size = 0;  // PUT: bytes stored; GET: value size (kOk: bytes written; kTooSmall: needed)
  std::uint32_t wire_status = 0;  // a completion's status as received (0 for an inline answer)
};

template <typename User>
class ObjectRequester {
 public:
  static constexpr std::uint32_t kNoLink = 0xffffffffu;
  static constexpr std::uint32_t kMaxWindows = 32;  // per link (a bit mask of free ones)
  static constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << 48) - 1;

  explicit ObjectRequester(const ObjectRequesterConfig& cfg)
      : max_inflight_(std::clamp<std::uint32_t>(cfg.max_inflight, 1, 0xffff)),
        max_chunked_(cfg.max_chunked),
        cnt_(cfg.counters != nullptr ? cfg.counters : &own_) {
    links_.resize(cfg.links);
    window_owner_.assign(std::size_t{cfg.links} * kMaxWindows, kNoEntry);
    table_.resize(std::size_t{cfg.links} * max_inflight_);
    free_idx_.resize(table_.size());
    for (std::uint32_t l = 0; l < cfg.links; ++l) reset_link(l);
    scratch_.resize(cfg.scratch_bytes);
  }
  ObjectRequester(const ObjectRequester&) = delete;
  ObjectRequester& operator=(const ObjectRequester&) = delete;

  const ObjectRequesterCounters& counters() const noexcept { return *cnt_; }
  std::uint32_t links() const noexcept { return static_cast<std::uint32_t>(links_.size()); }

  // ---- links --------------------------------------------------------------------------------------------

  // `link` now carries `c` (the core adopted it), whose QP has `windows` memory windows (api.windows_st(c);
  // 0: chunks carry the registration's key). What the link had in flight stays in flight.
  void attach_st(std::uint32_t link, CoreConn& c, std::uint32_t windows = 0) noexcept {
    Link& k = links_[link];
    k.conn = &c;
    k.windows = std::min(windows, kMaxWindows);
    k.window_free = k.windows == kMaxWindows ? ~std::uint32_t{0} : (std::uint32_t{1} << k.windows) - 1;
    for (std::uint32_t w = 0; w < kMaxWindows; ++w)
      window_owner_[std::size_t{link} * kMaxWindows + w] = kNoEntry;
  }
  std::uint32_t windows_st(std::uint32_t link) const noexcept { return links_[link].windows; }
  CoreConn* conn_st(std::uint32_t link) const noexcept { return links_[link].conn; }
  // Whether `link` is one of ours (not kNoLink) and carries `c`.
  bool carries_st(std::uint32_t link, const CoreConn& c) const noexcept {
    return link < links_.size() && links_[link].conn == &c;
  }
  std::uint32_t inflight_st(std::uint32_t link) const noexcept { return links_[link].inflight; }
  std::uint32_t chunked_st(std::uint32_t link) const noexcept { return links_[link].chunked; }
  // Whether send_st may take a request on `link` (one needing a chunk if `chunk`).
  bool room_st(std::uint32_t link, bool chunk) const noexcept {
    const Link& k = links_[link];
    return k.conn != nullptr && k.free_top != 0 &&
           (!chunk || (k.chunked < max_chunked_ && (k.windows == 0 || k.window_free != 0)));
  }

  // ---- sending --------------------------------------------------------------------------------------------

  // Builds `r` for the session of `link`'s connection and sends it: PUT inline if the value fits
  // max_inline_put_value, else a read chunk of one fragment {buf, size, rkey}; GET inline if the capacity
  // fits max_inline_get_value, else a write chunk of one fragment {buf, min(capacity, max_bulk_size), rkey};
  // DELETE inline. On kSent the request is in flight until on_answer_st or fail_all_st hands it back.
  template <typename Api>
  ObjectSendResult send_st(Api& api, std::uint32_t link, const OutboundObjectRequest<User>& r) noexcept {
    ObjectSendResult res;
    Link& k = links_[link];
    if (k.conn == nullptr || k.free_top == 0) return res;
    CoreConn& c = *k.conn;
    const protocol::ConnParams& params = c.session.params;
    protocol::MessageType type = protocol::MessageType::kInlineRequest;
    switch (r.op) {
      case protocol::ObjectOp::kPut:
        if (r.size > protocol::max_inline_put_value(params.max_message_size, r.key.size())) {
          if (r.size > params.max_bulk_size) return res.status = ObjectSendStatus::kTooLarge, res;
          type = protocol::MessageType::kReadChunkRequest;
        }
        break;
      case protocol::ObjectOp::kGet:
        if (r.size > protocol::max_inline_get_value(params.max_message_size)) {
          type = protocol::MessageType::kWriteChunkRequest;
        }
        break;
      case protocol::ObjectOp::kDelete:
        break;
    }
    const bool chunked = type != protocol::MessageType::kInlineRequest;
    // Room for a chunk is judged before anything is counted (a registered request only: an unregistered
    // one fails whatever the room).
    if (chunked && r.registered && (k.chunked >= max_chunked_ || (k.windows != 0 && k.window_free == 0))) {
      return res;
    }
    count_kind(r.op, chunked);
    if (chunked && !r.registered) {
      bump(cnt_->unregistered);
      return res.status = ObjectSendStatus::kUnregistered, res;
    }
    const std::span<std::uint8_t> scratch(scratch_.data(),
                                          std::min<std::size_t>(scratch_.size(), params.max_message_size));
    const std::span<const std::uint8_t> value =
        type == protocol::MessageType::kInlineRequest && r.op == protocol::ObjectOp::kPut
            ? std::span<const std::uint8_t>(static_cast<const std::uint8_t*>(r.buf), r.size)
            : std::span<const std::uint8_t>();
    const std::size_t payload_len = protocol::encode_object_payload(r.key, value, scratch);
    protocol::Chunk chunk;
    std::uint8_t window = kNoWindow;
    if (chunked) {
      chunk.count = 1;
      chunk.fragments[0].addr = reinterpret_cast<std::uintptr_t>(r.buf);
      chunk.fragments[0].len =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(r.size, params.max_bulk_size));
      chunk.fragments[0].rkey = r.rkey;
      if (k.windows != 0) {
        // Bound before the send is staged: the send queue runs them in order.
        const auto slot = static_cast<std::uint32_t>(std::countr_zero(k.window_free));
        const std::uint32_t key =
            payload_len == 0 || r.mr == nullptr
                ? 0
                : api.bind_window_st(c, slot,
                                     WindowBind{chunk.fragments[0].addr, chunk.fragments[0].len, r.mr,
                                                r.op == protocol::ObjectOp::kGet});
        if (key == 0) {
          bump(cnt_->send_refused);
          return res.status = ObjectSendStatus::kRefused, res;
        }
        k.window_free &= ~(std::uint32_t{1} << slot);
        window = static_cast<std::uint8_t>(slot);
        chunk.fragments[0].rkey = key;
      }
    }
    const std::uint16_t idx = free_idx_[base(link) + --k.free_top];
    const std::uint64_t seq = ++seq_ & kSeqMask;
    const std::uint64_t cookie = (seq << 16) | idx;
    if (payload_len == 0 || !api.send_st(c, type, protocol_opcode(r.op), cookie,
                                         std::span<const std::uint8_t>(scratch_.data(), payload_len), 0, 0,
                                         chunked ? &chunk : nullptr)) {
      free_idx_[base(link) + k.free_top++] = idx;
      // The window was bound for nothing: its key dies before the window is used again (an invalidation
      // that nobody waits for; a connection that cannot take it any more takes its windows with it).
      if (window != kNoWindow && !api.invalidate_window_st(c, window))
        k.window_free |= std::uint32_t{1} << window;
      bump(cnt_->send_refused);
      return res.status = ObjectSendStatus::kRefused, res;
    }
    const std::uint64_t now = rte_rdtsc();
    if (chunked) bump(window != kNoWindow ? cnt_->window_requests : cnt_->unscoped_requests);
    if (window != kNoWindow) window_owner_[std::size_t{link} * kMaxWindows + window] = idx;
    table_[base(link) + idx] =
        Entry{r.user, r.buf, r.size, seq, now, r.op, chunked, false, window, false, {}};
    ++k.inflight;
    if (chunked) ++k.chunked;
    res.status = ObjectSendStatus::kSent;
    res.chunked = chunked;
    res.cookie = cookie;
    res.sent_tsc = now;
    return res;
  }

  // ---- answers ------------------------------------------------------------------------------------------

  // An answer (kInlineResponse or kCompletion) that arrived on `c`, which the owner believes is `link`
  // (kNoLink: none of ours; counted stale like any answer naming nothing in flight). A request that went
  // through a memory window is not handed back here (user == nullptr) but by on_window_invalidated_st, once
  // the invalidation of its window completed; the answer is kept until then.
  template <typename Api>
  ObjectAnswer<User> on_answer_st(Api& api, std::uint32_t link, CoreConn& c,
                                  const protocol::Message& m) noexcept {
    ObjectAnswer<User> a;
    const std::uint64_t idx = m.cookie & 0xffff;
    if (!carries_st(link, c) || idx >= max_inflight_) {
      bump(cnt_->stale_answers);
      return a;
    }
    Entry& slot = table_[base(link) + idx];
    if (slot.user == nullptr || slot.invalidating || slot.seq != (m.cookie >> 16)) {
      bump(cnt_->stale_answers);
      return a;
    }
    const Entry e = slot;
    if (e.window != kNoWindow) {
      a = judge(e, m);
      slot.invalidating = true;
      slot.answer = a;
      // Not staged only on a connection that is closing: its close hands the kept answer back.
      api.invalidate_window_st(c, e.window);
      return ObjectAnswer<User>{};
    }
    release(link, static_cast<std::uint16_t>(idx));
    return judge(e, m);
  }

  // The invalidation of window `window` of `link`'s connection `c` completed: the request it served (if any:
  // a window bound for a send that was then refused serves none) is handed back with its kept answer.
  ObjectAnswer<User> on_window_invalidated_st(std::uint32_t link, const CoreConn& c,
                                              std::uint32_t window) noexcept {
    if (!carries_st(link, c) || window >= links_[link].windows) return {};
    Link& k = links_[link];
    std::uint16_t& owner = window_owner_[std::size_t{link} * kMaxWindows + window];
    const std::uint16_t idx = owner;
    owner = kNoEntry;
    k.window_free |= std::uint32_t{1} << window;
    if (idx == kNoEntry) return {};
    Entry& e = table_[base(link) + idx];
    if (e.user == nullptr || !e.invalidating) return {};
    const ObjectAnswer<User> a = e.answer;
    release(link, idx);
    return a;
  }

  // ---- in flight ------------------------------------------------------------------------------------------

  // Marks every unmarked request in flight on `link` for which `pred(const User*)` holds (the owner's
  // timeouts, say); returns how many it marked. fail_all_st reports the mark.
  template <typename Pred>
  std::uint32_t mark_if_st(std::uint32_t link, Pred&& pred) noexcept {
    std::uint32_t n = 0;
    for (std::uint32_t i = 0; i < max_inflight_; ++i) {
      Entry& e = table_[base(link) + i];
      if (e.user == nullptr || e.marked || !pred(static_cast<const User*>(e.user))) continue;
      e.marked = true;
      ++n;
    }
    return n;
  }

  // `link`'s connection closed (or the core stopped): detaches it and calls `failed(User*, bool marked)`
  // once for every request it had in flight, in table order, each already out of the table (so `failed` may
  // start new requests; none goes on this link until it is attached again). A request whose answer came and
  // whose window was still being invalidated gets `answered(const ObjectAnswer<User>&)` instead: the QP is in
  // ERR, so the window is as dead as an invalidation would have made it.
  template <typename Failed, typename Answered>
  void fail_all_st(std::uint32_t link, Failed&& failed, Answered&& answered) noexcept {
    links_[link].conn = nullptr;
    for (std::uint32_t i = 0; i < max_inflight_; ++i) {
      Entry& e = table_[base(link) + i];
      if (e.user == nullptr) continue;
      User* const u = e.user;
      const bool marked = e.marked;
      const bool invalidating = e.invalidating;
      const ObjectAnswer<User> a = e.answer;
      e = Entry{};
      if (invalidating) {
        answered(a);
      } else {
        failed(u, marked);
      }
    }
    reset_link(link);
  }
  // The same for an owner whose links have no windows (no answer is ever kept).
  template <typename Failed>
  void fail_all_st(std::uint32_t link, Failed&& failed) noexcept {
    fail_all_st(link, failed, [](const ObjectAnswer<User>&) {});
  }

  static std::uint16_t protocol_opcode(protocol::ObjectOp op) noexcept {
    return static_cast<std::uint16_t>(protocol::object_opcode(op));
  }

 private:
  struct Entry {
    User* user = nullptr;  // nullptr: free
    void* buf = nullptr;
    std::uint64_t size = 0;
    std::uint64_t seq = 0;
    std::uint64_t sent_tsc = 0;
    protocol::ObjectOp op = protocol::ObjectOp::kGet;
    bool chunked = false;
    bool marked = false;
    std::uint8_t window = kNoWindow;  // the window its chunk names (kNoWindow: none)
    bool invalidating = false;        // answered; waiting for its window's invalidation
    ObjectAnswer<User> answer{};      // the kept answer while invalidating
  };
  struct Link {
    CoreConn* conn = nullptr;  // attached connection, or nullptr
    std::uint32_t inflight = 0;
    std::uint32_t chunked = 0;  // of which chunk requests
    std::uint32_t free_top = 0;
    std::uint32_t windows = 0;      // memory windows of its connection's QP (0: registration keys)
    std::uint32_t window_free = 0;  // bit w: window w is neither bound nor being invalidated
  };
  static constexpr std::uint8_t kNoWindow = 0xff;
  static constexpr std::uint16_t kNoEntry = 0xffff;

  // What answer `m` comes to for request `e` (matched by cookie); counts it.
  ObjectAnswer<User> judge(const Entry& e, const protocol::Message& m) noexcept {
    ObjectAnswer<User> a;
    bump(cnt_->answer_tsc, rte_rdtsc() - e.sent_tsc);
    bump(cnt_->answered);
    a.user = e.user;
    a.wire_status = m.type == protocol::MessageType::kCompletion ? m.status : 0;
    if (m.opcode != protocol_opcode(e.op)) {
      a.malformed = true;
    } else if (m.type == protocol::MessageType::kInlineResponse) {
      // Only an inline GET is answered inline.
      a.size = m.payload.size();
      if (e.op != protocol::ObjectOp::kGet || e.chunked) {
        a.malformed = true;
      } else if (m.payload.size() > e.size) {
        a.status = protocol::ObjectStatus::kTooSmall;
      } else {
        if (!m.payload.empty()) std::memcpy(e.buf, m.payload.data(), m.payload.size());
      }
    } else if (m.type == protocol::MessageType::kCompletion) {
      a.size = m.byte_count;
      if (!object_status_known(m.status)) {
        a.malformed = true;
      } else {
        a.status = static_cast<protocol::ObjectStatus>(m.status);
        if (a.status == protocol::ObjectStatus::kOk) {
          switch (e.op) {
            case protocol::ObjectOp::kPut:
              if (m.byte_count != e.size) a.malformed = true;
              break;
            case protocol::ObjectOp::kGet:
              // A value comes inline or through our write chunk; a peer claiming to have written more than
              // the chunk holds is broken.
              if (!e.chunked || m.byte_count > e.size) a.malformed = true;
              break;
            case protocol::ObjectOp::kDelete:
              break;
          }
        } else if (a.status == protocol::ObjectStatus::kTooSmall && e.op != protocol::ObjectOp::kGet) {
          a.malformed = true;
        }
      }
    } else {
      a.malformed = true;
    }
    if (a.malformed) bump(cnt_->protocol_errors);
    return a;
  }

  static void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // A completion status this side understands as an answer to an object request (kUnknownOpcode means the
  // peer does not serve objects at all).
  static bool object_status_known(std::uint32_t s) noexcept {
    using protocol::ObjectStatus;
    switch (static_cast<ObjectStatus>(s)) {
      case ObjectStatus::kOk:
      case ObjectStatus::kBulkFailed:
      case ObjectStatus::kTooSmall:
      case ObjectStatus::kNoResources:
      case ObjectStatus::kBadRequest:
      case ObjectStatus::kNotFound:
      case ObjectStatus::kTooLarge:
      case ObjectStatus::kNoSpace:
      case ObjectStatus::kUnavailable:
      case ObjectStatus::kCorrupt:
      case ObjectStatus::kForbidden:
      case ObjectStatus::kQuotaExceeded:
        return true;
      case ObjectStatus::kUnknownOpcode:
        return false;
    }
    return false;
  }

  std::size_t base(std::uint32_t link) const noexcept { return std::size_t{link} * max_inflight_; }

  void count_kind(protocol::ObjectOp op, bool chunked) noexcept {
    switch (op) {
      case protocol::ObjectOp::kPut:
        bump(chunked ? cnt_->chunked_puts : cnt_->inline_puts);
        break;
      case protocol::ObjectOp::kGet:
        bump(chunked ? cnt_->chunked_gets : cnt_->inline_gets);
        break;
      case protocol::ObjectOp::kDelete:
        bump(cnt_->deletes);
        break;
    }
  }

  void reset_link(std::uint32_t link) noexcept {
    Link& k = links_[link];
    for (std::uint32_t i = 0; i < max_inflight_; ++i) {
      table_[base(link) + i] = Entry{};
      free_idx_[base(link) + i] = static_cast<std::uint16_t>(max_inflight_ - 1 - i);
    }
    k.free_top = max_inflight_;
    k.inflight = 0;
    k.chunked = 0;
  }

  void release(std::uint32_t link, std::uint16_t idx) noexcept {
    Link& k = links_[link];
    Entry& e = table_[base(link) + idx];
    if (e.chunked) --k.chunked;
    e.user = nullptr;
    free_idx_[base(link) + k.free_top++] = idx;
    --k.inflight;
  }

  std::uint32_t max_inflight_;
  std::uint32_t max_chunked_;
  std::vector<Link> links_;
  std::vector<Entry> table_;             // links x max_inflight, link-major
  std::vector<std::uint16_t> free_idx_;  // per link: a stack of free indices (free_top of them)
  std::vector<std::uint16_t> window_owner_;  // links x kMaxWindows: the entry a bound window serves
  std::vector<std::uint8_t> scratch_;
  std::uint64_t seq_ = 0;
  ObjectRequesterCounters own_{};
  ObjectRequesterCounters* cnt_;
};

}  // namespace rdmagate::dataplane

#pragma once
// The gateway's object service (docs/protocol.md §8): PUT / GET / DELETE over the embedded store, plus the
// ECHO and SINK opcodes, as a CoreLoop service (one instance per data-plane core; every method _st).
//
// Zero copy: chunked values move by RDMA straight between the requester's memory and the store arena (which
// the gateway registers once, IBV_ACCESS_LOCAL_WRITE only).
//   PUT, read chunk:  store.reserve(chunk length) -> RDMA READ into the reservation -> commit -> Completion.
//                     The reservation is private until commit, so nobody sees a half-read value.
//   GET, write chunk: store.get (pins the published block) -> RDMA WRITE from it -> Completion(kOk, size)
//                     sent at once (it travels behind the WRITEs on the same QP) -> unpin when the WRITE
//                     completes. The store is copy-on-write: an overwrite or delete meanwhile publishes or
//                     unpublishes another block and leaves the pinned one intact until the unpin.
// What a connection holds (a reservation or a pin) is released in the core's bulk hooks, which the core
// guarantees to call exactly once per started transfer, before the connection is answered CLOSED, even when
// it fails or closes mid-transfer; so the NIC never touches a block after it went back to the store.
//
// Per-connection state (ConnState in CoreConn::svc): what the connection's transfer holds, and the TSC at
// which the request holding it started (latency: from the poll that delivered the request to its answer,
// observed in ObjectServiceConfig::stats by op).

#include <rte_cycles.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "dataplane/core_conn.hpp"
#include "protocol/message.hpp"
#include "protocol/object_wire.hpp"
#include "services/storage/memory/store.hpp"
#include "telemetry/stats.hpp"

namespace rdmagate::dataplane {

struct ObjectServiceConfig {
  store::Store* store = nullptr;
  std::uint32_t store_core = 0;           // the store's per-core stats row
  std::uint32_t arena_lkey = 0;           // lkey of the store arena's registration
  telemetry::CoreStats* stats = nullptr;  // optional: request latency by op (observe_request_ns)
};

// Answer statuses as counters index them: ObjectStatus 0..5, then the application ones 0x100..0x102.
inline constexpr std::size_t kObjectStatusSlots = 9;
constexpr std::size_t object_status_slot(protocol::ObjectStatus s) noexcept {
  const auto v = static_cast<std::uint32_t>(s);
  if (v < protocol::kStatusApplicationBase) return v < 6 ? v : 5;
  const std::uint32_t app = v - protocol::kStatusApplicationBase;
  return app < 3 ? 6 + app : 5;
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
  std::uint64_t bytes_in = 0;           // value bytes stored (committed PUTs)
  std::uint64_t bytes_out = 0;          // value bytes returned (inline or written)
  std::uint64_t send_failures = 0;      // an answer could not be sent (connection not owned, no descriptor)
  std::uint64_t bulk_failures = 0;      // transfers that ended failed (a READ/WRITE error, a lost connection)
  std::uint64_t released_at_close = 0;  // holds released by on_close_st (none expected: hooks release)
  std::uint64_t unexpected = 0;         // responses received (a gateway takes requests only)
};

class ObjectService {
 public:
  explicit ObjectService(const ObjectServiceConfig& cfg) noexcept : cfg_(cfg) {}

  const ObjectServiceCounters& counters() const noexcept { return cnt_; }
  const ObjectServiceConfig& config() const noexcept { return cfg_; }

  // What a connection's transfer holds.
  enum class Held : std::uint8_t { kNothing = 0, kReservation = 1, kPin = 2 };
  struct ConnState {
    Held held = Held::kNothing;
    std::uint32_t token = store::PinnedValue::kNoToken;
    std::byte* data = nullptr;
    std::uint32_t size = 0;
    std::uint64_t start = 0;
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
    switch (req.op) {
      case protocol::ObjectOp::kPut: {
        const store::Status st = cfg_.store->put(cfg_.store_core, req.key, std::as_bytes(req.value));
        if (st == store::Status::kOk) cnt_.bytes_in += req.value.size();
        answer_st(api, c, protocol::ObjectOp::kPut, m.opcode, m.cookie, map_status(st),
                  st == store::Status::kOk ? static_cast<std::uint32_t>(req.value.size()) : 0, start);
        return;
      }
      case protocol::ObjectOp::kGet: {
        store::PinnedValue v;
        const store::Status st = cfg_.store->get(cfg_.store_core, req.key, &v);
        if (st != store::Status::kOk) {
          answer_st(api, c, protocol::ObjectOp::kGet, m.opcode, m.cookie, map_status(st), 0, start);
          return;
        }
        if (v.size > protocol::max_inline_get_value(c.session.params.max_message_size)) {
          const std::uint32_t need = v.size;
          cfg_.store->unpin(&v);
          answer_st(api, c, protocol::ObjectOp::kGet, m.opcode, m.cookie, protocol::ObjectStatus::kTooSmall,
                    need, start);
          return;
        }
        count_answer(protocol::ObjectOp::kGet, protocol::ObjectStatus::kOk);
        // encode_message copies the value into the send buffer, so the pin ends right here.
        const bool sent =
            api.send_st(c, protocol::MessageType::kInlineResponse, m.opcode, m.cookie,
                        std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(v.data), v.size));
        if (sent) {
          cnt_.bytes_out += v.size;
        } else {
          ++cnt_.send_failures;
        }
        cfg_.store->unpin(&v);
        observe_st(api, protocol::ObjectOp::kGet, start);
        return;
      }
      case protocol::ObjectOp::kDelete: {
        const store::Status st = cfg_.store->remove(cfg_.store_core, req.key);
        answer_st(api, c, protocol::ObjectOp::kDelete, m.opcode, m.cookie, map_status(st), 0, start);
        return;
      }
    }
  }

  template <typename Api>
  void on_chunk_request_st(Api& api, CoreConn& c, const ChunkRequest& r) noexcept {
    using protocol::ObjectOpcode;
    const std::uint64_t start = api.now_tsc_st();
    protocol::ObjectRequest req;
    protocol::ObjectParseError pe;
    if (r.opcode == static_cast<std::uint16_t>(ObjectOpcode::kEcho) ||
        r.opcode == static_cast<std::uint16_t>(ObjectOpcode::kSink)) {
      pe = protocol::ObjectParseError::kWrongType;  // inline-only opcodes
    } else {
      pe = protocol::parse_object_request(r.type, r.opcode, r.payload(), req);
      // A payload longer than the kept bytes is longer than any valid key prefix (kChunkPayloadMax).
      if (pe == protocol::ObjectParseError::kOk && !r.payload_complete()) {
        pe = protocol::ObjectParseError::kTrailingBytes;
      }
    }
    if (pe != protocol::ObjectParseError::kOk) {
      refuse_st(api, c, r.opcode, r.cookie, pe);
      return;
    }
    if (req.op == protocol::ObjectOp::kPut) {
      put_chunk_st(api, c, r, req, start);
    } else {
      get_chunk_st(api, c, r, req, start);
    }
  }

  // Every READ of a PUT landed in the reservation: publish it.
  template <typename Api>
  void on_bulk_read_done_st(Api& api, CoreConn& c, const BulkOp& op) noexcept {
    if (c.svc.as<ConnState>().held != Held::kReservation) return;
    store::Reservation res = held_reservation(c);
    const std::uint64_t start = c.svc.as<ConnState>().start;
    c.svc.reset<ConnState>();
    const store::Status st = cfg_.store->commit(cfg_.store_core, &res);  // on failure it released it
    if (st == store::Status::kOk) cnt_.bytes_in += op.bytes;
    answer_st(api, c, protocol::ObjectOp::kPut, op.req.opcode, op.req.cookie, map_status(st),
              st == store::Status::kOk ? op.bytes : 0, start);
  }

  // A READ failed or the connection went away mid-transfer: the NIC is done with the reservation now.
  template <typename Api>
  void on_bulk_read_failed_st(Api& api, CoreConn& c, const BulkOp& op) noexcept {
    ++cnt_.bulk_failures;
    if (c.svc.as<ConnState>().held == Held::kReservation) {
      store::Reservation res = held_reservation(c);
      cfg_.store->abort(&res);
    }
    c.svc.reset<ConnState>();
    // Answered only if the connection still can (it normally cannot: a failed READ fails the connection).
    if (c.state == CoreConnState::kOwned) {
      answer_st(api, c, protocol::ObjectOp::kPut, op.req.opcode, op.req.cookie,
                protocol::ObjectStatus::kBulkFailed, 0, api.now_tsc_st());
    }
  }

  // The last WRITE of a GET completed (or flushed): the pin can go.
  template <typename Api>
  void on_bulk_write_done_st(Api&, CoreConn& c, const BulkOp& op) noexcept {
    if (op.failed) {
      ++cnt_.bulk_failures;
    } else {
      cnt_.bytes_out += op.bytes;
    }
    if (c.svc.as<ConnState>().held == Held::kPin) {
      store::PinnedValue v = held_pin(c);
      cfg_.store->unpin(&v);
    }
    c.svc.reset<ConnState>();
  }

  // A transfer still in flight keeps its hold: the core ends it (read-failed / write-done) before CLOSED.
  // Anything held without a transfer is released here (defensive: the flows above never leave one).
  template <typename Api>
  void on_close_st(Api&, CoreConn& c) noexcept {
    if (c.bulk_op.state != BulkState::kIdle) return;
    if (c.svc.as<ConnState>().held != Held::kNothing) ++cnt_.released_at_close;
    release_held_st(c);
  }

  template <typename Api>
  void on_response_st(Api&, CoreConn&, const protocol::Message&) noexcept {
    ++cnt_.unexpected;
  }

 private:
  template <typename Api>
  void put_chunk_st(Api& api, CoreConn& c, const ChunkRequest& r, const protocol::ObjectRequest& req,
                    std::uint64_t start) noexcept {
    const std::uint64_t total = r.chunk.total_length();
    store::Reservation res;
    const store::Status st = cfg_.store->reserve(cfg_.store_core, req.key, total, &res);
    if (st != store::Status::kOk) {
      answer_st(api, c, protocol::ObjectOp::kPut, r.opcode, r.cookie, map_status(st), 0, start);
      return;
    }
    hold_st(c, Held::kReservation, res.token, res.data, res.size, start);
    if (!api.bulk_read_st(c, r, reinterpret_cast<std::uint8_t*>(res.data), cfg_.arena_lkey)) {
      release_held_st(c);
      answer_st(api, c, protocol::ObjectOp::kPut, r.opcode, r.cookie, protocol::ObjectStatus::kNoResources, 0,
                start);
    }
    // else answered in on_bulk_read_done_st
  }

  template <typename Api>
  void get_chunk_st(Api& api, CoreConn& c, const ChunkRequest& r, const protocol::ObjectRequest& req,
                    std::uint64_t start) noexcept {
    store::PinnedValue v;
    const store::Status st = cfg_.store->get(cfg_.store_core, req.key, &v);
    if (st != store::Status::kOk) {
      answer_st(api, c, protocol::ObjectOp::kGet, r.opcode, r.cookie, map_status(st), 0, start);
      return;
    }
    const std::uint32_t size = v.size;
    if (r.chunk.total_length() < size) {  // nothing is written; the requester learns the size it needs
      cfg_.store->unpin(&v);
      answer_st(api, c, protocol::ObjectOp::kGet, r.opcode, r.cookie, protocol::ObjectStatus::kTooSmall, size,
                start);
      return;
    }
    if (size == 0) {  // nothing to write
      cfg_.store->unpin(&v);
      answer_st(api, c, protocol::ObjectOp::kGet, r.opcode, r.cookie, protocol::ObjectStatus::kOk, 0, start);
      return;
    }
    hold_st(c, Held::kPin, v.token, const_cast<std::byte*>(v.data), size, start);
    if (!api.bulk_write_st(c, r, reinterpret_cast<const std::uint8_t*>(v.data), cfg_.arena_lkey, size)) {
      release_held_st(c);
      answer_st(api, c, protocol::ObjectOp::kGet, r.opcode, r.cookie, protocol::ObjectStatus::kNoResources, 0,
                start);
      return;
    }
    // The completion travels behind the WRITEs on the same QP: the requester sees the data first. The pin
    // stays until on_bulk_write_done_st.
    answer_st(api, c, protocol::ObjectOp::kGet, r.opcode, r.cookie, protocol::ObjectStatus::kOk, size, start);
  }

  template <typename Api>
  void refuse_st(Api& api, CoreConn& c, std::uint16_t opcode, std::uint64_t cookie,
                 protocol::ObjectParseError pe) noexcept {
    ++cnt_.parse_errors[static_cast<std::size_t>(pe) < cnt_.parse_errors.size() ? static_cast<std::size_t>(pe)
                                                                                : 0];
    const protocol::ObjectStatus st = pe == protocol::ObjectParseError::kUnknownOpcode
                                          ? protocol::ObjectStatus::kUnknownOpcode
                                          : protocol::ObjectStatus::kBadRequest;
    if (!api.send_st(c, protocol::MessageType::kCompletion, opcode, cookie, {},
                     static_cast<std::uint32_t>(st), 0)) {
      ++cnt_.send_failures;
    }
  }

  // Counts, answers with a completion and observes the latency.
  template <typename Api>
  void answer_st(Api& api, CoreConn& c, protocol::ObjectOp op, std::uint16_t opcode, std::uint64_t cookie,
                 protocol::ObjectStatus st, std::uint32_t bytes, std::uint64_t start) noexcept {
    count_answer(op, st);
    if (!api.send_st(c, protocol::MessageType::kCompletion, opcode, cookie, {},
                     static_cast<std::uint32_t>(st), bytes)) {
      ++cnt_.send_failures;
    }
    observe_st(api, op, start);
  }

  void count_answer(protocol::ObjectOp op, protocol::ObjectStatus st) noexcept {
    const auto i = static_cast<std::size_t>(op);
    ++cnt_.requests[i];
    ++cnt_.statuses[i][object_status_slot(st)];
  }

  // From the poll that delivered the request (the core's cached TSC) to now: a fresh TSC read, since an
  // inline answer is sent within the same burst and the cached value would measure nothing. Only with stats
  // on.
  template <typename Api>
  void observe_st(Api&, protocol::ObjectOp op, std::uint64_t start) noexcept {
    if (cfg_.stats == nullptr || !tsc_) return;
    const std::uint64_t now = rte_rdtsc();
    cfg_.stats->observe_request_ns(op, tsc_->ns(now > start ? now - start : 0));
  }

  static protocol::ObjectStatus map_status(store::Status s) noexcept {
    switch (s) {
      case store::Status::kOk:
        return protocol::ObjectStatus::kOk;
      case store::Status::kNotFound:
        return protocol::ObjectStatus::kNotFound;
      case store::Status::kTooLarge:
        return protocol::ObjectStatus::kTooLarge;
      case store::Status::kNoSpace:
        return protocol::ObjectStatus::kNoSpace;
      case store::Status::kBadRequest:
        return protocol::ObjectStatus::kBadRequest;
    }
    return protocol::ObjectStatus::kBadRequest;
  }

  static void hold_st(CoreConn& c, Held what, std::uint32_t token, std::byte* data, std::uint32_t size,
                      std::uint64_t start) noexcept {
    c.svc.as<ConnState>() = ConnState{what, token, data, size, start};
  }
  static store::Reservation held_reservation(const CoreConn& c) noexcept {
    const ConnState& s = c.svc.as<ConnState>();
    return store::Reservation{s.data, s.size, s.token};
  }
  static store::PinnedValue held_pin(const CoreConn& c) noexcept {
    const ConnState& s = c.svc.as<ConnState>();
    return store::PinnedValue{s.data, s.size, s.token};
  }

  void release_held_st(CoreConn& c) noexcept {
    switch (c.svc.as<ConnState>().held) {
      case Held::kReservation: {
        store::Reservation res = held_reservation(c);
        cfg_.store->abort(&res);
        break;
      }
      case Held::kPin: {
        store::PinnedValue v = held_pin(c);
        cfg_.store->unpin(&v);
        break;
      }
      case Held::kNothing:
        break;
    }
    c.svc.reset<ConnState>();
  }

  ObjectServiceConfig cfg_;
  ObjectServiceCounters cnt_{};
  std::optional<telemetry::TscToNs> tsc_;
};

}  // namespace rdmagate::dataplane

#pragma once
// What a core loop asks of the service it runs (chosen at setup as CoreLoop's template parameter), and what
// a service may ask of the loop. Services run on the core (every method _st) and never allocate, lock or
// make syscalls.
//
// Required hooks: on_adopt_st(api, conn), on_request_st(api, conn, msg), on_response_st(api, conn, msg),
// on_close_st(api, conn). Optional hooks (compiled in only when the service defines them):
//   on_chunk_request_st(api, conn, req)   a read or write chunk request reached the head of the connection's
//                                         chunk queue (without it: answered kUnknownOpcode)
//   on_bulk_read_done_st / on_bulk_read_failed_st / on_bulk_write_done_st   (core_bulk.hpp)
//   on_refused_st(api, conn, msg, why)    a request the core will not start (Refusal); without it the
//                                         requester gets refuse_request_st's answer
//   on_writable_st(api, conn)             descriptors or credits came back
//   pending_st(conn)                      requests of ours still unanswered (the quiesce waits for none)
//   on_poll_st(api) -> bool               once per loop iteration (a service fed from outside, e.g. the client
//                                         library's submission rings); true: it staged sends, so the loop
//                                         flushes
// The api (the CoreLoop) offers send_st, bulk_read_st, bulk_write_st, tx_available_st, now_tsc_st, tsc_hz,
// quiescing_st, counters_st.

#include <concepts>
#include <cstdint>
#include <cstring>

#include "dataplane/core_conn.hpp"
#include "protocol/message.hpp"

namespace rdmagate::dataplane {

template <typename S, typename Api>
concept CoreService = requires(S& s, Api& api, CoreConn& c, const protocol::Message& m) {
  s.on_adopt_st(api, c);
  s.on_request_st(api, c, m);
  s.on_response_st(api, c, m);
  s.on_close_st(api, c);
};

// Why the core answers a request instead of handing it to the service.
enum class Refusal : std::uint8_t {
  kQuiescing = 0,       // CONFIG kQuiesce: the responder is draining and starts nothing new
  kChunkQueueFull = 1,  // kChunkQueue chunk requests already wait on the connection
};

// The default answer to a refused request: a completion kNoResources, which tells the requester that
// nothing was started and it may retry (docs/protocol.md).
template <typename Api>
void refuse_request_st(Api& api, CoreConn& c, const protocol::Message& m, Refusal) noexcept {
  api.send_st(c, protocol::MessageType::kCompletion, m.opcode, m.cookie, {},
              static_cast<std::uint32_t>(protocol::CompletionStatus::kNoResources), 0);
}

// The default answer to a chunk request of a service that takes none.
template <typename Api>
void refuse_chunk_st(Api& api, CoreConn& c, const ChunkRequest& r) noexcept {
  api.send_st(c, protocol::MessageType::kCompletion, r.opcode, r.cookie, {},
              static_cast<std::uint32_t>(protocol::CompletionStatus::kUnknownOpcode), 0);
}

// A chunk request as it waits in the connection's queue: the fragments and at most kChunkPayloadMax payload
// bytes are copied, since the receive buffer is re-posted at once.
inline void copy_chunk_request(const protocol::Message& m, ChunkRequest& r) noexcept {
  r.type = m.type;
  r.opcode = m.opcode;
  r.cookie = m.cookie;
  r.chunk = m.chunk;
  r.payload_len = static_cast<std::uint32_t>(m.payload.size());
  const auto keep = r.payload();
  if (!keep.empty()) std::memcpy(r.payload_buf.data(), m.payload.data(), keep.size());
}

}  // namespace rdmagate::dataplane

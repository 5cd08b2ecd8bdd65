#pragma once
// Passive services of the engine tests, chosen at setup as CoreLoop's template parameter:
//
//   EchoService  answers every inline request with the same payload, inline, and echoes chunks in bulk.
//   SinkService  consumes one-way requests; credits come back on NOOPs at high water.
//
// Services run on the core (every method _st) and never allocate, lock or make syscalls.

#include <cstdint>

#include "dataplane/core_conn.hpp"
#include "protocol/message.hpp"

namespace rdmagate::dataplane {

// Bulk echo: a read chunk request makes the core RDMA-READ the requester's fragments into the connection's
// bulk buffer; a write chunk request makes it RDMA-WRITE the stored bytes back into the requester's
// fragments. Each answers with a completion carrying the byte count.
struct EchoService {
  struct ConnState {
    std::uint32_t stored = 0;  // bytes the last read chunk left in the bulk buffer
  };

  std::uint64_t requests = 0;
  std::uint64_t send_failures = 0;
  std::uint64_t chunk_refusals = 0;

  template <typename Api>
  void on_chunk_request_st(Api& api, CoreConn& c, const ChunkRequest& r) noexcept {
    using protocol::CompletionStatus;
    if (r.type == protocol::MessageType::kReadChunkRequest) {
      if (api.bulk_read_st(c, r)) return;  // answered in on_bulk_read_done_st
      ++chunk_refusals;
      complete_st(api, c, r, CompletionStatus::kNoResources, 0);
      return;
    }
    const std::uint32_t stored = c.svc.as<ConnState>().stored;
    if (r.chunk.total_length() < stored) {
      ++chunk_refusals;
      complete_st(api, c, r, CompletionStatus::kTooSmall, stored);  // the size needed
      return;
    }
    if (!api.bulk_write_st(c, r, stored)) {
      ++chunk_refusals;
      complete_st(api, c, r, CompletionStatus::kNoResources, 0);
      return;
    }
    complete_st(api, c, r, CompletionStatus::kOk, stored);
  }

  template <typename Api>
  void on_bulk_read_done_st(Api& api, CoreConn& c, const BulkOp& op) noexcept {
    c.svc.as<ConnState>().stored = op.bytes;
    complete_st(api, c, op.req, protocol::CompletionStatus::kOk, op.bytes);
  }

  template <typename Api>
  void complete_st(Api& api, CoreConn& c, const ChunkRequest& r, protocol::CompletionStatus st,
                   std::uint32_t bytes) noexcept {
    if (!api.send_st(c, protocol::MessageType::kCompletion, r.opcode, r.cookie, {},
                     static_cast<std::uint32_t>(st), bytes)) {
      ++send_failures;
    }
  }

  template <typename Api>
  void on_adopt_st(Api&, CoreConn& c) noexcept {
    c.svc.reset<ConnState>();
  }
  template <typename Api>
  void on_request_st(Api& api, CoreConn& c, const protocol::Message& m) noexcept {
    ++requests;
    if (!api.send_st(c, protocol::MessageType::kInlineResponse, m.opcode, m.cookie, m.payload))
      ++send_failures;
  }
  template <typename Api>
  void on_response_st(Api&, CoreConn&, const protocol::Message&) noexcept {}
  template <typename Api>
  void on_close_st(Api&, CoreConn&) noexcept {}
};

struct SinkService {
  std::uint64_t requests = 0;
  std::uint64_t bytes = 0;

  template <typename Api>
  void on_adopt_st(Api&, CoreConn&) noexcept {}
  template <typename Api>
  void on_request_st(Api&, CoreConn&, const protocol::Message& m) noexcept {
    ++requests;
    bytes += m.payload.size();
  }
  template <typename Api>
  void on_response_st(Api&, CoreConn&, const protocol::Message&) noexcept {}
  template <typename Api>
  void on_close_st(Api&, CoreConn&) noexcept {}
};

}  // namespace rdmagate::dataplane

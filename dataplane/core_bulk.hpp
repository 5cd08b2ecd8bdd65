#pragma once
// The core loop's bulk-transfer engine (included by core_loop.hpp): the chunk queue and the RDMA READs and
// WRITEs that serve read and write chunk requests.
//
// One transfer per connection at a time; later chunk requests wait in the connection's FIFO (kChunkQueue).
// The local memory of a started transfer is the NIC's until the op ends, and every started op ends exactly
// once, through one service hook (all optional):
//   on_bulk_read_done_st(api, conn, op)    every READ succeeded and the connection is still owned
//   on_bulk_read_failed_st(api, conn, op)  a READ failed or flushed, or the connection stopped being owned;
//                                          called once the last posted READ has completed
//   on_bulk_write_done_st(api, conn, op)   the last (signaled) WRITE completed: op.failed says whether it
//                                          or an earlier one failed or flushed
// An op in flight at CLOSE ends after the service's on_close_st (read-done is never delivered then: only
// read-failed or write-done), but always before the core answers CLOSED, so a service releases memory the
// NIC may touch only in these hooks.

#include "dataplane/core_loop.hpp"

namespace rdmagate::dataplane {

// RDMA-READs the read chunk's fragments, in order, into [dst, dst + total) (registered with `lkey`); at most
// rd_depth READs in flight, the rest wait. False (nothing started) if the connection is not owned or a
// transfer is already running.
template <typename B, typename S>
bool CoreLoop<B, S>::bulk_read_st(CoreConn& c, const ChunkRequest& req, std::uint8_t* dst,
                                  std::uint32_t lkey) noexcept {
  BulkOp& op = c.bulk_op;
  const std::uint64_t total = req.chunk.total_length();
  if (c.state != CoreConnState::kOwned || op.state != BulkState::kIdle || total > 0xffffffffull) return false;
  op.state = BulkState::kReading;
  op.req = req;
  op.next_frag = 0;
  op.outstanding = 0;
  op.next_off = 0;
  op.bytes = static_cast<std::uint32_t>(total);
  op.local = dst;
  op.local_lkey = lkey;
  op.failed = false;
  op.start_tsc = now_;
  ++cnt_.read_chunks;
  cnt_.read_bytes += total;
  if (req.chunk.count > c.rd_depth) cnt_.rdma_reads_queued += req.chunk.count - c.rd_depth;
  post_reads_st(c);
  return true;
}

// The same into the connection's bulk buffer. False also if the chunk exceeds the bulk buffer.
template <typename B, typename S>
bool CoreLoop<B, S>::bulk_read_st(CoreConn& c, const ChunkRequest& req) noexcept {
  if (req.chunk.total_length() > c.bulk_size) return false;
  return bulk_read_st(c, req, c.bulk, c.lkey);
}

// RDMA-WRITEs [src, src + len) (registered with `lkey`) into the write chunk's fragments, in order. The
// answer the service sends next travels behind the WRITEs on the same QP, so the requester sees the data
// before the answer. False (nothing written) if the chunk is smaller than len. len 0 posts nothing and ends
// at once (no hook). Only the last WRITE is signaled; the others (fillers) complete only in error.
template <typename B, typename S>
bool CoreLoop<B, S>::bulk_write_st(CoreConn& c, const ChunkRequest& req, const std::uint8_t* src,
                                   std::uint32_t lkey, std::uint32_t len) noexcept {
  BulkOp& op = c.bulk_op;
  if (c.state != CoreConnState::kOwned || op.state != BulkState::kIdle || req.chunk.total_length() < len) {
    return false;
  }
  ++cnt_.write_chunks;
  cnt_.write_bytes += len;
  if (len == 0) return true;
  op.req = req;
  op.bytes = len;
  op.local = const_cast<std::uint8_t*>(src);  // a WRITE's local memory is only read
  op.local_lkey = lkey;
  op.failed = false;
  op.start_tsc = now_;
  const auto frags = req.chunk.view();
  std::uint32_t off = 0;
  for (std::size_t i = 0; i < frags.size() && off < len; ++i) {
    const std::uint32_t n = std::min(frags[i].len, len - off);
    const bool last = off + n == len;
    if (last) {
      stage_rdma_st(c, RdmaOp::kWrite, WrKind::kRdma, frags[i], off, n, kSendSignaled, kRdmaMarker);
    } else {
      stage_rdma_st(c, RdmaOp::kWrite, WrKind::kRdmaFiller, frags[i], off, n, 0, kRdmaFiller);
    }
    off += n;
  }
  op.state = BulkState::kWriting;
  mark_dirty_st(c);
  return true;
}

// The same from the connection's bulk buffer. False also if len exceeds the bulk buffer.
template <typename B, typename S>
bool CoreLoop<B, S>::bulk_write_st(CoreConn& c, const ChunkRequest& req, std::uint32_t len) noexcept {
  if (len > c.bulk_size) return false;
  return bulk_write_st(c, req, c.bulk, c.lkey, len);
}

// A chunk request arrived: queue it (its fragments and payload are copied, so the receive buffer goes back
// at once) and start it if the engine is idle.
template <typename B, typename S>
void CoreLoop<B, S>::queue_chunk_st(CoreConn& c, const protocol::Message& m) noexcept {
  if (c.chunk_count == kChunkQueue) {
    ++cnt_.chunk_queue_full;
    refuse_st(c, m, Refusal::kChunkQueueFull);
    return;
  }
  copy_chunk_request(m, c.chunk_queue[(c.chunk_head + c.chunk_count) % kChunkQueue]);
  ++c.chunk_count;
  run_chunks_st(c);
}

// Starts waiting chunk requests while the bulk engine is idle.
template <typename B, typename S>
void CoreLoop<B, S>::run_chunks_st(CoreConn& c) noexcept {
  while (c.chunk_count != 0 && c.bulk_op.state == BulkState::kIdle && c.state == CoreConnState::kOwned) {
    const ChunkRequest req = c.chunk_queue[c.chunk_head];
    c.chunk_head = (c.chunk_head + 1) % kChunkQueue;
    --c.chunk_count;
    if constexpr (requires(S& s) { s.on_chunk_request_st(*this, c, req); }) {
      svc_.on_chunk_request_st(*this, c, req);
    } else {
      refuse_chunk_st(*this, c, req);
    }
  }
}

template <typename B, typename S>
void CoreLoop<B, S>::stage_rdma_st(CoreConn& c, RdmaOp rop, WrKind kind, const protocol::Fragment& f,
                                   std::uint32_t local_off, std::uint32_t len, unsigned flags,
                                   std::uint16_t fifo_entry) noexcept {
  BulkOp& op = c.bulk_op;
  B::stage_rdma_st(qp_of(c), rop, make_wr_id(&op, kind, c.generation),
                   Segment{reinterpret_cast<std::uintptr_t>(op.local + local_off), len, op.local_lkey},
                   f.addr, f.rkey, flags);
  push_sq_st(c, fifo_entry);
  ++op.in_sq;
}

// Posts READs up to the initiator depth (the rest wait for completions). Every READ is signaled.
template <typename B, typename S>
void CoreLoop<B, S>::post_reads_st(CoreConn& c) noexcept {
  BulkOp& op = c.bulk_op;
  const auto frags = op.req.chunk.view();
  while (op.next_frag < frags.size() && op.outstanding < c.rd_depth) {
    const protocol::Fragment& f = frags[op.next_frag];
    stage_rdma_st(c, RdmaOp::kRead, WrKind::kRdma, f, op.next_off, f.len, kSendSignaled, kRdmaMarker);
    op.next_off += f.len;
    ++op.next_frag;
    ++op.outstanding;
  }
  mark_dirty_st(c);
}

// A marker (every READ, the last WRITE of a chunk) or, only in error, an unsignaled WRITE filler.
template <typename B, typename S>
void CoreLoop<B, S>::rdma_completed_st(const Completion& wc) noexcept {
  const bool marker = wr_kind(wc.wr_id) != WrKind::kRdmaFiller;
  BulkOp& op = *wr_desc<BulkOp>(wc.wr_id);
  CoreConn& c = *op.conn;
  if (stale_st(c, wc)) [[unlikely]]
    return;
  ++cnt_.completions_rdma;
  pop_sq_st(c, marker ? kRdmaMarker : kRdmaFiller);
  if (wc.status != CompletionStatus::kOk) [[unlikely]] {
    op.failed = true;
    note_completion_error_st(c, wc);
  }
  if (marker && op.state == BulkState::kReading) {
    if (op.outstanding != 0) --op.outstanding;
    if (c.state == CoreConnState::kOwned && !op.failed && op.next_frag < op.req.chunk.count) post_reads_st(c);
  }
  maybe_end_bulk_st(c);
  if (c.state == CoreConnState::kOwned) mark_dirty_st(c);
  // Last: on a draining connection this may answer CLOSED, after which c is control's again.
  maybe_closed_st(c);
}

// Ends the bulk op once nothing of it is left on the device and nothing more of it will be posted.
template <typename B, typename S>
void CoreLoop<B, S>::maybe_end_bulk_st(CoreConn& c) noexcept {
  const BulkOp& op = c.bulk_op;
  if (op.state == BulkState::kIdle || op.in_sq != 0) return;
  if (op.state == BulkState::kReading && !op.failed && c.state == CoreConnState::kOwned &&
      op.next_frag < op.req.chunk.count) {
    return;  // more READs to post
  }
  end_bulk_st(c);
}

// The connection's bulk op is over (its last posted READ/WRITE completed, or could not be posted): the
// service learns the outcome exactly once, then waiting chunks may start.
template <typename B, typename S>
void CoreLoop<B, S>::end_bulk_st(CoreConn& c) noexcept {
  BulkOp& op = c.bulk_op;
  const BulkState was = op.state;
  op.state = BulkState::kIdle;
  op.outstanding = 0;
  if (was == BulkState::kReading) {
    if (!op.failed && c.state == CoreConnState::kOwned) {
      if constexpr (requires(S& s) { s.on_bulk_read_done_st(*this, c, op); }) svc_.on_bulk_read_done_st(*this, c, op);
    } else {
      op.failed = true;
      if constexpr (requires(S& s) { s.on_bulk_read_failed_st(*this, c, op); }) {
        svc_.on_bulk_read_failed_st(*this, c, op);
      }
    }
  } else if (was == BulkState::kWriting) {
    if constexpr (requires(S& s) { s.on_bulk_write_done_st(*this, c, op); }) svc_.on_bulk_write_done_st(*this, c, op);
  }
  if (c.state == CoreConnState::kOwned) run_chunks_st(c);
}

// A work request of the bulk op that never reached the device (a failed post), taken back from the FIFO. The
// op fails; it ends (maybe_end_bulk_st, after the whole rewind) only when nothing else of it is on the device.
template <typename B, typename S>
void CoreLoop<B, S>::unposted_rdma_st(CoreConn& c, std::uint16_t fifo_entry) noexcept {
  BulkOp& op = c.bulk_op;
  op.failed = true;
  --op.in_sq;
  if (fifo_entry == kRdmaMarker && op.state == BulkState::kReading && op.outstanding != 0) --op.outstanding;
}

}  // namespace rdmagate::dataplane

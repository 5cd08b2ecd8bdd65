#pragma once
// The core loop's send path (included by core_loop.hpp; the loop's class is declared there).
//
// A message is encoded once, after the credit decision: send_st checks that encode_message would accept it
// (protocol::check_encodable), asks the credit machine, and writes the header with its final credit count
// and CRC. Only a message that must wait for credits (and every NOOP, which always goes through its queue)
// is written with no credits and patched when it leaves the queue. Staged work reaches the device at
// flush_st, once per dirty connection per burst: receives first, then sends, so a credit never goes out
// ahead of the buffer it stands for.

#include "dataplane/core_loop.hpp"

namespace rdmagate::dataplane {

template <typename B, typename S>
bool CoreLoop<B, S>::send_st(CoreConn& c, protocol::MessageType type, std::uint16_t opcode, std::uint64_t cookie,
                             std::span<const std::uint8_t> payload, std::uint32_t status, std::uint32_t byte_count,
                             const protocol::Chunk* chunk) noexcept {
  if (c.state != CoreConnState::kOwned) return false;
  protocol::Message m;
  if (chunk != nullptr) m.chunk = *chunk;
  m.type = type;
  m.opcode = opcode;
  m.cookie = cookie;
  m.payload = payload;
  m.status = status;
  m.byte_count = byte_count;
  if (protocol::check_encodable(m, c.session, c.buf_size) != protocol::WireError::kOk) [[unlikely]] {
    ++cnt_.errors[static_cast<std::size_t>(CoreError::kEncode)];
    return false;
  }
  const std::uint16_t idx = take_tx_st(c);
  if (idx == protocol::TxQueues::kEnd) return false;
  const protocol::SendStep step = c.credits->send_or_queue(protocol::credit_class(type), idx, now_);
  if (step.kind == protocol::SendKind::kSend) {
    m.credits = step.credits;
    write_st(c, idx, m);
    stage_tx_st(c, idx);
  } else if (step.tx == protocol::TxQueues::kEnd) {
    free_tx_st(c, idx);  // refused: an engine bug, counted
    ++cnt_.errors[static_cast<std::size_t>(CoreError::kTxExhausted)];
    return false;
  } else {
    write_st(c, idx, m);  // credits patched when it leaves the queue
    ++cnt_.credit_stalls;
  }
  mark_dirty_st(c);
  return true;
}

template <typename B, typename S>
bool CoreLoop<B, S>::inject_raw_st(CoreConn& c, std::span<const std::uint8_t> bytes) noexcept {
  if (c.state != CoreConnState::kOwned || bytes.size() > c.buf_size || c.tx_free_top == 0) return false;
  const std::uint16_t idx = c.tx_free[--c.tx_free_top];
  TxDesc& d = c.tx[idx];
  std::memcpy(d.buf, bytes.data(), bytes.size());
  d.len = static_cast<std::uint32_t>(bytes.size());
  d.type = 0;
  stage_tx_st(c, idx);
  mark_dirty_st(c);
  return true;
}

template <typename B, typename S>
std::uint16_t CoreLoop<B, S>::take_tx_st(CoreConn& c) noexcept {
  if (c.tx_free_top == 0) [[unlikely]] {
    ++cnt_.errors[static_cast<std::size_t>(CoreError::kTxExhausted)];
    return protocol::TxQueues::kEnd;
  }
  return c.tx_free[--c.tx_free_top];
}

// `m` passed check_encodable for this connection's session and buffer size.
template <typename B, typename S>
void CoreLoop<B, S>::write_st(CoreConn& c, std::uint16_t idx, const protocol::Message& m) noexcept {
  TxDesc& d = c.tx[idx];
  d.len = static_cast<std::uint32_t>(protocol::write_message(m, c.session, std::span<std::uint8_t>(d.buf, c.buf_size)));
  d.type = static_cast<std::uint8_t>(m.type);
}

template <typename B, typename S>
void CoreLoop<B, S>::stage_recv_st(CoreConn& c, RxDesc& rx) noexcept {
  B::stage_recv_st(qp_of(c), make_wr_id(&rx, WrKind::kRecv),
                   Segment{reinterpret_cast<std::uintptr_t>(rx.buf), c.buf_size, c.lkey});
  ++c.staged_recvs;
  ++c.rx_posted;
}

// A message the credit machine let go from its queue: its credit count is known only now.
template <typename B, typename S>
void CoreLoop<B, S>::stage_queued_st(CoreConn& c, const protocol::SendStep& step) noexcept {
  protocol::patch_credits(std::span<std::uint8_t>(c.tx[step.tx].buf, c.tx[step.tx].len), step.credits, c.session);
  stage_tx_st(c, step.tx);
  if (step.cls == protocol::CreditClass::kNoop) ++cnt_.noops;
}

template <typename B, typename S>
void CoreLoop<B, S>::stage_tx_st(CoreConn& c, std::uint16_t tx) noexcept {
  TxDesc& d = c.tx[tx];
  unsigned flags = 0;
  if (d.len <= c.max_inline) {
    flags |= kSendInline;
    ++cnt_.inline_sends;
  }
  if (++c.unsignaled >= c.signal_interval || quiescing_) {
    flags |= kSendSignaled;
    c.unsignaled = 0;
  }
  B::stage_send_st(qp_of(c), make_wr_id(&d, WrKind::kSend),
                   Segment{reinterpret_cast<std::uintptr_t>(d.buf), d.len, c.lkey}, flags);
  push_sq_st(c, tx);
  ++cnt_.msgs_tx[d.type];
  cnt_.bytes_tx[d.type] += d.len;
}

// Records a staged send work request in the SQ FIFO (a tx descriptor, or kRdmaMarker / kRdmaFiller).
template <typename B, typename S>
void CoreLoop<B, S>::push_sq_st(CoreConn& c, std::uint16_t fifo_entry) noexcept {
  c.sq_fifo[c.sq_tail & (c.sq_fifo.size() - 1)] = fifo_entry;
  ++c.sq_tail;
  ++c.staged_sends;
}

template <typename B, typename S>
void CoreLoop<B, S>::mark_dirty_st(CoreConn& c) noexcept {
  if (!c.dirty) {
    c.dirty = true;
    dirty_.push_back(&c);
  }
}

template <typename B, typename S>
void CoreLoop<B, S>::flush_st() noexcept {
  // Index loop: a failure while flushing one connection never adds another to the list.
  for (std::size_t i = 0; i < dirty_.size(); ++i) {
    CoreConn& c = *dirty_[i];
    if (c.state == CoreConnState::kOwned) pump_sends_st(c);
    post_staged_st(c);
  }
  dirty_.clear();
}

// Moves whatever the credit machine lets go now onto the staged chain, NOOP included.
template <typename B, typename S>
void CoreLoop<B, S>::pump_sends_st(CoreConn& c) noexcept {
  protocol::CreditMachine& cm = *c.credits;
  // The machine decides a NOOP's reason inside next_send and counts it there: the difference is exact.
  const std::uint64_t keepalives_before = cm.stats().noops[static_cast<std::size_t>(protocol::NoopReason::kKeepalive)];
  if (cm.wants_noop(now_)) {
    protocol::Message m;
    m.type = protocol::MessageType::kNoop;
    const std::uint16_t idx = take_tx_st(c);
    if (idx != protocol::TxQueues::kEnd) {
      write_st(c, idx, m);
      if (!cm.enqueue(protocol::CreditClass::kNoop, idx)) free_tx_st(c, idx);
    }
  }
  for (;;) {
    const protocol::SendStep step = cm.next_send(now_);
    if (step.kind == protocol::SendKind::kSend) {
      stage_queued_st(c, step);
    } else if (step.kind == protocol::SendKind::kDropNoop) {
      free_tx_st(c, step.tx);
    } else {
      break;
    }
  }
  cnt_.keepalives += cm.stats().noops[static_cast<std::size_t>(protocol::NoopReason::kKeepalive)] - keepalives_before;
}

// One doorbell for the receives, then one for the sends (the backend's flush).
template <typename B, typename S>
void CoreLoop<B, S>::post_staged_st(CoreConn& c) noexcept {
  c.dirty = false;
  if (c.staged_recvs == 0 && c.staged_sends == 0) return;
  if (c.staged_recvs != 0) ++cnt_.doorbells_recv;
  if (c.staged_sends != 0) ++cnt_.doorbells_send;
  c.staged_recvs = c.staged_sends = 0;
  const FlushResult r = B::flush_st(qp_of(c));
  if (r.recv_unposted != 0) [[unlikely]] {
    c.rx_posted -= std::min(r.recv_unposted, c.rx_posted);
    ++cnt_.errors[static_cast<std::size_t>(CoreError::kPostRecv)];
    if (c.state == CoreConnState::kOwned) fail_st(c, FailureKind::kCompletion, 0);
  }
  if (r.send_unposted != 0) [[unlikely]] {
    // The unposted work requests are the newest part of the FIFO: take them all back before anything else
    // runs (a bulk hook that sends would push onto the FIFO being rewound).
    for (std::uint32_t i = 0; i < r.send_unposted && c.sq_tail != c.sq_head; ++i) {
      --c.sq_tail;
      const std::uint16_t entry = c.sq_fifo[c.sq_tail & (c.sq_fifo.size() - 1)];
      if (entry == kRdmaMarker || entry == kRdmaFiller) {
        unposted_rdma_st(c, entry);
      } else {
        free_tx_st(c, entry);
      }
    }
    ++cnt_.errors[static_cast<std::size_t>(CoreError::kPostSend)];
    if (c.state == CoreConnState::kOwned) fail_st(c, FailureKind::kCompletion, 0);
    maybe_end_bulk_st(c);  // only if nothing of it stayed on the device
  }
}

template <typename B, typename S>
void CoreLoop<B, S>::free_tx_st(CoreConn& c, std::uint16_t idx) noexcept {
  if (idx < c.tx.size() && c.tx_free_top < c.tx_free.size()) c.tx_free[c.tx_free_top++] = idx;
}

// A completion for descriptor `idx`: it and everything posted before it are done (in-order SQ).
template <typename B, typename S>
void CoreLoop<B, S>::reclaim_sq_st(CoreConn& c, std::uint16_t idx) noexcept {
  pop_sq_st(c, idx);
  maybe_end_bulk_st(c);  // it may have taken the last WRITEs of a chain that lost its signaled one
  maybe_closed_st(c);
}

// The FIFO part of reclaim_sq_st (idx may be kRdmaMarker/kRdmaFiller: the oldest such entry; kSqAll: every
// entry, what a drain marker's completion proves done).
template <typename B, typename S>
void CoreLoop<B, S>::pop_sq_st(CoreConn& c, std::uint32_t idx) noexcept {
  const std::size_t mask = c.sq_fifo.size() - 1;
  while (c.sq_head != c.sq_tail) {
    const std::uint16_t done = c.sq_fifo[c.sq_head & mask];
    ++c.sq_head;
    if (done == kRdmaMarker || done == kRdmaFiller) {
      --c.bulk_op.in_sq;
    } else {
      free_tx_st(c, done);
    }
    if (done == idx) break;
  }
}

}  // namespace rdmagate::dataplane

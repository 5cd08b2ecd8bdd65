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
  return send_built_st(c, m);
}

template <typename B, typename S>
bool CoreLoop<B, S>::send_built_st(CoreConn& c, protocol::Message m) noexcept {
  if (c.state != CoreConnState::kOwned) return false;
  if (res_.faults.armed()) [[unlikely]]
    return faulted_send_st(c, m);  // docs/faults.md
  return send_message_st(c, m);
}

template <typename B, typename S>
bool CoreLoop<B, S>::send_message_st(CoreConn& c, protocol::Message& m) noexcept {
  if (protocol::check_encodable(m, c.session, c.buf_size) != protocol::WireError::kOk) [[unlikely]] {
    ++cnt_.errors[static_cast<std::size_t>(CoreError::kEncode)];
    return false;
  }
  const std::uint16_t idx = take_tx_st(c);
  if (idx == protocol::TxQueues::kEnd) return false;
  const protocol::SendStep step = c.credits->send_or_queue(protocol::credit_class(m.type), idx, now_);
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

// send_st with fault rules installed (docs/faults.md). A dropped message takes no descriptor and no credit,
// so nothing is owed; a duplicate needs a descriptor and a credit of its own (without them only the first
// goes); a delayed or corrupted one is written now with no credits and goes through the credit machine when
// it leaves, as a message queued on credits does (so its checksum is computed after the corruption, as a
// sender's bad memory).
template <typename B, typename S>
bool CoreLoop<B, S>::faulted_send_st(CoreConn& c, protocol::Message& m) noexcept {
  const FaultVerdict v = res_.faults.on_send_st(c.peer_ip, m.type, m.opcode, now_);
  switch (v.action) {
    case FaultAction::kDrop:
      return true;
    case FaultAction::kDuplicate:
      if (!send_message_st(c, m)) return false;
      send_message_st(c, m);
      return true;
    case FaultAction::kDelay:
    case FaultAction::kCorrupt: {
      if (protocol::check_encodable(m, c.session, c.buf_size) != protocol::WireError::kOk) [[unlikely]] {
        ++cnt_.errors[static_cast<std::size_t>(CoreError::kEncode)];
        return false;
      }
      const std::uint16_t idx = take_tx_st(c);
      if (idx == protocol::TxQueues::kEnd) return false;
      m.credits = 0;
      write_st(c, idx, m);
      if (v.action == FaultAction::kCorrupt) {
        CoreFaults::corrupt(v, c.tx[idx].buf, c.tx[idx].len);
      } else if (res_.faults.hold_st(FaultHeld{&c, nullptr, idx, v.due})) {
        return true;  // leaves from release_held_st
      }
      launch_written_st(c, idx);
      return true;
    }
    default:
      return send_message_st(c, m);
  }
}

// A message written with no credits goes through the credit machine now: sent at once with its credit count
// patched in, or queued like any message waiting for credits.
template <typename B, typename S>
void CoreLoop<B, S>::launch_written_st(CoreConn& c, std::uint16_t idx) noexcept {
  TxDesc& d = c.tx[idx];
  const protocol::SendStep step =
      c.credits->send_or_queue(protocol::credit_class(static_cast<protocol::MessageType>(d.type)), idx, now_);
  if (step.kind == protocol::SendKind::kSend) {
    protocol::patch_credits(std::span<std::uint8_t>(d.buf, d.len), step.credits, c.session);
    stage_tx_st(c, idx);
  } else if (step.tx == protocol::TxQueues::kEnd) {
    free_tx_st(c, idx);
    ++cnt_.errors[static_cast<std::size_t>(CoreError::kTxExhausted)];
  } else {
    ++cnt_.credit_stalls;
  }
  mark_dirty_st(c);
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

// A receive completed. With a receive queue per connection its descriptor names the connection. With the
// core's shared receive queue (SharedReceiveBackend<B>, chosen at setup: no branch per message on it) the
// completion's QP number does, and the buffer goes back to the pool whatever becomes of the message.
template <typename B, typename S>
void CoreLoop<B, S>::receive_completed_st(const Completion& wc) noexcept {
  RxDesc& rx = *wr_desc<RxDesc>(wc.wr_id);
  if constexpr (SharedReceiveBackend<B>) {
    ++cnt_.completions_recv;
    CoreConn* const cp = res_.conn_table().find_st(wc.qp_num);
    if (cp == nullptr) [[unlikely]] {  // a QP this core answered CLOSED for (it ran as the QP went to ERR)
      ++cnt_.srq_stray;
      repost_pool_st(rx);
      return;
    }
    CoreConn& c = *cp;
    if (wc.status != CompletionStatus::kOk) [[unlikely]] {
      repost_pool_st(rx);
      completion_error_st(c, wc);
      return;
    }
    rx.byte_len = wc.byte_len;
    switch (c.state) {
      case CoreConnState::kOwned:
        receive_st(c, rx);
        return;
      case CoreConnState::kPosted:
        // Early rx: parked in arrival order. The peer cannot send more than its credits before ADOPT, so the
        // park (rx_per_conn entries) holds them all; a misbehaving peer's excess goes back to the pool.
        ++cnt_.early_rx;
        if (c.early_count < c.early.size()) {
          c.early[c.early_count++] = rx.index;
        } else {
          repost_pool_st(rx);
        }
        return;
      default:
        repost_pool_st(rx);  // failed or draining: the message is dropped, the buffer is the pool's
        maybe_closed_st(c);
        return;
    }
  } else {
    CoreConn& c = *rx.conn;
    if (stale_st(c, wc)) [[unlikely]]
      return;
    ++cnt_.completions_recv;
    --c.rx_posted;
    if (wc.status != CompletionStatus::kOk) [[unlikely]] {
      completion_error_st(c, wc);
      return;
    }
    rx.byte_len = wc.byte_len;
    switch (c.state) {
      case CoreConnState::kOwned:
        receive_st(c, rx);
        return;
      case CoreConnState::kPosted:
        // Early rx: the peer sent before ADOPT reached us. Park it in arrival order.
        ++cnt_.early_rx;
        if (c.early_count < c.early.size()) c.early[c.early_count++] = rx.index;
        return;
      default:
        maybe_closed_st(c);  // failed or draining: consume, never re-post
        return;
    }
  }
}

// handle_message_st for a buffer of the shared pool: a message it refuses (a wire or credit error, which
// fails the connection) is not re-posted there, and no credit stands for it, so it goes back to the pool
// here.
template <typename B, typename S>
void CoreLoop<B, S>::handle_pooled_st(CoreConn& c, RxDesc& rx) noexcept {
  const std::uint64_t reposts = res_.srq_reposts;
  handle_message_st(c, rx);
  if (res_.srq_reposts == reposts) [[unlikely]]
    repost_pool_st(rx);
}

// The receive descriptor of early (parked) message `i` of `c`.
template <typename B, typename S>
RxDesc& CoreLoop<B, S>::parked_rx_st(CoreConn& c, std::uint32_t i) noexcept {
  if constexpr (SharedReceiveBackend<B>) {
    return res_.pool_rx(c.early[i]);
  } else {
    return c.rx[c.early[i]];
  }
}

// Parked messages from `from` on are dropped (the connection failed or closes before they ran): with the
// shared pool their buffers go back to it; a connection's own buffers are simply consumed.
template <typename B, typename S>
void CoreLoop<B, S>::drop_parked_st(CoreConn& c, std::uint32_t from) noexcept {
  if constexpr (SharedReceiveBackend<B>) {
    for (std::uint32_t i = from; i < c.early_count; ++i) repost_pool_st(res_.pool_rx(c.early[i]));
  }
  c.early_count = 0;
}

template <typename B, typename S>
void CoreLoop<B, S>::repost_pool_st(RxDesc& rx) noexcept {
  if constexpr (SharedReceiveBackend<B>) {
    B::stage_srq_recv_st(
        static_cast<typename B::Srq&>(*res_.srq()), make_wr_id(&rx, WrKind::kRecv, 0),
        Segment{reinterpret_cast<std::uintptr_t>(rx.buf), res_.config().buf_size, res_.lkey()});
    ++res_.srq_staged;
    ++res_.srq_reposts;
  }
}

// The shared receive queue's staged re-posts, behind one doorbell (first in every flush).
template <typename B, typename S>
void CoreLoop<B, S>::flush_pool_st() noexcept {
  if constexpr (SharedReceiveBackend<B>) {
    if (res_.srq_staged == 0) return;
    const std::uint32_t staged = std::exchange(res_.srq_staged, 0);
    ++cnt_.doorbells_recv;
    const std::uint32_t unposted = B::flush_srq_st(static_cast<typename B::Srq&>(*res_.srq()));
    cnt_.recv_posts += staged - std::min(staged, unposted);
    if (unposted != 0) [[unlikely]] {
      // Never on a sized pool (it holds exactly the SRQ's receives); the buffers are lost to it, counted.
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kPostRecv)];
      res_.srq_lost += unposted;
    }
  }
}

template <typename B, typename S>
void CoreLoop<B, S>::stage_recv_st(CoreConn& c, RxDesc& rx) noexcept {
  if constexpr (SharedReceiveBackend<B>) {
    repost_pool_st(rx);
  } else {
    B::stage_recv_st(qp_of(c), make_wr_id(&rx, WrKind::kRecv, c.generation),
                     Segment{reinterpret_cast<std::uintptr_t>(rx.buf), c.buf_size, c.lkey});
    ++c.staged_recvs;
    ++c.rx_posted;
  }
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
  B::stage_send_st(qp_of(c), make_wr_id(&d, WrKind::kSend, c.generation),
                   Segment{reinterpret_cast<std::uintptr_t>(d.buf), d.len, c.lkey}, flags);
  push_sq_st(c, tx);
  ++cnt_.msgs_tx[d.type];
  cnt_.bytes_tx[d.type] += d.len;
}

// Records a staged send work request in the SQ FIFO (a tx descriptor, kRdmaMarker / kRdmaFiller, or a
// window's kWindowBindEntry / kWindowInvEntry).
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
  // The shared pool's re-posts before any connection's sends: a credit never goes out ahead of its buffer.
  flush_pool_st();
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
  const std::uint32_t recvs = c.staged_recvs, sends = c.staged_sends;
  c.staged_recvs = c.staged_sends = 0;
  const FlushResult r = B::flush_st(qp_of(c));
  cnt_.recv_posts += recvs - std::min(recvs, r.recv_unposted);
  cnt_.send_wrs += sends - std::min(sends, r.send_unposted);
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
      } else if (entry != kWindowBindEntry && entry != kWindowInvEntry) {
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
    } else if (done != kWindowBindEntry && done != kWindowInvEntry) {
      free_tx_st(c, done);
    }
    if (done == idx) break;
  }
}

}  // namespace rdmagate::dataplane

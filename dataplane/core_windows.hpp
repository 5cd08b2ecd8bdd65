#pragma once
// The core loop's memory windows (included by core_loop.hpp; the loop's class is declared there).
//
// A requester that hands its peer keys to its own memory (the client library) scopes each key to one request,
// as NFS/RDMA does with FRWR: window `slot` of the connection's QP is bound to the request's buffer, with the
// one access the request needs, just before the request's send on the same QP (the send queue runs them in
// order, so the window is valid before the peer can see the request); when the answer arrives the requester
// invalidates it, and hands the buffer back only once that invalidation completed. Each bind takes a key the
// window never had, so a key of a finished request is dead. Type-2 windows belong to their QP: no other
// connection can use them at all, and when the QP goes to ERR none can.
//
// The bind is unsignaled (it completes only in error, and leaves the SQ FIFO behind a later completion); the
// invalidation is signaled and its completion reaches the service (on_window_invalidated_st). Both hold a
// place the send queue keeps for them (send_queue_depth: two per window), never a tx descriptor.

#include "dataplane/core_loop.hpp"

namespace rdmagate::dataplane {

template <typename B, typename S>
std::uint32_t CoreLoop<B, S>::bind_window_st(CoreConn& c, std::uint32_t slot, const WindowBind& b) noexcept {
  if constexpr (WindowBackend<B>) {
    if (c.state != CoreConnState::kOwned || slot >= c.windows.size()) return 0;
    const std::uint32_t rkey = B::stage_bind_window_st(
        qp_of(c), slot, make_wr_id(&c.windows[slot], WrKind::kWindowBind, c.generation), b);
    if (rkey == 0) return 0;
    push_sq_st(c, kWindowBindEntry);
    mark_dirty_st(c);
    return rkey;
  } else {
    (void)c;
    (void)slot;
    (void)b;
    return 0;
  }
}

template <typename B, typename S>
bool CoreLoop<B, S>::invalidate_window_st(CoreConn& c, std::uint32_t slot) noexcept {
  if constexpr (WindowBackend<B>) {
    if (c.state != CoreConnState::kOwned || slot >= c.windows.size()) return false;
    if (!B::stage_invalidate_window_st(qp_of(c), slot,
                                       make_wr_id(&c.windows[slot], WrKind::kWindowInv, c.generation))) {
      return false;
    }
    push_sq_st(c, kWindowInvEntry);
    mark_dirty_st(c);
    return true;
  } else {
    (void)c;
    (void)slot;
    return false;
  }
}

// A bind failed (its only completion) or an invalidation completed. A failure fails the connection, whose
// close hands every request back once the QP is in ERR; an invalidation that completed tells the service the
// window's key is dead.
template <typename B, typename S>
void CoreLoop<B, S>::window_completed_st(const Completion& wc) noexcept {
  const WindowDesc& w = *wr_desc<WindowDesc>(wc.wr_id);
  CoreConn& c = *w.conn;
  if (stale_st(c, wc)) [[unlikely]]
    return;
  ++cnt_.completions_send;
  const bool inv = wr_kind(wc.wr_id) == WrKind::kWindowInv;
  pop_sq_st(c, inv ? kWindowInvEntry : kWindowBindEntry);
  if (wc.status != CompletionStatus::kOk) [[unlikely]] {
    completion_error_st(c, wc);
    return;
  }
  if (inv && c.state == CoreConnState::kOwned) {
    if constexpr (requires(S & s) { s.on_window_invalidated_st(*this, c, w.slot); }) {
      svc_.on_window_invalidated_st(*this, c, w.slot);
    }
  }
  maybe_closed_st(c);
}

}  // namespace rdmagate::dataplane

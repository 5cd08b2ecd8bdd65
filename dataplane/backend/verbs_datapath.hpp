#pragma once
// Hot path of the generic verbs backend: work requests staged into per-QP arrays that are chained once at
// setup, posted with one ibv_post_recv and one ibv_post_send per flush; ibv_poll_cq in bursts decoded into
// Completion records. Setup half: verbs_setup.cpp. Every function here runs on the owning core.

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "dataplane/backend/backend.hpp"
#include "dataplane/backend/verbs_setup.hpp"

namespace rdmagate::dataplane {

class VerbsQp final : public BackendQp {
 public:
  ~VerbsQp() override;  // rdma_destroy_qp (verbs_setup.cpp)

  ibv_qp* qp = nullptr;
  rdma_cm_id* id = nullptr;  // the QP is the id's (rdma_create_qp)
  // Staging: send_wr[i].next points at send_wr[i + 1] from setup on; a flush cuts the chain after the last
  // staged entry for the post and mends it afterwards, so staging writes no link.
  std::vector<ibv_send_wr> send_wr;
  std::vector<ibv_sge> send_sge;
  std::vector<ibv_recv_wr> recv_wr;
  std::vector<ibv_sge> recv_sge;
  std::uint32_t sends = 0, recvs = 0;
  // Staged beyond the arrays (a sizing bug): never posted, reported as unposted by the next flush.
  std::uint32_t sends_dropped = 0, recvs_dropped = 0;
  // Type-2 memory windows (QpCaps::windows), deallocated before the QP goes; `window_rkey[i]` is the key
  // window i was last bound with (a bind by work request does not move ibv_mw::rkey: the next bind does).
  std::vector<ibv_mw*> windows;
  std::vector<std::uint32_t> window_rkey;
};

class VerbsCq final : public BackendCq {
 public:
  ~VerbsCq() override;
  ibv_cq* cq = nullptr;
};

// The core's shared receive queue: re-posts staged into a chain fixed at setup like a QP's (recv_wr[i].next
// is &recv_wr[i + 1]), posted with one ibv_post_srq_recv per flush.
class VerbsSrq final : public BackendSrq {
 public:
  ~VerbsSrq() override;  // ibv_destroy_srq (verbs_setup.cpp)
  ibv_srq* srq = nullptr;
  std::vector<ibv_recv_wr> recv_wr;
  std::vector<ibv_sge> recv_sge;
  std::uint32_t recvs = 0;
  std::uint32_t unposted =
      0;  // refused by a post the staging made itself (a full chain), reported by the flush
};

struct VerbsBackend {
  using Qp = VerbsQp;
  using Cq = VerbsCq;
  static constexpr BackendKind kKind = BackendKind::kVerbs;
  static constexpr const char* kName = "verbs";
  static constexpr bool kSharedReceiveQueue = false;
  static constexpr bool kWindows = true;
  struct WithSrq;  // the same backend with the core's receives on a shared receive queue (below)
  static bool supports(ibv_context*) noexcept { return true; }
  static std::unique_ptr<DeviceBackend> make_device(ibv_context* ctx, ibv_pd* pd) { return make_verbs_device(ctx, pd); }
  static std::optional<std::uint32_t> probe_max_inline(ibv_context* ctx, std::uint32_t want) {
    return verbs_probe_max_inline(ctx, want);
  }
  static constexpr int kMaxPoll = 64;

  static void stage_recv_st(Qp& q, std::uint64_t wr_id, Segment s) noexcept {
    if (q.recvs == q.recv_wr.size()) [[unlikely]] {
      ++q.recvs_dropped;
      return;
    }
    q.recv_sge[q.recvs] = ibv_sge{s.addr, s.len, s.lkey};
    q.recv_wr[q.recvs].wr_id = wr_id;
    ++q.recvs;
  }

  // A SEND of `s` (len 0: no scatter/gather entry at all, as for the drain marker).
  static void stage_send_st(Qp& q, std::uint64_t wr_id, Segment s, unsigned flags) noexcept {
    ibv_send_wr* w = next_send(q);
    if (w == nullptr) [[unlikely]] return;
    w->wr_id = wr_id;
    w->num_sge = s.len != 0 ? 1 : 0;
    w->opcode = IBV_WR_SEND;
    w->send_flags = send_flags(flags);
    w->sg_list->addr = s.addr;
    w->sg_list->length = s.len;
    w->sg_list->lkey = s.lkey;
  }

  // One RDMA READ (remote -> local) or WRITE (local -> remote) of one fragment.
  static void stage_rdma_st(Qp& q, RdmaOp op, std::uint64_t wr_id, Segment local, std::uint64_t remote_addr,
                            std::uint32_t rkey, unsigned flags) noexcept {
    ibv_send_wr* w = next_send(q);
    if (w == nullptr) [[unlikely]] return;
    w->wr_id = wr_id;
    w->num_sge = 1;
    w->opcode = op == RdmaOp::kRead ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
    w->send_flags = send_flags(flags & kSendSignaled);
    w->sg_list->addr = local.addr;
    w->sg_list->length = local.len;
    w->sg_list->lkey = local.lkey;
    w->wr.rdma.remote_addr = remote_addr;
    w->wr.rdma.rkey = rkey;
  }

  // Binds window `slot` of `q` (unsignaled: it completes only in error) with a key it never had before, which
  // it returns: every request gets a key of its own, and a key of an earlier binding is dead. 0: no such
  // window (nothing staged). A full chain drops it like any send: the key comes back all the same, so that
  // the core's queue accounting holds it, and the flush reports it in the unposted tail.
  static std::uint32_t stage_bind_window_st(Qp& q, std::uint32_t slot, std::uint64_t wr_id,
                                            const WindowBind& b) noexcept {
    if (slot >= q.windows.size()) [[unlikely]]
      return 0;
    const std::uint32_t rkey = ibv_inc_rkey(q.window_rkey[slot]);
    ibv_send_wr* w = next_send(q);
    if (w == nullptr) [[unlikely]]
      return rkey;  // never bound: the window keeps its key
    // ibv_mw::rkey must name the key the device holds for the window when the bind is posted (rxe refuses a
    // bind whose mw_rkey differs): the key of the previous bind, since a window is bound again only after
    // its invalidation completed.
    q.windows[slot]->rkey = q.window_rkey[slot];
    q.window_rkey[slot] = rkey;
    w->wr_id = wr_id;
    w->num_sge = 0;
    w->opcode = IBV_WR_BIND_MW;
    w->send_flags = 0;
    w->imm_data = 0;  // shares its bytes with invalidate_rkey, which an earlier use of this entry may have
                      // set; rxe refuses a bind with immediate data
    w->bind_mw.mw = q.windows[slot];
    w->bind_mw.rkey = rkey;
    w->bind_mw.bind_info.mr = b.mr;
    w->bind_mw.bind_info.addr = b.addr;
    w->bind_mw.bind_info.length = b.len;
    w->bind_mw.bind_info.mw_access_flags =
        b.remote_write ? (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE) : IBV_ACCESS_REMOTE_READ;
    return rkey;
  }

  // Invalidates window `slot`'s current key (signaled: its completion says the peer can no longer use it).
  // false: no such window. A full chain drops it like any send (true, and the flush reports it).
  static bool stage_invalidate_window_st(Qp& q, std::uint32_t slot, std::uint64_t wr_id) noexcept {
    if (slot >= q.windows.size()) [[unlikely]]
      return false;
    ibv_send_wr* w = next_send(q);
    if (w == nullptr) [[unlikely]]
      return true;
    w->wr_id = wr_id;
    w->num_sge = 0;
    w->opcode = IBV_WR_LOCAL_INV;
    w->send_flags = IBV_SEND_SIGNALED;
    w->invalidate_rkey = q.window_rkey[slot];
    return true;
  }

  // Receives first, then sends: a credit never goes out ahead of the buffer it stands for.
  static FlushResult flush_st(Qp& q) noexcept {
    FlushResult r;
    r.recv_unposted = post_staged(q.recv_wr, q.recvs, [&](ibv_recv_wr* w, ibv_recv_wr** bad) {
                        return ibv_post_recv(q.qp, w, bad);
                      }) +
                      std::exchange(q.recvs_dropped, 0);
    r.send_unposted = post_staged(q.send_wr, q.sends, [&](ibv_send_wr* w, ibv_send_wr** bad) {
                        return ibv_post_send(q.qp, w, bad);
                      }) +
                      std::exchange(q.sends_dropped, 0);
    return r;
  }

  // Up to n (<= kMaxPoll) completions; < 0 when the CQ itself failed.
  static int poll_st(Cq& cq, Completion* out, int n) noexcept {
    ibv_wc wc[kMaxPoll];
    const int got = ibv_poll_cq(cq.cq, std::min(n, kMaxPoll), wc);
    for (int i = 0; i < got; ++i) {
      out[i].wr_id = wc[i].wr_id;
      out[i].byte_len = wc[i].byte_len;
      out[i].qp_num = wc[i].qp_num;
      out[i].device_status = static_cast<std::uint32_t>(wc[i].status);
      out[i].status = wc[i].status == IBV_WC_SUCCESS        ? CompletionStatus::kOk
                      : wc[i].status == IBV_WC_WR_FLUSH_ERR ? CompletionStatus::kFlushed
                                                            : CompletionStatus::kError;
    }
    return got;
  }

 private:
  // Posts the first n entries of a fixed chain behind one doorbell (cut after the last, mended after the
  // post); returns how many of them the device did not take. n is 0 afterwards.
  template <typename Wr, typename Post>
  static std::uint32_t post_staged(std::vector<Wr>& wrs, std::uint32_t& n, Post post) noexcept {
    if (n == 0) return 0;
    Wr* const last = &wrs[n - 1];
    Wr* const keep = last->next;
    last->next = nullptr;
    Wr* bad = nullptr;
    std::uint32_t unposted = 0;
    if (post(wrs.data(), &bad) != 0) [[unlikely]] {
      unposted = bad != nullptr ? n - static_cast<std::uint32_t>(bad - wrs.data()) : n;
    }
    last->next = keep;
    n = 0;
    return unposted;
  }

  static ibv_send_wr* next_send(Qp& q) noexcept {
    if (q.sends == q.send_wr.size()) [[unlikely]] {
      ++q.sends_dropped;
      return nullptr;
    }
    return &q.send_wr[q.sends++];
  }
  static unsigned send_flags(unsigned flags) noexcept {
    unsigned f = 0;
    if ((flags & kSendSignaled) != 0) f |= IBV_SEND_SIGNALED;
    if ((flags & kSendInline) != 0) f |= IBV_SEND_INLINE;
    return f;
  }
};

// The verbs backend with the core's receives on its shared receive queue: a QP stages and flushes sends
// only (it has no receive queue), the core re-posts every receive buffer to the SRQ and flushes the SRQ
// before any QP's sends (a credit never goes out ahead of the buffer it stands for).
struct VerbsBackend::WithSrq : VerbsBackend {
  using Srq = VerbsSrq;
  static constexpr bool kSharedReceiveQueue = true;

  static void stage_srq_recv_st(Srq& s, std::uint64_t wr_id, Segment seg) noexcept {
    if (s.recvs == s.recv_wr.size()) [[unlikely]]
      s.unposted += post_srq(s);  // a full chain: post it now
    s.recv_sge[s.recvs] = ibv_sge{seg.addr, seg.len, seg.lkey};
    s.recv_wr[s.recvs].wr_id = wr_id;
    ++s.recvs;
  }
  // The receives staged since the last flush, behind one doorbell. Returns how many were not posted.
  static std::uint32_t flush_srq_st(Srq& s) noexcept { return post_srq(s) + std::exchange(s.unposted, 0); }

 private:
  static std::uint32_t post_srq(Srq& s) noexcept {
    return post_staged(s.recv_wr, s.recvs,
                       [&](ibv_recv_wr* w, ibv_recv_wr** bad) { return ibv_post_srq_recv(s.srq, w, bad); });
  }
};

}  // namespace rdmagate::dataplane

#pragma once
// The data-plane core loop (hot path): poll the CQ in bursts, process completions by wr_id kind, decode and
// validate every message with the protocol core, run credits through the credit machine, dispatch to the
// service chosen at setup, re-post receives in batches, chain sends behind one doorbell per connection and
// burst with selective signaling, check the control ring every 16 iterations.
//
// CoreLoop<Backend, Service> is a template on both (eRPC's Rpc<Transport>): no virtual call and no branch on
// the device kind per message. No syscalls, locks or allocation on this path; the one exception is the
// optional yielding idle policy (sched_yield after a run of empty polls), chosen at setup for machines with
// more pollers than CPUs.
//
// Every method ending in _st runs on the core's own lcore.

#include <infiniband/verbs.h>
#include <rte_cycles.h>
#include <rte_pause.h>
#include <sched.h>

#include <array>
#include <atomic>
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "dataplane/core_conn.hpp"
#include "dataplane/core_resources.hpp"
#include "dataplane/core_stats_publish.hpp"
#include "protocol/credit_machine.hpp"
#include "protocol/message.hpp"

namespace rdmagate::dataplane {

// What a service provides. Api is the CoreLoop (send_st, now_tsc_st). Optional hooks (compiled in only when
// the service defines them): on_writable_st, on_chunk_request_st, on_bulk_read_done_st,
// on_bulk_read_failed_st, on_bulk_write_done_st (see "bulk transfers" below), pending_st, and
// on_poll_st(api) -> bool, called once per loop iteration (a service fed from outside, e.g. the client
// library's submission rings); true means it staged sends, so the loop flushes.
template <typename S, typename Api>
concept CoreService = requires(S& s, Api& api, CoreConn& c, const protocol::Message& m) {
  s.on_adopt_st(api, c);
  s.on_request_st(api, c, m);
  s.on_response_st(api, c, m);
  s.on_close_st(api, c);
};

// Failure statuses the core reports with FailureKind::kProtocol: a WireError below 0x100, a CreditError
// at 0x100 + code, an unexpected message type at 0x200 + type.
inline constexpr std::uint32_t kCreditStatusBase = 0x100;
inline constexpr std::uint32_t kUnexpectedStatusBase = 0x200;

template <typename Backend, typename Service>
class CoreLoop {
 public:
  static constexpr std::uint32_t kMaxBurst = 64;
  static constexpr std::uint32_t kTimerEvery = 1024;   // iterations between keepalive/dead-peer scans
  static constexpr std::uint32_t kStatsEvery = 1u << 16;
  static_assert((kTimerEvery & (kTimerEvery - 1)) == 0 && (kStatsEvery & (kStatsEvery - 1)) == 0);
  static_assert(kTimerEvery % EngineCoreMailbox::kCheckEvery == 0);

  CoreLoop(CoreResources& res, Service& svc)
      : res_(res), svc_(svc), cnt_(res.counters), mailbox_(res.core_mailbox()) {
    owned_.reserve(res.config().max_conns);
    dirty_.reserve(res.config().max_conns);
    burst_ = res.config().poll_burst == 0 || res.config().poll_burst > kMaxBurst ? kMaxBurst
                                                                                    : res.config().poll_burst;
    tsc_hz_ = rte_get_tsc_hz();
    if (tsc_hz_ == 0) tsc_hz_ = 1'000'000'000ull;
    publish_every_ = tsc_hz_ / 1000;
  }
  CoreLoop(const CoreLoop&) = delete;
  CoreLoop& operator=(const CoreLoop&) = delete;

  // Runs until control sets res.stop. Returns 0.
  int run_st() noexcept {
    res_.running.store(true, std::memory_order_release);
    std::array<ibv_wc, kMaxBurst> wcs;
    const IdlePolicy idle = res_.config().idle;
    const std::uint32_t yield_after = res_.config().idle_yield_after;
    std::uint32_t idle_run = 0;
    // Telemetry (issue 6): busy time is summed with one extra rdtsc per busy iteration; idle time is the
    // rest of the running time. The counters reach res.stats about once per publish_every_ cycles.
    const std::uint64_t start_tsc = rte_rdtsc();
    std::uint64_t busy_tsc = 0;
    std::uint64_t next_publish = start_tsc;
    for (std::uint64_t iter = 0;; ++iter) {
      ++cnt_.polls;
      const int n = Backend::poll_cq_st(res_.cq(), static_cast<int>(burst_), wcs.data());
      if (n > 0) [[likely]] {
        now_ = rte_rdtsc();
        for (int i = 0; i < n; ++i) process_wc_st(wcs[static_cast<std::size_t>(i)]);
        flush_st();
        busy_tsc += rte_rdtsc() - now_;
        idle_run = 0;
      } else {
        ++cnt_.idle_polls;
        if (n < 0) ++cnt_.errors[static_cast<std::size_t>(CoreError::kCompletion)];
        if (idle == IdlePolicy::kYield) {
          if (++idle_run >= yield_after) {
            ++cnt_.yields;
            sched_yield();
          } else {
            rte_pause();
          }
        } else if (idle == IdlePolicy::kPause) {
          rte_pause();
        }
      }
      if constexpr (requires(Service& s) { s.on_poll_st(*this); }) {
        if (svc_.on_poll_st(*this)) {
          flush_st();
          idle_run = 0;
        }
      }
      if ((iter & (EngineCoreMailbox::kCheckEvery - 1)) == 0) [[unlikely]] {
        now_ = rte_rdtsc();
        if (mailbox_.check_st(*this) != 0) flush_st();
        if (res_.stop.load(std::memory_order_acquire)) break;
        if (now_ >= next_publish && res_.stats != nullptr) {
          publish_core_counters(cnt_, PollerTimes{busy_tsc, now_ - start_tsc - busy_tsc}, *res_.stats);
          next_publish = now_ + publish_every_;
        }
        if ((iter & (kTimerEvery - 1)) == 0) timers_st();
        if ((iter & (kStatsEvery - 1)) == 0) {
          mailbox_.stats_st(CoreLoad{static_cast<std::uint32_t>(owned_.size()), 0, iter});
        }
      }
    }
    if (res_.stats != nullptr) {  // the final totals, for a scrape after the core stopped
      const std::uint64_t end = rte_rdtsc();
      publish_core_counters(cnt_, PollerTimes{busy_tsc, end - start_tsc - busy_tsc}, *res_.stats);
    }
    res_.running.store(false, std::memory_order_release);
    return 0;
  }

  // ---- API for services (core thread) ---------------------------------------------------------------

  // Encodes and sends (or queues, when credits do not allow it now) one message. Returns false when the
  // connection cannot send (not owned, no descriptor, encode refused); counted.
  bool send_st(CoreConn& c, protocol::MessageType type, std::uint16_t opcode, std::uint64_t cookie,
               std::span<const std::uint8_t> payload, std::uint32_t status = 0,
               std::uint32_t byte_count = 0, const protocol::Chunk* chunk = nullptr) noexcept {
    if (c.state != CoreConnState::kOwned) return false;
    protocol::Message m;
    if (chunk != nullptr) m.chunk = *chunk;
    m.type = type;
    m.opcode = opcode;
    m.cookie = cookie;
    m.payload = payload;
    m.status = status;
    m.byte_count = byte_count;
    const std::uint16_t idx = encode_st(c, m);
    if (idx == protocol::TxQueues::kEnd) return false;
    const protocol::SendStep step = c.credits->send_or_queue(protocol::credit_class(type), idx, now_);
    if (step.kind == protocol::SendKind::kSend) {
      stage_send_st(c, step);
    } else if (step.tx == protocol::TxQueues::kEnd) {
      free_tx_st(c, idx);  // refused: an engine bug, counted
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kTxExhausted)];
      return false;
    } else {
      ++cnt_.credit_stalls;
    }
    mark_dirty_st(c);
    return true;
  }

  // ---- bulk transfers (services call these from on_chunk_request_st) -----------------------------------
  //
  // One transfer per connection at a time. The local memory of a started transfer is the NIC's until the
  // op ends, and every started op ends exactly once, through one service hook (all optional):
  //   on_bulk_read_done_st(api, conn, op)    every READ succeeded and the connection is still owned
  //   on_bulk_read_failed_st(api, conn, op)  a READ failed or flushed, or the connection stopped being owned;
  //                                          called once the last posted READ has completed
  //   on_bulk_write_done_st(api, conn, op)   the last (signaled) WRITE completed: op.failed says whether it
  //                                          or an earlier one failed or flushed
  // An op in flight at CLOSE ends after the service's on_close_st (read-done is never delivered then: only
  // read-failed or write-done), but always before the core answers CLOSED, so a service releases memory
  // the NIC may touch only in these hooks.

  // RDMA-READs the read chunk's fragments, in order, into [dst, dst + total) (registered with `lkey`); at
  // most rd_depth READs in flight, the rest wait. False (nothing started) if the connection is not owned
  // or a transfer is already running.
  bool bulk_read_st(CoreConn& c, const ChunkRequest& req, std::uint8_t* dst, std::uint32_t lkey) noexcept {
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
    ++cnt_.read_chunks;
    cnt_.read_bytes += total;
    if (req.chunk.count > c.rd_depth) cnt_.rdma_reads_queued += req.chunk.count - c.rd_depth;
    post_reads_st(c);
    return true;
  }

  // The same into the connection's bulk buffer. False also if the chunk exceeds the bulk buffer.
  bool bulk_read_st(CoreConn& c, const ChunkRequest& req) noexcept {
    if (req.chunk.total_length() > c.bulk_size) return false;
    return bulk_read_st(c, req, c.bulk, c.lkey);
  }

  // RDMA-WRITEs [src, src + len) (registered with `lkey`) into the write chunk's fragments, in order. The
  // answer the service sends next travels behind the WRITEs on the same QP, so the requester sees the data
  // before the answer. False (nothing written) if the chunk is smaller than len. len 0 posts nothing and
  // ends at once (no hook).
  bool bulk_write_st(CoreConn& c, const ChunkRequest& req, const std::uint8_t* src, std::uint32_t lkey,
                     std::uint32_t len) noexcept {
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
    std::uint32_t off = 0;
    const auto frags = req.chunk.view();
    std::size_t last = 0;
    for (std::size_t i = 0; i < frags.size() && off < len; ++i) {
      const std::uint32_t n = std::min(frags[i].len, len - off);
      build_rdma_wr_st(c, i, IBV_WR_RDMA_WRITE, frags[i], off, n);
      off += n;
      last = i;
    }
    for (std::size_t i = 0; i <= last; ++i) {
      const bool signaled = i == last;
      if (signaled) {
        op.wr[i].send_flags = IBV_SEND_SIGNALED;
      } else {
        op.wr[i].wr_id = make_wr_id(&op, WrKind::kRdmaFiller);
      }
      stage_wr_st(c, op.wr[i], signaled ? kRdmaMarker : kRdmaFiller);
    }
    op.state = BulkState::kWriting;
    mark_dirty_st(c);
    return true;
  }

  // The same from the connection's bulk buffer. False also if len exceeds the bulk buffer.
  bool bulk_write_st(CoreConn& c, const ChunkRequest& req, std::uint32_t len) noexcept {
    if (len > c.bulk_size) return false;
    return bulk_write_st(c, req, c.bulk, c.lkey, len);
  }

  // FAULT INJECTION ONLY (tests of misbehaving peers): sends `bytes` as one message exactly as given,
  // bypassing encode_message and the credit machine. Returns false when no descriptor is free.
  bool inject_raw_st(CoreConn& c, std::span<const std::uint8_t> bytes) noexcept {
    if (c.state != CoreConnState::kOwned || bytes.size() > c.buf_size || c.tx_free_top == 0) return false;
    const std::uint16_t idx = c.tx_free[--c.tx_free_top];
    TxDesc& d = c.tx[idx];
    std::memcpy(d.buf, bytes.data(), bytes.size());
    d.len = static_cast<std::uint32_t>(bytes.size());
    d.type = 0;
    stage_raw_st(c, idx);
    mark_dirty_st(c);
    return true;
  }

  // Free tx descriptors of `c` (a service paces its requests with it).
  std::uint32_t tx_available_st(const CoreConn& c) const noexcept { return c.tx_free_top; }
  std::uint64_t now_tsc_st() const noexcept { return now_; }
  std::uint64_t tsc_hz() const noexcept { return tsc_hz_; }
  CoreCounters& counters_st() noexcept { return cnt_; }
  std::uint32_t owned_st() const noexcept { return static_cast<std::uint32_t>(owned_.size()); }
  // True after CONFIG kQuiesce 1: services start no new request (the core refuses incoming ones).
  bool quiescing_st() const noexcept { return quiescing_; }

  // ---- handoff commands (CoreMailbox calls these during check_st) -----------------------------------

  void on_adopt_st(ConnHandle h) noexcept {
    CoreConn& c = *h.as_ptr<CoreConn>();
    if (c.state != CoreConnState::kPosted) return;  // a CLOSE overtook it? (cannot: rings are FIFO)
    if (protocol::CreditMachine::validate(c.credit_cfg, c.links.size()) != protocol::CreditError::kOk) {
      c.state = CoreConnState::kFailed;
      report_failed_st(c, FailureKind::kProtocol, kCreditStatusBase + static_cast<std::uint32_t>(
                                                                          protocol::CreditError::kBadConfig));
      return;
    }
    c.credits.emplace(c.credit_cfg, std::span<std::uint16_t>(c.links), now_);
    c.state = CoreConnState::kOwned;
    c.owned_index = static_cast<std::uint32_t>(owned_.size());
    owned_.push_back(&c);
    ++cnt_.adopted;
    svc_.on_adopt_st(*this, c);
    // Messages that arrived between accept and ADOPT, in arrival order.
    for (std::uint32_t i = 0; i < c.early_count && c.state == CoreConnState::kOwned; ++i) {
      handle_message_st(c, c.rx[c.early[i]]);
    }
    c.early_count = 0;
    mark_dirty_st(c);
  }

  void on_close_st(ConnHandle h, CloseReason) noexcept {
    CoreConn& c = *h.as_ptr<CoreConn>();
    if (c.state == CoreConnState::kDraining || c.state == CoreConnState::kClosed) return;
    if (c.state == CoreConnState::kOwned || c.state == CoreConnState::kFailed) {
      if (c.state == CoreConnState::kOwned || c.credits) svc_.on_close_st(*this, c);
    }
    // Post whatever is staged (on a QP in ERR it flushes), so every descriptor is accounted by the CQ, and
    // so the dirty list never names a connection control may free after CLOSED.
    if (c.dirty) flush_st();
    remove_owned_st(c);
    c.state = CoreConnState::kDraining;
    // Queued descriptors never reach the device.
    if (c.credits) {
      for (std::uint16_t tx = c.credits->cancel_next(); tx != protocol::TxQueues::kEnd;
           tx = c.credits->cancel_next()) {
        free_tx_st(c, tx);
      }
    }
    c.early_count = 0;  // parked receives already completed: drop them
    c.chunk_count = 0;  // waiting chunk requests are dropped with the connection
    // Unsignaled sends that completed leave no CQE: a signaled marker behind them proves the SQ empty.
    if (c.sq_inflight() != 0) {
      c.drain.wr = ibv_send_wr{};
      c.drain.wr.wr_id = make_wr_id(&c.drain, WrKind::kDrain);
      c.drain.wr.opcode = IBV_WR_SEND;
      c.drain.wr.send_flags = IBV_SEND_SIGNALED;
      c.drain.wr.num_sge = 0;
      ibv_send_wr* bad = nullptr;
      if (Backend::post_send_st(c.qp, &c.drain.wr, &bad) == 0) {
        c.drain_posted = true;
      } else {
        ++cnt_.errors[static_cast<std::size_t>(CoreError::kPostSend)];
        c.sq_head = c.sq_tail;  // cannot prove it; the QP is in ERR and nothing new is posted
        if (c.bulk_op.state != BulkState::kIdle) {  // nor wait for it: end the transfer as failed
          c.bulk_op.failed = true;
          end_bulk_st(c);
        }
      }
    }
    maybe_closed_st(c);
  }

  // kQuiesce 1 (SIGTERM drain): requests that arrive from now on are answered kCompletion kNoResources
  // (never reach the service), services start no new request, and every send is signaled, so its
  // completion proves the SQ empty up to it. Unsignaled sends posted before the quiesce and followed by no
  // send since cannot be proven (a NOOP without a reason is dropped by the credit machine); they count as
  // done once the quiet period has passed. When every connection is idle (quiesce_idle_st) the core sets
  // res.quiesced. kQuiesce 0 resumes.
  //
  // kKeepaliveIntervalUs / kPeerDeadTimeoutUs (SIGHUP reload): every owned connection takes the new time at
  // once. A connection control sets up later carries it in its credit config; one already on its way (its
  // ADOPT ahead of this CONFIG in the ring) is owned by the time this runs, so none keeps the old time.
  void on_config_st(ConfigKey k, std::uint64_t v) noexcept {
    switch (k) {
      case ConfigKey::kQuiesce:
        quiescing_ = v != 0;
        res_.quiesced.store(false, std::memory_order_release);
        last_refusal_ = now_;
        for (CoreConn* c : owned_) c->quiesce_sq_mark = c->sq_tail;
        return;
      case ConfigKey::kKeepaliveIntervalUs:
      case ConfigKey::kPeerDeadTimeoutUs: {
        const std::uint64_t ticks = us_to_tsc(v, tsc_hz_);
        for (CoreConn* c : owned_) {
          protocol::CreditMachine& cm = *c->credits;
          if (k == ConfigKey::kKeepaliveIntervalUs) {
            cm.set_timers(ticks, cm.dead_peer_timeout());
          } else {
            cm.set_timers(cm.keepalive_interval(), ticks);
          }
        }
        return;
      }
      default:
        ++cnt_.errors[static_cast<std::size_t>(CoreError::kUnexpected)];  // a key this core does not know
        return;
    }
  }

 private:
  // ---- completions ----------------------------------------------------------------------------------

  void process_wc_st(const ibv_wc& wc) noexcept {
    switch (wr_kind(wc.wr_id)) {
      case WrKind::kRecv: {
        ++cnt_.completions_recv;
        RxDesc& rx = *wr_desc<RxDesc>(wc.wr_id);
        CoreConn& c = *rx.conn;
        --c.rx_posted;
        if (wc.status != IBV_WC_SUCCESS) [[unlikely]] {
          completion_error_st(c, wc);
          return;
        }
        rx.byte_len = wc.byte_len;
        switch (c.state) {
          case CoreConnState::kOwned:
            handle_message_st(c, rx);
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
      case WrKind::kSend: {
        ++cnt_.completions_send;
        TxDesc& d = *wr_desc<TxDesc>(wc.wr_id);
        CoreConn& c = *d.conn;
        reclaim_sq_st(c, d.index);
        if (wc.status != IBV_WC_SUCCESS) [[unlikely]] {
          completion_error_st(c, wc);
          return;
        }
        if (c.state == CoreConnState::kOwned) {
          if (c.credits->queued_total() != 0) mark_dirty_st(c);
          notify_writable_st(c);
        }
        return;
      }
      case WrKind::kDrain: {
        ++cnt_.completions_drain;
        TxDesc& d = *wr_desc<TxDesc>(wc.wr_id);
        CoreConn& c = *d.conn;
        if (wc.status == IBV_WC_WR_FLUSH_ERR) {
          ++cnt_.completions_flushed;  // the usual fate of a drain marker (the QP is in ERR)
        } else if (wc.status != IBV_WC_SUCCESS) {
          ++cnt_.completions_error;
        }
        // Everything posted before the marker has completed.
        while (c.sq_head != c.sq_tail) {
          free_tx_st(c, c.sq_fifo[c.sq_head & (c.sq_fifo.size() - 1)]);
          ++c.sq_head;
        }
        c.drain_posted = false;
        maybe_closed_st(c);
        return;
      }
      case WrKind::kRdma:
      case WrKind::kRdmaFiller:
      default: {
        // A marker (every READ, the last WRITE of a chunk) or, only in error, an unsignaled WRITE filler.
        ++cnt_.completions_rdma;
        const bool marker = wr_kind(wc.wr_id) != WrKind::kRdmaFiller;
        BulkOp& op = *wr_desc<BulkOp>(wc.wr_id);
        CoreConn& c = *op.conn;
        pop_sq_st(c, marker ? kRdmaMarker : kRdmaFiller);
        if (wc.status != IBV_WC_SUCCESS) [[unlikely]] {
          op.failed = true;
          note_completion_error_st(c, wc);
        }
        if (marker) {
          if (op.state == BulkState::kReading) {
            if (op.outstanding != 0) --op.outstanding;
            if (c.state == CoreConnState::kOwned && op.next_frag < op.req.chunk.count) {
              post_reads_st(c);
            } else if (op.outstanding == 0) {
              end_bulk_st(c);
            }
          } else if (op.state == BulkState::kWriting) {
            end_bulk_st(c);
          }
          if (c.state == CoreConnState::kOwned) mark_dirty_st(c);
        }
        // Last: on a draining connection this may answer CLOSED, after which c is control's again.
        maybe_closed_st(c);
        return;
      }
    }
  }

  // The connection's bulk op is over (its last posted READ/WRITE completed, or could not be posted): the
  // service learns the outcome exactly once (see the bulk transfer API), then waiting chunks may start.
  void end_bulk_st(CoreConn& c) noexcept {
    BulkOp& op = c.bulk_op;
    const BulkState was = op.state;
    op.state = BulkState::kIdle;
    op.outstanding = 0;
    if (was == BulkState::kReading) {
      if (!op.failed && c.state == CoreConnState::kOwned) {
        if constexpr (requires(Service& s) { s.on_bulk_read_done_st(*this, c, op); }) {
          svc_.on_bulk_read_done_st(*this, c, op);
        }
      } else {
        op.failed = true;
        if constexpr (requires(Service& s) { s.on_bulk_read_failed_st(*this, c, op); }) {
          svc_.on_bulk_read_failed_st(*this, c, op);
        }
      }
    } else if (was == BulkState::kWriting) {
      if constexpr (requires(Service& s) { s.on_bulk_write_done_st(*this, c, op); }) {
        svc_.on_bulk_write_done_st(*this, c, op);
      }
    }
    if (c.state == CoreConnState::kOwned) run_chunks_st(c);
  }

  // RDMA work requests of the bulk op that never reached the device (a failed post): the op ends when
  // nothing of it remains on the device.
  void unposted_rdma_st(CoreConn& c, std::uint16_t fifo_entry) noexcept {
    BulkOp& op = c.bulk_op;
    op.failed = true;
    if (fifo_entry != kRdmaMarker) return;  // a filler: its op's marker is behind it, unposted too
    if (op.state == BulkState::kReading) {
      if (op.outstanding != 0) --op.outstanding;
      if (op.outstanding == 0) end_bulk_st(c);
    } else if (op.state == BulkState::kWriting) {
      end_bulk_st(c);
    }
  }

  void completion_error_st(CoreConn& c, const ibv_wc& wc) noexcept {
    note_completion_error_st(c, wc);
    maybe_closed_st(c);
  }

  // completion_error_st without the CLOSED check (the caller still uses the connection).
  void note_completion_error_st(CoreConn& c, const ibv_wc& wc) noexcept {
    if (wc.status == IBV_WC_WR_FLUSH_ERR) {
      ++cnt_.completions_flushed;
    } else {
      ++cnt_.completions_error;
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kCompletion)];
      if (c.state == CoreConnState::kOwned || c.state == CoreConnState::kPosted) {
        report_failed_st(c, FailureKind::kCompletion, static_cast<std::uint32_t>(wc.status));
      }
    }
    if (c.state == CoreConnState::kOwned) {
      // A flush on an owned connection: control moved the QP to ERR and its CLOSE is on the way.
      c.state = CoreConnState::kFailed;
      remove_owned_st(c);
    }
  }

  void handle_message_st(CoreConn& c, RxDesc& rx) noexcept {
    protocol::Message m;
    const protocol::WireError we =
        protocol::decode_message(std::span<const std::uint8_t>(rx.buf, rx.byte_len), c.session, m);
    if (we != protocol::WireError::kOk) [[unlikely]] {
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kWire)];
      ++cnt_.wire_errors[static_cast<std::size_t>(we)];
      fail_st(c, FailureKind::kProtocol, static_cast<std::uint32_t>(we));
      return;
    }
    const protocol::CreditClass cls = protocol::credit_class(m.type);
    const protocol::CreditError ce = c.credits->on_receive(cls, m.credits, now_);
    if (ce != protocol::CreditError::kOk) [[unlikely]] {
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kCredit)];
      ++cnt_.credit_errors[static_cast<std::size_t>(ce)];
      fail_st(c, FailureKind::kProtocol, kCreditStatusBase + static_cast<std::uint32_t>(ce));
      return;
    }
    const auto t = static_cast<std::size_t>(m.type);
    ++cnt_.msgs_rx[t];
    cnt_.bytes_rx[t] += rx.byte_len;
    ++c.msgs_rx;
    // Re-post first (staged: the buffer reaches the device only at flush, after the service has used the
    // payload), so an answer queued now carries this credit instead of a NOOP.
    stage_recv_st(c, rx);
    c.credits->on_reposted(cls);
    if (quiescing_ && is_request(m.type)) [[unlikely]] {
      // Quiescing: a request that arrives now is not started; the requester gets a clear answer.
      ++cnt_.quiesce_refused;
      last_refusal_ = now_;
      res_.quiesced.store(false, std::memory_order_relaxed);
      send_st(c, protocol::MessageType::kCompletion, m.opcode, m.cookie, {},
              static_cast<std::uint32_t>(protocol::CompletionStatus::kNoResources), 0);
      mark_dirty_st(c);
      return;
    }
    switch (m.type) {
      case protocol::MessageType::kNoop:
        notify_writable_st(c);  // it returned credits
        break;
      case protocol::MessageType::kInlineRequest:
        svc_.on_request_st(*this, c, m);
        break;
      case protocol::MessageType::kInlineResponse:
      case protocol::MessageType::kCompletion:
        svc_.on_response_st(*this, c, m);
        break;
      case protocol::MessageType::kReadChunkRequest:
      case protocol::MessageType::kWriteChunkRequest:
        // The fragments are copied, so the receive buffer goes back at once; one transfer runs at a time.
        if (c.chunk_count == kChunkQueue) {
          ++cnt_.chunk_queue_full;
          send_st(c, protocol::MessageType::kCompletion, m.opcode, m.cookie, {},
                  static_cast<std::uint32_t>(protocol::CompletionStatus::kNoResources), 0);
          break;
        }
        {
          ChunkRequest& r = c.chunk_queue[(c.chunk_head + c.chunk_count) % kChunkQueue];
          r.type = m.type;
          r.opcode = m.opcode;
          r.cookie = m.cookie;
          r.chunk = m.chunk;
          r.payload_len = static_cast<std::uint32_t>(m.payload.size());
          const auto keep = r.payload();
          if (!keep.empty()) std::memcpy(r.payload_buf.data(), m.payload.data(), keep.size());
          ++c.chunk_count;
        }
        run_chunks_st(c);
        break;
    }
    mark_dirty_st(c);
  }

  // ---- staging and posting ------------------------------------------------------------------------------

  void stage_recv_st(CoreConn& c, RxDesc& rx) noexcept {
    rx.wr.next = nullptr;
    if (c.recv_tail != nullptr) {
      c.recv_tail->next = &rx.wr;
    } else {
      c.recv_head = &rx.wr;
    }
    c.recv_tail = &rx.wr;
    ++c.recv_staged;
    ++c.rx_posted;
  }

  std::uint16_t encode_st(CoreConn& c, const protocol::Message& m) noexcept {
    if (c.tx_free_top == 0) [[unlikely]] {
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kTxExhausted)];
      return protocol::TxQueues::kEnd;
    }
    const std::uint16_t idx = c.tx_free[--c.tx_free_top];
    TxDesc& d = c.tx[idx];
    const auto enc = protocol::encode_message(m, c.session, std::span<std::uint8_t>(d.buf, c.buf_size));
    if (!enc.ok()) [[unlikely]] {
      ++cnt_.errors[static_cast<std::size_t>(CoreError::kEncode)];
      free_tx_st(c, idx);
      return protocol::TxQueues::kEnd;
    }
    d.len = static_cast<std::uint32_t>(enc.size);
    d.type = static_cast<std::uint8_t>(m.type);
    return idx;
  }

  void stage_send_st(CoreConn& c, const protocol::SendStep& step) noexcept {
    protocol::patch_credits(std::span<std::uint8_t>(c.tx[step.tx].buf, c.tx[step.tx].len), step.credits,
                            c.session);
    stage_raw_st(c, step.tx);
    if (step.cls == protocol::CreditClass::kNoop) ++cnt_.noops;
  }

  // Builds the send WR of descriptor `tx` and appends it to the connection's chain (one doorbell per flush).
  void stage_raw_st(CoreConn& c, std::uint16_t tx) noexcept {
    TxDesc& d = c.tx[tx];
    d.sge.addr = reinterpret_cast<std::uintptr_t>(d.buf);
    d.sge.length = d.len;
    d.sge.lkey = c.lkey;
    d.wr.next = nullptr;
    d.wr.wr_id = make_wr_id(&d, WrKind::kSend);
    d.wr.sg_list = &d.sge;
    d.wr.num_sge = 1;
    d.wr.opcode = IBV_WR_SEND;
    unsigned flags = 0;
    if (d.len <= c.max_inline) {
      flags |= IBV_SEND_INLINE;
      ++cnt_.inline_sends;
    }
    if (++c.unsignaled >= c.signal_interval || quiescing_) {
      flags |= IBV_SEND_SIGNALED;
      c.unsignaled = 0;
    }
    d.wr.send_flags = flags;
    if (c.send_tail != nullptr) {
      c.send_tail->next = &d.wr;
    } else {
      c.send_head = &d.wr;
    }
    c.send_tail = &d.wr;
    c.sq_fifo[c.sq_tail & (c.sq_fifo.size() - 1)] = tx;
    ++c.sq_tail;
    ++cnt_.msgs_tx[d.type];
    cnt_.bytes_tx[d.type] += d.len;
    ++c.msgs_tx;
  }

  // Optional service hook: descriptors or credits came back.
  void notify_writable_st(CoreConn& c) noexcept {
    if constexpr (requires(Service& s) { s.on_writable_st(*this, c); }) svc_.on_writable_st(*this, c);
  }

  // Starts waiting chunk requests while the bulk engine is idle (one transfer at a time per connection).
  void run_chunks_st(CoreConn& c) noexcept {
    while (c.chunk_count != 0 && c.bulk_op.state == BulkState::kIdle && c.state == CoreConnState::kOwned) {
      const ChunkRequest req = c.chunk_queue[c.chunk_head];
      c.chunk_head = (c.chunk_head + 1) % kChunkQueue;
      --c.chunk_count;
      if constexpr (requires(Service& s) { s.on_chunk_request_st(*this, c, req); }) {
        svc_.on_chunk_request_st(*this, c, req);
      } else {
        send_st(c, protocol::MessageType::kCompletion, req.opcode, req.cookie, {},
                static_cast<std::uint32_t>(protocol::CompletionStatus::kUnknownOpcode), 0);
      }
    }
  }

  void build_rdma_wr_st(CoreConn& c, std::size_t i, ibv_wr_opcode opcode, const protocol::Fragment& f,
                        std::uint32_t local_off, std::uint32_t len) noexcept {
    BulkOp& op = c.bulk_op;
    op.sge[i].addr = reinterpret_cast<std::uintptr_t>(op.local + local_off);
    op.sge[i].length = len;
    op.sge[i].lkey = op.local_lkey;
    ibv_send_wr& w = op.wr[i];
    w = ibv_send_wr{};
    w.wr_id = make_wr_id(&op, WrKind::kRdma);
    w.sg_list = &op.sge[i];
    w.num_sge = 1;
    w.opcode = opcode;
    w.wr.rdma.remote_addr = f.addr;
    w.wr.rdma.rkey = f.rkey;
  }

  // Posts READs up to the initiator depth (the rest wait for completions).
  void post_reads_st(CoreConn& c) noexcept {
    BulkOp& op = c.bulk_op;
    const auto frags = op.req.chunk.view();
    while (op.next_frag < frags.size() && op.outstanding < c.rd_depth) {
      const protocol::Fragment& f = frags[op.next_frag];
      build_rdma_wr_st(c, op.next_frag, IBV_WR_RDMA_READ, f, op.next_off, f.len);
      op.wr[op.next_frag].send_flags = IBV_SEND_SIGNALED;
      stage_wr_st(c, op.wr[op.next_frag], kRdmaMarker);
      op.next_off += f.len;
      ++op.next_frag;
      ++op.outstanding;
    }
    mark_dirty_st(c);
  }

  // Appends a work request to the connection's send chain and records it in the SQ FIFO.
  void stage_wr_st(CoreConn& c, ibv_send_wr& w, std::uint16_t fifo_entry) noexcept {
    w.next = nullptr;
    if (c.send_tail != nullptr) {
      c.send_tail->next = &w;
    } else {
      c.send_head = &w;
    }
    c.send_tail = &w;
    c.sq_fifo[c.sq_tail & (c.sq_fifo.size() - 1)] = fifo_entry;
    ++c.sq_tail;
  }

  void mark_dirty_st(CoreConn& c) noexcept {
    if (!c.dirty) {
      c.dirty = true;
      dirty_.push_back(&c);
    }
  }

  void flush_st() noexcept {
    // Index loop: a failure while flushing one connection never adds another to the list.
    for (std::size_t i = 0; i < dirty_.size(); ++i) {
      CoreConn& c = *dirty_[i];
      if (c.state == CoreConnState::kOwned) pump_sends_st(c);
      post_staged_st(c);
    }
    dirty_.clear();
  }

  // Moves whatever the credit machine lets go now onto the staged chain, NOOP included.
  void pump_sends_st(CoreConn& c) noexcept {
    protocol::CreditMachine& cm = *c.credits;
    // The machine decides a NOOP's reason inside next_send and counts it there: the difference is exact.
    const std::uint64_t keepalives_before = keepalives_of(cm);
    if (cm.wants_noop(now_)) {
      protocol::Message m;
      m.type = protocol::MessageType::kNoop;
      const std::uint16_t idx = encode_st(c, m);
      if (idx != protocol::TxQueues::kEnd && !cm.enqueue(protocol::CreditClass::kNoop, idx)) free_tx_st(c, idx);
    }
    for (;;) {
      const protocol::SendStep step = cm.next_send(now_);
      if (step.kind == protocol::SendKind::kSend) {
        stage_send_st(c, step);
      } else if (step.kind == protocol::SendKind::kDropNoop) {
        free_tx_st(c, step.tx);
      } else {
        break;
      }
    }
    cnt_.keepalives += keepalives_of(cm) - keepalives_before;
  }

  static std::uint64_t keepalives_of(const protocol::CreditMachine& cm) noexcept {
    return cm.stats().noops[static_cast<std::size_t>(protocol::NoopReason::kKeepalive)];
  }

  // One doorbell for the receives, then one for the sends: receives first, so a credit never goes out
  // ahead of the buffer it stands for.
  void post_staged_st(CoreConn& c) noexcept {
    c.dirty = false;
    if (c.recv_head != nullptr) {
      ibv_recv_wr* bad = nullptr;
      ++cnt_.doorbells_recv;
      if (Backend::post_recv_st(c.qp, c.recv_head, &bad) != 0) [[unlikely]] {
        for (ibv_recv_wr* w = bad; w != nullptr; w = w->next) --c.rx_posted;
        ++cnt_.errors[static_cast<std::size_t>(CoreError::kPostRecv)];
        if (c.state == CoreConnState::kOwned) fail_st(c, FailureKind::kCompletion, 0);
      }
      c.recv_head = c.recv_tail = nullptr;
      c.recv_staged = 0;
    }
    if (c.send_head != nullptr) {
      ibv_send_wr* bad = nullptr;
      ++cnt_.doorbells_send;
      if (Backend::post_send_st(c.qp, c.send_head, &bad) != 0) [[unlikely]] {
        // The unposted tail of the chain is the newest part of the FIFO: take it back.
        for (ibv_send_wr* w = bad; w != nullptr; w = w->next) {
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
      }
      c.send_head = c.send_tail = nullptr;
    }
  }

  // ---- descriptors, teardown ---------------------------------------------------------------------------

  void free_tx_st(CoreConn& c, std::uint16_t idx) noexcept {
    if (idx < c.tx.size() && c.tx_free_top < c.tx_free.size()) c.tx_free[c.tx_free_top++] = idx;
  }

  // A completion for descriptor `idx`: it and everything posted before it are done (in-order SQ).
  void reclaim_sq_st(CoreConn& c, std::uint16_t idx) noexcept {
    pop_sq_st(c, idx);
    maybe_closed_st(c);
  }

  // The FIFO part of reclaim_sq_st (idx may be kRdmaMarker/kRdmaFiller: the oldest such entry).
  void pop_sq_st(CoreConn& c, std::uint16_t idx) noexcept {
    const std::size_t mask = c.sq_fifo.size() - 1;
    while (c.sq_head != c.sq_tail) {
      const std::uint16_t done = c.sq_fifo[c.sq_head & mask];
      ++c.sq_head;
      free_tx_st(c, done);
      if (done == idx) break;
    }
  }

  void fail_st(CoreConn& c, FailureKind kind, std::uint32_t status) noexcept {
    if (c.state != CoreConnState::kOwned) return;
    c.state = CoreConnState::kFailed;
    remove_owned_st(c);
    report_failed_st(c, kind, status);
  }

  void report_failed_st(CoreConn& c, FailureKind kind, std::uint32_t status) noexcept {
    if (!mailbox_.failed_st(c.handle, kind, status)) ++cnt_.errors[static_cast<std::size_t>(CoreError::kUnexpected)];
  }

  void remove_owned_st(CoreConn& c) noexcept {
    const std::uint32_t i = c.owned_index;
    if (i < owned_.size() && owned_[i] == &c) {
      owned_[i] = owned_.back();
      owned_[i]->owned_index = i;
      owned_.pop_back();
    }
    c.owned_index = UINT32_MAX;
  }

  // Draining and nothing left on the device: answer CLOSED and forget the connection.
  void maybe_closed_st(CoreConn& c) noexcept {
    if (c.state != CoreConnState::kDraining) return;
    if (c.rx_posted != 0 || c.sq_inflight() != 0 || c.drain_posted) return;
    c.state = CoreConnState::kClosed;
    ++cnt_.closed;
    if (!mailbox_.closed_st(c.handle)) ++cnt_.errors[static_cast<std::size_t>(CoreError::kUnexpected)];
  }

  // Keepalive NOOPs and dead peers, on TSC deadlines (every kTimerEvery iterations).
  void timers_st() noexcept {
    for (std::size_t i = 0; i < owned_.size();) {
      CoreConn& c = *owned_[i];
      if (c.credits->peer_dead(now_)) {
        ++cnt_.errors[static_cast<std::size_t>(CoreError::kDeadPeer)];
        fail_st(c, FailureKind::kKeepalive, 0);  // removes owned_[i]
        continue;
      }
      if (c.credits->wants_noop(now_)) mark_dirty_st(c);
      ++i;
    }
    if (!dirty_.empty()) flush_st();
    if (quiescing_ && !res_.quiesced.load(std::memory_order_relaxed) && quiesce_idle_st()) {
      ++cnt_.quiesce_reached;
      res_.quiesced.store(true, std::memory_order_release);
    }
  }

  static constexpr bool is_request(protocol::MessageType t) noexcept {
    return t == protocol::MessageType::kInlineRequest || t == protocol::MessageType::kReadChunkRequest ||
           t == protocol::MessageType::kWriteChunkRequest;
  }

  // Every owned connection idle, and no request refused for kQuietMs (requests the peer sent before it saw
  // our first refusal are still arriving until then).
  bool quiesce_idle_st() noexcept {
    if (now_ - last_refusal_ < tsc_hz_ / 1000 * kQuietMs) return false;
    for (CoreConn* c : owned_) {
      const bool sq_done = c->sq_inflight() == 0 || (c->sq_tail == c->quiesce_sq_mark && c->send_head == nullptr);
      if (!sq_done || c->credits->queued_total() != 0 || c->chunk_count != 0 ||
          c->bulk_op.state != BulkState::kIdle) {
        return false;
      }
      if constexpr (requires(Service& s) { s.pending_st(*c); }) {
        if (svc_.pending_st(*c) != 0) return false;
      }
    }
    return true;
  }

  CoreResources& res_;
  Service& svc_;
  CoreCounters& cnt_;
  EngineCoreMailbox& mailbox_;
  std::vector<CoreConn*> owned_;
  std::vector<CoreConn*> dirty_;
  std::uint32_t burst_ = 32;
  std::uint64_t now_ = 0;
  std::uint64_t tsc_hz_ = 0;
  std::uint64_t publish_every_ = 0;  // TSC cycles between copies of the counters into res.stats (~1 ms)
  static constexpr std::uint64_t kQuietMs = 50;
  bool quiescing_ = false;
  std::uint64_t last_refusal_ = 0;
};

}  // namespace rdmagate::dataplane

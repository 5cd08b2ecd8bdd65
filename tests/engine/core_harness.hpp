#pragma once
// The stand-in for control that host tests of the core loop drive a core with: the core's resources over a
// rig's device, its loop running a service, the connections a test opens on it (LoopbackConn), control's
// side of the rings (ADOPT, CLOSE, CONFIG; the CLOSED / FAILED replies), and a turn of the production
// run_st at a time. Shared by core_loop_test.cpp and auth_core_test.cpp.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/core_loop.hpp"
#include "tests/engine/device_rigs.hpp"

namespace rdmagate::dataplane::fake {

inline CoreConfig test_core_config() {
  CoreConfig cfg;
  cfg.memory = HugeBufferKind::kHeap;  // no EAL
  cfg.max_conns = 4;
  cfg.rx_per_conn = 8;
  cfg.tx_per_conn = 16;
  cfg.buf_size = 512;
  cfg.bulk_bytes_per_conn = 8192;
  cfg.check_every = 1;  // Core::turn: every iteration checks the ring (and the stop flag)
  return cfg;
}

// What control reads back from the core's ring.
struct Replies {
  struct Failed {
    ConnHandle conn;
    FailureKind kind;
    std::uint32_t status;
  };
  std::vector<ConnHandle> closed;
  std::vector<Failed> failed;
  std::vector<unsigned> cq_lost;  // cores that answered kCqLost

  void on_closed_st(ConnHandle c) { closed.push_back(c); }
  void on_failed_st(ConnHandle c, FailureKind k, std::uint32_t s) { failed.push_back(Failed{c, k, s}); }
  void on_cq_lost_st(unsigned core) { cq_lost.push_back(core); }
  std::size_t closed_count(ConnHandle h) const {
    return static_cast<std::size_t>(std::count(closed.begin(), closed.end(), h));
  }
  std::size_t failed_count(ConnHandle h) const {
    return static_cast<std::size_t>(
        std::count_if(failed.begin(), failed.end(), [&](const Failed& f) { return f.conn == h; }));
  }
};

// What the simulated NIC counts as malformed or lost (the fake rig has no NIC: nothing to check).
inline void expect_nic_clean(const FakeRig&) {}
inline void expect_nic_clean(const SimMlx5Rig& rig) {
  const SimMlx5Device::Stats& s = rig.sim.stats();
  EXPECT_EQ(s.nic_errors(), 0u) << "wqe " << s.bad_wqe << " qpn " << s.bad_qpn << " doorbell "
                                << s.bad_doorbell << " sq overwrite " << s.sq_overwrite << " rq overwrite "
                                << s.rq_overwrite << " recv " << s.bad_recv << " ci " << s.bad_ci
                                << " refused " << s.model_refused << " unencodable " << s.unencodable;
  EXPECT_EQ(s.cq_overruns, 0u);
}

// One core: its resources over the rig's device, its loop running `Service`, and the connections a test
// opens on it. A turn is one call of the production run_st, stopped by the CQ's model after two iterations:
// poll a burst, check the control ring, run the timers (drain retries, NOOPs), flush; then poll and check
// once more. (run_st reads its stop flag at a ring check, before its timers: preset, it skips them.)
template <typename Rig, typename Service>
class Core {
 public:
  using Loop = CoreLoop<typename Rig::Backend, Service>;

  Core(Rig& rig, Service& svc, const CoreConfig& cfg = test_core_config()) : rig_(rig), dev_(rig.model()) {
    std::string err;
    res = CoreResources::create(0, cfg, rig.device(), &err);
    if (res == nullptr) {
      ADD_FAILURE() << err;
      return;
    }
    loop = std::make_unique<Loop>(*res, svc);
  }
  ~Core() { conns.clear(); }  // before the loop and the resources they live on

  FakeCq& cq() { return rig_.model_cq(res->cq()); }
  const CoreCounters& counters() const { return res->counters; }

  LoopbackConn& open(LoopbackOptions opt = {}) {
    opt.incarnation = ++opened_;
    std::string err;
    auto c = LoopbackConn::open(rig_.device(), dev_, *res, opt, &err);
    EXPECT_NE(c, nullptr) << err;
    conns.push_back(std::move(c));
    return *conns.back();
  }
  // Control drops its connection object (after CLOSED): a later completion naming it would be a use after
  // free under ASan.
  void destroy(LoopbackConn& c) {
    std::erase_if(conns, [&](const std::unique_ptr<LoopbackConn>& p) { return p.get() == &c; });
  }

  // Two iterations, control's replies, and the accounting of every connection against the device's view.
  void turn() {
    res->stop.store(false);
    cq().stop_after_polls(&res->stop, 2);
    loop->run_st();
    rig_.after_turn();
    expect_nic_clean(rig_);
    res->control_mailbox().drain_st(replies);
    if (!audit) return;
    for (auto& c : conns) {
      if (c->cc().state != CoreConnState::kClosed) {
        EXPECT_EQ(fake::audit(c->cc(), c->qp()), "");
      }
    }
  }
  void adopt(LoopbackConn& c) {
    res->control_mailbox().send_st(ToCore::adopt(c.handle()));
    turn();
  }
  // What control does on a teardown: the QP to ERR first (every posted work request will flush), then CLOSE.
  void close(LoopbackConn& c, CloseReason why = CloseReason::kLocal) {
    rig_.device().qp_to_err(c.backend_qp());
    res->control_mailbox().send_st(ToCore::close(c.handle(), why));
    turn();
  }
  // Until nothing moves: the device runs every QP, the core takes its CQEs, every peer polls.
  void settle() {
    for (int i = 0; i < 10000; ++i) {
      std::size_t moved = dev_.run_all() + cq().pending();
      turn();
      for (auto& c : conns) moved += c->peer().poll();
      moved += dev_.run_all();  // what the turn posted (a command's drain marker, say)
      if (moved == 0) return;
    }
    ADD_FAILURE() << "the loop and the device did not settle";
  }
  // Sends `m` from c's peer and settles; the one answer it got (type kNoop if none).
  FakePeer::Received ask(LoopbackConn& c, const protocol::Message& m) {
    EXPECT_TRUE(c.peer().send(m));
    settle();
    EXPECT_EQ(c.peer().inbox.size(), 1u);
    if (c.peer().inbox.empty()) return {};
    FakePeer::Received r = std::move(c.peer().inbox.front());
    c.peer().inbox.pop_front();
    return r;
  }

  std::unique_ptr<CoreResources> res;
  std::unique_ptr<Loop> loop;
  Replies replies;
  std::vector<std::unique_ptr<LoopbackConn>> conns;
  bool audit = true;

 private:
  Rig& rig_;
  FakeDevice& dev_;
  std::uint64_t opened_ = 0;
};

}  // namespace rdmagate::dataplane::fake

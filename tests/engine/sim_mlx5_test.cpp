// The simulated mlx5 NIC's own checks of the window WQEs (sim_mlx5.hpp): a UMR exactly as Mlx5Backend writes
// it becomes the model's bind or invalidation; each corruption a NIC would reject or misread is counted
// (bad_wqe) and never acted on. Without these, a NIC that took any UMR would let a wrong layout pass every
// core-loop test that runs on it.
#include "tests/engine/sim_mlx5.hpp"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rdmagate::dataplane::fake {
namespace {

using B = Mlx5Backend;

// One QP with two windows on the simulated NIC, and memory registered for binding with local write.
struct SimWindowQp {
  SimWindowQp() {
    std::string err;
    cq = sim.create_cq(64, 4, &err);
    EXPECT_NE(cq, nullptr) << err;
    QpCaps caps;
    caps.max_send_wr = 8;
    caps.max_recv_wr = 4;
    caps.windows = 2;
    QpInfo info;
    qp = sim.create_qp(nullptr, *cq, caps, &info, &err);
    EXPECT_NE(qp, nullptr) << err;
    mr = sim.register_memory(mem.data(), mem.size(), IBV_ACCESS_MW_BIND | IBV_ACCESS_LOCAL_WRITE, &err);
    EXPECT_NE(mr, nullptr) << err;
    vmr.lkey = mr->lkey;
    // Connected: the model runs a QP's work only then (a peer QP of its own, which nothing here reaches).
    peer_cq = sim.model().make_cq(8);
    QpCaps pc;
    pc.max_send_wr = 4;
    pc.max_recv_wr = 4;
    peer = sim.model().make_qp(*peer_cq, pc, nullptr);
    peer->set_audited(false);
    sim.model().connect(model(), *peer);
  }
  Mlx5Qp& q() { return static_cast<Mlx5Qp&>(*qp); }
  FakeQp& model() { return SimMlx5Device::model_of(*qp); }
  std::uint8_t* bb(std::uint32_t i) { return q().sq_buf + std::size_t{i & (q().sq_wqe_cnt - 1)} * 64; }
  std::uint64_t addr() { return reinterpret_cast<std::uintptr_t>(mem.data()); }
  // Rings the doorbell and lets the NIC take what it was handed; the model runs it.
  void ring() {
    B::flush_st(q());
    sim.sync();
    sim.model().run(model());
  }

  SimMlx5Device sim;
  std::unique_ptr<BackendCq> cq;
  std::unique_ptr<BackendQp> qp;
  std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(4096);
  std::unique_ptr<BackendMr> mr;
  ibv_mr vmr{};
  std::unique_ptr<FakeCq> peer_cq;
  std::unique_ptr<FakeQp> peer;
};

TEST(SimMlx5Windows, UmrAsTheBackendWritesItBindsAndInvalidates) {
  SimWindowQp t;
  const std::uint32_t key =
      B::stage_bind_window_st(t.q(), 1, 7, WindowBind{t.addr() + 64, 512, &t.vmr, true});
  t.ring();
  EXPECT_EQ(t.sim.stats().nic_errors(), 0u);
  EXPECT_EQ(t.sim.stats().umr_wqes, 1u);
  const FakeQp::Window& w = t.model().windows()[1];
  EXPECT_TRUE(w.valid);
  EXPECT_EQ(w.rkey, key);
  EXPECT_EQ(w.addr, t.addr() + 64);
  EXPECT_EQ(w.len, 512u);
  EXPECT_EQ(w.access, IBV_ACCESS_REMOTE_WRITE);
  EXPECT_FALSE(t.model().windows()[0].valid);

  ASSERT_TRUE(B::stage_invalidate_window_st(t.q(), 1, 9));  // fenced: it follows a UMR
  t.ring();
  EXPECT_EQ(t.sim.stats().nic_errors(), 0u);
  EXPECT_EQ(t.sim.stats().umr_wqes, 2u);
  EXPECT_FALSE(t.model().windows()[1].valid);
}

struct Corruption {
  const char* name;
  std::function<void(SimWindowQp&)> apply;  // on a bind staged at BBs 0-2
};

class SimMlx5BadBind : public ::testing::TestWithParam<Corruption> {};

TEST_P(SimMlx5BadBind, IsCountedAndNotRun) {
  SimWindowQp t;
  ASSERT_NE(B::stage_bind_window_st(t.q(), 0, 7, WindowBind{t.addr(), 256, &t.vmr, false}), 0u);
  GetParam().apply(t);
  t.ring();
  EXPECT_EQ(t.sim.stats().bad_wqe, 1u);
  EXPECT_EQ(t.sim.stats().umr_wqes, 0u);
  EXPECT_FALSE(t.model().windows()[0].valid);
  EXPECT_EQ(t.sim.model().outstanding(t.model()), 0u) << "nothing reached the model";
}

void flip(std::uint8_t* p, std::uint8_t bits) {
  *p ^= bits;
}

INSTANTIATE_TEST_SUITE_P(
    Corruptions, SimMlx5BadBind,
    ::testing::Values(
        Corruption{"KeyNamingNoWindow", [](SimWindowQp& w) { std::memset(w.bb(0) + 12, 0x7f, 3); }},
        Corruption{"NoCheckFree",
                   [](SimWindowQp& w) { flip(w.bb(0) + 16, MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE); }},
        Corruption{"MkeyMask", [](SimWindowQp& w) { flip(w.bb(0) + 31, 1); }},
        Corruption{"KlmOctowords", [](SimWindowQp& w) { flip(w.bb(0) + 21, 2); }},
        Corruption{"AnotherQpsNumber", [](SimWindowQp& w) { flip(w.bb(1) + 6, 1); }},
        Corruption{"RemoteWriteWithoutLocalWrite", [](SimWindowQp& w) { w.bb(1)[2] = 0x20; }},
        Corruption{"MarkedFree", [](SimWindowQp& w) { w.bb(1)[0] = MLX5_WQE_MKEY_CONTEXT_FREE; }},
        Corruption{"LengthDisagreesWithKlm", [](SimWindowQp& w) { flip(w.bb(1) + 31, 1); }},
        Corruption{"StartDisagreesWithKlm", [](SimWindowQp& w) { flip(w.bb(1) + 23, 8); }},
        Corruption{"KlmReservedByte", [](SimWindowQp& w) { w.bb(2)[40] = 1; }},
        Corruption{"DsOfNeitherUmr", [](SimWindowQp& w) { flip(w.bb(0) + 7, 2); }}),
    [](const ::testing::TestParamInfo<Corruption>& i) { return std::string(i.param.name); });

// The WQE after a UMR must carry the small fence, and no other may: the SEND that hands out a key could
// otherwise run before the window holds it.
TEST(SimMlx5Windows, WqeAfterAUmrWithoutTheFenceIsRefused) {
  SimWindowQp t;
  ASSERT_NE(B::stage_bind_window_st(t.q(), 0, 7, WindowBind{t.addr(), 256, &t.vmr, false}), 0u);
  B::stage_send_st(t.q(), 8, Segment{t.addr(), 16, t.mr->lkey}, kSendSignaled);
  ASSERT_EQ(t.bb(3)[11] & MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE, MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
  t.bb(3)[11] &= static_cast<std::uint8_t>(~MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
  t.ring();
  EXPECT_EQ(t.sim.stats().umr_wqes, 1u) << "the bind itself was fine";
  EXPECT_EQ(t.sim.stats().bad_wqe, 1u) << "the SEND behind it lost its fence";
}

TEST(SimMlx5Windows, FenceWhereNoUmrWasIsRefused) {
  SimWindowQp t;
  B::stage_send_st(t.q(), 8, Segment{t.addr(), 16, t.mr->lkey}, kSendSignaled);
  t.bb(0)[11] |= MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE;
  t.ring();
  EXPECT_EQ(t.sim.stats().bad_wqe, 1u);
}

TEST(SimMlx5Windows, InvalidationThatDoesNotFreeIsRefused) {
  SimWindowQp t;
  ASSERT_NE(B::stage_bind_window_st(t.q(), 0, 7, WindowBind{t.addr(), 256, &t.vmr, false}), 0u);
  t.ring();
  ASSERT_TRUE(t.model().windows()[0].valid);
  ASSERT_TRUE(B::stage_invalidate_window_st(t.q(), 0, 9));
  t.bb(4)[0] = 0;  // the invalidation's mkey context (BBs 3-4) without MLX5_WQE_MKEY_CONTEXT_FREE
  t.ring();
  EXPECT_EQ(t.sim.stats().bad_wqe, 1u);
  EXPECT_TRUE(t.model().windows()[0].valid) << "the window is still bound";
}

}  // namespace
}  // namespace rdmagate::dataplane::fake

// Instructions per echoed message of a whole core-loop turn (CoreLoop::run_st: poll, decode, credits, the
// echo service, encode, stage, flush), counted under callgrind by tests/bench/run-backend-cost.sh. Two
// backends under the same loop and the same peer:
//   sim    CoreLoop<SimMlx5Backend, EchoService>: the real Mlx5Backend against the simulated mlx5 NIC
//   fake   CoreLoop<FakeBackend, EchoService>: the verbs-shaped fake backend (staging into vectors)
// Only counted_turn and what it calls are measured, minus the device models (the NIC's catch-up in
// SimMlx5Cq::before_poll_st, FakeDevice::post_st / on_polled_st), which run on the NIC, not on the core.
// Every answer is checked (cookie and bytes), so a count never comes from a loop that did not echo.
//
// Usage: loop_cost_bench sim|fake <rounds> <batch>   (batch: requests the peer sends per round, <= 16)

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/core_loop.hpp"
#include "dataplane/core_resources.hpp"
#include "tests/engine/device_rigs.hpp"
#include "tests/support/test_services.hpp"

using namespace rdmagate;
using namespace rdmagate::dataplane;
using namespace rdmagate::dataplane::fake;

namespace {

constexpr std::uint32_t kPayload = 24;  // + the 40-byte header: a 64-byte message

struct Replies {
  std::uint64_t closed = 0, failed = 0;
  void on_closed_st(ConnHandle) { ++closed; }
  void on_failed_st(ConnHandle, FailureKind, std::uint32_t) { ++failed; }
};

extern "C" __attribute__((noinline)) void counted_turn(void (*run)(void*), void* loop) {
  run(loop);
}

// The loop's doorbells (fake: flushes that posted anything) and whether the device saw nothing malformed.
std::uint64_t doorbells(FakeRig&, LoopbackConn& c) {
  return c.qp().stats().flushes;
}
std::uint64_t doorbells(SimMlx5Rig&, LoopbackConn& c) {
  return static_cast<Mlx5Qp&>(c.backend_qp()).doorbells;
}
bool clean(const FakeRig& r) {
  return r.dev.stats().local_errors == 0;
}
bool clean(const SimMlx5Rig& r) {
  return r.sim.stats().nic_errors() == 0 && r.sim.stats().cq_overruns == 0;
}

template <typename Rig>
int run(std::uint64_t rounds, std::uint32_t batch) {
  Rig rig;
  EchoService svc;
  CoreConfig cfg;
  cfg.memory = HugeBufferKind::kHeap;
  cfg.max_conns = 1;
  cfg.rx_per_conn = 32;
  cfg.tx_per_conn = 48;
  cfg.buf_size = 512;
  cfg.check_every = 1;
  std::string err;
  std::unique_ptr<CoreResources> res = CoreResources::create(0, cfg, rig.device(), &err);
  if (res == nullptr) {
    std::fprintf(stderr, "core: %s\n", err.c_str());
    return 1;
  }
  using Loop = CoreLoop<typename Rig::Backend, EchoService>;
  auto loop = std::make_unique<Loop>(*res, svc);
  LoopbackOptions opt;
  opt.queue_depth = 32;
  opt.peer_tx = 48;
  std::unique_ptr<LoopbackConn> c = LoopbackConn::open(rig.device(), rig.model(), *res, opt, &err);
  if (c == nullptr) {
    std::fprintf(stderr, "connection: %s\n", err.c_str());
    return 1;
  }
  Replies replies;
  const auto turn = [&] {
    res->stop.store(false);
    rig.model_cq(res->cq()).stop_after_polls(&res->stop, 2);
    counted_turn([](void* l) { static_cast<Loop*>(l)->run_st(); }, loop.get());
    res->control_mailbox().drain_st(replies);
    rig.after_turn();
  };
  res->control_mailbox().send_st(ToCore::adopt(c->handle()));
  turn();

  std::vector<std::uint8_t> payload(kPayload);
  std::uint64_t cookie = 0, answered = 0, bad = 0;
  for (std::uint64_t r = 0; r < rounds; ++r) {
    for (std::uint32_t i = 0; i < batch; ++i) {
      protocol::Message m;
      m.type = protocol::MessageType::kInlineRequest;
      m.opcode = 1;
      m.cookie = ++cookie;
      for (std::uint32_t b = 0; b < kPayload; ++b) payload[b] = static_cast<std::uint8_t>(cookie + b);
      m.payload = payload;
      if (!c->peer().send(m)) ++bad;
    }
    // Requests to the core, one turn, answers to the peer (and its credits back), until quiet.
    for (int settle = 0; settle < 8; ++settle) {
      std::size_t moved = rig.model().run_all();
      turn();
      moved += rig.model().run_all() + c->peer().poll();
      if (moved == 0) break;
    }
    while (!c->peer().inbox.empty()) {
      const FakePeer::Received& a = c->peer().inbox.front();
      ++answered;
      if (a.type != protocol::MessageType::kInlineResponse || a.cookie != answered ||
          a.payload.size() != kPayload || a.payload[0] != static_cast<std::uint8_t>(a.cookie)) {
        ++bad;
      }
      c->peer().inbox.pop_front();
    }
  }
  std::printf("%s: %llu answered of %llu, %llu bad, %llu doorbells, clean %d\n", Rig::Backend::kName,
              static_cast<unsigned long long>(answered), static_cast<unsigned long long>(cookie),
              static_cast<unsigned long long>(bad), static_cast<unsigned long long>(doorbells(rig, *c)),
              clean(rig) ? 1 : 0);
  // Control's teardown, so nothing is destroyed with work on it.
  rig.device().qp_to_err(c->backend_qp());
  res->control_mailbox().send_st(ToCore::close(c->handle(), CloseReason::kLocal));
  for (int i = 0; i < 64 && replies.closed == 0; ++i) {
    rig.model().run_all();
    turn();
  }
  return answered == cookie && bad == 0 && clean(rig) && replies.closed == 1 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s sim|fake <rounds> <batch (1..16)>\n", argv[0]);
    return 2;
  }
  const std::string kind = argv[1];
  const std::uint64_t rounds = std::strtoull(argv[2], nullptr, 10);
  const std::uint32_t batch = static_cast<std::uint32_t>(std::strtoul(argv[3], nullptr, 10));
  if (rounds == 0 || batch == 0 || batch > 16) return 2;
  if (kind == "sim") return run<SimMlx5Rig>(rounds, batch);
  if (kind == "fake") return run<FakeRig>(rounds, batch);
  return 2;
}

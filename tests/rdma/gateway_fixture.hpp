#pragma once
// An in-process rdmagate gateway for guest tests: a Store over EAL hugepage memory, its arena registered
// once (IBV_ACCESS_LOCAL_WRITE only), and a passive Engine whose cores run CoreLoop<Backend,
// ObjectService>, listening on RDMAGATE_RXE_ADDR (ephemeral port). Header-only; link rdmagate_engine,
// rdmagate_store, GTest::gtest.
//
// API (namespace rdmagate::testfix):
//
//   int main(int argc, char** argv) { return rdmagate::testfix::gateway_test_main(argc, argv, "my_test"); }
//       rdma_test_main (rdma_test_main.hpp): gtest init, the RDMA probe (exit 77 = skipped when there is
//       none), EAL init once for the process with the lcore layout below, RUN_ALL_TESTS. Use it as the
//       binary's main (EAL is once per process). rdma_device() (rdma_test_support.hpp) is then the device.
//
//   GatewayOptions opts;                 // cores, message size, store config/region, ... (defaults below)
//   std::string err;
//   auto gw = Gateway::start(opts, &err);   // nullptr + err on failure
//   gw->engine(), gw->port(), gw->store(), gw->service(i) (ObjectService counters), gw->stats(i) (latency
//   histograms), gw->arena_mr()
//   gw->poll_st(ms)                      // one turn of the gateway's control loop (drive it with yours)
//   gw->start_background() / stop_background()
//                                        // or hand the control loop to a thread of its own (for a client
//                                        // library with its own control thread); in between, touch the
//                                        // engine from nowhere else
//   gw->shutdown(timeout)                // drain and stop the cores (the destructor does it too)
//   gw->store_empty()                    // nothing published, reserved or pinned (leak check at the end)
//
// Lcore layout (the guest has 2 vCPUs), EAL --lcores=0@0,1@1,2@0,3@0,4@1 (as engine_echo_test):
//   lcore 0 (CPU 0): main thread, control loops
//   kGatewayLcores = {1 (CPU 1), 3 (CPU 0)}: gateway cores 0 and 1
//   kClientLcores  = {2 (CPU 0), 4 (CPU 1)}: free for a client engine in the same process
// Every core uses the yielding idle policy so busy pollers and the control thread share the 2 CPUs.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "control/engine.hpp"
#include "control/rdma_device.hpp"
#include "dataplane/eal_runtime.hpp"
#include "dataplane/huge_buffer.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "services/object/object_service.hpp"
#include "services/storage/memory/store.hpp"
#include "telemetry/stats.hpp"
#include "tests/rdma/rdma_test_main.hpp"

namespace rdmagate::testfix {

inline constexpr std::array<unsigned, 2> kGatewayLcores{1, 3};
inline constexpr std::array<unsigned, 2> kClientLcores{2, 4};
inline constexpr const char* kEalLcores = "0@0,1@1,2@0,3@0,4@1";

// A data-plane core config suitable for the 2-vCPU guest (yielding idle policy).
inline dataplane::CoreConfig guest_core_config(unsigned lcore, std::uint32_t buf_size) {
  dataplane::CoreConfig c;
  c.lcore = lcore;
  c.max_conns = 16;
  c.rx_per_conn = 32;
  c.tx_per_conn = 96;
  c.buf_size = buf_size;
  c.idle = dataplane::IdlePolicy::kYield;
  c.idle_yield_after = 64;
  return c;
}

// rdma_test_main (rdma_test_main.hpp) with the gateway's lcore layout. Returns the process exit code.
inline int gateway_test_main(int argc, char** argv, const char* program) {
  return rdma_test_main(argc, argv, program, kEalLcores);
}

struct GatewayOptions {
  unsigned cores = 1;                // 1 or 2 (kGatewayLcores)
  std::uint32_t max_message = 4096;  // buffer size = offered max message size
  std::uint16_t queue_depth = 32;
  std::uint32_t max_bulk = 16u << 20;        // offered max chunk length (above the store's max value)
  std::uint64_t region_bytes = 48ull << 20;  // hugepage region the store is created over
  store::StoreConfig store{};                // max_value 4 MiB by default; capacity_bytes 0 = the region
  std::string addr = rxe_addr();
  std::string name = "gateway";
  bool latency_stats = true;       // a telemetry::CoreStats per core (gw->stats(i))
  std::uint32_t keepalive_ms = 0;  // 0: none (the engine tests' default)
  std::uint32_t dead_peer_ms = 0;  // 0: never
};

class Gateway {
 public:
  static std::unique_ptr<Gateway> start(const GatewayOptions& o, std::string* error) {
    std::unique_ptr<Gateway> g(new Gateway());
    g->opts_ = o;
    if (o.cores == 0 || o.cores > kGatewayLcores.size()) {
      *error = "gateway: cores must be 1.." + std::to_string(kGatewayLcores.size());
      return nullptr;
    }
    g->region_ = dataplane::HugeBuffer::allocate(o.region_bytes, -1, 4096, error);
    if (!g->region_) return nullptr;
    g->store_ = store::Store::create(
        o.store, std::span<std::byte>(reinterpret_cast<std::byte*>(g->region_.data()), g->region_.size()),
        error);
    if (!g->store_) return nullptr;

    control::EngineConfig e;
    e.name = o.name;
    e.device = rdma_device();
    e.passive = true;
    for (unsigned i = 0; i < o.cores; ++i) {
      e.cores.push_back(guest_core_config(kGatewayLcores[i], o.max_message));
      e.cores.back().keepalive_us = std::uint64_t{o.keepalive_ms} * 1000;
      e.cores.back().dead_peer_us = std::uint64_t{o.dead_peer_ms} * 1000;
    }
    e.local.params = protocol::ConnParams{o.queue_depth, o.max_message, protocol::kMaxFragments, o.max_bulk};
    e.local.min_queue_depth = protocol::kMinCreditQueueDepth;
    e.local.timers = protocol::Timers{o.keepalive_ms, o.dead_peer_ms};
    e.handshake_timeout = std::chrono::seconds(10);
    g->engine_ = control::Engine::create(e, error);
    if (!g->engine_) return nullptr;
    // The gateway's own memory: local write only (RDMA READ lands in it); no remote key is ever handed out.
    g->mr_ = g->engine_->register_memory(g->store_->arena_base(), g->store_->arena_bytes(),
                                         IBV_ACCESS_LOCAL_WRITE, error);
    if (g->mr_ == nullptr) return nullptr;
    std::vector<std::unique_ptr<control::CoreRunner>> runners;
    for (unsigned i = 0; i < o.cores; ++i) {
      dataplane::ObjectServiceConfig sc;
      sc.storage = &g->store_->core(i);
      sc.arena_lkey = g->mr_->lkey;
      if (o.latency_stats) {
        g->stats_.push_back(std::make_unique<telemetry::CoreStats>());
        sc.stats = g->stats_.back().get();
      }
      g->services_.push_back(std::make_unique<dataplane::ObjectService>(sc));
      runners.push_back(
          dataplane::make_core_runner(g->engine_->backend_kind(), g->engine_->core(i), *g->services_.back()));
    }
    if (!g->engine_->launch_cores(std::move(runners), error)) return nullptr;
    g->port_ = g->engine_->listen(o.addr, 0, error);
    if (g->port_ == 0) return nullptr;
    return g;
  }

  ~Gateway() {
    stop_background();
    shutdown(std::chrono::seconds(10));
    engine_.reset();  // cores stopped and MR deregistered before the services, store and region go
  }
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  control::Engine& engine() noexcept { return *engine_; }
  store::Store& store() noexcept { return *store_; }
  std::uint16_t port() const noexcept { return port_; }
  const std::string& addr() const noexcept { return opts_.addr; }
  const ibv_mr* arena_mr() const noexcept { return mr_; }
  dataplane::ObjectService& service(std::size_t core) noexcept { return *services_[core]; }
  // Request latency histograms of a core (latency_stats); read them after the cores stopped.
  const telemetry::CoreStats& stats(std::size_t core) const noexcept { return *stats_[core]; }
  std::size_t core_count() const noexcept { return services_.size(); }
  const GatewayOptions& options() const noexcept { return opts_; }

  void poll_st(int timeout_ms) { engine_->poll_st(timeout_ms); }

  // The control loop on a thread of its own until stop_background().
  void start_background() {
    if (bg_.joinable()) return;
    bg_stop_.store(false);
    bg_ = std::thread([this] {
      while (!bg_stop_.load(std::memory_order_acquire)) engine_->poll_st(1);
    });
  }
  void stop_background() {
    if (!bg_.joinable()) return;
    bg_stop_.store(true, std::memory_order_release);
    bg_.join();
  }

  // Stops accepting, closes every connection, waits for the cores' CLOSED (bounded), stops the cores.
  // True if everything drained in time. Idempotent.
  bool shutdown(std::chrono::milliseconds timeout) {
    if (stopped_ || !engine_) return true;
    stop_background();
    stopped_ = true;
    engine_->begin_shutdown_st();
    const bool drained = engine_->poll_until_st([&] { return engine_->drained_st(); }, timeout);
    engine_->stop_cores_st();
    return drained;
  }

  // Nothing published, reserved or pinned: used bytes back to 0 (after a test deleted what it stored and
  // its connections closed).
  bool store_empty() const {
    const store::StoreStats s = store_->stats();
    return s.objects == 0 && s.value_bytes == 0 && s.used_bytes == 0;
  }

 private:
  Gateway() = default;

  GatewayOptions opts_;
  dataplane::HugeBuffer region_;
  std::unique_ptr<store::Store> store_;
  std::vector<std::unique_ptr<telemetry::CoreStats>> stats_;
  std::vector<std::unique_ptr<dataplane::ObjectService>> services_;
  std::unique_ptr<control::Engine> engine_;
  ibv_mr* mr_ = nullptr;
  std::uint16_t port_ = 0;
  bool stopped_ = false;
  std::thread bg_;
  std::atomic<bool> bg_stop_{false};
};

}  // namespace rdmagate::testfix

// Per-request client keys on real RDMA (issue 14; rxe in the guest): the client library against a hostile
// gateway, an in-process passive engine whose service answers PUT and GET by chunk correctly and then, once
// the client has its answer, RDMA-READs or WRITEs the finished request's fragment again with the key it was
// given.
//  - With memory windows (the default; rxe has type-2 windows): every chunk names a new key, the request's
//    own transfer works, and the replay fails (the gateway's READ or WRITE completes in error); the client's
//    buffer keeps what it had.
//  - The control, memory_windows false: the same replay succeeds (a READ gets the value again, a WRITE
//    overwrites the caller's buffer after its callback ran), and the key is the same for every request. So
//    the first test would fail if the windows did not scope the keys.
//  - The client's core region (its message buffers; an in-process active engine configured as the client
//    library configures its own): a READ with its key fails; the control, an engine that exposes its core
//    region, is read.
//
// Lcore layout (2 vCPUs): EAL --lcores=0@0,1@1,2@0; the gateway's core runs on lcore 1 and yields when idle;
// a background thread drives its control loop; the client runs kThread (its own progress and control
// threads); the active engine of the core-region test runs its core on lcore 2.
// Without RDMA the binary prints one line and exits 77.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.hpp"
#include "control/engine.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "protocol/object_wire.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tests/rdma/small_engine.hpp"
#include "tests/support/test_services.hpp"

namespace {

using namespace rdmagate;
using control::Engine;
using control::EngineConfig;
using dataplane::BulkOp;
using dataplane::ChunkRequest;
using dataplane::CoreConn;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string g_device;
constexpr unsigned kGatewayLcore = 1;
constexpr unsigned kEngineClientLcore = 2;
// Small inline sizes (1 KiB messages): 64 KiB values always travel by chunk.
constexpr std::uint32_t kMessage = testfix::kSmallEngineMessage;
constexpr std::uint32_t kValue = 64 * 1024;
constexpr std::uint8_t kReplayByte = 0xee;

// What a replay came to.
enum class Replay : int { kNone = 0, kRunning = 1, kSucceeded = 2, kFailed = 3 };

// The hostile gateway's one service: serves PUT (read chunk) and GET (write chunk) of whatever arrives, as
// the object protocol says, remembering the last chunk request; on command it replays that request's
// transfer with the key it carried. Counters are atomics: the test thread reads them.
struct HostileGateway {
  struct ConnState {
    std::uint32_t unused = 0;
  };

  // Set by the test thread: 1 replays the last read chunk as a READ, 2 the last write chunk as a WRITE.
  std::atomic<int> command{0};
  std::atomic<int> replay{static_cast<int>(Replay::kNone)};
  std::atomic<std::uint32_t> last_read_rkey{0}, last_write_rkey{0};
  std::atomic<std::uint64_t> served{0};
  std::atomic<std::uint64_t> adopted{0};  // connections the gateway's core took over
  std::atomic<std::uint64_t> send_failures{0};
  ChunkRequest last_read{}, last_write{};  // the core's only
  CoreConn* conn = nullptr;                // the connection the last request came on (the core's only)
  bool replaying = false;                  // the core's only
  std::vector<std::uint8_t> replay_src = std::vector<std::uint8_t>(kValue, kReplayByte);
  std::vector<std::uint8_t> last_value = std::vector<std::uint8_t>(kValue);
  std::atomic<std::uint32_t> last_value_len{0};

  template <typename Api>
  void on_adopt_st(Api&, CoreConn& c) noexcept {
    c.svc.reset<ConnState>();
    conn = &c;
    adopted.fetch_add(1);
  }
  template <typename Api>
  void on_request_st(Api& api, CoreConn& c, const protocol::Message& m) noexcept {
    // No inline requests in this test: answer bad_request so a mistake shows.
    answer_st(api, c, m.opcode, m.cookie, protocol::ObjectStatus::kBadRequest, 0);
  }
  template <typename Api>
  void on_response_st(Api&, CoreConn&, const protocol::Message&) noexcept {}
  template <typename Api>
  void on_close_st(Api&, CoreConn& c) noexcept {
    if (conn == &c) conn = nullptr;
  }

  template <typename Api>
  void on_chunk_request_st(Api& api, CoreConn& c, const ChunkRequest& r) noexcept {
    conn = &c;
    if (r.type == protocol::MessageType::kReadChunkRequest) {
      last_read = r;
      last_read_rkey.store(r.chunk.fragments[0].rkey);
      if (!api.bulk_read_st(c, r))
        answer_st(api, c, r.opcode, r.cookie, protocol::ObjectStatus::kNoResources, 0);
      return;
    }
    last_write = r;
    last_write_rkey.store(r.chunk.fragments[0].rkey);
    // The value of the last PUT, written back.
    const std::uint32_t len =
        std::min(last_value_len.load(), static_cast<std::uint32_t>(r.chunk.total_length()));
    std::memcpy(c.bulk, last_value.data(), len);
    if (len == 0 || !api.bulk_write_st(c, r, len)) {
      answer_st(api, c, r.opcode, r.cookie, protocol::ObjectStatus::kNotFound, 0);
      return;
    }
    answer_st(api, c, r.opcode, r.cookie, protocol::ObjectStatus::kOk, len);  // behind the WRITEs
  }

  template <typename Api>
  void on_bulk_read_done_st(Api& api, CoreConn& c, const BulkOp& op) noexcept {
    if (replaying) {
      replaying = false;
      replay.store(static_cast<int>(Replay::kSucceeded));
      return;
    }
    std::memcpy(last_value.data(), op.local, op.bytes);
    last_value_len.store(op.bytes);
    answer_st(api, c, op.req.opcode, op.req.cookie, protocol::ObjectStatus::kOk, op.bytes);
  }
  template <typename Api>
  void on_bulk_read_failed_st(Api& api, CoreConn& c, const BulkOp& op) noexcept {
    if (replaying) {
      replaying = false;
      replay.store(static_cast<int>(Replay::kFailed));
      return;
    }
    answer_st(api, c, op.req.opcode, op.req.cookie, protocol::ObjectStatus::kBulkFailed, 0);
  }
  template <typename Api>
  void on_bulk_write_done_st(Api&, CoreConn&, const BulkOp& op) noexcept {
    if (!replaying) return;  // a GET's WRITEs: its answer went out behind them
    replaying = false;
    replay.store(static_cast<int>(op.failed ? Replay::kFailed : Replay::kSucceeded));
  }

  // Once per loop turn: a replay the test asked for.
  template <typename Api>
  bool on_poll_st(Api& api) noexcept {
    const int cmd = command.load(std::memory_order_acquire);
    if (cmd == 0) return false;
    command.store(0, std::memory_order_relaxed);
    if (conn == nullptr || conn->state != dataplane::CoreConnState::kOwned) {
      replay.store(static_cast<int>(Replay::kFailed));  // never reached in these tests: the checks say so
      return false;
    }
    replaying = true;
    replay.store(static_cast<int>(Replay::kRunning));
    bool started = false;
    if (cmd == 1) {
      started = api.bulk_read_st(*conn, last_read);
    } else {
      std::memcpy(conn->bulk, replay_src.data(), kValue);
      started =
          api.bulk_write_st(*conn, last_write, static_cast<std::uint32_t>(last_write.chunk.total_length()));
    }
    if (!started) {
      replaying = false;
      replay.store(static_cast<int>(Replay::kNone));
    }
    return started;
  }

  template <typename Api>
  void answer_st(Api& api, CoreConn& c, std::uint16_t opcode, std::uint64_t cookie, protocol::ObjectStatus st,
                 std::uint32_t bytes) noexcept {
    served.fetch_add(1);
    if (!api.send_st(c, protocol::MessageType::kCompletion, opcode, cookie, {},
                     static_cast<std::uint32_t>(st), bytes)) {
      send_failures.fetch_add(1);
    }
  }
};

EngineConfig engine_config(const char* name, bool passive, unsigned lcore) {
  return testfix::small_engine_config(name, g_device, passive, lcore);
}

class StaleKey : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineConfig e = engine_config("hostile-gateway", true, kGatewayLcore);
    e.cores[0].bulk_bytes_per_conn = 1u << 20;
    std::string err;
    gw_ = Engine::create(e, &err);
    ASSERT_TRUE(gw_) << err;
    std::vector<std::unique_ptr<control::CoreRunner>> runners;
    runners.push_back(dataplane::make_core_runner(gw_->backend_kind(), gw_->core(0), svc_));
    ASSERT_TRUE(gw_->launch_cores(std::move(runners), &err)) << err;
    port_ = gw_->listen(testfix::rxe_addr(), 0, &err);
    ASSERT_NE(port_, 0) << err;
    bg_ = std::thread([this] {
      while (!stop_.load(std::memory_order_acquire)) gw_->poll_st(1);
    });
  }
  void TearDown() override {
    if (cl_) {
      const client::ClientStats s = cl_->stats();
      EXPECT_EQ(s.submitted, s.completed) << "requests accepted but never completed";
      cl_.reset();
    }
    if (bg_.joinable()) {
      stop_.store(true, std::memory_order_release);
      bg_.join();
    }
    if (gw_) {
      gw_->begin_shutdown_st();
      const auto end = Clock::now() + 20s;
      while (!gw_->drained_st() && Clock::now() < end) gw_->poll_st(1);
      gw_->stop_cores_st();
    }
  }

  void start_client(bool windows) {
    client::ClientConfig c;
    c.progress = client::Progress::kThread;
    c.gateways.push_back(client::Endpoint{testfix::rxe_addr(), port_});
    c.device = g_device;
    c.max_message = kMessage;
    c.pool_bytes = 4u << 20;
    c.request_timeout = 20s;
    c.memory_windows = windows;
    std::string err;
    cl_ = client::Client::create(c, &err);
    ASSERT_TRUE(cl_) << err;
    ASSERT_TRUE(cl_->wait_connected(30s)) << "the client's connection did not come up";
    ASSERT_EQ(cl_->stats().memory_windows, windows)
        << (windows ? "this device has no type-2 memory windows: per-request keys cannot be proven here"
                    : "");
  }

  // Has the gateway replay the last read chunk (cmd 1) or write chunk (cmd 2); returns what it came to. The
  // command's release publishes a last_read the test wrote to the core.
  Replay replay(int cmd) {
    svc_.replay.store(static_cast<int>(Replay::kNone));
    svc_.command.store(cmd, std::memory_order_release);
    const auto end = Clock::now() + 20s;
    for (;;) {
      const auto r = static_cast<Replay>(svc_.replay.load());
      if (r == Replay::kSucceeded || r == Replay::kFailed) return r;
      if (Clock::now() > end) return Replay::kNone;
      std::this_thread::sleep_for(1ms);
    }
  }

  std::unique_ptr<Engine> gw_;
  HostileGateway svc_;
  std::uint16_t port_ = 0;
  std::thread bg_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<client::Client> cl_;
};

std::vector<std::uint8_t> value_of(std::uint8_t seed) {
  std::vector<std::uint8_t> v(kValue);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(seed + i * 13 + (i >> 9));
  return v;
}

// With windows: each request's key works for its own transfer and is dead once the client has its answer.
TEST_F(StaleKey, WindowKeyDiesWithItsRequest) {
  ASSERT_NO_FATAL_FAILURE(start_client(true));
  const std::vector<std::uint8_t> v = value_of(1);
  ASSERT_EQ(cl_->put("k", v.data(), v.size()).status, client::Status::kOk);
  const std::uint32_t put_key = svc_.last_read_rkey.load();
  ASSERT_EQ(svc_.last_value_len.load(), kValue);
  EXPECT_EQ(std::memcmp(svc_.last_value.data(), v.data(), kValue), 0) << "the PUT's own READ got the value";

  // The same buffer again: a new key (the window was bound anew).
  ASSERT_EQ(cl_->put("k", v.data(), v.size()).status, client::Status::kOk);
  EXPECT_NE(svc_.last_read_rkey.load(), put_key) << "every request gets a key of its own";

  EXPECT_EQ(replay(1), Replay::kFailed) << "an RDMA READ with a finished PUT's key must fail";

  // The gateway's QP went to error with that READ: the client reconnects by itself.
  ASSERT_TRUE(cl_->wait_connected(30s));
  std::vector<std::uint8_t> got(kValue, 0);
  const client::Result r = cl_->get("k", got.data(), got.size());
  ASSERT_EQ(r.status, client::Status::kOk);
  ASSERT_EQ(r.size, kValue);
  EXPECT_EQ(got, v) << "the GET's own WRITEs landed";

  EXPECT_EQ(replay(2), Replay::kFailed) << "an RDMA WRITE with a finished GET's key must fail";
  EXPECT_EQ(got, v) << "the caller's buffer was written after its callback";

  const client::ClientStats s = cl_->stats();
  EXPECT_EQ(s.window_requests, 3u);
  EXPECT_EQ(s.unscoped_requests, 0u);
  std::printf(
      "stale_key: windows: PUT keys %#x then %#x, both replays refused; %llu requests through windows\n",
      put_key, svc_.last_read_rkey.load(), static_cast<unsigned long long>(s.window_requests));
}

// The control: without windows the finished request's key still reads and writes the caller's memory.
TEST_F(StaleKey, RegistrationKeyOutlivesItsRequest) {
  ASSERT_NO_FATAL_FAILURE(start_client(false));
  const std::vector<std::uint8_t> v = value_of(2);
  ASSERT_EQ(cl_->put("k", v.data(), v.size()).status, client::Status::kOk);
  const std::uint32_t put_key = svc_.last_read_rkey.load();
  ASSERT_EQ(cl_->put("k", v.data(), v.size()).status, client::Status::kOk);
  EXPECT_EQ(svc_.last_read_rkey.load(), put_key) << "one registration, one key";
  EXPECT_EQ(replay(1), Replay::kSucceeded);

  std::vector<std::uint8_t> got(kValue, 0);
  ASSERT_EQ(cl_->get("k", got.data(), got.size()).status, client::Status::kOk);
  EXPECT_EQ(got, v);
  EXPECT_EQ(replay(2), Replay::kSucceeded);
  EXPECT_EQ(got, std::vector<std::uint8_t>(kValue, kReplayByte)) << "the gateway wrote after the callback";
  EXPECT_EQ(cl_->stats().window_requests, 0u);
  EXPECT_EQ(cl_->stats().unscoped_requests, 3u);
}

// The client's own core region (message buffers) is registered local-only and its key never sent: a READ with
// it fails even when the gateway learns it. The control: an engine that exposes its core region is read.
TEST_F(StaleKey, ClientCoreRegionKeyGrantsNothing) {
  for (const bool expose : {false, true}) {
    SCOPED_TRACE(expose ? "core region exposed (the control)" : "core region local-only (the client's)");
    EngineConfig e = engine_config("engine-client", false, kEngineClientLcore);
    e.expose_core_region = expose;  // the client library says no
    std::string err;
    std::unique_ptr<Engine> cl = Engine::create(e, &err);
    ASSERT_TRUE(cl) << err;
    dataplane::EchoService idle;
    std::vector<std::unique_ptr<control::CoreRunner>> runners;
    runners.push_back(dataplane::make_core_runner(cl->backend_kind(), cl->core(0), idle));
    ASSERT_TRUE(cl->launch_cores(std::move(runners), &err)) << err;
    const std::uint64_t adopted_before = svc_.adopted.load();
    ASSERT_NE(cl->connect(testfix::rxe_addr(), port_, &err, /*reconnect=*/false), 0u) << err;
    const auto end = Clock::now() + 20s;
    while ((cl->owned_count() == 0 || svc_.adopted.load() == adopted_before) && Clock::now() < end) {
      cl->poll_st(1);
    }
    ASSERT_EQ(cl->owned_count(), 1u);

    ChunkRequest r;
    r.type = protocol::MessageType::kReadChunkRequest;
    r.chunk.count = 1;
    r.chunk.fragments[0] = protocol::Fragment{reinterpret_cast<std::uintptr_t>(cl->core(0).tx_buf(0, 0)), 64,
                                              cl->core(0).rkey()};
    svc_.last_read = r;
    EXPECT_EQ(replay(1), expose ? Replay::kSucceeded : Replay::kFailed);

    cl->begin_shutdown_st();
    const auto drain_end = Clock::now() + 20s;
    while (!cl->drained_st() && Clock::now() < drain_end) cl->poll_st(1);
    cl->stop_cores_st();
  }
}

}  // namespace

int main(int argc, char** argv) {
  return rdmagate::testfix::rdma_test_main(argc, argv, "stale_key_test", "0@0,1@1,2@0",
                                           [](const rdmagate::control::RdmaProbe&) {
                                             g_device = rdmagate::testfix::rdma_device();
                                             return 0;
                                           });
}

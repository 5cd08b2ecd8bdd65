// The client library end to end on real RDMA (rxe in the guest): the in-process gateway of
// tests/rdma/gateway_fixture.hpp (passive engine, ObjectService over the store, its control loop on a
// background thread) and a Client (its own EAL cores on kClientLcores and its own control thread).
//
// Every wait has a deadline; every test checks that the client completed exactly what it accepted.
#include <execinfo.h>
#include <gtest/gtest.h>

#include <csignal>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.hpp"
#include "tests/rdma/gateway_fixture.hpp"

namespace {

using namespace rdmagate;
using client::Client;
using client::ClientConfig;
using client::Result;
using client::Status;
using Clock = std::chrono::steady_clock;

// Byte j of a value written under `seed`: every byte depends on both, so a mix of two writes never verifies.
std::uint8_t pattern(std::uint64_t seed, std::size_t j) {
  const std::uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (j * 0xff51afd7ed558ccdull);
  return static_cast<std::uint8_t>(x >> 29 ^ x >> 7 ^ j);
}
void fill(void* p, std::size_t n, std::uint64_t seed) {
  auto* b = static_cast<std::uint8_t*>(p);
  for (std::size_t j = 0; j < n; ++j) b[j] = pattern(seed, j);
}
// Index of the first byte that differs from the pattern, or n.
std::size_t first_mismatch(const void* p, std::size_t n, std::uint64_t seed) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  for (std::size_t j = 0; j < n; ++j) {
    if (b[j] != pattern(seed, j)) return j;
  }
  return n;
}

// Whole-value torn-read pattern: 64-bit words, word 0 = the seed, word i = mix(seed, i).
std::uint64_t word(std::uint64_t seed, std::size_t i) {
  return i == 0 ? seed : (seed ^ (i * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull + i;
}

class ClientTest : public ::testing::Test {
 protected:
  void start_gateway(unsigned cores = 1) {
    testfix::GatewayOptions o;
    o.cores = cores;
    o.region_bytes = 64ull << 20;
    std::string err;
    gw_ = testfix::Gateway::start(o, &err);
    ASSERT_TRUE(gw_) << err;
    gw_->start_background();
  }

  ClientConfig client_config(unsigned cores) {
    ClientConfig c;
    c.gateways.push_back(client::Endpoint{gw_->addr(), gw_->port()});
    c.device = testfix::rdma_device();
    c.progress = client::Progress::kEalLcores;  // the fixture's EAL; the no-EAL modes: client_progress_test
    c.cores = cores;
    for (unsigned i = 0; i < cores; ++i) c.lcores.push_back(testfix::kClientLcores[i]);
    c.yield_when_idle = true;  // 2 vCPUs for 4 pollers and 2 control threads
    c.pool_bytes = 24u << 20;
    c.request_timeout = std::chrono::seconds(20);
    c.connect_timeout = std::chrono::seconds(10);
    return c;
  }

  void start_client(const ClientConfig& c) {
    std::string err;
    cl_ = Client::create(c, &err);
    ASSERT_TRUE(cl_) << err;
    ASSERT_TRUE(cl_->wait_connected(std::chrono::seconds(20))) << "client connections did not come up";
  }

  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start_gateway()); }

  void TearDown() override {
    if (cl_) {
      const client::ClientStats s = cl_->stats();
      EXPECT_EQ(s.submitted, s.completed) << "requests accepted but never completed";
      EXPECT_EQ(s.protocol_errors, 0u);
      EXPECT_EQ(s.stale_answers, 0u);
      cl_.reset();
    }
    gw_.reset();
  }

  std::unique_ptr<testfix::Gateway> gw_;
  std::unique_ptr<Client> cl_;
};

// Sync round trips at every interesting size, from pool buffers and plain heap buffers, every byte checked.
TEST_F(ClientTest, SyncRoundTripsPoolAndHeapEveryByte) {
  ASSERT_NO_FATAL_FAILURE(start_client(client_config(1)));
  const std::size_t key_len = std::strlen("rt-pool-") + 10;  // "rt-pool-%010zu" / "rt-heap-%010zu"
  const std::size_t put_max = cl_->max_inline_put(key_len);
  const std::size_t get_max = cl_->max_inline_get();
  ASSERT_GT(put_max, 0u);
  ASSERT_GE(get_max, put_max);
  const std::vector<std::size_t> sizes = {0,           1,           put_max,   put_max + 1,
                                          get_max,     get_max + 1, 64u << 10, 1u << 20,
                                          4u << 20};
  std::size_t heap_chunked = 0;  // heap buffers that needed a registration
  for (const bool pool : {true, false}) {
    for (const std::size_t n : sizes) {
      char keybuf[64];
      std::snprintf(keybuf, sizeof(keybuf), "rt-%s-%010zu", pool ? "pool" : "heap", n);
      const std::string key = keybuf;
      ASSERT_EQ(key.size(), key_len);
      std::vector<std::uint8_t> heap_val, heap_dst;
      std::span<std::byte> pool_val, pool_dst;
      void* val = nullptr;
      void* dst = nullptr;
      if (pool) {
        pool_val = cl_->alloc_buffer(std::max<std::size_t>(n, 1));
        pool_dst = cl_->alloc_buffer(std::max<std::size_t>(n, 1));
        ASSERT_FALSE(pool_val.empty());
        ASSERT_FALSE(pool_dst.empty());
        val = pool_val.data();
        dst = pool_dst.data();
      } else {
        heap_val.resize(std::max<std::size_t>(n, 1));
        heap_dst.resize(std::max<std::size_t>(n, 1));
        val = heap_val.data();
        dst = heap_dst.data();
        if (n > put_max) ++heap_chunked;
        if (n > get_max) ++heap_chunked;
      }
      fill(val, n, n * 7 + (pool ? 1 : 2));
      std::memset(dst, 0xee, std::max<std::size_t>(n, 1));
      const Result p = cl_->put(key, val, n);
      ASSERT_EQ(p.status, Status::kOk) << key << ": " << client::status_name(p.status) << " wire " << p.wire_status;
      EXPECT_EQ(p.size, n);
      // The same value again from the same buffer: a cache hit for heap buffers.
      ASSERT_EQ(cl_->put(key, val, n).status, Status::kOk);
      const Result g = cl_->get(key, dst, n);
      ASSERT_EQ(g.status, Status::kOk) << key << ": " << client::status_name(g.status);
      ASSERT_EQ(g.size, n);
      EXPECT_EQ(first_mismatch(dst, n, n * 7 + (pool ? 1 : 2)), n) << key;
      // A larger buffer gets the value and its size, nothing more. (Released at the end: its registration's
      // pages may cover the destination's, and release_buffer drops every registration covering it.)
      std::vector<std::uint8_t> big;
      if (n <= (1u << 20)) {
        big.assign(n + 4096, 0x5a);
        const Result g2 = cl_->get(key, big.data(), big.size());
        ASSERT_EQ(g2.status, Status::kOk) << key;
        ASSERT_EQ(g2.size, n);
        EXPECT_EQ(first_mismatch(big.data(), n, n * 7 + (pool ? 1 : 2)), n);
        EXPECT_EQ(big[n], 0x5a);
      }
      // The same destination again (a cache hit for heap buffers); the value is gone.
      EXPECT_EQ(cl_->del(key).status, Status::kOk);
      EXPECT_EQ(cl_->get(key, dst, n).status, Status::kNotFound);
      if (!big.empty()) cl_->release_buffer(big.data());
      if (pool) {
        cl_->free_buffer(pool_val);
        cl_->free_buffer(pool_dst);
      } else {
        cl_->release_buffer(heap_val.data());
        cl_->release_buffer(heap_dst.data());
      }
    }
  }
  const client::ClientStats s = cl_->stats();
  std::printf("sync: puts inline %llu chunked %llu, gets inline %llu chunked %llu, registrations %llu, hits %llu\n",
              static_cast<unsigned long long>(s.inline_puts), static_cast<unsigned long long>(s.chunked_puts),
              static_cast<unsigned long long>(s.inline_gets), static_cast<unsigned long long>(s.chunked_gets),
              static_cast<unsigned long long>(s.registrations),
              static_cast<unsigned long long>(s.registration_cache_hits));
  EXPECT_GT(s.inline_puts, 0u);
  EXPECT_GT(s.chunked_puts, 0u);
  EXPECT_GT(s.inline_gets, 0u);
  EXPECT_GT(s.chunked_gets, 0u);
  // Heap: one registration per chunked buffer (value, destination), the big buffers on top (sizes above the
  // inline GET maximum with n <= 1 MiB, all chunked). The second PUT of each chunked value is a hit.
  std::size_t big_regs = 0;
  for (const bool pool : {true, false}) {
    (void)pool;
    for (const std::size_t n : sizes) big_regs += n <= (1u << 20) && n + 4096 > get_max ? 1 : 0;
  }
  // A registration may happen to cover a later buffer (page granularity), so these are bounds. Every second
  // use of a heap buffer (the PUT again, the GET after the delete) must hit.
  EXPECT_GE(s.registrations, heap_chunked);
  EXPECT_LE(s.registrations, heap_chunked + big_regs);
  std::size_t second_uses = 0;
  for (const std::size_t n : sizes) second_uses += (n > put_max ? 1 : 0) + (n > get_max ? 1 : 0);
  EXPECT_GE(s.registration_cache_hits, second_uses);
  EXPECT_TRUE(gw_->store_empty());
}

struct AsyncTracker {
  std::vector<std::atomic<std::uint32_t>> calls;
  std::vector<std::atomic<std::uint32_t>> status;
  std::atomic<std::uint64_t> done{0};
  std::array<std::atomic<std::uint32_t>, 2> open_pairs{};  // per submitting thread: PUT+GET pairs not done
  explicit AsyncTracker(std::size_t n) : calls(n), status(n) {}
};
struct AsyncArg {
  AsyncTracker* t = nullptr;
  std::size_t i = 0;
  Client* cl = nullptr;
  std::string key;
  std::uint8_t buf[64] = {};
  bool chain = false;  // on completion, issue a GET from the callback (core context: no ring)
  AsyncArg* next = nullptr;
  std::size_t thread = 0;
};

void async_done(void* a, const Result& r) {
  auto* arg = static_cast<AsyncArg*>(a);
  arg->t->calls[arg->i].fetch_add(1, std::memory_order_relaxed);
  arg->t->status[arg->i].store(static_cast<std::uint32_t>(r.status), std::memory_order_relaxed);
  bool pair_done = !arg->chain;
  if (arg->chain && r.status == Status::kOk && arg->next != nullptr) {
    AsyncArg* n = arg->next;
    const Status st = arg->cl->get_async(n->key, n->buf, sizeof(n->buf), async_done, n);
    if (st != Status::kOk) {
      n->t->calls[n->i].fetch_add(1, std::memory_order_relaxed);
      n->t->status[n->i].store(static_cast<std::uint32_t>(st), std::memory_order_relaxed);
      n->t->done.fetch_add(1, std::memory_order_release);
      pair_done = true;
    }
  } else if (arg->chain) {
    pair_done = true;
  }
  if (pair_done) arg->t->open_pairs[arg->thread].fetch_sub(1, std::memory_order_relaxed);
  arg->t->done.fetch_add(1, std::memory_order_release);
}

// Many requests in flight over 2 cores from 2 threads; PUT callbacks chain a GET from the core. Every
// callback runs exactly once, and every GET returns what its PUT stored.
TEST_F(ClientTest, AsyncManyInFlightTwoCoresEveryCallbackOnce) {
  ASSERT_NO_FATAL_FAILURE(start_client(client_config(2)));
  constexpr std::size_t kPerThread = 3000;
  constexpr std::size_t kThreads = 2;
  const std::size_t total = kPerThread * kThreads;
  AsyncTracker t(2 * total);  // [0, total): PUTs, [total, 2 total): their chained GETs
  std::vector<AsyncArg> args(2 * total);
  for (std::size_t i = 0; i < total; ++i) {
    AsyncArg& p = args[i];
    AsyncArg& g = args[total + i];
    p.t = g.t = &t;
    p.i = i;
    g.i = total + i;
    p.cl = g.cl = cl_.get();
    p.key = g.key = "async-" + std::to_string(i);
    fill(p.buf, sizeof(p.buf), i);
    p.chain = true;
    p.next = &g;
    p.thread = g.thread = i / kPerThread;
  }
  // Each pair holds one descriptor at a time (the PUT's goes back before its callback chains the GET): a
  // window of 400 pairs per thread stays inside the 1024-descriptor pool, so the chained GETs (which a
  // callback cannot retry) never meet kBusy.
  constexpr std::uint32_t kWindow = 400;
  std::atomic<std::uint64_t> busy{0};
  std::vector<std::thread> th;
  for (std::size_t w = 0; w < kThreads; ++w) {
    th.emplace_back([&, w] {
      for (std::size_t k = 0; k < kPerThread; ++k) {
        AsyncArg& p = args[w * kPerThread + k];
        // Sleep, not yield: 2 vCPUs carry 4 yielding pollers, and rxe's softirq work needs CPU time too.
        while (t.open_pairs[w].load(std::memory_order_relaxed) >= kWindow) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        t.open_pairs[w].fetch_add(1, std::memory_order_relaxed);
        for (;;) {
          const Status st = cl_->put_async(p.key, p.buf, sizeof(p.buf), async_done, &p);
          if (st == Status::kOk) break;
          ASSERT_EQ(st, Status::kBusy);
          busy.fetch_add(1);
          std::this_thread::yield();
        }
      }
    });
  }
  const auto t0 = Clock::now();
  for (auto& x : th) x.join();
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (t.done.load(std::memory_order_acquire) < 2 * total && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(t.done.load(), 2 * total);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("async: %zu requests in %.2f s (%.0f req/s)\n", 2 * total, secs, 2 * total / secs);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a second (wrong) callback would show now
  std::size_t ok = 0;
  std::map<std::uint32_t, std::size_t> by_status;
  for (std::size_t i = 0; i < 2 * total; ++i) {
    ASSERT_EQ(t.calls[i].load(), 1u) << "request " << i;
    ok += t.status[i].load() == static_cast<std::uint32_t>(Status::kOk);
    ++by_status[t.status[i].load()];
  }
  for (const auto& [st, n] : by_status) {
    std::printf("async: %zu x %s\n", n, client::status_name(static_cast<Status>(st)));
  }
  EXPECT_EQ(ok, 2 * total);
  for (std::size_t i = 0; i < total; ++i) {
    ASSERT_EQ(first_mismatch(args[total + i].buf, sizeof(args[i].buf), i), sizeof(args[i].buf)) << i;
  }
  const client::ClientStats s = cl_->stats();
  std::printf("async: %zu requests, busy retries %llu, parked %llu\n", 2 * total,
              static_cast<unsigned long long>(busy.load()), static_cast<unsigned long long>(s.pending_parked));
  EXPECT_EQ(s.submitted, 2 * total);
  EXPECT_EQ(s.completed, 2 * total);
  // A sample of the keys goes by sync DELETE (the gateway and its store end with the test).
  for (std::size_t i = 0; i < total; i += 97) ASSERT_EQ(cl_->del(args[i].key).status, Status::kOk);
}

TEST_F(ClientTest, TooSmallNotFoundAndBadKeys) {
  ASSERT_NO_FATAL_FAILURE(start_client(client_config(1)));
  // Chunked GET into a buffer too small: the gateway writes nothing and names the size.
  std::vector<std::uint8_t> v(64u << 10);
  fill(v.data(), v.size(), 99);
  ASSERT_EQ(cl_->put("big", v.data(), v.size()).status, Status::kOk);
  std::vector<std::uint8_t> small(8u << 10, 0xab);
  Result r = cl_->get("big", small.data(), small.size());
  EXPECT_EQ(r.status, Status::kTooSmall);
  EXPECT_EQ(r.size, v.size());
  for (const auto b : small) ASSERT_EQ(b, 0xab);
  // Inline GET of a value above the inline size: kTooSmall from the gateway.
  std::uint8_t tiny[16];
  std::memset(tiny, 0xab, sizeof(tiny));
  r = cl_->get("big", tiny, sizeof(tiny));
  EXPECT_EQ(r.status, Status::kTooSmall);
  EXPECT_EQ(r.size, v.size());
  for (const auto b : tiny) ASSERT_EQ(b, 0xab);
  // Inline GET of a small value into a smaller buffer: the value comes inline, too big to copy.
  ASSERT_EQ(cl_->put("small", v.data(), 100).status, Status::kOk);
  r = cl_->get("small", tiny, sizeof(tiny));
  EXPECT_EQ(r.status, Status::kTooSmall);
  EXPECT_EQ(r.size, 100u);
  for (const auto b : tiny) ASSERT_EQ(b, 0xab);
  // Not found.
  EXPECT_EQ(cl_->get("nope", small.data(), small.size()).status, Status::kNotFound);
  EXPECT_EQ(cl_->get("nope", tiny, sizeof(tiny)).status, Status::kNotFound);
  EXPECT_EQ(cl_->del("nope").status, Status::kNotFound);
  {
    const auto t0 = Clock::now();
    for (int i = 0; i < 500; ++i) ASSERT_EQ(cl_->del("nope").status, Status::kNotFound);
    const client::ClientStats st = cl_->stats();
    std::printf("sync latency (1 core): %.0f us per DELETE; client averages: submit->send %.0f us, "
                "send->answer %.0f us\n",
                std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 500,
                static_cast<double>(st.queue_us_total) / static_cast<double>(std::max<std::uint64_t>(st.sent, 1)),
                static_cast<double>(st.answer_us_total) / static_cast<double>(std::max<std::uint64_t>(st.answered, 1)));
  }
  // Keys of 0 and 251 bytes are refused locally (no callback); 250 is fine.
  const std::string k251(251, 'k'), k250(250, 'k');
  EXPECT_EQ(cl_->put("", v.data(), 1).status, Status::kBadRequest);
  EXPECT_EQ(cl_->put(k251, v.data(), 1).status, Status::kBadRequest);
  EXPECT_EQ(cl_->get(k251, tiny, sizeof(tiny)).status, Status::kBadRequest);
  EXPECT_EQ(cl_->del("").status, Status::kBadRequest);
  std::atomic<int> called{0};
  auto cb = [](void* a, const Result&) { static_cast<std::atomic<int>*>(a)->fetch_add(1); };
  EXPECT_EQ(cl_->get_async("", tiny, sizeof(tiny), cb, &called), Status::kBadRequest);
  EXPECT_EQ(cl_->del_async(k251, cb, &called), Status::kBadRequest);
  EXPECT_EQ(cl_->put(k250, v.data(), 1).status, Status::kOk);
  EXPECT_EQ(cl_->get(k250, tiny, sizeof(tiny)).size, 1u);
  EXPECT_EQ(cl_->del(k250).status, Status::kOk);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(called.load(), 0);
  EXPECT_EQ(cl_->del("big").status, Status::kOk);
  EXPECT_EQ(cl_->del("small").status, Status::kOk);
  EXPECT_TRUE(gw_->store_empty());
}

// A stream of GETs that reissue themselves from their callbacks until one of them is lost, so that requests
// are in flight whenever the gateway closes the connection, however fast or slow the machine.
struct LostArg {
  Client* cl;
  std::byte* dst;
  std::size_t size;
  std::atomic<bool>* stop;
  std::atomic<int>* issued;
  std::atomic<int>* calls;
  std::atomic<int>* ok;
  std::atomic<int>* lost;
  std::atomic<int>* other;
  std::atomic<std::uint32_t>* last_other;
};
void lost_done(void* a, const Result& r) {
  auto* x = static_cast<LostArg*>(a);
  if (r.status == Status::kOk) {
    x->ok->fetch_add(1);
  } else if (r.status == Status::kConnectionLost) {
    x->lost->fetch_add(1);
    x->stop->store(true);
  } else {
    x->last_other->store(static_cast<std::uint32_t>(r.status));
    x->other->fetch_add(1);
    x->stop->store(true);
  }
  // Reissue before counting this call: calls == issued then means nothing is in flight.
  if (!x->stop->load() && x->cl->get_async("lost", x->dst, x->size, lost_done, x) == Status::kOk) {
    x->issued->fetch_add(1);
  }
  x->calls->fetch_add(1, std::memory_order_release);
}

// The gateway closes the connection under load: what was in flight fails kConnectionLost (nothing else, and
// nothing twice), the client reconnects by itself and later requests succeed.
TEST_F(ClientTest, LostConnectionFailsInFlightThenReconnects) {
  ClientConfig c = client_config(1);
  c.connections_per_gateway = 1;
  ASSERT_NO_FATAL_FAILURE(start_client(c));
  constexpr std::size_t kValue = 1u << 20;
  auto val = cl_->alloc_buffer(kValue);
  ASSERT_FALSE(val.empty());
  fill(val.data(), kValue, 5);
  ASSERT_EQ(cl_->put("lost", val.data(), kValue).status, Status::kOk);
  constexpr int kStreams = 4;
  auto dst = cl_->alloc_buffer(kValue * kStreams);  // one destination per stream: contents not checked here
  ASSERT_FALSE(dst.empty());
  std::atomic<bool> stop{false};
  std::atomic<int> issued{0}, calls{0}, ok{0}, lost{0}, other{0};
  std::atomic<std::uint32_t> last_other{0};
  std::vector<LostArg> args;
  for (int i = 0; i < kStreams; ++i) {
    args.push_back(LostArg{cl_.get(), dst.data() + i * kValue, kValue, &stop, &issued, &calls, &ok, &lost, &other,
                           &last_other});
  }
  for (LostArg& a : args) {
    ASSERT_EQ(cl_->get_async("lost", a.dst, a.size, lost_done, &a), Status::kOk);
    issued.fetch_add(1);
  }
  // The streams run; then close every gateway-side connection (the fixture's control loop pauses while we
  // touch its engine).
  const auto running = Clock::now() + std::chrono::seconds(60);
  while (ok.load() < 8 && !stop.load() && Clock::now() < running) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(ok.load(), 8) << "the GET streams did not run";
  gw_->stop_background();
  std::size_t closed = 0;
  for (control::Connection* conn : gw_->engine().connections()) {
    gw_->engine().close_st(conn->id(), dataplane::CloseReason::kLocal);
    ++closed;
  }
  gw_->start_background();
  EXPECT_GE(closed, 1u);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while ((!stop.load() || calls.load(std::memory_order_acquire) < issued.load()) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop.store(true);
  ASSERT_EQ(calls.load(), issued.load()) << "requests never completed";
  std::printf("lost: %d issued, %d ok, %d connection_lost, %d other (last %s)\n", issued.load(), ok.load(),
              lost.load(), other.load(), client::status_name(static_cast<Status>(last_other.load())));
  EXPECT_GE(lost.load(), 1);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ok.load() + lost.load(), issued.load());
  EXPECT_EQ(cl_->stats().connection_lost, static_cast<std::uint64_t>(lost.load()));
  // Transparent reconnect: later requests succeed.
  ASSERT_TRUE(cl_->wait_connected(std::chrono::seconds(30)));
  std::memset(dst.data(), 0, kValue);
  const Result g = cl_->get("lost", dst.data(), kValue);
  ASSERT_EQ(g.status, Status::kOk) << client::status_name(g.status);
  EXPECT_EQ(first_mismatch(dst.data(), kValue, 5), kValue);
  EXPECT_GE(cl_->stats().reconnects, 1u);
  EXPECT_EQ(cl_->del("lost").status, Status::kOk);
  cl_->free_buffer(val);
  cl_->free_buffer(dst);
}

// A sync GET of a 64-byte value that must end with `expected` once request_timeout (1.5 s in both tests) has
// passed, and well before the 10 s that would mean the timeout is not checked; `what` names the case.
void expect_get_ends_at_timeout(Client& cl, const char* what, const char* key, Status expected) {
  std::uint8_t small[64] = {};
  const auto t0 = Clock::now();
  const Result r = cl.get(key, small, sizeof small);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("%s: %s after %.2f s (request_timeout 1.5 s)\n", what, client::status_name(r.status), secs);
  EXPECT_EQ(r.status, expected) << client::status_name(r.status);
  EXPECT_GE(secs, 1.4);
  EXPECT_LT(secs, 10.0) << "the timeout is checked far more often than this";
}

// A gateway whose cores stop answering: a request in flight completes kTimeout after request_timeout (not
// later, not never), and the client closes that connection.
TEST_F(ClientTest, UnansweredRequestTimesOut) {
  ClientConfig c = client_config(1);
  c.connections_per_gateway = 1;
  c.request_timeout = std::chrono::milliseconds(1500);
  ASSERT_NO_FATAL_FAILURE(start_client(c));
  std::uint8_t small[64] = {};
  ASSERT_EQ(cl_->put("timeout", small, sizeof small).status, Status::kOk);
  // The gateway's data-plane cores stop polling: nothing it holds is answered any more.
  gw_->stop_background();
  gw_->engine().stop_cores_st();
  gw_->start_background();
  expect_get_ends_at_timeout(*cl_, "timeout: GET against a stopped gateway", "timeout", Status::kTimeout);
  EXPECT_GE(cl_->stats().timeouts, 1u);
}

// A gateway address where nothing listens: the request waits for a connection, then completes kUnavailable.
TEST_F(ClientTest, NoGatewayIsUnavailable) {
  ClientConfig c = client_config(1);
  c.gateways[0].port = static_cast<std::uint16_t>(gw_->port() + 1);  // nothing listens there
  c.request_timeout = std::chrono::milliseconds(1500);
  std::string err;
  cl_ = Client::create(c, &err);
  ASSERT_TRUE(cl_) << err;
  EXPECT_FALSE(cl_->wait_connected(std::chrono::milliseconds(500)));
  expect_get_ends_at_timeout(*cl_, "unavailable: GET with no gateway listening", "nobody", Status::kUnavailable);
  EXPECT_GE(cl_->stats().unavailable, 1u);
}

// Two writers (on different cores) overwrite one 1 MiB key with whole-value patterns while two readers GET
// it: every read is exactly one write's value, every byte checked.
TEST_F(ClientTest, TornReadNeverSeen) {
  ASSERT_NO_FATAL_FAILURE(start_client(client_config(2)));
  constexpr std::size_t kValue = 1u << 20;
  constexpr std::size_t kWords = kValue / 8;
  const auto kDuration = std::chrono::seconds(6);
  {
    std::vector<std::uint64_t> init(kWords);
    for (std::size_t i = 0; i < kWords; ++i) init[i] = word(0, i);
    ASSERT_EQ(cl_->put("torn", init.data(), kValue).status, Status::kOk);  // this thread takes core 0
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> writes{0}, reads{0}, torn{0}, failures{0};
  std::atomic<int> writers_ready{0};
  auto writer = [&](std::uint64_t id) {
    auto buf = cl_->alloc_buffer(kValue);
    if (buf.empty()) {
      failures.fetch_add(1);
      writers_ready.fetch_add(1);
      return;
    }
    auto* w = reinterpret_cast<std::uint64_t*>(buf.data());
    for (std::uint64_t n = 1;; ++n) {
      const std::uint64_t seed = id << 56 | n;
      for (std::size_t i = 0; i < kWords; ++i) w[i] = word(seed, i);
      const Result r = cl_->put("torn", w, kValue);
      if (r.status != Status::kOk) failures.fetch_add(1);
      writes.fetch_add(1);
      if (n == 1) writers_ready.fetch_add(1);
      if (stop.load()) break;
    }
    cl_->free_buffer(buf);
  };
  auto reader = [&] {
    std::vector<std::uint64_t> r(kWords);
    while (!stop.load()) {
      const Result g = cl_->get("torn", r.data(), kValue);
      if (g.status != Status::kOk || g.size != kValue) {
        failures.fetch_add(1);
        continue;
      }
      const std::uint64_t seed = r[0];
      bool whole = true;
      for (std::size_t i = 1; i < kWords && whole; ++i) whole = r[i] == word(seed, i);
      if (!whole) torn.fetch_add(1);
      reads.fetch_add(1);
    }
    cl_->release_buffer(r.data());
  };
  std::vector<std::thread> th;
  // Writers first: their first submissions take the next cores round robin (1, then 0), so they differ.
  th.emplace_back(writer, 1);
  while (writers_ready.load() < 1) std::this_thread::yield();
  th.emplace_back(writer, 2);
  while (writers_ready.load() < 2) std::this_thread::yield();
  th.emplace_back(reader);
  th.emplace_back(reader);
  std::this_thread::sleep_for(kDuration);
  stop.store(true);
  for (auto& x : th) x.join();
  std::printf("torn-read: %llu writes, %llu reads in %lld s, %llu torn, %llu failures\n",
              static_cast<unsigned long long>(writes.load()), static_cast<unsigned long long>(reads.load()),
              static_cast<long long>(kDuration.count()), static_cast<unsigned long long>(torn.load()),
              static_cast<unsigned long long>(failures.load()));
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_GE(writes.load(), 4u);
  EXPECT_GE(reads.load(), 4u);
  EXPECT_EQ(cl_->del("torn").status, Status::kOk);
}

struct CountArg {
  std::atomic<int> calls{0};
  std::atomic<int> shutdown{0};
};
void count_done(void* a, const Result& r) {
  auto* x = static_cast<CountArg*>(a);
  if (r.status == Status::kShutdown) x->shutdown.fetch_add(1);
  x->calls.fetch_add(1);
}

// Destroying the client with requests in flight completes every one of them (kOk or kShutdown), once.
TEST_F(ClientTest, DestructionCompletesEverything) {
  ASSERT_NO_FATAL_FAILURE(start_client(client_config(2)));
  constexpr std::size_t kValue = 256u << 10;
  auto val = cl_->alloc_buffer(kValue);
  ASSERT_FALSE(val.empty());
  fill(val.data(), kValue, 3);
  ASSERT_EQ(cl_->put("bye", val.data(), kValue).status, Status::kOk);
  CountArg arg;
  int accepted = 0;
  for (int i = 0; i < 200; ++i) {
    if (cl_->get_async("bye", val.data(), kValue, count_done, &arg) == Status::kOk) ++accepted;
  }
  const client::ClientStats before = cl_->stats();
  EXPECT_EQ(before.submitted, static_cast<std::uint64_t>(accepted) + 1);
  cl_.reset();
  EXPECT_EQ(arg.calls.load(), accepted);
  std::printf("destruction: %d accepted, %d completed kShutdown\n", accepted, arg.shutdown.load());
  // The store still holds "bye" (plus nothing pinned): remove it through a fresh client.
  ASSERT_NO_FATAL_FAILURE(start_client(client_config(1)));
  EXPECT_EQ(cl_->del("bye").status, Status::kOk);
}

// ---- callbacks that submit chunked requests with caller memory (docs/client.md "Key scope") ----------

constexpr std::size_t kCoreValue = 64u << 10;  // well above the inline sizes of a 4 KiB message

// Page-aligned memory outside the client's pool: each buffer gets a registration of its own.
struct PageBuf {
  std::unique_ptr<std::uint8_t, decltype(&std::free)> p;
  explicit PageBuf(std::size_t bytes)
      : p(static_cast<std::uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)), &std::free) {}
  std::uint8_t* data() const { return p.get(); }
};

// PUT the value (seed k); on the core: GET it into dst; on the core: verify, refill the value (seed k + 1),
// PUT; and so on for `rounds` rounds. Every request after the first is submitted by a callback.
struct Chain {
  Client* cl = nullptr;
  std::string key;
  std::uint8_t* val = nullptr;
  std::uint8_t* dst = nullptr;
  std::size_t n = 0;
  int rounds = 0;
  int round = 0;                     // the core's only (published by `done`)
  std::atomic<int> core_submits{0};  // chunked requests the callbacks submitted
  std::atomic<int> mismatches{0};
  std::atomic<std::uint32_t> failed{0};  // 1 + the first status that was not kOk (answer or submit)
  std::atomic<bool> done{false};
};
void chain_get_done(void* a, const Result& r);
void chain_fail(Chain& c, Status st) {
  c.failed.store(static_cast<std::uint32_t>(st) + 1);
  c.done.store(true, std::memory_order_release);
}
void chain_put_done(void* a, const Result& r) {
  auto& c = *static_cast<Chain*>(a);
  if (r.status != Status::kOk) return chain_fail(c, r.status);
  std::memset(c.dst, 0, c.n);
  const Status st = c.cl->get_async(c.key, c.dst, c.n, chain_get_done, &c);
  if (st != Status::kOk) return chain_fail(c, st);
  c.core_submits.fetch_add(1);
}
void chain_get_done(void* a, const Result& r) {
  auto& c = *static_cast<Chain*>(a);
  if (r.status != Status::kOk) return chain_fail(c, r.status);
  if (r.size != c.n || first_mismatch(c.dst, c.n, static_cast<std::uint64_t>(c.round)) != c.n) {
    c.mismatches.fetch_add(1);
  }
  if (++c.round == c.rounds) {
    c.done.store(true, std::memory_order_release);
    return;
  }
  fill(c.val, c.n, static_cast<std::uint64_t>(c.round));
  const Status st = c.cl->put_async(c.key, c.val, c.n, chain_put_done, &c);
  if (st != Status::kOk) return chain_fail(c, st);
  c.core_submits.fetch_add(1);
}

// A callback reissues chunked PUTs and GETs with heap memory the test thread used first: every round
// verifies, the core registers nothing, and after one copy per buffer its keys come from its own cache.
TEST_F(ClientTest, CallbackReissuesChunkedWithCallerMemory) {
  ASSERT_NO_FATAL_FAILURE(start_client(client_config(1)));
  ASSERT_GT(kCoreValue, cl_->max_inline_put(5));
  ASSERT_GT(kCoreValue, cl_->max_inline_get());
  PageBuf val(kCoreValue), dst(kCoreValue);
  ASSERT_TRUE(val.data() != nullptr && dst.data() != nullptr);
  // First use from this thread: the caller side registers both buffers.
  fill(val.data(), kCoreValue, 0);
  ASSERT_EQ(cl_->put("chain", val.data(), kCoreValue).status, Status::kOk);
  ASSERT_EQ(cl_->get("chain", dst.data(), kCoreValue).status, Status::kOk);
  const client::ClientStats s0 = cl_->stats();
  EXPECT_EQ(s0.registrations, 2u);
  constexpr int kRounds = 24;
  Chain c;
  c.cl = cl_.get();
  c.key = "chain";
  c.val = val.data();
  c.dst = dst.data();
  c.n = kCoreValue;
  c.rounds = kRounds;
  ASSERT_EQ(cl_->put_async("chain", val.data(), kCoreValue, chain_put_done, &c), Status::kOk);
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!c.done.load(std::memory_order_acquire) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(c.done.load(std::memory_order_acquire)) << "chain stuck at round " << c.core_submits.load();
  EXPECT_EQ(c.failed.load(), 0u) << client::status_name(static_cast<Status>(c.failed.load() - 1));
  EXPECT_EQ(c.round, kRounds);
  EXPECT_EQ(c.mismatches.load(), 0);
  EXPECT_EQ(c.core_submits.load(), 2 * kRounds - 1);
  const client::ClientStats s1 = cl_->stats();
  std::printf("core keys: %d rounds, registrations %llu -> %llu, core hits %llu, core fills %llu\n", kRounds,
              static_cast<unsigned long long>(s0.registrations),
              static_cast<unsigned long long>(s1.registrations),
              static_cast<unsigned long long>(s1.core_registration_hits),
              static_cast<unsigned long long>(s1.core_registration_fills));
  EXPECT_EQ(s1.registrations, s0.registrations) << "a core registered memory";
  EXPECT_EQ(s1.core_registration_fills, 2u) << "one copy per buffer on the one core";
  EXPECT_EQ(s1.core_registration_hits, static_cast<std::uint64_t>(2 * kRounds - 3));
  EXPECT_EQ(s1.core_registration_unregistered, 0u);
  // The first PUT (this thread) and every core submit found existing keys.
  EXPECT_EQ(s1.registration_cache_hits - s0.registration_cache_hits, static_cast<std::uint64_t>(2 * kRounds));
  EXPECT_EQ(s1.chunked_puts - s0.chunked_puts, static_cast<std::uint64_t>(kRounds));
  EXPECT_EQ(s1.chunked_gets - s0.chunked_gets, static_cast<std::uint64_t>(kRounds));
  EXPECT_EQ(cl_->del("chain").status, Status::kOk);
}

// One chunked request submitted by a callback (core context): the callback of an inline DELETE of a missing
// key submits it.
struct FromCore {
  Client* cl = nullptr;
  bool get = false;
  std::string key;
  void* buf = nullptr;
  std::size_t n = 0;
  std::atomic<std::uint32_t> submitted{0};  // what the core's *_async returned
  std::atomic<bool> triggered{false};
  std::atomic<int> calls{0};  // callbacks of the request itself
  std::atomic<std::uint32_t> result{0};
};
void from_core_done(void* a, const Result& r) {
  auto& x = *static_cast<FromCore*>(a);
  x.result.store(static_cast<std::uint32_t>(r.status));
  x.calls.fetch_add(1, std::memory_order_release);
}
void from_core_trigger(void* a, const Result&) {
  auto& x = *static_cast<FromCore*>(a);
  const Status st = x.get ? x.cl->get_async(x.key, x.buf, x.n, from_core_done, &x)
                          : x.cl->put_async(x.key, x.buf, x.n, from_core_done, &x);
  x.submitted.store(static_cast<std::uint32_t>(st));
  x.triggered.store(true, std::memory_order_release);
}
struct CoreOutcome {
  Status submitted = Status::kProtocol;  // kProtocol: the trigger never ran
  int calls = -1;
  Status result = Status::kProtocol;
};
CoreOutcome submit_from_core(Client& cl, bool get, const std::string& key, void* buf, std::size_t n) {
  // On the heap and leaked if a deadline passes: a late callback must not write into a dead frame.
  auto* x = new FromCore;
  x->cl = &cl;
  x->get = get;
  x->key = key;
  x->buf = buf;
  x->n = n;
  CoreOutcome out;
  if (cl.del_async("from-core-trigger", from_core_trigger, x) != Status::kOk) {
    ADD_FAILURE() << "trigger refused";
    delete x;
    return out;
  }
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!x->triggered.load(std::memory_order_acquire) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!x->triggered.load(std::memory_order_acquire)) {
    ADD_FAILURE() << "trigger never completed";
    return out;
  }
  out.submitted = static_cast<Status>(x->submitted.load());
  if (out.submitted == Status::kOk) {
    deadline = Clock::now() + std::chrono::seconds(60);
    while (x->calls.load(std::memory_order_acquire) == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (x->calls.load(std::memory_order_acquire) == 0) {
      ADD_FAILURE() << "request submitted from the core never completed";
      return out;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a callback that must not come (or a second)
  out.calls = x->calls.load(std::memory_order_acquire);
  out.result = static_cast<Status>(x->result.load());
  delete x;
  return out;
}

// A GET of `key` into `buf` submitted from a callback on a client core: accepted, answered once, and every
// byte the value written with `seed`.
void expect_core_get_verified(Client& cl, const std::string& key, void* buf, std::uint64_t seed) {
  std::memset(buf, 0, kCoreValue);
  const CoreOutcome o = submit_from_core(cl, true, key, buf, kCoreValue);
  EXPECT_EQ(o.submitted, Status::kOk) << client::status_name(o.submitted);
  EXPECT_EQ(o.calls, 1);
  EXPECT_EQ(o.result, Status::kOk) << client::status_name(o.result);
  EXPECT_EQ(first_mismatch(buf, kCoreValue, seed), kCoreValue);
}

// A callback never registers: memory no caller thread used is refused kRegistration (returned, no callback,
// no ibv_reg_mr on the core). Once the test thread used it, the same submit from a callback works.
TEST_F(ClientTest, CallbackWithNeverRegisteredMemoryIsRefused) {
  ASSERT_NO_FATAL_FAILURE(start_client(client_config(1)));
  PageBuf fresh(kCoreValue);
  ASSERT_NE(fresh.data(), nullptr);
  fill(fresh.data(), kCoreValue, 7);
  const client::ClientStats s0 = cl_->stats();
  const CoreOutcome put = submit_from_core(*cl_, false, "never", fresh.data(), kCoreValue);
  EXPECT_EQ(put.submitted, Status::kRegistration) << client::status_name(put.submitted);
  EXPECT_EQ(put.calls, 0);
  const CoreOutcome get = submit_from_core(*cl_, true, "never", fresh.data(), kCoreValue);
  EXPECT_EQ(get.submitted, Status::kRegistration) << client::status_name(get.submitted);
  EXPECT_EQ(get.calls, 0);
  const client::ClientStats s1 = cl_->stats();
  EXPECT_EQ(s1.registrations, s0.registrations) << "a core registered memory";
  EXPECT_EQ(s1.core_registration_unregistered, 2u);
  EXPECT_EQ(s1.core_registration_fills, 0u);
  EXPECT_EQ(s1.core_registration_hits, 0u);
  // Used once from this thread (registered there), the buffer then works from a callback.
  ASSERT_EQ(cl_->put("never", fresh.data(), kCoreValue).status, Status::kOk);
  EXPECT_EQ(cl_->stats().registrations, s0.registrations + 1);
  expect_core_get_verified(*cl_, "never", fresh.data(), 7);
  const client::ClientStats s2 = cl_->stats();
  EXPECT_EQ(s2.registrations, s0.registrations + 1);
  EXPECT_EQ(s2.core_registration_fills, 1u);
  EXPECT_EQ(cl_->del("never").status, Status::kOk);
}

// release_buffer deregisters: the core's cached copy of the keys must go with it. A callback reusing the
// buffer is then refused (it would otherwise send a dead rkey); after the test thread uses it again (a new
// registration) the callback works with the new keys.
TEST_F(ClientTest, ReleaseBufferDropsCoreCachedKeys) {
  ASSERT_NO_FATAL_FAILURE(start_client(client_config(1)));
  PageBuf buf(kCoreValue);
  ASSERT_NE(buf.data(), nullptr);
  fill(buf.data(), kCoreValue, 11);
  ASSERT_EQ(cl_->put("stale", buf.data(), kCoreValue).status, Status::kOk);
  const client::ClientStats s0 = cl_->stats();
  EXPECT_EQ(s0.registrations, 1u);
  const CoreOutcome first = submit_from_core(*cl_, false, "stale", buf.data(), kCoreValue);
  EXPECT_EQ(first.submitted, Status::kOk) << client::status_name(first.submitted);
  EXPECT_EQ(first.result, Status::kOk) << client::status_name(first.result);
  const CoreOutcome second = submit_from_core(*cl_, false, "stale", buf.data(), kCoreValue);
  EXPECT_EQ(second.submitted, Status::kOk) << client::status_name(second.submitted);
  EXPECT_EQ(second.result, Status::kOk) << client::status_name(second.result);
  const client::ClientStats s1 = cl_->stats();
  EXPECT_EQ(s1.core_registration_fills, 1u);
  EXPECT_EQ(s1.core_registration_hits, 1u);

  cl_->release_buffer(buf.data());
  const CoreOutcome stale = submit_from_core(*cl_, false, "stale", buf.data(), kCoreValue);
  EXPECT_EQ(stale.submitted, Status::kRegistration)
      << client::status_name(stale.submitted) << ": the core used keys of a deregistered MR";
  EXPECT_EQ(stale.calls, 0);
  const client::ClientStats s2 = cl_->stats();
  EXPECT_EQ(s2.core_registration_hits, 1u);
  EXPECT_EQ(s2.core_registration_unregistered, 1u);
  EXPECT_EQ(s2.registrations, s0.registrations);

  fill(buf.data(), kCoreValue, 12);
  ASSERT_EQ(cl_->put("stale", buf.data(), kCoreValue).status, Status::kOk);
  EXPECT_EQ(cl_->stats().registrations, s0.registrations + 1);
  expect_core_get_verified(*cl_, "stale", buf.data(), 12);
  const client::ClientStats s3 = cl_->stats();
  EXPECT_EQ(s3.core_registration_fills, 2u);
  EXPECT_EQ(s3.registrations, s0.registrations + 1);
  EXPECT_EQ(cl_->del("stale").status, Status::kOk);
}

}  // namespace

// A crash prints its stack (addresses: resolve with addr2line -e client_test) before dying.
void on_fatal_signal(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

int main(int argc, char** argv) {
  signal(SIGSEGV, on_fatal_signal);
  signal(SIGABRT, on_fatal_signal);
  return rdmagate::testfix::gateway_test_main(argc, argv, "client_test");
}

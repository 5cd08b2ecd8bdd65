// The gateway's object service end to end on rxe: an in-process gateway (gateway_fixture.hpp: Store over
// hugepages, arena registered local-write only, ObjectService cores) driven by a scripted raw-protocol client
// service on an active engine in the same process. Every value byte is verified: inline answers against the
// pattern, chunked ones in the client's registered buffer, with sentinels around every destination.
//
// A script is a list of steps run one at a time on one connection (the n-th adopted connection runs the
// n-th published script); each step sends one request and checks the answer's type, status, byte count and
// bytes. Fault steps inject raw messages the gateway's decoder must refuse (it closes that connection) or
// name a bad rkey (the gateway's RDMA READ/WRITE fails): the gateway releases what it held and keeps serving.
//
// Without RDMA the binary prints one line and exits 77.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "protocol/object_wire.hpp"
#include "tests/rdma/gateway_fixture.hpp"
#include "tests/services/storage/memory/store_test_util.hpp"

namespace {

using namespace rdmagate;
using control::Engine;
using protocol::MessageType;
using protocol::ObjectOpcode;
using protocol::ObjectStatus;
using testfix::Gateway;
using testfix::GatewayOptions;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kMaxMessage = 4096;
constexpr std::uint32_t kMiB = 1u << 20;
constexpr std::uint32_t kMaxValue = 4 * kMiB;  // the store's default max_value

// The client's registered buffer: a source area for read chunks, a destination area for write chunks.
constexpr std::size_t kSrcOff = 0;
constexpr std::size_t kDstOff = 6 * kMiB;
constexpr std::size_t kGuard = 4096;
constexpr std::size_t kClientBuf = kDstOff + kMaxValue + 2 * kGuard;
constexpr std::uint8_t kSentinel = 0xe7;

std::uint8_t value_byte(std::uint32_t seed, std::uint32_t i) {
  return static_cast<std::uint8_t>(((i * 2654435761u) >> 13) ^ (seed * 37u + (i >> 12)) ^ (seed >> 3));
}

constexpr std::uint16_t op_put() {
  return static_cast<std::uint16_t>(ObjectOpcode::kPut);
}

enum class Kind : std::uint8_t {
  kInline,      // kInlineRequest with key prefix + value_len pattern bytes (PUT) or just the key
  kRawPayload,  // kInlineRequest with `raw` as the payload, as given
  kRead,        // kReadChunkRequest over src[0, chunk_len) in `frags` fragments, filled with the pattern
  kWrite,       // kWriteChunkRequest over dst[0, chunk_len) in `frags` fragments (sentinel-filled first)
  kInjectTooManyFragments,  // raw read chunk request whose fragment count exceeds the negotiated limit
  kInjectWrap,              // raw read chunk request whose fragment addr + len wraps
};

enum class Expect : std::uint8_t {
  kCompletion,  // status + byte_count
  kInline,      // kInlineResponse carrying value_len pattern bytes (or `raw` for echo)
  kNothing,     // one way (SINK): the next step goes at once
  kClose,       // the gateway closes the connection (decoder violation, failed RDMA)
};

struct Step {
  Kind kind = Kind::kInline;
  std::uint16_t opcode = 0;
  std::string key;
  std::vector<std::uint8_t> raw;
  std::uint32_t value_len = 0;  // inline PUT value / read chunk bytes / expected inline answer
  std::uint32_t seed = 0;
  std::uint32_t chunk_len = 0;  // read chunk: = value_len; write chunk: destination capacity
  std::uint16_t frags = 1;
  bool bad_rkey = false;
  Expect expect = Expect::kCompletion;
  ObjectStatus status = ObjectStatus::kOk;
  std::uint32_t bytes = 0;       // expected byte_count
  std::uint32_t verify_len = 0;  // write chunk: destination bytes expected (pattern of verify_seed)
  std::uint32_t verify_seed = 0;
};

struct ScriptResult {
  std::atomic<int> state{0};  // 0 running, 1 every step passed, 2 failed, 3 closed as expected
  std::atomic<std::uint32_t> steps_ok{0};
  char msg[512] = {};
};

struct Script {
  std::vector<Step> steps;
  ScriptResult result;
};

// The scripted client (active engine, one core).
class ScriptClient {
 public:
  static constexpr std::size_t kMaxScripts = 16;
  struct ConnState {
    std::uint64_t script = kMaxScripts;  // kMaxScripts: the connection runs no script
    std::uint64_t step = 0;
    bool waiting = false;  // the step waits for its answer
  };

  ScriptClient(std::uint8_t* buf, std::uint32_t rkey) : buf_(buf), rkey_(rkey) {}

  // Test thread: adds the script the next adopted connection runs.
  Script& publish(std::vector<Step> steps) {
    const int n = published_.load(std::memory_order_relaxed);
    scripts_[static_cast<std::size_t>(n)].steps = std::move(steps);
    published_.store(n + 1, std::memory_order_release);
    return scripts_[static_cast<std::size_t>(n)];
  }

  template <typename Api>
  void on_adopt_st(Api& api, dataplane::CoreConn& c) noexcept {
    ConnState& cs = c.svc.reset<ConnState>();
    const int n = adopted_++;
    if (n >= published_.load(std::memory_order_acquire)) {
      ++unscripted_;
      return;
    }
    cs.script = static_cast<std::uint64_t>(n);
    run_st(api, c);
  }

  template <typename Api>
  void on_response_st(Api& api, dataplane::CoreConn& c, const protocol::Message& m) noexcept {
    ConnState& cs = c.svc.as<ConnState>();
    if (cs.script >= kMaxScripts || !cs.waiting) {
      ++unexpected_;
      return;
    }
    Script& s = scripts_[cs.script];
    const Step& st = s.steps[cs.step];
    cs.waiting = false;
    if (m.cookie != cs.step + 1) return fail(s, "step %llu: cookie %llu", step_no(c), ull(m.cookie));
    if (m.opcode != st.opcode) return fail(s, "step %llu: opcode %u", step_no(c), m.opcode);
    switch (st.expect) {
      case Expect::kCompletion:
        if (m.type != MessageType::kCompletion || m.status != static_cast<std::uint32_t>(st.status) ||
            m.byte_count != st.bytes) {
          return fail(s, "step %llu (%s): type %u status %s (%u) bytes %u, want completion %s bytes %u",
                      step_no(c), st.key.c_str(), static_cast<unsigned>(m.type),
                      protocol::object_status_name(m.status), m.status, m.byte_count,
                      protocol::object_status_name(static_cast<std::uint32_t>(st.status)), st.bytes);
        }
        if (st.kind == Kind::kWrite && !verify_destination(s, st, c)) return;
        break;
      case Expect::kInline: {
        if (m.type != MessageType::kInlineResponse) {
          return fail(s, "step %llu (%s): type %u status %s bytes %u, want inline response", step_no(c),
                      st.key.c_str(), static_cast<unsigned>(m.type), protocol::object_status_name(m.status),
                      m.byte_count);
        }
        if (!st.raw.empty() || st.kind == Kind::kRawPayload) {
          if (m.payload.size() != st.raw.size() ||
              !std::equal(st.raw.begin(), st.raw.end(), m.payload.begin())) {
            return fail(s, "step %llu: echo payload differs", step_no(c));
          }
        } else {
          if (m.payload.size() != st.value_len) {
            return fail(s, "step %llu (%s): inline value %zu bytes, want %u", step_no(c), st.key.c_str(),
                        m.payload.size(), st.value_len);
          }
          for (std::uint32_t i = 0; i < st.value_len; ++i) {
            if (m.payload[i] != value_byte(st.seed, i)) {
              return fail(s, "step %llu (%s): inline byte %u differs", step_no(c), st.key.c_str(), i);
            }
          }
        }
        break;
      }
      case Expect::kNothing:
      case Expect::kClose:
        return fail(s, "step %llu (%s): unexpected answer type %u status %u", step_no(c), st.key.c_str(),
                    static_cast<unsigned>(m.type), m.status);
    }
    s.result.steps_ok.fetch_add(1, std::memory_order_relaxed);
    ++cs.step;
    run_st(api, c);
  }

  template <typename Api>
  void on_close_st(Api&, dataplane::CoreConn& c) noexcept {
    const ConnState& cs = c.svc.as<ConnState>();
    if (cs.script >= kMaxScripts) return;
    Script& s = scripts_[cs.script];
    if (s.result.state.load(std::memory_order_relaxed) != 0) return;
    if (cs.step < s.steps.size() && cs.waiting && s.steps[cs.step].expect == Expect::kClose) {
      s.result.steps_ok.fetch_add(1, std::memory_order_relaxed);
      s.result.state.store(3, std::memory_order_release);
      return;
    }
    fail(s, "connection closed at step %llu", ull(cs.step + 1));
  }

  template <typename Api>
  void on_request_st(Api&, dataplane::CoreConn&, const protocol::Message&) noexcept {
    ++unexpected_;
  }

  std::uint64_t unexpected() const { return unexpected_; }
  std::uint64_t unscripted() const { return unscripted_; }

 private:
  static unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }
  static unsigned long long step_no(const dataplane::CoreConn& c) {
    return ull(c.svc.as<ConnState>().step + 1);
  }

  template <typename... Args>
  void fail(Script& s, const char* fmt, Args... args) noexcept {
    if (s.result.state.load(std::memory_order_relaxed) != 0) return;
    std::snprintf(s.result.msg, sizeof(s.result.msg), fmt, args...);
    s.result.state.store(2, std::memory_order_release);
  }

  // Sends steps until one waits for an answer or the script ends.
  template <typename Api>
  void run_st(Api& api, dataplane::CoreConn& c) noexcept {
    ConnState& cs = c.svc.as<ConnState>();
    Script& s = scripts_[cs.script];
    while (s.result.state.load(std::memory_order_relaxed) == 0) {
      if (cs.step == s.steps.size()) {
        s.result.state.store(1, std::memory_order_release);
        return;
      }
      const Step& st = s.steps[cs.step];
      if (!send_step_st(api, c, st, cs.step + 1)) {
        fail(s, "step %llu (%s): could not send", step_no(c), st.key.c_str());
        return;
      }
      if (st.expect != Expect::kNothing) {
        cs.waiting = true;
        return;
      }
      s.result.steps_ok.fetch_add(1, std::memory_order_relaxed);
      ++cs.step;
    }
  }

  // The chunk over [base, base + len) in `frags` near-equal fragments (the last takes the remainder).
  protocol::Chunk chunk_over(std::uint8_t* base, std::uint32_t len, std::uint16_t frags,
                             bool bad_rkey) const {
    protocol::Chunk ch;
    if (frags > len) frags = static_cast<std::uint16_t>(len);
    ch.count = frags;
    const std::uint32_t piece = len / frags;
    for (std::uint16_t k = 0; k < frags; ++k) {
      const std::uint32_t n = k + 1 == frags ? len - piece * k : piece;
      ch.fragments[k] = protocol::Fragment{reinterpret_cast<std::uintptr_t>(base) + std::uint64_t{piece} * k,
                                           n, bad_rkey ? rkey_ ^ 0x00ff0000u : rkey_};
    }
    return ch;
  }

  template <typename Api>
  bool send_step_st(Api& api, dataplane::CoreConn& c, const Step& st, std::uint64_t cookie) noexcept {
    std::uint8_t payload[kMaxMessage];
    std::size_t n = 0;
    if (st.kind == Kind::kRawPayload) {
      std::memcpy(payload, st.raw.data(), st.raw.size());
      n = st.raw.size();
    } else {
      std::uint8_t value[kMaxMessage];
      // Only an inline PUT carries its value (a GET's value_len is the answer it expects).
      const std::uint32_t inline_len = st.kind == Kind::kInline && st.opcode == op_put() ? st.value_len : 0;
      for (std::uint32_t i = 0; i < inline_len; ++i) value[i] = value_byte(st.seed, i);
      n = protocol::encode_object_payload(st.key, std::span<const std::uint8_t>(value, inline_len), payload);
      if (n == 0) return false;
    }
    const std::span<const std::uint8_t> p(payload, n);
    switch (st.kind) {
      case Kind::kInline:
      case Kind::kRawPayload:
        return api.send_st(c, MessageType::kInlineRequest, st.opcode, cookie, p);
      case Kind::kRead: {
        std::uint8_t* src = buf_ + kSrcOff;
        for (std::uint32_t i = 0; i < st.chunk_len; ++i) src[i] = value_byte(st.seed, i);
        const protocol::Chunk ch = chunk_over(src, st.chunk_len, st.frags, st.bad_rkey);
        return api.send_st(c, MessageType::kReadChunkRequest, st.opcode, cookie, p, 0, 0, &ch);
      }
      case Kind::kWrite: {
        std::uint8_t* dst = buf_ + kDstOff;
        std::memset(dst - kGuard, kSentinel, st.chunk_len + 2 * kGuard);
        const protocol::Chunk ch = chunk_over(dst, st.chunk_len, st.frags, st.bad_rkey);
        return api.send_st(c, MessageType::kWriteChunkRequest, st.opcode, cookie, p, 0, 0, &ch);
      }
      case Kind::kInjectTooManyFragments:
      case Kind::kInjectWrap: {
        // A valid read chunk request, then one field broken (no checksum on this session).
        const std::uint16_t frags = st.kind == Kind::kInjectTooManyFragments ? protocol::kMaxFragments : 1;
        const protocol::Chunk ch = chunk_over(buf_ + kSrcOff, 4096u * frags, frags, false);
        protocol::Message m;
        m.type = MessageType::kReadChunkRequest;
        m.opcode = st.opcode;
        m.cookie = cookie;
        m.chunk = ch;
        m.payload = p;
        std::uint8_t wire[kMaxMessage];
        const auto enc = protocol::encode_message(m, c.session, wire);
        if (!enc.ok()) return false;
        if (st.kind == Kind::kInjectTooManyFragments) {
          const std::uint16_t count = protocol::kMaxFragments + 1;  // above the negotiated limit
          std::memcpy(wire + protocol::kHeaderSize, &count, sizeof(count));
        } else {
          const std::uint64_t addr = ~std::uint64_t{0} - 100;  // + len 4096 wraps
          std::memcpy(wire + protocol::kChunkRequestFixedSize, &addr, sizeof(addr));
        }
        return api.inject_raw_st(c, std::span<const std::uint8_t>(wire, enc.size));
      }
    }
    return false;
  }

  bool verify_destination(Script& s, const Step& st, const dataplane::CoreConn& c) {
    const std::uint8_t* dst = buf_ + kDstOff;
    for (std::size_t i = 1; i <= kGuard; ++i) {
      if (dst[-static_cast<std::ptrdiff_t>(i)] != kSentinel) {
        fail(s, "step %llu (%s): guard byte before the destination overwritten", step_no(c), st.key.c_str());
        return false;
      }
    }
    for (std::uint32_t i = 0; i < st.verify_len; ++i) {
      if (dst[i] != value_byte(st.verify_seed, i)) {
        fail(s, "step %llu (%s): destination byte %u is 0x%02x, want 0x%02x", step_no(c), st.key.c_str(), i,
             dst[i], value_byte(st.verify_seed, i));
        return false;
      }
    }
    for (std::size_t i = st.verify_len; i < st.chunk_len + kGuard; ++i) {
      if (dst[i] != kSentinel) {
        fail(s, "step %llu (%s): destination byte %zu past the value (%u) overwritten", step_no(c),
             st.key.c_str(), i, st.verify_len);
        return false;
      }
    }
    return true;
  }

  std::uint8_t* buf_;
  std::uint32_t rkey_;
  std::array<Script, kMaxScripts> scripts_{};
  std::atomic<int> published_{0};
  int adopted_ = 0;  // core
  std::uint64_t unexpected_ = 0;
  std::uint64_t unscripted_ = 0;
};

// ---- step builders ----------------------------------------------------------------------------------

std::uint16_t op(ObjectOpcode o) {
  return static_cast<std::uint16_t>(o);
}

std::uint32_t put_inline_max(const std::string& key) {
  return protocol::max_inline_put_value(kMaxMessage, key.size());
}
constexpr std::uint32_t kGetInlineMax = protocol::max_inline_get_value(kMaxMessage);

std::uint16_t frags_for(std::uint32_t len) {
  return len >= 64 * 1024 ? 5 : (len >= 16 ? 2 : 1);
}

// PUT inline when it fits, else through a read chunk.
Step put(const std::string& key, std::uint32_t len, std::uint32_t seed,
         ObjectStatus want = ObjectStatus::kOk) {
  Step s;
  s.opcode = op(ObjectOpcode::kPut);
  s.key = key;
  s.value_len = len;
  s.seed = seed;
  s.status = want;
  s.bytes = want == ObjectStatus::kOk ? len : 0;
  if (len <= put_inline_max(key)) {
    s.kind = Kind::kInline;
  } else {
    s.kind = Kind::kRead;
    s.chunk_len = len;
    s.frags = frags_for(len);
  }
  return s;
}

// GET inline: the value inline when it fits the message, else kTooSmall with the size.
Step get_inline(const std::string& key, std::uint32_t len, std::uint32_t seed) {
  Step s;
  s.opcode = op(ObjectOpcode::kGet);
  s.key = key;
  if (len <= kGetInlineMax) {
    s.expect = Expect::kInline;
    s.value_len = len;
    s.seed = seed;
  } else {
    s.status = ObjectStatus::kTooSmall;
    s.bytes = len;
  }
  return s;
}

// GET through a write chunk of `capacity` bytes; the value (len bytes of seed) must land exactly.
Step get_chunk(const std::string& key, std::uint32_t len, std::uint32_t seed, std::uint32_t capacity) {
  Step s;
  s.kind = Kind::kWrite;
  s.opcode = op(ObjectOpcode::kGet);
  s.key = key;
  s.chunk_len = capacity;
  s.frags = frags_for(capacity);
  s.bytes = len;
  s.verify_len = len;
  s.verify_seed = seed;
  return s;
}

Step status_step(Kind kind, ObjectOpcode o, const std::string& key, ObjectStatus want,
                 std::uint32_t bytes = 0) {
  Step s;
  s.kind = kind;
  s.opcode = op(o);
  s.key = key;
  s.status = want;
  s.bytes = bytes;
  if (kind == Kind::kWrite || kind == Kind::kRead) s.chunk_len = 64;
  return s;
}

Step del(const std::string& key, ObjectStatus want = ObjectStatus::kOk) {
  return status_step(Kind::kInline, ObjectOpcode::kDelete, key, want);
}

Step raw(std::uint16_t opcode, std::vector<std::uint8_t> payload, ObjectStatus want) {
  Step s;
  s.kind = Kind::kRawPayload;
  s.opcode = opcode;
  s.raw = std::move(payload);
  s.status = want;
  return s;
}

Step expect_close(Step s) {
  s.expect = Expect::kClose;
  return s;
}

Step with_bad_rkey(Step s) {
  s.bad_rkey = true;
  return s;
}

// ---- the test pair ------------------------------------------------------------------------------------

struct ClientSide {
  std::unique_ptr<Engine> engine;
  std::vector<std::uint8_t> storage;  // the registered client buffer (page aligned inside)
  std::uint8_t* buf = nullptr;
  ibv_mr* mr = nullptr;
  std::unique_ptr<ScriptClient> svc;
};

control::EngineConfig client_config(std::uint32_t max_bulk) {
  control::EngineConfig e;
  e.name = "objclient";
  e.device = testfix::rdma_device();
  e.passive = false;
  e.cores.push_back(testfix::guest_core_config(testfix::kClientLcores[0], kMaxMessage));
  e.local.params = protocol::ConnParams{32, kMaxMessage, protocol::kMaxFragments, max_bulk};
  e.local.min_queue_depth = protocol::kMinCreditQueueDepth;
  e.backoff.min = std::chrono::milliseconds(50);
  e.backoff.max = std::chrono::milliseconds(800);
  return e;
}

void start_client(ClientSide& cs, std::uint32_t max_bulk) {
  std::string err;
  cs.engine = Engine::create(client_config(max_bulk), &err);
  ASSERT_TRUE(cs.engine) << err;
  cs.storage.assign(kClientBuf + 2 * 4096, 0);
  cs.buf = reinterpret_cast<std::uint8_t*>(
      (reinterpret_cast<std::uintptr_t>(cs.storage.data()) + 4095 + kGuard) & ~std::uintptr_t{4095});
  cs.mr = cs.engine->register_memory(
      cs.buf - kGuard, kClientBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
      &err);
  ASSERT_NE(cs.mr, nullptr) << err;
  cs.svc = std::make_unique<ScriptClient>(cs.buf, cs.mr->rkey);
  std::vector<std::unique_ptr<control::CoreRunner>> runners;
  runners.push_back(dataplane::make_core_runner(cs.engine->backend_kind(), cs.engine->core(0), *cs.svc));
  ASSERT_TRUE(cs.engine->launch_cores(std::move(runners), &err)) << err;
}

bool poll_both(Gateway& gw, Engine& client, const std::function<bool()>& pred, std::chrono::milliseconds t) {
  const auto deadline = Clock::now() + t;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    gw.poll_st(1);
    client.poll_st(1);
  }
  return true;
}

// Connects (no reconnect), runs `steps` on the new connection, waits for the script's end, closes the
// connection if it is still up; returns the result state.
int run_script(Gateway& gw, ClientSide& cs, std::vector<Step> steps, std::chrono::seconds timeout,
               std::string* msg, double* secs) {
  Script& s = cs.svc->publish(std::move(steps));
  std::string err;
  const auto t0 = Clock::now();
  const std::uint64_t id = cs.engine->connect(gw.addr(), gw.port(), &err, /*reconnect=*/false);
  if (id == 0) {
    *msg = err;
    return -1;
  }
  const bool ended = poll_both(
      gw, *cs.engine, [&] { return s.result.state.load() != 0; }, timeout);
  *secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!ended) {
    *msg = "timed out after " + std::to_string(s.result.steps_ok.load()) + " steps";
    return -2;
  }
  *msg = s.result.msg;
  if (cs.engine->find(id) != nullptr) cs.engine->close_st(id, control::CloseReason::kLocal);
  return s.result.state.load();
}

// Waits until the gateway has no connection left but `keep` (the client closed or the gateway failed it).
bool wait_connections(Gateway& gw, Engine& client, std::size_t keep, std::chrono::seconds t) {
  return poll_both(
      gw, client, [&] { return gw.engine().connection_count() == keep; }, t);
}

void expect_store_released(Gateway& gw) {
  const store::Store& st = gw.store();
  const store::StoreStats s = st.stats();
  EXPECT_EQ(s.objects, 0u);
  EXPECT_EQ(s.value_bytes, 0u);
  EXPECT_EQ(s.used_bytes, 0u) << "a reservation or a pin leaked";
  EXPECT_EQ(store::StoreTestPeer::free_descriptors(st), store::StoreTestPeer::descriptor_count(st));
  EXPECT_EQ(store::StoreTestPeer::allocator_free_bytes(st), store::StoreTestPeer::arena_bytes(st));
}

void shut_down(Gateway& gw, ClientSide& cs) {
  cs.engine->begin_shutdown_st();
  EXPECT_TRUE(poll_both(
      gw, *cs.engine, [&] { return cs.engine->drained_st() && gw.engine().drained_st(); },
      std::chrono::seconds(30)));
  cs.engine->stop_cores_st();
  EXPECT_TRUE(gw.shutdown(std::chrono::seconds(10)));
}

// ---- tests --------------------------------------------------------------------------------------------

TEST(ObjectService, RoundTripsEverySizeEveryByteVerified) {
  std::string err;
  auto gw = Gateway::start(GatewayOptions{}, &err);
  ASSERT_TRUE(gw) << err;
  ClientSide cs;
  ASSERT_NO_FATAL_FAILURE(start_client(cs, 16 * kMiB));

  std::vector<Step> steps;
  std::vector<std::uint32_t> sizes;
  const std::string probe_key = "size-000000000";  // every key below has this length
  sizes = {0,
           1,
           put_inline_max(probe_key),
           put_inline_max(probe_key) + 1,
           kGetInlineMax,
           kGetInlineMax + 1,
           64 * 1024,
           kMiB,
           kMaxValue};
  std::uint32_t seed = 1;
  std::uint64_t value_bytes = 0;
  for (const std::uint32_t len : sizes) {
    char key[32];
    std::snprintf(key, sizeof(key), "size-%09u", len);
    ASSERT_EQ(std::strlen(key), probe_key.size());
    ++seed;
    steps.push_back(put(key, len, seed));
    steps.push_back(get_inline(key, len, seed));
    steps.push_back(get_chunk(key, len, seed, len == 0 ? 64 : len));  // exact fit (size 0: any chunk)
    if (len > 0 && len < kMaxValue) steps.push_back(get_chunk(key, len, seed, len + 1000));  // room to spare
    value_bytes += len;
  }
  // Overwrite one chunked value with a different one and read it back, then delete everything.
  steps.push_back(put("size-000065536", 65536, 999));
  steps.push_back(get_chunk("size-000065536", 65536, 999, 65536));
  for (const std::uint32_t len : sizes) {
    char key[32];
    std::snprintf(key, sizeof(key), "size-%09u", len);
    steps.push_back(del(key));
    steps.push_back(status_step(Kind::kInline, ObjectOpcode::kGet, key, ObjectStatus::kNotFound));
  }
  // ECHO and SINK ride the same connection.
  Step echo = raw(op(ObjectOpcode::kEcho), {1, 2, 3, 250, 0, 7}, ObjectStatus::kOk);
  echo.expect = Expect::kInline;
  steps.push_back(echo);
  Step sink = raw(op(ObjectOpcode::kSink), {9, 9, 9}, ObjectStatus::kOk);
  sink.expect = Expect::kNothing;
  steps.push_back(sink);
  steps.push_back(echo);
  const std::size_t nsteps = steps.size();

  std::string msg;
  double secs = 0;
  const int rc = run_script(*gw, cs, std::move(steps), std::chrono::seconds(240), &msg, &secs);
  std::printf("object_service: %zu steps (sizes 0..4 MiB, %.1f MiB of values each way) in %.2f s\n", nsteps,
              static_cast<double>(value_bytes) / kMiB, secs);
  EXPECT_EQ(rc, 1) << msg;
  ASSERT_TRUE(wait_connections(*gw, *cs.engine, 0, std::chrono::seconds(30)));
  shut_down(*gw, cs);

  const auto& oc = gw->service(0).counters();
  const auto& sc = gw->engine().core(0).counters;
  const auto get = static_cast<std::size_t>(protocol::ObjectOp::kGet);
  const auto putx = static_cast<std::size_t>(protocol::ObjectOp::kPut);
  std::printf(
      "object_service: gateway puts %llu gets %llu deletes %llu, bytes in %llu out %llu, read chunks %llu "
      "(%llu B), write chunks %llu (%llu B), echo %llu sink %llu\n",
      static_cast<unsigned long long>(oc.requests[putx]), static_cast<unsigned long long>(oc.requests[get]),
      static_cast<unsigned long long>(oc.requests[2]), static_cast<unsigned long long>(oc.bytes_in),
      static_cast<unsigned long long>(oc.bytes_out), static_cast<unsigned long long>(sc.read_chunks),
      static_cast<unsigned long long>(sc.read_bytes), static_cast<unsigned long long>(sc.write_chunks),
      static_cast<unsigned long long>(sc.write_bytes), static_cast<unsigned long long>(oc.echo),
      static_cast<unsigned long long>(oc.sink));
  EXPECT_EQ(oc.echo, 2u);
  EXPECT_EQ(oc.sink, 1u);
  EXPECT_EQ(oc.bulk_failures, 0u);
  EXPECT_EQ(oc.send_failures, 0u);
  EXPECT_EQ(oc.released_at_close, 0u);
  EXPECT_EQ(oc.unexpected, 0u);
  EXPECT_EQ(cs.svc->unexpected(), 0u);
  EXPECT_EQ(oc.bytes_in, value_bytes + 65536);
  // Chunked PUTs: the sizes above the inline PUT limit, plus the overwrite.
  std::uint64_t chunked_puts = 1;
  for (const std::uint32_t len : sizes) chunked_puts += len > put_inline_max(probe_key) ? 1 : 0;
  EXPECT_EQ(sc.read_chunks, chunked_puts);
  for (std::size_t i = 0; i < protocol::kObjectParseErrorCount; ++i) EXPECT_EQ(oc.parse_errors[i], 0u) << i;
  // Every answered PUT/GET/DELETE observed its latency once (inline GETs included).
  const auto& hist = gw->stats(0).request_duration;
  for (std::size_t o = 0; o < protocol::kObjectOpCount; ++o) {
    EXPECT_EQ(hist[o].count(), oc.requests[o]) << "op " << o;
    EXPECT_GT(hist[o].sum_ns, 0u) << "op " << o;
  }
  expect_store_released(*gw);
}

TEST(ObjectService, StatusesTooLargeNotFoundTooSmallBadRequestUnknownOpcode) {
  std::string err;
  auto gw = Gateway::start(GatewayOptions{}, &err);
  ASSERT_TRUE(gw) << err;
  ClientSide cs;
  ASSERT_NO_FATAL_FAILURE(start_client(cs, 16 * kMiB));

  std::vector<Step> steps;
  // Too large: a read chunk one byte above the max value is refused before any READ.
  Step big = put("big", kMaxValue + 1, 5, ObjectStatus::kTooLarge);
  steps.push_back(big);
  steps.push_back(status_step(Kind::kInline, ObjectOpcode::kGet, "big", ObjectStatus::kNotFound));
  // Not found, inline and chunked, and DELETE of a missing key.
  steps.push_back(status_step(Kind::kInline, ObjectOpcode::kGet, "missing", ObjectStatus::kNotFound));
  steps.push_back(status_step(Kind::kWrite, ObjectOpcode::kGet, "missing", ObjectStatus::kNotFound));
  steps.push_back(del("missing", ObjectStatus::kNotFound));
  // Too small: the answer carries the size needed and the destination is untouched (sentinels verified).
  steps.push_back(put("small", 65536, 6));
  Step tiny = status_step(Kind::kWrite, ObjectOpcode::kGet, "small", ObjectStatus::kTooSmall, 65536);
  tiny.chunk_len = 65535;
  tiny.frags = 3;
  steps.push_back(tiny);
  steps.push_back(get_chunk("small", 65536, 6, 65536));  // the size it asked for works
  // Bad key lengths: 0 and 251 (a 251-byte key in the payload), a truncated key, trailing bytes on a GET.
  steps.push_back(raw(op(ObjectOpcode::kGet), {0}, ObjectStatus::kBadRequest));
  std::vector<std::uint8_t> long_key(252, 'k');
  long_key[0] = 251;
  steps.push_back(raw(op(ObjectOpcode::kGet), long_key, ObjectStatus::kBadRequest));
  steps.push_back(raw(op(ObjectOpcode::kDelete), {5, 'a', 'b'}, ObjectStatus::kBadRequest));
  steps.push_back(raw(op(ObjectOpcode::kGet), {1, 'a', 'x'}, ObjectStatus::kBadRequest));
  steps.push_back(raw(op(ObjectOpcode::kPut), {}, ObjectStatus::kBadRequest));
  // The longest valid key works.
  const std::string key250(250, 'z');
  steps.push_back(put(key250, 10, 7));
  steps.push_back(get_inline(key250, 10, 7));
  steps.push_back(del(key250));
  // Wrong message type: DELETE in a chunk request.
  steps.push_back(status_step(Kind::kRead, ObjectOpcode::kDelete, "small", ObjectStatus::kBadRequest));
  // Unknown opcode.
  steps.push_back(raw(0x99, {1, 'a'}, ObjectStatus::kUnknownOpcode));
  steps.push_back(del("small"));

  std::string msg;
  double secs = 0;
  const int rc = run_script(*gw, cs, std::move(steps), std::chrono::seconds(120), &msg, &secs);
  std::printf("object_service: statuses script in %.2f s\n", secs);
  EXPECT_EQ(rc, 1) << msg;
  ASSERT_TRUE(wait_connections(*gw, *cs.engine, 0, std::chrono::seconds(30)));
  shut_down(*gw, cs);

  const auto& oc = gw->service(0).counters();
  const auto& sc = gw->engine().core(0).counters;
  using PE = protocol::ObjectParseError;
  EXPECT_EQ(oc.parse_errors[static_cast<std::size_t>(PE::kBadKeyLength)], 2u);
  EXPECT_EQ(oc.parse_errors[static_cast<std::size_t>(PE::kKeyTruncated)], 1u);
  EXPECT_EQ(oc.parse_errors[static_cast<std::size_t>(PE::kTrailingBytes)], 1u);
  EXPECT_EQ(oc.parse_errors[static_cast<std::size_t>(PE::kEmptyPayload)], 1u);
  EXPECT_EQ(oc.parse_errors[static_cast<std::size_t>(PE::kWrongType)], 1u);
  EXPECT_EQ(oc.parse_errors[static_cast<std::size_t>(PE::kUnknownOpcode)], 1u);
  const auto putx = static_cast<std::size_t>(protocol::ObjectOp::kPut);
  EXPECT_EQ(oc.statuses[putx][dataplane::object_status_slot(ObjectStatus::kTooLarge)], 1u);
  EXPECT_EQ(sc.read_chunks, 1u) << "only the 64 KiB PUT read anything; the too-large one was refused first";
  EXPECT_EQ(sc.write_chunks, 1u) << "the too-small GET wrote nothing";
  expect_store_released(*gw);
}

TEST(ObjectService, NoSpaceWithASmallStore) {
  GatewayOptions o;
  o.region_bytes = 16ull << 20;
  o.store.capacity_bytes = 1100 * 1024;  // room for one 1 MiB value (+ its descriptor), not two
  o.store.max_objects = 1024;
  o.store.max_inflight = 64;
  std::string err;
  auto gw = Gateway::start(o, &err);
  ASSERT_TRUE(gw) << err;
  ClientSide cs;
  ASSERT_NO_FATAL_FAILURE(start_client(cs, 16 * kMiB));

  std::vector<Step> steps;
  steps.push_back(put("a", kMiB, 1));
  steps.push_back(put("b", kMiB, 2, ObjectStatus::kNoSpace));  // chunked: refused at reserve, no READ
  steps.push_back(put("c", 80 * 1024, 3, ObjectStatus::kNoSpace));
  steps.push_back(get_chunk("a", kMiB, 1, kMiB));
  steps.push_back(status_step(Kind::kInline, ObjectOpcode::kGet, "b", ObjectStatus::kNotFound));
  steps.push_back(del("a"));
  steps.push_back(put("b", kMiB, 2));  // the space came back
  steps.push_back(get_chunk("b", kMiB, 2, kMiB));
  steps.push_back(del("b"));

  std::string msg;
  double secs = 0;
  const int rc = run_script(*gw, cs, std::move(steps), std::chrono::seconds(120), &msg, &secs);
  std::printf("object_service: no-space script in %.2f s\n", secs);
  EXPECT_EQ(rc, 1) << msg;
  ASSERT_TRUE(wait_connections(*gw, *cs.engine, 0, std::chrono::seconds(30)));
  shut_down(*gw, cs);
  const auto& oc = gw->service(0).counters();
  const auto putx = static_cast<std::size_t>(protocol::ObjectOp::kPut);
  EXPECT_EQ(oc.statuses[putx][dataplane::object_status_slot(ObjectStatus::kNoSpace)], 2u);
  EXPECT_EQ(gw->engine().core(0).counters.read_chunks, 2u);
  expect_store_released(*gw);
}

// Decoder violations close the offending connection; failed RDMA (a bad rkey) fails it and the gateway
// releases the reservation / pin it held; after each the gateway serves a new connection.
TEST(ObjectService, MalformedAndFailedTransfersCloseThatConnectionNothingLeaksGatewayKeepsServing) {
  std::string err;
  auto gw = Gateway::start(GatewayOptions{}, &err);
  ASSERT_TRUE(gw) << err;
  ClientSide cs;
  ASSERT_NO_FATAL_FAILURE(start_client(cs, 16 * kMiB));
  std::string msg;
  double secs = 0;

  auto serves = [&](const char* what, std::uint32_t seed) {
    const std::string key = std::string("alive-") + what;
    const int rc =
        run_script(*gw, cs, {put(key, 100000, seed), get_chunk(key, 100000, seed, 100000), del(key)},
                   std::chrono::seconds(60), &msg, &secs);
    EXPECT_EQ(rc, 1) << "after " << what << ": " << msg;
    EXPECT_TRUE(wait_connections(*gw, *cs.engine, 0, std::chrono::seconds(30))) << what;
  };
  serves("start", 1);

  // One faulty request per connection: the gateway closes it (state 3), then serves a new one.
  struct Fault {
    const char* what;
    Step step;
    std::uint32_t serves_seed;
  };
  const Fault faults[] = {
      {"too-many-fragments",
       status_step(Kind::kInjectTooManyFragments, ObjectOpcode::kPut, "x", ObjectStatus::kOk), 2},
      {"wrap", status_step(Kind::kInjectWrap, ObjectOpcode::kPut, "x", ObjectStatus::kOk), 3},
      // A PUT whose READ fails (bad rkey): the reservation is aborted.
      {"bad-read", with_bad_rkey(put("bad-read", kMiB, 4)), 5},
  };
  for (const Fault& f : faults) {
    EXPECT_EQ(run_script(*gw, cs, {expect_close(f.step)}, std::chrono::seconds(60), &msg, &secs), 3)
        << f.what << ": " << msg;
    EXPECT_TRUE(wait_connections(*gw, *cs.engine, 0, std::chrono::seconds(30))) << f.what;
    serves(f.what, f.serves_seed);
  }

  // A GET whose WRITE fails (bad rkey): the pin is dropped (the value stays; deleting it frees everything).
  // Not in the table: the value is PUT first on the same connection, and what follows checks the pin.
  EXPECT_EQ(
      run_script(*gw, cs,
                 {put("pinned", kMiB, 6), expect_close(with_bad_rkey(get_chunk("pinned", kMiB, 6, kMiB)))},
                 std::chrono::seconds(60), &msg, &secs),
      3)
      << msg;
  EXPECT_TRUE(wait_connections(*gw, *cs.engine, 0, std::chrono::seconds(30)));
  const int rc =
      run_script(*gw, cs,
                 {status_step(Kind::kInline, ObjectOpcode::kGet, "bad-read", ObjectStatus::kNotFound),
                  get_chunk("pinned", kMiB, 6, kMiB), del("pinned")},
                 std::chrono::seconds(60), &msg, &secs);
  EXPECT_EQ(rc, 1) << msg;
  EXPECT_TRUE(wait_connections(*gw, *cs.engine, 0, std::chrono::seconds(30)));

  shut_down(*gw, cs);
  const auto& f = gw->engine().counters().failures_by_status;
  const auto& sc = gw->engine().core(0).counters;
  const auto& oc = gw->service(0).counters();
  std::printf(
      "object_service: gateway closed %llu too-many-fragments, %llu fragment-wraps; bulk failures %llu "
      "(completion errors %llu, flushed %llu)\n",
      static_cast<unsigned long long>(f[static_cast<std::size_t>(protocol::WireError::kTooManyFragments)]),
      static_cast<unsigned long long>(f[static_cast<std::size_t>(protocol::WireError::kFragmentWraps)]),
      static_cast<unsigned long long>(oc.bulk_failures),
      static_cast<unsigned long long>(sc.completions_error),
      static_cast<unsigned long long>(sc.completions_flushed));
  EXPECT_EQ(f[static_cast<std::size_t>(protocol::WireError::kTooManyFragments)], 1u);
  EXPECT_EQ(f[static_cast<std::size_t>(protocol::WireError::kFragmentWraps)], 1u);
  EXPECT_EQ(sc.wire_errors[static_cast<std::size_t>(protocol::WireError::kTooManyFragments)], 1u);
  EXPECT_EQ(sc.wire_errors[static_cast<std::size_t>(protocol::WireError::kFragmentWraps)], 1u);
  EXPECT_EQ(oc.bulk_failures, 2u) << "the failed READ and the failed WRITE";
  EXPECT_EQ(oc.released_at_close, 0u) << "the bulk hooks released, not on_close_st";
  expect_store_released(*gw);
}

}  // namespace

int main(int argc, char** argv) {
  return rdmagate::testfix::gateway_test_main(argc, argv, "object_service_test");
}

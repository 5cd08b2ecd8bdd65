// The protocol core's cost per message: encode, patch the returned credits at post time, decode on
// the other side, and the credit accounting of both sides, as the engine does it.
//
// Two endpoints in one thread, no copy in between (the NIC's DMA is not ours to measure):
//   one-way    A streams requests to B; B returns credits with high-water NOOPs, whose cost is
//              included (amortised over high_water messages).
//   ping-pong  A sends a request, B answers it; every header carries the returned credit.
// Reported per message: `ns_per_msg`. The parts are measured alone too, to see where time goes.

#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "protocol/credit_machine.hpp"
#include "protocol/message.hpp"

namespace rdmagate::protocol {
namespace {

constexpr std::uint16_t kDepth = 64;
constexpr std::uint32_t kMaxMessage = 4096;
constexpr std::uint16_t kTxCount = 8;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "protocol_bench: %s\n", what);
    std::abort();
  }
}

Session make_session(bool side_a) {
  Session s;
  s.params = ConnParams{kDepth, kMaxMessage, kMaxFragments, 1u << 30};
  s.local_incarnation = side_a ? 0xA11CE : 0xB0B;
  s.peer_incarnation = side_a ? 0xB0B : 0xA11CE;
  return s;
}

// One side of a connection: a credit machine and a few tx buffers.
struct Side {
  explicit Side(bool a)
      : session(make_session(a)), links(kTxCount), m(CreditConfig{kDepth, 0, 0, 0}, links, 0) {}
  Session session;
  std::vector<std::uint16_t> links;
  CreditMachine m;
  std::array<std::array<std::uint8_t, kMaxMessage>, kTxCount> tx{};
  std::array<std::uint32_t, kTxCount> len{};
  Message rx;  // last decoded message
};

alignas(64) const std::array<std::uint8_t, 64> kPayload64 = [] {
  std::array<std::uint8_t, 64> p{};
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::uint8_t>(i);
  return p;
}();

Message inline_request() {
  Message m;
  m.type = MessageType::kInlineRequest;
  m.opcode = 7;
  m.cookie = 1;
  m.payload = kPayload64;
  return m;
}

Message chunk_request() {
  Message m;
  m.type = MessageType::kWriteChunkRequest;
  m.opcode = 9;
  m.cookie = 1;
  m.chunk.count = 4;
  for (std::uint16_t i = 0; i < 4; ++i)
    m.chunk.fragments[i] = Fragment{0x7f0000000000ull + i * 0x10000ull, 65536, 0x1234};
  return m;
}

Message inline_response() {
  Message m;
  m.type = MessageType::kInlineResponse;
  m.opcode = 7;
  m.cookie = 1;
  m.payload = kPayload64;
  return m;
}

Message completion() {
  Message m;
  m.type = MessageType::kCompletion;
  m.opcode = 9;
  m.cookie = 1;
  m.byte_count = 4 * 65536;
  return m;
}

// `to` decodes one posted message, checks and takes its credits, and re-posts the receive.
inline void receive(Side& to, std::span<const std::uint8_t> bytes, std::uint64_t now) {
  const WireError d = decode_message(bytes, to.session, to.rx);
  const CreditClass rc = credit_class(to.rx.type);
  const CreditError c = to.m.on_receive(rc, to.rx.credits, now);
  benchmark::DoNotOptimize(d);
  benchmark::DoNotOptimize(c);
  to.m.on_reposted(rc);
  benchmark::DoNotOptimize(to.rx);
}

// Posts descriptor `s.tx` of `from` (the returned credits are known only now) and delivers it.
inline void post(Side& from, Side& to, const SendStep& s, std::uint64_t now) {
  const std::span<std::uint8_t> bytes{from.tx[s.tx].data(), from.len[s.tx]};
  patch_credits(bytes, s.credits, from.session);
  receive(to, bytes, now);
}

// The engine's send path: encode into descriptor `tx`, then send at once if credits allow, else
// leave it queued and post whatever next_send releases. Returns the number of messages posted.
inline int transfer(Side& from, Side& to, const Message& msg, CreditClass cls, std::uint16_t tx,
                    std::uint64_t now) {
  const Encoded<WireError> e = encode_message(msg, from.session, from.tx[tx]);
  from.len[tx] = static_cast<std::uint32_t>(e.size);
  int sent = 0;
  if (cls != CreditClass::kNoop) {
    const SendStep s = from.m.send_or_queue(cls, tx, now);
    if (s.kind == SendKind::kSend) {
      post(from, to, s, now);
      return 1;
    }
  } else {
    from.m.enqueue(cls, tx);
  }
  for (SendStep s = from.m.next_send(now); s.kind != SendKind::kNone; s = from.m.next_send(now)) {
    if (s.kind == SendKind::kDropNoop) continue;
    post(from, to, s, now);
    ++sent;
  }
  return sent;
}

void per_message(benchmark::State& state, std::uint64_t messages) {
  state.counters["ns_per_msg"] = benchmark::Counter(
      static_cast<double>(messages), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<std::int64_t>(messages));
}

void one_way(benchmark::State& state, const Message& msg) {
  Side a(true), b(false);
  std::uint64_t now = 0, data = 0, noops = 0;
  const Message noop{};
  for (auto _ : state) {
    data += static_cast<std::uint64_t>(transfer(a, b, msg, CreditClass::kRequest, 0, ++now));
    if (b.m.wants_noop(now))
      noops += static_cast<std::uint64_t>(transfer(b, a, noop, CreditClass::kNoop, 0, now));
  }
  check(data == static_cast<std::uint64_t>(state.iterations()), "a request waited for credits");
  per_message(state, data);
  state.counters["noops_per_msg"] = static_cast<double>(noops) / static_cast<double>(data);
}

void ping_pong(benchmark::State& state, const Message& request, const Message& answer) {
  Side a(true), b(false);
  std::uint64_t now = 0, sent = 0;
  for (auto _ : state) {
    sent += static_cast<std::uint64_t>(transfer(a, b, request, CreditClass::kRequest, 0, ++now));
    sent += static_cast<std::uint64_t>(transfer(b, a, answer, CreditClass::kReserved, 0, now));
  }
  check(sent == 2 * static_cast<std::uint64_t>(state.iterations()), "a message waited for credits");
  per_message(state, sent);
}

void BM_OneWay_Inline64(benchmark::State& s) {
  one_way(s, inline_request());
}
void BM_OneWay_Chunk4(benchmark::State& s) {
  one_way(s, chunk_request());
}
void BM_PingPong_Inline64(benchmark::State& s) {
  ping_pong(s, inline_request(), inline_response());
}
void BM_PingPong_Chunk4(benchmark::State& s) {
  ping_pong(s, chunk_request(), completion());
}

// ---- the parts alone ----

void BM_Part_Encode(benchmark::State& state, const Message& msg) {
  const Session s = make_session(true);
  std::array<std::uint8_t, kMaxMessage> buf{};
  for (auto _ : state) {
    auto e = encode_message(msg, s, buf);
    benchmark::DoNotOptimize(e);
    benchmark::ClobberMemory();
  }
  per_message(state, static_cast<std::uint64_t>(state.iterations()));
}

void BM_Part_Decode(benchmark::State& state, const Message& msg) {
  const Session tx = make_session(true);
  const Session rx = make_session(false);
  std::array<std::uint8_t, kMaxMessage> buf{};
  const auto e = encode_message(msg, tx, buf);
  check(e.ok(), "encode");
  Message out;
  for (auto _ : state) {
    auto d = decode_message({buf.data(), e.size}, rx, out);
    benchmark::DoNotOptimize(d);
    benchmark::DoNotOptimize(out);
  }
  per_message(state, static_cast<std::uint64_t>(state.iterations()));
}

// Credit accounting of one message on both sides: send_or_queue, on_receive, on_reposted, plus
// the receiver's NOOP check and its high-water NOOPs.
void BM_Part_Credits(benchmark::State& state) {
  std::vector<std::uint16_t> la(kTxCount), lb(kTxCount);
  CreditMachine a(CreditConfig{kDepth, 0, 0, 0}, la, 0), b(CreditConfig{kDepth, 0, 0, 0}, lb, 0);
  std::uint64_t now = 0;
  for (auto _ : state) {
    ++now;
    const SendStep s = a.send_or_queue(CreditClass::kRequest, 0, now);
    benchmark::DoNotOptimize(s);
    b.on_receive(CreditClass::kRequest, s.credits, now);
    b.on_reposted(CreditClass::kRequest);
    if (b.wants_noop(now)) {
      b.enqueue(CreditClass::kNoop, 0);
      const SendStep n = b.next_send(now);
      a.on_receive(CreditClass::kNoop, n.credits, now);
      a.on_reposted(CreditClass::kNoop);
    }
  }
  per_message(state, static_cast<std::uint64_t>(state.iterations()));
}

BENCHMARK(BM_OneWay_Inline64);
BENCHMARK(BM_OneWay_Chunk4);
BENCHMARK(BM_PingPong_Inline64);
BENCHMARK(BM_PingPong_Chunk4);
BENCHMARK_CAPTURE(BM_Part_Encode, inline64, inline_request());
BENCHMARK_CAPTURE(BM_Part_Encode, chunk4, chunk_request());
BENCHMARK_CAPTURE(BM_Part_Decode, inline64, inline_request());
BENCHMARK_CAPTURE(BM_Part_Decode, chunk4, chunk_request());
BENCHMARK(BM_Part_Credits);

}  // namespace
}  // namespace rdmagate::protocol

BENCHMARK_MAIN();

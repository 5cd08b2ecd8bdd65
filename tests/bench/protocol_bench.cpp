// The protocol core's cost per message: the sender's encode and credit decision, the receiver's decode and
// credit check, and the credit accounting of both sides, in the order the core loop runs them
// (dataplane/core_send.hpp, core_loop.hpp): check_encodable, send_or_queue, write_message with the final
// credit count; decode_message, on_receive, on_reposted; wants_noop and next_send for the NOOPs.
//
// Two endpoints in one thread, no copy in between (the NIC's DMA is not ours to measure):
//   one-way    A streams requests to B; B returns credits with high-water NOOPs, whose cost is
//              included (amortised over high_water messages). B checks for a NOOP after every message
//              (a burst of one, the worst case).
//   ping-pong  A sends a request, B answers it; every header carries the returned credit.
// Reported per message: `ns_per_msg`. The parts are measured alone too, to see where time goes.
//
// Instructions per message, which do not depend on the machine's speed or load:
//   protocol_bench --instructions [benchmark flags]   runs the benchmarks, then every case again under
//       callgrind (valgrind must be on PATH), and prints a table of ns and instructions per message
//   protocol_bench --count <case> <steps>             runs one case; callgrind collects only inside
//       counted_run (--toggle-collect), so setup and the harness cost nothing

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
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

Message noop() {
  return Message{};
}

// The harness's helpers are always inlined: the core loop calls the protocol functions from inside its own
// functions, so a wrapper's call and register saves here would be counted against the protocol.

// `to` decodes one posted message, checks and takes its credits, and re-posts the receive.
[[gnu::always_inline]] inline void receive(Side& to, std::span<const std::uint8_t> bytes, std::uint64_t now) {
  const WireError d = decode_message(bytes, to.session, to.rx);
  const CreditClass rc = credit_class(to.rx.type);
  const CreditError c = to.m.on_receive(rc, to.rx.credits, now);
  benchmark::DoNotOptimize(d);
  benchmark::DoNotOptimize(c);
  to.m.on_reposted(rc);
  benchmark::DoNotOptimize(to.rx);
}

// A message the credit machine let go from a queue: its credit count is known only now.
[[gnu::always_inline]] inline void post_queued(Side& from, Side& to, const SendStep& s, std::uint64_t now) {
  const std::span<std::uint8_t> bytes{from.tx[s.tx].data(), from.len[s.tx]};
  patch_credits(bytes, s.credits, from.session);
  receive(to, bytes, now);
}

// Posts whatever the credit machine of `from` lets go now. Returns the number of messages posted.
[[gnu::always_inline]] inline int pump(Side& from, Side& to, std::uint64_t now) {
  int sent = 0;
  for (SendStep s = from.m.next_send(now); s.kind != SendKind::kNone; s = from.m.next_send(now)) {
    if (s.kind == SendKind::kDropNoop) continue;
    post_queued(from, to, s, now);
    ++sent;
  }
  return sent;
}

// The engine's send_st: check, credit decision, then one write with the final credit count (a message that
// must wait is written now and patched when it leaves its queue). Returns the number of messages posted.
[[gnu::always_inline]] inline int send(Side& from, Side& to, Message& msg, std::uint16_t tx,
                                       std::uint64_t now) {
  const WireError e = check_encodable(msg, from.session, kMaxMessage);
  benchmark::DoNotOptimize(e);
  const SendStep s = from.m.send_or_queue(credit_class(msg.type), tx, now);
  msg.credits = s.credits;
  from.len[tx] = static_cast<std::uint32_t>(write_message(msg, from.session, from.tx[tx]));
  if (s.kind == SendKind::kSend) {
    receive(to, {from.tx[tx].data(), from.len[tx]}, now);
    return 1;
  }
  return pump(from, to, now);
}

// The engine's pump_sends_st on the receiving side: a NOOP when the credit machine wants one.
[[gnu::always_inline]] inline int noop_if_wanted(Side& from, Side& to, Message& noop_msg, std::uint16_t tx,
                                                 std::uint64_t now) {
  if (!from.m.wants_noop(now)) return 0;
  noop_msg.credits = 0;
  from.len[tx] = static_cast<std::uint32_t>(write_message(noop_msg, from.session, from.tx[tx]));
  from.m.enqueue(CreditClass::kNoop, tx);
  return pump(from, to, now);
}

// ---- the cases: each a rig whose step() does one unit of work and says how many messages it moved ----

struct OneWay {
  explicit OneWay(Message m) : msg(m) {}
  [[gnu::always_inline]] std::uint64_t step() {
    const int sent = send(*a, *b, msg, 0, ++now);
    noops += static_cast<std::uint64_t>(noop_if_wanted(*b, *a, noop_msg, 0, now));
    return static_cast<std::uint64_t>(sent);
  }
  void finish(std::uint64_t steps, std::uint64_t messages) const {
    check(messages == steps, "a request waited for credits");
  }
  std::unique_ptr<Side> a = std::make_unique<Side>(true), b = std::make_unique<Side>(false);
  Message msg, noop_msg = noop();
  std::uint64_t now = 0, noops = 0;
};

struct PingPong {
  PingPong(Message req, Message ans) : request(req), answer(ans) {}
  [[gnu::always_inline]] std::uint64_t step() {
    const int sent = send(*a, *b, request, 0, ++now);
    return static_cast<std::uint64_t>(sent + send(*b, *a, answer, 0, now));
  }
  void finish(std::uint64_t steps, std::uint64_t messages) const {
    check(messages == 2 * steps, "a message waited for credits");
  }
  std::unique_ptr<Side> a = std::make_unique<Side>(true), b = std::make_unique<Side>(false);
  Message request, answer;
  std::uint64_t now = 0;
};

// check_encodable and write_message with a credit count, as send_st runs them.
struct EncodePart {
  explicit EncodePart(Message m) : msg(m) {}
  [[gnu::always_inline]] std::uint64_t step() {
    const WireError e = check_encodable(msg, s, buf.size());
    msg.credits = static_cast<std::uint16_t>(++credits & 31);
    const std::size_t n = write_message(msg, s, buf);
    benchmark::DoNotOptimize(e);
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
    return 1;
  }
  void finish(std::uint64_t, std::uint64_t) const {}
  Message msg;
  Session s = make_session(true);
  std::unique_ptr<std::array<std::uint8_t, kMaxMessage>> holder =
      std::make_unique<std::array<std::uint8_t, kMaxMessage>>();
  std::span<std::uint8_t> buf{*holder};
  std::uint32_t credits = 0;
};

struct DecodePart {
  explicit DecodePart(const Message& m) {
    const auto e = encode_message(m, make_session(true), buf);
    check(e.ok(), "encode");
    size = e.size;
  }
  [[gnu::always_inline]] std::uint64_t step() {
    const WireError d = decode_message({buf.data(), size}, rx, out);
    benchmark::DoNotOptimize(d);
    benchmark::DoNotOptimize(out);
    return 1;
  }
  void finish(std::uint64_t, std::uint64_t) const {}
  std::array<std::uint8_t, kMaxMessage> buf{};
  std::size_t size = 0;
  Session rx = make_session(false);
  Message out;
};

// Credit accounting of one message on both sides: send_or_queue, on_receive, on_reposted, plus the
// receiver's NOOP check and its high-water NOOPs.
struct CreditsPart {
  [[gnu::always_inline]] std::uint64_t step() {
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
    return 1;
  }
  void finish(std::uint64_t steps, std::uint64_t) const {
    check(a.stats().sent[index_of(CreditClass::kRequest)] == steps, "a request waited for credits");
  }
  std::vector<std::uint16_t> la = std::vector<std::uint16_t>(kTxCount),
                             lb = std::vector<std::uint16_t>(kTxCount);
  CreditMachine a{CreditConfig{kDepth, 0, 0, 0}, la, 0}, b{CreditConfig{kDepth, 0, 0, 0}, lb, 0};
  std::uint64_t now = 0;
};

// Every case by name: the benchmark's name, and what --count takes.
struct Case {
  const char* name;
  std::uint64_t (*run_bench)(benchmark::State&);  // returns messages moved
  std::uint64_t (*run_counted)(std::uint64_t steps);
};

template <typename Rig>
std::uint64_t bench_loop(benchmark::State& state, Rig& rig) {
  std::uint64_t messages = 0;
  for (auto _ : state) messages += rig.step();
  rig.finish(static_cast<std::uint64_t>(state.iterations()), messages);
  return messages;
}

// The only function callgrind collects in (--toggle-collect='*counted_run*').
template <typename Rig>
[[gnu::noinline]] std::uint64_t counted_run(Rig& rig, std::uint64_t steps) {
  std::uint64_t messages = 0;
  for (std::uint64_t i = 0; i < steps; ++i) messages += rig.step();
  return messages;
}

template <typename Rig, auto make>
Case make_case(const char* name) {
  return Case{name,
              [](benchmark::State& state) {
                Rig rig = make();
                return bench_loop(state, rig);
              },
              [](std::uint64_t steps) {
                Rig rig = make();
                const std::uint64_t messages = counted_run(rig, steps);
                rig.finish(steps, messages);
                return messages;
              }};
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      make_case<OneWay, [] { return OneWay(inline_request()); }>("OneWay_Inline64"),
      make_case<OneWay, [] { return OneWay(chunk_request()); }>("OneWay_Chunk4"),
      make_case<PingPong, [] { return PingPong(inline_request(), inline_response()); }>("PingPong_Inline64"),
      make_case<PingPong, [] { return PingPong(chunk_request(), completion()); }>("PingPong_Chunk4"),
      make_case<EncodePart, [] { return EncodePart(inline_request()); }>("Part_Encode/inline64"),
      make_case<EncodePart, [] { return EncodePart(chunk_request()); }>("Part_Encode/chunk4"),
      make_case<DecodePart, [] { return DecodePart(inline_request()); }>("Part_Decode/inline64"),
      make_case<DecodePart, [] { return DecodePart(chunk_request()); }>("Part_Decode/chunk4"),
      make_case<CreditsPart, [] { return CreditsPart(); }>("Part_Credits"),
  };
  return all;
}

void register_benchmarks() {
  for (const Case& c : cases()) {
    benchmark::RegisterBenchmark(c.name, [run = c.run_bench](benchmark::State& state) {
      const std::uint64_t messages = run(state);
      state.counters["ns_per_msg"] = benchmark::Counter(
          static_cast<double>(messages), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
      state.SetItemsProcessed(static_cast<std::int64_t>(messages));
    });
  }
}

// Console output as usual, and each case's ns_per_msg kept for the instructions table.
class Recorder : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      const auto it = r.counters.find("ns_per_msg");
      if (it != r.counters.end()) ns_per_msg[r.benchmark_name()] = it->second.value * 1e9;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> ns_per_msg;
};

constexpr std::uint64_t kCountedSteps = 1u << 16;

// Runs `--count name steps` under callgrind: instructions per message, or a negative value on failure.
double instructions_per_message(const char* self, const Case& c) {
  char out[] = "/tmp/protocol_bench.cg.XXXXXX";
  const int fd = mkstemp(out);
  if (fd < 0) return -1;
  close(fd);
  const std::string cmd = std::string("valgrind --tool=callgrind --collect-atstart=no ") +
                          "--toggle-collect='*counted_run*' --callgrind-out-file=" + out + " '" + self +
                          "' --count '" + c.name + "' " + std::to_string(kCountedSteps) + " 2>/dev/null";
  unsigned long long messages = 0, ir = 0;
  // The counted run prints how many messages it moved (a ping-pong step moves two).
  if (FILE* p = popen(cmd.c_str(), "r")) {
    if (std::fscanf(p, "%llu", &messages) != 1) messages = 0;
    if (pclose(p) != 0) messages = 0;
  }
  if (FILE* f = std::fopen(out, "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::sscanf(line, "summary: %llu", &ir) == 1) break;
    }
    std::fclose(f);
  }
  std::remove(out);
  if (messages == 0 || ir == 0) return -1;
  return static_cast<double>(ir) / static_cast<double>(messages);
}

int count_main(const char* name, const char* steps_arg) {
  const std::uint64_t steps = std::strtoull(steps_arg, nullptr, 10);
  for (const Case& c : cases()) {
    if (name == std::string_view(c.name)) {
      std::printf("%llu\n", static_cast<unsigned long long>(c.run_counted(steps)));
      return 0;
    }
  }
  std::fprintf(stderr, "protocol_bench: no case named %s\n", name);
  return 2;
}

}  // namespace
}  // namespace rdmagate::protocol

int main(int argc, char** argv) {
  using namespace rdmagate::protocol;
  if (argc == 4 && std::string_view(argv[1]) == "--count") return count_main(argv[2], argv[3]);
  bool instructions = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::string_view(argv[i]) == "--instructions") {
      instructions = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  register_benchmarks();
  Recorder recorder;
  benchmark::RunSpecifiedBenchmarks(&recorder);
  benchmark::Shutdown();
  if (!instructions) return 0;
  std::printf("\n%-22s %10s %12s   (instructions: callgrind, %llu steps each)\n", "case", "ns/msg",
              "instr/msg", static_cast<unsigned long long>(kCountedSteps));
  int status = 0;
  for (const Case& c : cases()) {
    const auto ns = recorder.ns_per_msg.find(c.name);
    if (ns == recorder.ns_per_msg.end()) continue;  // filtered out
    const double ir = instructions_per_message(argv[0], c);
    if (ir < 0) {
      std::fprintf(stderr, "protocol_bench: callgrind run of %s failed (is valgrind on PATH?)\n", c.name);
      status = 1;
      continue;
    }
    std::printf("%-22s %10.1f %12.1f\n", c.name, ns->second, ir);
  }
  return status;
}

// Host unit tests of the engine's verbs-free data-plane pieces: the wr_id encoding and the services' logic
// (driven through a fake core API, so no CQ, QP or EAL is needed).
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "dataplane/core_conn.hpp"
#include "tests/support/test_services.hpp"
#include "tools/bench/echo_client_service.hpp"

namespace rdmagate::dataplane {
namespace {

// The longest configurable dead-peer time (a day) at a 2.25 GHz TSC: us * hz alone would overflow 64 bits.
TEST(UsToTsc, ExactAndNoOverflowForAnyConfigurableTime) {
  using rdmagate::dataplane::us_to_tsc;
  EXPECT_EQ(us_to_tsc(0, 2'250'000'000), 0u);
  EXPECT_EQ(us_to_tsc(20'000, 2'250'000'000), 45'000'000u);
  EXPECT_EQ(us_to_tsc(1'500'001, 1'000'000'000), 1'500'001'000u);
  EXPECT_EQ(us_to_tsc(86'400'000'000, 2'250'000'000), 194'400'000'000'000u);
}

TEST(WrId, KindGenerationAndDescriptorRoundTrip) {
  std::vector<RxDesc> rx(4);
  std::vector<TxDesc> tx(4);
  for (const WrKind k : {WrKind::kRecv, WrKind::kSend, WrKind::kDrain, WrKind::kRdma, WrKind::kRdmaFiller}) {
    for (const std::uint16_t gen :
         {std::uint16_t{0}, std::uint16_t{1}, std::uint16_t{0x8001}, std::uint16_t{0xffff}}) {
      const std::uint64_t a = make_wr_id(&rx[3], k, gen);
      EXPECT_EQ(wr_kind(a), k);
      EXPECT_EQ(wr_gen(a), gen);
      EXPECT_EQ(wr_desc<RxDesc>(a), &rx[3]);
      const std::uint64_t b = make_wr_id(&tx[1], k, gen);
      EXPECT_EQ(wr_kind(b), k);
      EXPECT_EQ(wr_gen(b), gen);
      EXPECT_EQ(wr_desc<TxDesc>(b), &tx[1]);
    }
  }
  // Two incarnations of one descriptor differ only in the generation.
  EXPECT_NE(make_wr_id(&tx[0], WrKind::kSend, 1), make_wr_id(&tx[0], WrKind::kSend, 2));
  static_assert(alignof(RxDesc) > kWrKindMask && alignof(TxDesc) > kWrKindMask,
                "descriptor alignment leaves the low bits for the kind");
}

// A service's typed state lives in the connection's bytes: reset starts it from its member initialisers,
// as reads it back, and control's reset (assigning a fresh ServiceConnState) zeroes it.
TEST(ServiceConnState, TypedStateResetReadAndZeroed) {
  struct State {
    std::uint32_t index = 0xffffffffu;
    std::uint64_t count = 0;
  };
  CoreConn c;
  State& s = c.svc.reset<State>();
  EXPECT_EQ(s.index, 0xffffffffu);
  s.count = 7;
  EXPECT_EQ(c.svc.as<State>().count, 7u);
  EXPECT_EQ(&c.svc.as<State>(), &s);
  c.svc = ServiceConnState{};
  EXPECT_EQ(c.svc.as<State>().index, 0u);
  EXPECT_EQ(c.svc.as<State>().count, 0u);
}

// What a service sees of the core loop.
struct FakeApi {
  struct Sent {
    protocol::MessageType type;
    std::uint16_t opcode;
    std::uint64_t cookie;
    std::vector<std::uint8_t> payload;
  };
  std::vector<Sent> sent;
  std::uint32_t tx_free = 64;
  bool fail_sends = false;
  std::uint64_t now = 1000;
  bool quiescing = false;

  bool quiescing_st() const { return quiescing; }
  bool send_st(CoreConn&, protocol::MessageType t, std::uint16_t op, std::uint64_t cookie,
               std::span<const std::uint8_t> p, std::uint32_t = 0, std::uint32_t = 0) {
    if (fail_sends) return false;
    sent.push_back(Sent{t, op, cookie, std::vector<std::uint8_t>(p.begin(), p.end())});
    return true;
  }
  // A built message (the bench's AUTH); recorded like send_st's.
  bool send_built_st(CoreConn&, const protocol::Message& m) {
    if (fail_sends) return false;
    sent.push_back(
        Sent{m.type, m.opcode, m.cookie, std::vector<std::uint8_t>(m.payload.begin(), m.payload.end())});
    return true;
  }
  std::uint32_t tx_available_st(const CoreConn&) const { return tx_free; }
  std::uint64_t now_tsc_st() const { return now; }
  std::uint64_t tsc_hz() const { return 1'000'000'000; }
};

protocol::Message response_to(const FakeApi::Sent& s) {
  protocol::Message m;
  m.type = protocol::MessageType::kInlineResponse;
  m.opcode = s.opcode;
  m.cookie = s.cookie;
  m.payload = std::span<const std::uint8_t>(s.payload);
  return m;
}

TEST(EchoService, AnswersWithTheSamePayloadOpcodeAndCookie) {
  EchoService echo;
  FakeApi api;
  CoreConn c;
  const std::uint8_t data[5] = {1, 2, 3, 4, 5};
  protocol::Message m;
  m.type = protocol::MessageType::kInlineRequest;
  m.opcode = 7;
  m.cookie = 99;
  m.payload = data;
  echo.on_request_st(api, c, m);
  ASSERT_EQ(api.sent.size(), 1u);
  EXPECT_EQ(api.sent[0].type, protocol::MessageType::kInlineResponse);
  EXPECT_EQ(api.sent[0].opcode, 7);
  EXPECT_EQ(api.sent[0].cookie, 99u);
  EXPECT_EQ(api.sent[0].payload, std::vector<std::uint8_t>(data, data + 5));
  api.fail_sends = true;
  echo.on_request_st(api, c, m);
  EXPECT_EQ(echo.send_failures, 1u);
}

TEST(EchoClientService, KeepsTheWindowFullAndVerifiesEveryAnswer) {
  EchoClientResults res;
  EchoClientConfig cfg;
  cfg.messages_per_conn = 50;
  cfg.max_payload = 20;
  cfg.window = 4;
  auto svc = std::make_unique<EchoClientService>(cfg, res);
  FakeApi api;
  CoreConn c;
  svc->on_adopt_st(api, c);
  ASSERT_EQ(api.sent.size(), 4u);  // the window
  std::size_t answered = 0;
  while (answered < api.sent.size()) {
    const FakeApi::Sent s = api.sent[answered++];
    EXPECT_EQ(s.payload.size(), s.cookie % (cfg.max_payload + 1));
    svc->on_response_st(api, c, response_to(s));
    EXPECT_LE(api.sent.size() - answered, cfg.window);
  }
  EXPECT_EQ(api.sent.size(), 50u);
  EXPECT_EQ(res.connections_done.load(), 1u);
  EXPECT_EQ(res.verified.load(), 50u);
  EXPECT_EQ(res.mismatches.load(), 0u);
}

TEST(EchoClientService, CountsACorruptedAnswer) {
  EchoClientResults res;
  EchoClientConfig cfg;
  cfg.messages_per_conn = 3;
  cfg.max_payload = 8;
  cfg.window = 3;
  auto svc = std::make_unique<EchoClientService>(cfg, res);
  FakeApi api;
  CoreConn c;
  svc->on_adopt_st(api, c);
  ASSERT_EQ(api.sent.size(), 3u);
  FakeApi::Sent bad = api.sent[1];  // cookie 2: two payload bytes
  ASSERT_EQ(bad.payload.size(), 2u);
  bad.payload[1] ^= 0x40;
  svc->on_response_st(api, c, response_to(api.sent[0]));
  svc->on_response_st(api, c, response_to(bad));
  FakeApi::Sent wrong_size = api.sent[2];
  wrong_size.payload.push_back(0);
  svc->on_response_st(api, c, response_to(wrong_size));
  EXPECT_EQ(res.mismatches.load(), 2u);
  EXPECT_EQ(res.verified.load(), 1u);
  EXPECT_EQ(res.connections_done.load(), 1u);
}

TEST(EchoClientService, StopsWhenDescriptorsRunLow) {
  EchoClientResults res;
  EchoClientConfig cfg;
  cfg.window = 16;
  auto svc = std::make_unique<EchoClientService>(cfg, res);
  FakeApi api;
  api.tx_free = 2;  // the service leaves two descriptors for NOOPs and answers
  CoreConn c;
  svc->on_adopt_st(api, c);
  EXPECT_TRUE(api.sent.empty());
}

// SIGTERM drain: a quiescing responder answers kCompletion kNoResources; the client stops sending on that
// connection, counts the refusal as an answer (not a mismatch), and accounts sent/answered/lost at close.
TEST(EchoClientService, ARefusalStopsTheConnectionAndIsAccountedAtClose) {
  EchoClientResults res;
  EchoClientConfig cfg;
  cfg.messages_per_conn = UINT64_MAX;
  cfg.max_payload = 8;
  cfg.window = 4;
  auto svc = std::make_unique<EchoClientService>(cfg, res);
  FakeApi api;
  CoreConn c;
  svc->on_adopt_st(api, c);
  ASSERT_EQ(api.sent.size(), 4u);
  svc->on_response_st(api, c, response_to(api.sent[0]));  // answered: the window refills
  ASSERT_EQ(api.sent.size(), 5u);
  protocol::Message refusal;
  refusal.type = protocol::MessageType::kCompletion;
  refusal.opcode = api.sent[1].opcode;
  refusal.cookie = api.sent[1].cookie;
  refusal.status = static_cast<std::uint32_t>(protocol::CompletionStatus::kNoResources);
  svc->on_response_st(api, c, refusal);
  EXPECT_EQ(api.sent.size(), 5u) << "no new request after a refusal";
  EXPECT_EQ(svc->pending_st(c), 3u);
  svc->on_response_st(api, c, response_to(api.sent[2]));
  EXPECT_EQ(api.sent.size(), 5u);
  svc->on_close_st(api, c);
  EXPECT_EQ(res.closed_sent.load(), 5u);
  EXPECT_EQ(res.closed_answered.load(), 3u);
  EXPECT_EQ(res.closed_refused.load(), 1u);
  EXPECT_EQ(res.closed_lost.load(), 2u);
  EXPECT_EQ(res.mismatches.load(), 0u);
}

TEST(EchoClientService, StartsNothingWhileQuiescing) {
  EchoClientResults res;
  EchoClientConfig cfg;
  auto svc = std::make_unique<EchoClientService>(cfg, res);
  FakeApi api;
  api.quiescing = true;
  CoreConn c;
  svc->on_adopt_st(api, c);
  EXPECT_TRUE(api.sent.empty());
}

}  // namespace
}  // namespace rdmagate::dataplane

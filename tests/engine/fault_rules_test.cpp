// Host tests of the fault-injection rules (dataplane/fault_rules.*, docs/faults.md): the parser accepts
// exactly the documented syntax and names what is wrong otherwise; the canonical text parses back to the same
// rule; peer prefixes match as documented; a table knows its message rules and its qp_err peers.
#include "dataplane/fault_rules.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <string>
#include <vector>

#include "protocol/message.hpp"
#include "protocol/object_wire.hpp"

namespace rdmagate::dataplane {
namespace {

using protocol::MessageType;

constexpr std::uint8_t bit(MessageType t) {
  return static_cast<std::uint8_t>(1u << static_cast<unsigned>(t));
}

FaultRule parse_ok(std::string_view text) {
  FaultRule r;
  std::string err;
  EXPECT_TRUE(parse_fault_rule(text, r, &err)) << text << ": " << err;
  return r;
}

std::string parse_error(std::string_view text) {
  FaultRule r;
  std::string err;
  EXPECT_FALSE(parse_fault_rule(text, r, &err)) << text;
  return err;
}

PeerIp v4(const char* a) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  EXPECT_EQ(inet_pton(AF_INET, a, &sa.sin_addr), 1);
  return fault_peer_ip(reinterpret_cast<const sockaddr*>(&sa));
}

PeerIp v6(const char* a) {
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  EXPECT_EQ(inet_pton(AF_INET6, a, &sa.sin6_addr), 1);
  return fault_peer_ip(reinterpret_cast<const sockaddr*>(&sa));
}

TEST(FaultRules, TheIssuesExampleParsesToWhatItSays) {
  const FaultRule r = parse_ok("drop dir=rx type=request opcode=put peer=10.0.0.2 every=10");
  EXPECT_EQ(r.action, FaultAction::kDrop);
  EXPECT_EQ(r.dirs, kFaultRx);
  EXPECT_EQ(r.types, bit(MessageType::kInlineRequest) | bit(MessageType::kReadChunkRequest) |
                         bit(MessageType::kWriteChunkRequest));
  EXPECT_FALSE(r.any_opcode);
  EXPECT_EQ(r.opcode, static_cast<std::uint16_t>(protocol::ObjectOpcode::kPut));
  EXPECT_FALSE(r.any_peer);
  EXPECT_EQ(r.peer_prefix, 128);
  EXPECT_TRUE(fault_peer_matches(r, v4("10.0.0.2")));
  EXPECT_FALSE(fault_peer_matches(r, v4("10.0.0.3")));
  EXPECT_EQ(r.every, 10u);
  EXPECT_FALSE(r.by_rate);
  EXPECT_EQ(r.count, 0u);
}

TEST(FaultRules, DefaultsAreBothDirectionsEveryTypeButNoopEveryMessage) {
  const FaultRule r = parse_ok("duplicate");
  EXPECT_EQ(r.dirs, kFaultRx | kFaultTx);
  EXPECT_EQ(r.types & bit(MessageType::kNoop), 0);
  for (const MessageType t :
       {MessageType::kInlineRequest, MessageType::kInlineResponse, MessageType::kReadChunkRequest,
        MessageType::kWriteChunkRequest, MessageType::kCompletion}) {
    EXPECT_NE(r.types & bit(t), 0) << static_cast<int>(t);
  }
  EXPECT_TRUE(r.any_opcode);
  EXPECT_TRUE(r.any_peer);
  EXPECT_EQ(r.every, 1u);
  EXPECT_TRUE(r.per_message());
  // "any" adds the NOOP; "answer" is the two answer types.
  EXPECT_NE(parse_ok("delay dir=rx type=any ms=5").types & bit(MessageType::kNoop), 0);
  EXPECT_EQ(parse_ok("drop type=answer").types,
            bit(MessageType::kInlineResponse) | bit(MessageType::kCompletion));
  EXPECT_EQ(parse_ok("drop type=noop,completion").types,
            bit(MessageType::kNoop) | bit(MessageType::kCompletion));
}

TEST(FaultRules, EveryActionAndItsOwnKeys) {
  EXPECT_EQ(parse_ok("delay ms=250").ms, 250u);
  EXPECT_EQ(parse_ok("corrupt").at, 0u);  // the magic: every decoder refuses it
  EXPECT_EQ(parse_ok("corrupt at=13").at, 13u);
  EXPECT_EQ(parse_ok("corrupt at=random").at, kFaultAtRandom);
  const FaultRule stall = parse_ok("stall ms=200 core=1");
  EXPECT_EQ(stall.action, FaultAction::kStall);
  EXPECT_EQ(stall.ms, 200u);
  EXPECT_EQ(stall.core, 1u);
  EXPECT_FALSE(stall.per_message());
  EXPECT_EQ(parse_ok("stall ms=5").core, kFaultAllCores);
  const FaultRule qp = parse_ok("qp_err peer=198.18.0.0/24");
  EXPECT_EQ(qp.action, FaultAction::kQpErr);
  EXPECT_FALSE(qp.per_message());
  EXPECT_EQ(parse_ok("drop count=3 every=2").count, 3u);
  EXPECT_EQ(parse_ok("drop opcode=4660").opcode, 4660u);
  EXPECT_EQ(parse_ok("  drop \t dir=tx  ").dirs, kFaultTx);
}

TEST(FaultRules, RatesAreExactDecimalFractions) {
  EXPECT_EQ(parse_ok("drop rate=1").rate, UINT64_MAX);
  EXPECT_EQ(parse_ok("drop rate=1.000").rate, UINT64_MAX);
  EXPECT_EQ(parse_ok("drop rate=0.5").rate, UINT64_MAX / 2);
  EXPECT_EQ(parse_ok("drop rate=.5").rate, UINT64_MAX / 2);
  EXPECT_EQ(parse_ok("drop rate=0.000000001").rate, UINT64_MAX / 1'000'000'000);
  EXPECT_TRUE(parse_ok("drop rate=0.01").by_rate);
  for (const char* bad :
       {"drop rate=0", "drop rate=0.0", "drop rate=1.5", "drop rate=2", "drop rate=0.0000000001",
        "drop rate=-0.1", "drop rate=1e-3", "drop rate=.", "drop rate=0.5x"}) {
    EXPECT_NE(parse_error(bad).find("rate"), std::string::npos) << bad;
  }
}

TEST(FaultRules, ErrorsNameTheWordThatIsWrong) {
  EXPECT_NE(parse_error("").find("empty rule"), std::string::npos);
  EXPECT_NE(parse_error("explode").find("unknown action 'explode'"), std::string::npos);
  EXPECT_NE(parse_error("drop dir=up").find("'dir=up'"), std::string::npos);
  EXPECT_NE(parse_error("drop type=request,bogus").find("types are"), std::string::npos);
  EXPECT_NE(parse_error("drop opcode=70000").find("opcode"), std::string::npos);
  EXPECT_NE(parse_error("drop opcode=frobnicate").find("opcode"), std::string::npos);
  EXPECT_NE(parse_error("drop peer=10.0.0.300").find("peer"), std::string::npos);
  EXPECT_NE(parse_error("drop peer=10.0.0.1/33").find("peer"), std::string::npos);
  EXPECT_NE(parse_error("drop peer=fd00::1/129").find("peer"), std::string::npos);
  EXPECT_NE(parse_error("drop every=0").find("every"), std::string::npos);
  EXPECT_NE(parse_error("drop count=0").find("count"), std::string::npos);
  EXPECT_NE(parse_error("drop every=2 rate=0.5").find("exclude"), std::string::npos);
  EXPECT_NE(parse_error("drop dir=rx dir=tx").find("twice"), std::string::npos);
  EXPECT_NE(parse_error("drop color=red").find("unknown key 'color'"), std::string::npos);
  EXPECT_NE(parse_error("drop every").find("key=value"), std::string::npos);
  EXPECT_NE(parse_error("drop every=").find("key=value"), std::string::npos);
  EXPECT_NE(parse_error("drop =3").find("key=value"), std::string::npos);
  // Keys of another action.
  EXPECT_NE(parse_error("drop ms=5").find("does not apply to drop"), std::string::npos);
  EXPECT_NE(parse_error("delay ms=5 at=3").find("does not apply"), std::string::npos);
  EXPECT_NE(parse_error("stall ms=5 dir=rx").find("does not apply"), std::string::npos);
  EXPECT_NE(parse_error("stall ms=5 peer=10.0.0.1").find("does not apply"), std::string::npos);
  EXPECT_NE(parse_error("qp_err peer=10.0.0.1 every=2").find("does not apply"), std::string::npos);
  // Required keys and bounds.
  EXPECT_NE(parse_error("delay").find("needs ms="), std::string::npos);
  EXPECT_NE(parse_error("stall").find("needs ms="), std::string::npos);
  EXPECT_NE(parse_error("qp_err").find("needs peer="), std::string::npos);
  EXPECT_NE(parse_error("delay ms=60001").find("1..60000"), std::string::npos);
  EXPECT_NE(parse_error("stall ms=10001").find("1..10000"), std::string::npos);
  EXPECT_NE(parse_error("delay ms=0").find("ms"), std::string::npos);
  EXPECT_NE(parse_error(std::string(300, 'd')).find("longer than 256"), std::string::npos);
}

TEST(FaultRules, PeerPrefixesMatchTheirLeadingBits) {
  const FaultRule net = parse_ok("drop peer=198.18.0.0/15");
  EXPECT_EQ(net.peer_prefix, 96 + 15);
  EXPECT_TRUE(fault_peer_matches(net, v4("198.18.0.1")));
  EXPECT_TRUE(fault_peer_matches(net, v4("198.19.255.254")));
  EXPECT_FALSE(fault_peer_matches(net, v4("198.20.0.1")));
  EXPECT_FALSE(fault_peer_matches(net, v6("fd00::1")));
  const FaultRule all4 = parse_ok("drop peer=0.0.0.0/0");
  EXPECT_TRUE(fault_peer_matches(all4, v4("203.0.113.9")));
  EXPECT_FALSE(fault_peer_matches(all4, v6("fd00::1")));  // /0 of IPv4 is every IPv4 address, not IPv6
  const FaultRule six = parse_ok("drop peer=fd00:198:18::/48");
  EXPECT_TRUE(fault_peer_matches(six, v6("fd00:198:18::1")));
  EXPECT_FALSE(fault_peer_matches(six, v6("fd00:198:19::1")));
  const FaultRule one6 = parse_ok("drop peer=fd00::1");
  EXPECT_TRUE(fault_peer_matches(one6, v6("fd00::1")));
  EXPECT_FALSE(fault_peer_matches(one6, v6("fd00::2")));
  // An IPv4-mapped IPv6 rule matches the IPv4 peer.
  EXPECT_TRUE(fault_peer_matches(parse_ok("drop peer=::ffff:10.1.2.3"), v4("10.1.2.3")));
  // Not an address family rules know: matches only a rule for ::.
  EXPECT_EQ(fault_peer_ip(nullptr), PeerIp{});
}

TEST(FaultRules, CanonicalTextParsesBackToTheSameRule) {
  for (const char* text :
       {"drop dir=rx type=request opcode=put peer=10.0.0.2 every=10", "delay ms=250 rate=0.25 peer=fd00::/16",
        "duplicate dir=tx type=completion count=7", "corrupt at=random dir=rx rate=0.000000003",
        "corrupt at=17 type=noop,inline_request", "stall ms=100 core=2", "stall ms=1",
        "qp_err peer=198.18.0.2", "drop rate=0.1 opcode=get",
        "delay ms=60000 type=any dir=both peer=198.18.0.0/15"}) {
    const FaultRule r = parse_ok(text);
    const std::string canon = format_fault_rule(r);
    const FaultRule back = parse_ok(canon);
    EXPECT_EQ(format_fault_rule(back), canon) << text;
    EXPECT_EQ(back.action, r.action) << canon;
    EXPECT_EQ(back.dirs, r.dirs) << canon;
    EXPECT_EQ(back.types, r.types) << canon;
    EXPECT_EQ(back.any_opcode, r.any_opcode) << canon;
    EXPECT_EQ(back.opcode, r.opcode) << canon;
    EXPECT_EQ(back.any_peer, r.any_peer) << canon;
    EXPECT_EQ(back.peer, r.peer) << canon;
    EXPECT_EQ(back.peer_prefix, r.peer_prefix) << canon;
    EXPECT_EQ(back.every, r.every) << canon;
    EXPECT_EQ(back.by_rate, r.by_rate) << canon;
    EXPECT_EQ(back.rate, r.rate) << canon;
    EXPECT_EQ(back.count, r.count) << canon;
    EXPECT_EQ(back.ms, r.ms) << canon;
    EXPECT_EQ(back.at, r.at) << canon;
    EXPECT_EQ(back.core, r.core) << canon;
  }
  EXPECT_EQ(
      format_fault_rule(parse_ok("drop dir=rx type=request opcode=put peer=10.0.0.2 every=10")),
      "drop dir=rx type=inline_request,read_chunk_request,write_chunk_request opcode=16 peer=10.0.0.2/32 "
      "every=10");
}

TEST(FaultRules, ATableNamesTheEntryThatIsWrongAndKnowsItsRules) {
  FaultTable t;
  std::string err;
  EXPECT_TRUE(parse_fault_rules({}, t, &err));
  EXPECT_EQ(t.count, 0u);
  EXPECT_FALSE(t.has_message_rules());

  ASSERT_TRUE(parse_fault_rules({"stall ms=10", "qp_err peer=10.0.0.0/8"}, t, &err)) << err;
  EXPECT_EQ(t.count, 2u);
  EXPECT_FALSE(t.has_message_rules());  // nothing for a core to match per message: it stays disarmed
  EXPECT_TRUE(t.qp_err_matches(v4("10.9.8.7")));
  EXPECT_FALSE(t.qp_err_matches(v4("11.0.0.1")));

  ASSERT_TRUE(parse_fault_rules({"stall ms=10", "drop every=3"}, t, &err)) << err;
  EXPECT_TRUE(t.has_message_rules());
  EXPECT_FALSE(t.qp_err_matches(v4("10.9.8.7")));

  EXPECT_FALSE(parse_fault_rules({"drop", "delay ms=5", "drop dir=sideways"}, t, &err));
  EXPECT_EQ(err.rfind("faults.rules[2]: 'drop dir=sideways': bad value 'dir=sideways'", 0), 0u) << err;

  const std::vector<std::string> many(kMaxFaultRules + 1, "drop");
  EXPECT_FALSE(parse_fault_rules(many, t, &err));
  EXPECT_NE(err.find("at most 16"), std::string::npos) << err;
}

}  // namespace
}  // namespace rdmagate::dataplane

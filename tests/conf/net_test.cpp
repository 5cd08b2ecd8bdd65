// IP addresses and CIDR prefixes: parsing policy and matching, and the listen/allow-list rules built on
// them.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "helpers.hpp"

namespace rdmagate::conf {
namespace {

using ::testing::ElementsAre;
using testing::errorsOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::load;

IpAddress ip(std::string_view text) {
  auto a = IpAddress::parse(text, IpAddress::Zone::kAllow, nullptr);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(IpAddress{});
}

Cidr cidr(std::string_view text) {
  std::string why;
  auto c = Cidr::parse(text, &why);
  EXPECT_TRUE(c.has_value()) << text << ": " << why;
  return c.value_or(Cidr{});
}

std::string cidrError(std::string_view text) {
  std::string why;
  EXPECT_FALSE(Cidr::parse(text, &why).has_value()) << text;
  return why;
}

// --- addresses ---------------------------------------------------------------------------------------

TEST(IpAddress, ParsesBothFamilies) {
  EXPECT_EQ(ip("192.168.1.2").family(), IpFamily::kIpv4);
  EXPECT_EQ(ip("192.168.1.2").str(), "192.168.1.2");
  EXPECT_EQ(ip("2001:DB8:0:0::1").family(), IpFamily::kIpv6);
  EXPECT_EQ(ip("2001:DB8:0:0::1").str(), "2001:db8::1");  // canonical form
  EXPECT_EQ(ip("::ffff:10.1.2.3").str(), "::ffff:10.1.2.3");
}

TEST(IpAddress, RejectsHostNamesAndMalformedText) {
  for (const char* bad : {"localhost", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.4 ", "::g",
                          "1:2:3:4:5:6:7:8:9", ""}) {
    EXPECT_FALSE(IpAddress::parse(bad, IpAddress::Zone::kAllow, nullptr).has_value()) << bad;
  }
  std::string why;
  IpAddress::parse("gateway.local", IpAddress::Zone::kAllow, &why);
  EXPECT_EQ(why, "\"gateway.local\" is not an IP address (host names are not accepted)");
}

TEST(IpAddress, Zones) {
  IpAddress a = ip("fe80::1%eth0");
  EXPECT_EQ(a.zone(), "eth0");
  EXPECT_EQ(a.str(), "fe80::1%eth0");
  EXPECT_TRUE(a.isLinkLocal());
  std::string why;
  EXPECT_FALSE(IpAddress::parse("fe80::1%eth0", IpAddress::Zone::kReject, &why));
  EXPECT_THAT(why, HasSubstr("a zone (%ifname) is not accepted here"));
  EXPECT_FALSE(IpAddress::parse("10.0.0.1%eth0", IpAddress::Zone::kAllow, &why));
  EXPECT_THAT(why, HasSubstr("IPv4 addresses take no zone"));
  EXPECT_FALSE(IpAddress::parse("fe80::1%", IpAddress::Zone::kAllow, &why));
  EXPECT_FALSE(IpAddress::parse("fe80::1%a/b", IpAddress::Zone::kAllow, &why));
  EXPECT_FALSE(IpAddress::parse("fe80::1%averyveryverylongname", IpAddress::Zone::kAllow, &why));
}

TEST(IpAddress, Classification) {
  EXPECT_TRUE(ip("0.0.0.0").isUnspecified());
  EXPECT_TRUE(ip("::").isUnspecified());
  EXPECT_FALSE(ip("::1").isUnspecified());
  EXPECT_TRUE(ip("239.1.1.1").isMulticast());
  EXPECT_TRUE(ip("ff02::1").isMulticast());
  EXPECT_TRUE(ip("febf::1").isLinkLocal());
  EXPECT_FALSE(ip("fec0::1").isLinkLocal());
  EXPECT_TRUE(ip("::ffff:1.2.3.4").isV4Mapped());
  EXPECT_EQ(ip("::ffff:1.2.3.4").unmapped(), ip("1.2.3.4"));
  EXPECT_EQ(ip("::1").unmapped(), ip("::1"));
}

// --- CIDR policy -------------------------------------------------------------------------------------

TEST(Cidr, PrefixZeroIsEverythingOfItsFamily) {
  Cidr all4 = cidr("0.0.0.0/0");
  EXPECT_TRUE(all4.contains(ip("255.255.255.255")));
  EXPECT_TRUE(all4.contains(ip("::ffff:8.8.8.8")));  // mapped peers are IPv4 peers
  EXPECT_FALSE(all4.contains(ip("2001:db8::1")));
  Cidr all6 = cidr("::/0");
  EXPECT_TRUE(all6.contains(ip("2001:db8::1")));
  EXPECT_FALSE(all6.contains(ip("8.8.8.8")));
  EXPECT_FALSE(all6.contains(ip("::ffff:8.8.8.8")));
}

TEST(Cidr, HostPrefixes) {
  Cidr h4 = cidr("10.1.2.3/32");
  EXPECT_TRUE(h4.contains(ip("10.1.2.3")));
  EXPECT_FALSE(h4.contains(ip("10.1.2.4")));
  Cidr h6 = cidr("2001:db8::7/128");
  EXPECT_TRUE(h6.contains(ip("2001:db8::7")));
  EXPECT_FALSE(h6.contains(ip("2001:db8::6")));
  EXPECT_TRUE(h6.contains(ip("2001:db8::7%eth0")));  // the peer's zone does not matter
}

TEST(Cidr, BareAddressIsAHostPrefix) {
  EXPECT_EQ(cidr("10.1.2.3"), cidr("10.1.2.3/32"));
  EXPECT_EQ(cidr("fd00::5"), cidr("fd00::5/128"));
  EXPECT_EQ(cidr("10.1.2.3").str(), "10.1.2.3/32");
}

TEST(Cidr, PrefixBoundariesNotOnBytes) {
  Cidr c = cidr("172.16.0.0/12");
  EXPECT_TRUE(c.contains(ip("172.31.255.255")));
  EXPECT_FALSE(c.contains(ip("172.32.0.0")));
  EXPECT_FALSE(c.contains(ip("172.15.255.255")));
  Cidr f = cidr("fc00::/7");
  EXPECT_TRUE(f.contains(ip("fd12::1")));
  EXPECT_FALSE(f.contains(ip("fe00::1")));
}

TEST(Cidr, HostBitsSetIsAnErrorWithTheIntendedNetwork) {
  EXPECT_EQ(cidrError("10.1.2.3/8"), "\"10.1.2.3/8\" has host bits set; did you mean 10.0.0.0/8?");
  EXPECT_EQ(cidrError("172.16.5.0/12"), "\"172.16.5.0/12\" has host bits set; did you mean 172.16.0.0/12?");
  EXPECT_EQ(cidrError("fd00::1/64"), "\"fd00::1/64\" has host bits set; did you mean fd00::/64?");
  EXPECT_EQ(cidrError("0.0.0.1/0"), "\"0.0.0.1/0\" has host bits set; did you mean 0.0.0.0/0?");
}

TEST(Cidr, BadPrefixLengths) {
  EXPECT_EQ(cidrError("10.0.0.0/33"), "\"10.0.0.0/33\": prefix length 33 is out of range [0, 32]");
  EXPECT_EQ(cidrError("::/129"), "\"::/129\": prefix length 129 is out of range [0, 128]");
  EXPECT_EQ(cidrError("10.0.0.0/"), "\"10.0.0.0/\": prefix length \"\" is not a decimal number");
  EXPECT_EQ(cidrError("10.0.0.0/-1"), "\"10.0.0.0/-1\": prefix length \"-1\" is not a decimal number");
  EXPECT_EQ(cidrError("10.0.0.0/08"), "\"10.0.0.0/08\": prefix length \"08\" is not a decimal number");
  EXPECT_EQ(cidrError("10.0.0.0/8/8"), "\"10.0.0.0/8/8\": prefix length \"8/8\" is not a decimal number");
  EXPECT_EQ(cidrError("10.0.0.0/99999999999"),
            "\"10.0.0.0/99999999999\": prefix length \"99999999999\" is not a decimal number");
}

TEST(Cidr, MappedIpv6PrefixSuggestsTheIpv4Form) {
  EXPECT_EQ(cidrError("::ffff:10.0.0.0/104"),
            "\"::ffff:10.0.0.0/104\" is IPv4-mapped; write it as 10.0.0.0/8");
  EXPECT_EQ(cidrError("::ffff:0:0/96"), "\"::ffff:0:0/96\" is IPv4-mapped; write it as 0.0.0.0/0");
}

TEST(Cidr, ZoneAndNamesAreRejected) {
  EXPECT_THAT(cidrError("fe80::%eth0/10"), HasSubstr("a zone (%ifname) is not accepted here"));
  EXPECT_THAT(cidrError("example.com/24"), HasSubstr("host names are not accepted"));
}

TEST(Cidr, OfMasksHostBits) {
  EXPECT_EQ(Cidr::of(ip("10.1.2.3"), 8).str(), "10.0.0.0/8");
}

TEST(Cidr, DefaultAllowListCoversLabNetworksOnly) {
  auto allowed = [](const IpAddress& a) {
    for (const Cidr& c : defaultAllowedClients()) {
      if (c.contains(a)) return true;
    }
    return false;
  };
  for (const char* yes : {"10.0.2.15", "192.168.1.1", "172.20.0.1", "127.0.0.1", "::1", "fd00::1",
                          "fe80::1%eth0", "169.254.1.1", "::ffff:10.0.0.1", "198.18.0.1", "198.19.255.254"}) {
    EXPECT_TRUE(allowed(ip(yes))) << yes;
  }
  for (const char* no : {"8.8.8.8", "2001:db8::1", "172.32.0.1", "::2", "198.17.255.255", "198.20.0.1"}) EXPECT_FALSE(allowed(ip(no))) << no;
}

// --- in the config -----------------------------------------------------------------------------------

TEST(AllowList, ErrorsPointAtTheElement) {
  EXPECT_THAT(
      errorsOf(R"(
security:
  allowed_clients:
    - 10.0.0.0/8
    - 192.168.1.1/16
    - "::/0"
    - 10.0.0.0/8
    - nonsense
)"),
      ElementsAre(
          "conf/x.yaml:4:7: security.allowed_clients[1]: \"192.168.1.1/16\" has host bits set; did you "
          "mean 192.168.0.0/16?",
          "conf/x.yaml:6:7: security.allowed_clients[3]: \"10.0.0.0/8\" is already listed as "
          "security.allowed_clients[0]",
          "conf/x.yaml:7:7: security.allowed_clients[4]: \"nonsense\" is not an IP address (host names "
          "are not accepted)"));
}

TEST(AllowList, NotAList) {
  EXPECT_THAT(errorsOf("security:\n  allowed_clients: 10.0.0.0/8\n"),
              ElementsAre("conf/x.yaml:2:3: security.allowed_clients: expected a list of CIDR prefixes, got "
                          "\"10.0.0.0/8\" (write [10.0.0.0/8])"));
  EXPECT_THAT(
      errorsOf("security:\n  allowed_clients: {a: 1}\n"),
      ElementsAre(
          "conf/x.yaml:2:3: security.allowed_clients: expected a list of CIDR prefixes, got a mapping"));
}

TEST(AllowList, NestedListElement) {
  EXPECT_THAT(
      errorsOf("security:\n  allowed_clients: [[10.0.0.0/8]]\n"),
      ElementsAre("conf/x.yaml:2:21: security.allowed_clients[0]: expected a CIDR prefix, got a list"));
}

TEST(AllowList, EveryoneAndNoOne) {
  auto all = load("security:\n  allowed_clients: [0.0.0.0/0, \"::/0\"]\n");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->config.security.allowed_clients.size(), 2u);
  auto none = load("security:\n  allowed_clients: []\n");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->config.security.allowed_clients.empty());
}

TEST(Listen, Ipv6Addresses) {
  auto r = load(R"(
listen:
  addresses:
    - "::1"
    - 2001:db8::10
    - "fe80::1%eth0"
    - 10.0.0.1
)");
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  const auto& a = r->config.listen.addresses;
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0].str(), "::1");
  EXPECT_EQ(a[1].str(), "2001:db8::10");
  EXPECT_EQ(a[2].zone(), "eth0");
  EXPECT_EQ(a[3].family(), IpFamily::kIpv4);
  EXPECT_EQ(r->origins.ofElement("listen.addresses", 1).line, 4);
}

TEST(Listen, BothWildcardsTogether) {
  auto r = load("listen:\n  addresses: [\"0.0.0.0\", \"::\"]\n");
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
}

TEST(Listen, UnquotedDoubleColonIsAMappingToYaml) {
  EXPECT_THAT(
      errorsOf("listen:\n  addresses:\n    - ::\n"),
      ElementsAre("conf/x.yaml:3:7: listen.addresses[0]: expected an IP address, got a mapping (quote IPv6 "
                  "addresses that start with ':', e.g. \"::\")"));
}

TEST(Listen, WildcardOverlapsSpecificAddressOfTheSameFamily) {
  EXPECT_THAT(
      errorsOf("listen:\n  addresses: [\"::\", \"10.0.0.1\", \"fd00::1\"]\n"),
      ElementsAre("conf/x.yaml:2:33: listen.addresses[2]: \"fd00::1\" overlaps \"::\" on the same port (a "
                  "wildcard already covers every address of IPv6)"));
}

TEST(Listen, LinkLocalNeedsAZoneAndOthersMustNotHaveOne) {
  EXPECT_THAT(
      errorsOf("listen:\n  addresses: [\"fe80::1\"]\n"),
      ElementsAre("conf/x.yaml:2:15: listen.addresses[0]: \"fe80::1\" is link-local and needs a zone, e.g. "
                  "fe80::1%eth0"));
  EXPECT_THAT(
      errorsOf("listen:\n  addresses: [\"fd00::1%eth0\"]\n"),
      ElementsAre("conf/x.yaml:2:15: listen.addresses[0]: \"fd00::1%eth0\" has a zone, which only link-local "
                  "addresses take"));
}

TEST(Listen, MulticastIsRejected) {
  EXPECT_THAT(errorsOf("listen:\n  addresses: [239.0.0.1]\n"),
              ElementsAre("conf/x.yaml:2:15: listen.addresses[0]: \"239.0.0.1\" is a multicast address"));
}

TEST(Listen, DuplicateAddressInAnotherSpelling) {
  EXPECT_THAT(errorsOf("listen:\n  addresses: [\"fd00::1\", \"fd00:0::0:1\"]\n"),
              ElementsAre("conf/x.yaml:2:26: listen.addresses[1]: \"fd00:0::0:1\" is already listed as "
                          "listen.addresses[0]"));
}

TEST(Listen, EmptyAndTooMany) {
  EXPECT_THAT(errorsOf("listen:\n  addresses: []\n"),
              ElementsAre("conf/x.yaml:2:3: listen.addresses: has 0 entries; expected between 1 and 16"));
  std::string many = "listen:\n  addresses: [";
  for (int i = 1; i <= 17; ++i) many += (i > 1 ? ", " : "") + std::string("10.0.0.") + std::to_string(i);
  EXPECT_THAT(errorsOf(many + "]\n"),
              ElementsAre("conf/x.yaml:2:3: listen.addresses: has 17 entries; expected between 1 and 16"));
}

TEST(Telemetry, BindAddress) {
  auto r = load("telemetry:\n  bind_address: \"::\"\n");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->config.telemetry.bind_address.isUnspecified());
  EXPECT_THAT(errorsOf("telemetry:\n  bind_address: \"fe80::1%eth0\"\n"),
              ElementsAre(HasSubstr(
                  "telemetry.bind_address: \"fe80::1%eth0\": a zone (%ifname) is not accepted here")));
  EXPECT_THAT(
      errorsOf("telemetry:\n  bind_address: localhost\n"),
      ElementsAre(
          "conf/x.yaml:2:3: telemetry.bind_address: \"localhost\" is not an IP address (host names are "
          "not accepted)"));
  EXPECT_THAT(errorsOf("telemetry:\n  bind_address: [\"::1\"]\n"),
              ElementsAre("conf/x.yaml:2:3: telemetry.bind_address: expected an IP address, got a list"));
  EXPECT_THAT(errorsOf("telemetry:\n  bind_address: 224.0.0.1\n"),
              ElementsAre(HasSubstr("is a multicast address")));
}

}  // namespace
}  // namespace rdmagate::conf

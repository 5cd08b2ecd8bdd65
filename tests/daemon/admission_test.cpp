// Admission per source address (control/admission.*): the connection cap, the token bucket, reloads, and
// that the table forgets sources that hold nothing.
#include "control/admission.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <chrono>

namespace rdmagate::control {
namespace {

using namespace std::chrono_literals;
using Clock = AdmissionTable::Clock;

SourceKey v4(const char* a, std::uint16_t port = 1) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_port = htons(port);
  inet_pton(AF_INET, a, &s.sin_addr);
  return source_key(reinterpret_cast<const sockaddr*>(&s));
}

TEST(SourceKey, PortIgnoredIpv4MappedIpv6Kept) {
  EXPECT_EQ(v4("198.18.0.2", 1), v4("198.18.0.2", 40000));
  EXPECT_NE(v4("198.18.0.2"), v4("198.18.0.3"));
  sockaddr_in6 s6{};
  s6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:198.18.0.2", &s6.sin6_addr);
  EXPECT_EQ(source_key(reinterpret_cast<const sockaddr*>(&s6)), v4("198.18.0.2"));
  inet_pton(AF_INET6, "fd00::2", &s6.sin6_addr);
  EXPECT_NE(source_key(reinterpret_cast<const sockaddr*>(&s6)), v4("198.18.0.2"));
  EXPECT_EQ(source_key(nullptr), SourceKey{});
}

TEST(Admission, ConnectionCapPerSourceOthersUnaffectedReleaseReopens) {
  AdmissionTable t({3, 1000.0, 1000}, 42);
  const auto now = Clock::now();
  const SourceKey a = v4("10.0.0.1");
  const SourceKey b = v4("10.0.0.2");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t.admit(a, now), AdmissionVerdict::kAdmit);
  EXPECT_EQ(t.admit(a, now), AdmissionVerdict::kTooManyConnections);
  EXPECT_EQ(t.connections(a), 3u);
  EXPECT_EQ(t.admit(b, now), AdmissionVerdict::kAdmit);
  t.release(a, now);
  EXPECT_EQ(t.connections(a), 2u);
  EXPECT_EQ(t.admit(a, now), AdmissionVerdict::kAdmit);
  EXPECT_EQ(t.admit(a, now), AdmissionVerdict::kTooManyConnections);
}

TEST(Admission, TokenBucketBurstThenRate) {
  AdmissionTable t({1000, 10.0, 5}, 1);
  const auto t0 = Clock::now();
  const SourceKey a = v4("10.0.0.1");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kAdmit) << i;
  EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kRateExceeded);
  EXPECT_EQ(t.admit(a, t0 + 50ms), AdmissionVerdict::kRateExceeded);  // half a token
  EXPECT_EQ(t.admit(a, t0 + 110ms), AdmissionVerdict::kAdmit);        // one token at 10/s
  EXPECT_EQ(t.admit(a, t0 + 110ms), AdmissionVerdict::kRateExceeded);
  // A long pause refills to the burst, never beyond it.
  int admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += t.admit(a, t0 + 100s) == AdmissionVerdict::kAdmit ? 1 : 0;
  EXPECT_EQ(admitted, 5);
  EXPECT_EQ(t.connections(a), 11u);
}

TEST(Admission, ZeroIsNoLimit) {
  AdmissionTable t({0, 0, 0}, 1);
  EXPECT_FALSE(t.limited());
  const auto now = Clock::now();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(t.admit(v4("10.0.0.1"), now), AdmissionVerdict::kAdmit);
  EXPECT_EQ(t.sources(), 0u) << "nothing tracked without a limit";
  AdmissionTable cap_only({2, 0, 0}, 1);
  EXPECT_EQ(cap_only.admit(v4("10.0.0.1"), now), AdmissionVerdict::kAdmit);
  EXPECT_EQ(cap_only.admit(v4("10.0.0.1"), now), AdmissionVerdict::kAdmit);
  EXPECT_EQ(cap_only.admit(v4("10.0.0.1"), now), AdmissionVerdict::kTooManyConnections);
  AdmissionTable rate_only({0, 1.0, 2}, 1);
  EXPECT_EQ(rate_only.admit(v4("10.0.0.1"), now), AdmissionVerdict::kAdmit);
  EXPECT_EQ(rate_only.admit(v4("10.0.0.1"), now), AdmissionVerdict::kAdmit);
  EXPECT_EQ(rate_only.admit(v4("10.0.0.1"), now), AdmissionVerdict::kRateExceeded);
}

TEST(Admission, RequestsOverTheCapStillSpendTokens) {
  AdmissionTable t({1, 1.0, 3}, 1);
  const auto t0 = Clock::now();
  const SourceKey a = v4("10.0.0.1");
  EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kAdmit);
  EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kTooManyConnections);
  EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kTooManyConnections);
  EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kRateExceeded);
}

TEST(Admission, ReloadCapsTokensAndAppliesTheNewCap) {
  AdmissionTable t({2, 1.0, 100}, 1);
  const auto t0 = Clock::now();
  const SourceKey a = v4("10.0.0.1");
  EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kAdmit);
  EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kAdmit);
  t.set_limits({1, 1.0, 2});
  EXPECT_EQ(t.connections(a), 2u) << "connections already held stay";
  EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kTooManyConnections);
  EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kTooManyConnections);
  EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kRateExceeded) << "tokens were capped at the new burst of 2";
}

TEST(Admission, IdleSourcesAreForgottenAndSweptSoManySourcesDoNotGrowTheTable) {
  AdmissionTable t({4, 1000.0, 4}, 7);
  const auto t0 = Clock::now();
  const SourceKey a = v4("10.0.0.1");
  EXPECT_EQ(t.admit(a, t0), AdmissionVerdict::kAdmit);
  t.release(a, t0 + 1s);  // bucket full again and no connection: forgotten at once
  EXPECT_EQ(t.sources(), 0u);
  // A flood from many addresses, each one request: the table sweeps what is idle once it passes the mark.
  for (std::uint32_t i = 0; i < 3 * AdmissionTable::kSweepAbove; ++i) {
    SourceKey k{};
    k[0] = 0xfd;
    k[12] = static_cast<std::uint8_t>(i >> 24);
    k[13] = static_cast<std::uint8_t>(i >> 16);
    k[14] = static_cast<std::uint8_t>(i >> 8);
    k[15] = static_cast<std::uint8_t>(i);
    const auto when = t0 + 2s + std::chrono::milliseconds(i);
    ASSERT_EQ(t.admit(k, when), AdmissionVerdict::kAdmit);
    t.release(k, when);  // one token short of a full bucket: kept until swept
  }
  EXPECT_LE(t.sources(), AdmissionTable::kSweepAbove);
  // A source that holds a connection is never swept.
  AdmissionTable u({4, 1000.0, 4}, 7);
  EXPECT_EQ(u.admit(a, t0), AdmissionVerdict::kAdmit);
  for (std::uint32_t i = 0; i < 2 * AdmissionTable::kSweepAbove; ++i) {
    SourceKey k{};
    k[0] = 0xfd;
    k[14] = static_cast<std::uint8_t>(i >> 8);
    k[15] = static_cast<std::uint8_t>(i);
    k[13] = static_cast<std::uint8_t>(i >> 16);
    const auto when = t0 + 10s + std::chrono::milliseconds(i);
    u.admit(k, when);
    u.release(k, when);
  }
  EXPECT_EQ(u.connections(a), 1u);
}

}  // namespace
}  // namespace rdmagate::control

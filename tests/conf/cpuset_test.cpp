#include "conf/cpuset.hpp"

#include <gtest/gtest.h>

#include "conf/host.hpp"

namespace rdmagate::conf {
namespace {

std::string parseError(std::string_view text, std::uint32_t limit = 128) {
  std::string why;
  EXPECT_FALSE(CpuSet::parse(text, limit, &why).has_value()) << text;
  return why;
}

TEST(CpuSet, ParseAndFormatRoundTrip) {
  for (const char* text : {"0", "0-3", "0-3,8,10-11", "127", "1,3,5"}) {
    auto s = CpuSet::parse(text, 128, nullptr);
    ASSERT_TRUE(s.has_value()) << text;
    EXPECT_EQ(s->str(), text);
  }
  EXPECT_EQ(CpuSet::parse("5,1-2\n", 128, nullptr)->str(), "1-2,5");  // sysfs ends in a newline
  EXPECT_EQ((CpuSet{3, 1, 2, 7}).str(), "1-3,7");
  EXPECT_EQ(CpuSet{}.str(), "");
}

TEST(CpuSet, Errors) {
  EXPECT_EQ(parseError(""), "empty cpu list");
  EXPECT_EQ(parseError("128"), "cpu 128 is out of range [0, 127]");
  EXPECT_EQ(parseError("1-200"), "cpu 200 is out of range [0, 127]");
  EXPECT_EQ(parseError("4-2"), "range \"4-2\" is descending");
  EXPECT_EQ(parseError("1,1"), "cpu 1 is listed twice");
  EXPECT_EQ(parseError("0-3,2-5"), "cpu 2 is listed twice");
  EXPECT_EQ(parseError("01"), "\"01\" has a leading zero");
  EXPECT_EQ(parseError("-1"), "\"\" is not a cpu number");
  EXPECT_EQ(parseError("1,"), "\"\" is not a cpu number");
  EXPECT_EQ(parseError("a-b"), "\"a\" is not a cpu number");
  EXPECT_EQ(parseError("99999999999999999999"), "cpu 99999999999999999999 is out of range [0, 127]");
}

TEST(CpuSet, SetOperations) {
  CpuSet s{2, 4};
  EXPECT_TRUE(s.insert(3));
  EXPECT_FALSE(s.insert(3));
  EXPECT_TRUE(s.contains(3));
  EXPECT_FALSE(s.contains(5));
  EXPECT_EQ(s.unionWith(CpuSet{0, 4}), (CpuSet{0, 2, 3, 4}));
  EXPECT_EQ(s.size(), 3u);
}

TEST(HostFacts, ReadsTheRunningHost) {
  HostFacts h = readHostFacts();
  ASSERT_FALSE(h.online_cpus.empty());
  ASSERT_FALSE(h.allowed_cpus.empty());
  // This thread runs somewhere it is allowed to, on an online CPU.
  for (std::uint32_t c : h.allowed_cpus) EXPECT_TRUE(h.online_cpus.contains(c)) << c;
}

}  // namespace
}  // namespace rdmagate::conf

#include "protocol/incarnation.hpp"

#include <gtest/gtest.h>

#include <set>

namespace rdmagate::protocol {
namespace {

TEST(Incarnation, NonzeroAndDistinct) {
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t v = make_incarnation();
    EXPECT_NE(v, 0u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(Incarnation, ProcessStampIsStable) {
  const std::uint64_t a = process_incarnation();
  EXPECT_NE(a, 0u);
  EXPECT_EQ(process_incarnation(), a);
}

}  // namespace
}  // namespace rdmagate::protocol

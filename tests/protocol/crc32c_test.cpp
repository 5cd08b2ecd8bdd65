#include "protocol/crc32c.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace rdmagate::protocol {
namespace {

std::span<const std::uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Check values from RFC 3720 (iSCSI), appendix B.4, and the CRC catalogue's "check" input.
TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c(bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(crc32c({}), 0u);
  std::vector<std::uint8_t> zeros(32, 0x00), ones(32, 0xff), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<std::uint8_t>(i);
    dec[i] = static_cast<std::uint8_t>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(inc), 0x46DD794Eu);
  EXPECT_EQ(crc32c(dec), 0x113FDB5Cu);
  EXPECT_EQ(crc32c_portable(bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(crc32c_portable(inc), 0x46DD794Eu);
}

TEST(Crc32c, ChainsAtEverySplitPoint) {
  std::vector<std::uint8_t> buf(100);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<std::uint8_t>(i * 7 + 3);
  const std::uint32_t whole = crc32c(buf);
  for (std::size_t cut = 0; cut <= buf.size(); ++cut) {
    const std::span<const std::uint8_t> all(buf);
    EXPECT_EQ(crc32c(all.subspan(cut), crc32c(all.first(cut))), whole) << cut;
    EXPECT_EQ(crc32c_portable(all.subspan(cut), crc32c_portable(all.first(cut))), whole) << cut;
  }
}

TEST(Crc32c, HardwareAndPortableAgree) {
  std::mt19937_64 rng(42);
  std::vector<std::uint8_t> buf(300);
  for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
  for (std::size_t off = 0; off < 8; ++off)
    for (std::size_t len = 0; off + len <= buf.size(); len += 1 + len / 8) {
      const auto s = std::span<const std::uint8_t>(buf).subspan(off, len);
      ASSERT_EQ(crc32c(s, 0x1234u), crc32c_portable(s, 0x1234u)) << off << " " << len;
    }
}

}  // namespace
}  // namespace rdmagate::protocol

// CRC32C, written for rdmagate: a slice-by-8 table walk (tables built at compile time from the
// reflected Castagnoli polynomial) and, when the target has SSE4.2, the crc32 instruction.

#include "protocol/crc32c.hpp"

#include <array>
#include <cstddef>

#include "protocol/byte_order.hpp"

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace rdmagate::protocol {
namespace {

constexpr std::uint32_t kPolyReflected = 0x82F63B78u;

using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

// tables[0] is the byte-at-a-time table; tables[k][b] is the CRC of byte b followed by k zero
// bytes, which lets one step fold eight input bytes with eight independent lookups.
constexpr Tables make_tables() {
  Tables t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t c = b;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ (kPolyReflected & (0u - (c & 1u)));
    t[0][b] = c;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xffu];
  return t;
}

constexpr Tables kTables = make_tables();
static_assert(kTables[0][1] == 0xF26B8303u, "Castagnoli table sanity");

std::uint32_t portable_raw(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
  while (n >= 8) {
    const std::uint64_t w = le::load<std::uint64_t>(p) ^ crc;
    crc = kTables[7][w & 0xff] ^ kTables[6][(w >> 8) & 0xff] ^ kTables[5][(w >> 16) & 0xff] ^
          kTables[4][(w >> 24) & 0xff] ^ kTables[3][(w >> 32) & 0xff] ^ kTables[2][(w >> 40) & 0xff] ^
          kTables[1][(w >> 48) & 0xff] ^ kTables[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ kTables[0][(crc ^ *p++) & 0xffu];
  return crc;
}

}  // namespace

std::uint32_t crc32c_portable(std::span<const std::uint8_t> data, std::uint32_t prev) noexcept {
  return ~portable_raw(~prev, data.data(), data.size());
}

std::uint32_t crc32c(std::span<const std::uint8_t> data, std::uint32_t prev) noexcept {
#if defined(__SSE4_2__)
  std::uint64_t crc = ~prev;
  const std::uint8_t* p = data.data();
  std::size_t n = data.size();
  for (; n >= 8; p += 8, n -= 8) crc = _mm_crc32_u64(crc, le::load<std::uint64_t>(p));
  auto c = static_cast<std::uint32_t>(crc);
  for (; n > 0; ++p, --n) c = _mm_crc32_u8(c, *p);
  return ~c;
#else
  return crc32c_portable(data, prev);
#endif
}

}  // namespace rdmagate::protocol

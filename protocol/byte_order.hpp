#pragma once
// Little-endian loads and stores at arbitrary (unaligned) offsets. The wire is defined byte by byte;
// memcpy of a native integer plus a swap on big-endian hosts compiles to a single mov on x86 and
// never casts a struct onto a buffer.

#include <bit>
#include <concepts>
#include <cstdint>
#include <cstring>

namespace rdmagate::protocol::le {

template <std::unsigned_integral T>
constexpr T byteswap(T v) {
  if constexpr (sizeof(T) == 1) {
    return v;
  } else if constexpr (sizeof(T) == 2) {
    return static_cast<T>(__builtin_bswap16(v));
  } else if constexpr (sizeof(T) == 4) {
    return static_cast<T>(__builtin_bswap32(v));
  } else {
    static_assert(sizeof(T) == 8);
    return static_cast<T>(__builtin_bswap64(v));
  }
}

template <std::unsigned_integral T>
inline T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = byteswap(v);
  return v;
}

template <std::unsigned_integral T>
inline void store(std::uint8_t* p, T v) {
  if constexpr (std::endian::native == std::endian::big) v = byteswap(v);
  std::memcpy(p, &v, sizeof v);
}

}  // namespace rdmagate::protocol::le

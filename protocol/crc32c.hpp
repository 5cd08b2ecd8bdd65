#pragma once
// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI and ext4. The protocol
// library must not depend on DPDK, so it carries its own: the SSE4.2 crc32 instruction when the
// build targets it (x86-64-v2 does), otherwise a slice-by-8 table walk written for this project.

#include <cstdint>
#include <span>

namespace rdmagate::protocol {

// CRC32C of `data`, chained zlib-style: crc32c(b, crc32c(a)) == crc32c(a ++ b). prev = 0 starts a
// new checksum. crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(std::span<const std::uint8_t> data, std::uint32_t prev = 0) noexcept;

// The portable table implementation, always compiled; exposed so tests can compare it with the
// hardware path.
std::uint32_t crc32c_portable(std::span<const std::uint8_t> data, std::uint32_t prev = 0) noexcept;

}  // namespace rdmagate::protocol

#pragma once
// The object operations (docs/protocol.md §8) as everything but the wire names them: the storage backends,
// the gateway's counters, the latency histograms and store metrics (the `op` label, docs/metrics.md), the
// client library and the bench. Values are dense because they index those arrays; the opcodes on the wire
// are a different numbering (ObjectOpcode, object_wire.hpp), mapped by object_opcode() and
// parse_object_request(). Header-only and dependency-free, so the store and telemetry include it without
// linking the protocol library.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rdmagate::protocol {

enum class ObjectOp : std::uint8_t { kGet = 0, kPut = 1, kDelete = 2 };
inline constexpr std::size_t kObjectOpCount = 3;

// Index = ObjectOp value; these are the metric label values (docs/metrics.md), so keep them stable.
inline constexpr std::array<std::string_view, kObjectOpCount> kObjectOpNames = {"get", "put", "delete"};
constexpr std::string_view object_op_name(ObjectOp op) noexcept {
  return kObjectOpNames[static_cast<std::size_t>(op)];
}

// Keys are 1..kMaxKeyLength bytes (any bytes): the wire's u8 key prefix and every backend's limit.
inline constexpr std::size_t kMaxKeyLength = 250;

}  // namespace rdmagate::protocol

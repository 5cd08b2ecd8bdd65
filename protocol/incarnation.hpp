#pragma once
// Incarnation stamps tell apart two lives of the same process (o2iblnd's ibn_incarnation): a peer
// that restarted, or a message from a connection that predates the current one, carries a stamp
// that no longer matches. Zero is reserved for "none seen yet" and is never generated.

#include <cstdint>

namespace rdmagate::protocol {

// A fresh random nonzero 64-bit stamp (getrandom(2), falling back to clock and address entropy
// if the kernel refuses). Tests and simulations use it to model restarts.
std::uint64_t make_incarnation() noexcept;

// This process's stamp: drawn once, on first use, and constant afterwards. Thread-safe.
std::uint64_t process_incarnation() noexcept;

}  // namespace rdmagate::protocol

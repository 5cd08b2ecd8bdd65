#pragma once
// Test-only access to the credit machine's internals (a friend class, never `#define private`).
// Used to break one rule on purpose and show that the simulation catches the consequence.

#include <cstdint>

#include "protocol/credit_machine.hpp"

namespace rdmagate::protocol {

class CreditMachineTestPeer {
 public:
  // Overrides the reserve (on both the send gate and the check of the peer's requests). With 1,
  // requests may take everything but the last credit, and answers have nothing set aside. Keep it
  // at least 1: on_receive's fast path relies on reserve >= 1.
  static void set_reserve(CreditMachine& m, std::uint16_t reserve) { m.reserve_ = reserve; }
};

}  // namespace rdmagate::protocol

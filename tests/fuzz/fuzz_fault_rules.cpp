// libFuzzer target for the fault-injection rule parser (dataplane/fault_rules.*, docs/faults.md): whatever an
// operator writes into faults.rules, parsing it either succeeds or says what is wrong, and never crashes,
// hangs or reads out of bounds. What parses has a canonical text that parses back to the same canonical text,
// and its numbers are within the documented bounds. The input is the list, one rule per line.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/fault_rules.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmagate::dataplane;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines;
  for (std::size_t i = 0; i <= text.size();) {
    const std::size_t nl = std::min(text.find('\n', i), text.size());
    lines.emplace_back(text.substr(i, nl - i));
    i = nl + 1;
  }
  for (const std::string& line : lines) {
    FaultRule r;
    std::string err;
    if (!parse_fault_rule(line, r, &err)) {
      RDMAGATE_FUZZ_CHECK(!err.empty());
      continue;
    }
    RDMAGATE_FUZZ_CHECK(r.action != FaultAction::kNone);
    RDMAGATE_FUZZ_CHECK(r.peer_prefix <= 128);
    RDMAGATE_FUZZ_CHECK(r.every >= 1);
    RDMAGATE_FUZZ_CHECK(r.per_message() == (r.dirs != 0));
    if (r.action == FaultAction::kDelay) RDMAGATE_FUZZ_CHECK(r.ms >= 1 && r.ms <= kFaultMaxDelayMs);
    if (r.action == FaultAction::kStall) RDMAGATE_FUZZ_CHECK(r.ms >= 1 && r.ms <= kFaultMaxStallMs);
    if (r.action == FaultAction::kQpErr) RDMAGATE_FUZZ_CHECK(!r.any_peer);
    const std::string canon = format_fault_rule(r);
    FaultRule back;
    RDMAGATE_FUZZ_CHECK(parse_fault_rule(canon, back, &err));
    RDMAGATE_FUZZ_CHECK(format_fault_rule(back) == canon);
    RDMAGATE_FUZZ_CHECK(back.rate == r.rate && back.peer == r.peer && back.peer_prefix == r.peer_prefix);
    // A rule matches its own peer address.
    RDMAGATE_FUZZ_CHECK(fault_peer_matches(r, r.peer));
  }
  FaultTable t;
  std::string err;
  if (parse_fault_rules(lines, t, &err)) {
    RDMAGATE_FUZZ_CHECK(t.count == lines.size() && t.count <= kMaxFaultRules);
    bool message = false;
    for (std::uint32_t i = 0; i < t.count; ++i) message = message || t.rules[i].per_message();
    RDMAGATE_FUZZ_CHECK(t.has_message_rules() == message);
  } else {
    RDMAGATE_FUZZ_CHECK(err.rfind("faults.rules", 0) == 0);
  }
  return 0;
}

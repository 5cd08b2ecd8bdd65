#include "protocol/errors.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace rdmagate::protocol {
namespace {

// Every code has its own name (metrics labels and logs depend on it), and nothing in range falls
// through to "unknown".
template <class E>
void expect_distinct_names(unsigned max) {
  std::set<std::string> names;
  for (unsigned v = 0; v <= max; ++v) {
    const std::string_view n = to_string(static_cast<E>(v));
    EXPECT_NE(n, "unknown") << v;
    EXPECT_TRUE(names.insert(std::string(n)).second) << n;
  }
  EXPECT_EQ(to_string(static_cast<E>(max + 1)), "unknown");
}

TEST(Errors, NamesAreDistinct) {
  expect_distinct_names<RejectReason>(kRejectReasonMax);
  expect_distinct_names<HandshakeError>(kHandshakeErrorMax);
  expect_distinct_names<WireError>(kWireErrorMax);
  static_assert(to_string(WireError::kFragmentWraps) == "fragment_wraps");
}

// Reject reasons travel on the wire: their numbers are part of the protocol.
TEST(Errors, RejectReasonWireCodes) {
  EXPECT_EQ(static_cast<int>(RejectReason::kRace), 1);
  EXPECT_EQ(static_cast<int>(RejectReason::kNoResources), 2);
  EXPECT_EQ(static_cast<int>(RejectReason::kFatal), 3);
  EXPECT_EQ(static_cast<int>(RejectReason::kIncompatibleVersion), 4);
  EXPECT_EQ(static_cast<int>(RejectReason::kStale), 5);
  EXPECT_EQ(static_cast<int>(RejectReason::kFragmentsMismatch), 6);
  EXPECT_EQ(static_cast<int>(RejectReason::kQueueSizeMismatch), 7);
  EXPECT_EQ(static_cast<int>(RejectReason::kNotAllowed), 8);
  EXPECT_EQ(static_cast<int>(RejectReason::kBadPrivateData), 9);
  EXPECT_EQ(static_cast<int>(RejectReason::kBadConnParam), 10);
  EXPECT_EQ(static_cast<int>(RejectReason::kSourceLimit), 11);
}

}  // namespace
}  // namespace rdmagate::protocol

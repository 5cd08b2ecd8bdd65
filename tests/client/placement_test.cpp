// client/placement.{hpp,cpp} against docs/placement.md: every test vector is read from the document
// itself (so the page cannot drift from the code), then the remap property on 100,000 keys.
// tests/client/test_placement.py checks the Python implementation against the same vectors.

#include "client/placement.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace placement = rdmagate::client::placement;

namespace {

using Row = std::vector<std::string>;

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(' ');
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(' ') - b + 1));
}

// A table cell: the text of a single code span verbatim (spaces included), else the trimmed text.
std::string cell(std::string_view raw) {
  const std::string t = trim(raw);
  if (t.size() >= 2 && t.front() == '`' && t.back() == '`' && std::count(t.begin(), t.end(), '`') == 2) {
    return t.substr(1, t.size() - 2);
  }
  return t;
}

// The rows of the table between "<!-- placement-vectors: name -->" and "<!-- /placement-vectors -->",
// without its header and separator rows.
std::vector<Row> table(const std::string& name) {
  std::ifstream in(RDMAGATE_PLACEMENT_DOC);
  EXPECT_TRUE(in) << "cannot open " << RDMAGATE_PLACEMENT_DOC;
  const std::string open = "<!-- placement-vectors: " + name + " -->";
  std::vector<Row> rows;
  std::string line;
  bool inside = false;
  int skip = 2;
  while (std::getline(in, line)) {
    if (line == open) {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (line == "<!-- /placement-vectors -->") break;
    if (line.empty() || line.front() != '|') continue;
    if (skip > 0) {
      --skip;
      continue;
    }
    Row row;
    std::string_view rest(line);
    rest.remove_prefix(1);
    // Split on '|' outside backticks: an address such as ` 10.0.0.1` keeps its spaces.
    std::size_t start = 0;
    bool tick = false;
    for (std::size_t i = 0; i < rest.size(); ++i) {
      if (rest[i] == '`') tick = !tick;
      if (rest[i] == '|' && !tick) {
        row.push_back(cell(rest.substr(start, i - start)));
        start = i + 1;
      }
    }
    rows.push_back(std::move(row));
  }
  EXPECT_TRUE(inside) << "no table " << open << " in " << RDMAGATE_PLACEMENT_DOC;
  return rows;
}

// The byte-string notation of docs/placement.md: "text", hex:..., seq:N.
std::string bytes(const std::string& s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') return s.substr(1, s.size() - 2);
  if (s.rfind("hex:", 0) == 0) {
    std::string out;
    for (std::size_t i = 4; i + 1 < s.size(); i += 2) {
      out.push_back(static_cast<char>(std::stoul(s.substr(i, 2), nullptr, 16)));
    }
    return out;
  }
  if (s.rfind("seq:", 0) == 0) {
    std::string out(std::stoul(s.substr(4)), '\0');
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i & 0xff);
    return out;
  }
  ADD_FAILURE() << "unknown byte-string notation: " << s;
  return {};
}

std::uint64_t hex64(const std::string& s) {
  EXPECT_EQ(s.size(), 16u) << s;
  return std::stoull(s, nullptr, 16);
}

// A list's cell: identities in backticks separated by spaces (one alone has lost its backticks).
std::vector<std::string> split_identities(const std::string& raw) {
  std::vector<std::string> out;
  std::istringstream in(raw);
  std::string one;
  while (in >> one) {
    if (one.size() >= 2 && one.front() == '`' && one.back() == '`') one = one.substr(1, one.size() - 2);
    out.push_back(one);
  }
  return out;
}

TEST(PlacementVectors, Xxh64) {
  const auto rows = table("xxh64");
  ASSERT_GE(rows.size(), 10u);
  for (const Row& r : rows) {
    ASSERT_EQ(r.size(), 3u);
    const std::string in = bytes(r[0]);
    EXPECT_EQ(in.size(), std::stoul(r[1])) << r[0];
    EXPECT_EQ(placement::hash(in), hex64(r[2])) << r[0];
  }
}

TEST(PlacementVectors, Weight) {
  const auto rows = table("weight");
  ASSERT_GE(rows.size(), 4u);
  for (const Row& r : rows) {
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(placement::weight(hex64(r[0]), hex64(r[1])), hex64(r[2])) << r[0] << " " << r[1];
  }
}

TEST(PlacementVectors, Identity) {
  const auto rows = table("identity");
  ASSERT_GE(rows.size(), 10u);
  for (const Row& r : rows) {
    ASSERT_EQ(r.size(), 4u);
    std::string id, why;
    ASSERT_TRUE(placement::identity(r[0], static_cast<std::uint16_t>(std::stoul(r[1])), &id, &why))
        << r[0] << ": " << why;
    EXPECT_EQ(id, r[2]) << r[0];
    EXPECT_EQ(placement::hash(id), hex64(r[3])) << id;
  }
}

TEST(PlacementVectors, RejectedAddresses) {
  const auto rows = table("rejected");
  ASSERT_GE(rows.size(), 5u);
  for (const Row& r : rows) {
    ASSERT_EQ(r.size(), 2u);
    const std::string address = r[0] == "\"\"" ? std::string() : r[0];
    std::string id, why;
    EXPECT_FALSE(placement::identity(address, 7471, &id, &why)) << "accepted \"" << address << "\" as " << id;
    EXPECT_NE(why.find("\"" + address + "\""), std::string::npos) << why;
  }
}

TEST(PlacementVectors, Placement) {
  std::map<std::string, std::vector<std::string>> lists;
  for (const Row& r : table("lists")) {
    ASSERT_EQ(r.size(), 2u);
    lists[r[0]] = split_identities(r[1]);
  }
  ASSERT_GE(lists.size(), 3u);
  const auto rows = table("placement");
  ASSERT_GE(rows.size(), 20u);
  for (const Row& r : rows) {
    ASSERT_EQ(r.size(), 6u);
    ASSERT_EQ(lists.count(r[1]), 1u) << "no list " << r[1];
    const std::vector<std::string>& list = lists[r[1]];
    const std::vector<std::string_view> views(list.begin(), list.end());
    const std::string key = bytes(r[0]);
    const std::size_t want = std::stoul(r[3]);
    SCOPED_TRACE(r[0] + " in list " + r[1]);
    EXPECT_EQ(placement::hash(key), hex64(r[2]));
    EXPECT_EQ(placement::pick(key, views), want);
    placement::Table t;
    std::string why;
    ASSERT_TRUE(t.assign(list, &why)) << why;
    EXPECT_EQ(t.pick(key), want);
    ASSERT_LT(want, list.size());
    EXPECT_EQ(list[want], r[4]);
    EXPECT_EQ(placement::weight(hex64(r[2]), placement::hash(r[4])), hex64(r[5]));
  }
}

TEST(Placement, DuplicatesAndEmptyList) {
  const std::vector<std::string> dup{"10.0.0.1:7471", "10.0.0.2:7471", "10.0.0.1:7471"};
  placement::Table t;
  std::string why;
  EXPECT_FALSE(t.assign(dup, &why));
  EXPECT_EQ(why, "gateways 0 and 2 are the same gateway (10.0.0.1:7471)");
  // The stateless pick takes such a list: the identical entries tie and the lower index answers.
  const std::vector<std::string_view> views(dup.begin(), dup.end());
  std::size_t first = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::size_t got = placement::pick("key-" + std::to_string(i), views);
    EXPECT_NE(got, 2u);
    first += got == 0;
  }
  EXPECT_GT(first, 0u);  // the duplicated gateway does win keys, at its first index

  EXPECT_EQ(placement::pick("k", {}), placement::kNone);
  placement::Table empty;
  ASSERT_TRUE(empty.assign({}, &why));
  EXPECT_EQ(empty.pick("k"), placement::kNone);
}

// The remap property (docs/placement.md): gateways 10.0.0.1.. and keys key-0..key-99999.
constexpr std::size_t kKeys = 100000;
constexpr std::size_t kMaxGateways = 17;

// A correct placement's count of moved keys is binomial(kKeys, p): allow 5 standard deviations.
double tolerance(double p) {
  return 5.0 * std::sqrt(p * (1.0 - p) / kKeys);
}

class Remap : public ::testing::Test {
 protected:
  void SetUp() override {
    for (std::size_t g = 0; g < kMaxGateways; ++g)
      gateways_.push_back("10.0.0." + std::to_string(g + 1) + ":7471");
    for (std::size_t k = 0; k < kKeys; ++k)
      key_hashes_.push_back(placement::hash("key-" + std::to_string(k)));
  }

  // Owner of every key, as an index into gateways_, for the gateways `members` (in that order).
  std::vector<std::size_t> owners(const std::vector<std::size_t>& members) const {
    std::vector<std::string> ids;
    for (std::size_t m : members) ids.push_back(gateways_[m]);
    placement::Table t;
    std::string why;
    EXPECT_TRUE(t.assign(ids, &why)) << why;
    std::vector<std::size_t> out;
    out.reserve(kKeys);
    for (std::uint64_t h : key_hashes_) out.push_back(members[t.pick_hash(h)]);
    return out;
  }

  static std::vector<std::size_t> first(std::size_t n) {
    std::vector<std::size_t> m(n);
    for (std::size_t i = 0; i < n; ++i) m[i] = i;
    return m;
  }

  std::vector<std::string> gateways_;
  std::vector<std::uint64_t> key_hashes_;
};

TEST_F(Remap, AddingOneGatewayMovesAboutOneInNPlusOneKeysAllToIt) {
  std::vector<std::size_t> before = owners(first(1));
  std::printf("adding gateway N+1 to N (100000 keys):\n   N  moved     expected  |diff|/tolerance\n");
  for (std::size_t n = 1; n < kMaxGateways; ++n) {
    const std::vector<std::size_t> after = owners(first(n + 1));
    std::size_t moved = 0, elsewhere = 0;
    for (std::size_t k = 0; k < kKeys; ++k) {
      if (after[k] == before[k]) continue;
      ++moved;
      elsewhere += after[k] != n;
    }
    const double p = 1.0 / static_cast<double>(n + 1);
    const double f = static_cast<double>(moved) / kKeys;
    std::printf("  %2zu  %.5f  %.5f   %.2f\n", n, f, p, std::fabs(f - p) / tolerance(p));
    EXPECT_EQ(elsewhere, 0u) << "N=" << n << ": keys moved between old gateways";
    EXPECT_NEAR(f, p, tolerance(p)) << "N=" << n;
    before = after;
  }
}

TEST_F(Remap, RemovingOneGatewayMovesOnlyItsKeys) {
  for (std::size_t n = 2; n <= kMaxGateways; ++n) {
    const std::vector<std::size_t> all = first(n);
    // The middle one: with a position-based placement every gateway after it would be renumbered.
    const std::size_t gone = n / 2;
    std::vector<std::size_t> rest;
    for (std::size_t m : all) {
      if (m != gone) rest.push_back(m);
    }
    const std::vector<std::size_t> before = owners(all), after = owners(rest);
    std::size_t held = 0, moved = 0;
    for (std::size_t k = 0; k < kKeys; ++k) {
      held += before[k] == gone;
      if (after[k] != before[k]) {
        ++moved;
        EXPECT_EQ(before[k], gone) << "n=" << n << " key-" << k << " moved off a gateway that stayed";
      }
      EXPECT_NE(after[k], gone);
    }
    EXPECT_EQ(moved, held) << "n=" << n;
    const double p = 1.0 / static_cast<double>(n);
    EXPECT_NEAR(static_cast<double>(moved) / kKeys, p, tolerance(p)) << "n=" << n;
  }
}

TEST_F(Remap, ReorderingMovesNoKeyAndEveryGatewayGetsItsShare) {
  for (std::size_t n = 1; n <= kMaxGateways; ++n) {
    std::vector<std::size_t> reversed = first(n);
    std::reverse(reversed.begin(), reversed.end());
    const std::vector<std::size_t> a = owners(first(n)), b = owners(reversed);
    EXPECT_EQ(a, b) << "n=" << n;
    std::vector<std::size_t> share(n);
    for (std::size_t o : a) ++share[o];
    const double p = 1.0 / static_cast<double>(n);
    for (std::size_t g = 0; g < n; ++g) {
      EXPECT_NEAR(static_cast<double>(share[g]) / kKeys, p, tolerance(p)) << "n=" << n << " gateway " << g;
    }
  }
}

}  // namespace

// Tenant namespaces in the store: equal keys of two tenants are different objects for every op, tenant 0
// is the store's plain key space (the calls without a tenant), and a PUT or DELETE says what it replaced.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "services/storage/memory/store.hpp"
#include "store_test_util.hpp"

namespace rdmagate::store {
namespace {

using test::as_span;
using test::expect_empty;
using test::make_store;
using test::pattern;
using test::Region;

StoreConfig tenant_config() {
  StoreConfig c;
  c.max_value = 64 * 1024;
  c.max_objects = 256;
  c.max_inflight = 64;
  c.max_cores = 2;
  return c;
}

std::uint32_t size_of(Store& s, std::uint16_t tenant, std::string_view key) {
  PinnedValue v;
  if (s.get(0, tenant, key, &v) != Status::kOk) return UINT32_MAX;
  const std::uint32_t n = v.size;
  s.unpin(&v);
  return n;
}

TEST(StoreTenants, EqualKeysOfTwoTenantsAreDifferentObjects) {
  Region r(4 << 20);
  auto s = make_store(r, tenant_config());
  ASSERT_TRUE(s);
  const auto v0 = pattern(10, 1), v1 = pattern(20, 2), v2 = pattern(30, 3);
  ASSERT_EQ(s->put(0, "k", as_span(v0)), Status::kOk);
  ASSERT_EQ(s->put(0, 1, "k", as_span(v1), nullptr), Status::kOk);
  Reservation res;
  ASSERT_EQ(s->reserve(0, 2, "k", v2.size(), &res), Status::kOk);
  std::memcpy(res.data, v2.data(), v2.size());
  ASSERT_EQ(s->commit(0, &res), Status::kOk);
  EXPECT_EQ(s->stats().objects, 3u);
  EXPECT_EQ(size_of(*s, 0, "k"), 10u);
  EXPECT_EQ(size_of(*s, 1, "k"), 20u);
  EXPECT_EQ(size_of(*s, 2, "k"), 30u);
  EXPECT_EQ(size_of(*s, 3, "k"), UINT32_MAX) << "a tenant that wrote nothing finds nothing";
  PinnedValue plain;  // tenant 0 is what the calls without a tenant reach
  ASSERT_EQ(s->get(0, "k", &plain), Status::kOk);
  EXPECT_EQ(plain.size, 10u);
  s->unpin(&plain);

  // An overwrite and a DELETE stay in their tenant.
  ASSERT_EQ(s->put(0, 1, "k", as_span(v2), nullptr), Status::kOk);
  EXPECT_EQ(size_of(*s, 0, "k"), 10u);
  EXPECT_EQ(size_of(*s, 2, "k"), 30u);
  ASSERT_EQ(s->remove(0, 2, "k", nullptr), Status::kOk);
  EXPECT_EQ(s->remove(0, 2, "k", nullptr), Status::kNotFound);
  EXPECT_EQ(size_of(*s, 1, "k"), 30u);
  EXPECT_EQ(size_of(*s, 0, "k"), 10u);
  // drop() is the RADOS cache's invalidation: tenant 0 only.
  EXPECT_EQ(s->drop("k"), Status::kOk);
  EXPECT_EQ(size_of(*s, 1, "k"), 30u);
  ASSERT_EQ(s->remove(0, 1, "k", nullptr), Status::kOk);
  expect_empty(*s);
}

TEST(StoreTenants, PutCommitAndRemoveSayWhatTheyReplaced) {
  Region r(4 << 20);
  auto s = make_store(r, tenant_config());
  ASSERT_TRUE(s);
  storage::Prior p{true, 99};
  ASSERT_EQ(s->put(0, 7, "a", as_span(pattern(100, 1)), &p), Status::kOk);
  EXPECT_FALSE(p.existed);
  EXPECT_EQ(p.bytes, 0u);
  EXPECT_TRUE(s->peek(7, "a").existed);
  EXPECT_EQ(s->peek(7, "a").bytes, 100u);
  EXPECT_FALSE(s->peek(8, "a").existed);
  ASSERT_EQ(s->put(0, 7, "a", as_span(pattern(40, 2)), &p), Status::kOk);
  EXPECT_TRUE(p.existed);
  EXPECT_EQ(p.bytes, 100u);
  Reservation res;
  ASSERT_EQ(s->reserve(1, 7, "a", 0, &res), Status::kOk);
  ASSERT_EQ(s->commit(1, &res, nullptr, &p), Status::kOk);
  EXPECT_TRUE(p.existed);
  EXPECT_EQ(p.bytes, 40u);
  ASSERT_EQ(s->remove(0, 7, "a", &p), Status::kOk);
  EXPECT_TRUE(p.existed);
  EXPECT_EQ(p.bytes, 0u);
  p = storage::Prior{true, 5};
  EXPECT_EQ(s->remove(0, 7, "a", &p), Status::kNotFound);
  EXPECT_TRUE(p.existed) << "untouched unless kOk";
  EXPECT_EQ(s->stats().ops[static_cast<int>(protocol::ObjectOp::kGet)][0], 0u) << "peek counts no op";
  expect_empty(*s);
}

}  // namespace
}  // namespace rdmagate::store

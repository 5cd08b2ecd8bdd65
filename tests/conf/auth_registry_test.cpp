// The AuthRegistry (dataplane/auth_registry.*): security.* and the secrets -> the AuthTable the cores read.
// Tenant ids and usage objects are the registry's for the life of the process, so they must survive every
// reload, including a tenant that leaves the config and comes back.

#include "dataplane/auth_registry.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rdmagate::dataplane {
namespace {

using ::testing::HasSubstr;

conf::PrincipalConfig principal(std::string name, std::string tenant, std::uint8_t perms,
                                std::uint32_t max_connections = 0) {
  return conf::PrincipalConfig{std::move(name), std::move(tenant), perms, max_connections};
}

std::vector<std::uint8_t> secret_of(std::uint8_t fill, std::size_t n = 32) {
  return std::vector<std::uint8_t>(n, fill);
}

conf::SecurityConfig required(std::vector<conf::TenantConfig> tenants,
                              std::vector<conf::PrincipalConfig> principals) {
  conf::SecurityConfig s;
  s.authentication = conf::Authentication::kRequired;
  s.secrets_file = "/etc/rdmagate/secrets.yaml";
  s.tenants = std::move(tenants);
  s.principals = std::move(principals);
  return s;
}

conf::Secrets secrets_for(const conf::SecurityConfig& s) {
  std::vector<conf::PrincipalSecret> e;
  std::uint8_t fill = 1;
  for (const conf::PrincipalConfig& p : s.principals) e.push_back({p.name, secret_of(fill++)});
  return conf::Secrets(std::move(e));
}

TEST(AuthRegistry, TableHasTheConfigSortedWithLimitsAndSecrets) {
  AuthRegistry reg;
  const conf::SecurityConfig s =
      required({{"app", 1u << 30, 1000}, {"ops", 0, 0}},
               {principal("zeta", "app", kPermRead | kPermWrite | kPermDelete, 64),
                principal("alpha", "ops", kPermRead), principal("mid", "app", kPermRead, 2)});
  std::string err;
  const std::unique_ptr<AuthTable> t = reg.build(s, secrets_for(s), &err);
  ASSERT_NE(t, nullptr) << err;
  EXPECT_TRUE(t->required);
  EXPECT_EQ(t->generation, 1u);
  ASSERT_EQ(t->tenants.size(), 2u);
  EXPECT_EQ(t->tenants[0].name, "app");
  EXPECT_EQ(t->tenants[0].max_bytes, 1u << 30);
  EXPECT_EQ(t->tenants[0].max_objects, 1000u);
  EXPECT_NE(t->tenants[0].id, 0);
  EXPECT_NE(t->tenants[1].id, t->tenants[0].id);
  EXPECT_NE(t->tenants[0].usage, nullptr);
  EXPECT_NE(t->tenants[0].usage, t->tenants[1].usage);

  ASSERT_EQ(t->principals.size(), 3u);
  EXPECT_EQ(t->principals[0].name, "alpha");
  EXPECT_EQ(t->principals[1].name, "mid");
  EXPECT_EQ(t->principals[2].name, "zeta");
  const PrincipalEntry* z = t->find("zeta");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z, &t->principals[2]);
  EXPECT_EQ(z->perms, kPermRead | kPermWrite | kPermDelete);
  EXPECT_EQ(z->max_connections, 64u);
  EXPECT_EQ(z->tenant, &t->tenants[0]);
  EXPECT_EQ(z->secret, secret_of(1));  // secrets_for numbers them in config order
  EXPECT_EQ(t->find("alpha")->tenant, &t->tenants[1]);
  EXPECT_EQ(t->find("alpha")->secret, secret_of(2));
  EXPECT_EQ(t->find("mid")->max_connections, 2u);
  EXPECT_EQ(t->find("mi"), nullptr);
  EXPECT_EQ(t->find("zetaa"), nullptr);
  EXPECT_EQ(t->find(""), nullptr);
}

// The table's copies of the secrets are overwritten before their memory goes back to the allocator (the
// destructor calls wipe_secrets; reading the freed bytes afterwards would be the test's own bug).
TEST(AuthRegistry, ATableWipesItsCopiesOfTheSecrets) {
  AuthRegistry reg;
  const conf::SecurityConfig s =
      required({{"app", 0, 0}}, {principal("a", "app", kPermRead), principal("b", "app", kPermRead)});
  std::string err;
  const std::unique_ptr<AuthTable> t = reg.build(s, secrets_for(s), &err);
  ASSERT_NE(t, nullptr) << err;
  std::vector<const std::uint8_t*> bytes;
  std::size_t nonzero = 0;
  for (const PrincipalEntry& p : t->principals) {
    ASSERT_EQ(p.secret.size(), 32u);
    for (const std::uint8_t b : p.secret) nonzero += b != 0;
    bytes.push_back(p.secret.data());
  }
  EXPECT_EQ(nonzero, 64u);
  t->wipe_secrets();
  for (const PrincipalEntry& p : t->principals) {
    EXPECT_EQ(p.secret.data(), bytes[static_cast<std::size_t>(&p - t->principals.data())])
        << "wiped in place";
    for (const std::uint8_t b : p.secret) EXPECT_EQ(b, 0);
  }
}

TEST(AuthRegistry, IdsAndUsageSurviveReloadsAndARemovedTenantKeepsItsId) {
  AuthRegistry reg;
  std::string err;
  conf::SecurityConfig s = required({{"a", 0, 0}, {"b", 0, 0}},
                                    {principal("pa", "a", kPermRead), principal("pb", "b", kPermRead)});
  std::unique_ptr<AuthTable> t1 = reg.build(s, secrets_for(s), &err);
  ASSERT_NE(t1, nullptr) << err;
  const std::uint16_t id_a = reg.tenant_id("a"), id_b = reg.tenant_id("b");
  EXPECT_EQ(t1->tenants[0].id, id_a);
  EXPECT_EQ(t1->tenants[1].id, id_b);
  t1->tenants[0].usage->bytes = 4096;
  t1->tenants[0].usage->objects = 3;
  t1->find("pa")->usage->connections = 2;

  // b leaves, c arrives, the order changes: a keeps its id and usage, c gets a fresh id
  s = required({{"c", 0, 0}, {"a", 5, 5}}, {principal("pa", "a", kPermRead | kPermWrite)});
  std::unique_ptr<AuthTable> t2 = reg.build(s, secrets_for(s), &err);
  ASSERT_NE(t2, nullptr) << err;
  EXPECT_EQ(t2->generation, 2u);
  const TenantEntry& a2 = t2->tenants[1];
  EXPECT_EQ(a2.id, id_a);
  EXPECT_EQ(a2.usage, t1->tenants[0].usage);
  EXPECT_EQ(a2.usage->bytes.load(), 4096u);
  EXPECT_EQ(a2.usage->objects.load(), 3u);
  EXPECT_EQ(a2.max_bytes, 5u);
  const std::uint16_t id_c = t2->tenants[0].id;
  EXPECT_NE(id_c, id_a);
  EXPECT_NE(id_c, id_b);
  EXPECT_EQ(t2->find("pa")->usage, t1->find("pa")->usage);
  EXPECT_EQ(t2->find("pa")->usage->connections.load(), 2u);
  EXPECT_EQ(t2->find("pb"), nullptr);

  // b returns: its old id and usage, never a new one
  s = required({{"b", 0, 0}}, {principal("pb", "b", kPermRead)});
  std::unique_ptr<AuthTable> t3 = reg.build(s, secrets_for(s), &err);
  ASSERT_NE(t3, nullptr) << err;
  EXPECT_EQ(t3->tenants[0].id, id_b);
  EXPECT_EQ(t3->tenants[0].usage, t1->tenants[1].usage);
  EXPECT_EQ(t3->find("pb")->usage, t1->find("pb")->usage);
  EXPECT_EQ(t3->generation, 3u);
}

TEST(AuthRegistry, AuthenticationOffIsAnEmptyTableInNamespaceZero) {
  AuthRegistry reg;
  conf::SecurityConfig s = required({{"a", 0, 0}}, {principal("p", "a", kPermRead)});
  s.authentication = conf::Authentication::kOff;
  std::string err;
  // off reads no secrets: none given, no error
  std::unique_ptr<AuthTable> t = reg.build(s, conf::Secrets{}, &err);
  ASSERT_NE(t, nullptr) << err;
  EXPECT_FALSE(t->required);
  EXPECT_TRUE(t->tenants.empty());
  EXPECT_TRUE(t->principals.empty());
  EXPECT_EQ(t->generation, 1u);
  EXPECT_EQ(reg.tenant_id("a"), 0);
  s.authentication = conf::Authentication::kRequired;
  t = reg.build(s, secrets_for(s), &err);
  ASSERT_NE(t, nullptr) << err;
  EXPECT_EQ(t->generation, 2u);
  EXPECT_EQ(t->tenants[0].id, 1);  // the first tenant ever seen; 0 stays the unauthenticated namespace
}

TEST(AuthRegistry, SecretsMustMatchThePrincipals) {
  AuthRegistry reg;
  std::string err;
  const conf::SecurityConfig s =
      required({{"a", 0, 0}}, {principal("p", "a", kPermRead), principal("q", "a", kPermRead)});
  std::vector<conf::PrincipalSecret> only_p{{"p", secret_of(7)}};
  EXPECT_EQ(reg.build(s, conf::Secrets(std::move(only_p)), &err), nullptr);
  EXPECT_EQ(err, "security.secrets_file: no secret for principal \"q\" (security.principals[1])");

  std::vector<conf::PrincipalSecret> extra{{"p", secret_of(7)}, {"q", secret_of(8)}, {"ghost", secret_of(9)}};
  EXPECT_EQ(reg.build(s, conf::Secrets(std::move(extra)), &err), nullptr);
  EXPECT_THAT(err, HasSubstr("security.secrets_file: a secret for \"ghost\", which is not a principal"));

  std::vector<conf::PrincipalSecret> short_one{{"p", secret_of(7, 15)}, {"q", secret_of(8)}};
  EXPECT_EQ(reg.build(s, conf::Secrets(std::move(short_one)), &err), nullptr);
  EXPECT_EQ(err, "security.secrets_file: the secret of principal \"p\" is not 16 to 64 bytes");
  // a failed build assigns nothing and uses no generation
  EXPECT_EQ(reg.tenant_id("a"), 0);
  EXPECT_EQ(reg.generation(), 0u);
}

TEST(AuthRegistry, AConfigAssembledInCodeIsCheckedToo) {
  AuthRegistry reg;
  std::string err;
  conf::SecurityConfig s = required({{"a", 0, 0}}, {principal("p", "b", kPermRead)});
  EXPECT_EQ(reg.build(s, secrets_for(s), &err), nullptr);
  EXPECT_EQ(err, "security.principals[0].tenant: \"b\" is not a tenant in security.tenants");
  s = required({{"a", 0, 0}, {"a", 0, 0}}, {});
  EXPECT_EQ(reg.build(s, secrets_for(s), &err), nullptr);
  EXPECT_EQ(err, "security.tenants[1].name: tenant \"a\" is listed twice");
  s = required({{"a", 0, 0}}, {principal("p", "a", kPermRead), principal("p", "a", kPermWrite)});
  EXPECT_EQ(reg.build(s, secrets_for(s), &err), nullptr);
  EXPECT_EQ(err, "security.principals[1].name: principal \"p\" is listed twice");
  s = required({{"a b", 0, 0}}, {});
  EXPECT_EQ(reg.build(s, secrets_for(s), &err), nullptr);
  EXPECT_THAT(err, HasSubstr("security.tenants[0].name: \"a b\" must be 1 to 64 characters"));
}

TEST(AuthRegistry, TenantIdsRunOutAfter65535NamesAndAreNeverReused) {
  AuthRegistry reg;
  std::string err;
  std::vector<conf::TenantConfig> batch;
  std::uint32_t next = 0;
  // 65535 distinct names in batches of 4096, each batch replacing the previous one
  while (next < AuthRegistry::kMaxTenantIds) {
    batch.clear();
    for (int i = 0; i < 4096 && next < AuthRegistry::kMaxTenantIds; ++i) {
      batch.push_back({"t" + std::to_string(next++), 0, 0});
    }
    conf::SecurityConfig s = required(batch, {});
    ASSERT_NE(reg.build(s, conf::Secrets{}, &err), nullptr) << err;
  }
  EXPECT_EQ(reg.tenant_id("t0"), 1);
  EXPECT_EQ(reg.tenant_id("t65534"), 65535);
  conf::SecurityConfig s = required({{"t0", 0, 0}, {"one-more", 0, 0}}, {});
  EXPECT_EQ(reg.build(s, conf::Secrets{}, &err), nullptr);
  EXPECT_THAT(err, HasSubstr("security.tenants: more than 65535 distinct tenant names"));
  // a known name still builds
  s = required({{"t0", 0, 0}, {"t1", 0, 0}}, {});
  std::unique_ptr<AuthTable> t = reg.build(s, conf::Secrets{}, &err);
  ASSERT_NE(t, nullptr) << err;
  EXPECT_EQ(t->tenants[0].id, 1);
}

}  // namespace
}  // namespace rdmagate::dataplane

// security.authentication, tenants and principals, and the secrets file (conf/secrets.*): every error names
// the key (or the file) an operator has to edit, and no error, dump or diff carries a secret.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "helpers.hpp"

namespace rdmagate::conf {
namespace {

using ::testing::ElementsAre;
using testing::errorsOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::load;
using ::testing::Not;

constexpr std::string_view kTwoTenants = R"(
security:
  authentication: required
  auth_timeout_ms: 2000
  secrets_file: /etc/rdmagate/secrets.yaml
  tenants:
    - name: app
      max_bytes: 1GiB
      max_objects: 100000
    - name: "ops@site-1.b_2"
  principals:
    - name: app-writer
      tenant: app
      permissions: [read, write, delete]
      max_connections: 64
    - name: app-reader
      tenant: app
      permissions: [read]
    - name: prober
      tenant: ops@site-1.b_2
      permissions: []
)";

TEST(Security, TenantsAndPrincipalsAsWritten) {
  auto r = load(kTwoTenants);
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  const SecurityConfig& s = r->config.security;
  EXPECT_TRUE(s.authentication_required());
  EXPECT_EQ(s.auth_timeout_ms, 2000u);
  EXPECT_EQ(s.secrets_file, "/etc/rdmagate/secrets.yaml");
  ASSERT_EQ(s.tenants.size(), 2u);
  EXPECT_EQ(s.tenants[0], (TenantConfig{"app", std::uint64_t{1} << 30, 100000}));
  EXPECT_EQ(s.tenants[1], (TenantConfig{"ops@site-1.b_2", 0, 0}));
  ASSERT_EQ(s.principals.size(), 3u);
  EXPECT_EQ(s.principals[0], (PrincipalConfig{"app-writer", "app",
                                              kPermissionRead | kPermissionWrite | kPermissionDelete, 64}));
  EXPECT_EQ(s.principals[1], (PrincipalConfig{"app-reader", "app", kPermissionRead, 0}));
  EXPECT_EQ(s.principals[2], (PrincipalConfig{"prober", "ops@site-1.b_2", 0, 0}));
}

TEST(Security, DefaultsAreAuthenticationRequiredAndNobody) {
  const SecurityConfig s;
  EXPECT_EQ(s.authentication, Authentication::kRequired);
  EXPECT_TRUE(s.authentication_required());
  EXPECT_EQ(s.auth_timeout_ms, 5000u);
  EXPECT_TRUE(s.secrets_file.empty());
  EXPECT_TRUE(s.tenants.empty());
  EXPECT_TRUE(s.principals.empty());
}

TEST(Security, OffIsTheWordNotABoolean) {
  auto r = load("security:\n  authentication: off\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.security.authentication, Authentication::kOff);
  EXPECT_THAT(errorsOf("security:\n  authentication: false\n"),
              ElementsAre("conf/x.yaml:2:3: security.authentication: \"false\" is not one of required, off"));
  EXPECT_THAT(
      errorsOf("security:\n  authentication: require\n"),
      ElementsAre("conf/x.yaml:2:3: security.authentication: \"require\" is not one of required, off; "
                  "did you mean \"required\"?"));
}

TEST(Security, SizesTakeBinarySuffixes) {
  auto r = load(R"(
security:
  tenants:
    - {name: a, max_bytes: 512MiB}
    - {name: b, max_bytes: 3KiB}
    - {name: c, max_bytes: 2TiB}
    - {name: d, max_bytes: 4096}
)");
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  const auto& t = r->config.security.tenants;
  EXPECT_EQ(t[0].max_bytes, 512ull << 20);
  EXPECT_EQ(t[1].max_bytes, 3ull << 10);
  EXPECT_EQ(t[2].max_bytes, 2ull << 40);
  EXPECT_EQ(t[3].max_bytes, 4096u);
  EXPECT_THAT(
      errorsOf("security:\n  tenants:\n    - {name: a, max_bytes: 1GB}\n"),
      ElementsAre("conf/x.yaml:3:28: security.tenants[0].max_bytes: expected an integer, got \"1GB\""));
  EXPECT_THAT(
      errorsOf("security:\n  tenants:\n    - {name: a, max_bytes: 20000000TiB}\n"),
      ElementsAre("conf/x.yaml:3:28: security.tenants[0].max_bytes: 20000000TiB does not fit in 64 bits"));
}

TEST(Security, NamesOutsideTheSetAreRefused) {
  const std::string long_name(65, 'a');
  EXPECT_THAT(errorsOf("security:\n  tenants:\n    - name: \"a b\"\n"),
              ElementsAre("conf/x.yaml:3:13: security.tenants[0].name: \"a b\" must be 1 to 64 characters of "
                          "A-Z a-z 0-9 . _ @ -"));
  EXPECT_THAT(errorsOf("security:\n  tenants:\n    - name: " + long_name + "\n"),
              ElementsAre(HasSubstr("security.tenants[0].name: \"" + long_name + "\" must be 1 to 64")));
  EXPECT_THAT(errorsOf("security:\n  tenants: [{name: t}]\n  principals:\n    - {name: \"x/y\", tenant: t, "
                       "permissions: []}\n"),
              ElementsAre(HasSubstr("security.principals[0].name: \"x/y\" must be 1 to 64 characters")));
  EXPECT_THAT(errorsOf("security:\n  tenants:\n    - name: \"\"\n"),
              ElementsAre(HasSubstr("security.tenants[0].name: \"\" must be 1 to 64")));
  // exactly 64 is fine
  EXPECT_THAT(errorsOf("security:\n  tenants:\n    - name: " + std::string(64, 'a') + "\n"), IsEmpty());
}

TEST(Security, DuplicateNamesAreRefused) {
  EXPECT_THAT(errorsOf("security:\n  tenants:\n    - name: app\n    - name: app\n"),
              ElementsAre("conf/x.yaml:4:7: security.tenants[1].name: \"app\" is already named by "
                          "security.tenants[0]"));
  EXPECT_THAT(errorsOf(R"(
security:
  tenants: [{name: t}]
  principals:
    - {name: p, tenant: t, permissions: [read]}
    - {name: q, tenant: t, permissions: [read]}
    - {name: p, tenant: t, permissions: [write]}
)"),
              ElementsAre("conf/x.yaml:6:7: security.principals[2].name: \"p\" is already named by "
                          "security.principals[0]"));
}

TEST(Security, PermissionWords) {
  EXPECT_THAT(errorsOf("security:\n  tenants: [{name: t}]\n  principals:\n"
                       "    - {name: p, tenant: t, permissions: [read, wirte]}\n"),
              ElementsAre("conf/x.yaml:4:48: security.principals[0].permissions[1]: \"wirte\" is not a "
                          "permission; the permissions are read, write, delete (did you mean write?)"));
  EXPECT_THAT(errorsOf("security:\n  tenants: [{name: t}]\n  principals:\n"
                       "    - {name: p, tenant: t, permissions: [read, read]}\n"),
              ElementsAre(HasSubstr("security.principals[0].permissions[1]: \"read\" is listed twice")));
  EXPECT_THAT(errorsOf("security:\n  tenants: [{name: t}]\n  principals:\n"
                       "    - {name: p, tenant: t, permissions: admin}\n"),
              ElementsAre(HasSubstr("security.principals[0].permissions: expected a list of read, write, "
                                    "delete, got \"admin\" (write [admin])")));
}

TEST(Security, FieldsAreCheckedByName) {
  EXPECT_THAT(errorsOf("security:\n  tenants: [{name: t}]\n  principals:\n    - {name: p, tenant: t}\n"),
              ElementsAre("conf/x.yaml:4:7: security.principals[0]: needs a permissions"));
  EXPECT_THAT(errorsOf("security:\n  tenants:\n    - {name: t, max_object: 3}\n"),
              ElementsAre("conf/x.yaml:3:17: security.tenants[0].max_object: unknown field; the fields are "
                          "name, max_bytes, max_objects (did you mean max_objects?)"));
  EXPECT_THAT(errorsOf("security:\n  tenants:\n    - t\n"),
              ElementsAre("conf/x.yaml:3:7: security.tenants[0]: expected a mapping (name: ...), got \"t\""));
  EXPECT_THAT(errorsOf("security:\n  tenants: {name: t}\n"),
              ElementsAre(HasSubstr("security.tenants: expected a list of tenants (each a mapping), got a "
                                    "mapping")));
  EXPECT_THAT(errorsOf("security:\n  tenants: [{name: t}]\n  principals:\n"
                       "    - {name: p, tenant: t, permissions: [], max_connections: -1}\n"),
              ElementsAre(HasSubstr("security.principals[0].max_connections: -1 is out of range")));
}

TEST(Security, APrincipalsTenantMustBeListed) {
  EXPECT_THAT(errorsOf(R"(
security:
  tenants: [{name: app}]
  principals:
    - {name: p, tenant: app, permissions: [read]}
    - {name: q, tenant: ap, permissions: [read]}
  authentication: off
)"),
              ElementsAre("conf/x.yaml:5:7: security.principals[1].tenant: \"ap\" is not a tenant in "
                          "security.tenants (principal \"q\")"));
  // a bad tenant list is reported once, not again through every principal naming it
  EXPECT_THAT(errorsOf("security:\n  tenants: [{name: \"a b\"}]\n  principals:\n"
                       "    - {name: p, tenant: x, permissions: []}\n  authentication: off\n"),
              ElementsAre(HasSubstr("security.tenants[0].name")));
}

TEST(Security, PrincipalsWithAuthenticationNeedASecretsFile) {
  EXPECT_THAT(errorsOf(R"(
security:
  authentication: required
  tenants: [{name: t}]
  principals: [{name: p, tenant: t, permissions: [read]}]
)"),
              ElementsAre("conf/x.yaml:4:3: security.principals: lists principals, but security.secrets_file "
                          "is empty: name the file holding their secrets"));
  EXPECT_THAT(
      errorsOf("security:\n  authentication: required\n  secrets_file: secrets.yaml\n"),
      ElementsAre("conf/x.yaml:3:3: security.secrets_file: \"secrets.yaml\" is not an absolute path"));
  // required without principals is valid (every AUTH is denied), and so is off with principals
  EXPECT_THAT(errorsOf("security:\n  authentication: required\n"), IsEmpty());
  EXPECT_THAT(
      errorsOf(
          "security:\n  authentication: off\n  tenants: [{name: t}]\n  principals: [{name: p, tenant: t, "
          "permissions: []}]\n"),
      IsEmpty());
}

TEST(Security, QuotasNeedTheMemoryStore) {
  EXPECT_THAT(errorsOf(R"(
store:
  backend: rados
security:
  tenants:
    - {name: a}
    - {name: b, max_objects: 3}
)"),
              ElementsAre("conf/x.yaml:6:7: security.tenants[1].max_objects: quotas are enforced only with "
                          "store.backend memory (the RADOS backend cannot account replaced values); "
                          "store.backend = rados (line 2)"));
  EXPECT_THAT(
      errorsOf("security:\n  tenants:\n    - {name: b, max_bytes: 1KiB}\n", {"store.backend=rados"}),
      ElementsAre(HasSubstr("security.tenants[0].max_bytes: quotas are enforced only with store.backend "
                            "memory")));
}

TEST(Security, OverridesSetWholeLists) {
  auto r = load("", {"security.authentication=off", "security.tenants=[{name: t, max_objects: 5}]",
                     "security.principals=[{name: p, tenant: t, permissions: [read, delete]}]"});
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  EXPECT_EQ(r->config.security.principals.at(0).permissions, kPermissionRead | kPermissionDelete);
  EXPECT_EQ(r->config.security.tenants.at(0).max_objects, 5u);
}

TEST(Security, DumpRoundTripsAndDiffNamesTheList) {
  auto first = load(kTwoTenants);
  ASSERT_TRUE(first.ok());
  const std::string text = dumpConfig(first->config);
  EXPECT_THAT(text, HasSubstr("  authentication: required\n"));
  EXPECT_THAT(text,
              HasSubstr("  principals: [{name: \"app-writer\", tenant: \"app\", permissions: [read, write, "
                        "delete], max_connections: 64}, "));
  auto second = load(text);
  ASSERT_TRUE(second.ok()) << formatErrors(second.errors()) << text;
  EXPECT_EQ(first->config, second->config);

  Config next = first->config;
  next.security.principals[1].permissions = kPermissionRead | kPermissionWrite;
  const std::vector<ConfigChange> d = diffConfig(first->config, next);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].key, "security.principals");
  EXPECT_EQ(d[0].reload, Reload::kLive);
  EXPECT_EQ(applyLiveChanges(first->config, next), next);
}

// --- the secrets file ----------------------------------------------------------------------------------

constexpr std::string_view kHex32 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

TEST(Secrets, ParsesHexIntoBytesSortedByName) {
  std::string err;
  auto s = parseSecrets("secrets:\n  zed: \"hex:" + std::string(kHex32) +
                            "\"\n  alpha: \"hex:FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF\"\n",
                        "s.yaml", &err);
  ASSERT_TRUE(s.has_value()) << err;
  ASSERT_EQ(s->entries().size(), 2u);
  EXPECT_EQ(s->entries()[0].principal, "alpha");
  EXPECT_EQ(s->entries()[0].secret, std::vector<std::uint8_t>(16, 0xff));
  ASSERT_NE(s->find("zed"), nullptr);
  ASSERT_EQ(s->find("zed")->secret.size(), 32u);
  for (std::size_t i = 0; i < 32; ++i) EXPECT_EQ(s->find("zed")->secret[i], i);
  EXPECT_EQ(s->find("nobody"), nullptr);
  // an empty mapping is no secrets
  auto empty = parseSecrets("secrets:\n", "s.yaml", &err);
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->entries().empty());
}

TEST(Secrets, BadValuesAreRefusedWithoutQuotingThem) {
  const std::string secret_ish = "hex:" + std::string(kHex32) + "0";  // odd digit count
  for (const std::string& value :
       {secret_ish, std::string("hex:") + std::string(30, 'a'), std::string("hex:") + std::string(130, 'a'),
        std::string(kHex32), std::string("hex:") + std::string(31, 'a') + "g"}) {
    std::string err;
    EXPECT_FALSE(parseSecrets("secrets:\n  p: \"" + value + "\"\n", "s.yaml", &err).has_value()) << value;
    EXPECT_THAT(err, HasSubstr("s.yaml:2:3: secrets.p: expected \"hex:\" and 32 to 128 hex digits"));
    EXPECT_THAT(err, Not(HasSubstr(value.substr(4, 20))));
  }
  std::string err;
  EXPECT_FALSE(parseSecrets("secrets:\n  \"a b\": \"hex:" + std::string(kHex32) + "\"\n", "s.yaml", &err));
  EXPECT_THAT(err, HasSubstr("s.yaml:2:3: secrets: a principal name is 1 to 64 characters"));
  EXPECT_FALSE(parseSecrets(
      "secrets:\n  p: \"hex:" + std::string(kHex32) + "\"\n  p: \"hex:" + std::string(kHex32) + "\"\n",
      "s.yaml", &err));
  EXPECT_THAT(err, HasSubstr("secrets.p: listed twice"));
  EXPECT_FALSE(parseSecrets("p: x\n", "s.yaml", &err));
  EXPECT_THAT(err, HasSubstr("s.yaml: expected one mapping, secrets: {principal: \"hex:...\"}"));
  EXPECT_FALSE(parseSecrets("secrets: [a]\n", "s.yaml", &err));
  EXPECT_THAT(err, HasSubstr("secrets: expected a mapping of principal names"));
}

class SecretsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rdmagate-secrets-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/secrets.yaml";
  }
  void TearDown() override {
    std::remove(path_.c_str());
    std::remove((dir_ + "/fifo").c_str());
    rmdir(dir_.c_str());
  }
  void write(std::string_view text, mode_t mode) {
    std::ofstream(path_) << text;
    ASSERT_EQ(chmod(path_.c_str(), mode), 0);
  }
  std::string dir_, path_;
};

TEST_F(SecretsFile, ReadWhenOnlyTheOwnerHasAccess) {
  for (mode_t mode : {0600, 0400}) {
    write("secrets:\n  p: \"hex:" + std::string(kHex32) + "\"\n", mode);
    std::string err;
    auto s = loadSecretsFile(path_, &err);
    ASSERT_TRUE(s.has_value()) << err;
    EXPECT_EQ(s->entries().size(), 1u);
  }
}

TEST_F(SecretsFile, AnyGroupOrOtherBitIsRefusedWithTheFix) {
  for (mode_t mode : {0640, 0604, 0610, 0601, 0644, 0660}) {
    write("secrets:\n  p: \"hex:" + std::string(kHex32) + "\"\n", mode);
    std::string err;
    EXPECT_FALSE(loadSecretsFile(path_, &err).has_value()) << std::oct << mode;
    char m[8];
    std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(mode));
    EXPECT_EQ(err, "security.secrets_file: " + path_ + " has mode " + m +
                       ", which grants the group or others access to the secrets; run chmod 600 " + path_);
  }
}

TEST_F(SecretsFile, NotARegularFileMissingOrMalformed) {
  std::string err;
  EXPECT_FALSE(loadSecretsFile(dir_, &err).has_value());
  EXPECT_EQ(err, "security.secrets_file: " + dir_ + " is not a regular file");
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(loadSecretsFile(fifo, &err).has_value());  // and does not wait for a writer
  EXPECT_EQ(err, "security.secrets_file: " + fifo + " is not a regular file");
  EXPECT_FALSE(loadSecretsFile(dir_ + "/absent.yaml", &err).has_value());
  EXPECT_EQ(err, "security.secrets_file: cannot open " + dir_ + "/absent.yaml: No such file or directory");
  write("secrets:\n  p: \"hex:abc\"\n", 0600);
  EXPECT_FALSE(loadSecretsFile(path_, &err).has_value());
  EXPECT_THAT(err, HasSubstr("security.secrets_file: " + path_ + ":2:3: secrets.p: expected \"hex:\""));
}

// The owner must be the reader or root: another user who owns the file could rewrite the secrets.
TEST_F(SecretsFile, OwnedByAnotherUserIsRefusedWithTheFix) {
  EXPECT_TRUE(secretsOwnerAllowed(1000, 1000));
  EXPECT_TRUE(secretsOwnerAllowed(0, 1000));
  EXPECT_TRUE(secretsOwnerAllowed(0, 0));
  EXPECT_FALSE(secretsOwnerAllowed(1001, 1000));
  EXPECT_FALSE(secretsOwnerAllowed(1000, 0));
  write("secrets:\n  p: \"hex:" + std::string(kHex32) + "\"\n", 0600);
  if (geteuid() != 0) {
    // Only root can give a file away; the ownership rule itself is checked above.
    EXPECT_NE(chown(path_.c_str(), 65534, static_cast<gid_t>(-1)), 0);
    return;
  }
  ASSERT_EQ(chown(path_.c_str(), 65534, static_cast<gid_t>(-1)), 0);
  std::string err;
  EXPECT_FALSE(loadSecretsFile(path_, &err).has_value());
  EXPECT_EQ(err,
            "security.secrets_file: " + path_ +
                " is owned by uid 65534, neither this process's user (uid 0) nor root, and its owner could "
                "rewrite the secrets; run chown 0 " +
                path_);
}

TEST_F(SecretsFile, UnreadableIsRefused) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads a mode 0000 file";
  write("secrets:\n", 0000);
  std::string err;
  EXPECT_FALSE(loadSecretsFile(path_, &err).has_value());
  EXPECT_EQ(err, "security.secrets_file: cannot open " + path_ + ": Permission denied");
}

}  // namespace
}  // namespace rdmagate::conf

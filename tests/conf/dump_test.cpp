// The effective-config dump, the SIGHUP diff and merge, and schema introspection.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "helpers.hpp"

namespace rdmagate::conf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::load;
using ::testing::Not;

constexpr std::string_view kEverythingSet = R"(
eal:
  main_lcore: 2
  hugepages: disabled
  in_memory: false
  memory_mib: 4096
  file_prefix: "gw-7"
device:
  name: rxe0
listen:
  addresses: ["10.1.1.1", "fd00::1", "fe80::2%eth1"]
  port: 20049
dataplane:
  cores: "3-4,6"
  queue_depth: 512
  idle_policy: yield
protocol:
  checksum: true
store:
  backend: rados
  capacity_mib: 2048
  rados:
    conf_file: /srv/ceph/east.conf
    client: client.gw-7
    keyring: "/srv/ceph/gw 7.keyring"
    pool: "objects.v2"
    namespace: "tenant: a #1"
    op_timeout_ms: 100
    notify_timeout_ms: 60000
    cache_lease_ms: 600000
telemetry:
  bind_address: "::1"
  port: 0
security:
  allowed_clients: ["0.0.0.0/0", "::/0", "10.9.9.9"]
logging:
  level: debug
  format: json
)";

TEST(Dump, RoundTripsToTheSameConfig) {
  auto first = load(kEverythingSet);
  ASSERT_TRUE(first.ok()) << formatErrors(first.errors());
  std::string text = dumpConfig(first->config);
  auto second = load(text);
  ASSERT_TRUE(second.ok()) << formatErrors(second.errors()) << text;
  EXPECT_EQ(first->config, second->config) << text;
  EXPECT_EQ(dumpConfig(second->config), text);  // and the dump is stable
  EXPECT_EQ(second->config.store.rados.ns, "tenant: a #1");
  EXPECT_EQ(second->config.store.rados.keyring, "/srv/ceph/gw 7.keyring");
}

// The nested section is the last mapping of store, its keys indented under it, and no key of it leaks
// into store or the next section.
TEST(Dump, WritesTheNestedSectionInsideItsParent) {
  auto r = load("store:\n  rados:\n    pool: p1\n", {"store.rados.cache_lease_ms=9000"});
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  std::string text = dumpConfig(r->config, &r->origins);
  EXPECT_THAT(text, HasSubstr("  max_value_bytes: 4194304  # default\n"
                              "  rados:\n"
                              "    conf_file: \"/etc/ceph/ceph.conf\"  # default\n"
                              "    client: \"client.rdmagate\"  # default\n"
                              "    keyring: \"\"  # default\n"
                              "    pool: \"p1\"  # conf/x.yaml:3:5\n"
                              "    namespace: \"\"  # default\n"
                              "    op_timeout_ms: 5000  # default\n"
                              "    notify_timeout_ms: 2000  # default\n"
                              "    cache_lease_ms: 9000  # --set store.rados.cache_lease_ms=9000\n"
                              "telemetry:\n"));
}

// A string the YAML reader would take for something else comes back as the same string.
TEST(Dump, RadosStringsRoundTrip) {
  for (const char* ns : {"true", "123", "~", "null", "- a", "a: b", "#x", "'q'", "\\\"", "ü", "[x]"}) {
    Config c = testing::loadedDefaults();
    c.store.rados.ns = ns;
    auto r = load(dumpConfig(c));
    ASSERT_TRUE(r.ok()) << ns << ": " << formatErrors(r.errors());
    EXPECT_EQ(r->config.store.rados.ns, ns);
    EXPECT_EQ(r->config, c) << ns;
  }
}

TEST(Dump, DefaultsRoundTrip) {
  auto first = load("");
  ASSERT_TRUE(first.ok());
  auto second = load(dumpConfig(first->config));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->config, second->config);
}

TEST(Dump, ListsEveryKeyInFileOrder) {
  std::string text = dumpConfig(Config{});
  std::size_t pos = 0;
  for (const KeyInfo& k : schema()) {
    // "store.rados.pool" is `pool` two levels deep.
    const auto depth = static_cast<std::size_t>(std::count(k.key.begin(), k.key.end(), '.'));
    std::string name(k.key.substr(k.key.rfind('.') + 1));
    std::size_t at = text.find("\n" + std::string(2 * depth, ' ') + name + ": ", pos);
    ASSERT_NE(at, std::string::npos) << k.key << " missing or out of order in\n" << text;
    pos = at;
  }
  EXPECT_THAT(text, HasSubstr("  lcores: auto\n"));  // an unresolved Config says so
}

TEST(Dump, AnnotatesOrigins) {
  auto r = load("dataplane:\n  queue_depth: 32\n", {"logging.level=debug"});
  ASSERT_TRUE(r.ok());
  std::string text = dumpConfig(r->config, &r->origins);
  EXPECT_THAT(text, HasSubstr("  queue_depth: 32  # conf/x.yaml:2:3\n"));
  EXPECT_THAT(text, HasSubstr("  level: debug  # --set logging.level=debug\n"));
  EXPECT_THAT(text, HasSubstr("  poll_burst: 32  # default\n"));
  EXPECT_THAT(text, HasSubstr("  lcores: [0, 1]  # default\n"));
}

TEST(Dump, QuotesWhatYamlWouldMisread) {
  auto r = load("listen:\n  addresses: [\"::\"]\n");
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(dumpConfig(r->config), HasSubstr("  addresses: [\"::\"]\n"));
}

TEST(Diff, ReportsChangesWithTheirReloadClass) {
  auto a = load("");
  auto b = load("logging:\n  level: warn\ndataplane:\n  queue_depth: 256\nprotocol:\n  keepalive_ms: 2000\n");
  ASSERT_TRUE(a.ok() && b.ok());
  auto changes = diffConfig(a->config, b->config);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].key, "dataplane.queue_depth");
  EXPECT_EQ(changes[0].before, "128");
  EXPECT_EQ(changes[0].after, "256");
  EXPECT_EQ(changes[0].reload, Reload::kRestart);
  EXPECT_EQ(changes[1].key, "protocol.keepalive_ms");
  EXPECT_EQ(changes[1].reload, Reload::kLive);
  EXPECT_EQ(changes[2].key, "logging.level");
  EXPECT_EQ(changes[2].before, "info");
  EXPECT_EQ(changes[2].after, "warn");
  EXPECT_EQ(changes[2].reload, Reload::kLive);
  EXPECT_THAT(diffConfig(a->config, a->config), IsEmpty());
}

TEST(Diff, RadosKeysAreRestartOnly) {
  auto a = load("");
  auto b = load(R"(
store:
  backend: rados
  rados:
    pool: other
    namespace: ns2
    op_timeout_ms: 1000
)");
  ASSERT_TRUE(a.ok() && b.ok()) << formatErrors(b.errors());
  auto changes = diffConfig(a->config, b->config);
  ASSERT_EQ(changes.size(), 4u);
  EXPECT_EQ(changes[0].key, "store.backend");
  EXPECT_EQ(changes[0].before, "memory");
  EXPECT_EQ(changes[0].after, "rados");
  EXPECT_EQ(changes[1].key, "store.rados.pool");
  EXPECT_EQ(changes[1].before, "\"rdmagate\"");
  EXPECT_EQ(changes[1].after, "\"other\"");
  EXPECT_EQ(changes[2].key, "store.rados.namespace");
  EXPECT_EQ(changes[3].key, "store.rados.op_timeout_ms");
  for (const ConfigChange& c : changes) EXPECT_EQ(c.reload, Reload::kRestart) << c.key;
  // A SIGHUP keeps every one of them at the running value.
  EXPECT_EQ(applyLiveChanges(a->config, b->config), a->config);
}

TEST(Diff, ListsAreComparedWhole) {
  auto a = load("");
  auto b = load("security:\n  allowed_clients: [\"10.0.0.0/8\"]\n");
  ASSERT_TRUE(a.ok() && b.ok());
  auto changes = diffConfig(a->config, b->config);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].after, "[\"10.0.0.0/8\"]");
  EXPECT_EQ(changes[0].reload, Reload::kLive);
}

TEST(ApplyLive, TakesOnlyLiveKeys) {
  auto running = load("");
  auto next = load(R"(
logging:
  level: error
  format: json
protocol:
  keepalive_ms: 300
  dead_peer_timeout_ms: 900
  reconnect_min_ms: 10
  reconnect_max_ms: 20
  handshake_timeout_ms: 700
  checksum: true
telemetry:
  core_stall_ms: 50
security:
  allowed_clients: []
dataplane:
  queue_depth: 256
)");
  ASSERT_TRUE(running.ok() && next.ok());
  Config merged = applyLiveChanges(running->config, next->config);
  EXPECT_EQ(merged.logging.level, LogLevel::kError);
  EXPECT_EQ(merged.protocol.keepalive_ms, 300u);
  EXPECT_EQ(merged.protocol.dead_peer_timeout_ms, 900u);
  EXPECT_EQ(merged.protocol.reconnect_min_ms, 10u);
  EXPECT_EQ(merged.protocol.reconnect_max_ms, 20u);
  EXPECT_EQ(merged.protocol.handshake_timeout_ms, 700u);
  EXPECT_EQ(merged.telemetry.core_stall_ms, 50u);
  EXPECT_TRUE(merged.security.allowed_clients.empty());
  // restart-only keys keep the running values
  EXPECT_EQ(merged.logging.format, LogFormat::kLogfmt);
  EXPECT_FALSE(merged.protocol.checksum);
  EXPECT_EQ(merged.dataplane.queue_depth, 128u);
  // every remaining difference is restart-only
  for (const ConfigChange& c : diffConfig(merged, next->config))
    EXPECT_EQ(c.reload, Reload::kRestart) << c.key;
  EXPECT_THAT(validateConfig(merged, running->origins, testing::host16()), IsEmpty());
}

TEST(Schema, LiveKeysAreTheOnesTheIssueNames) {
  std::vector<std::string> live;
  for (const KeyInfo& k : schema()) {
    if (k.reload == Reload::kLive) live.emplace_back(k.key);
  }
  EXPECT_THAT(
      live, ElementsAre("protocol.keepalive_ms", "protocol.dead_peer_timeout_ms", "protocol.reconnect_min_ms",
                        "protocol.reconnect_max_ms", "protocol.handshake_timeout_ms", "protocol.drain_timeout_ms",
                        "protocol.bulk_timeout_ms",
                        "telemetry.core_stall_ms", "security.allowed_clients",
                        "security.connections_per_source", "security.connect_rate", "security.connect_burst",
                        "security.authentication", "security.auth_timeout_ms", "security.secrets_file",
                        "security.tenants", "security.principals", "logging.level", "faults.rules"));
}

TEST(Schema, SectionsInFileOrder) {
  std::vector<std::string> sections(schemaSections().begin(), schemaSections().end());
  EXPECT_THAT(sections, ElementsAre("eal", "device", "listen", "dataplane", "protocol", "store", "telemetry",
                                    "security", "logging", "faults"));
}

TEST(Schema, DefaultsAreValidValues) {
  // Every default, written back as YAML, parses under its own key.
  for (const KeyInfo& k : schema()) {
    // "store.rados.pool" -> "store:\n  rados:\n    pool: ..."
    std::string text;
    std::string_view rest = k.key;
    for (std::string indent;; indent += "  ") {
      const std::size_t dot = rest.find('.');
      text += indent + std::string(rest.substr(0, dot)) + ":";
      if (dot == std::string_view::npos) {
        text += " " + k.default_value + "\n";
        break;
      }
      text += "\n";
      rest.remove_prefix(dot + 1);
    }
    auto r = load(text);
    EXPECT_TRUE(r.ok()) << k.key << ": " << (r.ok() ? "" : formatErrors(r.errors())) << text;
    // and the same through --set, which takes the full path
    auto s = load("", {std::string(k.key) + "=" + k.default_value});
    EXPECT_TRUE(s.ok()) << k.key << ": " << (s.ok() ? "" : formatErrors(s.errors()));
  }
}

TEST(Schema, KeysAreUniqueAndWellFormed) {
  std::set<std::string_view> seen;
  for (const KeyInfo& k : schema()) {
    EXPECT_TRUE(seen.insert(k.key).second) << k.key;
    // section.key, or section.nested.key for the one nested section, store.rados.
    const auto dots = std::count(k.key.begin(), k.key.end(), '.');
    if (k.key.starts_with("store.rados.")) {
      EXPECT_EQ(dots, 2) << k.key;
    } else {
      EXPECT_EQ(dots, 1) << k.key;
    }
    EXPECT_FALSE(k.description.empty()) << k.key;
    EXPECT_FALSE(k.range.empty()) << k.key;
  }
}

TEST(Result, ErrorsAndValue) {
  Result<int> ok(5);
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 5);
  Result<int> bad(std::vector<ConfigError>{ConfigError{Origin{OriginKind::kFile, "f", 1, 2}, "a.b", "m"}});
  EXPECT_FALSE(bad);
  EXPECT_EQ(bad.errors()[0].str(), "f:1:2: a.b: m");
}

TEST(ResultDeathTest, MisuseAborts) {
  EXPECT_DEATH(
      {
        Result<int> bad(std::vector<ConfigError>{ConfigError{}});
        (void)bad.value();
      },
      "value\\(\\) called on a failed Result");
  EXPECT_DEATH({ Result<int> r(std::vector<ConfigError>{}); }, "empty error list");
}

TEST(ErrorFormat, AllOriginKinds) {
  EXPECT_EQ((ConfigError{Origin{OriginKind::kFile, "a.yaml", 3, 0}, "x.y", "m"}).str(), "a.yaml:3: x.y: m");
  EXPECT_EQ((ConfigError{Origin{OriginKind::kFile, "a.yaml", 0, 0}, "", "m"}).str(), "a.yaml: m");
  EXPECT_EQ((ConfigError{Origin{OriginKind::kOverride, "x.y=1", 0, 0}, "x.y", "m"}).str(), "--set x.y: m");
  EXPECT_EQ((ConfigError{Origin{OriginKind::kOverride, "bad", 0, 0}, "", "m"}).str(), "--set bad: m");
  EXPECT_EQ((ConfigError{Origin{OriginKind::kDefault, "a.yaml", 0, 0}, "x.y", "m"}).str(),
            "a.yaml: x.y (default): m");
  EXPECT_EQ((ConfigError{Origin{OriginKind::kDefault, "", 0, 0}, "x.y", "m"}).str(), "x.y (default): m");
}

}  // namespace
}  // namespace rdmagate::conf

// The effective-config dump, the SIGHUP diff and merge, and schema introspection.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  capacity_mib: 2048
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
    std::string name(k.key.substr(k.key.find('.') + 1));
    std::size_t at = text.find("\n  " + name + ": ", pos);
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
  auto b = load("logging:\n  level: warn\ndataplane:\n  queue_depth: 128\nprotocol:\n  keepalive_ms: 2000\n");
  ASSERT_TRUE(a.ok() && b.ok());
  auto changes = diffConfig(a->config, b->config);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].key, "dataplane.queue_depth");
  EXPECT_EQ(changes[0].before, "64");
  EXPECT_EQ(changes[0].after, "128");
  EXPECT_EQ(changes[0].reload, Reload::kRestart);
  EXPECT_EQ(changes[1].key, "protocol.keepalive_ms");
  EXPECT_EQ(changes[1].reload, Reload::kLive);
  EXPECT_EQ(changes[2].key, "logging.level");
  EXPECT_EQ(changes[2].before, "info");
  EXPECT_EQ(changes[2].after, "warn");
  EXPECT_EQ(changes[2].reload, Reload::kLive);
  EXPECT_THAT(diffConfig(a->config, a->config), IsEmpty());
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
  queue_depth: 128
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
  EXPECT_EQ(merged.dataplane.queue_depth, 64u);
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
                        "telemetry.core_stall_ms", "security.allowed_clients", "logging.level"));
}

TEST(Schema, SectionsInFileOrder) {
  std::vector<std::string> sections(schemaSections().begin(), schemaSections().end());
  EXPECT_THAT(sections, ElementsAre("eal", "device", "listen", "dataplane", "protocol", "store", "telemetry",
                                    "security", "logging"));
}

TEST(Schema, DefaultsAreValidValues) {
  // Every default, written back as YAML, parses under its own key.
  for (const KeyInfo& k : schema()) {
    std::string section(k.key.substr(0, k.key.find('.')));
    std::string name(k.key.substr(k.key.find('.') + 1));
    auto r = load(section + ":\n  " + name + ": " + k.default_value + "\n");
    EXPECT_TRUE(r.ok()) << k.key << ": " << (r.ok() ? "" : formatErrors(r.errors()));
  }
}

TEST(Schema, KeysAreUniqueAndWellFormed) {
  std::set<std::string_view> seen;
  for (const KeyInfo& k : schema()) {
    EXPECT_TRUE(seen.insert(k.key).second) << k.key;
    EXPECT_EQ(std::count(k.key.begin(), k.key.end(), '.'), 1) << k.key;
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

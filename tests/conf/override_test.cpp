// --set KEY=VALUE: parsed as YAML, checked exactly like the file, errors naming the override.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "helpers.hpp"

namespace rdmagate::conf {
namespace {

using ::testing::ElementsAre;
using testing::errorsOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::load;

TEST(Override, SetsAScalarAndRecordsTheOrigin) {
  auto r = load("dataplane:\n  queue_depth: 32\n", {"dataplane.queue_depth=256"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.dataplane.queue_depth, 256u);
  Origin o = r->origins.of("dataplane.queue_depth");
  EXPECT_EQ(o.kind, OriginKind::kOverride);
  EXPECT_EQ(o.str(), "--set dataplane.queue_depth=256");
}

TEST(Override, LastOneWins) {
  auto r = load("", {"logging.level=debug", "logging.level=error"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.logging.level, LogLevel::kError);
}

TEST(Override, ListsAndCpulists) {
  auto r = load("", {"dataplane.cores=2-3", "listen.addresses=[\"::1\", 10.0.0.1]",
                     "security.allowed_clients=[10.0.0.0/8, \"fd00::/8\"]"});
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  EXPECT_EQ(r->config.dataplane.cores, (CpuSet{2, 3}));
  EXPECT_EQ(r->config.eal.lcores, (CpuSet{0, 2, 3}));
  ASSERT_EQ(r->config.listen.addresses.size(), 2u);
  EXPECT_EQ(r->config.listen.addresses[0].str(), "::1");
  ASSERT_EQ(r->config.security.allowed_clients.size(), 2u);
  EXPECT_EQ(r->config.security.allowed_clients[1].str(), "fd00::/8");
}

TEST(Override, EmptyListClearsTheAllowList) {
  auto r = load("", {"security.allowed_clients=[]"});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->config.security.allowed_clients.empty());
}

TEST(Override, NestedKeysTakeTheirFullPath) {
  auto r = load("store:\n  rados:\n    pool: a\n",
                {"store.backend=rados", "store.rados.pool=b", "store.rados.namespace=\"\"",
                 "store.rados.op_timeout_ms=250"});
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  EXPECT_EQ(r->config.store.backend, StoreBackend::kRados);
  EXPECT_EQ(r->config.store.rados.pool, "b");
  EXPECT_EQ(r->config.store.rados.ns, "");
  EXPECT_EQ(r->config.store.rados.op_timeout_ms, 250u);
  EXPECT_EQ(r->origins.of("store.rados.pool").str(), "--set store.rados.pool=b");
}

TEST(Override, NestedKeyErrorsNameTheOverride) {
  EXPECT_THAT(errorsOf("", {"store.rados.client=admin"}),
              ElementsAre("--set store.rados.client: \"admin\" must start with \"client.\" (a cephx client "
                          "entity, e.g. client.rdmagate)"));
  EXPECT_THAT(errorsOf("", {"store.rados.cache_lease_ms=400"}),
              ElementsAre("--set store.rados.cache_lease_ms: 400 is out of range [1500, 600000]"));
  EXPECT_THAT(errorsOf("", {"store.rados.pol=x"}),
              ElementsAre("--set store.rados.pol: unknown key; did you mean store.rados.pool?"));
  EXPECT_THAT(errorsOf("", {"store.pool=x"}),
              ElementsAre("--set store.pool: unknown key; did you mean store.rados.pool?"));
}

TEST(Override, NestedSectionInsteadOfKey) {
  EXPECT_THAT(errorsOf("", {"store.rados={pool: x}"}),
              ElementsAre("--set store.rados: is a section; set one key at a time, e.g. --set "
                          "store.rados.conf_file=..."));
}

TEST(Override, OutOfRangeNamesTheOverride) {
  EXPECT_THAT(errorsOf("", {"dataplane.queue_depth=70000"}),
              ElementsAre("--set dataplane.queue_depth: 70000 is out of range [4, 16384]"));
}

TEST(Override, WrongTypeNamesTheOverride) {
  EXPECT_THAT(errorsOf("", {"protocol.checksum=maybe"}),
              ElementsAre("--set protocol.checksum: expected true or false, got \"maybe\""));
}

TEST(Override, UnknownKeyWithSuggestion) {
  EXPECT_THAT(errorsOf("", {"dataplane.queue_dept=3"}),
              ElementsAre("--set dataplane.queue_dept: unknown key; did you mean dataplane.queue_depth?"));
}

TEST(Override, SectionInsteadOfKey) {
  EXPECT_THAT(
      errorsOf("", {"logging=debug"}),
      ElementsAre("--set logging: is a section; set one key at a time, e.g. --set logging.level=..."));
}

TEST(Override, MissingEquals) {
  EXPECT_THAT(errorsOf("", {"logging.level"}),
              ElementsAre("--set logging.level: expected key=value, e.g. --set dataplane.queue_depth=256"));
}

TEST(Override, EmptyValue) {
  EXPECT_THAT(
      errorsOf("", {"logging.level="}),
      ElementsAre(
          "--set logging.level: expected one of trace, debug, info, warn, error, got an empty value"));
}

TEST(Override, InvalidYamlValue) {
  EXPECT_THAT(errorsOf("", {"dataplane.cores=[1, 2"}),
              ElementsAre(HasSubstr("--set dataplane.cores: invalid YAML value: ")));
}

TEST(Override, ScalarWhereListExpectedSuggestsBrackets) {
  EXPECT_THAT(errorsOf("", {"listen.addresses=10.0.0.1"}),
              ElementsAre("--set listen.addresses: expected a list of IP addresses, got \"10.0.0.1\" (write "
                          "[10.0.0.1])"));
}

TEST(Override, ListElementErrorsNameTheElement) {
  EXPECT_THAT(errorsOf("", {"security.allowed_clients=[10.0.0.0/8, 10.1.0.0/8]"}),
              ElementsAre("--set security.allowed_clients[1]: \"10.1.0.0/8\" has host bits set; did you mean "
                          "10.0.0.0/8?"));
}

TEST(Override, QuotedValueIsAString) {
  EXPECT_THAT(errorsOf("", {"listen.port='7471'"}),
              ElementsAre("--set listen.port: expected an integer, got the quoted string \"7471\""));
}

TEST(Override, AreCheckedForConsistencyWithTheFile) {
  EXPECT_THAT(
      errorsOf("protocol:\n  keepalive_ms: 1000\n", {"protocol.dead_peer_timeout_ms=800"}),
      ElementsAre(
          "--set protocol.dead_peer_timeout_ms: 800 must be greater than protocol.keepalive_ms = 1000 "
          "(line 2), or idle peers are declared dead"));
}

TEST(Override, FixesAFileValue) {
  // A bad file value is still reported; the override does not hide it.
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth: 0\n", {"dataplane.queue_depth=32"}),
              ElementsAre("conf/x.yaml:2:3: dataplane.queue_depth: 0 is out of range [4, 16384]"));
}

TEST(Override, ALaterGoodOverrideReenablesChecks) {
  EXPECT_THAT(
      errorsOf("", {"protocol.keepalive_ms=x", "protocol.keepalive_ms=20000"}),
      ElementsAre(
          "--set protocol.keepalive_ms: expected an integer, got \"x\"",
          "--set protocol.keepalive_ms: 20000 must be less than protocol.dead_peer_timeout_ms = 10000 "
          "(default), or idle peers are declared dead"));
}

TEST(Override, HostChecksApply) {
  EXPECT_THAT(errorsOf("", {"dataplane.cores=[1, 40]"}),
              ElementsAre("--set dataplane.cores: cpu 40 does not exist on this host (online cpus: 0-15)"));
}

TEST(Override, ReplacingAListForgetsTheFileElementLines) {
  auto r = load("listen:\n  addresses:\n    - 10.0.0.1\n    - 10.0.0.2\n", {"listen.addresses=[10.0.0.3]"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->origins.ofElement("listen.addresses", 1).kind, OriginKind::kOverride);
}

TEST(Override, ErrorsComeAfterFileErrorsInCommandLineOrder) {
  EXPECT_THAT(errorsOf("listen:\n  port: 0\n", {"logging.level=x", "dataplane.poll_burst=0"}),
              ElementsAre(HasSubstr("conf/x.yaml:2:3: listen.port"), HasSubstr("--set logging.level"),
                          HasSubstr("--set dataplane.poll_burst")));
}

TEST(Override, NoOverridesNoChange) {
  EXPECT_THAT(errorsOf("", {}), IsEmpty());
}

}  // namespace
}  // namespace rdmagate::conf

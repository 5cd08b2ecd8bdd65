// Parsing: documents, sections, keys and value types. Each error test asserts the whole line an operator
// sees, so file, line, column and key path are all checked.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "helpers.hpp"

namespace rdmagate::conf {
namespace {

using ::testing::ElementsAre;
using testing::errorsOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::load;
using testing::loadedDefaults;
using ::testing::Not;
using ::testing::StartsWith;
using testing::yaml;

// --- documents --------------------------------------------------------------------------------------

TEST(Document, EmptyFileGivesAllDefaults) {
  auto r = load("");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config, loadedDefaults());
  EXPECT_TRUE(r->origins.isDefault("dataplane.queue_depth"));
}

TEST(Document, CommentsOnlyGivesAllDefaults) {
  auto r = load("# nothing here\n\n   # still nothing\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config, loadedDefaults());
}

TEST(Document, ExplicitNullDocumentGivesAllDefaults) {
  auto r = load("~\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config, loadedDefaults());
}

TEST(Document, EmptySectionsKeepDefaults) {
  auto r = load(R"(
eal:
dataplane:
logging: {}
)");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config, loadedDefaults());
}

TEST(Document, DefaultsAreTheDocumentedOnes) {
  Config c;
  EXPECT_EQ(c.eal.main_lcore, 0u);
  EXPECT_TRUE(c.eal.lcores.empty());
  EXPECT_EQ(c.eal.hugepages, HugepageMode::kAuto);
  EXPECT_TRUE(c.eal.in_memory);
  EXPECT_EQ(c.device.name, "auto");
  EXPECT_EQ(c.listen.addresses, std::vector<IpAddress>{IpAddress::v4Any()});
  EXPECT_EQ(c.listen.port, 7471);
  EXPECT_EQ(c.dataplane.cores, (CpuSet{1}));
  EXPECT_EQ(c.dataplane.queue_depth, 128u);
  EXPECT_EQ(c.dataplane.idle_policy, IdlePolicy::kBusy);
  EXPECT_EQ(c.dataplane.idle_backoff_max_pauses, 64u);
  EXPECT_EQ(c.dataplane.idle_event_after_us, 1000u);
  EXPECT_EQ(c.dataplane.srq, SrqMode::kAuto);
  EXPECT_EQ(c.dataplane.srq_receives, 0u);
  EXPECT_EQ(c.protocol.keepalive_ms, 1000u);
  EXPECT_EQ(c.protocol.dead_peer_timeout_ms, 10000u);
  EXPECT_FALSE(c.protocol.checksum);
  EXPECT_EQ(c.store.max_value_bytes, 4u * 1024 * 1024);
  EXPECT_EQ(c.telemetry.bind_address, IpAddress::v4(127, 0, 0, 1));
  EXPECT_EQ(c.logging.level, LogLevel::kInfo);
  EXPECT_EQ(c.logging.format, LogFormat::kLogfmt);
  EXPECT_EQ(c.security.allowed_clients.size(), 9u);
  EXPECT_EQ(c.store.backend, StoreBackend::kMemory);
  EXPECT_EQ(c.store.capacity_mib, 256u);
  EXPECT_EQ(c.store.rados.conf_file, "/etc/ceph/ceph.conf");
  EXPECT_EQ(c.store.rados.client, "client.rdmagate");
  EXPECT_EQ(c.store.rados.keyring, "");
  EXPECT_EQ(c.store.rados.pool, "rdmagate");
  EXPECT_EQ(c.store.rados.ns, "");
  EXPECT_EQ(c.store.rados.op_timeout_ms, 5000u);
  EXPECT_EQ(c.store.rados.notify_timeout_ms, 2000u);
  EXPECT_EQ(c.store.rados.cache_lease_ms, 5000u);
}

TEST(Document, StoreBackendNames) {
  EXPECT_EQ(toString(StoreBackend::kMemory), "memory");
  EXPECT_EQ(toString(StoreBackend::kRados), "rados");
}

TEST(Document, SetValuesAreLoaded) {
  auto r = load(R"(
eal:
  main_lcore: 3
  hugepages: required
  hugepage_dir: /dev/hugepages
  memory_mib: 1024
  file_prefix: gw1
  in_memory: false
device:
  name: mlx5_1
  port: 2
listen:
  addresses: ["10.0.0.1", "fd00::1"]
  port: 18515
  backlog: 16
dataplane:
  cores: 4-5
  queue_depth: 256
  inline_threshold_bytes: 8192
  send_inline_bytes: 0
  max_fragments: 4
  signal_interval: 8
  poll_burst: 64
  control_check_interval: 1
  max_connections_per_core: 500
  idle_policy: pause
protocol:
  keepalive_ms: 200
  dead_peer_timeout_ms: 2000
  reconnect_min_ms: 50
  reconnect_max_ms: 50
  handshake_timeout_ms: 3000
  checksum: true
store:
  backend: rados
  capacity_mib: 512
  max_value_bytes: 1
  rados:
    conf_file: /etc/ceph/east.conf
    client: client.gw_1.east-2
    keyring: /etc/ceph/ceph.client.gw_1.keyring
    pool: objects
    namespace: tenant-a
    op_timeout_ms: 30000
    notify_timeout_ms: 1500
    cache_lease_ms: 8000
telemetry:
  enabled: false
  bind_address: "::1"
  port: 0
  core_stall_ms: 10
security:
  allowed_clients: []
logging:
  level: trace
  format: json
)");
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  const Config& c = r->config;
  EXPECT_EQ(c.eal.main_lcore, 3u);
  EXPECT_EQ(c.eal.lcores, (CpuSet{3, 4, 5}));  // derived
  EXPECT_EQ(c.eal.hugepages, HugepageMode::kRequired);
  EXPECT_EQ(c.eal.hugepage_dir, "/dev/hugepages");
  EXPECT_EQ(c.eal.memory_mib, 1024u);
  EXPECT_EQ(c.eal.file_prefix, "gw1");
  EXPECT_FALSE(c.eal.in_memory);
  EXPECT_EQ(c.device.name, "mlx5_1");
  EXPECT_EQ(c.device.port, 2u);
  ASSERT_EQ(c.listen.addresses.size(), 2u);
  EXPECT_EQ(c.listen.addresses[1].str(), "fd00::1");
  EXPECT_EQ(c.listen.port, 18515);
  EXPECT_EQ(c.listen.backlog, 16u);
  EXPECT_EQ(c.dataplane.cores, (CpuSet{4, 5}));
  EXPECT_EQ(c.dataplane.queue_depth, 256u);
  EXPECT_EQ(c.dataplane.inline_threshold_bytes, 8192u);
  EXPECT_EQ(c.dataplane.send_inline_bytes, 0u);
  EXPECT_EQ(c.dataplane.max_fragments, 4u);
  EXPECT_EQ(c.dataplane.signal_interval, 8u);
  EXPECT_EQ(c.dataplane.poll_burst, 64u);
  EXPECT_EQ(c.dataplane.control_check_interval, 1u);
  EXPECT_EQ(c.dataplane.max_connections_per_core, 500u);
  EXPECT_EQ(c.dataplane.idle_policy, IdlePolicy::kPause);
  EXPECT_EQ(c.protocol.keepalive_ms, 200u);
  EXPECT_EQ(c.protocol.dead_peer_timeout_ms, 2000u);
  EXPECT_EQ(c.protocol.reconnect_min_ms, 50u);
  EXPECT_EQ(c.protocol.reconnect_max_ms, 50u);
  EXPECT_EQ(c.protocol.handshake_timeout_ms, 3000u);
  EXPECT_TRUE(c.protocol.checksum);
  EXPECT_EQ(c.store.capacity_mib, 512u);
  EXPECT_EQ(c.store.max_value_bytes, 1u);
  EXPECT_EQ(c.store.backend, StoreBackend::kRados);
  EXPECT_EQ(c.store.rados.conf_file, "/etc/ceph/east.conf");
  EXPECT_EQ(c.store.rados.client, "client.gw_1.east-2");
  EXPECT_EQ(c.store.rados.keyring, "/etc/ceph/ceph.client.gw_1.keyring");
  EXPECT_EQ(c.store.rados.pool, "objects");
  EXPECT_EQ(c.store.rados.ns, "tenant-a");
  EXPECT_EQ(c.store.rados.op_timeout_ms, 30000u);
  EXPECT_EQ(c.store.rados.notify_timeout_ms, 1500u);
  EXPECT_EQ(c.store.rados.cache_lease_ms, 8000u);
  EXPECT_FALSE(c.telemetry.enabled);
  EXPECT_EQ(c.telemetry.bind_address.str(), "::1");
  EXPECT_EQ(c.telemetry.port, 0);
  EXPECT_EQ(c.telemetry.core_stall_ms, 10u);
  EXPECT_TRUE(c.security.allowed_clients.empty());
  EXPECT_EQ(c.logging.level, LogLevel::kTrace);
  EXPECT_EQ(c.logging.format, LogFormat::kJson);

  Origin o = r->origins.of("dataplane.queue_depth");
  EXPECT_EQ(o.kind, OriginKind::kFile);
  EXPECT_EQ(o.source, "conf/x.yaml");
  EXPECT_EQ(o.line, 17);
  EXPECT_EQ(o.column, 3);
  Origin pool = r->origins.of("store.rados.pool");  // a nested key: its own line, one level deeper
  EXPECT_EQ(pool.line, 41);
  EXPECT_EQ(pool.column, 5);
}

TEST(Document, SyntaxErrorGivesLineAndColumn) {
  EXPECT_THAT(errorsOf(R"(
dataplane:
  cores: [1, 2]]
)"),
              ElementsAre("conf/x.yaml:2:16: invalid YAML: illegal flow end"));
}

// yaml-cpp names the line where it gave up looking for the ']' (the next line, or the end of the file);
// the operator needs the line that opened it.
TEST(Document, UnclosedBracketIsNamedWhereItOpened) {
  EXPECT_THAT(errorsOf(R"(
dataplane:
  cores: [1, 2
  queue_depth: 8
)"),
              ElementsAre("conf/x.yaml:2:10: invalid YAML: this '[' is never closed; add the matching ']' "
                          "(the parser gave up looking at line 3)"));
  EXPECT_THAT(errorsOf(R"(
eal:
  main_lcore: 1
dataplane:
  cores: [1, 2
  queue_depth: 64
logging:
  level: info
)"),
              ElementsAre("conf/x.yaml:4:10: invalid YAML: this '[' is never closed; add the matching ']' "
                          "(the parser gave up looking at line 5)"));
}

TEST(Document, UnclosedBraceIsNamedWhereItOpened) {
  EXPECT_THAT(errorsOf(R"(
listen:
  addresses: {a: 1
logging:
  level: info
)"),
              ElementsAre("conf/x.yaml:2:14: invalid YAML: this '{' is never closed; add the matching '}' "
                          "(the parser gave up looking at line 3)"));
}

// Brackets inside quoted strings, comments and closed flow collections before it are not the culprit; in a
// list spanning lines, the innermost unclosed bracket is.
TEST(Document, UnclosedBracketIgnoresQuotesCommentsAndClosedOnes) {
  EXPECT_THAT(errorsOf(R"(
# a comment with [ and {
eal:
  file_prefix: "x[y{"  # [
dataplane:
  cores: [1, 2]
security:
  allowed_clients: ["10.0.0.0/8", # the lab [
    "192.168.0.0/16"
logging:
  level: info
)"),
              ElementsAre("conf/x.yaml:7:20: invalid YAML: this '[' is never closed; add the matching ']' "
                          "(the parser gave up looking at line 9)"));
}

TEST(Document, TabInIndentationSaysUseSpaces) {
  EXPECT_THAT(
      errorsOf("eal:\n\tmain_lcore: 1\n"),
      ElementsAre("conf/x.yaml:2:1: invalid YAML: a tab in the indentation; YAML does not allow tabs for "
                  "indentation; use spaces"));
  // After spaces, on a later line of the section (yaml-cpp: "illegal tab when looking for indentation").
  EXPECT_THAT(
      errorsOf("eal:\n  main_lcore: 1\n  \tmemory_mib: 2\n"),
      ElementsAre("conf/x.yaml:3:3: invalid YAML: a tab in the indentation; YAML does not allow tabs for "
                  "indentation; use spaces"));
}

TEST(Document, TabsOutsideTheIndentationAreFine) {
  // Before a comment, and on a line of blanks: YAML allows both.
  auto r = load("eal:\n  in_memory: false\t# shared config\n\t\n\t# a comment\n");
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  EXPECT_FALSE(r->config.eal.in_memory);
}

TEST(Document, BadIndentationIsASyntaxError) {
  EXPECT_THAT(errorsOf(R"(
protocol:
  keepalive_ms: 100
    dead_peer_timeout_ms: 1000
)"),
              ElementsAre("conf/x.yaml:3:25: invalid YAML: illegal map value"));
}

// yaml-cpp 0.7 accepts a quoted scalar that runs to the end of the file, folding the rest of the file into
// it; the loader checks the source text for the closing quote.
TEST(Document, UnterminatedQuoteIsASyntaxError) {
  EXPECT_THAT(errorsOf("eal:\n  hugepage_dir: \"/dev/hugepages\nlisten:\n  port: 1\n"),
              ElementsAre("conf/x.yaml:2:17: invalid YAML: unterminated quoted string"));
  EXPECT_THAT(errorsOf("device:\n  name: 'mlx5_0\n"),
              ElementsAre("conf/x.yaml:2:9: invalid YAML: unterminated quoted string"));
}

TEST(Document, QuotesWithEscapesAndMultipleLinesAreFine) {
  auto r = load(
      "eal:\n  hugepage_dir: \"/mnt/\\\"x\\\"\"\n  file_prefix: 'it''s'\ndevice:\n  name: \"mlx5\n    "
      "_0\"\n");
  ASSERT_FALSE(r.ok());  // the values are checked, not the quoting
  EXPECT_THAT(formatErrors(r.errors()), Not(HasSubstr("unterminated")));
}

TEST(Document, TopLevelListIsRejected) {
  EXPECT_THAT(
      errorsOf("- eal\n- device\n"),
      ElementsAre("conf/x.yaml:1:1: the top level must be a mapping of sections (eal, device, listen, ...), "
                  "not a list"));
}

TEST(Document, TopLevelScalarIsRejected) {
  EXPECT_THAT(errorsOf("hello\n"),
              ElementsAre(HasSubstr("conf/x.yaml:1:1: the top level must be a mapping")));
}

TEST(Document, SecondDocumentIsRejected) {
  EXPECT_THAT(errorsOf("logging:\n  level: info\n---\nlogging:\n  level: debug\n"),
              ElementsAre("conf/x.yaml:3:1: a config file holds one YAML document; found more than one"));
}

// fuzz_config found this file (a mangled example config): yaml-cpp 0.7's LoadAll never returned on it and
// grew to gigabytes, so --check-config and a SIGHUP reload hung. It must be refused like any bad file.
TEST(Document, InputThatHungYamlCppLoadAllIsRefused) {
  const std::string text =
      "# A laptop o# A DaemonSet pod: the node's cpuset gives it CPUs 2-6, hugepages are mounted by the pod "
      "specr CI box without hugepages:\xa4"
      "no hugetlbfs,$a small store, cores that yield when idle so the\n"
      "# machine stays usable, and verbog: which device, and where to listen. Everything else k iseptes "
      "default\n"
      "# (see conf/rdmagate.yamlSt5ctypeIcE ge\n"
      "  file_prefix: rdmagate[1]\n"
      " , Prometheus\n"
      "# scrapes t idle_policy: yield\n"
      " h";
  const auto errors = errorsOf(text);
  ASSERT_FALSE(errors.empty());
  EXPECT_THAT(errors[0], StartsWith("conf/x.yaml:"));
}

TEST(Document, BytesThatAreNotUtf8AreRejectedWithTheirPosition) {
  EXPECT_THAT(errorsOf("eal:\n  main_lcore: 0\n  hugepage_dir: \"/huge\xff\xffpages\"\n"),
              ElementsAre("conf/x.yaml:3:23: not UTF-8: byte 0xff (a config file is UTF-8 text)"));
  // Overlong NUL, a surrogate, above U+10FFFF, a truncated sequence at the end.
  for (const char* bad : {"# \xc0\x80\n", "# \xed\xa0\x80\n", "# \xf4\x90\x80\x80\n", "# \xe2\x82"}) {
    const auto errors = errorsOf(bad);
    ASSERT_EQ(errors.size(), 1u) << bad;
    EXPECT_THAT(errors[0], StartsWith("conf/x.yaml:1:3: not UTF-8: byte 0x")) << bad;
  }
  // Real UTF-8 is fine, in comments and in values.
  EXPECT_THAT(
      errorsOf("# 10 \xc2\xb5s \xe2\x86\x92 \xf0\x9f\x98\x80\neal:\n  hugepage_dir: \"/mnt/h\xc3\xa9\"\n"),
      IsEmpty());
  EXPECT_THAT(errorsOf("", {"eal.hugepage_dir=/h\xff"}),
              ElementsAre("--set eal.hugepage_dir: not UTF-8 (a value is UTF-8 text)"));
}

TEST(Document, OversizedFileIsRejected) {
  std::string big = "# " + std::string(kMaxConfigBytes, 'x') + "\n";
  EXPECT_THAT(errorsOf(big), ElementsAre(HasSubstr("conf/x.yaml: file is ")));
}

TEST(Document, DeepNestingIsAnErrorNotACrash) {
  std::string deep(5000, '[');
  EXPECT_THAT(errorsOf("eal: " + deep), ElementsAre(HasSubstr("invalid YAML")));
}

TEST(Document, AliasBombIsRejectedQuickly) {
  // Ten levels of ten aliases each: 10^10 leaves if anything expanded them.
  std::string text = "security:\n  allowed_clients:\n    - &l0 \"10.0.0.0/8\"\n";
  std::string extra = "logging:\n";
  for (int level = 1; level <= 10; ++level) {
    extra += "  k" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) extra += (i ? ", *l" : "*l") + std::to_string(level - 1);
    extra += "]\n";
  }
  auto errs = errorsOf(text + extra);
  ASSERT_EQ(errs.size(), 10u);
  EXPECT_EQ(errs[0], "conf/x.yaml:5:3: logging.k1: unknown key in section logging");
}

TEST(Document, AllErrorsAreCollectedInLineOrder) {
  auto errs = errorsOf(R"(
dataplane:
  queue_depth: 0
  poll_burst: many
protocol:
  keepalive_ms: -5
logging:
  level: loud
)",
                       {"dataplane.max_fragments=0"});
  EXPECT_THAT(errs, ElementsAre(HasSubstr("conf/x.yaml:2:3: dataplane.queue_depth"),
                                HasSubstr("conf/x.yaml:3:3: dataplane.poll_burst"),
                                HasSubstr("conf/x.yaml:5:3: protocol.keepalive_ms"),
                                HasSubstr("conf/x.yaml:7:3: logging.level"),
                                HasSubstr("--set dataplane.max_fragments")));
}

// --- files -------------------------------------------------------------------------------------------

TEST(File, MissingFileIsAnError) {
  auto r = loadConfigFile("/nonexistent/rdmagate.yaml", {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.errors(), ::testing::SizeIs(1));
  EXPECT_EQ(r.errors()[0].str(), "/nonexistent/rdmagate.yaml: cannot read: No such file or directory");
}

TEST(File, DirectoryIsAnError) {
  auto r = loadConfigFile("/", {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.errors()[0].str(), HasSubstr("/: cannot read: "));
}

TEST(File, ErrorsNameThePathGiven) {
  std::string path = ::testing::TempDir() + "rdmagate-conf-test-" + std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream out(path);
    out << "dataplane:\n  queue_depth: 1\n";
  }
  auto r = loadConfigFile(path, {});
  std::remove(path.c_str());
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.errors().size(), 1u);
  EXPECT_EQ(r.errors()[0].str(), path + ":2:3: dataplane.queue_depth: 1 is out of range [4, 16384]");
}

// --- sections and keys -------------------------------------------------------------------------------

TEST(Keys, UnknownKeyWithNearMiss) {
  EXPECT_THAT(
      errorsOf("dataplane:\n  queue_dept: 8\n"),
      ElementsAre("conf/x.yaml:2:3: dataplane.queue_dept: unknown key; did you mean dataplane.queue_depth?"));
}

TEST(Keys, UnknownKeyTransposition) {
  EXPECT_THAT(errorsOf("dataplane:\n  qeuue_depth: 8\n"),
              ElementsAre(HasSubstr("did you mean dataplane.queue_depth?")));
}

TEST(Keys, UnknownKeyMissingUnitSuffix) {
  EXPECT_THAT(
      errorsOf("protocol:\n  keepalive: 100\n"),
      ElementsAre("conf/x.yaml:2:3: protocol.keepalive: unknown key; did you mean protocol.keepalive_ms?"));
}

TEST(Keys, UnknownKeyWrongUnitSuffix) {
  EXPECT_THAT(
      errorsOf("protocol:\n  keepalive_s: 1\n"),
      ElementsAre(HasSubstr("protocol.keepalive_s: unknown key; did you mean protocol.keepalive_ms?")));
}

TEST(Keys, UnknownKeyAbbreviated) {
  EXPECT_THAT(errorsOf("dataplane:\n  max_connections: 8\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.max_connections: unknown key; did you mean "
                          "dataplane.max_connections_per_core?"));
  EXPECT_THAT(errorsOf("store:\n  max_value: 8\n"),
              ElementsAre(HasSubstr("did you mean store.max_value_bytes?")));
  EXPECT_THAT(errorsOf("store:\n  capacity_gib: 8\n"),
              ElementsAre(HasSubstr("did you mean store.capacity_mib?")));
}

TEST(Keys, KeyInTheWrongSection) {
  EXPECT_THAT(
      errorsOf("protocol:\n  queue_depth: 8\n"),
      ElementsAre("conf/x.yaml:2:3: protocol.queue_depth: unknown key; did you mean dataplane.queue_depth?"));
}

TEST(Keys, UnknownKeyWithNothingClose) {
  EXPECT_THAT(errorsOf("store:\n  frobnicate: 1\n"),
              ElementsAre("conf/x.yaml:2:3: store.frobnicate: unknown key in section store"));
}

TEST(Keys, UnknownSectionWithNearMiss) {
  EXPECT_THAT(errorsOf("telemtry:\n  port: 1\n"),
              ElementsAre("conf/x.yaml:1:1: telemtry: unknown section; did you mean telemetry?"));
}

TEST(Keys, KeyAtTopLevel) {
  EXPECT_THAT(errorsOf("queue_depth: 8\n"),
              ElementsAre("conf/x.yaml:1:1: queue_depth: unknown section; queue_depth is a key: did you mean "
                          "dataplane.queue_depth?"));
}

TEST(Keys, UnknownSectionWithNothingClose) {
  EXPECT_THAT(errorsOf("zzz: 1\n"),
              ElementsAre(HasSubstr("conf/x.yaml:1:1: zzz: unknown section; sections are eal "
                                    "device listen dataplane protocol store telemetry security "
                                    "logging")));
}

TEST(Keys, DuplicateKey) {
  EXPECT_THAT(errorsOf(R"(
logging:
  level: info
  format: json
  level: debug
)"),
              ElementsAre("conf/x.yaml:4:3: logging.level: duplicate key (first at line 2)"));
}

TEST(Keys, DuplicateSection) {
  EXPECT_THAT(errorsOf("logging:\n  level: info\nstore: {}\nlogging:\n  format: json\n"),
              ElementsAre("conf/x.yaml:4:1: logging: duplicate section (first at line 1)"));
}

TEST(Keys, SectionThatIsAList) {
  EXPECT_THAT(errorsOf("dataplane:\n  - queue_depth: 8\n"),
              ElementsAre("conf/x.yaml:1:1: dataplane: expected a mapping of keys, got a list"));
}

TEST(Keys, SectionThatIsAScalar) {
  EXPECT_THAT(errorsOf("logging: debug\n"),
              ElementsAre("conf/x.yaml:1:1: logging: expected a mapping of keys, got a single value"));
}

TEST(Keys, ComplexKeyIsRejected) {
  EXPECT_THAT(errorsOf("? [a, b]\n: 1\n"),
              ElementsAre("conf/x.yaml:1:3: a key must be a plain name, not a list or "
                          "mapping"));
}

TEST(Keys, MergeKeyIsRejected) {
  EXPECT_THAT(
      errorsOf(R"(
protocol: &p
  keepalive_ms: 100
dataplane:
  <<: *p
)"),
      ElementsAre("conf/x.yaml:4:3: dataplane: merge keys (<<) are not supported; repeat the settings"));
}

TEST(Keys, AnchorsAndAliasesWork) {
  auto r = load(R"(
listen:
  addresses: &addrs ["10.0.0.1"]
  port: &p 7000
telemetry:
  port: *p
)");
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  EXPECT_EQ(r->config.telemetry.port, 7000);
}

// --- the nested section store.rados -------------------------------------------------------------------

TEST(Nested, UnknownKeyIsRejectedWithItsPath) {
  EXPECT_THAT(errorsOf("store:\n  rados:\n    frobnicate: 1\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.frobnicate: unknown key in section store.rados"));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    pol: x\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.pol: unknown key; did you mean store.rados.pool?"));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    op_timeout: 100\n"),
              ElementsAre(HasSubstr("store.rados.op_timeout: unknown key; did you mean "
                                    "store.rados.op_timeout_ms?")));
}

TEST(Nested, KeyOfTheNestedSectionInItsParent) {
  EXPECT_THAT(errorsOf("store:\n  pool: x\n"),
              ElementsAre("conf/x.yaml:2:3: store.pool: unknown key; did you mean store.rados.pool?"));
  EXPECT_THAT(errorsOf("dataplane:\n  cache_lease_ms: 1000\n"),
              ElementsAre(HasSubstr("did you mean store.rados.cache_lease_ms?")));
  EXPECT_THAT(
      errorsOf("store:\n  rados:\n    capacity_mib: 8\n"),
      ElementsAre(HasSubstr("store.rados.capacity_mib: unknown key; did you mean store.capacity_mib?")));
}

TEST(Nested, MisspelledOrMisplacedSection) {
  EXPECT_THAT(errorsOf("store:\n  rado:\n    pool: x\n"),
              ElementsAre("conf/x.yaml:2:3: store.rado: unknown key; did you mean store.rados?"));
  EXPECT_THAT(errorsOf("dataplane:\n  rados:\n    pool: x\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.rados: unknown key; did you mean store.rados?"));
  EXPECT_THAT(errorsOf("rados:\n  pool: x\n"),
              ElementsAre("conf/x.yaml:1:1: rados: unknown section; rados is nested: write it under store "
                          "(did you mean store.rados?)"));
}

TEST(Nested, DottedNamesAreNotPaths) {
  EXPECT_THAT(
      errorsOf("store.rados:\n  pool: x\n"),
      ElementsAre("conf/x.yaml:1:1: store.rados: a name with a dot is not a path; nest it: store: then "
                  "rados: under it"));
  EXPECT_THAT(
      errorsOf("store:\n  rados.pool: x\n"),
      ElementsAre("conf/x.yaml:2:3: store.rados.pool: a name with a dot is not a path; nest it: rados: "
                  "then pool: under it"));
}

TEST(Nested, EmptySectionKeepsDefaults) {
  for (const char* text : {"store:\n  rados:\n", "store:\n  rados: {}\n", "store:\n  rados: ~\n"}) {
    auto r = load(text);
    ASSERT_TRUE(r.ok()) << text << formatErrors(r.errors());
    EXPECT_EQ(r->config, loadedDefaults()) << text;
  }
}

TEST(Nested, SectionOfTheWrongType) {
  EXPECT_THAT(errorsOf("store:\n  rados: [pool]\n"),
              ElementsAre("conf/x.yaml:2:3: store.rados: expected a mapping of keys, got a list"));
  EXPECT_THAT(errorsOf("store:\n  rados: objects\n"),
              ElementsAre("conf/x.yaml:2:3: store.rados: expected a mapping of keys, got a single value"));
}

TEST(Nested, DuplicateSectionAndDuplicateKey) {
  EXPECT_THAT(errorsOf("store:\n  rados:\n    pool: a\n  rados:\n    pool: b\n"),
              ElementsAre("conf/x.yaml:4:3: store.rados: duplicate section (first at line 2)"));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    pool: a\n    pool: b\n"),
              ElementsAre("conf/x.yaml:4:5: store.rados.pool: duplicate key (first at line 3)"));
}

TEST(Nested, ParentOfTheWrongTypeRejectsTheNestedKeysToo) {
  // store is unreadable, so the rados keys are rejected with it: no lease check against their defaults.
  EXPECT_THAT(errorsOf("store: memory\n", {"store.rados.notify_timeout_ms=9000"}),
              ElementsAre("conf/x.yaml:1:1: store: expected a mapping of keys, got a single value"));
}

TEST(Nested, ErrorsOfSeveralKeysInLineOrder) {
  EXPECT_THAT(
      errorsOf(R"(
store:
  rados:
    client: rdmagate
    pool: ""
    op_timeout_ms: 99
)"),
      ElementsAre(HasSubstr("x.yaml:3:5: store.rados.client:"), HasSubstr("x.yaml:4:5: store.rados.pool:"),
                  HasSubstr("x.yaml:5:5: store.rados.op_timeout_ms:")));
}

// --- integers ----------------------------------------------------------------------------------------

TEST(Integers, OutOfRangeHigh) {
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth: 70000\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.queue_depth: 70000 is out of range [4, 16384]"));
}

TEST(Integers, OutOfRangeLow) {
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth: 1\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.queue_depth: 1 is out of range [4, 16384]"));
}

TEST(Integers, RangeBoundsAreInclusive) {
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth: 16384\n  signal_interval: 1\n"), IsEmpty());
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth: 4\n  signal_interval: 1\n"), IsEmpty());
}

// The ranges of negotiated keys are the protocol's own limits (or inside them), so a file the
// loader accepts never configures what the handshake refuses or the wire cannot carry.
TEST(Integers, RadosTimeoutRanges) {
  struct Case {
    const char* key;
    std::uint32_t lo, hi;
  };
  for (const Case& c : {Case{"op_timeout_ms", 100, 600000}, Case{"notify_timeout_ms", 1000, 60000},
                        Case{"cache_lease_ms", 1500, 600000}}) {
    const std::string key = std::string("store.rados.") + c.key;
    auto at = [&](std::uint64_t v) {
      return errorsOf("store:\n  rados:\n    " + std::string(c.key) + ": " + std::to_string(v) + "\n");
    };
    const std::string range = " is out of range [" + std::to_string(c.lo) + ", " + std::to_string(c.hi) + "]";
    EXPECT_THAT(at(c.lo - 1),
                ElementsAre("conf/x.yaml:3:5: " + key + ": " + std::to_string(c.lo - 1) + range));
    EXPECT_THAT(at(c.hi + 1),
                ElementsAre("conf/x.yaml:3:5: " + key + ": " + std::to_string(c.hi + 1) + range));
    // The bounds are accepted on their own (alone, lease and notify keep the other's default, so take the
    // bound of the pair rule into account).
    auto ok = [&](std::uint64_t v) {
      std::string other = std::string(c.key) == "cache_lease_ms"      ? "    notify_timeout_ms: 1000\n"
                          : std::string(c.key) == "notify_timeout_ms" ? "    cache_lease_ms: 600000\n"
                                                                      : "";
      auto r = load("store:\n  rados:\n    " + std::string(c.key) + ": " + std::to_string(v) + "\n" + other);
      EXPECT_TRUE(r.ok()) << key << "=" << v << ": " << (r.ok() ? "" : formatErrors(r.errors()));
    };
    ok(c.lo);
    ok(c.hi);
  }
  EXPECT_THAT(errorsOf("store:\n  rados:\n    op_timeout_ms: \"5000\"\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.op_timeout_ms: expected an integer, got the quoted "
                          "string \"5000\""));
}

TEST(Integers, NegotiatedKeysFollowTheProtocolLimits) {
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth: 3\n  signal_interval: 1\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.queue_depth: 3 is out of range [4, 16384]"));
  EXPECT_THAT(errorsOf("dataplane:\n  max_connections_per_core: 512\n"), IsEmpty());
  EXPECT_THAT(
      errorsOf("dataplane:\n  max_connections_per_core: 513\n"),
      ElementsAre("conf/x.yaml:2:3: dataplane.max_connections_per_core: 513 is out of range [1, 512]"));
  EXPECT_THAT(errorsOf("dataplane:\n  max_fragments: 16\n"), IsEmpty());
  EXPECT_THAT(errorsOf("dataplane:\n  max_fragments: 17\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.max_fragments: 17 is out of range [1, 16]"));
  EXPECT_THAT(
      errorsOf("dataplane:\n  inline_threshold_bytes: 511\n  send_inline_bytes: 0\n"),
      ElementsAre("conf/x.yaml:2:3: dataplane.inline_threshold_bytes: 511 is out of range [512, 65536]"));

  for (const KeyInfo& k : schema()) {
    if (k.key == "dataplane.queue_depth") {
      EXPECT_EQ(k.range, "[" + std::to_string(protocol::kMinCreditQueueDepth) + ", 16384]");
    } else if (k.key == "dataplane.max_fragments") {
      EXPECT_EQ(k.range, "[1, " + std::to_string(protocol::kMaxFragments) + "]");
    }
  }
  static_assert(kMinQueueDepth == protocol::kMinCreditQueueDepth &&
                kMaxQueueDepth <= protocol::kMaxQueueDepthCap);
  static_assert(kMinInlineThresholdBytes >= protocol::kMinMessageSize &&
                kMaxInlineThresholdBytes <= protocol::kMaxMessageSizeCap);
  static_assert(kMaxChunkFragments == protocol::kMaxFragments);
}

TEST(Integers, NegativeIntoUnsigned) {
  EXPECT_THAT(errorsOf("listen:\n  port: -1\n"),
              ElementsAre("conf/x.yaml:2:3: listen.port: -1 is out of range [1, "
                          "65535]"));
}

TEST(Integers, NegativeZeroIsZero) {
  auto r = load("eal:\n  memory_mib: -0\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.eal.memory_mib, 0u);
}

TEST(Integers, HugeNumberOverflowingUint64) {
  EXPECT_THAT(
      errorsOf("store:\n  max_value_bytes: 99999999999999999999999999\n"),
      ElementsAre("conf/x.yaml:2:3: store.max_value_bytes: 99999999999999999999999999 is out of range "
                  "[1, 1073741824]"));
}

TEST(Integers, NumberOverflowingTheFieldButNotUint64) {
  // 2^32 + 64 would wrap to 64 if narrowed before the range check.
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth: 4294967360\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.queue_depth: 4294967360 is out of range [4, 16384]"));
}

TEST(Integers, StringWhereIntegerExpected) {
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth: deep\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.queue_depth: expected an integer, got \"deep\""));
}

TEST(Integers, QuotedNumberIsAString) {
  EXPECT_THAT(
      errorsOf("dataplane:\n  queue_depth: \"64\"\n"),
      ElementsAre(
          "conf/x.yaml:2:3: dataplane.queue_depth: expected an integer, got the quoted string \"64\""));
}

TEST(Integers, FloatIsRejected) {
  EXPECT_THAT(errorsOf("protocol:\n  keepalive_ms: 1.5\n"),
              ElementsAre("conf/x.yaml:2:3: protocol.keepalive_ms: expected an integer, got \"1.5\""));
}

TEST(Integers, HexAndUnitsAreRejected) {
  EXPECT_THAT(errorsOf("store:\n  max_value_bytes: 0x400000\n  capacity_mib: 4MiB\n"),
              ElementsAre("conf/x.yaml:2:3: store.max_value_bytes: expected an integer, got \"0x400000\"",
                          "conf/x.yaml:3:3: store.capacity_mib: expected an integer, got \"4MiB\""));
}

TEST(Integers, LeadingZeroIsRejected) {
  EXPECT_THAT(
      errorsOf("dataplane:\n  poll_burst: 010\n"),
      ElementsAre("conf/x.yaml:2:3: dataplane.poll_burst: \"010\" has a leading zero (octal in YAML 1.1); "
                  "write it without"));
}

TEST(Integers, ListWhereIntegerExpected) {
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth: [64]\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.queue_depth: expected an integer, got a list"));
}

TEST(Integers, MappingWhereIntegerExpected) {
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth:\n    value: 64\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.queue_depth: expected an integer, got a mapping"));
}

TEST(Integers, EmptyValue) {
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth:\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.queue_depth: expected an integer, got an empty value"));
}

TEST(Integers, ExplicitIntTagIsAccepted) {
  auto r = load("dataplane:\n  queue_depth: !!int 32\n");
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  EXPECT_EQ(r->config.dataplane.queue_depth, 32u);
}

TEST(Integers, StrTagMakesAString) {
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth: !!str 32\n"),
              ElementsAre(HasSubstr("expected an integer, got the quoted string \"32\"")));
}

TEST(Integers, UnknownTagIsRejected) {
  EXPECT_THAT(errorsOf("dataplane:\n  queue_depth: !custom 32\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.queue_depth: unsupported YAML tag \"!custom\""));
}

TEST(Integers, PowerOfTwoRule) {
  EXPECT_THAT(
      errorsOf("dataplane:\n  control_check_interval: 24\n"),
      ElementsAre("conf/x.yaml:2:3: dataplane.control_check_interval: 24 is not a power of two (the core "
                  "masks its loop counter with it)"));
  EXPECT_THAT(errorsOf("dataplane:\n  control_check_interval: 64\n"), IsEmpty());
}

TEST(Integers, SixtyFourBitField) {
  auto r =
      load("eal:\n  memory_mib: 1048576\nstore:\n  capacity_mib: 1048575\n  max_value_bytes: 1073741824\n");
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  EXPECT_EQ(r->config.store.capacity_mib, 1048575u);
  EXPECT_EQ(r->config.store.max_value_bytes, 1073741824u);
}

// --- booleans, strings, enums ------------------------------------------------------------------------

TEST(Booleans, TrueAndFalseForms) {
  for (const char* t : {"true", "True", "TRUE"}) {
    auto r = load(std::string("protocol:\n  checksum: ") + t + "\n");
    ASSERT_TRUE(r.ok()) << t;
    EXPECT_TRUE(r->config.protocol.checksum);
  }
  auto r = load("eal:\n  in_memory: False\n");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->config.eal.in_memory);
}

TEST(Booleans, Yaml11WordsAreRejected) {
  EXPECT_THAT(errorsOf("protocol:\n  checksum: on\n"),
              ElementsAre("conf/x.yaml:2:3: protocol.checksum: expected true or false, got \"on\" (YAML 1.1 "
                          "booleans are not accepted)"));
}

TEST(Booleans, NumberIsNotABoolean) {
  EXPECT_THAT(errorsOf("telemetry:\n  enabled: 1\n"),
              ElementsAre("conf/x.yaml:2:3: telemetry.enabled: expected true or false, got \"1\""));
}

TEST(Booleans, QuotedTrueIsAString) {
  EXPECT_THAT(errorsOf("telemetry:\n  enabled: \"true\"\n"),
              ElementsAre("conf/x.yaml:2:3: telemetry.enabled: expected true or false, got the quoted string "
                          "\"true\""));
}

TEST(Enums, UnknownWordWithSuggestion) {
  EXPECT_THAT(
      errorsOf("logging:\n  level: warning\n"),
      ElementsAre("conf/x.yaml:2:3: logging.level: \"warning\" is not one of trace, debug, info, warn, "
                  "error; did you mean \"warn\"?"));
}

TEST(Enums, Typo) {
  EXPECT_THAT(errorsOf("dataplane:\n  idle_policy: yeild\n"),
              ElementsAre(HasSubstr("did you mean \"yield\"?")));
}

TEST(Enums, CaseMatters) {
  EXPECT_THAT(errorsOf("logging:\n  format: JSON\n"),
              ElementsAre(HasSubstr("logging.format: \"JSON\" is not one of logfmt, json")));
}

TEST(Enums, QuotedWordIsAccepted) {
  auto r = load("logging:\n  format: \"json\"\neal:\n  hugepages: 'required'\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.logging.format, LogFormat::kJson);
  EXPECT_EQ(r->config.eal.hugepages, HugepageMode::kRequired);
}

TEST(Enums, ListWhereWordExpected) {
  EXPECT_THAT(errorsOf("logging:\n  format: [json]\n"),
              ElementsAre("conf/x.yaml:2:3: logging.format: expected one of logfmt, json, got a list"));
}

TEST(Strings, DeviceNameRules) {
  EXPECT_THAT(errorsOf("device:\n  name: \"mlx5/0\"\n"),
              ElementsAre("conf/x.yaml:2:3: device.name: \"mlx5/0\" is not a valid RDMA device name"));
  EXPECT_THAT(errorsOf("device:\n  name: \"\"\n"),
              ElementsAre(HasSubstr("must be \"auto\" or a device name")));
  EXPECT_THAT(errorsOf("device:\n  name: " + std::string(64, 'a') + "\n"), ElementsAre(HasSubstr("1 to 63")));
  EXPECT_THAT(errorsOf("device:\n  name: rxe0\n"), IsEmpty());
}

TEST(Strings, PlainNumberIsAcceptedAsAString) {
  auto r = load("eal:\n  file_prefix: 42\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.eal.file_prefix, "42");
}

TEST(Strings, FilePrefixRules) {
  EXPECT_THAT(
      errorsOf("eal:\n  file_prefix: ../etc\n"),
      ElementsAre("conf/x.yaml:2:3: eal.file_prefix: \"../etc\" may only contain letters, digits, '_', '-' "
                  "and '.', and not start with '.' or '-'"));
  EXPECT_THAT(errorsOf("eal:\n  file_prefix: \"\"\n"), ElementsAre(HasSubstr("must be 1 to 64 characters")));
}

TEST(Strings, HugepageDirMustBeAbsolute) {
  EXPECT_THAT(errorsOf("eal:\n  hugepage_dir: hugepages\n"),
              ElementsAre("conf/x.yaml:2:3: eal.hugepage_dir: \"hugepages\" is not an absolute path"));
  EXPECT_THAT(errorsOf("eal:\n  hugepage_dir: \"/mnt/a,b\"\n"), ElementsAre(HasSubstr("comma")));
}

TEST(Strings, RadosConfFile) {
  EXPECT_THAT(errorsOf("store:\n  rados:\n    conf_file: ceph.conf\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.conf_file: \"ceph.conf\" is not an absolute path"));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    conf_file: \"\"\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.conf_file: \"\" must name a ceph.conf (an absolute "
                          "path)"));
  EXPECT_THAT(
      errorsOf("store:\n  rados:\n    conf_file: \"/etc/ceph/a\\tb\"\n"),
      ElementsAre(HasSubstr("store.rados.conf_file: \"/etc/ceph/a\tb\" contains a control character")));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    conf_file: /" + std::string(4095, 'c') + "\n"),
              ElementsAre(HasSubstr("is longer than PATH_MAX")));
  // Existence is the daemon's check at start: --check-config may run on another host.
  EXPECT_THAT(errorsOf("store:\n  rados:\n    conf_file: /nonexistent/ceph.conf\n"), IsEmpty());
}

TEST(Strings, RadosClientRules) {
  EXPECT_THAT(errorsOf("store:\n  rados:\n    client: rdmagate\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.client: \"rdmagate\" must start with \"client.\" (a "
                          "cephx client entity, e.g. client.rdmagate)"));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    client: osd.0\n"),
              ElementsAre(HasSubstr("\"osd.0\" must start with \"client.\"")));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    client: client.\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.client: \"client.\" needs an id after \"client.\""));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    client: \"client.gw 1\"\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.client: \"client.gw 1\" may only contain letters, "
                          "digits, '_', '-' and '.'"));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    client: client.gw/1\n"),
              ElementsAre(HasSubstr("may only contain")));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    client: \"\"\n"), ElementsAre(HasSubstr("must start with")));
  for (const char* ok : {"client.a", "client.admin", "client.rgw.gw-1_x", "client.0"}) {
    EXPECT_THAT(errorsOf(std::string("store:\n  rados:\n    client: ") + ok + "\n"), IsEmpty()) << ok;
  }
}

TEST(Strings, RadosKeyring) {
  EXPECT_THAT(errorsOf("store:\n  rados:\n    keyring: ceph.keyring\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.keyring: \"ceph.keyring\" is not an absolute path"));
  EXPECT_THAT(
      errorsOf("store:\n  rados:\n    keyring: \"/etc/ceph/a,/etc/ceph/b\"\n"),
      ElementsAre("conf/x.yaml:3:5: store.rados.keyring: \"/etc/ceph/a,/etc/ceph/b\" contains a comma "
                  "(Ceph would read a list of keyrings)"));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    keyring: \"/etc/ceph/k\\n\"\n"),
              ElementsAre(HasSubstr("contains a control character")));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    keyring: \"\"\n"), IsEmpty());
  EXPECT_THAT(errorsOf("store:\n  rados:\n    keyring: /nonexistent/x.keyring\n"), IsEmpty());
}

TEST(Strings, RadosPoolRules) {
  EXPECT_THAT(errorsOf("store:\n  rados:\n    pool: \"\"\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.pool: \"\" must be 1 to 255 bytes"));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    pool: " + std::string(256, 'p') + "\n"),
              ElementsAre(HasSubstr("must be 1 to 255 bytes")));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    pool: " + std::string(255, 'p') + "\n"), IsEmpty());
  EXPECT_THAT(errorsOf("store:\n  rados:\n    pool: a/b\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.pool: \"a/b\" contains a '/'"));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    pool: \"a\\x7fb\"\n"),
              ElementsAre(HasSubstr("contains a control character")));
  // UTF-8 is bytes: 128 two-byte characters are 256 bytes.
  std::string wide;
  for (int i = 0; i < 128; ++i) wide += "\u00e9";
  EXPECT_THAT(errorsOf("store:\n  rados:\n    pool: " + wide + "\n"),
              ElementsAre(HasSubstr("1 to 255 bytes")));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    pool: .rgw.root-2\n"), IsEmpty());
}

TEST(Strings, RadosNamespaceRules) {
  EXPECT_THAT(errorsOf("store:\n  rados:\n    namespace: " + std::string(256, 'n') + "\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.namespace: \"" + std::string(256, 'n') +
                          "\" is longer than 255 bytes"));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    namespace: " + std::string(255, 'n') + "\n"), IsEmpty());
  EXPECT_THAT(errorsOf("store:\n  rados:\n    namespace: \"a\\nb\"\n"),
              ElementsAre("conf/x.yaml:3:5: store.rados.namespace: \"a\nb\" contains a control character"));
  // C1 controls too (U+0085, NEL, is a line break to some readers).
  EXPECT_THAT(errorsOf("store:\n  rados:\n    namespace: \"a\\u0085b\"\n"),
              ElementsAre(HasSubstr("contains a control character")));
  // '/' is fine in a namespace, and so is any other printable UTF-8.
  EXPECT_THAT(errorsOf("store:\n  rados:\n    namespace: \"tenant/a é\"\n"), IsEmpty());
  auto r = load("store:\n  rados:\n    namespace: \"\"\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.store.rados.ns, "");
}

TEST(Strings, MappingWhereStringExpected) {
  EXPECT_THAT(errorsOf("device:\n  name: {a: 1}\n"),
              ElementsAre("conf/x.yaml:2:3: device.name: expected a string, got a mapping"));
}

TEST(Strings, NullIsNotAString) {
  EXPECT_THAT(errorsOf("device:\n  name: ~\n"),
              ElementsAre("conf/x.yaml:2:3: device.name: expected a string, got an empty value"));
}

// --- the shipped files -------------------------------------------------------------------------------

TEST(Shipped, ExampleConfigsLoadCleanly) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(RDMAGATE_CONF_DIR)) {
    if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path());
  }
  ASSERT_GE(files.size(), 6u) << "rdmagate.yaml plus the examples";
  EXPECT_NE(
      std::find(files.begin(), files.end(), std::filesystem::path(RDMAGATE_CONF_DIR) / "examples/rados.yaml"),
      files.end());
  for (const auto& f : files) {
    LoadOptions opts;
    opts.host = testing::host16();
    auto r = loadConfigFile(f.string(), opts);
    EXPECT_TRUE(r.ok()) << f << ":\n" << (r.ok() ? "" : formatErrors(r.errors()));
  }
}

TEST(Shipped, RadosExampleSelectsRados) {
  LoadOptions opts;
  opts.host = testing::host16();
  auto r = loadConfigFile(std::string(RDMAGATE_CONF_DIR) + "/examples/rados.yaml", opts);
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  EXPECT_EQ(r->config.store.backend, StoreBackend::kRados);
  EXPECT_EQ(r->config.store.rados.keyring, "/etc/ceph/ceph.client.rdmagate.keyring");
  EXPECT_EQ(r->config.store.rados.ns, "gw-prod");
  // a complete config: every rados key is written out
  for (const KeyInfo& k : schema()) {
    if (k.key.starts_with("store.rados.")) {
      EXPECT_EQ(r->origins.of(k.key).kind, OriginKind::kFile) << k.key << " is missing from rados.yaml";
    }
  }
}

TEST(Shipped, DefaultConfigSetsEveryKeyToItsDefault) {
  LoadOptions opts;
  opts.host = testing::host16();
  auto r = loadConfigFile(std::string(RDMAGATE_CONF_DIR) + "/rdmagate.yaml", opts);
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  // Every key at its default, but for the one example principal of the secure default (authentication
  // required, which is also the default): its tenant and the secrets file the operator creates.
  Config want = loadedDefaults();
  want.security.secrets_file = "/etc/rdmagate/secrets.yaml";
  want.security.tenants = {TenantConfig{"app", 0, 0}};
  want.security.principals = {
      PrincipalConfig{"app-writer", "app", kPermissionRead | kPermissionWrite | kPermissionDelete, 0}};
  EXPECT_TRUE(r->config.security.authentication_required());
  EXPECT_EQ(r->config, want) << dumpConfig(r->config);
  for (const KeyInfo& k : schema()) {
    EXPECT_EQ(r->origins.of(k.key).kind, OriginKind::kFile) << k.key << " is missing from rdmagate.yaml";
  }
}

TEST(Shipped, ReadmeTableMatchesTheSchema) {
  std::ifstream in(std::string(RDMAGATE_CONF_DIR) + "/README.md");
  std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(readme.empty());
  for (const KeyInfo& k : schema()) {
    std::string row = "| `" + std::string(k.key) + "` | " + std::string(k.type) + " | `" + k.default_value +
                      "` | " + k.range + " | " + (k.units.empty() ? "—" : std::string(k.units)) + " | " +
                      std::string(toString(k.reload)) + " | " + std::string(k.description) + " |";
    EXPECT_THAT(readme, HasSubstr(row)) << "conf/README.md is out of date for " << k.key;
  }
}

TEST(Shipped, EveryKeyHasUnitsOrIsUnitless) {
  // Integers must say what they count; the key-name suffix must agree with the units column.
  for (const KeyInfo& k : schema()) {
    std::string_view key = k.key;
    if (k.type == "integer") {
      EXPECT_FALSE(k.units.empty()) << key;
    }
    if (key.ends_with("_ms")) {
      EXPECT_EQ(k.units, "ms") << key;
    }
    if (key.ends_with("_bytes")) {
      EXPECT_EQ(k.units, "bytes") << key;
    }
    if (key.ends_with("_mib")) {
      EXPECT_EQ(k.units, "MiB") << key;
    }
  }
}

}  // namespace
}  // namespace rdmagate::conf

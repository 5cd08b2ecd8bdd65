// Consistency checks across keys, host checks and device checks. Every test asserts the exact line an
// operator sees, so the blamed key, its line and the quoted other key are all pinned.

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

// --- cores -------------------------------------------------------------------------------------------

TEST(Cores, MainLcoreAmongDataplaneCoresBlamesTheCoresWhenOnlyTheyWereSet) {
  EXPECT_THAT(
      errorsOf("dataplane:\n  cores: [0, 1]\n"),
      ElementsAre("conf/x.yaml:2:11: dataplane.cores: includes cpu 0, which is eal.main_lcore = 0 (default); "
                  "the main lcore runs the control plane and cannot also poll"));
}

TEST(Cores, MainLcoreAmongDataplaneCoresBlamesTheMainLcoreWhenSet) {
  EXPECT_THAT(
      errorsOf("eal:\n  main_lcore: 1\n"),
      ElementsAre("conf/x.yaml:2:3: eal.main_lcore: cpu 1 is also a data-plane core in dataplane.cores = [1] "
                  "(default); the main lcore runs the control plane and cannot also poll"));
}

TEST(Cores, CoreThatDoesNotExistOnThisHost) {
  EXPECT_THAT(
      errorsOf("dataplane:\n  cores:\n    - 1\n    - 17\n"),
      ElementsAre(
          "conf/x.yaml:4:7: dataplane.cores: cpu 17 does not exist on this host (online cpus: 0-15)"));
}

TEST(Cores, CoreFromACpulistStringPointsAtTheKey) {
  EXPECT_THAT(
      errorsOf("dataplane:\n  cores: 14-17\n"),
      ElementsAre(
          "conf/x.yaml:2:3: dataplane.cores: cpu 16 does not exist on this host (online cpus: 0-15)",
          "conf/x.yaml:2:3: dataplane.cores: cpu 17 does not exist on this host (online cpus: 0-15)"));
}

TEST(Cores, MainLcoreThatDoesNotExist) {
  EXPECT_THAT(
      errorsOf("eal:\n  main_lcore: 20\n"),
      ElementsAre("conf/x.yaml:2:3: eal.main_lcore: cpu 20 does not exist on this host (online cpus: 0-15)"));
}

TEST(Cores, OfflineCpuInTheMiddle) {
  HostFacts h;
  h.online_cpus = CpuSet{0, 1, 3};
  EXPECT_THAT(
      errorsOf("dataplane:\n  cores: [2, 3]\n", {}, h),
      ElementsAre(
          "conf/x.yaml:2:11: dataplane.cores: cpu 2 does not exist on this host (online cpus: 0-1,3)"));
}

TEST(Cores, DefaultCoreOnASingleCpuHostNamesTheFileAndSaysDefault) {
  HostFacts h;
  h.online_cpus = CpuSet{0};
  EXPECT_THAT(
      errorsOf("", {}, h),
      ElementsAre(
          "conf/x.yaml: dataplane.cores (default): cpu 1 does not exist on this host (online cpus: 0)"));
}

TEST(Cores, CoreOutsideTheProcessAffinity) {
  HostFacts h = testing::host16();
  h.allowed_cpus = CpuSet{0, 1, 2};
  EXPECT_THAT(errorsOf("dataplane:\n  cores: [1, 2, 3]\n", {}, h),
              ElementsAre("conf/x.yaml:2:17: dataplane.cores: cpu 3 is outside this process's CPU affinity "
                          "(allowed: 0-2)"));
}

TEST(Cores, UnknownHostSkipsTheHostChecks) {
  EXPECT_THAT(errorsOf("eal:\n  main_lcore: 100\ndataplane:\n  cores: [101]\n", {}, HostFacts{}), IsEmpty());
}

// --check-config --host-cpus: the CPUs of the machine the file is written for, and the error says whose
// CPUs they are.
TEST(Cores, StatedHostCpusAreCheckedAndNamed) {
  const HostFacts h = statedHostFacts(CpuSet{0, 1, 2, 3});
  EXPECT_THAT(errorsOf("eal:\n  main_lcore: 2\ndataplane:\n  cores: [3]\n", {}, h), IsEmpty());
  EXPECT_THAT(errorsOf("dataplane:\n  cores: [3, 4]\n", {}, h),
              ElementsAre("conf/x.yaml:2:14: dataplane.cores: cpu 4 is not among the host's cpus given by "
                          "--host-cpus (0-3)"));
}

TEST(HostChecks, SkippedOnesAreNamed) {
  EXPECT_THAT(skippedHostChecks(HostFacts{}),
              ElementsAre("that the CPUs of eal.main_lcore and dataplane.cores exist",
                          "that those CPUs are in the process's CPU affinity",
                          "that eal.hugepage_dir is a hugetlbfs mount"));
  EXPECT_THAT(skippedHostChecks(statedHostFacts(CpuSet{0, 1})),
              ElementsAre("that those CPUs are in the process's CPU affinity",
                          "that eal.hugepage_dir is a hugetlbfs mount"));
  HostFacts all = testing::host16();
  all.allowed_cpus = CpuSet{0, 1};
  all.dir_state = [](const std::string&) { return DirState::kHugetlbfsMount; };
  EXPECT_THAT(skippedHostChecks(all), IsEmpty());
}

// The running host as readHostFacts() sees it: every fact a Linux machine has is known, so a plain
// --check-config skips nothing.
TEST(HostChecks, ThisHostIsFullyKnown) {
  const HostFacts h = readHostFacts();
  EXPECT_FALSE(h.online_cpus.empty());
  EXPECT_FALSE(h.allowed_cpus.empty());
  EXPECT_FALSE(h.cpus_stated);
  ASSERT_TRUE(h.dir_state);
  EXPECT_EQ(h.dir_state("/nonexistent-rdmagate-dir"), DirState::kMissing);
  EXPECT_EQ(h.dir_state("/proc/self/status"), DirState::kNotDirectory);
  EXPECT_EQ(h.dir_state("/"), DirState::kDirectory);
  EXPECT_THAT(skippedHostChecks(h), IsEmpty());
}

HostFacts hostWithDir(DirState state) {
  HostFacts h = testing::host16();
  h.dir_state = [state](const std::string& path) {
    return path == "/dev/hugepages" ? state : DirState::kMissing;
  };
  return h;
}

TEST(HugepageDir, MustBeAHugetlbfsMountOnThisHost) {
  const std::string_view file = "eal:\n  hugepage_dir: /dev/hugepages\n";
  EXPECT_THAT(errorsOf(file, {}, hostWithDir(DirState::kHugetlbfsMount)), IsEmpty());
  EXPECT_THAT(
      errorsOf(file, {}, hostWithDir(DirState::kMissing)),
      ElementsAre("conf/x.yaml:2:3: eal.hugepage_dir: \"/dev/hugepages\" does not exist on this host"));
  EXPECT_THAT(errorsOf(file, {}, hostWithDir(DirState::kNotDirectory)),
              ElementsAre("conf/x.yaml:2:3: eal.hugepage_dir: \"/dev/hugepages\" is not a directory"));
  EXPECT_THAT(
      errorsOf(file, {}, hostWithDir(DirState::kDirectory)),
      ElementsAre(
          "conf/x.yaml:2:3: eal.hugepage_dir: \"/dev/hugepages\" is not a hugetlbfs mount point; mount "
          "one there (mount -t hugetlbfs nodev /dev/hugepages) or leave the key empty for the default "
          "mount"));
  // From --set, the error names the override.
  EXPECT_THAT(errorsOf("", {"eal.hugepage_dir=/dev/hugepages"}, hostWithDir(DirState::kMissing)),
              ElementsAre("--set eal.hugepage_dir: \"/dev/hugepages\" does not exist on this host"));
}

TEST(HugepageDir, NotCheckedWhenEmptyUnknownOrConflicting) {
  EXPECT_THAT(errorsOf("eal:\n  hugepage_dir: \"\"\n", {}, hostWithDir(DirState::kMissing)), IsEmpty());
  // --no-host: no dir_state.
  EXPECT_THAT(errorsOf("eal:\n  hugepage_dir: /nowhere\n", {}, testing::host16()), IsEmpty());
  // With hugepages disabled the conflict is the one error.
  EXPECT_THAT(errorsOf("eal:\n  hugepages: disabled\n  in_memory: false\n  hugepage_dir: /dev/hugepages\n",
                       {}, hostWithDir(DirState::kMissing)),
              ElementsAre(HasSubstr("eal.hugepage_dir: is set, but eal.hugepages = disabled")));
}

TEST(Cores, CoreAboveRteMaxLcore) {
  EXPECT_THAT(errorsOf("dataplane:\n  cores: [1, 128]\n"),
              ElementsAre("conf/x.yaml:2:14: dataplane.cores: cpu 128 is out of range [0, 127]"));
  EXPECT_THAT(errorsOf("eal:\n  main_lcore: 128\n"),
              ElementsAre("conf/x.yaml:2:3: eal.main_lcore: 128 is out of range [0, 127]"));
}

TEST(Cores, CoreListedTwice) {
  EXPECT_THAT(errorsOf("dataplane:\n  cores: [1, 2, 1]\n"),
              ElementsAre("conf/x.yaml:2:17: dataplane.cores: cpu 1 is listed twice"));
  EXPECT_THAT(errorsOf("dataplane:\n  cores: \"1-3,2\"\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.cores: \"1-3,2\": cpu 2 is listed twice"));
}

TEST(Cores, EmptyCoreList) {
  EXPECT_THAT(errorsOf("dataplane:\n  cores: []\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.cores: needs at least one cpu"));
}

TEST(Cores, BadCpulistStrings) {
  EXPECT_THAT(errorsOf("dataplane:\n  cores: 3-1\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.cores: \"3-1\": range \"3-1\" is descending"));
  EXPECT_THAT(errorsOf("dataplane:\n  cores: \"1,,2\"\n"),
              ElementsAre(HasSubstr("\"\" is not a cpu number")));
  EXPECT_THAT(errorsOf("dataplane:\n  cores: one\n"), ElementsAre(HasSubstr("\"one\" is not a cpu number")));
  EXPECT_THAT(errorsOf("dataplane:\n  cores: [1, a]\n"),
              ElementsAre("conf/x.yaml:2:14: dataplane.cores: expected an integer, got \"a\""));
}

TEST(Cores, CpulistFormsAreEquivalent) {
  auto a = load("dataplane:\n  cores: [1, 2, 3, 5]\n");
  auto b = load("dataplane:\n  cores: 1-3,5\n");
  auto c = load("dataplane:\n  cores: \" 1 - 3 , 5 \"\n");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->config.dataplane.cores, (CpuSet{1, 2, 3, 5}));
  EXPECT_EQ(a->config, b->config);
  EXPECT_EQ(a->config, c->config);
}

TEST(Cores, SingleCoreAsAPlainInteger) {
  auto r = load("dataplane:\n  cores: 7\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.dataplane.cores, (CpuSet{7}));
  EXPECT_EQ(r->config.eal.lcores, (CpuSet{0, 7}));
}

TEST(Cores, ExplicitLcoresMustMatch) {
  EXPECT_THAT(
      errorsOf("eal:\n  lcores: [0, 1]\ndataplane:\n  cores: [1, 2]\n"),
      ElementsAre(
          "conf/x.yaml:2:3: eal.lcores: does not include data-plane core 2 of dataplane.cores = [1, 2] "
          "(line 4)"));
  EXPECT_THAT(
      errorsOf("eal:\n  lcores: [1]\n"),
      ElementsAre(
          "conf/x.yaml:2:3: eal.lcores: does not include the main lcore, eal.main_lcore = 0 (default)"));
  EXPECT_THAT(
      errorsOf("eal:\n  lcores: [0, 1, 5]\n"),
      ElementsAre(
          "conf/x.yaml:2:18: eal.lcores: cpu 5 is neither eal.main_lcore nor a data-plane core, so its "
          "lcore would idle; write auto to derive the list"));
  auto ok = load("eal:\n  lcores: 0-2\ndataplane:\n  cores: [1, 2]\n");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->config.eal.lcores, (CpuSet{0, 1, 2}));
}

TEST(Cores, EmptyLcoresListIsAnError) {
  EXPECT_THAT(
      errorsOf("eal:\n  lcores: []\n"),
      ElementsAre("conf/x.yaml:2:3: eal.lcores: an empty list starts no lcore; omit the key or write auto"));
}

TEST(Telemetry, ProbePortMustDifferFromPort) {
  EXPECT_THAT(errorsOf("telemetry:\n  port: 9464\n  probe_port: 9464\n"),
              ElementsAre("conf/x.yaml:3:3: telemetry.probe_port: 9464 is telemetry.port = 9464 (line 2): the "
                          "probe listener needs a port of its own"));
  EXPECT_THAT(errorsOf("telemetry:\n  probe_port: 9465\n"), IsEmpty());
}

// --- eal -----------------------------------------------------------------------------------------------

TEST(Eal, InMemoryWithHugepagesDisabledBlamesHugepagesWhenInMemoryIsDefault) {
  EXPECT_THAT(
      errorsOf("eal:\n  hugepages: disabled\n"),
      ElementsAre("conf/x.yaml:2:3: eal.hugepages: disabled conflicts with eal.in_memory = true (default); "
                  "DPDK 22.11 rejects --in-memory with --no-huge: set eal.in_memory: false"));
}

TEST(Eal, InMemoryWithHugepagesDisabledBlamesInMemoryWhenBothSet) {
  EXPECT_THAT(
      errorsOf("eal:\n  hugepages: disabled\n  in_memory: true\n"),
      ElementsAre(
          "conf/x.yaml:3:3: eal.in_memory: true needs hugepages, but eal.hugepages = disabled (line 2); "
          "DPDK 22.11 rejects --in-memory with --no-huge: set it to false"));
}

TEST(Eal, HugepageDirWithHugepagesDisabled) {
  EXPECT_THAT(
      errorsOf("eal:\n  hugepages: disabled\n  in_memory: false\n  hugepage_dir: /dev/hugepages\n"),
      ElementsAre("conf/x.yaml:4:3: eal.hugepage_dir: is set, but eal.hugepages = disabled (line 2) uses no "
                  "hugepages"));
}

TEST(Eal, StoreDoesNotFitInEalMemory) {
  EXPECT_THAT(
      errorsOf("eal:\n  memory_mib: 256\n"),
      ElementsAre("conf/x.yaml:2:3: eal.memory_mib: 256 MiB cannot hold the store, store.capacity_mib = 256 "
                  "(default), plus the per-core pools"));
  EXPECT_THAT(
      errorsOf("eal:\n  memory_mib: 512\nstore:\n  capacity_mib: 600\n"),
      ElementsAre(
          "conf/x.yaml:4:3: store.capacity_mib: 600 MiB does not fit in eal.memory_mib = 512 (line 2), "
          "which also holds the per-core pools"));
  EXPECT_THAT(errorsOf("eal:\n  memory_mib: 512\n"), IsEmpty());
}

// --- dataplane -------------------------------------------------------------------------------------------

TEST(Dataplane, SignalIntervalNotBelowQueueDepth) {
  EXPECT_THAT(
      errorsOf("dataplane:\n  signal_interval: 128\n"),
      ElementsAre("conf/x.yaml:2:3: dataplane.signal_interval: 128 must be below dataplane.queue_depth = 128 "
                  "(default), or unsignaled sends can overflow the send queue"));
}
TEST(Dataplane, EventIdleNeedsAnArmableBackend) {
  EXPECT_THAT(errorsOf("dataplane:\n  idle_policy: event\n  backend: mlx5dv\n"),
              ElementsAre(HasSubstr("dataplane.idle_policy: event needs CQ notification, which the mlx5dv "
                                    "backend (dataplane.backend = mlx5dv (line 3)) cannot arm")));
  EXPECT_THAT(errorsOf("dataplane:\n  idle_policy: event\n  backend: verbs\n"), IsEmpty());
  EXPECT_THAT(errorsOf("dataplane:\n  idle_policy: event\n"), IsEmpty());  // auto: the engine decides
}

TEST(Dataplane, SharedPoolCoversOneConnection) {
  EXPECT_THAT(errorsOf("dataplane:\n  srq_receives: 100\n"),
              ElementsAre(HasSubstr("dataplane.srq_receives: 100 cannot cover one connection's credits, "
                                    "dataplane.queue_depth = 128 (default)")));
  EXPECT_THAT(errorsOf("dataplane:\n  srq_receives: 128\n"), IsEmpty());
  EXPECT_THAT(errorsOf("dataplane:\n  srq_receives: 0\n"), IsEmpty());
  EXPECT_THAT(errorsOf("dataplane:\n  srq_receives: 8\n"),
              ElementsAre(HasSubstr("dataplane.srq_receives: 8 is below 16")));
}


TEST(Dataplane, QueueDepthBelowSignalIntervalBlamesTheQueueDepth) {
  EXPECT_THAT(
      errorsOf("dataplane:\n  queue_depth: 8\n"),
      ElementsAre("conf/x.yaml:2:3: dataplane.queue_depth: 8 must be above dataplane.signal_interval = 16 "
                  "(default), or unsignaled sends can overflow the send queue"));
}

TEST(Dataplane, SendInlineLargerThanTheMessage) {
  EXPECT_THAT(errorsOf("dataplane:\n  inline_threshold_bytes: 512\n  send_inline_bytes: 1024\n"),
              ElementsAre("conf/x.yaml:3:3: dataplane.send_inline_bytes: 1024 exceeds the largest message, "
                          "dataplane.inline_threshold_bytes = 512 (line 2)"));
}

TEST(Dataplane, SendInlineRange) {
  EXPECT_THAT(errorsOf("dataplane:\n  send_inline_bytes: 1025\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.send_inline_bytes: 1025 is out of range [0, 1024]"));
}

// --- protocol ----------------------------------------------------------------------------------------------

TEST(Protocol, DeadPeerTimeoutNotAboveKeepalive) {
  EXPECT_THAT(errorsOf("protocol:\n  keepalive_ms: 5000\n  dead_peer_timeout_ms: 5000\n"),
              ElementsAre("conf/x.yaml:3:3: protocol.dead_peer_timeout_ms: 5000 must be greater than "
                          "protocol.keepalive_ms = 5000 (line 2), or idle peers are declared dead"));
}

TEST(Protocol, KeepaliveAboveDefaultDeadPeerTimeoutBlamesKeepalive) {
  EXPECT_THAT(
      errorsOf("protocol:\n  keepalive_ms: 20000\n"),
      ElementsAre("conf/x.yaml:2:3: protocol.keepalive_ms: 20000 must be less than "
                  "protocol.dead_peer_timeout_ms = 10000 (default), or idle peers are declared dead"));
}

TEST(Protocol, ReconnectMinAboveMax) {
  EXPECT_THAT(
      errorsOf("protocol:\n  reconnect_min_ms: 500\n  reconnect_max_ms: 100\n"),
      ElementsAre(
          "conf/x.yaml:2:3: protocol.reconnect_min_ms: 500 is greater than protocol.reconnect_max_ms = "
          "100 (line 3)"));
}

TEST(Protocol, ReconnectMaxBelowDefaultMin) {
  EXPECT_THAT(
      errorsOf("protocol:\n  reconnect_max_ms: 50\n"),
      ElementsAre(
          "conf/x.yaml:2:3: protocol.reconnect_max_ms: 50 is less than protocol.reconnect_min_ms = 100 "
          "(default)"));
}

TEST(Protocol, HandshakeTimeoutRange) {
  EXPECT_THAT(
      errorsOf("protocol:\n  handshake_timeout_ms: 99\n"),
      ElementsAre("conf/x.yaml:2:3: protocol.handshake_timeout_ms: 99 is out of range [100, 600000]"));
}

// --- store -----------------------------------------------------------------------------------------------

TEST(Store, ValueLargerThanTheStore) {
  EXPECT_THAT(
      errorsOf("store:\n  capacity_mib: 2\n"),
      ElementsAre(
          "conf/x.yaml:2:3: store.capacity_mib: 2 MiB cannot hold one value of store.max_value_bytes = "
          "4194304 (default)"));
  EXPECT_THAT(errorsOf("store:\n  max_value_bytes: 268435457\n"),
              ElementsAre("conf/x.yaml:2:3: store.max_value_bytes: 268435457 is larger than the whole store, "
                          "store.capacity_mib = 256 (default)"));
}

// memory and rados are the backends: any other name, the old "embedded" included, is an error at its line.
TEST(Store, UnknownBackend) {
  EXPECT_THAT(errorsOf("store:\n  backend: rocksdb\n"),
              ElementsAre("conf/x.yaml:2:3: store.backend: \"rocksdb\" is not one of memory, rados"));
  EXPECT_THAT(errorsOf("store:\n  capacity_mib: 64\n  backend: embedded\n"),
              ElementsAre("conf/x.yaml:3:3: store.backend: \"embedded\" is not one of memory, rados"));
  EXPECT_THAT(
      errorsOf("store:\n  backend: memry\n"),
      ElementsAre("conf/x.yaml:2:3: store.backend: \"memry\" is not one of memory, rados; did you mean "
                  "\"memory\"?"));
  EXPECT_THAT(errorsOf("store:\n  backend: ceph\n"),
              ElementsAre("conf/x.yaml:2:3: store.backend: \"ceph\" is not one of memory, rados"));
  EXPECT_THAT(errorsOf("store:\n  backend: rodos\n"), ElementsAre(HasSubstr("did you mean \"rados\"?")));
}

TEST(Store, MemoryBackend) {
  EXPECT_THAT(errorsOf("store:\n  backend: memory\n"), IsEmpty());
}

// All of store.rados has defaults, so naming the backend is enough to load.
TEST(Store, RadosBackend) {
  auto r = load("store:\n  backend: rados\n");
  ASSERT_TRUE(r.ok()) << formatErrors(r.errors());
  EXPECT_EQ(r->config.store.backend, StoreBackend::kRados);
  EXPECT_EQ(r->config.store.rados, RadosConfig{});
}

// With backend memory a store.rados section is accepted and ignored, like the other keys of a mode not
// chosen (dataplane.idle_yield_after without idle_policy yield); its values are still checked.
TEST(Store, RadosSectionWithMemoryBackendIsAcceptedAndStillChecked) {
  EXPECT_THAT(errorsOf("store:\n  backend: memory\n  rados:\n    pool: objects\n    namespace: a\n"),
              IsEmpty());
  EXPECT_THAT(errorsOf("store:\n  backend: memory\n  rados:\n    pool: a/b\n"),
              ElementsAre("conf/x.yaml:4:5: store.rados.pool: \"a/b\" contains a '/'"));
  EXPECT_THAT(errorsOf("store:\n  rados:\n    cache_lease_ms: 2000\n"),
              ElementsAre(HasSubstr("store.rados.cache_lease_ms: 2000 must be greater than")));
}

// With rados, capacity_mib is the cache: its checks against max_value_bytes and eal.memory_mib still hold.
TEST(Store, RadosCacheKeepsTheCapacityChecks) {
  EXPECT_THAT(errorsOf("store:\n  backend: rados\n  capacity_mib: 2\n"),
              ElementsAre(HasSubstr("store.capacity_mib: 2 MiB cannot hold one value")));
  EXPECT_THAT(errorsOf("eal:\n  memory_mib: 256\nstore:\n  backend: rados\n"),
              ElementsAre(HasSubstr("eal.memory_mib: 256 MiB cannot hold the store")));
}

TEST(Store, CacheLeaseNotAboveNotifyTimeout) {
  EXPECT_THAT(
      errorsOf("store:\n  rados:\n    notify_timeout_ms: 3000\n    cache_lease_ms: 3000\n"),
      ElementsAre("conf/x.yaml:4:5: store.rados.cache_lease_ms: 3000 must be greater than "
                  "store.rados.notify_timeout_ms = 3000 (line 3), the longest a PUT or DELETE waits for the "
                  "other gateways' acknowledgements"));
  EXPECT_THAT(
      errorsOf("store:\n  rados:\n    cache_lease_ms: 1500\n"),
      ElementsAre("conf/x.yaml:3:5: store.rados.cache_lease_ms: 1500 must be greater than "
                  "store.rados.notify_timeout_ms = 2000 (default), the longest a PUT or DELETE waits for the "
                  "other gateways' acknowledgements"));
  // librados counts a notify's timeout in whole seconds: 2001 ms waits 3 s.
  EXPECT_THAT(errorsOf("store:\n  rados:\n    notify_timeout_ms: 2001\n    cache_lease_ms: 3001\n"),
              IsEmpty());
  EXPECT_THAT(
      errorsOf("store:\n  rados:\n    notify_timeout_ms: 2001\n    cache_lease_ms: 3000\n"),
      ElementsAre("conf/x.yaml:4:5: store.rados.cache_lease_ms: 3000 must be greater than "
                  "store.rados.notify_timeout_ms = 2001 (line 3) (3000 used: librados counts seconds), the "
                  "longest a PUT or DELETE waits for the other gateways' acknowledgements"));
}

TEST(Store, NotifyTimeoutAboveTheDefaultLeaseBlamesTheNotifyTimeout) {
  EXPECT_THAT(
      errorsOf("store:\n  rados:\n    notify_timeout_ms: 6000\n"),
      ElementsAre(
          "conf/x.yaml:3:5: store.rados.notify_timeout_ms: 6000 must be less than "
          "store.rados.cache_lease_ms = 5000 (default), the time a gateway may serve its cache after its "
          "watch was last confirmed"));
  EXPECT_THAT(
      errorsOf("", {"store.rados.notify_timeout_ms=5000"}),
      ElementsAre("--set store.rados.notify_timeout_ms: 5000 must be less than store.rados.cache_lease_ms "
                  "= 5000 (default), the time a gateway may serve its cache after its watch was last "
                  "confirmed"));
}

TEST(Cascade, ARejectedLeaseSkipsTheLeaseCheck) {
  EXPECT_THAT(errorsOf("store:\n  rados:\n    notify_timeout_ms: 60000\n    cache_lease_ms: 100\n"),
              ElementsAre("conf/x.yaml:4:5: store.rados.cache_lease_ms: 100 is out of range [1500, 600000]"));
}

// Every device backend's name is a valid value; whether the device can run it is checked at start, not here
// (--check-config runs where there may be no device).
TEST(Dataplane, Backend) {
  for (const char* b : {"auto", "verbs", "mlx5dv"}) {
    EXPECT_THAT(errorsOf(std::string("dataplane:\n  backend: ") + b + "\n"), IsEmpty()) << b;
  }
  EXPECT_THAT(errorsOf("dataplane:\n  backend: mlx5\n"),
              ElementsAre("conf/x.yaml:2:3: dataplane.backend: \"mlx5\" is not one of auto, verbs, mlx5dv; "
                          "did you mean \"mlx5dv\"?"));
}

// --- no cascades -----------------------------------------------------------------------------------------

TEST(Cascade, ARejectedValueSkipsItsConsistencyChecks) {
  // keepalive_ms is rejected and keeps its default; the dead-peer check must not then compare against it.
  EXPECT_THAT(errorsOf("protocol:\n  keepalive_ms: soon\n  dead_peer_timeout_ms: 500\n"),
              ElementsAre("conf/x.yaml:2:3: protocol.keepalive_ms: expected an integer, got \"soon\""));
}

TEST(Cascade, ADuplicateKeySkipsItsConsistencyChecks) {
  EXPECT_THAT(errorsOf("protocol:\n  keepalive_ms: 100\n  keepalive_ms: 50000\n"),
              ElementsAre("conf/x.yaml:3:3: protocol.keepalive_ms: duplicate key (first at line 2)"));
}

TEST(Cascade, ASectionOfTheWrongTypeSkipsItsChecks) {
  HostFacts h;
  h.online_cpus = CpuSet{0};  // the default core 1 would fail, but the section was unreadable
  EXPECT_THAT(errorsOf("dataplane: [1]\n", {}, h),
              ElementsAre("conf/x.yaml:1:1: dataplane: expected a mapping of keys, got a list"));
}

// --- validateConfig on a merged config ---------------------------------------------------------------------

TEST(ValidateConfig, ChecksConfigsBuiltInCode) {
  Config c = testing::loadedDefaults();
  EXPECT_THAT(validateConfig(c, ConfigOrigins("live.yaml"), testing::host16()), IsEmpty());
  c.protocol.reconnect_min_ms = 10000;
  auto errs = validateConfig(c, ConfigOrigins("live.yaml"), testing::host16());
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].str(),
            "live.yaml: protocol.reconnect_min_ms (default): 10000 is greater than protocol.reconnect_max_ms "
            "= 5000 "
            "(default)");
}

TEST(ValidateConfig, ChecksTheRadosLeaseInCode) {
  Config c = testing::loadedDefaults();
  c.store.rados.cache_lease_ms = c.store.rados.notify_timeout_ms;
  auto errs = validateConfig(c, ConfigOrigins("live.yaml"), testing::host16());
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].str(),
            "live.yaml: store.rados.cache_lease_ms (default): 2000 must be greater than "
            "store.rados.notify_timeout_ms = 2000 (default), the longest a PUT or DELETE waits for the other "
            "gateways' acknowledgements");
}

// --- device
// -------------------------------------------------------------------------------------------------

DeviceLimits rxe() {
  DeviceLimits d;
  d.name = "rxe0";
  d.max_qp_wr = 1024;
  d.max_sge = 32;
  d.max_inline_data = 512;
  d.max_msg_size = std::uint64_t{1} << 31;
  d.port_count = 1;
  return d;
}

std::vector<std::string> deviceErrors(std::string_view text, const DeviceLimits& d,
                                      std::vector<std::string> sets = {}) {
  auto r = load(text, std::move(sets));
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return {"config did not load: " + formatErrors(r.errors())};
  std::vector<std::string> out;
  for (const auto& e : validateAgainstDevice(*r, d)) out.push_back(e.str());
  return out;
}

TEST(Device, DefaultsFitRxe) {
  EXPECT_THAT(deviceErrors("", rxe()), IsEmpty());
}

TEST(Device, QueueDepthBeyondMaxQpWrKeepsTheLine) {
  EXPECT_THAT(
      deviceErrors("logging:\n  level: info\ndataplane:\n  queue_depth: 2048\n", rxe()),
      ElementsAre("conf/x.yaml:4:3: dataplane.queue_depth: 2048 exceeds device rxe0's max_qp_wr 1024"));
}

TEST(Device, InlineBeyondMaxInlineData) {
  DeviceLimits d = rxe();
  d.max_inline_data = 128;
  EXPECT_THAT(deviceErrors("", d),
              ElementsAre("conf/x.yaml: dataplane.send_inline_bytes (default): 236 exceeds device rxe0's "
                          "max_inline_data 128; 0 disables inline sends"));
}

TEST(Device, FragmentsBeyondMaxSge) {
  DeviceLimits d = rxe();
  d.max_sge = 8;  // below the protocol's 16, so the device check is what bites
  EXPECT_THAT(deviceErrors("dataplane:\n  max_fragments: 9\n", d),
              ElementsAre("conf/x.yaml:2:3: dataplane.max_fragments: 9 exceeds device rxe0's max_sge 8"));
}

TEST(Device, PortBeyondPortCount) {
  EXPECT_THAT(deviceErrors("device:\n  port: 2\n", rxe()),
              ElementsAre("conf/x.yaml:2:3: device.port: 2 exceeds device rxe0's port count 1"));
}

TEST(Device, MessageSizesBeyondMaxMsgSz) {
  DeviceLimits d = rxe();
  d.max_msg_size = 2048;
  EXPECT_THAT(
      deviceErrors("", d),
      ElementsAre(
          "conf/x.yaml: dataplane.inline_threshold_bytes (default): 4096 exceeds device rxe0's "
          "max_msg_sz 2048",
          "conf/x.yaml: store.max_value_bytes (default): 4194304 exceeds device rxe0's max_msg_sz 2048 "
          "(one fragment may carry a whole value)"));
}

TEST(Device, OverriddenKeyNamesTheOverride) {
  EXPECT_THAT(deviceErrors("", rxe(), {"dataplane.queue_depth=4096"}),
              ElementsAre("--set dataplane.queue_depth: 4096 exceeds device rxe0's max_qp_wr 1024"));
}

TEST(Device, UnknownLimitsAreSkipped) {
  EXPECT_THAT(deviceErrors("dataplane:\n  queue_depth: 16384\n  max_fragments: 16\n", DeviceLimits{}),
              IsEmpty());
}

TEST(Device, ZeroInlineIsAlwaysFine) {
  DeviceLimits d = rxe();
  d.max_inline_data = 0;  // a device without inline support
  EXPECT_THAT(deviceErrors("dataplane:\n  send_inline_bytes: 0\n", d), IsEmpty());
}

}  // namespace
}  // namespace rdmagate::conf

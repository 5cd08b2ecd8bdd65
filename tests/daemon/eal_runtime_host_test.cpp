// The EAL runtime's host-side pieces (dataplane/eal_runtime.*), without rte_eal_init: the hugepage probe's
// messages and the routing of DPDK's log stream. DPDK's logging works before EAL starts (its log types are
// registered by constructors), which is also why the daemon routes it before init. The EAL start itself is
// tested in the guest (tests/rdma/eal_runtime_test.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rte_log.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dataplane/eal_runtime.hpp"

namespace {

using namespace rdmagate::dataplane;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

constexpr const char* kMeminfo256 =
    "MemTotal:        2000000 kB\nHugePages_Total:     128\nHugePages_Free:      128\nHugePages_Rsvd:        "
    "0\n"
    "Hugepagesize:       2048 kB\n";
constexpr const char* kMeminfoNone =
    "MemTotal: 2000000 kB\nHugePages_Total: 0\nHugePages_Free: 0\nHugepagesize: 2048 kB\n";
constexpr const char* kMeminfoGig =
    "HugePages_Total:       4\nHugePages_Free:        1\nHugepagesize:    1048576 kB\n";
constexpr const char* kMountsHuge = "nodev /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n";

// The case an operator met: 256 MiB of hugepages free and "no usable hugepages", because the default store
// derives more EAL memory than that. The message gives the pages of which size, what is free, and both
// ways out.
TEST(HugepageMessage, ShortageSaysPagesNeededFreeAndTheKeys) {
  const HugepageProbe p = parse_hugepage_probe(kMeminfo256, kMountsHuge, "", uint64_t{1100} << 20);
  EXPECT_FALSE(p.usable);
  EXPECT_EQ(
      p.reason,
      "1100 MiB of EAL memory (-m) needs 550 hugepages of 2 MiB, only 128 are free (256 MiB); reserve 422 "
      "more (echo 550 > /proc/sys/vm/nr_hugepages), or lower store.capacity_mib (eal.memory_mib: 0 "
      "derives -m from it) or eal.memory_mib to fit in 256 MiB");
  const std::string w = hugepage_fallback_warning(p, uint64_t{1100} << 20);
  EXPECT_THAT(w, HasSubstr("no usable hugepages (1100 MiB of EAL memory (-m) needs 550 hugepages of 2 MiB"));
  EXPECT_THAT(w, HasSubstr("eal falls back to --no-huge"));
  // Said once: the shortage's own advice, not a second, generic one.
  EXPECT_THAT(w, Not(HasSubstr("mount -t hugetlbfs")));
}

TEST(HugepageMessage, PagesAreCountedInTheirOwnSize) {
  const HugepageProbe p = parse_hugepage_probe(
      kMeminfoGig, "nodev /mnt/huge1g hugetlbfs rw,pagesize=1024M 0 0\n", "", uint64_t{2500} << 20);
  EXPECT_FALSE(p.usable);
  EXPECT_THAT(p.reason, HasSubstr("2500 MiB of EAL memory (-m) needs 3 hugepages of 1 GiB, only 1 are free "
                                  "(1024 MiB); reserve 2 more (echo 6 > /proc/sys/vm/nr_hugepages)"));
}

TEST(HugepageMessage, NoneReservedOrMountedSaysHowMany) {
  const HugepageProbe none = parse_hugepage_probe(kMeminfoNone, kMountsHuge, "", uint64_t{300} << 20);
  EXPECT_EQ(hugepage_fallback_warning(none, uint64_t{300} << 20),
            "no usable hugepages (HugePages_Total is 0 in /proc/meminfo); eal falls back to --no-huge: 4 KiB "
            "pages, slow ibv_reg_mr, fixed heap; reserve 150 hugepages of 2 MiB (echo 150 > "
            "/proc/sys/vm/nr_hugepages)");
  const HugepageProbe unmounted = parse_hugepage_probe(kMeminfo256, "proc /proc proc rw 0 0\n", "", 0);
  EXPECT_EQ(hugepage_fallback_warning(unmounted, 0),
            "no usable hugepages (hugepages are reserved but no hugetlbfs is mounted); eal falls back to "
            "--no-huge: 4 KiB pages, slow ibv_reg_mr, fixed heap; mount hugetlbfs (mount -t hugetlbfs nodev "
            "/dev/hugepages)");
}

TEST(HugepageMessage, EnoughIsUsable) {
  EXPECT_TRUE(parse_hugepage_probe(kMeminfo256, kMountsHuge, "", uint64_t{256} << 20).usable);
}

TEST(EalLog, DpdkLevelsAreSyslogPrioritiesPlusOne) {
  EXPECT_EQ(syslog_priority_of_rte_level(RTE_LOG_EMERG), 0);
  EXPECT_EQ(syslog_priority_of_rte_level(RTE_LOG_ERR), 3);
  EXPECT_EQ(syslog_priority_of_rte_level(RTE_LOG_WARNING), 4);
  EXPECT_EQ(syslog_priority_of_rte_level(RTE_LOG_NOTICE), 5);
  EXPECT_EQ(syslog_priority_of_rte_level(RTE_LOG_INFO), 6);
  EXPECT_EQ(syslog_priority_of_rte_level(RTE_LOG_DEBUG), 7);
  EXPECT_EQ(syslog_priority_of_rte_level(0), 6);
  EXPECT_EQ(syslog_priority_of_rte_level(99), 6);
}

struct Captured {
  std::mutex mutex;
  std::vector<std::pair<int, std::string>> lines;
};

// DPDK's own rte_log calls, as EAL makes them, reach the sink as whole lines with their level: a message
// written in pieces is one line, a message of two lines two.
TEST(EalLog, DpdkLinesReachTheSinkWholeWithTheirLevel) {
  Captured got;
  std::string error;
  ASSERT_TRUE(route_eal_log(
      [&got](int priority, std::string_view line) {
        const std::lock_guard lock(got.mutex);
        got.lines.emplace_back(priority, std::string(line));
      },
      &error))
      << error;
  rte_log(RTE_LOG_ERR, RTE_LOGTYPE_EAL, "EAL: Cannot get hugepage information.\n");
  rte_log(RTE_LOG_WARNING, RTE_LOGTYPE_EAL, "EAL: No free %s hugepages ", "2048 kB");
  rte_log(RTE_LOG_WARNING, RTE_LOGTYPE_EAL, "reported on node %d\n", 0);
  rte_log(RTE_LOG_NOTICE, RTE_LOGTYPE_EAL, "EAL: one\r\nEAL: two\n\n");
  // Another thread's line, whole and at its own level.
  std::thread([] { rte_log(RTE_LOG_INFO, RTE_LOGTYPE_EAL, "EAL: from a thread\n"); }).join();
  // Below DPDK's level for the type: filtered by DPDK, never written.
  rte_log(RTE_LOG_DEBUG, RTE_LOGTYPE_EAL, "EAL: debug\n");
  ASSERT_TRUE(route_eal_log(nullptr, &error)) << error;
  rte_log(RTE_LOG_ERR, RTE_LOGTYPE_EAL, "EAL: after unrouting, to stderr\n");
  const std::lock_guard lock(got.mutex);
  EXPECT_THAT(got.lines,
              ElementsAre(Pair(3, "EAL: Cannot get hugepage information."),
                          Pair(4, "EAL: No free 2048 kB hugepages reported on node 0"), Pair(5, "EAL: one"),
                          Pair(5, "EAL: two"), Pair(6, "EAL: from a thread")));
}

}  // namespace

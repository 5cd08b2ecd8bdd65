// EAL runtime: argument building and hugepage detection (pure), then one real init in this process
// (--no-huge on a host without hugepages, hugepages in the rxe guest) and buffers from it.
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "dataplane/eal_runtime.hpp"
#include "dataplane/huge_buffer.hpp"
#include "tests/rdma/rdma_test_main.hpp"

namespace {

using namespace rdmagate::dataplane;

using rdmagate::testfix::test_eal;  // the EAL main() started

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

constexpr const char* kMeminfoHuge =
    "MemTotal:        2000000 kB\nHugePages_Total:     128\nHugePages_Free:      120\nHugePages_Rsvd:        0\n"
    "Hugepagesize:       2048 kB\n";
constexpr const char* kMeminfoNone = "MemTotal: 2000000 kB\nHugePages_Total: 0\nHugePages_Free: 0\nHugepagesize: 2048 kB\n";
constexpr const char* kMountsHuge =
    "proc /proc proc rw 0 0\nnodev /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n";
constexpr const char* kMountsGig = "nodev /mnt/huge1g hugetlbfs rw,relatime,pagesize=1024M 0 0\n";

TEST(HugepageProbe, UsableWithFreePagesAndAMount) {
  const HugepageProbe p = parse_hugepage_probe(kMeminfoHuge, kMountsHuge, "", 0);
  EXPECT_TRUE(p.usable) << p.reason;
  EXPECT_EQ(p.total_pages, 128u);
  EXPECT_EQ(p.free_pages, 120u);
  EXPECT_EQ(p.page_size_bytes, 2u << 20);
  EXPECT_EQ(p.mount_dir, "/dev/hugepages");
}

TEST(HugepageProbe, ExplainsWhyNot) {
  EXPECT_EQ(parse_hugepage_probe(kMeminfoNone, kMountsHuge, "", 0).reason, "HugePages_Total is 0 in /proc/meminfo");
  const HugepageProbe unmounted = parse_hugepage_probe(kMeminfoHuge, "proc /proc proc rw 0 0\n", "", 0);
  EXPECT_FALSE(unmounted.usable);
  EXPECT_EQ(unmounted.reason, "hugepages are reserved but no hugetlbfs is mounted");
  // A mount of another page size does not count.
  EXPECT_FALSE(parse_hugepage_probe(kMeminfoHuge, kMountsGig, "", 0).usable);
  // Not enough free for -m.
  const HugepageProbe small = parse_hugepage_probe(kMeminfoHuge, kMountsHuge, "", uint64_t{512} << 20);
  EXPECT_FALSE(small.usable);
  EXPECT_NE(small.reason.find("240 MiB"), std::string::npos) << small.reason;
  // A requested directory must be that mount.
  EXPECT_FALSE(parse_hugepage_probe(kMeminfoHuge, kMountsHuge, "/mnt/other", 0).usable);
  EXPECT_TRUE(parse_hugepage_probe(kMeminfoHuge, kMountsHuge, "/dev/hugepages", 0).usable);
}

TEST(HugepageProbe, UnescapesMountPaths) {
  const HugepageProbe p =
      parse_hugepage_probe(kMeminfoHuge, "nodev /mnt/huge\\040pages hugetlbfs rw 0 0\n", "", 0);
  EXPECT_EQ(p.mount_dir, "/mnt/huge pages");
}

TEST(EalArgs, HugepagesInMemoryIovaVa) {
  EalOptions o;
  o.lcores = "0-1";
  o.extra_args = {"--log-level=lib.eal:debug"};
  const auto a = build_eal_args(o, EalMemoryMode::kHugepages);
  EXPECT_TRUE(has(a, "--in-memory"));
  EXPECT_TRUE(has(a, "--no-pci"));
  EXPECT_TRUE(has(a, "--iova-mode=va"));
  EXPECT_TRUE(has(a, "--no-telemetry"));
  EXPECT_FALSE(has(a, "--no-huge"));
  EXPECT_FALSE(has(a, "--no-shconf"));
  EXPECT_EQ(a.back(), "--log-level=lib.eal:debug");  // extra args come last and override
}

TEST(EalArgs, LcoreMapUsesLcoresOption) {
  EalOptions o;
  o.lcores = "0@0,1@1,2@0";  // more lcores than CPUs: the 2-vCPU guest layout
  const auto a = build_eal_args(o, EalMemoryMode::kHugepages);
  EXPECT_TRUE(has(a, "--lcores=0@0,1@1,2@0"));
  EXPECT_FALSE(has(a, "-l"));
  o.lcores = "0-1";
  const auto b = build_eal_args(o, EalMemoryMode::kHugepages);
  EXPECT_TRUE(has(b, "-l"));
  EXPECT_TRUE(has(b, "0-1"));
}

TEST(EalArgs, NoHugeFallback) {
  EalOptions o;
  o.memory_mb = 128;
  o.main_lcore = 1;
  const auto a = build_eal_args(o, EalMemoryMode::kNoHuge);
  EXPECT_TRUE(has(a, "--no-huge"));
  EXPECT_TRUE(has(a, "--no-shconf"));
  EXPECT_TRUE(has(a, "--no-pci"));
  EXPECT_TRUE(has(a, "--no-telemetry"));
  EXPECT_FALSE(has(a, "--in-memory"));  // rejected together with --no-huge by DPDK 22.11
  EXPECT_TRUE(has(a, "128"));
  EXPECT_TRUE(has(a, "--main-lcore"));
}

TEST(EalArgs, FilePrefixReplacesInMemory) {
  EalOptions o;
  o.file_prefix = "gw0";
  const auto a = build_eal_args(o, EalMemoryMode::kHugepages);
  EXPECT_FALSE(has(a, "--in-memory"));
  EXPECT_TRUE(has(a, "gw0"));
}

TEST(EalRuntime, InitialisedOnceAndSecondInitFailsClearly) {
  ASSERT_NE(test_eal(), nullptr);
  EXPECT_TRUE(EalRuntime::initialised_in_process());
  EXPECT_EQ(test_eal()->lcore_count(), 2u);
  EXPECT_EQ(test_eal()->main_lcore(), 0u);
  std::string err;
  EXPECT_EQ(EalRuntime::init(EalOptions{}, &err), nullptr);
  EXPECT_NE(err.find("once per process"), std::string::npos) << err;
  const char* g = std::getenv("RDMAGATE_IN_GUEST");
  if (g != nullptr && std::strcmp(g, "1") == 0) {
    EXPECT_TRUE(test_eal()->hugepages())
        << "the rxe guest reserves hugepages: " << test_eal()->probe().reason;
  }
}

TEST(HugeBuffer, MallocAndMemzoneAreZeroedAlignedAndFreed) {
  std::string err;
  HugeBuffer a = HugeBuffer::allocate(size_t{1} << 20, SOCKET_ID_ANY, 4096, &err);
  ASSERT_TRUE(a) << err;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 4096, 0u);
  EXPECT_EQ(a.hugepage_backed(), test_eal()->hugepages());
  for (size_t i = 0; i < a.size(); i += 4093) ASSERT_EQ(a.bytes()[i], 0);
  HugeBuffer z = HugeBuffer::allocate(size_t{1} << 20, SOCKET_ID_ANY, 1 << 16, &err, HugeBufferKind::kMemzone, "eal_test_zone");
  ASSERT_TRUE(z) << err;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(z.data()) % (1 << 16), 0u);
  // Names are global per EAL: a duplicate fails with a message, and the name is reusable once freed.
  HugeBuffer dup = HugeBuffer::allocate(4096, SOCKET_ID_ANY, 0, &err, HugeBufferKind::kMemzone, "eal_test_zone");
  EXPECT_FALSE(dup);
  EXPECT_NE(err.find("eal_test_zone"), std::string::npos) << err;
  z.reset();
  z.reset();
  HugeBuffer again = HugeBuffer::allocate(4096, SOCKET_ID_ANY, 0, &err, HugeBufferKind::kMemzone, "eal_test_zone");
  EXPECT_TRUE(again) << err;
  HugeBuffer moved = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_TRUE(moved);
  EXPECT_FALSE(HugeBuffer::allocate(4096, SOCKET_ID_ANY, 3, &err));
  EXPECT_NE(err.find("power of two"), std::string::npos);
}

TEST(EalRuntime, MempoolRingDriverIsLinked) {
  rte_mempool* mp = rte_mempool_create("eal_test_pool", 511, 256, 0, 0, nullptr, nullptr, nullptr, nullptr,
                                       SOCKET_ID_ANY, 0);
  ASSERT_NE(mp, nullptr) << "rte_mempool_create: " << rte_strerror(rte_errno)
                         << " (librte_mempool_ring must be linked with --no-as-needed)";
  rte_mempool_free(mp);
}

}  // namespace

// EAL only, no RDMA probe: this binary runs (and passes) wherever EAL starts, with or without hugepages.
int main(int argc, char** argv) {
  return rdmagate::testfix::rdma_test_main(argc, argv, "eal_runtime_test", "0-1", nullptr,
                                           rdmagate::testfix::NeedsRdma::kNo);
}

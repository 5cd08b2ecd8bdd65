// The thread placement rules (daemon/placement.hpp): nothing but a poller's own thread may run on its CPUs.
#include "daemon/placement.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace {

using rdmagate::control::cpu_list_string;
using rdmagate::control::placement_conflicts;
using rdmagate::control::PollerCpus;
using rdmagate::control::process_threads;
using rdmagate::control::ThreadCpus;

// The shipped layout in the guest: main lcore 0 on CPU 0 with the HTTP threads, lcore 1 polling CPU 1.
std::vector<ThreadCpus> clean_threads() {
  return {{100, "rdmagate", {0}},       {101, "eal-intr-thread", {0}}, {102, "rte_mp_handle", {0}},
          {103, "lcore-worker-1", {1}}, {104, "civetweb-master", {0}}, {105, "civetweb-worker", {0}},
          {106, "rados-worker", {0}}};
}

TEST(Placement, ShippedLayoutIsClean) {
  EXPECT_TRUE(placement_conflicts(0, {0}, {{1, {1}}}, clean_threads()).empty());
}

TEST(Placement, MainLcoreOnAPollersCpuIsRefusedWithTheKeyAndASpareCpu) {
  // eal.lcores "0@1,1@1" style: both lcores on CPU 1; CPU 0 is free.
  std::vector<ThreadCpus> t = {{100, "rdmagate", {1}}, {101, "lcore-worker-1", {1}}, {102, "spare", {0}}};
  const auto c = placement_conflicts(0, {1}, {{1, {1}}}, t);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NE(c[0].find("eal.main_lcore 0 may run on CPU 1, which data-plane lcore 1 busy-polls"),
            std::string::npos)
      << c[0];
  EXPECT_NE(c[0].find("e.g. eal.main_lcore: 0"), std::string::npos) << c[0];
  EXPECT_NE(c[0].find("CPUAffinity="), std::string::npos) << c[0];
}

TEST(Placement, TwoPollersOnOneCpu) {
  std::vector<ThreadCpus> t = {
      {100, "rdmagate", {0}}, {101, "lcore-worker-1", {1}}, {102, "lcore-worker-2", {1}}};
  const auto c = placement_conflicts(0, {0}, {{1, {1}}, {2, {1}}}, t);
  ASSERT_FALSE(c.empty());
  EXPECT_NE(c[0].find("data-plane lcores 1 and 2 may both run on CPU 1"), std::string::npos) << c[0];
}

TEST(Placement, AHelperThreadWithAPollingCpuIsNamed) {
  std::vector<ThreadCpus> t = clean_threads();
  t.push_back({107, "early-helper", {0, 1, 2, 3}});
  const auto c = placement_conflicts(0, {0}, {{1, {1}}}, t);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NE(
      c[0].find("thread 'early-helper' (tid 107) may run on CPUs 0-3, including CPU 1, which data-plane "
                "lcore 1 busy-polls"),
      std::string::npos)
      << c[0];
  EXPECT_NE(c[0].find("eal.main_lcore 0: CPUs 0"), std::string::npos) << c[0];
}

TEST(Placement, APollersThreadIsToldApartByNameWhenAnotherSharesItsCpuSet) {
  std::vector<ThreadCpus> t = clean_threads();
  t.push_back({99, "stowaway", {1}});  // same CPU set as the worker, lower tid
  const auto c = placement_conflicts(0, {0}, {{1, {1}}}, t);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NE(c[0].find("'stowaway'"), std::string::npos) << c[0];
}

TEST(Placement, AnUnnamedPollerIsTheOnlyThreadWithItsCpuSet) {
  std::vector<ThreadCpus> t = {{100, "rdmagate", {0}}, {101, "worker", {2}}};
  EXPECT_TRUE(placement_conflicts(0, {0}, {{1, {2}}}, t).empty());
}

TEST(Placement, CpuListString) {
  EXPECT_EQ(cpu_list_string({}), "");
  EXPECT_EQ(cpu_list_string({3, 0, 1, 2, 5, 7, 8}), "0-3,5,7-8");
}

TEST(Placement, ProcessThreadsSeesThisThread) {
  const std::vector<ThreadCpus> t = process_threads();
  bool found = false;
  for (const ThreadCpus& x : t) found = found || (x.tid == gettid() && !x.cpus.empty() && !x.name.empty());
  EXPECT_TRUE(found);
}

}  // namespace

#pragma once
// The main() of every RDMA test binary (GoogleTest). Header-only; link GTest::gtest and rdmagate_dataplane
// (through rdmagate_engine or the like).
//
//   int main(int argc, char** argv) {
//     return rdmagate::testfix::rdma_test_main(argc, argv, "my_test", "0@0,1@1", [](const
//     control::RdmaProbe&) {
//       ...  // the binary's own globals
//       return 0;
//     });
//   }
//
// In order: gtest flags; --gtest_list_tests lists and returns (no probe, no EAL, so it works anywhere); the
// RDMA probe (rdma_gate: a loud "*** SKIPPED" line and exit 77 without RDMA, which CTest reports as skipped
// and run-rdma-suite.sh as a failure); EAL with eal_lcores, once for the process; one banner line;
// before_tests (the binary's own globals); RUN_ALL_TESTS; EAL cleanup. A binary with subcommands (re-executed
// as a peer) dispatches them before calling this.
#include <gtest/gtest.h>
#include <rte_cycles.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "tests/rdma/rdma_test_support.hpp"

namespace rdmagate::testfix {

enum class NeedsRdma : bool { kNo, kYes };

// Runs after the probe and EAL, before the tests: returns 0 to run them, else the exit code. `probe` is
// default-constructed without NeedsRdma::kYes.
using BeforeTests = std::function<int(const control::RdmaProbe& probe)>;

// The EAL rdma_test_main started, while the tests run; nullptr before and after, or without eal_lcores.
inline dataplane::EalRuntime*& test_eal() {
  static dataplane::EalRuntime* eal = nullptr;
  return eal;
}

// program: named by the skip / failure lines and the banner; EAL's argv[0]. eal_lcores: EAL --lcores; nullptr
// when this process never starts EAL (it spawns processes that do). NeedsRdma::kNo: EAL only, no probe (the
// binary runs wherever EAL does). Returns the process exit code.
inline int rdma_test_main(int argc, char** argv, const char* program, const char* eal_lcores,
                          const BeforeTests& before_tests = nullptr, NeedsRdma needs = NeedsRdma::kYes) {
  ::testing::InitGoogleTest(&argc, argv);
  if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
  // The device first: without RDMA this prints one line and nothing from EAL or verbs.
  control::RdmaProbe probe;
  if (needs == NeedsRdma::kYes) {
    if (const int rc = rdma_gate(program, &probe); rc != 0) return rc;
  }
  std::unique_ptr<dataplane::EalRuntime> eal;
  if (eal_lcores != nullptr) {
    eal = start_eal(program, eal_lcores);
    if (!eal) return 1;
  }
  std::string banner = program;
  banner += ':';
  if (needs == NeedsRdma::kYes) banner += " device " + probe.device;
  if (eal) {
    char line[160];
    std::snprintf(line, sizeof(line), " (%s, up in %.2f s), tsc %llu Hz",
                  eal->hugepages() ? "hugepages" : "no-huge", eal->init_seconds(),
                  static_cast<unsigned long long>(rte_get_tsc_hz()));
    banner += (needs == NeedsRdma::kYes ? ", eal " : " eal ") + eal->args_line() + line;
  }
  std::printf("%s\n", banner.c_str());
  if (before_tests) {
    if (const int rc = before_tests(probe); rc != 0) return rc;
  }
  test_eal() = eal.get();
  const int rc = RUN_ALL_TESTS();
  test_eal() = nullptr;
  eal.reset();  // rte_eal_cleanup
  return rc;
}

}  // namespace rdmagate::testfix

#pragma once
// The start of every RDMA test binary (and of the RDMA tools built beside them), without GoogleTest:
// rdma_test_main.hpp builds the tests' main() on these; engine_bench and engine_peer use them directly.
//
//   control::RdmaProbe probe;
//   if (const int rc = testfix::rdma_gate("my_test", &probe); rc != 0) return rc;   // 77: no RDMA
//   auto eal = testfix::start_eal("my_test", "0@0,1@1,2@0");                         // nullptr: exit 1
//
// The skip line is loud on purpose: inside the rxe guest a skip is a failure (run-rdma-suite.sh), and on a
// host it must not read like a pass.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "control/rdma_device.hpp"
#include "dataplane/eal_runtime.hpp"

namespace rdmagate::testfix {

// The device named by RDMAGATE_RXE_DEV (empty: the only one); set by rdma_gate.
// The guest's address of the rxe device (tools/rxe-vm exports RDMAGATE_RXE_ADDR).
inline std::string rxe_addr() {
  const char* v = std::getenv("RDMAGATE_RXE_ADDR");
  return v != nullptr && *v != '\0' ? v : "198.18.0.1";
}

inline std::string& rdma_device() {
  static std::string dev;
  return dev;
}

// Probes the RDMA device (and rdma_cm). 0: there is one, *probe describes it. Otherwise the exit code,
// after one line on stderr: kSkipExitCode (77) when the machine has no RDMA at all, 1 on any other
// failure (a wrong device name is a configuration error, not a skip).
inline int rdma_gate(const char* program, control::RdmaProbe* probe) {
  rdma_device() = control::device_name_from_env();
  *probe = control::probe_rdma(rdma_device());
  if (probe->ok()) return 0;
  if (probe->no_rdma()) {
    std::fprintf(stderr, "*** SKIPPED %s (exit %d, not a pass): %s\n", program, control::kSkipExitCode,
                 probe->message.c_str());
    return control::kSkipExitCode;
  }
  std::fprintf(stderr, "*** FAILED %s: %s\n", program, probe->message.c_str());
  return 1;
}

// EAL for this process (once per process) with the given --lcores layout; nullptr after a
// "*** FAILED <program>" line.
inline std::unique_ptr<dataplane::EalRuntime> start_eal(const char* program, const std::string& lcores) {
  dataplane::EalOptions opts;
  opts.program_name = program;
  opts.lcores = lcores;
  std::string err;
  auto eal = dataplane::EalRuntime::init(opts, &err);
  if (!eal) std::fprintf(stderr, "*** FAILED %s: %s\n", program, err.c_str());
  return eal;
}

// This binary's path (tests that re-execute themselves as peers); empty after a "*** FAILED" line.
inline std::string self_exe(const char* program) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    std::fprintf(stderr, "*** FAILED %s: readlink /proc/self/exe: %s\n", program, std::strerror(errno));
    return {};
  }
  return std::string(self, static_cast<std::size_t>(n));
}

}  // namespace rdmagate::testfix

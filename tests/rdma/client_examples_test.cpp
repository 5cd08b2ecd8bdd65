// client_examples_test: the programs of examples/ (C, C++, Python) and the Python package's guest check
// (tests/rdma/python_client_check.py) against the real rdmagate daemon, each a separate process in the
// default no-EAL caller-thread mode of the client library (librdmagate-client.so.1 from this build tree), and
// the C API's asynchronous paths (tests/rdma/c_api_guest_check.c). The C example sleeps on the client's event
// fd between operations; the Python check does too.
//
// The binary re-executes itself as the daemon ("daemon ...": daemon/gateway_main.cpp linked in), so its ldd
// closure, which tools/rdma-suite brings into the guest, carries the libraries the examples and the shared
// client library need (DPDK, verbs, rdma_cm). python3 and the part of its standard library that the package
// imports are in the guest image (tools/rxe-vm/python-guest-files).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"

int rdmagate_main(int argc, char** argv);

namespace {

using namespace std::chrono_literals;
using rdmagate::testfix::rxe_addr;
using rdmagate::testfix::proc::Child;
using rdmagate::testfix::proc::read_file;
using rdmagate::testfix::proc::spawn;
using rdmagate::testfix::proc::start_test_gateway;
using rdmagate::testfix::proc::test_gateway_yaml;

std::string g_self;
std::string g_dir;
int g_rdma_port = 7600;
int g_http_port = 18500;

// One gateway for every test: one data-plane core on CPU 1 yielding when idle, so that the client process
// (which polls on the caller's thread) gets CPU time in the 2-vCPU guest.
class ClientExamples : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Child;
    const std::string yaml = g_dir + "/rdmagate.yaml";
    log_ = g_dir + "/rdmagate.log";
    ready_ = start_test_gateway(daemon_, g_self, yaml,
                                test_gateway_yaml(rxe_addr(), g_rdma_port, g_http_port), log_, g_http_port);
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(ready_) << "the gateway did not become ready; log:\n" << read_file(log_);
  }

  // Runs a client program with the gateway's address and port; its exit code (-1: timeout or signal) and
  // output.
  static int run(const std::string& name, std::vector<std::string> argv, std::string* output) {
    argv.push_back(rxe_addr());
    argv.push_back(std::to_string(g_rdma_port));
    const std::string log = g_dir + "/" + name + ".log";
    Child c;
    const std::vector<std::string> env = {
        "PYTHONPATH=" RDMAGATE_SOURCE_DIR "/client/python", "RDMAGATE_CLIENT_LIB=" RDMAGATE_CLIENT_LIB,
        // Bytecode of the standard library comes with the guest image; none is written into the repository.
        "PYTHONDONTWRITEBYTECODE=1",
        // The examples' build RUNPATH may name the build directory through
        // a symbolic link the guest does not have.
        "LD_LIBRARY_PATH=" RDMAGATE_CLIENT_LIB_DIR};
    if (!spawn(&c, argv, log, env)) return *output = "posix_spawn " + argv[0] + " failed", -1;
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = c.wait_exit(180s);
    *output = read_file(log);
    std::printf("%s: exit %d in %.1f s; output:\n%s", name.c_str(), rc,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                output->c_str());
    return rc;
  }

  // The examples print one line per size: "<key>: <n> bytes put, read back equal, deleted".
  static void expect_every_size(const std::string& out, const std::string& prefix) {
    for (const char* n : {"10", "4096", "65537", "1048576", "2097152"}) {
      EXPECT_NE(out.find(prefix + n + ": " + n + " bytes put, read back equal, deleted"), std::string::npos)
          << "no line for " << n << " bytes in:\n"
          << out;
    }
  }

  static void require_python() {
    ASSERT_EQ(access(RDMAGATE_PYTHON3, X_OK), 0)
        << RDMAGATE_PYTHON3
        << " is not in the guest: tools/rxe-vm/python-guest-files lists what the guest image "
        << "needs (Debian's python3.11-minimal and libpython3.11-stdlib on the host)";
  }

  static Child* daemon_;
  static bool ready_;
  static std::string log_;
};

Child* ClientExamples::daemon_ = nullptr;
bool ClientExamples::ready_ = false;
std::string ClientExamples::log_;

TEST_F(ClientExamples, CProgramSleepsOnTheEventFd) {
  std::string out;
  ASSERT_EQ(run("example_c", {RDMAGATE_EXAMPLE_C}, &out), 0) << out;
  expect_every_size(out, "example-c-");
}

// Beyond the example: callbacks that submit, TOO_SMALL in a callback, an older caller's stats struct, destroy
// with requests in flight (tests/rdma/c_api_guest_check.c).
TEST_F(ClientExamples, CApiAsyncPaths) {
  std::string out;
  ASSERT_EQ(run("c_api_check", {RDMAGATE_C_API_CHECK}, &out), 0) << out;
  EXPECT_NE(out.find("c_api_guest_check: all checks passed"), std::string::npos) << out;
}

TEST_F(ClientExamples, CppProgram) {
  std::string out;
  ASSERT_EQ(run("example_cpp", {RDMAGATE_EXAMPLE_CPP}, &out), 0) << out;
  expect_every_size(out, "example-cpp-");
}

TEST_F(ClientExamples, PythonScript) {
  require_python();
  std::string out;
  ASSERT_EQ(
      run("example_py", {RDMAGATE_PYTHON3, RDMAGATE_SOURCE_DIR "/examples/python/put_get_delete.py"}, &out),
      0)
      << out;
  expect_every_size(out, "example-py-");
}

// The package beyond the example: buffer types, get_into, exceptions with their status, the event fd.
TEST_F(ClientExamples, PythonPackageCheck) {
  require_python();
  std::string out;
  ASSERT_EQ(
      run("python_check", {RDMAGATE_PYTHON3, RDMAGATE_SOURCE_DIR "/tests/rdma/python_client_check.py"}, &out),
      0)
      << out;
  EXPECT_NE(out.find("python_client_check: all checks passed"), std::string::npos) << out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  // No EAL here: the daemon (this binary, re-executed) starts its own, and the clients need none.
  return rdmagate::testfix::rdma_test_main(argc, argv, "client_examples_test", /*eal_lcores=*/nullptr,
                                           [](const rdmagate::control::RdmaProbe&) {
                                             g_self = rdmagate::testfix::self_exe("client_examples_test");
                                             if (g_self.empty()) return 1;
                                             g_rdma_port = 7600 + static_cast<int>(getpid() % 300) * 2;
                                             g_http_port = 18500 + static_cast<int>(getpid() % 500);
                                             g_dir = "/tmp/client_examples_" + std::to_string(getpid());
                                             if (mkdir(g_dir.c_str(), 0755) != 0) {
                                               std::perror(g_dir.c_str());
                                               return 1;
                                             }
                                             return 0;
                                           });
}

#pragma once
// The client-library side of a guest test that re-executes itself as a client process: EAL without hugepages
// and one client core connected to one gateway. Header-only; link rdmagate_client.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "client/client.hpp"
#include "control/rdma_device.hpp"
#include "dataplane/eal_runtime.hpp"

namespace rdmagate::testfix::proc {

// EAL for a client process on `lcores` (an --lcores map; the guest has 2 vCPUs), from ordinary pages. The
// process exits right after its work, so callers release() it instead of running EAL's cleanup.
inline std::unique_ptr<dataplane::EalRuntime> client_eal(const char* who, const char* lcores,
                                                         unsigned memory_mb) {
  dataplane::EalOptions eo;
  eo.program_name = who;
  eo.lcores = lcores;
  eo.hugepages = dataplane::HugepagePolicy::kNever;
  eo.memory_mb = memory_mb;
  std::string err;
  auto eal = dataplane::EalRuntime::init(eo, &err);
  if (!eal) std::fprintf(stderr, "%s: %s\n", who, err.c_str());
  return eal;
}

// A client with one core on `lcore`, connected to addr:port within 30 s; nullptr (and a line on stderr) if
// not.
inline std::unique_ptr<client::Client> connect_client(const char* who, const std::string& addr, int port,
                                                      unsigned lcore) {
  using namespace std::chrono_literals;
  client::ClientConfig cc;
  cc.gateways = {{addr, static_cast<std::uint16_t>(port)}};
  cc.device = control::device_name_from_env();
  cc.progress = client::Progress::kEalLcores;  // the EAL client_eal brought up, on `lcore`
  cc.cores = 1;
  cc.lcores = {lcore};
  cc.yield_when_idle = true;
  cc.pool_bytes = 8u << 20;
  cc.request_timeout = 20s;
  std::string err;
  auto cl = client::Client::create(cc, &err);
  if (!cl || !cl->wait_connected(30s)) {
    std::fprintf(stderr, "%s: %s\n", who, cl ? "not connected" : err.c_str());
    return nullptr;
  }
  return cl;
}

}  // namespace rdmagate::testfix::proc

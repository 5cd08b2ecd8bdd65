#pragma once
// The two devices a core loop runs on in host tests and benchmarks, behind one shape: the fake device alone,
// or the simulated mlx5 NIC in front of it. model() is what a test steps, fails and inspects; device() is
// what the core's setup and control use; model_cq() is the CQ's shadow the test reorders; after_turn() lets
// the NIC take what the turn's last flushes handed over, so the model holds it when a test audits.

#include "tests/engine/fake_backend.hpp"
#include "tests/engine/sim_mlx5.hpp"

namespace rdmagate::dataplane::fake {

struct FakeRig {
  using Backend = FakeBackend;
  FakeDevice dev;
  FakeDevice& model() { return dev; }
  DeviceBackend& device() { return dev; }
  FakeCq& model_cq(BackendCq& cq) { return static_cast<FakeCq&>(cq); }
  void after_turn() {}
};

struct SimMlx5Rig {
  using Backend = SimMlx5Backend;
  SimMlx5Device sim;
  SimMlx5Rig() = default;
  explicit SimMlx5Rig(const SimMlx5Device::Options& o) : sim(o) {}
  FakeDevice& model() { return sim.model(); }
  DeviceBackend& device() { return sim; }
  FakeCq& model_cq(BackendCq& cq) { return SimMlx5Device::model_of(cq); }
  void after_turn() { sim.sync(); }
};

}  // namespace rdmagate::dataplane::fake

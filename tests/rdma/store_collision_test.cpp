// Crafted colliding keys against a running gateway (issue 15), through the client library on real RDMA
// (rxe in the guest): the in-process gateway of tests/rdma/gateway_fixture.hpp and a Client.
//
// Before the store's slot hash was keyed, 28 keys sharing a chosen key's home bucket (found offline with the
// public hash) took every slot of its probe window, and that key's PUT answered no_space on an empty store.
// Here an attacker who knows the gateway's seed (read in-process through the test peer: what the seed
// protects) still gets that refusal, which shows the attack and the window-full count are real; keys crafted
// with the old public hash no longer collide, and the chosen PUT succeeds with the count unchanged.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/client.hpp"
#include "tests/rdma/gateway_fixture.hpp"
#include "tests/services/storage/memory/colliding_keys.hpp"
#include "tests/services/storage/memory/store_test_peer.hpp"

namespace {

using namespace rdmagate;
using client::Client;
using client::ClientConfig;
using client::Status;
using store::StoreTestPeer;

constexpr const char* kTarget = "the-key-they-want-refused";

class StoreCollisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testfix::GatewayOptions o;
    o.region_bytes = 64ull << 20;  // the store's default index: 65536 objects, 16384 buckets
    std::string err;
    gw_ = testfix::Gateway::start(o, &err);
    ASSERT_TRUE(gw_) << err;
    gw_->start_background();

    ClientConfig c;
    c.gateways.push_back(client::Endpoint{gw_->addr(), gw_->port()});
    c.device = testfix::rdma_device();
    c.progress = client::Progress::kEalLcores;
    c.cores = 1;
    c.lcores.push_back(testfix::kClientLcores[0]);
    c.yield_when_idle = true;
    c.pool_bytes = 8u << 20;
    c.request_timeout = std::chrono::seconds(20);
    c.connect_timeout = std::chrono::seconds(10);
    cl_ = Client::create(c, &err);
    ASSERT_TRUE(cl_) << err;
    ASSERT_TRUE(cl_->wait_connected(std::chrono::seconds(20))) << "client connection did not come up";
  }

  void TearDown() override {
    if (cl_) {
      const client::ClientStats s = cl_->stats();
      EXPECT_EQ(s.submitted, s.completed) << "requests accepted but never completed";
      EXPECT_EQ(s.protocol_errors, 0u);
      cl_.reset();
    }
    if (gw_) {
      EXPECT_TRUE(gw_->store_empty()) << "a value, reservation or pin was left behind";
    }
    gw_.reset();
  }

  // PUTs every crafted key (each must succeed), then the target; returns the target's status.
  Status put_crafted_then_target(const std::vector<std::string>& crafted) {
    const std::string value(64, 'v');
    for (const auto& k : crafted) {
      const client::Result r = cl_->put(k, value.data(), value.size());
      EXPECT_EQ(r.status, Status::kOk) << k << ": " << client::status_name(r.status);
    }
    return cl_->put(kTarget, value.data(), value.size()).status;
  }

  void delete_all(const std::vector<std::string>& crafted) {
    for (const auto& k : crafted) EXPECT_EQ(cl_->del(k).status, Status::kOk) << k;
    (void)cl_->del(kTarget);
  }

  std::unique_ptr<testfix::Gateway> gw_;
  std::unique_ptr<Client> cl_;
};

TEST_F(StoreCollisionTest, KeysCraftedWithThePublicHashNoLongerCollide) {
  const store::Store& s = gw_->store();
  const std::uint64_t mask = StoreTestPeer::bucket_mask(s);
  ASSERT_GE(mask, 1023u) << "a small index would let random keys collide";

  // Keys crafted with the old public hash, as a peer without the seed must: the chosen PUT succeeds.
  const auto with_public_hash =
      store::test::colliding_keys(store::test::unkeyed_hash, mask, kTarget, store::test::kWindowSlots);
  EXPECT_EQ(put_crafted_then_target(with_public_hash), Status::kOk);
  std::string got(64, '\0');
  const client::Result g = cl_->get(kTarget, got.data(), got.size());
  EXPECT_EQ(g.status, Status::kOk);
  EXPECT_EQ(got, std::string(64, 'v'));
  EXPECT_EQ(s.stats().window_full, 0u) << "no refusal for the keys crafted without the seed";
  std::printf("crafted: %zu keys per set, bucket mask %llu; window_full after the public-hash set: %llu\n",
              with_public_hash.size(), static_cast<unsigned long long>(mask),
              static_cast<unsigned long long>(s.stats().window_full));
  delete_all(with_public_hash);

  // An attacker who knows the seed: the refusal the keyed hash prevents, counted as window-full (so the
  // checks above could fail).
  const auto with_seed =
      store::test::colliding_keys([&](std::string_view k) { return StoreTestPeer::hash_of(s, k); }, mask,
                                  kTarget, store::test::kWindowSlots);
  EXPECT_EQ(put_crafted_then_target(with_seed), Status::kNoSpace);
  EXPECT_EQ(s.stats().window_full, 1u);
  delete_all(with_seed);
}

}  // namespace

int main(int argc, char** argv) {
  return rdmagate::testfix::gateway_test_main(argc, argv, "store_collision_test");
}

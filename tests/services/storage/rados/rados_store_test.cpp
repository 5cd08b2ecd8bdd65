// The RADOS backend through the storage interface, against a real single-node cluster (the ceph_cluster
// ctest fixture: tools/ceph-cluster, memstore, cephx). No RDMA: the test thread is the data-plane core.
#include "services/storage/rados/rados_store.hpp"

#include <rados/librados.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "protocol/crc32c.hpp"
#include "services/storage/rados/invalidation.hpp"
#include "tests/services/storage/memory/store_test_util.hpp"
#include "tests/services/storage/rados/rados_test_util.hpp"

namespace rdmagate::storage::rados {
namespace {

using test::get;
using test::put;
using test::put_reserved;
using test::remove;

using store::test::pattern;

// A direct librados handle (admin), as an operator's `rados` CLI would act behind the gateways' backs.
struct Admin {
  rados_t cluster = nullptr;
  rados_ioctx_t io = nullptr;
  explicit Admin(const std::string& dir, const std::string& ns = {}) {
    EXPECT_EQ(rados_create2(&cluster, "ceph", "client.admin", 0), 0);
    EXPECT_EQ(rados_conf_read_file(cluster, (dir + "/ceph.conf").c_str()), 0);
    EXPECT_EQ(rados_conf_set(cluster, "keyring", (dir + "/client.admin.keyring").c_str()), 0);
    EXPECT_EQ(rados_connect(cluster), 0);
    EXPECT_EQ(rados_ioctx_create(cluster, "rdmagate", &io), 0);
    rados_ioctx_set_namespace(io, ns.empty() ? nullptr : ns.c_str());
  }
  ~Admin() {
    if (io) rados_ioctx_destroy(io);
    if (cluster) rados_shutdown(cluster);
  }
};

class RadosStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::fixture_dir();
    ASSERT_FALSE(dir_.empty()) << "RDMAGATE_CEPH_DIR is not set: run through ctest (fixture ceph_cluster)";
    // Each test in its own namespace: no test sees another's objects or notifies.
    ns_ = std::string("t-") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  std::unique_ptr<test::Gateway> gateway(std::uint64_t cache_bytes = 64u << 20, std::uint32_t cores = 1) {
    RadosSettings s = test::fixture_settings(dir_, ns_);
    s.cores = cores;
    auto g = test::make_gateway(s, cache_bytes);
    if (g) {
      EXPECT_TRUE(test::wait_ready(*g->rados))
          << health_name(g->rados->health()) << " " << g->rados->last_error();
    }
    return g;
  }
  std::string dir_;
  std::string ns_;
};

TEST(RadosNaming, ObjectNamesEscapeEverythingButASafeSet) {
  EXPECT_EQ(object_name("abc-_.XYZ09"), "o/abc-_.XYZ09");
  EXPECT_EQ(object_name("a/b c"), "o/a%2Fb%20c");
  EXPECT_EQ(object_name(std::string_view("\0\xff", 2)), "o/%00%FF");
  EXPECT_EQ(object_name("rdmagate.cache"), "o/rdmagate.cache");  // never the internal watch object
}

// A tenant's object names (storage::Namespace::name) and the unauthenticated namespace's cannot meet.
TEST(RadosNaming, TenantObjectNamesCannotMeetTheUnauthenticatedOnes) {
  EXPECT_EQ(object_name("", "x"), "o/x");
  EXPECT_EQ(object_name("app", "x"), "t/app/x");
  EXPECT_EQ(object_name("a@b.c-d_e", "k/1"), "t/a%40b.c-d_e/k%2F1");
  // An unauthenticated key spelling a tenant's object name is escaped out of its way.
  EXPECT_EQ(object_name("t/app/x"), "o/t%2Fapp%2Fx");
  // A tenant name holding the separator (configuration refuses it) cannot end early either.
  EXPECT_NE(object_name("a/b", "c"), object_name("a", "b/c"));
}

// One key, three objects (unauthenticated, two tenants), each reached only through its own namespace and
// stored under its documented name; a tenant's value never comes from, nor goes into, the cache (which
// holds the unauthenticated namespace only), inline or reserved PUT alike.
TEST_F(RadosStoreTest, TenantsSameKeyAreDifferentObjects) {
  auto g = gateway();
  ASSERT_TRUE(g);
  CoreStorage& s = g->core();
  const Namespace app{1, "app"}, other{2, "other"};
  const auto v0 = pattern(100, 1), va = pattern(5000, 2), vb = pattern(300, 3);
  const auto end = [&](Status st, std::uint64_t tag) {
    return st == Status::kPending ? test::wait_completion(s, tag).status : st;
  };
  const auto get_in = [&](const Namespace& ns, std::uint64_t tag, std::vector<std::byte>* value) {
    return get(s, ns, "x", value, tag);
  };
  ASSERT_EQ(put(s, "x", v0, 1), Status::kOk);  // the unauthenticated namespace: cached when trusted
  ASSERT_EQ(end(s.put(app, "x", va, 2, nullptr), 2), Status::kOk);
  Lease l;
  ASSERT_EQ(s.reserve(other, "x", vb.size(), 3, &l), Status::kOk);
  std::memcpy(l.data, vb.data(), vb.size());
  ASSERT_EQ(end(s.commit(other, &l, 3, nullptr), 3), Status::kOk);

  std::vector<std::byte> got;
  for (int round = 0; round < 2; ++round) {  // the second round may find the cache filled
    ASSERT_EQ(get(s, "x", &got, 4), Status::kOk);
    EXPECT_TRUE(got == v0);
    ASSERT_EQ(get_in(app, 5, &got), Status::kOk);
    EXPECT_TRUE(got == va);
    ASSERT_EQ(get_in(other, 6, &got), Status::kOk);
    EXPECT_TRUE(got == vb);
  }
  {
    Admin admin(dir_, ns_);
    std::vector<char> raw(8192);
    EXPECT_EQ(rados_read(admin.io, "o/x", raw.data(), raw.size(), 0), 100) << "unchanged for tenant 0";
    EXPECT_EQ(rados_read(admin.io, "t/app/x", raw.data(), raw.size(), 0), 5000);
    EXPECT_EQ(rados_read(admin.io, "t/other/x", raw.data(), raw.size(), 0), 300);
  }
  ASSERT_EQ(end(s.remove(app, "x", 7, nullptr), 7), Status::kOk);
  EXPECT_EQ(get_in(app, 8, &got), Status::kNotFound);
  ASSERT_EQ(get(s, "x", &got, 9), Status::kOk);
  EXPECT_TRUE(got == v0);
  ASSERT_EQ(get_in(other, 10, &got), Status::kOk);
  EXPECT_TRUE(got == vb);
  EXPECT_EQ(end(s.remove(other, "x", 11, nullptr), 11), Status::kOk);
  EXPECT_EQ(remove(s, "x", 12), Status::kOk);
  EXPECT_EQ(get_in(other, 13, &got), Status::kNotFound);
  EXPECT_EQ(get(s, "x", &got, 14), Status::kNotFound);
  EXPECT_EQ(g->cache->stats().objects, 0u) << "nothing of a tenant was ever cached";
}

TEST_F(RadosStoreTest, PutGetDeleteAtEverySize) {
  auto g = gateway();
  ASSERT_TRUE(g);
  std::uint64_t tag = 1;
  for (const std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{4097},
                                 std::size_t{1} << 20, std::size_t{4} << 20}) {
    SCOPED_TRACE(size);
    const std::string key = "k" + std::to_string(size);
    const auto v = pattern(size, static_cast<std::uint32_t>(size));
    // Inline below 64 KiB, as the object service does, else reserve + commit as a chunked PUT.
    ASSERT_EQ(size < 65536 ? put(g->core(), key, v, tag++) : put_reserved(g->core(), key, v, tag++),
              Status::kOk);
    std::vector<std::byte> got;
    ASSERT_EQ(get(g->core(), key, &got, tag++), Status::kOk);
    EXPECT_TRUE(got == v);
    // The same through a second gateway, whose empty cache must go to RADOS.
    auto other = gateway();
    ASSERT_TRUE(other);
    ASSERT_EQ(get(other->core(), key, &got, tag++), Status::kOk);
    EXPECT_TRUE(got == v);
    ASSERT_EQ(remove(g->core(), key, tag++), Status::kOk);
    EXPECT_EQ(get(g->core(), key, &got, tag++), Status::kNotFound);
    EXPECT_EQ(get(other->core(), key, &got, tag++), Status::kNotFound);
    EXPECT_EQ(remove(g->core(), key, tag++), Status::kNotFound);
  }
  const RadosStats st = g->rados->stats();
  EXPECT_GT(st.cache_hits, 0u);
  EXPECT_EQ(st.crc_mismatches, 0u);
}

// A GET miss of a value over 4 KiB takes two read ops (the probe tells its size) unless the gateway knows
// the key's size from an earlier PUT or GET: then one. A stale size costs the second op and never a wrong
// byte. A tenant's values are never cached, so every GET here goes to RADOS; the objects are rewritten
// behind the gateway's back (with their checksums) to make its sizes stale.
TEST_F(RadosStoreTest, AGetMissOfAKnownSizeTakesOneReadOp) {
  auto g = gateway();
  ASSERT_TRUE(g);
  CoreStorage& s = g->core();
  const Namespace app{1, "app"};
  Admin admin(dir_, ns_);
  const std::string oid = object_name(app.name, "h");
  const auto write_behind = [&](const std::vector<std::byte>& v) {
    char crc[9];
    std::snprintf(crc, sizeof crc, "%08x", crc32c(v.data(), v.size()));
    rados_write_op_t w = rados_create_write_op();
    rados_write_op_write_full(w, reinterpret_cast<const char*>(v.data()), v.size());
    rados_write_op_setxattr(w, "rdmagate.crc32c", crc, 8);
    EXPECT_EQ(rados_write_op_operate(w, admin.io, oid.c_str(), nullptr, 0), 0);
    rados_release_write_op(w);
  };
  const auto read_ops = [&] { return g->rados->stats().latency[0].count(); };
  std::uint64_t tag = 1;
  // The read ops one GET of "h" took, after checking it answered `want` (or not_found when empty).
  const auto get_ops = [&](const std::vector<std::byte>* want) {
    const std::uint64_t before = read_ops();
    std::vector<std::byte> got;
    const Status st = get(s, app, "h", &got, tag++);
    if (want == nullptr) {
      EXPECT_EQ(st, Status::kNotFound);
    } else {
      EXPECT_EQ(st, Status::kOk);
      EXPECT_TRUE(got == *want);
    }
    return read_ops() - before;
  };

  const auto v1 = pattern(1u << 20, 1), v2 = pattern(2u << 20, 2), small = pattern(100, 3);
  write_behind(v1);
  EXPECT_EQ(get_ops(&v1), 2u) << "a size never seen: probe, then the value";
  EXPECT_EQ(get_ops(&v1), 1u) << "the size the last GET saw";
  write_behind(v2);
  EXPECT_EQ(get_ops(&v2), 2u) << "it grew: the guess read too little";
  EXPECT_EQ(get_ops(&v2), 1u);
  write_behind(pattern(4097, 9));
  write_behind(v1);
  EXPECT_EQ(get_ops(&v1), 2u) << "it shrank: the guess's block was too large";
  write_behind(small);
  EXPECT_EQ(get_ops(&small), 2u) << "now within the probe's own read: the guess's bytes were given back";
  EXPECT_EQ(get_ops(&small), 1u) << "small values need no guess";
  Lease l;
  ASSERT_EQ(s.reserve(app, "h", v2.size(), tag, &l), Status::kOk);
  std::memcpy(l.data, v2.data(), v2.size());
  Status st = s.commit(app, &l, tag, nullptr);
  ASSERT_EQ(st == Status::kPending ? test::wait_completion(s, tag).status : st, Status::kOk);
  ++tag;
  EXPECT_EQ(get_ops(&v2), 1u) << "the size its own PUT wrote";
  st = s.remove(app, "h", tag, nullptr);
  ASSERT_EQ(st == Status::kPending ? test::wait_completion(s, tag).status : st, Status::kOk);
  ++tag;
  EXPECT_EQ(get_ops(nullptr), 1u);
  EXPECT_EQ(g->rados->stats().crc_mismatches, 0u);
  EXPECT_EQ(g->cache->stats().objects, 0u);
}

TEST_F(RadosStoreTest, RefusalsEndAtOnce) {
  auto g = gateway();
  ASSERT_TRUE(g);
  std::vector<std::byte> got;
  EXPECT_EQ(g->core().get("", 1, nullptr), Status::kBadRequest);
  EXPECT_EQ(g->core().remove(std::string(251, 'x'), 1), Status::kBadRequest);
  EXPECT_EQ(put(g->core(), "big", pattern((4u << 20) + 1, 1), 2), Status::kTooLarge);
  Lease l;
  EXPECT_EQ(g->core().reserve("big", (4u << 20) + 1, 3, &l), Status::kTooLarge);
}

TEST_F(RadosStoreTest, OverwriteReturnsTheNewestThroughEveryGateway) {
  auto a = gateway();
  auto b = gateway();
  ASSERT_TRUE(a && b);
  std::uint64_t tag = 1;
  std::vector<std::byte> got;
  for (std::uint32_t round = 0; round < 20; ++round) {
    const auto v = pattern(100 + round * 700, round);
    // Alternate the writer; read through both after every acknowledged write: 0 stale reads.
    auto& writer = round % 2 == 0 ? *a : *b;
    ASSERT_EQ(put(writer.core(), "shared", v, tag++), Status::kOk);
    ASSERT_EQ(get(a->core(), "shared", &got, tag++), Status::kOk);
    ASSERT_TRUE(got == v) << "stale read through a, round " << round;
    ASSERT_EQ(get(b->core(), "shared", &got, tag++), Status::kOk);
    ASSERT_TRUE(got == v) << "stale read through b, round " << round;
    if (round % 5 == 4) {
      ASSERT_EQ(remove(writer.core(), "shared", tag++), Status::kOk);
      ASSERT_EQ(get(a->core(), "shared", &got, tag++), Status::kNotFound) << "round " << round;
      ASSERT_EQ(get(b->core(), "shared", &got, tag++), Status::kNotFound) << "round " << round;
    }
  }
  // The reads after the first were cache hits, so coherence really came from the invalidations.
  EXPECT_GT(a->rados->stats().cache_hits + b->rados->stats().cache_hits, 0u);
  EXPECT_GT(a->rados->stats().invalidations_received, 0u);
  EXPECT_EQ(a->rados->stats().notify_timeouts + b->rados->stats().notify_timeouts, 0u);
}

TEST_F(RadosStoreTest, ConcurrentWritersOfOneKeyLeaveOneWholeValueEverywhere) {
  auto a = gateway(64u << 20, 2);
  auto b = gateway();
  ASSERT_TRUE(a && b);
  constexpr int kRounds = 40;
  // Two cores of gateway a and gateway b's core write the same key at once; every value is distinct.
  auto writer = [&](CoreStorage* s, std::uint32_t id) {
    for (int i = 0; i < kRounds; ++i) {
      const auto v =
          pattern(3000 + id * 17 + static_cast<std::size_t>(i), id * 1000 + static_cast<std::uint32_t>(i));
      EXPECT_EQ(put(*s, "hot", v, id * 100000 + static_cast<std::uint64_t>(i)), Status::kOk);
    }
  };
  std::thread t0(writer, &a->core(0), 1);
  std::thread t1(writer, &a->core(1), 2);
  std::thread t2(writer, &b->core(0), 3);
  t0.join();
  t1.join();
  t2.join();
  // Whatever RADOS kept, every gateway's GET returns exactly that: one whole value, the same everywhere.
  std::vector<std::byte> via_a0, via_a1, via_b;
  ASSERT_EQ(get(a->core(0), "hot", &via_a0, 1), Status::kOk);
  ASSERT_EQ(get(a->core(1), "hot", &via_a1, 2), Status::kOk);
  ASSERT_EQ(get(b->core(0), "hot", &via_b, 3), Status::kOk);
  Admin admin(dir_, ns_);
  std::vector<char> raw(8192);
  const int n = rados_read(admin.io, object_name("hot").c_str(), raw.data(), raw.size(), 0);
  ASSERT_GT(n, 0);
  const std::vector<std::byte> in_rados(reinterpret_cast<std::byte*>(raw.data()),
                                        reinterpret_cast<std::byte*>(raw.data()) + n);
  EXPECT_TRUE(via_a0 == in_rados);
  EXPECT_TRUE(via_a1 == in_rados);
  EXPECT_TRUE(via_b == in_rados);
  bool matches_one = false;
  for (std::uint32_t id = 1; id <= 3 && !matches_one; ++id) {
    for (int i = 0; i < kRounds && !matches_one; ++i) {
      matches_one = pattern(3000 + id * 17 + static_cast<std::size_t>(i),
                            id * 1000 + static_cast<std::uint32_t>(i)) == in_rados;
    }
  }
  EXPECT_TRUE(matches_one) << "the stored value is none of the values written";
}

TEST_F(RadosStoreTest, ChecksumCatchesAnObjectAlteredBehindTheGateway) {
  auto a = gateway();
  ASSERT_TRUE(a);
  const auto v = pattern(10000, 7);
  ASSERT_EQ(put(a->core(), "victim", v, 1), Status::kOk);
  ASSERT_EQ(put(a->core(), "foreign-src", v, 2), Status::kOk);
  {
    Admin admin(dir_, ns_);
    const char flip = static_cast<char>(~static_cast<char>(v[5000]));
    ASSERT_EQ(rados_write(admin.io, object_name("victim").c_str(), &flip, 1, 5000), 0);
    // An object no gateway wrote (no checksum xattr) cannot be vouched for either.
    ASSERT_EQ(rados_write_full(admin.io, object_name("foreign").c_str(), "hello", 5), 0);
  }
  auto b = gateway();  // an empty cache: the GET reads RADOS
  ASSERT_TRUE(b);
  std::vector<std::byte> got;
  EXPECT_EQ(get(b->core(), "victim", &got, 3), Status::kCorrupt);
  EXPECT_EQ(get(b->core(), "foreign", &got, 4), Status::kCorrupt);
  EXPECT_EQ(get(b->core(), "foreign-src", &got, 5), Status::kOk);
  EXPECT_TRUE(got == v);
  EXPECT_EQ(b->rados->stats().crc_mismatches, 2u);
  // Corrupt values are never cached: the same answer again.
  EXPECT_EQ(get(b->core(), "victim", &got, 6), Status::kCorrupt);
}

TEST_F(RadosStoreTest, AForeignOrMalformedNotifyDropsTheWholeCacheAndIsStillAcked) {
  auto g = gateway();
  ASSERT_TRUE(g);
  std::vector<std::byte> got;
  ASSERT_EQ(put(g->core(), "cached", pattern(100, 1), 1), Status::kOk);
  ASSERT_EQ(get(g->core(), "cached", &got, 2), Status::kOk);
  const std::uint64_t hits = g->rados->stats().cache_hits;
  const std::uint64_t resets = g->rados->stats().cache_resets;
  Admin admin(dir_, ns_);
  // A key length of 200 with 3 bytes after it: not a gateway's payload. Then an empty one.
  const char bad[] = {static_cast<char>(200), 'a', 'b', 'c'};
  char* reply = nullptr;
  std::size_t reply_len = 0;
  EXPECT_EQ(rados_notify2(admin.io, "rdmagate.cache", bad, sizeof bad, 5000, &reply, &reply_len), 0)
      << "the gateway did not ack";
  rados_buffer_free(reply);
  EXPECT_EQ(rados_notify2(admin.io, "rdmagate.cache", nullptr, 0, 5000, &reply, &reply_len), 0);
  rados_buffer_free(reply);
  EXPECT_EQ(g->rados->stats().cache_resets, resets + 2);
  // The value is still there (in RADOS), but the next GET had to fetch it.
  ASSERT_EQ(get(g->core(), "cached", &got, 3), Status::kOk);
  EXPECT_TRUE(got == pattern(100, 1));
  EXPECT_EQ(g->rados->stats().cache_hits, hits);
}

// A gateway whose hello only its own watch acked is alone: its writes notify nobody. A second gateway's
// hello ends that before the second may cache anything, and from then on every write is seen by both.
TEST_F(RadosStoreTest, ALoneGatewayNotifiesNobodyUntilASecondAnnouncesItself) {
  auto a = gateway();
  ASSERT_TRUE(a);
  std::uint64_t tag = 1;
  const std::uint64_t sent = a->rados->stats().notifies_sent;
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(put(a->core(), "k" + std::to_string(i), pattern(64, i), tag++), Status::kOk);
  ASSERT_EQ(remove(a->core(), "k0", tag++), Status::kOk);
  EXPECT_EQ(a->rados->stats().notifies_sent, sent) << "a lone gateway sent notifies";

  auto b = gateway();
  ASSERT_TRUE(b);
  std::vector<std::byte> got;
  ASSERT_EQ(get(b->core(), "k1", &got, tag++), Status::kOk);  // b caches k1
  ASSERT_EQ(get(b->core(), "k1", &got, tag++), Status::kOk);
  EXPECT_EQ(b->rados->stats().cache_hits, 1u);
  ASSERT_EQ(put(a->core(), "k1", pattern(64, 100), tag++), Status::kOk);
  EXPECT_GT(a->rados->stats().notifies_sent, sent) << "a kept believing it was alone";
  ASSERT_EQ(get(b->core(), "k1", &got, tag++), Status::kOk);
  EXPECT_TRUE(got == pattern(64, 100)) << "stale read through b";
  EXPECT_EQ(a->rados->stats().notify_timeouts + b->rados->stats().notify_timeouts, 0u);
}

// Another gateway's invalidation carries a window: its write may commit up to then after we acked, so
// nothing we read of the key meanwhile may enter our cache; afterwards the cache fills again.
TEST_F(RadosStoreTest, AnInvalidationKeepsItsKeysOutOfTheCacheForItsWindow) {
  auto g = gateway();
  ASSERT_TRUE(g);
  std::vector<std::byte> got;
  const auto v = pattern(300, 7);
  ASSERT_EQ(put(g->core(), "w", v, 1), Status::kOk);
  ASSERT_EQ(put(g->core(), "other", v, 2), Status::kOk);
  const RadosStats before = g->rados->stats();
  ASSERT_EQ(get(g->core(), "w", &got, 3), Status::kOk);
  EXPECT_EQ(g->rados->stats().cache_hits, before.cache_hits + 1) << "the writer caches its own value";

  Admin admin(dir_, ns_);
  char payload[kNotifyPayload];
  constexpr std::uint32_t kWindowMs = 1500;
  std::size_t len = begin_invalidation(payload, kWindowMs);
  len = append_key(payload, len, "w");
  char* reply = nullptr;
  std::size_t reply_len = 0;
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(rados_notify2(admin.io, "rdmagate.cache", payload, len, 5000, &reply, &reply_len), 0);
  rados_buffer_free(reply);

  // Within the window: every GET of "w" goes to RADOS and none fills; "other" is untouched.
  const RadosStats acked = g->rados->stats();
  for (std::uint64_t i = 0; i < 3; ++i) {
    ASSERT_EQ(get(g->core(), "w", &got, 10 + i), Status::kOk);
    EXPECT_TRUE(got == v);
  }
  ASSERT_EQ(get(g->core(), "other", &got, 20), Status::kOk);
  const RadosStats within = g->rados->stats();
  ASSERT_LT(std::chrono::steady_clock::now() - sent, std::chrono::milliseconds(kWindowMs))
      << "the cluster was too slow for this test's window: nothing was shown";
  EXPECT_EQ(within.cache_misses, acked.cache_misses + 3);
  EXPECT_EQ(within.cache_fills, acked.cache_fills);
  EXPECT_EQ(within.cache_fill_skipped, acked.cache_fill_skipped + 3);
  EXPECT_EQ(within.cache_hits, acked.cache_hits + 1);

  // After it: a miss fills, and the next GET is a hit.
  std::this_thread::sleep_until(sent + std::chrono::milliseconds(kWindowMs + 100));
  ASSERT_EQ(get(g->core(), "w", &got, 30), Status::kOk);
  ASSERT_EQ(get(g->core(), "w", &got, 31), Status::kOk);
  EXPECT_TRUE(got == v);
  const RadosStats after = g->rados->stats();
  EXPECT_EQ(after.cache_fills, within.cache_fills + 1);
  EXPECT_EQ(after.cache_hits, within.cache_hits + 1);
}

// A watcher that never acks: the invalidation sent beside the write times out, a second is sent after the
// commit, and when that one times out too the writer waits out the lease before answering.
TEST_F(RadosStoreTest, AGatewayThatDoesNotAckMakesAWriteResendAndThenWaitOutTheLease) {
  RadosSettings s = test::fixture_settings(dir_, ns_);
  s.notify_timeout_ms = 1000;  // librados' least: it counts whole seconds
  s.cache_lease_ms = 1500;
  auto g = test::make_gateway(s, 64u << 20);
  ASSERT_TRUE(g);
  ASSERT_TRUE(test::wait_ready(*g->rados)) << g->rados->last_error();
  Admin admin(dir_, ns_);
  std::uint64_t cookie = 0;
  const rados_watchcb2_t silent = [](void*, uint64_t, uint64_t, uint64_t, void*, size_t) {};
  ASSERT_EQ(rados_watch2(admin.io, "rdmagate.cache", &cookie, silent, nullptr, nullptr), 0);
  // It announces itself as a gateway does (a notify without keys): until then the gateway, alone on the
  // object before, would not notify at all. Our own silent watch makes this notify time out; the
  // gateway's ack is what counts.
  char hello[kNotifyPayload];
  const std::size_t hello_len = begin_invalidation(hello, 1000);
  char* reply = nullptr;
  std::size_t reply_len = 0;
  (void)rados_notify2(admin.io, "rdmagate.cache", hello, hello_len, 1000, &reply, &reply_len);
  rados_buffer_free(reply);
  const RadosStats before = g->rados->stats();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(put(g->core(), "k", pattern(10, 3), 1), Status::kOk);
  const auto took = std::chrono::steady_clock::now() - start;
  const RadosStats after = g->rados->stats();
  EXPECT_EQ(after.notify_timeouts, before.notify_timeouts + 2);
  EXPECT_EQ(after.notify_resends, before.notify_resends + 1);
  EXPECT_GE(took, std::chrono::milliseconds(s.cache_lease_ms)) << "answered before the lease ran out";
  ASSERT_EQ(rados_unwatch2(admin.io, cookie), 0);
  // Everyone acks again: no resend, no timeout.
  ASSERT_EQ(put(g->core(), "k", pattern(10, 4), 2), Status::kOk);
  EXPECT_EQ(g->rados->stats().notify_timeouts, after.notify_timeouts);
  EXPECT_EQ(g->rados->stats().notify_resends, after.notify_resends);
  std::vector<std::byte> got;
  ASSERT_EQ(get(g->core(), "k", &got, 3), Status::kOk);
  EXPECT_TRUE(got == pattern(10, 4));
}

TEST_F(RadosStoreTest, ACacheSmallerThanTheDataSetEvictsAndEveryByteReadsBack) {
  // 8 MiB of cache, 24 MiB of values: the cache must evict, never answer no_space.
  auto g = gateway(8u << 20);
  ASSERT_TRUE(g);
  constexpr std::uint32_t kValues = 96;
  constexpr std::size_t kSize = 256 * 1024;
  std::uint64_t tag = 1;
  for (std::uint32_t i = 0; i < kValues; ++i) {
    ASSERT_EQ(put_reserved(g->core(), "e" + std::to_string(i), pattern(kSize, i), tag++), Status::kOk) << i;
  }
  std::vector<std::byte> got;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::uint32_t i = 0; i < kValues; ++i) {
      ASSERT_EQ(get(g->core(), "e" + std::to_string(i), &got, tag++), Status::kOk) << i;
      ASSERT_TRUE(got == pattern(kSize, i)) << "value " << i << " differs";
    }
  }
  EXPECT_GT(g->cache->stats().evictions, 0u);
  EXPECT_GT(g->rados->stats().cache_misses, 0u);
  EXPECT_EQ(g->rados->stats().ops[static_cast<unsigned>(protocol::ObjectOp::kPut)]
                                 [static_cast<unsigned>(Status::kNoSpace)],
            0u);
}

TEST_F(RadosStoreTest, EveryLeaseGoesBack) {
  auto g = gateway(16u << 20);
  ASSERT_TRUE(g);
  std::uint64_t tag = 1;
  std::vector<std::byte> got;
  for (std::uint32_t i = 0; i < 20; ++i) {
    ASSERT_EQ(put(g->core(), "l" + std::to_string(i), pattern(5000, i), tag++), Status::kOk);
    ASSERT_EQ(get(g->core(), "l" + std::to_string(i), &got, tag++), Status::kOk);
  }
  Lease l;
  ASSERT_EQ(g->core().reserve("aborted", 100000, tag++, &l), Status::kOk);
  g->core().abort(&l);
  EXPECT_EQ(l.token, Lease::kNoToken);
  for (std::uint32_t i = 0; i < 20; ++i)
    ASSERT_EQ(remove(g->core(), "l" + std::to_string(i), tag++), Status::kOk);
  const store::StoreStats st = g->cache->stats();
  EXPECT_EQ(st.objects, 0u);
  EXPECT_EQ(st.used_bytes, 0u) << "a reservation or pin was not given back";
}

TEST(RadosUnreachable, OpsAnswerUnavailableAtOnceAndReadyzSaysConnecting) {
  const std::string dir = ::testing::TempDir() + "rados-unreachable";
  std::string mk = "mkdir -p " + dir;
  ASSERT_EQ(std::system(mk.c_str()), 0);
  {
    // A monitor address where nothing listens (port 1 on loopback).
    std::ofstream conf(dir + "/ceph.conf");
    conf << "[global]\nmon_host = 127.0.0.1:1\nauth_client_required = none\n";
  }
  RadosSettings s;
  s.conf_file = dir + "/ceph.conf";
  s.op_timeout_ms = 500;
  s.cores = 1;
  s.max_requests = 16;
  auto g = test::make_gateway(s, 4u << 20);
  ASSERT_TRUE(g);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(g->rados->health(), Health::kConnecting);
  std::vector<std::byte> got;
  EXPECT_EQ(g->core().get("k", 1, nullptr), Status::kUnavailable);
  EXPECT_EQ(put(g->core(), "k", pattern(10, 1), 2), Status::kUnavailable);
  EXPECT_EQ(remove(g->core(), "k", 3), Status::kUnavailable);
  // Operators find the worker by name (top -H, /proc/<pid>/task/*/comm).
  int named = 0;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(t.path() / "comm");
    std::string name;
    std::getline(comm, name);
    named += name == "rados-worker" ? 1 : 0;
  }
  EXPECT_EQ(named, 1);
  // The destructor returns although the cluster never answered.
}

TEST(RadosConfig, UnreadableFilesAreStartErrors) {
  store::StoreConfig sc;
  sc.evict = true;
  sc.max_cores = 2;
  sc.max_objects = 1024;
  std::vector<std::byte> region(8u << 20);
  std::string error;
  auto cache = store::Store::create(sc, region, &error);
  ASSERT_TRUE(cache) << error;
  RadosSettings s;
  s.conf_file = "/nonexistent/ceph.conf";
  s.cache_core = 1;
  EXPECT_EQ(RadosStore::create(s, *cache, &error), nullptr);
  EXPECT_NE(error.find("store.rados.conf_file"), std::string::npos) << error;
  s.conf_file = "/dev/null";
  s.keyring = "/nonexistent/keyring";
  EXPECT_EQ(RadosStore::create(s, *cache, &error), nullptr);
  EXPECT_NE(error.find("store.rados.keyring"), std::string::npos) << error;
}

TEST(InvalidationPayload, KeysRoundTripAndMalformedPayloadsAreRefused) {
  char buf[kNotifyPayload];
  std::size_t used = begin_invalidation(buf, 2000);
  ASSERT_EQ(used, kInvalidationHeader);
  EXPECT_EQ(std::string(buf, used), std::string("\0\x01\xd0\x07\0\0", 6));  // 0, version 1, 2000 LE
  used = append_key(buf, used, "a");
  used = append_key(buf, used, std::string(250, 'k'));
  ASSERT_EQ(used, kInvalidationHeader + 2u + 251u);
  EXPECT_EQ(append_key(buf, used, ""), 0u);
  EXPECT_EQ(append_key(buf, used, std::string(251, 'x')), 0u);
  std::vector<std::string> keys;
  std::uint32_t window = 0;
  EXPECT_TRUE(parse_invalidation({buf, used}, &window, [&](std::string_view k) { keys.emplace_back(k); }));
  EXPECT_EQ(window, 2000u);
  EXPECT_EQ(keys, (std::vector<std::string>{"a", std::string(250, 'k')}));
  // Fills up to 4096 bytes and no further: the header and 16 keys of 250 take 4022, a 17th does not fit.
  used = begin_invalidation(buf, 1);
  for (int i = 0; i < 16; ++i) used = append_key(buf, used, std::string(250, 'z'));
  EXPECT_EQ(used, 4022u);
  EXPECT_EQ(append_key(buf, used, std::string(250, 'z')), 0u);
  const auto refused = [](std::string_view p) {
    std::uint32_t w = 0;
    return !parse_invalidation(p, &w, [](std::string_view) {});
  };
  const std::string head("\0\x01\xd0\x07\0\0", 6);
  EXPECT_FALSE(refused(head + "\x01x"));
  EXPECT_TRUE(refused(""));
  EXPECT_FALSE(refused(head));                                      // no key: a hello
  EXPECT_TRUE(refused(head.substr(0, 5)));                          // a header cut short
  EXPECT_TRUE(refused("\x01x"));                                    // no header: what gateways sent before it
  EXPECT_TRUE(refused(std::string("\0\x02\xd0\x07\0\0\x01x", 8)));  // another version
  EXPECT_TRUE(refused(std::string("\0\x01\0\0\0\0\x01x", 8)));      // a zero window
  EXPECT_TRUE(refused(std::string("\0\x01\xc1\x27\x09\0\x01x", 8)));   // 600001 ms: above the limit
  EXPECT_FALSE(refused(std::string("\0\x01\xc0\x27\x09\0\x01x", 8)));  // 600000 ms: the limit
  EXPECT_TRUE(refused(head + std::string("\0", 1)));                   // a zero length
  EXPECT_TRUE(refused(head + "\x03" + "ab"));                          // runs past the end
  EXPECT_TRUE(refused(head + "\xfb" + std::string(251, 'x')));         // 251: above the key limit
}

TEST(RadosChecksum, Crc32cKnownAnswers) {
  const char* s = "123456789";
  EXPECT_EQ(crc32c(reinterpret_cast<const std::byte*>(s), 9), 0xe3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  std::vector<std::byte> zeros(32);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8a9136aau);  // RFC 3720 B.4
  // Every length up to 2 KiB and a few large ones, at odd offsets, against the protocol's table walk:
  // the folded streams have head, tail and block-size paths of their own.
  std::vector<std::byte> buf((1u << 20) + 64);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  const auto portable = [&](std::size_t off, std::size_t len) {
    return protocol::crc32c_portable({reinterpret_cast<const std::uint8_t*>(buf.data()) + off, len});
  };
  for (std::size_t len = 0; len <= 2048; ++len) {
    ASSERT_EQ(crc32c(buf.data() + len % 7, len), portable(len % 7, len)) << "length " << len;
  }
  for (const std::size_t len : {std::size_t{4096}, std::size_t{65537}, std::size_t{1} << 20}) {
    EXPECT_EQ(crc32c(buf.data() + 3, len), portable(3, len)) << "length " << len;
  }
}

}  // namespace
}  // namespace rdmagate::storage::rados

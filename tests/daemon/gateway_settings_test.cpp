// The daemon's plan (daemon/gateway_settings.*): what each configuration key turns into for EAL, the store,
// the engine and its cores, the listeners and telemetry. Configs go through the real loader (YAML plus
// --set), so every key here is one an operator can write. No device, no EAL: nothing here calls verbs or
// DPDK.
#include "daemon/gateway_settings.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "conf/conf.hpp"

namespace {

using namespace rdmagate;
using namespace std::chrono_literals;
using control::GatewaySettings;

constexpr std::uint64_t kMiB = 1024 * 1024;

// An empty file plus overrides on a 128-CPU host, so any valid cpu list loads.
conf::Config load(std::vector<std::string> overrides = {}) {
  conf::LoadOptions opts;
  opts.overrides = std::move(overrides);
  for (std::uint32_t c = 0; c < conf::kMaxLcores; ++c) opts.host.online_cpus.insert(c);
  conf::Result<conf::LoadedConfig> r = conf::loadConfigText("", "test.yaml", opts);
  if (!r) {
    ADD_FAILURE() << conf::formatErrors(r.errors());
    return {};
  }
  return r->config;
}

GatewaySettings plan(const conf::Config& cfg) {
  std::string error;
  std::optional<GatewaySettings> s = control::plan_gateway(cfg, &error);
  if (!s) {
    ADD_FAILURE() << "plan_gateway: " << error;
    return {};
  }
  return *s;
}

GatewaySettings plan(std::vector<std::string> overrides = {}) {
  return plan(load(std::move(overrides)));
}

// What one core's buffers take: receive plus transmit descriptors per connection, one message each.
std::uint64_t core_pool_bytes(std::uint64_t conns, std::uint64_t rx, std::uint64_t tx, std::uint64_t msg) {
  return conns * (rx + tx) * msg;
}

TEST(GatewaySettings, DefaultsEal) {
  const GatewaySettings s = plan();
  EXPECT_EQ(s.eal.program_name, "rdmagate");
  EXPECT_EQ(s.eal.lcores, "0-1");  // main lcore 0 plus the one data-plane core
  EXPECT_EQ(s.eal.main_lcore, 0);
  EXPECT_EQ(s.eal.file_prefix, "");  // eal.in_memory: --in-memory, no prefix
  EXPECT_EQ(s.eal.huge_dir, "");
  EXPECT_EQ(s.eal.hugepages, dataplane::HugepagePolicy::kAuto);
  EXPECT_TRUE(s.eal.extra_args.empty());
  EXPECT_TRUE(s.eal_memory_derived);
}

TEST(GatewaySettings, DefaultsStore) {
  const GatewaySettings s = plan();
  EXPECT_EQ(s.store.capacity_bytes, 256 * kMiB);
  EXPECT_EQ(s.store.max_value, 4 * kMiB);
  EXPECT_EQ(s.store.max_objects, 65536u);  // one per 4 KiB of capacity
  EXPECT_EQ(s.store.max_cores, 64u);
  // The region holds the capacity and the metadata in front of it, in whole pages.
  EXPECT_EQ(s.store_region_bytes % 4096, 0u);
  EXPECT_GE(s.store_region_bytes,
            s.store.capacity_bytes + store::Store::metadata_bytes(s.store, s.store.capacity_bytes));
  EXPECT_LE(s.store_region_bytes,
            s.store.capacity_bytes + store::Store::metadata_bytes(s.store, s.store_region_bytes) + 2 * 4096);
}

TEST(GatewaySettings, DefaultsEngineAndCore) {
  const GatewaySettings s = plan();
  const control::EngineConfig& e = s.engine;
  EXPECT_EQ(e.name, "gateway");
  EXPECT_EQ(e.device, "");  // device.name auto: the only device
  EXPECT_TRUE(e.passive);
  EXPECT_FALSE(e.core_region_remote());  // no peer may reach a gateway core's buffers
  EXPECT_EQ(e.local.params, (protocol::ConnParams{128, 4096, 16, 8 * kMiB}));  // bulk: 2 x max_value_bytes
  EXPECT_EQ(e.local.min_queue_depth, protocol::kMinCreditQueueDepth);
  EXPECT_FALSE(e.local.want_checksum);
  EXPECT_EQ(e.signal_interval, 16);
  EXPECT_EQ(e.send_inline_bytes, 236u);
  EXPECT_EQ(e.handshake_timeout, 10s);
  EXPECT_EQ(e.backoff.min, 100ms);
  EXPECT_EQ(e.backoff.max, 5s);
  EXPECT_FALSE(e.admit);  // the wiring's: admission reads the Gateway's allow list
  EXPECT_FALSE(e.log_sink);

  ASSERT_EQ(e.cores.size(), 1u);
  const dataplane::CoreConfig& c = e.cores[0];
  EXPECT_EQ(c.lcore, 1u);
  EXPECT_EQ(c.max_conns, 64u);
  EXPECT_EQ(c.rx_per_conn, 128u);
  EXPECT_EQ(c.tx_per_conn, 384u);  // three per credit
  EXPECT_EQ(c.buf_size, 4096u);
  EXPECT_EQ(c.poll_burst, 32u);
  EXPECT_EQ(c.idle, dataplane::IdlePolicy::kBusy);
  EXPECT_EQ(c.idle_yield_after, 256u);
  EXPECT_EQ(c.bulk_bytes_per_conn, 0u);  // chunks go between the peer and the store arena directly
  EXPECT_EQ(c.keepalive_us, 1'000'000u);
  EXPECT_EQ(c.dead_peer_us, 10'000'000u);
}

TEST(GatewaySettings, DefaultsListenersAndTelemetry) {
  const GatewaySettings s = plan();
  ASSERT_EQ(s.listeners.size(), 1u);
  EXPECT_EQ(s.listeners[0].address, "0.0.0.0");
  EXPECT_EQ(s.listeners[0].port, 7471);
  EXPECT_EQ(s.listeners[0].backlog, 128);
  ASSERT_TRUE(s.http.has_value());
  EXPECT_EQ(s.http->bind_address, "127.0.0.1");
  EXPECT_EQ(s.http->port, 9464);
  EXPECT_FALSE(s.http->cpus.has_value());  // the wiring's: EAL's main lcore, known once EAL runs
  EXPECT_EQ(s.http->threads, 4u);
  EXPECT_EQ(s.http->request_timeout, 1000ms);
  EXPECT_FALSE(s.http->probe_port.has_value());
  EXPECT_EQ(s.core_stall, 1000ms);
}

TEST(GatewaySettings, DerivedEalMemoryIsTheStoreRegionPlusEveryCorePoolWithHeadroom) {
  const GatewaySettings s = plan();
  // 64 connections x (64 rx + 192 tx) x 4096 B, plus 4 MiB of rings and tables per core, plus 64 MiB.
  const std::uint64_t bytes = s.store_region_bytes + core_pool_bytes(64, 128, 384, 4096) + 4 * kMiB;
  EXPECT_EQ(s.eal.memory_mb, (bytes + kMiB - 1) / kMiB + 64);
  EXPECT_EQ(s.eal.memory_mb, control::derived_eal_memory_mib(load()));

  // Each further core adds exactly one pool and its rings.
  const GatewaySettings three = plan({"dataplane.cores=[1,2,3]"});
  EXPECT_EQ(three.store_region_bytes, s.store_region_bytes);
  EXPECT_EQ(three.eal.memory_mb,
            s.eal.memory_mb + 2 * (core_pool_bytes(64, 128, 384, 4096) + 4 * kMiB) / kMiB);
}

TEST(GatewaySettings, ExplicitEalMemoryIsUsedAsIs) {
  const GatewaySettings s = plan({"eal.memory_mib=2048"});
  EXPECT_EQ(s.eal.memory_mb, 2048u);
  EXPECT_FALSE(s.eal_memory_derived);
}

TEST(GatewaySettings, EalKeys) {
  const GatewaySettings s =
      plan({"eal.main_lcore=4", "dataplane.cores=[5,7]", "eal.hugepages=required",
            "eal.hugepage_dir=/mnt/huge1G", "eal.in_memory=false", "eal.file_prefix=gw1"});
  EXPECT_EQ(s.eal.lcores, "4-5,7");
  EXPECT_EQ(s.eal.main_lcore, 4);
  EXPECT_EQ(s.eal.hugepages, dataplane::HugepagePolicy::kRequire);
  EXPECT_EQ(s.eal.huge_dir, "/mnt/huge1G");
  EXPECT_EQ(s.eal.file_prefix, "gw1");  // only without --in-memory

  // DPDK refuses --in-memory with --no-huge, so the loader wants in_memory off; the default prefix then
  // shows.
  const GatewaySettings nohuge = plan({"eal.hugepages=disabled", "eal.in_memory=false"});
  EXPECT_EQ(nohuge.eal.hugepages, dataplane::HugepagePolicy::kNever);
  EXPECT_EQ(nohuge.eal.file_prefix, "rdmagate");
  EXPECT_EQ(plan({"eal.in_memory=true", "eal.file_prefix=gw1"}).eal.file_prefix, "");
}

TEST(GatewaySettings, OneCoreConfigPerDataplaneCore) {
  const GatewaySettings s = plan({"dataplane.cores=2-3,6", "dataplane.max_connections_per_core=200"});
  ASSERT_EQ(s.engine.cores.size(), 3u);
  EXPECT_EQ(s.engine.cores[0].lcore, 2u);
  EXPECT_EQ(s.engine.cores[1].lcore, 3u);
  EXPECT_EQ(s.engine.cores[2].lcore, 6u);
  for (const dataplane::CoreConfig& c : s.engine.cores) EXPECT_EQ(c.max_conns, 200u);
  EXPECT_EQ(s.eal.lcores, "0,2-3,6");
  EXPECT_EQ(s.store.max_cores, 64u);  // the store's table never shrinks below 64 cores
}

TEST(GatewaySettings, StoreCoreTableGrowsPast64Cores) {
  const GatewaySettings s = plan({"dataplane.cores=1-80"});
  EXPECT_EQ(s.engine.cores.size(), 80u);
  EXPECT_EQ(s.store.max_cores, 81u);  // one row per core and one for the RADOS worker
}

TEST(GatewaySettings, RadosBackendMakesTheStoreAnEvictingCacheAndMapsEveryKey) {
  const GatewaySettings m = plan();
  EXPECT_FALSE(m.store.evict);
  EXPECT_FALSE(m.rados.has_value());
  const GatewaySettings s =
      plan({"store.backend=rados", "dataplane.cores=2-3", "store.rados.pool=objs", "store.rados.namespace=t1",
            "store.rados.client=client.gw", "store.rados.keyring=/k", "store.rados.conf_file=/c.conf",
            "store.rados.op_timeout_ms=1500", "store.rados.notify_timeout_ms=1700",
            "store.rados.cache_lease_ms=3000"});
  EXPECT_TRUE(s.store.evict);
  ASSERT_TRUE(s.rados.has_value());
  EXPECT_EQ(s.rados->pool, "objs");
  EXPECT_EQ(s.rados->ns, "t1");
  EXPECT_EQ(s.rados->client, "client.gw");
  EXPECT_EQ(s.rados->keyring, "/k");
  EXPECT_EQ(s.rados->conf_file, "/c.conf");
  EXPECT_EQ(s.rados->op_timeout_ms, 1500u);
  EXPECT_EQ(s.rados->notify_timeout_ms, 1700u);
  EXPECT_EQ(s.rados->cache_lease_ms, 3000u);
  EXPECT_EQ(s.rados->cores, 2u);
  EXPECT_EQ(s.rados->cache_core, 2u);  // the row after the cores'
  EXPECT_LT(s.rados->cache_core, s.store.max_cores);
  EXPECT_EQ(s.rados->max_value, s.store.max_value);
}

TEST(GatewaySettings, QueueDepthSizesReceiveAndTransmitAndTheHandshake) {
  const GatewaySettings s = plan({"dataplane.queue_depth=256"});
  const dataplane::CoreConfig& c = s.engine.cores.at(0);
  EXPECT_EQ(c.rx_per_conn, 256u);
  EXPECT_EQ(c.tx_per_conn, 768u);
  EXPECT_EQ(s.engine.local.params.queue_depth, 256);
  EXPECT_EQ(plan({"dataplane.queue_depth=16384"}).engine.cores.at(0).tx_per_conn, 3u * 16384);
}

TEST(GatewaySettings, MessageSizeIsTheBufferSizeAndTheHandshakeMaximum) {
  const GatewaySettings base = plan();
  const GatewaySettings s = plan({"dataplane.inline_threshold_bytes=8192", "dataplane.max_fragments=8"});
  EXPECT_EQ(s.engine.cores.at(0).buf_size, 8192u);
  EXPECT_EQ(s.engine.local.params.max_message_size, 8192u);
  EXPECT_EQ(s.engine.local.params.max_fragments, 8);
  // Doubling the message size doubles the one core's pool in the derived EAL memory.
  EXPECT_EQ(s.eal.memory_mb, base.eal.memory_mb + core_pool_bytes(64, 128, 384, 4096) / kMiB);
}

TEST(GatewaySettings, SendInlineBytesPassThrough) {
  EXPECT_EQ(plan({"dataplane.send_inline_bytes=0"}).engine.send_inline_bytes, 0u);
  EXPECT_EQ(plan({"dataplane.send_inline_bytes=512"}).engine.send_inline_bytes, 512u);
}

TEST(GatewaySettings, LoopKeys) {
  const GatewaySettings s =
      plan({"dataplane.poll_burst=8", "dataplane.signal_interval=32", "dataplane.control_check_interval=64"});
  EXPECT_EQ(s.engine.cores.at(0).poll_burst, 8u);
  EXPECT_EQ(s.engine.signal_interval, 32);
  EXPECT_EQ(s.engine.cores.at(0).check_every, 64u);
  EXPECT_EQ(plan().engine.cores.at(0).check_every, 16u);
}

TEST(GatewaySettings, Backend) {
  EXPECT_EQ(plan().engine.backend, "auto");
  EXPECT_EQ(plan({"dataplane.backend=verbs"}).engine.backend, "verbs");
  // Passed through by name: whether the device is an mlx5 NIC is the engine's check, at start.
  EXPECT_EQ(plan({"dataplane.backend=mlx5dv"}).engine.backend, "mlx5dv");
}

TEST(GatewaySettings, IdlePolicy) {
  const GatewaySettings y = plan({"dataplane.idle_policy=yield", "dataplane.idle_yield_after=64"});
  EXPECT_EQ(y.engine.cores.at(0).idle, dataplane::IdlePolicy::kYield);
  EXPECT_EQ(y.engine.cores.at(0).idle_yield_after, 64u);
  EXPECT_EQ(plan({"dataplane.idle_policy=pause"}).engine.cores.at(0).idle, dataplane::IdlePolicy::kPause);
  EXPECT_EQ(plan({"dataplane.idle_policy=backoff"}).engine.cores.at(0).idle, dataplane::IdlePolicy::kBackoff);
  const GatewaySettings e =
      plan({"dataplane.cores=[1,2]", "dataplane.idle_policy=event", "dataplane.idle_event_after_us=250",
            "dataplane.idle_backoff_max_pauses=8"});
  for (const dataplane::CoreConfig& c : e.engine.cores) {
    EXPECT_EQ(c.idle, dataplane::IdlePolicy::kEvent);
    EXPECT_EQ(c.idle_event_after_us, 250u);
    EXPECT_EQ(c.idle_backoff_max_pauses, 8u);
  }
}

TEST(GatewaySettings, SharedReceiveQueue) {
  // The shipped default asks for the SRQ where the device has one; the engine decides at setup.
  EXPECT_EQ(plan().engine.cores.at(0).srq, dataplane::SrqMode::kAuto);
  EXPECT_EQ(plan().engine.cores.at(0).srq_receives, 0u);
  EXPECT_EQ(plan({"dataplane.srq=required"}).engine.cores.at(0).srq, dataplane::SrqMode::kOn);
  EXPECT_EQ(plan({"dataplane.srq=disabled"}).engine.cores.at(0).srq, dataplane::SrqMode::kOff);
  const GatewaySettings s = plan({"dataplane.cores=[1,2]", "dataplane.srq_receives=4096"});
  for (const dataplane::CoreConfig& c : s.engine.cores) EXPECT_EQ(c.srq_receives, 4096u);
}

TEST(GatewaySettings, KeepaliveAndDeadPeerOnEveryCore) {
  const GatewaySettings s =
      plan({"dataplane.cores=[1,2]", "protocol.keepalive_ms=250", "protocol.dead_peer_timeout_ms=3000"});
  ASSERT_EQ(s.engine.cores.size(), 2u);
  for (const dataplane::CoreConfig& c : s.engine.cores) {
    EXPECT_EQ(c.keepalive_us, 250'000u);
    EXPECT_EQ(c.dead_peer_us, 3'000'000u);
  }
}

TEST(GatewaySettings, TimeoutsAreWhatStartAndReloadBothApply) {
  const conf::Config cfg = load({"protocol.keepalive_ms=250", "protocol.dead_peer_timeout_ms=3000",
                                 "protocol.handshake_timeout_ms=2500", "protocol.reconnect_min_ms=50",
                                 "protocol.reconnect_max_ms=2000", "protocol.bulk_timeout_ms=750"});
  const control::TimeoutSettings t = control::plan_timeouts(cfg.protocol);
  EXPECT_EQ(t.handshake_timeout, 2500ms);
  EXPECT_EQ(t.backoff.min, 50ms);
  EXPECT_EQ(t.backoff.max, 2000ms);
  EXPECT_EQ(t.keepalive_us, 250'000u);
  EXPECT_EQ(t.dead_peer_us, 3'000'000u);
  EXPECT_EQ(t.bulk_timeout_us, 750'000u);

  const GatewaySettings s = plan(cfg);
  EXPECT_EQ(s.engine.handshake_timeout, t.handshake_timeout);
  EXPECT_EQ(s.engine.backoff.min, t.backoff.min);
  EXPECT_EQ(s.engine.backoff.max, t.backoff.max);
  EXPECT_EQ(s.engine.cores.at(0).keepalive_us, t.keepalive_us);
  EXPECT_EQ(s.engine.cores.at(0).dead_peer_us, t.dead_peer_us);
  EXPECT_EQ(s.engine.cores.at(0).bulk_timeout_us, t.bulk_timeout_us);
}

TEST(GatewaySettings, AdmissionIsWhatStartAndReloadBothApply) {
  const control::AdmissionSettings d = control::plan_admission(load({}).security);
  EXPECT_EQ(d.per_source, 64u);
  EXPECT_EQ(d.rate, 100.0);
  EXPECT_EQ(d.burst, 200u);
  const control::AdmissionSettings a = control::plan_admission(
      load({"security.connections_per_source=3", "security.connect_rate=7", "security.connect_burst=9"})
          .security);
  EXPECT_EQ(a.per_source, 3u);
  EXPECT_EQ(a.rate, 7.0);
  EXPECT_EQ(a.burst, 9u);

  const GatewaySettings s = plan({"security.connections_per_source=3", "security.connect_rate=7"});
  EXPECT_EQ(s.engine.max_conns_per_source, 3u);
  EXPECT_EQ(s.engine.connect_rate, 7.0);
  EXPECT_EQ(s.engine.connect_burst, 200u);
}

TEST(GatewaySettings, TheAcceptAnnouncesTimersAndLimits) {
  const GatewaySettings s =
      plan({"protocol.keepalive_ms=250", "protocol.dead_peer_timeout_ms=3000", "protocol.bulk_timeout_ms=750",
            "store.max_value_bytes=65536", "security.connections_per_source=5"});
  EXPECT_EQ(s.engine.local.timers.keepalive_ms, 250u);
  EXPECT_EQ(s.engine.local.timers.dead_peer_ms, 3000u);
  EXPECT_EQ(s.engine.local.limits.bulk_deadline_ms, 750u);
  EXPECT_EQ(s.engine.local.limits.max_value_bytes, 65536u);
  EXPECT_EQ(s.engine.local.limits.chunk_queue, dataplane::kChunkQueue);
  EXPECT_EQ(s.engine.local.limits.max_conns_per_source, 5u);
  EXPECT_TRUE(protocol::timers_sane(s.engine.local.timers));
}

TEST(GatewaySettings, FaultRulesAreParsedAndABadOneRefusesTheStart) {
  EXPECT_EQ(plan().faults.count, 0u);
  conf::Config cfg = load();
  cfg.faults.rules = {{"drop dir=rx type=request every=10"}, {"stall ms=5"}};
  std::string err;
  const std::optional<GatewaySettings> s = control::plan_gateway(cfg, &err);
  ASSERT_TRUE(s.has_value()) << err;
  ASSERT_EQ(s->faults.count, 2u);
  EXPECT_EQ(s->faults.rules[0].action, dataplane::FaultAction::kDrop);
  EXPECT_EQ(s->faults.rules[1].action, dataplane::FaultAction::kStall);

  cfg.faults.rules.push_back({"drop dir=up"});
  EXPECT_FALSE(control::plan_gateway(cfg, &err).has_value());
  EXPECT_THAT(err, ::testing::HasSubstr("faults.rules[2]"));
  EXPECT_FALSE(control::plan_faults(cfg.faults, &err).has_value());
}

TEST(GatewaySettings, AuthTimeoutIsWhatStartAndReloadBothApply) {
  EXPECT_EQ(control::plan_auth_timeout_us(load().security), 5'000'000u);
  const GatewaySettings s = plan({"dataplane.cores=[1, 2]", "security.auth_timeout_ms=250"});
  ASSERT_EQ(s.engine.cores.size(), 2u);
  for (const dataplane::CoreConfig& c : s.engine.cores) EXPECT_EQ(c.auth_timeout_us, 250'000u);
  EXPECT_EQ(control::plan_auth_timeout_us(load({"security.auth_timeout_ms=250"}).security), 250'000u);
}

// A secrets file in a directory of its own, removed afterwards.
class AuthTableFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rdmagate-auth-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/secrets.yaml";
  }
  void TearDown() override {
    std::remove(path_.c_str());
    rmdir(dir_.c_str());
  }
  void write_secrets(std::string_view text, mode_t mode) {
    std::ofstream(path_) << text;
    ASSERT_EQ(chmod(path_.c_str(), mode), 0);
  }
  conf::SecurityConfig security(std::vector<std::string> extra = {}) {
    std::vector<std::string> o = {"security.authentication=required", "security.secrets_file=" + path_,
                                  "security.tenants=[{name: app, max_objects: 10}]",
                                  "security.principals=[{name: w, tenant: app, permissions: [read, write]}]"};
    o.insert(o.end(), extra.begin(), extra.end());
    return load(o).security;
  }
  static constexpr std::string_view kSecret = "hex:00112233445566778899aabbccddeeff";
  std::string dir_, path_;
};

TEST_F(AuthTableFile, RequiredReadsTheSecretsIntoTheTable) {
  write_secrets("secrets:\n  w: \"" + std::string(kSecret) + "\"\n", 0600);
  dataplane::AuthRegistry reg;
  std::string err;
  const std::unique_ptr<dataplane::AuthTable> t = control::load_auth_table(security(), reg, &err);
  ASSERT_NE(t, nullptr) << err;
  EXPECT_TRUE(t->required);
  const dataplane::PrincipalEntry* w = t->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->secret, (std::vector<std::uint8_t>{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99,
                                                  0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}));
  EXPECT_EQ(w->perms, dataplane::kPermRead | dataplane::kPermWrite);
  EXPECT_EQ(w->tenant->max_objects, 10u);
}

TEST_F(AuthTableFile, AWideModeOrAMissingSecretRefusesTheTableAndKeepsTheRegistry) {
  write_secrets("secrets:\n  w: \"" + std::string(kSecret) + "\"\n", 0600);
  dataplane::AuthRegistry reg;
  std::string err;
  ASSERT_NE(control::load_auth_table(security(), reg, &err), nullptr) << err;
  const std::uint16_t app = reg.tenant_id("app");
  ASSERT_NE(app, 0);

  ASSERT_EQ(chmod(path_.c_str(), 0640), 0);
  EXPECT_EQ(
      control::load_auth_table(security({"security.tenants=[{name: app}, {name: new}]",
                                         "security.principals=[{name: w, tenant: new, permissions: []}]"}),
                               reg, &err),
      nullptr);
  EXPECT_EQ(err, "security.secrets_file: " + path_ +
                     " has mode 0640, which grants the group or others access to "
                     "the secrets; run chmod 600 " +
                     path_);
  EXPECT_EQ(reg.tenant_id("new"), 0);  // a refused reload assigns nothing

  write_secrets("secrets:\n  other: \"" + std::string(kSecret) + "\"\n", 0600);
  EXPECT_EQ(control::load_auth_table(security(), reg, &err), nullptr);
  EXPECT_EQ(err, "security.secrets_file: no secret for principal \"w\" (security.principals[0])");
  EXPECT_EQ(reg.tenant_id("app"), app);
}

TEST_F(AuthTableFile, OffReadsNothing) {
  // no file at path_: with authentication off it is never opened
  dataplane::AuthRegistry reg;
  std::string err;
  const std::unique_ptr<dataplane::AuthTable> t =
      control::load_auth_table(security({"security.authentication=off"}), reg, &err);
  ASSERT_NE(t, nullptr) << err;
  EXPECT_FALSE(t->required);
  EXPECT_TRUE(t->principals.empty());
  EXPECT_EQ(control::load_auth_table(security(), reg, &err), nullptr);
  EXPECT_EQ(err, "security.secrets_file: cannot open " + path_ + ": No such file or directory");
  // required without principals or a secrets file: a table that denies every AUTH
  const std::unique_ptr<dataplane::AuthTable> none =
      control::load_auth_table(load({"security.authentication=required"}).security, reg, &err);
  ASSERT_NE(none, nullptr) << err;
  EXPECT_TRUE(none->required);
  EXPECT_EQ(none->find("w"), nullptr);
}

TEST(GatewaySettings, ChecksumAndDevice) {
  const GatewaySettings s = plan({"protocol.checksum=true", "device.name=rxe0"});
  EXPECT_TRUE(s.engine.local.want_checksum);
  EXPECT_EQ(s.engine.device, "rxe0");
}

TEST(GatewaySettings, StoreCapacityAndValueSize) {
  const GatewaySettings big = plan({"store.capacity_mib=1024", "store.max_value_bytes=1048576"});
  EXPECT_EQ(big.store.capacity_bytes, 1024 * kMiB);
  EXPECT_EQ(big.store.max_objects, 262144u);
  EXPECT_EQ(big.store.max_value, kMiB);
  EXPECT_EQ(big.engine.local.params.max_bulk_size, 2 * kMiB);  // a chunk may carry up to two values
  EXPECT_GE(big.store_region_bytes, 1024 * kMiB);
  EXPECT_GT(big.eal.memory_mb, 1024u);

  // The index keeps at least 4096 objects, however small the store.
  const GatewaySettings small = plan({"store.capacity_mib=8", "store.max_value_bytes=65536"});
  EXPECT_EQ(small.store.capacity_bytes, 8 * kMiB);
  EXPECT_EQ(small.store.max_objects, 4096u);
}

TEST(GatewaySettings, StoreIndexStopsAt4MiObjects) {
  EXPECT_EQ(plan({"store.capacity_mib=32768"}).store.max_objects, 1u << 22);
}

TEST(GatewaySettings, OneListenerPerAddress) {
  const GatewaySettings s =
      plan({"listen.addresses=[\"10.0.0.1\", \"fd00::1\"]", "listen.port=7000", "listen.backlog=16"});
  ASSERT_EQ(s.listeners.size(), 2u);
  EXPECT_EQ(s.listeners[0].address, "10.0.0.1");
  EXPECT_EQ(s.listeners[1].address, "fd00::1");
  for (const control::ListenerSettings& l : s.listeners) {
    EXPECT_EQ(l.port, 7000);
    EXPECT_EQ(l.backlog, 16);
  }
}

TEST(GatewaySettings, Telemetry) {
  const GatewaySettings s =
      plan({"telemetry.bind_address=0.0.0.0", "telemetry.port=0", "telemetry.core_stall_ms=250"});
  ASSERT_TRUE(s.http.has_value());
  EXPECT_EQ(s.http->bind_address, "0.0.0.0");
  EXPECT_EQ(s.http->port, 0);  // any free port
  EXPECT_EQ(s.core_stall, 250ms);

  const GatewaySettings bounded =
      plan({"telemetry.threads=8", "telemetry.request_timeout_ms=1500", "telemetry.probe_port=9465"});
  EXPECT_EQ(bounded.http->threads, 8u);
  EXPECT_EQ(bounded.http->request_timeout, 1500ms);
  ASSERT_TRUE(bounded.http->probe_port.has_value());
  EXPECT_EQ(*bounded.http->probe_port, 9465);

  const GatewaySettings off = plan({"telemetry.enabled=false", "telemetry.core_stall_ms=250"});
  EXPECT_FALSE(off.http.has_value());
  EXPECT_EQ(off.core_stall, 250ms);  // health is still tracked without the HTTP server
}

TEST(GatewaySettings, RefusesMoreConnectionsPerCoreThanTheEngineHolds) {
  // The loader refuses this too; the plan must not rely on every caller having validated.
  conf::Config cfg = load();
  cfg.dataplane.max_connections_per_core = dataplane::kMaxConnsPerCore + 1;
  std::string error;
  EXPECT_FALSE(control::plan_gateway(cfg, &error).has_value());
  EXPECT_EQ(error, "dataplane.max_connections_per_core: 513 is above the engine's limit of 512 per core");

  cfg.dataplane.max_connections_per_core = dataplane::kMaxConnsPerCore;
  error.clear();
  const std::optional<GatewaySettings> at_limit = control::plan_gateway(cfg, &error);
  ASSERT_TRUE(at_limit.has_value()) << error;
  EXPECT_EQ(at_limit->engine.cores.at(0).max_conns, dataplane::kMaxConnsPerCore);
}

}  // namespace

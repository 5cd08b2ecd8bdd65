#include <gtest/gtest.h>

#include <set>
#include <string>

#include "exposition_util.hpp"
#include "telemetry/collector.hpp"
#include "telemetry/metrics.hpp"
#include "telemetry/text_format.hpp"

namespace rdmagate::telemetry {
namespace {

using protocol::ObjectOp;
using test::find_sample;
using test::parse_exposition;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

TEST(MetricTable, RowsFollowStatOrder) {
  const auto table = metric_table();
  ASSERT_EQ(table.size(), kStatCount);
  for (std::size_t i = 0; i < table.size(); ++i) EXPECT_EQ(static_cast<std::size_t>(table[i].stat), i);
}

TEST(MetricTable, FamiliesAreContiguousAndConsistent) {
  const auto table = metric_table();
  std::set<std::string_view> closed;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto& d = table[i];
    if (i > 0 && table[i - 1].name == d.name) {
      EXPECT_EQ(table[i - 1].kind, d.kind) << d.name;
      EXPECT_EQ(table[i - 1].unit, d.unit) << d.name;
      EXPECT_EQ(table[i - 1].scope, d.scope) << d.name;
      EXPECT_EQ(table[i - 1].help, d.help) << d.name;
      EXPECT_EQ(table[i - 1].labels[0].name, d.labels[0].name) << d.name;
      EXPECT_EQ(table[i - 1].labels[1].name, d.labels[1].name) << d.name;
      EXPECT_FALSE(table[i - 1].labels[0].value == d.labels[0].value &&
                   table[i - 1].labels[1].value == d.labels[1].value)
          << "duplicate series in " << d.name;
      continue;
    }
    EXPECT_TRUE(closed.insert(d.name).second) << d.name << " is split in the table";
  }
}

TEST(MetricTable, NamingConventions) {
  for (const auto& d : metric_table()) {
    SCOPED_TRACE(std::string(d.name));
    EXPECT_EQ(d.name.substr(0, 9), "rdmagate_");
    EXPECT_FALSE(d.help.empty());
    for (const char ch : d.name) EXPECT_TRUE((ch >= 'a' && ch <= 'z') || ch == '_' || (ch >= '0' && ch <= '9'));
    if (d.kind == MetricKind::kCounter) {
      EXPECT_TRUE(ends_with(d.name, "_total"));
    } else {
      EXPECT_FALSE(ends_with(d.name, "_total"));
    }
    const std::string_view base = ends_with(d.name, "_total") ? d.name.substr(0, d.name.size() - 6) : d.name;
    switch (d.unit) {
      case Unit::kBytes:
        EXPECT_TRUE(ends_with(base, "_bytes"));
        break;
      case Unit::kTscSeconds:
      case Unit::kMicroSeconds:
        EXPECT_TRUE(ends_with(base, "_seconds"));
        break;
      case Unit::kNone:
        EXPECT_FALSE(ends_with(base, "_bytes") || ends_with(base, "_seconds"));
        break;
    }
    // Non-base units and per-connection labels are banned.
    for (const auto* bad : {"_ms", "_us", "_ns", "_millis", "_kb", "_mb", "_cycles", "_tsc"})
      EXPECT_EQ(d.name.find(bad), std::string_view::npos) << bad;
    for (const auto& l : d.labels) {
      EXPECT_NE(l.name, kCoreLabel);
      for (const auto* bad : {"qp", "qpn", "peer", "address", "conn", "connection"}) EXPECT_NE(l.name, bad);
      if (!l.name.empty()) {
        EXPECT_FALSE(l.value.empty());
      }
    }
  }
  for (const auto& h : histogram_table()) {
    EXPECT_EQ(h.name.substr(0, 9), "rdmagate_");
    EXPECT_TRUE(ends_with(h.name, "_seconds"));
  }
}

TEST(Exposition, SmallRegistryParses) {
  auto c = std::make_shared<StatsCollector>("1.2.3", 1'000'000'000);
  CoreStats a, b;
  ASSERT_TRUE(c->register_core(0, a));
  ASSERT_TRUE(c->register_core(5, b));
  a.add(Stat::kPolls, 10);
  b.add(Stat::kPolls, 20);
  a.add(message_stat(0, Direction::kTx), 2);
  b.add(message_stat(0, Direction::kTx), 3);
  b.add(Stat::kStoreBytes, 4096);
  a.add(connection_stat(1), 2);
  a.observe_request_ns(ObjectOp::kPut, 2000);
  a.observe_request_ns(ObjectOp::kPut, 100'000'000);

  const auto e = parse_exposition(serialize_text(c->Collect()));

  const auto* info =
      find_sample(e, "rdmagate_build_info",
                  {{"version", "1.2.3"}, {"commit", std::string(StatsCollector::build_commit())}});
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->value, 1);
  EXPECT_EQ(e.types.at("rdmagate_build_info"), "gauge");
  // Until the daemon says which backend its cores run there is no series rather than a made-up one.
  EXPECT_EQ(e.types.count("rdmagate_dataplane_backend_info"), 0u);

  EXPECT_EQ(e.types.at("rdmagate_poller_polls_total"), "counter");
  ASSERT_NE(find_sample(e, "rdmagate_poller_polls_total", {{"core", "0"}}), nullptr);
  EXPECT_EQ(find_sample(e, "rdmagate_poller_polls_total", {{"core", "0"}})->value, 10);
  EXPECT_EQ(find_sample(e, "rdmagate_poller_polls_total", {{"core", "5"}})->value, 20);
  const auto* noop_tx = find_sample(e, "rdmagate_transport_messages_total", {{"type", "noop"}, {"direction", "tx"}});
  ASSERT_NE(noop_tx, nullptr);
  EXPECT_EQ(noop_tx->value, 5);
  EXPECT_EQ(find_sample(e, "rdmagate_store_bytes", {})->value, 4096);
  EXPECT_EQ(e.types.at("rdmagate_store_bytes"), "gauge");
  EXPECT_EQ(find_sample(e, "rdmagate_connections", {{"core", "0"}, {"state", "established"}})->value, 2);

  EXPECT_EQ(e.types.at("rdmagate_request_duration_seconds"), "histogram");
  double prev = -1;
  unsigned buckets = 0;
  std::string last_le;
  for (const auto& s : e.samples) {
    if (s.name != "rdmagate_request_duration_seconds_bucket" || s.labels.at("op") != "put") continue;
    EXPECT_GE(s.value, prev);
    prev = s.value;
    last_le = s.labels.at("le");
    ++buckets;
  }
  EXPECT_EQ(buckets, LatencyHistogram::kBuckets);
  EXPECT_EQ(last_le, "+Inf");
  EXPECT_EQ(prev, 2);
  EXPECT_EQ(find_sample(e, "rdmagate_request_duration_seconds_count", {{"op", "put"}})->value, 2);
  EXPECT_NEAR(find_sample(e, "rdmagate_request_duration_seconds_sum", {{"op", "put"}})->value, 0.100002, 1e-9);
  // 2 us falls in le=2.048e-06; 100 ms in le=0.134217728.
  EXPECT_EQ(find_sample(e, "rdmagate_request_duration_seconds_bucket", {{"op", "put"}, {"le", "1.024e-06"}})->value,
            0);
  EXPECT_EQ(find_sample(e, "rdmagate_request_duration_seconds_bucket", {{"op", "put"}, {"le", "2.048e-06"}})->value,
            1);
  EXPECT_EQ(
      find_sample(e, "rdmagate_request_duration_seconds_bucket", {{"op", "put"}, {"le", "0.134217728"}})->value, 2);

  // Every family in the table is present, every sample name starts with rdmagate_, and counters end in _total.
  for (const auto& d : metric_table()) EXPECT_TRUE(e.types.count(std::string(d.name))) << d.name;
  for (const auto& s : e.samples) {
    EXPECT_EQ(s.name.rfind("rdmagate_", 0), 0u) << s.name;
    for (const auto& [k, v] : s.labels) {
      EXPECT_FALSE(k == "qp" || k == "peer") << s.name;
    }
  }
  for (const auto& [name, type] : e.types)
    if (type == "counter") {
      EXPECT_TRUE(ends_with(name, "_total")) << name;
    }
}

TEST(Exposition, BackendInfo) {
  StatsCollector c("1.2.3", 1'000'000'000);
  c.set_backend("verbs", "auto");
  const std::string text = serialize_text(c.Collect());
  const auto e = parse_exposition(text);
  const auto* info =
      find_sample(e, "rdmagate_dataplane_backend_info", {{"backend", "verbs"}, {"configured", "auto"}});
  ASSERT_NE(info, nullptr) << text;
  EXPECT_EQ(info->value, 1);
  EXPECT_EQ(e.types.at("rdmagate_dataplane_backend_info"), "gauge");
  // Beside the build's series, which keeps its own labels (dashboards group by them).
  EXPECT_NE(find_sample(e, "rdmagate_build_info",
                        {{"version", "1.2.3"}, {"commit", std::string(StatsCollector::build_commit())}}),
            nullptr);
}

}  // namespace
}  // namespace rdmagate::telemetry

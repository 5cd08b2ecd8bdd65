// The slow-path families (gateway state, process metrics) and the text format: names, types, labels and
// values as /metrics shows them, and every histogram bound printed as the exact decimal of its nanoseconds.
#include "telemetry/gateway_state.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "exposition_util.hpp"
#include "telemetry/collector.hpp"
#include "telemetry/http_server.hpp"
#include "telemetry/metrics.hpp"
#include "telemetry/process_metrics.hpp"
#include "telemetry/text_format.hpp"

namespace rdmagate::telemetry {
namespace {

using namespace std::chrono_literals;
using Labels = std::map<std::string, std::string>;

std::string text_of(const prometheus::Collectable& c) {
  return serialize_text(c.Collect());
}
test::Exposition scrape(const prometheus::Collectable& c) {
  return test::parse_exposition(text_of(c));
}

double value(const test::Exposition& e, const std::string& name, const Labels& labels = {}) {
  const auto* s = test::find_sample(e, name, labels);
  return s == nullptr ? std::numeric_limits<double>::quiet_NaN() : s->value;
}

// True when `text` (a decimal such as 0.008388608, 1.024e-06 or 17.179869184) is exactly ns * 10^-9,
// compared in integers: no double is involved, so a digit too many or too few fails.
bool is_exact_seconds(const std::string& text, std::uint64_t ns) {
  // digits [. digits] [e (+|-) digits]
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return text.substr(from, i - from);
  };
  std::string mantissa = digits();
  std::size_t fraction = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    const std::string f = digits();
    fraction = f.size();
    mantissa += f;
  }
  int exponent = 0;
  if (i < text.size() && text[i] == 'e') {
    if (++i >= text.size() || (text[i] != '+' && text[i] != '-')) return false;
    const bool negative = text[i++] == '-';
    const std::string e = digits();
    if (e.empty()) return false;
    exponent = negative ? -std::stoi(e) : std::stoi(e);
  }
  if (i != text.size() || mantissa.empty() || mantissa.size() > 30) return false;
  unsigned __int128 lhs = 0, rhs = ns;
  for (const char c : mantissa) lhs = lhs * 10 + static_cast<unsigned>(c - '0');
  // text = lhs * 10^(exponent - fraction); ns * 10^-9 = rhs * 10^-9.
  const int shift = exponent - static_cast<int>(fraction) + 9;
  for (int k = 0; k < std::abs(shift); ++k) (shift > 0 ? lhs : rhs) *= 10;
  return lhs == rhs;
}

TEST(TextFormat, ValuesAreShortestRoundTrip) {
  EXPECT_EQ(format_value(8388608 / 1e9), "0.008388608");
  EXPECT_EQ(format_value(1024 / 1e9), "1.024e-06");
  EXPECT_EQ(format_value(3), "3");
  EXPECT_EQ(format_value(1e15 + 0.5), "1000000000000000.5");  // prometheus-cpp 1.0 prints 1000000000000000
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  for (const double v : {0.1, 1.0 / 3, 123456789.123456789, 5e-324, 1.7976931348623157e308})
    EXPECT_EQ(std::strtod(format_value(v).c_str(), nullptr), v) << format_value(v);
}

TEST(TextFormat, EscapesHelpAndLabelValues) {
  prometheus::MetricFamily f{"x_total", "a \\ b\nc \"q\"", prometheus::MetricType::Counter, {}};
  prometheus::ClientMetric m;
  m.label = {{"a", "back\\slash \"quoted\"\nnewline"}, {"b", "plain"}};
  m.counter.value = 2;
  f.metric.push_back(m);
  EXPECT_EQ(serialize_text(std::vector{f}),
            "# HELP x_total a \\\\ b\\nc \"q\"\n"
            "# TYPE x_total counter\n"
            "x_total{a=\"back\\\\slash \\\"quoted\\\"\\nnewline\",b=\"plain\"} 2\n");
}

// Every bucket of every histogram family: le is the exact decimal of 2^(10+i) ns in seconds, the buckets
// come in order, end with +Inf, and _count equals the +Inf bucket.
TEST(TextFormat, EveryHistogramBoundIsExact) {
  // The checker itself: what prometheus-cpp printed fails it, every exact spelling passes.
  EXPECT_FALSE(is_exact_seconds("0.008388608000000001", 8388608));
  EXPECT_FALSE(is_exact_seconds("0.00838861", 8388608));
  EXPECT_TRUE(is_exact_seconds("0.008388608", 8388608));
  EXPECT_TRUE(is_exact_seconds("8.388608e-03", 8388608));
  EXPECT_TRUE(is_exact_seconds("1.024e-06", 1024));
  EXPECT_TRUE(is_exact_seconds("17.179869184", 17179869184));

  StatsCollector c("1.2.3", 1'000'000'000);
  CoreStats block;
  ASSERT_TRUE(c.register_core(0, block));
  block.observe_request_ns(protocol::ObjectOp::kGet, 5'000'000);
  const std::string text = serialize_text(c.Collect());

  std::set<std::string> checked;
  for (const auto& h : histogram_table()) {
    const std::string series = std::string(h.name) + "_bucket{" + std::string(h.label.name) + "=\"" +
                               std::string(h.label.value) + "\",le=\"";
    std::size_t pos = 0;
    for (std::size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
      pos = text.find(series, pos);
      ASSERT_NE(pos, std::string::npos) << series << " bucket " << i;
      pos += series.size();
      const std::string le = text.substr(pos, text.find('"', pos) - pos);
      if (i < LatencyHistogram::kFiniteBuckets) {
        EXPECT_TRUE(is_exact_seconds(le, LatencyHistogram::upper_bound_ns(i)))
            << series << " bucket " << i << ": le=\"" << le << "\" is not "
            << LatencyHistogram::upper_bound_ns(i) << " ns";
      } else {
        EXPECT_EQ(le, "+Inf");
      }
      checked.insert(le);
    }
  }
  EXPECT_EQ(checked.size(), LatencyHistogram::kBuckets);
  // The bound the issue named, and both ends, spelled out.
  EXPECT_NE(text.find("rdmagate_request_duration_seconds_bucket{op=\"get\",le=\"0.008388608\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("rdmagate_request_duration_seconds_bucket{op=\"get\",le=\"0.004194304\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("le=\"1.024e-06\""), std::string::npos);
  EXPECT_NE(text.find("le=\"17.179869184\""), std::string::npos);
  EXPECT_EQ(text.find("000000000"), std::string::npos) << "a value printed with spurious digits";
  EXPECT_NE(text.find("rdmagate_request_duration_seconds_bucket{op=\"get\",le=\"+Inf\"} 1\n"
                      "rdmagate_request_duration_seconds_sum{op=\"get\"} 0.005\n"
                      "rdmagate_request_duration_seconds_count{op=\"get\"} 1\n"),
            std::string::npos);
}

TEST(TextFormat, HistogramWithoutInfBucketGetsOne) {
  prometheus::MetricFamily f{"h_seconds", "h", prometheus::MetricType::Histogram, {}};
  prometheus::ClientMetric m;
  m.histogram.bucket = {{1, 0.5}};
  m.histogram.sample_count = 3;
  m.histogram.sample_sum = 2.5;
  f.metric.push_back(m);
  EXPECT_EQ(serialize_text(std::vector{f}),
            "# HELP h_seconds h\n# TYPE h_seconds histogram\n"
            "h_seconds_bucket{le=\"0.5\"} 1\nh_seconds_bucket{le=\"+Inf\"} 3\n"
            "h_seconds_sum 2.5\nh_seconds_count 3\n");
}

TEST(GatewayState, FamiliesNamesTypesAndLabels) {
  GatewayState s;
  s.set_port_identity("mlx5_0", 1, "mlx5dv");
  s.set_port(PortState::kActive, LinkLayer::kEthernet);
  s.config_loaded(1'700'000'000.25);
  s.add_registered_bytes(4096);
  s.add_registered_bytes(1 << 20);
  const auto e = scrape(s);

  EXPECT_EQ(e.types.at("rdmagate_port_active"), "gauge");
  EXPECT_EQ(value(e, "rdmagate_port_active", {{"device", "mlx5_0"}, {"port", "1"}}), 1);
  EXPECT_EQ(e.types.at("rdmagate_port_info"), "gauge");
  EXPECT_EQ(value(e, "rdmagate_port_info",
                  {{"device", "mlx5_0"},
                   {"port", "1"},
                   {"state", "active"},
                   {"link_layer", "ethernet"},
                   {"backend", "mlx5dv"}}),
            1);
  EXPECT_EQ(e.types.at("rdmagate_config_last_reload_successful"), "gauge");
  EXPECT_EQ(value(e, "rdmagate_config_last_reload_successful"), 1);
  EXPECT_EQ(e.types.at("rdmagate_config_last_reload_success_timestamp_seconds"), "gauge");
  EXPECT_EQ(value(e, "rdmagate_config_last_reload_success_timestamp_seconds"), 1'700'000'000.25);
  EXPECT_EQ(e.types.at("rdmagate_memory_registered_bytes"), "gauge");
  EXPECT_EQ(value(e, "rdmagate_memory_registered_bytes"), 4096 + (1 << 20));
  EXPECT_EQ(e.types.at("rdmagate_hugepages_fallback"), "gauge");
  EXPECT_EQ(value(e, "rdmagate_hugepages_fallback"), 0);
  // Linux has VmPin in /proc/self/status; this test registers nothing, so it is small but present.
  EXPECT_EQ(e.types.at("rdmagate_memory_pinned_bytes"), "gauge");
  EXPECT_GE(value(e, "rdmagate_memory_pinned_bytes"), 0);
  // Without a HealthState there is no readiness to report, rather than a made-up one.
  EXPECT_EQ(e.types.count("rdmagate_ready"), 0u);

  // Exactly one series per family, none of them counters without _total.
  for (const auto& [name, type] : e.types) {
    EXPECT_EQ(name.rfind("rdmagate_", 0), 0u) << name;
    EXPECT_EQ(type == "counter", name.size() > 6 && name.substr(name.size() - 6) == "_total") << name;
  }
  EXPECT_EQ(e.samples.size(), e.types.size());
}

TEST(GatewayState, NoPortSeriesBeforeTheIdentityIsKnown) {
  GatewayState s;
  const auto e = scrape(s);
  EXPECT_EQ(e.types.count("rdmagate_port_active"), 0u);
  EXPECT_EQ(e.types.count("rdmagate_port_info"), 0u);
  // Nor a reload verdict before the first load.
  EXPECT_EQ(e.types.count("rdmagate_config_last_reload_successful"), 0u);
}

TEST(GatewayState, PortStateAndLinkLayerFollowTheChecks) {
  GatewayState s;
  s.set_port_identity("rxe0", 1, "verbs");
  const auto info = [&](const char* state, const char* link) {
    return value(
        scrape(s), "rdmagate_port_info",
        {{"device", "rxe0"}, {"port", "1"}, {"state", state}, {"link_layer", link}, {"backend", "verbs"}});
  };
  EXPECT_EQ(info("unknown", "unspecified"), 1);
  EXPECT_EQ(value(scrape(s), "rdmagate_port_active", {{"device", "rxe0"}, {"port", "1"}}), 0);
  s.set_port(PortState::kActive, LinkLayer::kEthernet);
  EXPECT_EQ(info("active", "ethernet"), 1);
  EXPECT_EQ(value(scrape(s), "rdmagate_port_active", {{"device", "rxe0"}, {"port", "1"}}), 1);
  s.set_port(PortState::kDown, LinkLayer::kEthernet);
  const auto e = scrape(s);
  EXPECT_EQ(value(e, "rdmagate_port_info",
                  {{"device", "rxe0"},
                   {"port", "1"},
                   {"state", "down"},
                   {"link_layer", "ethernet"},
                   {"backend", "verbs"}}),
            1);
  EXPECT_EQ(value(e, "rdmagate_port_active", {{"device", "rxe0"}, {"port", "1"}}), 0);
  // The info family holds the current state only: the old series is gone.
  std::size_t info_series = 0;
  for (const auto& smp : e.samples) info_series += smp.name == "rdmagate_port_info";
  EXPECT_EQ(info_series, 1u);
  for (const auto state : {PortState::kInit, PortState::kArmed, PortState::kActiveDefer}) {
    s.set_port(state, LinkLayer::kInfiniband);
    EXPECT_EQ(info(std::string(kPortStateNames[static_cast<std::size_t>(state)]).c_str(), "infiniband"), 1);
    EXPECT_EQ(value(scrape(s), "rdmagate_port_active", {{"device", "rxe0"}, {"port", "1"}}), 0);
  }
}

// The start counts as a successful load; a failed reload turns the verdict to 0 and keeps the time of the
// last success; the next good reload turns it back and moves the time.
TEST(GatewayState, ReloadSuccessTransitions) {
  GatewayState s;
  s.config_loaded(1000.5);
  auto e = scrape(s);
  EXPECT_EQ(value(e, "rdmagate_config_last_reload_successful"), 1);
  EXPECT_EQ(value(e, "rdmagate_config_last_reload_success_timestamp_seconds"), 1000.5);

  s.config_reload_failed();
  e = scrape(s);
  EXPECT_EQ(value(e, "rdmagate_config_last_reload_successful"), 0);
  EXPECT_EQ(value(e, "rdmagate_config_last_reload_success_timestamp_seconds"), 1000.5);

  s.config_reload_failed();
  EXPECT_EQ(value(scrape(s), "rdmagate_config_last_reload_successful"), 0);

  s.config_loaded(2000.75);
  e = scrape(s);
  EXPECT_EQ(value(e, "rdmagate_config_last_reload_successful"), 1);
  EXPECT_EQ(value(e, "rdmagate_config_last_reload_success_timestamp_seconds"), 2000.75);
}

TEST(GatewayState, HugepageFallback) {
  GatewayState s;
  s.set_hugepages_fallback(true);
  auto e = scrape(s);
  EXPECT_EQ(value(e, "rdmagate_hugepages_fallback"), 1);
  EXPECT_EQ(value(e, "rdmagate_memory_registered_bytes"), 0);
  s.set_hugepages_fallback(false);
  EXPECT_EQ(value(scrape(s), "rdmagate_hugepages_fallback"), 0);
}

// rdmagate_ready is HealthState::check_ready at scrape time: it follows every input /readyz reads.
TEST(GatewayState, ReadyIsTheReadinessProbesVerdict) {
  auto stats = std::make_shared<StatsCollector>("1", 1'000'000'000);
  CoreStats core;
  ASSERT_TRUE(stats->register_core(0, core));
  HealthState health(*stats, 10s);
  GatewayState s;
  s.set_health(health);
  const auto ready = [&] {
    const double v = value(scrape(s), "rdmagate_ready");
    EXPECT_EQ(v == 1, health.check_ready(HealthState::Clock::now()).ok);
    return v;
  };
  EXPECT_EQ(ready(), 0);  // listeners down, port down, core not polling
  health.set_listeners_up(true);
  health.set_port_active(true);
  EXPECT_EQ(ready(), 0);  // the core has not polled
  core.add(Stat::kPolls, 5);
  EXPECT_EQ(ready(), 1);
  health.set_store_not_ready("connecting");
  EXPECT_EQ(ready(), 0);
  health.set_store_not_ready(nullptr);
  EXPECT_EQ(ready(), 1);
  health.set_port_active(false);
  EXPECT_EQ(ready(), 0);
}

// The scrape samples the cores' progress through the probe's own HealthState. That must not change what
// the probe sees: a stall is reported no later (and, at these instants, at the same probe) than without
// scrapes, and a core that keeps publishing is never reported stalled however the samples interleave.
TEST(HealthState, ScrapeSamplesNeitherDelayNorInventAStall) {
  auto stats = std::make_shared<StatsCollector>("1", 1'000'000'000);
  CoreStats core;
  ASSERT_TRUE(stats->register_core(0, core));
  const auto t0 = HealthState::Clock::now();
  const auto run = [&](bool with_scrapes) {
    core.set(Stat::kPolls, 0);
    HealthState h(*stats, 100ms);
    h.set_listeners_up(true);
    h.set_port_active(true);
    int first_not_ready = -1;
    // 10 ms steps: the core publishes every step until 300 ms, then stalls; a probe every 50 ms, a scrape
    // at every other step between probes.
    for (int step = 0; step <= 60; ++step) {
      const auto now = t0 + std::chrono::milliseconds(10 * step);
      if (step <= 30) core.add(Stat::kPolls, 1);
      if (with_scrapes && step % 5 == 2) (void)h.check_ready(now);
      if (step % 5 == 0) {
        const bool ok = h.check_ready(now).ok;
        if (step <= 40) {
          EXPECT_TRUE(ok) << "step " << step << (with_scrapes ? " with" : " without") << " scrapes";
        }
        if (!ok && first_not_ready < 0) first_not_ready = step;
      }
    }
    return first_not_ready;
  };
  const int without = run(false);
  const int with = run(true);
  ASSERT_GT(without, 0);
  ASSERT_GT(with, 0);
  EXPECT_LE(with, without);
  // The stall began after step 30: the first probe that reports it comes more than 100 ms later.
  EXPECT_GT(with, 40);
}

// A sampler that took its `now` before another's but reached the lock after it must not move the time the
// last change was seen backwards (which would report a stall earlier than the threshold allows).
TEST(HealthState, LateSamplerDoesNotMoveTheLastChangeBack) {
  auto stats = std::make_shared<StatsCollector>("1", 1'000'000'000);
  CoreStats core;
  ASSERT_TRUE(stats->register_core(0, core));
  HealthState h(*stats, 100ms);
  const auto t0 = HealthState::Clock::now();
  core.add(Stat::kPolls, 1);
  EXPECT_TRUE(h.check_live(t0).ok);  // first sight
  core.add(Stat::kPolls, 1);
  EXPECT_TRUE(h.check_live(t0 + 200ms).ok);  // change seen at +200 ms
  core.add(Stat::kPolls, 1);
  EXPECT_TRUE(h.check_live(t0 + 150ms).ok);  // a late caller's older clock sees the next change
  // Last change seen at +200 ms (not +150 ms): at +290 ms the core has been still for 90 ms only.
  EXPECT_TRUE(h.check_live(t0 + 290ms).ok);
  EXPECT_FALSE(h.check_live(t0 + 301ms).ok);
}

// Everything /metrics serves, through Prometheus's own linter (`promtool check metrics`, Debian package
// prometheus): it must print nothing and exit 0. Skipped where promtool is not installed.
TEST(TextFormat, PromtoolFindsNothingToLint) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) GTEST_SKIP() << "promtool not installed";
  StatsCollector c("1.2.3", 1'000'000'000);
  CoreStats core;
  ASSERT_TRUE(c.register_core(0, core));
  c.set_backend("verbs", "auto");
  core.observe_request_ns(protocol::ObjectOp::kPut, 3000);
  HealthState health(c, 10s);
  GatewayState state;
  state.set_health(health);
  state.set_port_identity("mlx5_0", 1, "verbs");
  state.set_port(PortState::kActive, LinkLayer::kInfiniband);
  state.config_loaded(1'765'000'000);
  ProcessCollector process;
  auto families = c.Collect();
  for (const prometheus::Collectable* more : {static_cast<const prometheus::Collectable*>(&state),
                                              static_cast<const prometheus::Collectable*>(&process)}) {
    auto f = more->Collect();
    families.insert(families.end(), f.begin(), f.end());
  }
  const std::string text = serialize_text(families);
  char path[] = "/tmp/rdmagate-metrics-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  const std::string cmd = std::string("promtool check metrics < ") + path + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (const std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = ::pclose(p);
  ::unlink(path);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "");
}

TEST(ProcessMetrics, ParsesProcStat) {
  // The command name may hold spaces and parentheses; the fields count from after the last ')'.
  const std::string stat =
      "4242 (rdma gate) (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 125 0 0 20 0 5 0 123456 "
      "987654321 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  const auto s = parse_proc_stat(stat, 100, 4096);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->cpu_seconds, 3.75);  // (250 + 125) / 100
  EXPECT_DOUBLE_EQ(s->start_seconds, 1234.56);
  EXPECT_EQ(s->virtual_bytes, 987654321u);
  EXPECT_EQ(s->resident_bytes, 2048u * 4096u);
  EXPECT_FALSE(parse_proc_stat("4242 (x) S 1 2 3", 100, 4096).has_value());
  EXPECT_FALSE(parse_proc_stat("no parenthesis", 100, 4096).has_value());
  EXPECT_FALSE(parse_proc_stat(stat, 0, 4096).has_value());
}

TEST(ProcessMetrics, ParsesBootTimeAndStatusFields) {
  EXPECT_EQ(parse_boot_time("cpu  1 2 3\nintr 5\nbtime 1764979200\nprocesses 7\n"), 1764979200.0);
  EXPECT_FALSE(parse_boot_time("cpu  1 2 3\n").has_value());
  const std::string status =
      "Name:\trdmagate\nVmPeak:\t  1000 kB\nVmLck:\t       0 kB\nVmPin:\t   65536 kB\n";
  EXPECT_EQ(parse_status_bytes(status, "VmPin"), 65536u * 1024u);
  EXPECT_EQ(parse_status_bytes(status, "VmLck"), 0u);
  EXPECT_FALSE(parse_status_bytes(status, "VmSwap").has_value());
  EXPECT_FALSE(parse_status_bytes(status, "Vm").has_value());  // a prefix of a field is not the field
}

TEST(ProcessMetrics, StandardNamesTypesAndPlausibleValues) {
  ProcessCollector c;
  auto e = scrape(c);
  const std::map<std::string, std::string> want = {{"process_start_time_seconds", "gauge"},
                                                   {"process_cpu_seconds_total", "counter"},
                                                   {"process_resident_memory_bytes", "gauge"},
                                                   {"process_virtual_memory_bytes", "gauge"},
                                                   {"process_open_fds", "gauge"},
                                                   {"process_max_fds", "gauge"}};
  EXPECT_EQ(e.types, want);
  EXPECT_EQ(e.samples.size(), want.size());
  for (const auto& smp : e.samples) EXPECT_TRUE(smp.labels.empty()) << smp.name;

  const double now = static_cast<double>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  const double start = value(e, "process_start_time_seconds");
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 3600) << "this test process started over an hour ago?";
  EXPECT_GE(value(e, "process_cpu_seconds_total"), 0);
  const double rss = value(e, "process_resident_memory_bytes");
  EXPECT_GT(rss, 1 << 20);  // a linked gtest binary
  EXPECT_GE(value(e, "process_virtual_memory_bytes"), rss);
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  EXPECT_EQ(value(e, "process_max_fds"), static_cast<double>(lim.rlim_cur));
  const double fds = value(e, "process_open_fds");
  EXPECT_GE(fds, 3);  // stdin, stdout, stderr

  // Opening a descriptor shows at the next scrape; the start time stays put.
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  e = scrape(c);
  EXPECT_EQ(value(e, "process_open_fds"), fds + 1);
  EXPECT_EQ(value(e, "process_start_time_seconds"), start);
  ::close(fd);

  // CPU time grows with work done.
  const double cpu0 = value(e, "process_cpu_seconds_total");
  const auto until = std::chrono::steady_clock::now() + 150ms;
  volatile std::uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < until) spin = spin + 1;
  EXPECT_GT(value(scrape(c), "process_cpu_seconds_total"), cpu0);
}

}  // namespace
}  // namespace rdmagate::telemetry

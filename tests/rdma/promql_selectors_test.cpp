// Host unit test of tests/rdma/promql_selectors.hpp, on the expression shapes of
// deploy/prometheus/rdmagate-alerts.yml and deploy/grafana/rdmagate-dashboard.json.
#include "tests/rdma/promql_selectors.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using rdmagate::testfix::promql::metric_name;
using rdmagate::testfix::promql::selectors;
using V = std::vector<std::string>;

TEST(PromqlSelectors, FunctionsRangesAndMatchers) {
  EXPECT_EQ(selectors(R"(up{job=~"rdmagate.*"} == 0)"), V{R"(up{job=~"rdmagate.*"})"});
  EXPECT_EQ(selectors(R"(absent(up{job=~"rdmagate.*"}))"), V{R"(up{job=~"rdmagate.*"})"});
  EXPECT_EQ(selectors("histogram_quantile(0.99, rate(rdmagate_request_duration_seconds_bucket[5m]))"),
            V{"rdmagate_request_duration_seconds_bucket"});
  EXPECT_EQ(selectors("vector(0.01)"), V{});
  EXPECT_EQ(selectors(R"(changes(process_start_time_seconds{job=~"rdmagate.*"}[30m]) > 2)"),
            V{R"(process_start_time_seconds{job=~"rdmagate.*"})"});
  // Braces, commas and parentheses inside a matcher's string are the string's.
  EXPECT_EQ(selectors(R"(x{a="}{,)(", b!~'q"'} offset 5m)"), V{R"(x{a="}{,)(", b!~'q"'})"});
}

TEST(PromqlSelectors, AggregationsAndVectorMatching) {
  EXPECT_EQ(selectors("rate(rdmagate_poller_polls_total[3m]) == 0 and on (job, instance) up == 1"),
            (V{"rdmagate_poller_polls_total", "up"}));
  EXPECT_EQ(selectors("rdmagate_store_allocated_bytes / rdmagate_store_capacity_bytes > 0.9\n"
                      "unless on (job, instance) rdmagate_rados_ready == 1"),
            (V{"rdmagate_store_allocated_bytes", "rdmagate_store_capacity_bytes", "rdmagate_rados_ready"}));
  EXPECT_EQ(
      selectors(R"(sum without (op) (rate(rdmagate_store_operations_total{status!~"ok|not_found"}[5m]))
                         / ignoring (status) group_left
                         sum without (op, status) (rate(rdmagate_store_operations_total[5m])) > 0.01)"),
      (V{R"(rdmagate_store_operations_total{status!~"ok|not_found"})", "rdmagate_store_operations_total"}));
  EXPECT_EQ(selectors("rdmagate:request_duration_seconds:p99_5m > on () group_left () "
                      "rdmagate:request_duration_seconds:p99_bound"),
            (V{"rdmagate:request_duration_seconds:p99_5m", "rdmagate:request_duration_seconds:p99_bound"}));
  // The prefix and the postfix grouping; a selector read twice is listed once.
  EXPECT_EQ(selectors(R"(sum by (op, le) (rate(m_bucket{instance=~"a"}[15s])) / sum(m_count) by (op) + )"
                      R"(count by (x) (m_bucket{instance=~"a"}))"),
            (V{R"(m_bucket{instance=~"a"})", "m_count"}));
  EXPECT_EQ(selectors(R"x(topk(5, count_values("v", m)) or label_replace(n, "dst", "$1", "src", "(.*)"))x"),
            (V{"m", "n"}));
  EXPECT_EQ(selectors(R"({__name__=~"rdmagate_.+"})"), V{R"({__name__=~"rdmagate_.+"})"});
}

TEST(PromqlSelectors, MetricName) {
  EXPECT_EQ(metric_name(R"(up{job="x"})"), "up");
  EXPECT_EQ(metric_name("rdmagate:request_duration_seconds:p99_5m"),
            "rdmagate:request_duration_seconds:p99_5m");
  EXPECT_EQ(metric_name(R"({__name__=~"x"})"), "");
}

}  // namespace

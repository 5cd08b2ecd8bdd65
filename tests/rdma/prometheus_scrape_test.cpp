// A real Prometheus (Debian's `prometheus` server) scraping the real rdmagate daemon under object load, in
// the rxe guest: scrape and rule evaluation every second, deploy/prometheus/rdmagate-alerts.yml loaded, and
// then, through Prometheus's HTTP API (/api/v1/query over loopback), every query of
// deploy/grafana/rdmagate-dashboard.json (its variable queries too) and every alert and recording-rule
// expression of the rules file, evaluated against what Prometheus scraped. `promtool check metrics` runs on
// the gateway's /metrics.
//
// Prometheus scrapes the one gateway as two jobs, the two ways deploy/ scrapes: "rdmagate",
// deploy/README.md's static config for systemd hosts, and "rdmagate-metrics" with the node and pod labels a
// Kubernetes scrape gives every series (the monitoring component's ServiceMonitor relabels node, the
// Prometheus Operator adds pod). The dashboard is evaluated once per job ("view"), its variables resolved in
// order as Grafana does: $job set to the view's job, every other variable to the first value its query
// returns; in the host view, where node and pod do not exist, a variable without values takes its All value
// (allValue), as Grafana does. Grafana's $__rate_interval and $__range get fixed values (kBuiltinVariables).
//
// What must return data:
//   - a recording rule's expression and a variable query (in the Kubernetes view): always;
//   - a dashboard query: unless its panel is one the dashboard marks RADOS-only (title "RADOS: ...": this
//     gateway runs store.backend: memory);
//   - an alert expression must evaluate without error, and it is empty on this healthy gateway (no alert
//     pending) except those of kMayBePendingHere; every selector inside it must return data unless it names
//     a RADOS-only metric (one the dashboard reads in RADOS panels only). So `absent(up{job=~"rdmagate.*"})`
//     is empty while up{job=~"rdmagate.*"} must not be.
// /api/v1/rules must report every rule healthy. The list of every query evaluated, with its result size, is
// printed.
//
// The binary re-executes itself as the daemon ("daemon ...": daemon/gateway_main.cpp linked in) and as the
// load client ("load ...": the client library). tools/rdma-suite brings prometheus and promtool into the
// guest (tools/rxe-vm/prometheus-guest-files).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "client/client.hpp"
#include "control/rdma_device.hpp"
#include "dataplane/eal_runtime.hpp"
#include "tests/rdma/client_process.hpp"
#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/promql_selectors.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tests/rdma/status_file.hpp"

int rdmagate_main(int argc, char** argv);

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using rdmagate::testfix::num;
using rdmagate::testfix::read_status;
using rdmagate::testfix::rxe_addr;
using rdmagate::testfix::proc::Child;
using rdmagate::testfix::proc::http_get;
using rdmagate::testfix::proc::HttpReply;
using rdmagate::testfix::proc::read_file;
using rdmagate::testfix::proc::spawn;
using rdmagate::testfix::proc::start_test_gateway;
using rdmagate::testfix::proc::test_gateway_yaml;
using rdmagate::testfix::proc::wait_for;
using rdmagate::testfix::proc::write_file;
namespace promql = rdmagate::testfix::promql;

// The dashboard's mark of a panel that only a gateway with store.backend: rados fills.
constexpr std::string_view kRadosPanelPrefix = "RADOS: ";

// Alerts whose expression may be non-empty (pending) on a healthy gateway in this guest: the p99 bound is
// 10 ms, and a chunked request under qemu TCG emulation can take longer than that.
const std::set<std::string> kMayBePendingHere = {"RdmagateRequestLatencyHigh"};

// Grafana's built-in variables. Grafana would make $__rate_interval 4 × the 1 s scrape interval; 15 s keeps
// several samples in every window when the loaded guest delays a scrape. $__range: the dashboard's range.
const std::map<std::string, std::string> kBuiltinVariables = {
    {"__rate_interval", "15s"}, {"__interval", "1s"}, {"__interval_ms", "1000"},
    {"__range", "1m"},          {"__range_s", "60"},  {"__range_ms", "60000"},
};

// The two scrape jobs of the one gateway, and the dashboard looked at through each.
struct View {
  const char* name;
  const char* job;
  // The target carries node and pod labels. Without them, a variable whose query returns nothing takes its
  // All value, as in Grafana; with them, that is a failure.
  bool node_pod_labels;
};
constexpr View kViews[] = {{"k8s", "rdmagate-metrics", true}, {"host", "rdmagate", false}};

std::string g_self;
int g_rdma_port = 7900;
int g_http_port = 19500;
int g_prom_port = 29500;

// ---- HTTP over loopback ----------------------------------------------------------------------------------

std::string url_encode(const std::string& s) {
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// ---- Prometheus's API ------------------------------------------------------------------------------------

struct QueryResult {
  std::string error;  // empty when Prometheus answered "success"
  json data;          // the "data" object (resultType, result) or the label values array
  std::size_t size() const {
    if (data.is_array()) return data.size();
    if (!data.is_object() || !data.contains("result")) return 0;
    const json& res = data["result"];
    if (data["resultType"] == "vector" || data["resultType"] == "matrix") return res.size();
    return 1;  // scalar or string
  }
};

QueryResult api(const std::string& path, const std::string& params) {
  QueryResult q;
  const HttpReply r = http_get(g_prom_port, params.empty() ? path : path + "?" + params, 30);
  if (r.status == 0) {
    q.error = "no answer from Prometheus on port " + std::to_string(g_prom_port);
    return q;
  }
  const json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    q.error = "HTTP " + std::to_string(r.status) + ", not JSON: " + r.body.substr(0, 300);
  } else if (j.value("status", "") != "success") {
    q.error =
        "HTTP " + std::to_string(r.status) + " " + j.value("errorType", "") + ": " + j.value("error", "");
  } else {
    q.data = j["data"];
  }
  return q;
}

QueryResult query(const std::string& promql) {
  return api("/api/v1/query", "query=" + url_encode(promql));
}

double scalar_of(const QueryResult& q) {
  if (q.size() == 0 || !q.data["result"].is_array()) return -1;
  return std::strtod(q.data["result"][0]["value"][1].get<std::string>().c_str(), nullptr);
}

// The first sample value of an instant vector, for the printed list ("-" when empty).
std::string first_value(const QueryResult& q) {
  if (q.data.is_array()) return q.data.empty() ? "-" : q.data[0].get<std::string>();
  if (q.size() == 0 || !q.data["result"].is_array()) return "-";
  return q.data["result"][0]["value"][1].get<std::string>();
}

// ---- the checks ------------------------------------------------------------------------------------------

struct Evaluated {
  std::string kind;  // "dashboard", "variable", "record", "alert", "selector"
  std::string what;  // the expression as evaluated
  std::size_t size = 0;
  std::string value;
  std::string verdict;  // "ok", or why it failed / was excused
};

// What an expression's own result must be.
enum class Expect {
  kData,          // non-empty (dashboard and variable queries, recording rules), RADOS-only excepted
  kNoAlert,       // empty: an alert that is not pending on this healthy gateway
  kMayBePending,  // either: an alert of kMayBePendingHere
};

class Checker {
 public:
  explicit Checker(std::set<std::string> rados_only_metrics) : rados_only_(std::move(rados_only_metrics)) {}

  // Evaluates one expression and, with `check_selectors`, each of its selectors, which must then have data
  // unless they name a RADOS-only metric. An empty result where Expect::kData wants data is excused only for
  // a `rados_panel` query. Returns the expression's result.
  QueryResult expression(const std::string& kind, const std::string& expr, Expect expect,
                         bool check_selectors, const std::string& name = "", bool rados_panel = false) {
    const QueryResult q = query(expr);
    Evaluated e{kind, name.empty() ? expr : name + ": " + expr, q.size(), first_value(q), "ok"};
    if (!q.error.empty()) {
      e.verdict = "QUERY ERROR " + q.error;
      failures_.push_back(kind + " " + e.what + ": " + q.error);
      list_.push_back(e);
      return q;
    }
    std::vector<std::string> empty_selectors;
    std::vector<Evaluated> sel_rows;
    // Without `check_selectors`, only an empty result needs its selectors: they tell why it is empty.
    const bool read_selectors = check_selectors || q.size() == 0;
    for (const std::string& sel : read_selectors ? promql::selectors(expr) : std::vector<std::string>{}) {
      const QueryResult s = query(sel);
      Evaluated row{"  selector", sel, s.size(), first_value(s), "ok"};
      if (!s.error.empty()) {
        row.verdict = "QUERY ERROR " + s.error;
        failures_.push_back("selector " + sel + " of " + e.what + ": " + s.error);
      } else if (s.size() == 0) {
        empty_selectors.push_back(sel);
        const bool rados = rados_only_.count(promql::metric_name(sel)) != 0;
        row.verdict = rados ? "empty (RADOS-only metric)" : "EMPTY";
        if (check_selectors && !rados) failures_.push_back("selector " + sel + " of " + e.what + " is empty");
      }
      sel_rows.push_back(row);
    }
    if (expect == Expect::kNoAlert && q.size() != 0) {
      e.verdict = "PENDING";
      failures_.push_back(kind + " " + e.what +
                          " is pending on a healthy gateway: " + q.data["result"].dump());
    } else if (expect == Expect::kMayBePending && q.size() != 0) {
      e.verdict = "pending (allowed here)";
    } else if (expect == Expect::kData && q.size() == 0) {
      if (rados_panel) {
        e.verdict = "empty (RADOS panel)";
        ++excused_;
      } else {
        e.verdict = "EMPTY";
        failures_.push_back(kind + " " + e.what + " returned no data" +
                            (empty_selectors.empty() ? " although every selector in it has data" : ""));
      }
    }
    list_.push_back(e);
    list_.insert(list_.end(), sel_rows.begin(), sel_rows.end());
    return q;
  }

  void fail(const std::string& why) { failures_.push_back(why); }
  void add_row(Evaluated e) { list_.push_back(std::move(e)); }
  const std::vector<std::string>& failures() const { return failures_; }
  const std::vector<Evaluated>& list() const { return list_; }
  std::size_t excused() const { return excused_; }

 private:
  std::set<std::string> rados_only_;
  std::vector<std::string> failures_;
  std::vector<Evaluated> list_;
  std::size_t excused_ = 0;
};

// Replaces $name, ${name}, ${name:format} and [[name]] from `vars`; names not in it go to `*unknown`.
std::string interpolate(const std::string& s, const std::map<std::string, std::string>& vars,
                        std::set<std::string>* unknown) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t end = i;
    std::string name;
    if (s.compare(i, 2, "${") == 0) {
      end = s.find('}', i);
      if (end == std::string::npos) break;
      name = s.substr(i + 2, end - i - 2);
      name = name.substr(0, name.find(':'));
      ++end;
    } else if (s.compare(i, 2, "[[") == 0 && s.find("]]", i) != std::string::npos) {
      end = s.find("]]", i);
      name = s.substr(i + 2, end - i - 2);
      end += 2;
    } else if (s[i] == '$') {
      end = i + 1;
      while (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) != 0 || s[end] == '_'))
        ++end;
      name = s.substr(i + 1, end - i - 1);
    }
    // $1 in a label_replace() replacement is no variable.
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) != 0) {
      out += s[i++];
      continue;
    }
    const auto it = vars.find(name);
    if (it == vars.end()) {
      unknown->insert(name);
      out += s.substr(i, end - i);
    } else {
      out += it->second;
    }
    i = end;
  }
  return out;
}

struct DashboardQuery {
  std::string expr;
  std::string panel;  // the title of the panel (or annotation) it belongs to
};

// Every string under a key "expr", anywhere in the dashboard (panels, rows' panels, annotations), with the
// title of the object around it.
void collect_exprs(const json& j, const std::string& title, std::vector<DashboardQuery>* out) {
  if (j.is_object()) {
    const std::string here =
        j.contains("title") && j["title"].is_string() ? j["title"].get<std::string>() : title;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "expr" && it->is_string()) {
        if (!it->get<std::string>().empty()) out->push_back({it->get<std::string>(), here});
      } else {
        collect_exprs(*it, here, out);
      }
    }
  } else if (j.is_array()) {
    for (const json& x : j) collect_exprs(x, title, out);
  }
}

bool rados_panel(const DashboardQuery& q) {
  return q.panel.rfind(kRadosPanelPrefix, 0) == 0;
}

// A template variable's values as Grafana's Prometheus data source gets them: label_values(selector,
// label), label_values(label), query_result(expr). `error` names what could not be evaluated.
std::vector<std::string> variable_values(const std::string& q, std::string* error) {
  std::vector<std::string> values;
  const auto args_of = [&](const char* fn) -> std::string {
    const std::size_t open = q.find(fn);
    const std::size_t close = q.rfind(')');
    if (open != 0 || close == std::string::npos) return "";
    return q.substr(std::strlen(fn) + 1, close - std::strlen(fn) - 1);
  };
  if (q.rfind("label_values(", 0) == 0) {
    const std::string args = args_of("label_values");
    const std::size_t comma = args.rfind(',');
    std::string label = comma == std::string::npos ? args : args.substr(comma + 1);
    label.erase(0, label.find_first_not_of(' '));
    label.erase(label.find_last_not_of(' ') + 1);
    const std::string match =
        comma == std::string::npos ? "" : "match[]=" + url_encode(args.substr(0, comma));
    const QueryResult r = api("/api/v1/label/" + label + "/values", match);
    *error = r.error;
    if (r.data.is_array()) {
      for (const json& v : r.data) values.push_back(v.get<std::string>());
    }
  } else if (q.rfind("query_result(", 0) == 0) {
    const QueryResult r = query(args_of("query_result"));
    *error = r.error;
    if (r.size() > 0 && r.data["result"].is_array()) {
      for (const json& s : r.data["result"]) values.push_back(s["metric"].dump());
    }
  } else {
    *error = "a variable query of a form this test does not evaluate: " + q;
  }
  return values;
}

std::string results_dir() {
  std::string out = ::testing::GTEST_FLAG(output);
  if (out.rfind("xml:", 0) == 0) out = out.substr(4);
  const std::size_t slash = out.rfind('/');
  return slash == std::string::npos || slash == 0 ? "/tmp" : out.substr(0, slash);
}

// `promtool check metrics` on `file` (its stdin); the exit code, its output in `*output`.
int promtool_check_metrics(const std::string& file, std::string* output) {
  const std::string log = file + ".promtool";
  std::remove(log.c_str());
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, file.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<std::string> args = {RDMAGATE_PROMTOOL, "check", "metrics"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    *output = std::string("posix_spawn ") + RDMAGATE_PROMTOOL + ": " + std::strerror(rc);
    return -1;
  }
  int st = 0;
  waitpid(pid, &st, 0);
  *output = read_file(log);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(PrometheusScrape, DashboardAndRuleQueriesAgainstARealScrape) {
  for (const char* tool : {RDMAGATE_PROMETHEUS, RDMAGATE_PROMTOOL}) {
    ASSERT_EQ(access(tool, X_OK), 0) << tool
                                     << ": Debian's prometheus package (tools/setup-debian.sh) was not "
                                     << "installed when this build was configured, or it is not in the guest";
  }
  const std::string tag = std::to_string(getpid());
  const std::string dir = "/tmp/prom_scrape_" + tag;
  const std::string out_dir = results_dir();
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0) << dir << ": " << std::strerror(errno);
  const std::string rules = std::string(RDMAGATE_SOURCE_DIR) + "/deploy/prometheus/rdmagate-alerts.yml";
  const std::string dashboard_file =
      std::string(RDMAGATE_SOURCE_DIR) + "/deploy/grafana/rdmagate-dashboard.json";

  // The gateway: one core on CPU 1, the control thread on CPU 0, both yielding when idle so that Prometheus
  // gets CPU time in the 2-vCPU guest.
  const std::string yaml = dir + "/rdmagate.yaml", log = dir + "/rdmagate.log";
  Child daemon;
  ASSERT_TRUE(start_test_gateway(&daemon, g_self, yaml,
                                 test_gateway_yaml(rxe_addr(), g_rdma_port, g_http_port), log, g_http_port))
      << "the gateway did not become ready; log:\n"
      << read_file(log);

  // The load: PUT / GET / DELETE, inline and chunked, and GETs of keys that do not exist, until told to stop.
  const std::string load_status = dir + "/load.status", load_stop = dir + "/load.stop",
                    load_log = dir + "/load.log";
  Child load;
  ASSERT_TRUE(spawn(&load, {g_self, "load", rxe_addr(), std::to_string(g_rdma_port), load_status, load_stop},
                    load_log));
  ASSERT_TRUE(
      wait_for([&] { return num(read_status(load_status), "ops") != UINT64_MAX || !load.running(); }, 60s) &&
      load.running())
      << "the load client did not start; its log:\n"
      << read_file(load_log);

  // Prometheus: scrape and evaluate every second, the rules file as shipped, the gateway as two jobs (see the
  // top of this file).
  const std::string prom_yml = dir + "/prometheus.yml", prom_log = dir + "/prometheus.log";
  std::string prom_config =
      "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
      "rule_files:\n  - " +
      rules + "\nscrape_configs:\n";
  for (const View& view : kViews) {
    prom_config += std::string("  - job_name: ") + view.job +
                   "\n    static_configs:\n      - targets: [\"127.0.0.1:" + std::to_string(g_http_port) +
                   "\"]\n";
    if (view.node_pod_labels)
      prom_config += "        labels:\n          node: rxe-vm\n          pod: rdmagate-test-0\n";
  }
  write_file(prom_yml, prom_config);
  Child prom;
  const auto t_prom = Clock::now();
  ASSERT_TRUE(spawn(&prom,
                    {RDMAGATE_PROMETHEUS, "--config.file=" + prom_yml, "--storage.tsdb.path=" + dir + "/tsdb",
                     "--web.listen-address=127.0.0.1:" + std::to_string(g_prom_port), "--log.level=info"},
                    prom_log));
  ASSERT_TRUE(
      wait_for([&] { return !prom.running() || http_get(g_prom_port, "/-/ready").status == 200; }, 90s) &&
      prom.running())
      << "Prometheus did not become ready; its log:\n"
      << read_file(prom_log);
  const double prom_ready_s = std::chrono::duration<double>(Clock::now() - t_prom).count();

  // Let it scrape: 18 successful scrapes through each job (about 18 s at 1 s).
  constexpr int kScrapes = 18;
  double scrapes = 0;
  const bool scraped = wait_for(
      [&] {
        scrapes = scalar_of(
            query("min(sum_over_time(up[5m])) and count(up) == " + std::to_string(std::size(kViews))));
        return scrapes >= kScrapes || !prom.running();
      },
      120s);
  ASSERT_TRUE(scraped && prom.running()) << "only " << scrapes << " successful scrapes; Prometheus log:\n"
                                         << read_file(prom_log);
  const double scrape_s = std::chrono::duration<double>(Clock::now() - t_prom).count() - prom_ready_s;
  std::printf(
      "prometheus_scrape: Prometheus ready in %.1f s, %.0f successful scrapes %.1f s later; load so far: %s",
      prom_ready_s, scrapes, scrape_s, read_file(load_status).c_str());

  // The dashboard's queries, and the metrics it reads in RADOS panels only: alert selectors naming those may
  // be empty on this memory-backed gateway.
  std::ifstream df(dashboard_file);
  const json dashboard = json::parse(df, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(dashboard.is_discarded()) << dashboard_file << " is not JSON";
  std::vector<DashboardQuery> exprs;
  collect_exprs(dashboard, "", &exprs);
  ASSERT_FALSE(exprs.empty()) << "no expr in " << dashboard_file;
  std::set<std::string> in_rados_panels, elsewhere, rados_only;
  for (const DashboardQuery& d : exprs) {
    for (const std::string& sel : promql::selectors(d.expr)) {
      (rados_panel(d) ? in_rados_panels : elsewhere).insert(promql::metric_name(sel));
    }
  }
  for (const std::string& m : in_rados_panels) {
    if (elsewhere.count(m) == 0) rados_only.insert(m);
  }
  Checker check(rados_only);

  // Every rule loaded and evaluated without error.
  const QueryResult rules_api = api("/api/v1/rules", "");
  ASSERT_TRUE(rules_api.error.empty()) << rules_api.error;
  std::size_t rule_count = 0;
  for (const json& g : rules_api.data["groups"]) {
    for (const json& r : g["rules"]) {
      ++rule_count;
      if (r.value("health", "") != "ok") {
        check.fail("rule " + r.value("name", "") + " health " + r.value("health", "") + ": " +
                   r.value("lastError", ""));
      }
    }
  }

  // The rules file: every recording rule's expression has data; every alert's expression evaluates, is
  // empty unless listed in kMayBePendingHere, and reads selectors that have data.
  const YAML::Node file = YAML::LoadFile(rules);
  std::size_t file_rules = 0;
  for (const YAML::Node& g : file["groups"]) {
    for (const YAML::Node& r : g["rules"]) {
      ++file_rules;
      const std::string expr = r["expr"].as<std::string>();
      if (r["record"]) {
        check.expression("record", expr, Expect::kData, /*check_selectors=*/true,
                         r["record"].as<std::string>());
        continue;
      }
      const std::string alert = r["alert"].as<std::string>();
      check.expression("alert", expr,
                       kMayBePendingHere.count(alert) != 0 ? Expect::kMayBePending : Expect::kNoAlert,
                       /*check_selectors=*/true, alert);
    }
  }
  EXPECT_EQ(rule_count, file_rules) << "Prometheus loaded a different number of rules than " << rules
                                    << " has";

  // The dashboard through each job: its variables in order (a variable's query may use an earlier one), then
  // every expr.
  std::string view_lines;
  for (const View& view : kViews) {
    std::map<std::string, std::string> vars = kBuiltinVariables;
    std::set<std::string> unknown;
    const std::string kind = std::string("dash/") + view.name;
    view_lines += std::string("prometheus_scrape: view ") + view.name + " (job " + view.job + "):";
    for (const json& v : dashboard["templating"]["list"]) {
      const std::string name = v.value("name", ""), type = v.value("type", "");
      if (type == "datasource" || type == "adhoc") continue;
      std::string q = v.contains("query") && v["query"].is_object() ? v["query"].value("query", "")
                                                                    : v.value("query", "");
      if (type == "custom" || type == "interval" || type == "constant" || type == "textbox") {
        vars[name] = q.substr(0, q.find(','));
        continue;
      }
      q = interpolate(q, vars, &unknown);
      std::string err;
      const std::vector<std::string> values = variable_values(q, &err);
      Evaluated row{"var/" + std::string(view.name), "$" + name + " = " + q, values.size(),
                    values.empty() ? "-" : values[0], "ok"};
      if (!err.empty()) {
        row.verdict = "QUERY ERROR " + err;
        check.fail("variable $" + name + " (" + q + "): " + err);
      } else if (name == "job") {
        vars[name] = view.job;
        if (std::find(values.begin(), values.end(), view.job) == values.end()) {
          row.verdict = "NO JOB " + std::string(view.job);
          check.fail("variable $job (" + q + ") does not offer the job " + view.job);
        }
      } else if (!values.empty()) {
        vars[name] = values[0];
      } else if (!view.node_pod_labels && v.value("includeAll", false) && !v.value("allValue", "").empty()) {
        vars[name] = v.value("allValue", "");
        row.verdict = "none: All";
      } else {
        row.verdict = "EMPTY";
        check.fail("variable $" + name + " (" + q + ") has no values in the " + view.name + " view");
      }
      check.add_row(row);
      if (vars.count(name) != 0) view_lines += " $" + name + "=" + vars[name];
    }
    view_lines += "\n";
    for (const DashboardQuery& d : exprs) {
      check.expression(kind, interpolate(d.expr, vars, &unknown), Expect::kData, /*check_selectors=*/false,
                       "", rados_panel(d));
    }
    EXPECT_TRUE(unknown.empty()) << "the dashboard uses variables it does not define: " << [&] {
      std::string s;
      for (const std::string& u : unknown) s += " $" + u;
      return s;
    }();
  }

  // The gateway's exposition passes promtool's lint.
  const std::string metrics_file = out_dir + "/prometheus_scrape_metrics.txt";
  const HttpReply metrics = http_get(g_http_port, "/metrics");
  ASSERT_EQ(metrics.status, 200);
  write_file(metrics_file, metrics.body);
  std::string lint;
  const int lint_rc = promtool_check_metrics(metrics_file, &lint);
  EXPECT_EQ(lint_rc, 0) << "promtool check metrics on " << metrics_file << ":\n" << lint;

  write_file(load_stop, "");
  EXPECT_EQ(load.wait_exit(60s), 0) << read_file(load_log);
  const auto st = read_status(load_status);
  EXPECT_EQ(num(st, "errors"), 0u) << read_file(load_status);
  EXPECT_EQ(num(st, "mismatches"), 0u) << read_file(load_status);
  EXPECT_GT(num(st, "not_found"), 0u);
  EXPECT_GT(num(st, "chunked_puts"), 0u);

  std::printf(
      "prometheus_scrape: %zu queries evaluated (%zu rules loaded, all health ok unless listed below; "
      "RADOS-only metrics: %zu; $__rate_interval=%s $__range=%s)\n%s",
      check.list().size(), rule_count, rados_only.size(), kBuiltinVariables.at("__rate_interval").c_str(),
      kBuiltinVariables.at("__range").c_str(), view_lines.c_str());
  for (const Evaluated& e : check.list()) {
    std::printf("prometheus_scrape: %-10s %4zu series  %-12s %-27s %s\n", e.kind.c_str(), e.size,
                e.value.substr(0, 12).c_str(), e.verdict.c_str(), e.what.c_str());
  }
  std::printf(
      "prometheus_scrape: %zu queries of RADOS panels excused; promtool check metrics: exit %d on %zu bytes "
      "(%s)\nprometheus_scrape: load: %s",
      check.excused(), lint_rc, metrics.body.size(), metrics_file.c_str(), read_file(load_status).c_str());
  for (const std::string& f : check.failures()) ADD_FAILURE() << f;

  kill(prom.pid, SIGTERM);
  EXPECT_EQ(prom.wait_exit(60s), 0) << read_file(prom_log);
  kill(daemon.pid, SIGTERM);
  EXPECT_EQ(daemon.wait_exit(60s), 0) << read_file(log);
  // On failure the logs go beside the JUnit file; the guest's /tmp does not outlive the run.
  std::error_code ec;
  if (HasFailure()) {
    for (const std::string& f : {prom_log, log, load_log}) {
      std::filesystem::copy_file(
          f, out_dir + "/prometheus_scrape_" + std::filesystem::path(f).filename().string(),
          std::filesystem::copy_options::overwrite_existing, ec);
    }
  }
  std::filesystem::remove_all(dir, ec);
}

// ---- the load client ------------------------------------------------------------------------------------

// "load ADDR PORT STATUS STOP": until the file STOP exists: PUT and GET back (verified) an inline 100 B value
// of 64 keys in turn, every fourth round a chunked 64 KiB one too (PUT, GET, DELETE), every third a GET of a
// key never written (not_found), every fifth a DELETE of the inline key and a GET of it (not_found). Writes
// "ops= puts= gets= dels= not_found= chunked_puts= chunked_gets= errors= mismatches=" to STATUS every 20
// rounds and at the end.
int load_main(int argc, char** argv) {
  using namespace rdmagate;
  using client::Status;
  if (argc != 5) return 2;
  auto eal = testfix::proc::client_eal("load", "0@1,1@0", 192);
  if (!eal) return 1;
  auto cl = testfix::proc::connect_client("load", argv[1], std::atoi(argv[2]), 1);
  if (!cl) return 1;
  constexpr std::size_t kSmall = 100, kBig = 64 * 1024;
  std::uint64_t ops = 0, puts = 0, gets = 0, dels = 0, not_found = 0, errors = 0, mismatches = 0;
  const auto fill = [](std::byte* p, std::size_t n, std::uint64_t seed) {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  };
  std::vector<std::byte> small(kSmall), got(kSmall);
  std::span<std::byte> big = cl->alloc_buffer(kBig), big_got = cl->alloc_buffer(kBig);
  if (big.size() < kBig || big_got.size() < kBig) return 1;
  const auto expect = [&](Status s, Status want) {
    ++ops;
    errors += s != want;
    not_found += s == Status::kNotFound && want == Status::kNotFound;
  };
  const auto write_status = [&] {
    const std::string tmp = std::string(argv[3]) + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr) return;
    const client::ClientStats st = cl->stats();
    std::fprintf(f,
                 "ops=%llu puts=%llu gets=%llu dels=%llu not_found=%llu chunked_puts=%llu chunked_gets=%llu "
                 "errors=%llu mismatches=%llu\n",
                 static_cast<unsigned long long>(ops), static_cast<unsigned long long>(puts),
                 static_cast<unsigned long long>(gets), static_cast<unsigned long long>(dels),
                 static_cast<unsigned long long>(not_found), static_cast<unsigned long long>(st.chunked_puts),
                 static_cast<unsigned long long>(st.chunked_gets), static_cast<unsigned long long>(errors),
                 static_cast<unsigned long long>(mismatches));
    std::fclose(f);
    std::rename(tmp.c_str(), argv[3]);
  };
  for (std::uint64_t round = 0; access(argv[4], F_OK) != 0; ++round) {
    const std::string key = "small-" + std::to_string(round % 64);
    fill(small.data(), kSmall, round);
    expect(cl->put(key, small.data(), kSmall).status, Status::kOk);
    ++puts;
    const client::Result r = cl->get(key, got.data(), got.size());
    expect(r.status, Status::kOk);
    ++gets;
    mismatches += r.status == Status::kOk && (r.size != kSmall || got != small);
    if (round % 4 == 0) {
      const std::string bkey = "big-" + std::to_string(round % 16);
      fill(big.data(), kBig, round + 1000);
      expect(cl->put(bkey, big.data(), kBig).status, Status::kOk);
      ++puts;
      const client::Result b = cl->get(bkey, big_got.data(), big_got.size());
      expect(b.status, Status::kOk);
      ++gets;
      mismatches +=
          b.status == Status::kOk && (b.size != kBig || std::memcmp(big.data(), big_got.data(), kBig) != 0);
      expect(cl->del(bkey).status, Status::kOk);
      ++dels;
    }
    if (round % 3 == 0) {
      expect(cl->get("missing-" + std::to_string(round), got.data(), got.size()).status, Status::kNotFound);
      ++gets;
    }
    if (round % 5 == 0) {
      expect(cl->del(key).status, Status::kOk);
      ++dels;
      expect(cl->get(key, got.data(), got.size()).status, Status::kNotFound);
      ++gets;
    }
    if (round % 20 == 0) write_status();
    // A steady rate, not the most the guest can take: Prometheus needs CPU time too.
    std::this_thread::sleep_for(2ms);
  }
  write_status();
  cl.reset();
  (void)eal.release();  // exits right away; EAL's cleanup is not needed for that
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  if (argc > 1 && std::strcmp(argv[1], "load") == 0) return load_main(argc - 1, argv + 1);
  // No EAL here: the daemon and the load client (this binary, re-executed) start their own.
  return rdmagate::testfix::rdma_test_main(argc, argv, "prometheus_scrape_test", /*eal_lcores=*/nullptr,
                                           [](const rdmagate::control::RdmaProbe&) {
                                             g_self = rdmagate::testfix::self_exe("prometheus_scrape_test");
                                             if (g_self.empty()) return 1;
                                             g_rdma_port = 7900 + static_cast<int>(getpid() % 300) * 2;
                                             g_http_port = 19500 + static_cast<int>(getpid() % 500);
                                             g_prom_port = 29500 + static_cast<int>(getpid() % 500);
                                             return 0;
                                           });
}

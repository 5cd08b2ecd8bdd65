// rdmagate-bench's reports (bench_core.hpp): the perftest-like table and the JSON. No DPDK or verbs here, so
// host tests check both (tools/bench/bench_options_test.cpp).
#include <cinttypes>
#include <nlohmann/json.hpp>

#include "tools/bench/bench_core.hpp"

namespace rdmagate::bench {

std::uint64_t Report::errors() const noexcept {
  std::uint64_t n = 0;
  for (const Row& r : rows) n += r.errors;
  return n;
}
std::uint64_t Report::mismatches() const noexcept {
  std::uint64_t n = 0;
  for (const Row& r : rows) n += r.mismatches;
  return n;
}

Latency latency_of(const Histogram& h, double us_per_tick) noexcept {
  Latency l;
  if (h.count() == 0) return l;
  l.valid = true;
  l.min_us = static_cast<double>(h.min()) * us_per_tick;
  l.avg_us = h.mean() * us_per_tick;
  l.stdev_us = h.stdev() * us_per_tick;
  l.p50_us = static_cast<double>(h.quantile(0.5)) * us_per_tick;
  l.p99_us = static_cast<double>(h.quantile(0.99)) * us_per_tick;
  l.p999_us = static_cast<double>(h.quantile(0.999)) * us_per_tick;
  l.max_us = static_cast<double>(h.max()) * us_per_tick;
  return l;
}

namespace {

// " (yield)" or " (event)" after the core count; nothing for busy polling, the default.
std::string idle_note(const Options& o) {
  return o.idle == BenchIdle::kBusy ? std::string() : std::string(" (") + bench_idle_name(o.idle) + ")";
}

// connect: cmtime's table (its columns and their meaning), then the rate.
void print_connect(std::FILE* out, const Report& r) {
  const Options& o = r.options;
  const ConnectResult& c = r.connect;
  std::fprintf(out, " rdmagate-bench connect  server %s:%u  device %s  connections %u  cores %zu%s\n",
               o.server.c_str(), o.port, o.device.empty() ? "-" : o.device.c_str(), o.connections,
               o.lcores.size(), idle_note(o).c_str());
  std::fprintf(out,
               " all connections started at once; each verified by one %" PRIu64
               " B echo round trip, then all closed\n",
               kConnectEchoBytes);
  std::fprintf(out, "step              total ms     max ms     min us  us / conn\n");
  for (const StepTime& s : c.steps) {
    std::fprintf(out, "%-13s: %11.2f%11.2f%11.2f%11.2f\n", s.name.c_str(), s.total_ms, s.max_ms, s.min_us,
                 s.us_per_conn);
  }
  std::fprintf(
      out,
      " create id: Engine::connect (rdma_create_id, handshake timer, rdma_resolve_addr issued); resolve "
      "route: to rdma_connect\n"
      " issued (core slot, QP created, receives posted); connect: rdma_connect to ESTABLISHED with the "
      "rdmagate handshake;\n"
      " first echo: ESTABLISHED to the verified answer; full connect: create id to the verified answer\n");
  std::fprintf(out, " setup: %" PRIu64 " of %" PRIu64 " connections verified in %.3f s = %.1f connections/s",
               c.verified, c.requested, c.setup_s, c.per_s());
  std::fprintf(out, "; teardown %.3f s\n", c.teardown_s);
  for (const Row& w : r.rows) {
    if (w.errors_by_status.empty() && w.mismatches == 0) continue;
    std::fprintf(out, " errors:");
    for (const auto& [k, v] : w.errors_by_status) std::fprintf(out, " %s=%" PRIu64, k.c_str(), v);
    if (w.mismatches != 0) std::fprintf(out, " mismatches=%" PRIu64, w.mismatches);
    std::fprintf(out, "\n");
  }
  if (!r.error.empty()) std::fprintf(out, " FAILED: %s\n", r.error.c_str());
  std::fprintf(out, " result: %s (errors %" PRIu64 ", mismatches %" PRIu64 ")\n", r.ok() ? "OK" : "FAILED",
               r.errors(), r.mismatches());
}

}  // namespace

void print_table(std::FILE* out, const Report& r) {
  const Options& o = r.options;
  if (o.mode == Mode::kConnect) {
    print_connect(out, r);
    return;
  }
  const char* line =
      "------------------------------------------------------------------------------------------------------"
      "-----------------------------";
  std::fprintf(out, "%s\n", line);
  std::fprintf(out, " rdmagate-bench %s", mode_name(o.mode));
  if (o.mode == Mode::kMixed) std::fprintf(out, " (GET ratio %.2f)", o.ratio);
  std::fprintf(out, "  server %s:%u  device %s  connections %u  qd %u  cores %zu%s\n", o.server.c_str(),
               o.port, o.device.empty() ? "-" : o.device.c_str(), o.connections, o.qd, o.lcores.size(),
               idle_note(o).c_str());
  if (o.iterations != 0) {
    std::fprintf(out, " iterations %" PRIu64 " per size", o.iterations);
  } else {
    std::fprintf(out, " duration %.1f s per size", o.duration_s);
  }
  std::fprintf(
      out, "  warm-up %.1f s  verify %s  MB = 2^20 bytes\n", o.warmup_s,
      uses_client(o.mode) ? (o.verify ? "on" : "off") : (o.mode == Mode::kEcho ? "always (echo)" : "n/a"));
  std::fprintf(out,
               " t_* columns: ROUND TRIP in microseconds (request sent to answer received); perftest's *_lat "
               "print one-way (half)\n");
  std::fprintf(out, "%s\n", line);
  std::fprintf(out, " %10s %11s %10s %10s %12s %10s %11s %10s %10s %10s %12s %7s %10s\n", "#bytes",
               "#iterations", "t_min[us]", "t_max[us]", "t_typical[us]", "t_avg[us]", "t_stdev[us]",
               "99%[us]", "99.9%[us]", "MB/s", "ops/s", "errors", "mismatches");
  for (const Row& w : r.rows) {
    std::fprintf(out, " %10" PRIu64 " %11" PRIu64, w.size, w.ops);
    const Latency& l = w.latency;
    if (l.valid) {
      std::fprintf(out, " %10.2f %10.2f %12.2f %10.2f %11.2f %10.2f %10.2f", l.min_us, l.max_us, l.p50_us,
                   l.avg_us, l.stdev_us, l.p99_us, l.p999_us);
    } else if (l.avg_us > 0) {
      std::fprintf(out, " %10s %10s %12s %10.2f %11s %10s %10s", "-", "-", "-", l.avg_us, "-", "-", "-");
    } else {
      std::fprintf(out, " %10s %10s %12s %10s %11s %10s %10s", "-", "-", "-", "-", "-", "-", "-");
    }
    std::fprintf(out, " %10.2f %12.1f %7" PRIu64 " %10" PRIu64 "%s\n", w.mb_per_s(), w.ops_per_s(), w.errors,
                 w.mismatches, w.interrupted ? "  (interrupted)" : "");
  }
  std::fprintf(out, "%s\n", line);
  for (const Row& w : r.rows) {
    if (w.errors_by_status.empty() && w.mismatches == 0) continue;
    std::fprintf(out, " %" PRIu64 " B:", w.size);
    for (const auto& [k, v] : w.errors_by_status) std::fprintf(out, " %s=%" PRIu64, k.c_str(), v);
    if (w.mismatches != 0) {
      std::fprintf(out, " mismatches: wrong_size=%" PRIu64 " wrong_bytes=%" PRIu64, w.wrong_size,
                   w.mismatches - w.wrong_size);
    }
    std::fprintf(out, "\n");
  }
  if (o.mode == Mode::kEcho) {
    bool any_invalid = false;
    for (const Row& w : r.rows) any_invalid |= !w.latency.valid;
    if (any_invalid) {
      std::fprintf(out,
                   " echo: percentiles need one connection per core (-q/--connections <= --cores); "
                   "t_avg is requests in flight / throughput\n");
    }
  }
  if (!r.error.empty()) std::fprintf(out, " FAILED: %s\n", r.error.c_str());
  std::fprintf(out, " result: %s (errors %" PRIu64 ", mismatches %" PRIu64 ")\n", r.ok() ? "OK" : "FAILED",
               r.errors(), r.mismatches());
}

std::string to_json(const Report& r, const RunInfo& info) {
  using nlohmann::json;
  const Options& o = r.options;
  json j;
  j["tool"] = "rdmagate-bench";
  j["version"] = info.version;
  j["timestamp"] = info.timestamp;
  j["host"] = info.host;
  j["device"] = o.device;
  j["command"] = info.command;
  j["latency"] = "round_trip";  // perftest's *_lat report one-way: half of these
  j["mb"] = 1048576;

  // Every setting after defaults and the preset: enough to run it again.
  json s;
  s["mode"] = mode_name(o.mode);
  s["preset"] = preset_name(info.preset);
  s["server"] = o.server;
  s["port"] = o.port;
  s["device"] = o.device;
  s["sizes"] = o.sizes;
  s["all_sizes"] = info.all_sizes;
  s["connections"] = o.connections;
  s["qd"] = o.qd;
  s["iterations"] = o.iterations;  // 0: duration_s applies
  s["duration_s"] = o.duration_s;
  s["warmup_s"] = o.warmup_s;
  s["keys"] = o.keys;  // 0: derived per size (each row has the count it used)
  s["ratio"] = o.ratio;
  s["cores"] = o.lcores.size();
  s["lcores"] = info.lcores_map;
  s["data_lcores"] = o.lcores;
  s["progress"] = uses_client(o.mode) ? json(client_progress_name(o.client_progress)) : json(nullptr);
  s["yield"] = o.idle == BenchIdle::kYield;
  s["idle"] = bench_idle_name(o.idle);
  s["idle_event_after_us"] = o.idle_event_after_us;
  s["verify"] = o.verify;
  s["max_message"] = o.max_message;
  s["connect_timeout_s"] = o.connect_timeout_s;
  s["quiet"] = !o.progress;
  s["json"] = info.json_path;
  j["settings"] = s;

  json rows = json::array();
  for (const Row& w : r.rows) {
    json x;
    x["size"] = w.size;
    x["ops"] = w.ops;
    x["gets"] = w.gets;
    x["puts"] = w.puts;
    x["keys"] = w.keys;
    x["bytes"] = w.bytes;
    x["seconds"] = w.seconds;
    x["ops_per_s"] = w.ops_per_s();
    x["mb_per_s"] = w.mb_per_s();
    x["errors"] = w.errors;
    x["mismatches"] = w.mismatches;
    x["mismatches_wrong_size"] = w.wrong_size;
    x["errors_by_status"] = w.errors_by_status;
    x["interrupted"] = w.interrupted;
    const Latency& l = w.latency;
    json lat;
    lat["avg_us"] = l.avg_us > 0 ? json(l.avg_us) : json(nullptr);
    for (const auto& [k, v] :
         {std::pair{"min_us", l.min_us}, std::pair{"stdev_us", l.stdev_us}, std::pair{"p50_us", l.p50_us},
          std::pair{"p99_us", l.p99_us}, std::pair{"p999_us", l.p999_us}, std::pair{"max_us", l.max_us}}) {
      lat[k] = l.valid ? json(v) : json(nullptr);
    }
    x["latency"] = lat;
    rows.push_back(x);
  }
  j["rows"] = rows;
  if (o.mode == Mode::kConnect) {
    const ConnectResult& c = r.connect;
    json steps = json::array();
    for (const StepTime& st : c.steps) {
      steps.push_back({{"step", st.name},
                       {"connections", st.connections},
                       {"total_ms", st.total_ms},
                       {"max_ms", st.max_ms},
                       {"min_us", st.min_us},
                       {"us_per_conn", st.us_per_conn}});
    }
    j["connect"] = {{"requested", c.requested},       {"verified", c.verified},     {"setup_s", c.setup_s},
                    {"connections_per_s", c.per_s()}, {"teardown_s", c.teardown_s}, {"steps", steps}};
  }
  j["errors"] = r.errors();
  j["mismatches"] = r.mismatches();
  j["ok"] = r.ok();
  if (!r.error.empty()) j["error"] = r.error;
  return j.dump(2);
}

}  // namespace rdmagate::bench

#pragma once
// rdmagate-bench's engine room, a library so that guest tests run exactly the code the tool runs
// (tests/rdma/bench_verify_test.cpp). The tool's main (rdmagate_bench.cpp) parses the command line, probes
// RDMA, brings EAL up and calls run(); everything here expects EAL to be initialised already.
//
// Modes:
//   connect      connection setup rate: an engine opens N connections at once (full rdmagate handshake), the
//                echo service verifies one 64 B round trip on each, then all are closed; every step of every
//                connection is timed from the engine's state changes (EngineConfig::on_state_change), and
//                reported as cmtime reports its steps.
//   echo, sink   an active control::Engine whose cores run dataplane::EchoClientService (opcode kEcho, or
//                kSink one-way): the gateway's transport with no client library in between. Every echo
//                answer is verified byte by byte by the service.
//   put, get,    the client library (client/client.hpp), async: connections x qd slots, each slot keeps one
//   mixed        request in flight and its completion callback (on a client core) issues the slot's next
//                request. mixed draws GET with probability `ratio`. get and mixed first PUT every key; after
//                each size every key is DELETEd (the next size starts from an empty key space).
//
// --verify: every PUT value is self-describing (fill_value: the first 8 bytes are a seed naming the key, the
// rest derived from seed and offset) and every GET checks every byte (check_value) and the size. A mismatch
// is counted, never fatal; the tool exits non-zero when any was seen.
//
// Latency: round trips, in log-linear histograms of TSC ticks (histogram.hpp), one per lcore (put/get/mixed)
// or per echo client service, merged after each size. Echo percentiles need one connection per core; sink has
// no latency.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "tools/bench/bench_options.hpp"
#include "tools/bench/histogram.hpp"

namespace rdmagate::bench {

// Keys used when Options::keys is 0: about 32 MiB of values, between 16 and 10000 keys.
std::uint64_t auto_keys(std::uint64_t size) noexcept;

// The --verify value format. seed = key << 24 | (generation & 0xffffff), generation >= 1.
std::uint64_t make_seed(std::uint64_t key, std::uint32_t generation) noexcept;
void fill_value(std::span<std::byte> value, std::uint64_t seed) noexcept;
// True if `value` is exactly what fill_value wrote for some seed naming `key` (needs >= 8 bytes).
bool check_value(std::span<const std::byte> value, std::uint64_t key) noexcept;
inline constexpr std::size_t kMinVerifySize = 8;
// "b-" and 12 hex digits: fixed length, so the key never costs an allocation.
inline constexpr std::size_t kKeyLength = 14;
void format_key(std::uint64_t key, char (&out)[kKeyLength]) noexcept;

// Round-trip times (request sent to answer received), in microseconds. valid: from a histogram of every
// measured request; otherwise avg_us alone may be set (echo with several connections per core: Little's law).
struct Latency {
  bool valid = false;
  double min_us = 0, avg_us = 0, stdev_us = 0, p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
};
Latency latency_of(const Histogram& h, double us_per_tick) noexcept;

struct Row {
  std::uint64_t size = 0;
  std::uint64_t ops = 0;  // successful operations in the measured interval
  std::uint64_t gets = 0, puts = 0;
  std::uint64_t bytes = 0;  // payload bytes moved by those operations
  double seconds = 0;
  std::uint64_t errors = 0;      // failed operations (statuses other than ok), prefill and warm-up included
  std::uint64_t mismatches = 0;  // verification failures (wrong bytes, size, or echo answer)
  std::uint64_t wrong_size = 0;  // the mismatches whose size was wrong (the rest: wrong bytes)
  std::uint64_t keys = 0;
  Latency latency;
  std::map<std::string, std::uint64_t> errors_by_status;
  bool interrupted = false;
  double ops_per_s() const noexcept { return seconds > 0 ? static_cast<double>(ops) / seconds : 0.0; }
  // MB = 2^20 bytes, as perftest's MB/sec.
  double mb_per_s() const noexcept {
    return seconds > 0 ? static_cast<double>(bytes) / seconds / 1048576.0 : 0.0;
  }
};

// connect: one step of a connection's setup or teardown, as cmtime reports it. total: from the first
// connection entering the step to the last leaving it (connections go through their steps concurrently);
// max and min over the connections; us_per_conn = total / connections (cmtime's "us / conn").
struct StepTime {
  std::string name;
  std::uint64_t connections = 0;  // that went through the step
  double total_ms = 0, max_ms = 0, min_us = 0, us_per_conn = 0;
};

struct ConnectResult {
  std::uint64_t requested = 0;
  std::uint64_t verified = 0;  // connections that came up and answered their echo, verified
  double setup_s = 0;          // first connect call to the last verified answer
  double teardown_s = 0;       // close of all to the last destroyed
  std::vector<StepTime> steps;
  double per_s() const noexcept { return setup_s > 0 ? static_cast<double>(verified) / setup_s : 0.0; }
};

struct Report {
  Options options;
  std::vector<Row> rows;
  ConnectResult connect;  // Mode::kConnect
  std::string error;      // setup failure (then rows may be incomplete)
  std::uint64_t errors() const noexcept;
  std::uint64_t mismatches() const noexcept;
  bool ok() const noexcept { return error.empty() && errors() == 0 && mismatches() == 0; }
};

// Validates the options against the mode (message sizes, verify size floor, ...). Empty string when fine.
std::string validate(const Options& o);

// Runs every size. EAL must be up and o.lcores name free worker lcores. False (and report->error) when the
// benchmark could not run; true when it ran (check report->ok() for errors and mismatches).
bool run(const Options& o, Report* report);

// What the JSON says about the run besides the results: where, when, by which build, and the settings the
// command line gave that Options does not hold.
struct RunInfo {
  std::string version;    // version_string()
  std::string timestamp;  // UTC, ISO 8601 ("2026-12-06T04:05:06Z"), when the run started
  std::string host;       // gethostname()
  std::string command;    // the command line as given
  Preset preset = Preset::kNone;
  bool all_sizes = false;
  std::string lcores_map;  // the EAL --lcores map the bench ran with
  std::string json_path;
};

void print_table(std::FILE* out, const Report& r);
std::string to_json(const Report& r, const RunInfo& info);

}  // namespace rdmagate::bench

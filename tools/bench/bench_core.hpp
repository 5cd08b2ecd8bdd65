#pragma once
// rdmagate-bench's engine room, a library so that guest tests run exactly the code the tool runs
// (tests/rdma/bench_verify_test.cpp). The tool's main (rdmagate_bench.cpp) parses the command line, probes
// RDMA, brings EAL up and calls run(); everything here expects EAL to be initialised already.
//
// Modes:
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
// Latency: per-lcore log-linear histograms of TSC ticks (Histogram), merged after each size. Echo latency
// comes from the service's own 1 us histogram and needs one connection per core; sink has none.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::bench {

enum class Mode : std::uint8_t { kEcho = 0, kSink = 1, kPut = 2, kGet = 3, kMixed = 4 };
const char* mode_name(Mode m) noexcept;
bool parse_mode(std::string_view s, Mode* out) noexcept;
inline bool uses_client(Mode m) noexcept {
  return m == Mode::kPut || m == Mode::kGet || m == Mode::kMixed;
}

struct Options {
  Mode mode = Mode::kGet;
  std::string server;  // gateway address (IPv4/IPv6 literal)
  std::uint16_t port = 7471;
  std::vector<std::uint64_t> sizes{4096};
  std::uint32_t connections = 1;
  std::uint32_t qd = 1;          // requests in flight per connection
  double duration_s = 5.0;       // per size; ignored when iterations != 0
  // Operations issued per size (0: run for duration_s); the count also takes in the completions of the
  // requests in flight when the measurement began.
  std::uint64_t iterations = 0;
  double warmup_s = 1.0;         // per size, not measured
  std::uint64_t keys = 0;        // key-space size; 0: derived from the size (auto_keys)
  double ratio = 0.5;            // mixed: fraction of GETs
  std::vector<unsigned> lcores;  // data-plane lcores (EAL workers), one per core
  std::string device;            // empty: the only device
  bool yield = false;            // IdlePolicy::kYield on the bench's cores (shared CPUs)
  bool verify = false;
  bool progress = true;              // a line per second on stderr
  std::uint32_t max_message = 4096;  // inline threshold offered (client) / message size floor (echo)
  double connect_timeout_s = 20.0;
  const std::atomic<bool>* interrupt = nullptr;  // set (e.g. by SIGINT): end the current size early, stop
};

// Keys used when Options::keys is 0: about 32 MiB of values, between 16 and 10000 keys.
std::uint64_t auto_keys(std::uint64_t size) noexcept;

// Log-linear histogram of unsigned values (TSC ticks): exact below 128, then 64 sub-buckets per power of
// two (relative error below 1/64). Single writer; merge() after the writers stopped.
class Histogram {
 public:
  static constexpr unsigned kSub = 64;
  static constexpr std::size_t kBuckets = kSub * 59;

  void record(std::uint64_t v) noexcept {
    ++buckets_[index(v)];
    ++count_;
    sum_ += v;
    if (v > max_) max_ = v;
  }
  void merge(const Histogram& o) noexcept;
  void clear() noexcept;
  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t max() const noexcept { return max_; }
  double mean() const noexcept {
    return count_ == 0 ? 0.0 : static_cast<double>(sum_) / static_cast<double>(count_);
  }
  // The value at quantile q (0..1]: the midpoint of the bucket holding it (exact below 128); max for q >= 1.
  std::uint64_t quantile(double q) const noexcept;

  static std::size_t index(std::uint64_t v) noexcept {
    if (v < 2 * kSub) return static_cast<std::size_t>(v);
    const unsigned msb = 63u - static_cast<unsigned>(__builtin_clzll(v));
    const unsigned e = msb - 6;  // v >> e is in [64, 128)
    return std::size_t{kSub} * (e + 1) + static_cast<std::size_t>((v >> e) - kSub);
  }
  static std::uint64_t bucket_mid(std::size_t i) noexcept {
    if (i < 2 * kSub) return i;
    const unsigned e = static_cast<unsigned>(i / kSub) - 1;
    const std::uint64_t m = i % kSub + kSub;
    return (m << e) + ((std::uint64_t{1} << e) >> 1);
  }

 private:
  std::array<std::uint64_t, kBuckets> buckets_{};
  std::uint64_t count_ = 0, sum_ = 0, max_ = 0;
};

// The --verify value format. seed = key << 24 | (generation & 0xffffff), generation >= 1.
std::uint64_t make_seed(std::uint64_t key, std::uint32_t generation) noexcept;
void fill_value(std::span<std::byte> value, std::uint64_t seed) noexcept;
// True if `value` is exactly what fill_value wrote for some seed naming `key` (needs >= 8 bytes).
bool check_value(std::span<const std::byte> value, std::uint64_t key) noexcept;
inline constexpr std::size_t kMinVerifySize = 8;
// "b-" and 12 hex digits: fixed length, so the key never costs an allocation.
inline constexpr std::size_t kKeyLength = 14;
void format_key(std::uint64_t key, char (&out)[kKeyLength]) noexcept;

struct Latency {
  bool valid = false;
  double avg_us = 0, p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
};

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

struct Report {
  Options options;
  std::vector<Row> rows;
  std::string error;  // setup failure (then rows may be incomplete)
  std::uint64_t errors() const noexcept;
  std::uint64_t mismatches() const noexcept;
  bool ok() const noexcept { return error.empty() && errors() == 0 && mismatches() == 0; }
};

// Validates the options against the mode (message sizes, verify size floor, ...). Empty string when fine.
std::string validate(const Options& o);

// Runs every size. EAL must be up and o.lcores name free worker lcores. False (and report->error) when the
// benchmark could not run; true when it ran (check report->ok() for errors and mismatches).
bool run(const Options& o, Report* report);

void print_table(std::FILE* out, const Report& r);
std::string to_json(const Report& r);

}  // namespace rdmagate::bench

#pragma once
// rdmagate-bench's command line: modes, the run settings (Options), the parser, presets and the default
// lcore placement. Free of DPDK, verbs and the client library, so that host tests check it without RDMA
// (tools/bench/bench_options_test.cpp). The runs themselves are bench_core.hpp's.

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::bench {

// kConnect: connection setup rate (cmtime's measure): -n N connections opened at once, each verified usable
// by one echo round trip, then closed; steps timed as cmtime times them.
enum class Mode : std::uint8_t { kEcho = 0, kSink = 1, kPut = 2, kGet = 3, kMixed = 4, kConnect = 5 };
const char* mode_name(Mode m) noexcept;
bool parse_mode(std::string_view s, Mode* out) noexcept;
inline bool uses_client(Mode m) noexcept {
  return m == Mode::kPut || m == Mode::kGet || m == Mode::kMixed;
}

// How put/get/mixed drive the client library (client::Progress): the bench's default is the high-rate mode.
enum class ClientProgress : std::uint8_t { kEalLcores = 0, kThread = 1, kCaller = 2 };
const char* client_progress_name(ClientProgress p) noexcept;  // "eal", "thread", "caller"

// What the bench's cores do when they find no work (--idle; dataplane::IdlePolicy's kBusy, kYield, kEvent).
// kEvent applies to echo, sink and connect only: the client library's cores busy-poll or yield.
enum class BenchIdle : std::uint8_t { kBusy = 0, kYield = 1, kEvent = 2 };
const char* bench_idle_name(BenchIdle i) noexcept;  // "busy", "yield", "event"

struct Options {
  Mode mode = Mode::kGet;
  std::string server;  // gateway address (IPv4/IPv6 literal)
  std::uint16_t port = 7471;
  std::vector<std::uint64_t> sizes{4096};
  std::uint32_t connections = 1;
  std::uint32_t qd = 1;     // requests in flight per connection
  double duration_s = 5.0;  // per size; ignored when iterations != 0
  // Operations issued per size (0: run for duration_s); the count also takes in the completions of the
  // requests in flight when the measurement began.
  std::uint64_t iterations = 0;
  double warmup_s = 1.0;         // per size, not measured
  std::uint64_t keys = 0;        // key-space size; 0: derived from the size (auto_keys)
  double ratio = 0.5;            // mixed: fraction of GETs
  std::vector<unsigned> lcores;  // data-plane lcores (EAL workers), one per core
  std::string device;            // empty: the only device
  BenchIdle idle = BenchIdle::kBusy;  // --idle; --yield is --idle yield (shared CPUs)
  std::uint32_t idle_event_after_us = 1000;  // --idle-event-after: idle time before an event core sleeps
  bool verify = false;
  ClientProgress client_progress = ClientProgress::kEalLcores;
  bool progress = true;              // a line per second on stderr
  std::uint32_t max_message = 4096;  // inline threshold offered (client) / message size floor (echo)
  double connect_timeout_s = 20.0;
  // Authentication (protocol 1.2): the principal and the secrets file (the gateway's YAML format) holding its
  // secret; both or neither. Every mode authenticates with them when the gateway asks.
  std::string principal;
  std::string secrets_file;
  // put/get/mixed: a memory window per chunked request (the client's default); false: registration keys.
  bool memory_windows = true;
  const std::atomic<bool>* interrupt = nullptr;  // set (e.g. by SIGINT): end the current size early, stop
};

// Presets fill what the command line left unset, so that one word reproduces a figure of the README's
// performance table (docs/bench.md has the table of values).
enum class Preset : std::uint8_t { kNone = 0, kLatency = 1, kBandwidth = 2 };
const char* preset_name(Preset p) noexcept;

// -a: every power of two from 2 B up to this (perftest goes to 8 MiB; the gateway's default
// store.max_value_bytes is 4 MiB, and echo/sink payloads must fit the inline message).
inline constexpr std::uint64_t kAllSizesMaxValue = 4u << 20;

// connect: connections opened when -n is not given (cmtime's default), and the payload of the one echo that
// proves each usable.
inline constexpr std::uint32_t kConnectDefaultConnections = 100;
inline constexpr std::uint64_t kConnectEchoBytes = 64;
inline constexpr std::uint32_t kMaxConnections = 4096;  // -q, and -n in connect mode

// Everything the command line decided, after defaults and the preset.
struct Cli {
  Options bench;
  unsigned cores = 1;      // data-plane cores of the bench
  std::string lcores_map;  // --lcores as given; empty: default_lcores() at startup
  std::string json_path;   // --json: empty none, "-" stdout
  Preset preset = Preset::kNone;
  bool all_sizes = false;  // -a
};

enum class CliAction : std::uint8_t { kRun = 0, kHelp = 1, kVersion = 2, kUsageError = 3 };

struct CliParse {
  CliAction action = CliAction::kUsageError;
  Cli cli;
  std::string error;  // kUsageError: one line naming the flag (without the program name)
};

// Defaults the environment provides (RDMAGATE_RXE_ADDR, RDMAGATE_RXE_DEV): passed in so that the parser
// stays a pure function of its arguments.
struct CliEnv {
  std::string server;
  std::string device;
};

// Parses argv (argv[0] is the program name) with getopt_long. Never prints, never exits; resets getopt's
// state first, so it can run more than once per process (tests).
CliParse parse_cli(int argc, char* const* argv, const CliEnv& env);

std::string usage_text();
// "rdmagate-bench <project version>" and the latency convention, one line each.
std::string version_text();
std::string version_string();

// ---- where the bench's threads run ------------------------------------------------------------------------

// The gateway's defaults (conf/rdmagate.yaml): eal.main_lcore 0 runs its control thread, dataplane.cores [1]
// its busy-polling core. The bench stays off both when the machine has CPUs to spare.
inline constexpr unsigned kGatewayControlCpu = 0;
inline constexpr unsigned kGatewayCoreCpu = 1;

struct LcorePlan {
  std::string map;                    // an EAL --lcores value: lcore 0 (main) first, then lcores 1..cores
  bool shares_main = false;           // a data-plane lcore runs on the main lcore's CPU
  bool on_gateway_core = false;       // a data-plane lcore runs on kGatewayCoreCpu
  bool main_on_gateway_core = false;  // the (sleeping) main lcore runs on kGatewayCoreCpu
  std::string note;                   // why, when the plan had to share (empty otherwise)
};

// The default placement over the CPUs this process may run on (sched_getaffinity), ascending: the main lcore
// and every data-plane lcore on CPUs of their own outside the gateway's defaults when there are enough.
// Otherwise the data-plane lcores take the spare CPUs, then the gateway's control CPU, the gateway's core
// last, and the main lcore (event-driven: it sleeps until a connection event or its next deadline) takes a
// CPU none of them uses: it never shares a polling lcore's CPU while the process has two CPUs or more.
LcorePlan default_lcores(unsigned cores, const std::vector<unsigned>& allowed_cpus);

// A user's --lcores map checked the same way: the main lcore is the lowest lcore id (EAL's default), the
// data-plane lcores are the others. A map it cannot read gives an empty plan (EAL reports the error).
struct LcoreCheck {
  bool parsed = false;
  bool shares_main = false;
  bool on_gateway_core = false;
  std::vector<unsigned> shared_cpus;  // CPUs a data-plane lcore shares with the main lcore
};
LcoreCheck check_lcores(const std::string& map);

// The warning for a user map that shares (empty when it does not): the exact --lcores to use instead, or,
// when this machine has no CPU to spare, --yield.
std::string lcores_warning(const std::string& map, unsigned cores, bool yield,
                           const std::vector<unsigned>& allowed_cpus);

}  // namespace rdmagate::bench

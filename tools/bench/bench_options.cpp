// rdmagate-bench's command line (bench_options.hpp).
//
// getopt_long from libc, not a hand-written loop: it is what perftest itself parses with, so `-s 64`,
// `-s64`, `--size 64`, `--size=64`, clustered flags (`-aF`), unambiguous prefixes (`--dur 3`) and options
// after the positional MODE behave exactly as a perftest user expects, and the one hand-written loop this
// replaces accepted none of `--x=v`, short flags or clusters.
#include "tools/bench/bench_options.hpp"

#include <getopt.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "daemon/gateway_cli.hpp"
#include "protocol/wire_constants.hpp"

namespace rdmagate::bench {

const char* mode_name(Mode m) noexcept {
  switch (m) {
    case Mode::kEcho:
      return "echo";
    case Mode::kSink:
      return "sink";
    case Mode::kPut:
      return "put";
    case Mode::kGet:
      return "get";
    case Mode::kMixed:
      return "mixed";
    case Mode::kConnect:
      return "connect";
  }
  return "?";
}

bool parse_mode(std::string_view s, Mode* out) noexcept {
  for (Mode m : {Mode::kEcho, Mode::kSink, Mode::kPut, Mode::kGet, Mode::kMixed, Mode::kConnect}) {
    if (s == mode_name(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

const char* preset_name(Preset p) noexcept {
  switch (p) {
    case Preset::kNone:
      return "none";
    case Preset::kLatency:
      return "lat";
    case Preset::kBandwidth:
      return "bw";
  }
  return "?";
}

const char* bench_idle_name(BenchIdle i) noexcept {
  switch (i) {
    case BenchIdle::kYield:
      return "yield";
    case BenchIdle::kEvent:
      return "event";
    case BenchIdle::kBusy:
      break;
  }
  return "busy";
}

const char* client_progress_name(ClientProgress p) noexcept {
  switch (p) {
    case ClientProgress::kEalLcores:
      return "eal";
    case ClientProgress::kThread:
      return "thread";
    case ClientProgress::kCaller:
      return "caller";
  }
  return "?";
}

std::string version_string() {
  return std::string(control::version_string());
}

std::string version_text() {
  return "rdmagate-bench " + version_string() +
         "\nlatency columns are round trip (request sent to answer received); perftest's *_lat print "
         "one-way\n";
}

std::string usage_text() {
  return "usage: rdmagate-bench MODE [ADDR] [options]      (MODE and ADDR may come anywhere)\n"
         "  MODE                     echo | sink (engine + echo client, inline payloads) | put | get | "
         "mixed\n"
         "                           | connect (setup rate: -n connections opened at once, each verified by\n"
         "                           one echo, then closed; steps timed as cmtime times them)\n"
         "  ADDR, --server ADDR      gateway address (default: $RDMAGATE_RXE_ADDR when set)\n"
         "\n"
         "perftest's letters, where the meaning matches:\n"
         "  -s, --size, --sizes LIST value/payload sizes, one result row each: 64,4096,1m (k/m: KiB/MiB); "
         "4096\n"
         "  -a, --all                every power of two from 2 B: to 4 MiB (put/get/mixed; from 8 B with\n"
         "                           --verify), to the inline message (echo/sink)\n"
         "  -n, --iterations, --iters N  measured operations per size instead of a duration; connect: the\n"
         "                           connections to open (100, as cmtime's -c)\n"
         "  -D, --duration S         measured seconds per size (5)\n"
         "  -q, --connections, --qp N    connections, each one RC queue pair (1)\n"
         "  -t, --qd, --tx-depth N   requests in flight per connection (1)\n"
         "  -d, --device, --ib-dev NAME  RDMA device (default: $RDMAGATE_RXE_DEV, else the only one)\n"
         "  -p, --port P             gateway rdma_cm port (7471; perftest's default 18515 is not ours)\n"
         "  -c, --connection RC      RC only: rdmagate's connections are reliable-connected QPs\n"
         "  -R, --rdma_cm            accepted, no effect: rdmagate always connects through rdma_cm\n"
         "  -F, --CPU-freq           accepted, no effect: the bench never checks the CPU frequency governor\n"
         "  -V, --version            print the version\n"
         "  -h, --help               this text\n"
         "\n"
         "rdmagate's own (long only; perftest has no such flag or uses the letter otherwise):\n"
         "  --preset lat|bw          lat: 64 B, 1 connection, qd 1; bw: echo/sink 64 B qd 64, put/get/mixed\n"
         "                           1 MiB qd 8, 1 connection. Flags given explicitly win over the preset\n"
         "  --warmup S               unmeasured seconds per size before measuring (1)\n"
         "  --keys N                 key space (default: about 32 MiB of values, 16..10000 keys)\n"
         "  --ratio R                mixed: fraction of GETs (0.5)\n"
         "  --cores N                data-plane cores of the bench (1)\n"
         "  --progress MODE          put/get/mixed: how the client library runs: eal (pinned polling EAL\n"
         "                           lcores, the default), thread (its own unpinned thread) or caller (this\n"
         "                           thread polls); thread and caller run one core\n"
         "  --lcores L               EAL --lcores map, e.g. 0@0,1@2: the lowest lcore is the main (control)\n"
         "                           thread, the others the data-plane cores (default: off the gateway's\n"
         "                           default CPUs 0 and 1 when there are CPUs to spare; see docs/bench.md)\n"
         "  --idle POLICY            what a bench core does when it finds no work: busy (the default), "
         "yield\n"
         "                           (sched_yield: shared CPUs, e.g. the 2-vCPU guest) or event (echo, sink\n"
         "                           and connect: sleep on the completion channel after 1 ms idle, as the\n"
         "                           gateway's dataplane.idle_policy event)\n"
         "  --idle-event-after US    --idle event: the idle time before a core sleeps (1000; the gateway's\n"
         "                           dataplane.idle_event_after_us)\n"
         "  --yield                  --idle yield\n"
         "  --verify                 self-describing values; every GET checks every byte\n"
         "  --max-message B          inline threshold offered to the gateway (4096)\n"
         "  --connect-timeout S      (20)\n"
         "  --principal NAME         authenticate as NAME when the gateway requires it (with "
         "--secrets-file)\n"
         "  --secrets-file PATH      YAML secrets file in the gateway's format holding NAME's secret (mode\n"
         "                           0600: group and others no bit); connect mode then times the AUTH too\n"
         "  --no-memory-windows      put/get/mixed: hand the gateway registration keys instead of a memory\n"
         "                           window per request (to measure what the windows cost)\n"
         "  --json FILE|-            also write the results as JSON (-: JSON on stdout instead of the "
         "table)\n"
         "  --quiet                  no progress lines\n"
         "\n"
         "Latency is round trip (request sent to answer received); perftest's *_lat tools print one-way\n"
         "(half the round trip). MB = 2^20 bytes. Exit codes: 0 ok; 1 errors, mismatches or a setup "
         "failure;\n"
         "2 usage; 77 no RDMA device here.\n";
}

namespace {

bool parse_u64(const char* s, std::uint64_t* out) {
  if (s == nullptr || *s == '\0' || *s == '-') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s) return false;
  std::uint64_t mul = 1;
  const std::string suffix(end);
  if (suffix == "k" || suffix == "K" || suffix == "KiB")
    mul = 1024;
  else if (suffix == "m" || suffix == "M" || suffix == "MiB")
    mul = 1024 * 1024;
  else if (!suffix.empty())
    return false;
  if (v > UINT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

bool parse_double(const char* s, double* out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

bool parse_sizes(const std::string& s, std::vector<std::uint64_t>* out) {
  out->clear();
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = s.find(',', pos);
    const std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    std::uint64_t v;
    if (!parse_u64(item.c_str(), &v)) return false;
    out->push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return !out->empty();
}

// getopt_long values of the long-only options (above any character).
enum LongOnly : int {
  kOptServer = 256,
  kOptPreset,
  kOptWarmup,
  kOptKeys,
  kOptRatio,
  kOptCores,
  kOptLcores,
  kOptYield,
  kOptIdle,
  kOptIdleEventAfter,
  kOptVerify,
  kOptMaxMessage,
  kOptConnectTimeout,
  kOptJson,
  kOptQuiet,
  kOptProgress,
  kOptPrincipal,
  kOptSecretsFile,
  kOptNoMemoryWindows,
};

constexpr char kShortOpts[] = ":s:an:D:q:t:d:p:c:RFVh";

const option kLongOpts[] = {
    {"size", required_argument, nullptr, 's'},
    {"sizes", required_argument, nullptr, 's'},
    {"all", no_argument, nullptr, 'a'},
    {"iterations", required_argument, nullptr, 'n'},
    {"iters", required_argument, nullptr, 'n'},
    {"duration", required_argument, nullptr, 'D'},
    {"connections", required_argument, nullptr, 'q'},
    {"qp", required_argument, nullptr, 'q'},
    {"qd", required_argument, nullptr, 't'},
    {"tx-depth", required_argument, nullptr, 't'},
    {"device", required_argument, nullptr, 'd'},
    {"ib-dev", required_argument, nullptr, 'd'},
    {"port", required_argument, nullptr, 'p'},
    {"connection", required_argument, nullptr, 'c'},
    {"rdma_cm", no_argument, nullptr, 'R'},
    {"CPU-freq", no_argument, nullptr, 'F'},
    {"version", no_argument, nullptr, 'V'},
    {"help", no_argument, nullptr, 'h'},
    {"server", required_argument, nullptr, kOptServer},
    {"preset", required_argument, nullptr, kOptPreset},
    {"warmup", required_argument, nullptr, kOptWarmup},
    {"keys", required_argument, nullptr, kOptKeys},
    {"ratio", required_argument, nullptr, kOptRatio},
    {"cores", required_argument, nullptr, kOptCores},
    {"lcores", required_argument, nullptr, kOptLcores},
    {"yield", no_argument, nullptr, kOptYield},
    {"idle", required_argument, nullptr, kOptIdle},
    {"idle-event-after", required_argument, nullptr, kOptIdleEventAfter},
    {"verify", no_argument, nullptr, kOptVerify},
    {"max-message", required_argument, nullptr, kOptMaxMessage},
    {"connect-timeout", required_argument, nullptr, kOptConnectTimeout},
    {"json", required_argument, nullptr, kOptJson},
    {"quiet", no_argument, nullptr, kOptQuiet},
    {"progress", required_argument, nullptr, kOptProgress},
    {"principal", required_argument, nullptr, kOptPrincipal},
    {"secrets-file", required_argument, nullptr, kOptSecretsFile},
    {"no-memory-windows", no_argument, nullptr, kOptNoMemoryWindows},
    {nullptr, 0, nullptr, 0},
};

// How an option is named in messages: "-s/--size", "--warmup".
std::string flag_name(int val) {
  for (const option& o : kLongOpts) {
    if (o.name == nullptr) break;
    if (o.val != val) continue;
    if (val < 256) return std::string("-") + static_cast<char>(val) + "/--" + o.name;
    return std::string("--") + o.name;
  }
  return "-" + std::string(1, static_cast<char>(val));
}

// Sizes for -a: powers of two from `from` up to `to`.
std::vector<std::uint64_t> powers_of_two(std::uint64_t from, std::uint64_t to) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t s = from; s <= to; s *= 2) v.push_back(s);
  return v;
}

std::uint64_t largest_power_of_two_at_most(std::uint64_t n) {
  std::uint64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

CliParse parse_cli(int argc, char* const* argv, const CliEnv& env) {
  CliParse r;
  Cli& c = r.cli;
  Options& o = c.bench;
  o.server = env.server;
  o.device = env.device;
  std::set<int> given;  // the options the command line set (a preset fills only the others)
  auto fail = [&](std::string msg) {
    r.action = CliAction::kUsageError;
    r.error = std::move(msg);
    return r;
  };

  optind = 0;  // glibc: 0 re-initialises getopt completely (tests parse more than once per process)
  opterr = 0;  // our messages, not getopt's
  bool help = false, version = false;
  std::string server_flag;
  for (;;) {
    int idx = -1;
    const int ch = getopt_long(argc, argv, kShortOpts, kLongOpts, &idx);
    if (ch == -1) break;
    if (ch == ':') return fail("option " + flag_name(optopt) + " needs a value");
    if (ch == '?') {
      if (optopt != 0 && optopt < 256 && std::strchr(kShortOpts + 1, optopt) == nullptr) {
        return fail("unknown option -" + std::string(1, static_cast<char>(optopt)) + "");
      }
      if (optopt != 0) return fail("option " + flag_name(optopt) + " takes no value");
      return fail("unknown or ambiguous option " + std::string(argv[optind - 1]) + "");
    }
    given.insert(ch);
    const char* v = optarg;
    std::uint64_t u = 0;
    auto bad = [&] { return fail("bad value '" + std::string(v) + "' for " + flag_name(ch)); };
    switch (ch) {
      case 's':
        if (!parse_sizes(v, &o.sizes)) return bad();
        break;
      case 'a':
        c.all_sizes = true;
        break;
      case 'n':
        if (!parse_u64(v, &o.iterations) || o.iterations == 0) return bad();
        break;
      case 'D':
        if (!parse_double(v, &o.duration_s) || !(o.duration_s > 0)) return bad();
        break;
      case 'q':
        if (!parse_u64(v, &u) || u == 0 || u > kMaxConnections) return bad();
        o.connections = static_cast<std::uint32_t>(u);
        break;
      case 't':
        if (!parse_u64(v, &u) || u == 0 || u > 4096) return bad();
        o.qd = static_cast<std::uint32_t>(u);
        break;
      case 'd':
        if (*v == '\0') return bad();
        o.device = v;
        break;
      case 'p':
        if (!parse_u64(v, &u) || u == 0 || u > 65535) return bad();
        o.port = static_cast<std::uint16_t>(u);
        break;
      case 'c':
        if (std::strcmp(v, "RC") != 0 && std::strcmp(v, "rc") != 0) {
          return fail("-c/--connection " + std::string(v) +
                      ": rdmagate connects RC (reliable-connected) queue pairs only");
        }
        break;
      case 'R':
      case 'F':
        break;
      case 'V':
        version = true;
        break;
      case 'h':
        help = true;
        break;
      case kOptServer:
        if (*v == '\0') return bad();
        server_flag = v;
        break;
      case kOptPreset:
        if (std::strcmp(v, "lat") == 0) {
          c.preset = Preset::kLatency;
        } else if (std::strcmp(v, "bw") == 0) {
          c.preset = Preset::kBandwidth;
        } else {
          return fail("--preset " + std::string(v) + ": lat or bw");
        }
        break;
      case kOptWarmup:
        if (!parse_double(v, &o.warmup_s) || o.warmup_s < 0) return bad();
        break;
      case kOptKeys:
        if (!parse_u64(v, &o.keys) || o.keys == 0 || o.keys >= (1ull << 40)) return bad();
        break;
      case kOptRatio:
        if (!parse_double(v, &o.ratio) || o.ratio < 0 || o.ratio > 1) return bad();
        break;
      case kOptCores:
        if (!parse_u64(v, &u) || u == 0 || u >= 64) return bad();
        c.cores = static_cast<unsigned>(u);
        break;
      case kOptLcores:
        if (*v == '\0') return bad();
        c.lcores_map = v;
        break;
      case kOptYield:
        o.idle = BenchIdle::kYield;
        break;
      case kOptIdle:
        if (std::strcmp(v, "busy") == 0) {
          o.idle = BenchIdle::kBusy;
        } else if (std::strcmp(v, "yield") == 0) {
          o.idle = BenchIdle::kYield;
        } else if (std::strcmp(v, "event") == 0) {
          o.idle = BenchIdle::kEvent;
        } else {
          return fail("--idle " + std::string(v) + ": busy, yield or event");
        }
        break;
      case kOptIdleEventAfter:
        if (!parse_u64(v, &u) || u == 0 || u > 10'000'000) return bad();
        o.idle_event_after_us = static_cast<std::uint32_t>(u);
        break;
      case kOptVerify:
        o.verify = true;
        break;
      case kOptMaxMessage:
        if (!parse_u64(v, &u) || u < 64 || u > (1u << 20)) return bad();
        o.max_message = static_cast<std::uint32_t>(u);
        break;
      case kOptConnectTimeout:
        if (!parse_double(v, &o.connect_timeout_s) || !(o.connect_timeout_s > 0)) return bad();
        break;
      case kOptJson:
        if (*v == '\0') return bad();
        c.json_path = v;
        break;
      case kOptQuiet:
        o.progress = false;
        break;
      case kOptProgress:
        if (std::strcmp(v, "eal") == 0) {
          o.client_progress = ClientProgress::kEalLcores;
        } else if (std::strcmp(v, "thread") == 0) {
          o.client_progress = ClientProgress::kThread;
        } else if (std::strcmp(v, "caller") == 0) {
          o.client_progress = ClientProgress::kCaller;
        } else {
          return fail("--progress " + std::string(v) + ": eal, thread or caller");
        }
        break;
      case kOptPrincipal:
        if (*v == '\0') return bad();
        o.principal = v;
        break;
      case kOptSecretsFile:
        if (*v == '\0') return bad();
        o.secrets_file = v;
        break;
      case kOptNoMemoryWindows:
        o.memory_windows = false;
        break;
      default:
        return fail("unhandled option " + flag_name(ch));
    }
  }
  if (help) {
    r.action = CliAction::kHelp;
    return r;
  }
  if (o.principal.empty() != o.secrets_file.empty()) {
    return fail(o.principal.empty() ? "--secrets-file needs --principal (whose secret to use)"
                                    : "--principal needs --secrets-file (where its secret is)");
  }
  if (version) {
    r.action = CliAction::kVersion;
    return r;
  }

  // Positionals (getopt moved them to the end): the MODE, and optionally the gateway's address as perftest
  // takes its server's.
  bool have_mode = false;
  std::string server_pos;
  for (int i = optind; i < argc; ++i) {
    const std::string a = argv[i];
    Mode m;
    if (!have_mode && parse_mode(a, &m)) {
      o.mode = m;
      have_mode = true;
    } else if (server_pos.empty() && a.find_first_of(".:") != std::string::npos) {
      server_pos = a;
    } else if (!have_mode) {
      return fail("unknown mode '" + a + "' (echo, sink, put, get, mixed, connect)");
    } else {
      return fail("unexpected argument '" + a + "' (one MODE and at most one ADDR)");
    }
  }
  if (!have_mode) return fail("no MODE given (echo, sink, put, get, mixed, connect)");
  if (!server_pos.empty() && !server_flag.empty() && server_pos != server_flag) {
    return fail("two gateway addresses: " + server_pos + " and --server " + server_flag);
  }
  if (!server_flag.empty()) o.server = server_flag;
  if (!server_pos.empty()) o.server = server_pos;
  if (o.server.empty())
    return fail("no gateway address: give ADDR or --server ADDR (or set RDMAGATE_RXE_ADDR)");

  if (o.mode != Mode::kMixed && given.count(kOptRatio) != 0) return fail("--ratio applies to mixed only");
  if (given.count(kOptProgress) != 0 && !uses_client(o.mode)) {
    return fail("--progress applies to put, get and mixed (echo and sink drive the engine directly)");
  }
  if (given.count(kOptIdle) != 0 && given.count(kOptYield) != 0)
    return fail("--idle and --yield exclude each other");
  if (given.count(kOptIdleEventAfter) != 0 && o.idle != BenchIdle::kEvent)
    return fail("--idle-event-after applies to --idle event");
  if (o.idle == BenchIdle::kEvent && uses_client(o.mode)) {
    return fail(
        "--idle event applies to echo, sink and connect (the client library's cores busy-poll or yield)");
  }
  if (given.count(kOptNoMemoryWindows) != 0 && !uses_client(o.mode)) {
    return fail("--no-memory-windows applies to put, get and mixed (the client library's keys)");
  }
  if (o.client_progress != ClientProgress::kEalLcores && c.cores != 1) {
    return fail("--progress " + std::string(client_progress_name(o.client_progress)) +
                " runs one core: --cores 1 (eal for more)");
  }
  if (c.all_sizes && given.count('s') != 0) return fail("-a/--all and -s/--size exclude each other");
  if (given.count('n') != 0 && given.count('D') != 0) {
    return fail("-n/--iterations and -D/--duration exclude each other");
  }

  if (o.mode == Mode::kConnect) {
    // One question, one number: how fast connections come up. Sizes, durations, depths and presets belong
    // to the traffic modes.
    for (const int f : {int{'s'}, int{'a'}, int{'D'}, int{'q'}, int{'t'}, int{kOptPreset}, int{kOptWarmup},
                        int{kOptKeys}, int{kOptVerify}}) {
      if (given.count(f) != 0) {
        return fail(flag_name(f) + " does not apply to connect (-n N: the connections to open)");
      }
    }
    if (given.count('n') != 0) {
      if (o.iterations > kMaxConnections) {
        return fail("-n/--iterations " + std::to_string(o.iterations) + ": connect opens at most " +
                    std::to_string(kMaxConnections) + " connections");
      }
      o.connections = static_cast<std::uint32_t>(o.iterations);
    } else {
      o.connections = kConnectDefaultConnections;
    }
    o.iterations = 0;
    o.sizes = {kConnectEchoBytes};
    o.warmup_s = 0;
    r.action = CliAction::kRun;
    return r;
  }

  const bool inline_only = !uses_client(o.mode);
  if (c.preset != Preset::kNone) {
    const bool lat = c.preset == Preset::kLatency;
    if (given.count('s') == 0 && !c.all_sizes) o.sizes = {lat || inline_only ? 64u : 1u << 20};
    if (given.count('q') == 0) o.connections = 1;
    if (given.count('t') == 0) o.qd = lat ? 1 : (inline_only ? 64 : 8);
  }
  if (c.all_sizes) {
    if (inline_only) {
      const std::uint64_t room =
          o.max_message > protocol::kHeaderSize ? o.max_message - protocol::kHeaderSize : 0;
      if (room < 2) return fail("-a/--all: --max-message leaves no room for an inline payload");
      o.sizes = powers_of_two(2, largest_power_of_two_at_most(room));
    } else {
      o.sizes = powers_of_two(o.verify ? 8 : 2, kAllSizesMaxValue);
    }
  }
  r.action = CliAction::kRun;
  return r;
}

// ---- lcores
// ---------------------------------------------------------------------------------------------------

namespace {

bool contains(const std::vector<unsigned>& v, unsigned x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// One EAL lcore-set or cpu-set: "3", "2-4" or "(1,3-5)". False when it is none of these.
bool parse_set(std::string_view s, std::vector<unsigned>* out) {
  if (s.size() >= 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
  if (s.empty()) return false;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = s.find(',', pos);
    const std::string item(
        s.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    const std::size_t dash = item.find('-');
    std::uint64_t a = 0, b = 0;
    if (dash == std::string::npos) {
      if (!parse_u64(item.c_str(), &a) || item.find_first_not_of("0123456789") != std::string::npos)
        return false;
      b = a;
    } else {
      const std::string l = item.substr(0, dash), h = item.substr(dash + 1);
      if (l.empty() || h.empty() || l.find_first_not_of("0123456789") != std::string::npos ||
          h.find_first_not_of("0123456789") != std::string::npos || !parse_u64(l.c_str(), &a) ||
          !parse_u64(h.c_str(), &b) || b < a || b - a > 1024) {
        return false;
      }
    }
    for (std::uint64_t x = a; x <= b; ++x) out->push_back(static_cast<unsigned>(x));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return true;
}

std::string join_map(unsigned main_cpu, const std::vector<unsigned>& poller_cpus) {
  std::string m = "0@" + std::to_string(main_cpu);
  for (std::size_t i = 0; i < poller_cpus.size(); ++i) {
    m += "," + std::to_string(i + 1) + "@" + std::to_string(poller_cpus[i]);
  }
  return m;
}

}  // namespace

LcorePlan default_lcores(unsigned cores, const std::vector<unsigned>& allowed_cpus) {
  std::vector<unsigned> allowed = allowed_cpus;
  std::sort(allowed.begin(), allowed.end());
  allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
  if (allowed.empty()) allowed = {0};
  std::vector<unsigned> spare;  // off both of the gateway's default CPUs
  for (unsigned cpu : allowed) {
    if (cpu != kGatewayControlCpu && cpu != kGatewayCoreCpu) spare.push_back(cpu);
  }
  LcorePlan p;
  std::vector<unsigned> pollers;
  unsigned main_cpu = allowed[0];
  if (spare.size() >= cores + 1u) {
    main_cpu = spare[0];
    pollers.assign(spare.begin() + 1, spare.begin() + 1 + cores);
  } else if (allowed.size() >= 2) {
    // The pollers first, by preference: spare CPUs, the gateway's control CPU (its thread sleeps), the
    // gateway's core last. The main lcore sleeps until a connection event or its next deadline, so it takes
    // whatever CPU the pollers leave, the gateway's control CPU first: a poller never waits for it.
    std::vector<unsigned> pref = spare;
    for (unsigned cpu : {kGatewayControlCpu, kGatewayCoreCpu}) {
      if (contains(allowed, cpu)) pref.push_back(cpu);
    }
    const std::size_t n = std::min<std::size_t>(cores, pref.size() - 1);
    const std::vector<unsigned> poller_cpus(pref.begin(), pref.begin() + static_cast<std::ptrdiff_t>(n));
    const std::vector<unsigned> rest(pref.begin() + static_cast<std::ptrdiff_t>(n), pref.end());
    main_cpu = contains(rest, kGatewayControlCpu) ? kGatewayControlCpu : rest[0];
    for (unsigned i = 0; i < cores; ++i) pollers.push_back(poller_cpus[i % poller_cpus.size()]);
  } else {
    pollers.assign(cores, main_cpu);
  }
  p.map = join_map(main_cpu, pollers);
  p.shares_main = contains(pollers, main_cpu);
  p.on_gateway_core = contains(pollers, kGatewayCoreCpu);
  p.main_on_gateway_core = main_cpu == kGatewayCoreCpu;
  std::vector<unsigned> distinct = pollers;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const std::string cpus = std::to_string(allowed.size()) + " CPU(s)";
  if (p.shares_main) {
    p.note = "this process may use " + cpus + ": the data-plane core(s) share CPU " +
             std::to_string(main_cpu) + " with the main thread; add --yield, or give the bench a second CPU";
  } else if (distinct.size() < pollers.size()) {
    p.note = "this process may use " + cpus + ": " + std::to_string(cores) + " data-plane cores share " +
             std::to_string(distinct.size()) + " CPU(s), to keep the main thread on a CPU of its own";
  } else if (p.on_gateway_core) {
    p.note = "a data-plane core runs on CPU " + std::to_string(kGatewayCoreCpu) +
             ", the gateway's default core, if a gateway runs on this machine";
  } else if (p.main_on_gateway_core) {
    p.note = "the main thread (it sleeps until an event) runs on CPU " + std::to_string(kGatewayCoreCpu) +
             ", the gateway's default core, so that the bench's core has CPU " + std::to_string(pollers[0]) +
             " to itself beside the gateway's control thread";
  } else if (main_cpu == kGatewayControlCpu) {
    p.note = "the main thread shares CPU " + std::to_string(main_cpu) +
             " with the gateway's default control thread (both sleep until an event)";
  }
  return p;
}

LcoreCheck check_lcores(const std::string& map) {
  LcoreCheck c;
  // Top-level items split at commas outside parentheses: "lcores[@cpus]".
  std::vector<std::string> items;
  int depth = 0;
  std::string cur;
  for (char ch : map) {
    if (ch == '(') ++depth;
    if (ch == ')') --depth;
    if (ch == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  items.push_back(cur);
  std::vector<std::pair<unsigned, std::vector<unsigned>>> lcore_cpus;  // lcore -> the CPUs it may run on
  for (const std::string& item : items) {
    const std::size_t at = item.find('@');
    std::vector<unsigned> lc, cpus;
    if (!parse_set(std::string_view(item).substr(0, at), &lc)) return {};
    if (at == std::string::npos) {
      for (unsigned l : lc) lcore_cpus.push_back({l, {l}});  // "3": lcore 3 on CPU 3
      continue;
    }
    if (!parse_set(std::string_view(item).substr(at + 1), &cpus)) return {};
    for (unsigned l : lc) lcore_cpus.push_back({l, cpus});
  }
  if (lcore_cpus.empty()) return {};
  std::sort(lcore_cpus.begin(), lcore_cpus.end());
  c.parsed = true;
  const std::vector<unsigned>& main_cpus = lcore_cpus.front().second;
  for (std::size_t i = 1; i < lcore_cpus.size(); ++i) {
    for (unsigned cpu : lcore_cpus[i].second) {
      if (contains(main_cpus, cpu) && !contains(c.shared_cpus, cpu)) {
        c.shares_main = true;
        c.shared_cpus.push_back(cpu);
      }
      if (cpu == kGatewayCoreCpu) c.on_gateway_core = true;
    }
  }
  return c;
}

std::string lcores_warning(const std::string& map, unsigned cores, bool yield,
                           const std::vector<unsigned>& allowed_cpus) {
  const LcoreCheck c = check_lcores(map);
  if (!c.parsed || (!c.shares_main && !c.on_gateway_core)) return {};
  const LcorePlan d = default_lcores(cores, allowed_cpus);
  std::ostringstream w;
  w << "warning: --lcores " << map;
  if (c.shares_main) {
    w << " puts a data-plane (polling) lcore on CPU";
    for (unsigned cpu : c.shared_cpus) w << ' ' << cpu;
    w << ", the main (control) lcore's CPU: every control wakeup preempts the poller, and round trips grow "
         "by the scheduler's slices";
  }
  if (c.on_gateway_core) {
    w << (c.shares_main ? "; and" : " puts") << " a data-plane lcore on CPU " << kGatewayCoreCpu
      << ", the gateway's default core (conf/rdmagate.yaml dataplane.cores), if a gateway runs on this "
         "machine";
  }
  const bool default_better = (c.shares_main && !d.shares_main) || (c.on_gateway_core && !d.on_gateway_core);
  if (default_better) {
    w << ". Use --lcores " << d.map << " (the default here), or leave --lcores out";
  } else if (!yield) {
    w << ". This machine has no CPU to spare: add --yield so that the core gives its CPU up when idle";
  } else {
    return {};  // nothing better exists here, and the core already yields: the choice is deliberate
  }
  return w.str();
}

}  // namespace rdmagate::bench

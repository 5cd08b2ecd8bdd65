// rdmagate-bench's command line (bench_options.hpp) and reports (bench_report.cpp) on the host, no RDMA:
// perftest's short flags, long flags with a separate or an `=` value, unknown flags and missing values,
// presets against explicit flags, the default lcore placement and its warning, the table's columns and the
// JSON's fields.
#include "tools/bench/bench_options.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/bench/bench_core.hpp"

namespace {

using namespace rdmagate::bench;

// getopt permutes argv and keeps pointers into it: the strings live as long as the parse.
CliParse parse(std::initializer_list<const char*> args, CliEnv env = {}) {
  static std::vector<std::string> storage;
  static std::vector<char*> argv;
  storage.assign({"rdmagate-bench"});
  for (const char* a : args) storage.emplace_back(a);
  argv.clear();
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  return parse_cli(static_cast<int>(storage.size()), argv.data(), env);
}

TEST(BenchCli, PerftestShortFlags) {
  const CliParse p =
      parse({"get", "-s", "1m", "-n", "500", "-q", "3", "-t", "8", "-d", "rxe0", "-p", "7000", "10.0.0.1"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  const Options& o = p.cli.bench;
  EXPECT_EQ(o.mode, Mode::kGet);
  EXPECT_EQ(o.sizes, std::vector<std::uint64_t>{1u << 20});
  EXPECT_EQ(o.iterations, 500u);
  EXPECT_EQ(o.connections, 3u);
  EXPECT_EQ(o.qd, 8u);
  EXPECT_EQ(o.device, "rxe0");
  EXPECT_EQ(o.port, 7000);
  EXPECT_EQ(o.server, "10.0.0.1") << "the address as perftest takes its server's: positional";
}

TEST(BenchCli, AttachedShortValuesClustersAndDuration) {
  const CliParse p = parse({"-s64,4k", "-D2.5", "-RF", "-c", "RC", "echo", "--server", "::1"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  EXPECT_EQ(p.cli.bench.sizes, (std::vector<std::uint64_t>{64, 4096}));
  EXPECT_DOUBLE_EQ(p.cli.bench.duration_s, 2.5);
  EXPECT_EQ(p.cli.bench.mode, Mode::kEcho);
  EXPECT_EQ(p.cli.bench.server, "::1");
}

TEST(BenchCli, LongFlagsWithSpaceOrEquals) {
  for (const bool eq : {false, true}) {
    const CliParse p =
        eq ? parse({"mixed", "--server=1.2.3.4", "--sizes=4096", "--connections=2", "--qd=4", "--ratio=0.9",
                    "--warmup=0", "--keys=100", "--cores=2", "--json=-", "--max-message=8192", "--verify"})
           : parse({"mixed", "--server",      "1.2.3.4", "--sizes", "4096", "--connections",
                    "2",     "--qd",          "4",       "--ratio", "0.9",  "--warmup",
                    "0",     "--keys",        "100",     "--cores", "2",    "--json",
                    "-",     "--max-message", "8192",    "--verify"});
    ASSERT_EQ(p.action, CliAction::kRun) << (eq ? "=: " : "space: ") << p.error;
    const Options& o = p.cli.bench;
    EXPECT_EQ(o.server, "1.2.3.4");
    EXPECT_EQ(o.sizes, std::vector<std::uint64_t>{4096});
    EXPECT_EQ(o.connections, 2u);
    EXPECT_EQ(o.qd, 4u);
    EXPECT_DOUBLE_EQ(o.ratio, 0.9);
    EXPECT_DOUBLE_EQ(o.warmup_s, 0.0);
    EXPECT_EQ(o.keys, 100u);
    EXPECT_EQ(p.cli.cores, 2u);
    EXPECT_EQ(p.cli.json_path, "-");
    EXPECT_EQ(o.max_message, 8192u);
    EXPECT_TRUE(o.verify);
  }
}

TEST(BenchCli, PerftestLongNamesAndUnambiguousPrefixes) {
  const CliParse p = parse(
      {"put", "1.1.1.1", "--iters", "9", "--qp", "2", "--tx-depth=3", "--ib-dev", "mlx5_0", "--dur", "1"});
  // --iters and --dur together: the parser must refuse (both bound the run), which also shows --dur was
  // taken as --duration.
  ASSERT_EQ(p.action, CliAction::kUsageError);
  EXPECT_NE(p.error.find("exclude each other"), std::string::npos) << p.error;
  const CliParse q =
      parse({"put", "1.1.1.1", "--iters", "9", "--qp", "2", "--tx-depth=3", "--ib-dev", "mlx5_0"});
  ASSERT_EQ(q.action, CliAction::kRun) << q.error;
  EXPECT_EQ(q.cli.bench.iterations, 9u);
  EXPECT_EQ(q.cli.bench.connections, 2u);
  EXPECT_EQ(q.cli.bench.qd, 3u);
  EXPECT_EQ(q.cli.bench.device, "mlx5_0");
}

TEST(BenchCli, UnknownFlagsAndMissingValuesAreUsageErrors) {
  struct Case {
    std::vector<const char*> args;
    const char* want;  // a part of the message
  };
  const std::vector<Case> cases = {
      {{"get", "1.1.1.1", "--bogus"}, "unknown or ambiguous option --bogus"},
      {{"get", "1.1.1.1", "-z"}, "unknown option -z"},
      {{"get", "1.1.1.1", "-s"}, "-s/--size needs a value"},
      {{"get", "1.1.1.1", "--duration"}, "-D/--duration needs a value"},
      {{"get", "1.1.1.1", "--json"}, "--json needs a value"},
      {{"get", "1.1.1.1", "--yield=1"}, "--yield takes no value"},
      {{"echo", "1.1.1.1", "--idle", "spin"}, "--idle spin: busy, yield or event"},
      {{"echo", "1.1.1.1", "--idle", "event", "--yield"}, "--idle and --yield exclude each other"},
      {{"get", "1.1.1.1", "--idle", "event"}, "--idle event applies to echo, sink and connect"},
      {{"get", "1.1.1.1", "-q", "0"}, "bad value '0' for -q/--connections"},
      {{"get", "1.1.1.1", "-s", "12x"}, "bad value '12x' for -s/--size"},
      {{"get", "1.1.1.1", "-c", "UD"}, "RC (reliable-connected) queue pairs only"},
      {{"get", "1.1.1.1", "--preset", "fast"}, "--preset fast: lat or bw"},
      {{"get", "1.1.1.1", "--ratio", "0.3"}, "--ratio applies to mixed only"},
      {{"get", "1.1.1.1", "--progress", "poll"}, "--progress poll: eal, thread or caller"},
      {{"echo", "1.1.1.1", "--progress", "caller"}, "--progress applies to put, get and mixed"},
      {{"sink", "1.1.1.1", "--no-memory-windows"}, "--no-memory-windows applies to put, get and mixed"},
      {{"get", "1.1.1.1", "--progress=thread", "--cores", "2"}, "--progress thread runs one core"},
      {{"get", "1.1.1.1", "-a", "-s", "64"}, "exclude each other"},
      {{"1.1.1.1"}, "no MODE given"},
      {{"gett", "1.1.1.1"}, "unknown mode 'gett'"},
      {{"get"}, "no gateway address"},
      {{"get", "1.1.1.1", "2.2.2.2"}, "unexpected argument '2.2.2.2'"},
  };
  for (const Case& c : cases) {
    static std::vector<std::string> storage;
    std::vector<char*> argv;
    storage.assign({"rdmagate-bench"});
    for (const char* a : c.args) storage.emplace_back(a);
    for (std::string& s : storage) argv.push_back(s.data());
    argv.push_back(nullptr);
    const CliParse p = parse_cli(static_cast<int>(storage.size()), argv.data(), {});
    EXPECT_EQ(p.action, CliAction::kUsageError) << c.want;
    EXPECT_NE(p.error.find(c.want), std::string::npos) << "want '" << c.want << "' in '" << p.error << "'";
  }
}

TEST(BenchCli, HelpListsEveryFlagWithItsShortForm) {
  EXPECT_EQ(parse({"--help"}).action, CliAction::kHelp);
  EXPECT_EQ(parse({"-h"}).action, CliAction::kHelp);
  EXPECT_EQ(parse({"-V"}).action, CliAction::kVersion);
  EXPECT_EQ(parse({"--version"}).action, CliAction::kVersion);
  const std::string u = usage_text();
  for (const char* f :
       {"-s, --size",     "-a, --all",     "-n, --iterations", "-D, --duration",    "-q, --connections",
        "-t, --qd",       "-d, --device",  "-p, --port",       "-c, --connection",  "-R, --rdma_cm",
        "-F, --CPU-freq", "-V, --version", "-h, --help",       "--preset",          "--warmup",
        "--keys",         "--ratio",       "--cores",          "--lcores",          "--yield",
        "--idle",         "--verify",      "--max-message",    "--connect-timeout", "--json",
        "--quiet",        "--server",      "--principal",      "--secrets-file",    "--no-memory-windows"}) {
    EXPECT_NE(u.find(f), std::string::npos) << f << " missing from --help";
  }
  EXPECT_NE(u.find("--idle-event-after"), std::string::npos);
  EXPECT_NE(u.find("round trip"), std::string::npos);
  const std::string v = version_text();
  EXPECT_EQ(v.rfind("rdmagate-bench " + version_string(), 0), 0u) << v;
  EXPECT_FALSE(version_string().empty());
}

TEST(BenchCli, EnvironmentGivesServerAndDeviceDefaults) {
  const CliParse p = parse({"echo"}, CliEnv{"198.18.0.1", "rxe0"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  EXPECT_EQ(p.cli.bench.server, "198.18.0.1");
  EXPECT_EQ(p.cli.bench.device, "rxe0");
  const CliParse q = parse({"echo", "-d", "mlx5_1", "10.1.1.1"}, CliEnv{"198.18.0.1", "rxe0"});
  EXPECT_EQ(q.cli.bench.server, "10.1.1.1");
  EXPECT_EQ(q.cli.bench.device, "mlx5_1");
}

TEST(BenchCli, PresetsFillOnlyWhatTheCommandLineLeftUnset) {
  const CliParse lat = parse({"echo", "1.1.1.1", "--preset", "lat"});
  ASSERT_EQ(lat.action, CliAction::kRun) << lat.error;
  EXPECT_EQ(lat.cli.preset, Preset::kLatency);
  EXPECT_EQ(lat.cli.bench.sizes, std::vector<std::uint64_t>{64});
  EXPECT_EQ(lat.cli.bench.connections, 1u);
  EXPECT_EQ(lat.cli.bench.qd, 1u);

  const CliParse sink = parse({"sink", "1.1.1.1", "--preset=bw"});
  EXPECT_EQ(sink.cli.bench.sizes, std::vector<std::uint64_t>{64});
  EXPECT_EQ(sink.cli.bench.qd, 64u);

  const CliParse get = parse({"get", "1.1.1.1", "--preset", "bw"});
  EXPECT_EQ(get.cli.bench.sizes, std::vector<std::uint64_t>{1u << 20});
  EXPECT_EQ(get.cli.bench.qd, 8u);
  EXPECT_EQ(get.cli.bench.connections, 1u);

  // Explicit flags win, whichever side of --preset they are on.
  const CliParse mixed = parse({"get", "-t", "2", "1.1.1.1", "--preset", "bw", "-s", "4k", "-q", "4"});
  ASSERT_EQ(mixed.action, CliAction::kRun) << mixed.error;
  EXPECT_EQ(mixed.cli.bench.sizes, std::vector<std::uint64_t>{4096});
  EXPECT_EQ(mixed.cli.bench.qd, 2u);
  EXPECT_EQ(mixed.cli.bench.connections, 4u);
}

TEST(BenchCli, AllSizesArePowersOfTwoWithinTheModesLimit) {
  const CliParse get = parse({"get", "1.1.1.1", "-a"});
  ASSERT_EQ(get.action, CliAction::kRun) << get.error;
  const auto& s = get.cli.bench.sizes;
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.front(), 2u);
  EXPECT_EQ(s.back(), kAllSizesMaxValue);
  for (std::size_t i = 1; i < s.size(); ++i) EXPECT_EQ(s[i], 2 * s[i - 1]);
  EXPECT_EQ(parse({"get", "1.1.1.1", "-a", "--verify"}).cli.bench.sizes.front(), 8u)
      << "--verify needs 8 B for the seed";
  // echo: inline, 4096 B messages with a 40 B header: the largest power of two that fits is 2048.
  EXPECT_EQ(parse({"echo", "1.1.1.1", "-a"}).cli.bench.sizes.back(), 2048u);
  EXPECT_EQ(parse({"echo", "1.1.1.1", "-a", "--max-message", "8192"}).cli.bench.sizes.back(), 4096u);
}

TEST(BenchCli, ProgressModeOfTheClientLibrary) {
  EXPECT_EQ(parse({"get", "1.1.1.1"}).cli.bench.client_progress, ClientProgress::kEalLcores)
      << "the bench is a high-rate client by default";
  EXPECT_EQ(parse({"put", "1.1.1.1", "--progress", "thread"}).cli.bench.client_progress,
            ClientProgress::kThread);
  EXPECT_EQ(parse({"mixed", "1.1.1.1", "--progress=caller"}).cli.bench.client_progress,
            ClientProgress::kCaller);
  EXPECT_EQ(parse({"get", "1.1.1.1", "--progress", "eal", "--cores", "2"}).action, CliAction::kRun);
}

TEST(BenchCli, MemoryWindowsAreTheDefaultAndCanBeTurnedOff) {
  EXPECT_TRUE(parse({"get", "1.1.1.1"}).cli.bench.memory_windows);
  const CliParse p = parse({"put", "1.1.1.1", "--no-memory-windows"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  EXPECT_FALSE(p.cli.bench.memory_windows);
}

TEST(BenchCli, ConnectModeCountsConnectionsWithN) {
  CliParse p = parse({"connect", "198.18.0.1"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  EXPECT_EQ(p.cli.bench.mode, Mode::kConnect);
  EXPECT_EQ(p.cli.bench.connections, kConnectDefaultConnections) << "cmtime's default -c";
  EXPECT_EQ(p.cli.bench.iterations, 0u);
  EXPECT_EQ(p.cli.bench.sizes, std::vector<std::uint64_t>{kConnectEchoBytes});
  EXPECT_DOUBLE_EQ(p.cli.bench.warmup_s, 0.0);
  p = parse({"-n", "1000", "connect", "198.18.0.1", "--cores", "2", "--yield"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  EXPECT_EQ(p.cli.bench.connections, 1000u);
  EXPECT_EQ(p.cli.cores, 2u);
  EXPECT_EQ(p.cli.bench.idle, BenchIdle::kYield);
  p = parse({"connect", "198.18.0.1", "--idle", "event"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  EXPECT_EQ(p.cli.bench.idle, BenchIdle::kEvent);
  EXPECT_EQ(p.cli.bench.idle_event_after_us, 1000u) << "the gateway's dataplane.idle_event_after_us default";
  p = parse({"connect", "198.18.0.1", "--idle", "event", "--idle-event-after", "100"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  EXPECT_EQ(p.cli.bench.idle_event_after_us, 100u);
  for (const char* bad : {"0", "10000001", "x"}) {
    EXPECT_EQ(parse({"connect", "198.18.0.1", "--idle", "event", "--idle-event-after", bad}).action,
              CliAction::kUsageError)
        << bad;
  }
  const CliParse not_event = parse({"connect", "198.18.0.1", "--idle", "yield", "--idle-event-after", "100"});
  ASSERT_EQ(not_event.action, CliAction::kUsageError);
  EXPECT_NE(not_event.error.find("applies to --idle event"), std::string::npos) << not_event.error;
  p = parse({"get", "198.18.0.1", "--idle", "yield"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  EXPECT_EQ(p.cli.bench.idle, BenchIdle::kYield);
  p = parse({"get", "198.18.0.1", "--idle", "busy"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  EXPECT_EQ(p.cli.bench.idle, BenchIdle::kBusy);
  const CliParse big = parse({"connect", "1.1.1.1", "-n", "4097"});
  ASSERT_EQ(big.action, CliAction::kUsageError);
  EXPECT_NE(big.error.find("at most 4096"), std::string::npos) << big.error;
  // The traffic modes' knobs are refused by name, not silently ignored.
  for (const char* flag : {"-s", "-D", "-q", "-t", "--preset", "--warmup", "--keys"}) {
    const char* value = std::strcmp(flag, "--preset") == 0 ? "lat" : "4";
    const CliParse e = parse({"connect", "1.1.1.1", flag, value});
    ASSERT_EQ(e.action, CliAction::kUsageError) << flag;
    EXPECT_NE(e.error.find("does not apply to connect"), std::string::npos) << flag << ": " << e.error;
  }
  EXPECT_EQ(parse({"connect", "1.1.1.1", "--verify"}).action, CliAction::kUsageError);
  EXPECT_EQ(parse({"connect", "1.1.1.1", "-a"}).action, CliAction::kUsageError);
  EXPECT_NE(usage_text().find("connect"), std::string::npos);
}

TEST(BenchCli, CredentialsComeAsAPair) {
  CliParse p =
      parse({"connect", "1.1.1.1", "--principal", "bench", "--secrets-file", "/etc/rdmagate/s.yaml"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  EXPECT_EQ(p.cli.bench.principal, "bench");
  EXPECT_EQ(p.cli.bench.secrets_file, "/etc/rdmagate/s.yaml");
  p = parse({"get", "1.1.1.1", "--principal=bench"});
  ASSERT_EQ(p.action, CliAction::kUsageError);
  EXPECT_NE(p.error.find("--principal needs --secrets-file"), std::string::npos) << p.error;
  p = parse({"echo", "1.1.1.1", "--secrets-file", "s.yaml"});
  ASSERT_EQ(p.action, CliAction::kUsageError);
  EXPECT_NE(p.error.find("--secrets-file needs --principal"), std::string::npos) << p.error;
  EXPECT_EQ(parse({"echo", "1.1.1.1", "--principal", ""}).action, CliAction::kUsageError);
  EXPECT_TRUE(parse({"echo", "1.1.1.1"}).cli.bench.principal.empty());
}

TEST(BenchCli, ParsesAgainAfterAnotherParse) {
  ASSERT_EQ(parse({"get", "1.1.1.1", "--bogus"}).action, CliAction::kUsageError);
  const CliParse p = parse({"put", "1.1.1.1", "-s", "8"});
  ASSERT_EQ(p.action, CliAction::kRun) << p.error;
  EXPECT_EQ(p.cli.bench.sizes, std::vector<std::uint64_t>{8});
}

// ---- lcores

TEST(BenchLcores, DefaultsStayOffTheGatewaysCoresAndTheMainLcoresCpu) {
  // 4 CPUs: main on 2, the core on 3; nothing on the gateway's 0 and 1.
  LcorePlan p = default_lcores(1, {0, 1, 2, 3});
  EXPECT_EQ(p.map, "0@2,1@3");
  EXPECT_FALSE(p.shares_main);
  EXPECT_FALSE(p.on_gateway_core);
  EXPECT_FALSE(p.main_on_gateway_core);
  EXPECT_TRUE(p.note.empty()) << p.note;
  // 3 CPUs: the core takes the spare CPU, the main lcore sleeps beside the gateway's control thread.
  p = default_lcores(1, {0, 1, 2});
  EXPECT_EQ(p.map, "0@0,1@2");
  EXPECT_FALSE(p.shares_main);
  // 2 CPUs (the guest): the core gets CPU 0 (beside the gateway's sleeping control thread), the sleeping main
  // lcore CPU 1; never the main lcore on the core's CPU, never the core on the gateway's core.
  p = default_lcores(1, {0, 1});
  EXPECT_EQ(p.map, "0@1,1@0");
  EXPECT_FALSE(p.shares_main);
  EXPECT_FALSE(p.on_gateway_core);
  EXPECT_TRUE(p.main_on_gateway_core);
  EXPECT_NE(p.note.find("CPU 1"), std::string::npos) << p.note;
  // Two cores on 8 CPUs, and a restricted affinity mask (taskset -c 4-7).
  EXPECT_EQ(default_lcores(2, {0, 1, 2, 3, 4, 5, 6, 7}).map, "0@2,1@3,2@4");
  EXPECT_EQ(default_lcores(1, {4, 5, 6, 7}).map, "0@4,1@5");
  // Three cores on 4 CPUs: the cores take 2, 3 and the gateway's control CPU; the main lcore the rest.
  p = default_lcores(3, {0, 1, 2, 3});
  EXPECT_EQ(p.map, "0@1,1@2,2@3,3@0");
  EXPECT_FALSE(p.shares_main);
  EXPECT_FALSE(p.on_gateway_core);
  // More cores than CPUs besides the main lcore's: the cores share among themselves, never the main's CPU.
  p = default_lcores(2, {0, 1});
  EXPECT_EQ(p.map, "0@1,1@0,2@0");
  EXPECT_FALSE(p.shares_main);
  EXPECT_NE(p.note.find("share"), std::string::npos) << p.note;
  // A mask without the gateway's control CPU ({1, 2}): the core on 2, the main lcore on 1.
  EXPECT_EQ(default_lcores(1, {1, 2}).map, "0@1,1@2");
  // One CPU only: everything there, and the note says what to do.
  p = default_lcores(1, {3});
  EXPECT_EQ(p.map, "0@3,1@3");
  EXPECT_TRUE(p.shares_main);
  EXPECT_NE(p.note.find("--yield"), std::string::npos) << p.note;
  // Every allowed set from one to six CPUs and one to four cores: with two CPUs or more the main lcore
  // never shares a data-plane lcore's CPU.
  for (unsigned ncpu = 1; ncpu <= 6; ++ncpu) {
    std::vector<unsigned> cpus;
    for (unsigned c = 0; c < ncpu; ++c) cpus.push_back(c);
    for (unsigned cores = 1; cores <= 4; ++cores) {
      const LcorePlan d = default_lcores(cores, cpus);
      EXPECT_EQ(d.shares_main, ncpu == 1) << ncpu << " CPUs, " << cores << " cores: " << d.map;
      EXPECT_EQ(check_lcores(d.map).shares_main, d.shares_main) << d.map;
    }
  }
}

TEST(BenchLcores, ReadsEalMaps) {
  LcoreCheck c = check_lcores("0@0,1@0");
  ASSERT_TRUE(c.parsed);
  EXPECT_TRUE(c.shares_main);
  EXPECT_EQ(c.shared_cpus, std::vector<unsigned>{0});
  c = check_lcores("0@2,1@3");
  ASSERT_TRUE(c.parsed);
  EXPECT_FALSE(c.shares_main);
  EXPECT_FALSE(c.on_gateway_core);
  c = check_lcores("0,1");  // lcore N on CPU N: the old default, a core on the gateway's CPU 1
  ASSERT_TRUE(c.parsed);
  EXPECT_FALSE(c.shares_main);
  EXPECT_TRUE(c.on_gateway_core);
  c = check_lcores("(0-1)@(2,3),2@3");  // the main lcore (0) may run on 2 or 3, lcore 2 on 3
  ASSERT_TRUE(c.parsed);
  EXPECT_TRUE(c.shares_main);
  EXPECT_EQ(c.shared_cpus, (std::vector<unsigned>{2, 3})) << "lcore 1 shares 2 and 3, lcore 2 shares 3";
  EXPECT_FALSE(check_lcores("zero@one").parsed);
}

TEST(BenchLcores, WarningNamesTheExactFix) {
  const std::string w = lcores_warning("0@2,1@2", 1, false, {0, 1, 2, 3});
  EXPECT_NE(w.find("CPU 2"), std::string::npos) << w;
  EXPECT_NE(w.find("Use --lcores 0@2,1@3"), std::string::npos) << w;
  const std::string g = lcores_warning("0@0,1@1", 1, false, {0, 1, 2, 3});
  EXPECT_NE(g.find("gateway's default core"), std::string::npos) << g;
  EXPECT_NE(g.find("Use --lcores 0@2,1@3"), std::string::npos) << g;
  // 2 CPUs: the old default (the core on the main lcore's CPU) gets the new one as its fix, --yield or not.
  for (const bool yield : {false, true}) {
    const std::string two = lcores_warning("0@0,1@0", 1, yield, {0, 1});
    EXPECT_NE(two.find("main (control) lcore's CPU"), std::string::npos) << two;
    EXPECT_NE(two.find("Use --lcores 0@1,1@0"), std::string::npos) << two;
  }
  // 1 CPU: no better map exists; without --yield the fix is --yield, with it there is nothing to say.
  const std::string y = lcores_warning("0@3,1@3", 1, false, {3});
  EXPECT_NE(y.find("add --yield"), std::string::npos) << y;
  EXPECT_TRUE(lcores_warning("0@3,1@3", 1, true, {3}).empty());
  EXPECT_TRUE(lcores_warning("0@2,1@3", 1, false, {0, 1, 2, 3}).empty());
}

// ---- reports

Report sample_report() {
  Report r;
  r.options.mode = Mode::kEcho;
  r.options.server = "198.18.0.1";
  r.options.device = "rxe0";
  r.options.sizes = {64};
  r.options.lcores = {1};
  Histogram h;
  for (std::uint64_t v : {100u, 200u, 300u}) h.record(v);
  Row row;
  row.size = 64;
  row.ops = 3;
  row.seconds = 1;
  row.latency = latency_of(h, 0.5);  // 2 ticks per microsecond
  r.rows.push_back(row);
  return r;
}

TEST(BenchReport, LatencyHasPerftestsStatistics) {
  const Latency l = sample_report().rows[0].latency;
  ASSERT_TRUE(l.valid);
  EXPECT_DOUBLE_EQ(l.min_us, 50.0);
  EXPECT_DOUBLE_EQ(l.max_us, 150.0);
  EXPECT_DOUBLE_EQ(l.avg_us, 100.0);
  EXPECT_NEAR(l.stdev_us, 40.8248, 1e-3);  // population stdev of 50, 100, 150
  EXPECT_NEAR(l.p50_us, 100.0, 100.0 / 64) << "within a bucket's width";
}

TEST(BenchReport, TableHasPerftestsColumnsAndSaysRoundTrip) {
  char* buf = nullptr;
  std::size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  ASSERT_NE(f, nullptr);
  print_table(f, sample_report());
  std::fclose(f);
  const std::string t(buf, len);
  std::free(buf);
  for (const char* col : {"#bytes", "#iterations", "t_min[us]", "t_max[us]", "t_typical[us]", "t_avg[us]",
                          "t_stdev[us]", "99%[us]", "99.9%[us]", "MB/s", "ops/s", "ROUND TRIP", "one-way"}) {
    EXPECT_NE(t.find(col), std::string::npos) << col << " missing from\n" << t;
  }
}

TEST(BenchReport, JsonCarriesVersionDeviceTimeHostAndEverySetting) {
  RunInfo info;
  info.version = version_string();
  info.timestamp = "2026-12-06T04:05:06Z";
  info.host = "guest";
  info.command = "rdmagate-bench echo -s 64";
  info.preset = Preset::kLatency;
  info.lcores_map = "0@0,1@0";
  const nlohmann::json echo = nlohmann::json::parse(to_json(sample_report(), info));
  EXPECT_TRUE(echo.at("settings").at("progress").is_null()) << "echo does not use the client library";
  Report get = sample_report();
  get.options.mode = Mode::kGet;
  get.options.client_progress = ClientProgress::kThread;
  EXPECT_EQ(nlohmann::json::parse(to_json(get, info)).at("settings").at("progress"), "thread");
  const nlohmann::json j = nlohmann::json::parse(to_json(sample_report(), info));
  EXPECT_EQ(j.at("version"), version_string());
  EXPECT_EQ(j.at("device"), "rxe0");
  EXPECT_EQ(j.at("timestamp"), "2026-12-06T04:05:06Z");
  EXPECT_EQ(j.at("host"), "guest");
  EXPECT_EQ(j.at("latency"), "round_trip");
  const nlohmann::json& s = j.at("settings");
  for (const char* k : {"mode",        "preset",
                        "server",      "port",
                        "device",      "sizes",
                        "all_sizes",   "connections",
                        "qd",          "iterations",
                        "duration_s",  "warmup_s",
                        "keys",        "ratio",
                        "cores",       "lcores",
                        "data_lcores", "progress",
                        "yield",       "verify",
                        "max_message", "connect_timeout_s",
                        "quiet",       "json"}) {
    EXPECT_TRUE(s.contains(k)) << "settings." << k << " missing";
  }
  EXPECT_EQ(s.at("idle_event_after_us"), 1000) << "--idle-event-after's default";
  EXPECT_EQ(s.at("preset"), "lat");
  EXPECT_EQ(s.at("lcores"), "0@0,1@0");
  const nlohmann::json& lat = j.at("rows").at(0).at("latency");
  for (const char* k : {"min_us", "max_us", "p50_us", "avg_us", "stdev_us", "p99_us", "p999_us"}) {
    ASSERT_TRUE(lat.contains(k)) << k;
    EXPECT_TRUE(lat.at(k).is_number()) << k;
  }
  EXPECT_DOUBLE_EQ(lat.at("min_us").get<double>(), 50.0);
  EXPECT_TRUE(j.at("ok").get<bool>());
}

}  // namespace

// The rdmagate command line (daemon/gateway_cli.*): modes, repeatable --set, and clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "daemon/gateway_cli.hpp"

namespace {

using namespace rdmagate::control;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

CliParse parse(std::initializer_list<const char*> args) {
  std::vector<std::string> store{"rdmagate"};
  store.insert(store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : store) argv.push_back(s.data());
  argv.push_back(nullptr);
  return parse_cli(static_cast<int>(store.size()), argv.data());
}

TEST(Cli, ConfigRuns) {
  const CliParse r = parse({"--config", "/etc/rdmagate/rdmagate.yaml"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.options.mode, CliMode::kRun);
  EXPECT_EQ(r.options.config_path, "/etc/rdmagate/rdmagate.yaml");
  EXPECT_FALSE(r.options.config_path_is_default);
  EXPECT_THAT(r.options.overrides, IsEmpty());
}

TEST(Cli, NoConfigRunsTheDefaultPath) {
  for (const CliParse& r : {parse({}), parse({"--set", "logging.level=debug"})}) {
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.options.mode, CliMode::kRun);
    EXPECT_EQ(r.options.config_path, "/etc/rdmagate/rdmagate.yaml");
    EXPECT_TRUE(r.options.config_path_is_default);
  }
  EXPECT_THAT(usage_text("rdmagate"), HasSubstr("(default /etc/rdmagate/rdmagate.yaml)"));
}

TEST(Cli, CheckConfigPrintsOnlyWhenAsked) {
  const CliParse quiet = parse({"--check-config", "x.yaml"});
  ASSERT_TRUE(quiet.ok) << quiet.error;
  EXPECT_FALSE(quiet.options.print_config);
  const CliParse printed = parse({"--print", "--check-config", "x.yaml"});
  ASSERT_TRUE(printed.ok) << printed.error;
  EXPECT_EQ(printed.options.mode, CliMode::kCheckConfig);
  EXPECT_TRUE(printed.options.print_config);
}

TEST(Cli, EqualsFormAndRepeatedSetKeepOrder) {
  const CliParse r = parse({"--set", "dataplane.cores=1-3", "--config=x.yaml", "--set=logging.level=debug",
                            "--set", "dataplane.cores=2"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.options.config_path, "x.yaml");
  EXPECT_THAT(r.options.overrides,
              ElementsAre("dataplane.cores=1-3", "logging.level=debug", "dataplane.cores=2"));
}

TEST(Cli, SetValueMayContainEqualsAndYaml) {
  const CliParse r = parse({"--check-config", "x.yaml", "--set", "listen.addresses=[\"::1\", \"a=b\"]"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.options.mode, CliMode::kCheckConfig);
  EXPECT_THAT(r.options.overrides, ElementsAre("listen.addresses=[\"::1\", \"a=b\"]"));
}

TEST(Cli, VersionAndHelp) {
  EXPECT_EQ(parse({"--version"}).options.mode, CliMode::kVersion);
  EXPECT_EQ(parse({"--help"}).options.mode, CliMode::kHelp);
  EXPECT_EQ(parse({"-h"}).options.mode, CliMode::kHelp);
  // Help wins over everything else, so "--config x --help" explains rather than starts.
  const CliParse r = parse({"--config", "x.yaml", "--help"});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.options.mode, CliMode::kHelp);
  EXPECT_THAT(version_text(), HasSubstr("rdmagate "));
  EXPECT_FALSE(version_string().empty());
  const std::string u = usage_text("rdmagate");
  for (const char* opt : {"--config FILE", "--check-config FILE", "--print", "--host-cpus LIST", "--no-host",
                          "--set KEY=VALUE", "--version", "-h, --help"}) {
    EXPECT_THAT(u, HasSubstr(opt));
  }
  // Every long option the parser takes is in the help (the usage lines and the option list).
  for (const char* opt : {"\n  --config", "\n  --check-config", "\n  --print", "\n  --host-cpus",
                          "\n  --no-host", "\n  --set", "\n  --version", "\n  -h, --help"}) {
    EXPECT_THAT(u, HasSubstr(opt)) << opt << " is not described";
  }
  EXPECT_THAT(u, HasSubstr("[--host-cpus LIST | --no-host]"));
  // The exit codes a supervisor keys on.
  EXPECT_THAT(u, HasSubstr("78 configuration error"));
  // The help is read where the binary is installed, without the source tree.
  EXPECT_THAT(u, Not(HasSubstr("README")));
  EXPECT_THAT(u, Not(HasSubstr(".md")));
  EXPECT_THAT(u, Not(HasSubstr("conf/")));
  EXPECT_THAT(u, Not(HasSubstr("docs/")));
  EXPECT_THAT(u, Not(HasSubstr("deploy/")));
  // Read in a terminal: no line wider than 100 columns.
  std::size_t start = 0;
  while (start < u.size()) {
    const std::size_t end = u.find('\n', start);
    EXPECT_LE((end == std::string::npos ? u.size() : end) - start, 100u) << u.substr(start, end - start);
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

// A config written for another machine: its CPUs stated, or no machine facts at all.
TEST(Cli, CheckConfigForAnotherHost) {
  const CliParse stated = parse({"--check-config", "x.yaml", "--host-cpus", "0-63"});
  ASSERT_TRUE(stated.ok) << stated.error;
  ASSERT_TRUE(stated.options.host_cpus.has_value());
  EXPECT_EQ(stated.options.host_cpus->str(), "0-63");
  EXPECT_FALSE(stated.options.no_host);
  const CliParse big = parse({"--host-cpus=0-255,1024", "--check-config", "x.yaml"});
  ASSERT_TRUE(big.ok) << big.error;
  EXPECT_EQ(big.options.host_cpus->size(), 257u);
  const CliParse none = parse({"--no-host", "--check-config", "x.yaml", "--print"});
  ASSERT_TRUE(none.ok) << none.error;
  EXPECT_TRUE(none.options.no_host);
  EXPECT_FALSE(none.options.host_cpus.has_value());
  const CliParse here = parse({"--check-config", "x.yaml"});
  ASSERT_TRUE(here.ok) << here.error;
  EXPECT_FALSE(here.options.no_host);
  EXPECT_FALSE(here.options.host_cpus.has_value());
}

TEST(Cli, Errors) {
  struct Case {
    std::initializer_list<const char*> args;
    const char* error;
  };
  const Case cases[] = {
      {{"--print"}, "--print needs --check-config FILE"},
      {{"--config", "a", "--print"}, "--print needs --check-config FILE"},
      {{"--config", "a", "--check-config", "b"}, "--config and --check-config exclude each other"},
      {{"--config", "a", "--config", "b"}, "--config given twice"},
      {{"--config", ""}, "--config: empty file name"},
      {{"--config"}, "--config: missing argument"},
      {{"--config", "a", "--set"}, "--set: missing argument"},
      {{"--config", "a", "--set", "novalue"},
       "--set novalue: expected KEY=VALUE, e.g. --set dataplane.queue_depth=128"},
      {{"--config", "a", "--set", "=1"},
       "--set =1: expected KEY=VALUE, e.g. --set dataplane.queue_depth=128"},
      {{"--config", "a", "--bogus"}, "unknown option --bogus"},
      {{"-c", "a"}, "unknown option -c"},
      {{"-h", "x"}, "unexpected argument \"x\""},
      {{"--config", "a", "extra"}, "unexpected argument \"extra\""},
      {{"--config", "a", "--no-host"}, "--no-host needs --check-config FILE"},
      {{"--host-cpus", "0-3"}, "--host-cpus needs --check-config FILE"},
      {{"--check-config", "a", "--no-host", "--host-cpus", "0-3"},
       "--host-cpus and --no-host exclude each other"},
      {{"--check-config", "a", "--host-cpus", "0-3", "--host-cpus", "4"}, "--host-cpus given twice"},
      {{"--check-config", "a", "--host-cpus", "3-1"},
       "--host-cpus 3-1: range \"3-1\" is descending; expected a cpulist, e.g. --host-cpus 0-63"},
      {{"--check-config", "a", "--host-cpus", "all"},
       "--host-cpus all: \"all\" is not a cpu number; expected a cpulist, e.g. --host-cpus 0-63"},
      {{"--check-config", "a", "--host-cpus", ""},
       "--host-cpus : empty cpu list; expected a cpulist, e.g. --host-cpus 0-63"},
      {{"--check-config", "a", "--host-cpus"}, "--host-cpus: missing argument"},
  };
  for (const Case& c : cases) {
    const CliParse r = parse(c.args);
    EXPECT_FALSE(r.ok) << c.error;
    EXPECT_EQ(r.error, c.error);
  }
}

TEST(Cli, ParsesAgainAfterAnError) {
  EXPECT_FALSE(parse({"--bogus"}).ok);
  const CliParse r = parse({"--config", "y.yaml"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.options.config_path, "y.yaml");
}

}  // namespace

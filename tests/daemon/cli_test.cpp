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
  for (const char* opt :
       {"--config FILE", "--check-config FILE", "--print", "--set KEY=VALUE", "--version", "-h, --help"}) {
    EXPECT_THAT(u, HasSubstr(opt));
  }
  // The help is read where the binary is installed, without the source tree.
  EXPECT_THAT(u, Not(HasSubstr("README")));
  EXPECT_THAT(u, Not(HasSubstr(".md")));
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

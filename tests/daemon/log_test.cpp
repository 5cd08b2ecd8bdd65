// The daemon's structured logger: both line formats, escaping of hostile values, the level filter.
#include "daemon/log.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace {

using namespace rdmagate::control;
using log::Format;
using log::Level;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// 2024-05-01T10:00:00.123456Z
std::chrono::system_clock::time_point at() {
  return std::chrono::system_clock::time_point(std::chrono::microseconds(1714557600123456LL));
}

TEST(LogTimestamp, Rfc3339UtcWithMicroseconds) {
  EXPECT_EQ(log::format_timestamp(at()), "2024-05-01T10:00:00.123456Z");
  EXPECT_EQ(log::format_timestamp(std::chrono::system_clock::time_point{}), "1970-01-01T00:00:00.000000Z");
}

TEST(LogLogfmt, PlainLineHasTsLevelMsgAndFieldsInOrder) {
  const std::string line =
      log::format_line(Format::kLogfmt, at(), Level::kInfo, "listening",
                       {{"addr", "0.0.0.0"}, {"port", 7471}, {"v6", false}, {"ratio", 0.5}});
  EXPECT_EQ(line,
            "ts=2024-05-01T10:00:00.123456Z level=info msg=listening addr=0.0.0.0 port=7471 v6=false "
            "ratio=0.5\n");
}

TEST(LogLogfmt, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(log::logfmt_value("plain"), "plain");
  EXPECT_EQ(log::logfmt_value("10.0.0.0/8"), "10.0.0.0/8");
  EXPECT_EQ(log::logfmt_value(""), "\"\"");
  EXPECT_EQ(log::logfmt_value("two words"), "\"two words\"");
  EXPECT_EQ(log::logfmt_value("a=b"), "\"a=b\"");
  EXPECT_EQ(log::logfmt_value("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(log::logfmt_value("back\\slash"), "\"back\\\\slash\"");
}

TEST(LogLogfmt, ControlCharactersNeverBreakTheLine) {
  EXPECT_EQ(log::logfmt_value("a\nb"), "\"a\\nb\"");
  EXPECT_EQ(log::logfmt_value("a\r\tb"), "\"a\\r\\tb\"");
  EXPECT_EQ(log::logfmt_value(std::string("a\x01"
                                          "b\x1b"
                                          "c\x7f",
                                          6)),
            "\"a\\u0001b\\u001bc\\u007f\"");
  EXPECT_EQ(log::logfmt_value(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
  // A forged second record in a value stays inside the quoted value of the first.
  const std::string line = log::format_line(Format::kLogfmt, at(), Level::kWarn, "reject",
                                            {{"peer", "x\nts=0 level=error msg=forged"}});
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
  EXPECT_THAT(line, HasSubstr("peer=\"x\\nts=0 level=error msg=forged\"\n"));
}

TEST(LogLogfmt, Utf8KeptInvalidBytesReplaced) {
  EXPECT_EQ(log::logfmt_value("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  EXPECT_EQ(log::logfmt_value("bad\xff"), "\"bad\xef\xbf\xbd\"");
  EXPECT_EQ(log::logfmt_value("\xc0\xaf"), "\"\xef\xbf\xbd\xef\xbf\xbd\"");                  // overlong '/'
  EXPECT_EQ(log::logfmt_value("\xed\xa0\x80"), "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");  // a surrogate
  EXPECT_EQ(log::logfmt_value("cut\xe2\x82"), "\"cut\xef\xbf\xbd\xef\xbf\xbd\"");
}

TEST(LogLogfmt, KeysAreSanitised) {
  EXPECT_EQ(log::sanitize_key("conf.key-name_1"), "conf.key-name_1");
  EXPECT_EQ(log::sanitize_key("a b=c\"d\n"), "a_b_c_d_");
  EXPECT_EQ(log::sanitize_key(""), "_");
  const std::string line = log::format_line(Format::kLogfmt, at(), Level::kInfo, "m", {{"a b", 1}});
  EXPECT_THAT(line, HasSubstr(" a_b=1\n"));
}

TEST(LogJson, ObjectWithTypedFields) {
  const std::string line =
      log::format_line(Format::kJson, at(), Level::kError, "device lost",
                       {{"device", "rxe0"}, {"port", 1}, {"fatal", true}, {"load", 0.25}});
  EXPECT_EQ(line,
            "{\"ts\":\"2024-05-01T10:00:00.123456Z\",\"level\":\"error\",\"msg\":\"device lost\","
            "\"device\":\"rxe0\",\"port\":1,\"fatal\":true,\"load\":0.25}\n");
}

TEST(LogJson, StringEscaping) {
  EXPECT_EQ(log::json_string("plain text"), "plain text");
  EXPECT_EQ(log::json_string("q\"b\\s/"), "q\\\"b\\\\s/");
  EXPECT_EQ(log::json_string("\n\r\t\b\f"), "\\n\\r\\t\\b\\f");
  EXPECT_EQ(log::json_string(std::string("\x01\x1f\x7f", 3)), "\\u0001\\u001f\\u007f");
  EXPECT_EQ(log::json_string("caf\xc3\xa9 \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xf0\x9f\x98\x80");
  EXPECT_EQ(log::json_string("x\xfe"), "x\xef\xbf\xbd");
  // Negative numbers stay numbers; NaN is not JSON, so it becomes a string.
  const std::string line =
      log::format_line(Format::kJson, at(), Level::kInfo, "m", {{"n", -3}, {"nan", 0.0 / 0.0}, {"k\"", "v"}});
  EXPECT_THAT(line, HasSubstr(",\"n\":-3,\"nan\":\"NaN\",\"k_\":\"v\"}\n"));
}

TEST(LogJson, MessageWithNewlineStaysOneLine) {
  const std::string line = log::format_line(Format::kJson, at(), Level::kInfo, "two\nlines", {});
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
  EXPECT_THAT(line, HasSubstr("\"msg\":\"two\\nlines\""));
}

class Captured : public ::testing::Test {
 protected:
  void SetUp() override {
    lg_.set_sink([this](std::string_view l) { lines_.emplace_back(l); });
  }
  std::vector<std::string> levels() const {
    std::vector<std::string> out;
    for (const std::string& l : lines_) {
      const auto at = l.find("level=");
      out.push_back(l.substr(at + 6, l.find(' ', at) - at - 6));
    }
    return out;
  }
  void all_levels() {
    lg_.trace("t");
    lg_.debug("d");
    lg_.info("i");
    lg_.warn("w");
    lg_.error("e");
  }
  log::Logger lg_;
  std::vector<std::string> lines_;
};

TEST_F(Captured, DefaultIsInfo) {
  all_levels();
  EXPECT_THAT(levels(), ElementsAre("info", "warn", "error"));
}

TEST_F(Captured, LevelChangesAtRuntime) {
  lg_.set_level(Level::kWarn);
  all_levels();
  EXPECT_THAT(levels(), ElementsAre("warn", "error"));
  lines_.clear();
  lg_.set_level(Level::kTrace);
  all_levels();
  EXPECT_THAT(levels(), ElementsAre("trace", "debug", "info", "warn", "error"));
  lines_.clear();
  lg_.set_level(Level::kError);
  EXPECT_FALSE(lg_.enabled(Level::kWarn));
  EXPECT_TRUE(lg_.enabled(Level::kError));
  all_levels();
  EXPECT_THAT(levels(), ElementsAre("error"));
}

TEST_F(Captured, ConfigureSwitchesFormat) {
  lg_.configure(Format::kJson, Level::kDebug);
  lg_.debug("hello", {{"k", "v"}});
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0].front(), '{');
  EXPECT_THAT(lines_[0], HasSubstr("\"level\":\"debug\",\"msg\":\"hello\",\"k\":\"v\"}"));
  lg_.configure(Format::kLogfmt, Level::kInfo);
  lg_.debug("dropped");
  lg_.info("kept");
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_THAT(lines_[1], HasSubstr(" level=info msg=kept\n"));
}

// journald reads "<N>" at the start of a line on its stream as the syslog priority (SyslogLevelPrefix=, on by
// default), which is what `journalctl -p err` filters on.
TEST_F(Captured, PriorityPrefixCarriesTheSyslogLevel) {
  lg_.set_level(Level::kTrace);
  lg_.set_priority_prefix(true);
  all_levels();
  ASSERT_EQ(lines_.size(), 5u);
  const char* const want[] = {"<7>ts=", "<7>ts=", "<6>ts=", "<4>ts=", "<3>ts="};
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(lines_[i].rfind(want[i], 0), 0u) << lines_[i];
  EXPECT_THAT(lines_[4], HasSubstr(" level=error msg=e\n"));
  lines_.clear();
  lg_.set_priority_prefix(false);
  lg_.error("plain");
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0].rfind("ts=", 0), 0u);
}

TEST(LogJournal, SyslogPriorities) {
  EXPECT_EQ(log::syslog_priority(Level::kError), 3);
  EXPECT_EQ(log::syslog_priority(Level::kWarn), 4);
  EXPECT_EQ(log::syslog_priority(Level::kInfo), 6);
  EXPECT_EQ(log::syslog_priority(Level::kDebug), 7);
  EXPECT_EQ(log::syslog_priority(Level::kTrace), 7);
}

// Lines that come with a syslog priority (DPDK's) keep their severity, and a level maps back to itself.
TEST(LogJournal, LevelOfSyslogPriority) {
  const Level want[] = {Level::kError, Level::kError, Level::kError, Level::kError,
                        Level::kWarn,  Level::kInfo,  Level::kInfo,  Level::kDebug};
  for (int p = 0; p < 8; ++p) EXPECT_EQ(log::level_of_syslog_priority(p), want[p]) << p;
  EXPECT_EQ(log::level_of_syslog_priority(-1), Level::kInfo);
  EXPECT_EQ(log::level_of_syslog_priority(8), Level::kInfo);
  for (Level l : {Level::kError, Level::kWarn, Level::kInfo, Level::kDebug}) {
    EXPECT_EQ(log::level_of_syslog_priority(log::syslog_priority(l)), l);
  }
}

// JOURNAL_STREAM names the journal's socket by device and inode; only the fd open on exactly that file is
// the journal (a child's stderr redirected elsewhere keeps the variable but not the file).
TEST(LogJournal, JournalStreamMatchesOnlyItsOwnFile) {
  char path[] = "/tmp/rdmagate-log-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  const std::string mine = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  const std::string other_ino = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1);
  EXPECT_TRUE(log::fd_is_journal_stream(fd, mine.c_str()));
  EXPECT_FALSE(log::fd_is_journal_stream(fd, other_ino.c_str()));
  EXPECT_FALSE(log::fd_is_journal_stream(fd, nullptr));
  EXPECT_FALSE(log::fd_is_journal_stream(fd, ""));
  EXPECT_FALSE(log::fd_is_journal_stream(fd, "garbage"));
  EXPECT_FALSE(log::fd_is_journal_stream(fd, (mine + "x").c_str()));
  EXPECT_FALSE(log::fd_is_journal_stream(-1, mine.c_str()));
  close(fd);
}

}  // namespace

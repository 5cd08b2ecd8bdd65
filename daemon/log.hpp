#pragma once
// The daemon's structured logger: one line per event on stderr, logfmt or JSON lines (conf logging.format),
// each with ts, level, msg and key=value fields, filtered by a level that a SIGHUP may change.
//
// Who logs: the control thread and setup only. A data-plane core never formats a line (style rule: no
// syscalls, no allocation on the hot path); what happens there reaches the operator through counters.
//
// Why not spdlog: Debian 12's spdlog (1.10) has no logfmt or JSON formatter, so we would write the value
// escaping and the field layout ourselves anyway, and take on fmt and a second logging model besides. What
// remains here is ~200 lines: escaping, a level check, one write(2) per line.
//
//   log::Logger& lg = log::logger();              // process-wide, stderr, info, logfmt until configured
//   lg.configure(conf::LogFormat::kJson, conf::LogLevel::kDebug);
//   lg.info("listening", {{"addr", "0.0.0.0"}, {"port", 7471}});
//   // logfmt: ts=2024-05-01T10:00:00.123456Z level=info msg=listening addr=0.0.0.0 port=7471
//   // json:
//   {"ts":"2024-05-01T10:00:00.123456Z","level":"info","msg":"listening","addr":"0.0.0.0","port":7471}

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>

#include "conf/config.hpp"

namespace rdmagate::control::log {

using Level = conf::LogLevel;
using Format = conf::LogFormat;

// One key=value pair. Strings are quoted as the format needs; numbers and booleans are written bare (JSON
// numbers and booleans; logfmt has no types).
struct Field {
  enum class Kind : std::uint8_t { kString, kNumber, kBool };

  Field(std::string_view k, std::string_view v) : key(k), value(v), kind(Kind::kString) {}
  Field(std::string_view k, const char* v) : key(k), value(v != nullptr ? v : ""), kind(Kind::kString) {}
  Field(std::string_view k, const std::string& v) : key(k), value(v), kind(Kind::kString) {}
  Field(std::string_view k, bool v) : key(k), value(v ? "true" : "false"), kind(Kind::kBool) {}
  template <std::integral T>
  requires(!std::same_as<T, bool> && !std::same_as<T, char>) Field(std::string_view k, T v)
      : key(k), value(std::to_string(v)), kind(Kind::kNumber) {}
  Field(std::string_view k, double v);

  std::string_view key;
  std::string value;
  Kind kind;
};

using Fields = std::initializer_list<Field>;

std::string_view level_name(Level l) noexcept;

// Pure formatting, exposed for tests: one line, '\n' included. `ts` is UTC.
std::string format_line(Format f, std::chrono::system_clock::time_point ts, Level level, std::string_view msg,
                        Fields fields);
// "2024-05-01T10:00:00.123456Z"
std::string format_timestamp(std::chrono::system_clock::time_point ts);
// Escaping, exposed for tests. logfmt: bare when the value needs no quoting, else "..." with \" \\ \n \r \t
// and \u00XX for other control characters. JSON: the string body (without the quotes). Both replace bytes
// that are not valid UTF-8 with U+FFFD, so a line is always valid UTF-8 whatever a peer sent.
std::string logfmt_value(std::string_view v);
std::string json_string(std::string_view v);
// A key as written: anything outside [A-Za-z0-9_.-] becomes '_' (keys come from code, but a key must never
// be able to break the line's structure).
std::string sanitize_key(std::string_view k);

// The syslog priority journald files a line of this level under: error 3 (LOG_ERR), warn 4, info 6,
// debug and trace 7.
int syslog_priority(Level l) noexcept;
// The inverse, for lines that arrive with a syslog priority (DPDK's, through dataplane::route_eal_log): 0-3
// error, 4 warn, 5 (notice) and 6 info, 7 debug; anything else info.
Level level_of_syslog_priority(int priority) noexcept;
// Whether `fd` is the stream systemd names in `journal_stream` (the JOURNAL_STREAM variable:
// "<device>:<inode>" of the socket it gave the service as stdout/stderr). Only then is a "<N>" prefix read as
// the line's priority; anywhere else (a terminal, a file, a container runtime) it would be noise.
bool fd_is_journal_stream(int fd, const char* journal_stream) noexcept;

class Logger {
 public:
  // Where finished lines go; default: write(2) to stderr. Tests capture with a sink.
  using Sink = std::function<void(std::string_view line)>;

  Logger() = default;
  void configure(Format f, Level min_level) noexcept {
    format_.store(f, std::memory_order_relaxed);
    set_level(min_level);
  }
  void set_level(Level l) noexcept { level_.store(l, std::memory_order_relaxed); }
  Level level() const noexcept { return level_.load(std::memory_order_relaxed); }
  Format format() const noexcept { return format_.load(std::memory_order_relaxed); }
  bool enabled(Level l) const noexcept { return static_cast<int>(l) >= static_cast<int>(level()); }
  void set_sink(Sink sink);
  // Every line starts with "<N>", N its syslog priority (sd-daemon(3)'s SD_ERR etc.): what journald needs to
  // give `journalctl -p err` the error lines. The process-wide logger turns it on when stderr is the journal.
  void set_priority_prefix(bool on) noexcept { priority_prefix_.store(on, std::memory_order_relaxed); }

  void log(Level l, std::string_view msg, Fields fields = {});
  void trace(std::string_view msg, Fields fields = {}) { log(Level::kTrace, msg, fields); }
  void debug(std::string_view msg, Fields fields = {}) { log(Level::kDebug, msg, fields); }
  void info(std::string_view msg, Fields fields = {}) { log(Level::kInfo, msg, fields); }
  void warn(std::string_view msg, Fields fields = {}) { log(Level::kWarn, msg, fields); }
  void error(std::string_view msg, Fields fields = {}) { log(Level::kError, msg, fields); }

 private:
  std::atomic<Format> format_{Format::kLogfmt};
  std::atomic<Level> level_{Level::kInfo};
  std::atomic<bool> priority_prefix_{false};
  std::mutex mutex_;  // one line at a time, and the sink
  Sink sink_;
};

// The process-wide logger the daemon configures from logging.*.
Logger& logger();

}  // namespace rdmagate::control::log

#include "daemon/log.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace rdmagate::control::log {

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not one (overlong forms, surrogates and
// code points above U+10FFFF are invalid too).
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if ((c & 0xe0) == 0xc0) {
    n = 2;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  static constexpr std::uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

void append_u00(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u00";
  out.push_back(kHex[c >> 4]);
  out.push_back(kHex[c & 0xf]);
}

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

// The shared escaping of logfmt's quoted values and JSON strings: the two differ only in which characters
// have a short form, and JSON's set is a superset of what a logfmt reader expects.
std::string escape(std::string_view v, bool json) {
  std::string out;
  out.reserve(v.size() + 8);
  for (std::size_t i = 0; i < v.size();) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8_sequence(v, i);
      if (n == 0) {
        out += kReplacement;
        ++i;
      } else {
        out.append(v.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        if (json) {
          out += "\\b";
        } else {
          append_u00(out, c);
        }
        break;
      case '\f':
        if (json) {
          out += "\\f";
        } else {
          append_u00(out, c);
        }
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          append_u00(out, c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  return out;
}

bool logfmt_needs_quotes(std::string_view v) {
  if (v.empty()) return true;
  for (const char ch : v) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c == '=' || c == '"' || c == '\\' || c == 0x7f || c >= 0x80) return true;
  }
  return false;
}

void write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere left to report it
    }
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

Field::Field(std::string_view k, double v) : key(k), kind(Kind::kNumber) {
  if (!std::isfinite(v)) {
    // JSON has no NaN or infinity: write them as strings rather than produce an invalid line.
    value = std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
    kind = Kind::kString;
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  value = buf;
}

std::string_view level_name(Level l) noexcept {
  return conf::toString(l);
}

std::string format_timestamp(std::chrono::system_clock::time_point ts) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(ts.time_since_epoch()).count();
  std::int64_t secs = us / 1'000'000;
  std::int64_t frac = us % 1'000'000;
  if (frac < 0) {
    frac += 1'000'000;
    --secs;
  }
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(frac));
  return buf;
}

std::string logfmt_value(std::string_view v) {
  if (!logfmt_needs_quotes(v)) return std::string(v);
  return "\"" + escape(v, false) + "\"";
}

std::string json_string(std::string_view v) {
  return escape(v, true);
}

std::string sanitize_key(std::string_view k) {
  if (k.empty()) return "_";
  std::string out(k);
  for (char& ch : out) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '_' || ch == '.' || ch == '-';
    if (!ok) ch = '_';
  }
  return out;
}

std::string format_line(Format f, std::chrono::system_clock::time_point ts, Level level, std::string_view msg,
                        Fields fields) {
  std::string line;
  line.reserve(96 + msg.size());
  const std::string when = format_timestamp(ts);
  if (f == Format::kJson) {
    line += "{\"ts\":\"";
    line += when;
    line += "\",\"level\":\"";
    line += level_name(level);
    line += "\",\"msg\":\"";
    line += json_string(msg);
    line += '"';
    for (const Field& fl : fields) {
      line += ",\"";
      line += json_string(sanitize_key(fl.key));
      line += "\":";
      if (fl.kind == Field::Kind::kString) {
        line += '"';
        line += json_string(fl.value);
        line += '"';
      } else {
        line += fl.value;
      }
    }
    line += "}\n";
    return line;
  }
  line += "ts=";
  line += when;
  line += " level=";
  line += level_name(level);
  line += " msg=";
  line += logfmt_value(msg);
  for (const Field& fl : fields) {
    line += ' ';
    line += sanitize_key(fl.key);
    line += '=';
    line += logfmt_value(fl.value);
  }
  line += '\n';
  return line;
}

void Logger::set_sink(Sink sink) {
  const std::lock_guard lock(mutex_);
  sink_ = std::move(sink);
}

int syslog_priority(Level l) noexcept {
  switch (l) {
    case Level::kError:
      return 3;
    case Level::kWarn:
      return 4;
    case Level::kInfo:
      return 6;
    case Level::kDebug:
    case Level::kTrace:
      return 7;
  }
  return 6;
}

Level level_of_syslog_priority(int priority) noexcept {
  if (priority >= 0 && priority <= 3) return Level::kError;
  if (priority == 4) return Level::kWarn;
  if (priority == 7) return Level::kDebug;
  return Level::kInfo;
}

bool fd_is_journal_stream(int fd, const char* journal_stream) noexcept {
  if (journal_stream == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  char tail = 0;
  if (std::sscanf(journal_stream, "%llu:%llu%c", &dev, &ino, &tail) != 2) return false;
  struct stat st {};
  if (fstat(fd, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

void Logger::log(Level l, std::string_view msg, Fields fields) {
  if (!enabled(l)) return;
  std::string line;
  if (priority_prefix_.load(std::memory_order_relaxed)) {
    line = "<" + std::to_string(syslog_priority(l)) + ">";
  }
  line += format_line(format(), std::chrono::system_clock::now(), l, msg, fields);
  const std::lock_guard lock(mutex_);
  if (sink_) {
    sink_(line);
  } else {
    write_all(STDERR_FILENO, line);  // one write per line: lines of concurrent writers never interleave
  }
}

namespace {
Logger& process_logger() {
  static Logger l;
  l.set_priority_prefix(fd_is_journal_stream(STDERR_FILENO, std::getenv("JOURNAL_STREAM")));
  return l;
}
}  // namespace

Logger& logger() {
  static Logger& instance = process_logger();  // once: the environment is read before any thread logs
  return instance;
}

}  // namespace rdmagate::control::log

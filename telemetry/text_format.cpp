#include "telemetry/text_format.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <string_view>

namespace rdmagate::telemetry {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

std::string_view type_name(MetricType t) {
  switch (t) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Summary:
      return "summary";
    case MetricType::Histogram:
      return "histogram";
    case MetricType::Untyped:
      break;
  }
  return "untyped";
}

// HELP text escapes backslash and newline; label values also the double quote.
void append_escaped(std::string& out, std::string_view s, bool quote) {
  for (const char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void append_label(std::string& out, bool& first, std::string_view name, std::string_view value) {
  out += first ? '{' : ',';
  first = false;
  out += name;
  out += "=\"";
  append_escaped(out, value, true);
  out += '"';
}

// name<suffix>{labels[,extra="..."]} value[ timestamp]
void append_sample(std::string& out, const MetricFamily& f, const ClientMetric& m, std::string_view suffix,
                   std::string_view value, std::string_view extra_name = {},
                   std::string_view extra_value = {}) {
  out += f.name;
  out += suffix;
  bool first = true;
  for (const auto& l : m.label) append_label(out, first, l.name, l.value);
  if (!extra_name.empty()) append_label(out, first, extra_name, extra_value);
  if (!first) out += '}';
  out += ' ';
  out += value;
  if (m.timestamp_ms != 0) {
    out += ' ';
    out += std::to_string(m.timestamp_ms);
  }
  out += '\n';
}

}  // namespace

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::array<char, 32> buf{};  // the longest shortest form of a double is 24 characters
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), r.ptr);
}

std::string serialize_text(std::span<const MetricFamily> families) {
  std::string out;
  for (const MetricFamily& f : families) {
    if (!f.help.empty()) {
      out += "# HELP ";
      out += f.name;
      out += ' ';
      append_escaped(out, f.help, false);
      out += '\n';
    }
    out += "# TYPE ";
    out += f.name;
    out += ' ';
    out += type_name(f.type);
    out += '\n';
    for (const ClientMetric& m : f.metric) {
      switch (f.type) {
        case MetricType::Counter:
          append_sample(out, f, m, "", format_value(m.counter.value));
          break;
        case MetricType::Gauge:
          append_sample(out, f, m, "", format_value(m.gauge.value));
          break;
        case MetricType::Untyped:
          append_sample(out, f, m, "", format_value(m.untyped.value));
          break;
        case MetricType::Summary:
          for (const auto& q : m.summary.quantile)
            append_sample(out, f, m, "", format_value(q.value), "quantile", format_value(q.quantile));
          append_sample(out, f, m, "_sum", format_value(m.summary.sample_sum));
          append_sample(out, f, m, "_count", std::to_string(m.summary.sample_count));
          break;
        case MetricType::Histogram: {
          bool has_inf = false;
          for (const auto& b : m.histogram.bucket) {
            has_inf = std::isinf(b.upper_bound) && b.upper_bound > 0;
            append_sample(out, f, m, "_bucket", std::to_string(b.cumulative_count), "le",
                          format_value(b.upper_bound));
          }
          // The format requires a +Inf bucket; it holds every observation.
          if (!has_inf)
            append_sample(out, f, m, "_bucket", std::to_string(m.histogram.sample_count), "le", "+Inf");
          append_sample(out, f, m, "_sum", format_value(m.histogram.sample_sum));
          append_sample(out, f, m, "_count", std::to_string(m.histogram.sample_count));
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace rdmagate::telemetry

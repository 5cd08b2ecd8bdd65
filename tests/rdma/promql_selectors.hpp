#pragma once
// The instant or range vector selectors of a PromQL expression ("name{matchers}", without the range or the
// offset), in order of appearance, duplicates removed: what prometheus_scrape_test queries one by one to tell
// "this expression is empty because nothing is wrong" from "this expression reads a series nobody exports".
// Not a parser: a scanner that knows where PromQL puts names that are not metrics (function names before
// "(", aggregations, label lists after by/without/on/ignoring/group_left/group_right, keywords, strings,
// durations).
// Header-only, no dependencies; tests/rdma/promql_selectors_test.cpp covers the shapes the rules and the
// dashboard use.
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::testfix::promql {

namespace detail {

inline bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_' || c == ':';
}
inline bool ident_char(char c) {
  return ident_start(c) || std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// The index just past the string literal that starts at `i` (a quote), escapes honoured.
inline std::size_t skip_string(std::string_view s, std::size_t i) {
  const char q = s[i];
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\' && q != '`') {
      ++i;
    } else if (s[i] == q) {
      return i + 1;
    }
  }
  return s.size();
}

// The index just past the bracket that closes the one at `i` ('{', '(' or '['), strings skipped.
inline std::size_t skip_group(std::string_view s, std::size_t i) {
  const char open = s[i];
  const char close = open == '{' ? '}' : open == '(' ? ')' : ']';
  int depth = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = skip_string(s, i);
      continue;
    }
    if (c == open) ++depth;
    if (c == close && --depth == 0) return i + 1;
    ++i;
  }
  return s.size();
}

inline std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) ++i;
  return i;
}

inline bool is_one_of(std::string_view w, std::initializer_list<std::string_view> set) {
  for (std::string_view x : set) {
    if (w == x) return true;
  }
  return false;
}

}  // namespace detail

inline std::vector<std::string> selectors(std::string_view expr) {
  using namespace detail;
  std::vector<std::string> out;
  const auto add = [&out](std::string sel) {
    for (const std::string& s : out) {
      if (s == sel) return;
    }
    out.push_back(std::move(sel));
  };
  std::size_t i = 0;
  while (i < expr.size()) {
    const char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = skip_string(expr, i);
    } else if (c == '[') {
      i = skip_group(expr, i);  // a range or a subquery's range: durations, no selector
    } else if (c == '{') {
      const std::size_t end = skip_group(expr, i);  // a selector by matchers alone: {__name__=~"..."}
      add(std::string(expr.substr(i, end - i)));
      i = end;
    } else if (std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '.') {
      while (i < expr.size() && (ident_char(expr[i]) || expr[i] == '.')) ++i;  // 0.99, 1e3, 5m
    } else if (ident_start(c)) {
      const std::size_t start = i;
      while (i < expr.size() && ident_char(expr[i])) ++i;
      const std::string_view word = expr.substr(start, i - start);
      const std::size_t next = skip_space(expr, i);
      if (is_one_of(word, {"by", "without", "on", "ignoring", "group_left", "group_right"})) {
        if (next < expr.size() && expr[next] == '(') i = skip_group(expr, next);  // label names
      } else if (word == "offset") {
        i = next;
        if (i < expr.size() && expr[i] == '-') ++i;
        while (i < expr.size() && (ident_char(expr[i]) || expr[i] == '.')) ++i;  // the duration
      } else if (is_one_of(word, {"and", "or", "unless", "bool", "inf", "nan", "Inf", "NaN"})) {
        // keywords and literals
      } else if (is_one_of(word, {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                                  "count_values", "bottomk", "topk", "quantile"})) {
        // an aggregation, also when "by (...)" or "without (...)" comes before its "("
      } else if (next < expr.size() && expr[next] == '(') {
        // a function or an aggregation: its arguments are scanned as they come
      } else if (next < expr.size() && expr[next] == '{') {
        const std::size_t end = skip_group(expr, next);
        add(std::string(word) + std::string(expr.substr(next, end - next)));
        i = end;
      } else {
        add(std::string(word));
      }
    } else {
      ++i;
    }
  }
  return out;
}

// The metric name of a selector from selectors(): "up" for up{job="x"}, empty for {__name__=~"..."}.
inline std::string metric_name(std::string_view selector) {
  const std::size_t brace = selector.find('{');
  return std::string(selector.substr(0, brace == std::string_view::npos ? selector.size() : brace));
}

}  // namespace rdmagate::testfix::promql

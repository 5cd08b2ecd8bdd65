#pragma once
// Minimal parser of the Prometheus text format for the tests: one Sample per series line, plus the
// # TYPE lines.

#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace rdmagate::telemetry::test {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family name -> counter/gauge/histogram
};

inline Exposition parse_exposition(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream ls(line.substr(7));
      std::string name, type;
      ls >> name >> type;
      e.types[name] = type;
      continue;
    }
    if (line[0] == '#') continue;
    Sample s;
    std::size_t i = line.find_first_of("{ ");
    s.name = line.substr(0, i);
    if (i != std::string::npos && line[i] == '{') {
      std::size_t end = line.find('}', i);
      std::string body = line.substr(i + 1, end - i - 1);
      std::size_t p = 0;
      while (p < body.size()) {
        std::size_t eq = body.find('=', p);
        std::size_t q2 = body.find('"', eq + 2);
        s.labels[body.substr(p, eq - p)] = body.substr(eq + 2, q2 - eq - 2);
        p = q2 + 1;
        if (p < body.size() && body[p] == ',') ++p;
      }
      i = end + 1;
    }
    std::string value = line.substr(line.find_first_not_of(' ', i));
    value = value.substr(0, value.find(' '));
    s.value = value == "+Inf" ? 1e308 : std::stod(value);
    e.samples.push_back(std::move(s));
  }
  return e;
}

inline const Sample* find_sample(const Exposition& e, const std::string& name,
                                 const std::map<std::string, std::string>& labels) {
  for (const auto& s : e.samples)
    if (s.name == name && s.labels == labels) return &s;
  return nullptr;
}

}  // namespace rdmagate::telemetry::test

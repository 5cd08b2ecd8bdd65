#pragma once
// The "key=value key=value ..." status files that the RDMA tests' child processes write (engine_peer's
// --status, gateway_daemon_test's object client) and their parents read. Header-only.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

namespace rdmagate::testfix {

// Every whitespace-separated key=value token of the file; a token without '=' is ignored, a repeated key
// keeps its last value. Empty when the file is missing (the child has not written it yet).
inline std::map<std::string, std::string> read_status(const std::string& path) {
  std::map<std::string, std::string> kv;
  std::ifstream f(path);
  std::string tok;
  while (f >> tok) {
    const auto eq = tok.find('=');
    if (eq != std::string::npos) kv[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  return kv;
}

// kv[k] as a number; UINT64_MAX when the key is missing, so a check against an expected count fails.
inline std::uint64_t num(const std::map<std::string, std::string>& kv, const std::string& k) {
  const auto it = kv.find(k);
  return it == kv.end() ? UINT64_MAX : std::strtoull(it->second.c_str(), nullptr, 10);
}

}  // namespace rdmagate::testfix

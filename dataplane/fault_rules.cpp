#include "dataplane/fault_rules.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "protocol/message.hpp"
#include "protocol/object_wire.hpp"

namespace rdmagate::dataplane {
namespace {

// Message type names are the metrics' (rdmagate_messages_total{type}); the groups save listing them.
struct TypeName {
  std::string_view name;
  std::uint8_t bits;
};
constexpr std::uint8_t bit(protocol::MessageType t) {
  return static_cast<std::uint8_t>(1u << static_cast<unsigned>(t));
}
constexpr std::uint8_t kRequestBits = bit(protocol::MessageType::kInlineRequest) |
                                      bit(protocol::MessageType::kReadChunkRequest) |
                                      bit(protocol::MessageType::kWriteChunkRequest);
constexpr std::uint8_t kAnswerBits =
    bit(protocol::MessageType::kInlineResponse) | bit(protocol::MessageType::kCompletion);
constexpr std::uint8_t kNoopBit = bit(protocol::MessageType::kNoop);
constexpr std::uint8_t kDefaultTypes = kRequestBits | kAnswerBits;
constexpr std::array<TypeName, 9> kTypeNames = {{
    {"noop", kNoopBit},
    {"inline_request", bit(protocol::MessageType::kInlineRequest)},
    {"inline_response", bit(protocol::MessageType::kInlineResponse)},
    {"read_chunk_request", bit(protocol::MessageType::kReadChunkRequest)},
    {"write_chunk_request", bit(protocol::MessageType::kWriteChunkRequest)},
    {"completion", bit(protocol::MessageType::kCompletion)},
    {"request", kRequestBits},
    {"answer", kAnswerBits},
    {"any", kDefaultTypes | kNoopBit},
}};

struct OpcodeName {
  std::string_view name;
  protocol::ObjectOpcode opcode;
};
constexpr std::array<OpcodeName, 5> kOpcodeNames = {{
    {"echo", protocol::ObjectOpcode::kEcho},
    {"sink", protocol::ObjectOpcode::kSink},
    {"put", protocol::ObjectOpcode::kPut},
    {"get", protocol::ObjectOpcode::kGet},
    {"delete", protocol::ObjectOpcode::kDelete},
}};

bool fail(std::string* error, std::string msg) {
  if (error != nullptr) *error = std::move(msg);
  return false;
}

std::string quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

template <typename T>
bool parse_uint(std::string_view s, T& out, T lo, T hi) {
  T v{};
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty() || v < lo || v > hi) return false;
  out = v;
  return true;
}

// rate=P: a decimal fraction in (0, 1], to at most 9 digits after the point (no exponent, no float rounding:
// the scaled value is exact for every P a person writes).
bool parse_rate(std::string_view s, std::uint64_t& out) {
  std::uint64_t whole = 0, frac = 0, scale = 1;
  const std::size_t dot = s.find('.');
  const std::string_view w = s.substr(0, dot);
  if (!w.empty() && !parse_uint<std::uint64_t>(w, whole, 0, 1)) return false;
  if (dot != std::string_view::npos) {
    const std::string_view f = s.substr(dot + 1);
    if (f.empty() || f.size() > 9 || (w.empty() && f.empty())) return false;
    for (const char ch : f) {
      if (ch < '0' || ch > '9') return false;
      frac = frac * 10 + static_cast<std::uint64_t>(ch - '0');
      scale *= 10;
    }
  } else if (w.empty()) {
    return false;
  }
  // whole + frac / scale, in (0, 1].
  if (whole == 1 && frac != 0) return false;
  if (whole == 0 && frac == 0) return false;
  if (whole == 1) {
    out = UINT64_MAX;
    return true;
  }
  // frac / scale * (2^64 - 1), without overflow: scale <= 10^9 < 2^30, frac < scale.
  const unsigned __int128 v = static_cast<unsigned __int128>(frac) * UINT64_MAX / scale;
  out = static_cast<std::uint64_t>(v);
  return true;
}

bool parse_peer(std::string_view s, FaultRule& r) {
  std::string addr(s.substr(0, s.find('/')));
  const bool has_len = s.find('/') != std::string_view::npos;
  in_addr v4{};
  in6_addr v6{};
  unsigned max_len = 0, base = 0;
  if (inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
    r.peer = {};
    r.peer[10] = r.peer[11] = 0xff;
    std::memcpy(&r.peer[12], &v4, 4);
    max_len = 32;
    base = 96;
  } else if (inet_pton(AF_INET6, addr.c_str(), &v6) == 1) {
    std::memcpy(r.peer.data(), &v6, 16);
    max_len = 128;
  } else {
    return false;
  }
  unsigned len = max_len;
  if (has_len && !parse_uint<unsigned>(s.substr(s.find('/') + 1), len, 0, max_len)) return false;
  r.peer_prefix = static_cast<std::uint8_t>(base + len);
  r.any_peer = false;
  return true;
}

bool parse_types(std::string_view s, std::uint8_t& out) {
  out = 0;
  while (true) {
    const std::size_t comma = s.find(',');
    const std::string_view name = s.substr(0, comma);
    bool found = false;
    for (const TypeName& t : kTypeNames) {
      if (t.name == name) {
        out |= t.bits;
        found = true;
      }
    }
    if (!found) return false;
    if (comma == std::string_view::npos) return true;
    s.remove_prefix(comma + 1);
  }
}

std::string peer_text(const FaultRule& r) {
  char buf[INET6_ADDRSTRLEN] = {};
  const bool v4 = r.peer_prefix >= 96 && r.peer[10] == 0xff && r.peer[11] == 0xff &&
                  std::all_of(r.peer.begin(), r.peer.begin() + 10, [](std::uint8_t b) { return b == 0; });
  if (v4) {
    inet_ntop(AF_INET, &r.peer[12], buf, sizeof buf);
    return std::string(buf) + "/" + std::to_string(r.peer_prefix - 96);
  }
  inet_ntop(AF_INET6, r.peer.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(r.peer_prefix);
}

std::string rate_text(std::uint64_t rate) {
  if (rate == UINT64_MAX) return "1";
  // 9 digits: parse_rate's precision, so that the text parses back to the same scaled value for every rate
  // parse_rate produced.
  const auto frac = static_cast<std::uint64_t>(
      (static_cast<unsigned __int128>(rate) * 1'000'000'000 + UINT64_MAX / 2) / UINT64_MAX);
  if (frac >= 1'000'000'000) return "1";
  std::string digits = std::to_string(frac);
  digits.insert(0, 9 - digits.size(), '0');
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  return "0." + digits;
}

}  // namespace

PeerIp fault_peer_ip(const sockaddr* sa) noexcept {
  PeerIp ip{};
  if (sa == nullptr) return ip;
  if (sa->sa_family == AF_INET) {
    ip[10] = ip[11] = 0xff;
    std::memcpy(&ip[12], &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    std::memcpy(ip.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
  }
  return ip;
}

bool parse_fault_rule(std::string_view text, FaultRule& out, std::string* error) {
  out = FaultRule{};
  if (text.size() > kMaxFaultRuleChars) {
    return fail(error, "longer than " + std::to_string(kMaxFaultRuleChars) + " characters");
  }
  std::vector<std::string_view> words;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == ' ' || text[i] == '\t') {
      ++i;
      continue;
    }
    const std::size_t end = text.find_first_of(" \t", i);
    words.push_back(text.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i));
    i = end == std::string_view::npos ? text.size() : end;
  }
  if (words.empty())
    return fail(error, "empty rule: an action (drop, delay, duplicate, corrupt, stall, qp_err) first");
  for (std::size_t a = 1; a < kFaultActionCount; ++a) {
    if (words[0] == kFaultActionNames[a]) out.action = static_cast<FaultAction>(a);
  }
  if (out.action == FaultAction::kNone) {
    return fail(error,
                "unknown action " + quoted(words[0]) + " (drop, delay, duplicate, corrupt, stall, qp_err)");
  }
  const bool message = out.per_message();
  out.types = kDefaultTypes;
  std::uint32_t seen = 0;  // bit per key: each at most once
  bool has_ms = false;
  static constexpr std::array<std::string_view, 10> kKeys = {"dir",  "type",  "opcode", "peer", "every",
                                                             "rate", "count", "ms",     "at",   "core"};
  for (std::size_t w = 1; w < words.size(); ++w) {
    const std::string_view word = words[w];
    const std::size_t eq = word.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == word.size()) {
      return fail(error, "expected key=value, got " + quoted(word));
    }
    const std::string_view key = word.substr(0, eq), val = word.substr(eq + 1);
    std::size_t k = 0;
    while (k < kKeys.size() && kKeys[k] != key) ++k;
    if (k == kKeys.size()) return fail(error, "unknown key " + quoted(key));
    if ((seen & (1u << k)) != 0) return fail(error, "key " + quoted(key) + " given twice");
    seen |= 1u << k;
    // Which keys an action takes.
    const bool allowed = key == "peer" ? out.action != FaultAction::kStall
                         : key == "ms"
                             ? out.action == FaultAction::kDelay || out.action == FaultAction::kStall
                         : key == "at"   ? out.action == FaultAction::kCorrupt
                         : key == "core" ? out.action == FaultAction::kStall
                                         : message;
    if (!allowed) return fail(error, "key " + quoted(key) + " does not apply to " + std::string(words[0]));
    const std::string bad = "bad value " + quoted(word) + ": ";
    if (key == "dir") {
      if (val == "rx") {
        out.dirs = kFaultRx;
      } else if (val == "tx") {
        out.dirs = kFaultTx;
      } else if (val == "both") {
        out.dirs = kFaultRx | kFaultTx;
      } else {
        return fail(error, bad + "dir is rx, tx or both");
      }
    } else if (key == "type") {
      if (!parse_types(val, out.types)) {
        return fail(error, bad +
                               "types are noop, inline_request, inline_response, read_chunk_request, "
                               "write_chunk_request, completion, request, answer, any (comma-separated)");
      }
    } else if (key == "opcode") {
      bool found = false;
      for (const OpcodeName& o : kOpcodeNames) {
        if (o.name == val) {
          out.opcode = static_cast<std::uint16_t>(o.opcode);
          found = true;
        }
      }
      if (!found && !parse_uint<std::uint16_t>(val, out.opcode, 0, 0xffff)) {
        return fail(error, bad + "opcode is put, get, delete, echo, sink or a number 0..65535");
      }
      out.any_opcode = false;
    } else if (key == "peer") {
      if (!parse_peer(val, out))
        return fail(error, bad + "peer is an IPv4 or IPv6 address, optionally /prefix-length");
    } else if (key == "every") {
      if (!parse_uint<std::uint32_t>(val, out.every, 1, UINT32_MAX))
        return fail(error, bad + "every is 1..4294967295");
    } else if (key == "rate") {
      if (!parse_rate(val, out.rate)) {
        return fail(error,
                    bad + "rate is a decimal fraction in (0, 1] with at most 9 digits after the point");
      }
      out.by_rate = true;
    } else if (key == "count") {
      if (!parse_uint<std::uint64_t>(val, out.count, 1, UINT64_MAX))
        return fail(error, bad + "count is at least 1");
    } else if (key == "ms") {
      const std::uint32_t max = out.action == FaultAction::kDelay ? kFaultMaxDelayMs : kFaultMaxStallMs;
      if (!parse_uint<std::uint32_t>(val, out.ms, 1, max))
        return fail(error, bad + "ms is 1.." + std::to_string(max));
      has_ms = true;
    } else if (key == "at") {
      if (val == "random") {
        out.at = kFaultAtRandom;
      } else if (!parse_uint<std::uint32_t>(val, out.at, 0, UINT32_MAX - 1)) {
        return fail(error, bad + "at is a byte offset or random");
      }
    } else if (key == "core") {
      if (!parse_uint<std::uint32_t>(val, out.core, 0, UINT32_MAX - 1))
        return fail(error, bad + "core is a core index");
    }
  }
  if ((seen & (1u << 4)) != 0 && out.by_rate) return fail(error, "every= and rate= exclude each other");
  if ((out.action == FaultAction::kDelay || out.action == FaultAction::kStall) && !has_ms) {
    return fail(error, std::string(words[0]) + " needs ms=");
  }
  if (out.action == FaultAction::kQpErr && out.any_peer) return fail(error, "qp_err needs peer=");
  if (!message) {
    out.dirs = 0;
    out.types = 0;
  }
  return true;
}

bool parse_fault_rules(const std::vector<std::string>& lines, FaultTable& out, std::string* error) {
  out = FaultTable{};
  if (lines.size() > kMaxFaultRules) {
    return fail(error, "faults.rules: " + std::to_string(lines.size()) + " rules, at most " +
                           std::to_string(kMaxFaultRules));
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string why;
    if (!parse_fault_rule(lines[i], out.rules[i], &why)) {
      return fail(error,
                  "faults.rules[" + std::to_string(i) + "]: " + quoted(lines[i].substr(0, 80)) + ": " + why);
    }
  }
  out.count = static_cast<std::uint32_t>(lines.size());
  return true;
}

std::string format_fault_rule(const FaultRule& r) {
  std::string s(kFaultActionNames[static_cast<std::size_t>(r.action)]);
  if (r.per_message()) {
    s += r.dirs == kFaultRx ? " dir=rx" : r.dirs == kFaultTx ? " dir=tx" : " dir=both";
    s += " type=";
    bool first = true;
    for (std::size_t t = 0; t < 6; ++t) {
      if ((r.types & kTypeNames[t].bits) == 0) continue;
      if (!first) s += ',';
      s += kTypeNames[t].name;
      first = false;
    }
    if (!r.any_opcode) s += " opcode=" + std::to_string(r.opcode);
  }
  if (!r.any_peer) s += " peer=" + peer_text(r);
  if (r.per_message()) {
    s += r.by_rate ? " rate=" + rate_text(r.rate) : " every=" + std::to_string(r.every);
    if (r.count != 0) s += " count=" + std::to_string(r.count);
  }
  if (r.action == FaultAction::kDelay || r.action == FaultAction::kStall) s += " ms=" + std::to_string(r.ms);
  if (r.action == FaultAction::kCorrupt)
    s += r.at == kFaultAtRandom ? " at=random" : " at=" + std::to_string(r.at);
  if (r.action == FaultAction::kStall && r.core != kFaultAllCores) s += " core=" + std::to_string(r.core);
  return s;
}

}  // namespace rdmagate::dataplane

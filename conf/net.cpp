#include "conf/net.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace rdmagate::conf {
namespace {

constexpr std::size_t kMaxAddressText = 64;  // longer than any IPv6 text form plus a zone
constexpr std::size_t kMaxZoneLength = 15;   // IFNAMSIZ - 1

bool validZone(std::string_view z) {
  if (z.empty() || z.size() > kMaxZoneLength) return false;
  return std::all_of(z.begin(), z.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

std::uint8_t maxPrefix(IpFamily f) {
  return f == IpFamily::kIpv4 ? 32 : 128;
}

// True when any bit at or beyond `prefix_len` is set.
bool hasHostBits(const IpAddress& a, std::uint8_t prefix_len) {
  const auto& b = a.bytes();
  std::size_t total = a.family() == IpFamily::kIpv4 ? 4 : 16;
  for (std::size_t i = 0; i < total; ++i) {
    unsigned bit_start = static_cast<unsigned>(i) * 8;
    std::uint8_t keep = 0;
    if (bit_start + 8 <= prefix_len) {
      keep = 0xff;
    } else if (bit_start < prefix_len) {
      keep = static_cast<std::uint8_t>(0xff << (8 - (prefix_len - bit_start)));
    }
    if ((b[i] & static_cast<std::uint8_t>(~keep)) != 0) return true;
  }
  return false;
}

IpAddress masked(const IpAddress& a, std::uint8_t prefix_len) {
  std::array<std::uint8_t, 16> b = a.bytes();
  for (std::size_t i = 0; i < b.size(); ++i) {
    unsigned bit_start = static_cast<unsigned>(i) * 8;
    if (bit_start + 8 <= prefix_len) continue;
    if (bit_start >= prefix_len) {
      b[i] = 0;
    } else {
      b[i] &= static_cast<std::uint8_t>(0xff << (8 - (prefix_len - bit_start)));
    }
  }
  if (a.family() == IpFamily::kIpv4) return IpAddress::v4(b[0], b[1], b[2], b[3]);
  return IpAddress::v6(b);
}

}  // namespace

IpAddress IpAddress::v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  IpAddress r;
  r.family_ = IpFamily::kIpv4;
  r.bytes_[0] = a;
  r.bytes_[1] = b;
  r.bytes_[2] = c;
  r.bytes_[3] = d;
  return r;
}

IpAddress IpAddress::v6(const std::array<std::uint8_t, 16>& bytes) {
  IpAddress r;
  r.family_ = IpFamily::kIpv6;
  r.bytes_ = bytes;
  return r;
}

std::optional<IpAddress> IpAddress::parse(std::string_view text, Zone zone, std::string* why) {
  auto fail = [&](std::string msg) -> std::optional<IpAddress> {
    if (why) *why = std::move(msg);
    return std::nullopt;
  };
  const std::string quoted = "\"" + std::string(text) + "\"";
  if (text.empty()) return fail("empty address");
  if (text.size() > kMaxAddressText) return fail(quoted + " is not an IP address");
  std::string_view zone_text;
  std::size_t pct = text.find('%');
  std::string_view addr_text = text.substr(0, pct);
  if (pct != std::string_view::npos) zone_text = text.substr(pct + 1);

  char buf[kMaxAddressText + 1];
  std::memcpy(buf, addr_text.data(), addr_text.size());
  buf[addr_text.size()] = '\0';

  IpAddress r;
  if (addr_text.find(':') == std::string_view::npos) {
    in_addr v4{};
    if (inet_pton(AF_INET, buf, &v4) != 1) {
      return fail(quoted + " is not an IP address (host names are not accepted)");
    }
    if (pct != std::string_view::npos) return fail(quoted + ": IPv4 addresses take no zone");
    r.family_ = IpFamily::kIpv4;
    std::memcpy(r.bytes_.data(), &v4, 4);
    return r;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, buf, &v6) != 1) return fail(quoted + " is not an IPv6 address");
  r.family_ = IpFamily::kIpv6;
  std::memcpy(r.bytes_.data(), &v6, 16);
  if (pct != std::string_view::npos) {
    if (zone == Zone::kReject) return fail(quoted + ": a zone (%ifname) is not accepted here");
    if (!validZone(zone_text))
      return fail(quoted + ": \"" + std::string(zone_text) + "\" is not a valid zone");
    r.zone_ = std::string(zone_text);
  }
  return r;
}

bool IpAddress::isUnspecified() const noexcept {
  std::size_t n = family_ == IpFamily::kIpv4 ? 4 : 16;
  return std::all_of(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(n),
                     [](std::uint8_t b) { return b == 0; });
}

bool IpAddress::isLinkLocal() const noexcept {
  return family_ == IpFamily::kIpv6 && bytes_[0] == 0xfe && (bytes_[1] & 0xc0) == 0x80;
}

bool IpAddress::isMulticast() const noexcept {
  if (family_ == IpFamily::kIpv4) return (bytes_[0] & 0xf0) == 0xe0;
  return bytes_[0] == 0xff;
}

bool IpAddress::isV4Mapped() const noexcept {
  if (family_ != IpFamily::kIpv6) return false;
  for (int i = 0; i < 10; ++i) {
    if (bytes_[static_cast<std::size_t>(i)] != 0) return false;
  }
  return bytes_[10] == 0xff && bytes_[11] == 0xff;
}

IpAddress IpAddress::unmapped() const {
  if (!isV4Mapped()) return *this;
  return v4(bytes_[12], bytes_[13], bytes_[14], bytes_[15]);
}

std::string IpAddress::str() const {
  char buf[INET6_ADDRSTRLEN];
  const char* s = inet_ntop(family_ == IpFamily::kIpv4 ? AF_INET : AF_INET6, bytes_.data(), buf, sizeof buf);
  std::string out = s ? s : "?";
  if (!zone_.empty()) out += "%" + zone_;
  return out;
}

Cidr Cidr::of(const IpAddress& network, std::uint8_t prefix_len) {
  Cidr c;
  c.prefix_len_ = std::min(prefix_len, maxPrefix(network.family()));
  c.network_ = masked(network, c.prefix_len_);
  return c;
}

std::optional<Cidr> Cidr::parse(std::string_view text, std::string* why) {
  auto fail = [&](std::string msg) -> std::optional<Cidr> {
    if (why) *why = std::move(msg);
    return std::nullopt;
  };
  const std::string quoted = "\"" + std::string(text) + "\"";
  std::size_t slash = text.find('/');
  auto addr = IpAddress::parse(text.substr(0, slash), IpAddress::Zone::kReject, why);
  if (!addr) return std::nullopt;
  std::uint8_t max = maxPrefix(addr->family());
  std::uint8_t len = max;
  if (slash != std::string_view::npos) {
    std::string_view p = text.substr(slash + 1);
    unsigned v = 0;
    bool digits = !p.empty() && p.size() <= 3 &&
                  std::all_of(p.begin(), p.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!digits || (p.size() > 1 && p.front() == '0')) {
      return fail(quoted + ": prefix length \"" + std::string(p) + "\" is not a decimal number");
    }
    std::from_chars(p.data(), p.data() + p.size(), v);
    if (v > max) {
      return fail(quoted + ": prefix length " + std::to_string(v) + " is out of range [0, " +
                  std::to_string(max) + "]");
    }
    len = static_cast<std::uint8_t>(v);
  }
  if (addr->isV4Mapped() && len >= 96) {
    IpAddress v4 = addr->unmapped();
    return fail(quoted + " is IPv4-mapped; write it as " +
                Cidr::of(v4, static_cast<std::uint8_t>(len - 96)).str());
  }
  if (hasHostBits(*addr, len)) {
    return fail(quoted + " has host bits set; did you mean " + Cidr::of(*addr, len).str() + "?");
  }
  return Cidr::of(*addr, len);
}

bool Cidr::contains(const IpAddress& addr) const noexcept {
  IpAddress a = addr.unmapped();
  if (a.family() != network_.family()) return false;
  const auto& x = a.bytes();
  const auto& n = network_.bytes();
  std::uint8_t full = prefix_len_ / 8;
  for (std::uint8_t i = 0; i < full; ++i) {
    if (x[i] != n[i]) return false;
  }
  std::uint8_t rem = prefix_len_ % 8;
  if (rem == 0) return true;
  auto mask = static_cast<std::uint8_t>(0xff << (8 - rem));
  return (x[full] & mask) == (n[full] & mask);
}

std::string Cidr::str() const {
  return network_.str() + "/" + std::to_string(prefix_len_);
}

}  // namespace rdmagate::conf

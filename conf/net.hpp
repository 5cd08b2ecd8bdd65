#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rdmagate::conf {

enum class IpFamily : std::uint8_t { kIpv4, kIpv6 };

// An IP address literal. Host names are deliberately not accepted anywhere in the config: resolving them
// would make validation depend on DNS at startup and on reload.
class IpAddress {
 public:
  static IpAddress v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d);
  static IpAddress v6(const std::array<std::uint8_t, 16>& bytes);
  static IpAddress v4Any() { return v4(0, 0, 0, 0); }
  static IpAddress v6Any() { return v6({}); }

  enum class Zone : std::uint8_t { kReject, kAllow };
  // Accepts dotted-quad IPv4 (no leading zeros) and any RFC 4291 IPv6 text form. With Zone::kAllow, an
  // IPv6 address may carry "%ifname" (RFC 4007); nothing checks that the interface exists.
  static std::optional<IpAddress> parse(std::string_view text, Zone zone, std::string* why);

  IpFamily family() const noexcept { return family_; }
  // Network byte order; an IPv4 address uses the first 4 bytes.
  const std::array<std::uint8_t, 16>& bytes() const noexcept { return bytes_; }
  const std::string& zone() const noexcept { return zone_; }

  bool isUnspecified() const noexcept;  // 0.0.0.0 or ::
  bool isLinkLocal() const noexcept;    // fe80::/10 (IPv4 link-local needs no zone)
  bool isMulticast() const noexcept;    // 224.0.0.0/4 or ff00::/8
  bool isV4Mapped() const noexcept;     // ::ffff:0:0/96
  // An IPv4-mapped IPv6 address as the IPv4 address it carries; any other address unchanged. Peers
  // reached through a dual-stack listener show up mapped, and the allow list must still match them.
  IpAddress unmapped() const;

  std::string str() const;  // canonical text (inet_ntop), with "%zone" when set

  bool operator==(const IpAddress&) const = default;

 private:
  IpFamily family_ = IpFamily::kIpv4;
  std::array<std::uint8_t, 16> bytes_{};
  std::string zone_;
};

// An address prefix such as 10.0.0.0/8 or fd00::/8.
//
// Policy: a bare address is a host prefix (/32 or /128). An address with host bits set below the prefix
// ("10.1.2.3/8") is an error that suggests the intended network: silently masking it would hide the typo
// that produced it. /0 is allowed and means "every address of that family". An IPv4-mapped IPv6 prefix
// is an error (write the IPv4 prefix), because mapped peers are matched as IPv4.
class Cidr {
 public:
  static Cidr of(const IpAddress& network, std::uint8_t prefix_len);  // network must have no host bits
  static std::optional<Cidr> parse(std::string_view text, std::string* why);

  const IpAddress& network() const noexcept { return network_; }
  std::uint8_t prefixLength() const noexcept { return prefix_len_; }
  IpFamily family() const noexcept { return network_.family(); }

  // IPv4 prefixes match IPv4 peers and IPv4-mapped IPv6 peers; IPv6 prefixes match the other IPv6 peers.
  // The zone of `addr` is ignored.
  bool contains(const IpAddress& addr) const noexcept;

  std::string str() const;  // "10.0.0.0/8"

  bool operator==(const Cidr&) const = default;

 private:
  IpAddress network_;
  std::uint8_t prefix_len_ = 0;
};

}  // namespace rdmagate::conf

#pragma once
// The authentication table the data-plane cores read (issue 14, docs/protocol.md §11): who may connect
// (principal name -> pre-shared secret), which tenant namespace a principal works in, what it may do, and the
// per-name usage counters that quotas and connection limits are checked against.
//
// Control (dataplane/auth_registry.*) builds a table from the settings and the secrets file, then hands its
// address to every core with CONFIG kAuthTable, like a fault table: a published table is never modified, and
// control keeps it alive until every core applied a later one. A core therefore reads it without locks.
// The usage objects are NOT part of a table: the registry owns one per tenant / principal name for the life
// of the process, so a reload keeps a tenant's counted bytes and a principal's open connections (a core
// that re-resolves a connection's principal in a new table finds the same PrincipalUsage object).

#include <openssl/crypto.h>  // OPENSSL_cleanse

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::dataplane {

// A principal's rights, as a mask (PrincipalEntry::perms).
enum Permission : std::uint8_t { kPermRead = 1, kPermWrite = 2, kPermDelete = 4 };
inline constexpr std::uint8_t kPermAll = 0xff;  // auth off: every request is allowed

// One per tenant name for the life of the process (survives reloads).
struct TenantUsage {
  std::atomic<std::uint64_t> bytes{0}, objects{0};
};

// One per principal name for the life of the process (survives reloads).
struct PrincipalUsage {
  std::atomic<std::uint32_t> connections{0};
};

struct TenantEntry {
  std::string name;
  std::uint16_t id = 0;  // namespace id; 0 is the "no authentication" namespace, never a configured tenant
  std::uint64_t max_bytes = 0, max_objects = 0;  // 0: unlimited
  TenantUsage* usage = nullptr;
};

struct PrincipalEntry {
  std::string name;
  std::vector<std::uint8_t> secret;   // 16..64 bytes, never on the wire
  std::uint8_t perms = 0;             // Permission mask
  std::uint32_t max_connections = 0;  // 0: unlimited
  const TenantEntry* tenant = nullptr;
  PrincipalUsage* usage = nullptr;
};

// Immutable once published. Its copies of the secrets are overwritten when it is destroyed (as conf::Secrets
// does), so freed heap memory handed out again holds none. OPENSSL_cleanse, not explicit_bzero: libbsd
// defines that too, and a daemon whose objects reach it before libc then needs libbsd at run time.
struct AuthTable {
  AuthTable() = default;
  AuthTable(const AuthTable&) = delete;
  AuthTable& operator=(const AuthTable&) = delete;
  ~AuthTable() { wipe_secrets(); }

  void wipe_secrets() noexcept {
    for (PrincipalEntry& p : principals) OPENSSL_cleanse(p.secret.data(), p.secret.size());
  }

  bool required = false;
  std::uint64_t generation = 0;
  std::vector<TenantEntry> tenants;        // stable addresses: built fully before publication
  std::vector<PrincipalEntry> principals;  // sorted by name (find() relies on it)

  // Binary search by name; no allocation (a core calls it on AUTH and on a table swap).
  const PrincipalEntry* find(std::string_view name) const noexcept {
    const auto it = std::lower_bound(
        principals.begin(), principals.end(), name,
        [](const PrincipalEntry& e, std::string_view n) noexcept { return std::string_view(e.name) < n; });
    if (it == principals.end() || std::string_view(it->name) != name) return nullptr;
    return &*it;
  }
};

}  // namespace rdmagate::dataplane

#pragma once
// Turns security.* (conf::SecurityConfig) and the secrets file (conf::Secrets) into the immutable AuthTable
// the cores read (dataplane/auth_table.hpp). Owned by the control thread for the life of the process: it
// keeps, per tenant name, the namespace id and the usage counters, and per principal name the connection
// count, so that a reload (SIGHUP) which rebuilds the table keeps every tenant's objects reachable and its
// counted usage, and every principal's open connections counted, even when a name leaves the config and comes
// back.
//
// Control-thread only (no locks): build() is called at start and on every reload. Tables point into the
// registry's usage objects, so the registry must outlive every table it built (declare it before the engine).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "conf/config.hpp"
#include "conf/secrets.hpp"
#include "dataplane/auth_table.hpp"

namespace rdmagate::dataplane {

class AuthRegistry {
 public:
  // Tenant ids are 16 bits and never reused within a process; 0 is the "no authentication" namespace.
  static constexpr std::uint32_t kMaxTenantIds = 0xffff;

  AuthRegistry() = default;
  AuthRegistry(const AuthRegistry&) = delete;
  AuthRegistry& operator=(const AuthRegistry&) = delete;

  // A new table (generation one above the last built) or nullptr and *error naming the key. With
  // authentication off: required false and no tenants or principals (every connection works in namespace 0),
  // `secrets` unused. With it required: every principal needs a secret in `secrets` and every secret a
  // principal; a principal's tenant must be listed. Nothing is assigned when it fails.
  std::unique_ptr<AuthTable> build(const conf::SecurityConfig& security, const conf::Secrets& secrets,
                                   std::string* error);

  // The id `tenant` was given, or 0 when no built table has named it.
  std::uint16_t tenant_id(std::string_view tenant) const noexcept;
  std::uint64_t generation() const noexcept { return generation_; }

 private:
  struct Tenant {
    std::uint16_t id = 0;
    std::unique_ptr<TenantUsage> usage;
  };

  std::map<std::string, Tenant, std::less<>> tenants_;
  std::map<std::string, std::unique_ptr<PrincipalUsage>, std::less<>> principals_;
  std::uint32_t next_tenant_id_ = 1;
  std::uint64_t generation_ = 0;
};

}  // namespace rdmagate::dataplane

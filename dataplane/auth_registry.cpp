#include "dataplane/auth_registry.hpp"

#include <algorithm>
#include <set>

namespace rdmagate::dataplane {

static_assert(conf::kPermissionRead == kPermRead && conf::kPermissionWrite == kPermWrite &&
                  conf::kPermissionDelete == kPermDelete,
              "the config's permission mask is the table's");

namespace {

// What the loader already enforces, checked again because a table is also built from a Config assembled in
// code (a reload merge, a test): a bad one must fail here rather than reach a core.
bool check(const conf::SecurityConfig& s, const conf::Secrets& secrets, std::string* error) {
  std::set<std::string_view> tenants;
  for (std::size_t i = 0; i < s.tenants.size(); ++i) {
    const std::string_view name = s.tenants[i].name;
    const std::string key = "security.tenants[" + std::to_string(i) + "].name";
    if (!conf::validAuthName(name)) {
      *error = key + ": \"" + std::string(name) + "\" must be 1 to 64 characters of A-Z a-z 0-9 . _ @ -";
      return false;
    }
    if (!tenants.insert(name).second) {
      *error = key + ": tenant \"" + std::string(name) + "\" is listed twice";
      return false;
    }
  }
  std::set<std::string_view> principals;
  for (std::size_t i = 0; i < s.principals.size(); ++i) {
    const conf::PrincipalConfig& p = s.principals[i];
    const std::string key = "security.principals[" + std::to_string(i) + "]";
    if (!conf::validAuthName(p.name)) {
      *error = key + ".name: \"" + p.name + "\" must be 1 to 64 characters of A-Z a-z 0-9 . _ @ -";
      return false;
    }
    if (!principals.insert(p.name).second) {
      *error = key + ".name: principal \"" + p.name + "\" is listed twice";
      return false;
    }
    if (tenants.count(p.tenant) == 0) {
      *error = key + ".tenant: \"" + p.tenant + "\" is not a tenant in security.tenants";
      return false;
    }
    const conf::PrincipalSecret* secret = secrets.find(p.name);
    if (secret == nullptr) {
      *error = "security.secrets_file: no secret for principal \"" + p.name + "\" (" + key + ")";
      return false;
    }
    if (secret->secret.size() < conf::kMinSecretBytes || secret->secret.size() > conf::kMaxSecretBytes) {
      *error = "security.secrets_file: the secret of principal \"" + p.name + "\" is not 16 to 64 bytes";
      return false;
    }
  }
  for (const conf::PrincipalSecret& e : secrets.entries()) {
    if (principals.count(e.principal) == 0) {
      *error = "security.secrets_file: a secret for \"" + e.principal +
               "\", which is not a principal in security.principals (remove it, or add the principal)";
      return false;
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<AuthTable> AuthRegistry::build(const conf::SecurityConfig& s, const conf::Secrets& secrets,
                                               std::string* error) {
  auto table = std::make_unique<AuthTable>();
  table->required = s.authentication_required();
  if (!table->required) {
    table->generation = ++generation_;
    return table;
  }
  if (!check(s, secrets, error)) return nullptr;
  std::size_t fresh = 0;
  for (const conf::TenantConfig& t : s.tenants) fresh += tenants_.count(t.name) == 0 ? 1 : 0;
  if (next_tenant_id_ + fresh - 1 > kMaxTenantIds) {
    *error = "security.tenants: more than " + std::to_string(kMaxTenantIds) +
             " distinct tenant names since the daemon started (ids are never reused); restart it";
    return nullptr;
  }

  table->tenants.reserve(s.tenants.size());  // no reallocation below: principals point into it
  std::map<std::string_view, const TenantEntry*> by_name;
  for (const conf::TenantConfig& t : s.tenants) {
    auto [it, inserted] = tenants_.try_emplace(t.name);
    if (inserted) {
      it->second.id = static_cast<std::uint16_t>(next_tenant_id_++);
      it->second.usage = std::make_unique<TenantUsage>();
    }
    TenantEntry& e = table->tenants.emplace_back();
    e.name = t.name;
    e.id = it->second.id;
    e.max_bytes = t.max_bytes;
    e.max_objects = t.max_objects;
    e.usage = it->second.usage.get();
    by_name.emplace(e.name, &e);
  }

  table->principals.reserve(s.principals.size());
  for (const conf::PrincipalConfig& p : s.principals) {
    std::unique_ptr<PrincipalUsage>& usage = principals_[p.name];
    if (!usage) usage = std::make_unique<PrincipalUsage>();
    PrincipalEntry& e = table->principals.emplace_back();
    e.name = p.name;
    e.secret = secrets.find(p.name)->secret;
    e.perms = p.permissions;
    e.max_connections = p.max_connections;
    e.tenant = by_name.at(p.tenant);
    e.usage = usage.get();
  }
  std::sort(table->principals.begin(), table->principals.end(),
            [](const PrincipalEntry& a, const PrincipalEntry& b) { return a.name < b.name; });
  table->generation = ++generation_;
  return table;
}

std::uint16_t AuthRegistry::tenant_id(std::string_view tenant) const noexcept {
  const auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.id;
}

}  // namespace rdmagate::dataplane

#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The principals' pre-shared secrets (security.secrets_file): a YAML file of its own, never part of Config,
// so no config dump, diff or log line can carry a secret. Format:
//
//   secrets:
//     app-writer: "hex:5f1c...(32 to 128 hex digits: 16 to 64 bytes)"
//
// Error messages name the file, the principal and what is wrong, never a secret's bytes or text.
namespace rdmagate::conf {

// Tenant and principal names: what the AUTH message can carry (docs/protocol.md §11).
inline constexpr std::size_t kMaxAuthNameBytes = 64;
bool validAuthName(std::string_view name) noexcept;  // 1..64 bytes of [A-Za-z0-9._@-]

inline constexpr std::size_t kMinSecretBytes = 16;
inline constexpr std::size_t kMaxSecretBytes = 64;
// A secrets file holds a few hundred bytes per principal; anything far bigger is not one.
inline constexpr std::size_t kMaxSecretsFileBytes = 1 << 20;

struct PrincipalSecret {
  std::string principal;
  std::vector<std::uint8_t> secret;  // kMinSecretBytes..kMaxSecretBytes
};

// Sorted by principal name, names unique. The bytes are overwritten when it is destroyed (a copy the
// allocator hands out again then holds no secret).
class Secrets {
 public:
  Secrets() = default;
  explicit Secrets(std::vector<PrincipalSecret> entries);
  Secrets(const Secrets&) = delete;
  Secrets& operator=(const Secrets&) = delete;
  Secrets(Secrets&&) noexcept = default;
  Secrets& operator=(Secrets&&) noexcept;
  ~Secrets();

  const std::vector<PrincipalSecret>& entries() const noexcept { return entries_; }
  const PrincipalSecret* find(std::string_view principal) const noexcept;

 private:
  void wipe() noexcept;
  std::vector<PrincipalSecret> entries_;
};

// Parses a secrets file's text; `source` names the file in messages. nullopt and *error otherwise.
std::optional<Secrets> parseSecrets(std::string_view text, std::string_view source, std::string* error);

// Who may own a secrets file read by `reader` (the effective uid): the reader itself or root, as sshd's
// StrictModes asks of key files. Another user who owns it can rewrite it, and so choose our principals'
// secrets.
bool secretsOwnerAllowed(unsigned owner, unsigned reader) noexcept;

// Opens `path` once and checks the descriptor it reads from (fstat on the same fd: no window between the
// check and the read): a regular file owned as secretsOwnerAllowed says, whose mode grants the group and
// others nothing, at most kMaxSecretsFileBytes. Then parseSecrets. *error names the file, and for a wide mode
// or a wrong owner what is wrong and the fix.
std::optional<Secrets> loadSecretsFile(const std::string& path, std::string* error);

}  // namespace rdmagate::conf

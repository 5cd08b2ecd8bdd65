#pragma once
// Proofs of the AUTH exchange (docs/protocol.md §11): HMAC-SHA-256 over a transcript that binds both
// incarnation stamps, both nonces and the principal name, keyed with the principal's pre-shared secret.
// libcrypto does the cryptography (HMAC, CRYPTO_memcmp, RAND_bytes); nothing here is hand-written crypto.
// No allocation, no exceptions: the gateway's control thread and the client call it per connection.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace rdmagate::protocol::auth {

inline constexpr std::size_t kNonceBytes = 32, kProofBytes = 32, kMaxPrincipal = 64, kMinSecret = 16,
                             kMaxSecret = 64;
using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Proof = std::array<std::uint8_t, kProofBytes>;
enum class Mechanism : std::uint8_t { kHmacSha256 = 1 };
enum class AuthStatus : std::uint32_t { kOk = 0, kDenied = 1, kConnectionLimit = 2 };
enum class Role : std::uint8_t { kClient = 1, kGateway = 2 };  // the byte after the transcript

struct Transcript {
  std::uint64_t initiator_incarnation;  // the connect request's source stamp
  std::uint64_t acceptor_incarnation;   // the accept's source stamp
  Nonce gateway_nonce;                  // Ng, from the accept
  Nonce client_nonce;                   // Nc, from the AUTH
  std::string_view principal;           // 1..64 bytes
};

// Size of the transcript T for a name of n bytes: label, two u64, two nonces, u8 n, name.
constexpr std::size_t transcript_size(std::size_t n) {
  return 16 + 8 + 8 + kNonceBytes + kNonceBytes + 1 + n;
}
inline constexpr std::size_t kMaxTranscript = transcript_size(kMaxPrincipal);

// Writes T into `out` (at least transcript_size(principal.size()) bytes); returns its length, 0 when the
// principal is not 1..64 bytes or `out` is too small. Exposed for the test vectors.
std::size_t write_transcript(const Transcript&, std::span<std::uint8_t> out) noexcept;

// HMAC-SHA-256(secret, T || role). false when the secret is not kMinSecret..kMaxSecret bytes, the principal
// is not 1..64 bytes, or libcrypto fails (never expected); `out` is untouched then.
bool compute_proof(Role, std::span<const std::uint8_t> secret, const Transcript&, Proof* out) noexcept;
bool proofs_equal(const Proof&, const Proof&) noexcept;  // constant time (CRYPTO_memcmp)
bool random_nonce(Nonce* out) noexcept;                  // RAND_bytes; false: the generator failed
bool valid_principal_name(std::string_view) noexcept;    // 1..64 bytes of [A-Za-z0-9._@-]

}  // namespace rdmagate::protocol::auth

#include "protocol/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

#include "protocol/byte_order.hpp"
#include "protocol/message.hpp"

namespace rdmagate::protocol::auth {
namespace {

constexpr char kLabel[] = "rdmagate-auth-v1";
static_assert(sizeof kLabel - 1 == 16, "the label is 16 bytes, no NUL");
static_assert(kMaxPrincipal == kAuthMaxPrincipal && kNonceBytes == kGatewayNonceSize &&
              std::tuple_size_v<AuthBytes> == kProofBytes);

}  // namespace

std::size_t write_transcript(const Transcript& t, std::span<std::uint8_t> out) noexcept {
  const std::size_t n = t.principal.size();
  if (n == 0 || n > kMaxPrincipal || out.size() < transcript_size(n)) return 0;
  std::uint8_t* p = out.data();
  std::memcpy(p, kLabel, 16);
  le::store<std::uint64_t>(p + 16, t.initiator_incarnation);
  le::store<std::uint64_t>(p + 24, t.acceptor_incarnation);
  std::memcpy(p + 32, t.gateway_nonce.data(), kNonceBytes);
  std::memcpy(p + 64, t.client_nonce.data(), kNonceBytes);
  p[96] = static_cast<std::uint8_t>(n);
  std::memcpy(p + 97, t.principal.data(), n);
  return transcript_size(n);
}

bool compute_proof(Role role, std::span<const std::uint8_t> secret, const Transcript& t,
                   Proof* out) noexcept {
  if (secret.size() < kMinSecret || secret.size() > kMaxSecret) return false;
  std::array<std::uint8_t, kMaxTranscript + 1> msg;
  const std::size_t n = write_transcript(t, msg);
  if (n == 0) return false;
  msg[n] = static_cast<std::uint8_t>(role);
  // One-shot HMAC into a stack buffer: no context to leak, no allocation by us (libcrypto's own is internal).
  Proof mac;
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg.data(), n + 1, mac.data(),
           &len) == nullptr ||
      len != kProofBytes) {
    OPENSSL_cleanse(mac.data(), mac.size());
    return false;
  }
  *out = mac;
  return true;
}

bool proofs_equal(const Proof& a, const Proof& b) noexcept {
  return CRYPTO_memcmp(a.data(), b.data(), kProofBytes) == 0;
}

bool random_nonce(Nonce* out) noexcept {
  Nonce n;
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) return false;
  *out = n;
  return true;
}

bool valid_principal_name(std::string_view name) noexcept {
  return valid_principal_bytes(name);
}

}  // namespace rdmagate::protocol::auth

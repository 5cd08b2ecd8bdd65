#include "protocol/auth.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "protocol/message.hpp"

namespace rdmagate::protocol::auth {
namespace {

using Bytes = std::vector<std::uint8_t>;

// ---- the test vectors of docs/protocol.md §11.6, read from the document itself ------------------------

std::optional<Bytes> from_hex(const std::string& h) {
  if (h.size() % 2 != 0) return std::nullopt;
  Bytes out;
  for (std::size_t i = 0; i < h.size(); i += 2) {
    unsigned v = 0;
    if (std::sscanf(h.c_str() + i, "%2x", &v) != 1) return std::nullopt;
    out.push_back(static_cast<std::uint8_t>(v));
  }
  return out;
}

// One "auth test vector N" block: `key = value` lines, a value continuing on indented lines.
using Vector = std::map<std::string, std::string>;

std::vector<Vector> read_doc_vectors() {
  std::ifstream in(RDMAGATE_SOURCE_DIR "/docs/protocol.md");
  EXPECT_TRUE(in.good()) << "cannot open docs/protocol.md";
  std::vector<Vector> out;
  std::string line, last_key;
  bool in_vector = false;
  while (std::getline(in, line)) {
    if (line.rfind("auth test vector ", 0) == 0) {
      out.emplace_back();
      in_vector = true;
      continue;
    }
    if (!in_vector) continue;
    if (line.rfind("```", 0) == 0) {
      in_vector = false;
      continue;
    }
    const auto eq = line.find(" = ");
    if (!line.empty() && line[0] != ' ' && eq != std::string::npos) {
      std::istringstream key(line.substr(0, eq));
      key >> last_key;
      out.back()[last_key] = line.substr(eq + 3);
    } else {
      std::istringstream more(line);
      std::string part;
      more >> part;
      out.back()[last_key] += part;
    }
  }
  return out;
}

template <std::size_t N>
std::array<std::uint8_t, N> fixed(const std::string& hex) {
  std::array<std::uint8_t, N> a{};
  const auto b = from_hex(hex);
  EXPECT_TRUE(b && b->size() == N) << hex;
  if (b && b->size() == N) std::copy(b->begin(), b->end(), a.begin());
  return a;
}

Bytes bytes(const std::string& hex) {
  const auto b = from_hex(hex);
  EXPECT_TRUE(b.has_value()) << hex;
  return b.value_or(Bytes{});
}

// The session each side holds after a 1.2 handshake without checksums; big enough for any AUTH.
Session session(std::uint64_t local, std::uint64_t peer) {
  Session s;
  s.version = pack_version(1, 2);
  s.params = ConnParams{128, 4096, 16, 1u << 20};
  s.local_incarnation = local;
  s.peer_incarnation = peer;
  return s;
}

TEST(AuthVectors, DocumentHasAtLeastTwo) {
  const auto vs = read_doc_vectors();
  ASSERT_GE(vs.size(), 2u);
  for (const Vector& v : vs)
    for (const char* k : {"K", "Ii", "Ia", "Ng", "Nc", "name", "cookie", "T", "Pc", "Pg", "AUTH", "ANSWER_OK",
                          "ANSWER_DENIED"})
      EXPECT_TRUE(v.count(k)) << "missing " << k;
}

TEST(AuthVectors, DocumentVectorsReproduce) {
  const auto vs = read_doc_vectors();
  ASSERT_GE(vs.size(), 2u);
  for (std::size_t i = 0; i < vs.size(); ++i) {
    SCOPED_TRACE("vector " + std::to_string(i + 1));
    const Vector& v = vs[i];
    const Bytes key = bytes(v.at("K"));
    const std::string name = v.at("name");
    Transcript t{std::stoull(v.at("Ii"), nullptr, 16), std::stoull(v.at("Ia"), nullptr, 16),
                 fixed<kNonceBytes>(v.at("Ng")), fixed<kNonceBytes>(v.at("Nc")), name};
    const std::uint64_t cookie = std::stoull(v.at("cookie"), nullptr, 16);

    std::array<std::uint8_t, kMaxTranscript> tb{};
    const std::size_t tn = write_transcript(t, tb);
    EXPECT_EQ(Bytes(tb.begin(), tb.begin() + tn), bytes(v.at("T")));

    Proof pc{}, pg{};
    ASSERT_TRUE(compute_proof(Role::kClient, key, t, &pc));
    ASSERT_TRUE(compute_proof(Role::kGateway, key, t, &pg));
    EXPECT_EQ(Bytes(pc.begin(), pc.end()), bytes(v.at("Pc")));
    EXPECT_EQ(Bytes(pg.begin(), pg.end()), bytes(v.at("Pg")));

    // The gateway reads the document's AUTH and checks its proof; re-encoding gives the same bytes.
    const Session gw = session(t.acceptor_incarnation, t.initiator_incarnation);
    const Session cl = session(t.initiator_incarnation, t.acceptor_incarnation);
    const Bytes auth_wire = bytes(v.at("AUTH"));
    Message m;
    ASSERT_EQ(decode_message(auth_wire, gw, m), WireError::kOk);
    EXPECT_EQ(m.type, MessageType::kAuth);
    EXPECT_EQ(m.cookie, cookie);
    EXPECT_EQ(m.auth_mechanism, static_cast<std::uint8_t>(Mechanism::kHmacSha256));
    EXPECT_EQ(m.auth_principal, name);
    EXPECT_EQ(m.auth_client_nonce, t.client_nonce);
    EXPECT_TRUE(proofs_equal(m.auth_proof, pc));
    Message mine = make_auth_message(cookie, 1, name, t.client_nonce, pc);
    mine.credits = m.credits;
    Bytes out(4096);
    auto enc = encode_message(mine, cl, out);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(Bytes(out.begin(), out.begin() + enc.size), auth_wire);

    // The client reads the ok answer and checks Pg; our encoder produces the same bytes.
    const Bytes ok_wire = bytes(v.at("ANSWER_OK"));
    ASSERT_EQ(decode_message(ok_wire, cl, m), WireError::kOk);
    EXPECT_EQ(m.type, MessageType::kAuthAnswer);
    EXPECT_EQ(m.auth_status, static_cast<std::uint32_t>(AuthStatus::kOk));
    EXPECT_EQ(m.cookie, cookie);
    EXPECT_TRUE(proofs_equal(m.auth_proof, pg));
    Message ans = make_auth_answer(cookie, 0, pg);
    ans.credits = m.credits;
    enc = encode_message(ans, gw, out);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(Bytes(out.begin(), out.begin() + enc.size), ok_wire);

    const Bytes denied_wire = bytes(v.at("ANSWER_DENIED"));
    ASSERT_EQ(decode_message(denied_wire, cl, m), WireError::kOk);
    EXPECT_EQ(m.auth_status, static_cast<std::uint32_t>(AuthStatus::kDenied));
    EXPECT_EQ(m.auth_proof, Proof{});
    ans = make_auth_answer(cookie, 1, pg);  // the proof is not sent with a refusal
    ans.credits = m.credits;
    enc = encode_message(ans, gw, out);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(Bytes(out.begin(), out.begin() + enc.size), denied_wire);
  }
}

// ---- properties --------------------------------------------------------------------------------------

const Bytes kKey(32, 0x42);

Transcript base() {
  Nonce ng{}, nc{};
  ng.fill(0x11);
  nc.fill(0x22);
  return Transcript{7, 9, ng, nc, "alice"};
}

Proof proof(Role r, const Transcript& t, const Bytes& key = kKey) {
  Proof p{};
  EXPECT_TRUE(compute_proof(r, key, t, &p));
  return p;
}

TEST(AuthProof, RolesDiffer) {
  EXPECT_FALSE(proofs_equal(proof(Role::kClient, base()), proof(Role::kGateway, base())));
}

// Every field of the transcript is bound: changing any one changes both proofs (the replay argument).
TEST(AuthProof, EveryTranscriptFieldIsBound) {
  const Proof pc = proof(Role::kClient, base()), pg = proof(Role::kGateway, base());
  std::vector<Transcript> variants(6, base());
  variants[0].initiator_incarnation ^= 1;
  variants[1].acceptor_incarnation ^= 1ull << 63;
  variants[2].gateway_nonce[31] ^= 1;
  variants[3].client_nonce[0] ^= 0x80;
  variants[4].principal = "alicf";
  variants[5].principal = "alice.";
  for (const Transcript& t : variants) {
    EXPECT_FALSE(proofs_equal(proof(Role::kClient, t), pc));
    EXPECT_FALSE(proofs_equal(proof(Role::kGateway, t), pg));
  }
  Bytes other = kKey;
  other[5] ^= 1;
  EXPECT_FALSE(proofs_equal(proof(Role::kClient, base(), other), pc));
  EXPECT_TRUE(proofs_equal(proof(Role::kClient, base()), pc));  // and it is deterministic
}

TEST(AuthProof, SecretAndNameBoundsAndOutUntouchedOnFailure) {
  Proof p{};
  p.fill(0xee);
  const Proof before = p;
  EXPECT_FALSE(compute_proof(Role::kClient, Bytes(kMinSecret - 1, 1), base(), &p));
  EXPECT_FALSE(compute_proof(Role::kClient, Bytes(kMaxSecret + 1, 1), base(), &p));
  EXPECT_FALSE(compute_proof(Role::kClient, Bytes{}, base(), &p));
  Transcript t = base();
  t.principal = "";
  EXPECT_FALSE(compute_proof(Role::kClient, kKey, t, &p));
  const std::string long_name(kMaxPrincipal + 1, 'a');
  t.principal = long_name;
  EXPECT_FALSE(compute_proof(Role::kClient, kKey, t, &p));
  EXPECT_EQ(p, before);
  EXPECT_TRUE(compute_proof(Role::kClient, Bytes(kMinSecret, 1), base(), &p));
  EXPECT_TRUE(compute_proof(Role::kClient, Bytes(kMaxSecret, 1), base(), &p));
  const std::string longest(kMaxPrincipal, 'a');
  t.principal = longest;
  EXPECT_TRUE(compute_proof(Role::kClient, kKey, t, &p));
  std::array<std::uint8_t, kMaxTranscript> buf{};
  EXPECT_EQ(write_transcript(t, buf), kMaxTranscript);
  EXPECT_EQ(write_transcript(t, std::span<std::uint8_t>(buf.data(), kMaxTranscript - 1)), 0u);
}

TEST(AuthProof, EqualityIsExact) {
  Proof a{}, b{};
  a.fill(3);
  b.fill(3);
  EXPECT_TRUE(proofs_equal(a, b));
  for (std::size_t i = 0; i < kProofBytes; ++i) {
    Proof c = a;
    c[i] ^= 0x01;
    EXPECT_FALSE(proofs_equal(a, c)) << i;
  }
}

TEST(AuthNonce, FreshAndNonzero) {
  Nonce a{}, b{};
  ASSERT_TRUE(random_nonce(&a));
  ASSERT_TRUE(random_nonce(&b));
  EXPECT_NE(a, b);
  EXPECT_NE(a, Nonce{});
}

TEST(AuthName, Charset) {
  EXPECT_TRUE(valid_principal_name("app-writer"));
  EXPECT_TRUE(valid_principal_name("a"));
  EXPECT_TRUE(valid_principal_name("svc.backup_2@example-org"));
  EXPECT_TRUE(valid_principal_name(std::string(64, 'x')));
  EXPECT_FALSE(valid_principal_name(""));
  EXPECT_FALSE(valid_principal_name(std::string(65, 'x')));
  EXPECT_FALSE(valid_principal_name("a b"));
  EXPECT_FALSE(valid_principal_name("a/b"));
  EXPECT_FALSE(valid_principal_name("a:b"));
  EXPECT_FALSE(valid_principal_name(std::string_view("a\0b", 3)));
  EXPECT_FALSE(valid_principal_name("caf\xc3\xa9"));
}

}  // namespace
}  // namespace rdmagate::protocol::auth

// Writes the seed corpora of the fuzz targets: one valid input per message type and parameter set,
// and handshake bodies of every kind and reject reason. Usage: fuzz_make_corpus OUT_DIR
// (creates OUT_DIR/fuzz_message and OUT_DIR/fuzz_handshake). The output is checked in under
// tests/fuzz/corpus; rerun this after a wire-format change.

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_common.hpp"

using namespace rdmagate::fuzz;
namespace fs = std::filesystem;

namespace {

bool write_file(const fs::path& p, std::uint8_t selector, std::span<const std::uint8_t> body) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.put(static_cast<char>(selector));
  f.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size()));
  return static_cast<bool>(f);
}

Message make(MessageType type, std::uint16_t frags, std::size_t payload, const Session& s) {
  static const std::array<std::uint8_t, 64> kPayload = [] {
    std::array<std::uint8_t, 64> a{};
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>('a' + i % 26);
    return a;
  }();
  static const AuthBytes kNonce = [] {
    AuthBytes a{};
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(0x80 + i);
    return a;
  }();
  if (type == MessageType::kAuth) {
    Message m = make_auth_message(0x41, 1, "app-writer@tenant.example", kNonce, kNonce);
    m.credits = 1;
    return m;
  }
  if (type == MessageType::kAuthAnswer) {
    Message m = make_auth_answer(0x41, 0, kNonce);
    m.credits = 1;
    return m;
  }
  Message m;
  m.type = type;
  if (type == MessageType::kNoop) {
    m.credits = s.params.queue_depth;
    return m;
  }
  m.credits = 1;
  m.opcode = 2;
  m.cookie = 0x1000 + static_cast<std::uint64_t>(type);
  if (is_chunk_request(type)) {
    const std::uint32_t len = std::max<std::uint32_t>(1, s.params.max_bulk_size / frags);
    for (std::uint16_t i = 0; i < frags; ++i)
      m.chunk.fragments[m.chunk.count++] = Fragment{0x7f0000000000ull + i * 0x100000ull, len, 0x1234u + i};
  }
  if (type == MessageType::kCompletion) m.byte_count = s.params.max_bulk_size;
  if (type != MessageType::kCompletion) m.payload = std::span<const std::uint8_t>(kPayload).first(payload);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const fs::path msg_dir = fs::path(argv[1]) / "fuzz_message";
  const fs::path hs_dir = fs::path(argv[1]) / "fuzz_handshake";
  fs::create_directories(msg_dir);
  fs::create_directories(hs_dir);
  int files = 0;

  // Messages: selector = checksum bit | parameter set << 2 (a 1.2 session). AUTH only where the set's
  // message size carries it (the handshake refuses smaller ones with authentication on).
  for (std::uint8_t set = 0; set < 4; ++set) {
    for (std::uint8_t checksum = 0; checksum < 2; ++checksum) {
      const std::uint8_t sel = static_cast<std::uint8_t>(checksum | (set << 2));
      const Session tx = sender_session(sel);
      const std::uint16_t max_frags =
          std::min(tx.params.max_fragments, fragments_fitting(tx.params.max_message_size));
      for (std::uint8_t t = kMessageTypeMin; t <= kMessageTypeMax; ++t) {
        const auto type = static_cast<MessageType>(t);
        if ((type == MessageType::kAuth || type == MessageType::kAuthAnswer) &&
            tx.params.max_message_size < kAuthMaxSize)
          continue;
        const std::uint16_t frags = is_chunk_request(type) ? max_frags : 0;
        const std::size_t room = tx.params.max_message_size - payload_offset(type, frags);
        const std::size_t payload = type == MessageType::kNoop ? 0 : std::min<std::size_t>(room, 16);
        std::vector<std::uint8_t> out(tx.params.max_message_size);
        const auto e = encode_message(make(type, frags, payload, tx), tx, out);
        if (!e.ok()) {
          std::fprintf(stderr, "encode failed: set %d type %d: %s\n", set, t, to_string(e.error).data());
          return 1;
        }
        const std::string name =
            "set" + std::to_string(set) + (checksum ? "_crc_" : "_") + "type" + std::to_string(t);
        files += write_file(msg_dir / name, sel, {out.data(), e.size});
      }
    }
  }

  // A refusal (status denied, no proof) and a minor-1 session's AUTH (unknown there) beside the ok answers.
  {
    const Session tx = sender_session(0);
    std::vector<std::uint8_t> out(tx.params.max_message_size);
    Message denied = make_auth_answer(0x41, 1, {});
    denied.credits = 1;
    auto e = encode_message(denied, tx, out);
    files += e.ok() && write_file(msg_dir / "set0_type8_denied", 0, {out.data(), e.size});
    e = encode_message(make(MessageType::kAuth, 0, 0, tx), tx, out);
    files += e.ok() && write_file(msg_dir / "set0_minor1_type7", 16, {out.data(), e.size});
  }

  // Handshake bodies: requests (first connect and reconnect, with and without checksum), the
  // accept the acceptor gives them, and every reject reason.
  // 0x80 on: the acceptor requires authentication (0xc0: a 1.1 initiator it refuses auth_required).
  for (std::uint8_t sel : {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1f, 0x20, 0x3f, 0x40, 0x60, 0x80, 0xa1, 0xc0}) {
    const HandshakeBody req = initiator_request(sel);
    std::array<std::uint8_t, kCmConnectRequestPrivateDataMax> buf{};  // IB pads to 56 bytes
    const auto e = encode_handshake(req, buf);
    const std::string tag = "sel" + std::to_string(sel);
    files += write_file(hs_dir / ("request_" + tag), sel, {buf.data(), e.size});
    files += write_file(hs_dir / ("request_padded_" + tag), sel, buf);
    const AcceptOutcome o = negotiate_accept({buf.data(), e.size}, acceptor(sel), device(sel));
    std::array<std::uint8_t, kMaxHandshakeSize> reply{};
    const auto r = encode_handshake(o.reply, reply);
    files += write_file(hs_dir / ("reply_" + tag), sel, {reply.data(), r.size});
  }
  for (std::uint8_t why = 1; why <= kRejectReasonMax; ++why) {
    const HandshakeBody b =
        make_reject(acceptor(0), device(0), static_cast<RejectReason>(why), kInitiatorStamp);
    std::array<std::uint8_t, kMaxHandshakeSize> out{};
    const auto e = encode_handshake(b, out);
    files += write_file(hs_dir / ("reject_" + std::string(to_string(b.reason))), 0, {out.data(), e.size});
  }
  std::printf("wrote %d files under %s\n", files, argv[1]);
  return 0;
}

// libFuzzer target: decode_message. Beyond "does not crash", every accepted input must be the
// canonical encoding of what was decoded, stay within the negotiated limits, and be rejected when
// truncated by one byte; and its fast path must give what the ordered checks give, on every input.

#include <cstring>
#include <memory>

#include "fuzz_common.hpp"
#include "protocol/crc32c.hpp"

using namespace rdmagate::fuzz;

namespace {

void check_accepted(const std::uint8_t* rx, std::size_t n, const Message& m, const Session& s,
                    std::uint8_t sel) {
  const ConnParams& p = s.params;
  RDMAGATE_FUZZ_CHECK(n >= kHeaderSize && n <= p.max_message_size);
  RDMAGATE_FUZZ_CHECK(m.credits <= p.queue_depth);
  RDMAGATE_FUZZ_CHECK(m.payload.empty() ||
                      (m.payload.data() >= rx && m.payload.data() + m.payload.size() == rx + n));
  if (m.type == MessageType::kInlineRequest || m.type == MessageType::kInlineResponse)
    RDMAGATE_FUZZ_CHECK(kHeaderSize + m.payload.size() == n);
  if (is_chunk_request(m.type)) {
    RDMAGATE_FUZZ_CHECK(m.chunk.count >= 1 && m.chunk.count <= p.max_fragments &&
                        m.chunk.count <= kMaxFragments);
    for (const Fragment& f : m.chunk.view()) RDMAGATE_FUZZ_CHECK(f.len != 0 && f.addr + f.len >= f.addr);
    RDMAGATE_FUZZ_CHECK(m.chunk.total_length() <= p.max_bulk_size);
    RDMAGATE_FUZZ_CHECK(payload_offset(m.type, m.chunk.count) + m.payload.size() == n);
  } else {
    RDMAGATE_FUZZ_CHECK(m.chunk.count == 0);
  }
  if (m.type == MessageType::kNoop)
    RDMAGATE_FUZZ_CHECK(n == kHeaderSize && m.opcode == 0 && m.cookie == 0 && m.payload.empty());
  if (m.type == MessageType::kCompletion)
    RDMAGATE_FUZZ_CHECK(n == kCompletionSize && m.byte_count <= p.max_bulk_size && m.payload.empty());
  if (m.type == MessageType::kAuth || m.type == MessageType::kAuthAnswer) {
    RDMAGATE_FUZZ_CHECK((s.version & 0x0f) >= 2 && m.opcode == 0 && m.payload.empty());
  }
  if (m.type == MessageType::kAuth) {
    RDMAGATE_FUZZ_CHECK(valid_principal_bytes(m.auth_principal) && n == kAuthFixedSize + m.auth_principal.size());
    RDMAGATE_FUZZ_CHECK(reinterpret_cast<const std::uint8_t*>(m.auth_principal.data()) == rx + kAuthFixedSize);
  }
  if (m.type == MessageType::kAuthAnswer) {
    RDMAGATE_FUZZ_CHECK(n == kAuthAnswerSize && m.auth_status <= kAuthStatusMax);
    if (m.auth_status != 0) RDMAGATE_FUZZ_CHECK(m.auth_proof == AuthBytes{});
  }

  // Canonical: the sender's encoding of the decoded message is byte-identical to the input.
  const Session tx = sender_session(sel);
  std::unique_ptr<std::uint8_t[]> out(new std::uint8_t[n]);
  const Encoded<WireError> e = encode_message(m, tx, {out.get(), n});
  RDMAGATE_FUZZ_CHECK(e.ok() && e.size == n);
  RDMAGATE_FUZZ_CHECK(std::memcmp(out.get(), rx, n) == 0);

  // One byte short is never a valid message.
  Message again;
  RDMAGATE_FUZZ_CHECK(decode_message({rx, n - 1}, s, again) != WireError::kOk);

  // Patching credits keeps the message valid (and its checksum right).
  const std::uint16_t credits = static_cast<std::uint16_t>(m.cookie % (p.queue_depth + 1u));
  RDMAGATE_FUZZ_CHECK(patch_credits({out.get(), n}, credits, tx) == WireError::kOk);
  RDMAGATE_FUZZ_CHECK(decode_message({out.get(), n}, s, again) == WireError::kOk && again.credits == credits);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t sel = data[0];
  const Session s = message_session(sel);
  const std::size_t n = size - 1;
  // An exact-size heap copy: any read past the received bytes is an ASan report.
  std::unique_ptr<std::uint8_t[]> rx(new std::uint8_t[n ? n : 1]);
  if (n) std::memcpy(rx.get(), data + 1, n);
  if (s.checksum && (sel & 2) == 0 && n >= kHeaderSize) {
    std::memset(rx.get() + 12, 0, 4);
    const std::uint32_t c = crc32c({rx.get(), n});
    for (int i = 0; i < 4; ++i) rx[12 + i] = static_cast<std::uint8_t>(c >> (8 * i));
  }
  Message m;
  const WireError err = decode_message({rx.get(), n}, s, m);
  const auto code = static_cast<std::uint8_t>(err);
  RDMAGATE_FUZZ_CHECK(code <= kWireErrorMax && err != WireError::kBufferTooSmall);
  // The fast path agrees with the checks taken one by one: the same verdict, and the same message.
  Message ref;
  RDMAGATE_FUZZ_CHECK(decode_message_ordered({rx.get(), n}, s, ref) == err);
  if (err == WireError::kOk) {
    RDMAGATE_FUZZ_CHECK(ref.type == m.type && ref.credits == m.credits && ref.opcode == m.opcode &&
                        ref.cookie == m.cookie && ref.status == m.status && ref.byte_count == m.byte_count &&
                        ref.payload.data() == m.payload.data() && ref.payload.size() == m.payload.size() &&
                        ref.chunk.count == m.chunk.count);
    for (std::uint16_t i = 0; i < m.chunk.count; ++i)
      RDMAGATE_FUZZ_CHECK(ref.chunk.fragments[i] == m.chunk.fragments[i]);
    if (m.type == MessageType::kAuth)
      RDMAGATE_FUZZ_CHECK(ref.auth_mechanism == m.auth_mechanism && ref.auth_principal == m.auth_principal &&
                          ref.auth_principal.data() == m.auth_principal.data() &&
                          ref.auth_client_nonce == m.auth_client_nonce && ref.auth_proof == m.auth_proof);
    if (m.type == MessageType::kAuthAnswer)
      RDMAGATE_FUZZ_CHECK(ref.auth_status == m.auth_status && ref.auth_proof == m.auth_proof);
  }
  if (err == WireError::kOk) check_accepted(rx.get(), n, m, s, sel);
  return 0;
}

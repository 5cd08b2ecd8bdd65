#include "protocol/message.hpp"

#include <algorithm>
#include <cstring>

#include "protocol/byte_order.hpp"
#include "protocol/crc32c.hpp"

namespace rdmagate::protocol {
namespace {

// Byte offsets of the header and bodies (docs/protocol.md, "Message header").
namespace off {
inline constexpr std::size_t kMagic = 0;      // u16
inline constexpr std::size_t kVersion = 2;    // u8
inline constexpr std::size_t kType = 3;       // u8
inline constexpr std::size_t kCredits = 4;    // u16
inline constexpr std::size_t kOpcode = 6;     // u16
inline constexpr std::size_t kLength = 8;     // u32
inline constexpr std::size_t kChecksum = 12;  // u32
inline constexpr std::size_t kSrcStamp = 16;  // u64
inline constexpr std::size_t kDstStamp = 24;  // u64
inline constexpr std::size_t kCookie = 32;    // u64
// chunk requests
inline constexpr std::size_t kFragCount = 40;  // u16
inline constexpr std::size_t kChunkRsvd = 42;  // u16, zero
inline constexpr std::size_t kFragments = 44;  // kFragmentSize each: u64 addr, u32 len, u32 rkey
// completion
inline constexpr std::size_t kStatus = 40;     // u32
inline constexpr std::size_t kByteCount = 44;  // u32
// AUTH
inline constexpr std::size_t kMechanism = 40;    // u8
inline constexpr std::size_t kNameLength = 41;   // u8
inline constexpr std::size_t kAuthRsvd = 42;     // u16, zero
inline constexpr std::size_t kClientNonce = 44;  // 32 bytes
inline constexpr std::size_t kClientProof = 76;  // 32 bytes
inline constexpr std::size_t kName = 108;        // n bytes
// AUTH_ANSWER
inline constexpr std::size_t kAuthStatus = 40;    // u32
inline constexpr std::size_t kGatewayProof = 44;  // 32 bytes
}  // namespace off
static_assert(off::kCookie + 8 == kHeaderSize);
static_assert(off::kName == kAuthFixedSize && off::kClientProof + 32 == off::kName);
static_assert(off::kGatewayProof + 32 == kAuthAnswerSize);
static_assert(off::kFragments == kChunkRequestFixedSize && off::kByteCount + 4 == kCompletionSize);

constexpr std::size_t fixed_size(MessageType t) {
  switch (t) {
    case MessageType::kCompletion:
      return kCompletionSize;
    case MessageType::kReadChunkRequest:
    case MessageType::kWriteChunkRequest:
      return kChunkRequestFixedSize;
    case MessageType::kAuth:
      return kAuthFixedSize;
    case MessageType::kAuthAnswer:
      return kAuthAnswerSize;
    default:
      return kHeaderSize;
  }
}

// Highest type byte a session may carry: AUTH and AUTH_ANSWER exist from minor 2 on.
constexpr std::uint8_t max_type(const Session& s) {
  return (s.version & 0x0f) >= 2 ? kMessageTypeMax : static_cast<std::uint8_t>(MessageType::kCompletion);
}

bool all_zero(const AuthBytes& b) {
  std::uint8_t acc = 0;
  for (const std::uint8_t x : b) acc |= x;
  return acc == 0;
}

// The AUTH_ANSWER rules shared by encode and decode: a known status, and no proof unless ok.
WireError check_auth_answer(std::uint32_t status, const AuthBytes& proof) {
  if (status > kAuthStatusMax) return WireError::kBadAuthField;
  if (status != 0 && !all_zero(proof)) return WireError::kBadAuthField;
  return WireError::kOk;
}

// The negotiated fragment limit, never above the compile-time capacity even if a caller builds a
// Session by hand with a larger value.
constexpr std::uint16_t fragment_cap(const Session& s) {
  return std::min(s.params.max_fragments, kMaxFragments);
}

// CRC32C over the whole message with the checksum field read as zero.
std::uint32_t message_checksum(const std::uint8_t* p, std::size_t length) {
  static constexpr std::uint8_t kZeros[4] = {};
  std::uint32_t c = crc32c({p, off::kChecksum});
  c = crc32c(kZeros, c);
  return crc32c({p + off::kChecksum + 4, length - off::kChecksum - 4}, c);
}

// Shared by encode and decode so both apply identical fragment rules.
WireError check_fragment(const Fragment& f) {
  if (f.len == 0) return WireError::kEmptyFragment;
  if (f.addr > ~std::uint64_t{0} - f.len) return WireError::kFragmentWraps;
  return WireError::kOk;
}

// check_fragment(f) == kOk as one test, for the loops (which then ask check_fragment which rule failed).
constexpr bool fragment_ok(std::uint64_t addr, std::uint32_t len) {
  return len != 0 && addr <= ~std::uint64_t{0} - len;
}

}  // namespace

bool valid_principal_bytes(std::string_view name) noexcept {
  if (name.empty() || name.size() > kAuthMaxPrincipal) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '@' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Message make_auth_message(std::uint64_t cookie, std::uint8_t mechanism, std::string_view principal,
                          const AuthBytes& client_nonce, const AuthBytes& proof) noexcept {
  Message m;
  m.type = MessageType::kAuth;
  m.cookie = cookie;
  m.auth_mechanism = mechanism;
  m.auth_principal = principal;
  m.auth_client_nonce = client_nonce;
  m.auth_proof = proof;
  return m;
}

Message make_auth_answer(std::uint64_t cookie, std::uint32_t status, const AuthBytes& proof) noexcept {
  Message m;
  m.type = MessageType::kAuthAnswer;
  m.cookie = cookie;
  m.auth_status = status;
  if (status == 0) m.auth_proof = proof;
  return m;
}

// The same refusals in the same order as ever (type, credits, payload bound, the type's own rules, length,
// buffer, fragments), with the length computed inside the one switch on the type.
WireError check_encodable(const Message& m, const Session& s, std::size_t out_size) noexcept {
  const auto type = static_cast<std::uint8_t>(m.type);
  if (type < kMessageTypeMin || type > max_type(s)) [[unlikely]]
    return WireError::kUnknownType;
  if (m.credits > s.params.queue_depth) [[unlikely]]
    return WireError::kCreditsOverflow;
  // Bound the payload before any size arithmetic so nothing below can wrap.
  const std::size_t payload = m.payload.size();
  if (payload > s.params.max_message_size) [[unlikely]]
    return WireError::kLengthExceedsMax;

  std::size_t length = kHeaderSize + payload;
  switch (m.type) {
    case MessageType::kNoop:
      if (m.opcode != 0 || m.cookie != 0) return WireError::kReservedNotZero;
      if (payload != 0) return WireError::kUnexpectedPayload;
      break;
    case MessageType::kCompletion:
      if (payload != 0) return WireError::kUnexpectedPayload;
      if (m.byte_count > s.params.max_bulk_size) return WireError::kByteCountTooLarge;
      length = kCompletionSize;
      break;
    case MessageType::kReadChunkRequest:
    case MessageType::kWriteChunkRequest:
      if (m.chunk.count == 0) return WireError::kNoFragments;
      if (m.chunk.count > fragment_cap(s)) return WireError::kTooManyFragments;
      length = kChunkRequestFixedSize + std::size_t{m.chunk.count} * kFragmentSize + payload;
      break;
    case MessageType::kInlineRequest:
    case MessageType::kInlineResponse:
      break;
    case MessageType::kAuth:
      if (m.opcode != 0) return WireError::kReservedNotZero;
      if (payload != 0) return WireError::kUnexpectedPayload;
      // Bounds the name to 64 bytes before it enters the length.
      if (!valid_principal_bytes(m.auth_principal)) return WireError::kBadAuthField;
      length = kAuthFixedSize + m.auth_principal.size();
      break;
    case MessageType::kAuthAnswer:
      if (m.opcode != 0) return WireError::kReservedNotZero;
      if (payload != 0) return WireError::kUnexpectedPayload;
      if (const WireError e = check_auth_answer(m.auth_status, m.auth_proof); e != WireError::kOk) return e;
      length = kAuthAnswerSize;
      break;
  }

  if (length > s.params.max_message_size) [[unlikely]]
    return WireError::kLengthExceedsMax;
  if (length > out_size) [[unlikely]]
    return WireError::kBufferTooSmall;
  if (is_chunk_request(m.type)) {
    // 1 <= count <= fragment_cap(s) <= kMaxFragments was checked above.
    std::uint64_t total = 0;  // kMaxFragments lengths of 32 bits: cannot wrap
    for (const Fragment& fr : m.chunk.view()) {
      if (!fragment_ok(fr.addr, fr.len)) return check_fragment(fr);
      total += fr.len;
    }
    if (total > s.params.max_bulk_size) return WireError::kBulkTooLarge;
  }
  return WireError::kOk;
}

std::size_t write_message(const Message& m, const Session& s, std::span<std::uint8_t> out) noexcept {
  const std::size_t length = encoded_size(m);
  std::uint8_t* p = out.data();

  // Payload first: if the caller's payload overlaps `out` below its final place, the header
  // writes that follow must not clobber it before it moves.
  const std::size_t poff = payload_offset(m.type, m.chunk.count);
  if (!m.payload.empty() && m.payload.data() != p + poff)
    std::memmove(p + poff, m.payload.data(), m.payload.size());

  if (is_chunk_request(m.type)) {
    std::uint8_t* f = p + off::kFragments;
    for (const Fragment& fr : m.chunk.view()) {
      le::store<std::uint64_t>(f, fr.addr);
      le::store<std::uint64_t>(f + 8, std::uint64_t{fr.len} | std::uint64_t{fr.rkey} << 32);  // len, rkey
      f += kFragmentSize;
    }
    static_assert(off::kChunkRsvd == off::kFragCount + 2);
    le::store<std::uint32_t>(p + off::kFragCount, m.chunk.count);  // and the reserved u16, zero
  } else if (m.type == MessageType::kCompletion) {
    static_assert(off::kByteCount == off::kStatus + 4);
    le::store<std::uint64_t>(p + off::kStatus, std::uint64_t{m.status} | std::uint64_t{m.byte_count} << 32);
  } else if (m.type == MessageType::kAuth) {
    p[off::kMechanism] = m.auth_mechanism;
    p[off::kNameLength] = static_cast<std::uint8_t>(m.auth_principal.size());
    le::store<std::uint16_t>(p + off::kAuthRsvd, 0);
    std::memcpy(p + off::kClientNonce, m.auth_client_nonce.data(), m.auth_client_nonce.size());
    std::memcpy(p + off::kClientProof, m.auth_proof.data(), m.auth_proof.size());
    std::memcpy(p + off::kName, m.auth_principal.data(), m.auth_principal.size());
  } else if (m.type == MessageType::kAuthAnswer) {
    le::store<std::uint32_t>(p + off::kAuthStatus, m.auth_status);
    std::memcpy(p + off::kGatewayProof, m.auth_proof.data(), m.auth_proof.size());
  }

  // The first 16 bytes as two little-endian words: magic, version, type, credits, opcode; length, checksum 0.
  static_assert(off::kVersion == 2 && off::kType == 3 && off::kCredits == 4 && off::kOpcode == 6 &&
                off::kLength == 8 && off::kChecksum == 12);
  le::store<std::uint64_t>(p + off::kMagic, std::uint64_t{kMessageMagic} | std::uint64_t{s.version} << 16 |
                                                std::uint64_t{static_cast<std::uint8_t>(m.type)} << 24 |
                                                std::uint64_t{m.credits} << 32 |
                                                std::uint64_t{m.opcode} << 48);
  le::store<std::uint64_t>(p + off::kLength, length);
  le::store<std::uint64_t>(p + off::kSrcStamp, s.local_incarnation);
  le::store<std::uint64_t>(p + off::kDstStamp, s.peer_incarnation);
  le::store<std::uint64_t>(p + off::kCookie, m.cookie);

  if (s.checksum) le::store<std::uint32_t>(p + off::kChecksum, crc32c({p, length}));
  return length;
}

Encoded<WireError> encode_message(const Message& m, const Session& s, std::span<std::uint8_t> out) noexcept {
  if (const WireError e = check_encodable(m, s, out.size()); e != WireError::kOk) return {0, e};
  return {write_message(m, s, out), WireError::kOk};
}

WireError patch_credits(std::span<std::uint8_t> encoded, std::uint16_t credits, const Session& s) noexcept {
  if (encoded.size() < kHeaderSize) return WireError::kTruncatedHeader;
  std::uint8_t* p = encoded.data();
  const std::uint32_t length = le::load<std::uint32_t>(p + off::kLength);
  if (length > encoded.size()) return WireError::kLengthExceedsReceived;
  if (length < encoded.size()) return WireError::kTrailingBytes;
  if (credits > s.params.queue_depth) return WireError::kCreditsOverflow;
  le::store<std::uint16_t>(p + off::kCredits, credits);
  if (s.checksum) {
    le::store<std::uint32_t>(p + off::kChecksum, 0);
    le::store<std::uint32_t>(p + off::kChecksum, crc32c({p, length}));
  }
  return WireError::kOk;
}

namespace {

// AUTH's body (length >= kAuthFixedSize was checked): checks in offset order, every byte bounded by `length`.
WireError decode_auth(std::span<const std::uint8_t> rx, std::uint32_t length, Message& out) noexcept {
  const std::uint8_t* p = rx.data();
  if (out.opcode != 0) return WireError::kReservedNotZero;
  out.auth_mechanism = p[off::kMechanism];
  const std::size_t n = p[off::kNameLength];
  if (le::load<std::uint16_t>(p + off::kAuthRsvd) != 0) return WireError::kReservedNotZero;
  if (n == 0 || n > kAuthMaxPrincipal) return WireError::kBadAuthField;
  if (length < kAuthFixedSize + n) return WireError::kLengthTooSmall;
  if (length > kAuthFixedSize + n) return WireError::kUnexpectedPayload;
  std::memcpy(out.auth_client_nonce.data(), p + off::kClientNonce, out.auth_client_nonce.size());
  std::memcpy(out.auth_proof.data(), p + off::kClientProof, out.auth_proof.size());
  out.auth_principal = {reinterpret_cast<const char*>(p + off::kName), n};
  if (!valid_principal_bytes(out.auth_principal)) return WireError::kBadAuthField;
  return WireError::kOk;
}

// The body checks and fields, after every header check passed (`length` == rx.size(), within bounds).
[[gnu::always_inline]] inline WireError decode_body(std::span<const std::uint8_t> rx, std::uint32_t length,
                                                    const Session& s, Message& out) noexcept {
  const std::uint8_t* p = rx.data();
  out.opcode = le::load<std::uint16_t>(p + off::kOpcode);
  out.cookie = le::load<std::uint64_t>(p + off::kCookie);
  out.chunk.count = 0;
  out.status = 0;
  out.byte_count = 0;
  out.payload = {};

  switch (out.type) {
    case MessageType::kNoop:
      if (out.opcode != 0 || out.cookie != 0) return WireError::kReservedNotZero;
      if (length != kHeaderSize) return WireError::kUnexpectedPayload;
      return WireError::kOk;
    case MessageType::kCompletion:
      if (length != kCompletionSize) return WireError::kUnexpectedPayload;
      out.status = le::load<std::uint32_t>(p + off::kStatus);
      out.byte_count = le::load<std::uint32_t>(p + off::kByteCount);
      if (out.byte_count > s.params.max_bulk_size) return WireError::kByteCountTooLarge;
      return WireError::kOk;
    case MessageType::kInlineRequest:
    case MessageType::kInlineResponse:
      out.payload = rx.subspan(kHeaderSize, length - kHeaderSize);
      return WireError::kOk;
    case MessageType::kAuth:
      return decode_auth(rx, length, out);
    case MessageType::kAuthAnswer:
      if (out.opcode != 0) return WireError::kReservedNotZero;
      if (length != kAuthAnswerSize) return WireError::kUnexpectedPayload;
      out.auth_status = le::load<std::uint32_t>(p + off::kAuthStatus);
      std::memcpy(out.auth_proof.data(), p + off::kGatewayProof, out.auth_proof.size());
      return check_auth_answer(out.auth_status, out.auth_proof);
    case MessageType::kReadChunkRequest:
    case MessageType::kWriteChunkRequest:
      break;
  }

  const std::uint16_t count = le::load<std::uint16_t>(p + off::kFragCount);
  if (le::load<std::uint16_t>(p + off::kChunkRsvd) != 0) return WireError::kReservedNotZero;
  if (count == 0) return WireError::kNoFragments;
  if (count > fragment_cap(s)) return WireError::kTooManyFragments;
  // count <= kMaxFragments, so the product is small; length >= kChunkRequestFixedSize was checked.
  const std::size_t frag_bytes = std::size_t{count} * kFragmentSize;
  if (frag_bytes > length - kChunkRequestFixedSize) return WireError::kFragmentsTruncated;

  std::uint64_t total = 0;
  const std::uint8_t* f = p + off::kFragments;
  for (std::uint16_t i = 0; i < count; ++i, f += kFragmentSize) {
    Fragment& fr = out.chunk.fragments[i];
    fr.addr = le::load<std::uint64_t>(f);
    fr.len = le::load<std::uint32_t>(f + 8);
    fr.rkey = le::load<std::uint32_t>(f + 12);
    if (!fragment_ok(fr.addr, fr.len)) return check_fragment(fr);
    total += fr.len;
  }
  if (total > s.params.max_bulk_size) return WireError::kBulkTooLarge;
  out.chunk.count = count;
  const std::size_t poff = kChunkRequestFixedSize + frag_bytes;
  out.payload = rx.subspan(poff, length - poff);
  return WireError::kOk;
}

// The header checks in the order documented in docs/protocol.md ("Decode errors"): framing first, then
// integrity, then identity. The first failing check is the one reported.
}  // namespace

WireError decode_message_ordered(std::span<const std::uint8_t> rx, const Session& s, Message& out) noexcept {
  if (rx.size() < kHeaderSize) return WireError::kTruncatedHeader;
  const std::uint8_t* p = rx.data();
  if (le::load<std::uint16_t>(p + off::kMagic) != kMessageMagic) return WireError::kBadMagic;
  if (p[off::kVersion] != s.version) return WireError::kBadVersion;
  const std::uint8_t type = p[off::kType];
  if (type < kMessageTypeMin || type > max_type(s)) return WireError::kUnknownType;
  out.type = static_cast<MessageType>(type);

  const std::uint32_t length = le::load<std::uint32_t>(p + off::kLength);
  if (length < fixed_size(out.type)) return WireError::kLengthTooSmall;
  if (length > s.params.max_message_size) return WireError::kLengthExceedsMax;
  if (length > rx.size()) return WireError::kLengthExceedsReceived;
  if (length < rx.size()) return WireError::kTrailingBytes;

  const std::uint32_t checksum = le::load<std::uint32_t>(p + off::kChecksum);
  if (s.checksum) {
    if (checksum != message_checksum(p, length)) return WireError::kBadChecksum;
  } else if (checksum != 0) {
    return WireError::kUnexpectedChecksum;
  }

  if (le::load<std::uint64_t>(p + off::kSrcStamp) != s.peer_incarnation) return WireError::kStaleSource;
  if (le::load<std::uint64_t>(p + off::kDstStamp) != s.local_incarnation) return WireError::kStaleDestination;
  out.credits = le::load<std::uint16_t>(p + off::kCredits);
  if (out.credits > s.params.queue_depth) return WireError::kCreditsOverflow;
  return decode_body(rx, length, s, out);
}

namespace {

// Smallest length of each type, indexed by the type byte's low four bits (0 and 9..15 are not types).
static_assert(kMessageTypeMax < 16);
constexpr std::array<std::uint8_t, 16> kFixedSizes = [] {
  std::array<std::uint8_t, 16> t{};
  for (std::uint8_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<std::uint8_t>(fixed_size(static_cast<MessageType>(i)));
  return t;
}();

}  // namespace

// Every header check of decode_message_ordered, as one chain of tests that all lead to the same place: a
// message failing any of them is decoded again by decode_message_ordered, which reports the first failing
// check in the documented order (and no error code is set up before each test). Sessions with checksums take
// the ordered path: the CRC dominates there.
WireError decode_message(std::span<const std::uint8_t> rx, const Session& s, Message& out) noexcept {
  if (rx.size() >= kHeaderSize && !s.checksum) [[likely]] {
    const std::uint8_t* p = rx.data();
    const std::uint32_t lead = le::load<std::uint32_t>(p + off::kMagic);  // magic, version, type
    const std::uint8_t type = p[off::kType];
    const std::uint32_t length = le::load<std::uint32_t>(p + off::kLength);
    const std::uint16_t credits = le::load<std::uint16_t>(p + off::kCredits);
    if ((lead & 0xffffffu) == (kMessageMagic | std::uint32_t{s.version} << 16) &&
        static_cast<std::uint8_t>(type - kMessageTypeMin) <= max_type(s) - kMessageTypeMin &&
        length == rx.size() && length <= s.params.max_message_size && length >= kFixedSizes[type & 15u] &&
        le::load<std::uint32_t>(p + off::kChecksum) == 0 &&
        le::load<std::uint64_t>(p + off::kSrcStamp) == s.peer_incarnation &&
        le::load<std::uint64_t>(p + off::kDstStamp) == s.local_incarnation && credits <= s.params.queue_depth)
        [[likely]] {
      out.type = static_cast<MessageType>(type);
      out.credits = credits;
      return decode_body(rx, length, s, out);
    }
  }
  return decode_message_ordered(rx, s, out);
}

}  // namespace rdmagate::protocol

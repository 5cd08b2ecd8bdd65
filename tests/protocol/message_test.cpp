#include "protocol/message.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "protocol/byte_order.hpp"
#include "protocol/crc32c.hpp"

namespace rdmagate::protocol {
namespace {

constexpr std::uint64_t kStampA = 0xA0A0A0A0A0A0A0A0ull;
constexpr std::uint64_t kStampB = 0xB1B1B1B1B1B1B1B1ull;
constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

// The two ends of one connection: A sends, B receives. Version 1.0, as in the documented example; the
// header's version byte is whatever the session negotiated, so nothing else here depends on the minor.
Session session_a(bool checksum = false) {
  return Session{pack_version(1, 0), checksum, ConnParams{32, 512, 4, 1u << 20}, kStampA, kStampB};
}
Session mirror(const Session& s) {
  Session m = s;
  std::swap(m.local_incarnation, m.peer_incarnation);
  return m;
}

using Bytes = std::vector<std::uint8_t>;

Bytes encode(const Message& m, const Session& s) {
  Bytes out(s.params.max_message_size + 64);
  const auto r = encode_message(m, s, out);
  EXPECT_TRUE(r.ok()) << to_string(r.error);
  out.resize(r.size);
  return out;
}

Message chunk_request(MessageType type, std::initializer_list<Fragment> frags) {
  Message m;
  m.type = type;
  m.opcode = 7;
  m.cookie = 0x1234;
  for (const Fragment& f : frags) m.chunk.fragments[m.chunk.count++] = f;
  return m;
}

void expect_same(const Message& a, const Message& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.credits, b.credits);
  EXPECT_EQ(a.opcode, b.opcode);
  EXPECT_EQ(a.cookie, b.cookie);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.byte_count, b.byte_count);
  ASSERT_EQ(a.chunk.count, b.chunk.count);
  for (std::uint16_t i = 0; i < a.chunk.count; ++i) EXPECT_EQ(a.chunk.fragments[i], b.chunk.fragments[i]);
  EXPECT_TRUE(std::equal(a.payload.begin(), a.payload.end(), b.payload.begin(), b.payload.end()));
  if (a.type == MessageType::kAuth) {
    EXPECT_EQ(a.auth_mechanism, b.auth_mechanism);
    EXPECT_EQ(a.auth_principal, b.auth_principal);
    EXPECT_EQ(a.auth_client_nonce, b.auth_client_nonce);
    EXPECT_EQ(a.auth_proof, b.auth_proof);
  }
  if (a.type == MessageType::kAuthAnswer) {
    EXPECT_EQ(a.auth_status, b.auth_status);
    EXPECT_EQ(a.auth_proof, b.auth_proof);
  }
}

// A 1.2 session (AUTH and AUTH_ANSWER exist from minor 2 on).
Session session_12(bool checksum = false) {
  Session s = session_a(checksum);
  s.version = pack_version(1, 2);
  return s;
}

AuthBytes pattern(std::uint8_t first) {
  AuthBytes b{};
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(first + i);
  return b;
}

// decode(encode(m)) == m, and re-encoding the decoded message gives the same bytes.
void round_trip(const Message& m, const Session& s = session_a()) {
  const Bytes wire = encode(m, s);
  Message d;
  ASSERT_EQ(decode_message(wire, mirror(s), d), WireError::kOk);
  expect_same(m, d);
  EXPECT_EQ(encode(d, s), wire);
}

// ---- layout -----------------------------------------------------------------------------------

TEST(MessageLayout, HeaderIsCompact) {
  EXPECT_EQ(kHeaderSize, 40u);
  EXPECT_EQ(kCompletionSize, 48u);
  EXPECT_EQ(kChunkRequestFixedSize, 44u);
  EXPECT_EQ(payload_offset(MessageType::kInlineRequest, 0), 40u);
  EXPECT_EQ(payload_offset(MessageType::kReadChunkRequest, 4), 44u + 64u);
}

// Pins the byte layout documented in docs/protocol.md.
TEST(MessageLayout, GoldenWriteChunkRequest) {
  Session s = session_a();
  Message m = chunk_request(MessageType::kWriteChunkRequest, {{0x0102030405060708ull, 0x1000, 0xaabbccdd}});
  m.credits = 3;
  m.opcode = 0x0201;
  m.cookie = 0x1122334455667788ull;
  const std::uint8_t payload[] = {'k', 'e', 'y'};
  m.payload = payload;
  const Bytes want = {
      'R',  'G',  0x10, 0x05, 0x03, 0x00, 0x01, 0x02,  // magic, version 1.0, type, credits, opcode
      0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // length 63, checksum (off)
      0xa0, 0xa0, 0xa0, 0xa0, 0xa0, 0xa0, 0xa0, 0xa0,  // source stamp
      0xb1, 0xb1, 0xb1, 0xb1, 0xb1, 0xb1, 0xb1, 0xb1,  // destination stamp
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // cookie
      0x01, 0x00, 0x00, 0x00,                          // fragment count, reserved
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // addr
      0x00, 0x10, 0x00, 0x00, 0xdd, 0xcc, 0xbb, 0xaa,  // len, rkey
      'k',  'e',  'y'};
  EXPECT_EQ(encode(m, s), want);
  s.checksum = true;
  const Bytes sum = encode(m, s);
  Bytes zeroed = sum;
  le::store<std::uint32_t>(zeroed.data() + 12, 0);
  EXPECT_EQ(zeroed, want);
  EXPECT_EQ(le::load<std::uint32_t>(sum.data() + 12), crc32c(want));
}

TEST(MessageLayout, GoldenCompletion) {
  Message m;
  m.type = MessageType::kCompletion;
  m.cookie = 5;
  m.opcode = 9;
  m.status = 0x01020304;
  m.byte_count = 0x000b0c0d;  // below the 1 MiB max bulk size
  const Bytes wire = encode(m, session_a());
  ASSERT_EQ(wire.size(), 48u);
  EXPECT_EQ(wire[3], 6);
  EXPECT_EQ(Bytes(wire.begin() + 40, wire.end()), (Bytes{4, 3, 2, 1, 0x0d, 0x0c, 0x0b, 0x00}));
}

// ---- round trips ------------------------------------------------------------------------------

TEST(MessageCodec, RoundTripsEveryType) {
  const std::uint8_t data[] = {1, 2, 3, 4, 5};
  Message noop;
  noop.credits = 32;
  round_trip(noop);

  for (MessageType t : {MessageType::kInlineRequest, MessageType::kInlineResponse}) {
    Message m;
    m.type = t;
    m.credits = 1;
    m.opcode = 0xffff;
    m.cookie = kU64Max;
    round_trip(m);  // empty payload
    m.payload = data;
    round_trip(m);
  }
  for (MessageType t : {MessageType::kReadChunkRequest, MessageType::kWriteChunkRequest}) {
    Message m = chunk_request(t, {{1, 2, 3}, {0x7fff0000, 4096, 0xffffffff}});
    round_trip(m);
    m.payload = data;
    round_trip(m);
  }
  Message c;
  c.type = MessageType::kCompletion;
  c.status = static_cast<std::uint32_t>(CompletionStatus::kBulkFailed);
  c.byte_count = 1u << 20;
  c.cookie = 77;
  round_trip(c);
}

TEST(MessageCodec, RoundTripsWithChecksum) {
  const std::uint8_t data[] = {9, 8, 7};
  Message m = chunk_request(MessageType::kReadChunkRequest, {{100, 200, 300}});
  m.payload = data;
  round_trip(m, session_a(true));
  Message noop;
  round_trip(noop, session_a(true));
}

TEST(MessageCodec, PayloadIsZeroCopy) {
  const std::uint8_t data[] = {1, 2, 3};
  Message m = chunk_request(MessageType::kReadChunkRequest, {{1, 1, 1}});
  m.payload = data;
  const Bytes wire = encode(m, session_a());
  Message d;
  ASSERT_EQ(decode_message(wire, mirror(session_a()), d), WireError::kOk);
  EXPECT_EQ(d.payload.data(), wire.data() + payload_offset(m.type, 1));
  EXPECT_EQ(d.payload.size(), 3u);
  EXPECT_EQ(d.chunk.total_length(), 1u);
}

TEST(MessageCodec, DecodeClearsFieldsOfOtherTypes) {
  Message d;
  d.status = 5;
  d.byte_count = 6;
  d.chunk.count = 2;
  Message m;
  m.type = MessageType::kInlineResponse;
  ASSERT_EQ(decode_message(encode(m, session_a()), mirror(session_a()), d), WireError::kOk);
  EXPECT_EQ(d.status, 0u);
  EXPECT_EQ(d.byte_count, 0u);
  EXPECT_EQ(d.chunk.count, 0u);
}

// A sender may build the payload in place and pass a span over it: nothing is copied.
TEST(MessageCodec, PayloadInPlace) {
  const Session s = session_a();
  Bytes buf(512);
  const std::size_t off = payload_offset(MessageType::kReadChunkRequest, 2);
  for (std::size_t i = 0; i < 10; ++i) buf[off + i] = static_cast<std::uint8_t>(i + 1);
  Message m = chunk_request(MessageType::kReadChunkRequest, {{1, 1, 1}, {2, 2, 2}});
  m.payload = {buf.data() + off, 10};
  const auto r = encode_message(m, s, buf);
  ASSERT_TRUE(r.ok());
  buf.resize(r.size);
  const std::uint8_t copy[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  m.payload = copy;
  EXPECT_EQ(buf, encode(m, s));
}

// A payload overlapping the header area is moved before the header is written.
TEST(MessageCodec, OverlappingPayloadIsMoved) {
  const Session s = session_a();
  Bytes buf(512);
  for (std::size_t i = 0; i < 60; ++i) buf[i] = static_cast<std::uint8_t>(100 + i);
  const Bytes expected_payload(buf.begin(), buf.begin() + 60);
  Message m;
  m.type = MessageType::kInlineRequest;
  m.payload = {buf.data(), 60};
  const auto r = encode_message(m, s, buf);
  ASSERT_TRUE(r.ok());
  Message d;
  ASSERT_EQ(decode_message({buf.data(), r.size}, mirror(s), d), WireError::kOk);
  EXPECT_EQ(Bytes(d.payload.begin(), d.payload.end()), expected_payload);
}

// ---- boundaries -------------------------------------------------------------------------------

TEST(MessageBounds, LengthExactlyMaxAndOneMore) {
  const Session s = session_a();
  Bytes payload(s.params.max_message_size - kHeaderSize, 0x5a);
  Message m;
  m.type = MessageType::kInlineRequest;
  m.payload = payload;
  round_trip(m);
  payload.push_back(0);
  m.payload = payload;
  Bytes out(1024);
  EXPECT_EQ(encode_message(m, s, out).error, WireError::kLengthExceedsMax);
}

TEST(MessageBounds, MaxFragmentsAndOneMore) {
  Session s = session_a();
  Message m = chunk_request(MessageType::kReadChunkRequest, {{1, 1, 1}, {2, 1, 2}, {3, 1, 3}, {4, 1, 4}});
  round_trip(m, s);
  m.chunk.fragments[m.chunk.count++] = Fragment{5, 1, 5};
  Bytes out(1024);
  EXPECT_EQ(encode_message(m, s, out).error, WireError::kTooManyFragments);
}

TEST(MessageBounds, CompileTimeMaxFragments) {
  Session s = session_a();
  s.params.max_fragments = kMaxFragments;
  Message m = chunk_request(MessageType::kWriteChunkRequest, {});
  for (std::uint16_t i = 0; i < kMaxFragments; ++i)
    m.chunk.fragments[m.chunk.count++] = Fragment{i * 4096ull, 4096, i};
  round_trip(m, s);
  // A session claiming more than the compile-time capacity is still held to it.
  s.params.max_fragments = kMaxFragments + 10;
  s.params.max_message_size = 4096;
  Bytes wire = encode(m, s);
  le::store<std::uint16_t>(wire.data() + 40, kMaxFragments + 1);
  wire.resize(wire.size() + kFragmentSize);
  le::store<std::uint32_t>(wire.data() + 8, static_cast<std::uint32_t>(wire.size()));
  Message d;
  EXPECT_EQ(decode_message(wire, mirror(s), d), WireError::kTooManyFragments);
}

TEST(MessageBounds, AddrPlusLenAtTopOfAddressSpace) {
  // addr + len == 2^64 - 1: the end is representable, accepted.
  round_trip(chunk_request(MessageType::kReadChunkRequest, {{kU64Max - 4096, 4096, 1}}));
  round_trip(chunk_request(MessageType::kReadChunkRequest, {{kU64Max - 1, 1, 1}}));
  // addr + len == 2^64: wraps to zero.
  Bytes out(1024);
  Message m = chunk_request(MessageType::kReadChunkRequest, {{kU64Max - 4095, 4096, 1}});
  EXPECT_EQ(encode_message(m, session_a(), out).error, WireError::kFragmentWraps);
  m.chunk.fragments[0] = Fragment{kU64Max, 1, 1};
  EXPECT_EQ(encode_message(m, session_a(), out).error, WireError::kFragmentWraps);
}

TEST(MessageBounds, BulkExactlyMaxAndOneMore) {
  Session s = session_a();
  s.params.max_bulk_size = 10000;
  Message m = chunk_request(MessageType::kReadChunkRequest, {{0, 5000, 1}, {1u << 30, 5000, 2}});
  round_trip(m, s);
  m.chunk.fragments[1].len = 5001;
  Bytes out(1024);
  EXPECT_EQ(encode_message(m, s, out).error, WireError::kBulkTooLarge);
}

TEST(MessageBounds, BulkSumDoesNotOverflow) {
  Session s = session_a();
  s.params.max_bulk_size = 0xffffffffu;
  Message m =
      chunk_request(MessageType::kReadChunkRequest,
                    {{0, 0xffffffffu, 1}, {0, 0xffffffffu, 2}, {0, 0xffffffffu, 3}, {0, 0xffffffffu, 4}});
  Bytes out(1024);
  EXPECT_EQ(encode_message(m, s, out).error, WireError::kBulkTooLarge);
  m.chunk.count = 1;
  round_trip(m, s);
}

TEST(MessageBounds, CreditsExactlyDepthAndOneMore) {
  Message m;
  m.credits = 32;
  round_trip(m);
  m.credits = 33;
  Bytes out(64);
  EXPECT_EQ(encode_message(m, session_a(), out).error, WireError::kCreditsOverflow);
}

TEST(MessageBounds, ByteCountExactlyMaxAndOneMore) {
  Message m;
  m.type = MessageType::kCompletion;
  m.byte_count = 1u << 20;
  round_trip(m);
  m.byte_count++;
  Bytes out(64);
  EXPECT_EQ(encode_message(m, session_a(), out).error, WireError::kByteCountTooLarge);
}

// ---- decode errors: one case per code ----------------------------------------------------------

struct DecodeCase {
  std::string name;
  WireError want;
  std::function<void(Bytes&, Session&)> corrupt;  // edits the wire bytes or the receiver's session
  Message base;
  std::uint8_t minor = 0;  // the session's minor (types 7 and 8 need 2)
};

void set16(Bytes& b, std::size_t at, std::uint16_t v) {
  le::store<std::uint16_t>(b.data() + at, v);
}
void set32(Bytes& b, std::size_t at, std::uint32_t v) {
  le::store<std::uint32_t>(b.data() + at, v);
}
void set64(Bytes& b, std::size_t at, std::uint64_t v) {
  le::store<std::uint64_t>(b.data() + at, v);
}
// Change the length field and the buffer together, keeping them consistent.
void relength(Bytes& b, std::size_t n) {
  b.resize(n, 0);
  set32(b, 8, static_cast<std::uint32_t>(n));
}

Message noop_msg() {
  return Message{};
}
Message inline_msg() {
  static const std::uint8_t data[] = {1, 2, 3, 4};
  Message m;
  m.type = MessageType::kInlineRequest;
  m.payload = data;
  return m;
}
Message chunk_msg() {
  return chunk_request(MessageType::kReadChunkRequest, {{4096, 100, 1}, {8192, 200, 2}});
}
Message completion_msg() {
  Message m;
  m.type = MessageType::kCompletion;
  return m;
}
Message auth_msg() {
  static const AuthBytes nonce = pattern(0x10), proof = pattern(0x80);
  return make_auth_message(0x55, 1, "app-writer", nonce, proof);  // a 10-byte name: 118 bytes
}
Message answer_msg(std::uint32_t status = 0) {
  return make_auth_answer(0x55, status, pattern(0xc0));
}

std::vector<DecodeCase> decode_cases() {
  return {
      {"truncated_header_39", WireError::kTruncatedHeader, [](Bytes& b, Session&) { b.resize(39); },
       noop_msg()},
      {"truncated_header_0", WireError::kTruncatedHeader, [](Bytes& b, Session&) { b.clear(); }, noop_msg()},
      {"bad_magic", WireError::kBadMagic, [](Bytes& b, Session&) { b[1] = 'X'; }, inline_msg()},
      {"bad_version_minor", WireError::kBadVersion, [](Bytes& b, Session&) { b[2] = pack_version(1, 1); },
       inline_msg()},
      {"bad_version_major", WireError::kBadVersion, [](Bytes& b, Session&) { b[2] = pack_version(2, 0); },
       inline_msg()},
      {"unknown_type_0", WireError::kUnknownType, [](Bytes& b, Session&) { b[3] = 0; }, inline_msg()},
      {"unknown_type_7", WireError::kUnknownType, [](Bytes& b, Session&) { b[3] = 7; }, inline_msg()},
      {"unknown_type_255", WireError::kUnknownType, [](Bytes& b, Session&) { b[3] = 255; }, inline_msg()},
      {"length_below_header", WireError::kLengthTooSmall, [](Bytes& b, Session&) { set32(b, 8, 39); },
       noop_msg()},
      {"length_below_completion", WireError::kLengthTooSmall, [](Bytes& b, Session&) { relength(b, 47); },
       completion_msg()},
      {"length_below_chunk", WireError::kLengthTooSmall, [](Bytes& b, Session&) { relength(b, 43); },
       chunk_msg()},
      {"length_exceeds_max", WireError::kLengthExceedsMax, [](Bytes& b, Session&) { relength(b, 513); },
       inline_msg()},
      {"length_exceeds_max_u32", WireError::kLengthExceedsMax,
       [](Bytes& b, Session&) { set32(b, 8, 0xffffffffu); }, inline_msg()},
      {"length_exceeds_received", WireError::kLengthExceedsReceived, [](Bytes& b, Session&) { b.pop_back(); },
       inline_msg()},
      {"trailing_bytes", WireError::kTrailingBytes, [](Bytes& b, Session&) { b.push_back(0); }, inline_msg()},
      {"bad_checksum_payload", WireError::kBadChecksum,
       [](Bytes& b, Session& s) {
         s.checksum = true;
         set32(b, 12, crc32c(b));  // checksum of the pre-corruption bytes
         b.back() ^= 1;
       },
       inline_msg()},
      {"bad_checksum_field", WireError::kBadChecksum,
       [](Bytes& b, Session& s) {
         s.checksum = true;
         set32(b, 12, crc32c(b) ^ 0x80000000u);
       },
       noop_msg()},
      {"unexpected_checksum", WireError::kUnexpectedChecksum, [](Bytes& b, Session&) { set32(b, 12, 1); },
       inline_msg()},
      {"stale_source", WireError::kStaleSource, [](Bytes& b, Session&) { set64(b, 16, kStampA + 1); },
       inline_msg()},
      {"stale_source_zero", WireError::kStaleSource, [](Bytes& b, Session&) { set64(b, 16, 0); }, noop_msg()},
      {"stale_destination", WireError::kStaleDestination,
       [](Bytes& b, Session&) { set64(b, 24, kStampB ^ 1); }, inline_msg()},
      {"credits_overflow", WireError::kCreditsOverflow, [](Bytes& b, Session&) { set16(b, 4, 33); },
       noop_msg()},
      {"credits_overflow_max", WireError::kCreditsOverflow, [](Bytes& b, Session&) { set16(b, 4, 0xffff); },
       inline_msg()},
      {"noop_opcode", WireError::kReservedNotZero, [](Bytes& b, Session&) { set16(b, 6, 1); }, noop_msg()},
      {"noop_cookie", WireError::kReservedNotZero, [](Bytes& b, Session&) { set64(b, 32, 1); }, noop_msg()},
      {"chunk_reserved", WireError::kReservedNotZero, [](Bytes& b, Session&) { set16(b, 42, 1); },
       chunk_msg()},
      {"no_fragments", WireError::kNoFragments, [](Bytes& b, Session&) { set16(b, 40, 0); }, chunk_msg()},
      {"too_many_fragments", WireError::kTooManyFragments,
       [](Bytes& b, Session&) {
         set16(b, 40, 5);
         relength(b, 44 + 5 * 16);
       },
       chunk_msg()},
      {"too_many_fragments_u16", WireError::kTooManyFragments,
       [](Bytes& b, Session&) { set16(b, 40, 0xffff); }, chunk_msg()},
      {"fragments_truncated", WireError::kFragmentsTruncated,
       [](Bytes& b, Session&) { relength(b, 44 + 16 + 15); }, chunk_msg()},
      {"fragments_count_past_length", WireError::kFragmentsTruncated,
       [](Bytes& b, Session&) { set16(b, 40, 3); }, chunk_msg()},
      {"empty_fragment", WireError::kEmptyFragment, [](Bytes& b, Session&) { set32(b, 44 + 16 + 8, 0); },
       chunk_msg()},
      {"fragment_wraps", WireError::kFragmentWraps, [](Bytes& b, Session&) { set64(b, 44, kU64Max - 99); },
       chunk_msg()},
      {"fragment_wraps_max_addr", WireError::kFragmentWraps,
       [](Bytes& b, Session&) { set64(b, 44 + 16, kU64Max); }, chunk_msg()},
      {"bulk_too_large", WireError::kBulkTooLarge, [](Bytes&, Session& s) { s.params.max_bulk_size = 299; },
       chunk_msg()},
      {"bulk_too_large_u32_lens", WireError::kBulkTooLarge,
       [](Bytes& b, Session&) {
         set32(b, 44 + 8, 0xffffffffu);
         set32(b, 44 + 16 + 8, 0xffffffffu);
       },
       chunk_msg()},
      {"byte_count_too_large", WireError::kByteCountTooLarge,
       [](Bytes& b, Session&) { set32(b, 44, (1u << 20) + 1); }, completion_msg()},
      {"noop_with_payload", WireError::kUnexpectedPayload, [](Bytes& b, Session&) { relength(b, 41); },
       noop_msg()},
      {"completion_with_payload", WireError::kUnexpectedPayload, [](Bytes& b, Session&) { relength(b, 49); },
       completion_msg()},
      // AUTH (108 + n bytes) and AUTH_ANSWER (76 bytes), on a 1.2 session.
      {"auth_on_minor1", WireError::kUnknownType,
       [](Bytes& b, Session& s) {
         s.version = pack_version(1, 1);
         b[2] = s.version;
       },
       auth_msg(), 2},
      {"answer_on_minor0", WireError::kUnknownType,
       [](Bytes& b, Session& s) {
         s.version = pack_version(1, 0);
         b[2] = s.version;
       },
       answer_msg(), 2},
      {"auth_opcode", WireError::kReservedNotZero, [](Bytes& b, Session&) { set16(b, 6, 1); }, auth_msg(), 2},
      {"auth_reserved", WireError::kReservedNotZero, [](Bytes& b, Session&) { set16(b, 42, 0x100); },
       auth_msg(), 2},
      {"auth_fixed_part_short", WireError::kLengthTooSmall, [](Bytes& b, Session&) { relength(b, 107); },
       auth_msg(), 2},
      {"auth_name_length_0", WireError::kBadAuthField, [](Bytes& b, Session&) { b[41] = 0; }, auth_msg(), 2},
      {"auth_name_length_65", WireError::kBadAuthField,
       [](Bytes& b, Session&) {
         b[41] = 65;
         relength(b, 108 + 65);
         std::fill(b.begin() + 108, b.end(), 'a');
       },
       auth_msg(), 2},
      {"auth_name_length_255", WireError::kBadAuthField, [](Bytes& b, Session&) { b[41] = 255; }, auth_msg(),
       2},
      {"auth_name_past_length", WireError::kLengthTooSmall, [](Bytes& b, Session&) { b[41] = 11; },
       auth_msg(), 2},
      {"auth_bytes_after_name", WireError::kUnexpectedPayload, [](Bytes& b, Session&) { relength(b, 119); },
       auth_msg(), 2},
      {"auth_name_slash", WireError::kBadAuthField, [](Bytes& b, Session&) { b[108] = '/'; }, auth_msg(), 2},
      {"auth_name_nul", WireError::kBadAuthField, [](Bytes& b, Session&) { b[117] = 0; }, auth_msg(), 2},
      {"auth_name_space", WireError::kBadAuthField, [](Bytes& b, Session&) { b[112] = ' '; }, auth_msg(), 2},
      {"auth_name_high_bit", WireError::kBadAuthField, [](Bytes& b, Session&) { b[110] = 0xe9; }, auth_msg(),
       2},
      {"answer_opcode", WireError::kReservedNotZero, [](Bytes& b, Session&) { set16(b, 6, 2); }, answer_msg(),
       2},
      {"answer_short", WireError::kLengthTooSmall, [](Bytes& b, Session&) { relength(b, 75); }, answer_msg(),
       2},
      {"answer_long", WireError::kUnexpectedPayload, [](Bytes& b, Session&) { relength(b, 77); },
       answer_msg(), 2},
      {"answer_status_4", WireError::kBadAuthField, [](Bytes& b, Session&) { set32(b, 40, 4); },
       answer_msg(1), 2},
      {"answer_status_max", WireError::kBadAuthField, [](Bytes& b, Session&) { set32(b, 40, 0xffffffffu); },
       answer_msg(1), 2},
      {"answer_denied_with_proof", WireError::kBadAuthField, [](Bytes& b, Session&) { set32(b, 40, 1); },
       answer_msg(0), 2},
      {"answer_limit_with_one_proof_byte", WireError::kBadAuthField, [](Bytes& b, Session&) { b[75] = 1; },
       answer_msg(2), 2},
  };
}

TEST(MessageDecodeErrors, EachCaseYieldsItsCode) {
  for (const DecodeCase& c : decode_cases()) {
    SCOPED_TRACE(c.name);
    Session tx = session_a();
    tx.version = pack_version(1, c.minor);
    Session rx = mirror(tx);
    Bytes wire = encode(c.base, tx);
    Message d;
    ASSERT_EQ(decode_message(wire, rx, d), WireError::kOk);  // the base is valid
    c.corrupt(wire, rx);
    EXPECT_EQ(decode_message(wire, rx, d), c.want) << "got " << to_string(decode_message(wire, rx, d));
  }
}

// Every decode error code has at least one case above.
TEST(MessageDecodeErrors, EveryCodeCovered) {
  std::set<WireError> covered;
  for (const DecodeCase& c : decode_cases()) covered.insert(c.want);
  for (std::uint8_t e = 1; e <= kWireErrorMax; ++e) {
    if (static_cast<WireError>(e) == WireError::kBufferTooSmall) continue;  // encode only, tested below
    EXPECT_TRUE(covered.count(static_cast<WireError>(e))) << to_string(static_cast<WireError>(e));
  }
}

// ---- encode errors -----------------------------------------------------------------------------

TEST(MessageEncodeErrors, EachRule) {
  const Session s = session_a();
  Bytes out(1024);
  const std::uint8_t data[] = {1};
  auto err = [&](const Message& m) { return encode_message(m, s, out).error; };

  Message m;
  m.type = static_cast<MessageType>(0);
  EXPECT_EQ(err(m), WireError::kUnknownType);
  m.type = MessageType::kAuth;  // 1.0 session: types 7 and 8 do not exist before minor 2
  EXPECT_EQ(err(m), WireError::kUnknownType);
  m.type = static_cast<MessageType>(9);
  EXPECT_EQ(encode_message(m, session_12(), out).error, WireError::kUnknownType);

  m = Message{};
  m.opcode = 1;
  EXPECT_EQ(err(m), WireError::kReservedNotZero);
  m = Message{};
  m.cookie = 1;
  EXPECT_EQ(err(m), WireError::kReservedNotZero);
  m = Message{};
  m.payload = data;
  EXPECT_EQ(err(m), WireError::kUnexpectedPayload);
  m = completion_msg();
  m.payload = data;
  EXPECT_EQ(err(m), WireError::kUnexpectedPayload);

  m = chunk_request(MessageType::kWriteChunkRequest, {});
  EXPECT_EQ(err(m), WireError::kNoFragments);
  m = chunk_request(MessageType::kWriteChunkRequest, {{1, 0, 1}});
  EXPECT_EQ(err(m), WireError::kEmptyFragment);
  m.chunk.count = kMaxFragments + 1;  // beyond the array: must be refused before it is read
  EXPECT_EQ(err(m), WireError::kTooManyFragments);

  m = inline_msg();
  EXPECT_EQ(encode_message(m, s, std::span<std::uint8_t>(out.data(), 43)).error, WireError::kBufferTooSmall);
  EXPECT_EQ(encode_message(m, s, std::span<std::uint8_t>(out.data(), 44)).error, WireError::kOk);
  EXPECT_EQ(encode_message(Message{}, s, {}).error, WireError::kBufferTooSmall);

  // Chunk requests whose fragment list pushes them past the max message size.
  Session small = s;
  small.params.max_message_size = 64;
  m = chunk_request(MessageType::kReadChunkRequest, {{1, 1, 1}, {2, 1, 1}});
  EXPECT_EQ(encode_message(m, small, out).error, WireError::kLengthExceedsMax);
}

TEST(MessageEncodeErrors, AuthRules) {
  const Session s = session_12();
  Bytes out(1024);
  const std::uint8_t data[] = {1};
  auto err = [&](const Message& m) { return encode_message(m, s, out).error; };
  Message m = auth_msg();
  EXPECT_EQ(err(m), WireError::kOk);
  m.opcode = 1;
  EXPECT_EQ(err(m), WireError::kReservedNotZero);
  m = auth_msg();
  m.payload = data;
  EXPECT_EQ(err(m), WireError::kUnexpectedPayload);
  for (const std::string_view bad : {std::string_view{}, std::string_view{"a b"}, std::string_view{"x/y"},
                                     std::string_view{"caf\xc3\xa9"}, std::string_view{"a\0b", 3}}) {
    m = auth_msg();
    m.auth_principal = bad;
    EXPECT_EQ(err(m), WireError::kBadAuthField) << bad;
  }
  const std::string longest(64, 'Z'), too_long(65, 'Z');
  m.auth_principal = longest;
  EXPECT_EQ(err(m), WireError::kOk);
  m.auth_principal = too_long;
  EXPECT_EQ(err(m), WireError::kBadAuthField);
  // A name the negotiated message size cannot carry.
  Session small = s;
  small.params.max_message_size = 150;
  m.auth_principal = longest;
  EXPECT_EQ(encode_message(m, small, out).error, WireError::kLengthExceedsMax);
  m.auth_principal = "ok";
  EXPECT_EQ(encode_message(m, small, std::span<std::uint8_t>(out.data(), 109)).error,
            WireError::kBufferTooSmall);
  EXPECT_EQ(encode_message(m, small, std::span<std::uint8_t>(out.data(), 110)).error, WireError::kOk);

  m = answer_msg(0);
  EXPECT_EQ(err(m), WireError::kOk);
  m.auth_status = 4;
  EXPECT_EQ(err(m), WireError::kBadAuthField);
  m.auth_status = 1;  // a denied answer must not carry a proof
  EXPECT_EQ(err(m), WireError::kBadAuthField);
  EXPECT_EQ(err(answer_msg(1)), WireError::kOk);  // the builder zeroes it
  EXPECT_EQ(answer_msg(2).auth_proof, AuthBytes{});
  m = answer_msg(0);
  m.payload = data;
  EXPECT_EQ(err(m), WireError::kUnexpectedPayload);
  m = answer_msg(0);
  m.opcode = 3;
  EXPECT_EQ(err(m), WireError::kReservedNotZero);
}

TEST(MessageAuth, RoundTripsEveryNameLengthAndStatus) {
  for (const bool checksum : {false, true}) {
    const Session s = session_12(checksum);
    std::string name;
    for (std::size_t n = 1; n <= kAuthMaxPrincipal; ++n) {
      name.push_back("aZ09._@-"[n % 8]);
      Message m = auth_msg();
      m.auth_principal = name;
      m.credits = 3;
      const Bytes wire = encode(m, s);
      EXPECT_EQ(wire.size(), kAuthFixedSize + n);
      EXPECT_EQ(encoded_size(m), wire.size());
      round_trip(m, s);
    }
    for (std::uint32_t status = 0; status <= kAuthStatusMax; ++status) {
      const Bytes wire = encode(answer_msg(status), s);
      EXPECT_EQ(wire.size(), kAuthAnswerSize);
      round_trip(answer_msg(status), s);
    }
  }
}

// The AUTH body byte for byte (docs §4.2): offsets 40..107 and the name at 108.
TEST(MessageAuth, LayoutIsTheDocumentedOne) {
  const Bytes wire = encode(auth_msg(), session_12());
  ASSERT_EQ(wire.size(), 118u);
  EXPECT_EQ(wire[3], 7);
  EXPECT_EQ(wire[40], 1);   // mechanism
  EXPECT_EQ(wire[41], 10);  // name length
  EXPECT_EQ(wire[42], 0);
  EXPECT_EQ(wire[43], 0);
  EXPECT_EQ(wire[44], 0x10);  // Nc[0]
  EXPECT_EQ(wire[75], 0x10 + 31);
  EXPECT_EQ(wire[76], 0x80);  // Pc[0]
  EXPECT_EQ(wire[107], 0x80 + 31);
  EXPECT_EQ(std::string(wire.begin() + 108, wire.end()), "app-writer");
  const Bytes ans = encode(answer_msg(0), session_12());
  ASSERT_EQ(ans.size(), 76u);
  EXPECT_EQ(ans[3], 8);
  EXPECT_EQ(le::load<std::uint32_t>(ans.data() + 40), 0u);
  EXPECT_EQ(ans[44], 0xc0);
  EXPECT_EQ(ans[75], 0xc0 + 31);
}

TEST(MessageAuth, PrincipalCharset) {
  for (int c = 0; c < 256; ++c) {
    const char ch = static_cast<char>(c);
    const bool want = std::isalnum(c) != 0 ? c < 128 : (ch == '.' || ch == '_' || ch == '@' || ch == '-');
    EXPECT_EQ(valid_principal_bytes(std::string_view(&ch, 1)), want) << c;
  }
}

// ---- patch_credits -----------------------------------------------------------------------------

TEST(PatchCredits, RewritesCreditsAndChecksum) {
  for (bool checksum : {false, true}) {
    const Session s = session_a(checksum);
    Bytes wire = encode(inline_msg(), s);
    ASSERT_EQ(patch_credits(wire, 17, s), WireError::kOk);
    Message d;
    ASSERT_EQ(decode_message(wire, mirror(s), d), WireError::kOk);
    EXPECT_EQ(d.credits, 17);
    EXPECT_EQ(patch_credits(wire, 33, s), WireError::kCreditsOverflow);
    EXPECT_EQ(patch_credits({wire.data(), 39}, 1, s), WireError::kTruncatedHeader);
    EXPECT_EQ(patch_credits({wire.data(), wire.size() - 1}, 1, s), WireError::kLengthExceedsReceived);
    wire.push_back(0);
    EXPECT_EQ(patch_credits(wire, 1, s), WireError::kTrailingBytes);
  }
}

// ---- property: random messages round-trip; random corruption never crashes -----------------------

TEST(MessageProperty, RandomRoundTripsAndMutations) {
  std::mt19937_64 rng(12345);
  Session s = session_12();
  s.params.max_fragments = 8;
  s.params.max_message_size = 400;
  Bytes payload(400);
  for (auto& b : payload) b = static_cast<std::uint8_t>(rng());
  int decoded_after_mutation = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    s.checksum = (iter & 1) != 0;
    Message m;
    m.type = static_cast<MessageType>(1 + rng() % kMessageTypeMax);
    m.credits = static_cast<std::uint16_t>(rng() % (s.params.queue_depth + 1));
    if (m.type != MessageType::kNoop) {
      m.opcode = static_cast<std::uint16_t>(rng());
      m.cookie = rng();
    }
    if (is_chunk_request(m.type)) {
      m.chunk.count = static_cast<std::uint16_t>(1 + rng() % s.params.max_fragments);
      for (std::uint16_t i = 0; i < m.chunk.count; ++i)
        m.chunk.fragments[i] = Fragment{rng() >> 1, static_cast<std::uint32_t>(1 + rng() % 4096),
                                        static_cast<std::uint32_t>(rng())};
    }
    if (m.type == MessageType::kCompletion) {
      m.status = static_cast<std::uint32_t>(rng());
      m.byte_count = static_cast<std::uint32_t>(rng() % (s.params.max_bulk_size + 1));
    }
    std::string name;
    if (m.type == MessageType::kAuth || m.type == MessageType::kAuthAnswer) {
      m.opcode = 0;
      m.auth_mechanism = static_cast<std::uint8_t>(rng());
      for (auto& b : m.auth_client_nonce) b = static_cast<std::uint8_t>(rng());
      for (auto& b : m.auth_proof) b = static_cast<std::uint8_t>(rng());
      for (std::size_t i = 0, n = 1 + rng() % kAuthMaxPrincipal; i < n; ++i)
        name.push_back("abcXYZ019._@-"[rng() % 13]);
      m.auth_principal = name;
      m.auth_status = static_cast<std::uint32_t>(rng() % (kAuthStatusMax + 1));
      if (m.auth_status != 0) m.auth_proof = {};
    } else if (m.type != MessageType::kNoop && m.type != MessageType::kCompletion) {
      const std::size_t room = s.params.max_message_size - payload_offset(m.type, m.chunk.count);
      m.payload = std::span<const std::uint8_t>(payload).first(rng() % (room + 1));
    }
    Bytes wire = encode(m, s);
    Message d;
    ASSERT_EQ(decode_message(wire, mirror(s), d), WireError::kOk);
    expect_same(m, d);

    // Flip a few bytes, maybe truncate: decode must fail cleanly or produce a canonical message.
    Bytes bad = wire;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k)
      bad[rng() % bad.size()] ^= 1u << (rng() % 8);
    if (rng() % 4 == 0) bad.resize(rng() % (bad.size() + 1));
    if (decode_message(bad, mirror(s), d) == WireError::kOk) {
      ++decoded_after_mutation;
      EXPECT_EQ(encode(d, s), bad);
    }
  }
  // Without checksums, some mutations (payload, cookie, addresses) remain valid messages.
  EXPECT_GT(decoded_after_mutation, 0);
}

}  // namespace
}  // namespace rdmagate::protocol

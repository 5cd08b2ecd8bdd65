#include "protocol/object_wire.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace rdmagate::protocol {
namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr std::uint16_t op(ObjectOp o) {
  return static_cast<std::uint16_t>(object_opcode(o));
}

Bytes payload(const std::string& key, const Bytes& value = {}) {
  Bytes out(object_payload_size(key.size(), value.size()));
  EXPECT_EQ(encode_object_payload(key, value, out), out.size());
  return out;
}

ObjectParseError parse(MessageType t, std::uint16_t opcode, const Bytes& p, ObjectRequest* out = nullptr) {
  ObjectRequest r;
  const ObjectParseError e = parse_object_request(t, opcode, p, r);
  if (out != nullptr) *out = r;
  return e;
}

// ---- every operation in every message type it may use -------------------------------------------------

TEST(ObjectWire, PutInlineCarriesKeyAndValue) {
  const Bytes v{1, 2, 3, 0, 255};
  const Bytes p = payload("key", v);  // the request views into it
  ObjectRequest r;
  ASSERT_EQ(parse(MessageType::kInlineRequest, op(ObjectOp::kPut), p, &r), ObjectParseError::kOk);
  EXPECT_EQ(r.op, ObjectOp::kPut);
  EXPECT_EQ(r.key, "key");
  EXPECT_EQ(Bytes(r.value.begin(), r.value.end()), v);
}

TEST(ObjectWire, PutInlineEmptyValueIsAValue) {
  const Bytes p = payload("k");
  ObjectRequest r;
  ASSERT_EQ(parse(MessageType::kInlineRequest, op(ObjectOp::kPut), p, &r), ObjectParseError::kOk);
  EXPECT_EQ(r.key, "k");
  EXPECT_TRUE(r.value.empty());
}

TEST(ObjectWire, ChunkAndKeyOnlyOpsAcceptExactlyTheKey) {
  struct Case {
    MessageType type;
    ObjectOp op;
  };
  for (const Case c : {Case{MessageType::kReadChunkRequest, ObjectOp::kPut},
                       Case{MessageType::kInlineRequest, ObjectOp::kGet},
                       Case{MessageType::kWriteChunkRequest, ObjectOp::kGet},
                       Case{MessageType::kInlineRequest, ObjectOp::kDelete}}) {
    Bytes p = payload("a-key");
    ObjectRequest r;
    EXPECT_EQ(parse(c.type, op(c.op), p, &r), ObjectParseError::kOk);
    EXPECT_EQ(r.op, c.op);
    EXPECT_EQ(r.key, "a-key");
    EXPECT_TRUE(r.value.empty());
    // One byte more is refused: these ops carry no value inline.
    p.push_back(0);
    EXPECT_EQ(parse(c.type, op(c.op), p), ObjectParseError::kTrailingBytes);
  }
}

// The wire numbers (§8.1) and the metric label values (docs/metrics.md) are contracts; ObjectOp maps to both.
TEST(ObjectWire, OpsMapToTheWireOpcodesAndTheMetricNames) {
  EXPECT_EQ(op(ObjectOp::kPut), 0x10);
  EXPECT_EQ(op(ObjectOp::kGet), 0x11);
  EXPECT_EQ(op(ObjectOp::kDelete), 0x12);
  EXPECT_EQ(object_op_name(ObjectOp::kGet), "get");
  EXPECT_EQ(object_op_name(ObjectOp::kPut), "put");
  EXPECT_EQ(object_op_name(ObjectOp::kDelete), "delete");
  EXPECT_EQ(kObjectOpCount, 3u);
}

// ---- every ObjectParseError ----------------------------------------------------------------------------

TEST(ObjectWire, UnknownOpcodes) {
  const Bytes p = payload("k");
  for (const std::uint16_t o :
       {0, 1, 2, 3, 0x0f, 0x13, 0x100, 0xffff}) {  // 1, 2: echo/sink are not parsed here
    EXPECT_EQ(parse(MessageType::kInlineRequest, static_cast<std::uint16_t>(o), p),
              ObjectParseError::kUnknownOpcode)
        << o;
  }
}

TEST(ObjectWire, WrongMessageTypes) {
  const Bytes p = payload("k");
  struct Case {
    MessageType type;
    ObjectOp op;
  };
  for (const Case c :
       {Case{MessageType::kWriteChunkRequest, ObjectOp::kPut},
        Case{MessageType::kReadChunkRequest, ObjectOp::kGet},
        Case{MessageType::kReadChunkRequest, ObjectOp::kDelete},
        Case{MessageType::kWriteChunkRequest, ObjectOp::kDelete},
        Case{MessageType::kInlineResponse, ObjectOp::kGet}, Case{MessageType::kCompletion, ObjectOp::kPut},
        Case{MessageType::kNoop, ObjectOp::kDelete}}) {
    EXPECT_EQ(parse(c.type, op(c.op), p), ObjectParseError::kWrongType)
        << static_cast<int>(c.type) << " " << op(c.op);
  }
}

TEST(ObjectWire, EmptyPayload) {
  for (const ObjectOp o : {ObjectOp::kPut, ObjectOp::kGet, ObjectOp::kDelete}) {
    EXPECT_EQ(parse(MessageType::kInlineRequest, op(o), {}), ObjectParseError::kEmptyPayload);
  }
}

TEST(ObjectWire, KeyLengths0And251RefusedAnd1And250Accepted) {
  // 0: the prefix alone.
  EXPECT_EQ(parse(MessageType::kInlineRequest, op(ObjectOp::kGet), Bytes{0}),
            ObjectParseError::kBadKeyLength);
  // 251 (and 255) with that many key bytes present: the length itself is refused, not a truncation.
  for (const unsigned n : {251u, 255u}) {
    Bytes p(1 + n, 'x');
    p[0] = static_cast<std::uint8_t>(n);
    EXPECT_EQ(parse(MessageType::kInlineRequest, op(ObjectOp::kGet), p), ObjectParseError::kBadKeyLength)
        << n;
  }
  for (const std::size_t n : {std::size_t{1}, kMaxKeyLength}) {
    const std::string key(n, 'k');
    const Bytes p = payload(key);
    ObjectRequest r;
    ASSERT_EQ(parse(MessageType::kInlineRequest, op(ObjectOp::kDelete), p, &r), ObjectParseError::kOk);
    EXPECT_EQ(r.key.size(), n);
    EXPECT_EQ(r.key, key);
  }
}

TEST(ObjectWire, KeyTruncatedAtEveryLength) {
  const Bytes full = payload(std::string(kMaxKeyLength, 'q'));
  // Cut anywhere inside the key: truncated (at 1 byte only the prefix remains, still truncated).
  for (std::size_t cut = 1; cut < full.size(); ++cut) {
    const Bytes p(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_EQ(parse(MessageType::kInlineRequest, op(ObjectOp::kGet), p), ObjectParseError::kKeyTruncated)
        << cut;
    // A PUT's value starts after the key, so truncation is the same error there.
    EXPECT_EQ(parse(MessageType::kInlineRequest, op(ObjectOp::kPut), p), ObjectParseError::kKeyTruncated)
        << cut;
  }
  EXPECT_EQ(parse(MessageType::kInlineRequest, op(ObjectOp::kGet), full), ObjectParseError::kOk);
}

TEST(ObjectWire, ErrorNamesAreDistinctAndKnown) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < kObjectParseErrorCount; ++i) {
    const std::string n = object_parse_error_name(static_cast<ObjectParseError>(i));
    EXPECT_NE(n, "unknown") << i;
    names.insert(n);
  }
  EXPECT_EQ(names.size(), kObjectParseErrorCount);
  EXPECT_STREQ(object_parse_error_name(static_cast<ObjectParseError>(kObjectParseErrorCount)), "unknown");

  std::set<std::string> statuses;
  for (const ObjectStatus s :
       {ObjectStatus::kOk, ObjectStatus::kBulkFailed, ObjectStatus::kTooSmall, ObjectStatus::kUnknownOpcode,
        ObjectStatus::kNoResources, ObjectStatus::kBadRequest, ObjectStatus::kNotFound,
        ObjectStatus::kTooLarge, ObjectStatus::kNoSpace}) {
    const std::string n = object_status_name(static_cast<std::uint32_t>(s));
    EXPECT_NE(n, "unknown_status");
    statuses.insert(n);
  }
  EXPECT_EQ(statuses.size(), 9u);
  EXPECT_STREQ(object_status_name(0x99), "unknown_status");
  // Transport statuses keep their meaning.
  EXPECT_EQ(static_cast<std::uint32_t>(ObjectStatus::kTooSmall),
            static_cast<std::uint32_t>(CompletionStatus::kTooSmall));
  EXPECT_EQ(static_cast<std::uint32_t>(ObjectStatus::kNoResources),
            static_cast<std::uint32_t>(CompletionStatus::kNoResources));
  EXPECT_GE(static_cast<std::uint32_t>(ObjectStatus::kNotFound), kStatusApplicationBase);
}

// ---- encoding ------------------------------------------------------------------------------------------

TEST(ObjectWire, EncodeRefusesBadKeysAndShortBuffers) {
  Bytes out(600);
  EXPECT_EQ(encode_object_payload("", {}, out), 0u);
  EXPECT_EQ(encode_object_payload(std::string(kMaxKeyLength + 1, 'k'), {}, out), 0u);
  EXPECT_EQ(encode_object_payload(std::string(kMaxKeyLength, 'k'), {}, out), 1 + kMaxKeyLength);
  const Bytes v(10, 7);
  // Exactly enough room, and one byte short (value larger than the buffer, and key not fitting).
  Bytes exact(object_payload_size(3, v.size()));
  EXPECT_EQ(encode_object_payload("abc", v, exact), exact.size());
  Bytes short_by_one(exact.size() - 1);
  EXPECT_EQ(encode_object_payload("abc", v, short_by_one), 0u);
  Bytes tiny(5);
  EXPECT_EQ(encode_object_payload("abc", v, tiny), 0u);
  EXPECT_EQ(encode_object_payload("abc", {}, std::span<std::uint8_t>{}), 0u);
}

TEST(ObjectWire, EncodeParseRoundTrip) {
  for (const std::size_t klen : {std::size_t{1}, std::size_t{17}, kMaxKeyLength}) {
    for (const std::size_t vlen : {std::size_t{0}, std::size_t{1}, std::size_t{300}}) {
      std::string key(klen, '\0');
      for (std::size_t i = 0; i < klen; ++i) key[i] = static_cast<char>(i * 7 + 1);  // binary keys are fine
      Bytes v(vlen);
      for (std::size_t i = 0; i < vlen; ++i) v[i] = static_cast<std::uint8_t>(i ^ klen);
      const Bytes p = payload(key, v);
      ASSERT_EQ(p.size(), object_payload_size(klen, vlen));
      EXPECT_EQ(p[0], klen);
      ObjectRequest r;
      ASSERT_EQ(parse(MessageType::kInlineRequest, op(ObjectOp::kPut), p, &r), ObjectParseError::kOk);
      EXPECT_EQ(r.key, key);
      EXPECT_EQ(Bytes(r.value.begin(), r.value.end()), v);
      // The views point into the payload (zero copy).
      EXPECT_EQ(reinterpret_cast<const std::uint8_t*>(r.key.data()), p.data() + 1);
      // Re-encoding what was parsed gives the same bytes.
      Bytes again(p.size());
      ASSERT_EQ(encode_object_payload(r.key, r.value, again), p.size());
      EXPECT_EQ(again, p);
    }
  }
}

// ---- inline size helpers -------------------------------------------------------------------------------

TEST(ObjectWire, InlineSizeHelpers) {
  EXPECT_EQ(max_inline_put_value(4096, 10), 4096u - kHeaderSize - 1 - 10);
  EXPECT_EQ(max_inline_get_value(4096), 4096u - kHeaderSize);
  // A PUT of exactly the limit fills the message exactly.
  EXPECT_EQ(kHeaderSize + object_payload_size(10, max_inline_put_value(4096, 10)), 4096u);
  // Nothing fits: 0, never a wrapped huge value.
  EXPECT_EQ(max_inline_put_value(kHeaderSize + 1 + 10, 10), 0u);
  EXPECT_EQ(max_inline_put_value(kHeaderSize + 1 + 10 + 1, 10), 1u);
  EXPECT_EQ(max_inline_put_value(0, kMaxKeyLength), 0u);
  EXPECT_EQ(max_inline_get_value(kHeaderSize), 0u);
  EXPECT_EQ(max_inline_get_value(0), 0u);
  EXPECT_EQ(max_inline_get_value(kHeaderSize + 1), 1u);
  static_assert(max_inline_get_value(1024) == 1024 - kHeaderSize);
}

}  // namespace
}  // namespace rdmagate::protocol

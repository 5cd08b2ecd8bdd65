// Host unit tests of the object requester (services/object/object_requester.hpp) alone, through a fake core
// API that encodes what the requester sends as the core would (protocol::encode_message for the connection's
// session): what goes on the wire is decoded back (decode_message, parse_object_request) and checked field by
// field; answers complete the right request with the right result; stale and forged cookies complete nothing;
// a close hands every request in flight back exactly once; full tables refuse; on a link with memory windows
// each chunk names a window bound just before its send and the request comes back only after the window's
// invalidation.
#include "services/object/object_requester.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/core_conn.hpp"
#include "protocol/message.hpp"
#include "protocol/object_wire.hpp"

namespace rdmagate::dataplane {
namespace {

using protocol::MessageType;
using protocol::ObjectOp;
using protocol::ObjectStatus;

constexpr std::uint32_t kMaxMessage = 1024;
constexpr std::uint32_t kMaxBulk = 1u << 20;
constexpr std::uint32_t kRkey = 0xabcd1234;

// A forwarding service's request, say: the requester only hands its address back.
struct Req {
  int id = 0;
};
using Requester = ObjectRequester<Req>;
using Outbound = OutboundObjectRequest<Req>;

protocol::Session sender_session() {
  protocol::Session s;
  s.params = protocol::ConnParams{16, kMaxMessage, protocol::kMaxFragments, kMaxBulk};
  s.local_incarnation = 0x1111;
  s.peer_incarnation = 0x2222;
  return s;
}
// The peer's view of the same session: what decodes what we sent.
protocol::Session receiver_session() {
  protocol::Session s = sender_session();
  std::swap(s.local_incarnation, s.peer_incarnation);
  return s;
}

// The core's send_st: encodes the message for the connection's session, as the core loop does, and keeps the
// bytes; refuses what the encoder refuses, or everything while `fail_sends`.
struct FakeCore {
  struct Wire {
    const CoreConn* conn;
    std::vector<std::uint8_t> bytes;
  };
  std::vector<Wire> sent;
  bool fail_sends = false;
  // Memory windows, in the order staged: a bind (with the key it gave) or an invalidation, and the number of
  // messages sent before it (a bind must come before its request's send).
  struct WindowOp {
    bool bind = false;
    std::uint32_t slot = 0;
    WindowBind b{};
    std::uint32_t key = 0;
    std::size_t sent_before = 0;
  };
  std::vector<WindowOp> window_ops;
  std::uint32_t next_key = 0x7700;
  bool fail_binds = false, fail_invalidations = false;

  std::uint32_t bind_window_st(CoreConn&, std::uint32_t slot, const WindowBind& b) {
    if (fail_binds) return 0;
    window_ops.push_back(WindowOp{true, slot, b, ++next_key, sent.size()});
    return next_key;
  }
  bool invalidate_window_st(CoreConn&, std::uint32_t slot) {
    if (fail_invalidations) return false;
    window_ops.push_back(WindowOp{false, slot, {}, 0, sent.size()});
    return true;
  }

  bool send_st(CoreConn& c, MessageType t, std::uint16_t op, std::uint64_t cookie,
               std::span<const std::uint8_t> p, std::uint32_t status = 0, std::uint32_t bytes = 0,
               const protocol::Chunk* chunk = nullptr) {
    if (fail_sends) return false;
    protocol::Message m;
    m.type = t;
    m.opcode = op;
    m.cookie = cookie;
    m.payload = p;
    m.status = status;
    m.byte_count = bytes;
    if (chunk != nullptr) m.chunk = *chunk;
    std::vector<std::uint8_t> out(c.session.params.max_message_size);
    const auto e = protocol::encode_message(m, c.session, out);
    if (!e.ok()) return false;
    out.resize(e.size);
    sent.push_back(Wire{&c, std::move(out)});
    return true;
  }
};

// What the peer decodes from one sent message, with the object request parsed out of it.
struct Decoded {
  protocol::Message msg;
  protocol::ObjectRequest req;
  protocol::ObjectParseError parse = protocol::ObjectParseError::kOk;
};
Decoded decode(const FakeCore::Wire& w) {
  Decoded d;
  const protocol::Session rs = receiver_session();
  EXPECT_EQ(protocol::decode_message(w.bytes, rs, d.msg), protocol::WireError::kOk);
  d.parse = protocol::parse_object_request(d.msg.type, d.msg.opcode, d.msg.payload, d.req);
  return d;
}

std::uint16_t opcode(ObjectOp op) {
  return static_cast<std::uint16_t>(protocol::object_opcode(op));
}

protocol::Message completion(std::uint64_t cookie, ObjectOp op, ObjectStatus st, std::uint32_t bytes) {
  protocol::Message m;
  m.type = MessageType::kCompletion;
  m.opcode = opcode(op);
  m.cookie = cookie;
  m.status = static_cast<std::uint32_t>(st);
  m.byte_count = bytes;
  return m;
}
protocol::Message inline_answer(std::uint64_t cookie, ObjectOp op, std::span<const std::uint8_t> value) {
  protocol::Message m;
  m.type = MessageType::kInlineResponse;
  m.opcode = opcode(op);
  m.cookie = cookie;
  m.payload = value;
  return m;
}

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i * 7);
  return v;
}

class ObjectRequesterTest : public ::testing::Test {
 protected:
  void start(std::uint32_t links = 2, std::uint32_t max_inflight = 8,
             std::uint32_t max_chunked = kChunkQueue) {
    ObjectRequesterConfig cfg;
    cfg.links = links;
    cfg.max_inflight = max_inflight;
    cfg.max_chunked = max_chunked;
    req_ = std::make_unique<Requester>(cfg);
    conns_.clear();
    for (std::uint32_t i = 0; i < links; ++i) {
      conns_.push_back(std::make_unique<CoreConn>());
      conns_.back()->state = CoreConnState::kOwned;
      conns_.back()->session = sender_session();
      req_->attach_st(i, *conns_.back());
    }
  }

  ObjectSendResult send(std::uint32_t link, Req& r, ObjectOp op, const std::string& key, void* buf,
                        std::uint64_t size, bool registered = true) {
    Outbound o;
    o.user = &r;
    o.op = op;
    o.key = key;
    o.buf = buf;
    o.size = size;
    o.registered = registered;
    o.rkey = kRkey;
    return req_->send_st(api_, link, o);
  }
  ObjectAnswer<Req> answer(std::uint32_t link, const protocol::Message& m) {
    return req_->on_answer_st(api_, link, *conns_[link], m);
  }
  const ObjectRequesterCounters& cnt() { return req_->counters(); }

  FakeCore api_;
  std::unique_ptr<Requester> req_;
  std::vector<std::unique_ptr<CoreConn>> conns_;
};

// Every field of an inline PUT, GET and DELETE as the peer decodes it.
TEST_F(ObjectRequesterTest, InlinePutGetDeleteOnTheWire) {
  start();
  Req put{1}, get{2}, del{3};
  auto value = pattern(300, 5);
  std::vector<std::uint8_t> dest(500);

  const auto sp = send(0, put, ObjectOp::kPut, "alpha", value.data(), value.size());
  ASSERT_EQ(sp.status, ObjectSendStatus::kSent);
  EXPECT_FALSE(sp.chunked);
  const auto sg = send(0, get, ObjectOp::kGet, "beta", dest.data(), dest.size());
  ASSERT_EQ(sg.status, ObjectSendStatus::kSent);
  EXPECT_FALSE(sg.chunked);
  const auto sd = send(0, del, ObjectOp::kDelete, "gamma", nullptr, 0, false);
  ASSERT_EQ(sd.status, ObjectSendStatus::kSent);
  ASSERT_EQ(api_.sent.size(), 3u);

  const Decoded p = decode(api_.sent[0]);
  EXPECT_EQ(p.msg.type, MessageType::kInlineRequest);
  EXPECT_EQ(p.msg.opcode, opcode(ObjectOp::kPut));
  EXPECT_EQ(p.msg.cookie, sp.cookie);
  EXPECT_EQ(p.msg.status, 0u);
  EXPECT_EQ(p.msg.byte_count, 0u);
  EXPECT_EQ(p.msg.chunk.count, 0u);
  EXPECT_EQ(p.msg.payload.size(), protocol::object_payload_size(5, 300));
  ASSERT_EQ(p.parse, protocol::ObjectParseError::kOk);
  EXPECT_EQ(p.req.op, ObjectOp::kPut);
  EXPECT_EQ(p.req.key, "alpha");
  ASSERT_EQ(p.req.value.size(), value.size());
  EXPECT_EQ(std::memcmp(p.req.value.data(), value.data(), value.size()), 0);

  const Decoded g = decode(api_.sent[1]);
  EXPECT_EQ(g.msg.type, MessageType::kInlineRequest);
  EXPECT_EQ(g.msg.opcode, opcode(ObjectOp::kGet));
  EXPECT_EQ(g.msg.cookie, sg.cookie);
  EXPECT_EQ(g.msg.chunk.count, 0u);
  EXPECT_EQ(g.msg.payload.size(), protocol::object_payload_size(4, 0));
  ASSERT_EQ(g.parse, protocol::ObjectParseError::kOk);
  EXPECT_EQ(g.req.op, ObjectOp::kGet);
  EXPECT_EQ(g.req.key, "beta");
  EXPECT_TRUE(g.req.value.empty());

  const Decoded d = decode(api_.sent[2]);
  EXPECT_EQ(d.msg.type, MessageType::kInlineRequest);
  EXPECT_EQ(d.msg.opcode, opcode(ObjectOp::kDelete));
  EXPECT_EQ(d.msg.cookie, sd.cookie);
  EXPECT_EQ(d.msg.chunk.count, 0u);
  ASSERT_EQ(d.parse, protocol::ObjectParseError::kOk);
  EXPECT_EQ(d.req.op, ObjectOp::kDelete);
  EXPECT_EQ(d.req.key, "gamma");
  EXPECT_TRUE(d.req.value.empty());

  // Three distinct cookies: distinct table indices (low 16 bits), increasing sequence numbers (the rest).
  EXPECT_NE(sp.cookie & 0xffff, sg.cookie & 0xffff);
  EXPECT_NE(sg.cookie & 0xffff, sd.cookie & 0xffff);
  EXPECT_LT(sp.cookie >> 16, sg.cookie >> 16);
  EXPECT_LT(sg.cookie >> 16, sd.cookie >> 16);
  EXPECT_EQ(req_->inflight_st(0), 3u);
  EXPECT_EQ(req_->chunked_st(0), 0u);
  EXPECT_EQ(cnt().inline_puts.load(), 1u);
  EXPECT_EQ(cnt().inline_gets.load(), 1u);
  EXPECT_EQ(cnt().deletes.load(), 1u);
  EXPECT_EQ(cnt().chunked_puts.load() + cnt().chunked_gets.load(), 0u);
}

// A PUT above the inline size travels as a read chunk naming the value, a GET above it as a write chunk
// naming the destination (capped at the session's max_bulk_size); the payload is the key prefix alone.
TEST_F(ObjectRequesterTest, ChunkPutAndGetOnTheWire) {
  start();
  Req put{1}, get{2}, big_get{3};
  auto value = pattern(5000, 9);
  std::vector<std::uint8_t> dest(8000);
  std::vector<std::uint8_t> huge(kMaxBulk + 4096);

  const auto sp = send(1, put, ObjectOp::kPut, "put-key", value.data(), value.size());
  ASSERT_EQ(sp.status, ObjectSendStatus::kSent);
  EXPECT_TRUE(sp.chunked);
  const auto sg = send(1, get, ObjectOp::kGet, "get-key", dest.data(), dest.size());
  ASSERT_EQ(sg.status, ObjectSendStatus::kSent);
  EXPECT_TRUE(sg.chunked);
  const auto sb = send(1, big_get, ObjectOp::kGet, "big", huge.data(), huge.size());
  ASSERT_EQ(sb.status, ObjectSendStatus::kSent);
  ASSERT_EQ(api_.sent.size(), 3u);
  for (const auto& w : api_.sent) EXPECT_EQ(w.conn, conns_[1].get());

  const Decoded p = decode(api_.sent[0]);
  EXPECT_EQ(p.msg.type, MessageType::kReadChunkRequest);
  EXPECT_EQ(p.msg.opcode, opcode(ObjectOp::kPut));
  EXPECT_EQ(p.msg.cookie, sp.cookie);
  ASSERT_EQ(p.msg.chunk.count, 1u);
  EXPECT_EQ(p.msg.chunk.fragments[0],
            (protocol::Fragment{reinterpret_cast<std::uintptr_t>(value.data()), 5000, kRkey}));
  ASSERT_EQ(p.parse, protocol::ObjectParseError::kOk);
  EXPECT_EQ(p.req.op, ObjectOp::kPut);
  EXPECT_EQ(p.req.key, "put-key");
  EXPECT_TRUE(p.req.value.empty());
  EXPECT_EQ(p.msg.payload.size(), protocol::object_payload_size(7, 0));

  const Decoded g = decode(api_.sent[1]);
  EXPECT_EQ(g.msg.type, MessageType::kWriteChunkRequest);
  EXPECT_EQ(g.msg.opcode, opcode(ObjectOp::kGet));
  EXPECT_EQ(g.msg.cookie, sg.cookie);
  ASSERT_EQ(g.msg.chunk.count, 1u);
  EXPECT_EQ(g.msg.chunk.fragments[0],
            (protocol::Fragment{reinterpret_cast<std::uintptr_t>(dest.data()), 8000, kRkey}));
  ASSERT_EQ(g.parse, protocol::ObjectParseError::kOk);
  EXPECT_EQ(g.req.op, ObjectOp::kGet);
  EXPECT_EQ(g.req.key, "get-key");

  const Decoded b = decode(api_.sent[2]);
  EXPECT_EQ(b.msg.type, MessageType::kWriteChunkRequest);
  ASSERT_EQ(b.msg.chunk.count, 1u);
  EXPECT_EQ(b.msg.chunk.fragments[0].len, kMaxBulk) << "capped at the session's max_bulk_size";

  EXPECT_EQ(req_->chunked_st(1), 3u);
  EXPECT_EQ(req_->inflight_st(0), 0u);
  EXPECT_EQ(cnt().chunked_puts.load(), 1u);
  EXPECT_EQ(cnt().chunked_gets.load(), 2u);
}

// The inline limits are the protocol's, for the session's message size: at the limit inline, one above it
// a chunk; a PUT above max_bulk_size is refused, an unregistered one that needs a chunk too.
TEST_F(ObjectRequesterTest, InlineLimitsTooLargeAndUnregistered) {
  start(1, 16, 16);
  const std::string key = "k";
  const std::uint32_t put_max = protocol::max_inline_put_value(kMaxMessage, key.size());
  const std::uint32_t get_max = protocol::max_inline_get_value(kMaxMessage);
  std::vector<std::uint8_t> buf(kMaxBulk + 1);
  Req r[6];
  EXPECT_FALSE(send(0, r[0], ObjectOp::kPut, key, buf.data(), put_max).chunked);
  EXPECT_TRUE(send(0, r[1], ObjectOp::kPut, key, buf.data(), put_max + 1).chunked);
  EXPECT_FALSE(send(0, r[2], ObjectOp::kGet, key, buf.data(), get_max).chunked);
  EXPECT_TRUE(send(0, r[3], ObjectOp::kGet, key, buf.data(), get_max + 1).chunked);
  ASSERT_EQ(api_.sent.size(), 4u);
  EXPECT_EQ(decode(api_.sent[0]).msg.type, MessageType::kInlineRequest);
  EXPECT_EQ(decode(api_.sent[0]).req.value.size(), put_max);
  EXPECT_EQ(decode(api_.sent[0]).msg.payload.size() + protocol::kHeaderSize, kMaxMessage) << "exactly full";
  EXPECT_EQ(decode(api_.sent[1]).msg.type, MessageType::kReadChunkRequest);
  EXPECT_EQ(decode(api_.sent[2]).msg.type, MessageType::kInlineRequest);
  EXPECT_EQ(decode(api_.sent[3]).msg.type, MessageType::kWriteChunkRequest);

  EXPECT_EQ(send(0, r[4], ObjectOp::kPut, key, buf.data(), kMaxBulk + 1).status, ObjectSendStatus::kTooLarge);
  EXPECT_EQ(send(0, r[4], ObjectOp::kPut, key, buf.data(), put_max + 1, false).status,
            ObjectSendStatus::kUnregistered);
  EXPECT_EQ(send(0, r[5], ObjectOp::kGet, key, buf.data(), get_max + 1, false).status,
            ObjectSendStatus::kUnregistered);
  // An unregistered request that fits inline needs no keys.
  EXPECT_EQ(send(0, r[5], ObjectOp::kGet, key, buf.data(), get_max, false).status, ObjectSendStatus::kSent);
  EXPECT_EQ(api_.sent.size(), 5u) << "nothing refused reached the wire";
  EXPECT_EQ(req_->inflight_st(0), 5u);
  EXPECT_EQ(cnt().unregistered.load(), 2u);
  // Counted by kind once the kind is known (an unregistered chunk request too); a too-large PUT is not.
  EXPECT_EQ(cnt().inline_puts.load(), 1u);
  EXPECT_EQ(cnt().chunked_puts.load(), 2u);
  EXPECT_EQ(cnt().inline_gets.load(), 2u);
  EXPECT_EQ(cnt().chunked_gets.load(), 2u);
}

// A send the core refuses (or a key the payload encoder refuses) leaves nothing in flight and gives the
// table index back.
TEST_F(ObjectRequesterTest, RefusedSendsLeaveNothingInFlight) {
  start(1, 2);
  Req a{1}, b{2}, c{3};
  std::vector<std::uint8_t> buf(16);
  api_.fail_sends = true;
  EXPECT_EQ(send(0, a, ObjectOp::kGet, "x", buf.data(), buf.size()).status, ObjectSendStatus::kRefused);
  api_.fail_sends = false;
  const std::string too_long(protocol::kMaxKeyLength + 1, 'k');
  EXPECT_EQ(send(0, a, ObjectOp::kDelete, too_long, nullptr, 0).status, ObjectSendStatus::kRefused);
  EXPECT_EQ(send(0, a, ObjectOp::kDelete, "", nullptr, 0).status, ObjectSendStatus::kRefused);
  EXPECT_EQ(cnt().send_refused.load(), 3u);
  EXPECT_EQ(req_->inflight_st(0), 0u);
  EXPECT_TRUE(api_.sent.empty());
  // Both indices are still free.
  EXPECT_EQ(send(0, b, ObjectOp::kGet, "x", buf.data(), buf.size()).status, ObjectSendStatus::kSent);
  EXPECT_EQ(send(0, c, ObjectOp::kGet, "y", buf.data(), buf.size()).status, ObjectSendStatus::kSent);
  EXPECT_EQ(req_->inflight_st(0), 2u);
}

// Each answer completes the request its cookie names, with the peer's verdict or, when the answer cannot be
// an answer to that request, malformed (counted).
TEST_F(ObjectRequesterTest, AnswersCompleteTheRightRequestWithTheRightResult) {
  start(1, 32);
  std::vector<std::uint8_t> small(100, 0xee), chunk_dest(8000), value(5000);
  Req get_inline{1}, get_small{2}, put_chunk{3}, get_chunk{4}, del{5}, get_missing{6};
  const auto c1 = send(0, get_inline, ObjectOp::kGet, "a", small.data(), small.size()).cookie;
  const auto c2 = send(0, get_small, ObjectOp::kGet, "b", small.data(), small.size()).cookie;
  const auto c3 = send(0, put_chunk, ObjectOp::kPut, "c", value.data(), value.size()).cookie;
  const auto c4 = send(0, get_chunk, ObjectOp::kGet, "d", chunk_dest.data(), chunk_dest.size()).cookie;
  const auto c5 = send(0, del, ObjectOp::kDelete, "e", nullptr, 0).cookie;
  const auto c6 = send(0, get_missing, ObjectOp::kGet, "f", small.data(), small.size()).cookie;
  ASSERT_EQ(req_->inflight_st(0), 6u);
  ASSERT_EQ(req_->chunked_st(0), 2u);

  // Out of order: the cookie, not the order, decides.
  const auto v = pattern(60, 3);
  auto a = answer(0, inline_answer(c1, ObjectOp::kGet, v));
  EXPECT_EQ(a.user, &get_inline);
  EXPECT_FALSE(a.malformed);
  EXPECT_EQ(a.status, ObjectStatus::kOk);
  EXPECT_EQ(a.size, 60u);
  EXPECT_EQ(a.wire_status, 0u);
  EXPECT_EQ(std::memcmp(small.data(), v.data(), v.size()), 0) << "an inline value lands in the buffer";
  EXPECT_EQ(small[60], 0xee) << "and nothing beyond it";

  a = answer(0, completion(c4, ObjectOp::kGet, ObjectStatus::kOk, 7000));
  EXPECT_EQ(a.user, &get_chunk);
  EXPECT_FALSE(a.malformed);
  EXPECT_EQ(a.status, ObjectStatus::kOk);
  EXPECT_EQ(a.size, 7000u);

  // An inline answer larger than the buffer: kTooSmall with the size needed, buffer untouched.
  const auto big = pattern(150, 1);
  std::fill(small.begin(), small.end(), 0xee);
  a = answer(0, inline_answer(c2, ObjectOp::kGet, big));
  EXPECT_EQ(a.user, &get_small);
  EXPECT_FALSE(a.malformed);
  EXPECT_EQ(a.status, ObjectStatus::kTooSmall);
  EXPECT_EQ(a.size, 150u);
  EXPECT_EQ(small, std::vector<std::uint8_t>(100, 0xee));

  a = answer(0, completion(c3, ObjectOp::kPut, ObjectStatus::kOk, 5000));
  EXPECT_EQ(a.user, &put_chunk);
  EXPECT_FALSE(a.malformed);
  EXPECT_EQ(a.status, ObjectStatus::kOk);
  EXPECT_EQ(a.size, 5000u);

  a = answer(0, completion(c6, ObjectOp::kGet, ObjectStatus::kNotFound, 0));
  EXPECT_EQ(a.user, &get_missing);
  EXPECT_FALSE(a.malformed);
  EXPECT_EQ(a.status, ObjectStatus::kNotFound);
  EXPECT_EQ(a.wire_status, static_cast<std::uint32_t>(ObjectStatus::kNotFound));

  a = answer(0, completion(c5, ObjectOp::kDelete, ObjectStatus::kOk, 0));
  EXPECT_EQ(a.user, &del);
  EXPECT_FALSE(a.malformed);
  EXPECT_EQ(a.status, ObjectStatus::kOk);

  EXPECT_EQ(req_->inflight_st(0), 0u);
  EXPECT_EQ(req_->chunked_st(0), 0u);
  EXPECT_EQ(cnt().answered.load(), 6u);
  EXPECT_EQ(cnt().protocol_errors.load(), 0u);
  EXPECT_EQ(cnt().stale_answers.load(), 0u);
}

TEST_F(ObjectRequesterTest, AnswersThatCannotBeTheRequestsAreMalformed) {
  start(1, 32);
  std::vector<std::uint8_t> small(100), big(8000), value(5000);
  struct Case {
    const char* what;
    ObjectOp op;
    std::uint64_t size;  // of the request's buffer
    bool registered;
    protocol::Message (*make)(std::uint64_t cookie);
  };
  static const std::vector<std::uint8_t> bytes(10, 1);
  const Case cases[] = {
      {"opcode of another op", ObjectOp::kGet, 100, false,
       [](std::uint64_t k) { return completion(k, ObjectOp::kPut, ObjectStatus::kOk, 0); }},
      {"inline answer to a PUT", ObjectOp::kPut, 100, false,
       [](std::uint64_t k) { return inline_answer(k, ObjectOp::kPut, bytes); }},
      {"inline answer to a chunked GET", ObjectOp::kGet, 8000, true,
       [](std::uint64_t k) { return inline_answer(k, ObjectOp::kGet, bytes); }},
      {"PUT ok with another byte count", ObjectOp::kPut, 100, false,
       [](std::uint64_t k) { return completion(k, ObjectOp::kPut, ObjectStatus::kOk, 99); }},
      {"inline GET ok by completion", ObjectOp::kGet, 100, false,
       [](std::uint64_t k) { return completion(k, ObjectOp::kGet, ObjectStatus::kOk, 10); }},
      {"chunked GET ok beyond the chunk", ObjectOp::kGet, 8000, true,
       [](std::uint64_t k) { return completion(k, ObjectOp::kGet, ObjectStatus::kOk, 8001); }},
      {"kTooSmall for a PUT", ObjectOp::kPut, 100, false,
       [](std::uint64_t k) { return completion(k, ObjectOp::kPut, ObjectStatus::kTooSmall, 0); }},
      {"kTooSmall for a DELETE", ObjectOp::kDelete, 0, false,
       [](std::uint64_t k) { return completion(k, ObjectOp::kDelete, ObjectStatus::kTooSmall, 0); }},
      {"kUnknownOpcode", ObjectOp::kDelete, 0, false,
       [](std::uint64_t k) { return completion(k, ObjectOp::kDelete, ObjectStatus::kUnknownOpcode, 0); }},
      {"a status no object answer has", ObjectOp::kDelete, 0, false,
       [](std::uint64_t k) {
         auto m = completion(k, ObjectOp::kDelete, ObjectStatus::kOk, 0);
         m.status = 0x999;
         return m;
       }},
      {"a request type as answer", ObjectOp::kDelete, 0, false,
       [](std::uint64_t k) {
         auto m = completion(k, ObjectOp::kDelete, ObjectStatus::kOk, 0);
         m.type = MessageType::kInlineRequest;
         return m;
       }},
  };
  std::uint64_t n = 0;
  for (const Case& c : cases) {
    Req r{static_cast<int>(n)};
    void* buf = c.size == 8000 ? static_cast<void*>(big.data()) : static_cast<void*>(small.data());
    if (c.op == ObjectOp::kPut) buf = value.data();
    const auto s = send(0, r, c.op, "key", buf, c.size, c.registered);
    ASSERT_EQ(s.status, ObjectSendStatus::kSent) << c.what;
    const auto a = answer(0, c.make(s.cookie));
    EXPECT_EQ(a.user, &r) << c.what;
    EXPECT_TRUE(a.malformed) << c.what;
    EXPECT_EQ(req_->inflight_st(0), 0u) << c.what << ": a malformed answer still ends the request";
    EXPECT_EQ(cnt().protocol_errors.load(), ++n) << c.what;
  }
  EXPECT_EQ(cnt().answered.load(), n);
}

// Stale or forged cookies: the wrong sequence number at a busy index, an index beyond the table, a free
// index, an answer on another connection or a connection not ours, and a duplicate. None completes
// anything; each is counted; the request in flight still completes with its own answer.
TEST_F(ObjectRequesterTest, StaleAndForgedCookiesCompleteNothing) {
  start(2, 8);
  Req r{1};
  const auto s = send(0, r, ObjectOp::kDelete, "key", nullptr, 0);
  ASSERT_EQ(s.status, ObjectSendStatus::kSent);
  const std::uint64_t idx = s.cookie & 0xffff;
  const std::uint64_t seq = s.cookie >> 16;
  const auto ok = [](std::uint64_t k) { return completion(k, ObjectOp::kDelete, ObjectStatus::kOk, 0); };

  const std::uint64_t forged[] = {
      ((seq + 1) << 16) | idx,  // right index, wrong sequence
      ((seq - 1) << 16) | idx,  // an older request's sequence at this index
      (seq << 16) | 8,          // beyond the table (8 entries)
      (seq << 16) | 0xffff,
      (seq << 16) | ((idx + 1) % 8),  // a free index
      0,
  };
  for (const std::uint64_t k : forged) EXPECT_EQ(answer(0, ok(k)).user, nullptr) << std::hex << k;
  // The right cookie on the other link's connection, on a connection that is no link of ours, with no link.
  EXPECT_EQ(req_->on_answer_st(api_, 1, *conns_[1], ok(s.cookie)).user, nullptr);
  EXPECT_EQ(req_->on_answer_st(api_, 0, *conns_[1], ok(s.cookie)).user, nullptr);
  CoreConn stranger;
  EXPECT_EQ(req_->on_answer_st(api_, 0, stranger, ok(s.cookie)).user, nullptr);
  EXPECT_EQ(req_->on_answer_st(api_, Requester::kNoLink, *conns_[0], ok(s.cookie)).user, nullptr);
  EXPECT_EQ(req_->on_answer_st(api_, 7, *conns_[0], ok(s.cookie)).user, nullptr);
  const std::uint64_t stale = std::size(forged) + 5;
  EXPECT_EQ(cnt().stale_answers.load(), stale);
  EXPECT_EQ(cnt().answered.load(), 0u);
  EXPECT_EQ(req_->inflight_st(0), 1u);

  EXPECT_EQ(answer(0, ok(s.cookie)).user, &r);
  // A duplicate of the answer that completed it, and the same cookie once the index is reused.
  EXPECT_EQ(answer(0, ok(s.cookie)).user, nullptr);
  Req again{2};
  const auto s2 = send(0, again, ObjectOp::kDelete, "key", nullptr, 0);
  ASSERT_EQ(s2.status, ObjectSendStatus::kSent);
  EXPECT_EQ(s2.cookie & 0xffff, idx) << "the index just freed is reused first";
  EXPECT_NE(s2.cookie, s.cookie);
  EXPECT_EQ(answer(0, ok(s.cookie)).user, nullptr) << "the old cookie does not complete the new request";
  EXPECT_EQ(cnt().stale_answers.load(), stale + 2);
  EXPECT_EQ(answer(0, ok(s2.cookie)).user, &again);
  EXPECT_EQ(cnt().answered.load(), 2u);
}

// A close hands back every request in flight on that link exactly once, with its mark, and nothing of the
// other link; late answers are then stale; the link takes requests again once attached.
TEST_F(ObjectRequesterTest, CloseFailsEveryRequestInFlightExactlyOnce) {
  start(2, 8);
  std::vector<std::uint8_t> buf(8000);
  Req reqs[6] = {{0}, {1}, {2}, {3}, {4}, {5}};
  std::vector<std::uint64_t> cookies;
  for (int i = 0; i < 5; ++i) {
    const bool chunk = i % 2 == 1;
    const auto s = send(0, reqs[i], ObjectOp::kGet, "k" + std::to_string(i), buf.data(), chunk ? 8000 : 100);
    ASSERT_EQ(s.status, ObjectSendStatus::kSent);
    EXPECT_EQ(s.chunked, chunk);
    cookies.push_back(s.cookie);
  }
  const auto other = send(1, reqs[5], ObjectOp::kDelete, "o", nullptr, 0);
  ASSERT_EQ(other.status, ObjectSendStatus::kSent);
  // One answered before the close.
  EXPECT_EQ(answer(0, inline_answer(cookies[0], ObjectOp::kGet, {})).user, &reqs[0]);
  // Two marked (the owner's timeouts, say); marking again marks nothing new.
  EXPECT_EQ(req_->mark_if_st(0, [&](const Req* r) { return r->id == 2 || r->id == 3; }), 2u);
  EXPECT_EQ(req_->mark_if_st(0, [&](const Req* r) { return r->id == 2 || r->id == 3; }), 0u);

  std::map<int, int> seen;
  std::map<int, bool> marks;
  req_->fail_all_st(0, [&](Req* r, bool marked) {
    ++seen[r->id];
    marks[r->id] = marked;
    // Already detached: a request started from here does not go on the closed link.
    Req late{99};
    EXPECT_EQ(send(0, late, ObjectOp::kDelete, "late", nullptr, 0).status, ObjectSendStatus::kNoRoom);
  });
  EXPECT_EQ(seen, (std::map<int, int>{{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  EXPECT_EQ(marks, (std::map<int, bool>{{1, false}, {2, true}, {3, true}, {4, false}}));
  EXPECT_EQ(req_->inflight_st(0), 0u);
  EXPECT_EQ(req_->chunked_st(0), 0u);
  EXPECT_EQ(req_->conn_st(0), nullptr);
  EXPECT_FALSE(req_->carries_st(0, *conns_[0]));
  EXPECT_EQ(req_->inflight_st(1), 1u) << "the other link is untouched";

  // A second close finds nothing; late answers are stale.
  int again = 0;
  req_->fail_all_st(0, [&](Req*, bool) { ++again; });
  EXPECT_EQ(again, 0);
  const auto before = cnt().stale_answers.load();
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(answer(0, completion(cookies[i], ObjectOp::kGet, ObjectStatus::kOk, 0)).user, nullptr);
  }
  EXPECT_EQ(cnt().stale_answers.load(), before + 4);

  // Reattached (a reconnect): the whole table and the chunk budget are free again.
  req_->attach_st(0, *conns_[0]);
  for (std::uint32_t i = 0; i < 8; ++i) {
    Req& r = reqs[i % 5];
    EXPECT_EQ(send(0, r, ObjectOp::kGet, "r", buf.data(), i < kChunkQueue ? 8000 : 100).status,
              ObjectSendStatus::kSent)
        << i;
  }
  EXPECT_EQ(req_->inflight_st(0), 8u);
  EXPECT_EQ(answer(1, completion(other.cookie, ObjectOp::kDelete, ObjectStatus::kOk, 0)).user, &reqs[5]);
}

// A full table refuses without counting or sending; so does a full chunk budget for a request that needs a
// chunk (an inline one still goes); a detached link refuses everything. Room comes back with the answers.
TEST_F(ObjectRequesterTest, FullTablesRefuse) {
  start(2, 4, 2);
  std::vector<std::uint8_t> buf(8000);
  Req r[8];
  std::vector<std::uint64_t> cookies;
  EXPECT_TRUE(req_->room_st(0, true));
  for (int i = 0; i < 2; ++i) {
    const auto s = send(0, r[i], ObjectOp::kPut, "c", buf.data(), 5000);
    ASSERT_EQ(s.status, ObjectSendStatus::kSent);
    cookies.push_back(s.cookie);
  }
  EXPECT_FALSE(req_->room_st(0, true));
  EXPECT_TRUE(req_->room_st(0, false));
  const auto sent_before = api_.sent.size();
  const auto puts_before = cnt().chunked_puts.load();
  EXPECT_EQ(send(0, r[2], ObjectOp::kPut, "c", buf.data(), 5000).status, ObjectSendStatus::kNoRoom);
  EXPECT_EQ(send(0, r[2], ObjectOp::kGet, "c", buf.data(), 5000).status, ObjectSendStatus::kNoRoom);
  EXPECT_EQ(cnt().chunked_puts.load(), puts_before) << "a refusal for room counts nothing";
  EXPECT_EQ(cnt().chunked_gets.load(), 0u);
  for (int i = 2; i < 4; ++i) {
    const auto s = send(0, r[i], ObjectOp::kPut, "i", buf.data(), 10);
    ASSERT_EQ(s.status, ObjectSendStatus::kSent);
    cookies.push_back(s.cookie);
  }
  EXPECT_FALSE(req_->room_st(0, false));
  EXPECT_EQ(send(0, r[4], ObjectOp::kDelete, "d", nullptr, 0).status, ObjectSendStatus::kNoRoom);
  EXPECT_EQ(api_.sent.size(), sent_before + 2);
  EXPECT_EQ(cnt().deletes.load(), 0u);
  EXPECT_EQ(req_->inflight_st(0), 4u);
  // The other link has its own table.
  EXPECT_EQ(send(1, r[5], ObjectOp::kDelete, "d", nullptr, 0).status, ObjectSendStatus::kSent);

  // An inline answer frees a slot but no chunk room; a chunk answer frees both.
  EXPECT_EQ(answer(0, completion(cookies[2], ObjectOp::kPut, ObjectStatus::kOk, 10)).user, &r[2]);
  EXPECT_TRUE(req_->room_st(0, false));
  EXPECT_FALSE(req_->room_st(0, true));
  EXPECT_EQ(answer(0, completion(cookies[0], ObjectOp::kPut, ObjectStatus::kOk, 5000)).user, &r[0]);
  EXPECT_TRUE(req_->room_st(0, true));
  EXPECT_EQ(send(0, r[6], ObjectOp::kGet, "c", buf.data(), 5000).status, ObjectSendStatus::kSent);

  // A link never attached, or detached, refuses.
  req_->fail_all_st(1, [](Req*, bool) {});
  EXPECT_FALSE(req_->room_st(1, false));
  EXPECT_EQ(send(1, r[7], ObjectOp::kDelete, "d", nullptr, 0).status, ObjectSendStatus::kNoRoom);
}

// The requester counts into a block its owner provides (the client library embeds it in its own counters).
TEST(ObjectRequesterCountersTest, CountsIntoTheOwnersBlock) {
  ObjectRequesterCounters mine;
  ObjectRequesterConfig cfg;
  cfg.links = 1;
  cfg.max_inflight = 2;
  cfg.counters = &mine;
  Requester req(cfg);
  EXPECT_EQ(&req.counters(), &mine);
  CoreConn c;
  c.state = CoreConnState::kOwned;
  c.session = sender_session();
  req.attach_st(0, c);
  FakeCore api;
  Req r;
  Outbound o;
  o.user = &r;
  o.op = ObjectOp::kDelete;
  o.key = "k";
  ASSERT_EQ(req.send_st(api, 0, o).status, ObjectSendStatus::kSent);
  EXPECT_EQ(mine.deletes.load(), 1u);
  EXPECT_EQ(req.on_answer_st(api, 0, c, completion(1, ObjectOp::kDelete, ObjectStatus::kOk, 0)).user,
            nullptr);
  EXPECT_EQ(mine.stale_answers.load(), 1u);
}

// ---- memory windows
// ------------------------------------------------------------------------------------------

class ObjectRequesterWindowTest : public ObjectRequesterTest {
 protected:
  // One link whose connection has `windows` memory windows.
  void start_windows(std::uint32_t windows, std::uint32_t max_chunked = kChunkQueue) {
    start(1, 8, max_chunked);
    req_->attach_st(0, *conns_[0], windows);
  }
  ObjectSendResult send_mr(Req& r, ObjectOp op, void* buf, std::uint64_t size, ibv_mr* mr = kMr) {
    Outbound o;
    o.user = &r;
    o.op = op;
    o.key = "w";
    o.buf = buf;
    o.size = size;
    o.registered = true;
    o.rkey = kRkey;
    o.mr = mr;
    return req_->send_st(api_, 0, o);
  }
  ObjectAnswer<Req> invalidated(std::uint32_t window) {
    return req_->on_window_invalidated_st(0, *conns_[0], window);
  }
  // Never dereferenced: the fake core only passes it on.
  inline static ibv_mr* const kMr = reinterpret_cast<ibv_mr*>(std::uintptr_t{0x5000});
};

// A chunk names a window bound to exactly the request's bytes, with the request's one access, staged before
// the request's send; each bind has a key of its own and the registration's key never goes on the wire.
TEST_F(ObjectRequesterWindowTest, EachChunkNamesAWindowBoundBeforeItsSend) {
  start_windows(4);
  EXPECT_EQ(req_->windows_st(0), 4u);
  std::vector<std::uint8_t> src(5000), dst(8000), small(10);
  Req put{1}, get{2}, tiny{3};
  ASSERT_EQ(send_mr(put, ObjectOp::kPut, src.data(), src.size()).status, ObjectSendStatus::kSent);
  ASSERT_EQ(send_mr(get, ObjectOp::kGet, dst.data(), dst.size()).status, ObjectSendStatus::kSent);
  ASSERT_EQ(send_mr(tiny, ObjectOp::kPut, small.data(), small.size()).status, ObjectSendStatus::kSent);
  ASSERT_EQ(api_.window_ops.size(), 2u) << "an inline request binds nothing";
  ASSERT_EQ(api_.sent.size(), 3u);

  const auto& pb = api_.window_ops[0];
  EXPECT_TRUE(pb.bind);
  EXPECT_EQ(pb.sent_before, 0u) << "bound before its send";
  EXPECT_EQ(pb.b.addr, reinterpret_cast<std::uintptr_t>(src.data()));
  EXPECT_EQ(pb.b.len, src.size());
  EXPECT_EQ(pb.b.mr, kMr);
  EXPECT_FALSE(pb.b.remote_write) << "a PUT's source is only read";
  const auto& gb = api_.window_ops[1];
  EXPECT_EQ(gb.sent_before, 1u);
  EXPECT_NE(gb.slot, pb.slot);
  EXPECT_EQ(gb.b.addr, reinterpret_cast<std::uintptr_t>(dst.data()));
  EXPECT_EQ(gb.b.len, dst.size());
  EXPECT_TRUE(gb.b.remote_write) << "a GET's destination is written";
  EXPECT_NE(gb.key, pb.key);

  const Decoded dp = decode(api_.sent[0]);
  const Decoded dg = decode(api_.sent[1]);
  ASSERT_EQ(dp.msg.chunk.count, 1u);
  ASSERT_EQ(dg.msg.chunk.count, 1u);
  EXPECT_EQ(dp.msg.chunk.fragments[0].rkey, pb.key);
  EXPECT_EQ(dg.msg.chunk.fragments[0].rkey, gb.key);
  EXPECT_EQ(cnt().window_requests.load(), 2u);
  EXPECT_EQ(cnt().unscoped_requests.load(), 0u);
}

// The answer is kept until the window's invalidation completed: only then does the request come back, with
// that answer; the same answer again, or a second notice, completes nothing.
TEST_F(ObjectRequesterWindowTest, RequestComesBackOnlyAfterItsWindowIsInvalidated) {
  start_windows(4);
  std::vector<std::uint8_t> src(5000);
  Req put{1};
  const auto s = send_mr(put, ObjectOp::kPut, src.data(), src.size());
  ASSERT_EQ(s.status, ObjectSendStatus::kSent);
  const std::uint32_t slot = api_.window_ops[0].slot;

  EXPECT_EQ(answer(0, completion(s.cookie, ObjectOp::kPut, ObjectStatus::kOk, 5000)).user, nullptr);
  ASSERT_EQ(api_.window_ops.size(), 2u);
  EXPECT_FALSE(api_.window_ops[1].bind);
  EXPECT_EQ(api_.window_ops[1].slot, slot);
  EXPECT_EQ(req_->inflight_st(0), 1u) << "still the caller's buffer's request until the window is dead";
  EXPECT_EQ(cnt().answered.load(), 1u);
  const auto stale = cnt().stale_answers.load();
  EXPECT_EQ(answer(0, completion(s.cookie, ObjectOp::kPut, ObjectStatus::kOk, 5000)).user, nullptr);
  EXPECT_EQ(cnt().stale_answers.load(), stale + 1) << "a repeated answer is stale";
  EXPECT_EQ(api_.window_ops.size(), 2u);

  const ObjectAnswer<Req> a = invalidated(slot);
  EXPECT_EQ(a.user, &put);
  EXPECT_FALSE(a.malformed);
  EXPECT_EQ(a.status, ObjectStatus::kOk);
  EXPECT_EQ(a.size, 5000u);
  EXPECT_EQ(req_->inflight_st(0), 0u);
  EXPECT_EQ(req_->chunked_st(0), 0u);
  EXPECT_EQ(invalidated(slot).user, nullptr) << "a second notice";
  EXPECT_EQ(invalidated(31).user, nullptr) << "a window the link does not have";

  // A malformed answer is kept and reported the same way (a PUT answered with the wrong byte count).
  Req bad{2};
  const auto s2 = send_mr(bad, ObjectOp::kPut, src.data(), src.size());
  ASSERT_EQ(s2.status, ObjectSendStatus::kSent);
  EXPECT_EQ(answer(0, completion(s2.cookie, ObjectOp::kPut, ObjectStatus::kOk, 4999)).user, nullptr);
  const ObjectAnswer<Req> b = invalidated(api_.window_ops.back().slot);
  EXPECT_EQ(b.user, &bad);
  EXPECT_TRUE(b.malformed);
  EXPECT_NE(api_.window_ops[2].key, api_.window_ops[0].key) << "a window bound again gets a new key";
}

// Windows bound or being invalidated are chunk room in use: with fewer windows than the chunk budget, the
// windows limit; an invalidation gives room back.
TEST_F(ObjectRequesterWindowTest, WindowsInUseLimitChunkRoom) {
  start_windows(2);
  std::vector<std::uint8_t> buf(5000);
  Req r[4];
  std::vector<std::uint64_t> cookies;
  for (int i = 0; i < 2; ++i) {
    const auto s = send_mr(r[i], ObjectOp::kPut, buf.data(), buf.size());
    ASSERT_EQ(s.status, ObjectSendStatus::kSent);
    cookies.push_back(s.cookie);
  }
  EXPECT_FALSE(req_->room_st(0, true));
  EXPECT_TRUE(req_->room_st(0, false));
  EXPECT_EQ(send_mr(r[2], ObjectOp::kPut, buf.data(), buf.size()).status, ObjectSendStatus::kNoRoom);
  EXPECT_EQ(answer(0, completion(cookies[0], ObjectOp::kPut, ObjectStatus::kOk, 5000)).user, nullptr);
  EXPECT_FALSE(req_->room_st(0, true)) << "answered, but its window is not dead yet";
  EXPECT_EQ(invalidated(api_.window_ops.back().slot).user, &r[0]);
  EXPECT_TRUE(req_->room_st(0, true));
  EXPECT_EQ(send_mr(r[2], ObjectOp::kPut, buf.data(), buf.size()).status, ObjectSendStatus::kSent);
}

// A send the core refuses after its window was bound: the window is invalidated, serves nobody, and is free
// again once that completed. A bind the core refuses, or a request without a registration to bind to, is
// refused with nothing sent.
TEST_F(ObjectRequesterWindowTest, RefusalsLeaveNoWindowBound) {
  start_windows(1);
  std::vector<std::uint8_t> buf(5000);
  Req r{1};
  api_.fail_sends = true;
  EXPECT_EQ(send_mr(r, ObjectOp::kPut, buf.data(), buf.size()).status, ObjectSendStatus::kRefused);
  ASSERT_EQ(api_.window_ops.size(), 2u);
  EXPECT_TRUE(api_.window_ops[0].bind);
  EXPECT_FALSE(api_.window_ops[1].bind);
  EXPECT_FALSE(req_->room_st(0, true)) << "the window is not free before its invalidation completed";
  EXPECT_EQ(invalidated(0).user, nullptr);
  EXPECT_TRUE(req_->room_st(0, true));
  api_.fail_sends = false;

  api_.fail_binds = true;
  EXPECT_EQ(send_mr(r, ObjectOp::kPut, buf.data(), buf.size()).status, ObjectSendStatus::kRefused);
  api_.fail_binds = false;
  EXPECT_EQ(send_mr(r, ObjectOp::kGet, buf.data(), buf.size(), nullptr).status, ObjectSendStatus::kRefused);
  EXPECT_TRUE(api_.sent.empty());
  EXPECT_EQ(cnt().send_refused.load(), 3u);
  EXPECT_EQ(req_->inflight_st(0), 0u);
  EXPECT_TRUE(req_->room_st(0, true));
}

// A close hands back a kept answer as the answer (the QP is in ERR: the window is dead), and fails the rest.
TEST_F(ObjectRequesterWindowTest, CloseHandsBackKeptAnswers) {
  start_windows(4);
  std::vector<std::uint8_t> buf(5000);
  Req answered_req{1}, open_req{2};
  const auto s1 = send_mr(answered_req, ObjectOp::kGet, buf.data(), buf.size());
  const auto s2 = send_mr(open_req, ObjectOp::kGet, buf.data(), buf.size());
  ASSERT_EQ(s1.status, ObjectSendStatus::kSent);
  ASSERT_EQ(s2.status, ObjectSendStatus::kSent);
  EXPECT_EQ(answer(0, completion(s1.cookie, ObjectOp::kGet, ObjectStatus::kNotFound, 0)).user, nullptr);
  std::vector<int> failed, answered;
  req_->fail_all_st(
      0, [&](Req* r, bool) { failed.push_back(r->id); },
      [&](const ObjectAnswer<Req>& a) {
        answered.push_back(a.user->id);
        EXPECT_EQ(a.status, ObjectStatus::kNotFound);
      });
  EXPECT_EQ(failed, std::vector<int>{2});
  EXPECT_EQ(answered, std::vector<int>{1});
  EXPECT_EQ(req_->inflight_st(0), 0u);
  // Reattached without windows (the new QP's device has none): chunks carry the registration's key again.
  req_->attach_st(0, *conns_[0], 0);
  const auto before = api_.window_ops.size();
  ASSERT_EQ(send_mr(open_req, ObjectOp::kGet, buf.data(), buf.size()).status, ObjectSendStatus::kSent);
  EXPECT_EQ(api_.window_ops.size(), before);
  EXPECT_EQ(decode(api_.sent.back()).msg.chunk.fragments[0].rkey, kRkey);
  EXPECT_EQ(cnt().unscoped_requests.load(), 1u);
}

}  // namespace
}  // namespace rdmagate::dataplane

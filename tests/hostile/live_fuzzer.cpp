// rdmagate-live-fuzzer: a hostile peer of a running gateway, written as an independent implementer would,
// from docs/protocol.md alone: raw rdma_cm and verbs, its own byte-wise codec, none of protocol/ or client/.
// Sharing the reference codec would make the fuzzer blind to the very misreadings of the document it exists
// to find.
//
//   rdmagate-live-fuzzer --addr A --port P [--seconds N] [--seed S] [--mode fuzz|good] [--key-prefix K]
//                        [--log-sessions] [--principal NAME --secret HEX]
//
// With --principal and --secret (the principal's secret in hex) it offers protocol 1.2 and, when the accept
// says `auth`, authenticates as §11 says (HMAC-SHA-256 with OpenSSL's libcrypto, as the document asks;
// nothing of protocol/). Fuzz sessions then send a valid AUTH most of the time, and otherwise a mutated one
// (wrong proof, unknown or malformed name, another mechanism, reserved bytes, a length that disagrees, a cut
// message, a replay of an earlier session's AUTH under this session's incarnations, a request or a second
// AUTH where none may come, or silence until the gateway's auth timeout). A gateway that answers `ok` to any
// of those, refuses a valid one or proves itself with a wrong Pg ends the run with exit 5. Without them it
// speaks 1.0 and never authenticates.
//
// fuzz: sessions one after the other until the time is up. Each draws its own seed from the run's seed and
// its
//   number (printed with --log-sessions, and for the last sessions before an error), then a handshake (mostly
//   valid; otherwise mutated private data, parameters, cm resources), and when connected a random sequence of
//   mostly valid requests (PUT/GET inline and chunked, DELETE, ECHO, SINK) with mutations of headers,
//   credits, chunk descriptors, opcodes, keys and sizes, unsolicited answers, credit bursts, SENDs with
//   immediate, RDMA READ/WRITE at made-up keys, stalls, and a teardown at a random point (disconnect, or the
//   QP destroyed without one). Exit 0 at the end of the time; 1 when the gateway stopped answering connection
//   requests (nothing listens any more): the harness then checks the gateway itself.
// good: one well-behaved connection running verified PUT / GET / DELETE (inline and chunked) until the time
//   is up or it is killed; every GET is checked byte for byte against what this process PUT. It deletes its
//   16 keys (--key-prefix, default good-<pid>-) first, in case a killed predecessor left them, and again at a
//   normal end. A mismatch prints "MISMATCH" and exits 3; a connection that fails exits 4. Prints
//   "good: connected", "good: loading" once those keys are gone, then "good: ops N" every 100 ops.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// ---- randomness
// ---------------------------------------------------------------------------------------------

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() { return s_ = splitmix64(s_); }
  // Uniform in [0, n); 0 when n is 0. The bounds come from what the gateway granted (depth, fragments,
  // max_bulk), so an empty range is a legal outcome of a hostile offer, not a fuzzer bug.
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
  // Uniform in [lo, hi]; lo when the range is empty (hi < lo). The full 64-bit range wraps to 0 and stays
  // uniform through next().
  std::uint64_t range(std::uint64_t lo, std::uint64_t hi) {
    if (hi < lo) return lo;
    const std::uint64_t span = hi - lo + 1;
    return lo + (span == 0 ? next() : below(span));
  }
  bool chance(unsigned percent) { return below(100) < percent; }

 private:
  std::uint64_t s_;
};

// ---- wire (docs/protocol.md §3 and §4; little-endian, byte-wise) ------------------------------------------

void put16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}
void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint16_t get16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
std::uint32_t get32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
std::uint64_t get64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

constexpr std::uint32_t kHsMagic = 0x53484752;  // 'R' 'G' 'H' 'S'
constexpr std::size_t kHsBody = 40;
constexpr std::size_t kHsBodyMinor1 = 48;            // §3.8: a request of minor >= 1 (a minor-2 request too)
constexpr std::size_t kAcceptBody[] = {40, 64, 96};  // §3.1, §3.8, §3.10: an accept of minor 0, 1, 2
constexpr std::uint16_t kMsgMagic = 0x4752;          // 'R' 'G'
constexpr std::size_t kHeader = 40;

enum MsgType : std::uint8_t {
  kNoop = 1,
  kInlineReq,
  kInlineResp,
  kReadChunk,
  kWriteChunk,
  kCompletion,
  kAuth,       // minor >= 2 (§4.2, §11)
  kAuthAnswer  // minor >= 2
};
constexpr std::size_t kAuthAnswerLen = 76;
constexpr std::uint32_t kAuthOk = 0;
enum Opcode : std::uint16_t { kEcho = 1, kSink = 2, kPut = 0x10, kGet = 0x11, kDelete = 0x12 };
constexpr std::uint32_t kStatusOk = 0;
constexpr std::uint32_t kStatusTooSmall = 2;
constexpr std::uint32_t kStatusNoResources = 4;  // §8.2: the request could not start now; retrying may work
constexpr std::uint32_t kStatusNotFound = 0x100;

struct HsParams {
  std::uint16_t depth = 32;
  std::uint32_t max_msg = 4096;
  std::uint16_t frags = 16;
  std::uint32_t max_bulk = 8u << 20;
  std::uint8_t minor = 0;  // the highest minor offered: 0, or 2 (then every minor up to it)
};

std::vector<std::uint8_t> handshake_request(const HsParams& p, std::uint64_t src, std::uint64_t dst) {
  // From minor 1 the request carries the timers (§3.8): no keepalive preference, no dead-peer timeout.
  std::vector<std::uint8_t> b(p.minor >= 1 ? kHsBodyMinor1 : kHsBody, 0);
  put32(&b[0], kHsMagic);
  b[4] = 1;                                                       // request
  b[5] = 1;                                                       // major
  b[6] = p.minor;                                                 // highest minor
  b[7] = 0;                                                       // flags: no checksum
  put16(&b[8], static_cast<std::uint16_t>((2u << p.minor) - 1));  // every minor up to it
  put16(&b[10], p.depth);
  put32(&b[12], p.max_msg);
  put16(&b[16], p.frags);
  put32(&b[20], p.max_bulk);
  put64(&b[24], src);
  put64(&b[32], dst);
  return b;
}

struct Accepted {
  bool ok = false;
  std::string why;
  bool checksum = false;
  bool auth = false;  // minor 2: the first message must be AUTH (§11)
  HsParams p;         // p.minor: the chosen minor
  std::uint64_t gateway_inc = 0;
  std::array<std::uint8_t, 32> nonce{};  // Ng (§3.10)
};

// §3.3 and §3.5 as the initiator applies them to an accept.
Accepted check_accept(const std::uint8_t* d, std::size_t n, const HsParams& offered, std::uint64_t our_inc) {
  Accepted a;
  if (d == nullptr || n < kHsBody) return a.why = "accept too short", a;
  if (get32(d) != kHsMagic || d[4] != 2) return a.why = "accept: bad magic or kind", a;
  if (d[5] != 1 || d[6] > offered.minor || (get16(d + 8) & (1u << d[6])) == 0)
    return a.why = "accept: version", a;
  a.p.minor = d[6];
  if (n < kAcceptBody[a.p.minor]) return a.why = "accept too short for its minor", a;
  if ((d[7] & ~(a.p.minor >= 2 ? 3u : 1u)) != 0) return a.why = "accept: undefined flags", a;
  a.checksum = (d[7] & 1) != 0;
  a.auth = (d[7] & 2) != 0;
  if (a.p.minor >= 2) {
    std::copy(d + 64, d + 96, a.nonce.begin());
    const bool zero = std::all_of(a.nonce.begin(), a.nonce.end(), [](std::uint8_t x) { return x == 0; });
    if (zero == a.auth) return a.why = "accept: the nonce disagrees with the auth flag", a;
  }
  a.p.depth = get16(d + 10);
  a.p.max_msg = get32(d + 12);
  a.p.frags = get16(d + 16);
  a.p.max_bulk = get32(d + 20);
  a.gateway_inc = get64(d + 24);
  if (get64(d + 32) != our_inc || a.gateway_inc == 0) return a.why = "accept: incarnations", a;
  if (a.p.depth < 4 || a.p.max_msg < 64 || a.p.frags < 1 || a.p.max_bulk < 1)
    return a.why = "accept: parameter not sane or below 4", a;
  if (a.p.depth > offered.depth || a.p.max_msg > offered.max_msg || a.p.frags > offered.frags ||
      a.p.max_bulk > offered.max_bulk)
    return a.why = "accept: parameter raised", a;
  a.ok = true;
  return a;
}

// CRC32C (Castagnoli, reflected 0x82F63B78), bitwise: only the fuzzer's checksum sessions use it.
std::uint32_t crc32c(const std::uint8_t* p, std::size_t n) {
  std::uint32_t c = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}

struct Fragment {
  std::uint64_t addr;
  std::uint32_t len;
  std::uint32_t rkey;
};

// ---- one connection
// ----------------------------------------------------------------------------------------

struct Options {
  std::string addr;
  int port = 0;
  double seconds = 60;
  std::uint64_t seed = 0;
  bool seed_given = false;
  std::string mode = "fuzz";
  std::string key_prefix;  // good mode: its keys (default good-<pid>-)
  bool log_sessions = false;
  std::string principal;  // with secret_hex: offer 1.2 and authenticate (§11)
  std::string secret_hex;
};

enum class ConnectResult {
  kEstablished,
  kRejected,
  kLocalRefused,
  kVanished,
  kUnreachable,
  kTimeout,
  kError
};

const char* to_string(ConnectResult r) {
  switch (r) {
    case ConnectResult::kEstablished:
      return "established";
    case ConnectResult::kRejected:
      return "rejected";
    case ConnectResult::kLocalRefused:
      return "refused_locally";
    case ConnectResult::kVanished:
      return "vanished_mid_handshake";
    case ConnectResult::kUnreachable:
      return "unreachable";
    case ConnectResult::kTimeout:
      return "timeout";
    case ConnectResult::kError:
      return "error";
  }
  return "?";
}

// What a session did to the connection's state, as seen from here.
enum class LinkState { kUp, kClosedByGateway, kQpError, kTimedOut };

class Conn {
 public:
  static constexpr std::size_t kBulkBytes = 5u << 20;  // above the gateway's default max value (4 MiB)

  Conn() = default;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() { teardown(true); }

  // rq: receives posted before rdma_connect (the offered depth, §5.1); sq: send queue depth.
  ConnectResult connect(const Options& o, const std::vector<std::uint8_t>& private_data,
                        std::uint8_t resp_res, std::uint8_t init_depth, std::uint8_t rnr_retry,
                        std::uint32_t rq, std::uint32_t sq, std::uint32_t buf_size, std::string* detail,
                        std::chrono::milliseconds vanish_after = std::chrono::milliseconds(-1)) {
    buf_size_ = std::max<std::uint32_t>(buf_size, 64);
    rq_ = rq;
    sq_ = sq;
    ec_ = rdma_create_event_channel();
    if (ec_ == nullptr || rdma_create_id(ec_, &id_, nullptr, RDMA_PS_TCP) != 0)
      return fail(detail, "create id");
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(o.addr.c_str(), std::to_string(o.port).c_str(), &hints, &res) != 0)
      return fail(detail, "getaddrinfo");
    const int rc = rdma_resolve_addr(id_, nullptr, res->ai_addr, 2000);
    freeaddrinfo(res);
    if (rc != 0 || !wait_cm(RDMA_CM_EVENT_ADDR_RESOLVED, 5s)) return fail(detail, "resolve addr");
    if (rdma_resolve_route(id_, 2000) != 0 || !wait_cm(RDMA_CM_EVENT_ROUTE_RESOLVED, 5s))
      return fail(detail, "resolve route");
    pd_ = ibv_alloc_pd(id_->verbs);
    ch_ = ibv_create_comp_channel(id_->verbs);
    if (pd_ == nullptr || ch_ == nullptr) return fail(detail, "pd/channel");
    cq_ = ibv_create_cq(id_->verbs, static_cast<int>(rq_ + sq_ + 8), nullptr, ch_, 0);
    if (cq_ == nullptr) return fail(detail, "create cq");
    ibv_qp_init_attr qa{};
    qa.send_cq = cq_;
    qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = sq_;
    qa.cap.max_recv_wr = rq_;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    if (rdma_create_qp(id_, pd_, &qa) != 0) return fail(detail, "create qp");
    qp_created_ = true;
    mem_.assign(static_cast<std::size_t>(rq_ + sq_) * buf_size_ + kBulkBytes, 0);
    mr_ = ibv_reg_mr(pd_, mem_.data(), mem_.size(),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
    if (mr_ == nullptr) return fail(detail, "reg mr");
    for (std::uint32_t i = 0; i < rq_; ++i) {
      if (!post_recv(i)) return fail(detail, "post recv");
    }
    rdma_conn_param cp{};
    cp.private_data = private_data.data();
    cp.private_data_len = static_cast<std::uint8_t>(private_data.size());
    cp.responder_resources = resp_res;
    cp.initiator_depth = init_depth;
    cp.retry_count = 7;
    cp.rnr_retry_count = rnr_retry;
    cp.flow_control = 1;
    // librdmacm itself refuses cm resources above the device's limits (EINVAL): nothing reached the gateway.
    if (rdma_connect(id_, &cp) != 0) {
      *detail = std::string("rdma_connect: ") + std::strerror(errno);
      return ConnectResult::kLocalRefused;
    }
    // A peer that goes away mid-handshake: the request is out, the answer never read; the caller destroys the
    // QP and the id without a disconnect.
    if (vanish_after.count() >= 0) {
      usleep(static_cast<useconds_t>(vanish_after.count()) * 1000);
      return ConnectResult::kVanished;
    }
    const auto deadline = Clock::now() + 10s;
    for (;;) {
      rdma_cm_event* ev = nullptr;
      if (!next_cm(&ev, deadline)) return ConnectResult::kTimeout;
      const rdma_cm_event_type t = ev->event;
      if (t == RDMA_CM_EVENT_ESTABLISHED) {
        accept_.assign(static_cast<const std::uint8_t*>(ev->param.conn.private_data),
                       static_cast<const std::uint8_t*>(ev->param.conn.private_data) +
                           (ev->param.conn.private_data ? ev->param.conn.private_data_len : 0));
        rdma_ack_cm_event(ev);
        connected_ = true;
        return ConnectResult::kEstablished;
      }
      if (t == RDMA_CM_EVENT_REJECTED) {
        const auto* d = static_cast<const std::uint8_t*>(ev->param.conn.private_data);
        reject_reason_ =
            (d != nullptr && ev->param.conn.private_data_len >= 41 && get32(d) == kHsMagic) ? d[40] : 0;
        rdma_ack_cm_event(ev);
        return ConnectResult::kRejected;
      }
      rdma_ack_cm_event(ev);
      if (t == RDMA_CM_EVENT_UNREACHABLE || t == RDMA_CM_EVENT_CONNECT_ERROR)
        return ConnectResult::kUnreachable;
    }
  }

  const std::vector<std::uint8_t>& accept_data() const { return accept_; }
  int reject_reason() const { return reject_reason_; }
  ibv_qp* qp() const { return id_ ? id_->qp : nullptr; }
  std::uint32_t rkey() const { return mr_->rkey; }
  std::uint8_t* bulk() { return mem_.data() + static_cast<std::size_t>(rq_ + sq_) * buf_size_; }
  std::uint64_t bulk_addr() { return reinterpret_cast<std::uintptr_t>(bulk()); }
  std::uint32_t sq() const { return sq_; }
  std::uint32_t buf_size() const { return buf_size_; }
  bool connected() const { return connected_; }
  LinkState state() const { return state_; }

  // Posts one SEND of bytes [0, n) of `msg` (n may exceed the slot: then it is cut to the slot, used by the
  // oversize mutation only through `wire_len`). wire_len: the bytes actually sent (may differ from the
  // header's length). Waits for a send slot first.
  bool send(const std::vector<std::uint8_t>& msg, std::size_t wire_len, bool with_imm = false) {
    if (state_ != LinkState::kUp) return false;
    while (outstanding_ >= sq_) {
      if (!progress(2000ms)) return false;
    }
    const std::uint32_t slot = static_cast<std::uint32_t>(send_seq_ % sq_);
    std::uint8_t* buf = mem_.data() + static_cast<std::size_t>(rq_ + slot) * buf_size_;
    wire_len = std::min<std::size_t>(wire_len, buf_size_);
    std::memcpy(buf, msg.data(), std::min(wire_len, msg.size()));
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf), static_cast<std::uint32_t>(wire_len), mr_->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = kSendTag | send_seq_;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
    wr.imm_data = 0x12345678;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(qp(), &wr, &bad) != 0) return set_state(LinkState::kQpError);
    ++send_seq_;
    ++outstanding_;
    return true;
  }

  // An RDMA READ or WRITE at the gateway's memory with a made-up key: the gateway never hands one out.
  bool rdma_at(bool write, std::uint64_t raddr, std::uint32_t rkey, std::uint32_t len) {
    if (state_ != LinkState::kUp) return false;
    while (outstanding_ >= sq_) {
      if (!progress(2000ms)) return false;
    }
    ibv_sge sge{bulk_addr(), std::min<std::uint32_t>(len, kBulkBytes), mr_->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = kSendTag | send_seq_;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    if (ibv_post_send(qp(), &wr, &bad) != 0) return set_state(LinkState::kQpError);
    ++send_seq_;
    ++outstanding_;
    return true;
  }

  // Received messages not yet taken by the caller: bytes, and the receive slot (re-posted by repost()).
  struct Rx {
    std::vector<std::uint8_t> bytes;
    std::uint32_t slot;
  };
  std::deque<Rx>& inbox() { return inbox_; }
  bool repost(std::uint32_t slot) { return post_recv(slot) || set_state(LinkState::kQpError); }

  // Polls completions (and the cm channel) for at most `timeout`; true if anything happened and the link is
  // up.
  bool progress(std::chrono::milliseconds timeout) {
    if (state_ != LinkState::kUp) return false;
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      if (drain_cq() > 0) return state_ == LinkState::kUp;
      if (state_ != LinkState::kUp) return false;
      check_cm();
      if (state_ != LinkState::kUp) return false;
      ibv_req_notify_cq(cq_, 0);
      if (drain_cq() > 0) return state_ == LinkState::kUp;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p[2] = {{ch_->fd, POLLIN, 0}, {ec_->fd, POLLIN, 0}};
      if (poll(p, 2, static_cast<int>(std::min<long>(left, 100))) > 0 && (p[0].revents & POLLIN)) {
        ibv_cq* cq = nullptr;
        void* ctx = nullptr;
        if (ibv_get_cq_event(ch_, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
      }
    }
  }

  // Ends the connection: a disconnect and its event first when `polite`, else the QP is destroyed under the
  // gateway's feet (it learns from its own timeouts or the NIC's retries).
  void teardown(bool polite) {
    if (id_ != nullptr && connected_ && polite) {
      rdma_disconnect(id_);
      const auto deadline = Clock::now() + 2s;
      while (Clock::now() < deadline) {
        rdma_cm_event* ev = nullptr;
        if (!next_cm(&ev, deadline)) break;
        const bool done = ev->event == RDMA_CM_EVENT_DISCONNECTED;
        rdma_ack_cm_event(ev);
        if (done) break;
      }
    }
    connected_ = false;
    if (qp_created_) rdma_destroy_qp(id_);
    qp_created_ = false;
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
    mr_ = nullptr;
    if (cq_ != nullptr) {
      drain_unacked_cq_events();
      ibv_destroy_cq(cq_);
    }
    cq_ = nullptr;
    if (ch_ != nullptr) ibv_destroy_comp_channel(ch_);
    ch_ = nullptr;
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
    pd_ = nullptr;
    if (id_ != nullptr) rdma_destroy_id(id_);
    id_ = nullptr;
    if (ec_ != nullptr) rdma_destroy_event_channel(ec_);
    ec_ = nullptr;
  }

 private:
  static constexpr std::uint64_t kSendTag = 1ull << 63;

  ConnectResult fail(std::string* detail, const char* what) {
    *detail = std::string(what) + ": " + std::strerror(errno);
    return ConnectResult::kError;
  }
  bool set_state(LinkState s) {
    if (state_ == LinkState::kUp) state_ = s;
    return false;
  }

  bool post_recv(std::uint32_t slot) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(mem_.data() + static_cast<std::size_t>(slot) * buf_size_),
                buf_size_, mr_->lkey};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(qp(), &wr, &bad) == 0;
  }

  int drain_cq() {
    ibv_wc wc[16];
    int total = 0;
    for (int n; (n = ibv_poll_cq(cq_, 16, wc)) > 0;) {
      total += n;
      for (int i = 0; i < n; ++i) {
        if (wc[i].wr_id & kSendTag) --outstanding_;
        if (wc[i].status != IBV_WC_SUCCESS) {
          set_state(LinkState::kQpError);
          continue;
        }
        if ((wc[i].wr_id & kSendTag) == 0 && (wc[i].opcode & IBV_WC_RECV)) {
          const auto slot = static_cast<std::uint32_t>(wc[i].wr_id);
          const std::uint8_t* b = mem_.data() + static_cast<std::size_t>(slot) * buf_size_;
          inbox_.push_back(Rx{std::vector<std::uint8_t>(b, b + wc[i].byte_len), slot});
        }
      }
    }
    return total;
  }

  void drain_unacked_cq_events() {
    pollfd p{ch_->fd, POLLIN, 0};
    while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
      ibv_cq* cq = nullptr;
      void* ctx = nullptr;
      if (ibv_get_cq_event(ch_, &cq, &ctx) != 0) break;
      ibv_ack_cq_events(cq, 1);
    }
  }

  void check_cm() {
    pollfd p{ec_->fd, POLLIN, 0};
    while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(ec_, &ev) != 0) return;
      if (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL ||
          ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
        connected_ = ev->event != RDMA_CM_EVENT_DISCONNECTED && connected_;
        set_state(LinkState::kClosedByGateway);
      }
      rdma_ack_cm_event(ev);
    }
  }

  bool next_cm(rdma_cm_event** ev, Clock::time_point deadline) {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{ec_->fd, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) > 0 && (p.revents & POLLIN))
        return rdma_get_cm_event(ec_, ev) == 0;
    }
  }

  bool wait_cm(rdma_cm_event_type want, std::chrono::milliseconds timeout) {
    rdma_cm_event* ev = nullptr;
    if (!next_cm(&ev, Clock::now() + timeout)) return false;
    const bool ok = ev->event == want;
    rdma_ack_cm_event(ev);
    return ok;
  }

  rdma_event_channel* ec_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* ch_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  bool qp_created_ = false;
  bool connected_ = false;
  LinkState state_ = LinkState::kUp;
  std::uint32_t rq_ = 0, sq_ = 0, buf_size_ = 0;
  std::vector<std::uint8_t> mem_;
  std::uint64_t send_seq_ = 0;
  std::uint32_t outstanding_ = 0;
  std::deque<Rx> inbox_;
  std::vector<std::uint8_t> accept_;
  int reject_reason_ = 0;
};

// ---- a session's protocol state: credits (§5) and the codec
// ------------------------------------------------

class Peer {
 public:
  Peer(Conn* c, const Accepted& a, std::uint64_t our_inc) : c_(c), a_(a), our_inc_(our_inc) {
    credits_ = a.p.depth;
    reserve_ = std::max<std::uint32_t>(2, a.p.depth / 8u);
  }

  const Accepted& session() const { return a_; }
  std::uint32_t credits() const { return credits_; }
  std::uint64_t our_inc() const { return our_inc_; }
  std::uint8_t version() const { return static_cast<std::uint8_t>(0x10 | a_.p.minor); }

  // A correctly framed message (§4.1): credits patched in at send time, every owed credit returned.
  std::vector<std::uint8_t> build(MsgType type, std::uint16_t opcode, std::uint64_t cookie,
                                  const std::vector<Fragment>& frags,
                                  const std::vector<std::uint8_t>& payload) {
    const bool chunk = type == kReadChunk || type == kWriteChunk;
    std::vector<std::uint8_t> m(kHeader + (chunk ? 4 + 16 * frags.size() : 0), 0);
    put16(&m[0], kMsgMagic);
    m[2] = version();
    m[3] = type;
    put16(&m[6], opcode);
    put64(&m[16], our_inc_);
    put64(&m[24], a_.gateway_inc);
    put64(&m[32], cookie);
    if (chunk) {
      put16(&m[40], static_cast<std::uint16_t>(frags.size()));
      for (std::size_t i = 0; i < frags.size(); ++i) {
        put64(&m[44 + 16 * i], frags[i].addr);
        put32(&m[52 + 16 * i], frags[i].len);
        put32(&m[56 + 16 * i], frags[i].rkey);
      }
    }
    m.insert(m.end(), payload.begin(), payload.end());
    put32(&m[8], static_cast<std::uint32_t>(m.size()));
    return m;
  }

  // Patches the credits (every owed credit, or `forced` when >= 0) and the checksum, and sends. Accounts a
  // credit spent. `keep_checksum`: a mutation already set the field.
  bool send(std::vector<std::uint8_t>& m, std::size_t wire_len, long forced_credits = -1,
            bool keep_checksum = false, bool with_imm = false) {
    const std::uint16_t give =
        forced_credits >= 0 ? static_cast<std::uint16_t>(forced_credits) : static_cast<std::uint16_t>(owed_);
    if (m.size() >= 6) put16(&m[4], give);
    if (!keep_checksum && m.size() >= kHeader) {
      put32(&m[12], 0);
      if (a_.checksum) put32(&m[12], crc32c(m.data(), std::min<std::size_t>(m.size(), get32(&m[8]))));
    }
    if (!c_->send(m, wire_len, with_imm)) return false;
    owed_ = forced_credits >= 0 ? owed_ : 0;
    if (credits_ > 0) --credits_;
    return true;
  }

  // Takes received messages: credits come back, buffers are re-posted (unless `hold`), answers are kept by
  // cookie. False when a message breaks §4.7 in a way a correct gateway never would (counted by the caller).
  bool absorb(bool hold = false) {
    auto& in = c_->inbox();
    while (!in.empty()) {
      Conn::Rx rx = std::move(in.front());
      in.pop_front();
      const auto& b = rx.bytes;
      // A gateway never sends AUTH; AUTH_ANSWER exists from minor 2.
      const std::uint8_t last_type = a_.p.minor >= 2 ? kAuthAnswer : kCompletion;
      if (b.size() < kHeader || get16(&b[0]) != kMsgMagic || b[2] != version() || get32(&b[8]) != b.size() ||
          get64(&b[16]) != a_.gateway_inc || get64(&b[24]) != our_inc_ || b[3] < kNoop || b[3] > last_type ||
          b[3] == kAuth) {
        ++bad_from_gateway_;
      } else {
        credits_ += get16(&b[4]);
        if (b[3] != kNoop) answers_[get64(&b[32])] = b;
      }
      // A stalled peer lies: it reports the credit as if the buffer were posted again, so the gateway's next
      // sends find no receive (RNR) instead of waiting for credits.
      if (hold) {
        held_.push_back(rx.slot);
      } else if (!c_->repost(rx.slot)) {
        return false;
      }
      ++owed_;
    }
    return true;
  }

  // Re-posts what a stall held back.
  bool release_held() {
    for (std::uint32_t s : held_) {
      if (!c_->repost(s)) return false;
    }
    held_.clear();
    return true;
  }

  // Waits until a request may be sent (credits > R, §5.2 rule 3), returning owed credits with a NOOP when
  // the gateway may be starved.
  bool wait_request_credit(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (credits_ <= reserve_) {
      if (owed_ > 0 && credits_ >= 2) {
        std::vector<std::uint8_t> noop = build(kNoop, 0, 0, {}, {});
        if (!send(noop, noop.size())) return false;
      }
      if (Clock::now() >= deadline) return false;
      c_->progress(100ms);
      if (!absorb()) return false;
      if (c_->state() != LinkState::kUp) return false;
    }
    return true;
  }

  // The answer to `cookie`, waiting at most `timeout`; empty if none came.
  std::vector<std::uint8_t> wait_answer(std::uint64_t cookie, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      if (!absorb()) return {};
      if (auto it = answers_.find(cookie); it != answers_.end()) {
        std::vector<std::uint8_t> a = std::move(it->second);
        answers_.erase(it);
        return a;
      }
      // Owed credits go back before the gateway could run out (it needs 2 for an answer).
      if (owed_ >= std::max<std::uint32_t>(2, a_.p.depth / 2u) && credits_ >= 2) {
        std::vector<std::uint8_t> noop = build(kNoop, 0, 0, {}, {});
        if (!send(noop, noop.size())) return {};
      }
      if (Clock::now() >= deadline || c_->state() != LinkState::kUp) return {};
      c_->progress(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::min<Clock::duration>(deadline - Clock::now(), 200ms)));
    }
  }

  std::uint64_t bad_from_gateway() const { return bad_from_gateway_; }
  std::uint32_t reserve() const { return reserve_; }

 private:
  Conn* c_;
  Accepted a_;
  std::uint64_t our_inc_;
  std::uint32_t credits_ = 0;
  std::uint32_t owed_ = 0;
  std::uint32_t reserve_ = 2;
  std::map<std::uint64_t, std::vector<std::uint8_t>> answers_;
  std::vector<std::uint32_t> held_;
  std::uint64_t bad_from_gateway_ = 0;
};

// What a fuzz run did, by name.
struct Tally {
  std::map<std::string, std::uint64_t> n;
  void add(const std::string& k, std::uint64_t v = 1) { n[k] += v; }
};

// ---- authentication (§11)
// ---------------------------------------------------------------------------------------------

struct Credentials {
  std::string name;
  std::vector<std::uint8_t> secret;
  bool given() const { return !name.empty(); }
};

using Proof = std::array<std::uint8_t, 32>;

// §11.3: T || prover, HMAC-SHA-256 keyed with the secret (prover 1: the client, 2: the gateway).
Proof auth_proof(const std::vector<std::uint8_t>& secret, std::uint64_t ii, std::uint64_t ia,
                 const std::array<std::uint8_t, 32>& ng, const std::array<std::uint8_t, 32>& nc,
                 const std::string& name, std::uint8_t prover) {
  static const char kLabel[] = "rdmagate-auth-v1";
  std::vector<std::uint8_t> t(kLabel, kLabel + 16);
  t.resize(16 + 16);
  put64(&t[16], ii);
  put64(&t[24], ia);
  t.insert(t.end(), ng.begin(), ng.end());
  t.insert(t.end(), nc.begin(), nc.end());
  t.push_back(static_cast<std::uint8_t>(name.size()));
  t.insert(t.end(), name.begin(), name.end());
  t.push_back(prover);
  Proof out{};
  unsigned len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), t.data(), t.size(), out.data(), &len);
  return out;
}

// The AUTH body after the header (§4.2): mechanism, name length, reserved, Nc, Pc, name.
std::vector<std::uint8_t> auth_body(std::uint8_t mechanism, std::uint8_t name_len, std::uint16_t reserved,
                                    const std::array<std::uint8_t, 32>& nc, const Proof& pc,
                                    const std::string& name) {
  std::vector<std::uint8_t> b(4, 0);
  b[0] = mechanism;
  b[1] = name_len;
  put16(&b[2], reserved);
  b.insert(b.end(), nc.begin(), nc.end());
  b.insert(b.end(), pc.begin(), pc.end());
  b.insert(b.end(), name.begin(), name.end());
  return b;
}

std::vector<std::uint8_t> parse_hex(const std::string& h) {
  std::vector<std::uint8_t> out;
  if (h.size() % 2 != 0) return {};
  for (std::size_t i = 0; i < h.size(); i += 2) {
    char* end = nullptr;
    const std::string byte = h.substr(i, 2);
    const unsigned long v = std::strtoul(byte.c_str(), &end, 16);
    if (end != byte.c_str() + 2) return {};
    out.push_back(static_cast<std::uint8_t>(v));
  }
  return out;
}

// §11.6's test vector 1, proofs only: this file's reading of §11.3 against the document's own values.
bool auth_vector_1_holds() {
  std::vector<std::uint8_t> k(32);
  std::array<std::uint8_t, 32> ng{}, nc{};
  for (std::uint8_t i = 0; i < 32; ++i) {
    k[i] = i;
    ng[i] = static_cast<std::uint8_t>(0x40 + i);
    nc[i] = static_cast<std::uint8_t>(0x80 + i);
  }
  const auto pc = auth_proof(k, 0x0123456789abcdefull, 0xfedcba9876543210ull, ng, nc, "app-writer", 1);
  const auto pg = auth_proof(k, 0x0123456789abcdefull, 0xfedcba9876543210ull, ng, nc, "app-writer", 2);
  const auto want_pc = parse_hex("2356450d9390cc4db5d5e2b796670b84bceaa11f16080dc3863f92474a842f9f");
  const auto want_pg = parse_hex("6a134af82a9f26859b541acf4a1c367c79660db5b28eaf495213e8ef9cd6dbbf");
  return std::equal(pc.begin(), pc.end(), want_pc.begin(), want_pc.end()) &&
         std::equal(pg.begin(), pg.end(), want_pg.begin(), want_pg.end());
}

std::vector<std::uint8_t> key_prefix(const std::string& key) {
  // Sized once: gcc 12 at -O2 reads push_back-then-insert as an out-of-bounds copy (-Warray-bounds).
  std::vector<std::uint8_t> k(key.size() + 1);
  k[0] = static_cast<std::uint8_t>(key.size());
  std::copy(key.begin(), key.end(), k.begin() + 1);
  return k;
}

// A value that names itself: every byte depends on the key, the version and its offset.
void fill_value(std::uint8_t* p, std::size_t n, const std::string& key, std::uint64_t version) {
  std::uint64_t s = splitmix64(std::hash<std::string>{}(key) ^ (version * 0x9e3779b97f4a7c15ull));
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) s = splitmix64(s + i);
    p[i] = static_cast<std::uint8_t>(s >> (8 * (i % 8)));
  }
}

std::uint64_t random_incarnation(Rng& r) {
  std::uint64_t v = 0;
  while (v == 0) v = r.next();
  return v;
}

// An AUTH_ANSWER (§4.2) to `cookie`: its status, or -1 (and *why) when the bytes are not one. *pg: its proof.
long auth_answer_status(const std::vector<std::uint8_t>& a, Proof* pg, std::string* why) {
  if (a.empty()) return *why = "no answer", -1;
  if (a.size() != kAuthAnswerLen || a[3] != kAuthAnswer) {
    return *why = "an answer of type " + std::to_string(a[3]) + " and " + std::to_string(a.size()) + " bytes",
           -1;
  }
  std::copy(a.begin() + 44, a.begin() + 76, pg->begin());
  return get32(&a[40]);
}

// A proof over this session's transcript (§11.3): both incarnations and Ng from the session, Nc and the name
// as sent; prover 1 the client's Pc, 2 the gateway's Pg.
Proof session_proof(const Peer& p, const Credentials& cred, const std::array<std::uint8_t, 32>& nc,
                    const std::string& name, std::uint8_t prover) {
  const Accepted& a = p.session();
  return auth_proof(cred.secret, p.our_inc(), a.gateway_inc, a.nonce, nc, name, prover);
}

// Whether the gateway's Pg is the one this session's transcript gives (compared in constant time, as §11.3).
bool gateway_proved(const Peer& p, const Credentials& cred, const std::array<std::uint8_t, 32>& nc,
                    const std::string& name, const Proof& pg) {
  const Proof want = session_proof(p, cred, nc, name, 2);
  return CRYPTO_memcmp(pg.data(), want.data(), pg.size()) == 0;
}

// Good mode: authenticates (§11.2, initiator) with a fresh client nonce and checks the gateway's proof.
// Empty on success.
std::string authenticate(Peer& peer, const Credentials& cred, Rng& rng, std::uint64_t cookie) {
  std::array<std::uint8_t, 32> nc{};
  for (auto& x : nc) x = static_cast<std::uint8_t>(rng.next());
  const Proof pc = session_proof(peer, cred, nc, cred.name, 1);
  std::vector<std::uint8_t> m = peer.build(
      kAuth, 0, cookie, {}, auth_body(1, static_cast<std::uint8_t>(cred.name.size()), 0, nc, pc, cred.name));
  if (!peer.send(m, m.size())) return "the AUTH could not be sent";
  Proof pg{};
  std::string why;
  const long st = auth_answer_status(peer.wait_answer(cookie, 20s), &pg, &why);
  if (st < 0) return why;
  if (st != kAuthOk) return "status " + std::to_string(st);
  if (!gateway_proved(peer, cred, nc, cred.name, pg)) return "the gateway's proof Pg is wrong";
  return {};
}

// The last valid AUTH body a fuzz session sent, for the replay mutation (§11.4).
struct RecordedAuth {
  std::vector<std::uint8_t> body;
};

enum class AuthOutcome { kOpen, kEnded, kWrongAnswer };

// A fuzz session's authentication: a valid AUTH (kOpen once the gateway proved itself), or a mutation that
// must not open the connection (kEnded). kWrongAnswer (and *why): the gateway broke §11.
AuthOutcome fuzz_auth(Conn& c, Peer& p, Rng& r, Tally& t, const Credentials& cred, RecordedAuth* rec,
                      std::string* why) {
  static const char* const kWhat[] = {"valid",         "noops_first", "wrong_proof",   "unknown_name",
                                      "bad_name_char", "mechanism",   "reserved",      "length_mismatch",
                                      "truncated",     "replay",      "request_first", "twice",
                                      "silence"};
  const unsigned pick = static_cast<unsigned>(r.below(100));
  const std::size_t w = pick < 50 ? 0 : pick < 58 ? 1 : 2 + r.below(std::size(kWhat) - 2);
  const std::string what = w == 9 && rec->body.empty() ? "wrong_proof" : kWhat[w];
  t.add("auth." + what);
  const std::uint64_t cookie = r.next() | 1;
  std::array<std::uint8_t, 32> nc{};
  for (auto& x : nc) x = static_cast<std::uint8_t>(r.next());
  std::string name = cred.name;
  if (what == "unknown_name") name = name.size() < 64 ? name + "x" : "nobody";
  if (what == "bad_name_char")
    name[r.below(name.size())] = r.chance(50) ? '/' : static_cast<char>(0x80 | r.next());
  Proof pc = session_proof(p, cred, nc, name, 1);
  if (what == "wrong_proof") pc[r.below(pc.size())] ^= static_cast<std::uint8_t>(1u << r.below(8));
  std::vector<std::uint8_t> body = auth_body(1, static_cast<std::uint8_t>(name.size()), 0, nc, pc, name);
  if (what == "mechanism") body[0] = static_cast<std::uint8_t>(r.chance(50) ? 0 : r.range(2, 255));
  if (what == "reserved") put16(&body[2], static_cast<std::uint16_t>(r.range(1, 0xffff)));
  if (what == "length_mismatch")
    body[1] = static_cast<std::uint8_t>(r.chance(50) ? name.size() + 1 : name.size() - 1);
  if (what == "replay") body = rec->body;  // an earlier session's Nc and Pc, under this session's header

  const auto wait_closed = [&](std::chrono::milliseconds d) {
    const auto until = Clock::now() + d;
    while (Clock::now() < until && c.state() == LinkState::kUp) {
      c.progress(100ms);
      if (!p.absorb()) break;
    }
    t.add("auth." + what + (c.state() == LinkState::kUp ? ".still_up" : ".closed"));
    return AuthOutcome::kEnded;
  };
  if (what == "silence") return wait_closed(3s);  // the gateway's auth timeout closes it
  if (what == "request_first") {
    std::vector<std::uint8_t> m = p.build(kInlineReq, kGet, cookie, {}, key_prefix("fz-0"));
    if (!p.send(m, m.size())) return AuthOutcome::kEnded;
    return wait_closed(2s);  // a request in state authenticating closes the connection at once
  }
  if (what == "noops_first") {
    for (std::uint64_t i = 0, n = r.range(1, 3); i < n; ++i) {
      std::vector<std::uint8_t> m = p.build(kNoop, 0, 0, {}, {});
      if (!p.send(m, m.size())) return AuthOutcome::kEnded;
    }
  }
  std::vector<std::uint8_t> m = p.build(kAuth, 0, cookie, {}, body);
  const std::size_t wire = what == "truncated" ? m.size() - r.range(1, 40) : m.size();
  if (!p.send(m, wire)) return AuthOutcome::kEnded;
  const bool valid = what == "valid" || what == "noops_first" || what == "twice";
  Proof pg{};
  std::string bad;
  const long st = auth_answer_status(p.wait_answer(cookie, 10s), &pg, &bad);
  if (st < 0) {
    // No answer is what a decode error gets (the connection closes); a valid AUTH unanswered is counted, and
    // the good clients beside the fuzzer would fail if the gateway stopped answering them.
    t.add("auth." + what + ".no_answer");
    if (!bad.empty() && bad != "no answer") return *why = what + ": " + bad, AuthOutcome::kWrongAnswer;
    return AuthOutcome::kEnded;
  }
  t.add("auth." + what + ".status_" + std::to_string(st));
  if (!valid) {
    if (st == kAuthOk) return *why = "ok answered to a " + what + " AUTH", AuthOutcome::kWrongAnswer;
    return wait_closed(2s);  // a refusal is answered, then the gateway disconnects
  }
  if (st != kAuthOk)
    return *why = "a valid AUTH answered status " + std::to_string(st), AuthOutcome::kWrongAnswer;
  if (!gateway_proved(p, cred, nc, name, pg))
    return *why = "the gateway's proof Pg is wrong", AuthOutcome::kWrongAnswer;
  rec->body = body;
  if (what == "twice") {  // a second AUTH on an open connection is a type it does not expect
    std::vector<std::uint8_t> again = p.build(kAuth, 0, cookie + 2, {}, body);
    if (!p.send(again, again.size())) return AuthOutcome::kEnded;
    return wait_closed(2s);
  }
  return AuthOutcome::kOpen;
}

// ---- good mode
// ---------------------------------------------------------------------------------------------

int run_good(const Options& o, const Credentials& cred) {
  Rng rng(o.seed);
  HsParams offer;
  offer.minor = cred.given() ? 2 : 0;
  std::uint64_t inc = 0;
  std::unique_ptr<Conn> conn;
  // A connection request can go unanswered now and then under rxe load (a lost CM datagram outlives the
  // 10 s wait); a real client reconnects, as the client library does. Each attempt is a new incarnation,
  // so a half-accepted earlier attempt cannot be mistaken for this one. A rejection is not retried.
  constexpr int kConnectAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    inc = random_incarnation(rng);
    conn = std::make_unique<Conn>();
    std::string detail;
    // rnr_retry_count 3, as protocol.md §3.9 asks: 7 (retry forever) is refused bad_conn_param.
    const ConnectResult cr = conn->connect(o, handshake_request(offer, inc, 0), 4, 4, 3, offer.depth,
                                           offer.depth * 2u + 8, offer.max_msg, &detail);
    if (cr == ConnectResult::kEstablished) break;
    std::fprintf(stderr, "good: connect attempt %d of %d: %s %s (reject reason %d)\n", attempt,
                 kConnectAttempts, to_string(cr), detail.c_str(), conn->reject_reason());
    const bool unanswered = cr == ConnectResult::kTimeout || cr == ConnectResult::kUnreachable;
    if (!unanswered || attempt == kConnectAttempts) return 4;
    conn.reset();
    usleep(200000);
  }
  Conn& c = *conn;
  const Accepted acc = check_accept(c.accept_data().data(), c.accept_data().size(), offer, inc);
  if (!acc.ok) {
    std::fprintf(stderr, "good: %s\n", acc.why.c_str());
    return 4;
  }
  Peer peer(&c, acc, inc);
  std::uint64_t cookie = 1, ops = 0, version = 0;
  if (acc.auth) {
    if (!cred.given()) {
      std::fprintf(stderr, "good: the gateway requires authentication: give --principal and --secret\n");
      return 4;
    }
    if (const std::string why = authenticate(peer, cred, rng, cookie++); !why.empty()) {
      std::fprintf(stderr, "good: authentication as %s failed: %s\n", cred.name.c_str(), why.c_str());
      return 4;
    }
  }
  std::printf("good: connected%s\n", acc.auth ? ", authenticated" : "");
  std::fflush(stdout);
  const std::string prefix = o.key_prefix.empty() ? "good-" + std::to_string(getpid()) + "-" : o.key_prefix;
  // A predecessor with the same prefix may have been killed mid-run: its keys go first, so that every later
  // answer is predictable from this process's own PUTs. Empty on success, else what went wrong. An answer
  // no_resources is retried, as §8.2 allows; a few times, with a pause, as a real client would.
  const auto link = [&] {
    return c.state() == LinkState::kClosedByGateway ? "closed by the gateway"
           : c.state() == LinkState::kQpError       ? "QP error"
           : c.state() == LinkState::kTimedOut      ? "timed out"
                                                    : "up";
  };
  auto remove = [&](const std::string& key) -> std::string {
    for (int attempt = 1;; ++attempt) {
      if (!peer.wait_request_credit(10s)) return std::string("no request credit within 10 s; link ") + link();
      std::vector<std::uint8_t> m = peer.build(kInlineReq, kDelete, cookie, {}, key_prefix(key));
      if (!peer.send(m, m.size())) return std::string("send failed; link ") + link();
      const auto a = peer.wait_answer(cookie++, 20s);
      if (a.empty()) return std::string("no answer within 20 s; link ") + link();
      if (a.size() != 48) return "an answer of " + std::to_string(a.size()) + " bytes";
      const std::uint32_t st = get32(&a[40]);
      if (st == kStatusOk || st == kStatusNotFound) return {};
      if (st != kStatusNoResources || attempt == 5) return "status " + std::to_string(st);
      usleep(100000);
    }
  };
  for (unsigned k = 0; k < 16; ++k) {
    if (const std::string why = remove(prefix + std::to_string(k)); !why.empty()) {
      std::fprintf(stderr,
                   "good: DELETE of a predecessor's key %s%u failed: %s (gateway messages broken: %llu)\n",
                   prefix.c_str(), k, why.c_str(), static_cast<unsigned long long>(peer.bad_from_gateway()));
      return 4;
    }
  }
  std::printf("good: loading\n");
  std::fflush(stdout);
  std::map<std::string, std::pair<std::uint64_t, std::size_t>> stored;  // key -> version, size
  const auto end = Clock::now() + std::chrono::duration<double>(o.seconds);
  const std::size_t max_inline = acc.p.max_msg - kHeader - 1 - 24;
  std::vector<std::uint8_t> expect;
  while (Clock::now() < end) {
    const std::string key = prefix + std::to_string(rng.below(16));
    const unsigned op = static_cast<unsigned>(rng.below(10));
    if (!peer.wait_request_credit(10s)) break;
    std::vector<std::uint8_t> msg;
    if (op < 4) {  // PUT, inline or read chunk
      const bool chunk = rng.chance(50);
      const std::size_t size = chunk ? rng.range(1, std::min<std::uint64_t>(256u << 10, acc.p.max_bulk))
                                     : rng.below(max_inline + 1);
      ++version;
      std::vector<std::uint8_t> payload = key_prefix(key);
      if (chunk) {
        fill_value(c.bulk(), size, key, version);
        msg = peer.build(kReadChunk, kPut, cookie,
                         {{c.bulk_addr(), static_cast<std::uint32_t>(size), c.rkey()}}, payload);
      } else {
        const std::size_t at = payload.size();
        payload.resize(at + size);
        fill_value(payload.data() + at, size, key, version);
        msg = peer.build(kInlineReq, kPut, cookie, {}, payload);
      }
      if (!peer.send(msg, msg.size())) break;
      const auto a = peer.wait_answer(cookie++, 20s);
      if (a.size() != 48 || a[3] != kCompletion || get32(&a[40]) != kStatusOk || get32(&a[44]) != size) {
        std::fprintf(stderr, "good: PUT %s (%zu bytes) answered %s\n", key.c_str(), size,
                     a.empty() ? "nothing"
                               : ("status " + std::to_string(a.size() >= 48 ? get32(&a[40]) : 999)).c_str());
        return a.empty() ? 4 : 3;
      }
      stored[key] = {version, size};
    } else if (op < 9) {  // GET, inline or write chunk
      const bool chunk = rng.chance(50);
      if (chunk) {
        std::memset(c.bulk(), 0xa5, 256u << 10);
        msg = peer.build(kWriteChunk, kGet, cookie, {{c.bulk_addr(), 256u << 10, c.rkey()}}, key_prefix(key));
      } else {
        msg = peer.build(kInlineReq, kGet, cookie, {}, key_prefix(key));
      }
      if (!peer.send(msg, msg.size())) break;
      const auto a = peer.wait_answer(cookie++, 20s);
      if (a.empty()) {
        std::fprintf(stderr, "good: GET %s: no answer\n", key.c_str());
        return 4;
      }
      const auto it = stored.find(key);
      const std::uint8_t* got = nullptr;
      std::size_t got_n = 0;
      if (a[3] == kInlineResp) {
        got = a.data() + kHeader;
        got_n = a.size() - kHeader;
      } else if (a.size() == 48 && get32(&a[40]) == kStatusOk && chunk) {
        got = c.bulk();
        got_n = get32(&a[44]);
      } else if (a.size() == 48 && get32(&a[40]) == kStatusNotFound && it == stored.end()) {
        ++ops;
        continue;
      } else if (a.size() == 48 && get32(&a[40]) == kStatusTooSmall && !chunk && it != stored.end() &&
                 get32(&a[44]) == it->second.second) {
        ++ops;
        continue;
      } else {
        std::printf("MISMATCH: GET %s answered type %u status %u\n", key.c_str(), a[3],
                    a.size() >= 48 ? get32(&a[40]) : 0u);
        return 3;
      }
      if (it == stored.end() || got_n != it->second.second) {
        std::printf("MISMATCH: GET %s: %zu bytes, expected %zu\n", key.c_str(), got_n,
                    it == stored.end() ? 0 : it->second.second);
        return 3;
      }
      expect.resize(got_n);
      fill_value(expect.data(), got_n, key, it->second.first);
      if (got_n != 0 && std::memcmp(got, expect.data(), got_n) != 0) {
        std::printf("MISMATCH: GET %s: %zu bytes differ from version %" PRIu64 "\n", key.c_str(), got_n,
                    it->second.first);
        return 3;
      }
    } else {  // DELETE
      msg = peer.build(kInlineReq, kDelete, cookie, {}, key_prefix(key));
      if (!peer.send(msg, msg.size())) break;
      const auto a = peer.wait_answer(cookie++, 20s);
      const std::uint32_t want = stored.count(key) ? kStatusOk : kStatusNotFound;
      if (a.size() != 48 || get32(&a[40]) != want) {
        std::printf("MISMATCH: DELETE %s answered %s\n", key.c_str(),
                    a.empty() ? "nothing" : "another status");
        return a.empty() ? 4 : 3;
      }
      stored.erase(key);
    }
    if (++ops % 100 == 0) {
      std::printf("good: ops %" PRIu64 "\n", ops);
      std::fflush(stdout);
    }
  }
  if (Clock::now() < end) {
    std::fprintf(stderr, "good: the connection failed after %" PRIu64 " ops\n", ops);
    return 4;
  }
  // Leaves the store as it found it (the soak compares the store's gauges before and after).
  for (const auto& [key, v] : stored) {
    if (const std::string why = remove(key); !why.empty()) {
      std::fprintf(stderr, "good: DELETE %s at the end failed: %s\n", key.c_str(), why.c_str());
      return 4;
    }
  }
  std::printf("good: done, ops %" PRIu64 ", mismatches 0\n", ops);
  return 0;
}

// ---- fuzz mode
// ---------------------------------------------------------------------------------------------

// A mutated private-data body, or a valid one with hostile cm parameters; names the mutation.
std::vector<std::uint8_t> fuzz_handshake(Rng& r, HsParams* offer, std::uint64_t inc, std::uint8_t minor,
                                         std::string* what) {
  *offer = HsParams{};
  offer->minor = minor;
  const std::uint16_t depths[] = {1, 3, 4, 5, 8, 16, 32, 64, 128, 129, 4096, 65535};
  const std::uint32_t msgs[] = {0, 63, 64, 100, 1024, 4096, 65536, 1u << 20, 0xffffffffu};
  if (r.chance(30)) offer->depth = depths[r.below(std::size(depths))];
  if (r.chance(20)) offer->max_msg = msgs[r.below(std::size(msgs))];
  if (r.chance(15)) offer->frags = static_cast<std::uint16_t>(r.below(20));
  if (r.chance(15)) offer->max_bulk = static_cast<std::uint32_t>(r.chance(50) ? r.below(8) : r.next());
  std::vector<std::uint8_t> b = handshake_request(*offer, inc, 0);
  *what = "valid";
  if (!r.chance(30)) return b;
  switch (r.below(11)) {
    case 0:
      *what = "short";
      b.resize(r.below(kHsBody));
      break;
    case 1:
      *what = "bad_magic";
      b[r.below(4)] ^= static_cast<std::uint8_t>(1 + r.below(255));
      break;
    case 2:
      *what = "kind";
      b[4] = static_cast<std::uint8_t>(r.chance(50) ? r.range(2, 3) : r.below(256));
      break;
    case 3:
      *what = "major";
      b[5] = static_cast<std::uint8_t>(r.range(2, 255));
      break;
    case 4:
      *what = "minor_mask";
      b[6] = static_cast<std::uint8_t>(r.below(20));
      put16(&b[8], static_cast<std::uint16_t>(r.next()));
      break;
    case 5:
      *what = "flags";
      b[7] = static_cast<std::uint8_t>(r.next());
      break;
    case 6:
      *what = "zero_incarnation";
      put64(&b[24], 0);
      break;
    case 7:
      *what = "stale_destination";
      put64(&b[32], r.next() | 1);
      break;
    case 8:
      *what = "random_bytes";
      for (auto& x : b) x = static_cast<std::uint8_t>(r.next());
      break;
    case 9:
      *what = "long";
      b.resize(56, static_cast<std::uint8_t>(r.next()));
      break;
    default:
      *what = "byte_flip";
      b[r.below(b.size())] ^= static_cast<std::uint8_t>(1u << r.below(8));
      break;
  }
  return b;
}

class FuzzSession {
 public:
  FuzzSession(Conn* c, Peer* p, Rng* r, Tally* t) : c_(c), p_(p), r_(r), t_(t) {}

  // One random step; false when the connection is gone (closed by the gateway, QP error) or the session
  // decided to end it.
  bool step() {
    if (!p_->absorb(stalled_)) return false;
    const unsigned pick = static_cast<unsigned>(r_->below(100));
    if (pick < 55) return valid_request(false);
    if (pick < 75) return valid_request(true);
    if (pick < 79) return unsolicited();
    if (pick < 82) return credit_burst();
    if (pick < 84) return noop_variant();
    if (pick < 86) return rdma_at_gateway();
    if (pick < 88) return send_with_imm();
    if (pick < 90) return oversize_send();
    if (pick < 93) return stall_toggle();
    if (pick < 95) return idle();
    return collect();
  }

 private:
  // 64 readable keys and 64 of random bytes and length (1..250): a bounded key space, so that what the fuzzer
  // stores stays far below the store's capacity and the good client's PUTs never see no_space because of it.
  std::string key() {
    if (r_->chance(80)) return "fz-" + std::to_string(r_->below(64));
    Rng kr(0xf00d + r_->below(64));
    std::string k(kr.range(1, 250), '\0');
    for (auto& ch : k) ch = static_cast<char>(kr.next());
    return k;
  }

  std::vector<std::uint8_t> payload_for(std::uint16_t op, bool chunk) {
    std::vector<std::uint8_t> p = key_prefix(key());
    if ((op == kPut && !chunk) || op == kEcho || op == kSink) {
      const std::size_t room =
          p_->session().p.max_msg > kHeader + p.size() ? p_->session().p.max_msg - kHeader - p.size() : 0;
      const std::size_t n = r_->below(room + 1);
      const std::size_t at = p.size();
      p.resize(at + n);
      fill_value(p.data() + at, n, "fz", n);
    }
    return p;
  }

  std::vector<Fragment> fragments(bool mutate) {
    const unsigned max = std::max<unsigned>(1, std::min<unsigned>(p_->session().p.frags, 16));
    std::vector<Fragment> f(r_->range(1, r_->chance(80) ? 1 : max));
    const std::uint32_t budget = static_cast<std::uint32_t>(
        std::min<std::uint64_t>(p_->session().p.max_bulk, Conn::kBulkBytes) / f.size());
    std::uint64_t at = 0;
    for (auto& x : f) {
      x.len = static_cast<std::uint32_t>(r_->range(
          1, std::max<std::uint32_t>(1, std::min<std::uint32_t>(budget, r_->chance(70) ? 8192 : 65536))));
      x.addr = c_->bulk_addr() + at;
      x.rkey = c_->rkey();
      at += x.len;
    }
    if (!mutate) return f;
    Fragment& v = f[r_->below(f.size())];
    switch (r_->below(7)) {
      case 0:
        t_->add("mut.frag_len0");
        v.len = 0;
        break;
      case 1:
        t_->add("mut.frag_wrap");
        v.addr = ~0ull - r_->below(v.len + 1ull);
        break;
      case 2:
        t_->add("mut.frag_bad_rkey");
        v.rkey ^= static_cast<std::uint32_t>(1 + r_->below(0xffff));
        break;
      case 3:
        t_->add("mut.frag_outside_mr");
        v.addr += Conn::kBulkBytes + r_->below(1u << 20);
        break;
      case 4:
        t_->add("mut.frag_huge");
        v.len = static_cast<std::uint32_t>(r_->range(p_->session().p.max_bulk / 2 + 1, 0xffffffffu));
        break;
      case 5:
        t_->add("mut.frag_random_addr");
        v.addr = r_->next();
        break;
      default:
        t_->add("mut.frag_over_value_max");
        v.len = (4u << 20) + static_cast<std::uint32_t>(r_->below(4096));
        break;
    }
    return f;
  }

  // A request of a random op and form; with `mutate`, one to three mutations of header, chunk or payload.
  bool valid_request(bool mutate) {
    if (!stalled_ && !mutate && !p_->wait_request_credit(3s)) return false;
    const std::uint16_t ops[] = {kEcho, kSink, kPut, kGet, kDelete};
    std::uint16_t op = ops[r_->below(std::size(ops))];
    MsgType type = kInlineReq;
    if (op == kPut && r_->chance(50)) type = kReadChunk;
    if (op == kGet && r_->chance(50)) type = kWriteChunk;
    if (mutate && r_->chance(10))
      type = static_cast<MsgType>(r_->range(kInlineReq, kWriteChunk));  // op in the wrong form
    const bool chunk = type == kReadChunk || type == kWriteChunk;
    const bool mutate_chunk = mutate && chunk && r_->chance(40);
    std::vector<std::uint8_t> payload = payload_for(op, chunk);
    std::vector<Fragment> frags = chunk ? fragments(mutate_chunk) : std::vector<Fragment>{};
    if (chunk && type == kReadChunk) {
      for (const auto& f : frags) {
        if (f.addr >= c_->bulk_addr() && f.addr - c_->bulk_addr() < Conn::kBulkBytes)
          fill_value(c_->bulk() + (f.addr - c_->bulk_addr()),
                     std::min<std::uint64_t>(f.len, Conn::kBulkBytes - (f.addr - c_->bulk_addr())), "fzv",
                     f.len);
      }
    }
    const std::uint64_t ck =
        r_->chance(97) ? ++cookie_ : (r_->chance(50) ? 0 : cookie_);  // duplicate or zero cookies too
    std::vector<std::uint8_t> m = p_->build(type, op, ck, frags, payload);
    std::size_t wire = m.size();
    long credits = -1;
    bool keep_checksum = false;
    if (mutate && !mutate_chunk) {
      const unsigned count = static_cast<unsigned>(r_->range(1, 3));
      for (unsigned i = 0; i < count; ++i) mutate_message(&m, &wire, &credits, &keep_checksum);
    }
    t_->add(mutate ? "sent.mutated" : "sent.valid");
    return p_->send(m, wire, credits, keep_checksum) || c_->state() == LinkState::kUp;
  }

  void mutate_message(std::vector<std::uint8_t>* mp, std::size_t* wire, long* credits, bool* keep_checksum) {
    auto& m = *mp;
    const std::uint32_t P = p_->session().p.depth;
    switch (r_->below(18)) {
      case 0:
        t_->add("mut.magic");
        m[r_->below(2)] ^= static_cast<std::uint8_t>(1 + r_->below(255));
        break;
      case 1:
        t_->add("mut.version");
        m[2] = static_cast<std::uint8_t>(r_->chance(50) ? 0x11 : r_->next());
        break;
      case 2:
        t_->add("mut.type");
        m[3] = static_cast<std::uint8_t>(r_->chance(50) ? 0 : r_->range(7, 255));
        break;
      case 3:
        t_->add("mut.credits_overflow");
        *credits = static_cast<long>(r_->range(P + 1, 0xffff));
        break;
      case 4:
        t_->add("mut.credits_too_many");
        *credits = static_cast<long>(r_->range(1, P));
        break;
      case 5:
        t_->add("mut.opcode");
        put16(&m[6], static_cast<std::uint16_t>(r_->next()));
        break;
      case 6:
        t_->add("mut.length");
        put32(&m[8], static_cast<std::uint32_t>(get32(&m[8]) + r_->range(1, 64) * (r_->chance(50) ? 1 : -1)));
        break;
      case 7:
        t_->add("mut.length_random");
        put32(&m[8], static_cast<std::uint32_t>(r_->next()));
        break;
      case 8:
        t_->add("mut.checksum");
        put32(&m[12], static_cast<std::uint32_t>(r_->next() | 1));
        *keep_checksum = true;
        break;
      case 9:
        t_->add("mut.src_incarnation");
        put64(&m[16], r_->next());
        break;
      case 10:
        t_->add("mut.dst_incarnation");
        put64(&m[24], r_->next());
        break;
      case 11:
        t_->add("mut.truncate_wire");
        *wire = r_->below(m.size());
        break;
      case 12:
        t_->add("mut.trailing");
        m.resize(m.size() + r_->range(1, 32), 0xee);
        *wire = m.size();
        break;
      case 13:
        t_->add("mut.key_len");
        if (m[3] == kInlineReq && m.size() > kHeader)
          m[kHeader] = static_cast<std::uint8_t>(r_->chance(50) ? 0 : r_->range(251, 255));
        break;
      case 14:
        t_->add("mut.key_truncated");
        if (m[3] == kInlineReq && m.size() > kHeader + 1) {
          m.resize(kHeader + 1 + r_->below(m[kHeader]));
          put32(&m[8], static_cast<std::uint32_t>(m.size()));
          *wire = m.size();
        }
        break;
      case 15:
        t_->add("mut.chunk_count");
        if (m[3] == kReadChunk || m[3] == kWriteChunk)
          put16(&m[40], static_cast<std::uint16_t>(r_->chance(50) ? 0 : r_->range(2, 0xffff)));
        break;
      case 16:
        t_->add("mut.chunk_reserved");
        if (m[3] == kReadChunk || m[3] == kWriteChunk)
          put16(&m[42], static_cast<std::uint16_t>(1 + r_->below(0xffff)));
        break;
      default:
        t_->add("mut.byte_flip");
        {
          const std::size_t i = r_->below(m.size());
          m[i] ^= static_cast<std::uint8_t>(1u << r_->below(8));
        }
        break;
    }
  }

  // An inline response or completion nobody asked for, or a request typed as an answer.
  bool unsolicited() {
    t_->add("sent.unsolicited");
    const bool completion = r_->chance(50);
    std::vector<std::uint8_t> m =
        completion ? p_->build(kCompletion, kGet, r_->next(), {}, {0, 0, 0, 0, 0, 0, 0, 0})
                   : p_->build(kInlineResp, kEcho, r_->next(), {}, payload_for(kEcho, false));
    if (completion) put32(&m[44], static_cast<std::uint32_t>(r_->below(1u << 20)));
    return p_->send(m, m.size()) || c_->state() == LinkState::kUp;
  }

  // Requests beyond the credits granted (§5.3 credit_overrun / reserve_violation).
  bool credit_burst() {
    t_->add("sent.credit_burst");
    const std::uint32_t n = p_->credits() + static_cast<std::uint32_t>(r_->range(1, 8));
    for (std::uint32_t i = 0; i < n && c_->state() == LinkState::kUp; ++i) {
      std::vector<std::uint8_t> m = p_->build(kInlineReq, kEcho, ++cookie_, {}, {1, 'b'});
      if (!p_->send(m, m.size())) break;
    }
    return c_->state() == LinkState::kUp;
  }

  bool noop_variant() {
    std::vector<std::uint8_t> m = p_->build(kNoop, 0, 0, {}, {});
    switch (r_->below(3)) {
      case 0:
        t_->add("sent.noop");
        break;
      case 1:
        t_->add("mut.noop_cookie");
        put64(&m[32], r_->next() | 1);
        break;
      default:
        t_->add("mut.noop_payload");
        m.push_back(1);
        put32(&m[8], static_cast<std::uint32_t>(m.size()));
        break;
    }
    return p_->send(m, m.size()) || c_->state() == LinkState::kUp;
  }

  bool rdma_at_gateway() {
    t_->add("sent.rdma_at_gateway");
    const bool write = r_->chance(50);
    return c_->rdma_at(write, r_->next(), static_cast<std::uint32_t>(r_->next()),
                       static_cast<std::uint32_t>(r_->range(1, 65536))) ||
           c_->state() == LinkState::kUp;
  }

  bool send_with_imm() {
    t_->add("sent.send_with_imm");
    std::vector<std::uint8_t> m = p_->build(kInlineReq, kEcho, ++cookie_, {}, {1, 'i'});
    return p_->send(m, m.size(), -1, false, true) || c_->state() == LinkState::kUp;
  }

  // A SEND larger than the gateway's receive buffer: our buffers are as large as what we offered, which may
  // exceed what was negotiated.
  bool oversize_send() {
    const std::uint32_t M = p_->session().p.max_msg;
    if (c_->buf_size() <= M) return collect();
    t_->add("sent.oversize");
    std::vector<std::uint8_t> m =
        p_->build(kInlineReq, kEcho, ++cookie_, {}, std::vector<std::uint8_t>(c_->buf_size() - kHeader, 7));
    return p_->send(m, m.size()) || c_->state() == LinkState::kUp;
  }

  // Stops (or resumes) re-posting receives: the gateway's sends then find nothing posted (RNR) while requests
  // keep coming.
  bool stall_toggle() {
    stalled_ = !stalled_;
    t_->add(stalled_ ? "stall.on" : "stall.off");
    if (!stalled_) return p_->release_held();
    return true;
  }

  bool idle() {
    t_->add("idle");
    const auto ms = std::chrono::milliseconds(r_->below(r_->chance(90) ? 300 : 3000));
    const auto end = Clock::now() + ms;
    while (Clock::now() < end && c_->state() == LinkState::kUp) {
      c_->progress(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()) + 1ms);
      if (!p_->absorb(stalled_)) break;
    }
    return c_->state() == LinkState::kUp;
  }

  bool collect() {
    c_->progress(std::chrono::milliseconds(r_->below(50)));
    return p_->absorb(stalled_) && c_->state() == LinkState::kUp;
  }

  Conn* c_;
  Peer* p_;
  Rng* r_;
  Tally* t_;
  std::uint64_t cookie_ = 0;
  bool stalled_ = false;
};

int run_fuzz(const Options& o, const Credentials& cred) {
  Tally t;
  RecordedAuth recorded;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(o.seconds);
  std::uint64_t session = 0;
  unsigned consecutive_unreachable = 0;
  std::deque<std::string> recent;  // the last sessions' seeds, printed when something goes wrong
  auto last_report = start;
  while (Clock::now() < end) {
    const std::uint64_t sseed = splitmix64(o.seed ^ splitmix64(session));
    Rng r(sseed);
    char line[160];
    std::snprintf(line, sizeof(line), "session %" PRIu64 " seed 0x%016" PRIx64, session, sseed);
    recent.emplace_back(line);
    if (recent.size() > 5) recent.pop_front();
    if (o.log_sessions) std::printf("live-fuzzer: %s\n", line);
    ++session;
    const std::uint64_t inc = random_incarnation(r);
    HsParams offer;
    std::string what;
    std::vector<std::uint8_t> pd = fuzz_handshake(r, &offer, inc, cred.given() ? 2 : 0, &what);
    t.add("hs." + what);
    const std::uint8_t res = static_cast<std::uint8_t>(r.chance(80) ? r.range(1, 16) : r.below(256));
    const std::uint8_t ini = static_cast<std::uint8_t>(r.chance(80) ? r.range(1, 16) : r.below(256));
    // Mostly an accepted count (0..6); 7 (retry forever) must be refused bad_conn_param, not served.
    const std::uint8_t rnr = static_cast<std::uint8_t>(r.chance(80) ? r.below(7) : 7);
    const std::uint32_t rq = std::clamp<std::uint32_t>(offer.depth, 1, 256);
    const std::uint32_t buf = std::clamp<std::uint32_t>(offer.max_msg, 64, 65536);
    Conn c;
    std::string detail;
    const auto vanish = r.chance(5) ? std::chrono::milliseconds(r.below(20)) : std::chrono::milliseconds(-1);
    const ConnectResult cr = c.connect(o, pd, res, ini, rnr, rq, 64, buf, &detail, vanish);
    if (cr == ConnectResult::kVanished) c.teardown(false);
    t.add(std::string("connect.") + to_string(cr));
    if (cr == ConnectResult::kRejected) t.add("reject_reason." + std::to_string(c.reject_reason()));
    if (cr == ConnectResult::kError) {
      std::fprintf(stderr, "live-fuzzer: %s: %s\n", line, detail.c_str());
      return 2;
    }
    if (cr == ConnectResult::kUnreachable || cr == ConnectResult::kTimeout) {
      // A gateway that refuses at the transport level now and then is fine (slots still closing); one that
      // never answers again is what the harness must hear about.
      if (++consecutive_unreachable >= 20) {
        std::fprintf(stderr, "live-fuzzer: 20 connection attempts in a row unanswered; last sessions:\n");
        for (const auto& s : recent) std::fprintf(stderr, "  %s\n", s.c_str());
        return 1;
      }
      usleep(100000);
      continue;
    }
    consecutive_unreachable = 0;
    if (cr == ConnectResult::kEstablished) {
      const Accepted acc = check_accept(c.accept_data().data(), c.accept_data().size(), offer, inc);
      if (!acc.ok) {
        t.add("accept_refused_here");
        if (what == "valid") {
          std::fprintf(stderr, "live-fuzzer: %s: the gateway's accept to a valid request breaks §3.5: %s\n",
                       line, acc.why.c_str());
          t.add("accept_invalid");
        }
        c.teardown(r.chance(50));
        continue;
      }
      Peer p(&c, acc, inc);
      if (acc.auth) {
        std::string why;
        const AuthOutcome ao =
            cred.given() ? fuzz_auth(c, p, r, t, cred, &recorded, &why) : AuthOutcome::kEnded;
        if (ao == AuthOutcome::kWrongAnswer) {
          std::fprintf(stderr, "live-fuzzer: %s: the gateway breaks §11: %s\n", line, why.c_str());
          t.add("auth_wrong_answer");
        }
        if (ao != AuthOutcome::kOpen) {
          c.teardown(r.chance(70));
          continue;
        }
      }
      FuzzSession fs(&c, &p, &r, &t);
      const std::uint64_t steps = r.range(1, r.chance(80) ? 60 : 400);
      std::uint64_t i = 0;
      while (i < steps && Clock::now() < end && fs.step()) ++i;
      t.add("steps", i);
      t.add(c.state() == LinkState::kUp                ? "end.by_us"
            : c.state() == LinkState::kClosedByGateway ? "end.closed_by_gateway"
                                                       : "end.qp_error");
      if (p.bad_from_gateway() > 0) {
        std::fprintf(stderr, "live-fuzzer: %s: %" PRIu64 " messages from the gateway break §4.7\n", line,
                     p.bad_from_gateway());
        t.add("gateway_bad_messages", p.bad_from_gateway());
      }
      c.teardown(r.chance(70));
    }
    if (Clock::now() - last_report > 10s) {
      last_report = Clock::now();
      std::printf("live-fuzzer: %.0f s, %" PRIu64 " sessions\n",
                  std::chrono::duration<double>(last_report - start).count(), session);
      std::fflush(stdout);
    }
  }
  std::printf("live-fuzzer: seed 0x%016" PRIx64 " done: %" PRIu64 " sessions in %.0f s\n", o.seed, session,
              std::chrono::duration<double>(Clock::now() - start).count());
  for (const auto& [k, v] : t.n) std::printf("live-fuzzer:   %-28s %" PRIu64 "\n", k.c_str(), v);
  // A gateway reply that breaks the protocol is a gateway bug too.
  return t.n.count("accept_invalid") || t.n.count("gateway_bad_messages") || t.n.count("auth_wrong_answer")
             ? 5
             : 0;
}

int usage(const char* why) {
  std::fprintf(
      stderr,
      "rdmagate-live-fuzzer: %s\nusage: rdmagate-live-fuzzer --addr A --port P [--seconds N] [--seed S] "
      "[--mode fuzz|good] [--key-prefix K] [--log-sessions] [--principal NAME --secret HEX]\n",
      why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--addr" && has_value)
      o.addr = argv[++i];
    else if (a == "--port" && has_value)
      o.port = std::atoi(argv[++i]);
    else if (a == "--seconds" && has_value)
      o.seconds = std::strtod(argv[++i], nullptr);
    else if (a == "--seed" && has_value)
      o.seed = std::strtoull(argv[++i], nullptr, 0), o.seed_given = true;
    else if (a == "--mode" && has_value)
      o.mode = argv[++i];
    else if (a == "--key-prefix" && has_value)
      o.key_prefix = argv[++i];
    else if (a == "--log-sessions")
      o.log_sessions = true;
    else if (a == "--principal" && has_value)
      o.principal = argv[++i];
    else if (a == "--secret" && has_value)
      o.secret_hex = argv[++i];
    else
      return usage(("unknown or incomplete argument " + a).c_str());
  }
  if (o.addr.empty() || o.port <= 0 || o.port > 65535) return usage("--addr and --port are required");
  if (o.mode != "fuzz" && o.mode != "good") return usage("--mode is fuzz or good");
  Credentials cred;
  if (!o.principal.empty() || !o.secret_hex.empty()) {
    cred.name = o.principal;
    cred.secret = parse_hex(o.secret_hex);
    // §11.1: a name of 1..64 bytes, a secret of 16..64.
    if (cred.name.empty() || cred.name.size() > 64 || cred.secret.size() < 16 || cred.secret.size() > 64)
      return usage("--principal (1..64 bytes) and --secret (32..128 hex digits) go together");
    if (!auth_vector_1_holds()) {
      std::fprintf(stderr,
                   "rdmagate-live-fuzzer: its HMAC transcript disagrees with protocol.md 11.6 vector 1\n");
      return 2;
    }
  }
  if (!o.seed_given) {
    o.seed = splitmix64(static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
                        static_cast<std::uint64_t>(getpid()));
  }
  std::printf("live-fuzzer: mode %s seed 0x%016" PRIx64 " (replay with --seed 0x%016" PRIx64
              ") for %.0f s against %s:%d\n",
              o.mode.c_str(), o.seed, o.seed, o.seconds, o.addr.c_str(), o.port);
  std::fflush(stdout);
  return o.mode == "good" ? run_good(o, cred) : run_fuzz(o, cred);
}

// Authentication, tenants, permissions, quotas and revocation end to end (issue 14; docs/protocol.md §11),
// on real RDMA (rxe guest), against the rdmagate daemon as a process with security.authentication required,
// three tenants and five principals from a secrets file of mode 0600. Every peer is a raw rdma_cm/verbs
// client written from docs/protocol.md (handshake in the private data, AUTH and object requests by the
// protocol codec, the proofs by protocol::auth), so that it can also misbehave:
//   - a client with the right secret authenticates (checking the gateway's proof) and PUT/GET/DELETE work;
//   - a wrong secret, no AUTH at all, a client that offers no minor >= 2, an AUTH recorded on one connection
//     and replayed on a new one (same initiator incarnation, so only the gateway's nonce differs), and an
//     object request before AUTH: each refused, counted on /metrics, while an authenticated client carries
//     on;
//   - tenant A cannot GET, overwrite or DELETE tenant B's object of the same name; a read-only principal
//     cannot PUT or DELETE (forbidden); a tenant's byte and object quotas hold exactly at the boundary;
//   - a principal's max_connections: the next AUTH is answered connection_limit;
//   - a SIGHUP that removes a principal closes its live session, and a SIGHUP that narrows allowed_clients
//     closes the session of the removed source (a second address on the rxe netdev), each within one second,
//     logged and counted (rdmagate_connections_revoked_total), while the others keep working.
//
// The parent never initialises EAL; it re-executes itself as the daemon ("auth_test daemon --config ...").
#include "protocol/auth.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "protocol/handshake.hpp"
#include "protocol/incarnation.hpp"
#include "protocol/message.hpp"
#include "protocol/object_wire.hpp"
#include "tests/rdma/daemon_process.hpp"
#include "tests/rdma/rdma_test_main.hpp"

int rdmagate_main(int argc, char** argv);

namespace {

using namespace rdmagate;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testfix::rxe_addr;
using testfix::proc::Child;
using testfix::proc::metric;
using testfix::proc::read_file;
using testfix::proc::wait_for;
using testfix::proc::write_file;

std::string g_self;
int g_rdma_port = 7700;
int g_http_port = 19500;
// A second address on the rxe netdev: the source of the client the allowed_clients reload revokes.
constexpr const char* kSecondAddr = "198.18.0.77";

constexpr std::uint32_t kBuf = 4096;
constexpr std::uint32_t kRx = 32;
constexpr std::uint32_t kTx = 16;

using Bytes = std::vector<std::uint8_t>;

Bytes secret_of(std::uint8_t seed) {
  Bytes s(32);
  std::iota(s.begin(), s.end(), seed);
  return s;
}
std::string hex(const Bytes& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (const std::uint8_t x : b) {
    s += d[x >> 4];
    s += d[x & 15];
  }
  return s;
}

std::string metrics() {
  return testfix::proc::http_get(g_http_port, "/metrics").body;
}
double counter(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  const double v = metric(metrics(), name, labels);
  return v < 0 ? 0 : v;
}

// What a connect attempt came to.
struct Connected {
  bool established = false;
  protocol::RejectReason reject = protocol::RejectReason::kNone;  // REJECTED with a decodable reject
  int event = -1;                                                 // the terminal rdma_cm event
};

// A raw rdma_cm/verbs peer of the daemon.
class Peer {
 public:
  ~Peer() {
    if (id_ != nullptr) rdma_disconnect(id_);
    if (id_ != nullptr && id_->qp != nullptr) rdma_destroy_qp(id_);
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
    if (cq_ != nullptr) ibv_destroy_cq(cq_);
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
    if (id_ != nullptr) rdma_destroy_id(id_);
    if (ch_ != nullptr) rdma_destroy_event_channel(ch_);
  }

  // Connects from `src` (empty: the route's) offering `minor_mask`; `incarnation` 0: a fresh one.
  Connected connect(const std::string& src = "", std::uint16_t minor_mask = protocol::kSupportedMinorMask,
                    std::uint64_t incarnation = 0) {
    Connected r;
    mem_.assign((kRx + kTx) * std::size_t{kBuf}, 0);
    ch_ = rdma_create_event_channel();
    if (ch_ == nullptr || fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK) != 0 ||
        rdma_create_id(ch_, &id_, nullptr, RDMA_PS_TCP) != 0) {
      return r;
    }
    sockaddr_in dst{}, from{};
    dst.sin_family = from.sin_family = AF_INET;
    dst.sin_port = htons(static_cast<std::uint16_t>(g_rdma_port));
    inet_pton(AF_INET, rxe_addr().c_str(), &dst.sin_addr);
    if (!src.empty()) inet_pton(AF_INET, src.c_str(), &from.sin_addr);
    if (rdma_resolve_addr(id_, src.empty() ? nullptr : reinterpret_cast<sockaddr*>(&from),
                          reinterpret_cast<sockaddr*>(&dst), 2000) != 0 ||
        wait(RDMA_CM_EVENT_ADDR_RESOLVED, 10s) != RDMA_CM_EVENT_ADDR_RESOLVED ||
        rdma_resolve_route(id_, 2000) != 0 ||
        wait(RDMA_CM_EVENT_ROUTE_RESOLVED, 10s) != RDMA_CM_EVENT_ROUTE_RESOLVED) {
      return r;
    }
    pd_ = ibv_alloc_pd(id_->verbs);
    cq_ = pd_ != nullptr ? ibv_create_cq(id_->verbs, kRx + kTx + 4, nullptr, nullptr, 0) : nullptr;
    mr_ = cq_ != nullptr ? ibv_reg_mr(pd_, mem_.data(), mem_.size(), IBV_ACCESS_LOCAL_WRITE) : nullptr;
    ibv_qp_init_attr qa{};
    qa.send_cq = qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = kTx;
    qa.cap.max_recv_wr = kRx;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    if (mr_ == nullptr || rdma_create_qp(id_, pd_, &qa) != 0) return r;
    for (std::uint32_t i = 0; i < kRx; ++i) post_recv(i);
    self_.incarnation = incarnation != 0 ? incarnation : protocol::make_incarnation();
    self_.minor_mask = minor_mask;
    self_.params = protocol::ConnParams{kRx, kBuf, protocol::kMaxFragments, 1u << 20};
    self_.min_queue_depth = protocol::kMinCreditQueueDepth;
    sent_ = protocol::make_connect_request(self_, self_.params, 0);
    std::uint8_t pd[protocol::kMaxHandshakeSize] = {};
    const auto enc = protocol::encode_handshake(sent_, pd);
    rdma_conn_param p{};
    p.private_data = pd;
    p.private_data_len = static_cast<std::uint8_t>(enc.size);
    p.responder_resources = 4;
    p.initiator_depth = 4;
    p.retry_count = 7;
    p.rnr_retry_count = 3;
    if (!enc.ok() || rdma_connect(id_, &p) != 0) return r;
    r.event = wait(RDMA_CM_EVENT_ESTABLISHED, 15s);
    if (r.event == RDMA_CM_EVENT_REJECTED) {
      protocol::HandshakeBody body;
      if (protocol::decode_handshake(reject_, protocol::HandshakeKind::kReject, body) ==
          protocol::HandshakeError::kOk) {
        r.reject = body.reason;
      }
      return r;
    }
    if (r.event != RDMA_CM_EVENT_ESTABLISHED) return r;
    r.established =
        protocol::complete_connect(sent_, accept_, self_, session_) == protocol::HandshakeError::kOk;
    return r;
  }

  const protocol::Session& session() const { return session_; }
  std::uint64_t incarnation() const { return self_.incarnation; }

  // The AUTH this peer would send for `principal` with `secret` (a fresh client nonce).
  protocol::Message make_auth(const std::string& principal, const Bytes& secret) {
    auth_name_ = principal;
    protocol::auth::random_nonce(&client_nonce_);
    const protocol::auth::Transcript t{session_.local_incarnation, session_.peer_incarnation,
                                       session_.gateway_nonce, client_nonce_, auth_name_};
    protocol::auth::Proof pc{};
    protocol::auth::compute_proof(protocol::auth::Role::kClient, secret, t, &pc);
    return protocol::make_auth_message(1, static_cast<std::uint8_t>(protocol::auth::Mechanism::kHmacSha256),
                                       auth_name_, client_nonce_, pc);
  }

  // Sends AUTH and waits for AUTH_ANSWER: its status (-1: none came); with status 0 the gateway's proof
  // is checked against `secret` (-2: it does not verify).
  int authenticate(const std::string& principal, const Bytes& secret, protocol::Message* sent = nullptr) {
    const protocol::Message a = make_auth(principal, secret);
    if (sent != nullptr) *sent = a;
    if (!send(a)) return -1;
    protocol::Message m;
    Bytes payload;
    if (!receive(&m, &payload, 10s) || m.type != protocol::MessageType::kAuthAnswer) return -1;
    if (m.auth_status != 0) return static_cast<int>(m.auth_status);
    const protocol::auth::Transcript t{session_.local_incarnation, session_.peer_incarnation,
                                       session_.gateway_nonce, client_nonce_, auth_name_};
    protocol::auth::Proof pg{};
    protocol::auth::compute_proof(protocol::auth::Role::kGateway, secret, t, &pg);
    return protocol::auth::proofs_equal(pg, m.auth_proof) ? 0 : -2;
  }

  // One inline object request; the answer's status (-1: no answer) and payload.
  long op(protocol::ObjectOpcode op, const std::string& key, const Bytes& value = {}, Bytes* out = nullptr) {
    Bytes p(protocol::object_payload_size(key.size(), value.size()));
    protocol::encode_object_payload(key, value, p);
    protocol::Message m;
    m.type = protocol::MessageType::kInlineRequest;
    m.opcode = static_cast<std::uint16_t>(op);
    m.cookie = ++cookie_;
    m.payload = p;
    if (!send(m)) return -1;
    protocol::Message a;
    Bytes payload;
    if (!receive(&a, &payload, 10s) || a.cookie != m.cookie) return -1;
    if (out != nullptr) *out = payload;
    return static_cast<long>(a.status);
  }
  long put(const std::string& key, const Bytes& v) { return op(protocol::ObjectOpcode::kPut, key, v); }
  long get(const std::string& key, Bytes* out) { return op(protocol::ObjectOpcode::kGet, key, {}, out); }
  long del(const std::string& key) { return op(protocol::ObjectOpcode::kDelete, key); }

  // Encodes `m` (returning the credits of the receives re-posted since the last send) and posts it.
  bool send(protocol::Message m) {
    reap();
    if (tx_next_ - tx_done_ >= kTx) return false;
    const std::uint32_t slot = tx_next_++ % kTx;
    std::uint8_t* b = tx_buf(slot);
    m.credits = static_cast<std::uint16_t>(returned_);
    const std::size_t len = protocol::write_message(m, session_, std::span<std::uint8_t>(b, kBuf));
    if (len == 0) return false;
    returned_ = 0;
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(b), static_cast<std::uint32_t>(len), mr_->lkey};
    ibv_send_wr w{};
    w.wr_id = kTxTag | slot;
    w.sg_list = &sge;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(id_->qp, &w, &bad) == 0;
  }

  // The next message other than NOOP.
  bool receive(protocol::Message* out, Bytes* payload, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      ibv_wc wc{};
      if (ibv_poll_cq(cq_, 1, &wc) != 1) {
        std::this_thread::sleep_for(200us);
        continue;
      }
      if ((wc.wr_id & kTxTag) != 0) {
        ++tx_done_;
        continue;
      }
      if (wc.status != IBV_WC_SUCCESS) return false;
      const auto i = static_cast<std::uint32_t>(wc.wr_id);
      rx_copy_.assign(rx_buf(i), rx_buf(i) + wc.byte_len);
      post_recv(i);
      ++returned_;
      if (protocol::decode_message(rx_copy_, session_, *out) != protocol::WireError::kOk) return false;
      if (out->type == protocol::MessageType::kNoop) continue;
      payload->assign(out->payload.begin(), out->payload.end());
      return true;
    }
    return false;
  }

  // Waits for the gateway to end the connection (DISCONNECTED); the seconds from `since` until this peer saw
  // it (an upper bound of the gateway's time), or nullopt.
  std::optional<double> wait_closed(std::chrono::milliseconds timeout,
                                    Clock::time_point since = Clock::now()) {
    if (wait(RDMA_CM_EVENT_DISCONNECTED, timeout) != RDMA_CM_EVENT_DISCONNECTED) return std::nullopt;
    return std::chrono::duration<double>(Clock::now() - since).count();
  }

 private:
  static constexpr std::uint64_t kTxTag = 1ull << 32;
  std::uint8_t* rx_buf(std::uint32_t i) { return mem_.data() + std::size_t{i} * kBuf; }
  std::uint8_t* tx_buf(std::uint32_t i) { return mem_.data() + (std::size_t{kRx} + i) * kBuf; }
  void post_recv(std::uint32_t i) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(rx_buf(i)), kBuf, mr_->lkey};
    ibv_recv_wr w{};
    w.wr_id = i;
    w.sg_list = &sge;
    w.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ibv_post_recv(id_->qp, &w, &bad);
  }
  void reap() {
    ibv_wc wc{};
    while (ibv_poll_cq(cq_, 1, &wc) == 1) {
      if ((wc.wr_id & kTxTag) != 0) ++tx_done_;
    }
  }
  // The next rdma_cm event of `want` or a terminal one; -1 after the timeout.
  int wait(rdma_cm_event_type want, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(ch_, &ev) != 0) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      const int type = ev->event;
      if (ev->param.conn.private_data != nullptr) {
        const auto* d = static_cast<const std::uint8_t*>(ev->param.conn.private_data);
        Bytes& to = type == RDMA_CM_EVENT_REJECTED ? reject_ : accept_;
        to.assign(d, d + ev->param.conn.private_data_len);
      }
      rdma_ack_cm_event(ev);
      if (type == want || type == RDMA_CM_EVENT_REJECTED || type == RDMA_CM_EVENT_DISCONNECTED ||
          type == RDMA_CM_EVENT_UNREACHABLE || type == RDMA_CM_EVENT_CONNECT_ERROR) {
        return type;
      }
    }
    return -1;
  }

  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  Bytes mem_, accept_, reject_, rx_copy_;
  protocol::LocalEndpoint self_;
  protocol::HandshakeBody sent_;
  protocol::Session session_;
  std::uint32_t tx_next_ = 0, tx_done_ = 0, returned_ = 0;
  std::uint64_t cookie_ = 100;
  protocol::auth::Nonce client_nonce_{};
  std::string auth_name_;
};

// ---- the daemon's configuration ------------------------------------------------------------------------

const Bytes kAlice = secret_of(1), kBob = secret_of(40), kReader = secret_of(80), kQuota = secret_of(120),
            kCarol = secret_of(160);

struct GatewaySetup {
  bool with_bob = true;
  std::string allowed = "[\"198.18.0.0/15\"]";
};

std::string yaml_text(const std::string& secrets, const GatewaySetup& s) {
  std::string y = "eal:\n  main_lcore: 0\nlisten:\n  addresses: [\"" + rxe_addr() +
                  "\"]\n  port: " + std::to_string(g_rdma_port) +
                  "\ndataplane:\n  cores: [1]\n  idle_policy: yield\n  max_connections_per_core: 16\n"
                  "store:\n  capacity_mib: 32\n"
                  "telemetry:\n  bind_address: \"127.0.0.1\"\n  port: " +
                  std::to_string(g_http_port) + "\nsecurity:\n  allowed_clients: " + s.allowed +
                  "\n  authentication: required\n  auth_timeout_ms: 1000\n  secrets_file: " + secrets +
                  "\n  tenants:\n"
                  "    - name: tenant-a\n"
                  "    - name: tenant-b\n"
                  "    - name: tenant-q\n      max_bytes: 1000\n      max_objects: 2\n"
                  "  principals:\n"
                  "    - name: alice\n      tenant: tenant-a\n      permissions: [read, write, delete]\n"
                  "    - name: reader\n      tenant: tenant-a\n      permissions: [read]\n"
                  "    - name: quota\n      tenant: tenant-q\n      permissions: [read, write, delete]\n     "
                  " max_connections: 1\n"
                  "    - name: carol\n      tenant: tenant-b\n      permissions: [read, write, delete]\n";
  if (s.with_bob) y += "    - name: bob\n      tenant: tenant-b\n      permissions: [read, write, delete]\n";
  y += "logging:\n  level: info\n";
  return y;
}

std::string secrets_text(bool with_bob) {
  std::string t = "secrets:\n  alice: \"hex:" + hex(kAlice) + "\"\n  reader: \"hex:" + hex(kReader) +
                  "\"\n  quota: \"hex:" + hex(kQuota) + "\"\n  carol: \"hex:" + hex(kCarol) + "\"\n";
  if (with_bob) t += "  bob: \"hex:" + hex(kBob) + "\"\n";
  return t;
}

class Auth : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string tag = std::to_string(getpid());
    yaml_ = "/tmp/auth_" + tag + ".yaml";
    secrets_ = "/tmp/auth_" + tag + ".secrets.yaml";
    log_ = "/tmp/auth_" + tag + ".log";
    write_secrets(true);
    daemon_ = new Child();
    started_ = testfix::proc::start_test_gateway(daemon_, g_self, yaml_, yaml_text(secrets_, GatewaySetup{}),
                                                 log_, g_http_port);
  }
  static void TearDownTestSuite() {
    if (daemon_ != nullptr && daemon_->running()) {
      kill(daemon_->pid, SIGTERM);
      daemon_->wait_exit(30s);
    }
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(started_) << "the daemon did not start:\n" << read_file(log_); }

  static void write_secrets(bool with_bob) {
    write_file(secrets_, secrets_text(with_bob));
    chmod(secrets_.c_str(), 0600);
  }
  // Rewrites the config (and secrets), sends SIGHUP (at *sent), waits for the "reloaded" line after the
  // ones seen.
  static bool reload(const GatewaySetup& s, Clock::time_point* sent) {
    const std::size_t before = count(read_file(log_), "msg=reloaded");
    write_secrets(s.with_bob);
    write_file(yaml_, yaml_text(secrets_, s));
    *sent = Clock::now();
    kill(daemon_->pid, SIGHUP);
    return wait_for([&] { return count(read_file(log_), "msg=reloaded") > before; }, 20s);
  }
  static std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
  // An authenticated peer of `principal`, retried while the principal's previous connection (closed by an
  // earlier test) still counts against its max_connections; nullptr after 10 s.
  static std::unique_ptr<Peer> login_when_free(const std::string& principal, const Bytes& secret) {
    std::unique_ptr<Peer> got;
    wait_for(
        [&] {
          auto p = std::make_unique<Peer>();
          if (!p->connect().established || p->authenticate(principal, secret) != 0) return false;
          got = std::move(p);
          return true;
        },
        10s);
    return got;
  }
  // An authenticated peer of `principal`, or nullptr (with a failure recorded).
  static std::unique_ptr<Peer> login(const std::string& principal, const Bytes& secret,
                                     const std::string& src = "") {
    auto p = std::make_unique<Peer>();
    const Connected c = p->connect(src);
    EXPECT_TRUE(c.established) << principal << ": event " << c.event << " reject "
                               << protocol::to_string(c.reject);
    if (!c.established) return nullptr;
    EXPECT_TRUE(p->session().auth_required) << "the accept does not ask for AUTH";
    const int st = p->authenticate(principal, secret);
    EXPECT_EQ(st, 0) << principal << " did not authenticate";
    return st == 0 ? std::move(p) : nullptr;
  }

  static inline Child* daemon_ = nullptr;
  static inline bool started_ = false;
  static inline std::string yaml_, secrets_, log_;
};

Bytes value(std::size_t n, std::uint8_t seed) {
  Bytes v(n);
  std::iota(v.begin(), v.end(), seed);
  return v;
}

constexpr long kOk = 0;
constexpr long kNotFound = static_cast<long>(protocol::ObjectStatus::kNotFound);
constexpr long kForbidden = static_cast<long>(protocol::ObjectStatus::kForbidden);
constexpr long kQuotaExceeded = static_cast<long>(protocol::ObjectStatus::kQuotaExceeded);

// (a) the right secret: the gateway's proof verifies, PUT / GET / DELETE work.
TEST_F(Auth, RightSecretAuthenticatesAndServes) {
  auto alice = login("alice", kAlice);
  ASSERT_NE(alice, nullptr);
  const Bytes v = value(1500, 3);
  Bytes got;
  EXPECT_EQ(alice->put("a-key", v), kOk);
  EXPECT_EQ(alice->get("a-key", &got), kOk);
  EXPECT_EQ(got, v);
  EXPECT_EQ(alice->del("a-key"), kOk);
  EXPECT_EQ(alice->get("a-key", &got), kNotFound);
  EXPECT_TRUE(wait_for([] { return counter("rdmagate_auth_total", {{"result", "ok"}}) >= 1; }, 3s));
}

// (b) refused: wrong secret, no AUTH, an old client, a replayed AUTH, a request before AUTH; each counted,
// while an authenticated client keeps working.
TEST_F(Auth, HostilePeersRefusedOthersServed) {
  auto good = login("alice", kAlice);
  ASSERT_NE(good, nullptr);
  // The authenticated client is served after every hostile case (which also keeps it from being idle past
  // protocol.dead_peer_timeout_ms: this raw peer sends no keepalives of its own).
  std::uint8_t round = 0;
  const auto served = [&] {
    const Bytes v = value(700, ++round);
    Bytes got;
    EXPECT_EQ(good->put("still-here", v), kOk) << "round " << int{round};
    EXPECT_EQ(good->get("still-here", &got), kOk) << "round " << int{round};
    EXPECT_EQ(got, v) << "round " << int{round};
  };
  const double denied0 = counter("rdmagate_auth_total", {{"result", "denied"}});
  const double timeouts0 = counter("rdmagate_auth_failures_total", {{"reason", "auth_timeout"}});
  const double unauth0 = counter("rdmagate_auth_failures_total", {{"reason", "unauthenticated_message"}});
  const double rejects0 = counter("rdmagate_connection_rejects_total", {{"reason", "auth_required"}});

  // Wrong secret: answered denied, then closed by the gateway.
  {
    Peer p;
    ASSERT_TRUE(p.connect().established);
    EXPECT_EQ(p.authenticate("alice", kBob), 1) << "a wrong secret must be answered denied";
    EXPECT_TRUE(p.wait_closed(5s)) << "the gateway kept a denied connection";
  }
  served();
  // Unknown principal: the same answer (indistinguishable on purpose).
  {
    Peer p;
    ASSERT_TRUE(p.connect().established);
    EXPECT_EQ(p.authenticate("mallory", kAlice), 1);
    EXPECT_TRUE(p.wait_closed(5s));
  }
  served();
  // No secret at all: connects and never authenticates: closed after auth_timeout_ms (1 s).
  {
    Peer p;
    ASSERT_TRUE(p.connect().established);
    const auto t = p.wait_closed(10s);
    ASSERT_TRUE(t) << "a connection that never authenticated was not closed";
    std::printf("auth_test: silent connection closed after %.2f s (auth_timeout_ms 1000)\n", *t);
    EXPECT_GE(*t, 0.8) << "closed before its auth timeout";
  }
  served();
  // An old client (no minor >= 2 offered): rejected auth_required.
  {
    Peer p;
    const Connected c = p.connect("", 0b011);
    EXPECT_FALSE(c.established);
    EXPECT_EQ(c.reject, protocol::RejectReason::kAuthRequired);
  }
  served();
  // Replay: record alice's AUTH on one connection, then send its body on a new connection with the same
  // initiator incarnation (so only the gateway's nonce differs).
  {
    protocol::Message recorded;
    std::string name;
    std::uint64_t inc = 0;
    {
      Peer p;
      ASSERT_TRUE(p.connect().established);
      inc = p.incarnation();
      ASSERT_EQ(p.authenticate("alice", kAlice, &recorded), 0);
      name = std::string(recorded.auth_principal);
    }
    recorded.auth_principal = name;
    ASSERT_TRUE(wait_for(
        [] {
          return counter("rdmagate_connections", {{"state", "established"}}) <= 1;
        },
        5s));
    Peer r;
    ASSERT_TRUE(r.connect("", protocol::kSupportedMinorMask, inc).established);
    ASSERT_TRUE(r.send(recorded));
    protocol::Message a;
    Bytes payload;
    ASSERT_TRUE(r.receive(&a, &payload, 10s));
    EXPECT_EQ(a.type, protocol::MessageType::kAuthAnswer);
    EXPECT_EQ(a.auth_status, 1u) << "a replayed AUTH verified";
    EXPECT_TRUE(r.wait_closed(5s));
  }
  served();
  // An object request before AUTH: the connection is closed, nothing answered.
  {
    Peer p;
    ASSERT_TRUE(p.connect().established);
    const Bytes key(protocol::object_payload_size(5, 0), 5);
    protocol::Message get;
    get.type = protocol::MessageType::kInlineRequest;
    get.opcode = static_cast<std::uint16_t>(protocol::ObjectOpcode::kGet);
    get.cookie = 7;
    get.payload = key;
    ASSERT_TRUE(p.send(get));
    EXPECT_TRUE(p.wait_closed(5s)) << "a request before AUTH did not close the connection";
    protocol::Message a;
    Bytes payload;
    EXPECT_FALSE(p.receive(&a, &payload, 100ms)) << "a request before AUTH was answered";
  }
  served();
  EXPECT_EQ(good->del("still-here"), kOk);

  EXPECT_TRUE(wait_for(
      [&] {
        return counter("rdmagate_auth_total", {{"result", "denied"}}) >= denied0 + 3 &&
               counter("rdmagate_auth_failures_total", {{"reason", "auth_timeout"}}) >= timeouts0 + 1 &&
               counter("rdmagate_auth_failures_total", {{"reason", "unauthenticated_message"}}) >=
                   unauth0 + 1 &&
               counter("rdmagate_connection_rejects_total", {{"reason", "auth_required"}}) >= rejects0 + 1;
      },
      3s))
      << metrics();
  std::printf(
      "auth_test: denied %.0f, auth_timeout %.0f, unauthenticated_message %.0f, auth_required rejects %.0f\n",
      counter("rdmagate_auth_total", {{"result", "denied"}}) - denied0,
      counter("rdmagate_auth_failures_total", {{"reason", "auth_timeout"}}) - timeouts0,
      counter("rdmagate_auth_failures_total", {{"reason", "unauthenticated_message"}}) - unauth0,
      counter("rdmagate_connection_rejects_total", {{"reason", "auth_required"}}) - rejects0);
}

// (c) tenants, permissions, quotas.
TEST_F(Auth, TenantsPermissionsAndQuotas) {
  auto alice = login("alice", kAlice);
  auto carol = login("carol", kCarol);  // tenant-b
  auto reader = login("reader", kReader);
  ASSERT_TRUE(alice && carol && reader);
  const Bytes va = value(300, 1), vb = value(200, 50);
  Bytes got;
  EXPECT_EQ(alice->put("x", va), kOk);
  EXPECT_EQ(carol->get("x", &got), kNotFound) << "tenant B read tenant A's x";
  EXPECT_EQ(carol->del("x"), kNotFound) << "tenant B deleted tenant A's x";
  EXPECT_EQ(carol->put("x", vb), kOk);
  EXPECT_EQ(alice->get("x", &got), kOk);
  EXPECT_EQ(got, va) << "tenant B's PUT overwrote tenant A's x";
  EXPECT_EQ(carol->get("x", &got), kOk);
  EXPECT_EQ(got, vb);
  EXPECT_EQ(carol->del("x"), kOk);
  EXPECT_EQ(alice->get("x", &got), kOk) << "tenant B's DELETE removed tenant A's x";
  EXPECT_EQ(got, va);

  // Read-only: GET in its tenant, no PUT, no DELETE.
  EXPECT_EQ(reader->get("x", &got), kOk);
  EXPECT_EQ(got, va);
  EXPECT_EQ(reader->put("x", vb), kForbidden);
  EXPECT_EQ(reader->del("x"), kForbidden);
  EXPECT_EQ(alice->get("x", &got), kOk);
  EXPECT_EQ(got, va) << "a forbidden PUT changed the value";
  EXPECT_EQ(alice->del("x"), kOk);

  // tenant-q: max_bytes 1000, max_objects 2.
  auto q = login_when_free("quota", kQuota);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->put("q1", value(600, 1)), kOk);
  EXPECT_EQ(q->put("q2", value(401, 1)), kQuotaExceeded) << "1001 bytes of 1000";
  EXPECT_EQ(q->put("q2", value(400, 1)), kOk) << "exactly 1000 bytes";
  EXPECT_EQ(q->put("q1", value(601, 1)), kQuotaExceeded) << "a replacement counts the difference";
  EXPECT_EQ(q->put("q1", value(500, 1)), kOk) << "a smaller replacement releases";
  EXPECT_EQ(q->put("q3", value(1, 1)), kQuotaExceeded) << "a third object of 2";
  EXPECT_EQ(q->del("q2"), kOk);
  EXPECT_EQ(q->put("q3", value(500, 1)), kOk) << "exactly 2 objects and 1000 bytes again";
  EXPECT_EQ(q->get("q3", &got), kOk);
  EXPECT_EQ(got, value(500, 1));
  EXPECT_EQ(q->del("q1"), kOk);
  EXPECT_EQ(q->del("q3"), kOk);
}

// (e) a principal's max_connections (quota: 1).
TEST_F(Auth, PrincipalConnectionCap) {
  auto first = login_when_free("quota", kQuota);
  ASSERT_NE(first, nullptr) << "the previous test's connection of `quota` was never released";
  const double limit0 = counter("rdmagate_auth_total", {{"result", "connection_limit"}});
  {
    Peer second;
    ASSERT_TRUE(second.connect().established);
    EXPECT_EQ(second.authenticate("quota", kQuota), 2) << "a second connection of a principal capped at 1";
    EXPECT_TRUE(second.wait_closed(5s));
  }
  Bytes got;
  EXPECT_EQ(first->put("cap", value(10, 1)), kOk) << "the first connection is unaffected";
  EXPECT_EQ(first->del("cap"), kOk);
  first.reset();
  // Once the first is gone, the principal may connect again.
  EXPECT_NE(login_when_free("quota", kQuota), nullptr) << "the closed connection still counts";
  EXPECT_TRUE(wait_for(
      [&] {
        return counter("rdmagate_auth_total", {{"result", "connection_limit"}}) >= limit0 + 1;
      },
      3s));
}

// (d) revocation by SIGHUP: a removed principal, then a source no longer in allowed_clients.
TEST_F(Auth, SighupRevokesPrincipalAndSource) {
  ASSERT_EQ(std::system(("ip addr replace " + std::string(kSecondAddr) + "/24 dev " +
                         (std::getenv("RDMAGATE_RXE_NETDEV") != nullptr ? std::getenv("RDMAGATE_RXE_NETDEV")
                                                                        : "rxe-veth0"))
                            .c_str()),
            0);
  auto alice = login("alice", kAlice);
  auto bob = login("bob", kBob);
  auto remote = login("carol", kCarol, kSecondAddr);
  ASSERT_TRUE(alice && bob && remote);
  const double by_principal0 = counter("rdmagate_connections_revoked_total", {{"reason", "principal"}});
  const double by_source0 = counter("rdmagate_connections_revoked_total", {{"reason", "allowed_clients"}});

  // Bob is removed (config and secrets): his live session is closed within a second of the reload.
  Clock::time_point hup;
  ASSERT_TRUE(reload(GatewaySetup{false, "[\"198.18.0.0/15\"]"}, &hup)) << read_file(log_);
  const auto t_bob = bob->wait_closed(5s, hup);
  ASSERT_TRUE(t_bob) << "bob's session outlived his removal";
  std::printf("auth_test: removed principal's session closed %.3f s after the SIGHUP\n", *t_bob);
  EXPECT_LT(*t_bob, 1.0);
  EXPECT_TRUE(wait_for(
      [&] {
        return counter("rdmagate_connections_revoked_total", {{"reason", "principal"}}) >= by_principal0 + 1;
      },
      1s));
  {
    Peer p;
    ASSERT_TRUE(p.connect().established);
    EXPECT_EQ(p.authenticate("bob", kBob), 1) << "a removed principal authenticated";
  }

  // allowed_clients narrowed to the gateway's own address: the session from kSecondAddr is closed.
  ASSERT_TRUE(reload(GatewaySetup{false, "[\"" + rxe_addr() + "/32\"]"}, &hup)) << read_file(log_);
  const auto t_src = remote->wait_closed(5s, hup);
  ASSERT_TRUE(t_src) << "the session of a source no longer allowed survived the reload";
  std::printf("auth_test: revoked source's session closed %.3f s after the SIGHUP\n", *t_src);
  EXPECT_LT(*t_src, 1.0);
  EXPECT_TRUE(wait_for(
      [&] {
        return counter("rdmagate_connections_revoked_total", {{"reason", "allowed_clients"}}) >=
               by_source0 + 1;
      },
      1s));
  // The reload's own line says how many sessions it revoked, always; the line per session shares the engine's
  // connection-log budget (10 lines a second) with the accepts and closes above, so it may be suppressed.
  const std::string log = read_file(log_);
  EXPECT_NE(log.find("connections revoked: source no longer in security.allowed_clients"), std::string::npos)
      << log;
  {
    Peer p;
    const Connected c = p.connect(kSecondAddr);
    EXPECT_EQ(c.reject, protocol::RejectReason::kNotAllowed);
  }
  // Alice (the gateway's own address, still allowed, principal kept) carries on.
  const Bytes v = value(900, 4);
  Bytes got;
  EXPECT_EQ(alice->put("after", v), kOk);
  EXPECT_EQ(alice->get("after", &got), kOk);
  EXPECT_EQ(got, v);
  EXPECT_EQ(alice->del("after"), kOk);
  std::system(
      ("ip addr del " + std::string(kSecondAddr) + "/24 dev " +
       (std::getenv("RDMAGATE_RXE_NETDEV") != nullptr ? std::getenv("RDMAGATE_RXE_NETDEV") : "rxe-veth0"))
          .c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "daemon") == 0) return rdmagate_main(argc - 1, argv + 1);
  return testfix::rdma_test_main(argc, argv, "auth_test", /*eal_lcores=*/nullptr,
                                 [](const control::RdmaProbe&) {
                                   g_self = testfix::self_exe("auth_test");
                                   if (g_self.empty()) return 1;
                                   g_rdma_port = 7700 + static_cast<int>(getpid() % 300) * 2;
                                   g_http_port = 19500 + static_cast<int>(getpid() % 400);
                                   return 0;
                                 });
}

// A peer that posts no receives, on real RDMA (rxe in the guest; issue 15): a raw verbs peer promises 32
// receives in its handshake and posts none, asks for an ECHO (whose answer the gateway can never deliver) and
// then a PUT by read chunk (the gateway reserves store space and its RDMA READs wait behind the stalled
// answer). The gateway must close it within the bulk deadline (protocol.bulk_timeout_ms, 5 s by default)
// through a finite RNR retry count (a peer fault, rnr_retry_exceeded) or the bulk deadline, release the
// reservation once its device flushed the READs, and keep serving a well-behaved peer meanwhile (PUT and GET
// verified byte for byte). Both peers are raw verbs clients written from docs/protocol.md's rules: handshake
// in the private data, messages by protocol::write_message, one signaled SEND per message.
//
// Lcore layout: gateway_fixture.hpp's (the gateway's core on lcore 1). Without RDMA the binary prints one
// line and exits 77.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "protocol/handshake.hpp"
#include "protocol/incarnation.hpp"
#include "protocol/message.hpp"
#include "protocol/object_wire.hpp"
#include "tests/rdma/gateway_fixture.hpp"

namespace {

using namespace rdmagate;
using Clock = std::chrono::steady_clock;
using testfix::Gateway;
using testfix::GatewayOptions;
using testfix::rxe_addr;

constexpr std::uint32_t kBuf = 4096;
constexpr std::uint32_t kRx = 32;
constexpr std::uint32_t kTx = 16;
constexpr std::size_t kBulk = 256 * 1024;

// A raw rdma_cm/verbs peer of the gateway.
class VerbsPeer {
 public:
  ~VerbsPeer() {
    if (id_ != nullptr && id_->qp != nullptr) rdma_destroy_qp(id_);
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
    if (cq_ != nullptr) ibv_destroy_cq(cq_);
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
    if (id_ != nullptr) rdma_destroy_id(id_);
    if (ch_ != nullptr) rdma_destroy_event_channel(ch_);
  }

  // Resolves the gateway, creates the QP, posts `receives` receives (0: the hostile peer) and connects with a
  // handshake that promises kRx. True once ESTABLISHED and the session is derived.
  bool connect(Gateway& gw, std::uint32_t receives, std::string* err) {
    mem_.assign((kRx + kTx) * std::size_t{kBuf} + kBulk, 0);
    ch_ = rdma_create_event_channel();
    if (ch_ == nullptr || fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK) != 0 ||
        rdma_create_id(ch_, &id_, nullptr, RDMA_PS_TCP) != 0) {
      *err = std::string("rdma_create_id: ") + std::strerror(errno);
      return false;
    }
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(gw.port());
    inet_pton(AF_INET, rxe_addr().c_str(), &dst.sin_addr);
    if (rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) != 0 ||
        wait(gw, RDMA_CM_EVENT_ADDR_RESOLVED, 10) != RDMA_CM_EVENT_ADDR_RESOLVED ||
        rdma_resolve_route(id_, 2000) != 0 ||
        wait(gw, RDMA_CM_EVENT_ROUTE_RESOLVED, 10) != RDMA_CM_EVENT_ROUTE_RESOLVED) {
      *err = "resolving " + rxe_addr() + " failed";
      return false;
    }
    pd_ = ibv_alloc_pd(id_->verbs);
    cq_ = pd_ != nullptr ? ibv_create_cq(id_->verbs, kRx + kTx + 4, nullptr, nullptr, 0) : nullptr;
    mr_ = cq_ != nullptr
              ? ibv_reg_mr(pd_, mem_.data(), mem_.size(),
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)
              : nullptr;
    ibv_qp_init_attr qa{};
    qa.send_cq = qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = kTx;
    qa.cap.max_recv_wr = kRx;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    if (mr_ == nullptr || rdma_create_qp(id_, pd_, &qa) != 0) {
      *err = std::string("pd/cq/mr/qp: ") + std::strerror(errno);
      return false;
    }
    for (std::uint32_t i = 0; i < receives; ++i) post_recv(i);
    self_.incarnation = protocol::make_incarnation();
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
    if (!enc.ok() || rdma_connect(id_, &p) != 0) {
      *err = std::string("rdma_connect: ") + std::strerror(errno);
      return false;
    }
    if (wait(gw, RDMA_CM_EVENT_ESTABLISHED, 10) != RDMA_CM_EVENT_ESTABLISHED) {
      *err = "not established";
      return false;
    }
    if (protocol::complete_connect(sent_, accept_, self_, session_) != protocol::HandshakeError::kOk) {
      *err = "the gateway's accept does not match the request";
      return false;
    }
    return true;
  }

  // Encodes `m` into a free send buffer and posts it (signaled).
  bool send(const protocol::Message& m) {
    reap();
    if (tx_next_ - tx_done_ >= kTx) return false;
    const std::uint32_t slot = tx_next_++ % kTx;
    std::uint8_t* b = tx_buf(slot);
    const std::size_t len = protocol::write_message(m, session_, std::span<std::uint8_t>(b, kBuf));
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

  // The next message the gateway sends (its receive re-posted), polling the gateway meanwhile.
  bool receive(Gateway& gw, protocol::Message* out, std::vector<std::uint8_t>* payload, int seconds) {
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < deadline) {
      gw.poll_st(1);
      ibv_wc wc{};
      if (ibv_poll_cq(cq_, 1, &wc) != 1) continue;
      if ((wc.wr_id & kTxTag) != 0) {
        ++tx_done_;
        continue;
      }
      if (wc.status != IBV_WC_SUCCESS) return false;
      const auto i = static_cast<std::uint32_t>(wc.wr_id);
      rx_copy_.assign(rx_buf(i), rx_buf(i) + wc.byte_len);
      post_recv(i);
      if (protocol::decode_message(rx_copy_, session_, *out) != protocol::WireError::kOk) return false;
      if (out->type == protocol::MessageType::kNoop) continue;
      payload->assign(out->payload.begin(), out->payload.end());
      return true;
    }
    return false;
  }

  // The next rdma_cm event of `want` (or a terminal one), polling the gateway meanwhile; -1 after `seconds`.
  int wait(Gateway& gw, rdma_cm_event_type want, int seconds) {
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < deadline) {
      gw.poll_st(1);
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(ch_, &ev) != 0) continue;
      const int type = ev->event;
      if (type == RDMA_CM_EVENT_ESTABLISHED && ev->param.conn.private_data != nullptr) {
        const auto* d = static_cast<const std::uint8_t*>(ev->param.conn.private_data);
        accept_.assign(d, d + ev->param.conn.private_data_len);
      }
      rdma_ack_cm_event(ev);
      if (type == want || type == RDMA_CM_EVENT_REJECTED || type == RDMA_CM_EVENT_DISCONNECTED ||
          type == RDMA_CM_EVENT_UNREACHABLE || type == RDMA_CM_EVENT_CONNECT_ERROR) {
        return type;
      }
    }
    return -1;
  }

  protocol::Fragment fragment(std::size_t off, std::uint32_t len) const {
    return protocol::Fragment{reinterpret_cast<std::uintptr_t>(bulk() + off), len, mr_->rkey};
  }
  std::uint8_t* bulk() const {
    return const_cast<std::uint8_t*>(mem_.data()) + (kRx + kTx) * std::size_t{kBuf};
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

  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<std::uint8_t> mem_;
  std::vector<std::uint8_t> accept_;
  std::vector<std::uint8_t> rx_copy_;
  protocol::LocalEndpoint self_;
  protocol::HandshakeBody sent_;
  protocol::Session session_;
  std::uint32_t tx_next_ = 0, tx_done_ = 0;
};

protocol::Message request(protocol::MessageType t, protocol::ObjectOpcode op, std::uint64_t cookie,
                          std::span<const std::uint8_t> payload) {
  protocol::Message m;
  m.type = t;
  m.opcode = static_cast<std::uint16_t>(op);
  m.cookie = cookie;
  m.payload = payload;
  return m;
}

std::vector<std::uint8_t> object_payload(std::string_view key, std::span<const std::uint8_t> value = {}) {
  std::vector<std::uint8_t> p(protocol::object_payload_size(key.size(), value.size()));
  protocol::encode_object_payload(key, value, p);
  return p;
}

TEST(NonReceivingPeer, ClosedWithinTheDeadlineReservationReleasedOthersServed) {
  GatewayOptions o;
  std::string err;
  auto gw = Gateway::start(o, &err);
  ASSERT_NE(gw, nullptr) << err;
  const auto& k = gw->engine().core(0).counters;

  VerbsPeer bad;
  ASSERT_TRUE(bad.connect(*gw, 0, &err)) << err;
  const std::vector<std::uint8_t> hello(64, 0x5a);
  std::vector<std::uint8_t> value(64 * 1024);
  std::iota(value.begin(), value.end(), std::uint8_t{1});
  std::memcpy(bad.bulk(), value.data(), value.size());
  const std::vector<std::uint8_t> key = object_payload("stalled");
  protocol::Message put =
      request(protocol::MessageType::kReadChunkRequest, protocol::ObjectOpcode::kPut, 2, key);
  put.chunk.count = 1;
  put.chunk.fragments[0] = bad.fragment(0, static_cast<std::uint32_t>(value.size()));
  const auto t0 = Clock::now();
  ASSERT_TRUE(
      bad.send(request(protocol::MessageType::kInlineRequest, protocol::ObjectOpcode::kEcho, 1, hello)));
  ASSERT_TRUE(bad.send(put));

  // Meanwhile a well-behaved peer stores and reads back a value.
  VerbsPeer good;
  ASSERT_TRUE(good.connect(*gw, kRx, &err)) << err;
  std::vector<std::uint8_t> gv(2000);
  std::iota(gv.begin(), gv.end(), std::uint8_t{7});
  const std::vector<std::uint8_t> gput = object_payload("good", gv);
  const std::vector<std::uint8_t> gkey = object_payload("good");
  protocol::Message m;
  std::vector<std::uint8_t> payload;
  ASSERT_TRUE(
      good.send(request(protocol::MessageType::kInlineRequest, protocol::ObjectOpcode::kPut, 11, gput)));
  ASSERT_TRUE(good.receive(*gw, &m, &payload, 10));
  EXPECT_EQ(m.cookie, 11u);
  EXPECT_EQ(m.status, 0u);
  ASSERT_TRUE(
      good.send(request(protocol::MessageType::kInlineRequest, protocol::ObjectOpcode::kGet, 12, gkey)));
  ASSERT_TRUE(good.receive(*gw, &m, &payload, 10));
  EXPECT_EQ(m.cookie, 12u);
  EXPECT_EQ(m.status, 0u);
  EXPECT_EQ(payload, gv) << "the good peer's GET";

  // The bad peer is closed within the deadline (5 s) plus the close's own time.
  const int ev = bad.wait(*gw, RDMA_CM_EVENT_DISCONNECTED, 15);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  // Its connection is gone at the gateway and the reservation with it.
  for (int i = 0; i < 5000 && (gw->engine().connection_count() > 1 || k.closed < 1); ++i) gw->poll_st(1);
  const auto& sc = gw->store().stats();
  std::printf(
      "nonreceiving_peer: closed after %.3f s (event %d); rnr_retry_exceeded %llu, bulk_timeouts %llu, "
      "completion errors %llu, flushed %llu; store objects %llu used %llu bytes; good peer verified %zu "
      "bytes\n",
      secs, ev,
      static_cast<unsigned long long>(
          k.peer_faults[static_cast<std::size_t>(dataplane::PeerFault::kRnrRetryExceeded)]),
      static_cast<unsigned long long>(k.bulk_timeouts), static_cast<unsigned long long>(k.completions_error),
      static_cast<unsigned long long>(k.completions_flushed), static_cast<unsigned long long>(sc.objects),
      static_cast<unsigned long long>(sc.used_bytes), gv.size());
  EXPECT_EQ(ev, RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_LT(secs, 5.0 + 3.0);
  EXPECT_GE(
      k.peer_faults[static_cast<std::size_t>(dataplane::PeerFault::kRnrRetryExceeded)] + k.bulk_timeouts, 1u);
  EXPECT_EQ(k.closed, 1u);
  EXPECT_EQ(sc.objects, 1u) << "only the good peer's value is published";
  EXPECT_EQ(gw->store().remove(0, "good"), store::Status::kOk);
  EXPECT_TRUE(gw->store_empty()) << "the stalled PUT's reservation is still held";
}

}  // namespace

int main(int argc, char** argv) {
  return rdmagate::testfix::gateway_test_main(argc, argv, "nonreceiving_peer_test");
}

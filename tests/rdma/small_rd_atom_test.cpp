// The control plane's bounds on what a peer asks of rdma_cm (issue 15), on real RDMA (rxe in the guest): two
// engines in one process, or one engine and a raw rdma_cm peer.
//  - a peer offering responder_resources 1 (and initiator depth 1) works at its depth: the server's RDMA
//  READs of
//    a 4-fragment read chunk go one at a time (the other three wait behind the clamped initiator depth), and
//    the read and write chunks of 4 KiB, 64 KiB and 1 MiB are verified byte for byte;
//  - a request asking rnr_retry_count 7 (retry forever) or responder_resources 0 is rejected bad_conn_param;
//  - a peer that sends a connect request and destroys its id at once is counted as an abandoned request
//    (peer_gone), not as a no_resources reject, and the server stays usable;
//  - admission per source: the connection cap and the request rate reject source_limit (a raw peer that never
//    completes its handshake is no use there: with no QP its rdma_cm refuses the accept and frees its place).
//
// Lcore layout (2 vCPUs): EAL --lcores=0@0,1@1,2@0. The main thread drives both control loops. Without RDMA
// the binary prints one line and exits 77.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "control/engine.hpp"
#include "control/rdma_device.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "protocol/handshake.hpp"
#include "protocol/incarnation.hpp"
#include "tests/rdma/bulk_echo_client.hpp"
#include "tests/rdma/engine_poll.hpp"
#include "tests/rdma/rdma_test_main.hpp"
#include "tests/rdma/small_engine.hpp"
#include "tests/support/test_services.hpp"

namespace {

using namespace rdmagate;
using control::Engine;
using control::EngineConfig;
using Clock = std::chrono::steady_clock;
using rdmagate::testfix::rxe_addr;

std::string g_device;
constexpr unsigned kServerLcore = 1;
constexpr unsigned kClientLcore = 2;
constexpr std::uint32_t kBufSize = rdmagate::testfix::kSmallEngineMessage;

EngineConfig engine_config(const char* name, bool passive, unsigned lcore) {
  return rdmagate::testfix::small_engine_config(name, g_device, passive, lcore);
}

using rdmagate::testfix::poll_all;

void create_engine(const EngineConfig& cfg, std::unique_ptr<Engine>& out) {
  std::string err;
  out = Engine::create(cfg, &err);
  ASSERT_TRUE(out) << err;
}

template <typename Service>
void launch(Engine& engine, Service& service) {
  std::vector<std::unique_ptr<control::CoreRunner>> runners;
  runners.push_back(dataplane::make_core_runner(engine.backend_kind(), engine.core(0), service));
  std::string err;
  ASSERT_TRUE(engine.launch_cores(std::move(runners), &err)) << err;
}

std::uint64_t rejects(const Engine& e, protocol::RejectReason r) {
  return e.counters().rejects_sent[static_cast<std::size_t>(r)];
}
std::uint64_t abandoned(const Engine& e, control::AbandonReason r) {
  return e.counters().abandoned[static_cast<std::size_t>(r)];
}

using rdmagate::testfix::BulkClient;  // engine_echo_test's EngineBulk client

// ---- a raw rdma_cm peer: what another implementation, or a hostile one, can put in its connect request
// -------

class RawPeer {
 public:
  ~RawPeer() {
    if (id_ != nullptr) rdma_destroy_id(id_);
    if (ch_ != nullptr) rdma_destroy_event_channel(ch_);
  }
  // Resolves the server's address and route (the server's control loop is polled meanwhile).
  bool open(Engine& server, std::uint16_t port, std::string* err) {
    ch_ = rdma_create_event_channel();
    if (ch_ == nullptr || fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK) != 0 ||
        rdma_create_id(ch_, &id_, nullptr, RDMA_PS_TCP) != 0) {
      *err = std::string("rdma_create_id: ") + std::strerror(errno);
      return false;
    }
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(port);
    inet_pton(AF_INET, rxe_addr().c_str(), &dst.sin_addr);
    if (rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) != 0 ||
        wait(server, RDMA_CM_EVENT_ADDR_RESOLVED) != RDMA_CM_EVENT_ADDR_RESOLVED ||
        rdma_resolve_route(id_, 2000) != 0 ||
        wait(server, RDMA_CM_EVENT_ROUTE_RESOLVED) != RDMA_CM_EVENT_ROUTE_RESOLVED) {
      *err = "resolving " + rxe_addr() + " failed";
      return false;
    }
    return true;
  }
  // A well-formed connect request (the handshake of our own protocol) with the given rdma_cm parameters; no
  // QP (the server never learns the difference before it accepts, and this peer never gets that far).
  bool connect(std::uint8_t responder_resources, std::uint8_t initiator_depth, std::uint8_t rnr_retry) {
    protocol::LocalEndpoint self;
    self.incarnation = protocol::make_incarnation();
    self.params = protocol::ConnParams{32, kBufSize, protocol::kMaxFragments, 1u << 20};
    self.min_queue_depth = protocol::kMinCreditQueueDepth;
    const protocol::HandshakeBody body = protocol::make_connect_request(self, self.params, 0);
    const auto enc = protocol::encode_handshake(body, buf_);
    if (!enc.ok()) return false;
    rdma_conn_param p{};
    p.private_data = buf_;
    p.private_data_len = static_cast<std::uint8_t>(enc.size);
    p.responder_resources = responder_resources;
    p.initiator_depth = initiator_depth;
    p.retry_count = 7;
    p.rnr_retry_count = rnr_retry;
    p.qp_num = 0x1234;  // no QP of ours: rdma_connect then sends the REQ as is
    return rdma_connect(id_, &p) == 0;
  }
  // Destroys the id at once: its CM answers the server with a REJ (the request is abandoned).
  void vanish() {
    rdma_destroy_id(id_);
    id_ = nullptr;
  }
  // The next event (polling the server meanwhile), or -1 after 10 s. A REJECTED one leaves its reason.
  int wait(Engine& server, rdma_cm_event_type want) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      server.poll_st(1);
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(ch_, &ev) != 0) continue;
      const int type = ev->event;
      if (type == RDMA_CM_EVENT_REJECTED && ev->param.conn.private_data != nullptr) {
        protocol::HandshakeBody b;
        const auto* d = static_cast<const std::uint8_t*>(ev->param.conn.private_data);
        if (protocol::decode_handshake(std::span<const std::uint8_t>(d, ev->param.conn.private_data_len),
                                       protocol::HandshakeKind::kReject,
                                       b) == protocol::HandshakeError::kOk) {
          reason_ = b.reason;
        }
      }
      rdma_ack_cm_event(ev);
      if (type == want || type == RDMA_CM_EVENT_REJECTED || type == RDMA_CM_EVENT_ESTABLISHED ||
          type == RDMA_CM_EVENT_ADDR_ERROR || type == RDMA_CM_EVENT_ROUTE_ERROR ||
          type == RDMA_CM_EVENT_UNREACHABLE || type == RDMA_CM_EVENT_CONNECT_ERROR ||
          type == RDMA_CM_EVENT_CONNECT_RESPONSE) {
        return type;
      }
    }
    return -1;
  }
  protocol::RejectReason reason() const { return reason_; }

 private:
  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  std::uint8_t buf_[protocol::kMaxHandshakeSize] = {};
  protocol::RejectReason reason_ = protocol::RejectReason::kNone;
};

struct Server {
  std::unique_ptr<Engine> engine;
  dataplane::EchoService echo;
  std::uint16_t port = 0;
};

void start_server(Server& s, EngineConfig cfg) {
  cfg.cores[0].bulk_bytes_per_conn = 1024 * 1024;
  ASSERT_NO_FATAL_FAILURE(create_engine(cfg, s.engine));
  ASSERT_NO_FATAL_FAILURE(launch(*s.engine, s.echo));
  std::string err;
  s.port = s.engine->listen(rxe_addr(), 0, &err);
  ASSERT_NE(s.port, 0) << err;
}

void stop(Engine& e) {
  e.begin_shutdown_st();
  poll_all([&] { return e.drained_st(); }, std::chrono::seconds(20), e);
  e.stop_cores_st();
}

TEST(SmallRdAtom, PeerOfferingOneResponderResourceWorksAtItsDepth) {
  Server s;
  ASSERT_NO_FATAL_FAILURE(start_server(s, engine_config("server", true, kServerLcore)));
  EngineConfig ccfg = engine_config("client", false, kClientLcore);
  ccfg.max_rd_atom = 1;  // offers responder_resources 1 and initiator_depth 1
  ccfg.cores[0].bulk_bytes_per_conn = 2 * 1024 * 1024 + 2 * BulkClient::kGuard;
  std::unique_ptr<Engine> client;
  ASSERT_NO_FATAL_FAILURE(create_engine(ccfg, client));
  BulkClient bulk;
  ASSERT_NO_FATAL_FAILURE(launch(*client, bulk));
  std::string err;
  ASSERT_NE(client->connect(rxe_addr(), s.port, &err), 0u) << err;
  const bool ok = poll_all([&] { return bulk.done.load() == 1 || bulk.failed.load() != 0; },
                           std::chrono::seconds(90), *s.engine, *client);
  ASSERT_EQ(s.engine->connections().size(), 1u);
  const control::Connection& sc = *s.engine->connections()[0];
  const auto& counters = s.engine->core(0).counters;
  std::printf(
      "small_rd_atom: server initiator depth %d, responder resources %d (device offers %d); %llu bytes "
      "verified; read chunks %llu, write chunks %llu, READs queued behind the depth %llu, fail status %u\n",
      sc.initiator_depth(), sc.responder_resources(), s.engine->device().limits().max_qp_init_rd_atom,
      static_cast<unsigned long long>(bulk.verified_bytes.load()),
      static_cast<unsigned long long>(counters.read_chunks),
      static_cast<unsigned long long>(counters.write_chunks),
      static_cast<unsigned long long>(counters.rdma_reads_queued), bulk.fail_status.load());
  EXPECT_TRUE(ok);
  EXPECT_EQ(bulk.failed.load(), 0);
  EXPECT_EQ(bulk.verified_bytes.load(), 4096u + 65536u + 1048576u);
  EXPECT_EQ(sc.initiator_depth(), 1) << "clamped to the peer's responder resources";
  EXPECT_EQ(sc.responder_resources(), 1) << "clamped to the peer's initiator depth";
  EXPECT_EQ(counters.read_chunks, 3u);
  EXPECT_EQ(counters.write_chunks, 3u);
  EXPECT_EQ(counters.rdma_reads_queued, 9u)
      << "each 4-fragment read chunk had 3 READs waiting behind depth 1";
  EXPECT_EQ(s.engine->counters().core_failures, 0u);
  client->begin_shutdown_st();
  poll_all([&] { return client->drained_st() && s.engine->drained_st(); }, std::chrono::seconds(30),
           *s.engine, *client);
  client->stop_cores_st();
  stop(*s.engine);
}

TEST(ConnParams, InfiniteRnrRetryAndNoResponderResourcesRejectedBadConnParam) {
  Server s;
  ASSERT_NO_FATAL_FAILURE(start_server(s, engine_config("server", true, kServerLcore)));
  struct Case {
    std::uint8_t resp, init, rnr;
    protocol::RejectReason want;
  };
  const Case cases[] = {{4, 4, 7, protocol::RejectReason::kBadConnParam},
                        {0, 4, 3, protocol::RejectReason::kBadConnParam}};
  for (const Case& c : cases) {
    RawPeer p;
    std::string err;
    ASSERT_TRUE(p.open(*s.engine, s.port, &err)) << err;
    ASSERT_TRUE(p.connect(c.resp, c.init, c.rnr));
    EXPECT_EQ(p.wait(*s.engine, RDMA_CM_EVENT_REJECTED), RDMA_CM_EVENT_REJECTED);
    EXPECT_EQ(p.reason(), c.want) << "resp " << int{c.resp} << " rnr " << int{c.rnr};
  }
  EXPECT_EQ(rejects(*s.engine, protocol::RejectReason::kBadConnParam), 2u);
  EXPECT_EQ(rejects(*s.engine, protocol::RejectReason::kNoResources), 0u);
  EXPECT_EQ(s.engine->connection_count(), 0u);
  stop(*s.engine);
}

TEST(Abandoned, PeerThatVanishesMidHandshakeIsNotANoResourcesReject) {
  Server s;
  ASSERT_NO_FATAL_FAILURE(start_server(s, engine_config("server", true, kServerLcore)));
  constexpr int kPeers = 10;
  for (int i = 0; i < kPeers; ++i) {
    RawPeer p;
    std::string err;
    ASSERT_TRUE(p.open(*s.engine, s.port, &err)) << err;
    ASSERT_TRUE(p.connect(4, 4, 3));
    p.vanish();  // its CM sends the server a REJ before the server has even looked at the request
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Every request is handled (a connection object for each is reaped again) and none is left behind.
  const bool settled = poll_all(
      [&] { return s.engine->counters().connect_requests == kPeers && s.engine->connection_count() == 0; },
      std::chrono::seconds(30), *s.engine);
  const auto& c = s.engine->counters();
  std::printf(
      "abandoned: %llu requests, %llu abandoned (peer_gone), %llu no_resources rejects, %llu accepts\n",
      static_cast<unsigned long long>(c.connect_requests),
      static_cast<unsigned long long>(abandoned(*s.engine, control::AbandonReason::kPeerGone)),
      static_cast<unsigned long long>(rejects(*s.engine, protocol::RejectReason::kNoResources)),
      static_cast<unsigned long long>(c.accepts));
  EXPECT_TRUE(settled) << s.engine->describe_connections_st();
  EXPECT_EQ(rejects(*s.engine, protocol::RejectReason::kNoResources), 0u) << "slots were free all along";
  EXPECT_EQ(abandoned(*s.engine, control::AbandonReason::kPeerGone) + c.accepts,
            static_cast<std::uint64_t>(kPeers))
      << "each vanished request is either abandoned or was accepted before its REJ arrived";
  EXPECT_GE(abandoned(*s.engine, control::AbandonReason::kPeerGone), 1u);
  // The server still serves: a real client gets its connection.
  std::unique_ptr<Engine> client;
  ASSERT_NO_FATAL_FAILURE(create_engine(engine_config("client", false, kClientLcore), client));
  dataplane::EchoService idle;
  ASSERT_NO_FATAL_FAILURE(launch(*client, idle));
  std::string err;
  ASSERT_NE(client->connect(rxe_addr(), s.port, &err, false), 0u) << err;
  EXPECT_TRUE(
      poll_all([&] { return client->owned_count() == 1; }, std::chrono::seconds(20), *s.engine, *client));
  client->begin_shutdown_st();
  poll_all([&] { return client->drained_st() && s.engine->drained_st(); }, std::chrono::seconds(30),
           *s.engine, *client);
  client->stop_cores_st();
  stop(*s.engine);
}

// Engines connecting from the guest's one address: `n` connections, no reconnect; polled until each is owned
// or has given up. Returns how many were refused source_limit.
int connect_n(Server& s, Engine& client, int n) {
  std::vector<std::uint64_t> ids;
  std::string err;
  for (int i = 0; i < n; ++i) ids.push_back(client.connect(rxe_addr(), s.port, &err, /*reconnect=*/false));
  poll_all(
      [&] {
        for (const std::uint64_t id : ids) {
          const control::Connection* c = client.find(id);
          if (c != nullptr && c->lifecycle().state() != control::State::kOwnedByCore) return false;
        }
        return true;
      },
      std::chrono::seconds(30), *s.engine, client);
  return static_cast<int>(
      client.counters().rejects_received[static_cast<std::size_t>(protocol::RejectReason::kSourceLimit)]);
}

TEST(Admission, ConnectionCapPerSourceRejectsSourceLimit) {
  Server s;
  EngineConfig cfg = engine_config("server", true, kServerLcore);
  cfg.max_conns_per_source = 2;
  ASSERT_NO_FATAL_FAILURE(start_server(s, cfg));
  std::unique_ptr<Engine> client;
  ASSERT_NO_FATAL_FAILURE(create_engine(engine_config("client", false, kClientLcore), client));
  dataplane::EchoService idle;
  ASSERT_NO_FATAL_FAILURE(launch(*client, idle));
  EXPECT_EQ(connect_n(s, *client, 3), 1);
  EXPECT_EQ(client->owned_count(), 2u);
  EXPECT_EQ(rejects(*s.engine, protocol::RejectReason::kSourceLimit), 1u);
  client->begin_shutdown_st();
  poll_all([&] { return client->drained_st() && s.engine->drained_st(); }, std::chrono::seconds(30),
           *s.engine, *client);
  client->stop_cores_st();
  // Closed connections give their places back: the source is forgotten.
  EXPECT_EQ(s.engine->admission().sources(), 0u);
  stop(*s.engine);
}

TEST(Admission, RequestRatePerSourceRejectsSourceLimit) {
  Server s;
  EngineConfig cfg = engine_config("server", true, kServerLcore);
  cfg.connect_rate = 0.001;  // no refill within the test
  cfg.connect_burst = 3;
  ASSERT_NO_FATAL_FAILURE(start_server(s, cfg));
  std::unique_ptr<Engine> client;
  ASSERT_NO_FATAL_FAILURE(create_engine(engine_config("client", false, kClientLcore), client));
  dataplane::EchoService idle;
  ASSERT_NO_FATAL_FAILURE(launch(*client, idle));
  EXPECT_EQ(connect_n(s, *client, 5), 2);
  EXPECT_EQ(client->owned_count(), 3u);
  EXPECT_EQ(rejects(*s.engine, protocol::RejectReason::kSourceLimit), 2u);
  client->begin_shutdown_st();
  poll_all([&] { return client->drained_st() && s.engine->drained_st(); }, std::chrono::seconds(30),
           *s.engine, *client);
  client->stop_cores_st();
  stop(*s.engine);
}

}  // namespace

int main(int argc, char** argv) {
  return rdmagate::testfix::rdma_test_main(argc, argv, "small_rd_atom_test", "0@0,1@1,2@0",
                                           [](const rdmagate::control::RdmaProbe&) {
                                             g_device = rdmagate::testfix::rdma_device();
                                             return 0;
                                           });
}

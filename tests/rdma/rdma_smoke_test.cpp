// First real RDMA test: EAL hugepage memory + verbs + rdma_cm working together in one process.
//
// The server side runs on the main lcore (the control-plane role), the client on a worker lcore. Both
// busy-poll their CQs (no completion channels) and every wait has a deadline, so a lost peer fails the
// test instead of hanging it. Without RDMA the binary prints one line and exits 77 (CTest: skipped).
//
// Environment: RDMAGATE_RXE_DEV (device; default: the only one), RDMAGATE_RXE_ADDR (default 198.18.0.1),
// RDMAGATE_TEST_PORT (default 0: ephemeral), RDMAGATE_IN_GUEST=1 (hugepages are then mandatory).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_pause.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/rdma_device.hpp"
#include "dataplane/eal_runtime.hpp"
#include "dataplane/huge_buffer.hpp"
#include "tests/rdma/rdma_test_main.hpp"

namespace {

using rdmagate::control::RdmaDevice;
using rdmagate::control::RdmaProbe;
using rdmagate::dataplane::EalRuntime;
using rdmagate::dataplane::HugeBuffer;
using rdmagate::dataplane::HugeBufferKind;
using Clock = std::chrono::steady_clock;

constexpr auto kStepTimeout = std::chrono::seconds(15);  // any single wait (event, completion, peer)
constexpr int kResolveTimeoutMs = 5000;

using rdmagate::testfix::test_eal;  // the EAL main() started
std::string g_device_name;

bool in_guest() {
  const char* v = std::getenv("RDMAGATE_IN_GUEST");
  return v != nullptr && std::strcmp(v, "1") == 0;
}
using rdmagate::testfix::rxe_addr;
uint16_t test_port() {
  const char* v = std::getenv("RDMAGATE_TEST_PORT");
  return v != nullptr ? static_cast<uint16_t>(std::atoi(v)) : 0;
}
std::string errno_str(int e) { return std::strerror(e); }
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// ---- test wire formats (private data and messages) ----
constexpr uint32_t kHelloMagic = 0x52474331;   // "RGC1"
constexpr uint32_t kAcceptMagic = 0x52474131;  // "RGA1"
constexpr uint32_t kDoneMagic = 0x5247444e;    // "RGDN"
constexpr uint32_t kAckMagic = 0x5247414b;     // "RGAK"
constexpr uint64_t kToken = 0x0123456789abcdefull;

struct ClientHello {
  uint32_t magic;
  uint16_t major;
  uint16_t minor;
  uint64_t token;
  uint32_t recv_depth;
  uint32_t max_msg;
};
// IB CM carries 92 bytes of REQ private data, of which rdma_cm's own header takes 36.
static_assert(sizeof(ClientHello) <= 56, "connect private data must fit an IB CM REQ through rdma_cm");

struct ServerAccept {
  uint32_t magic;
  uint32_t rkey;
  uint64_t addr;
  uint64_t len;
  uint64_t token_echo;
  uint32_t recv_depth;
  uint32_t pad;
};
static_assert(sizeof(ServerAccept) <= 196, "accept private data must fit an IB CM REP");

struct DoneMsg {
  uint32_t magic;
  uint32_t write_len;
  uint64_t checksum;
};
struct AckMsg {
  uint32_t magic;
  uint32_t status;  // 0: the server saw the SEND bytes and the RDMA WRITE bytes intact
  uint64_t checksum;
};

// ---- buffer layout: one EAL buffer, server half and client half ----
constexpr size_t kBufferBytes = size_t{4} << 20;  // two 2 MiB hugepages
constexpr size_t kHalf = kBufferBytes / 2;
constexpr size_t kSlot = 256;  // receive slot
constexpr size_t kRecvSlots = 4;
constexpr size_t kSendOff = 4096;
constexpr size_t kWriteOff = size_t{64} << 10;
constexpr size_t kWriteLen = size_t{256} << 10;
constexpr size_t kGuardLen = 4096;  // after the write area: must stay zero
constexpr uint32_t kSendLen = 200;
static_assert(kRecvSlots * kSlot <= kSendOff && kSendOff + kSlot <= kWriteOff, "layout overlaps");
static_assert(kWriteOff + kWriteLen + kGuardLen <= kHalf, "layout exceeds a half");
static_assert(sizeof(DoneMsg) <= kSlot && sizeof(AckMsg) <= kSlot && kSendLen <= kSlot, "message exceeds a slot");

uint8_t send_pattern(size_t i) { return static_cast<uint8_t>(i * 7 + 3); }
uint8_t write_pattern(size_t i) { return static_cast<uint8_t>((i * 131 + 17) ^ (i >> 8)); }
uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

enum WrId : uint64_t {
  kWrRecv0 = 100,  // + slot
  kWrSend = 200,
  kWrWrite = 201,
  kWrDone = 202,
  kWrAck = 203,
};

// What both sides share: memory registered once on the device's PD, plus the results they report.
struct Shared {
  ibv_context* ctx{nullptr};
  ibv_pd* pd{nullptr};
  ibv_mr* server_mr{nullptr};  // LOCAL_WRITE | REMOTE_WRITE: the client writes into it (test only)
  ibv_mr* client_mr{nullptr};  // LOCAL_WRITE
  uint8_t* server_base{nullptr};
  uint8_t* client_base{nullptr};
  sockaddr_in addr{};
  std::atomic<uint16_t> port{0};
  std::atomic<bool> abort{false};

  std::string server_error;
  std::string client_error;
  bool listen_on_device{false};
  bool server_id_on_device{false};
  bool client_id_on_device{false};
  ClientHello hello_seen{};
  size_t hello_len{0};
  ServerAccept accept_seen{};
  size_t accept_len{0};
  uint32_t server_qp{0};
  uint32_t client_qp{0};
  uint32_t send_byte_len{0};
  bool send_bytes_ok{false};
  uint32_t done_byte_len{0};
  DoneMsg done_seen{};
  uint64_t server_checksum{0};
  bool write_bytes_ok{false};
  bool guard_ok{false};
  uint32_t ack_byte_len{0};
  AckMsg ack_seen{};
  bool server_disconnected{false};
  bool client_disconnected{false};
  double connect_ms{0};
  double write_ms{0};
  double total_ms{0};
};

struct CmEvent {
  rdma_cm_event_type type{};
  int status{0};
  rdma_cm_id* id{nullptr};
  std::vector<uint8_t> private_data;
};

// One side's rdma_cm and verbs objects. teardown() undoes setup in reverse order and is safe from any
// half-built state and more than once.
struct CmSide {
  rdma_event_channel* channel{nullptr};
  rdma_cm_id* listen_id{nullptr};
  rdma_cm_id* id{nullptr};
  ibv_cq* cq{nullptr};
  bool has_qp{false};

  ~CmSide() { teardown(); }
  void teardown() {
    if (has_qp) rdma_destroy_qp(id);
    has_qp = false;
    if (cq != nullptr && ibv_destroy_cq(cq) != 0) std::fprintf(stderr, "smoke: ibv_destroy_cq: %m\n");
    cq = nullptr;
    if (id != nullptr && rdma_destroy_id(id) != 0) std::fprintf(stderr, "smoke: rdma_destroy_id: %m\n");
    id = nullptr;
    if (listen_id != nullptr && rdma_destroy_id(listen_id) != 0) std::fprintf(stderr, "smoke: rdma_destroy_id: %m\n");
    listen_id = nullptr;
    if (channel != nullptr) rdma_destroy_event_channel(channel);
    channel = nullptr;
  }
};

bool open_channel(CmSide* side, std::string* err) {
  side->channel = rdma_create_event_channel();
  if (side->channel == nullptr) {
    *err = "rdma_create_event_channel: " + errno_str(errno);
    return false;
  }
  const int fl = fcntl(side->channel->fd, F_GETFL);
  if (fl < 0 || fcntl(side->channel->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    *err = "fcntl(O_NONBLOCK) on the rdma_cm channel: " + errno_str(errno);
    return false;
  }
  return true;
}

// Waits for the next rdma_cm event, copying what we need (private data lives only until the ack).
bool wait_event(rdma_event_channel* ch, Clock::time_point deadline, const std::atomic<bool>& abort, CmEvent* out,
                std::string* err) {
  for (;;) {
    if (abort.load(std::memory_order_relaxed)) {
      *err = "aborted while waiting for an rdma_cm event (the peer failed)";
      return false;
    }
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) == 0) {
      out->type = ev->event;
      out->status = ev->status;
      out->id = ev->id;
      out->private_data.assign(
          static_cast<const uint8_t*>(ev->param.conn.private_data),
          static_cast<const uint8_t*>(ev->param.conn.private_data) +
              (ev->param.conn.private_data != nullptr ? ev->param.conn.private_data_len : 0));
      rdma_ack_cm_event(ev);
      return true;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      *err = "rdma_get_cm_event: " + errno_str(errno);
      return false;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      *err = "timed out waiting for an rdma_cm event";
      return false;
    }
    pollfd pfd{ch->fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    if (poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left + 1, 20))) < 0 && errno != EINTR) {
      *err = "poll on the rdma_cm channel: " + errno_str(errno);
      return false;
    }
  }
}

bool expect_event(rdma_event_channel* ch, rdma_cm_event_type want, const std::atomic<bool>& abort, CmEvent* out,
                  std::string* err) {
  if (!wait_event(ch, Clock::now() + kStepTimeout, abort, out, err)) {
    *err += std::string(" (expected ") + rdma_event_str(want) + ")";
    return false;
  }
  if (out->type != want) {
    *err = std::string("expected ") + rdma_event_str(want) + ", got " + rdma_event_str(out->type) + " (status " +
           std::to_string(out->status) + ")";
    return false;
  }
  return true;
}

// Busy-polls one completion with a deadline and checks it.
bool poll_one(ibv_cq* cq, const std::atomic<bool>& abort, ibv_wc_opcode want_op, uint64_t want_wr, ibv_wc* wc,
              std::string* err) {
  const auto deadline = Clock::now() + kStepTimeout;
  for (uint64_t spins = 0;; ++spins) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) {
      *err = "ibv_poll_cq failed (" + std::to_string(n) + ")";
      return false;
    }
    if (n == 1) break;
    if ((spins & 0xff) == 0) {
      if (abort.load(std::memory_order_relaxed)) {
        *err = "aborted while polling the cq (the peer failed)";
        return false;
      }
      if (Clock::now() >= deadline) {
        *err = "timed out polling the cq for wr_id " + std::to_string(want_wr);
        return false;
      }
    }
    rte_pause();
  }
  if (wc->status != IBV_WC_SUCCESS) {
    char b[160];
    std::snprintf(b, sizeof(b), "completion error on qp 0x%x: %s (wr_id %llu, vendor_err 0x%x)", wc->qp_num,
                  ibv_wc_status_str(wc->status), static_cast<unsigned long long>(wc->wr_id), wc->vendor_err);
    *err = b;
    return false;
  }
  if (wc->opcode != want_op || wc->wr_id != want_wr) {
    *err = "unexpected completion: opcode " + std::to_string(wc->opcode) + " wr_id " + std::to_string(wc->wr_id) +
           ", wanted opcode " + std::to_string(want_op) + " wr_id " + std::to_string(want_wr);
    return false;
  }
  return true;
}

bool create_qp(CmSide* side, rdma_cm_id* id, ibv_pd* pd, std::string* err) {
  side->cq = ibv_create_cq(id->verbs, 32, nullptr, nullptr, 0);  // no completion channel: polled
  if (side->cq == nullptr) {
    *err = "ibv_create_cq: " + errno_str(errno);
    return false;
  }
  ibv_qp_init_attr qa{};
  qa.send_cq = side->cq;
  qa.recv_cq = side->cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = 8;
  qa.cap.max_recv_wr = 8;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qa.sq_sig_all = 0;
  if (rdma_create_qp(id, pd, &qa) != 0) {
    *err = "rdma_create_qp: " + errno_str(errno);
    return false;
  }
  side->has_qp = true;
  return true;
}

bool post_recv(ibv_qp* qp, ibv_mr* mr, uint8_t* addr, uint32_t len, uint64_t wr_id, std::string* err) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(addr), len, mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  const int ret = ibv_post_recv(qp, &wr, &bad);
  if (ret != 0) {
    *err = "ibv_post_recv on qp " + std::to_string(qp->qp_num) + ": " + errno_str(ret);
    return false;
  }
  return true;
}

bool post_send(ibv_qp* qp, ibv_wr_opcode op, ibv_mr* mr, uint8_t* addr, uint32_t len, uint64_t wr_id,
               uint64_t remote_addr, uint32_t rkey, std::string* err) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(addr), len, mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op == IBV_WR_RDMA_WRITE) {
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
  }
  ibv_send_wr* bad = nullptr;
  const int ret = ibv_post_send(qp, &wr, &bad);
  if (ret != 0) {
    *err = "ibv_post_send on qp " + std::to_string(qp->qp_num) + ": " + errno_str(ret);
    return false;
  }
  return true;
}

rdma_conn_param conn_param(const void* pdata, uint8_t len) {
  rdma_conn_param p{};
  p.private_data = pdata;
  p.private_data_len = len;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  return p;
}

// ---- server: main lcore ----
bool run_server(Shared& s, std::string* err) {
  CmSide side;
  CmEvent ev;
  if (!open_channel(&side, err)) return false;
  if (rdma_create_id(side.channel, &side.listen_id, nullptr, RDMA_PS_TCP) != 0) {
    *err = "rdma_create_id: " + errno_str(errno);
    return false;
  }
  sockaddr_in bind_addr = s.addr;
  bind_addr.sin_port = htons(test_port());
  if (rdma_bind_addr(side.listen_id, reinterpret_cast<sockaddr*>(&bind_addr)) != 0) {
    *err = "rdma_bind_addr " + rxe_addr() + ": " + errno_str(errno);
    return false;
  }
  if (rdma_listen(side.listen_id, 4) != 0) {
    *err = "rdma_listen: " + errno_str(errno);
    return false;
  }
  s.listen_on_device = side.listen_id->verbs == s.ctx;
  const uint16_t port = ntohs(rdma_get_src_port(side.listen_id));
  std::printf("smoke: server listening on %s:%u\n", rxe_addr().c_str(), static_cast<unsigned>(port));
  s.port.store(port, std::memory_order_release);

  if (!expect_event(side.channel, RDMA_CM_EVENT_CONNECT_REQUEST, s.abort, &ev, err)) return false;
  side.id = ev.id;  // ours to destroy from here on
  s.server_id_on_device = side.id->verbs == s.ctx;
  s.hello_len = ev.private_data.size();
  if (s.hello_len < sizeof(ClientHello)) {
    *err = "connect private data too short: " + std::to_string(s.hello_len);
    rdma_reject(side.id, nullptr, 0);
    return false;
  }
  std::memcpy(&s.hello_seen, ev.private_data.data(), sizeof(ClientHello));
  if (s.hello_seen.magic != kHelloMagic || s.hello_seen.token != kToken) {
    *err = "connect private data has a bad magic or token";
    rdma_reject(side.id, nullptr, 0);
    return false;
  }

  if (!create_qp(&side, side.id, s.pd, err)) return false;
  s.server_qp = side.id->qp->qp_num;
  // Receives go up before the accept, so the client's first SEND never meets an empty queue.
  for (size_t i = 0; i < kRecvSlots; ++i) {
    if (!post_recv(side.id->qp, s.server_mr, s.server_base + i * kSlot, kSlot, kWrRecv0 + i, err)) return false;
  }
  ServerAccept acc{};
  acc.magic = kAcceptMagic;
  acc.rkey = s.server_mr->rkey;
  acc.addr = reinterpret_cast<uintptr_t>(s.server_base + kWriteOff);
  acc.len = kWriteLen;
  acc.token_echo = s.hello_seen.token;
  acc.recv_depth = kRecvSlots;
  rdma_conn_param p = conn_param(&acc, sizeof(acc));
  if (rdma_accept(side.id, &p) != 0) {
    *err = "rdma_accept: " + errno_str(errno);
    return false;
  }
  if (!expect_event(side.channel, RDMA_CM_EVENT_ESTABLISHED, s.abort, &ev, err)) return false;
  std::printf("smoke: server qp 0x%x established\n", s.server_qp);

  ibv_wc wc{};
  if (!poll_one(side.cq, s.abort, IBV_WC_RECV, kWrRecv0 + 0, &wc, err)) return false;
  s.send_byte_len = wc.byte_len;
  s.send_bytes_ok = wc.byte_len == kSendLen;
  for (size_t i = 0; i < kSendLen && s.send_bytes_ok; ++i) s.send_bytes_ok = s.server_base[i] == send_pattern(i);

  if (!poll_one(side.cq, s.abort, IBV_WC_RECV, kWrRecv0 + 1, &wc, err)) return false;
  s.done_byte_len = wc.byte_len;
  std::memcpy(&s.done_seen, s.server_base + kSlot, sizeof(DoneMsg));
  // RC ordering: the WRITE before this SEND has landed by the time its receive completes.
  const uint8_t* w = s.server_base + kWriteOff;
  s.write_bytes_ok = true;
  for (size_t i = 0; i < kWriteLen && s.write_bytes_ok; ++i) s.write_bytes_ok = w[i] == write_pattern(i);
  s.guard_ok = true;
  for (size_t i = 0; i < kGuardLen && s.guard_ok; ++i) s.guard_ok = w[kWriteLen + i] == 0;
  s.server_checksum = fnv1a(w, kWriteLen);

  AckMsg ack{kAckMagic, (s.send_bytes_ok && s.write_bytes_ok && s.guard_ok) ? 0u : 1u, s.server_checksum};
  std::memcpy(s.server_base + kSendOff, &ack, sizeof(ack));
  if (!post_send(side.id->qp, IBV_WR_SEND, s.server_mr, s.server_base + kSendOff, sizeof(ack), kWrAck, 0, 0, err))
    return false;
  if (!poll_one(side.cq, s.abort, IBV_WC_SEND, kWrAck, &wc, err)) return false;

  // The client disconnects first; answer its DREQ only after DISCONNECTED arrived here.
  if (!expect_event(side.channel, RDMA_CM_EVENT_DISCONNECTED, s.abort, &ev, err)) return false;
  s.server_disconnected = true;
  if (rdma_disconnect(side.id) != 0) std::printf("smoke: server rdma_disconnect after DISCONNECTED: %m (ignored)\n");
  side.teardown();
  return true;
}

// ---- client: worker lcore ----
bool run_client(Shared& s, std::string* err) {
  const auto t_start = Clock::now();
  const auto ready_deadline = t_start + kStepTimeout;
  uint16_t port = 0;
  while ((port = s.port.load(std::memory_order_acquire)) == 0) {
    if (s.abort.load()) {
      *err = "aborted before the server listened";
      return false;
    }
    if (Clock::now() >= ready_deadline) {
      *err = "timed out waiting for the server to listen";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  CmSide side;
  CmEvent ev;
  if (!open_channel(&side, err)) return false;
  if (rdma_create_id(side.channel, &side.id, nullptr, RDMA_PS_TCP) != 0) {
    *err = "rdma_create_id: " + errno_str(errno);
    return false;
  }
  sockaddr_in src = s.addr;
  src.sin_port = 0;
  sockaddr_in dst = s.addr;
  dst.sin_port = htons(port);
  const auto t_connect = Clock::now();
  if (rdma_resolve_addr(side.id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst),
                        kResolveTimeoutMs) != 0) {
    *err = "rdma_resolve_addr: " + errno_str(errno);
    return false;
  }
  if (!expect_event(side.channel, RDMA_CM_EVENT_ADDR_RESOLVED, s.abort, &ev, err)) return false;
  s.client_id_on_device = side.id->verbs == s.ctx;
  if (rdma_resolve_route(side.id, kResolveTimeoutMs) != 0) {
    *err = "rdma_resolve_route: " + errno_str(errno);
    return false;
  }
  if (!expect_event(side.channel, RDMA_CM_EVENT_ROUTE_RESOLVED, s.abort, &ev, err)) return false;
  if (!create_qp(&side, side.id, s.pd, err)) return false;
  s.client_qp = side.id->qp->qp_num;
  if (!post_recv(side.id->qp, s.client_mr, s.client_base, kSlot, kWrRecv0, err)) return false;

  ClientHello hello{kHelloMagic, 1, 0, kToken, kRecvSlots, static_cast<uint32_t>(kSlot)};
  rdma_conn_param p = conn_param(&hello, sizeof(hello));
  if (rdma_connect(side.id, &p) != 0) {
    *err = "rdma_connect: " + errno_str(errno);
    return false;
  }
  if (!expect_event(side.channel, RDMA_CM_EVENT_ESTABLISHED, s.abort, &ev, err)) return false;
  s.connect_ms = ms_since(t_connect);
  s.accept_len = ev.private_data.size();
  if (s.accept_len < sizeof(ServerAccept)) {
    *err = "accept private data too short: " + std::to_string(s.accept_len);
    return false;
  }
  std::memcpy(&s.accept_seen, ev.private_data.data(), sizeof(ServerAccept));
  if (s.accept_seen.magic != kAcceptMagic || s.accept_seen.token_echo != kToken || s.accept_seen.len < kWriteLen) {
    *err = "accept private data has a bad magic, token or length";
    return false;
  }
  std::printf("smoke: client qp 0x%x connected to %s:%u in %.1f ms\n", s.client_qp, rxe_addr().c_str(),
              static_cast<unsigned>(port), s.connect_ms);

  ibv_wc wc{};
  uint8_t* send_buf = s.client_base + kSendOff;
  for (size_t i = 0; i < kSendLen; ++i) send_buf[i] = send_pattern(i);
  if (!post_send(side.id->qp, IBV_WR_SEND, s.client_mr, send_buf, kSendLen, kWrSend, 0, 0, err)) return false;
  if (!poll_one(side.cq, s.abort, IBV_WC_SEND, kWrSend, &wc, err)) return false;

  uint8_t* src_buf = s.client_base + kWriteOff;
  for (size_t i = 0; i < kWriteLen; ++i) src_buf[i] = write_pattern(i);
  const auto t_write = Clock::now();
  if (!post_send(side.id->qp, IBV_WR_RDMA_WRITE, s.client_mr, src_buf, kWriteLen, kWrWrite, s.accept_seen.addr,
                 s.accept_seen.rkey, err))
    return false;
  if (!poll_one(side.cq, s.abort, IBV_WC_RDMA_WRITE, kWrWrite, &wc, err)) return false;
  s.write_ms = ms_since(t_write);

  DoneMsg done{kDoneMagic, static_cast<uint32_t>(kWriteLen), fnv1a(src_buf, kWriteLen)};
  std::memcpy(send_buf, &done, sizeof(done));
  if (!post_send(side.id->qp, IBV_WR_SEND, s.client_mr, send_buf, sizeof(done), kWrDone, 0, 0, err)) return false;
  if (!poll_one(side.cq, s.abort, IBV_WC_SEND, kWrDone, &wc, err)) return false;

  if (!poll_one(side.cq, s.abort, IBV_WC_RECV, kWrRecv0, &wc, err)) return false;
  s.ack_byte_len = wc.byte_len;
  std::memcpy(&s.ack_seen, s.client_base, sizeof(AckMsg));

  if (rdma_disconnect(side.id) != 0) {
    *err = "rdma_disconnect: " + errno_str(errno);
    return false;
  }
  if (!expect_event(side.channel, RDMA_CM_EVENT_DISCONNECTED, s.abort, &ev, err)) return false;
  s.client_disconnected = true;
  side.teardown();
  s.total_ms = ms_since(t_start);
  return true;
}

int client_main(void* arg) {
  auto* s = static_cast<Shared*>(arg);
  if (!run_client(*s, &s->client_error)) {
    s->client_error = "client: " + s->client_error;
    s->abort.store(true);
    return 1;
  }
  return 0;
}

// PD and MRs, released in reverse order whatever the test reached.
struct Registration {
  ibv_pd* pd{nullptr};
  std::vector<ibv_mr*> mrs;
  ~Registration() {
    for (auto it = mrs.rbegin(); it != mrs.rend(); ++it) {
      if (ibv_dereg_mr(*it) != 0) std::fprintf(stderr, "smoke: ibv_dereg_mr: %m\n");
    }
    if (pd != nullptr && ibv_dealloc_pd(pd) != 0) std::fprintf(stderr, "smoke: ibv_dealloc_pd: %m\n");
  }
};

std::unique_ptr<RdmaDevice> open_device(std::string* err) {
  RdmaProbe probe;
  auto dev = RdmaDevice::open(g_device_name, &probe);
  if (!dev) *err = probe.message;
  return dev;
}

TEST(RdmaSmoke, OpensDeviceAndQueriesAttributes) {
  std::string err;
  auto dev = open_device(&err);
  ASSERT_NE(dev, nullptr) << err;
  std::printf("smoke: %s\n", dev->describe().c_str());
  if (!g_device_name.empty()) {
    EXPECT_EQ(dev->name(), g_device_name);
  }
  EXPECT_NE(dev->context(), nullptr);
  EXPECT_TRUE(dev->shared_with_rdma_cm()) << "rdma_get_devices did not return " << dev->name();
  const auto& l = dev->limits();
  EXPECT_GT(l.max_qp, 0);
  EXPECT_GT(l.max_qp_wr, 0);
  EXPECT_GT(l.max_sge, 0);
  EXPECT_GT(l.max_cq, 0);
  EXPECT_GT(l.max_cqe, 0);
  EXPECT_GT(l.max_mr_size, uint64_t{0});
  EXPECT_GT(l.max_qp_rd_atom, 0);
  EXPECT_GT(l.max_qp_init_rd_atom, 0);
  ASSERT_GE(l.phys_port_cnt, 1);
  ASSERT_EQ(dev->ports().size(), l.phys_port_cnt);
  const int port = dev->first_active_port();
  ASSERT_GE(port, 1) << "no active port on " << dev->name();
  EXPECT_GE(dev->ports()[static_cast<size_t>(port - 1)].active_mtu_bytes(), 1024);
}

TEST(RdmaSmoke, RegistersHugepageBufferFromEal) {
  std::string err;
  auto dev = open_device(&err);
  ASSERT_NE(dev, nullptr) << err;
  std::printf("smoke: eal %s, iova %s, args: %s\n", test_eal()->hugepages() ? "hugepages" : "no-huge",
              rte_eal_iova_mode() == RTE_IOVA_VA ? "va" : "pa", test_eal()->args_line().c_str());
  if (in_guest()) {
    ASSERT_TRUE(test_eal()->hugepages())
        << "the rxe guest reserves hugepages: " << test_eal()->probe().reason;
  }

  HugeBuffer buf = HugeBuffer::allocate(kBufferBytes, dev->numa_node(), size_t{2} << 20, &err);
  ASSERT_TRUE(buf) << err;
  EXPECT_EQ(buf.size(), kBufferBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % (size_t{2} << 20), 0u);
  EXPECT_EQ(buf.hugepage_backed(), test_eal()->hugepages());
  if (test_eal()->hugepages()) {
    EXPECT_EQ(buf.iova(), reinterpret_cast<uintptr_t>(buf.data())) << "iova-mode=va";
  }
  std::printf("smoke: buffer %zu bytes at %p, page size %llu, socket %d\n", buf.size(), buf.data(),
              static_cast<unsigned long long>(buf.page_size()), buf.socket());

  HugeBuffer zone = HugeBuffer::allocate(size_t{1} << 20, dev->numa_node(), 4096, &err, HugeBufferKind::kMemzone);
  ASSERT_TRUE(zone) << err;

  Registration reg;
  reg.pd = ibv_alloc_pd(dev->context());
  ASSERT_NE(reg.pd, nullptr) << "ibv_alloc_pd: " << errno_str(errno);
  const auto t0 = Clock::now();
  ibv_mr* mr = ibv_reg_mr(reg.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  const double reg_ms = ms_since(t0);
  ASSERT_NE(mr, nullptr) << "ibv_reg_mr: " << errno_str(errno);
  reg.mrs.push_back(mr);
  EXPECT_EQ(mr->addr, buf.data());
  EXPECT_EQ(mr->length, buf.size());
  ibv_mr* zmr = ibv_reg_mr(reg.pd, zone.data(), zone.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(zmr, nullptr) << "ibv_reg_mr (memzone): " << errno_str(errno);
  reg.mrs.push_back(zmr);
  std::printf("smoke: ibv_reg_mr of %zu bytes took %.2f ms, lkey 0x%x\n", buf.size(), reg_ms, mr->lkey);

  // The default mempool ops live in the ring driver, linked explicitly (the guest has no PMD directory).
  rte_mempool* mp = rte_mempool_create("smoke_pool", 1023, 2048, 32, 0, nullptr, nullptr, nullptr, nullptr,
                                       buf.socket() >= 0 ? buf.socket() : SOCKET_ID_ANY, 0);
  ASSERT_NE(mp, nullptr) << "rte_mempool_create: " << rte_strerror(rte_errno);
  void* obj = nullptr;
  EXPECT_EQ(rte_mempool_get(mp, &obj), 0);
  if (obj != nullptr) rte_mempool_put(mp, obj);
  rte_mempool_free(mp);
}

TEST(RdmaSmoke, ConnectSendRecvWriteDisconnect) {
  std::string err;
  auto dev = open_device(&err);
  ASSERT_NE(dev, nullptr) << err;
  HugeBuffer buf = HugeBuffer::allocate(kBufferBytes, dev->numa_node(), size_t{2} << 20, &err);
  ASSERT_TRUE(buf) << err;

  Shared s;
  s.ctx = dev->context();
  s.server_base = buf.bytes();
  s.client_base = buf.bytes() + kHalf;
  s.addr.sin_family = AF_INET;
  ASSERT_EQ(inet_pton(AF_INET, rxe_addr().c_str(), &s.addr.sin_addr), 1) << "bad RDMAGATE_RXE_ADDR " << rxe_addr();

  Registration reg;
  reg.pd = ibv_alloc_pd(s.ctx);
  ASSERT_NE(reg.pd, nullptr) << "ibv_alloc_pd: " << errno_str(errno);
  s.pd = reg.pd;
  s.server_mr = ibv_reg_mr(reg.pd, s.server_base, kHalf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(s.server_mr, nullptr) << "ibv_reg_mr: " << errno_str(errno);
  reg.mrs.push_back(s.server_mr);
  s.client_mr = ibv_reg_mr(reg.pd, s.client_base, kHalf, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(s.client_mr, nullptr) << "ibv_reg_mr: " << errno_str(errno);
  reg.mrs.push_back(s.client_mr);

  // Client on a worker lcore (its own vCPU: both sides busy-poll), server here on the main lcore.
  const unsigned worker = rte_get_next_lcore(static_cast<unsigned>(-1), 1, 0);
  std::thread fallback;
  bool launched = false;
  if (worker < RTE_MAX_LCORE) {
    launched = rte_eal_remote_launch(client_main, &s, worker) == 0;
  }
  if (!launched) {
    std::printf("smoke: no free worker lcore, client runs on a plain thread\n");
    fallback = std::thread([&s] { client_main(&s); });
  }
  const auto t0 = Clock::now();
  if (!run_server(s, &s.server_error)) {
    s.server_error = "server: " + s.server_error;
    s.abort.store(true);
  }
  if (launched) rte_eal_wait_lcore(worker);
  if (fallback.joinable()) fallback.join();
  std::printf("smoke: exchange done in %.1f ms (connect %.1f ms, rdma write of %zu bytes %.2f ms)\n", ms_since(t0),
              s.connect_ms, kWriteLen, s.write_ms);

  ASSERT_EQ(s.server_error, "");
  ASSERT_EQ(s.client_error, "");
  EXPECT_TRUE(s.listen_on_device) << "listen id bound to another device than " << dev->name();
  EXPECT_TRUE(s.server_id_on_device);
  EXPECT_TRUE(s.client_id_on_device);
  EXPECT_NE(s.server_qp, 0u);
  EXPECT_NE(s.client_qp, 0u);
  EXPECT_NE(s.server_qp, s.client_qp);
  // Private data, both ways (IB CM pads it: at least our struct arrives).
  EXPECT_GE(s.hello_len, sizeof(ClientHello));
  EXPECT_EQ(s.hello_seen.magic, kHelloMagic);
  EXPECT_EQ(s.hello_seen.major, 1u);
  EXPECT_EQ(s.hello_seen.token, kToken);
  EXPECT_EQ(s.hello_seen.recv_depth, kRecvSlots);
  EXPECT_GE(s.accept_len, sizeof(ServerAccept));
  EXPECT_EQ(s.accept_seen.magic, kAcceptMagic);
  EXPECT_EQ(s.accept_seen.rkey, s.server_mr->rkey);
  EXPECT_EQ(s.accept_seen.addr, reinterpret_cast<uintptr_t>(s.server_base + kWriteOff));
  EXPECT_EQ(s.accept_seen.len, kWriteLen);
  EXPECT_EQ(s.accept_seen.token_echo, kToken);
  // SEND/RECV.
  EXPECT_EQ(s.send_byte_len, kSendLen);
  EXPECT_TRUE(s.send_bytes_ok);
  for (size_t i = 0; i < kSendLen; ++i) ASSERT_EQ(s.server_base[i], send_pattern(i)) << "byte " << i;
  // RDMA WRITE into the server's buffer, announced by a SEND.
  EXPECT_EQ(s.done_byte_len, sizeof(DoneMsg));
  EXPECT_EQ(s.done_seen.magic, kDoneMagic);
  EXPECT_EQ(s.done_seen.write_len, kWriteLen);
  EXPECT_TRUE(s.write_bytes_ok);
  EXPECT_TRUE(s.guard_ok) << "bytes past the written range changed";
  EXPECT_EQ(s.server_checksum, s.done_seen.checksum);
  for (size_t i = 0; i < kWriteLen; ++i) {
    ASSERT_EQ(s.server_base[kWriteOff + i], write_pattern(i)) << "written byte " << i;
  }
  // Server's reply SEND.
  EXPECT_EQ(s.ack_byte_len, sizeof(AckMsg));
  EXPECT_EQ(s.ack_seen.magic, kAckMagic);
  EXPECT_EQ(s.ack_seen.status, 0u);
  EXPECT_EQ(s.ack_seen.checksum, s.done_seen.checksum);
  // Orderly disconnect, both ends saw it.
  EXPECT_TRUE(s.server_disconnected);
  EXPECT_TRUE(s.client_disconnected);
}

}  // namespace

int main(int argc, char** argv) {
  return rdmagate::testfix::rdma_test_main(argc, argv, "rdma_smoke_test", "0-1", [](const RdmaProbe&) {
    g_device_name = rdmagate::testfix::rdma_device();
    return 0;
  });
}

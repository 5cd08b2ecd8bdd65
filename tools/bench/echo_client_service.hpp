#pragma once
// rdmagate-bench's echo and sink load (and the engine tests'): EchoClientService, an active CoreLoop service,
// drives echo traffic on every adopted connection and verifies every byte of every answer: payload sizes
// cycle min_payload..max_payload, a window of requests in flight.
//
// Authentication (protocol 1.2, docs/protocol.md §11): on a connection whose accept says `auth` it sends AUTH
// first (EchoClientConfig::principal and secret) and starts its load only after an ok answer whose gateway
// proof verifies; rdmagate-bench connect so times a connection's setup with the exchange included.
//
// It runs on the core (every method _st) and never allocates, locks or makes syscalls (the AUTH exchange
// costs two HMACs and a draw from libcrypto's generator per connection, in user space).

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "dataplane/core_conn.hpp"
#include "protocol/auth.hpp"
#include "protocol/message.hpp"
#include "tools/bench/histogram.hpp"

namespace rdmagate::dataplane {

// The byte `j` of the payload of request `cookie`: every byte verifiable, different per request.
constexpr std::uint8_t echo_pattern(std::uint64_t cookie, std::uint32_t j) noexcept {
  return static_cast<std::uint8_t>((cookie * 0x9e3779b1u) >> 24 ^ (j * 131u + 7u) ^ (j >> 8));
}

// Results an EchoClientService publishes to other threads (atomics, touched once per connection or on a
// mismatch, never per message).
struct EchoClientResults {
  std::atomic<std::uint64_t> connections_done{0};  // connections that got every answer
  std::atomic<std::uint64_t> verified{0};          // answers verified (added when a connection finishes)
  std::atomic<std::uint64_t> mismatches{0};        // answers with a wrong size, opcode or byte
  std::atomic<std::uint64_t> sum_rtt_tsc{0};       // added when a connection finishes
  // Added when a connection closes (the SIGTERM drain's accounting): requests sent, answers received (echo
  // or refusal), refusals (kCompletion kNoResources: the responder was quiescing and did not start it), and
  // requests that never got any answer (lost with the connection).
  std::atomic<std::uint64_t> closed_sent{0};
  std::atomic<std::uint64_t> closed_answered{0};
  std::atomic<std::uint64_t> closed_refused{0};
  std::atomic<std::uint64_t> closed_lost{0};
  // Connections that could not authenticate: no credentials for a gateway that asks, a refusal, or a gateway
  // proof that did not verify (each such connection stays idle until the gateway or the run ends it).
  std::atomic<std::uint64_t> auth_failures{0};

  // Set before the cores start, read-only afterwards. The owner sleeps in its control loop: when
  // connections_done reaches wake_at the core that got there calls wake(wake_arg) once (Engine::wake: one
  // eventfd write per run, not per message).
  void (*wake)(void*) = nullptr;
  void* wake_arg = nullptr;
  std::uint64_t wake_at = 0;
  // rdmagate-bench connect: each finished connection's QP number and the TSC of its last verified answer, in
  // finishing order (slots taken by done_count; entries past done_capacity are dropped). An entry is
  // complete once its tsc reads non-zero (stored with release after qp_num).
  struct Done {
    std::uint32_t qp_num = 0;
    std::atomic<std::uint64_t> tsc{0};
  };
  Done* done_log = nullptr;
  std::size_t done_capacity = 0;
  std::atomic<std::size_t> done_count{0};
};

struct EchoClientConfig {
  std::uint64_t messages_per_conn = 10000;
  std::uint32_t min_payload = 0;  // sizes cycle min_payload..max_payload (equal: a fixed size)
  std::uint32_t max_payload = 0;
  std::uint32_t window = 8;  // requests in flight per connection
  std::uint16_t opcode = 1;
  bool one_way = false;          // sink mode: no answers expected; completes when all are sent
  bool measure_latency = false;  // per-request RTT histogram (TSC ticks); one connection per core
  // Credentials for gateways that require authentication (the caller keeps the bytes alive for the run).
  std::string_view principal;
  std::span<const std::uint8_t> secret;
  std::uint32_t max_conns = 4096;  // connections authenticating at once on this core, at most
};

class EchoClientService {
 public:
  // The expectation table is sized here, before the core runs (twice the connections: short probe runs).
  EchoClientService(const EchoClientConfig& cfg, EchoClientResults& results)
      : cfg_(cfg), res_(results), expected_(std::size_t{2} * (cfg.max_conns != 0 ? cfg.max_conns : 1)) {}

  struct ConnState {
    std::uint64_t sent = 0;
    std::uint64_t answered = 0;
    std::uint64_t verified = 0;
    std::uint64_t start_tsc = 0;  // 0 once the connection finished
    std::uint32_t refused = 0;    // a refusal also stops new requests on the connection
    bool open = true;             // false while AUTH awaits its answer (or after a failed one): no load
  };

  template <typename Api>
  void on_adopt_st(Api& api, CoreConn& c) noexcept {
    ConnState& s = c.svc.reset<ConnState>();
    s.start_tsc = api.now_tsc_st();
    tsc_hz_ = api.tsc_hz();
    if (c.session.auth_required) {
      s.open = false;
      send_auth_st(api, c);
      return;
    }
    fill_st(api, c);
  }

  // The gateway's answer to our AUTH: ok with a proof that verifies (constant time) starts the load.
  template <typename Api>
  void on_auth_answer_st(Api& api, CoreConn& c, const protocol::Message& m) noexcept {
    ConnState& s = c.svc.as<ConnState>();
    Expected* e = find_st(c.qp_num);
    const bool ok = e != nullptr && !s.open &&
                    m.auth_status == static_cast<std::uint32_t>(protocol::auth::AuthStatus::kOk) &&
                    protocol::auth::proofs_equal(m.auth_proof, e->pg);
    if (e != nullptr) e->qp_num = kTombstone;
    if (!ok) {
      res_.auth_failures.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    s.open = true;
    fill_st(api, c);
  }

  template <typename Api>
  void on_request_st(Api&, CoreConn&, const protocol::Message&) noexcept {
    ++unexpected_;
  }

  template <typename Api>
  void on_response_st(Api& api, CoreConn& c, const protocol::Message& m) noexcept {
    ConnState& s = c.svc.as<ConnState>();
    ++s.answered;
    const std::uint64_t cookie = m.cookie;
    if (m.type == protocol::MessageType::kCompletion &&
        m.status == static_cast<std::uint32_t>(protocol::CompletionStatus::kNoResources) && cookie != 0 &&
        cookie <= s.sent) {
      ++s.refused;  // the responder is quiescing: it answered without starting the request
      finish_if_done_st(api, c);
      return;
    }
    if (cfg_.measure_latency) rtt_.record(api.now_tsc_st() - sent_tsc_[cookie % kTscSlots]);
    const std::uint32_t want = size_for(cookie);
    bool ok = m.type == protocol::MessageType::kInlineResponse && m.opcode == cfg_.opcode &&
              m.payload.size() == want && cookie != 0 && cookie <= s.sent;
    for (std::uint32_t j = 0; ok && j < want; ++j) ok = m.payload[j] == echo_pattern(cookie, j);
    if (ok) {
      ++s.verified;
    } else {
      res_.mismatches.fetch_add(1, std::memory_order_relaxed);
    }
    fill_st(api, c);
    finish_if_done_st(api, c);
  }

  template <typename Api>
  void on_close_st(Api&, CoreConn& c) noexcept {
    if (Expected* e = find_st(c.qp_num)) e->qp_num = kTombstone;
    const ConnState& s = c.svc.as<ConnState>();
    const std::uint64_t answered = cfg_.one_way ? s.sent : s.answered;
    res_.closed_sent.fetch_add(s.sent, std::memory_order_relaxed);
    res_.closed_answered.fetch_add(answered, std::memory_order_relaxed);
    res_.closed_refused.fetch_add(s.refused, std::memory_order_relaxed);
    res_.closed_lost.fetch_add(s.sent - answered, std::memory_order_relaxed);
    c.svc.reset<ConnState>();
  }

  // Requests of ours without an answer yet (the core's quiesce waits for none).
  std::uint64_t pending_st(const CoreConn& c) const noexcept {
    const ConnState& s = c.svc.as<ConnState>();
    return cfg_.one_way ? 0 : s.sent - s.answered;
  }

  // The core calls this when descriptors or credits came back (send completions, NOOPs): sink mode keeps
  // sending as they free up.
  template <typename Api>
  void on_writable_st(Api& api, CoreConn& c) noexcept {
    if (cfg_.one_way) fill_st(api, c);
  }

  // Sends requests while the window, the descriptors and the total allow.
  template <typename Api>
  void fill_st(Api& api, CoreConn& c) noexcept {
    ConnState& s = c.svc.as<ConnState>();
    // Not yet authenticated, refused by a quiescing peer, or quiescing ourselves.
    if (!s.open || s.refused != 0 || api.quiescing_st()) return;
    while (s.sent < cfg_.messages_per_conn && s.sent - s.answered < cfg_.window &&
           api.tx_available_st(c) > 2) {
      const std::uint64_t cookie = ++s.sent;
      const std::uint32_t n = size_for(cookie);
      for (std::uint32_t j = 0; j < n; ++j) scratch_[j] = echo_pattern(cookie, j);
      if (cfg_.measure_latency) sent_tsc_[cookie % kTscSlots] = api.now_tsc_st();
      if (!api.send_st(c, protocol::MessageType::kInlineRequest, cfg_.opcode, cookie,
                       std::span<const std::uint8_t>(scratch_, n))) {
        --s.sent;
        ++send_failures_;
        return;
      }
      if (cfg_.one_way) ++s.answered;
    }
    if (cfg_.one_way) finish_if_done_st(api, c);
  }

  // The measured round trips in TSC ticks (read after the core stopped).
  const bench::Histogram& rtt_ticks() const noexcept { return rtt_; }
  // The q-quantile (0..1] of the measured round trips in whole microseconds (tests/rdma/engine_bench.cpp).
  std::uint64_t rtt_quantile_us(double q) const noexcept {
    return tsc_hz_ == 0 ? 0 : rtt_.quantile(q) * 1'000'000 / tsc_hz_;
  }
  std::uint64_t unexpected() const noexcept { return unexpected_; }
  std::uint64_t send_failures() const noexcept { return send_failures_; }

  static constexpr std::uint32_t kMaxPayload = 64 * 1024;

 private:
  // The gateway proof each authenticating connection expects, by QP number (open addressing, linear probe;
  // ConnState has no room for 32 bytes). Sized in the constructor: no allocation on the core.
  struct Expected {
    std::uint32_t qp_num = 0;  // 0: empty; kTombstone: freed
    protocol::auth::Proof pg{};
  };
  static constexpr std::uint32_t kTombstone = 0xffffffffu;
  static constexpr std::uint64_t kAuthCookie = 0x4854554147444752ull;  // "RGDGAUTH"

  Expected* find_st(std::uint32_t qp_num) noexcept {
    const std::size_t n = expected_.size();
    for (std::size_t i = 0, at = qp_num % n; i < n; ++i, at = (at + 1) % n) {
      if (expected_[at].qp_num == qp_num) return &expected_[at];
      if (expected_[at].qp_num == 0) return nullptr;
    }
    return nullptr;
  }

  Expected* insert_st(std::uint32_t qp_num) noexcept {
    const std::size_t n = expected_.size();
    for (std::size_t i = 0, at = qp_num % n; i < n; ++i, at = (at + 1) % n) {
      if (expected_[at].qp_num == 0 || expected_[at].qp_num == kTombstone) {
        expected_[at].qp_num = qp_num;
        return &expected_[at];
      }
    }
    return nullptr;  // more connections authenticating at once than max_conns: counted as a failure
  }

  template <typename Api>
  void send_auth_st(Api& api, CoreConn& c) noexcept {
    protocol::auth::Transcript t{
        c.session.local_incarnation, c.session.peer_incarnation, c.session.gateway_nonce, {}, cfg_.principal};
    protocol::auth::Proof pc{};
    Expected* e =
        cfg_.principal.empty() || c.qp_num == 0 || c.qp_num == kTombstone ? nullptr : insert_st(c.qp_num);
    if (e == nullptr || !protocol::auth::random_nonce(&t.client_nonce) ||
        !protocol::auth::compute_proof(protocol::auth::Role::kClient, cfg_.secret, t, &pc) ||
        !protocol::auth::compute_proof(protocol::auth::Role::kGateway, cfg_.secret, t, &e->pg) ||
        !api.send_built_st(
            c, protocol::make_auth_message(kAuthCookie,
                                           static_cast<std::uint8_t>(protocol::auth::Mechanism::kHmacSha256),
                                           cfg_.principal, t.client_nonce, pc))) {
      if (e != nullptr) e->qp_num = kTombstone;
      res_.auth_failures.fetch_add(1, std::memory_order_relaxed);
    }
  }

  std::uint32_t size_for(std::uint64_t cookie) const noexcept {
    if (cfg_.max_payload <= cfg_.min_payload) return cfg_.max_payload;
    return cfg_.min_payload +
           static_cast<std::uint32_t>(cookie % (std::uint64_t{cfg_.max_payload - cfg_.min_payload} + 1));
  }

  template <typename Api>
  void finish_if_done_st(Api& api, CoreConn& c) noexcept {
    ConnState& s = c.svc.as<ConnState>();
    if (s.answered == cfg_.messages_per_conn && s.start_tsc != 0) {
      const std::uint64_t now = api.now_tsc_st();
      res_.verified.fetch_add(s.verified, std::memory_order_relaxed);
      res_.sum_rtt_tsc.fetch_add(now - s.start_tsc, std::memory_order_relaxed);
      s.start_tsc = 0;
      if (res_.done_log != nullptr) {
        const std::size_t i = res_.done_count.fetch_add(1, std::memory_order_relaxed);
        if (i < res_.done_capacity) {
          res_.done_log[i].qp_num = c.qp_num;
          res_.done_log[i].tsc.store(now, std::memory_order_release);
        }
      }
      const std::uint64_t done = res_.connections_done.fetch_add(1, std::memory_order_acq_rel) + 1;
      if (done == res_.wake_at && res_.wake != nullptr) res_.wake(res_.wake_arg);
    }
  }

  EchoClientConfig cfg_;
  EchoClientResults& res_;
  std::uint64_t unexpected_ = 0;
  std::uint64_t send_failures_ = 0;
  static constexpr std::size_t kTscSlots = 256;  // > window: a request's slot is free again when it returns
  std::array<std::uint64_t, kTscSlots> sent_tsc_{};
  bench::Histogram rtt_;
  std::uint64_t tsc_hz_ = 0;
  std::vector<Expected> expected_;
  std::uint8_t scratch_[kMaxPayload];
};

}  // namespace rdmagate::dataplane

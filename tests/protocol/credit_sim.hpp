#pragma once
// A two-endpoint simulation of the credit rules over an in-memory link, used by credit_sim_test.cpp.
//
// Each endpoint is a miniature engine around a real CreditMachine and the real codec: every
// message is encoded into a tx descriptor when queued, gets its returned-credits field patched at
// post time, travels as bytes through a lossless in-order link, lands in one of exactly
// queue-depth posted receive buffers, and is decoded and checked on processing. Both sides issue
// requests (inline of random size, read and write chunks of random fragment counts) and answer
// the peer's after random delays, re-posting the request's buffer at one of three random points:
// on receipt (copy-out), before queuing the answer, or only after the answer is posted (zero
// copy; the case that deadlocks without a reserve). Delivery, processing, re-posting and posting
// all happen in random batches.
//
// Checked at every step: a message never arrives without a posted receive (overrun); the credit
// machine accepts every message; credits are conserved in both directions:
//   sender credits + messages in the link + messages received but unprocessed
//     + receiver held + receiver owed + credits returned in messages not yet processed == depth;
// and the system is never stuck: if no message is in flight and every ready answer is queued,
// some endpoint must be able to send whenever anything is still queued or unanswered.
// At the end: traffic stops, everything drains, every request was answered exactly once, and the
// NOOP exchange dies out (no ping-pong).

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/credit_machine.hpp"
#include "protocol/message.hpp"
#include "tests/protocol/credit_test_peer.hpp"

namespace rdmagate::protocol::sim {

inline constexpr std::uint32_t kSimMessageSize = 512;  // negotiated max message size of the sim
inline constexpr std::uint16_t kSimFragments = 8;      // negotiated max fragments of the sim

struct SimParams {
  std::uint16_t depth = 16;  // negotiated queue depth
  std::uint64_t seed = 1;
  std::uint64_t requests_per_side = 10000;  // each side issues this many, then traffic stops
  std::uint32_t max_answer_delay = 40;      // steps between a request's processing and its answer
  std::uint32_t max_outstanding = 0;        // per side; 0: 2 * depth
  double request_rate = 0.6;                // chance per step that a side tries to issue a request
  double burst_rate = 0.1;                  // chance that it issues a burst of up to depth requests
  bool checksum = false;                    // CRC32C on every message
  std::uint16_t high_water = 0;             // CreditConfig::high_water
  std::uint64_t keepalive = 0;              // CreditConfig::keepalive_interval, in steps
  std::uint64_t dead_timeout = 0;           // CreditConfig::dead_peer_timeout, in steps
  std::uint64_t idle_tail = 0;              // steps to keep running idle after draining
  double repost_at_receipt = 1.0 / 3;       // share of requests whose buffer is re-posted on receipt
  double repost_before_answer = 1.0 / 3;    // share re-posted before the answer is queued; the rest
                                            // hold their buffer until the answer is posted
  bool ablate_reserve = false;              // shrink the reserve to the last credit (expect a deadlock)
};

struct SimResult {
  bool ok = true;
  std::string failure;  // first failure, with the step it happened at
  std::uint64_t steps = 0;
  std::uint64_t data_messages = 0;  // requests + answers delivered
  std::uint64_t noops = 0;          // NOOPs delivered
  std::uint64_t answered = 0;       // requests answered (both sides)
  std::uint64_t issued = 0;         // requests issued (both sides)
  std::uint64_t keepalives = 0;     // keepalive NOOPs sent
  std::uint64_t max_inflight = 0;   // most messages ever in one link direction
};

class Simulation;

struct Packet {
  std::uint32_t len = 0;
  std::uint16_t credits = 0;  // returned credits in the header (for the conservation check)
  std::array<std::uint8_t, kSimMessageSize> bytes;
};

enum class RepostAt : std::uint8_t {
  kReceipt = 0,       // copy-out: the buffer goes back as soon as the request is read
  kBeforeAnswer = 1,  // once the work is done, just before the answer is queued
  kAfterSend = 2,     // zero copy: the buffer holds the request until its answer is posted
};

// A request of the peer being worked on.
struct Work {
  std::uint64_t cookie = 0;
  std::uint16_t opcode = 0;
  MessageType type = MessageType::kInlineRequest;
  std::uint32_t bulk = 0;   // chunk size, for the completion's byte count
  std::uint64_t ready = 0;  // step at which the answer may be queued
  std::int32_t buf = -1;    // receive buffer still held, or -1
  RepostAt repost = RepostAt::kReceipt;
};

// What a requester remembers about an unanswered request.
struct Pending {
  MessageType type = MessageType::kInlineRequest;
  std::uint16_t opcode = 0;
  std::uint32_t bulk = 0;
};

class Endpoint {
 public:
  Endpoint(Simulation& sim, int side, const SimParams& p, const Session& session, std::deque<Packet>& out);

  void deliver_from(std::deque<Packet>& link, std::size_t n);
  void process(std::size_t n);
  void run_work();
  void issue_requests();
  void maybe_queue_noop();
  void pump(std::size_t limit);
  void flush_reposts(std::size_t n);

  bool quiet() const { return rx_cq_.empty() && deferred_.empty(); }
  // Work whose answer is not queued yet and is due now or already.
  bool has_ready_unqueued_work() const;
  bool has_future_work() const;
  bool idle_for_good() const {
    return work_.empty() && pending_.empty() && m_.queued_total() == 0 && deferred_.empty() && rx_cq_.empty();
  }

  CreditMachine& machine() { return m_; }
  const CreditMachine& machine() const { return m_; }
  std::size_t rx_cq_size() const { return rx_cq_.size(); }
  std::size_t posted() const { return posted_.size(); }
  std::size_t held_buffers() const;
  std::uint64_t issued() const { return issued_; }
  std::uint64_t answered() const { return answered_; }
  std::size_t unanswered() const { return pending_.size(); }
  // Credits carried by messages from the peer that we have received but not processed.
  std::uint64_t unprocessed_returns() const;
  void stop_traffic() { stop_ = true; }

 private:
  std::int32_t alloc_tx();
  void free_tx(std::uint16_t tx) { free_tx_.push_back(tx); }
  bool encode_into(std::uint16_t tx, const Message& m);
  // Queues `tx`, or half the time offers it to send_or_queue and posts it at once if it may go.
  void submit(CreditClass cls, std::uint16_t tx);
  void post(const SendStep& s);
  void repost(std::uint16_t buf, CreditClass cls);
  void handle(const Message& msg, std::uint16_t buf);
  void fail(const std::string& what);
  std::uint32_t rand(std::uint32_t n) { return static_cast<std::uint32_t>(rng_() % n); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  Simulation& sim_;
  int side_;
  std::deque<Packet>& out_;  // the link towards the peer
  SimParams p_;
  Session session_;
  std::mt19937_64 rng_;
  std::vector<std::uint16_t> links_;
  CreditMachine m_;

  std::vector<Packet> tx_;              // tx descriptors
  std::vector<std::int32_t> tx_holds_;  // receive buffer released when the descriptor is posted
  std::vector<std::uint16_t> free_tx_;
  std::vector<std::array<std::uint8_t, kSimMessageSize>> rx_;
  std::vector<std::uint16_t> posted_;  // posted receive buffers
  struct Completion {
    std::uint16_t buf;
    std::uint32_t len;
    std::uint16_t credits;
  };
  std::deque<Completion> rx_cq_;                                 // received, not yet processed
  std::vector<std::pair<std::uint16_t, CreditClass>> deferred_;  // processed, re-post batched
  std::vector<Work> work_;
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::vector<std::uint8_t> scratch_;
  std::uint64_t next_cookie_ = 1;
  std::uint64_t issued_ = 0;
  std::uint64_t answered_ = 0;
  bool stop_ = false;
  Message decoded_;
};

class Simulation {
 public:
  explicit Simulation(const SimParams& p);
  SimResult run();

  // Called by endpoints.
  void fail(const std::string& what);
  bool failed() const { return !result_.ok; }
  std::uint64_t now() const { return now_; }
  void count_delivery(MessageType t) {
    if (t == MessageType::kNoop) {
      ++result_.noops;
    } else {
      ++result_.data_messages;
    }
  }
  void count_keepalive() { ++result_.keepalives; }
  // Returned credits in flight towards side `to` (in its link or its unprocessed receives).
  std::uint64_t& returns_towards(int to) { return returns_in_flight_[to]; }

 private:
  void step(bool draining);
  void check_invariants();
  bool stuck() const;

  SimParams p_;
  std::mt19937_64 rng_;
  std::uint64_t now_ = 0;
  SimResult result_;
  std::array<std::uint64_t, 2> returns_in_flight_{};
  std::array<std::deque<Packet>, 2> link_;  // link_[i]: messages from side i to side 1 - i
  std::array<std::unique_ptr<Endpoint>, 2> ep_;
};

SimResult run_simulation(const SimParams& p);

}  // namespace rdmagate::protocol::sim

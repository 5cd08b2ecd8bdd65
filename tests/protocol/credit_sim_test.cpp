// The credit rules under random two-sided traffic: see credit_sim.hpp for the model and the checks.

#include "tests/protocol/credit_sim.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

namespace rdmagate::protocol::sim {

namespace {

// Payload bytes of message `cookie` are kPattern[(cookie & 0xff) + i]: a sender points its payload
// straight into the table and a receiver compares with one memcmp.
const std::array<std::uint8_t, 2 * kSimMessageSize>& pattern() {
  static const auto table = [] {
    std::array<std::uint8_t, 2 * kSimMessageSize> t{};
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint8_t>(i * 7 + 3);
    return t;
  }();
  return table;
}

std::span<const std::uint8_t> payload_for(std::uint64_t cookie, std::size_t len) {
  return {pattern().data() + (cookie & 0xff), len};
}

std::uint16_t tx_count(std::uint16_t depth) {
  return static_cast<std::uint16_t>(4 * depth + 8);
}

}  // namespace

// ---- endpoint ---------------------------------------------------------------------------------------

Endpoint::Endpoint(Simulation& sim, int side, const SimParams& p, const Session& session,
                   std::deque<Packet>& out)
    : sim_(sim),
      side_(side),
      out_(out),
      p_(p),
      session_(session),
      rng_(p.seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(side) + 1),
      links_(tx_count(p.depth)),
      m_(CreditConfig{p.depth, p.high_water, p.keepalive, p.dead_timeout}, links_, 0),
      tx_(tx_count(p.depth)),
      tx_holds_(tx_count(p.depth), -1),
      rx_(p.depth),
      scratch_(kSimMessageSize) {
  if (p_.max_outstanding == 0) p_.max_outstanding = 2u * p.depth;
  for (std::uint16_t t = 0; t < tx_.size(); ++t) free_tx_.push_back(t);
  // Every receive is posted before the first message can arrive.
  for (std::uint16_t b = 0; b < p.depth; ++b) posted_.push_back(b);
  if (p.ablate_reserve) CreditMachineTestPeer::set_reserve(m_, 1);
}

void Endpoint::fail(const std::string& what) {
  std::ostringstream o;
  o << "side " << side_ << ": " << what;
  sim_.fail(o.str());
}

std::int32_t Endpoint::alloc_tx() {
  if (free_tx_.empty()) return -1;
  const std::uint16_t t = free_tx_.back();
  free_tx_.pop_back();
  return t;
}

bool Endpoint::encode_into(std::uint16_t tx, const Message& m) {
  const Encoded<WireError> e = encode_message(m, session_, tx_[tx].bytes);
  if (!e.ok()) {
    fail(std::string("encode: ") + std::string(to_string(e.error)));
    return false;
  }
  tx_[tx].len = static_cast<std::uint32_t>(e.size);
  return true;
}

std::size_t Endpoint::held_buffers() const {
  return p_.depth - posted_.size() - rx_cq_.size();
}

bool Endpoint::has_ready_unqueued_work() const {
  const std::uint64_t now = sim_.now();
  return std::any_of(work_.begin(), work_.end(), [now](const Work& w) { return w.ready <= now; });
}

bool Endpoint::has_future_work() const {
  const std::uint64_t now = sim_.now();
  return std::any_of(work_.begin(), work_.end(), [now](const Work& w) { return w.ready > now; });
}

void Endpoint::deliver_from(std::deque<Packet>& link, std::size_t n) {
  for (; n > 0 && !link.empty(); --n) {
    if (posted_.empty()) {
      fail("receive overrun: a message arrived with no posted receive buffer");
      return;
    }
    const Packet& pk = link.front();
    const std::uint16_t buf = posted_.back();
    posted_.pop_back();
    std::memcpy(rx_[buf].data(), pk.bytes.data(), pk.len);
    rx_cq_.push_back({buf, pk.len, pk.credits});
    link.pop_front();
  }
}

void Endpoint::repost(std::uint16_t buf, CreditClass cls) {
  // The buffer is on the receive queue before the peer can hear of it.
  posted_.push_back(buf);
  if (const CreditError e = m_.on_reposted(cls); e != CreditError::kOk) {
    fail(std::string("on_reposted: ") + std::string(to_string(e)));
  }
}

void Endpoint::flush_reposts(std::size_t n) {
  n = std::min(n, deferred_.size());
  for (std::size_t i = 0; i < n; ++i) repost(deferred_[i].first, deferred_[i].second);
  deferred_.erase(deferred_.begin(), deferred_.begin() + static_cast<std::ptrdiff_t>(n));
}

void Endpoint::process(std::size_t n) {
  for (; n > 0 && !rx_cq_.empty() && !sim_.failed(); --n) {
    const Completion c = rx_cq_.front();
    rx_cq_.pop_front();
    const WireError we = decode_message({rx_[c.buf].data(), c.len}, session_, decoded_);
    if (we != WireError::kOk) {
      fail(std::string("decode: ") + std::string(to_string(we)));
      return;
    }
    const CreditError ce = m_.on_receive(credit_class(decoded_.type), decoded_.credits, sim_.now());
    if (ce != CreditError::kOk) {
      fail(std::string("credit check: ") + std::string(to_string(ce)));
      return;
    }
    sim_.returns_towards(side_) -= c.credits;
    sim_.count_delivery(decoded_.type);
    handle(decoded_, c.buf);
  }
}

void Endpoint::handle(const Message& msg, std::uint16_t buf) {
  const CreditClass cls = credit_class(msg.type);
  const auto release = [&](CreditClass c) {
    if (chance(0.7)) {
      repost(buf, c);
    } else {
      deferred_.emplace_back(buf, c);  // re-posted later, in a batch
    }
  };
  if (msg.type == MessageType::kNoop) {
    release(cls);
    return;
  }
  if (is_request(msg.type)) {
    if (msg.payload.size() > 0 &&
        std::memcmp(msg.payload.data(), payload_for(msg.cookie, msg.payload.size()).data(),
                    msg.payload.size()) != 0) {
      fail("request payload corrupted");
      return;
    }
    Work w;
    w.cookie = msg.cookie;
    w.opcode = msg.opcode;
    w.type = msg.type;
    w.bulk = static_cast<std::uint32_t>(msg.chunk.total_length());
    w.ready = sim_.now() + rand(p_.max_answer_delay + 1);
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    w.repost = r < p_.repost_at_receipt                             ? RepostAt::kReceipt
               : r < p_.repost_at_receipt + p_.repost_before_answer ? RepostAt::kBeforeAnswer
                                                                    : RepostAt::kAfterSend;
    if (w.repost == RepostAt::kReceipt) {
      release(cls);
    } else {
      w.buf = buf;
    }
    work_.push_back(w);
    return;
  }
  // An answer: it must match exactly one unanswered request of ours.
  const auto it = pending_.find(msg.cookie);
  if (it == pending_.end()) {
    fail("answer to an unknown or already answered request");
    return;
  }
  const Pending& req = it->second;
  const bool want_completion = is_chunk_request(req.type);
  if ((msg.type == MessageType::kCompletion) != want_completion || msg.opcode != req.opcode) {
    fail("answer does not match its request");
    return;
  }
  if (want_completion) {
    if (msg.status != 0 || msg.byte_count != req.bulk) {
      fail("completion carries the wrong status or byte count");
      return;
    }
  } else if (msg.payload.size() > 0 &&
             std::memcmp(msg.payload.data(), payload_for(~msg.cookie, msg.payload.size()).data(),
                         msg.payload.size()) != 0) {
    fail("response payload corrupted");
    return;
  }
  pending_.erase(it);
  ++answered_;
  release(cls);
}

void Endpoint::run_work() {
  for (std::size_t i = 0; i < work_.size() && !sim_.failed();) {
    Work& w = work_[i];
    if (w.ready > sim_.now()) {
      ++i;
      continue;
    }
    const std::int32_t t = alloc_tx();
    if (t < 0) return;  // all descriptors busy; try again next step
    const auto tx = static_cast<std::uint16_t>(t);
    if (w.repost == RepostAt::kBeforeAnswer) {
      repost(static_cast<std::uint16_t>(w.buf), CreditClass::kRequest);
      w.buf = -1;
    }
    Message a;
    a.opcode = w.opcode;
    a.cookie = w.cookie;
    if (is_chunk_request(w.type)) {
      a.type = MessageType::kCompletion;
      a.status = 0;
      a.byte_count = w.bulk;
    } else {
      a.type = MessageType::kInlineResponse;
      a.payload = payload_for(~w.cookie, rand(kSimMessageSize - kHeaderSize + 1));
    }
    if (!encode_into(tx, a)) return;
    tx_holds_[tx] = w.buf;  // kAfterSend: the request's buffer goes back once this is posted
    w = work_.back();
    work_.pop_back();
    submit(CreditClass::kReserved, tx);
  }
}

void Endpoint::issue_requests() {
  if (stop_ || !chance(p_.request_rate)) return;
  const std::uint32_t burst = chance(p_.burst_rate) ? 1 + rand(p_.depth) : 1;
  for (std::uint32_t k = 0; k < burst; ++k) {
    if (issued_ >= p_.requests_per_side || pending_.size() >= p_.max_outstanding) return;
    const std::int32_t t = alloc_tx();
    if (t < 0) return;
    const auto tx = static_cast<std::uint16_t>(t);
    Message r;
    const std::uint32_t kind = rand(4);
    r.type = kind < 2 ? MessageType::kInlineRequest
                      : (kind == 2 ? MessageType::kReadChunkRequest : MessageType::kWriteChunkRequest);
    r.cookie = (static_cast<std::uint64_t>(side_) << 63) | next_cookie_++;
    r.opcode = static_cast<std::uint16_t>(rand(0x10000));
    std::size_t room = kSimMessageSize - kHeaderSize;
    if (is_chunk_request(r.type)) {
      r.chunk.count = static_cast<std::uint16_t>(1 + rand(kSimFragments));
      for (std::uint16_t f = 0; f < r.chunk.count; ++f) {
        r.chunk.fragments[f] = Fragment{rng_() >> 1, 1 + rand(1u << 16), static_cast<std::uint32_t>(rng_())};
      }
      room = kSimMessageSize - payload_offset(r.type, r.chunk.count);
    }
    r.payload = payload_for(r.cookie, rand(static_cast<std::uint32_t>(room) + 1));
    if (!encode_into(tx, r)) return;
    tx_holds_[tx] = -1;
    pending_.emplace(r.cookie, Pending{r.type, r.opcode, static_cast<std::uint32_t>(r.chunk.total_length())});
    ++issued_;
    submit(CreditClass::kRequest, tx);
  }
}

void Endpoint::maybe_queue_noop() {
  if (!m_.wants_noop(sim_.now())) return;
  const std::int32_t t = alloc_tx();
  if (t < 0) return;
  const auto tx = static_cast<std::uint16_t>(t);
  if (!encode_into(tx, Message{})) return;  // a default Message is a NOOP
  tx_holds_[tx] = -1;
  if (!m_.enqueue(CreditClass::kNoop, tx)) fail("enqueue refused a free descriptor");
}

void Endpoint::submit(CreditClass cls, std::uint16_t tx) {
  if (chance(0.5)) {
    if (!m_.enqueue(cls, tx)) fail("enqueue refused a free descriptor");
    return;
  }
  const SendStep s = m_.send_or_queue(cls, tx, sim_.now());
  if (s.tx == TxQueues::kEnd) {
    fail("send_or_queue refused a free descriptor");
  } else if (s.kind == SendKind::kSend) {
    post(s);
  }
}

void Endpoint::post(const SendStep& s) {
  Packet& d = tx_[s.tx];
  if (const WireError e = patch_credits({d.bytes.data(), d.len}, s.credits, session_); e != WireError::kOk) {
    fail(std::string("patch_credits: ") + std::string(to_string(e)));
    return;
  }
  d.credits = s.credits;
  out_.emplace_back();
  Packet& out = out_.back();
  out.len = d.len;
  out.credits = d.credits;
  std::memcpy(out.bytes.data(), d.bytes.data(), d.len);
  sim_.returns_towards(1 - side_) += s.credits;
  if (tx_holds_[s.tx] >= 0) {
    repost(static_cast<std::uint16_t>(tx_holds_[s.tx]), CreditClass::kRequest);
    tx_holds_[s.tx] = -1;
  }
  if (s.cls == CreditClass::kNoop && s.credits == 0) sim_.count_keepalive();
  free_tx(s.tx);
}

void Endpoint::pump(std::size_t limit) {
  for (; limit > 0 && !sim_.failed(); --limit) {
    const SendStep s = m_.next_send(sim_.now());
    if (s.kind == SendKind::kNone) return;
    if (s.kind == SendKind::kDropNoop) {
      free_tx(s.tx);
      continue;
    }
    post(s);
  }
}

// ---- simulation ---------------------------------------------------------------------------------------

Simulation::Simulation(const SimParams& p) : p_(p), rng_(p.seed ^ 0x5eedf00dull) {
  Session a;
  a.checksum = p.checksum;
  a.params = ConnParams{p.depth, kSimMessageSize, kSimFragments, 1u << 24};
  a.local_incarnation = 0x1111'2222'3333'4444ull + p.seed;
  a.peer_incarnation = 0x5555'6666'7777'8888ull + p.seed;
  Session b = a;
  std::swap(b.local_incarnation, b.peer_incarnation);
  ep_[0] = std::make_unique<Endpoint>(*this, 0, p, a, link_[0]);
  ep_[1] = std::make_unique<Endpoint>(*this, 1, p, b, link_[1]);
}

void Simulation::fail(const std::string& what) {
  if (!result_.ok) return;
  std::ostringstream o;
  o << "step " << now_ << ": " << what;
  result_.ok = false;
  result_.failure = o.str();
}

void Simulation::step(bool draining) {
  ++now_;
  const std::size_t batch = p_.depth / 2u + 2;
  const int first = static_cast<int>(rng_() & 1);
  for (int k = 0; k < 2 && !failed(); ++k) {
    const int i = first ^ k;
    Endpoint& e = *ep_[i];
    const auto some = [&](std::size_t n) {
      return draining ? SIZE_MAX : static_cast<std::size_t>(rng_() % (n + 1));
    };
    e.deliver_from(link_[1 - i], some(batch));
    e.process(some(batch));
    e.flush_reposts((rng_() & 1) ? some(batch) : (draining ? SIZE_MAX : 0));
    e.run_work();
    if (!draining) e.issue_requests();
    e.maybe_queue_noop();
    e.pump(draining ? SIZE_MAX : 1 + rng_() % p_.depth);
  }
  result_.max_inflight =
      std::max<std::uint64_t>(result_.max_inflight, std::max(link_[0].size(), link_[1].size()));
  if (!failed()) check_invariants();
  if (!failed() && stuck()) fail("deadlock: nothing in flight, nothing can be sent, yet work remains");
}

void Simulation::check_invariants() {
  const std::uint64_t depth = p_.depth;
  for (int i = 0; i < 2; ++i) {
    const Endpoint& s = *ep_[i];
    const Endpoint& r = *ep_[1 - i];
    const CreditMachine& sm = s.machine();
    const CreditMachine& rm = r.machine();
    if (rm.held() != r.held_buffers()) {
      std::ostringstream o;
      o << "side " << 1 - i << " machine holds " << rm.held() << " receives, the engine " << r.held_buffers();
      fail(o.str());
      return;
    }
    const std::uint64_t sum =
        sm.credits() + link_[i].size() + r.rx_cq_size() + rm.held() + rm.owed() + returns_in_flight_[i];
    if (sum != depth) {
      std::ostringstream o;
      o << "credits not conserved from side " << i << ": credits " << sm.credits() << " + in flight "
        << link_[i].size() << " + unprocessed " << r.rx_cq_size() << " + held " << rm.held() << " + owed "
        << rm.owed() << " + returns in flight " << returns_in_flight_[i] << " = " << sum << " != " << depth;
      fail(o.str());
      return;
    }
    if (p_.dead_timeout != 0 && sm.peer_dead(now_)) {
      fail("peer reported dead while it is alive");
      return;
    }
  }
}

bool Simulation::stuck() const {
  if (!link_[0].empty() || !link_[1].empty()) return false;
  bool work_left = false;
  for (const auto& e : ep_) {
    if (!e->quiet() || e->has_future_work() || e->has_ready_unqueued_work()) return false;
    if (e->machine().send_ready(now_)) return false;
    work_left = work_left || e->machine().queued_total() != 0 || e->unanswered() != 0;
  }
  return work_left;
}

SimResult Simulation::run() {
  // Traffic until both sides have issued everything. Generous cap: a live run needs ~2 steps per
  // request at the default rate.
  const std::uint64_t cap = 50 * p_.requests_per_side + 100000;
  while (!failed() && (ep_[0]->issued() < p_.requests_per_side || ep_[1]->issued() < p_.requests_per_side)) {
    if (now_ > cap) fail("no progress: requests stopped being issued");
    step(false);
  }
  // Drain: everything delivered, processed and answered within a bounded number of steps.
  const std::uint64_t drain_cap = now_ + 20 * p_.max_answer_delay + 100000;
  while (!failed() &&
         !(ep_[0]->idle_for_good() && ep_[1]->idle_for_good() && link_[0].empty() && link_[1].empty())) {
    if (now_ > drain_cap) fail("no progress until drained");
    step(true);
  }
  // The NOOPs that return the last credits must die out.
  const std::uint64_t settle_cap = now_ + 1000;
  const auto settled = [&] {
    return link_[0].empty() && link_[1].empty() && !ep_[0]->machine().send_ready(now_) &&
           !ep_[1]->machine().send_ready(now_);
  };
  while (!failed() && !settled() && p_.keepalive == 0) {
    if (now_ > settle_cap) fail("NOOPs keep flowing on an idle connection");
    step(true);
  }
  const std::uint64_t noops_before_tail = result_.noops;
  for (std::uint64_t t = 0; t < p_.idle_tail && !failed(); ++t) step(true);
  if (!failed() && p_.keepalive != 0 && p_.idle_tail != 0) {
    // Idle, each side sends about one keepalive per interval and nothing else.
    const std::uint64_t bound = 2 * (p_.idle_tail / p_.keepalive + 2);
    if (result_.noops - noops_before_tail > bound) fail("too many NOOPs on an idle connection");
  }
  for (const auto& e : ep_) {
    if (failed()) break;
    if (e->unanswered() != 0 || e->answered() != e->issued()) fail("a request was not answered exactly once");
  }
  result_.steps = now_;
  result_.issued = ep_[0]->issued() + ep_[1]->issued();
  result_.answered = ep_[0]->answered() + ep_[1]->answered();
  return result_;
}

SimResult run_simulation(const SimParams& p) {
  return Simulation(p).run();
}

// ---- tests ---------------------------------------------------------------------------------------------

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t kScale = 4;  // ASan/UBSan: a quarter of the messages, same coverage of rules
#else
constexpr std::uint64_t kScale = 1;
#endif

std::string describe(const SimParams& p) {
  std::ostringstream o;
  o << "depth " << p.depth << " seed " << p.seed << " high_water " << p.high_water
    << (p.checksum ? " checksum" : "");
  return o.str();
}

struct Totals {
  std::uint64_t data = 0;
  std::uint64_t noops = 0;
  std::uint64_t runs = 0;
};

void run_and_check(const SimParams& p, Totals& t) {
  const SimResult r = run_simulation(p);
  ASSERT_TRUE(r.ok) << describe(p) << ": " << r.failure;
  EXPECT_EQ(r.issued, 2 * p.requests_per_side) << describe(p);
  EXPECT_EQ(r.answered, r.issued) << describe(p);
  EXPECT_LE(r.max_inflight, p.depth) << describe(p);
  t.data += r.data_messages;
  t.noops += r.noops;
  ++t.runs;
}

// The main run: at least 10^6 requests and answers (10^6 / kScale under sanitizers), across
// several seeds and depths from the minimum up, with random high-water marks and checksums.
TEST(CreditSimulation, RandomTrafficManySeedsAndDepths) {
  const auto start = std::chrono::steady_clock::now();
  Totals t;
  const std::uint16_t depths[] = {4, 5, 6, 8, 16, 64};
  constexpr std::uint64_t kSeeds = 4;
  constexpr std::uint64_t kPerRun = 1'050'000 / (4 * 6 * kSeeds);  // 4 data messages per request pair
  for (const std::uint16_t depth : depths) {
    const Totals before = t;
    for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
      SimParams p;
      p.depth = depth;
      p.seed = seed * 1000 + depth;
      p.requests_per_side = kPerRun / kScale;
      p.high_water = static_cast<std::uint16_t>(seed % 2 == 0 ? 0 : (seed * depth) % (depth + 1));
      p.checksum = seed == 3;
      run_and_check(p, t);
      if (HasFatalFailure()) return;
    }
    std::printf(
        "  depth %3u: %llu requests+answers, NOOPs %.1f%%\n", depth,
        static_cast<unsigned long long>(t.data - before.data),
        100.0 * static_cast<double>(t.noops - before.noops) / static_cast<double>(t.data - before.data));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("credit simulation: %llu runs, %llu requests+answers, %llu NOOPs (%.2f%%), %.2f s\n",
              static_cast<unsigned long long>(t.runs), static_cast<unsigned long long>(t.data),
              static_cast<unsigned long long>(t.noops),
              100.0 * static_cast<double>(t.noops) / static_cast<double>(t.data), secs);
  EXPECT_GE(t.data, 1'000'000u / kScale);
}

// Every request holds its receive buffer until its answer is posted, with heavy symmetric load at
// the minimum depth: the case a missing reserve deadlocks.
TEST(CreditSimulation, ZeroCopyFloodAtMinimumDepth) {
  Totals t;
  for (std::uint16_t depth : {std::uint16_t{4}, std::uint16_t{5}}) {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      SimParams p;
      p.depth = depth;
      p.seed = 77 + seed;
      p.requests_per_side = 5000 / kScale;
      p.repost_at_receipt = 0;
      p.repost_before_answer = 0;
      p.request_rate = 1.0;
      p.burst_rate = 0.5;
      p.max_answer_delay = static_cast<std::uint32_t>(seed * 7);
      run_and_check(p, t);
      if (HasFatalFailure()) return;
    }
  }
}

// Answers that are quick, and high-water marks at both extremes.
TEST(CreditSimulation, ExtremeHighWaterAndNoDelay) {
  Totals t;
  for (std::uint16_t hw : {std::uint16_t{2}, std::uint16_t{0xffff}}) {
    for (std::uint16_t depth : {std::uint16_t{4}, std::uint16_t{12}, std::uint16_t{128}}) {
      SimParams p;
      p.depth = depth;
      p.seed = 500 + hw + depth;
      p.high_water = hw;
      p.max_answer_delay = 0;
      p.requests_per_side = 4000 / kScale;
      run_and_check(p, t);
      if (HasFatalFailure()) return;
    }
  }
}

// Keepalive on, dead-peer timeout on: under traffic and then idle for a long time, neither side
// is ever reported dead, and idle NOOPs stay at about one per interval per side.
TEST(CreditSimulation, KeepaliveKeepsAnIdleConnectionAlive) {
  Totals t;
  for (std::uint16_t depth : {std::uint16_t{4}, std::uint16_t{32}}) {
    SimParams p;
    p.depth = depth;
    p.seed = 900 + depth;
    p.requests_per_side = 3000 / kScale;
    p.keepalive = 50;
    p.dead_timeout = 200;
    p.idle_tail = 5000;
    run_and_check(p, t);
    if (HasFatalFailure()) return;
  }
}

// The simulation is only evidence if it can fail: without the reserve, requests take every credit
// and zero-copy holds turn that into a deadlock at small depths.
TEST(CreditSimulation, DetectsTheDeadlockWithoutAReserve) {
  bool caught = false;
  for (std::uint64_t seed = 1; seed <= 20 && !caught; ++seed) {
    SimParams p;
    p.depth = 4;
    p.seed = seed;
    p.requests_per_side = 5000;
    p.repost_at_receipt = 0;
    p.repost_before_answer = 0;
    p.request_rate = 1.0;
    p.burst_rate = 0.5;
    p.ablate_reserve = true;
    const SimResult r = run_simulation(p);
    if (!r.ok) {
      EXPECT_NE(r.failure.find("deadlock"), std::string::npos) << r.failure;
      std::printf("without a reserve, seed %llu: %s\n", static_cast<unsigned long long>(seed),
                  r.failure.c_str());
      caught = true;
    }
  }
  EXPECT_TRUE(caught);
}

}  // namespace
}  // namespace rdmagate::protocol::sim

// Host unit tests of the object service over the storage interface, driven through a fake core (no CQ, QP
// or EAL): ops that end at once (the memory store) and ops that end later on another thread
// (ThreadedStorage below), inline and by chunk, transfers waiting for the bulk engine, completions that
// arrive after their connection closed, one lease per connection, the close that leaves a running
// transfer's lease to the core's hook, unsolicited answers, and every pin and reservation given back.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/auth_table.hpp"
#include "dataplane/core_conn.hpp"
#include "dataplane/doorbell.hpp"
#include "protocol/object_wire.hpp"
#include "services/object/object_service.hpp"
#include "services/storage/completion_queue.hpp"
#include "services/storage/memory/store.hpp"
#include "services/storage/storage.hpp"
#include "tests/services/storage/memory/store_test_util.hpp"

namespace rdmagate::dataplane {
namespace {

using protocol::MessageType;
using protocol::ObjectOpcode;
using protocol::ObjectStatus;
using storage::Status;

constexpr std::uint32_t kMaxMessage = 1024;  // inline GETs answer values up to kMaxMessage - 40 bytes

// A backend whose every op ends later, on its own thread, over a real store (so pins and reservations are
// real and the store's accounting proves they were all given back). Jobs run in submission order; while
// held, they wait. abort and release end at once, on the caller's thread, as the interface requires.
class ThreadedStorage final : public storage::CoreStorage {
 public:
  explicit ThreadedStorage(store::Store& s, std::uint32_t queue_capacity = 64)
      : caller_(s.core(0)), worker_side_(s.core(1)) {
    std::string error;
    cq_ = storage::CompletionQueue::create(queue_capacity, &error);
    EXPECT_NE(cq_, nullptr) << error;
    worker_ = std::thread([this] { run(); });
  }
  ~ThreadedStorage() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
      held_ = false;
    }
    cv_.notify_all();
    worker_.join();
  }

  // While held, submitted jobs wait (so a test can close a connection before they end).
  void hold(bool on) {
    {
      std::lock_guard<std::mutex> l(mu_);
      held_ = on;
    }
    cv_.notify_all();
  }
  // Jobs submitted and not yet completed.
  std::size_t in_flight() {
    std::lock_guard<std::mutex> l(mu_);
    return jobs_.size() + running_;
  }
  storage::CompletionQueue& queue() { return *cq_; }

  // Jobs carry the namespace's id (the memory store's namespace); what a PUT or DELETE replaced comes back
  // in its Completion, as the storage interface says.
  Status get(const storage::Namespace& ns, std::string_view key, std::uint64_t tag,
             storage::Lease*) noexcept override {
    return submit(Job{Kind::kGet, ns.id, std::string(key), {}, 0, {}, tag});
  }
  Status put(const storage::Namespace& ns, std::string_view key, std::span<const std::byte> value,
             std::uint64_t tag, storage::Prior*) noexcept override {
    return submit(Job{
        Kind::kPut, ns.id, std::string(key), std::vector<std::byte>(value.begin(), value.end()), 0, {}, tag});
  }
  Status remove(const storage::Namespace& ns, std::string_view key, std::uint64_t tag,
                storage::Prior*) noexcept override {
    return submit(Job{Kind::kRemove, ns.id, std::string(key), {}, 0, {}, tag});
  }
  Status reserve(const storage::Namespace& ns, std::string_view key, std::uint64_t size, std::uint64_t tag,
                 storage::Lease*) noexcept override {
    return submit(Job{Kind::kReserve, ns.id, std::string(key), {}, size, {}, tag});
  }
  Status commit(const storage::Namespace& ns, storage::Lease* lease, std::uint64_t tag,
                storage::Prior*) noexcept override {
    const storage::Lease l = *lease;
    *lease = storage::Lease{};
    return submit(Job{Kind::kCommit, ns.id, {}, {}, 0, l, tag});
  }
  void abort(storage::Lease* lease) noexcept override { caller_.abort(lease); }
  void release(storage::Lease* lease) noexcept override { caller_.release(lease); }
  bool reports_prior() const noexcept override { return true; }
  storage::Prior peek(const storage::Namespace& ns, std::string_view key) noexcept override {
    return caller_.peek(ns, key);
  }
  storage::CompletionQueue* completions() noexcept override { return cq_.get(); }

 private:
  enum class Kind { kGet, kPut, kRemove, kReserve, kCommit };
  struct Job {
    Kind kind;
    std::uint16_t tenant;
    std::string key;
    std::vector<std::byte> value;
    std::uint64_t size;
    storage::Lease lease;
    std::uint64_t tag;
  };

  Status submit(Job j) {
    {
      std::lock_guard<std::mutex> l(mu_);
      jobs_.push_back(std::move(j));
    }
    cv_.notify_all();
    return Status::kPending;
  }

  void run() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [this] { return stop_ || (!held_ && !jobs_.empty()); });
      if (jobs_.empty()) return;  // stopping
      Job j = std::move(jobs_.front());
      jobs_.pop_front();
      ++running_;
      l.unlock();
      storage::Completion done;
      done.tag = j.tag;
      const storage::Namespace ns{j.tenant, {}};
      storage::Prior prior;
      switch (j.kind) {
        case Kind::kGet:
          done.status = worker_side_.get(ns, j.key, j.tag, &done.lease);
          break;
        case Kind::kPut:
          done.status = worker_side_.put(ns, j.key, j.value, j.tag, &prior);
          break;
        case Kind::kRemove:
          done.status = worker_side_.remove(ns, j.key, j.tag, &prior);
          break;
        case Kind::kReserve:
          done.status = worker_side_.reserve(ns, j.key, j.size, j.tag, &done.lease);
          break;
        case Kind::kCommit:
          done.status = worker_side_.commit(ns, &j.lease, j.tag, &prior);
          break;
      }
      done.set_prior(prior);
      EXPECT_TRUE(cq_->push(done)) << "the service started more ops than the queue holds";
      l.lock();
      --running_;
    }
  }

  storage::CoreStorage& caller_;       // store row 0: the core's thread (abort, release)
  storage::CoreStorage& worker_side_;  // store row 1: the worker thread
  std::unique_ptr<storage::CompletionQueue> cq_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::size_t running_ = 0;
  bool held_ = false;
  bool stop_ = false;
  std::thread worker_;
};

// What the service sees of the core loop, with the core's rules for sends and bulk transfers; the test
// plays the NIC (finish_read / finish_write) and the core's teardown (close).
struct FakeCore {
  struct Sent {
    MessageType type;
    std::uint16_t opcode;
    std::uint64_t cookie;
    std::vector<std::uint8_t> payload;
    std::uint32_t status;
    std::uint32_t bytes;
  };
  std::vector<Sent> sent;
  std::uint64_t now = 1000;

  bool quiescing_st() const { return false; }
  std::uint64_t now_tsc_st() const { return now; }
  std::uint64_t tsc_hz() const { return 1'000'000'000; }
  bool send_st(CoreConn& c, MessageType t, std::uint16_t op, std::uint64_t cookie,
               std::span<const std::uint8_t> p, std::uint32_t status = 0, std::uint32_t bytes = 0) {
    if (c.state != CoreConnState::kOwned) return false;
    sent.push_back(Sent{t, op, cookie, std::vector<std::uint8_t>(p.begin(), p.end()), status, bytes});
    return true;
  }
  bool bulk_read_st(CoreConn& c, const ChunkRequest& req, std::uint8_t* dst, std::uint32_t) {
    if (c.state != CoreConnState::kOwned || c.bulk_op.state != BulkState::kIdle) return false;
    start(c, BulkState::kReading, req, dst, static_cast<std::uint32_t>(req.chunk.total_length()));
    return true;
  }
  bool bulk_write_st(CoreConn& c, const ChunkRequest& req, const std::uint8_t* src, std::uint32_t,
                     std::uint32_t len) {
    if (c.state != CoreConnState::kOwned || c.bulk_op.state != BulkState::kIdle ||
        req.chunk.total_length() < len) {
      return false;
    }
    start(c, BulkState::kWriting, req, const_cast<std::uint8_t*>(src), len);
    return true;
  }

  // The NIC's READ of the requester's value landed (ok) or failed; the core ends the op like end_bulk_st.
  void finish_read(ObjectService& svc, CoreConn& c, std::span<const std::byte> value, bool ok = true) {
    BulkOp& op = c.bulk_op;
    ASSERT_EQ(op.state, BulkState::kReading);
    if (ok) std::memcpy(op.local, value.data(), value.size());
    op.state = BulkState::kIdle;
    if (ok && c.state == CoreConnState::kOwned) {
      svc.on_bulk_read_done_st(*this, c, op);
    } else {
      op.failed = true;
      svc.on_bulk_read_failed_st(*this, c, op);
    }
  }
  // The NIC's last WRITE completed; returns what it wrote into the requester's memory.
  std::vector<std::byte> finish_write(ObjectService& svc, CoreConn& c, bool failed = false) {
    BulkOp& op = c.bulk_op;
    EXPECT_EQ(op.state, BulkState::kWriting);
    std::vector<std::byte> written(reinterpret_cast<const std::byte*>(op.local),
                                   reinterpret_cast<const std::byte*>(op.local) + op.bytes);
    op.state = BulkState::kIdle;
    op.failed = failed;
    svc.on_bulk_write_done_st(*this, c, op);
    return written;
  }
  // CLOSE: the service's on_close_st, then the transfer in flight ends failed (read-failed or write-done),
  // as the core does before it answers CLOSED.
  void close(ObjectService& svc, CoreConn& c) {
    svc.on_close_st(*this, c);
    c.state = CoreConnState::kDraining;
    BulkOp& op = c.bulk_op;
    if (op.state == BulkState::kReading) {
      op.state = BulkState::kIdle;
      op.failed = true;
      svc.on_bulk_read_failed_st(*this, c, op);
    } else if (op.state == BulkState::kWriting) {
      op.state = BulkState::kIdle;
      op.failed = true;
      svc.on_bulk_write_done_st(*this, c, op);
    }
  }

 private:
  static void start(CoreConn& c, BulkState s, const ChunkRequest& req, std::uint8_t* local, std::uint32_t n) {
    BulkOp& op = c.bulk_op;
    op.state = s;
    op.req = req;
    op.bytes = n;
    op.local = local;
    op.failed = false;
  }
};

std::vector<std::uint8_t> key_payload(const std::string& key, std::span<const std::byte> value = {}) {
  std::vector<std::uint8_t> out(protocol::object_payload_size(key.size(), value.size()));
  const auto v =
      std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(value.data()), value.size());
  EXPECT_EQ(protocol::encode_object_payload(key, v, out), out.size());
  return out;
}

std::uint16_t opcode(protocol::ObjectOp op) {
  return static_cast<std::uint16_t>(protocol::object_opcode(op));
}

// A chunk whose fragments name nothing real: the fake NIC never dereferences them.
ChunkRequest chunk_request(MessageType type, protocol::ObjectOp op, std::uint64_t cookie,
                           const std::string& key, std::uint32_t len) {
  ChunkRequest r;
  r.type = type;
  r.opcode = opcode(op);
  r.cookie = cookie;
  r.chunk.count = 2;
  r.chunk.fragments[0] = protocol::Fragment{0x1000, len / 2, 7};
  r.chunk.fragments[1] = protocol::Fragment{0x9000, len - len / 2, 7};
  const auto p = key_payload(key);
  r.payload_len = static_cast<std::uint32_t>(p.size());
  std::memcpy(r.payload_buf.data(), p.data(), p.size());
  return r;
}

class ObjectServiceTest : public ::testing::Test {
 protected:
  ObjectServiceTest() : region_(8u << 20) {
    store::StoreConfig sc;
    sc.max_value = 1u << 20;
    sc.max_objects = 256;
    sc.max_inflight = 64;
    sc.max_cores = 2;
    store_ = store::test::make_store(region_, sc);
  }

  // A service over `s` and one adopted connection.
  void start(storage::CoreStorage& s, std::uint32_t max_requests = 1024,
             telemetry::CoreStats* stats = nullptr) {
    ObjectServiceConfig cfg;
    cfg.storage = &s;
    cfg.max_requests = max_requests;
    cfg.stats = stats;
    svc_ = std::make_unique<ObjectService>(cfg);
    conn_ = std::make_unique<CoreConn>();
    conn_->state = CoreConnState::kOwned;
    conn_->session.params.max_message_size = kMaxMessage;
    svc_->on_adopt_st(api_, *conn_);
  }

  void inline_request(protocol::ObjectOp op, std::uint64_t cookie, const std::string& key,
                      std::span<const std::byte> value = {}) {
    const auto p = key_payload(key, value);
    protocol::Message m;
    m.type = MessageType::kInlineRequest;
    m.opcode = opcode(op);
    m.cookie = cookie;
    m.payload = p;
    svc_->on_request_st(api_, *conn_, m);
  }
  void chunk(MessageType type, protocol::ObjectOp op, std::uint64_t cookie, const std::string& key,
             std::uint32_t len) {
    svc_->on_chunk_request_st(api_, *conn_, chunk_request(type, op, cookie, key, len));
  }

  // Polls the service as the core would until no storage op is pending (the worker ends them).
  void drain() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (svc_->pending_storage_ops() != 0) {
      svc_->on_poll_st(api_);
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "completions never came";
      std::this_thread::yield();
    }
  }

  const FakeCore::Sent& last() { return api_.sent.back(); }
  void expect_completion(std::uint64_t cookie, ObjectStatus st, std::uint32_t bytes) {
    ASSERT_FALSE(api_.sent.empty());
    EXPECT_EQ(last().type, MessageType::kCompletion);
    EXPECT_EQ(last().cookie, cookie);
    EXPECT_EQ(last().status, static_cast<std::uint32_t>(st)) << protocol::object_status_name(last().status);
    EXPECT_EQ(last().bytes, bytes);
  }

  store::test::Region region_;
  std::unique_ptr<store::Store> store_;
  FakeCore api_;
  std::unique_ptr<ObjectService> svc_;
  std::unique_ptr<CoreConn> conn_;
};

// The memory store through the interface: every op ends inside the call, nothing is ever pending and the
// poll hook stays idle.
TEST_F(ObjectServiceTest, MemoryStoreEndsEveryOpAtOnce) {
  start(store_->core(0));
  const auto v = store::test::pattern(300, 1);
  inline_request(protocol::ObjectOp::kPut, 1, "a", v);
  expect_completion(1, ObjectStatus::kOk, 300);
  inline_request(protocol::ObjectOp::kGet, 2, "a");
  ASSERT_EQ(last().type, MessageType::kInlineResponse);
  EXPECT_EQ(std::memcmp(last().payload.data(), v.data(), v.size()), 0);

  const auto big = store::test::pattern(5000, 2);
  chunk(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 3, "b", 5000);
  api_.finish_read(*svc_, *conn_, big);
  expect_completion(3, ObjectStatus::kOk, 5000);
  chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 4, "b", 8000);
  expect_completion(4, ObjectStatus::kOk, 5000);
  EXPECT_EQ(api_.finish_write(*svc_, *conn_), big);

  inline_request(protocol::ObjectOp::kDelete, 5, "a");
  expect_completion(5, ObjectStatus::kOk, 0);
  inline_request(protocol::ObjectOp::kDelete, 6, "b");
  expect_completion(6, ObjectStatus::kOk, 0);
  EXPECT_FALSE(svc_->on_poll_st(api_));
  EXPECT_EQ(svc_->counters().storage_pending, 0u);
  EXPECT_EQ(svc_->open_requests(), 0u);
  store::test::expect_empty(*store_);
}

TEST_F(ObjectServiceTest, InlinePutGetDeleteEndLater) {
  ThreadedStorage ts(*store_);
  start(ts);
  const auto v = store::test::pattern(700, 3);
  inline_request(protocol::ObjectOp::kPut, 1, "key", v);
  EXPECT_TRUE(api_.sent.empty()) << "answered only when the storage op ends";
  EXPECT_EQ(svc_->pending_st(*conn_), 1u);
  drain();
  expect_completion(1, ObjectStatus::kOk, 700);

  inline_request(protocol::ObjectOp::kGet, 2, "key");
  drain();
  ASSERT_EQ(last().type, MessageType::kInlineResponse);
  EXPECT_EQ(last().cookie, 2u);
  ASSERT_EQ(last().payload.size(), v.size());
  EXPECT_EQ(std::memcmp(last().payload.data(), v.data(), v.size()), 0);

  const auto too_big = store::test::pattern(kMaxMessage, 4);  // above the inline limit
  inline_request(protocol::ObjectOp::kPut, 3, "big", too_big);
  drain();
  inline_request(protocol::ObjectOp::kGet, 4, "big");
  drain();
  expect_completion(4, ObjectStatus::kTooSmall, kMaxMessage);

  inline_request(protocol::ObjectOp::kDelete, 5, "key");
  inline_request(protocol::ObjectOp::kDelete, 6, "big");
  drain();
  inline_request(protocol::ObjectOp::kGet, 7, "key");
  drain();
  expect_completion(7, ObjectStatus::kNotFound, 0);
  EXPECT_EQ(svc_->counters().storage_pending, 7u);
  EXPECT_EQ(svc_->open_requests(), 0u);
  EXPECT_EQ(svc_->pending_st(*conn_), 0u);
  store::test::expect_empty(*store_);
}

// A core with idle_policy event may sleep with storage ops pending only when their completions ring it.
TEST_F(ObjectServiceTest, IdleWithOpsPendingOnlyWhenTheQueueWakesTheCore) {
  ThreadedStorage ts(*store_);
  start(ts);
  EXPECT_TRUE(svc_->idle_st()) << "nothing pending";
  ts.hold(true);
  inline_request(protocol::ObjectOp::kGet, 1, "key");
  ASSERT_EQ(svc_->pending_storage_ops(), 1u);
  EXPECT_FALSE(svc_->idle_st()) << "its completion would ring nothing";
  Doorbell bell;
  ts.queue().set_wake(&bell);
  EXPECT_TRUE(svc_->idle_st()) << "its completion rings the core's storage bell";
  bell.arm();
  ts.hold(false);
  for (int i = 0; i < 5000 && bell.rings() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(bell.rings(), 1u) << "the completion rang the armed bell";
  bell.disarm();
  drain();
  expect_completion(1, ObjectStatus::kNotFound, 0);
  EXPECT_EQ(svc_->open_requests(), 0u);
}

// PUT by read chunk: the reservation ends later, the READ fills it, the commit ends later; GET by write
// chunk: the pin ends later, the WRITE moves exactly the value, the pin goes when the WRITE is done.
TEST_F(ObjectServiceTest, ChunkPutAndGetEndLater) {
  ThreadedStorage ts(*store_);
  start(ts);
  const auto v = store::test::pattern(100'000, 5);
  chunk(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 1, "obj", 100'000);
  drain();  // the reservation
  ASSERT_EQ(conn_->bulk_op.state, BulkState::kReading);
  EXPECT_TRUE(api_.sent.empty());
  api_.finish_read(*svc_, *conn_, v);
  EXPECT_EQ(svc_->pending_storage_ops(), 1u) << "the commit pends";
  drain();
  expect_completion(1, ObjectStatus::kOk, 100'000);

  chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 2, "obj", 200'000);
  drain();
  expect_completion(2, ObjectStatus::kOk, 100'000);  // sent behind the WRITEs
  EXPECT_EQ(svc_->pending_st(*conn_), 1u) << "the transfer holds the pin";
  EXPECT_EQ(api_.finish_write(*svc_, *conn_), v);
  EXPECT_EQ(svc_->pending_st(*conn_), 0u);

  chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 3, "obj", 1000);
  drain();
  expect_completion(3, ObjectStatus::kTooSmall, 100'000);
  chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 4, "none", 1000);
  drain();
  expect_completion(4, ObjectStatus::kNotFound, 0);
  chunk(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 5, "huge", 2u << 20);
  drain();
  expect_completion(5, ObjectStatus::kTooLarge, 0);

  inline_request(protocol::ObjectOp::kDelete, 6, "obj");
  drain();
  EXPECT_EQ(svc_->open_requests(), 0u);
  store::test::expect_empty(*store_);
}

TEST_F(ObjectServiceTest, AFailedReadAbortsTheReservation) {
  ThreadedStorage ts(*store_);
  start(ts);
  chunk(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 1, "obj", 4096);
  drain();
  api_.finish_read(*svc_, *conn_, {}, false);
  expect_completion(1, ObjectStatus::kBulkFailed, 0);
  EXPECT_EQ(svc_->counters().bulk_failures, 1u);
  EXPECT_EQ(svc_->open_requests(), 0u);
  store::test::expect_empty(*store_);
}

// A connection's chunk requests run one at a time: while one is open (its storage op pending, its transfer
// running, its commit pending) the next wait without a storage call and without a lease, and start in
// arrival order when it ends.
TEST_F(ObjectServiceTest, ChunkRequestsOfAConnectionWaitWithoutALease) {
  ThreadedStorage ts(*store_);
  start(ts);
  const auto a = store::test::pattern(3000, 6);
  const auto b = store::test::pattern(5000, 7);
  ASSERT_EQ(store_->put(0, "a", store::test::as_span(a)), store::Status::kOk);
  ASSERT_EQ(store_->put(0, "b", store::test::as_span(b)), store::Status::kOk);
  const std::uint64_t published = store_->stats().used_bytes;
  chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 1, "a", 8192);
  chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 2, "b", 8192);
  chunk(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 3, "c", 4000);
  EXPECT_EQ(svc_->pending_storage_ops(), 1u) << "only the first made its storage call";
  EXPECT_EQ(svc_->counters().deferred, 2u);
  EXPECT_EQ(svc_->pending_st(*conn_), 3u);
  drain();
  EXPECT_EQ(svc_->counters().storage_pending, 1u);
  EXPECT_EQ(store_->stats().used_bytes, published) << "no reservation for the waiting PUT";
  expect_completion(1, ObjectStatus::kOk, 3000);
  EXPECT_EQ(api_.finish_write(*svc_, *conn_), a);  // the hook starts "b": its GET pends
  drain();
  expect_completion(2, ObjectStatus::kOk, 5000);
  EXPECT_EQ(store_->stats().used_bytes, published);
  EXPECT_EQ(api_.finish_write(*svc_, *conn_), b);  // the hook starts "c": its reservation pends
  drain();
  ASSERT_EQ(conn_->bulk_op.state, BulkState::kReading);
  EXPECT_EQ(store_->stats().used_bytes, published + store_->charge_for(4000));
  const auto c = store::test::pattern(4000, 8);
  api_.finish_read(*svc_, *conn_, c);
  drain();
  expect_completion(3, ObjectStatus::kOk, 4000);
  EXPECT_EQ(svc_->pending_st(*conn_), 0u);
  for (const char* k : {"a", "b", "c"}) ASSERT_EQ(store_->remove(0, k), store::Status::kOk);
  store::test::expect_empty(*store_);
}

// PUTs by chunk on one connection: at any moment at most one reservation exists, also while the previous
// value's commit pends (the next reservation waits for it), so the connection holds at most max_value.
TEST_F(ObjectServiceTest, AConnectionHoldsOneReservationAtATime) {
  ThreadedStorage ts(*store_);
  start(ts);
  constexpr std::uint32_t kLen = 100'000;
  const std::uint64_t charge = store_->charge_for(kLen);
  for (std::uint64_t k = 0; k < 4; ++k) {
    chunk(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, k, store::test::key_of("v", k), kLen);
  }
  for (std::uint64_t k = 0; k < 4; ++k) {
    drain();  // the reservation of value k
    ASSERT_EQ(conn_->bulk_op.state, BulkState::kReading);
    // k values published, one reserved, the others waiting with nothing
    EXPECT_EQ(store_->stats().used_bytes, (k + 1) * charge);
    EXPECT_EQ(store_->stats().objects, k);
    ts.hold(true);
    api_.finish_read(*svc_, *conn_,
                     store::test::as_span(store::test::pattern(kLen, static_cast<std::uint32_t>(k))));
    EXPECT_EQ(svc_->pending_storage_ops(), 1u) << "the commit pends";
    EXPECT_EQ(conn_->bulk_op.state, BulkState::kIdle);
    EXPECT_EQ(store_->stats().used_bytes, (k + 1) * charge) << "the next waits for the commit";
    ts.hold(false);
    drain();  // the commit, which starts the next reservation
    expect_completion(k, ObjectStatus::kOk, kLen);
  }
  EXPECT_EQ(svc_->counters().deferred, 3u);
  for (std::uint64_t k = 0; k < 4; ++k)
    ASSERT_EQ(store_->remove(0, store::test::key_of("v", k)), store::Status::kOk);
  store::test::expect_empty(*store_);
}

// At most kChunkQueue chunk requests wait per connection; one more is answered no_resources at once and
// started nothing.
TEST_F(ObjectServiceTest, AChunkRequestBeyondTheWaitingLimitIsRefused) {
  ThreadedStorage ts(*store_);
  start(ts);
  ts.hold(true);
  for (std::uint64_t k = 0; k <= kChunkQueue; ++k) {
    chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, k, "none", 100);
  }
  EXPECT_TRUE(api_.sent.empty());
  EXPECT_EQ(svc_->counters().deferred, kChunkQueue);
  chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 99, "none", 100);
  expect_completion(99, ObjectStatus::kNoResources, 0);
  EXPECT_EQ(svc_->counters().deferred_full, 1u);
  EXPECT_EQ(svc_->pending_storage_ops(), 1u);
  ts.hold(false);
  drain();  // each not_found ends its request and starts the next
  EXPECT_EQ(api_.sent.size(), kChunkQueue + 2);
  expect_completion(kChunkQueue, ObjectStatus::kNotFound, 0);
  EXPECT_EQ(svc_->open_requests(), 0u);
  store::test::expect_empty(*store_);
}

// The bulk deadline (or any failure) fails the connection while a transfer runs: the close leaves the
// lease alone, and only the core's hook, once every posted READ/WRITE completed or flushed, gives it back.
TEST_F(ObjectServiceTest, ALeaseGoesBackOnlyWhenTheCoreEndsTheTransfer) {
  start(store_->core(0));
  const auto v = store::test::pattern(50'000, 11);
  ASSERT_EQ(store_->put(0, "x", store::test::as_span(v)), store::Status::kOk);
  const std::uint64_t one = store_->charge_for(v.size());

  chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 1, "x", 60'000);
  ASSERT_EQ(conn_->bulk_op.state, BulkState::kWriting);
  ASSERT_EQ(store_->remove(0, "x"), store::Status::kOk);
  EXPECT_EQ(store_->stats().used_bytes, one) << "the pin keeps the unpublished block";
  conn_->state = CoreConnState::kFailed;  // what the core's bulk deadline does
  svc_->on_close_st(api_, *conn_);
  EXPECT_EQ(store_->stats().used_bytes, one) << "the WRITEs may still read it";
  (void)api_.finish_write(*svc_, *conn_, true);  // the last WRITE flushed
  EXPECT_EQ(store_->stats().used_bytes, 0u);

  // The same for a PUT's reservation, on a new connection.
  conn_ = std::make_unique<CoreConn>();
  conn_->state = CoreConnState::kOwned;
  conn_->session.params.max_message_size = kMaxMessage;
  svc_->on_adopt_st(api_, *conn_);
  chunk(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 2, "y", 50'000);
  ASSERT_EQ(conn_->bulk_op.state, BulkState::kReading);
  EXPECT_EQ(store_->stats().used_bytes, one);
  conn_->state = CoreConnState::kFailed;
  svc_->on_close_st(api_, *conn_);
  EXPECT_EQ(store_->stats().used_bytes, one) << "the READs may still write it";
  api_.finish_read(*svc_, *conn_, {}, false);  // the READs flushed
  EXPECT_EQ(svc_->counters().bulk_failures, 2u);
  EXPECT_EQ(svc_->open_requests(), 0u);
  store::PinnedValue none;
  EXPECT_EQ(store_->get(0, "y", &none), store::Status::kNotFound);
  store::test::expect_empty(*store_);
}

// Every kind of pending request outlives its connection: the CoreConn is freed after the close (as control
// does after CLOSED), then the completions arrive. They touch no connection, answer nothing and give back
// what they lend. Transfers waiting for the bulk engine give their lease back at the close, the running one
// in the core's hook.
TEST_F(ObjectServiceTest, CompletionsAfterTheConnectionClosedOnlyGiveBack) {
  ThreadedStorage ts(*store_);
  start(ts);
  const auto v = store::test::pattern(2000, 9);
  ASSERT_EQ(store_->put(0, "x", store::test::as_span(v)), store::Status::kOk);
  // A GET transferring, a GET and a PUT waiting for it (without leases).
  chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 1, "x", 4096);
  chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 2, "x", 4096);
  chunk(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 3, "p", 3000);
  drain();
  ASSERT_EQ(conn_->bulk_op.state, BulkState::kWriting);
  // Still pending at the close: an inline GET and an inline PUT; two more chunk requests wait.
  ts.hold(true);
  inline_request(protocol::ObjectOp::kGet, 4, "x");
  chunk(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 5, "x", 4096);
  chunk(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 6, "q", 3000);
  inline_request(protocol::ObjectOp::kPut, 7, "r", v);
  EXPECT_EQ(svc_->pending_storage_ops(), 2u);
  EXPECT_EQ(svc_->counters().deferred, 4u);
  const std::size_t answers = api_.sent.size();

  api_.close(*svc_, *conn_);
  EXPECT_EQ(svc_->counters().released_at_close, 4u) << "the waiting chunk requests, dropped";
  EXPECT_EQ(svc_->pending_st(*conn_), 0u);
  conn_.reset();  // control frees (or reuses) it after CLOSED: ASan would catch any later touch

  ts.hold(false);
  drain();
  EXPECT_EQ(svc_->counters().orphaned, 2u);
  EXPECT_EQ(api_.sent.size(), answers) << "nothing is answered on a closed connection";
  EXPECT_EQ(svc_->open_requests(), 0u);
  // The inline PUT committed by itself (it was the backend's once submitted); the chunk PUTs never
  // reserved, and every pin was released.
  for (const char* k : {"x", "r"}) ASSERT_EQ(store_->remove(0, k), store::Status::kOk);
  for (const char* k : {"p", "q"}) EXPECT_EQ(store_->remove(0, k), store::Status::kNotFound);
  store::test::expect_empty(*store_);
}

// The commit of a chunk PUT pends past the close: it still publishes (the READ had landed), and its
// completion answers nothing.
TEST_F(ObjectServiceTest, ACommitEndingAfterTheCloseStillPublishes) {
  ThreadedStorage ts(*store_);
  start(ts);
  const auto v = store::test::pattern(3000, 10);
  chunk(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 1, "p", 3000);
  drain();
  ts.hold(true);
  api_.finish_read(*svc_, *conn_, v);
  EXPECT_EQ(svc_->pending_storage_ops(), 1u);
  api_.close(*svc_, *conn_);
  conn_.reset();
  ts.hold(false);
  drain();
  EXPECT_EQ(svc_->counters().orphaned, 1u);
  EXPECT_TRUE(api_.sent.empty());
  store::PinnedValue got;
  ASSERT_EQ(store_->get(0, "p", &got), store::Status::kOk);
  EXPECT_EQ(std::memcmp(got.data, v.data(), v.size()), 0);
  store_->unpin(&got);
  ASSERT_EQ(store_->remove(0, "p"), store::Status::kOk);
  store::test::expect_empty(*store_);
}

// A request that cannot take a slot is refused at once, never lost; the table caps what the queue must hold.
TEST_F(ObjectServiceTest, AFullRequestTableAnswersNoResources) {
  ThreadedStorage ts(*store_, 2);
  start(ts, 1024);  // capped to the queue's 2
  ts.hold(true);
  inline_request(protocol::ObjectOp::kPut, 1, "a");
  inline_request(protocol::ObjectOp::kPut, 2, "b");
  inline_request(protocol::ObjectOp::kPut, 3, "c");
  expect_completion(3, ObjectStatus::kNoResources, 0);
  EXPECT_EQ(svc_->counters().table_full, 1u);
  ts.hold(false);
  drain();
  EXPECT_EQ(api_.sent.size(), 3u);
  for (const char* k : {"a", "b"}) ASSERT_EQ(store_->remove(0, k), store::Status::kOk);
  store::test::expect_empty(*store_);
}

// A completion that names no pending request (a backend that completes twice, or with a slot's old tag) is
// counted and dropped; the real one still ends its request.
TEST_F(ObjectServiceTest, AStaleCompletionIsDropped) {
  ThreadedStorage ts(*store_);
  start(ts);
  ts.hold(true);
  inline_request(protocol::ObjectOp::kDelete, 1, "a");
  storage::Completion forged;
  forged.tag = std::uint64_t{7} << 32;  // slot 0, a generation it does not have
  forged.status = Status::kOk;
  ASSERT_TRUE(ts.queue().push(forged));
  svc_->on_poll_st(api_);
  EXPECT_EQ(svc_->counters().stale_completions, 1u);
  EXPECT_TRUE(api_.sent.empty());
  ts.hold(false);
  drain();
  expect_completion(1, ObjectStatus::kNotFound, 0);
}

// The gateway asks nothing, so answers are unsolicited: counted by type, ignored, never answered.
TEST_F(ObjectServiceTest, UnsolicitedAnswersAreCountedAndIgnored) {
  telemetry::CoreStats block;
  start(store_->core(0), 1024, &block);
  protocol::Message m;
  m.type = MessageType::kCompletion;
  m.opcode = opcode(protocol::ObjectOp::kGet);
  m.cookie = 5;
  svc_->on_response_st(api_, *conn_, m);
  svc_->on_response_st(api_, *conn_, m);  // the same cookie again
  m.type = MessageType::kInlineResponse;
  svc_->on_response_st(api_, *conn_, m);
  EXPECT_EQ(svc_->counters().unexpected, 3u);
  EXPECT_EQ(block.load(telemetry::Stat::kUnsolicitedCompletions), 2u);
  EXPECT_EQ(block.load(telemetry::Stat::kUnsolicitedInlineResponses), 1u);
  EXPECT_TRUE(api_.sent.empty());
  EXPECT_EQ(conn_->state, CoreConnState::kOwned);
  EXPECT_EQ(svc_->open_requests(), 0u);
}

// ---- tenants: namespaces, permissions, quotas (docs/store.md "Tenant namespaces, permissions and quotas")

// Two tenants and their principals, as an AuthTable holds them (the usage objects outlive tables).
struct Tenancy {
  TenantUsage usage_a, usage_b;
  TenantEntry a{"app", 1, 0, 0, &usage_a};
  TenantEntry b{"other", 2, 0, 0, &usage_b};
  PrincipalEntry writer_a{"writer-a", {}, kPermRead | kPermWrite | kPermDelete, 0, &a, nullptr};
  PrincipalEntry writer_b{"writer-b", {}, kPermRead | kPermWrite | kPermDelete, 0, &b, nullptr};
};

// What the core's auth gate leaves on an authenticated connection.
void authenticate(CoreConn& c, const PrincipalEntry& p) {
  c.principal = &p;
  c.tenant_id = p.tenant->id;
  c.perms = p.perms;
}

class TenantTest : public ObjectServiceTest {
 protected:
  // Another adopted connection of the same service.
  std::unique_ptr<CoreConn> connect(const PrincipalEntry* p) {
    auto c = std::make_unique<CoreConn>();
    c->state = CoreConnState::kOwned;
    c->session.params.max_message_size = kMaxMessage;
    svc_->on_adopt_st(api_, *c);
    if (p != nullptr) authenticate(*c, *p);
    return c;
  }
  void request(CoreConn& c, protocol::ObjectOp op, std::uint64_t cookie, const std::string& key,
               std::span<const std::byte> value = {}) {
    const auto p = key_payload(key, value);
    protocol::Message m;
    m.type = MessageType::kInlineRequest;
    m.opcode = opcode(op);
    m.cookie = cookie;
    m.payload = p;
    svc_->on_request_st(api_, c, m);
  }
  void put(CoreConn& c, std::uint64_t cookie, const std::string& key, std::size_t len, ObjectStatus want) {
    const auto v = store::test::pattern(len, static_cast<std::uint32_t>(cookie));
    request(c, protocol::ObjectOp::kPut, cookie, key, v);
    expect_completion(cookie, want, want == ObjectStatus::kOk ? static_cast<std::uint32_t>(len) : 0);
  }
  // The value an inline GET answered, or empty with the completion's status checked.
  std::vector<std::uint8_t> get(CoreConn& c, std::uint64_t cookie, const std::string& key) {
    request(c, protocol::ObjectOp::kGet, cookie, key);
    if (last().type == MessageType::kInlineResponse) return last().payload;
    expect_completion(cookie, ObjectStatus::kNotFound, 0);
    return {};
  }
  static std::vector<std::uint8_t> bytes(const std::vector<std::byte>& v) {
    return {reinterpret_cast<const std::uint8_t*>(v.data()),
            reinterpret_cast<const std::uint8_t*>(v.data()) + v.size()};
  }
  static void expect_usage(const TenantUsage& u, std::uint64_t bytes, std::uint64_t objects) {
    EXPECT_EQ(u.bytes.load(), bytes);
    EXPECT_EQ(u.objects.load(), objects);
  }
  std::uint64_t store_ops() const {
    const store::StoreStats st = store_->stats();
    std::uint64_t n = 0;
    for (const auto& by_op : st.ops)
      for (const std::uint64_t v : by_op) n += v;
    return n;
  }
  std::uint64_t status_count(protocol::ObjectOp op, ObjectStatus st) const {
    return svc_->counters().statuses[static_cast<std::size_t>(op)][object_status_slot(st)];
  }

  Tenancy t_;
};

// The same key in two tenants and in the unauthenticated namespace: three objects; a GET, an overwrite or a
// DELETE by one never reaches another's, inline or by chunk. The unauthenticated namespace's object has
// exactly the store key it always had (the peer's key).
TEST_F(TenantTest, TenantsSameKeyAreDifferentObjects) {
  start(store_->core(0));
  auto a = connect(&t_.writer_a);
  auto b = connect(&t_.writer_b);
  CoreConn& open = *conn_;  // authentication off: no principal, tenant 0, every permission
  const auto va = store::test::pattern(100, 1), vb = store::test::pattern(200, 2),
             v0 = store::test::pattern(50, 3);

  request(*a, protocol::ObjectOp::kPut, 1, "x", va);
  expect_completion(1, ObjectStatus::kOk, 100);
  EXPECT_TRUE(get(*b, 2, "x").empty()) << "b cannot read a's x";
  EXPECT_TRUE(get(open, 3, "x").empty()) << "nor can an unauthenticated peer";
  request(*b, protocol::ObjectOp::kDelete, 4, "x");
  expect_completion(4, ObjectStatus::kNotFound, 0);
  request(*b, protocol::ObjectOp::kPut, 5, "x", vb);  // b's own x, not an overwrite of a's
  expect_completion(5, ObjectStatus::kOk, 200);
  request(open, protocol::ObjectOp::kPut, 6, "x", v0);
  expect_completion(6, ObjectStatus::kOk, 50);
  EXPECT_EQ(store_->stats().objects, 3u);
  EXPECT_EQ(get(*a, 7, "x"), bytes(va));
  EXPECT_EQ(get(*b, 8, "x"), bytes(vb));
  EXPECT_EQ(get(open, 9, "x"), bytes(v0));

  // The unauthenticated namespace is the store's plain keys: what existing deployments and tools see.
  store::PinnedValue pin;
  ASSERT_EQ(store_->get(0, "x", &pin), store::Status::kOk);
  EXPECT_EQ(pin.size, 50u);
  store_->unpin(&pin);

  // By chunk: b's GET of a's chunk-PUT key finds nothing and moves nothing.
  const auto big = store::test::pattern(5000, 4);
  svc_->on_chunk_request_st(
      api_, *a, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 10, "y", 5000));
  api_.finish_read(*svc_, *a, big);
  expect_completion(10, ObjectStatus::kOk, 5000);
  svc_->on_chunk_request_st(
      api_, *b, chunk_request(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 11, "y", 8000));
  expect_completion(11, ObjectStatus::kNotFound, 0);
  EXPECT_EQ(b->bulk_op.state, BulkState::kIdle);
  svc_->on_chunk_request_st(
      api_, *a, chunk_request(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, 12, "y", 8000));
  expect_completion(12, ObjectStatus::kOk, 5000);
  EXPECT_EQ(api_.finish_write(*svc_, *a), big);

  request(*a, protocol::ObjectOp::kDelete, 13, "x");
  expect_completion(13, ObjectStatus::kOk, 0);
  EXPECT_EQ(get(*b, 14, "x"), bytes(vb)) << "a's DELETE removed only its own x";
  EXPECT_EQ(get(open, 15, "x"), bytes(v0));
  for (auto [c, k] : {std::pair{b.get(), "x"}, std::pair{&open, "x"}, std::pair{a.get(), "y"}}) {
    request(*c, protocol::ObjectOp::kDelete, 16, k);
    expect_completion(16, ObjectStatus::kOk, 0);
  }
  store::test::expect_empty(*store_);
}

// GET needs read, PUT write, DELETE delete: without it the answer is forbidden, before any store call or
// transfer, inline and by chunk. ECHO and SINK need nothing.
TEST_F(TenantTest, EachOpNeedsItsPermission) {
  telemetry::CoreStats block;
  start(store_->core(0), 1024, &block);
  const auto v = store::test::pattern(64, 5);
  ASSERT_EQ(store_->put(0, 1, "k", store::test::as_span(v), nullptr), store::Status::kOk);
  struct Case {
    std::uint8_t perms;
    bool get, put, del;
  };
  std::uint64_t cookie = 100;
  for (const Case cs : {Case{0, false, false, false}, Case{kPermRead, true, false, false},
                        Case{kPermWrite, false, true, false}, Case{kPermDelete, false, false, true}}) {
    SCOPED_TRACE(static_cast<int>(cs.perms));
    PrincipalEntry p{"p", {}, cs.perms, 0, &t_.a, nullptr};
    auto c = connect(&p);
    const std::uint64_t ops_before = store_ops();

    request(*c, protocol::ObjectOp::kGet, ++cookie, "k");
    if (cs.get) {
      EXPECT_EQ(last().type, MessageType::kInlineResponse);
    } else {
      expect_completion(cookie, ObjectStatus::kForbidden, 0);
    }
    svc_->on_chunk_request_st(
        api_, *c,
        chunk_request(MessageType::kWriteChunkRequest, protocol::ObjectOp::kGet, ++cookie, "k", 4096));
    if (cs.get) {
      expect_completion(cookie, ObjectStatus::kOk, 64);
      api_.finish_write(*svc_, *c);
    } else {
      expect_completion(cookie, ObjectStatus::kForbidden, 0);
      EXPECT_EQ(c->bulk_op.state, BulkState::kIdle) << "no WRITE";
    }
    request(*c, protocol::ObjectOp::kPut, ++cookie, "k", v);
    expect_completion(cookie, cs.put ? ObjectStatus::kOk : ObjectStatus::kForbidden, cs.put ? 64 : 0);
    svc_->on_chunk_request_st(
        api_, *c, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, ++cookie, "k", 64));
    if (cs.put) {
      ASSERT_EQ(c->bulk_op.state, BulkState::kReading);
      api_.finish_read(*svc_, *c, v);
      expect_completion(cookie, ObjectStatus::kOk, 64);
    } else {
      expect_completion(cookie, ObjectStatus::kForbidden, 0);
      EXPECT_EQ(c->bulk_op.state, BulkState::kIdle) << "no READ";
    }
    request(*c, protocol::ObjectOp::kDelete, ++cookie, "k");
    expect_completion(cookie, cs.del ? ObjectStatus::kOk : ObjectStatus::kForbidden, 0);
    if (cs.del) {
      ASSERT_EQ(store_->put(0, 1, "k", store::test::as_span(v), nullptr), store::Status::kOk);
    }
    const std::uint64_t allowed = (cs.get ? 2 : 0) + (cs.put ? 2 : 0) + (cs.del ? 2 : 0);
    EXPECT_EQ(store_ops() - ops_before, allowed) << "a forbidden request never reaches the store";

    // Transport diagnostics: no permission needed.
    const std::uint8_t ping[3] = {1, 2, 3};
    protocol::Message m;
    m.type = MessageType::kInlineRequest;
    m.opcode = static_cast<std::uint16_t>(ObjectOpcode::kEcho);
    m.cookie = ++cookie;
    m.payload = ping;
    svc_->on_request_st(api_, *c, m);
    EXPECT_EQ(last().type, MessageType::kInlineResponse);
    EXPECT_EQ(last().payload, std::vector<std::uint8_t>(ping, ping + 3));
    m.opcode = static_cast<std::uint16_t>(ObjectOpcode::kSink);
    const std::size_t sent = api_.sent.size();
    svc_->on_request_st(api_, *c, m);
    EXPECT_EQ(api_.sent.size(), sent);
  }
  EXPECT_EQ(svc_->counters().sink, 4u);
  EXPECT_EQ(status_count(protocol::ObjectOp::kGet, ObjectStatus::kForbidden), 6u);
  EXPECT_EQ(status_count(protocol::ObjectOp::kPut, ObjectStatus::kForbidden), 6u);
  EXPECT_EQ(status_count(protocol::ObjectOp::kDelete, ObjectStatus::kForbidden), 3u);
  EXPECT_EQ(block.load(telemetry::Stat::kObjectForbidden), 15u);
  EXPECT_EQ(block.load(telemetry::Stat::kObjectQuotaExceeded), 0u);
  ASSERT_EQ(store_->remove(0, 1, "k", nullptr), store::Status::kOk);
  store::test::expect_empty(*store_);
}

// max_bytes holds exactly: reaching it succeeds, one byte more is refused (inline and by chunk, before any
// READ); a replacement counts the difference; a DELETE gives back.
TEST_F(TenantTest, ByteQuotaIsExactAtTheBoundary) {
  telemetry::CoreStats block;
  start(store_->core(0), 1024, &block);
  t_.a.max_bytes = 10'000;
  auto a = connect(&t_.writer_a);
  put(*a, 1, "k1", 600, ObjectStatus::kOk);
  put(*a, 2, "k2", 400, ObjectStatus::kOk);
  svc_->on_chunk_request_st(
      api_, *a, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 3, "k3", 9000));
  api_.finish_read(*svc_, *a, store::test::pattern(9000, 3));
  expect_completion(3, ObjectStatus::kOk, 9000);
  expect_usage(t_.usage_a, 10'000, 3);
  put(*a, 4, "k4", 1, ObjectStatus::kQuotaExceeded);
  svc_->on_chunk_request_st(
      api_, *a, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 5, "k4", 1));
  expect_completion(5, ObjectStatus::kQuotaExceeded, 0);
  EXPECT_EQ(a->bulk_op.state, BulkState::kIdle) << "refused before any READ";
  put(*a, 6, "k1", 601, ObjectStatus::kQuotaExceeded);  // +1 over the old value
  put(*a, 7, "k1", 600, ObjectStatus::kOk);             // +0
  expect_usage(t_.usage_a, 10'000, 3);
  put(*a, 8, "k1", 100, ObjectStatus::kOk);  // -500
  expect_usage(t_.usage_a, 9'500, 3);
  put(*a, 9, "k4", 501, ObjectStatus::kQuotaExceeded);
  put(*a, 10, "k4", 500, ObjectStatus::kOk);
  expect_usage(t_.usage_a, 10'000, 4);
  request(*a, protocol::ObjectOp::kDelete, 11, "k3");
  expect_completion(11, ObjectStatus::kOk, 0);
  expect_usage(t_.usage_a, 1'000, 3);
  request(*a, protocol::ObjectOp::kDelete, 12, "k3");  // nothing there: nothing given back
  expect_completion(12, ObjectStatus::kNotFound, 0);
  expect_usage(t_.usage_a, 1'000, 3);
  // The other tenant is counted apart and unlimited.
  auto b = connect(&t_.writer_b);
  put(*b, 13, "k1", 20'000, ObjectStatus::kOk);
  expect_usage(t_.usage_b, 20'000, 1);
  expect_usage(t_.usage_a, 1'000, 3);
  EXPECT_EQ(status_count(protocol::ObjectOp::kPut, ObjectStatus::kQuotaExceeded), 4u);
  EXPECT_EQ(block.load(telemetry::Stat::kObjectQuotaExceeded), 4u);
  EXPECT_EQ(store_->stats().value_bytes, 21'000u);
}

TEST_F(TenantTest, ObjectQuotaIsExactAtTheBoundary) {
  start(store_->core(0));
  t_.a.max_objects = 2;
  auto a = connect(&t_.writer_a);
  put(*a, 1, "a", 10, ObjectStatus::kOk);
  put(*a, 2, "b", 10, ObjectStatus::kOk);
  put(*a, 3, "c", 10, ObjectStatus::kQuotaExceeded);
  svc_->on_chunk_request_st(
      api_, *a, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 4, "c", 10));
  expect_completion(4, ObjectStatus::kQuotaExceeded, 0);
  put(*a, 5, "a", 30, ObjectStatus::kOk);  // a replacement adds no object
  expect_usage(t_.usage_a, 40, 2);
  request(*a, protocol::ObjectOp::kDelete, 6, "b");
  expect_completion(6, ObjectStatus::kOk, 0);
  put(*a, 7, "c", 10, ObjectStatus::kOk);
  expect_usage(t_.usage_a, 40, 2);
  // A limit lowered below the usage (a reload) refuses what adds, not what shrinks.
  t_.a.max_objects = 1;
  put(*a, 8, "d", 1, ObjectStatus::kQuotaExceeded);
  put(*a, 9, "a", 5, ObjectStatus::kOk);
  expect_usage(t_.usage_a, 15, 2);
}

// Every way a PUT can end without storing gives its hold back, and every way one can store counts exactly
// what it stored, with ops that end at once and ops that end later, connections closed mid-way included.
TEST_F(TenantTest, EveryFailurePathGivesItsHoldBack) {
  ThreadedStorage ts(*store_);
  start(ts);
  t_.a.max_bytes = std::uint64_t{1} << 40;  // a limit: every PUT holds
  auto a = connect(&t_.writer_a);
  const auto v = store::test::pattern(3000, 11);

  // A stored baseline: "base" (3000 bytes).
  request(*a, protocol::ObjectOp::kPut, 1, "base", v);
  drain();
  expect_completion(1, ObjectStatus::kOk, 3000);
  expect_usage(t_.usage_a, 3000, 1);

  // A failed READ.
  svc_->on_chunk_request_st(
      api_, *a, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 2, "p", 4096));
  drain();
  EXPECT_EQ(t_.usage_a.bytes.load(), 3000u + 4096u) << "held while the READ runs";
  api_.finish_read(*svc_, *a, {}, false);
  expect_completion(2, ObjectStatus::kBulkFailed, 0);
  expect_usage(t_.usage_a, 3000, 1);

  // The reservation refused (too_large: above the store's max_value).
  svc_->on_chunk_request_st(
      api_, *a, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 3, "p", 2u << 20));
  drain();
  expect_completion(3, ObjectStatus::kTooLarge, 0);
  expect_usage(t_.usage_a, 3000, 1);

  // The READ cannot start (the core refuses it: here, another transfer of the connection is running).
  svc_->on_chunk_request_st(
      api_, *a, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 4, "p", 4096));
  a->bulk_op.state = BulkState::kWriting;
  drain();
  a->bulk_op.state = BulkState::kIdle;
  expect_completion(4, ObjectStatus::kNoResources, 0);
  expect_usage(t_.usage_a, 3000, 1);

  // The store is full (no_space): fill it with another tenant's values first.
  auto b = connect(&t_.writer_b);
  const auto mib = store::test::pattern(1u << 20, 12);
  std::uint64_t filled = 0;
  for (std::uint64_t i = 0;; ++i) {
    svc_->on_chunk_request_st(api_, *b,
                              chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut,
                                            2000 + i, store::test::key_of("fill", i), 1u << 20));
    drain();
    if (b->bulk_op.state != BulkState::kReading) break;
    api_.finish_read(*svc_, *b, mib);
    drain();
    ++filled;
    ASSERT_LT(filled, 100u);
  }
  ASSERT_GT(filled, 0u);
  expect_completion(2000 + filled, ObjectStatus::kNoSpace, 0);
  svc_->on_chunk_request_st(
      api_, *a, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 5, "big", 1u << 20));
  drain();
  expect_completion(5, ObjectStatus::kNoSpace, 0);
  expect_usage(t_.usage_a, 3000, 1);

  // Closed mid-READ: the core ends the transfer failed.
  const auto small = store::test::pattern(100, 13);
  auto c = connect(&t_.writer_a);
  svc_->on_chunk_request_st(
      api_, *c, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 6, "q", 100));
  drain();
  ASSERT_EQ(c->bulk_op.state, BulkState::kReading);
  api_.close(*svc_, *c);
  expect_usage(t_.usage_a, 3000, 1);

  // Closed while the reservation pends: it ends orphaned and gives back.
  c = connect(&t_.writer_a);
  ts.hold(true);
  svc_->on_chunk_request_st(
      api_, *c, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 7, "q", 100));
  api_.close(*svc_, *c);
  ts.hold(false);
  drain();
  expect_usage(t_.usage_a, 3000, 1);

  // Closed while an inline PUT, a commit and a DELETE pend: they still change the store, and count.
  c = connect(&t_.writer_a);
  svc_->on_chunk_request_st(
      api_, *c, chunk_request(MessageType::kReadChunkRequest, protocol::ObjectOp::kPut, 8, "r", 100));
  drain();
  ts.hold(true);
  api_.finish_read(*svc_, *c, small);  // the commit pends
  auto d = connect(&t_.writer_a);
  request(*d, protocol::ObjectOp::kPut, 9, "s", small);
  request(*d, protocol::ObjectOp::kDelete, 10, "base");
  api_.close(*svc_, *c);
  api_.close(*svc_, *d);
  ts.hold(false);
  drain();
  EXPECT_EQ(svc_->counters().orphaned, 4u);
  expect_usage(t_.usage_a, 200, 2);

  // What is counted is what the store holds for the tenant.
  request(*a, protocol::ObjectOp::kDelete, 11, "r");
  request(*a, protocol::ObjectOp::kDelete, 12, "s");
  drain();
  expect_usage(t_.usage_a, 0, 0);
  expect_usage(t_.usage_b, filled << 20, filled);
  EXPECT_EQ(svc_->open_requests(), 0u);
  for (std::uint64_t i = 0; i < filled; ++i) {
    ASSERT_EQ(store_->remove(0, 2, store::test::key_of("fill", i), nullptr), store::Status::kOk);
  }
  store::test::expect_empty(*store_);
}

// Two cores (two threads, each its own service and connection) PUT, replace and delete for one tenant:
// after every answer neither limit is exceeded, and at the end the usage is exactly what the store holds.
TEST_F(TenantTest, TwoCoresNeverOvershootATenantsQuota) {
  t_.a.max_bytes = 64 * 1024;
  t_.a.max_objects = 40;
  constexpr int kOps = 4000;
  std::atomic<bool> over{false};
  std::array<std::uint64_t, 2> refused{};
  auto core = [&](std::uint32_t index) {
    FakeCore api;
    ObjectServiceConfig cfg;
    cfg.storage = &store_->core(index);
    ObjectService svc(cfg);
    CoreConn c;
    c.state = CoreConnState::kOwned;
    c.session.params.max_message_size = kMaxMessage;
    svc.on_adopt_st(api, c);
    authenticate(c, t_.writer_a);
    std::uint32_t x = 12345 + index;
    for (int i = 0; i < kOps; ++i) {
      x = x * 1664525u + 1013904223u;
      const std::string key = store::test::key_of(index == 0 ? "l" : "r", (x >> 8) % 64);
      const bool del = (x >> 20) % 4 == 0;
      const auto v = store::test::pattern(1 + (x >> 16) % 900, x);
      const auto p = key_payload(key, del ? std::span<const std::byte>{} : std::span<const std::byte>(v));
      protocol::Message m;
      m.type = MessageType::kInlineRequest;
      m.opcode = opcode(del ? protocol::ObjectOp::kDelete : protocol::ObjectOp::kPut);
      m.cookie = static_cast<std::uint64_t>(i);
      m.payload = p;
      svc.on_request_st(api, c, m);
      if (api.sent.back().status == static_cast<std::uint32_t>(ObjectStatus::kQuotaExceeded))
        ++refused[index];
      if (t_.usage_a.bytes.load() > t_.a.max_bytes || t_.usage_a.objects.load() > t_.a.max_objects)
        over = true;
    }
  };
  std::thread left(core, 0), right(core, 1);
  left.join();
  right.join();
  EXPECT_FALSE(over.load()) << "a limit was passed";
  EXPECT_GT(refused[0] + refused[1], 0u) << "the run never reached a limit: it tested nothing";
  const store::StoreStats st = store_->stats();
  expect_usage(t_.usage_a, st.value_bytes, st.objects);
  EXPECT_LE(st.value_bytes, t_.a.max_bytes);
  EXPECT_LE(st.objects, t_.a.max_objects);
}

}  // namespace
}  // namespace rdmagate::dataplane

#pragma once
// What a data-plane core with idle_policy event sleeps on (SPDK's interrupt mode, for one core): its CQ's
// completion channel, the doorbell control rings after putting a command on the core's ring, the doorbell a
// storage backend rings after putting a completion on the core's storage queue, and one epoll set over all
// three. The core arms them, looks once more at everything that raises no event (completions already on the
// CQ, commands already on the ring, storage completions already queued), then sleeps in epoll_wait with the
// timeout of its own next deadline; the first completion, command, storage completion or deadline wakes it
// and it polls again.
//
// Setup (control thread) creates one per core before the core's CQ, which is created on channel(); control
// then hands bell() to the core's ControlMailbox (set_wake), and the daemon storage_bell() to the core's
// storage CompletionQueue (set_wake). Nothing here runs per poll: the core calls it only after
// idle_event_after_us without work.
//
// The CQ side is an interface (CqEvents) so that host tests can stand in for the channel with an eventfd,
// and the loop's header needs no libibverbs symbol; the engine's is in core_sleep_verbs.hpp.

#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "dataplane/backend/backend.hpp"
#include "dataplane/doorbell.hpp"

struct ibv_comp_channel;

namespace rdmagate::dataplane {

// The completion-event half of a sleeping core.
class CqEvents {
 public:
  virtual ~CqEvents() = default;
  // Readable once an armed CQ has reported a completion.
  virtual int fd() const noexcept = 0;
  // Asks for one event at the next completion on `cq`. False: the device refused (the core then polls).
  virtual bool arm(BackendCq& cq) noexcept = 0;
  // Takes up to `max` events waiting on fd(), one read each, each acknowledged (a CQ cannot be destroyed
  // with unacknowledged events). Returns how many.
  virtual unsigned consume(unsigned max) noexcept = 0;
  // The verbs channel the CQ must be created on; null for a stand-in.
  virtual ibv_comp_channel* channel() const noexcept { return nullptr; }
};

// Why a sleeping core woke (rdmagate_poller_wakeups_total{source}); index into telemetry::kWakeupSourceNames.
enum class WakeSource : std::uint8_t { kCompletion = 0, kCommand = 1, kStorage = 2, kTimer = 3 };
inline constexpr std::size_t kWakeSourceCount = 4;

class CoreSleeper {
 public:
  // Over `events` (the engine's: make_verbs_sleeper, core_sleep_verbs.hpp; host tests use a stand-in).
  static std::unique_ptr<CoreSleeper> create(std::unique_ptr<CqEvents> events, std::string* error) {
    std::unique_ptr<CoreSleeper> s(new CoreSleeper(std::move(events)));
    s->epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd_ < 0 || !s->bell_.valid() || !s->storage_bell_.valid()) {
      *error = std::string("epoll_create1 / eventfd: ") + std::strerror(errno);
      return nullptr;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(WakeSource::kCompletion);
    int rc = epoll_ctl(s->epfd_, EPOLL_CTL_ADD, s->events_->fd(), &ev);
    ev.data.u32 = static_cast<std::uint32_t>(WakeSource::kCommand);
    rc |= epoll_ctl(s->epfd_, EPOLL_CTL_ADD, s->bell_.fd(), &ev);
    ev.data.u32 = static_cast<std::uint32_t>(WakeSource::kStorage);
    rc |= epoll_ctl(s->epfd_, EPOLL_CTL_ADD, s->storage_bell_.fd(), &ev);
    if (rc != 0) {
      *error = std::string("epoll_ctl: ") + std::strerror(errno);
      return nullptr;
    }
    return s;
  }
  ~CoreSleeper() {
    if (epfd_ >= 0) close(epfd_);
  }
  CoreSleeper(const CoreSleeper&) = delete;
  CoreSleeper& operator=(const CoreSleeper&) = delete;

  // Setup: the channel to create the core's CQ on (null for a stand-in), the bell for
  // ControlMailbox::set_wake.
  ibv_comp_channel* channel() const noexcept { return events_->channel(); }
  Doorbell& bell() noexcept { return bell_; }
  // For storage::CompletionQueue::set_wake: a backend's completion then wakes the core, which may sleep while
  // storage ops are pending.
  Doorbell& storage_bell() noexcept { return storage_bell_; }
  // True while the core is in epoll_wait (tests wait for it; any thread).
  bool asleep() const noexcept { return asleep_.load(std::memory_order_acquire); }

  // ---- the core ----
  // Every wakeup armed; the caller's last look at its queues follows. False: the CQ could not be armed.
  bool arm_st(BackendCq& cq) noexcept {
    bell_.arm();
    storage_bell_.arm();
    return events_->arm(cq);
  }
  // Sleeps until a completion event, a command, a storage completion or `timeout_ms` (-1: none). Returns a
  // bit per WakeSource that woke it; none set means the timeout.
  unsigned sleep_st(int timeout_ms) noexcept {
    asleep_.store(true, std::memory_order_release);
    epoll_event evs[3];
    const int n = epoll_wait(epfd_, evs, 3, timeout_ms);
    asleep_.store(false, std::memory_order_release);
    unsigned woke = 0;
    for (int i = 0; i < n; ++i) woke |= 1u << evs[i].data.u32;
    return woke;
  }
  // Awake again (`woke`: sleep_st's bits; kAll when the last look found work): no more bell writes wanted.
  // Only the fds epoll reported are read, and after a sleep the channel once: a sleep follows one arm, and
  // an arm raises at most one event, so the reads that would fail with EAGAIN (a syscall each) are spared.
  // A refused sleep takes every event waiting. An event or ring that raced the wakeup makes the next sleep
  // return at once, and is taken then.
  static constexpr unsigned kAll = ~0u;
  void disarm_st(unsigned woke) noexcept {
    bell_.disarm((woke & bit(WakeSource::kCommand)) != 0);
    storage_bell_.disarm((woke & bit(WakeSource::kStorage)) != 0);
    if ((woke & bit(WakeSource::kCompletion)) != 0) events_->consume(woke == kAll ? ~0u : 1u);
  }

 private:
  explicit CoreSleeper(std::unique_ptr<CqEvents> events) noexcept : events_(std::move(events)) {}
  static constexpr unsigned bit(WakeSource s) noexcept { return 1u << static_cast<unsigned>(s); }

  std::unique_ptr<CqEvents> events_;
  Doorbell bell_;
  Doorbell storage_bell_;
  int epfd_ = -1;
  std::atomic<bool> asleep_{false};
};

}  // namespace rdmagate::dataplane

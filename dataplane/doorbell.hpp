#pragma once
// A wakeup between two threads that never costs the ringing side a syscall while the other side is awake:
// an eventfd written only when the sleeper has armed the bell (the "sleeping" flag). The sleeper arms,
// re-checks its queues, then sleeps on fd() (epoll/poll); a producer publishes its item, then rings. The
// seq_cst fences on both sides order "arm, check" against "publish, look at the flag" (Dekker): either the
// sleeper's check sees the item, or the producer sees the flag and writes the eventfd.
//
// Users: the engine's control thread (woken by its cores' replies when it sleeps) and the client's
// caller-driven core (woken by control's commands and by submissions from other threads).

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace rdmagate::dataplane {

class Doorbell {
 public:
  Doorbell() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Doorbell() {
    if (fd_ >= 0) close(fd_);
  }
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  bool valid() const noexcept { return fd_ >= 0; }
  int fd() const noexcept { return fd_; }

  // Sleeper, before its last check of the queues.
  void arm() noexcept {
    armed_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  // Sleeper, once awake: no more writes wanted; empties the eventfd. `rung` false: the sleeper's poll did
  // not report fd() readable, so the read (a syscall that would fail with EAGAIN) is skipped; a write that
  // raced the wakeup then makes the next sleep return at once, one spurious turn.
  void disarm(bool rung = true) noexcept {
    armed_.store(false, std::memory_order_relaxed);
    if (!rung) return;
    std::uint64_t v = 0;
    [[maybe_unused]] const ssize_t n = read(fd_, &v, sizeof(v));
  }
  // Producer, after publishing. One relaxed load when the sleeper is awake.
  void ring() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (armed_.load(std::memory_order_relaxed)) {
      rings_.fetch_add(1, std::memory_order_relaxed);
      const std::uint64_t one = 1;
      [[maybe_unused]] const ssize_t n = write(fd_, &one, sizeof(one));
    }
  }
  bool armed() const noexcept { return armed_.load(std::memory_order_relaxed); }
  // Eventfd writes made (the sleeper was armed), for tests and the idle-cost figures.
  std::uint64_t rings() const noexcept { return rings_.load(std::memory_order_relaxed); }

 private:
  int fd_ = -1;
  std::atomic<bool> armed_{false};
  std::atomic<std::uint64_t> rings_{0};
};

}  // namespace rdmagate::dataplane

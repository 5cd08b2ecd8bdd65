#pragma once
// A core loop as control launches it: one virtual call per core lifetime, never per message. Or, for a core
// its owner drives (the client's caller-driven and thread modes), one virtual call per progress turn.

namespace rdmagate::dataplane {

class CoreRunner {
 public:
  virtual ~CoreRunner() = default;
  // On the core's lcore until CoreResources::stop.
  virtual int run_st() noexcept = 0;
  // Owner-driven: one turn (CoreLoop::progress_st); the completions processed.
  virtual unsigned progress_st() noexcept = 0;
  // Owner-driven, after arming its wakeups: true when it may sleep (CoreLoop::idle_for_sleep_st).
  virtual bool idle_for_sleep_st() noexcept = 0;
};

template <typename Loop>
class CoreRunnerOf final : public CoreRunner {
 public:
  template <typename... Args>
  explicit CoreRunnerOf(Args&&... args) : loop_(std::forward<Args>(args)...) {}
  int run_st() noexcept override { return loop_.run_st(); }
  unsigned progress_st() noexcept override { return loop_.progress_st(); }
  bool idle_for_sleep_st() noexcept override { return loop_.idle_for_sleep_st(); }

 private:
  Loop loop_;
};

}  // namespace rdmagate::dataplane

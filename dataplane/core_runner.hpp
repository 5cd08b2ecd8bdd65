#pragma once
// A core loop as control launches it: one virtual call per core lifetime, never per message.

namespace rdmagate::dataplane {

class CoreRunner {
 public:
  virtual ~CoreRunner() = default;
  virtual int run_st() noexcept = 0;
};

template <typename Loop>
class CoreRunnerOf final : public CoreRunner {
 public:
  template <typename... Args>
  explicit CoreRunnerOf(Args&&... args) : loop_(std::forward<Args>(args)...) {}
  int run_st() noexcept override { return loop_.run_st(); }

 private:
  Loop loop_;
};

}  // namespace rdmagate::dataplane

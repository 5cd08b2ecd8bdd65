#pragma once
// The engine's CqEvents: a verbs completion channel (non-blocking), armed with ibv_req_notify_cq, its events
// taken with ibv_get_cq_event and acknowledged one by one. Only code that links libibverbs includes this
// (the engine's setup); the loop sees CqEvents alone (core_sleep.hpp).

#include <fcntl.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "dataplane/core_sleep.hpp"

namespace rdmagate::dataplane {

class VerbsCqEvents final : public CqEvents {
 public:
  static std::unique_ptr<VerbsCqEvents> create(ibv_context* ctx, std::string* error) {
    ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
    if (ch == nullptr) {
      *error = std::string("ibv_create_comp_channel: ") + std::strerror(errno);
      return nullptr;
    }
    std::unique_ptr<VerbsCqEvents> e(new VerbsCqEvents(ch));
    const int flags = fcntl(ch->fd, F_GETFL);
    if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
      *error = std::string("completion channel O_NONBLOCK: ") + std::strerror(errno);
      return nullptr;
    }
    return e;
  }
  // After the CQ reporting to it is gone (ibv_destroy_comp_channel refuses while one is attached).
  ~VerbsCqEvents() override { ibv_destroy_comp_channel(ch_); }

  int fd() const noexcept override { return ch_->fd; }
  bool arm(BackendCq& cq) noexcept override {
    return cq.armable != nullptr && ibv_req_notify_cq(cq.armable, 0) == 0;
  }
  unsigned consume(unsigned max) noexcept override {
    unsigned n = 0;
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    while (n < max && ibv_get_cq_event(ch_, &cq, &ctx) == 0) {
      ibv_ack_cq_events(cq, 1);
      ++n;
    }
    return n;
  }
  ibv_comp_channel* channel() const noexcept override { return ch_; }

 private:
  explicit VerbsCqEvents(ibv_comp_channel* ch) noexcept : ch_(ch) {}
  ibv_comp_channel* ch_;
};

// A CoreSleeper over a new completion channel of `ctx`: create the core's CQ on its channel(). nullptr and
// *error on failure.
inline std::unique_ptr<CoreSleeper> make_verbs_sleeper(ibv_context* ctx, std::string* error) {
  std::unique_ptr<VerbsCqEvents> ev = VerbsCqEvents::create(ctx, error);
  if (!ev) return nullptr;
  return CoreSleeper::create(std::move(ev), error);
}

}  // namespace rdmagate::dataplane

#include "control/async_fanout.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace rdmagate::control {
namespace {

std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
// Inboxes by context. Guarded by registry_mu(), as is every inbox's pending_.
std::unordered_multimap<ibv_context*, AsyncInbox*>& registry() {
  static std::unordered_multimap<ibv_context*, AsyncInbox*> r;
  return r;
}

}  // namespace

std::unique_ptr<AsyncInbox> AsyncInbox::create(ibv_context* ctx, std::string* error) {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    *error = std::string("eventfd: ") + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<AsyncInbox> box(new AsyncInbox(ctx, fd));
  std::lock_guard<std::mutex> lock(registry_mu());
  registry().emplace(ctx, box.get());
  return box;
}

AsyncInbox::~AsyncInbox() {
  {
    std::lock_guard<std::mutex> lock(registry_mu());
    auto [b, e] = registry().equal_range(ctx_);
    for (auto it = b; it != e; ++it) {
      if (it->second == this) {
        registry().erase(it);
        break;
      }
    }
  }
  close(fd_);
}

std::size_t AsyncInbox::read_and_publish() {
  std::size_t n = 0;
  for (;;) {
    ibv_async_event ev{};
    if (ibv_get_async_event(ctx_, &ev) != 0) return n;  // EAGAIN: the fd is non-blocking
    AsyncNote note;
    note.type = ev.event_type;
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_COMM_EST:
      case IBV_EVENT_SQ_DRAINED:
      case IBV_EVENT_PATH_MIG:
      case IBV_EVENT_PATH_MIG_ERR:
      case IBV_EVENT_QP_LAST_WQE_REACHED:
        note.qp_num = ev.element.qp != nullptr ? ev.element.qp->qp_num : 0;
        break;
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_LID_CHANGE:
      case IBV_EVENT_PKEY_CHANGE:
      case IBV_EVENT_SM_CHANGE:
      case IBV_EVENT_CLIENT_REREGISTER:
      case IBV_EVENT_GID_CHANGE:
        note.port = static_cast<std::uint8_t>(ev.element.port_num);
        break;
      case IBV_EVENT_CQ_ERR:
        note.cq = ev.element.cq;
        break;
      default:
        break;
    }
    // The element pointers are not used after the ack (the QP may be destroyed then).
    ibv_ack_async_event(&ev);
    publish(note);
    ++n;
  }
}

void AsyncInbox::publish(const AsyncNote& note) {
  std::lock_guard<std::mutex> lock(registry_mu());
  auto [b, e] = registry().equal_range(ctx_);
  for (auto it = b; it != e; ++it) {
    it->second->pending_.push_back(note);
    const std::uint64_t one = 1;
    // Only EAGAIN can fail here (the counter is at its maximum): the inbox is readable anyway.
    [[maybe_unused]] const ssize_t w = write(it->second->fd_, &one, sizeof one);
  }
}

std::vector<AsyncNote> AsyncInbox::take() {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t r = read(fd_, &count, sizeof count);  // reset the eventfd (EAGAIN: empty)
  std::lock_guard<std::mutex> lock(registry_mu());
  std::vector<AsyncNote> out;
  out.swap(pending_);
  return out;
}

std::size_t AsyncInbox::peers() const {
  std::lock_guard<std::mutex> lock(registry_mu());
  return registry().count(ctx_);
}

}  // namespace rdmagate::control

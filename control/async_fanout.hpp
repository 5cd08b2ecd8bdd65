#pragma once
// Device async events, shared by every engine on a device in this process.
//
// librdmacm opens each RDMA device once per process (rdma_get_devices), so every engine on a device reads
// the same verbs context's async fd, and whichever engine reads an event first consumes it: a port going
// down would close the connections of one engine and not of the other, and an event for a QP of another
// engine would be dropped. Each engine therefore reads the fd as before but publishes what it read to an
// inbox per engine on that context (its own included), and acts only on its inbox. Control threads only:
// a mutex and an eventfd per inbox, never a core.

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rdmagate::control {

// What an engine needs of an async event once the event itself has been acknowledged.
struct AsyncNote {
  ibv_event_type type = IBV_EVENT_COMM_EST;
  std::uint32_t qp_num = 0;  // QP events
  std::uint8_t port = 0;     // port events
  const void* cq = nullptr;  // IBV_EVENT_CQ_ERR: which CQ (compared, never dereferenced)
};

class AsyncInbox {
 public:
  // Registers an inbox for events of `ctx`; nullptr and *error when the eventfd cannot be made.
  static std::unique_ptr<AsyncInbox> create(ibv_context* ctx, std::string* error);
  ~AsyncInbox();
  AsyncInbox(const AsyncInbox&) = delete;
  AsyncInbox& operator=(const AsyncInbox&) = delete;

  // Readable while notes wait (level-triggered epoll source for the owning engine).
  int fd() const noexcept { return fd_; }
  // Reads every pending event of the context, acknowledges it and hands it to every inbox on the context.
  // Returns how many events were read.
  std::size_t read_and_publish();
  // The notes queued for this inbox, oldest first; clears the inbox.
  std::vector<AsyncNote> take();
  // Every inbox on the context gets `n` (tests; read_and_publish uses it).
  void publish(const AsyncNote& n);
  // Inboxes registered on this inbox's context (this one included).
  std::size_t peers() const;

 private:
  AsyncInbox(ibv_context* ctx, int fd) : ctx_(ctx), fd_(fd) {}
  ibv_context* ctx_;
  int fd_;
  std::vector<AsyncNote> pending_;  // guarded by the registry's mutex
};

}  // namespace rdmagate::control

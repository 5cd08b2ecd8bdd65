// control/async_fanout: every engine registered on a device context gets every event any of them read, and
// none registered on another context does. No device: the contexts are only registry keys here.
#include "control/async_fanout.hpp"

#include <gtest/gtest.h>
#include <poll.h>

#include <string>

namespace {

using rdmagate::control::AsyncInbox;
using rdmagate::control::AsyncNote;

// Stand-ins for two devices' contexts: never dereferenced by publish/take.
ibv_context* fake_ctx(int which) {
  static int a = 0, b = 0;
  return reinterpret_cast<ibv_context*>(which == 0 ? &a : &b);
}

bool readable(const AsyncInbox& box) {
  pollfd p{box.fd(), POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

std::unique_ptr<AsyncInbox> make(int which) {
  std::string err;
  auto box = AsyncInbox::create(fake_ctx(which), &err);
  EXPECT_NE(box, nullptr) << err;
  return box;
}

TEST(AsyncFanout, EveryInboxOnTheContextGetsTheEventAndNoOther) {
  auto server = make(0), client = make(0), other = make(1);
  ASSERT_TRUE(server && client && other);
  EXPECT_EQ(server->peers(), 2u);
  EXPECT_EQ(other->peers(), 1u);
  EXPECT_FALSE(readable(*client));

  AsyncNote port_down;
  port_down.type = IBV_EVENT_PORT_ERR;
  port_down.port = 1;
  server->publish(port_down);  // the server engine happened to read it
  AsyncNote qp;
  qp.type = IBV_EVENT_QP_FATAL;
  qp.qp_num = 0x17;
  server->publish(qp);

  ASSERT_TRUE(readable(*client));
  for (AsyncInbox* box : {server.get(), client.get()}) {
    const auto notes = box->take();
    ASSERT_EQ(notes.size(), 2u);
    EXPECT_EQ(notes[0].type, IBV_EVENT_PORT_ERR);
    EXPECT_EQ(notes[0].port, 1);
    EXPECT_EQ(notes[1].type, IBV_EVENT_QP_FATAL);
    EXPECT_EQ(notes[1].qp_num, 0x17u);
    EXPECT_TRUE(box->take().empty()) << "take() empties the inbox";
    EXPECT_FALSE(readable(*box)) << "and resets its eventfd";
  }
  EXPECT_FALSE(readable(*other));
  EXPECT_TRUE(other->take().empty());
}

TEST(AsyncFanout, ADestroyedInboxIsNoLongerPublishedTo) {
  auto a = make(0);
  ASSERT_TRUE(a);
  {
    auto b = make(0);
    ASSERT_TRUE(b);
    EXPECT_EQ(a->peers(), 2u);
  }
  EXPECT_EQ(a->peers(), 1u);
  AsyncNote n;
  n.type = IBV_EVENT_DEVICE_FATAL;
  a->publish(n);  // would touch the freed inbox if it were still registered (ASan build)
  EXPECT_EQ(a->take().size(), 1u);
}

}  // namespace

#pragma once
// DeviceBackend::post_receives for a backend whose control thread posts a connection's first receives through
// the hot path's own staging (before the connection is adopted, so the core is not using the QP yet): both
// backends, and the simulated NIC, so the first receives are written exactly as the core's re-posts are.

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "dataplane/backend/backend.hpp"

namespace rdmagate::dataplane {

// Stages `recvs` in order and flushes them behind one doorbell. More than `room` (what the receive queue can
// take now) posts nothing. Returns how many the device took; fewer than recvs.size() fills *error.
template <typename B>
std::uint32_t post_first_receives(typename B::Qp& q, std::span<const RecvPost> recvs, std::size_t room,
                                  std::string* error) {
  if (recvs.empty()) return 0;
  char buf[160];
  if (recvs.size() > room) {
    std::snprintf(buf, sizeof(buf), "%s: post of %zu receives on qp 0x%x, which has room for %zu", B::kName,
                  recvs.size(), q.qp_num, room);
    *error = buf;
    return 0;
  }
  for (const RecvPost& r : recvs) B::stage_recv_st(q, r.wr_id, r.seg);
  const std::uint32_t n = static_cast<std::uint32_t>(recvs.size());
  const FlushResult fr = B::flush_st(q);
  if (fr.recv_unposted != 0) {
    std::snprintf(buf, sizeof(buf), "%s: post of %u receives on qp 0x%x: %u not posted", B::kName, n,
                  q.qp_num, fr.recv_unposted);
    *error = buf;
  }
  return n - fr.recv_unposted;
}

}  // namespace rdmagate::dataplane

#pragma once
// The bulk echo client of the guest tests (an engine service): per size, fill a source buffer, send a read
// chunk over it in 4 fragments (the server RDMA-READs it), then a write chunk over a zeroed destination in 3
// uneven fragments (the server RDMA-WRITEs it back); verify every byte and a guard past the end.

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "dataplane/core_conn.hpp"
#include "protocol/message.hpp"

namespace rdmagate::testfix {

struct BulkClient {
  struct ConnState {
    std::uint32_t size_index = 0;
    std::uint32_t phase = 0;  // 0: the read chunk is out, 1: the write chunk
  };
  static constexpr std::array<std::uint32_t, 3> kSizes{4096, 64 * 1024, 1024 * 1024};
  static constexpr std::uint32_t kDstOffset = 1024 * 1024;
  static constexpr std::uint32_t kGuard = 4096;
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  std::atomic<std::uint64_t> verified_bytes{0};
  std::atomic<std::uint32_t> fail_status{0};

  static std::uint8_t pattern(std::uint64_t step, std::uint32_t i) {
    return static_cast<std::uint8_t>((i * 2654435761u) >> 13 ^ (step * 37 + (i >> 12)));
  }
  template <typename Api>
  void on_adopt_st(Api& api, dataplane::CoreConn& c) noexcept {
    c.svc.reset<ConnState>();
    start_st(api, c);
  }
  template <typename Api>
  void start_st(Api& api, dataplane::CoreConn& c) noexcept {
    ConnState& cs = c.svc.as<ConnState>();
    const std::uint32_t size = kSizes[cs.size_index];
    for (std::uint32_t i = 0; i < size; ++i) c.bulk[i] = pattern(cs.size_index, i);
    protocol::Chunk ch;
    ch.count = 4;
    for (std::uint16_t k = 0; k < 4; ++k) {
      ch.fragments[k] =
          protocol::Fragment{reinterpret_cast<std::uintptr_t>(c.bulk) + k * (size / 4), size / 4, c.rkey};
    }
    cs.phase = 0;
    if (!api.send_st(c, protocol::MessageType::kReadChunkRequest, 2, cs.size_index * 2 + 1, {}, 0, 0, &ch))
      fail(1000);
  }
  template <typename Api>
  void on_response_st(Api& api, dataplane::CoreConn& c, const protocol::Message& m) noexcept {
    ConnState& cs = c.svc.as<ConnState>();
    const std::uint32_t size = kSizes[cs.size_index];
    if (m.type != protocol::MessageType::kCompletion || m.status != 0 || m.byte_count != size ||
        m.cookie != cs.size_index * 2 + 1 + cs.phase) {
      fail(m.status != 0 ? m.status : 2000 + static_cast<std::uint32_t>(m.type));
      return;
    }
    std::uint8_t* dst = c.bulk + kDstOffset;
    if (cs.phase == 0) {
      std::memset(dst, 0, size + kGuard);
      protocol::Chunk ch;
      ch.count = 3;
      const std::uint32_t third = size / 3;
      const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(dst);
      ch.fragments[0] = protocol::Fragment{base, third, c.rkey};
      ch.fragments[1] = protocol::Fragment{base + third, third, c.rkey};
      ch.fragments[2] = protocol::Fragment{base + 2 * third, size - 2 * third, c.rkey};
      cs.phase = 1;
      if (!api.send_st(c, protocol::MessageType::kWriteChunkRequest, 2, cs.size_index * 2 + 2, {}, 0, 0, &ch))
        fail(1001);
      return;
    }
    if (std::memcmp(dst, c.bulk, size) != 0) {
      fail(3000);
      return;
    }
    for (std::uint32_t i = 0; i < kGuard; ++i) {
      if (dst[size + i] != 0) {
        fail(3001);
        return;
      }
    }
    verified_bytes.fetch_add(size);
    if (++cs.size_index == kSizes.size()) {
      done.fetch_add(1);
      return;
    }
    start_st(api, c);
  }
  void fail(std::uint32_t why) noexcept {
    fail_status.store(why);
    failed.fetch_add(1);
  }
  template <typename Api>
  void on_request_st(Api&, dataplane::CoreConn&, const protocol::Message&) noexcept {}
  template <typename Api>
  void on_close_st(Api&, dataplane::CoreConn&) noexcept {}
};

}  // namespace rdmagate::testfix

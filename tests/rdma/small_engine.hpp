#pragma once
// The in-process engine the guest tests of the control plane and of client keys build: one core on `lcore`
// that yields when idle (the 2-vCPU guest), 1 KiB messages, queue depth 32, a 1 MiB bulk limit, quick
// reconnects. Each test sets what it needs beyond this (a bulk buffer, the region's exposure, admission).

#include <chrono>
#include <string>

#include "control/engine.hpp"
#include "protocol/params.hpp"

namespace rdmagate::testfix {

inline constexpr std::uint32_t kSmallEngineMessage = 1024;

inline control::EngineConfig small_engine_config(const char* name, const std::string& device, bool passive,
                                                 unsigned lcore) {
  dataplane::CoreConfig c;
  c.lcore = lcore;
  c.max_conns = 8;
  c.rx_per_conn = 32;
  c.tx_per_conn = 96;
  c.buf_size = kSmallEngineMessage;
  c.idle = dataplane::IdlePolicy::kYield;
  c.idle_yield_after = 64;
  control::EngineConfig e;
  e.name = name;
  e.device = device;
  e.passive = passive;
  e.cores.push_back(c);
  e.local.params = protocol::ConnParams{32, kSmallEngineMessage, protocol::kMaxFragments, 1u << 20};
  e.local.min_queue_depth = protocol::kMinCreditQueueDepth;
  e.backoff.min = std::chrono::milliseconds(50);
  e.backoff.max = std::chrono::milliseconds(800);
  e.handshake_timeout = std::chrono::seconds(10);
  return e;
}

}  // namespace rdmagate::testfix

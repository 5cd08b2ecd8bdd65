#include "protocol/credit_machine.hpp"

namespace rdmagate::protocol {
namespace {

std::uint16_t effective_high_water(const CreditConfig& c) {
  std::uint32_t hw = c.high_water != 0 ? c.high_water : default_high_water(c.queue_depth);
  // One lazy credit (a NOOP's receive) must never force a NOOP, or idle peers would ping-pong.
  if (hw < 2) hw = 2;
  if (hw > c.queue_depth) hw = c.queue_depth;
  return static_cast<std::uint16_t>(hw);
}

}  // namespace

CreditError CreditMachine::validate(const CreditConfig& config, std::size_t link_count) noexcept {
  if (config.queue_depth < kMinCreditQueueDepth) return CreditError::kBadConfig;
  if (link_count == 0 || link_count > TxQueues::kMaxDescriptors) return CreditError::kBadConfig;
  return CreditError::kOk;
}

CreditMachine::CreditMachine(const CreditConfig& config, std::span<std::uint16_t> links,
                             std::uint64_t now) noexcept
    : depth_(config.queue_depth),
      reserve_(credit_reserve(config.queue_depth)),
      high_water_(effective_high_water(config)),
      credits_(config.queue_depth),
      room_(config.queue_depth),
      keepalive_(config.keepalive_interval),
      dead_timeout_(config.dead_peer_timeout),
      last_tx_(now),
      last_rx_(now),
      queues_(links),
      keepalive_ceiling_(config.keepalive_ceiling),
      dead_peer_floor_(config.dead_peer_floor) {
  set_timers(config.keepalive_interval, config.dead_peer_timeout);
}

CreditError CreditMachine::check_receive_slow(CreditClass cls, std::uint16_t returned) const noexcept {
  if (room_ == 0) return CreditError::kCreditOverrun;
  if (cls == CreditClass::kRequest && room_ <= reserve_) return CreditError::kReserveViolation;
  if (room_ == 1 && returned == 0) return CreditError::kReserveViolation;
  if (returned > depth_ - credits_) return CreditError::kReturnedTooMany;
  return CreditError::kOk;
}

std::string_view to_string(CreditError e) {
  switch (e) {
    case CreditError::kOk:
      return "ok";
    case CreditError::kCreditOverrun:
      return "credit_overrun";
    case CreditError::kReserveViolation:
      return "reserve_violation";
    case CreditError::kReturnedTooMany:
      return "returned_too_many";
    case CreditError::kRepostUnderflow:
      return "repost_underflow";
    case CreditError::kBadConfig:
      return "bad_config";
  }
  return "unknown";
}

std::string_view to_string(NoopReason r) {
  switch (r) {
    case NoopReason::kNone:
      return "none";
    case NoopReason::kHighWater:
      return "high_water";
    case NoopReason::kPeerStarved:
      return "peer_starved";
    case NoopReason::kKeepalive:
      return "keepalive";
  }
  return "unknown";
}

}  // namespace rdmagate::protocol

// Per-core resources: setup and teardown on the control thread.
#include "dataplane/core_resources.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dataplane/verbs_backend.hpp"

namespace rdmagate::dataplane {

std::unique_ptr<CoreResources> CoreResources::create(unsigned index, const CoreConfig& cfg, ibv_context* ctx,
                                                     ibv_pd* pd, std::string* error) {
  if (cfg.max_conns == 0 || cfg.max_conns > kMaxConnsPerCore || cfg.rx_per_conn == 0 ||
      cfg.tx_per_conn == 0 || cfg.tx_per_conn >= protocol::TxQueues::kMaxDescriptors || cfg.buf_size < 64) {
    *error = "core " + std::to_string(index) + ": bad sizing (max_conns 1.." + std::to_string(kMaxConnsPerCore) +
             ", rx/tx per connection >= 1, buffer >= 64 bytes)";
    return nullptr;
  }
  std::unique_ptr<CoreResources> c(new CoreResources());
  c->index_ = index;
  c->cfg_ = cfg;
  // Every receive of every slot, every send plus a drain marker per slot, can complete on this CQ.
  const int cqe = static_cast<int>(cfg.max_conns * (cfg.rx_per_conn + cfg.tx_per_conn + 1));
  c->cq_ = VerbsBackend::create_cq(ctx, cqe, error);
  if (c->cq_ == nullptr) return nullptr;
  const std::size_t bytes = c->slot_bytes() * cfg.max_conns;
  c->region_ = HugeBuffer::allocate(bytes, cfg.socket, 4096, error);
  if (!c->region_) return nullptr;
  // Registered once for the core's whole life.
  c->mr_ = ibv_reg_mr(pd, c->region_.data(), bytes, cfg.access);
  if (c->mr_ == nullptr) {
    *error = std::string("ibv_reg_mr of ") + std::to_string(bytes) + " bytes: " + std::strerror(errno);
    return nullptr;
  }
  HandoffSizes sizes;
  const std::size_t ring_bytes = CoreHandoff::memsize(sizes);
  c->ring_mem_ = HugeBuffer::allocate(ring_bytes, cfg.socket, 0, error);
  if (!c->ring_mem_) return nullptr;
  const int rc = c->handoff_.init(c->ring_mem_.data(), c->ring_mem_.size(), sizes, index);
  if (rc != 0) {
    *error = "core handoff rings: " + std::string(std::strerror(-rc));
    return nullptr;
  }
  c->control_mailbox_ = std::make_unique<ControlMailbox>(c->handoff_.to_core().take_producer(),
                                                         c->handoff_.to_control().take_consumer());
  c->core_mailbox_ = std::make_unique<EngineCoreMailbox>(c->handoff_.to_core().take_consumer(),
                                                         c->handoff_.to_control().take_producer());
  c->free_slots_.reserve(cfg.max_conns);
  for (int s = static_cast<int>(cfg.max_conns) - 1; s >= 0; --s) c->free_slots_.push_back(s);
  return c;
}

CoreResources::~CoreResources() {
  if (mr_ != nullptr && ibv_dereg_mr(mr_) != 0) std::fprintf(stderr, "rdmagate: ibv_dereg_mr: %m\n");
  VerbsBackend::destroy_cq(cq_);
}

int CoreResources::alloc_slot_st() noexcept {
  if (free_slots_.empty()) return -1;
  const int s = free_slots_.back();
  free_slots_.pop_back();
  ++used_;
  return s;
}

void CoreResources::free_slot_st(int slot) noexcept {
  if (slot < 0 || static_cast<std::uint32_t>(slot) >= cfg_.max_conns) return;
  free_slots_.push_back(slot);
  --used_;
}

}  // namespace rdmagate::dataplane

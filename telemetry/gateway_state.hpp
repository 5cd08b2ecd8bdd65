#pragma once
// Slow-path facts about the gateway as a whole, for /metrics: readiness, the device port, configuration
// reloads, memory registered with the NIC, the hugepage fallback. Unlike the Stat rows of the per-core
// blocks these are not counted on a data path: the control thread sets them when it learns them (port
// checks every 500 ms, SIGHUP, startup), with relaxed atomic stores, and the HTTP thread reads them at
// scrape. Each value is independent of the others, so no ordering between them is needed.

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rdmagate::telemetry {

class HealthState;

// The `state` label of rdmagate_port_info: ibv_port_state, lowercase (unknown: not queried yet, or a value
// this list does not know).
enum class PortState : std::uint8_t { kUnknown = 0, kDown, kInit, kArmed, kActive, kActiveDefer };
inline constexpr std::array<std::string_view, 6> kPortStateNames = {"unknown", "down",   "init",
                                                                    "armed",   "active", "active_defer"};
// The `link_layer` label: ibv_port_attr::link_layer (ethernet: RoCE; unspecified: what kernels without
// link-layer reporting answer for InfiniBand ports).
enum class LinkLayer : std::uint8_t { kUnspecified = 0, kInfiniband, kEthernet };
inline constexpr std::array<std::string_view, 3> kLinkLayerNames = {"unspecified", "infiniband", "ethernet"};

inline constexpr std::string_view kReadyName = "rdmagate_ready";
inline constexpr std::string_view kPortActiveName = "rdmagate_port_active";
inline constexpr std::string_view kPortInfoName = "rdmagate_port_info";
inline constexpr std::string_view kReloadSuccessfulName = "rdmagate_config_last_reload_successful";
inline constexpr std::string_view kReloadTimestampName =
    "rdmagate_config_last_reload_success_timestamp_seconds";
inline constexpr std::string_view kRegisteredBytesName = "rdmagate_memory_registered_bytes";
inline constexpr std::string_view kPinnedBytesName = "rdmagate_memory_pinned_bytes";
inline constexpr std::string_view kHugepagesFallbackName = "rdmagate_hugepages_fallback";

class GatewayState final : public prometheus::Collectable {
 public:
  // ---- setup, before the HTTP server starts (its threads then see these without further ordering) ----
  // The device port the gateway serves and the data-plane backend: the identity labels of the port series.
  // Until set there are no port series.
  void set_port_identity(std::string device, unsigned port, std::string backend);
  // rdmagate_ready is what health.check_ready answers at scrape time (the /readyz logic itself); without it
  // there is no such series. health must outlive every scrape.
  void set_health(HealthState& health) noexcept { health_ = &health; }

  // ---- control thread ----
  void set_port(PortState state, LinkLayer link_layer) noexcept;
  // A configuration loaded and applied: the start, or a reload that passed validation. unix_seconds: wall
  // clock time of the load.
  void config_loaded(double unix_seconds) noexcept;
  // A reload (SIGHUP) rejected: the previous configuration stays in force.
  void config_reload_failed() noexcept;
  // Memory registered with the NIC (ibv_reg_mr and the backends' equivalents). Every registration happens at
  // start and a refused one stops it, before /metrics is up: so there is no count of refusals to export.
  void add_registered_bytes(std::uint64_t bytes) noexcept;
  // eal.hugepages: auto found no usable hugepages and EAL runs with --no-huge.
  void set_hugepages_fallback(bool fallback) noexcept;

  // ---- HTTP thread ----
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string device_;
  std::string port_;
  std::string backend_;
  HealthState* health_ = nullptr;
  std::atomic<PortState> port_state_{PortState::kUnknown};
  std::atomic<LinkLayer> link_layer_{LinkLayer::kUnspecified};
  std::atomic<bool> reload_ok_{true};
  std::atomic<double> reload_success_time_{0};
  std::atomic<std::uint64_t> registered_bytes_{0};
  std::atomic<bool> hugepages_fallback_{false};
};

}  // namespace rdmagate::telemetry

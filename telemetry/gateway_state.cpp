#include "telemetry/gateway_state.hpp"

#include "telemetry/http_server.hpp"
#include "telemetry/process_metrics.hpp"

namespace rdmagate::telemetry {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Every series here is a gauge: facts of the gateway's state, not counts.
void add(std::vector<MetricFamily>& out, std::string_view name, std::string_view help, double value,
         std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  out.push_back(MetricFamily{std::string(name), std::string(help), MetricType::Gauge, {std::move(m)}});
}

template <typename E, std::size_t N>
std::string name_of(E v, const std::array<std::string_view, N>& names) {
  const auto i = static_cast<std::size_t>(v);
  return std::string(i < N ? names[i] : names[0]);
}

}  // namespace

void GatewayState::set_port_identity(std::string device, unsigned port, std::string backend) {
  device_ = std::move(device);
  port_ = std::to_string(port);
  backend_ = std::move(backend);
}

void GatewayState::set_port(PortState state, LinkLayer link_layer) noexcept {
  port_state_.store(state, std::memory_order_relaxed);
  link_layer_.store(link_layer, std::memory_order_relaxed);
}

void GatewayState::config_loaded(double unix_seconds) noexcept {
  reload_success_time_.store(unix_seconds, std::memory_order_relaxed);
  reload_ok_.store(true, std::memory_order_relaxed);
}

void GatewayState::config_reload_failed() noexcept {
  reload_ok_.store(false, std::memory_order_relaxed);
}

void GatewayState::add_registered_bytes(std::uint64_t bytes) noexcept {
  registered_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void GatewayState::set_hugepages_fallback(bool fallback) noexcept {
  hugepages_fallback_.store(fallback, std::memory_order_relaxed);
}

std::vector<MetricFamily> GatewayState::Collect() const {
  std::vector<MetricFamily> out;
  if (health_ != nullptr) {
    // The probe's own evaluation: sampling the cores' progress from here as well only adds samples, which
    // can make a stall visible sooner but never reports one that did not last the threshold (HealthState).
    const bool ready = health_->check_ready(HealthState::Clock::now()).ok;
    add(out, kReadyName, "1 when /readyz would answer 200 (evaluated at scrape), else 0.", ready ? 1 : 0);
  }
  if (!device_.empty()) {
    const PortState state = port_state_.load(std::memory_order_relaxed);
    add(out, kPortActiveName, "1 when the configured device port is ACTIVE, else 0.",
        state == PortState::kActive ? 1 : 0, {{"device", device_}, {"port", port_}});
    add(out, kPortInfoName,
        "The configured device port: its state and link layer (ibv_query_port) and the data-plane backend; "
        "the value is always 1.",
        1,
        {{"device", device_},
         {"port", port_},
         {"state", name_of(state, kPortStateNames)},
         {"link_layer", name_of(link_layer_.load(std::memory_order_relaxed), kLinkLayerNames)},
         {"backend", backend_}});
  }
  if (const double t = reload_success_time_.load(std::memory_order_relaxed); t > 0) {
    add(out, kReloadSuccessfulName,
        "1 when the last configuration load (start or SIGHUP reload) succeeded, else 0.",
        reload_ok_.load(std::memory_order_relaxed) ? 1 : 0);
    add(out, kReloadTimestampName,
        "Unix time of the last successful configuration load (the start counts as one).", t);
  }
  add(out, kRegisteredBytesName, "Bytes of memory registered with the NIC (store arena, per-core buffers).",
      static_cast<double>(registered_bytes_.load(std::memory_order_relaxed)));
  if (const auto pinned = read_pinned_bytes()) {
    add(out, kPinnedBytesName,
        "Bytes the kernel holds pinned for the process (VmPin: RDMA registrations, against RLIMIT_MEMLOCK).",
        static_cast<double>(*pinned));
  }
  add(out, kHugepagesFallbackName,
      "1 when eal.hugepages: auto found no usable hugepages and EAL runs without them (--no-huge), else 0.",
      hugepages_fallback_.load(std::memory_order_relaxed) ? 1 : 0);
  return out;
}

}  // namespace rdmagate::telemetry

#pragma once
// Scrape-time half of telemetry: a prometheus::Collectable that reads the registered CoreStats blocks and
// turns them into MetricFamily objects following metric_table(). Runs on the HTTP thread only.

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "telemetry/metrics.hpp"
#include "telemetry/stats.hpp"

namespace rdmagate::telemetry {

class StatsCollector final : public prometheus::Collectable {
 public:
  // tsc_hz converts the *_seconds_total TSC counters; version (with build_commit()) feeds
  // rdmagate_build_info.
  StatsCollector(std::string version, std::uint64_t tsc_hz);

  // Setup, before the cores launch. The block must outlive the collector (or every scrape). Returns false
  // for a core id registered twice.
  bool register_core(unsigned core_id, CoreStats& block);
  // A block written by a non-data-plane thread (rdma_cm control thread: accepts, rejects, async events).
  // It is added into summed metrics only: it has no `core` label and takes no part in health checks.
  void register_control(CoreStats& block);
  // Setup: the device backend the cores run (its name, e.g. verbs) and what dataplane.backend asked for (auto
  // or that name), published as rdmagate_dataplane_backend_info. Never called: no such series.
  void set_backend(std::string backend, std::string configured);

  std::vector<prometheus::MetricFamily> Collect() const override;

  // The source commit rdmagate_build_info reports (known at configure time; "unknown" if it was not).
  static std::string_view build_commit() noexcept;

  struct CoreProgress {
    unsigned core = 0;
    std::uint64_t polls = 0;
    bool out_of_service = false;  // its CQ was lost (rdmagate_core_out_of_service): live, but serves no one
  };
  // The liveness signal of every registered core, in registration order: its poll counter. A core asleep
  // in idle_policy event (rdmagate_poller_sleeping 1) polls nothing, yet is live: epoll_wait returns on its
  // next completion, command or deadline. So that the stall checks (/healthz, the systemd watchdog), which
  // look for a moving counter, see it as live, each call adds one to what it reports while the core sleeps.
  std::vector<CoreProgress> core_progress() const;

 private:
  struct Entry {
    unsigned core = 0;
    CoreStats* block = nullptr;
    mutable std::uint64_t asleep_seen = 0;  // core_progress calls that found the core asleep
  };
  double export_value(std::uint64_t raw, Unit unit, bool gauge) const noexcept;

  const std::string version_;
  const double tsc_hz_;
  mutable std::mutex mutex_;
  std::vector<Entry> cores_;
  std::vector<CoreStats*> control_;
  std::string backend_, backend_configured_;
};

}  // namespace rdmagate::telemetry

#pragma once
// Control-thread half of the engine's telemetry (issue 6): copies the engine's plain EngineCounters, its
// connection table and the store's StoreStats into telemetry::CoreStats blocks, with relaxed atomic_ref
// stores (CoreStats::set), for the scrape-time StatsCollector to sum. Call it from the control thread every
// poll turn or every ~100 ms; nothing here runs on a data-plane core.
//
// Who writes what (each slot has one writer):
//   control block  accepts, rejects (sent) by reason, reconnects, connection failures by cause, async events
//                  by kind, unplaced connections, and the store's gauges and operations (publish the store
//                  into exactly one block: every block is summed)
//   core blocks    the per-core connection gauges rdmagate_connections{core,state}; the core itself never
//                  writes those slots (dataplane/core_stats_publish.hpp)
// Protocol violations by code come from the cores' own counters (publish_core_counters), not from the
// FAILED reports control receives: the same violation would otherwise be counted twice.
//
// The mapping (publish_engine_counters, publish_connections, publish_store_stats) is verbs-free and host
// tested; publish_engine_stats is the thin adapter over a live Engine.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "control/connection_lifecycle.hpp"
#include "control/engine.hpp"
#include "dataplane/core_resources.hpp"
#include "services/storage/memory/store.hpp"
#include "services/storage/rados/rados_store.hpp"
#include "telemetry/stats.hpp"

namespace rdmagate::control {

// Index into telemetry::kConnStateNames for a lifecycle state, or kNoConnState for kDestroyed (gone,
// waiting to be reaped: not counted).
inline constexpr std::size_t kNoConnState = telemetry::kConnStateNames.size();
std::size_t conn_state_index(State s) noexcept;

// Connections the control thread holds, counted by engine core index and telemetry state.
struct ConnectionSnapshot {
  using Counts = std::array<std::uint64_t, telemetry::kConnStateNames.size()>;
  std::vector<Counts> by_core;  // index: engine core (Connection::core())
  std::uint64_t unplaced = 0;   // never placed on a core (core() < 0), any state

  void reset(std::size_t cores);
  // core: Connection::core() (-1 before the first placement).
  void add(int core, State s) noexcept;
};

// Control block: accepts, rejects sent, reconnects, failures by cause, async events by kind.
void publish_engine_counters(const EngineCounters& c, telemetry::CoreStats& control_block) noexcept;
// core_blocks[i] is engine core i's block (null: skipped); `unplaced` goes to the control block.
void publish_connections(const ConnectionSnapshot& s, std::span<telemetry::CoreStats* const> core_blocks,
                         telemetry::CoreStats& control_block) noexcept;
// Objects, value bytes, charged bytes, capacity, and operations by op and status.
void publish_store_stats(const store::StoreStats& s, telemetry::CoreStats& block) noexcept;
// store.backend: rados, after publish_store_stats of its cache: the operations by op and status become the
// RADOS backend's (the cache's own are internal), plus the cache, RADOS and worker counters and the librados
// latency histograms (into block's request_duration[kRadosHistogramFirst..]).
void publish_rados_stats(const storage::rados::RadosStats& s, telemetry::CoreStats& block) noexcept;

// Fault injection (docs/faults.md), summed over the cores into the control block: injections by action and
// direction (qp_err is the engine's own count, publish_engine_counters), stall time, hold overflows, and the
// rules installed. The cores' counters are atomics of their own; this only reads them.
void publish_fault_counters(std::span<const dataplane::FaultCounters* const> cores, std::uint32_t rules,
                            telemetry::CoreStats& control_block) noexcept;

// Everything of a live engine: its counters and connection table into control_block, the connection gauges
// into each core's CoreResources::stats block. Control thread (allocates a little; never on a core).
inline void publish_engine_stats(const Engine& eng, telemetry::CoreStats& control_block) {
  ConnectionSnapshot snap;
  snap.reset(eng.core_count());
  for (const Connection* c : eng.connections()) snap.add(c->core(), c->lifecycle().state());
  std::vector<telemetry::CoreStats*> blocks(eng.core_count());
  for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = eng.core(i).stats;
  publish_engine_counters(eng.counters(), control_block);
  publish_connections(snap, blocks, control_block);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i] != nullptr) blocks[i]->set(telemetry::Stat::kCoreOutOfService, eng.core_out_of_service(i) ? 1 : 0);
  }
  std::vector<const dataplane::FaultCounters*> faults(eng.core_count());
  for (std::size_t i = 0; i < faults.size(); ++i) faults[i] = &eng.core(i).faults.counters();
  publish_fault_counters(faults, eng.fault_rule_count(), control_block);
}

}  // namespace rdmagate::control

// rados_store_bench: the RADOS backend through the storage interface, without RDMA, N ops in flight, as the
// object service drives it (the program's thread plays a data-plane core with idle_policy event: submit, pop
// completions, and with none, sleep until the backend rings its storage doorbell).
// Beside `rados bench` on the same cluster (tools/rados-store-compare) it measures what the backend costs on
// top of RADOS (checksum, the write's xattr, the invalidation notify, the worker hop), which the rxe guest
// cannot show: there the gateway's and the client's polling cores compete with the OSD for two vCPUs.
//
//   rados_store_bench --ceph-dir DIR [--op put|get] [--size BYTES] [--qd N] [--duration S] [--keys K]
//
// DIR is a tools/ceph-cluster directory. Prints one line: op size qd ops ops/s MB/s avg p50 p99 (µs) errors,
// then the backend's counters, librados' own mean latency per op kind and the worker's futex wakeups.
// GET reads K keys written first, through a cache of 1 MiB (so nearly every GET misses) unless --cache-mib.
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dataplane/doorbell.hpp"
#include "tests/services/storage/rados/rados_test_util.hpp"

namespace rs = rdmagate::storage;
namespace rr = rdmagate::storage::rados;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string dir;
  std::string op = "put";
  std::uint64_t size = 4096;
  std::uint32_t qd = 16;
  double duration = 10;
  std::uint32_t keys = 1024;
  std::uint64_t cache_mib = 0;  // 0: 64 MiB for PUT, 1 MiB for GET
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "rados_store_bench: %s\nusage: rados_store_bench --ceph-dir DIR [--op put|get] [--size BYTES] "
               "[--qd N] [--duration S] [--keys K] [--cache-mib M]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    char* end = nullptr;
    const auto num = [&](double lo, double hi) {
      const double d = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(d >= lo && d <= hi)) usage((a + ": " + v + " is out of range").c_str());
      return d;
    };
    if (a == "--ceph-dir") {
      o.dir = v;
    } else if (a == "--op") {
      o.op = v;
      if (o.op != "put" && o.op != "get") usage("--op is put or get");
    } else if (a == "--size") {
      o.size = static_cast<std::uint64_t>(num(0, 4 << 20));
    } else if (a == "--qd") {
      o.qd = static_cast<std::uint32_t>(num(1, 256));
    } else if (a == "--duration") {
      o.duration = num(0.1, 3600);
    } else if (a == "--keys") {
      o.keys = static_cast<std::uint32_t>(num(1, 1 << 20));
    } else if (a == "--cache-mib") {
      o.cache_mib = static_cast<std::uint64_t>(num(1, 1 << 16));
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (o.dir.empty()) usage("--ceph-dir is required");
  return o;
}

struct Slot {
  Clock::time_point started;
  rs::Lease lease;
  bool busy = false;
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  rr::RadosSettings s = rr::test::fixture_settings(o.dir, "bench");
  s.max_requests = 256;
  s.notify_timeout_ms = 2000;  // the shipped default
  s.cache_lease_ms = 5000;
  const std::uint64_t cache_mib = o.cache_mib != 0 ? o.cache_mib : (o.op == "put" ? 64 : 1);
  // The cache must hold every PUT in flight (a reservation is not evictable).
  const std::uint64_t cache = std::max<std::uint64_t>(cache_mib << 20, (o.size + 4096) * (o.qd + 1));
  auto g = rr::test::make_gateway(s, cache);
  if (!g) return 1;
  if (!rr::test::wait_ready(*g->rados)) {
    std::fprintf(stderr, "rados_store_bench: backend not ready: %s\n", g->rados->last_error().c_str());
    return 1;
  }
  rs::CoreStorage& core = g->core();
  rdmagate::dataplane::Doorbell bell;
  core.completions()->set_wake(&bell);
  std::vector<std::byte> value(o.size);
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<std::byte>(i * 131 + 7);
  const auto key = [](std::uint64_t i) { return "bench-" + std::to_string(i); };

  if (o.op == "get") {  // the keys first, one at a time
    for (std::uint32_t k = 0; k < o.keys; ++k) {
      if (rr::test::put(core, key(k), value, 1u << 30 | k) != rs::Status::kOk) {
        std::fprintf(stderr, "rados_store_bench: could not write key %u\n", k);
        return 1;
      }
    }
  }

  std::vector<Slot> slots(o.qd);
  std::vector<double> lat_us;
  lat_us.reserve(1 << 20);
  std::uint64_t next_key = 0, ops = 0, errors = 0;
  const auto submit = [&](std::uint32_t i) {
    Slot& sl = slots[i];
    sl.started = Clock::now();
    sl.busy = true;
    const std::string k = key(next_key++ % o.keys);
    const rs::Status st = o.op == "put" ? core.put(k, value, i) : core.get(k, i, &sl.lease);
    if (st == rs::Status::kPending) return;
    // Ended at once (a GET that hit, or a refusal).
    if (st != rs::Status::kOk) ++errors;
    if (o.op == "get" && st == rs::Status::kOk) core.release(&sl.lease);
    lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - sl.started).count());
    ++ops;
    sl.busy = false;
  };
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration));
  for (std::uint32_t i = 0; i < o.qd; ++i) submit(i);
  rs::Completion c[32];
  std::uint32_t in_flight = 0;
  for (;;) {
    for (std::uint32_t i = 0; i < o.qd; ++i) {
      if (!slots[i].busy && Clock::now() < end) submit(i);
    }
    in_flight = 0;
    for (const Slot& sl : slots) in_flight += sl.busy ? 1 : 0;
    if (in_flight == 0 && Clock::now() >= end) break;
    std::uint32_t n = core.completions()->pop_burst_st(c);
    if (n == 0 && in_flight != 0) {
      // As a gateway core with idle_policy event waits: arm its storage doorbell, look once more, sleep.
      bell.arm();
      n = core.completions()->pop_burst_st(c);
      bool rung = false;
      if (n == 0) {
        pollfd p{bell.fd(), POLLIN, 0};
        rung = ::poll(&p, 1, 100) > 0;
      }
      bell.disarm(rung);
    }
    for (std::uint32_t j = 0; j < n; ++j) {
      Slot& sl = slots[c[j].tag];
      if (c[j].status != rs::Status::kOk) ++errors;
      if (o.op == "get" && c[j].status == rs::Status::kOk) {
        sl.lease = c[j].lease;
        core.release(&sl.lease);
      }
      lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - sl.started).count());
      ++ops;
      sl.busy = false;
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::sort(lat_us.begin(), lat_us.end());
  const auto pct = [&](double p) {
    return lat_us.empty() ? 0.0 : lat_us[std::min(lat_us.size() - 1, static_cast<std::size_t>(p * lat_us.size()))];
  };
  double sum = 0;
  for (const double l : lat_us) sum += l;
  const rr::RadosStats st = g->rados->stats();
  // librados' own share of a request: from the worker's submit to the worker handling its callback.
  const auto mean_us = [](const rdmagate::telemetry::LatencyHistogram& h) {
    return h.count() == 0 ? 0.0 : static_cast<double>(h.sum_ns) / 1000.0 / static_cast<double>(h.count());
  };
  std::printf(
      "op=%s size=%llu qd=%u ops=%llu ops_per_s=%.1f mb_per_s=%.2f avg_us=%.0f p50_us=%.0f p99_us=%.0f "
      "errors=%llu notifies=%llu notify_resends=%llu cache_hits=%llu rados_read_avg_us=%.0f "
      "rados_write_avg_us=%.0f cache_misses=%llu rados_read_ops=%llu worker_wakeups=%llu\n",
      o.op.c_str(), static_cast<unsigned long long>(o.size), o.qd, static_cast<unsigned long long>(ops),
      ops / secs, ops * static_cast<double>(o.size) / secs / (1 << 20),
      lat_us.empty() ? 0 : sum / lat_us.size(), pct(0.5), pct(0.99), static_cast<unsigned long long>(errors),
      static_cast<unsigned long long>(st.notifies_sent), static_cast<unsigned long long>(st.notify_resends),
      static_cast<unsigned long long>(st.cache_hits), mean_us(st.latency[0]), mean_us(st.latency[1]),
      static_cast<unsigned long long>(st.cache_misses),
      static_cast<unsigned long long>(st.latency[0].count()),
      static_cast<unsigned long long>(st.worker_wakeups));
  return errors == 0 && ops > 0 ? 0 : 1;
}

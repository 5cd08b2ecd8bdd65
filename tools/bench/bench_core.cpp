// rdmagate-bench's runs (bench_core.hpp). Setup and reporting run on the caller's thread; everything named
// *_st below runs in client completion callbacks on data-plane lcores and keeps to the hot-path rules
// (no allocation, no locks, no syscalls, no formatting).
#include "tools/bench/bench_core.hpp"

#include <linux/futex.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "client/client.hpp"
#include "conf/secrets.hpp"
#include "control/engine.hpp"
#include "dataplane/backend/backend_factory.hpp"
#include "protocol/message.hpp"
#include "protocol/object_wire.hpp"
#include "tools/bench/echo_client_service.hpp"

namespace rdmagate::bench {

namespace {
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// poll_st's timeout to sleep until `t` (rounded up to whole milliseconds; 0 when it has passed).
int ms_until(Clock::time_point t) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

bool interrupted(const Options& o) {
  return o.interrupt != nullptr && o.interrupt->load(std::memory_order_relaxed);
}

std::string human_size(std::uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

// One progress line (stderr) per second.
void progress_line(const Options& o, const char* phase, std::uint64_t size, double t, double ops_s,
                   double mb_s, std::uint64_t errors, std::int64_t in_flight) {
  if (!o.progress) return;
  std::fprintf(stderr,
               "[%s %s] %-7s t=%5.1fs %11.1f ops/s %10.2f MB/s  errors %" PRIu64 "  in flight %" PRId64 "\n",
               mode_name(o.mode), human_size(size).c_str(), phase, t, ops_s, mb_s, errors, in_flight);
}

std::uint64_t splitmix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// What to add to an authentication failure's message: how to give the bench credentials.
std::string auth_hint(const Options& o) {
  return o.principal.empty() ? " (give --principal and --secrets-file)" : "";
}

// The echo and connect modes' credentials: --principal's secret from --secrets-file (the gateway's format,
// the gateway's parser). Empty when none were given. The bytes live in `*out` for the run.
bool load_bench_secret(const Options& o, std::vector<std::uint8_t>* out, std::string* error) {
  out->clear();
  if (o.principal.empty()) return true;
  std::optional<conf::Secrets> file = conf::loadSecretsFile(o.secrets_file, error);
  if (!file) return *error = "--secrets-file: " + *error, false;
  const conf::PrincipalSecret* e = file->find(o.principal);
  if (e == nullptr) {
    return *error = "--secrets-file " + o.secrets_file + " has no secret for --principal " + o.principal,
           false;
  }
  *out = e->secret;
  return true;
}

// Word i (i >= 1) of a value: depends on the seed and the offset, cheap enough for 1 MiB values.
inline std::uint64_t pattern_word(std::uint64_t seed, std::uint64_t i) noexcept {
  std::uint64_t w = seed ^ (i * 0x9e3779b97f4a7c15ull);
  w ^= w >> 29;
  return w * 0xbf58476d1ce4e5b9ull;
}
}  // namespace

std::uint64_t auto_keys(std::uint64_t size) noexcept {
  const std::uint64_t k = (32ull << 20) / std::max<std::uint64_t>(size, 1);
  return std::clamp<std::uint64_t>(k, 16, 10000);
}

// ---- the value pattern ------------------------------------------------------------------------------------

std::uint64_t make_seed(std::uint64_t key, std::uint32_t generation) noexcept {
  return key << 24 | (generation & 0xffffffu);
}

void fill_value(std::span<std::byte> value, std::uint64_t seed) noexcept {
  const std::size_t n = value.size();
  std::size_t off = 0;
  for (std::uint64_t i = 0; off < n; ++i, off += 8) {
    const std::uint64_t w = i == 0 ? seed : pattern_word(seed, i);
    std::memcpy(value.data() + off, &w, std::min<std::size_t>(8, n - off));
  }
}

bool check_value(std::span<const std::byte> value, std::uint64_t key) noexcept {
  const std::size_t n = value.size();
  if (n < kMinVerifySize) return false;
  std::uint64_t seed;
  std::memcpy(&seed, value.data(), 8);
  if ((seed >> 24) != key || (seed & 0xffffffu) == 0) return false;
  std::size_t off = 8;
  for (std::uint64_t i = 1; off < n; ++i, off += 8) {
    const std::uint64_t w = pattern_word(seed, i);
    const std::size_t len = std::min<std::size_t>(8, n - off);
    if (len == 8) {
      std::uint64_t got;
      std::memcpy(&got, value.data() + off, 8);
      if (got != w) return false;
    } else if (std::memcmp(value.data() + off, &w, len) != 0) {
      return false;
    }
  }
  return true;
}

void format_key(std::uint64_t key, char (&out)[kKeyLength]) noexcept {
  static constexpr char kHex[] = "0123456789abcdef";
  out[0] = 'b';
  out[1] = '-';
  for (std::size_t i = kKeyLength; i > 2; --i) {
    out[i - 1] = kHex[key & 0xf];
    key >>= 4;
  }
}

// ---- options ---------------------------------------------------------------------------------------------

std::string validate(const Options& o) {
  if (o.server.empty()) return "--server is required";
  if (o.sizes.empty()) return "--sizes is empty";
  if (o.connections == 0 || o.connections > 4096) return "--connections must be 1..4096";
  if (o.qd == 0 || o.qd > 4096) return "--qd must be 1..4096";
  if (o.lcores.empty()) return "no data-plane lcore (--cores)";
  if (o.iterations == 0 && !(o.duration_s > 0)) return "--duration must be > 0 (or give --iterations)";
  if (o.warmup_s < 0) return "--warmup must be >= 0";
  if (o.ratio < 0 || o.ratio > 1) return "--ratio must be within 0..1";
  if (o.mode == Mode::kEcho || o.mode == Mode::kSink) {
    for (std::uint64_t s : o.sizes) {
      if (s > dataplane::EchoClientService::kMaxPayload) {
        return "echo/sink payload " + std::to_string(s) + " B above the echo client's limit of " +
               std::to_string(dataplane::EchoClientService::kMaxPayload) +
               " B (echo and sink are inline only)";
      }
    }
    if (o.verify) return "--verify applies to put/get/mixed (echo answers are always verified)";
  } else {
    for (std::uint64_t s : o.sizes) {
      if (s == 0) return "sizes must be >= 1 for put/get/mixed";
      if (o.verify && s < kMinVerifySize) {
        return "--verify needs sizes of at least " + std::to_string(kMinVerifySize) + " B (the seed)";
      }
      const std::uint64_t slots = std::uint64_t{o.connections} * o.qd;
      if (slots * s > (1ull << 30)) {
        return "connections x qd x size = " + std::to_string(slots * s) + " B of buffers: above 1 GiB";
      }
    }
  }
  return {};
}

// ==== echo / sink: the engine directly
// ========================================================================

namespace {

std::uint64_t counter_sum(control::Engine& e, bool sink) {
  const auto t = static_cast<std::size_t>(sink ? protocol::MessageType::kInlineRequest
                                               : protocol::MessageType::kInlineResponse);
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < e.core_count(); ++i) {
    const dataplane::CoreCounters& c = e.core(i).counters;
    // Written by the core, read here: a stale value is fine, a torn one cannot happen on x86-64.
    n += sink ? *static_cast<const volatile std::uint64_t*>(&c.msgs_tx[t])
              : *static_cast<const volatile std::uint64_t*>(&c.msgs_rx[t]);
  }
  return n;
}

struct EchoPhaseResult {
  std::uint64_t ops = 0;
  double seconds = 0;
  std::uint64_t mismatches = 0;
  std::uint64_t errors = 0;
  std::map<std::string, std::uint64_t> errors_by_status;
  Latency latency;
  bool interrupted = false;
};

// The bench's engine: active, one core per --lcores entry with per_core connection slots (plus two spare),
// `credits` receives and `tx_per_conn` send descriptors of `msg` bytes per connection.
control::EngineConfig bench_engine_config(const Options& o, std::uint32_t per_core, std::uint16_t credits,
                                          std::uint32_t tx_per_conn, std::uint32_t msg) {
  control::EngineConfig ec;
  ec.name = "bench";
  ec.device = o.device;
  ec.passive = false;
  ec.expose_core_region = false;  // its echo and sink sends are inline: no peer reads or writes it
  for (const unsigned lcore : o.lcores) {
    dataplane::CoreConfig c;
    c.lcore = lcore;
    c.max_conns = per_core + 2;
    c.rx_per_conn = credits;
    c.tx_per_conn = tx_per_conn;
    c.buf_size = msg;
    c.idle = o.idle == BenchIdle::kEvent   ? dataplane::IdlePolicy::kEvent
             : o.idle == BenchIdle::kYield ? dataplane::IdlePolicy::kYield
                                           : dataplane::IdlePolicy::kBusy;
    // Yield soon: in the guest, rxe's softirq work shares the CPUs with the pollers (engine_bench's finding).
    c.idle_yield_after = 8;
    c.idle_event_after_us = o.idle_event_after_us;
    ec.cores.push_back(c);
  }
  ec.local.params = protocol::ConnParams{credits, msg, protocol::kMaxFragments, 1u << 20};
  ec.local.min_queue_depth = protocol::kMinCreditQueueDepth;
  ec.handshake_timeout = std::chrono::milliseconds(static_cast<long>(o.connect_timeout_s * 1000));
  return ec;
}

// One engine for one phase (warm-up or measurement), so the services' RTT histograms hold only what the phase
// measured. Connects, runs, drains, stops the cores.
bool echo_phase(const Options& o, std::uint64_t size, double seconds, std::uint64_t iterations, bool measure,
                EchoPhaseResult* out, std::string* error) {
  const bool sink = o.mode == Mode::kSink;
  const unsigned cores = static_cast<unsigned>(o.lcores.size());
  const std::uint32_t per_core = (o.connections + cores - 1) / cores;
  // Credits: room for the window plus the answers' slack; a gateway offering fewer wins the negotiation.
  const auto credits = static_cast<std::uint16_t>(std::clamp<std::uint32_t>(2 * o.qd, 16, 1024));
  const std::uint32_t msg = static_cast<std::uint32_t>(
      std::max<std::uint64_t>(o.max_message, (size + protocol::kHeaderSize + 63) / 64 * 64));

  control::EngineConfig ec = bench_engine_config(o, per_core, credits, 2u * credits + 16, msg);
  ec.signal_interval = static_cast<std::uint16_t>(std::min<std::uint32_t>(16, credits / 2));
  // The services outlive the engine (declared first): its cores hold references to them until it is gone.
  dataplane::EchoClientResults results;
  std::vector<std::unique_ptr<dataplane::EchoClientService>> services;
  auto engine = control::Engine::create(ec, error);
  if (!engine) return false;

  std::vector<std::uint8_t> secret;
  if (!load_bench_secret(o, &secret, error)) return false;
  dataplane::EchoClientConfig sc;
  sc.principal = o.principal;
  sc.secret = secret;
  sc.max_conns = per_core + 2;
  sc.messages_per_conn = iterations != 0 ? (iterations + o.connections - 1) / o.connections : (1ull << 62);
  sc.min_payload = sc.max_payload = static_cast<std::uint32_t>(size);
  sc.window = o.qd;
  sc.opcode =
      static_cast<std::uint16_t>(sink ? protocol::ObjectOpcode::kSink : protocol::ObjectOpcode::kEcho);
  sc.one_way = sink;
  // The service's RTT slots are per core, keyed by cookie: exact only with one connection per core.
  sc.measure_latency = !sink && measure && per_core == 1;
  std::vector<std::unique_ptr<control::CoreRunner>> runners;
  for (unsigned i = 0; i < cores; ++i) {
    services.push_back(std::make_unique<dataplane::EchoClientService>(sc, results));
    runners.push_back(dataplane::make_core_runner(engine->backend_kind(), engine->core(i), *services.back()));
  }
  if (iterations != 0) {
    results.wake = [](void* e) { static_cast<control::Engine*>(e)->wake(); };
    results.wake_arg = engine.get();
    results.wake_at = o.connections;
  }
  if (!engine->launch_cores(std::move(runners), error)) return false;
  std::vector<std::uint64_t> ids;
  const auto tc = Clock::now();
  for (std::uint32_t i = 0; i < o.connections; ++i) {
    const std::uint64_t id = engine->connect(o.server, o.port, error, false, static_cast<int>(i % cores));
    if (id == 0) {
      engine->begin_shutdown_st();
      engine->stop_cores_st();
      return false;
    }
    ids.push_back(id);
  }
  auto finish = [&](bool ok) {
    const auto td = Clock::now();
    // Quiesce first (no new request; the ones in flight get their answers), then close: the SIGTERM path.
    // A plain begin_shutdown_st with echo requests in flight left the connection closing until the timeout.
    const bool drained = engine->shutdown_st(std::chrono::seconds(10));
    if (!drained) {
      for (const control::Connection* c : engine->connections()) {
        std::fprintf(stderr, "bench: connection %llu still %s at the drain timeout\n",
                     static_cast<unsigned long long>(c->id()),
                     std::string(control::to_string(c->lifecycle().state())).c_str());
      }
    }
    engine->stop_cores_st();
    if (o.progress) {
      std::fprintf(stderr, "[%s %s] %s: connections closed in %.2f s%s\n", mode_name(o.mode),
                   human_size(size).c_str(), measure ? "measure" : "warmup", since(td),
                   drained ? "" : " (NOT drained: timed out)");
    }
    return ok;
  };
  const auto connect_deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<long>(o.connect_timeout_s * 1000));
  while (engine->owned_count() < o.connections) {
    if (Clock::now() >= connect_deadline || engine->connection_count() < o.connections) {
      *error = "echo: " + std::to_string(engine->owned_count()) + " of " + std::to_string(o.connections) +
               " connections to " + o.server + ":" + std::to_string(o.port) +
               " came up (is the gateway running?)";
      return finish(false);
    }
    // Each rdma_cm event and core reply (ADOPTED) ends the sleep; nothing else needs a look before then.
    engine->poll_st(ms_until(connect_deadline));
  }
  for (const control::Connection* c : engine->connections()) {
    const std::uint32_t m = c->session().params.max_message_size;
    if (size + protocol::kHeaderSize > m) {
      *error = "echo: the session's message size is " + std::to_string(m) + " B: a " + std::to_string(size) +
               " B payload does not fit inline (raise the gateway's dataplane.inline_threshold_bytes)";
      return finish(false);
    }
  }
  if (o.progress) {
    std::fprintf(stderr, "[%s %s] %s: %u connection(s) up in %.2f s\n", mode_name(o.mode),
                 human_size(size).c_str(), measure ? "measure" : "warmup", o.connections, since(tc));
  }
  const std::uint64_t c0 = counter_sum(*engine, sink);
  const auto t0 = Clock::now();
  auto last = t0;
  std::uint64_t last_n = c0;
  const char* phase = measure ? "measure" : "warmup";
  for (;;) {
    // Event-driven: sleep until the next progress line or the end of the phase. rdma_cm events, the cores'
    // replies and the service's last finished connection (results.wake, with -n) end the sleep earlier; no
    // periodic wakeup preempts a poller that shares this CPU.
    Clock::time_point next = Clock::time_point::max();
    if (o.progress) next = last + std::chrono::seconds(1);
    if (iterations == 0) {
      next = std::min(
          next, t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
    }
    engine->poll_st(next == Clock::time_point::max() ? -1 : ms_until(next));
    const auto now = Clock::now();
    if (interrupted(o)) {
      out->interrupted = true;
      break;
    }
    if (const std::uint64_t f = results.auth_failures.load(std::memory_order_relaxed); f != 0) {
      *error =
          "echo: " + std::to_string(f) + " connection(s) to " + o.server + ":" + std::to_string(o.port) +
          " failed authentication (the gateway requires it: wrong or missing --principal/--secrets-file, or "
          "a gateway that did not prove the secret)" +
          auth_hint(o);
      return finish(false);
    }
    if (iterations != 0) {
      if (results.connections_done.load(std::memory_order_acquire) >= o.connections) break;
      if (engine->owned_count() < o.connections) break;  // lost a connection: report what we have
    } else if (std::chrono::duration<double>(now - t0).count() >= seconds) {
      break;
    }
    if (now - last >= std::chrono::seconds(1)) {
      const std::uint64_t n = counter_sum(*engine, sink);
      const double dt = std::chrono::duration<double>(now - last).count();
      const double rate = static_cast<double>(n - last_n) / dt;
      progress_line(o, phase, size, std::chrono::duration<double>(now - t0).count(), rate,
                    rate * static_cast<double>(size) / 1048576.0,
                    results.mismatches.load(std::memory_order_relaxed),
                    sink ? 0 : static_cast<std::int64_t>(o.connections) * o.qd);
      last = now;
      last_n = n;
    }
  }
  out->ops = counter_sum(*engine, sink) - c0;
  out->seconds = since(t0);
  const std::uint64_t owned_at_end = engine->owned_count();
  finish(true);
  out->mismatches = results.mismatches.load();
  std::uint64_t send_failures = 0;
  for (const auto& s : services) send_failures += s->send_failures() + s->unexpected();
  const std::uint64_t refused = results.closed_refused.load();
  if (send_failures != 0) out->errors_by_status["send_failed"] = send_failures;
  if (refused != 0) out->errors_by_status["refused"] = refused;
  if (owned_at_end < o.connections) out->errors_by_status["connection_lost"] = o.connections - owned_at_end;
  for (const auto& [k, v] : out->errors_by_status) out->errors += v;
  if (measure && !sink && out->ops != 0) {
    Latency& l = out->latency;
    // Closed loop with a full window: mean RTT = requests in flight / throughput (Little's law).
    l.avg_us = static_cast<double>(o.connections) * o.qd * out->seconds * 1e6 / static_cast<double>(out->ops);
    if (sc.measure_latency) {
      Histogram h;
      for (const auto& s : services) h.merge(s->rtt_ticks());
      if (h.count() != 0) l = latency_of(h, 1e6 / static_cast<double>(rte_get_tsc_hz()));
    }
  }
  return true;
}

bool run_echo(const Options& o, Report* rep) {
  for (std::uint64_t size : o.sizes) {
    std::string err;
    if (o.warmup_s > 0) {
      EchoPhaseResult w;
      if (!echo_phase(o, size, o.warmup_s, 0, false, &w, &err)) {
        rep->error = err;
        return false;
      }
    }
    EchoPhaseResult m;
    if (!echo_phase(o, size, o.duration_s, o.iterations, true, &m, &err)) {
      rep->error = err;
      return false;
    }
    Row row;
    row.size = size;
    row.ops = m.ops;
    row.bytes = m.ops * size;
    row.seconds = m.seconds;
    row.mismatches = m.mismatches;
    row.errors = m.errors;
    row.errors_by_status = m.errors_by_status;
    row.latency = m.latency;
    row.interrupted = m.interrupted;
    rep->rows.push_back(row);
    if (m.interrupted) break;
  }
  return true;
}

// ==== connect: setup rate
// ========================================================================

namespace {

// The instants the bench keeps per connection (TSC). The engine reports every state change as it happens
// (EngineConfig::on_state_change, inside the control loop), the echo service logs each verified answer.
enum Mark : std::size_t {
  kCall = 0,     // Engine::connect called
  kCalled,       // it returned: cm_id created, handshake timer armed, rdma_resolve_addr issued
  kAddr,         // ADDR_RESOLVED handled, rdma_resolve_route issued (kRouteResolving)
  kRoute,        // ROUTE_RESOLVED handled: core slot, QP created, receives posted, rdma_connect (kConnecting)
  kEstablished,  // ESTABLISHED: the gateway accepted the handshake, ADOPT queued for the core
  kVerified,     // the core verified the echo answer (service's log)
  kCloseStart,   // shutdown began
  kClosed,       // destroyed: CLOSED from the core, QP and cm_id released
  kMarkCount
};

struct ConnTimes {
  std::array<std::uint64_t, kMarkCount> t{};
  std::uint32_t qp_num = 0;
  bool failed = false;  // left the setup path before ESTABLISHED (closing, backoff, destroyed)
};

// One step: per connection from mark a to mark b.
StepTime step_between(const char* name, const std::vector<ConnTimes>& cs, Mark a, Mark b, double us_per_tick,
                      std::uint64_t n) {
  StepTime st;
  st.name = name;
  std::uint64_t first = UINT64_MAX, last = 0, mx = 0, mn = UINT64_MAX;
  for (const ConnTimes& c : cs) {
    if (c.t[a] == 0 || c.t[b] == 0 || c.t[b] < c.t[a]) continue;
    ++st.connections;
    first = std::min(first, c.t[a]);
    last = std::max(last, c.t[b]);
    mx = std::max(mx, c.t[b] - c.t[a]);
    mn = std::min(mn, c.t[b] - c.t[a]);
  }
  if (st.connections == 0) return st;
  const double total_us = static_cast<double>(last - first) * us_per_tick;
  st.total_ms = total_us / 1000.0;
  st.max_ms = static_cast<double>(mx) * us_per_tick / 1000.0;
  st.min_us = static_cast<double>(mn) * us_per_tick;
  st.us_per_conn = total_us / static_cast<double>(n);
  return st;
}

bool run_connect(const Options& o, Report* rep) {
  const unsigned cores = static_cast<unsigned>(o.lcores.size());
  const std::uint32_t n = o.connections;
  const std::uint32_t per_core = (n + cores - 1) / cores;
  if (per_core + 2 > dataplane::kMaxConnsPerCore) {
    const std::uint32_t room = dataplane::kMaxConnsPerCore - 2;
    rep->error = "connect: " + std::to_string(n) + " connections need at least " +
                 std::to_string((n + room - 1) / room) + " cores (--cores): a core of the bench holds " +
                 std::to_string(room);
    return false;
  }
  // The smallest buffers that carry the verifying echo: 1,000 connections of the bench then need 8 MiB of
  // its hugepages, not the 256 MiB that 4 KiB messages with a full window would take.
  const auto credits = static_cast<std::uint16_t>(16);
  // A gateway that requires authentication refuses sessions whose messages cannot carry an AUTH.
  const std::uint32_t msg = static_cast<std::uint32_t>(
      (std::max<std::size_t>(kConnectEchoBytes + protocol::kHeaderSize, protocol::kAuthMaxSize) + 63) / 64 *
      64);
  const double us_per_tick = 1e6 / static_cast<double>(rte_get_tsc_hz());

  std::vector<ConnTimes> times(n);
  std::uint64_t failed = 0;  // connections that left the setup path (the hook counts them)
  std::unordered_map<std::uint64_t, std::uint32_t> index;  // engine id -> times
  index.reserve(n * 2);
  control::Engine* eng = nullptr;  // set once created; the hook runs only inside its calls
  // One echo in flight: as many send descriptors as credits. A core's CQ holds every connection's receives
  // and send queue within the device's max_cqe (rxe: 32767), so the traffic modes' 2 x credits + 16 would
  // cap a core at 404 connections.
  control::EngineConfig ec = bench_engine_config(o, per_core, credits, credits, msg);
  ec.signal_interval = 8;
  ec.on_state_change = [&](std::uint64_t id, control::State from, control::State to) {
    (void)from;
    const auto it = index.find(id);
    if (it == index.end()) return;
    ConnTimes& c = times[it->second];
    const std::uint64_t now = rte_rdtsc();
    switch (to) {
      case control::State::kRouteResolving:
        c.t[kAddr] = now;
        break;
      case control::State::kConnecting:
        c.t[kRoute] = now;
        if (const control::Connection* conn = eng->find(id); conn != nullptr) c.qp_num = conn->qp_num();
        break;
      case control::State::kEstablishedPendingAdopt:
      case control::State::kOwnedByCore:
        if (c.t[kEstablished] == 0) c.t[kEstablished] = now;
        break;
      case control::State::kClosing:
      case control::State::kBackoff:
      case control::State::kDestroyed:
        if (c.t[kCloseStart] == 0 && !c.failed) {
          c.failed = true;
          ++failed;
        }
        if (to == control::State::kDestroyed) c.t[kClosed] = now;
        break;
      default:
        break;
    }
  };

  dataplane::EchoClientResults results;
  std::vector<dataplane::EchoClientResults::Done> done_log(n + 1);  // the warm-up's first
  results.done_log = done_log.data();
  results.done_capacity = n + 1;
  std::vector<std::unique_ptr<dataplane::EchoClientService>> services;
  std::string err;
  auto engine = control::Engine::create(ec, &err);
  if (!engine) {
    rep->error = "connect: " + err;
    return false;
  }
  eng = engine.get();
  results.wake = [](void* e) { static_cast<control::Engine*>(e)->wake(); };
  results.wake_arg = engine.get();
  results.wake_at = n + 1;  // the warm-up connection, then the measured ones
  std::vector<std::uint8_t> secret;
  if (!load_bench_secret(o, &secret, &err)) {
    rep->error = "connect: " + err;
    engine->begin_shutdown_st();
    engine->stop_cores_st();
    return false;
  }
  dataplane::EchoClientConfig sc;
  sc.principal = o.principal;
  sc.secret = secret;
  sc.max_conns = per_core + 2;
  sc.messages_per_conn = 1;
  sc.min_payload = sc.max_payload = static_cast<std::uint32_t>(kConnectEchoBytes);
  sc.window = 1;
  sc.opcode = static_cast<std::uint16_t>(protocol::ObjectOpcode::kEcho);
  std::vector<std::unique_ptr<control::CoreRunner>> runners;
  for (unsigned i = 0; i < cores; ++i) {
    services.push_back(std::make_unique<dataplane::EchoClientService>(sc, results));
    runners.push_back(dataplane::make_core_runner(engine->backend_kind(), engine->core(i), *services.back()));
  }
  if (!engine->launch_cores(std::move(runners), &err)) {
    rep->error = "connect: " + err;
    return false;
  }

  Row row;
  row.size = kConnectEchoBytes;
  auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(o.connect_timeout_s * 1000));
  // Warm-up: one connection through every step, verified and closed before the measurement. The first pass
  // through the setup path pays one-time costs (under qemu TCG the first connect call alone took 0.8 s of
  // the code's translation) that belong to no connection rate. The engine numbers it 1.
  {
    const std::uint64_t wid = engine->connect(o.server, o.port, &err, false, 0);
    if (wid != 1) {
      rep->error = wid == 0 ? "connect: " + err
                            : "connect: the engine numbered its first connection " + std::to_string(wid);
      engine->begin_shutdown_st();
      engine->stop_cores_st();
      return false;
    }
    // Its answer makes no rdma_cm event and no reply: look every millisecond, for this one connection only.
    while (results.connections_done.load(std::memory_order_acquire) < 1 && engine->connection_count() == 1 &&
           results.auth_failures.load(std::memory_order_relaxed) == 0 && Clock::now() < deadline &&
           !interrupted(o)) {
      engine->poll_st(1);
    }
    if (results.connections_done.load(std::memory_order_acquire) < 1) {
      rep->error = "connect: the warm-up connection to " + o.server + ":" + std::to_string(o.port) +
                   (results.auth_failures.load() != 0
                        ? " failed authentication (the gateway requires it)" + auth_hint(o)
                        : std::string(" did not answer its echo (is the gateway running?)"));
      engine->begin_shutdown_st();
      engine->stop_cores_st();
      return false;
    }
    engine->close_st(wid, dataplane::CloseReason::kShutdown);
    while (engine->connection_count() != 0 && Clock::now() < deadline) engine->poll_st(ms_until(deadline));
  }
  deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(o.connect_timeout_s * 1000));
  // Every connection is started at once, as cmtime starts each of its steps for all connections; the engine
  // then takes each through its steps as its events arrive. The engine numbers them 2, 3, ...: the hook
  // knows each before its connect returns.
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint64_t want = static_cast<std::uint64_t>(i) + 2;
    times[i].t[kCall] = rte_rdtsc();
    index.emplace(want, i);
    const std::uint64_t id = engine->connect(o.server, o.port, &err, false, static_cast<int>(i % cores));
    times[i].t[kCalled] = rte_rdtsc();
    if (id != want) {
      rep->error = id == 0 ? "connect: " + err
                           : "connect: the engine numbered connection " + std::to_string(want) + " as " +
                                 std::to_string(id);
      engine->begin_shutdown_st();
      engine->stop_cores_st();
      return false;
    }
  }
  const auto t_started = Clock::now();
  auto last_line = t_started;
  // Until every connection is verified or has failed (a refusal is counted, the others still measured).
  while (results.connections_done.load(std::memory_order_acquire) - 1 + failed < n) {
    if (Clock::now() >= deadline || interrupted(o)) break;
    if (results.auth_failures.load(std::memory_order_relaxed) != 0) break;  // reported below
    Clock::time_point next = deadline;
    if (o.progress) next = std::min(next, last_line + std::chrono::seconds(1));
    // After a refusal the last verified answer is not the (n + 1)th, which wakes: look every 10 ms instead.
    if (failed != 0) next = std::min(next, Clock::now() + std::chrono::milliseconds(10));
    // The service's last verified answer wakes this sleep (results.wake), as do rdma_cm events and replies.
    engine->poll_st(ms_until(next));
    if (o.progress && Clock::now() - last_line >= std::chrono::seconds(1)) {
      last_line = Clock::now();
      std::fprintf(stderr, "[connect] t=%5.1fs %zu connection(s) up, %" PRIu64 " verified of %u\n",
                   since(t_started), engine->owned_count(),
                   static_cast<std::uint64_t>(results.connections_done.load() - 1), n);
    }
  }
  const std::uint64_t verified = results.connections_done.load(std::memory_order_acquire) - 1;
  const std::size_t logged = std::min<std::size_t>(results.done_count.load(std::memory_order_acquire), n + 1);
  {
    std::unordered_map<std::uint32_t, std::uint32_t> by_qp;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (times[i].qp_num != 0) by_qp.emplace(times[i].qp_num, i);
    }
    for (std::size_t k = 1; k < logged; ++k) {  // 0: the warm-up's (its QP number may be reused)
      const std::uint64_t tsc = done_log[k].tsc.load(std::memory_order_acquire);
      if (tsc == 0) continue;  // still being written (a run that timed out)
      const auto it = by_qp.find(done_log[k].qp_num);
      if (it != by_qp.end()) times[it->second].t[kVerified] = tsc;
    }
  }

  // Teardown: every connection closed for good at once (the SIGTERM path without the quiesce: nothing is in
  // flight), timed to the last one destroyed.
  const std::uint64_t close_tsc = rte_rdtsc();
  for (ConnTimes& c : times) c.t[kCloseStart] = close_tsc;
  const auto tc = Clock::now();
  engine->begin_shutdown_st();
  // 30 s, or 60 ms a connection: 1,000 closes took 36.7 s under TCG on a loaded host.
  const auto close_deadline =
      tc + std::max<Clock::duration>(std::chrono::seconds(30), std::chrono::milliseconds(60) * n);
  while (!engine->drained_st() && Clock::now() < close_deadline) engine->poll_st(ms_until(close_deadline));
  const bool drained = engine->drained_st();
  rep->connect.teardown_s = since(tc);
  engine->stop_cores_st();

  ConnectResult& r = rep->connect;
  r.requested = n;
  r.verified = verified;
  std::uint64_t first = UINT64_MAX, last = 0;
  for (const ConnTimes& c : times) {
    if (c.t[kVerified] == 0) continue;
    first = std::min(first, c.t[kCall]);
    last = std::max(last, c.t[kVerified]);
  }
  if (last > first) r.setup_s = static_cast<double>(last - first) * us_per_tick / 1e6;
  r.steps = {
      step_between("create id", times, kCall, kCalled, us_per_tick, n),
      step_between("resolve addr", times, kCalled, kAddr, us_per_tick, n),
      step_between("resolve route", times, kAddr, kRoute, us_per_tick, n),
      step_between("connect", times, kRoute, kEstablished, us_per_tick, n),
      // With authentication the AUTH round trip comes first: it is part of what a connection costs.
      step_between(o.principal.empty() ? "first echo" : "auth + echo", times, kEstablished, kVerified,
                   us_per_tick, n),
      step_between("full connect", times, kCall, kVerified, us_per_tick, n),
      step_between("disconnect", times, kCloseStart, kClosed, us_per_tick, n),
  };

  row.ops = verified;
  row.bytes = verified * kConnectEchoBytes;
  row.seconds = r.setup_s;
  row.mismatches = results.mismatches.load();
  std::uint64_t send_failures = 0;
  for (const auto& sv : services) send_failures += sv->send_failures() + sv->unexpected();
  if (send_failures != 0) row.errors_by_status["send_failed"] = send_failures;
  if (failed != 0) row.errors_by_status["connect_failed"] = failed;
  if (verified + failed < n) row.errors_by_status["not_verified_in_time"] = n - verified - failed;
  if (!drained) row.errors_by_status["close_timed_out"] = engine->connection_count();
  if (const std::uint64_t f = results.auth_failures.load(); f != 0) row.errors_by_status["auth_failed"] = f;
  for (const auto& [k, v] : row.errors_by_status) row.errors += v;
  row.interrupted = interrupted(o);
  rep->rows.push_back(row);
  return true;
}

}  // namespace

// ==== put / get / mixed: the client library
// ==================================================================

// Every client::Status has its own row (kQuotaExceeded is the last): a status folded into another would name
// the wrong cause in the report.
constexpr std::size_t kStatusCount = static_cast<std::size_t>(client::Status::kQuotaExceeded) + 1;
constexpr std::size_t kSubmitRefused = kStatusCount;  // a *_async call refused the request (slot parked)

// Counters of one lcore: written by that lcore only (relaxed load + store), read by the progress line.
struct alignas(64) Lane {
  std::atomic<std::uint64_t> ops{0}, gets{0}, puts{0}, bytes{0}, errors{0}, mismatches{0};
  std::atomic<std::uint64_t> wrong_size{0};  // the part of mismatches whose size was wrong (bytes otherwise)
  std::array<std::atomic<std::uint64_t>, kStatusCount + 1> by_status{};
  Histogram hist;  // measured interval only
};

inline void add(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// The driving thread sleeps until a slot needs it or its next deadline (a progress line, the end of a timed
// phase). A slot needs it when it parks (a refused submission the driver reissues) and when the last active
// slot goes inactive (the phase is over). notify() is a futex wake only while the driver sleeps and only on
// those transitions: the completions themselves never make a syscall.
class Attention {
 public:
  std::uint32_t seen() const noexcept { return seq_.load(std::memory_order_seq_cst); }
  void notify() noexcept {
    seq_.fetch_add(1, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) {
      syscall(SYS_futex, &seq_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }
  }
  // Sleeps until a notify() after `seen` was read, `until`, or a signal.
  void wait(std::uint32_t seen, Clock::time_point until) noexcept {
    const auto left = until - Clock::now();
    if (left <= Clock::duration::zero()) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    sleeping_.store(true, std::memory_order_seq_cst);
    if (seq_.load(std::memory_order_seq_cst) == seen) {
      syscall(SYS_futex, &seq_, FUTEX_WAIT_PRIVATE, seen, until == Clock::time_point::max() ? nullptr : &ts,
              nullptr, 0);
    }
    sleeping_.store(false, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint32_t> seq_{0};
  std::atomic<bool> sleeping_{false};
};

// prefill: PUT every key once; run: the mode's load; cleanup: DELETE every key a PUT was sent for, so that
// the next size (or the next run) starts from an empty key space instead of filling the store with the old
// size's values. Only those: over RADOS a DELETE of a key never written still costs an OSD op, and a 10 s PUT
// run writes a fraction of its key space.
enum class Phase : int { kPrefill = 0, kRun = 1, kCleanup = 2 };
// Tries of one key's cleanup DELETE before the bench gives up on it (each failure is still an error).
constexpr std::uint32_t kCleanupTries = 8;
using protocol::ObjectOp;

struct KvRun;

struct Slot {
  KvRun* run = nullptr;
  std::byte* buf = nullptr;
  std::uint64_t rng = 0;
  std::uint64_t key = 0;
  std::uint64_t t0 = 0;
  std::uint32_t gen = 0;
  std::uint32_t cleanup_tries = 0;  // failed cleanup DELETEs of the current key, reissued (kCleanupTries)
  ObjectOp op = ObjectOp::kPut;
  std::atomic<bool> parked{false};
  bool retry = false;  // the last submit was refused: the next issue repeats the same op on the same key
  char key_str[kKeyLength];
};

struct KvRun {
  const Options* o = nullptr;
  client::Client* cl = nullptr;
  bool caller = false;  // kCaller: the driving thread runs the client (rest)
  std::uint64_t size = 0;
  std::uint64_t keys = 0;
  std::uint64_t get_threshold = 0;  // mixed: rng < threshold -> GET
  Phase phase = Phase::kPrefill;    // set before the slots start, constant while they run
  std::atomic<bool> stop{false};
  std::atomic<bool> record{false};
  std::atomic<bool> budgeted{false};
  std::atomic<std::int64_t> budget{0};
  std::atomic<std::uint64_t> prefill_next{0};
  // Per key: a PUT was sent for it (whatever its outcome: a lost answer may still have stored it). Set while
  // the slots run, read by the cleanup after the drain, which orders the two.
  std::unique_ptr<std::atomic<std::uint8_t>[]> written;
  std::atomic<std::int64_t> active{0};  // slots with a request in flight or parked
  std::atomic<std::uint64_t> parked{0};
  Attention attention;
  std::array<Lane*, RTE_MAX_LCORE> lane_of{};
  Lane* other = nullptr;  // completions on non-EAL threads (the client's teardown)

  Lane& lane() noexcept {
    const unsigned id = rte_lcore_id();
    return id < RTE_MAX_LCORE && lane_of[id] != nullptr ? *lane_of[id] : *other;
  }
};

void on_done(void* arg, const client::Result& r);

// A slot has nothing more to do; the last one tells the driver.
inline void deactivate(KvRun& run) noexcept {
  if (run.active.fetch_sub(1, std::memory_order_acq_rel) == 1) run.attention.notify();
}

inline std::uint64_t next_rng(std::uint64_t& s) noexcept {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Issues the slot's next request. False when the slot has nothing more to do (it is then inactive).
bool issue_st(Slot& s) noexcept {
  KvRun& run = *s.run;
  if (run.stop.load(std::memory_order_relaxed)) {
    s.retry = false;  // the phase is over: its next phase starts the slot afresh
    return false;
  }
  const Options& o = *run.o;
  if (s.retry) {
    // Same key and op: a refused prefill PUT must still store its key (later GETs expect it), and a refused
    // request of a budgeted run was already counted against the budget.
    s.retry = false;
  } else if (run.phase != Phase::kRun) {
    std::uint64_t k;
    do {
      k = run.prefill_next.fetch_add(1, std::memory_order_relaxed);
      if (k >= run.keys) return false;
    } while (run.phase == Phase::kCleanup && run.written[k].load(std::memory_order_relaxed) == 0);
    s.key = k;
    s.op = run.phase == Phase::kPrefill ? ObjectOp::kPut : ObjectOp::kDelete;
    s.cleanup_tries = 0;
  } else {
    if (run.budgeted.load(std::memory_order_relaxed) &&
        run.budget.fetch_sub(1, std::memory_order_relaxed) <= 0) {
      return false;
    }
    const std::uint64_t x = next_rng(s.rng);
    s.key = (x >> 16) % run.keys;
    switch (o.mode) {
      case Mode::kGet:
        s.op = ObjectOp::kGet;
        break;
      case Mode::kMixed:
        s.op = (x & 0xffff) < run.get_threshold ? ObjectOp::kGet : ObjectOp::kPut;
        break;
      default:
        s.op = ObjectOp::kPut;
        break;
    }
  }
  format_key(s.key, s.key_str);
  const std::string_view key(s.key_str, kKeyLength);
  const std::size_t n = static_cast<std::size_t>(run.size);
  client::Status st;
  if (s.op == ObjectOp::kPut) {
    // Without --verify the buffer keeps the pattern it got at setup: the bytes then name some other key,
    // which only matters to a reader that verifies.
    if (o.verify) {
      s.gen = s.gen % 0xffffffu + 1;  // the seed's 24 generation bits are never 0
      fill_value(std::span<std::byte>(s.buf, n), make_seed(s.key, s.gen));
    }
    run.written[s.key].store(1, std::memory_order_relaxed);
    s.t0 = rte_rdtsc();
    st = run.cl->put_async(key, s.buf, n, on_done, &s);
  } else if (s.op == ObjectOp::kGet) {
    s.t0 = rte_rdtsc();
    st = run.cl->get_async(key, s.buf, n, on_done, &s);
  } else {
    st = run.cl->del_async(key, on_done, &s);
  }
  if (st != client::Status::kOk) {
    // Refusals come from the driving and starting threads too (the one lane for non-EAL threads): an atomic
    // add, rare enough to cost nothing.
    run.lane().by_status[kSubmitRefused].fetch_add(1, std::memory_order_relaxed);
    // Parked: the driving thread reissues it shortly (a busy ring or a connection not up yet).
    s.retry = true;
    s.parked.store(true, std::memory_order_release);
    if (run.parked.fetch_add(1, std::memory_order_relaxed) == 0) run.attention.notify();
  }
  return true;
}

void on_done(void* arg, const client::Result& r) {
  Slot& s = *static_cast<Slot*>(arg);
  KvRun& run = *s.run;
  const std::uint64_t now = rte_rdtsc();
  Lane& l = run.lane();
  if (s.op == ObjectOp::kDelete) {
    if (r.status != client::Status::kOk && r.status != client::Status::kNotFound) {
      add(l.errors);
      const auto i = static_cast<std::size_t>(r.status);
      add(l.by_status[i < kStatusCount ? i : kStatusCount - 1]);
      // A cleanup DELETE that failed (its request or answer lost, its connection gone) is reissued a few
      // times: a key this size leaves behind would be read by the next size's GETs as a value of the wrong
      // size, a mismatch the gateway never made.
      if (run.phase == Phase::kCleanup && s.cleanup_tries++ < kCleanupTries) s.retry = true;
    }
  } else if (r.status == client::Status::kOk) {
    bool good = true;
    bool size_ok = true;
    if (s.op == ObjectOp::kGet) {
      good = size_ok = r.size == run.size;
      if (good && run.o->verify) {
        good = check_value(std::span<const std::byte>(s.buf, static_cast<std::size_t>(r.size)), s.key);
      }
      add(l.gets);
    } else {
      good = size_ok = r.size == run.size;  // bytes stored
      add(l.puts);
    }
    if (good) {
      add(l.ops);
      add(l.bytes, s.op == ObjectOp::kGet ? r.size : run.size);
      if (run.record.load(std::memory_order_relaxed)) l.hist.record(now - s.t0);
    } else {
      add(l.mismatches);
      if (!size_ok) add(l.wrong_size);
    }
  } else {
    add(l.errors);
    const auto i = static_cast<std::size_t>(r.status);
    add(l.by_status[i < kStatusCount ? i : kStatusCount - 1]);
  }
  if (r.status == client::Status::kShutdown || !issue_st(s)) {
    deactivate(run);
  }
}

struct Snapshot {
  std::uint64_t ops = 0, gets = 0, puts = 0, bytes = 0, errors = 0, mismatches = 0, wrong_size = 0;
};

Snapshot snapshot(const std::vector<std::unique_ptr<Lane>>& lanes) {
  Snapshot s;
  for (const auto& l : lanes) {
    s.ops += l->ops.load(std::memory_order_relaxed);
    s.gets += l->gets.load(std::memory_order_relaxed);
    s.puts += l->puts.load(std::memory_order_relaxed);
    s.bytes += l->bytes.load(std::memory_order_relaxed);
    s.errors += l->errors.load(std::memory_order_relaxed);
    s.mismatches += l->mismatches.load(std::memory_order_relaxed);
    s.wrong_size += l->wrong_size.load(std::memory_order_relaxed);
  }
  return s;
}

// Waits until `until` or until a slot needs the driver (Attention) while the slots run. kCaller: the caller's
// thread is the client's core, so it polls (the callbacks run here) instead of sleeping.
void rest(KvRun& run, std::uint32_t seen, Clock::time_point until) {
  if (!run.caller) {
    run.attention.wait(seen, until);
    return;
  }
  do {
    run.cl->progress();
  } while (run.attention.seen() == seen && Clock::now() < until);
}

// Starts every slot from `threads` fresh threads: the client binds a thread to a core (round robin) at its
// first submission, so each thread's slots land on a different core and stay there (callbacks reissue on
// their own core). kCaller: on this thread, the one that progresses the client.
void start_slots(KvRun& run, std::vector<Slot>& slots, unsigned threads) {
  run.active.store(static_cast<std::int64_t>(slots.size()), std::memory_order_release);
  if (run.caller) {
    for (Slot& s : slots) {
      if (!issue_st(s)) deactivate(run);
    }
    return;
  }
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (std::size_t i = t; i < slots.size(); i += threads) {
        if (!issue_st(slots[i])) deactivate(run);
      }
    });
  }
  for (auto& th : ts) th.join();
}

// Reissues parked slots (on this thread). Called whenever the driver wakes while slots run.
void unpark(KvRun& run, std::vector<Slot>& slots) {
  if (run.parked.load(std::memory_order_relaxed) == 0) return;
  for (Slot& s : slots) {
    if (!s.parked.load(std::memory_order_acquire)) continue;
    s.parked.store(false, std::memory_order_relaxed);
    run.parked.fetch_sub(1, std::memory_order_relaxed);
    if (!issue_st(s)) deactivate(run);
  }
}

// How long the driver may sleep: `until`, or 1 ms while a slot is parked (refused again right after the
// driver reissued it, or parked before `seen` was read, whose notify the driver has already consumed): the
// refusals are a busy ring or a connection not up yet, which clear by themselves.
Clock::time_point retry_by(const KvRun& run, Clock::time_point until) {
  if (run.parked.load(std::memory_order_relaxed) == 0) return until;
  return std::min(until, Clock::now() + std::chrono::milliseconds(1));
}

// Stops the slots and waits until none is active. False on timeout.
bool drain(KvRun& run, std::vector<Slot>& slots, std::chrono::seconds timeout) {
  run.stop.store(true, std::memory_order_release);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    unpark(run, slots);  // a parked slot sees `stop` and goes inactive
    const std::uint32_t seen = run.attention.seen();
    if (run.active.load(std::memory_order_acquire) <= 0) return true;
    if (Clock::now() >= deadline) return false;
    rest(run, seen, retry_by(run, deadline));
  }
}

// Drives the running slots until done() says the phase is over (`end`: when a timed phase ends, max()
// otherwise); one progress line per second. Between looks it sleeps (rest): the slots' transitions that
// matter wake it, so it never wakes on a period of its own besides the progress line.
template <typename Done>
void drive(KvRun& run, std::vector<Slot>& slots, const std::vector<std::unique_ptr<Lane>>& lanes,
           const char* phase, Clock::time_point end, Done done) {
  const Options& o = *run.o;
  const auto t0 = Clock::now();
  auto last = t0;
  Snapshot prev = snapshot(lanes);
  for (;;) {
    unpark(run, slots);
    const std::uint32_t seen = run.attention.seen();
    if (done() || interrupted(o)) return;
    rest(run, seen, retry_by(run, o.progress ? std::min(end, last + std::chrono::seconds(1)) : end));
    const auto now = Clock::now();
    if (o.progress && now - last >= std::chrono::seconds(1)) {
      const Snapshot cur = snapshot(lanes);
      const double dt = std::chrono::duration<double>(now - last).count();
      progress_line(o, phase, run.size, std::chrono::duration<double>(now - t0).count(),
                    static_cast<double>(cur.ops - prev.ops) / dt,
                    static_cast<double>(cur.bytes - prev.bytes) / dt / 1048576.0, cur.errors + cur.mismatches,
                    run.active.load(std::memory_order_relaxed));
      prev = cur;
      last = now;
    }
  }
}

bool run_kv(const Options& o, Report* rep) {
  client::ClientConfig cc;
  cc.gateways.push_back(client::Endpoint{o.server, o.port});
  cc.device = o.device;
  cc.principal = o.principal;
  cc.secrets_file = o.secrets_file;
  cc.memory_windows = o.memory_windows;
  // The bench is a high-rate client: pinned polling lcores on its own EAL unless --progress says otherwise
  // (the library's own default is kCaller).
  switch (o.client_progress) {
    case ClientProgress::kEalLcores:
      cc.progress = client::Progress::kEalLcores;
      cc.lcores = o.lcores;
      cc.cores = static_cast<unsigned>(o.lcores.size());
      break;
    case ClientProgress::kThread:
      cc.progress = client::Progress::kThread;
      cc.cores = 1;
      break;
    case ClientProgress::kCaller:
      cc.progress = client::Progress::kCaller;
      cc.cores = 1;
      break;
  }
  cc.yield_when_idle = o.idle == BenchIdle::kYield;
  cc.connections_per_gateway = o.connections;
  cc.max_inflight_per_conn = o.qd;
  cc.queue_depth = static_cast<std::uint16_t>(std::clamp<std::uint32_t>(2 * o.qd, 16, 1024));
  cc.max_message = o.max_message;
  cc.pool_bytes = 0;  // the bench's buffers are its own (registered on first use)
  cc.connect_timeout = std::chrono::milliseconds(static_cast<long>(o.connect_timeout_s * 1000));
  std::string err;
  auto cl = client::Client::create(cc, &err);
  if (!cl) {
    rep->error = "client: " + err;
    return false;
  }
  if (!cl->wait_connected(cc.connect_timeout)) {
    if (std::string why = cl->auth_error(); !why.empty()) {
      rep->error = "client: " + why + auth_hint(o);
      return false;
    }
    rep->error = "client: no connection to " + o.server + ":" + std::to_string(o.port) + " within " +
                 std::to_string(o.connect_timeout_s) + " s (is the gateway running?)";
    return false;
  }
  const unsigned threads = cc.cores;
  const std::size_t nslots = std::size_t{o.connections} * o.qd;

  for (std::uint64_t size : o.sizes) {
    Row row;
    row.size = size;
    auto run = std::make_unique<KvRun>();
    run->o = &o;
    run->cl = cl.get();
    run->caller = o.client_progress == ClientProgress::kCaller;
    run->size = size;
    run->keys = o.keys != 0 ? o.keys : auto_keys(size);
    row.keys = run->keys;
    run->written = std::make_unique<std::atomic<std::uint8_t>[]>(run->keys);
    run->get_threshold = static_cast<std::uint64_t>(o.ratio * 65536.0);
    std::vector<std::unique_ptr<Lane>> lanes;
    unsigned lc;
    RTE_LCORE_FOREACH(lc) {
      lanes.push_back(std::make_unique<Lane>());
      run->lane_of[lc] = lanes.back().get();
    }
    lanes.push_back(std::make_unique<Lane>());
    run->other = lanes.back().get();

    // Buffers: one page-aligned block, a cache-line-rounded stride per slot.
    const std::size_t stride = (static_cast<std::size_t>(size) + 63) / 64 * 64;
    const std::size_t block = (stride * nslots + 4095) / 4096 * 4096;
    std::unique_ptr<std::byte, decltype(&std::free)> mem(
        static_cast<std::byte*>(std::aligned_alloc(4096, block)), &std::free);
    if (!mem) {
      rep->error = "cannot allocate " + std::to_string(block) + " B of buffers";
      return false;
    }
    std::vector<Slot> slots(nslots);
    for (std::size_t i = 0; i < nslots; ++i) {
      Slot& s = slots[i];
      s.run = run.get();
      s.buf = mem.get() + i * stride;
      s.rng = splitmix(i * 7919 + size) | 1;
      fill_value(std::span<std::byte>(s.buf, static_cast<std::size_t>(size)), make_seed(i, 1));
    }
    auto release = [&] {
      for (std::size_t off = 0; off < block; off += 4096) cl->release_buffer(mem.get() + off);
    };

    // Every key exists before the first GET, with this size's value.
    if (o.mode != Mode::kPut) {
      run->phase = Phase::kPrefill;
      start_slots(*run, slots, threads);
      const auto t0 = Clock::now();
      drive(*run, slots, lanes, "prefill", Clock::time_point::max(),
            [&] { return run->active.load(std::memory_order_acquire) <= 0; });
      if (!drain(*run, slots, std::chrono::seconds(30))) {
        rep->error = "prefill did not finish";
        release();
        return false;
      }
      if (o.progress) {
        std::fprintf(stderr, "[%s %s] prefill: %" PRIu64 " keys in %.2f s\n", mode_name(o.mode),
                     human_size(size).c_str(), run->keys, since(t0));
      }
      run->stop.store(false, std::memory_order_release);
    }

    run->phase = Phase::kRun;
    start_slots(*run, slots, threads);
    if (o.warmup_s > 0) {
      const auto tw = Clock::now();
      const auto tw_end =
          tw + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup_s));
      drive(*run, slots, lanes, "warmup", tw_end, [&] { return Clock::now() >= tw_end; });
    }
    // The measured interval: counters from here, latencies recorded from here.
    const Snapshot s0 = snapshot(lanes);
    if (o.iterations != 0) {
      run->budget.store(static_cast<std::int64_t>(o.iterations), std::memory_order_relaxed);
      run->budgeted.store(true, std::memory_order_release);
    }
    run->record.store(true, std::memory_order_release);
    const auto t0 = Clock::now();
    if (o.iterations != 0) {
      drive(*run, slots, lanes, "measure", Clock::time_point::max(),
            [&] { return run->active.load(std::memory_order_acquire) <= 0; });
    } else {
      const auto t_end =
          t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
      drive(*run, slots, lanes, "measure", t_end, [&] { return Clock::now() >= t_end; });
    }
    const Snapshot s1 = snapshot(lanes);
    row.seconds = since(t0);
    run->record.store(false, std::memory_order_release);
    row.interrupted = interrupted(o);
    bool drained = drain(*run, slots, std::chrono::seconds(30));
    if (drained) {
      run->phase = Phase::kCleanup;
      run->prefill_next.store(0, std::memory_order_relaxed);
      run->budgeted.store(false, std::memory_order_relaxed);
      run->stop.store(false, std::memory_order_release);
      start_slots(*run, slots, threads);
      drive(*run, slots, lanes, "cleanup", Clock::time_point::max(),
            [&] { return run->active.load(std::memory_order_acquire) <= 0; });
      drained = drain(*run, slots, std::chrono::seconds(30));
    }
    const Snapshot s2 = snapshot(lanes);
    release();
    row.ops = s1.ops - s0.ops;
    row.gets = s1.gets - s0.gets;
    row.puts = s1.puts - s0.puts;
    row.bytes = s1.bytes - s0.bytes;
    // Errors and mismatches of the whole size (prefill, warm-up and drain too): none may go unreported.
    row.errors = s2.errors;
    row.mismatches = s2.mismatches;
    row.wrong_size = s2.wrong_size;
    Histogram h;
    for (const auto& l : lanes) {
      h.merge(l->hist);
      for (std::size_t i = 0; i < kStatusCount; ++i) {
        const std::uint64_t n = l->by_status[i].load();
        if (n != 0) row.errors_by_status[client::status_name(static_cast<client::Status>(i))] += n;
      }
      const std::uint64_t refused = l->by_status[kSubmitRefused].load();
      if (refused != 0) row.errors_by_status["submit_refused (retried)"] += refused;
    }
    if (!drained) {
      row.errors_by_status["never_completed"] +=
          static_cast<std::uint64_t>(std::max<std::int64_t>(0, run->active.load()));
      row.errors += static_cast<std::uint64_t>(std::max<std::int64_t>(0, run->active.load()));
    }
    if (h.count() != 0) row.latency = latency_of(h, 1e6 / static_cast<double>(rte_get_tsc_hz()));
    rep->rows.push_back(row);
    if (!drained) {
      // Requests still out name these buffers: keep them alive (leak) rather than let a late answer write
      // into freed memory.
      (void)mem.release();
      rep->error = "requests did not complete within 30 s of the stop";
      return false;
    }
    if (row.interrupted) break;
  }
  return true;
}

}  // namespace

bool run(const Options& o, Report* report) {
  report->options = o;
  report->rows.clear();
  report->error.clear();
  const std::string bad = validate(o);
  if (!bad.empty()) {
    report->error = bad;
    return false;
  }
  if (o.mode == Mode::kConnect) return run_connect(o, report);
  return uses_client(o.mode) ? run_kv(o, report) : run_echo(o, report);
}

}  // namespace rdmagate::bench

#!/usr/bin/env python3
"""Writes rdmagate-dashboard.json (Grafana, schemaVersion 38) from the panel list below.

Edit this file, not the JSON: `python3 deploy/grafana/generate-dashboard.py` rewrites the JSON, and
tests/deploy/check-deploy.sh fails when the two disagree (`--check`) or when a query names a metric that
docs/metrics.md does not document.
"""
import json
import sys
from pathlib import Path

OUT = Path(__file__).with_name("rdmagate-dashboard.json")
DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
# A gateway is identified by node and pod in Kubernetes (the ServiceMonitor relabels the pod's node name to
# `node`; a pod IP, which is what `instance` holds there, changes on every restart), and by job and instance
# where Prometheus scrapes hosts directly (no node or pod label). Every selector names all four: a variable
# left at All is `.*`, which also matches a series without that label, so the same query serves both.
SEL = 'job=~"$job", node=~"$node", pod=~"$pod", instance=~"$instance"'
CORE = SEL + ', core=~"$core"'
# Per-gateway series keep all three identity labels, and their legends show them (empty ones print nothing).
GW = "node, pod, instance"
GWL = "{{node}} {{pod}} {{node}} {{pod}} {{instance}}"
# Panels that mean something only with store.backend: rados (with the memory backend their series exist,
# as zeros or NaN ratios): titles and descriptions start with these, for readers and for tests.
RADOS_TITLE = "RADOS: "
RADOS_DESCRIPTION = "store.backend: rados only. "
# The standard process_* series carry no rdmagate_ prefix: keep those of the selected gateways only.
OF_GATEWAY = f"and on (job, instance) rdmagate_build_info{{{SEL}}}"
RI = "$__rate_interval"


class Layout:
    """Places panels left to right in rows of 24 grid units."""

    def __init__(self):
        self.panels = []
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.next_id = 1

    def _id(self):
        self.next_id += 1
        return self.next_id - 1

    def row(self, title):
        self._newline()
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False,
                            "panels": [], "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}})
        self.y += 1

    def _newline(self):
        if self.x:
            self.y += self.row_h
            self.x = 0
            self.row_h = 0

    def add(self, panel, w, h):
        if self.x + w > 24:
            self._newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)


def targets(queries):
    out = []
    for i, (expr, legend) in enumerate(queries):
        out.append({"datasource": DS, "refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend,
                    "range": True, "editorMode": "code"})
    return out


def timeseries(title, description, queries, unit="short", stack=False, min0=True):
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10 if not stack else 40,
              "showPoints": "never", "spanNulls": False,
              "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
    defaults = {"unit": unit, "custom": custom, "color": {"mode": "palette-classic"}}
    if min0:
        defaults["min"] = 0
    return {"type": "timeseries", "title": title, "description": description, "datasource": DS,
            "targets": targets(queries),
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                                   "calcs": ["mean", "max", "lastNotNull"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}}


def stat(title, description, expr, legend="", unit="short", thresholds=None, mappings=None,
         instant=True):
    steps = thresholds or [{"color": "green", "value": None}]
    t = targets([(expr, legend)])
    if instant:
        t[0]["instant"] = True
        t[0]["range"] = False
    return {"type": "stat", "title": title, "description": description, "datasource": DS, "targets": t,
            "fieldConfig": {"defaults": {"unit": unit, "mappings": mappings or [],
                                         "thresholds": {"mode": "absolute", "steps": steps},
                                         "color": {"mode": "thresholds"}},
                            "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "background", "graphMode": "none", "justifyMode": "auto",
                        "orientation": "auto", "textMode": "auto"}}


def build():
    L = Layout()

    L.row("Health")
    red_green = [{"color": "red", "value": None}, {"color": "green", "value": 1}]
    L.add(stat("Scrape target up",
               "Prometheus's own `up` series for each gateway: 0 when /metrics did not answer.",
               f"up{{{SEL}}}", GWL, thresholds=red_green,
               mappings=[{"type": "value", "options": {"0": {"text": "DOWN"}, "1": {"text": "UP"}}}]),
          4, 4)
    L.add(stat("Ready", "rdmagate_ready: 1 when /readyz answers 200 (listeners up, device port active, storage "
               "backend ready, every data-plane core polling), evaluated at each scrape.",
               f"min by ({GW}) (rdmagate_ready{{{SEL}}})", GWL, thresholds=red_green,
               mappings=[{"type": "value", "options": {"0": {"text": "NOT READY"}, "1": {"text": "READY"}}}]),
          4, 4)
    L.add(stat("Device port", "rdmagate_port_active and rdmagate_port_info: the configured port's state "
               "(ibv_query_port every 500 ms) and link layer, with the data-plane backend. Join with "
               "node_exporter's node_infiniband_*{device, port} on the same node.",
               f"max by ({GW}, device, port, state, link_layer, backend) (rdmagate_port_info{{{SEL}}}) "
               f"* on ({GW}, device, port) group_left max by ({GW}, device, port) "
               f"(rdmagate_port_active{{{SEL}}})",
               "{{device}}/{{port}} {{state}} {{link_layer}} {{backend}} " + GWL, thresholds=red_green,
               mappings=[{"type": "value", "options": {"0": {"text": "NOT ACTIVE"}, "1": {"text": "ACTIVE"}}}]),
          4, 4)
    L.add(stat("Last config reload", "rdmagate_config_last_reload_successful: 0 when the last SIGHUP reload was "
               "rejected (the gateway still runs the previous configuration); 1 after the start and after a "
               "good reload.",
               f"min by ({GW}) (rdmagate_config_last_reload_successful{{{SEL}}})", GWL, thresholds=red_green,
               mappings=[{"type": "value", "options": {"0": {"text": "FAILED"}, "1": {"text": "OK"}}}]),
          4, 4)
    L.add(stat("Config loaded", "Time since the last successful configuration load, the start included "
               "(rdmagate_config_last_reload_success_timestamp_seconds).",
               f"time() - max by ({GW}) (rdmagate_config_last_reload_success_timestamp_seconds{{{SEL}}})", GWL,
               unit="s"), 4, 4)
    L.add(stat("Hugepages", "rdmagate_hugepages_fallback: 1 when eal.hugepages: auto found no usable hugepages "
               "and EAL runs on 4 KiB pages (--no-huge).",
               f"max by ({GW}) (rdmagate_hugepages_fallback{{{SEL}}})", GWL,
               thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}],
               mappings=[{"type": "value", "options": {"0": {"text": "HUGEPAGES"},
                                                       "1": {"text": "4 KiB FALLBACK"}}}]),
          4, 4)
    L.add(stat("Device backend", "rdmagate_dataplane_backend_info: the device backend the data-plane cores run "
               "(mlx5dv on mlx5 NICs with dataplane.backend auto, verbs otherwise), with how many gateways run "
               "each.",
               f"count by (backend, configured) (rdmagate_dataplane_backend_info{{{SEL}}})",
               "{{backend}} ({{configured}})"), 4, 4)
    L.add(stat("Version", "rdmagate_build_info: the daemon version and source commit the gateways run, "
               "with how many gateways run each.",
               f"count by (version, commit) (rdmagate_build_info{{{SEL}}})", "{{version}} {{commit}}"), 4, 4)
    L.add(stat("Requests/s", "Store operations per second, all gateways selected.",
               f"sum(rate(rdmagate_store_operations_total{{{SEL}}}[{RI}]))", unit="ops",
               instant=False), 4, 4)
    L.add(stat("Established connections", "Connections in state established, all selected gateways.",
               f'sum(rdmagate_connections{{{SEL}, state="established"}})'), 4, 4)
    L.add(stat("Protocol violations (range)",
               "Connections failed for a peer's protocol violation in the selected time range.",
               f"sum(increase(rdmagate_protocol_violations_total{{{SEL}}}[$__range]))",
               thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}]), 4, 4)
    L.add(stat("Uptime", "Time since the process started (process_start_time_seconds); a restart resets it.",
               f"time() - max by ({GW}) (process_start_time_seconds {OF_GATEWAY})", GWL, unit="s"), 4, 4)

    L.row("Requests")
    L.add(timeseries("Operations/s by op and status",
                     "Store operations by op (get, put, delete) and status (ok, not_found, no_space, error).",
                     [(f"sum by (op, status) (rate(rdmagate_store_operations_total{{{SEL}}}[{RI}]))",
                       "{{op}} {{status}}")], unit="ops"), 12, 8)
    L.add(timeseries("Failed operations/s",
                     "Operations that failed, by op and status: every status but ok and not_found (a GET or "
                     "DELETE of a missing key is an answer, not a failure).",
                     [(f'sum by (op, status) (rate(rdmagate_store_operations_total{{{SEL}, status!~"ok|not_found"}}[{RI}]))',
                       "{{op}} {{status}}")], unit="ops"), 12, 8)
    lat = []
    for q, name in ((0.5, "p50"), (0.99, "p99"), (0.999, "p99.9")):
        lat.append((f"histogram_quantile({q}, sum by (op, le) "
                    f"(rate(rdmagate_request_duration_seconds_bucket{{{SEL}}}[{RI}])))",
                    f"{name} {{{{op}}}}"))
    L.add(timeseries("Request latency p50 / p99 / p99.9 by op",
                     "From receiving a request to sending its response. Buckets are powers of two from "
                     "1.024 us, so a quantile is accurate to within a factor of two.",
                     lat, unit="s"), 12, 8)
    L.add(timeseries("Mean request latency by op", "rate(_sum) / rate(_count) of the latency histogram.",
                     [(f"sum by (op) (rate(rdmagate_request_duration_seconds_sum{{{SEL}}}[{RI}])) / "
                       f"sum by (op) (rate(rdmagate_request_duration_seconds_count{{{SEL}}}[{RI}]))",
                       "{{op}}")], unit="s"), 12, 8)

    L.row("Process and memory")
    L.add(timeseries("CPU used", "process_cpu_seconds_total per second, in CPUs: each busy-polling data-plane "
                     "core takes a whole one, plus the control and HTTP threads.",
                     [(f"sum by ({GW}) (rate(process_cpu_seconds_total[{RI}]) {OF_GATEWAY})", GWL)]), 6, 8)
    L.add(timeseries("Resident memory", "process_resident_memory_bytes (hugepages count once touched) and "
                     "process_virtual_memory_bytes.",
                     [(f"sum by ({GW}) (process_resident_memory_bytes {OF_GATEWAY})", "RSS " + GWL),
                      (f"sum by ({GW}) (process_virtual_memory_bytes {OF_GATEWAY})", "virtual " + GWL)],
                     unit="bytes"), 6, 8)
    L.add(timeseries("Registered and pinned memory",
                     "rdmagate_memory_registered_bytes: registered with the NIC at start (store arena, per-core "
                     "buffers). rdmagate_memory_pinned_bytes: what the kernel holds pinned for the process "
                     "(VmPin), charged against RLIMIT_MEMLOCK. Registration failures stop the start, so they "
                     "show as restarts.",
                     [(f"sum by ({GW}) (rdmagate_memory_registered_bytes{{{SEL}}})", "registered " + GWL),
                      (f"sum by ({GW}) (rdmagate_memory_pinned_bytes{{{SEL}}})", "pinned " + GWL)],
                     unit="bytes"), 6, 8)
    L.add(timeseries("Open fds used", "process_open_fds / process_max_fds (the soft RLIMIT_NOFILE).",
                     [(f"sum by ({GW}) (process_open_fds {OF_GATEWAY}) / "
                       f"sum by ({GW}) (process_max_fds {OF_GATEWAY})", "fds used " + GWL)],
                     unit="percentunit"), 6, 8)

    L.row("Transport")
    L.add(timeseries("Messages/s by type and direction", "Protocol messages, header included.",
                     [(f"sum by (type, direction) (rate(rdmagate_transport_messages_total{{{SEL}}}[{RI}]))",
                       "{{direction}} {{type}}")], unit="short"), 12, 8)
    L.add(timeseries("Message bytes/s by type and direction", "Protocol message bytes, header included.",
                     [(f"sum by (type, direction) (rate(rdmagate_transport_message_bytes_total{{{SEL}}}[{RI}]))",
                       "{{direction}} {{type}}")], unit="Bps"), 12, 8)
    L.add(timeseries("Payloads: inline vs chunked",
                     "Payloads sent inline in the message vs moved by RDMA READ/WRITE chunks.",
                     [(f"sum by (mode) (rate(rdmagate_transport_payloads_total{{{SEL}}}[{RI}]))", "{{mode}}")],
                     stack=True), 8, 8)
    L.add(timeseries("RDMA chunk bandwidth",
                     "Bytes pulled by RDMA READ and pushed by RDMA WRITE chunks.",
                     [(f"sum(rate(rdmagate_transport_read_chunk_bytes_total{{{SEL}}}[{RI}]))", "READ"),
                      (f"sum(rate(rdmagate_transport_write_chunk_bytes_total{{{SEL}}}[{RI}]))", "WRITE")],
                     unit="Bps"), 8, 8)
    L.add(timeseries("RDMA chunks/s", "RDMA READ and WRITE chunks.",
                     [(f"sum(rate(rdmagate_transport_read_chunks_total{{{SEL}}}[{RI}]))", "READ"),
                      (f"sum(rate(rdmagate_transport_write_chunks_total{{{SEL}}}[{RI}]))", "WRITE")]), 8, 8)
    L.add(timeseries("Credit stalls/s",
                     "Messages that waited because the peer had granted no credit: a queue depth too small "
                     "for the load, or a slow peer.",
                     [(f"sum by ({GW}) (rate(rdmagate_transport_credit_stalls_total{{{SEL}}}[{RI}]))",
                       "{{node}} {{pod}} {{instance}}")]), 8, 8)
    L.add(timeseries("NOOPs and keepalives/s",
                     "NOOPs sent to return credits, and keepalive NOOPs on idle connections.",
                     [(f"sum(rate(rdmagate_transport_noops_total{{{SEL}}}[{RI}]))", "credit NOOPs"),
                      (f"sum(rate(rdmagate_transport_keepalives_total{{{SEL}}}[{RI}]))", "keepalives")]),
          8, 8)
    L.add(timeseries("Inline sends/s",
                     "Sends posted with IBV_SEND_INLINE (copied into the work request, no DMA read); "
                     "dataplane.send_inline_bytes sets the size limit.",
                     [(f"sum by ({GW}) (rate(rdmagate_transport_inline_posts_total{{{SEL}}}[{RI}]))",
                       "{{node}} {{pod}} {{instance}}")]), 8, 8)

    L.row("Connections")
    L.add(timeseries("Connections by state",
                     "handshake, established, draining, failed; cores filtered by $core.",
                     [(f"sum by (state) (rdmagate_connections{{{CORE}}})", "{{state}}")], stack=True), 12, 8)
    L.add(timeseries("Established connections by core",
                     "How evenly new connections are spread over the data-plane cores.",
                     [(f'sum by ({GW}, core) (rdmagate_connections{{{CORE}, state="established"}})',
                       "{{node}} {{pod}} {{instance}} core {{core}}")]), 12, 8)
    L.add(timeseries("Accepts and rejects/s",
                     "Connection requests accepted, and rejected by reason.",
                     [(f"sum(rate(rdmagate_connection_accepts_total{{{SEL}}}[{RI}]))", "accepted"),
                      (f"sum by (reason) (rate(rdmagate_connection_rejects_total{{{SEL}}}[{RI}]))",
                       "rejected {{reason}}")]), 8, 8)
    L.add(timeseries("Reconnects and close re-kicks/s",
                     "Connections re-established after a failure; closing QPs moved to ERR again because "
                     "their core had not drained them (steady re-kicks: connections slow to close).",
                     [(f"sum by ({GW}) (rate(rdmagate_connection_reconnects_total{{{SEL}}}[{RI}]))",
                       "reconnects {{node}} {{pod}} {{instance}}"),
                      (f"sum by ({GW}) (rate(rdmagate_connection_close_rekicks_total{{{SEL}}}[{RI}]))",
                       "close re-kicks {{node}} {{pod}} {{instance}}")]), 8, 8)
    L.add(timeseries("Protocol violations/s by code",
                     "Connections failed for a protocol violation by the peer. Any is a peer bug (or ours).",
                     [(f"sum by (code) (rate(rdmagate_protocol_violations_total{{{SEL}}}[{RI}]))",
                       "{{code}}")]), 8, 8)
    L.add(timeseries("Connection failures/s by cause",
                     "Connections a core reported FAILED: protocol_violation, dead_peer (no traffic within "
                     "protocol.dead_peer_timeout_ms), completion_error.",
                     [(f"sum by (cause) (rate(rdmagate_connection_failures_total{{{SEL}}}[{RI}]))",
                       "{{cause}}")]), 8, 8)
    L.add(timeseries("Unplaced connections",
                     "Active-side connections not yet placed on a core (idle, or resolving before their "
                     "first placement).",
                     [(f"sum by ({GW}) (rdmagate_connections_unplaced{{{SEL}}})", "{{node}} {{pod}} {{instance}}")]), 8, 8)
    L.add(timeseries("Async events/s",
                     "QP and device asynchronous events; port_err and device_fatal take the gateway out of "
                     "readiness.",
                     [(f"sum by (event) (rate(rdmagate_async_events_total{{{SEL}}}[{RI}]))", "{{event}}")]),
          8, 8)

    L.row("Data-plane cores")
    busy = f"rate(rdmagate_poller_busy_seconds_total{{{CORE}}}[{RI}])"
    idle = f"rate(rdmagate_poller_idle_seconds_total{{{CORE}}}[{RI}])"
    L.add(timeseries("Core busy ratio",
                     "Share of TSC time spent in loop iterations that did work. A busy-polling core is at "
                     "100% CPU either way; this says how much of it was useful.",
                     [(f"sum by ({GW}, core) ({busy}) / "
                       f"(sum by ({GW}, core) ({busy}) + sum by ({GW}, core) ({idle}))",
                       "{{node}} {{pod}} {{instance}} core {{core}}")], unit="percentunit"), 12, 8)
    L.add(timeseries("Polls/s by core", "Poll loop iterations per second of each data-plane core.",
                     [(f"sum by ({GW}, core) (rate(rdmagate_poller_polls_total{{{CORE}}}[{RI}]))",
                       "{{node}} {{pod}} {{instance}} core {{core}}")], unit="short"), 12, 8)
    L.add(timeseries("Idle poll ratio by core", "Idle polls / polls.",
                     [(f"sum by ({GW}, core) (rate(rdmagate_poller_idle_polls_total{{{CORE}}}[{RI}])) / "
                       f"sum by ({GW}, core) (rate(rdmagate_poller_polls_total{{{CORE}}}[{RI}]))",
                       "{{node}} {{pod}} {{instance}} core {{core}}")], unit="percentunit"), 12, 8)
    L.add(timeseries("Work completions/s by status",
                     "success, flushed (teardown) and error completions polled by the cores.",
                     [(f"sum by (status) (rate(rdmagate_poller_completions_total{{{CORE}}}[{RI}]))",
                       "{{status}}")]), 12, 8)
    L.add(timeseries("Core time by state",
                     "Share of each core's time by state (dataplane.idle_policy decides which occur): busy "
                     "(iterations with work), idle (empty polls), backoff (pause runs), yield (sched_yield), "
                     "sleep (asleep in epoll_wait: the CPU is free).",
                     [(f"sum by ({GW}, core, state) (rate(rdmagate_poller_state_seconds_total{{{CORE}}}[{RI}]))",
                       "{{node}} {{pod}} {{instance}} core {{core}} {{state}}")], unit="percentunit", stack=True),
          12, 8)
    L.add(timeseries("Sleeps, wakeups and yields/s",
                     "idle_policy event: sleeps, and wakeups by source (completion, command from the control "
                     "thread, the core's own deadline). idle_policy yield: sched_yield calls.",
                     [(f"sum by ({GW}, core) (rate(rdmagate_poller_sleeps_total{{{CORE}}}[{RI}]))",
                       "{{node}} {{pod}} {{instance}} core {{core}} sleeps"),
                      (f"sum by ({GW}, core, source) (rate(rdmagate_poller_wakeups_total{{{CORE}}}[{RI}]))",
                       "{{node}} {{pod}} {{instance}} core {{core}} woken by {{source}}"),
                      (f"sum by ({GW}, core) (rate(rdmagate_poller_yields_total{{{CORE}}}[{RI}]))",
                       "{{node}} {{pod}} {{instance}} core {{core}} yields")]), 12, 8)
    L.add(timeseries("Core errors/s by kind",
                     "Errors counted by the data-plane cores. wire and credit are peer violations; post_send, "
                     "post_recv, tx_exhausted, encode and unexpected point at the engine or its sizing; "
                     "dead_peer is a silent peer.",
                     [(f"sum by (kind) (rate(rdmagate_core_errors_total{{{SEL}}}[{RI}]))", "{{kind}}")]),
          24, 7)

    L.row("Store")
    L.add(timeseries("Objects", "Objects held by the store.",
                     [(f"sum by ({GW}) (rdmagate_store_objects{{{SEL}}})", "{{node}} {{pod}} {{instance}}")]), 8, 8)
    L.add(timeseries("Bytes held vs capacity",
                     "Object data held; capacity charged (size classes, metadata, values reserved or still "
                     "pinned); and what the store can hold.",
                     [(f"sum by ({GW}) (rdmagate_store_bytes{{{SEL}}})", "{{node}} {{pod}} {{instance}} held"),
                      (f"sum by ({GW}) (rdmagate_store_allocated_bytes{{{SEL}}})", "{{node}} {{pod}} {{instance}} allocated"),
                      (f"sum by ({GW}) (rdmagate_store_capacity_bytes{{{SEL}}})", "{{node}} {{pod}} {{instance}} capacity")],
                     unit="bytes"), 8, 8)
    L.add(timeseries("Capacity used",
                     "Allocated bytes / capacity: how full the store is, size-class overhead included. Near "
                     "100% the memory backend answers PUTs no_space (it evicts nothing); the RADOS backend's "
                     "cache evicts instead.",
                     [(f"sum by ({GW}) (rdmagate_store_allocated_bytes{{{SEL}}}) / "
                       f"sum by ({GW}) (rdmagate_store_capacity_bytes{{{SEL}}})", "{{node}} {{pod}} {{instance}}")],
                     unit="percentunit"), 8, 8)

    # Every panel of this row is titled "RADOS: ..." and its description starts with "store.backend: rados
    # only.": with the memory backend its series exist (zeros, NaN ratios) but mean nothing.
    L.row("RADOS backend (store.backend: rados)")
    rados_first = len(L.panels)
    L.add(stat("RADOS ready", "rdmagate_rados_ready: the backend is connected, its cache-invalidation watch is "
               "registered and its probe write (every second) committed. /readyz fails while it is 0.",
               f"min by ({GW}) (rdmagate_rados_ready{{{SEL}}})", "{{node}} {{pod}} {{instance}}",
               thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}],
               mappings=[{"type": "value", "options": {"0": {"text": "NOT READY"}, "1": {"text": "READY"}}}]),
          4, 8)
    L.add(timeseries("Cache hit ratio", "GETs answered from the hugepage cache / all GETs that reached the "
                     "backend's cache lookup or RADOS.",
                     [(f"sum by ({GW}) (rate(rdmagate_store_cache_hits_total{{{SEL}}}[{RI}])) / "
                       f"(sum by ({GW}) (rate(rdmagate_store_cache_hits_total{{{SEL}}}[{RI}])) + "
                       f"sum by ({GW}) (rate(rdmagate_store_cache_misses_total{{{SEL}}}[{RI}])))",
                       "{{node}} {{pod}} {{instance}}")], unit="percentunit"), 10, 8)
    L.add(timeseries("Cache hits, misses, fills, evictions",
                     "Per second: hits, misses (sent to RADOS), fills (kept in the cache), fills skipped "
                     "(the key changed meanwhile), evictions (CLOCK), invalidations received.",
                     [(f"sum(rate(rdmagate_store_cache_hits_total{{{SEL}}}[{RI}]))", "hits"),
                      (f"sum(rate(rdmagate_store_cache_misses_total{{{SEL}}}[{RI}]))", "misses"),
                      (f"sum(rate(rdmagate_store_cache_fills_total{{{SEL}}}[{RI}]))", "fills"),
                      (f"sum(rate(rdmagate_store_cache_fill_skips_total{{{SEL}}}[{RI}]))", "fill skips"),
                      (f"sum(rate(rdmagate_store_cache_evictions_total{{{SEL}}}[{RI}]))", "evictions"),
                      (f"sum(rate(rdmagate_store_cache_invalidations_total{{{SEL}}}[{RI}]))", "invalidations"),
                      (f"sum(rate(rdmagate_store_cache_resets_total{{{SEL}}}[{RI}]))", "cache resets")],
                     unit="ops"), 10, 8)
    L.add(timeseries("librados latency p50 / p99", "rdmagate_rados_op_duration_seconds by kind: read (a GET "
                     "miss takes one or two), write (PUT), remove (DELETE), notify (every PUT and DELETE).",
                     [(f"histogram_quantile(0.5, sum by (le, kind) "
                       f"(rate(rdmagate_rados_op_duration_seconds_bucket{{{SEL}}}[{RI}])))", "p50 {{kind}}"),
                      (f"histogram_quantile(0.99, sum by (le, kind) "
                       f"(rate(rdmagate_rados_op_duration_seconds_bucket{{{SEL}}}[{RI}])))", "p99 {{kind}}")],
                     unit="s"), 12, 8)
    L.add(timeseries("RADOS errors and timeouts",
                     "unavailable answers (RADOS did not answer within store.rados.op_timeout_ms), librados "
                     "errors, notify timeouts (a gateway did not ack: the writer waited out the cache lease), "
                     "checksum failures (GETs answered corrupt).",
                     [(f'sum(rate(rdmagate_store_operations_total{{{SEL}, status="unavailable"}}[{RI}]))',
                       "unavailable"),
                      (f"sum(rate(rdmagate_rados_errors_total{{{SEL}}}[{RI}]))", "librados errors"),
                      (f"sum(rate(rdmagate_rados_notify_timeouts_total{{{SEL}}}[{RI}]))", "notify timeouts"),
                      (f"sum(rate(rdmagate_store_checksum_failures_total{{{SEL}}}[{RI}]))", "checksum failures")],
                     unit="ops"), 12, 8)
    L.add(timeseries("librados in flight, notifies, worker wakeups",
                     "librados ops in flight; invalidation notifies sent per second; futex wakes of the "
                     "parked RADOS worker per second (the only syscall a core makes for RADOS).",
                     [(f"sum by ({GW}) (rdmagate_rados_ops_in_flight{{{SEL}}})", "{{node}} {{pod}} {{instance}} in flight"),
                      (f"sum(rate(rdmagate_rados_notifies_total{{{SEL}}}[{RI}]))", "notifies/s"),
                      (f"sum(rate(rdmagate_rados_worker_wakeups_total{{{SEL}}}[{RI}]))", "wakeups/s")]),
          12, 8)
    for p in L.panels[rados_first:]:
        p["title"] = RADOS_TITLE + p["title"].removeprefix("RADOS ")
        p["description"] = RADOS_DESCRIPTION + p["description"]
    return L.panels


def variables():
    def query_var(name, label, query):
        return {"name": name, "label": label, "type": "query", "datasource": DS,
                "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
                "definition": query, "refresh": 2, "multi": True, "includeAll": True, "allValue": ".*",
                "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "options": [],
                "regex": "", "sort": 3, "hide": 0, "skipUrlSync": False}

    return {"list": [
        {"name": "DS_PROMETHEUS", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "options": [], "refresh": 1, "regex": "", "hide": 0, "includeAll": False,
         "multi": False, "skipUrlSync": False},
        query_var("job", "Job", "label_values(rdmagate_build_info, job)"),
        query_var("node", "Node", 'label_values(rdmagate_build_info{job=~"$job"}, node)'),
        query_var("pod", "Pod", 'label_values(rdmagate_build_info{job=~"$job", node=~"$node"}, pod)'),
        query_var("instance", "Instance",
                  'label_values(rdmagate_build_info{job=~"$job", node=~"$node", pod=~"$pod"}, instance)'),
        query_var("core", "Core", f"label_values(rdmagate_poller_polls_total{{{SEL}}}, core)"),
    ]}


def dashboard():
    return {
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
            {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""},
            {"type": "panel", "id": "stat", "name": "Stat", "version": ""},
        ],
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                  "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                  "name": "Annotations & Alerts", "type": "dashboard"}]},
        "description": "rdmagate RDMA gateway: health, process and memory, requests, transport, connections, "
                       "cores, store, RADOS. Gateways are picked by $node and $pod in Kubernetes (the "
                       "ServiceMonitor relabels the pod's node name to `node`; the prometheus.io/* pod "
                       "annotations give `pod`, and `node` where the scrape config relabels "
                       "__meta_kubernetes_pod_node_name) and by $job and $instance where Prometheus scrapes "
                       "hosts directly: a variable at All matches series without its label, so leave the ones "
                       "your setup lacks at All. Legends show node, pod and instance, whichever exist. "
                       "Metric reference: docs/metrics.md.",
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [],
        "liveNow": False,
        "panels": build(),
        "refresh": "10s",
        "schemaVersion": 38,
        "style": "dark",
        "tags": ["rdmagate", "rdma"],
        "templating": variables(),
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": "rdmagate",
        "uid": "rdmagate-overview",
        "version": 1,
        "weekStart": "",
    }


def main():
    text = json.dumps(dashboard(), indent=2) + "\n"
    if sys.argv[1:] == ["--check"]:
        if OUT.read_text() != text:
            print(f"{OUT} is stale: run python3 {Path(__file__)}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
INST = 'instance=~"$instance"'
CORE = 'instance=~"$instance", core=~"$core"'
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
    L.add(stat("Scrape target up",
               "Prometheus's own `up` series for each gateway: 0 when /metrics did not answer. The "
               "kubelet probes /healthz (every data-plane core looping) and /readyz (listeners up, port "
               "active); those are probes, not metrics.",
               f"up{{{INST}}}", "{{instance}}",
               thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}],
               mappings=[{"type": "value", "options": {"0": {"text": "DOWN"}, "1": {"text": "UP"}}}]),
          4, 4)
    L.add(stat("Device backend", "rdmagate_dataplane_backend_info: the device backend the data-plane cores run "
               "(mlx5dv on mlx5 NICs with dataplane.backend auto, verbs otherwise), with how many gateways run "
               "each.",
               f"count by (backend, configured) (rdmagate_dataplane_backend_info{{{INST}}})",
               "{{backend}} ({{configured}})"), 4, 4)
    L.add(stat("Version", "rdmagate_build_info: the daemon version and source commit the gateways run, "
               "with how many gateways run each.",
               f"count by (version, commit) (rdmagate_build_info{{{INST}}})", "{{version}} {{commit}}"), 4, 4)
    L.add(stat("Requests/s", "Store operations per second, all gateways selected.",
               f"sum(rate(rdmagate_store_operations_total{{{INST}}}[{RI}]))", unit="ops",
               instant=False), 4, 4)
    L.add(stat("Established connections", "Connections in state established, all selected gateways.",
               f'sum(rdmagate_connections{{{INST}, state="established"}})'), 4, 4)
    L.add(stat("Protocol violations (range)",
               "Connections failed for a peer's protocol violation in the selected time range.",
               f"sum(increase(rdmagate_protocol_violations_total{{{INST}}}[$__range]))",
               thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}]), 4, 4)

    L.row("Requests")
    L.add(timeseries("Operations/s by op and status",
                     "Store operations by op (get, put, delete) and status (ok, not_found, no_space, error).",
                     [(f"sum by (op, status) (rate(rdmagate_store_operations_total{{{INST}}}[{RI}]))",
                       "{{op}} {{status}}")], unit="ops"), 12, 8)
    L.add(timeseries("Failed operations/s",
                     "Operations whose status is not ok, by op and status.",
                     [(f'sum by (op, status) (rate(rdmagate_store_operations_total{{{INST}, status!="ok"}}[{RI}]))',
                       "{{op}} {{status}}")], unit="ops"), 12, 8)
    lat = []
    for q, name in ((0.5, "p50"), (0.99, "p99"), (0.999, "p99.9")):
        lat.append((f"histogram_quantile({q}, sum by (op, le) "
                    f"(rate(rdmagate_request_duration_seconds_bucket{{{INST}}}[{RI}])))",
                    f"{name} {{{{op}}}}"))
    L.add(timeseries("Request latency p50 / p99 / p99.9 by op",
                     "From receiving a request to sending its response. Buckets are powers of two from "
                     "1.024 us, so a quantile is accurate to within a factor of two.",
                     lat, unit="s"), 12, 8)
    L.add(timeseries("Mean request latency by op", "rate(_sum) / rate(_count) of the latency histogram.",
                     [(f"sum by (op) (rate(rdmagate_request_duration_seconds_sum{{{INST}}}[{RI}])) / "
                       f"sum by (op) (rate(rdmagate_request_duration_seconds_count{{{INST}}}[{RI}]))",
                       "{{op}}")], unit="s"), 12, 8)

    L.row("Transport")
    L.add(timeseries("Messages/s by type and direction", "Protocol messages, header included.",
                     [(f"sum by (type, direction) (rate(rdmagate_transport_messages_total{{{INST}}}[{RI}]))",
                       "{{direction}} {{type}}")], unit="short"), 12, 8)
    L.add(timeseries("Message bytes/s by type and direction", "Protocol message bytes, header included.",
                     [(f"sum by (type, direction) (rate(rdmagate_transport_message_bytes_total{{{INST}}}[{RI}]))",
                       "{{direction}} {{type}}")], unit="Bps"), 12, 8)
    L.add(timeseries("Payloads: inline vs chunked",
                     "Payloads sent inline in the message vs moved by RDMA READ/WRITE chunks.",
                     [(f"sum by (mode) (rate(rdmagate_transport_payloads_total{{{INST}}}[{RI}]))", "{{mode}}")],
                     stack=True), 8, 8)
    L.add(timeseries("RDMA chunk bandwidth",
                     "Bytes pulled by RDMA READ and pushed by RDMA WRITE chunks.",
                     [(f"sum(rate(rdmagate_transport_read_chunk_bytes_total{{{INST}}}[{RI}]))", "READ"),
                      (f"sum(rate(rdmagate_transport_write_chunk_bytes_total{{{INST}}}[{RI}]))", "WRITE")],
                     unit="Bps"), 8, 8)
    L.add(timeseries("RDMA chunks/s", "RDMA READ and WRITE chunks.",
                     [(f"sum(rate(rdmagate_transport_read_chunks_total{{{INST}}}[{RI}]))", "READ"),
                      (f"sum(rate(rdmagate_transport_write_chunks_total{{{INST}}}[{RI}]))", "WRITE")]), 8, 8)
    L.add(timeseries("Credit stalls/s",
                     "Messages that waited because the peer had granted no credit: a queue depth too small "
                     "for the load, or a slow peer.",
                     [(f"sum by (instance) (rate(rdmagate_transport_credit_stalls_total{{{INST}}}[{RI}]))",
                       "{{instance}}")]), 8, 8)
    L.add(timeseries("NOOPs and keepalives/s",
                     "NOOPs sent to return credits, and keepalive NOOPs on idle connections.",
                     [(f"sum(rate(rdmagate_transport_noops_total{{{INST}}}[{RI}]))", "credit NOOPs"),
                      (f"sum(rate(rdmagate_transport_keepalives_total{{{INST}}}[{RI}]))", "keepalives")]),
          8, 8)
    L.add(timeseries("Inline sends/s",
                     "Sends posted with IBV_SEND_INLINE (copied into the work request, no DMA read); "
                     "dataplane.send_inline_bytes sets the size limit.",
                     [(f"sum by (instance) (rate(rdmagate_transport_inline_posts_total{{{INST}}}[{RI}]))",
                       "{{instance}}")]), 8, 8)

    L.row("Connections")
    L.add(timeseries("Connections by state",
                     "handshake, established, draining, failed; cores filtered by $core.",
                     [(f"sum by (state) (rdmagate_connections{{{CORE}}})", "{{state}}")], stack=True), 12, 8)
    L.add(timeseries("Established connections by core",
                     "How evenly new connections are spread over the data-plane cores.",
                     [(f'sum by (instance, core) (rdmagate_connections{{{CORE}, state="established"}})',
                       "{{instance}} core {{core}}")]), 12, 8)
    L.add(timeseries("Accepts and rejects/s",
                     "Connection requests accepted, and rejected by reason.",
                     [(f"sum(rate(rdmagate_connection_accepts_total{{{INST}}}[{RI}]))", "accepted"),
                      (f"sum by (reason) (rate(rdmagate_connection_rejects_total{{{INST}}}[{RI}]))",
                       "rejected {{reason}}")]), 8, 8)
    L.add(timeseries("Reconnects and close re-kicks/s",
                     "Connections re-established after a failure; closing QPs moved to ERR again because "
                     "their core had not drained them (steady re-kicks: connections slow to close).",
                     [(f"sum by (instance) (rate(rdmagate_connection_reconnects_total{{{INST}}}[{RI}]))",
                       "reconnects {{instance}}"),
                      (f"sum by (instance) (rate(rdmagate_connection_close_rekicks_total{{{INST}}}[{RI}]))",
                       "close re-kicks {{instance}}")]), 8, 8)
    L.add(timeseries("Protocol violations/s by code",
                     "Connections failed for a protocol violation by the peer. Any is a peer bug (or ours).",
                     [(f"sum by (code) (rate(rdmagate_protocol_violations_total{{{INST}}}[{RI}]))",
                       "{{code}}")]), 8, 8)
    L.add(timeseries("Connection failures/s by cause",
                     "Connections a core reported FAILED: protocol_violation, dead_peer (no traffic within "
                     "protocol.dead_peer_timeout_ms), completion_error.",
                     [(f"sum by (cause) (rate(rdmagate_connection_failures_total{{{INST}}}[{RI}]))",
                       "{{cause}}")]), 8, 8)
    L.add(timeseries("Unplaced connections",
                     "Active-side connections not yet placed on a core (idle, or resolving before their "
                     "first placement).",
                     [(f"sum by (instance) (rdmagate_connections_unplaced{{{INST}}})", "{{instance}}")]), 8, 8)
    L.add(timeseries("Async events/s",
                     "QP and device asynchronous events; port_err and device_fatal take the gateway out of "
                     "readiness.",
                     [(f"sum by (event) (rate(rdmagate_async_events_total{{{INST}}}[{RI}]))", "{{event}}")]),
          8, 8)

    L.row("Data-plane cores")
    busy = f"rate(rdmagate_poller_busy_seconds_total{{{CORE}}}[{RI}])"
    idle = f"rate(rdmagate_poller_idle_seconds_total{{{CORE}}}[{RI}])"
    L.add(timeseries("Core busy ratio",
                     "Share of TSC time spent in loop iterations that did work. A busy-polling core is at "
                     "100% CPU either way; this says how much of it was useful.",
                     [(f"sum by (instance, core) ({busy}) / "
                       f"(sum by (instance, core) ({busy}) + sum by (instance, core) ({idle}))",
                       "{{instance}} core {{core}}")], unit="percentunit"), 12, 8)
    L.add(timeseries("Polls/s by core", "Poll loop iterations per second of each data-plane core.",
                     [(f"sum by (instance, core) (rate(rdmagate_poller_polls_total{{{CORE}}}[{RI}]))",
                       "{{instance}} core {{core}}")], unit="short"), 12, 8)
    L.add(timeseries("Idle poll ratio by core", "Idle polls / polls.",
                     [(f"sum by (instance, core) (rate(rdmagate_poller_idle_polls_total{{{CORE}}}[{RI}])) / "
                       f"sum by (instance, core) (rate(rdmagate_poller_polls_total{{{CORE}}}[{RI}]))",
                       "{{instance}} core {{core}}")], unit="percentunit"), 12, 8)
    L.add(timeseries("Work completions/s by status",
                     "success, flushed (teardown) and error completions polled by the cores.",
                     [(f"sum by (status) (rate(rdmagate_poller_completions_total{{{CORE}}}[{RI}]))",
                       "{{status}}")]), 12, 8)
    L.add(timeseries("Core errors/s by kind",
                     "Errors counted by the data-plane cores. wire and credit are peer violations; post_send, "
                     "post_recv, tx_exhausted, encode and unexpected point at the engine or its sizing; "
                     "dead_peer is a silent peer.",
                     [(f"sum by (kind) (rate(rdmagate_core_errors_total{{{INST}}}[{RI}]))", "{{kind}}")]),
          24, 7)

    L.row("Store")
    L.add(timeseries("Objects", "Objects held by the store.",
                     [(f"sum by (instance) (rdmagate_store_objects{{{INST}}})", "{{instance}}")]), 8, 8)
    L.add(timeseries("Bytes held vs capacity",
                     "Object data held; capacity charged (size classes, metadata, values reserved or still "
                     "pinned); and what the store can hold.",
                     [(f"sum by (instance) (rdmagate_store_bytes{{{INST}}})", "{{instance}} held"),
                      (f"sum by (instance) (rdmagate_store_allocated_bytes{{{INST}}})", "{{instance}} allocated"),
                      (f"sum by (instance) (rdmagate_store_capacity_bytes{{{INST}}})", "{{instance}} capacity")],
                     unit="bytes"), 8, 8)
    L.add(timeseries("Capacity used",
                     "Allocated bytes / capacity: how full the store is, size-class overhead included. Near "
                     "100% the memory backend answers PUTs no_space (it evicts nothing); the RADOS backend's "
                     "cache evicts instead.",
                     [(f"sum by (instance) (rdmagate_store_allocated_bytes{{{INST}}}) / "
                       f"sum by (instance) (rdmagate_store_capacity_bytes{{{INST}}})", "{{instance}}")],
                     unit="percentunit"), 8, 8)

    L.row("RADOS backend (store.backend: rados)")
    L.add(stat("RADOS ready", "rdmagate_rados_ready: the backend is connected, its cache-invalidation watch is "
               "registered and its probe write (every second) committed. /readyz fails while it is 0.",
               f"min by (instance) (rdmagate_rados_ready{{{INST}}})", "{{instance}}",
               thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}],
               mappings=[{"type": "value", "options": {"0": {"text": "NOT READY"}, "1": {"text": "READY"}}}]),
          4, 8)
    L.add(timeseries("Cache hit ratio", "GETs answered from the hugepage cache / all GETs that reached the "
                     "backend's cache lookup or RADOS.",
                     [(f"sum by (instance) (rate(rdmagate_store_cache_hits_total{{{INST}}}[{RI}])) / "
                       f"(sum by (instance) (rate(rdmagate_store_cache_hits_total{{{INST}}}[{RI}])) + "
                       f"sum by (instance) (rate(rdmagate_store_cache_misses_total{{{INST}}}[{RI}])))",
                       "{{instance}}")], unit="percentunit"), 10, 8)
    L.add(timeseries("Cache hits, misses, fills, evictions",
                     "Per second: hits, misses (sent to RADOS), fills (kept in the cache), fills skipped "
                     "(the key changed meanwhile), evictions (CLOCK), invalidations received.",
                     [(f"sum(rate(rdmagate_store_cache_hits_total{{{INST}}}[{RI}]))", "hits"),
                      (f"sum(rate(rdmagate_store_cache_misses_total{{{INST}}}[{RI}]))", "misses"),
                      (f"sum(rate(rdmagate_store_cache_fills_total{{{INST}}}[{RI}]))", "fills"),
                      (f"sum(rate(rdmagate_store_cache_fill_skips_total{{{INST}}}[{RI}]))", "fill skips"),
                      (f"sum(rate(rdmagate_store_cache_evictions_total{{{INST}}}[{RI}]))", "evictions"),
                      (f"sum(rate(rdmagate_store_cache_invalidations_total{{{INST}}}[{RI}]))", "invalidations"),
                      (f"sum(rate(rdmagate_store_cache_resets_total{{{INST}}}[{RI}]))", "cache resets")],
                     unit="ops"), 10, 8)
    L.add(timeseries("librados latency p50 / p99", "rdmagate_rados_op_duration_seconds by kind: read (a GET "
                     "miss takes one or two), write (PUT), remove (DELETE), notify (every PUT and DELETE).",
                     [(f"histogram_quantile(0.5, sum by (le, kind) "
                       f"(rate(rdmagate_rados_op_duration_seconds_bucket{{{INST}}}[{RI}])))", "p50 {{kind}}"),
                      (f"histogram_quantile(0.99, sum by (le, kind) "
                       f"(rate(rdmagate_rados_op_duration_seconds_bucket{{{INST}}}[{RI}])))", "p99 {{kind}}")],
                     unit="s"), 12, 8)
    L.add(timeseries("RADOS errors and timeouts",
                     "unavailable answers (RADOS did not answer within store.rados.op_timeout_ms), librados "
                     "errors, notify timeouts (a gateway did not ack: the writer waited out the cache lease), "
                     "checksum failures (GETs answered corrupt).",
                     [(f'sum(rate(rdmagate_store_operations_total{{{INST}, status="unavailable"}}[{RI}]))',
                       "unavailable"),
                      (f"sum(rate(rdmagate_rados_errors_total{{{INST}}}[{RI}]))", "librados errors"),
                      (f"sum(rate(rdmagate_rados_notify_timeouts_total{{{INST}}}[{RI}]))", "notify timeouts"),
                      (f"sum(rate(rdmagate_store_checksum_failures_total{{{INST}}}[{RI}]))", "checksum failures")],
                     unit="ops"), 12, 8)
    L.add(timeseries("librados in flight, notifies, worker wakeups",
                     "librados ops in flight; invalidation notifies sent per second; futex wakes of the "
                     "parked RADOS worker per second (the only syscall a core makes for RADOS).",
                     [(f"sum by (instance) (rdmagate_rados_ops_in_flight{{{INST}}})", "{{instance}} in flight"),
                      (f"sum(rate(rdmagate_rados_notifies_total{{{INST}}}[{RI}]))", "notifies/s"),
                      (f"sum(rate(rdmagate_rados_worker_wakeups_total{{{INST}}}[{RI}]))", "wakeups/s")]),
          12, 8)
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
        query_var("instance", "Gateway", "label_values(rdmagate_build_info, instance)"),
        query_var("core", "Core", 'label_values(rdmagate_poller_polls_total{instance=~"$instance"}, core)'),
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
        "description": "rdmagate RDMA gateway: requests, transport, connections, cores, store. "
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

#!/usr/bin/env python3
"""Structured checks of deploy/ (called by check-deploy.sh when python3 is present).

Prints one "ok: ..." or "FAIL: ..." line per check and a last line "python: N passed, N failed"; exits 1
when anything failed. Uses PyYAML when importable; without it the YAML files are checked by
check-deploy.sh's simpler fallback instead and the YAML-dependent checks here are skipped (said so).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import yaml  # PyYAML
except ImportError:  # pragma: no cover - depends on the machine
    yaml = None

SRC = Path(sys.argv[1]).resolve()
DEPLOY = SRC / "deploy"
passed = 0
failed = 0


def ok(msg):
    global passed
    passed += 1
    print(f"ok: {msg}")


def fail(msg):
    global failed
    failed += 1
    print(f"FAIL: {msg}")


def check(cond, msg, why=""):
    if cond:
        ok(msg)
    else:
        fail(msg + (f": {why}" if why else ""))
    return cond


# ---------------------------------------------------------------------------------------------- parsing
docs = {}  # every YAML document by file name (relative to deploy/)
for path in sorted(DEPLOY.rglob("*")):
    rel = path.relative_to(DEPLOY).as_posix()
    if path.suffix == ".json":
        try:
            json.loads(path.read_text())
            ok(f"{rel} parses as JSON")
        except ValueError as e:
            fail(f"{rel} does not parse as JSON: {e}")
    elif path.suffix in (".yaml", ".yml"):
        if yaml is None:
            continue
        try:
            docs[rel] = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
            ok(f"{rel} parses as YAML ({len(docs[rel])} document(s))")
        except yaml.YAMLError as e:
            fail(f"{rel} does not parse as YAML: {e}")
if yaml is None:
    print("note: PyYAML not importable: YAML structure checks skipped (check-deploy.sh's fallback runs)")


# ------------------------------------------------------------------------------------ metric reference
metrics_md = (SRC / "docs" / "metrics.md").read_text()
documented = {}  # name -> set of label names
for line in metrics_md.splitlines():
    cells = [c.strip() for c in line.split("|")]
    if len(cells) < 4:
        continue
    m = re.fullmatch(r"`(rdmagate_[a-z0-9_]+)`", cells[1])
    if not m:
        continue
    labels = set(re.findall(r"`([a-z_]+)`", cells[3]))
    documented[m.group(1)] = labels
check(len(documented) >= 10, f"docs/metrics.md documents {len(documented)} metrics",
      "the metric tables were not found: has the table layout changed?")

# Labels every series carries without docs/metrics.md saying so (added by Prometheus) and the bucket bound.
IMPLICIT_LABELS = {"instance", "job", "node", "pod", "namespace"}
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and",
                   "or", "unless", "inf", "nan", "atan2"}
# Series Prometheus makes itself: allowed although docs/metrics.md does not list them.
BUILTIN_SERIES = {"up"}


def base_metric(name):
    """The documented name of a series name: histogram suffixes map to the histogram."""
    if name in documented:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in documented:
            return name[: -len(suffix)]
    return None


def strip_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def metric_names(expr):
    """Metric names in a PromQL expression (Grafana variables left in place)."""
    e = strip_strings(expr)
    e = re.sub(r"label_values\(\s*(.*)\s*,\s*[a-zA-Z_]\w*\s*\)", r"\1", e)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][\w:]*)(?!\w)(\s*\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in PROMQL_KEYWORDS:
            continue
        names.add(word)
    return names


def matching_paren(s, i):
    """Index of the parenthesis closing the one at s[i]."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "(":
            depth += 1
        elif s[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def label_problems(expr):
    """Label names used in selectors, by(...) and label_values() that the metrics involved lack."""
    problems = []
    e = strip_strings(expr)
    for m in re.finditer(r"([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}", e):
        base = base_metric(m.group(1))
        if base is None:
            continue
        allowed = documented[base] | IMPLICIT_LABELS | ({"le"} if m.group(1).endswith("_bucket") else set())
        for label in re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", m.group(2)):
            if label not in allowed:
                problems.append(f"{m.group(1)} has no label {label}")
    for m in re.finditer(r"\bby\s*\(([^)]*)\)\s*\(", e):
        inner_start = m.end() - 1
        inner = e[inner_start: matching_paren(e, inner_start) + 1]
        bases = [(n, base_metric(n)) for n in metric_names(inner)]
        bases = [(n, b) for n, b in bases if b]
        if not bases:
            continue
        allowed = set(IMPLICIT_LABELS)
        for n, b in bases:
            allowed |= documented[b] | ({"le"} if n.endswith("_bucket") else set())
        for label in re.findall(r"[a-zA-Z_]\w*", m.group(1)):
            if label not in allowed:
                problems.append(f"by ({label}) over {', '.join(sorted(n for n, _ in bases))}, which lack it")
    m = re.search(r"label_values\(\s*([a-zA-Z_:][\w:]*).*,\s*([a-zA-Z_]\w*)\s*\)", e)
    if m and base_metric(m.group(1)):
        if m.group(2) not in documented[base_metric(m.group(1))] | IMPLICIT_LABELS:
            problems.append(f"label_values: {m.group(1)} has no label {m.group(2)}")
    return problems


# ----------------------------------------------------------------------------------------- dashboard
dash_path = DEPLOY / "grafana" / "rdmagate-dashboard.json"
dash = json.loads(dash_path.read_text())
check(isinstance(dash.get("schemaVersion"), int) and 36 <= dash["schemaVersion"] <= 41,
      f"dashboard schemaVersion {dash.get('schemaVersion')} is in [36, 41]")
variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
check(variables.get("DS_PROMETHEUS", {}).get("type") == "datasource"
      and variables["DS_PROMETHEUS"].get("query") == "prometheus",
      "dashboard has a Prometheus datasource variable DS_PROMETHEUS")
for name in ("instance", "core"):
    check(variables.get(name, {}).get("type") == "query", f"dashboard has a query variable ${name}")

exprs = []  # (where, expr)
for v in variables.values():
    if v.get("type") == "query":
        q = v.get("query")
        exprs.append((f"variable {v['name']}", q.get("query") if isinstance(q, dict) else q))
panels = []
for p in dash.get("panels", []):
    panels.append(p)
    panels.extend(p.get("panels", []))  # collapsed rows keep their panels inside
ids = [p.get("id") for p in panels]
check(len(ids) == len(set(ids)), "dashboard panel ids are unique")
bad_ds = []
for p in panels:
    if p.get("type") == "row":
        continue
    if p.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}" or not p.get("targets"):
        bad_ds.append(p.get("title"))
    for t in p.get("targets", []):
        if t.get("datasource", {}).get("uid") not in (None, "${DS_PROMETHEUS}"):
            bad_ds.append(p.get("title"))
        exprs.append((f"panel \"{p.get('title')}\" {t.get('refId')}", t.get("expr", "")))
check(not bad_ds, "every panel queries ${DS_PROMETHEUS} and has a target", f"not: {bad_ds}")

# Panels may not overlap nor exceed the 24-unit grid.
cells = {}
overlaps = []
for p in panels:
    g = p.get("gridPos", {})
    if g.get("x", 0) + g.get("w", 0) > 24:
        overlaps.append(f"{p.get('title')} exceeds the grid width")
    for x in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
        for y in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
            if (x, y) in cells:
                overlaps.append(f"{p.get('title')} overlaps {cells[(x, y)]}")
                break
            cells[(x, y)] = p.get("title")
check(not overlaps, "dashboard panels do not overlap", "; ".join(sorted(set(overlaps))[:5]))

used = set()
unknown = []
label_errors = []
for where, expr in exprs:
    if not expr:
        unknown.append(f"{where}: empty query")
        continue
    for name in metric_names(expr):
        if name in BUILTIN_SERIES:
            continue
        base = base_metric(name)
        if base is None:
            unknown.append(f"{where}: {name}")
        else:
            used.add(base)
    label_errors += [f"{where}: {p}" for p in label_problems(expr)]
check(not unknown, f"every metric the dashboard queries ({len(used)} distinct) is in docs/metrics.md",
      "unknown: " + "; ".join(unknown))
check(not label_errors, "every label the dashboard filters or groups by exists on its metric",
      "; ".join(label_errors))
check(len(used) >= 20, f"the dashboard covers {len(used)} of {len(documented)} documented metrics (>= 20)")
missing = sorted(set(documented) - used)
if missing:
    print(f"note: documented metrics not on the dashboard: {', '.join(missing)}")

# PromQL syntax, when promtool is installed (Debian package prometheus): as recording rules.
promtool = shutil.which("promtool")
if promtool:
    rules = {"groups": [{"name": "dashboard", "rules": []}]}
    for i, (where, expr) in enumerate(exprs):
        if expr.startswith("label_values("):
            continue
        e = (expr.replace("$__rate_interval", "1m").replace("$__range", "1h")
             .replace("$instance", ".*").replace("$core", ".*"))
        rules["groups"][0]["rules"].append({"record": f"dashboard:q{i}", "expr": e})
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        json.dump(rules, f)  # JSON is YAML
    r = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True)
    os.unlink(f.name)
    check(r.returncode == 0, f"promtool parses all {len(rules['groups'][0]['rules'])} dashboard queries",
          (r.stdout + r.stderr).strip().replace("\n", " | "))
else:
    print("note: promtool not installed: PromQL syntax not checked (apt-get install prometheus)")

gen = DEPLOY / "grafana" / "generate-dashboard.py"
r = subprocess.run([sys.executable, str(gen), "--check"], capture_output=True, text=True)
check(r.returncode == 0, "rdmagate-dashboard.json is what generate-dashboard.py produces",
      r.stderr.strip())


# ----------------------------------------------------------------------------------------- kubernetes
def conf_sections(text):
    """Top-level sections of a conf file and the keys under each."""
    out = {}
    data = yaml.safe_load(text) or {}
    for section, body in data.items():
        out[section] = set((body or {}).keys())
    return out


# ------------------------------------------------------------------------------------------- drain time
default_drain_ms = None
if yaml is not None:
    default_drain_ms = ((yaml.safe_load((SRC / "conf" / "rdmagate.yaml").read_text()) or {})
                        .get("protocol") or {}).get("drain_timeout_ms")
    check(isinstance(default_drain_ms, int),
          f"conf/rdmagate.yaml documents protocol.drain_timeout_ms ({default_drain_ms})")
    default_drain_ms = default_drain_ms if isinstance(default_drain_ms, int) else 10000
    unit = (DEPLOY / "systemd" / "rdmagate.service").read_text()
    m = re.search(r"^TimeoutStopSec=(\d+)s?$", unit, re.M)
    stop = int(m.group(1)) if m else 0
    check(stop >= 2 * default_drain_ms / 1000 + 5,
          f"systemd TimeoutStopSec={stop} > the two drain phases at the default (2 x {default_drain_ms} ms) + 5 s")

if yaml is not None:
    k8s = {}
    for rel, ds in docs.items():
        if rel.startswith("kubernetes/"):
            for d in ds:
                k8s.setdefault(d.get("kind"), []).append((rel, d))

    kust = docs.get("kubernetes/kustomization.yaml", [{}])[0]
    res = kust.get("resources", [])
    check(res and all((DEPLOY / "kubernetes" / r).is_file() for r in res),
          "kustomization.yaml lists only existing files", str(res))
    check(all(d.get("metadata", {}).get("namespace") in (None, "rdmagate")
              for ds in k8s.values() for _, d in ds if d.get("kind") != "Namespace"),
          "every namespaced object is in namespace rdmagate")

    ref = conf_sections((SRC / "conf" / "rdmagate.yaml").read_text())
    cm = next((d for _, d in k8s.get("ConfigMap", []) if d["metadata"]["name"] == "rdmagate-config"), None)
    check(cm is not None and "rdmagate.yaml" in cm.get("data", {}),
          "configmap.yaml has a ConfigMap rdmagate-config with data.rdmagate.yaml")
    embedded = yaml.safe_load(cm["data"]["rdmagate.yaml"]) if cm else {}
    extra_sections = sorted(set(embedded) - set(ref))
    check(not extra_sections, f"ConfigMap's rdmagate.yaml uses only sections of conf/rdmagate.yaml "
          f"({', '.join(sorted(embedded))})", f"unknown sections: {extra_sections}")
    extra_keys = sorted(f"{s}.{k}" for s, body in embedded.items() if s in ref for k in (body or {})
                        if k not in ref[s])
    check(not extra_keys, "ConfigMap's rdmagate.yaml uses only keys of conf/rdmagate.yaml",
          f"unknown keys: {extra_keys}")
    tel = embedded.get("telemetry", {}) or {}
    check(tel.get("bind_address") not in (None, "127.0.0.1", "::1"),
          f"ConfigMap binds telemetry to a pod-reachable address ({tel.get('bind_address')})",
          "probes and Prometheus cannot reach a loopback listener")
    tel_port = tel.get("port", 9464)
    check(isinstance(tel_port, int) and tel_port > 0, f"ConfigMap's telemetry port is fixed ({tel_port})")
    for key in ("main_lcore", "lcores"):
        check(key not in (embedded.get("eal") or {}),
              f"ConfigMap leaves eal.{key} to the entrypoint (CPU ids are chosen by the kubelet)")
    check("cores" not in (embedded.get("dataplane") or {}),
          "ConfigMap leaves dataplane.cores to the entrypoint")

    ds = [d for _, d in k8s.get("DaemonSet", [])]
    if check(len(ds) == 1, "kubernetes/ has one DaemonSet"):
        spec = ds[0]["spec"]["template"]["spec"]
        meta = ds[0]["spec"]["template"]["metadata"]
        check(ds[0]["spec"]["selector"]["matchLabels"].items() <= meta.get("labels", {}).items(),
              "DaemonSet selector matches its pod labels")
        c = next((c for c in spec["containers"] if c["name"] == "rdmagate"), None)
        check(c is not None, "DaemonSet has a container named rdmagate")
        req = c["resources"].get("requests", {})
        lim = c["resources"].get("limits", {})
        check(req == lim, "container requests == limits (Guaranteed QoS)", f"{req} vs {lim}")
        check("hugepages-2Mi" in lim, "container requests hugepages-2Mi")
        check(any(k.startswith("rdma/") or "rdma" in k for k in lim), "container requests an RDMA resource",
              str(sorted(lim)))
        check(re.fullmatch(r"[1-9][0-9]*", str(lim.get("cpu", ""))) is not None,
              f"CPU limit is a whole number ({lim.get('cpu')}), as exclusive cores need")
        sc = c.get("securityContext", {})
        check(not sc.get("privileged", False), "container is not privileged")
        check("IPC_LOCK" in sc.get("capabilities", {}).get("add", []), "container adds IPC_LOCK")
        check("ALL" in sc.get("capabilities", {}).get("drop", []), "container drops ALL other capabilities")
        ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}

        def probe_ok(kind, path):
            p = c.get(kind, {}).get("httpGet", {})
            port = ports.get(p.get("port"), p.get("port"))
            return check(p.get("path") == path and port == tel_port,
                         f"{kind} GETs {path} on the telemetry port {tel_port}", str(p))
        probe_ok("livenessProbe", "/healthz")
        probe_ok("readinessProbe", "/readyz")
        ann = meta.get("annotations", {})
        check(ann.get("prometheus.io/port") == str(tel_port), "prometheus.io/port is the telemetry port")
        check("k8s.v1.cni.cncf.io/networks" in ann, "pod asks Multus for the RDMA network")
        nads = [d["metadata"]["name"] for _, d in k8s.get("NetworkAttachmentDefinition", [])]
        check(ann.get("k8s.v1.cni.cncf.io/networks", "").split("/")[-1] in nads,
              "the Multus network annotation names the NetworkAttachmentDefinition", str(nads))
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        hp_dir = (embedded.get("eal") or {}).get("hugepage_dir") or "/dev/hugepages"
        hp_vol = vols.get(mounts.get(hp_dir, ""), {})
        check(hp_vol.get("emptyDir", {}).get("medium") == "HugePages-2Mi",
              f"a HugePages-2Mi emptyDir is mounted at eal.hugepage_dir ({hp_dir})")
        args = c.get("args", []) + c.get("command", [])
        cfg = args[args.index("--config") + 1] if "--config" in args else ""
        cfg_vol = vols.get(mounts.get(os.path.dirname(cfg), ""), {})
        check(cfg_vol.get("configMap", {}).get("name") == "rdmagate-config"
              and os.path.basename(cfg) == "rdmagate.yaml",
              f"--config {cfg} is the ConfigMap's rdmagate.yaml")
        grace = spec.get("terminationGracePeriodSeconds", 30)
        drain_ms = (embedded.get("protocol") or {}).get("drain_timeout_ms", default_drain_ms)
        check(grace >= 2 * drain_ms / 1000 + 5,
              f"terminationGracePeriodSeconds {grace} > the two drain phases (2 x {drain_ms} ms) + 5 s")
        check(bool(spec.get("nodeSelector")) and bool(spec.get("tolerations")),
              "DaemonSet has a nodeSelector and tolerations for RDMA nodes")
        env = {e["name"]: e for e in c.get("env", [])}
        check(env.get("RDMAGATE_CORES_FROM_AFFINITY", {}).get("value") == "1",
              "entrypoint derives the lcores from the CPU affinity")

    svc = [d for _, d in k8s.get("Service", [])]
    if check(len(svc) == 1, "kubernetes/ has one Service"):
        s = svc[0]["spec"]
        check(s.get("clusterIP") == "None", "the metrics Service is headless")
        check(ds and s.get("selector", {}).items() <= ds[0]["spec"]["template"]["metadata"]["labels"].items(),
              "the Service selects the DaemonSet's pods")
    sm = docs.get("kubernetes/servicemonitor.yaml", [{}])[0]
    check(sm.get("kind") == "ServiceMonitor"
          and sm["spec"]["endpoints"][0].get("port") in [p["name"] for p in svc[0]["spec"]["ports"]],
          "the ServiceMonitor scrapes the Service's named port")

print(f"python: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)

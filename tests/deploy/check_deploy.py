#!/usr/bin/env python3
"""Structured checks of deploy/ (called by check-deploy.sh when python3 is present).

Prints one "ok: ..." or "FAIL: ..." line per check and a last line "python: N passed, N failed"; exits 1
when anything failed. Uses PyYAML when importable; without it the YAML files are checked by
check-deploy.sh's simpler fallback instead and the YAML-dependent checks here are skipped (said so).
"""
import configparser
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
        # The base only: components/ hold partial objects (patches) checked in their own section below.
        if rel.startswith("kubernetes/") and rel.count("/") == 1:
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

# ------------------------------------------------------------------------------- rados component
# kubernetes/components/rados (kind: Component) switches the base to store.backend: rados; overlays/rados
# renders base + component. Checked: the component's files, that its patches target objects of the base,
# the config it puts in place (keys, backend, unchanged outside store, paths of the mounted Ceph files),
# the ceph.conf template, the optional Rook manifests, no committed key, and, when kubectl or kustomize is
# installed, the rendered overlay.
COMP = "kubernetes/components/rados"
OVERLAY = "overlays/rados"
if yaml is not None and (DEPLOY / COMP / "kustomization.yaml").is_file():
    comp_dir = DEPLOY / COMP
    ckust = (docs.get(f"{COMP}/kustomization.yaml") or [{}])[0]
    check(ckust.get("apiVersion") == "kustomize.config.k8s.io/v1alpha1" and ckust.get("kind") == "Component",
          "rados: components/rados/kustomization.yaml is a kustomize Component (v1alpha1)",
          f"{ckust.get('apiVersion')} {ckust.get('kind')}")
    c_res = ckust.get("resources", []) or []
    c_patches = [pt.get("path") if isinstance(pt, dict) else pt
                 for pt in (ckust.get("patches", []) or []) + (ckust.get("patchesStrategicMerge", []) or [])]
    listed = c_res + c_patches
    check(listed and all(isinstance(f, str) and (comp_dir / f).is_file() for f in listed),
          "rados: the component lists only existing files", str(listed))
    check("rook-cephclient.yaml" not in c_res and (comp_dir / "rook-cephclient.yaml").is_file(),
          "rados: rook-cephclient.yaml exists and is not a resource of the component (Rook's namespace and CRDs)")
    check(all(not (isinstance(pt, dict) and pt.get("target")) for pt in ckust.get("patches", []) or []),
          "rados: patches name their target in the patch itself (strategic merge)")

    def comp_docs(f):
        return docs.get(f"{COMP}/{f}", [])

    base_ids = {(d.get("kind"), d.get("metadata", {}).get("name")): d for ds_ in k8s.values() for _, d in ds_}
    misses = []
    for f in c_patches:
        for d in comp_docs(f):
            key = (d.get("kind"), d.get("metadata", {}).get("name"))
            b = base_ids.get(key)
            if b is None:
                misses.append(f"{f}: {key[0]}/{key[1]} not in the base")
            elif d.get("apiVersion") != b.get("apiVersion") or \
                    d.get("metadata", {}).get("namespace", "rdmagate") != b.get("metadata", {}).get("namespace"):
                misses.append(f"{f}: {key[0]}/{key[1]} differs from the base in apiVersion or namespace")
    check(c_patches and not misses, "rados: every patch targets an object of the base (kind, name, namespace)",
          "; ".join(misses))
    c_objs = [d for f in c_res for d in comp_docs(f)]
    check(all(d.get("metadata", {}).get("namespace") == "rdmagate" for d in c_objs),
          "rados: the component's resources are in namespace rdmagate")
    clash = sorted(set((d.get("kind"), d.get("metadata", {}).get("name")) for d in c_objs) & set(base_ids))
    check(not clash, "rados: the component's resources add objects, none of the base's", str(clash))

    # Never a key in the repository: no Secret with data, no "key = AQ..." anywhere in the component.
    secrets = [f for f in os.listdir(comp_dir) for d in comp_docs(f)
               if d.get("kind") == "Secret" and (d.get("data") or d.get("stringData"))]
    keys = [f.name for f in sorted(comp_dir.iterdir())
            if re.search(r"\bkey\s*=\s*AQ[A-Za-z0-9+/]{20,}={0,2}", f.read_text())]
    check(not secrets and not keys, "rados: no cephx key is committed (no Secret with data, no \"key = AQ...\")",
          f"secrets: {secrets}, keys in: {keys}")

    # The daemon config the component puts in place.
    cm_patch = next((d for f in c_patches for d in comp_docs(f)
                     if d.get("kind") == "ConfigMap" and d["metadata"].get("name") == "rdmagate-config"), None)
    rcfg = {}
    if check(cm_patch is not None and "rdmagate.yaml" in (cm_patch.get("data") or {}),
             "rados: a patch replaces data.rdmagate.yaml of the ConfigMap rdmagate-config"):
        rcfg = yaml.safe_load(cm_patch["data"]["rdmagate.yaml"]) or {}
    ref_full = yaml.safe_load((SRC / "conf" / "rdmagate.yaml").read_text()) or {}
    unknown = sorted(set(rcfg) - set(ref))
    unknown += sorted(f"{s}.{k}" for s, body in rcfg.items() if s in ref for k in (body or {}) if k not in ref[s])
    ref_rados = set(((ref_full.get("store") or {}).get("rados") or {}).keys())
    rstore = rcfg.get("store") or {}
    rados = rstore.get("rados") if isinstance(rstore.get("rados"), dict) else {}
    unknown += sorted(f"store.rados.{k}" for k in rados if k not in ref_rados)
    check(not unknown, "rados: the rados config uses only sections and keys of conf/rdmagate.yaml (store.rados too)",
          f"unknown: {unknown}")
    check(rstore.get("backend") == "rados" and bool(rados),
          "rados: the rados config sets store.backend: rados and a store.rados section",
          f"backend {rstore.get('backend')}")
    drift = sorted(s for s in set(rcfg) | set(embedded) if s != "store" and rcfg.get(s) != embedded.get(s))
    drift += sorted(f"store.{k}" for k in set(rstore) | set(embedded.get("store") or {})
                    if k not in ("backend", "rados") and rstore.get(k) != (embedded.get("store") or {}).get(k))
    check(not drift, "rados: the rados config equals configmap.yaml's outside store.backend and store.rados",
          f"differs in: {drift} (edit configmap.yaml and components/rados/configmap-rados.yaml together)")
    op_ms = rados.get("op_timeout_ms", 5000)
    notify_ms = rados.get("notify_timeout_ms", 2000)
    lease_ms = rados.get("cache_lease_ms", 5000)
    check(isinstance(lease_ms, int) and isinstance(notify_ms, int) and lease_ms > notify_ms,
          f"rados: store.rados.cache_lease_ms {lease_ms} > notify_timeout_ms {notify_ms}")
    client = str(rados.get("client", "client.rdmagate"))
    pool = str(rados.get("pool", "rdmagate"))

    # ceph.conf template.
    cc = next((d for d in c_objs if d.get("kind") == "ConfigMap"
               and d["metadata"].get("name") == "rdmagate-ceph-conf"), None)
    ceph = configparser.ConfigParser(interpolation=None, strict=True, comment_prefixes=("#", ";"),
                                     empty_lines_in_values=False)
    ceph_ok = check(cc is not None and "ceph.conf" in (cc.get("data") or {}),
                    "rados: the component has a ConfigMap rdmagate-ceph-conf with data.ceph.conf")
    if ceph_ok:
        try:
            ceph.read_string(cc["data"]["ceph.conf"])
        except configparser.Error as e:
            ceph_ok = check(False, "rados: ceph.conf parses (INI)", str(e).replace("\n", " "))

    def ceph_get(key):
        """A client's view of key: its [client.X] section, then [client], then [global] (any of _ - space)."""
        for sect in (client, "client", "global"):
            if ceph.has_section(sect):
                for k, v in ceph.items(sect):
                    if re.sub(r"[ -]", "_", k) == key:
                        return v
        return None
    if ceph_ok:
        check(bool(ceph_get("mon_host")), f"rados: ceph.conf has a mon_host ({ceph_get('mon_host')})")
        check(ceph_get("auth_client_required") == "cephx", "rados: ceph.conf has auth_client_required = cephx")
        check(ceph_get("keyring") == rados.get("keyring"),
              f"rados: ceph.conf's keyring for {client} is store.rados.keyring ({rados.get('keyring')})",
              f"ceph.conf says {ceph_get('keyring')}")

    def ceph_mount_checks(c, vols, cfg, where):
        """store.rados.conf_file and keyring are the ConfigMap's and the Secret's files, mounted read-only."""
        r = (cfg.get("store") or {}).get("rados") or {}
        files = {}  # path in the container -> (kind, name, key, mode)
        for m in (c or {}).get("volumeMounts", []):
            v = vols.get(m.get("name"), {})
            if not m.get("readOnly") or m.get("subPath"):
                continue
            srcs = [s for s in v.get("projected", {}).get("sources", [])]
            default_mode = v.get("projected", {}).get("defaultMode", 0o644)
            for kind in ("configMap", "secret"):
                if kind in v:
                    srcs.append({kind: v[kind]})
                    default_mode = v[kind].get("defaultMode", 0o644)
            for s in srcs:
                for kind in ("configMap", "secret"):
                    if kind not in s:
                        continue
                    name = s[kind].get("name") or s[kind].get("secretName")
                    for it in s[kind].get("items", []):
                        files[f"{m['mountPath'].rstrip('/')}/{it['path']}"] = (kind, name, it["key"],
                                                                             it.get("mode", default_mode))
        conf = files.get(r.get("conf_file"))
        check(conf is not None and conf[:3] == ("configMap", "rdmagate-ceph-conf", "ceph.conf"),
              f"rados{where}: store.rados.conf_file {r.get('conf_file')} is rdmagate-ceph-conf's ceph.conf, "
              "mounted read-only", str(conf))
        key = files.get(r.get("keyring"))
        check(key is not None and key[:3] == ("secret", "rdmagate-ceph-keyring", "keyring"),
              f"rados{where}: store.rados.keyring {r.get('keyring')} is the Secret rdmagate-ceph-keyring's "
              "keyring, mounted read-only", str(key))
        check(key is not None and key[3] == 0o400, f"rados{where}: the keyring is mounted with mode 0400",
              oct(key[3]) if key else "not mounted")

    ds_patch = next((d for f in c_patches for d in comp_docs(f) if d.get("kind") == "DaemonSet"), None)
    if check(ds_patch is not None and ds != [], "rados: a patch mounts the Ceph files into the DaemonSet"):
        pspec = ds_patch["spec"]["template"]["spec"]
        bspec = ds[0]["spec"]["template"]["spec"]
        bcont = {c["name"]: c for c in bspec["containers"]}
        pc = next((c for c in pspec.get("containers", []) if c.get("name") == "rdmagate"), None)
        check(pc is not None and all(c.get("name") in bcont for c in pspec.get("containers", [])),
              "rados: the DaemonSet patch changes the base's container rdmagate (no new container)")
        pvols = {v["name"]: v for v in pspec.get("volumes", [])}
        bvols = {v["name"] for v in bspec.get("volumes", [])}
        bmounts = {m["mountPath"] for m in bcont.get("rdmagate", {}).get("volumeMounts", [])}
        new_mounts = {m["mountPath"] for m in (pc or {}).get("volumeMounts", [])}
        check(not (set(pvols) & bvols) and not (new_mounts & bmounts),
              "rados: the patch's volumes and mount paths are new (a merge would alter the base's)",
              f"volumes {sorted(set(pvols) & bvols)}, mounts {sorted(new_mounts & bmounts)}")
        check(all(m.get("name") in pvols for m in (pc or {}).get("volumeMounts", [])),
              "rados: every mount of the patch has its volume in the patch")
        render_tool = shutil.which("kubectl") or shutil.which("kustomize")
        if not render_tool:
            # Nothing renders here: check the patch's own mounts and volumes instead of the merged result.
            ceph_mount_checks(pc, pvols, rcfg, "")
        grace = bspec.get("terminationGracePeriodSeconds", 30)
        drain_ms = (rcfg.get("protocol") or {}).get("drain_timeout_ms", default_drain_ms)
        need = 2 * drain_ms / 1000 + (op_ms + notify_ms + lease_ms + 100) / 1000 + 5
        check(grace >= need, f"rados: terminationGracePeriodSeconds {grace} > the drain (2 x {drain_ms} ms) + "
              f"the RADOS worker's last op (op {op_ms} + notify {notify_ms} + lease {lease_ms} + 100 ms) + 5 s")

    # Rook: the pool and the client with the caps the gateway needs.
    rook = {d.get("kind"): d for d in comp_docs("rook-cephclient.yaml")}
    cl = rook.get("CephClient", {})
    caps = (cl.get("spec") or {}).get("caps") or {}
    check(cl.get("apiVersion") == "ceph.rook.io/v1" and f"client.{cl.get('metadata', {}).get('name')}" == client,
          f"rados: rook-cephclient.yaml has a CephClient (ceph.rook.io/v1) for {client}",
          f"{cl.get('apiVersion')} client.{cl.get('metadata', {}).get('name')}")
    check(caps.get("mon") == "allow r" and re.fullmatch(rf"allow rwx pool={re.escape(pool)}", caps.get("osd", "")),
          f"rados: the CephClient's caps are mon 'allow r' osd 'allow rwx pool={pool}'", str(caps))
    bp = rook.get("CephBlockPool")
    check(bp is None or ((bp.get("spec") or {}).get("name") or bp["metadata"]["name"]) == pool
          and (bp.get("spec") or {}).get("application") not in (None, "rbd"),
          f"rados: rook-cephclient.yaml's CephBlockPool is the pool {pool}, with an application other than rbd")

    # The overlay example, and the rendered result.
    okust = (docs.get(f"{OVERLAY}/kustomization.yaml") or [{}])[0]
    odir = DEPLOY / OVERLAY
    o_res = [(odir / r).resolve() for r in okust.get("resources", []) or []]
    o_comp = [(odir / r).resolve() for r in okust.get("components", []) or []]
    check((DEPLOY / "kubernetes").resolve() in o_res and comp_dir.resolve() in o_comp,
          f"rados: {OVERLAY}/kustomization.yaml uses the base deploy/kubernetes and the component",
          f"resources {okust.get('resources')}, components {okust.get('components')}")
    check(not any(odir.resolve().is_relative_to(r) for r in o_res),
          f"rados: {OVERLAY} is outside the base's folder (kustomize refuses a base containing its overlay)")
    render_tool = shutil.which("kubectl") or shutil.which("kustomize")
    if render_tool:
        cmd = [render_tool, "kustomize" if render_tool.endswith("kubectl") else "build", str(odir)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if check(r.returncode == 0, f"rados: {os.path.basename(render_tool)} renders {OVERLAY}",
                 r.stderr.strip().replace("\n", " ")):
            out = [d for d in yaml.safe_load_all(r.stdout) if d]
            ids = {(d["kind"], d["metadata"]["name"]) for d in out}
            kust_ids = {(d.get("kind"), d.get("metadata", {}).get("name"))
                        for f in res for d in docs.get(f"kubernetes/{f}", [])}
            check(ids == kust_ids | {(d.get("kind"), d["metadata"]["name"]) for d in c_objs},
                  f"rados: the overlay renders the base's objects and the component's ({len(out)})", str(sorted(ids)))
            check(all(d["metadata"].get("namespace") == "rdmagate" for d in out if d["kind"] != "Namespace"),
                  "rados: every rendered object is in namespace rdmagate")
            rcm = next((d for d in out if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "rdmagate-config"), {})
            rendered_cfg = yaml.safe_load((rcm.get("data") or {}).get("rdmagate.yaml", "")) or {}
            check(rendered_cfg == rcfg, "rados: the rendered rdmagate-config holds the component's rados config")
            rds = next((d for d in out if d["kind"] == "DaemonSet"), None)
            if rds:
                rspec = rds["spec"]["template"]["spec"]
                rc = next((c for c in rspec["containers"] if c["name"] == "rdmagate"), {})
                ceph_mount_checks(rc, {v["name"]: v for v in rspec.get("volumes", [])}, rendered_cfg, "")
                base_mounts = {m["mountPath"] for c in ds[0]["spec"]["template"]["spec"]["containers"]
                               if c["name"] == "rdmagate" for m in c.get("volumeMounts", [])} if ds else set()
                check(base_mounts <= {m["mountPath"] for m in rc.get("volumeMounts", [])},
                      "rados: the rendered DaemonSet keeps every mount of the base")
    else:
        print("note: neither kubectl nor kustomize: overlays/rados not rendered (its patches checked one by one)")

print(f"python: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)

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
    import kustomize_lite as kl
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
            docs[rel] = [d for d in yaml.load_all(path.read_text(), Loader=kl.LOADER) if d is not None]
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
    m = re.fullmatch(r"`((?:rdmagate|process)_[a-z0-9_]+)`", cells[1])
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
for name in ("job", "node", "pod", "instance", "core"):
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
    check(all(d.get("metadata", {}).get("namespace") in (None, "rdmagate") for ds in k8s.values() for _, d in ds),
          "every object of the base is in namespace rdmagate or none")

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
    probe_port = tel.get("probe_port", 0)
    check(isinstance(probe_port, int) and probe_port > 0 and probe_port != tel_port,
          f"ConfigMap gives the kubelet's probes a listener of their own (telemetry.probe_port {probe_port})",
          "without it a flood or slow-loris of /metrics delays the liveness probe and the pod is restarted")
    for key in ("main_lcore", "lcores"):
        check(key not in (embedded.get("eal") or {}),
              f"ConfigMap leaves eal.{key} to the entrypoint (CPU ids are chosen by the kubelet)")
    check("cores" not in (embedded.get("dataplane") or {}),
          "ConfigMap leaves dataplane.cores to the entrypoint")

    ds = [d for _, d in k8s.get("DaemonSet", [])]
    check(len(ds) == 1, "kubernetes/ has one DaemonSet")


# ---------------------------------------------------------------------------- ceph files in the pod
def mounted_files(c, vols):
    """Path in the container -> (kind, name, key, mode) of every ConfigMap or Secret item mounted read-only."""
    files = {}
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
    return files


def secrets_mount_checks(c, vols, spec, cfg, where):
    """security.secrets_file is the Secret rdmagate-secrets' secrets.yaml, read-only, readable by the owner only
    (the daemon refuses any group or other bit: conf/README.md)."""
    sec = cfg.get("security") or {}
    check(sec.get("authentication") == "required",
          f"{where}: the gateway requires authentication (security.authentication: required)",
          str(sec.get("authentication")))
    f = mounted_files(c, vols).get(sec.get("secrets_file"))
    check(f is not None and f[:3] == ("secret", "rdmagate-secrets", "secrets.yaml"),
          f"{where}: security.secrets_file {sec.get('secrets_file')} is the Secret rdmagate-secrets' "
          "secrets.yaml, mounted read-only", str(f))
    check(f is not None and f[3] & 0o077 == 0, f"{where}: the secrets file is mounted without group or other bits",
          oct(f[3]) if f else "not mounted")
    check("fsGroup" not in (spec.get("securityContext") or {}),
          f"{where}: no pod fsGroup (the kubelet would add group read to the secrets file)")


def ceph_mount_checks(c, vols, cfg, where):
    """store.rados.conf_file and keyring are the ConfigMap's and the Secret's files, mounted read-only."""
    r = (cfg.get("store") or {}).get("rados") or {}
    files = mounted_files(c, vols)
    conf = files.get(r.get("conf_file"))
    check(conf is not None and conf[:3] == ("configMap", "rdmagate-ceph-conf", "ceph.conf"),
          f"{where}: store.rados.conf_file {r.get('conf_file')} is rdmagate-ceph-conf's ceph.conf, "
          "mounted read-only", str(conf))
    key = files.get(r.get("keyring"))
    check(key is not None and key[:3] == ("secret", "rdmagate-ceph-keyring", "keyring"),
          f"{where}: store.rados.keyring {r.get('keyring')} is the Secret rdmagate-ceph-keyring's "
          "keyring, mounted read-only", str(key))
    check(key is not None and key[3] == 0o400, f"{where}: the keyring is mounted with mode 0400",
          oct(key[3]) if key else "not mounted")


# -------------------------------------------------------------------------------- components, overlays
# What each component of kubernetes/components/ does to the base's objects, as (kind, name): the overlays
# built from them must render exactly these. A new component needs its line here.
BASE_OBJECTS = {("Namespace", "rdmagate"), ("PriorityClass", "rdmagate-node-critical"),
                ("ConfigMap", "rdmagate-config"), ("NetworkAttachmentDefinition", "rdmagate-rdma"),
                ("DaemonSet", "rdmagate"), ("Service", "rdmagate-metrics"),
                ("NetworkPolicy", "rdmagate-telemetry")}
COMPONENT_EFFECTS = {  # component: (objects added, objects removed)
    "sriov-vf": (set(), {("NetworkAttachmentDefinition", "rdmagate-rdma")}),
    "host-network": (set(), {("NetworkAttachmentDefinition", "rdmagate-rdma"),
                             ("NetworkPolicy", "rdmagate-telemetry")}),
    "hugepages-1gi": (set(), set()),
    "monitoring": ({("ServiceMonitor", "rdmagate"), ("PrometheusRule", "rdmagate")}, set()),
    "rados": ({("ConfigMap", "rdmagate-ceph-conf")}, set()),
}
SHARED_RDMA = "rdma/rdma_shared_device_a"
VF_RDMA = "nvidia.com/sriov_rdma_vf"
SCRAPE_ANNOTATIONS = ("prometheus.io/scrape", "prometheus.io/port", "prometheus.io/path")
MULTUS = "k8s.v1.cni.cncf.io/networks"

alert_groups = None  # deploy/prometheus/rdmagate-alerts.yml's groups, for the rendered PrometheusRules
if yaml is not None:
    alert_groups = (docs.get("prometheus/rdmagate-alerts.yml") or [{}])[0].get("groups")

if yaml is not None:
    comp_root = DEPLOY / "kubernetes" / "components"
    base_objs = {(d.get("kind"), d.get("metadata", {}).get("name")): d
                 for f in res for d in docs.get(f"kubernetes/{f}", [])}
    components = sorted(p.name for p in comp_root.iterdir() if (p / "kustomization.yaml").is_file())
    check(sorted(COMPONENT_EFFECTS) == components,
          f"every component has its expected effect in check_deploy.py ({', '.join(components)})",
          f"check_deploy.py knows {sorted(COMPONENT_EFFECTS)}")
    comp_files = {}  # component -> (resources, patches): file names
    for comp in components:
        ck = (docs.get(f"kubernetes/components/{comp}/kustomization.yaml") or [{}])[0]
        check(ck.get("apiVersion") == "kustomize.config.k8s.io/v1alpha1" and ck.get("kind") == "Component",
              f"components/{comp}: a kustomize Component (v1alpha1)", f"{ck.get('apiVersion')} {ck.get('kind')}")
        c_res = ck.get("resources", []) or []
        c_patch_entries = ck.get("patches", []) or []
        c_patches = [pt.get("path") if isinstance(pt, dict) else pt for pt in c_patch_entries]
        comp_files[comp] = (c_res, c_patches)
        check((c_res or c_patches) and all(isinstance(f, str) and (comp_root / comp / f).is_file()
                                           for f in c_res + c_patches),
              f"components/{comp}: lists only existing files", str(c_res + c_patches))
        check(all(isinstance(pt, dict) and set(pt) == {"path"} for pt in c_patch_entries),
              f"components/{comp}: patches are files naming their target in themselves (strategic merge)",
              str(c_patch_entries))
        misses = []
        for f in c_patches:
            for d in docs.get(f"kubernetes/components/{comp}/{f}", []):
                key = (d.get("kind"), d.get("metadata", {}).get("name"))
                b = base_objs.get(key)
                if b is None:
                    misses.append(f"{f}: {key[0]}/{key[1]} not in the base")
                elif d.get("apiVersion") != b.get("apiVersion") or \
                        d.get("metadata", {}).get("namespace", "rdmagate") != b.get("metadata", {}).get("namespace"):
                    misses.append(f"{f}: {key[0]}/{key[1]} differs from the base in apiVersion or namespace")
        check(not misses, f"components/{comp}: every patch targets an object of the base (kind, name, namespace)",
              "; ".join(misses))
        added = {(d.get("kind"), d.get("metadata", {}).get("name"))
                 for f in c_res for d in docs.get(f"kubernetes/components/{comp}/{f}", [])}
        check(not (added & set(base_objs)), f"components/{comp}: its resources add objects, none of the base's",
              str(sorted(added & set(base_objs))))

    # The overlays: the base plus components, each a directory beside the base (kustomize refuses a base
    # whose folder contains its overlay: "cycle detected").
    overlays = {}  # "overlays/NAME" -> list of component names
    used_components = set()
    for odir in sorted(p for p in (DEPLOY / "overlays").iterdir() if p.is_dir()):
        rel = f"overlays/{odir.name}"
        ok_ = (docs.get(f"{rel}/kustomization.yaml") or [{}])[0]
        o_res = [(odir / r).resolve() for r in ok_.get("resources", []) or []]
        o_comp = [(odir / r).resolve() for r in ok_.get("components", []) or []]
        known = [p for p in o_comp if p.parent == comp_root.resolve() and p.name in COMPONENT_EFFECTS]
        check(o_res == [(DEPLOY / "kubernetes").resolve()] and o_comp and known == o_comp
              and set(ok_) <= {"apiVersion", "kind", "resources", "components"},
              f"{rel}/kustomization.yaml uses the base deploy/kubernetes and known components only",
              f"resources {ok_.get('resources')}, components {ok_.get('components')}, keys {sorted(ok_)}")
        overlays[rel] = [p.name for p in known]
        used_components |= set(overlays[rel])
    check(set(components) <= used_components, "every component is rendered by some overlay",
          f"unused: {sorted(set(components) - used_components)}")


# --------------------------------------------------------------------------------- rendered overlays
def render_kubectl(path):
    """kubectl kustomize PATH (or kustomize build); None when neither is usable here."""
    if os.environ.get("CHECK_DEPLOY_NO_KUBECTL") == "1":
        return None
    tool = shutil.which("kubectl") or shutil.which("kustomize")
    if not tool:
        return None
    cmd = [tool, "kustomize" if os.path.basename(tool) == "kubectl" else "build", str(path)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return r.stderr.strip().replace("\n", " ")
    return [d for d in yaml.load_all(r.stdout, Loader=kl.LOADER) if d]


def first_difference(a, b, path=""):
    if type(a) is not type(b):
        return f"{path}: {a!r} vs {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'kubectl' if k in a else 'kustomize_lite'}"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def check_rendered(where, comps, objs):
    """Every check of one rendered variant: `where` names it, comps are its components."""
    ids = [(d.get("kind"), d["metadata"].get("namespace"), d["metadata"].get("name")) for d in objs]
    check(len(ids) == len(set(ids)), f"{where}: no object twice",
          str(sorted(i for i in ids if ids.count(i) > 1)))
    expected = set(BASE_OBJECTS)
    for comp in comps:
        expected = (expected | COMPONENT_EFFECTS[comp][0]) - COMPONENT_EFFECTS[comp][1]
    got = {(k, n) for k, _, n in ids}
    check(got == expected, f"{where}: renders the {len(expected)} objects expected",
          f"missing {sorted(expected - got)}, unexpected {sorted(got - expected)}")
    check(all((d["metadata"].get("namespace") is None) == (d["kind"] in kl.CLUSTER_SCOPED) for d in objs)
          and all(d["metadata"].get("namespace") in (None, "rdmagate") for d in objs),
          f"{where}: namespaced objects in rdmagate, cluster-scoped ones "
          f"({', '.join(sorted(kl.CLUSTER_SCOPED & {k for k, _ in got}))}) in none")
    by_kind = {}
    for d in objs:
        by_kind.setdefault(d["kind"], []).append(d)

    # The daemon config the pod gets: the base's, or the rados component's.
    cm = next((d for d in by_kind.get("ConfigMap", []) if d["metadata"]["name"] == "rdmagate-config"), {})
    cfg = yaml.safe_load((cm.get("data") or {}).get("rdmagate.yaml", "")) or {}
    want_cfg = rados_cfg if "rados" in comps else embedded
    check(cfg == want_cfg,
          f"{where}: rdmagate-config holds the {'rados component' if 'rados' in comps else 'base'}'s config")
    cfg_tel = cfg.get("telemetry") or {}
    tel_port_ = cfg_tel.get("port", 9464)

    dss = by_kind.get("DaemonSet", [])
    if not check(len(dss) == 1, f"{where}: one DaemonSet"):
        return cfg
    d = dss[0]
    spec = d["spec"]["template"]["spec"]
    meta = d["spec"]["template"]["metadata"]
    ann = meta.get("annotations") or {}
    check(d["spec"]["selector"]["matchLabels"].items() <= (meta.get("labels") or {}).items(),
          f"{where}: DaemonSet selector matches its pod labels")
    c = next((c for c in spec["containers"] if c["name"] == "rdmagate"), None)
    if not check(c is not None, f"{where}: DaemonSet has a container named rdmagate"):
        return cfg
    req = (c.get("resources") or {}).get("requests", {})
    lim = (c.get("resources") or {}).get("limits", {})
    check(req == lim, f"{where}: container requests == limits (Guaranteed QoS)", f"{req} vs {lim}")
    check(re.fullmatch(r"[1-9][0-9]*", str(lim.get("cpu", ""))) is not None,
          f"{where}: CPU limit is a whole number ({lim.get('cpu')}), as exclusive cores need")

    # Hugepages: one page size, in requests, limits and the emptyDir's medium alike.
    size = "1Gi" if "hugepages-1gi" in comps else "2Mi"
    hp_keys = sorted(k for k in set(req) | set(lim) if k.startswith("hugepages-"))
    check(hp_keys == [f"hugepages-{size}"], f"{where}: container requests hugepages-{size} only", str(hp_keys))
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    hp_dir = (cfg.get("eal") or {}).get("hugepage_dir") or "/dev/hugepages"
    medium = vols.get(mounts.get(hp_dir, ""), {}).get("emptyDir", {}).get("medium")
    check(medium == f"HugePages-{size}", f"{where}: a HugePages-{size} emptyDir is mounted at eal.hugepage_dir "
          f"({hp_dir})", f"medium {medium}")
    page_mib = 1024 if size == "1Gi" else 2
    m = re.fullmatch(r"([0-9]+)(Mi|Gi)", str(lim.get(f"hugepages-{size}", "")))
    hp_mib = int(m.group(1)) * (1024 if m.group(2) == "Gi" else 1) if m else 0
    mem_mib = (cfg.get("eal") or {}).get("memory_mib", 0)
    check(hp_mib > 0 and hp_mib % page_mib == 0 and 0 < mem_mib <= hp_mib,
          f"{where}: eal.memory_mib {mem_mib} fits in the hugepages-{size} limit ({hp_mib} MiB, whole pages)")

    # The RDMA device: the shared device plugin's resource, or one VF with sriov-vf.
    rdma = sorted(k for k in lim if k in (SHARED_RDMA, VF_RDMA) or "rdma" in k)
    want = VF_RDMA if "sriov-vf" in comps else SHARED_RDMA
    check(rdma == [want] and str(lim[want]) == "1", f"{where}: container requests {want}: 1 and no other RDMA "
          "resource", str({k: lim[k] for k in rdma}))

    # The device: named in the config for the shared device plugin (every device of the node is visible);
    # with a VF the pod sees only its own, whose name the device plugin's choice decides: auto.
    args = c.get("args", []) + c.get("command", [])
    dev = next((a.split("=", 1)[1] for prev, a in zip(args, args[1:])
                if prev == "--set" and a.startswith("device.name=")), (cfg.get("device") or {}).get("name"))
    check((dev == "auto") == ("sriov-vf" in comps) and dev, f"{where}: device.name {dev} (auto with a VF only)")

    # Pod network: Multus with a NetworkAttachmentDefinition (rendered, or generated by the SriovNetwork),
    # or the node's network.
    nads = [n["metadata"]["name"] for n in by_kind.get("NetworkAttachmentDefinition", [])]
    if "host-network" in comps:
        check(spec.get("hostNetwork") is True and spec.get("dnsPolicy") == "ClusterFirstWithHostNet",
              f"{where}: hostNetwork with dnsPolicy ClusterFirstWithHostNet",
              f"hostNetwork {spec.get('hostNetwork')}, dnsPolicy {spec.get('dnsPolicy')}")
        check(MULTUS not in ann and not nads, f"{where}: no Multus annotation, no NetworkAttachmentDefinition")
        # The kubelet probes the pod IP, which is then the node's: loopback cannot answer it.
        check(cfg_tel.get("bind_address") not in (None, "127.0.0.1", "::1", "localhost"),
              f"{where}: telemetry binds {cfg_tel.get('bind_address')}, reachable on the node's address "
              "(probes, Prometheus)")
    else:
        check(not spec.get("hostNetwork") and "dnsPolicy" not in spec, f"{where}: the pod's own network namespace")
        net = ann.get(MULTUS, "").split("/")[-1]
        if "sriov-vf" in comps:
            check(net in sriov_networks and not nads,
                  f"{where}: the Multus annotation names the SriovNetwork's generated network ({net}), "
                  "no NetworkAttachmentDefinition of its own", f"SriovNetworks {sorted(sriov_networks)}, NADs {nads}")
        else:
            check(net != "" and net in nads, f"{where}: the Multus annotation names a rendered "
                  f"NetworkAttachmentDefinition ({net})", str(nads))

    # Scraping: pod annotations, or the Prometheus Operator's objects with monitoring; never both.
    sms = by_kind.get("ServiceMonitor", [])
    prs = by_kind.get("PrometheusRule", [])
    svc = by_kind.get("Service", [])
    if "monitoring" in comps:
        check(not any(a in ann for a in SCRAPE_ANNOTATIONS), f"{where}: no prometheus.io/* scrape annotations "
              "(the ServiceMonitor scrapes)", str(sorted(a for a in ann if a.startswith("prometheus.io"))))
        if check(len(sms) == 1 and len(prs) == 1 and len(svc) == 1,
                 f"{where}: a ServiceMonitor, a PrometheusRule and the metrics Service"):
            sm, s = sms[0]["spec"], svc[0]
            check(sm["endpoints"][0].get("port") in [p["name"] for p in s["spec"]["ports"]]
                  and sm["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
                  and s["metadata"]["namespace"] in sm.get("namespaceSelector", {}).get("matchNames", []),
                  f"{where}: the ServiceMonitor selects the Service {s['metadata']['name']} and scrapes its "
                  "named port")
            check(prs[0]["spec"].get("groups") == alert_groups and alert_groups,
                  f"{where}: the PrometheusRule's groups are deploy/prometheus/rdmagate-alerts.yml's",
                  first_difference(alert_groups, prs[0]["spec"].get("groups"), "groups") or "")
    else:
        check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == str(tel_port_)
              and not sms and not prs,
              f"{where}: scraped by pod annotations on the telemetry port {tel_port_}, no ServiceMonitor")

    # Priority: the PriorityClass rendered with it, above ordinary pods, below the system classes.
    pcs = {p["metadata"]["name"]: p for p in by_kind.get("PriorityClass", [])}
    pc = pcs.get(spec.get("priorityClassName"))
    check(pc is not None and not pc["metadata"]["name"].startswith("system-")
          and 0 < pc.get("value", 0) <= 1000000000 and not pc.get("globalDefault", False),
          f"{where}: priorityClassName {spec.get('priorityClassName')} is a rendered PriorityClass, value "
          f"{(pc or {}).get('value')} in (0, 1e9], not a global default")

    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    # The probes go to telemetry.probe_port when the config has one (its own listener and threads, which a
    # flood of /metrics cannot hold), else to telemetry.port.
    probe_port_ = cfg_tel.get("probe_port") or tel_port_
    for kind, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        p = c.get(kind, {}).get("httpGet", {})
        check(p.get("path") == path and ports.get(p.get("port"), p.get("port")) == probe_port_,
              f"{where}: {kind} GETs {path} on the "
              f"{'probe' if probe_port_ != tel_port_ else 'telemetry'} port {probe_port_}", str(p))

    # Who may connect: the monitoring namespace to the metrics port, nobody else (the kubelet's probes come
    # from the node, which a NetworkPolicy always admits). Host-network pods are not subject to one.
    nps = by_kind.get("NetworkPolicy", [])
    if "host-network" in comps:
        check(not nps, f"{where}: no NetworkPolicy (it would not apply to a host-network pod)")
    elif check(len(nps) == 1, f"{where}: one NetworkPolicy"):
        np_ = nps[0]["spec"]
        sel = (np_.get("podSelector") or {}).get("matchLabels") or {}
        rules = np_.get("ingress") or []
        peers = [peer for r in rules for peer in (r.get("from") or [{}])]
        rule_ports = [ports.get(p.get("port"), p.get("port")) for r in rules for p in (r.get("ports") or [{}])]
        check(sel and sel.items() <= (meta.get("labels") or {}).items() and "Ingress" in np_.get("policyTypes", []),
              f"{where}: the NetworkPolicy selects the gateway pods for Ingress", f"{sel} {np_.get('policyTypes')}")
        check(bool(peers) and all(set(peer) == {"namespaceSelector"} and
                                  (peer["namespaceSelector"] or {}).get("matchLabels") ==
                                  {"kubernetes.io/metadata.name": "monitoring"} for peer in peers),
              f"{where}: the NetworkPolicy admits only the monitoring namespace (kubernetes.io/metadata.name)",
              str(peers))
        check(rule_ports == [tel_port_] and all(p.get("protocol", "TCP") == "TCP"
                                               for r in rules for p in (r.get("ports") or [{}])),
              f"{where}: the NetworkPolicy opens only the metrics port {tel_port_} (TCP)", str(rule_ports))
    sc = c.get("securityContext", {})
    check(not sc.get("privileged", False) and "IPC_LOCK" in sc.get("capabilities", {}).get("add", [])
          and "ALL" in sc.get("capabilities", {}).get("drop", []),
          f"{where}: container unprivileged, all capabilities dropped but IPC_LOCK (and what it adds)")
    cfg_path = args[args.index("--config") + 1] if "--config" in args else ""
    cfg_vol = vols.get(mounts.get(os.path.dirname(cfg_path), ""), {})
    check(cfg_vol.get("configMap", {}).get("name") == "rdmagate-config"
          and os.path.basename(cfg_path) == "rdmagate.yaml",
          f"{where}: --config {cfg_path} is the ConfigMap's rdmagate.yaml")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    drain_ms = (cfg.get("protocol") or {}).get("drain_timeout_ms", default_drain_ms)
    check(grace >= 2 * drain_ms / 1000 + 5,
          f"{where}: terminationGracePeriodSeconds {grace} > the two drain phases (2 x {drain_ms} ms) + 5 s")
    check(bool(spec.get("nodeSelector")) and bool(spec.get("tolerations")),
          f"{where}: DaemonSet has a nodeSelector and tolerations for RDMA nodes")
    env = {e["name"]: e for e in c.get("env", [])}
    check(env.get("RDMAGATE_CORES_FROM_AFFINITY", {}).get("value") == "1",
          f"{where}: entrypoint derives the lcores from the CPU affinity")
    secrets_mount_checks(c, vols, spec, cfg, where)
    if "rados" in comps:
        ceph_mount_checks(c, vols, cfg, where)
        base_mounts = {m["mountPath"] for bc in ds[0]["spec"]["template"]["spec"]["containers"]
                       if bc["name"] == "rdmagate" for m in bc.get("volumeMounts", [])} if ds else set()
        check(base_mounts <= set(mounts), f"{where}: the DaemonSet keeps every mount of the base")
    return cfg


# ------------------------------------------------------------------------------- rados component
# kubernetes/components/rados switches the base to store.backend: rados. Checked here: the config it puts
# in place (keys, backend, unchanged outside store), the ceph.conf template, its DaemonSet patch, the
# optional Rook manifests, no committed key; the rendered variants with it are checked below.
COMP = "kubernetes/components/rados"
rados_cfg = {}
if yaml is not None and (DEPLOY / COMP / "kustomization.yaml").is_file():
    comp_dir = DEPLOY / COMP
    c_res, c_patches = comp_files["rados"]
    check("rook-cephclient.yaml" not in c_res and (comp_dir / "rook-cephclient.yaml").is_file(),
          "rados: rook-cephclient.yaml exists and is not a resource of the component (Rook's namespace and CRDs)")

    def comp_docs(f):
        return docs.get(f"{COMP}/{f}", [])

    c_objs = [d for f in c_res for d in comp_docs(f)]
    check(all(d.get("metadata", {}).get("namespace") == "rdmagate" for d in c_objs),
          "rados: the component's resources are in namespace rdmagate")

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
    rados_cfg = rcfg
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

# ----------------------------------------------------------------------------------- sriov component
# sriovnetwork.yaml is applied on its own (the operator's namespace): its SriovNetwork must generate the
# network the pod's Multus annotation names, for the VF resource the component requests, with rdma-cni.
sriov_networks = set()
if yaml is not None:
    sn = {d.get("kind"): d for d in docs.get("kubernetes/components/sriov-vf/sriovnetwork.yaml", [])}
    pol = sn.get("SriovNetworkNodePolicy", {}).get("spec") or {}
    net = sn.get("SriovNetwork", {})
    nspec = net.get("spec") or {}
    prefix, _, vf_name = VF_RDMA.partition("/")
    check(pol.get("isRdma") is True and pol.get("resourceName") == vf_name == nspec.get("resourceName"),
          f"sriov-vf: the SriovNetworkNodePolicy (isRdma) and the SriovNetwork use the resource {vf_name} "
          f"the component requests as {VF_RDMA}",
          f"isRdma {pol.get('isRdma')}, resourceName {pol.get('resourceName')} / {nspec.get('resourceName')}")
    try:
        meta_plugins = json.loads(nspec.get("metaPlugins") or "{}")
    except ValueError:
        meta_plugins = {}
    check(nspec.get("networkNamespace") == "rdmagate" and meta_plugins.get("type") == "rdma",
          "sriov-vf: the SriovNetwork generates its network in namespace rdmagate, with rdma-cni (metaPlugins)",
          f"networkNamespace {nspec.get('networkNamespace')}, metaPlugins {meta_plugins}")
    if nspec.get("networkNamespace") == "rdmagate":
        sriov_networks.add(net.get("metadata", {}).get("name"))

# ---------------------------------------------------------------------------------- every variant
# The base and every overlay, rendered by kubectl (or kustomize) when present and always by
# kustomize_lite.py, which must agree with it; the checks run on kubectl's output when there is one.
# CHECK_DEPLOY_RENDER_DIR: where to write each variant's objects (NAME.objects.yaml), its daemon config
# (NAME.rdmagate.yaml), the daemon arguments the pod adds to --config (NAME.args, one per line) and its CPU
# limit (NAME.cpus), for check-deploy.sh's field check and --check-config.
# CHECK_DEPLOY_NO_KUBECTL=1: render with kustomize_lite.py only.
if yaml is not None:
    render_dir = os.environ.get("CHECK_DEPLOY_RENDER_DIR")
    variants = {"kubernetes": []}
    variants.update(overlays)
    kubectl_missing_noted = False
    for rel, comps in variants.items():
        path = DEPLOY / rel
        try:
            lite = kl.render(path)
            lite_err = None
        except (kl.Unsupported, yaml.YAMLError, OSError) as e:
            lite, lite_err = None, str(e)
        check(lite is not None, f"{rel}: kustomize_lite.py renders it", lite_err or "")
        real = render_kubectl(path)
        if real is None:
            if not kubectl_missing_noted:
                print("note: kubectl/kustomize not used: every variant checked as kustomize_lite.py renders it")
                kubectl_missing_noted = True
            objs = lite
        elif isinstance(real, str):
            check(False, f"{rel}: kubectl kustomize renders it", real)
            objs = lite
        else:
            objs = real
            if lite is not None:
                a = {kl.object_id(o): o for o in real}
                b = {kl.object_id(o): o for o in lite}
                diff = None if set(a) == set(b) else f"objects {sorted(set(a) ^ set(b), key=str)}"
                for k in sorted(set(a) & set(b), key=str):
                    diff = diff or first_difference(a[k], b[k], f"{k[0]}/{k[2]}")
                check(diff is None, f"{rel}: kubectl kustomize and kustomize_lite.py render the same "
                      f"{len(real)} objects", diff or "")
        if objs is None:
            continue
        cfg = check_rendered(rel, comps, objs)
        if render_dir:
            name = rel.replace("/", "-")
            Path(render_dir, f"{name}.objects.yaml").write_text(yaml.safe_dump_all(objs, sort_keys=False))
            Path(render_dir, f"{name}.rdmagate.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
            c = next((c for d in objs if d["kind"] == "DaemonSet"
                      for c in d["spec"]["template"]["spec"]["containers"] if c["name"] == "rdmagate"), {})
            args = list(c.get("args", []))
            if "--config" in args:
                del args[args.index("--config"):args.index("--config") + 2]
            Path(render_dir, f"{name}.args").write_text("".join(f"{a}\n" for a in args))
            Path(render_dir, f"{name}.cpus").write_text(f"{(c.get('resources') or {}).get('limits', {}).get('cpu')}\n")


# --------------------------------------------------------------------------------------------- alerts
def github_anchor(heading):
    """The fragment GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


RUNBOOK_PARTS = ("Meaning", "Impact", "Likely causes", "Check", "Fix")
if yaml is not None and alert_groups:
    rules = [r for g in alert_groups for r in g.get("rules", [])]
    alerts = [r for r in rules if "alert" in r]
    records = {r["record"] for r in rules if "record" in r}
    unknown, label_errors = [], []
    for r in rules:
        where = r.get("alert") or r.get("record")
        for name in metric_names(r["expr"]):
            if name not in BUILTIN_SERIES and name not in records and base_metric(name) is None:
                unknown.append(f"{where}: {name}")
        label_errors += [f"{where}: {p}" for p in label_problems(r["expr"])]
    check(not unknown, f"every metric the {len(rules)} rules read is in docs/metrics.md",
          "unknown: " + "; ".join(unknown))
    check(not label_errors, "every label the rules filter or group by exists on its metric", "; ".join(label_errors))
    check(all(r.get("labels", {}).get("severity") in ("critical", "warning") and r.get("for")
              and r.get("annotations", {}).get("summary") and r.get("annotations", {}).get("description")
              for r in alerts), f"every one of the {len(alerts)} alerts has a severity, a for:, a summary and a "
          "description")

    # promtool test rules: every alert fires on some input and stays silent on some other.
    tests = yaml.safe_load((SRC / "tests" / "deploy" / "rdmagate-alerts.test.yml").read_text()) or {}
    fires, silent = set(), set()
    for t in tests.get("tests", []):
        for a in t.get("alert_rule_test", []):
            (fires if a.get("exp_alerts") else silent).add(a.get("alertname"))
    names = [a["alert"] for a in alerts]
    check(set(names) <= fires and set(names) <= silent,
          "tests/deploy/rdmagate-alerts.test.yml has a firing and a silent case for every alert",
          f"never fires: {sorted(set(names) - fires)}, never silent: {sorted(set(names) - silent)}")

    # docs/alerts.md: a "## AlertName" section per alert, with its runbook parts, at the runbook_url's anchor.
    alerts_md = (SRC / "docs" / "alerts.md").read_text() if (SRC / "docs" / "alerts.md").is_file() else ""
    sections = {}  # anchor -> (heading, body)
    for m in re.finditer(r"^## (.+)\n((?:(?!^## ).*\n?)*)", alerts_md, re.M):
        sections[github_anchor(m.group(1))] = (m.group(1).strip(), m.group(2))
    bad_urls, bad_parts = [], []
    for a in alerts:
        url = a.get("annotations", {}).get("runbook_url", "")
        m = re.fullmatch(r"https://[^#\s]+/docs/alerts\.md#([\w-]+)", url)
        sec = sections.get(m.group(1)) if m else None
        if sec is None or sec[0] != a["alert"]:
            bad_urls.append(f"{a['alert']}: {url or 'no runbook_url'}")
        elif missing := [p for p in RUNBOOK_PARTS if f"**{p}.**" not in sec[1]]:
            bad_parts.append(f"{a['alert']} lacks {', '.join(missing)}")
    check(not bad_urls, f"every alert's runbook_url points at its own section of docs/alerts.md "
          f"({len(alerts) - len(bad_urls)} of {len(alerts)})", "; ".join(bad_urls))
    check(not bad_parts, "every runbook section has " + ", ".join(f"**{p}.**" for p in RUNBOOK_PARTS),
          "; ".join(bad_parts))
    stale = sorted(h for h, _ in sections.values() if re.fullmatch(r"Rdmagate\w+", h) and h not in names)
    check(not stale, "docs/alerts.md has no section for an alert the rules lack", str(stale))

    gen = DEPLOY / "prometheus" / "generate-prometheusrule.py"
    r = subprocess.run([sys.executable, str(gen), "--check"], capture_output=True, text=True)
    check(r.returncode == 0, "components/monitoring/prometheusrule.yaml is what generate-prometheusrule.py makes "
          "of rdmagate-alerts.yml", r.stderr.strip())
    pr = (docs.get("kubernetes/components/monitoring/prometheusrule.yaml") or [{}])[0]
    check((pr.get("spec") or {}).get("groups") == alert_groups,
          "components/monitoring/prometheusrule.yaml carries rdmagate-alerts.yml's groups",
          first_difference(alert_groups, (pr.get("spec") or {}).get("groups"), "groups") or "")

print(f"python: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)

#!/bin/bash
# Keeps deploy/ honest: manifests parse and agree with each other, with conf/rdmagate.yaml and with
# docs/metrics.md; every variant (the base deploy/kubernetes and each overlay of deploy/overlays, built
# from the components of kubernetes/components) renders and has what its components promise; the alert
# rules, their promtool tests, the PrometheusRule and docs/alerts.md agree; the systemd unit has what the
# daemon's contract needs; the container scripts work.
#
#   check-deploy.sh SOURCE_DIR [RDMAGATE_BINARY BUILD_DIR]
#
# With the daemon binary (built in this configuration) it also runs `rdmagate --check-config` on every
# variant's config and checks the Dockerfile's runtime package list against what the binary links
# (skipped with CHECK_DEPLOY_RUNTIME_DEPS=0: a sanitizer build links libasan). Structured checks run in
# check_deploy.py when python3 is present; without python3 (or PyYAML) simpler grep checks stand in.
# The variants are rendered with `kubectl kustomize` when kubectl is on the PATH (CHECK_DEPLOY_NO_KUBECTL=1
# hides it) and always with tests/deploy/kustomize_lite.py, which must agree with kubectl.
# Last line: "check-deploy: N passed, N failed"; exit 1 if any failed.
#
# SELF_TEST: unless CHECK_DEPLOY_NO_SELF_TEST=1, the checks are also run on broken copies of the tree
# (a renamed metric, a missing probe, an unknown config section), each of which must fail.
set -uo pipefail

src=$(cd "${1:?usage: $0 SOURCE_DIR [RDMAGATE_BINARY BUILD_DIR]}" && pwd)
binary=${2:-}
build_dir=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
deploy=$src/deploy
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
fails() { ! "$@" >/dev/null 2>&1; } # fails command...: succeeds when the command fails
expect() { # expect "message" command...: pass when the command succeeds
  local msg=$1
  shift
  if "$@"; then ok "$msg"; else bad "$msg"; fi
}

have_python=0
have_yaml=0
# CHECK_DEPLOY_NO_PYTHON=1 exercises the fallback on a machine that has python3.
if [ "${CHECK_DEPLOY_NO_PYTHON:-0}" != 1 ] && command -v python3 >/dev/null; then
  have_python=1
  python3 -c 'import yaml' 2>/dev/null && have_yaml=1
fi

# -------------------------------------------------------------------------------- structured checks
if [ "$have_python" = 1 ]; then
  mkdir "$tmp/rendered"
  if CHECK_DEPLOY_RENDER_DIR=$tmp/rendered python3 "$here/check_deploy.py" "$src" >"$tmp/py.out" 2>&1; then
    ok "check_deploy.py: $(tail -n1 "$tmp/py.out")"
  else
    bad "check_deploy.py: $(tail -n1 "$tmp/py.out")"
  fi
  grep -E '^(FAIL|note):' "$tmp/py.out" | sed 's/^/  /'
  if [ "$have_yaml" = 1 ]; then
    # The base and every overlay: what the field check and --check-config below read.
    variants=$(($(find "$deploy/overlays" -mindepth 2 -maxdepth 2 -name kustomization.yaml | wc -l) + 1))
    n=$(find "$tmp/rendered" -name '*.objects.yaml' | wc -l)
    expect "check_deploy.py rendered the base and every overlay ($n of $variants)" test "$n" = "$variants"
  fi
else
  echo "note: no python3: grep-based checks only"
  if command -v jq >/dev/null; then
    expect "dashboard parses as JSON (jq)" jq empty "$deploy/grafana/rdmagate-dashboard.json"
  fi
  unknown=""
  for m in $(grep -o 'rdmagate_[a-z0-9_]*' "$deploy/grafana/rdmagate-dashboard.json" | sort -u); do
    base=$m
    grep -q "\`$base\`" "$src/docs/metrics.md" || base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$m")
    grep -q "\`$base\`" "$src/docs/metrics.md" || unknown="$unknown $m"
  done
  if [ -z "$unknown" ]; then ok "dashboard metric names are in docs/metrics.md"; else
    bad "dashboard metric names not in docs/metrics.md:$unknown"; fi
fi

# The ConfigMap's embedded rdmagate.yaml, unindented (awk: no YAML library needed).
awk '/^  rdmagate.yaml: \|/ {on=1; next} on && /^    / {print substr($0, 5); next} on && /^$/ {print; next}
     on {exit}' "$deploy/kubernetes/configmap.yaml" >"$tmp/configmap-rdmagate.yaml"
expect "ConfigMap embeds a non-empty rdmagate.yaml" test -s "$tmp/configmap-rdmagate.yaml"
# ... and the rados component's replacement of it (same layout).
rados=$deploy/kubernetes/components/rados
awk '/^  rdmagate.yaml: \|/ {on=1; next} on && /^    / {print substr($0, 5); next} on && /^$/ {print; next}
     on {exit}' "$rados/configmap-rados.yaml" >"$tmp/rados-rdmagate.yaml"
expect "rados component embeds a non-empty rdmagate.yaml" test -s "$tmp/rados-rdmagate.yaml"

if [ "$have_yaml" = 0 ]; then
  echo "note: no PyYAML: YAML files checked with grep only"
  ds=$deploy/kubernetes/daemonset.yaml
  expect "DaemonSet requests hugepages-2Mi" grep -q 'hugepages-2Mi:' "$ds"
  expect "DaemonSet requests an RDMA resource" grep -q 'rdma/[a-z_]*: 1' "$ds"
  expect "DaemonSet probes /healthz" grep -q 'path: /healthz' "$ds"
  expect "DaemonSet probes /readyz" grep -q 'path: /readyz' "$ds"
  ref_sections=$(grep -oE '^[a-z_]+:' "$src/conf/rdmagate.yaml" | sort -u)
  extra=$(grep -oE '^[a-z_]+:' "$tmp/configmap-rdmagate.yaml" | sort -u | comm -23 - <(echo "$ref_sections"))
  if [ -z "$extra" ]; then ok "ConfigMap's rdmagate.yaml uses only sections of conf/rdmagate.yaml"; else
    bad "ConfigMap's rdmagate.yaml has unknown sections: $extra"; fi
  expect "rados component: store.backend: rados" grep -qx '  backend: rados' "$tmp/rados-rdmagate.yaml"
  expect "rados component: a kustomize Component" grep -qx 'kind: Component' "$rados/kustomization.yaml"
  expect "rados component: /etc/ceph mounted read-only" \
    bash -c "grep -A1 'mountPath: /etc/ceph\$' '$rados/daemonset-ceph.yaml' | grep -q 'readOnly: true'"
  expect "rados component: keyring mode 0400" grep -q 'mode: 0400' "$rados/daemonset-ceph.yaml"
  expect "rados component: no cephx key committed" \
    bash -c "! grep -qE 'key *= *AQ[A-Za-z0-9+/]{20,}' '$rados'/*"
fi

if [ "$have_yaml" = 0 ] && [ "${CHECK_DEPLOY_NO_KUBECTL:-0}" != 1 ] && command -v kubectl >/dev/null; then
  # check_deploy.py renders and checks every variant; without PyYAML only whether kubectl renders them.
  for dir in "$deploy/kubernetes" "$deploy"/overlays/*/; do
    dir=${dir%/}
    if kubectl kustomize "$dir" >"$tmp/kustomized.yaml" 2>"$tmp/kustomize.err"; then
      ok "kubectl kustomize renders ${dir#"$deploy"/} ($(grep -c '^kind:' "$tmp/kustomized.yaml") objects)"
    else
      bad "kubectl kustomize ${dir#"$deploy"/}: $(tr '\n' ' ' <"$tmp/kustomize.err")"
    fi
  done
fi

# Field-level schema check, with whichever python has the Kubernetes client (Debian: python3-kubernetes).
k8s_python=
for py in python3 /usr/bin/python3; do
  if [ "$have_python" = 1 ] && command -v "$py" >/dev/null && "$py" -c 'import kubernetes, yaml' 2>/dev/null; then
    k8s_python=$py
    break
  fi
done
if [ -n "$k8s_python" ]; then
  # The base's files, the components' (patches are partial objects: their fields are checked all the same)
  # and every variant as check_deploy.py rendered it, i.e. as the cluster would get it.
  if "$k8s_python" "$here/k8s_schema.py" "$deploy"/kubernetes/*.yaml "$deploy"/kubernetes/components/*/*.yaml \
     >"$tmp/schema.out" 2>&1; then
    ok "Kubernetes objects of deploy/kubernetes have only known fields ($(grep -c '^ok:' "$tmp/schema.out") checked)"
  else
    bad "Kubernetes field check: $(grep -v '^ok:\|^skip:' "$tmp/schema.out" | tr '\n' ' ')"
  fi
  for f in "$tmp"/rendered/*.objects.yaml; do
    [ -e "$f" ] || continue
    v=$(basename "$f" .objects.yaml)
    if "$k8s_python" "$here/k8s_schema.py" "$f" >"$tmp/schema.out" 2>&1; then
      skipped=$(sed -n 's/^skip: [^:]*: \([A-Za-z]*\) .*/\1/p' "$tmp/schema.out" | tr '\n' ' ')
      skipped=${skipped:+ (custom kinds not modelled: ${skipped% })}
      ok "$v rendered: $(grep -c '^ok:' "$tmp/schema.out") objects have only known fields$skipped"
    else
      bad "$v rendered: $(grep '^FAIL:' "$tmp/schema.out" | sed "s|^FAIL: $f: ||" | tr '\n' ' ')"
    fi
  done
else
  echo "note: no python Kubernetes client: field names of the manifests not checked (apt-get install python3-kubernetes)"
fi

# --------------------------------------------------------------------------------------------- systemd
unit=$deploy/systemd/rdmagate.service
# grep reads all of sed's output (no -q): under pipefail, grep -q leaving early would fail the pipeline with
# sed's SIGPIPE whenever sed had more of the section still to write.
svc() { sed -n '/^\[Service\]/,/^\[/p' "$unit" | grep -xF -- "$1" >/dev/null; }
expect "unit: Type=notify" svc "Type=notify"
expect "unit: ExecStart runs the config" svc "ExecStart=/usr/bin/rdmagate --config /etc/rdmagate/rdmagate.yaml"
expect "unit: a config error (exit 78) is not restarted" svc "RestartPreventExitStatus=78"
expect "unit: no ExecStartPre (its exit status escapes RestartPreventExitStatus)" \
  sh -c "! grep -q '^ExecStartPre=' '$unit'"
expect "unit: ExecReload sends SIGHUP" svc 'ExecReload=/bin/kill -HUP $MAINPID'
expect "unit: LimitMEMLOCK=infinity" svc "LimitMEMLOCK=infinity"
expect "unit: ambient CAP_IPC_LOCK" svc "AmbientCapabilities=CAP_IPC_LOCK"
expect "unit: Restart=on-failure" svc "Restart=on-failure"
expect "unit: WatchdogSec= set (the daemon pings only while every core makes progress)" \
  sh -c "sed -n '/^\[Service\]/,/^\[/p' '$unit' | grep -qE '^WatchdogSec=[1-9][0-9]*s?$'"
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$unit")
expect "unit: TimeoutStopSec=${stop:-?} >= 30 (above the drain)" test "${stop:-0}" -ge 30
expect "unit: no PrivateDevices (it hides /dev/infiniband)" \
  bash -c "! grep -qE '^PrivateDevices=(yes|true|1)' '$unit'"
if command -v systemd-analyze >/dev/null; then
  # On a build host the daemon is usually not installed: that one complaint is expected.
  out=$(cd "$deploy/systemd" && systemd-analyze verify --man=no ./rdmagate.service ./rdmagate-hugepages.service \
        2>&1 | grep -vE 'Command /usr/bin/rdmagate is not executable|^$' || true)
  if [ -z "$out" ]; then ok "systemd-analyze verify: units are clean"; else
    bad "systemd-analyze verify: $(tr '\n' ' ' <<<"$out")"; fi
else
  echo "note: no systemd-analyze: unit syntax not verified"
fi

# ------------------------------------------------------------------------------------------- container
c=$deploy/container
for f in rdmagate-entrypoint rdmagate-healthcheck check-runtime-deps.sh; do
  expect "container/$f is executable and parses" bash -c "test -x '$c/$f' && bash -n '$c/$f'"
done
for f in $(grep -oE '(deploy/container|tools|conf)/[A-Za-z0-9_./-]+' "$c/Dockerfile" | sort -u); do
  expect "Dockerfile's $f exists" test -e "$src/$f"
done
if command -v shellcheck >/dev/null; then
  expect "shellcheck: container scripts and this test" shellcheck -S warning "$c/rdmagate-entrypoint" \
    "$c/rdmagate-healthcheck" "$c/check-runtime-deps.sh" "$0"
fi

# Entrypoint: a stub daemon prints its arguments, one per line.
printf '#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n' >"$tmp/stub"
chmod +x "$tmp/stub"
ep() { RDMAGATE_BIN=$tmp/stub "$c/rdmagate-entrypoint" "$@" 2>"$tmp/ep.err" | tr '\n' ' '; }
got=$(RDMAGATE_CORES_FROM_AFFINITY=1 RDMAGATE_CPUS_ALLOWED=2-4,7 ep --config f.yaml)
expect "entrypoint: 2-4,7 -> main 2, cores 3,4,7 [$got]" \
  test "$got" = "--set eal.main_lcore=2 --set dataplane.cores=3,4,7 --config f.yaml "
got=$(RDMAGATE_CORES_FROM_AFFINITY=1 RDMAGATE_CPUS_ALLOWED=0-15 RDMAGATE_CPU_LIMIT=3 ep --config f.yaml)
expect "entrypoint: limit 3 of 0-15 -> main 0, cores 1,2 [$got]" \
  test "$got" = "--set eal.main_lcore=0 --set dataplane.cores=1,2 --config f.yaml "
expect "entrypoint: a capped affinity warns" grep -q 'level=warn' "$tmp/ep.err"
got=$(RDMAGATE_CPUS_ALLOWED=2-4 ep --config f.yaml)
expect "entrypoint: passes through without RDMAGATE_CORES_FROM_AFFINITY [$got]" test "$got" = "--config f.yaml "
got=$(RDMAGATE_CORES_FROM_AFFINITY=1 RDMAGATE_CPUS_ALLOWED=2-4 ep --version)
expect "entrypoint: --version passes through [$got]" test "$got" = "--version "
got=$(RDMAGATE_CORES_FROM_AFFINITY=1 RDMAGATE_CPUS_ALLOWED=2-4 ep)
expect "entrypoint: no arguments (the daemon's default config) still gets the lcores [$got]" \
  test "$got" = "--set eal.main_lcore=2 --set dataplane.cores=3,4 "

# Entrypoint log lines: in the daemon's logging.format, read from the config it is given (or --set).
# Every line of the file is one JSON object in the daemon's layout (python3: parsed; else its shape).
all_json() {
  [ -s "$1" ] || return 1
  if [ "$have_python" = 1 ]; then
    python3 -c 'import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    assert list(o) == ["ts", "level", "msg", "component"] and o["component"] == "entrypoint", line' "$1"
  else
    ! grep -qv '^{"ts":"[^"]*","level":"[a-z]*","msg":".*","component":"entrypoint"}$' "$1"
  fi
}
all_logfmt() { [ -s "$1" ] && ! grep -qvE '^ts=[^ ]+ level=[a-z]+ msg="([^"\\]|\\.)*" component=entrypoint$' "$1"; }
ep_log() { # ep_log CPUS_ALLOWED args...: the entrypoint's stderr, in $tmp/ep.err
  RDMAGATE_CORES_FROM_AFFINITY=1 RDMAGATE_CPUS_ALLOWED=$1 RDMAGATE_CPU_LIMIT=3 RDMAGATE_BIN=$tmp/stub \
    "$c/rdmagate-entrypoint" "${@:2}" >/dev/null 2>"$tmp/ep.err"
}
printf 'logging:\n  level: info\n' >"$tmp/logfmt.yaml"
printf 'dataplane:\n  format: json\nlogging:   # the section\n  # one JSON object per line\n  format: "json"  # for the collector\n' \
  >"$tmp/json.yaml"
ep_log 0-15 --config "$tmp/configmap-rdmagate.yaml"
expect "entrypoint: JSON lines with the ConfigMap's config (logging.format: json)" all_json "$tmp/ep.err"
expect "entrypoint: ... the warning and the lcore choice both" \
  bash -c "[ \$(wc -l <'$tmp/ep.err') -eq 2 ] && grep -q '\"level\":\"warn\"' '$tmp/ep.err'"
ep_log 0-15 --check-config="$tmp/json.yaml"
expect "entrypoint: JSON lines for a quoted, commented format: under logging: (--check-config=FILE)" \
  all_json "$tmp/ep.err"
ep_log x-y --config "$tmp/json.yaml"
expect "entrypoint: a message with quotes is still one JSON object" all_json "$tmp/ep.err"
ep_log x-y --config "$tmp/logfmt.yaml"
expect "entrypoint: logfmt without logging.format, quotes escaped [$(cat "$tmp/ep.err")]" all_logfmt "$tmp/ep.err"
ep_log 0-15 --config "$tmp/logfmt.yaml" --set logging.format=json
expect "entrypoint: --set logging.format=json overrides the file" all_json "$tmp/ep.err"
ep_log 0-15 --set=logging.format=logfmt --config "$tmp/configmap-rdmagate.yaml"
expect "entrypoint: --set=logging.format=logfmt overrides the ConfigMap's json" all_logfmt "$tmp/ep.err"
ep_log 0-15 --config "$tmp/missing.yaml"
expect "entrypoint: an unreadable config leaves it on logfmt" all_logfmt "$tmp/ep.err"

for bad_list in 5 "x-y" ""; do
  RDMAGATE_CORES_FROM_AFFINITY=1 RDMAGATE_CPUS_ALLOWED=$bad_list RDMAGATE_BIN=$tmp/stub \
    "$c/rdmagate-entrypoint" --config f.yaml >/dev/null 2>&1
  rc=$?
  # An empty override means "read the affinity": that succeeds on any machine with 2 CPUs.
  if [ -n "$bad_list" ]; then expect "entrypoint: affinity \"$bad_list\" is refused (exit $rc)" test "$rc" = 2; fi
done

# Healthcheck against a throwaway HTTP server: 200 for a path that exists, failure for one that does not.
if [ "$have_python" = 1 ]; then
  mkdir -p "$tmp/www"
  echo live >"$tmp/www/healthz"
  (cd "$tmp/www" && exec python3 -u -m http.server 0 --bind 127.0.0.1 >"$tmp/http.out" 2>&1) &
  http_pid=$!
  port=
  for _ in $(seq 50); do
    port=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$tmp/http.out" | head -n1)
    [ -n "$port" ] && break
    sleep 0.1
  done
  if [ -n "$port" ]; then
    expect "healthcheck: 200 on /healthz passes" env RDMAGATE_HEALTH_PORT="$port" "$c/rdmagate-healthcheck" /healthz
    expect "healthcheck: 404 on /readyz fails" \
      bash -c "! RDMAGATE_HEALTH_PORT=$port '$c/rdmagate-healthcheck' /readyz 2>/dev/null"
  else
    bad "healthcheck: the test HTTP server did not start: $(cat "$tmp/http.out")"
  fi
  kill "$http_pid" 2>/dev/null
  wait "$http_pid" 2>/dev/null
  expect "healthcheck: a closed port fails" \
    bash -c "! RDMAGATE_HEALTH_PORT=1 '$c/rdmagate-healthcheck' 2>/dev/null"
fi

# ------------------------------------------------------------------------------------- with the daemon
if [ -n "$binary" ] && [ "${CHECK_DEPLOY_RUNTIME_DEPS:-1}" = 1 ]; then
  # The Dockerfile's ARG RUNTIME_PACKAGES="..." may span lines ending in a backslash.
  pkgs=$(awk '/^ARG RUNTIME_PACKAGES="/ {on=1} on {print} on && /"[[:space:]]*$/ && NR>1 {exit}' "$c/Dockerfile" |
         sed -e 's/^ARG RUNTIME_PACKAGES="//' -e 's/"[[:space:]]*$//' -e 's/\\$//' | tr -s ' \n' ' ')
  if "$c/check-runtime-deps.sh" "$binary" $pkgs >"$tmp/deps.out" 2>&1; then
    ok "Dockerfile's RUNTIME_PACKAGES provide every library $(basename "$binary") links"
  else
    bad "Dockerfile's RUNTIME_PACKAGES: $(grep -v ' <- ' "$tmp/deps.out" | tr '\n' ' ')"
  fi
  # ... and that this check can fail: without libyaml-cpp0.7 the list is incomplete.
  expect "check-runtime-deps.sh notices a missing package (libyaml-cpp0.7 removed)" \
    bash -c "! '$c/check-runtime-deps.sh' '$binary' ${pkgs//libyaml-cpp0.7/} >/dev/null 2>&1"
  if [ -n "$build_dir" ]; then
    rel=${binary#"$build_dir"/}
    docker_rel=$(sed -n 's/^ARG RDMAGATE_BINARY=build\/release\///p' "$c/Dockerfile")
    expect "Dockerfile's RDMAGATE_BINARY path (build/release/$docker_rel) is where CMake puts it ($rel)" \
      test "$rel" = "$docker_rel"
  fi
fi
if [ -n "$binary" ]; then
  # pod_check CPUS CONFIG [ARG...]: `rdmagate --check-config` as a pod with CPUS exclusive cores would run
  # it: the entrypoint picks the lcores from an affinity of CPUs 0..CPUS-1, and --host-cpus checks them
  # for such a node rather than for this machine (whose hugetlbfs mounts are not the pod's either: that
  # check is skipped, and named in the output).
  pod_check() {
    local cpus=$1 cfg=$2
    shift 2
    RDMAGATE_CORES_FROM_AFFINITY=1 RDMAGATE_CPUS_ALLOWED=0-$((cpus - 1)) RDMAGATE_CPU_LIMIT=$cpus \
      RDMAGATE_BIN=$binary "$c/rdmagate-entrypoint" --check-config "$cfg" --host-cpus "0-$((cpus - 1))" "$@"
  }
  # Every variant's config as its pod runs it: the rendered ConfigMap's rdmagate.yaml with the container's
  # other arguments (sriov-vf: --set device.name=auto) and its CPU limit. Without PyYAML nothing is
  # rendered: the base's and the rados component's configs as awk extracted them, with the base's CPUs.
  base_cpus=$(sed -n 's/^ *cpu: "\([0-9]*\)"$/\1/p' "$deploy/kubernetes/daemonset.yaml" | head -n1)
  checked=0
  for cfg in "$tmp"/rendered/*.rdmagate.yaml "$tmp/configmap-rdmagate.yaml" "$tmp/rados-rdmagate.yaml"; do
    [ -e "$cfg" ] || continue
    v=$(basename "$cfg" .yaml)
    v=${v%.rdmagate}
    extra=()
    cpus=$base_cpus
    if [ "$(dirname "$cfg")" = "$tmp/rendered" ]; then
      mapfile -t extra <"$tmp/rendered/$v.args"
      cpus=$(cat "$tmp/rendered/$v.cpus")
      checked=$((checked + 1))
    elif [ "$have_yaml" = 1 ]; then
      continue
    fi
    if pod_check "$cpus" "$cfg" "${extra[@]}" >"$tmp/check.out" 2>&1; then
      ok "rdmagate --check-config accepts $v's config on $cpus CPUs${extra[*]:+ with ${extra[*]}}"
    else
      bad "rdmagate --check-config on $v's config: $(tr '\n' ' ' <"$tmp/check.out")"
    fi
  done
  if [ "$have_yaml" = 1 ]; then
    expect "rdmagate --check-config ran on every rendered variant ($checked of $variants)" test "$checked" = "$variants"
  fi
  # ... and that this check can fail: a store larger than the EAL memory is a config error, and so are
  # more data-plane cores than the node has.
  sed 's/^\( *capacity_mib:\).*/\1 1048576/' "$tmp/configmap-rdmagate.yaml" >"$tmp/broken.yaml"
  expect "rdmagate --check-config rejects a broken copy (store.capacity_mib above eal.memory_mib)" \
    fails pod_check "$base_cpus" "$tmp/broken.yaml"
  expect "rdmagate --check-config rejects the base's config with a core the node lacks" \
    fails pod_check "$base_cpus" "$tmp/configmap-rdmagate.yaml" --set "dataplane.cores=1-$base_cpus"
  # The rados config's files (conf_file, keyring) exist only in the pod: --check-config does not look.
  sed 's/^\( *cache_lease_ms:\).*/\1 1000/' "$tmp/rados-rdmagate.yaml" >"$tmp/broken.yaml"
  expect "rdmagate --check-config rejects a broken rados copy (cache_lease_ms below notify_timeout_ms)" \
    fails pod_check "$base_cpus" "$tmp/broken.yaml"
fi

# ------------------------------------------------------------------------------------------- self-test
# The checks must be able to fail: run them on broken copies of the tree, each of which must be caught.
if [ "$have_python" = 1 ] && [ "${CHECK_DEPLOY_NO_SELF_TEST:-0}" != 1 ]; then
  # mutate "description" file sed-expression "the FAIL line that must appear" [needs-yaml]
  mutate() {
    local what=$1 file=$2 expr=$3 expected=$4 needs_yaml=${5:-0}
    [ "$needs_yaml" = 1 ] && [ "$have_yaml" = 0 ] && return
    rm -rf "$tmp/tree"
    mkdir -p "$tmp/tree"
    mkdir -p "$tmp/tree/tests"
    cp -r "$src/deploy" "$src/docs" "$src/conf" "$tmp/tree/"
    cp -r "$src/tests/deploy" "$tmp/tree/tests/"
    sed -i -e "$expr" "$tmp/tree/$file"
    # Rendered by kustomize_lite.py alone: the main run proved it renders what kubectl does, and kubectl
    # would add about a second per variant to each of these runs.
    if cmp -s "$src/$file" "$tmp/tree/$file"; then
      bad "self-test: the mutation \"$what\" changed nothing in $file (update this test)"
    elif CHECK_DEPLOY_NO_KUBECTL=1 python3 "$here/check_deploy.py" "$tmp/tree" >"$tmp/mut.out" 2>&1; then
      bad "self-test: \"$what\" was NOT caught"
    elif ! grep -q "^FAIL: $expected" "$tmp/mut.out"; then
      bad "self-test: \"$what\" was caught, but not by \"$expected\": $(grep '^FAIL' "$tmp/mut.out" | tr '\n' ' ')"
    else
      ok "self-test: \"$what\" is caught by: $(grep -m1 "^FAIL: $expected" "$tmp/mut.out" | cut -c7-120)"
    fi
  }
  mutate "dashboard queries an undocumented metric" deploy/grafana/rdmagate-dashboard.json \
    's/rdmagate_transport_credit_stalls_total/rdmagate_transport_credit_stall_total/' \
    "every metric the dashboard queries"
  mutate "dashboard groups by a label the metric lacks" deploy/grafana/rdmagate-dashboard.json \
    's/sum by (mode) (rate(rdmagate_transport_payloads_total/sum by (op) (rate(rdmagate_transport_payloads_total/' \
    "every label the dashboard filters or groups by"
  mutate "a metric is renamed in docs/metrics.md" docs/metrics.md \
    's/`rdmagate_store_objects`/`rdmagate_store_items`/' "every metric the dashboard queries"
  mutate "the dashboard JSON is edited by hand" deploy/grafana/rdmagate-dashboard.json \
    's/"title": "Credit stalls\/s"/"title": "Stalls"/' "rdmagate-dashboard.json is what generate-dashboard.py"
  mutate "readiness probe points at /healthz" deploy/kubernetes/daemonset.yaml 's|path: /readyz|path: /healthz|' \
    "kubernetes: readinessProbe GETs /readyz" 1
  mutate "hugepages request removed" deploy/kubernetes/daemonset.yaml '/hugepages-2Mi: 2Gi/d' \
    "kubernetes: container requests hugepages-2Mi only" 1
  mutate "ConfigMap uses a section conf/ lacks" deploy/kubernetes/configmap.yaml 's/^    logging:/    logs:/' \
    "ConfigMap's rdmagate.yaml uses only sections" 1
  mutate "ConfigMap uses a key conf/ lacks" deploy/kubernetes/configmap.yaml 's/^      core_stall_ms:/      stall_ms:/' \
    "ConfigMap's rdmagate.yaml uses only keys" 1
  mutate "ConfigMap's drain outlasts the grace period" deploy/kubernetes/configmap.yaml \
    's/drain_timeout_ms: 10000/drain_timeout_ms: 40000/' "kubernetes: terminationGracePeriodSeconds" 1
  mutate "ConfigMap binds telemetry to loopback" deploy/kubernetes/configmap.yaml \
    's/bind_address: "0.0.0.0"/bind_address: "127.0.0.1"/' "ConfigMap binds telemetry" 1
  mutate "the probes go to the metrics port" deploy/kubernetes/daemonset.yaml 's/port: probes$/port: metrics/' \
    "kubernetes: startupProbe GETs /healthz on the probe port" 1
  mutate "ConfigMap drops the probe listener" deploy/kubernetes/configmap.yaml '/^      probe_port:/d' \
    "ConfigMap gives the kubelet's probes a listener of their own" 1
  mutate "the NetworkPolicy admits any namespace labelled so" deploy/kubernetes/networkpolicy.yaml \
    's|kubernetes.io/metadata.name: monitoring|team: monitoring|' \
    "kubernetes: the NetworkPolicy admits only the monitoring namespace" 1
  mutate "the NetworkPolicy opens another port" deploy/kubernetes/networkpolicy.yaml \
    's/port: metrics$/port: 7471/' "kubernetes: the NetworkPolicy opens only the metrics port" 1
  mutate "host-network: the NetworkPolicy stays" deploy/kubernetes/components/host-network/kustomization.yaml \
    '/delete-networkpolicy.yaml/d' "overlays/host-network: no NetworkPolicy" 1
  mutate "the DaemonSet loses its priorityClassName" deploy/kubernetes/daemonset.yaml \
    '/priorityClassName:/d' "kubernetes: priorityClassName" 1
  mutate "the PriorityClass claims a system value" deploy/kubernetes/priorityclass.yaml \
    's/^value: 1000000$/value: 2000001000/' "kubernetes: priorityClassName" 1
  cp=deploy/kubernetes/components
  mutate "hugepages-1gi: the emptyDir keeps 2 MiB pages" $cp/hugepages-1gi/daemonset-hugepages-1gi.yaml \
    's/medium: HugePages-1Gi/medium: HugePages-2Mi/' "overlays/hugepages-1gi: a HugePages-1Gi emptyDir" 1
  mutate "hugepages-1gi: the limit keeps the 2 MiB pages too" $cp/hugepages-1gi/daemonset-hugepages-1gi.yaml \
    '0,/hugepages-2Mi: null/{/hugepages-2Mi: null/d}' "overlays/hugepages-1gi: container requests == limits" 1
  mutate "sriov-vf: the shared device stays requested" $cp/sriov-vf/daemonset-vf.yaml \
    '/rdma_shared_device_a: null/d' "overlays/sriov-vf: container requests nvidia.com/sriov_rdma_vf: 1 and no other" 1
  mutate "sriov-vf: device.name stays the shared device's" $cp/sriov-vf/daemonset-vf.yaml \
    's/, "--set", "device.name=auto"//' "overlays/sriov-vf: device.name" 1
  mutate "sriov-vf: the SriovNetwork without rdma-cni" $cp/sriov-vf/sriovnetwork.yaml \
    's/"type": "rdma"/"type": "tuning"/' "sriov-vf: the SriovNetwork generates its network" 1
  mutate "host-network: dnsPolicy left at ClusterFirst" $cp/host-network/daemonset-host-network.yaml \
    '/dnsPolicy:/d' "overlays/host-network: hostNetwork with dnsPolicy" 1
  mutate "host-network: the Multus annotation stays" $cp/host-network/daemonset-host-network.yaml \
    's|k8s.v1.cni.cncf.io/networks: null|k8s.v1.cni.cncf.io/networks: rdmagate-rdma|' \
    "overlays/host-network: no Multus annotation" 1
  mutate "monitoring: the scrape annotations stay" $cp/monitoring/daemonset-no-scrape-annotations.yaml \
    '/prometheus.io\/scrape: null/d' "overlays/monitoring: no prometheus.io/\* scrape annotations" 1
  mutate "monitoring: the ServiceMonitor scrapes a port the Service lacks" $cp/monitoring/servicemonitor.yaml \
    's/- port: metrics/- port: http-metrics/' "overlays/monitoring: the ServiceMonitor selects" 1
  mutate "an overlay names a component check_deploy.py does not know" deploy/overlays/monitoring/kustomization.yaml \
    's|components/monitoring$|components/monitor|' "overlays/monitoring/kustomization.yaml uses the base" 1
  mutate "an alert changes, the PrometheusRule is not regenerated" deploy/prometheus/rdmagate-alerts.yml \
    's/^        for: 15m$/        for: 20m/' "components/monitoring/prometheusrule.yaml carries" 1
  mutate "an alert reads an undocumented metric" deploy/prometheus/rdmagate-alerts.yml \
    's/rdmagate_store_allocated_bytes \/ rdmagate_store_capacity_bytes/rdmagate_store_allocated_bytes \/ rdmagate_store_size_bytes/' \
    "every metric the [0-9]* rules read is in docs/metrics.md" 1
  mutate "an alert's runbook_url misses its section" deploy/prometheus/rdmagate-alerts.yml \
    's/alerts.md#rdmagatedown$/alerts.md#rdmagate-down/' "every alert's runbook_url points at its own section" 1
  mutate "a runbook section lacks its Fix" docs/alerts.md 's/^\*\*Fix\.\*\*/**Repair.**/' \
    "every runbook section has" 1
  mutate "an alert has no silent case in its promtool test" tests/deploy/rdmagate-alerts.test.yml \
    '/alertname: RdmagateRestarting/{n;s/exp_alerts: \[\]/exp_alerts: [{exp_labels: {}}]/}' \
    "tests/deploy/rdmagate-alerts.test.yml has a firing and a silent case" 1
  rc=deploy/kubernetes/components/rados
  mutate "rados: the component's config keeps backend memory" $rc/configmap-rados.yaml \
    's/^      backend: rados/      backend: memory/' "rados: the rados config sets store.backend: rados" 1
  mutate "rados: a store.rados key conf/ lacks" $rc/configmap-rados.yaml \
    's/^        op_timeout_ms:/        op_timeout:/' \
    "rados: the rados config uses only sections and keys" 1
  mutate "rados: the base's config changes, the component's does not" deploy/kubernetes/configmap.yaml \
    's/max_connections_per_core: 256/max_connections_per_core: 512/' "rados: the rados config equals configmap.yaml's" 1
  mutate "rados: the patch targets a ConfigMap the base lacks" $rc/configmap-rados.yaml \
    's/^  name: rdmagate-config$/  name: rdmagate-conf/' \
    "components/rados: every patch targets an object of the base" 1
  mutate "rados: store.rados.keyring is not the mounted Secret" $rc/configmap-rados.yaml \
    's|keyring: "/etc/ceph/keyring"|keyring: "/etc/ceph/ceph.client.rdmagate.keyring"|' \
    "overlays/rados: store.rados.keyring" 1
  mutate "rados: the keyring is world-readable" $rc/daemonset-ceph.yaml 's/mode: 0400/mode: 0444/' \
    "overlays/rados: the keyring is mounted with mode 0400" 1
  mutate "rados: ceph.conf without cephx" $rc/ceph-conf.yaml \
    's/auth_client_required = cephx/auth_client_required = none/' \
    "rados: ceph.conf has auth_client_required = cephx" 1
  mutate "rados: a key is committed" $rc/ceph-conf.yaml \
    's|^    keyring = /etc/ceph/keyring|&\n    key = AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==|' \
    "rados: no cephx key is committed" 1
  mutate "rados: the CephClient's caps differ from the documented ones" $rc/rook-cephclient.yaml \
    's/allow rwx pool=rdmagate/allow rw pool=rdmagate/' "rados: the CephClient's caps" 1
  mutate "rados: the overlay leaves the component out" deploy/overlays/rados/kustomization.yaml \
    's|^  - ../../kubernetes/components/rados|  - ../../kubernetes/components/none|' \
    "overlays/rados/kustomization.yaml uses" 1
fi

echo "check-deploy: $passed passed, $failed failed"
[ "$failed" = 0 ]

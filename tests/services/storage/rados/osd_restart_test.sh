#!/usr/bin/env bash
# ceph_cluster_osd_restart: a BlueStore cluster of tools/ceph-cluster keeps its objects across kill-osd +
# start-osd. Starts its own cluster (own dir, own ports: it runs beside the ceph_cluster fixture), writes 20
# objects of assorted sizes as client.rdmagate, SIGKILLs the OSD, restarts it, and compares every object
# byte for byte. Usage: osd_restart_test.sh [--dir DIR] (default: a fresh directory under /tmp).
# Needs the rados CLI (ceph-common) and rdmagate-ceph-probe (see tools/ceph-cluster --help). Exit 77: skipped.
set -euo pipefail
unset CEPH_CONF CEPH_ARGS

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster=$here/../../../../tools/ceph-cluster
dir=
case ${1:-} in
  --dir) dir=${2:?--dir needs a value} ;;
  '') ;;
  *) echo "usage: $0 [--dir DIR]" >&2; exit 2 ;;
esac
for b in rados ceph-mon ceph-osd; do
  command -v "$b" >/dev/null || { echo "osd_restart_test: $b not installed; skipped" >&2; exit 77; }
done
[ -n "$dir" ] || dir=$(mktemp -d /tmp/rgc-osd-restart.XXXXXX)
data=$(mktemp -d /tmp/rgc-osd-restart-data.XXXXXX)
cleanup() {
  "$cluster" stop --dir "$dir" || true
  rm -rf "$data"
}
trap cleanup EXIT

"$cluster" start --dir "$dir" --store bluestore
# shellcheck source=/dev/null
. "$dir/env"
r() { timeout 60 rados -c "$CEPH_CONF" --id "$RDMAGATE_CEPH_ID" --keyring "$RDMAGATE_CEPH_KEYRING" \
  -p "$RDMAGATE_CEPH_POOL" "$@"; }

n=20
for ((i = 0; i < n; i++)); do
  # Sizes from empty to 4 MiB + 1 (more than one BlueStore blob, and not a multiple of any block size).
  case $((i % 5)) in
    0) size=0 ;; 1) size=1 ;; 2) size=$((4096 * i + 17)) ;; 3) size=$((65536 * i)) ;; 4) size=$((4194304 + 1)) ;;
  esac
  head -c "$size" /dev/urandom >"$data/obj$i"
  r put "obj$i" "$data/obj$i"
done
echo "osd_restart_test: wrote $n objects"

"$cluster" kill-osd --dir "$dir"
"$cluster" start-osd --dir "$dir"

bad=0
for ((i = 0; i < n; i++)); do
  rm -f "$data/back"
  if ! r get "obj$i" "$data/back"; then
    echo "osd_restart_test: obj$i: get failed after the OSD restart" >&2
    bad=$((bad + 1))
  elif ! cmp -s "$data/obj$i" "$data/back"; then
    echo "osd_restart_test: obj$i: bytes differ after the OSD restart" >&2
    bad=$((bad + 1))
  fi
done
[ "$bad" -eq 0 ] || { echo "osd_restart_test: FAIL: $bad of $n objects lost or changed" >&2; exit 1; }
# And the restarted OSD takes new writes.
r put after-restart "$data/obj2" && r get after-restart "$data/back" && cmp "$data/obj2" "$data/back"
echo "osd_restart_test: all $n objects identical after kill-osd + start-osd"

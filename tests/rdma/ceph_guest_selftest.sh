#!/usr/bin/env bash
# ceph_guest_selftest: a Ceph cluster of tools/ceph-cluster starts and works where the RDMA suite runs (the
# rxe qemu guest, or a host with an RDMA device), so that tests of the RADOS backend through the real
# daemon can run there. An entry of the RDMA suite's manifest (tests/rdma/CMakeLists.txt); tools/rdma-suite
# brings Ceph's binaries, its dlopen()ed plugins and <build>/tools/rdmagate-ceph-probe into the guest and
# sets RDMAGATE_CEPH_PROBE.
#
#   tests/rdma/ceph_guest_selftest.sh [--gtest_output=xml:FILE] [--timeout S] [other --gtest_* ignored]
#
# Steps (each a JUnit testcase in FILE):
#   memstore   start a memstore cluster, 1 MiB of random bytes put/get/compare as client.rdmagate, stop
#   bluestore  start a bluestore cluster (in the guest: its block file on tmpfs behind a loop device),
#              write 6 objects (0 B to 4 MiB + 1), kill-osd, start-osd, read all back byte for byte, stop
# Prints each step's time and the mon's and OSD's peak RSS. --timeout (default 240) is each cluster start's
# and start-osd's deadline (TCG is several times slower than the host). Exit 0 all passed, 1 a step failed,
# 77 Ceph is not installed (the suite counts that as a failure: it lists this test only where Ceph is).
set -uo pipefail
unset CEPH_CONF CEPH_ARGS

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
cluster=$here/../../tools/ceph-cluster
xml=
deadline=240
while [ $# -gt 0 ]; do
  case $1 in
    --gtest_output=xml:*) xml=${1#--gtest_output=xml:}; shift ;;
    --gtest_*) shift ;;
    --timeout) deadline=${2:?--timeout needs a value}; shift 2 ;;
    *) echo "usage: $0 [--gtest_output=xml:FILE] [--timeout S]" >&2; exit 2 ;;
  esac
done

say() { echo "ceph_guest_selftest: $*"; }
for b in ceph-mon ceph-osd ceph-authtool monmaptool rados; do
  command -v "$b" >/dev/null || { say "$b not installed; skipped"; exit 77; }
done
say "probe ${RDMAGATE_CEPH_PROBE:-(not set: tools/ceph-cluster looks in build/*/tools)}; ulimit -n $(ulimit -n)"

now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }
secs() { awk -v ms="$1" 'BEGIN { printf "%.2f", ms / 1000 }'; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ceph-guest-selftest.XXXXXX") || exit 1
dirs=("$work/mem" "$work/blue") # the clusters of the steps, stopped on exit whatever happened
cleanup() {
  local d
  for d in "${dirs[@]}"; do "$cluster" stop --dir "$d" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# peak_rss DIR: "mon <kB> osd <kB>" (VmHWM of the running daemons).
peak_rss() {
  local who pid out=
  for who in mon osd; do
    pid=$(cat "$1/run.$who.pid" 2>/dev/null) || pid=
    out+="$who $(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo '?') kB "
  done
  echo "${out% }"
}

r() { # DIR rados-args...: the rados CLI as client.rdmagate on DIR's cluster, with a deadline
  local d=$1
  shift
  timeout 120 rados -c "$d/ceph.conf" --id rdmagate --keyring "$d/client.rdmagate.keyring" -p rdmagate "$@"
}

cases=()   # "name|seconds|failure message or empty"
failed=0
run_case() { # name function
  local name=$1 t0 msg=
  t0=$(now_ms)
  say "--- $name"
  # The step runs in a subshell (the pipeline): its last line is the failure message.
  "$2" 2>&1 | tee "$work/$name.log"
  if [ "${PIPESTATUS[0]}" -ne 0 ]; then
    failed=$((failed + 1))
    msg=$(tail -n 1 "$work/$name.log")
    msg=${msg:-failed}
  fi
  local s
  s=$(secs $(($(now_ms) - t0)))
  cases+=("$name|$s|$msg")
  if [ -z "$msg" ]; then say "--- $name: PASSED in ${s}s"; else say "--- $name: FAILED in ${s}s: $msg"; fi
}

step_memstore() {
  local d=$work/mem t0
  t0=$(now_ms)
  "$cluster" start --dir "$d" --store memstore --timeout "$deadline" || { echo "memstore start failed"; return 1; }
  say "memstore start: $(secs $(($(now_ms) - t0))) s; peak RSS $(peak_rss "$d")"
  head -c 1048576 /dev/urandom >"$work/one" || return 1
  r "$d" put one "$work/one" || { echo "rados put failed"; return 1; }
  r "$d" get one "$work/one.back" || { echo "rados get failed"; return 1; }
  cmp "$work/one" "$work/one.back" || { echo "1 MiB object changed"; return 1; }
  r "$d" rm one || { echo "rados rm failed"; return 1; }
  say "memstore after I/O: peak RSS $(peak_rss "$d")"
  "$cluster" stop --dir "$d" || { echo "memstore stop failed"; return 1; }
}

step_bluestore() {
  local d=$work/blue t0 i size bad=0
  t0=$(now_ms)
  "$cluster" start --dir "$d" --store bluestore --timeout "$deadline" || { echo "bluestore start failed"; return 1; }
  say "bluestore start: $(secs $(($(now_ms) - t0))) s; peak RSS $(peak_rss "$d")"
  for i in 0 1 2 3 4 5; do
    case $i in 0) size=0 ;; 1) size=1 ;; 2) size=8209 ;; 3) size=196608 ;; 4 | 5) size=4194305 ;; esac
    head -c "$size" /dev/urandom >"$work/obj$i" || return 1
    r "$d" put "obj$i" "$work/obj$i" || { echo "rados put obj$i failed"; return 1; }
  done
  say "bluestore wrote 6 objects; peak RSS $(peak_rss "$d")"
  "$cluster" kill-osd --dir "$d" || { echo "kill-osd failed"; return 1; }
  t0=$(now_ms)
  "$cluster" start-osd --dir "$d" --timeout "$deadline" || { echo "start-osd failed"; return 1; }
  say "bluestore start-osd: $(secs $(($(now_ms) - t0))) s"
  for i in 0 1 2 3 4 5; do
    rm -f "$work/back"
    if ! r "$d" get "obj$i" "$work/back"; then
      say "obj$i: get failed after the OSD restart"
      bad=$((bad + 1))
    elif ! cmp -s "$work/obj$i" "$work/back"; then
      say "obj$i: bytes differ after the OSD restart"
      bad=$((bad + 1))
    fi
  done
  [ "$bad" -eq 0 ] || { echo "$bad of 6 objects lost or changed across kill-osd/start-osd"; return 1; }
  say "bluestore after restart and reads: peak RSS $(peak_rss "$d"); block file uses $(du -k "$d/block.img" "$d/osd/block" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }') KiB"
  "$cluster" stop --dir "$d" || { echo "bluestore stop failed"; return 1; }
}

t_all=$(now_ms)
run_case memstore step_memstore
run_case bluestore step_bluestore
total=$(secs $(($(now_ms) - t_all)))

if [ -n "$xml" ]; then
  esc() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' <<<"$1"; }
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuites tests=\"${#cases[@]}\" failures=\"$failed\" errors=\"0\" time=\"$total\" name=\"ceph_guest_selftest\">"
    echo "  <testsuite name=\"CephGuest\" tests=\"${#cases[@]}\" failures=\"$failed\" errors=\"0\" time=\"$total\">"
    for c in "${cases[@]}"; do
      IFS='|' read -r name s msg <<<"$c"
      if [ -z "$msg" ]; then
        echo "    <testcase name=\"$name\" classname=\"CephGuest\" time=\"$s\"/>"
      else
        echo "    <testcase name=\"$name\" classname=\"CephGuest\" time=\"$s\">"
        echo "      <failure message=\"$(esc "$msg")\" type=\"\"/>"
        echo "    </testcase>"
      fi
    done
    echo "  </testsuite>"
    echo "</testsuites>"
  } >"$xml"
fi
say "$((${#cases[@]} - failed)) of ${#cases[@]} passed in ${total}s"
[ "$failed" -eq 0 ]

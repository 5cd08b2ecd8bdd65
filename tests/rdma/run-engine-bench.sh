#!/bin/bash
# Engine benchmark beside perftest, in ONE guest boot (issue 4 "Measure and report"); not a timed test.
#
#   tools/rxe-vm/rxe-vm run --share <repo> --include <build>/tests/rdma/engine_bench -- \
#       tests/rdma/run-engine-bench.sh <build>/tests/rdma/engine_bench
#
# Prints raw figures and the ratios: engine echo RTT (64 B payload) vs 2 x ib_send_lat -s 64 (typical), and
# engine sink rate (64 B payload) vs ib_send_bw -s 64. perftest is retried once when it prints 0.00 / inf
# (its TSC calibration fails under emulation). Every process runs under timeout.
set -uo pipefail
bench=${1:?usage: $0 <engine_bench binary>}
dev=${RDMAGATE_RXE_DEV:-rxe0}
addr=${RDMAGATE_RXE_ADDR:-198.18.0.1}
work=$(mktemp -d)

pair() {  # name port args... (server and client get the same args; client adds the address)
  local name=$1 port=$2
  shift 2
  local try
  for try in 1 2; do
    timeout 60 "$name" -d "$dev" -p "$port" "$@" >"$work/$name.server" 2>&1 &
    local srv=$!
    rxe-wait-listen --cm "$port" 20 >/dev/null 2>&1
    timeout 60 "$name" -d "$dev" -p "$port" "$@" "$addr" >"$work/$name.client" 2>&1
    wait "$srv"
    if grep -qE '^ *[0-9]+ +[0-9]+' "$work/$name.client" && ! grep -qE ' (0\.00|inf|nan)( |$)' "$work/$name.client"; then
      return 0
    fi
    port=$((port + 1))
  done
  return 1
}

pair ib_send_lat 18600 -s 64 -n 5000 -R -F
lat_line=$(grep -E '^ *64 +[0-9]+' "$work/ib_send_lat.client" | tail -1)
# columns: bytes iterations t_min t_max t_typical t_avg ...
lat_typ=$(awk '{print $5}' <<<"$lat_line")
lat_avg=$(awk '{print $6}' <<<"$lat_line")
pair ib_send_bw 18700 -s 64 -n 200000 -R -F
bw_line=$(grep -E '^ *64 +[0-9]+' "$work/ib_send_bw.client" | tail -1)
# columns: bytes iterations BW_peak BW_average MsgRate(Mpps)
bw_rate=$(awk '{print $5}' <<<"$bw_line")

echo_line=$(timeout 120 "$bench" echo --messages 20000 --payload 64 2>&1 | grep 'engine_bench echo')
sink_line=$(timeout 120 "$bench" sink --messages 200000 --payload 64 2>&1 | grep 'engine_bench sink')
echo_line24=$(timeout 120 "$bench" echo --messages 20000 --payload 24 2>&1 | grep 'engine_bench echo')
sink_line24=$(timeout 120 "$bench" sink --messages 200000 --payload 24 2>&1 | grep 'engine_bench sink')
rtt=$(sed -E 's/.*avg rtt ([0-9.]+) us.*/\1/' <<<"$echo_line")
rtt_med=$(sed -E 's/.*median ([0-9]+) us.*/\1/' <<<"$echo_line")
rate=$(sed -E 's/.* ([0-9.]+) Mmsg\/s.*/\1/' <<<"$sink_line")

echo "bench: perftest ib_send_lat -s 64: ${lat_line:-FAILED}"
echo "bench: perftest ib_send_bw  -s 64: ${bw_line:-FAILED}"
echo "bench: ${echo_line:-engine echo FAILED}"
echo "bench: ${echo_line24:-engine echo (24 B payload) FAILED}"
echo "bench: ${sink_line:-engine sink FAILED}"
echo "bench: ${sink_line24:-engine sink (24 B payload) FAILED}"
if [[ -n ${lat_typ:-} && -n ${rtt:-} ]]; then
  awk -v r="$rtt" -v m="$rtt_med" -v t="$lat_typ" -v a="$lat_avg" 'BEGIN { printf "bench: echo rtt median %.2f us vs 2 x ib_send_lat typical %.2f us: ratio %.2f (goal <= 1.10); avg %.2f us vs 2 x avg %.2f us: ratio %.2f\n", m, 2*t, m/(2*t), r, 2*a, r/(2*a) }'
fi
if [[ -n ${bw_rate:-} && -n ${rate:-} ]]; then
  awk -v r="$rate" -v b="$bw_rate" 'BEGIN { printf "bench: sink %.3f Mmsg/s vs ib_send_bw %.3f Mmsg/s: ratio %.2f (goal >= 0.90)\n", r, b, r/b }'
fi
rm -rf "$work"

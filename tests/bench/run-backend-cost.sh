#!/bin/bash
# Instructions per echoed 64-byte message, counted by callgrind (exact and machine-independent; a benchmark,
# not a test). Usage: tests/bench/run-backend-cost.sh [build dir]
#   backend   the device backend's hot path alone (backend_cost_bench: poll, re-post, inline send, doorbell,
#             CQE decode), mlx5dv against verbs with its provider stubbed out
#   loop      a whole core-loop turn (loop_cost_bench: CoreLoop::run_st with the echo service), mlx5dv on the
#             simulated NIC against the verbs-shaped fake backend; the device models are not counted
# One line per measurement and batch size (messages per loop turn).
set -euo pipefail
build=${1:-build/release}
bin=$build/tests/bench/backend_cost_bench
loop=$build/tests/engine/loop_cost_bench
for b in "$bin" "$loop"; do
  [[ -x $b ]] || { echo "run-backend-cost: $b not built (ninja -C $build backend_cost_bench loop_cost_bench)" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "run-backend-cost: valgrind missing (tools/setup-debian.sh installs it)" >&2; exit 1; }
messages=4096
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Collection is on inside counted_* and toggled off again inside the functions that stand for the device
# (toggles nest: a device function called from another one must not be named too).
measure() {  # tag toggles... -- program args... -> instructions per message
  local tag=$1
  shift
  local toggles=()
  while [[ $1 != -- ]]; do toggles+=("--toggle-collect=$1"); shift; done
  shift
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*counted_*' "${toggles[@]}" \
    --callgrind-out-file="$out/cg.$tag" "$@" >"$out/log.$tag" 2>&1 || { cat "$out/log.$tag" >&2; exit 1; }
  local ir
  ir=$(awk '/^summary:/ {print $2}' "$out/cg.$tag")
  awk -v ir="$ir" -v n="$messages" 'BEGIN { printf "%.1f", ir / n }'
}
count() {  # backend batch
  measure "b.$1.$2" 'stub_*' -- "$bin" "$1" "$messages" "$2"
}
loop_count() {  # sim|fake batch
  local t=('*SimMlx5Cq::before_poll_st*')
  [[ $1 == fake ]] && t=('*FakeDevice::post_st*' '*FakeDevice::on_polled_st*')
  measure "l.$1.$2" "${t[@]}" -- "$loop" "$1" $((messages / $2)) "$2"
}
for batch in 1 16; do
  m=$(count mlx5 "$batch")
  v=$(count verbs "$batch")
  r=$(awk -v m="$m" -v v="$v" 'BEGIN { printf "%.2f", m / v }')
  echo "backend, batch $batch: mlx5dv $m instr/msg, verbs (provider excluded) $v instr/msg, ratio $r"
done
for batch in 1 16; do
  m=$(loop_count sim "$batch")
  f=$(loop_count fake "$batch")
  r=$(awk -v m="$m" -v f="$f" 'BEGIN { printf "%.2f", m / f }')
  echo "loop turn, batch $batch: mlx5dv (simulated NIC) $m instr/msg, fake verbs-shaped backend $f instr/msg, ratio $r"
done

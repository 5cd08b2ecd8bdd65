#!/bin/bash
# Instructions per echoed 64-byte message in the device backends' hot path, counted by callgrind (exact and
# machine-independent; a benchmark, not a test). Usage: tests/bench/run-backend-cost.sh [build dir]
# Prints one line per backend and batch size: instructions per message, and the mlx5dv / verbs ratio.
set -euo pipefail
build=${1:-build/release}
bin=$build/tests/bench/backend_cost_bench
[[ -x $bin ]] || { echo "run-backend-cost: $bin not built (ninja -C $build backend_cost_bench)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "run-backend-cost: valgrind missing (tools/setup-debian.sh installs it)" >&2; exit 1; }
messages=16384
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
count() {  # backend batch -> instructions per message
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='counted_*' --toggle-collect='stub_*' \
    --callgrind-out-file="$out/cg.$1.$2" "$bin" "$1" "$messages" "$2" >"$out/log.$1.$2" 2>&1 ||
    { cat "$out/log.$1.$2" >&2; exit 1; }
  local ir
  ir=$(awk '/^summary:/ {print $2}' "$out/cg.$1.$2")
  awk -v ir="$ir" -v n="$messages" 'BEGIN { printf "%.1f", ir / n }'
}
for batch in 1 16; do
  m=$(count mlx5 "$batch")
  v=$(count verbs "$batch")
  r=$(awk -v m="$m" -v v="$v" 'BEGIN { printf "%.2f", m / v }')
  echo "batch $batch: mlx5dv $m instr/msg, verbs (provider excluded) $v instr/msg, ratio $r"
done

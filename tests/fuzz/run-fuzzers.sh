#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each, starting from a scratch copy of its checked-in
# seed corpus (so the repository corpus is never modified). Fails if any target crashes, leaks,
# times out or trips an invariant; crash inputs are kept in BUILD_DIR/fuzz-artifacts/<target>/.
#   usage: tests/fuzz/run-fuzzers.sh BUILD_DIR SECONDS     (CI: SECONDS=60)
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build_dir=$1
seconds=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# target name and the longest input worth trying (1 selector byte + the largest body; fuzz_core_loop: a
# schedule of up to 400 actions and their arguments; fuzz_fault_rules: 16 rules of 256 characters and newlines).
targets=("fuzz_handshake:128" "fuzz_message:4200" "fuzz_object:600" "fuzz_config:4096" "fuzz_core_loop:2048"
  "fuzz_fault_rules:4400")

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0

for entry in "${targets[@]}"; do
  name=${entry%%:*}
  max_len=${entry##*:}
  bin=$build_dir/tests/fuzz/$name
  if [[ ! -x $bin ]]; then
    echo "$name: not built ($bin); configure with the fuzz preset" >&2
    status=1
    continue
  fi
  corpus=$scratch/$name/corpus
  artifacts=$build_dir/fuzz-artifacts/$name
  mkdir -p "$corpus" "$artifacts"
  cp "$here/corpus/$name/"* "$corpus/"
  log=$scratch/$name/log
  set +e
  "$bin" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  if [[ $rc -ne 0 ]]; then
    echo "$name: FAILED (exit $rc); inputs in $artifacts" >&2
    tail -40 "$log" >&2
    status=1
  else
    echo "$name: ok, ${runs:-?} runs, ${speed:-?} exec/s, ${cov:-cov ?}, corpus $(ls "$corpus" | wc -l) files"
  fi
done
exit $status

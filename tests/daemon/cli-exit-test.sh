#!/bin/sh
# The built daemon's command line as an operator meets it, before any device is touched:
#   cli-exit-test.sh RDMAGATE CASE
# CASE: check-quiet    --check-config of a valid file prints no config, exits 0
#       check-print    ... with --print prints the effective config with its origins
#       short-help     -h prints what --help prints, exits 0
#       default-config no --config and no /etc/rdmagate/rdmagate.yaml: exits 78 naming that path
# Exit 77 (CTest SKIP_RETURN_CODE) where the host cannot run a case: a valid config needs 2 CPUs (main
# lcore and one data-plane core), and the default-path case needs the default file to be absent.
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  sed 's/^/  stdout: /' "$tmp/out"
  sed 's/^/  stderr: /' "$tmp/err"
  exit 1
}

case $2 in
  check-quiet | check-print)
    [ "$(nproc)" -ge 2 ] || { echo "skip: fewer than 2 CPUs"; exit 77; }
    : >"$tmp/empty.yaml"
    if [ "$2" = check-quiet ]; then
      "$bin" --check-config "$tmp/empty.yaml" >"$tmp/out" 2>"$tmp/err" || fail "exit $?, want 0"
      [ -s "$tmp/out" ] && fail "stdout not empty"
    else
      "$bin" --check-config "$tmp/empty.yaml" --print >"$tmp/out" 2>"$tmp/err" || fail "exit $?, want 0"
      grep -q '^dataplane:$' "$tmp/out" || fail "no dataplane: section on stdout"
      grep -q '^  queue_depth: 64  # default$' "$tmp/out" || fail "no queue_depth with its origin"
    fi
    grep -q 'configuration is valid' "$tmp/err" || fail "no 'configuration is valid' on stderr"
    ;;
  short-help)
    "$bin" -h >"$tmp/out" 2>"$tmp/err" || fail "-h: exit $?, want 0"
    "$bin" --help >"$tmp/help" 2>&1 || fail "--help: exit $?, want 0"
    cmp -s "$tmp/out" "$tmp/help" || fail "-h and --help differ"
    ;;
  default-config)
    [ -e /etc/rdmagate/rdmagate.yaml ] && { echo "skip: /etc/rdmagate/rdmagate.yaml exists"; exit 77; }
    "$bin" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 78 ] || fail "exit $rc, want 78"
    grep -q '/etc/rdmagate/rdmagate.yaml does not exist' "$tmp/err" || fail "stderr does not name the path"
    ;;
  *)
    echo "unknown case $2" >&2
    exit 2
    ;;
esac
echo "ok: $2"

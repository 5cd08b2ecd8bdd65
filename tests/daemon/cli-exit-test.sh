#!/bin/sh
# The built daemon's command line as an operator meets it, before any device is touched:
#   cli-exit-test.sh RDMAGATE CASE
# CASE: check-quiet    --check-config of a valid file prints no config, exits 0
#       check-print    ... with --print prints the effective config with its origins
#       short-help     -h prints what --help prints, exits 0
#       default-config no --config and no /etc/rdmagate/rdmagate.yaml: exits 78 naming that path
#       other-host     a config for CPUs 2-5 and a hugetlbfs mount this machine lacks: --host-cpus 0-7 and
#                      --no-host accept it and name what they skipped; --host-cpus 0-3 rejects it
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
      grep -q '^  queue_depth: 128  # default$' "$tmp/out" || fail "no queue_depth with its origin"
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
  other-host)
    printf 'eal:\n  main_lcore: 2\n  hugepage_dir: /nonexistent/hugepages\ndataplane:\n  cores: [3, 4, 5]\n' \
      >"$tmp/other.yaml"
    "$bin" --check-config "$tmp/other.yaml" --host-cpus 0-7 >"$tmp/out" 2>"$tmp/err" || fail "--host-cpus 0-7: exit $?, want 0"
    grep -q 'configuration is valid for a host with cpus 0-7; not checked (--host-cpus):.*eal.hugepage_dir' \
      "$tmp/err" || fail "--host-cpus: does not say what it skipped"
    "$bin" --check-config "$tmp/other.yaml" --no-host >"$tmp/out" 2>"$tmp/err" || fail "--no-host: exit $?, want 0"
    grep -q 'configuration is valid; not checked (--no-host): that the CPUs' "$tmp/err" ||
      fail "--no-host: does not say what it skipped"
    "$bin" --check-config "$tmp/other.yaml" --host-cpus 0-3 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 78 ] || fail "--host-cpus 0-3: exit $rc, want 78"
    grep -q 'other.yaml:5:.*cpu 4 is not among the host.s cpus given by --host-cpus (0-3)' "$tmp/err" ||
      fail "--host-cpus 0-3: no error naming cpu 4"
    # This machine: the directory does not exist here.
    "$bin" --check-config "$tmp/other.yaml" --set dataplane.cores=1 --set eal.main_lcore=0 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 78 ] || fail "this host: exit $rc, want 78"
    grep -q 'other.yaml:3:3: eal.hugepage_dir: "/nonexistent/hugepages" does not exist on this host' "$tmp/err" ||
      fail "this host: no error naming eal.hugepage_dir"
    ;;
  *)
    echo "unknown case $2" >&2
    exit 2
    ;;
esac
echo "ok: $2"

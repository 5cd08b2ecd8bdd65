#!/bin/bash
# The alert rules through promtool (Debian package prometheus, in tools/setup-debian.sh):
#   promtool-rules.sh check SOURCE_DIR   promtool check rules deploy/prometheus/rdmagate-alerts.yml
#   promtool-rules.sh test SOURCE_DIR    promtool test rules tests/deploy/rdmagate-alerts.test.yml
# CTest alerts_check_rules and alerts_test_rules. Without promtool this FAILS (exit 1) with a message: a
# missing tool must not pass for a checked rules file.
set -euo pipefail
mode=${1:?usage: $0 check|test SOURCE_DIR}
src=$(cd "${2:?usage: $0 check|test SOURCE_DIR}" && pwd)
promtool=${PROMTOOL:-$(command -v promtool || true)}
if [ -z "$promtool" ] || [ ! -x "$promtool" ]; then
  echo "FAIL: promtool not found (${PROMTOOL:+PROMTOOL=$PROMTOOL, }PATH=$PATH): install Debian's prometheus package (tools/setup-debian.sh lists it)" >&2
  exit 1
fi
case $mode in
  check) exec "$promtool" check rules "$src/deploy/prometheus/rdmagate-alerts.yml" ;;
  test) exec "$promtool" test rules "$src/tests/deploy/rdmagate-alerts.test.yml" ;;
  *) echo "usage: $0 check|test SOURCE_DIR" >&2; exit 2 ;;
esac

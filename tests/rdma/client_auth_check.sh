#!/usr/bin/env bash
# client_auth_check: the client side of authentication (protocol 1.2) against the real daemon, in the RDMA
# suite's guest. A daemon requiring authentication (three principals of one tenant: a writer, a read-only
# one, one limited to one connection), then rdmagate-bench and the Python client with good, missing and wrong
# credentials, an unknown principal, the connection limit, the read-only principal's forbidden PUT and
# DELETE, echo and connect with AUTH, and the same clients against the daemon without authentication; the
# connect mode's setup rate with and without authentication in one boot is printed.
#
#   tests/rdma/client_auth_check.sh --build BUILD_DIR [--gtest_* ignored]
# BUILD_DIR holds daemon/rdmagate, tools/bench/rdmagate-bench and client/librdmagate-client.so. Exit 0 when
# every check passed, 1 otherwise; each check's output stays in BUILD_DIR/client-auth-check/.
set -u
B=
while [ $# -gt 0 ]; do
  case $1 in
    --build) B=${2:?--build needs a directory}; shift 2 ;;
    --gtest_*) shift ;;
    *) echo "usage: $0 --build BUILD_DIR" >&2; exit 2 ;;
  esac
done
[ -n "$B" ] || { echo "usage: $0 --build BUILD_DIR" >&2; exit 2; }
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
B=$(cd "$B" && pwd -P)
G=$B/client-auth-check
rm -rf "$G"; mkdir -p "$G"; cd "$G"
ADDR=${RDMAGATE_RXE_ADDR:-198.18.0.1}
W=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
R=5f1c7a0e93d2b4a6c8e01f2d3b4c5a69
L=a0a1a2a3a4a5a6a7a8a9aaabacadaeaf
printf 'secrets:\n  app-writer: "hex:%s"\n  app-reader: "hex:%s"\n  one-conn: "hex:%s"\n' $W $R $L > gw-secrets.yaml
cp gw-secrets.yaml client-secrets.yaml
printf 'secrets:\n  app-writer: "hex:%s"\n' $R > wrong-secrets.yaml
chmod 600 gw-secrets.yaml client-secrets.yaml wrong-secrets.yaml
gw_yaml() {  # port http auth
  cat <<YAML
eal:
  main_lcore: 0
listen:
  addresses: ["$ADDR"]
  port: $1
dataplane:
  cores: [1]
  idle_policy: yield
  max_connections_per_core: 128
store:
  capacity_mib: 32
telemetry:
  bind_address: "127.0.0.1"
  port: $2
security:
  allowed_clients: ["198.18.0.0/15"]
  connections_per_source: 256
  authentication: $3
  secrets_file: $G/gw-secrets.yaml
  tenants:
    - name: app
  principals:
    - name: app-writer
      tenant: app
      permissions: [read, write, delete]
    - name: app-reader
      tenant: app
      permissions: [read]
    - name: one-conn
      tenant: app
      permissions: [read, write, delete]
      max_connections: 1
logging:
  level: info
YAML
}
gw_yaml 7471 9464 required > gw-auth.yaml
"$B/daemon/rdmagate" --config gw-auth.yaml > gw-auth.log 2>&1 &
GW=$!
for i in $(seq 1 120); do
  (exec 3<>/dev/tcp/127.0.0.1/9464 && printf 'GET /readyz HTTP/1.0\r\n\r\n' >&3 && grep -q " 200" <&3) 2>/dev/null && break
  sleep 1
done
echo "== gateway (auth required) up after ${i}s"
pass=0; fail=0
check() {  # name, expected: ok|fail, pattern-or-empty, command...
  local name=$1 want=$2 pat=$3; shift 3
  "$@" > "$name.out" 2>&1; local rc=$?
  local got=ok; [ $rc -ne 0 ] && got=fail
  local match=yes; if [ -n "$pat" ] && ! grep -q -- "$pat" "$name.out"; then match=no; fi
  if [ "$got" = "$want" ] && [ "$match" = yes ]; then pass=$((pass+1)); echo "PASS $name (rc=$rc)"; else fail=$((fail+1)); echo "FAIL $name (rc=$rc, want $want, pattern '$pat' $match)"; tail -5 "$name.out"; fi
}
BENCH="$B/tools/bench/rdmagate-bench"
CW="--principal app-writer --secrets-file $G/client-secrets.yaml"
KV="--progress caller --yield --quiet -D 1 --warmup 0"
check put_writer ok "" $BENCH put $ADDR $CW $KV -s 64,8k --keys 16
check get_writer ok "" $BENCH get $ADDR $CW $KV -s 64,8k --keys 16 --verify
check put_reader fail "forbidden" $BENCH put $ADDR --principal app-reader --secrets-file $G/client-secrets.yaml $KV -s 64 --keys 16
check put_nocreds fail "requires authentication and no credentials" $BENCH put $ADDR $KV -s 64 --connect-timeout 5
check put_wrongsecret fail "authentication denied for principal app-writer" $BENCH put $ADDR --principal app-writer --secrets-file $G/wrong-secrets.yaml $KV -s 64 --connect-timeout 5
printf 'secrets:\n  nobody: "hex:%s"\n' $W > unknown-secrets.yaml; chmod 600 unknown-secrets.yaml
check put_unknown fail "authentication denied" $BENCH put $ADDR --principal nobody --secrets-file $G/unknown-secrets.yaml $KV -s 64 --connect-timeout 5
# one-conn may hold one connection: a second client while the first runs is refused connection_limit.
$BENCH put $ADDR --principal one-conn --secrets-file $G/client-secrets.yaml --progress caller --yield --quiet -D 8 --warmup 0 -s 64 --keys 16 > limit_first.out 2>&1 &
FIRST=$!
sleep 4
check limit_second fail "maximum number of connections" $BENCH put $ADDR --principal one-conn --secrets-file $G/client-secrets.yaml $KV -s 64 --connect-timeout 3
wait $FIRST; rc=$?
if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS limit_first (rc=0)"; else fail=$((fail+1)); echo "FAIL limit_first rc=$rc"; tail -5 limit_first.out; fi
check echo_writer ok "" $BENCH echo $ADDR $CW --yield --quiet -n 2000 -s 64 --warmup 0
check echo_nocreds fail "failed authentication" $BENCH echo $ADDR --yield --quiet -n 200 -s 64 --warmup 0 --connect-timeout 5
check connect_auth ok "auth + echo" $BENCH connect $ADDR $CW --yield -n 50
if command -v python3 >/dev/null; then
  check python_writer ok "" env PYTHONPATH=$SRC/client/python RDMAGATE_CLIENT_LIB=$B/client/librdmagate-client.so python3 -c "
import rdmagate
with rdmagate.Client(gateways=['$ADDR'], principal='app-writer', secrets_file='$G/client-secrets.yaml') as c:
    assert c.wait_connected(20), c.auth_error()
    c.put('py-key', b'v' * 10000)
    assert c.get('py-key') == b'v' * 10000
with rdmagate.Client(gateways=['$ADDR'], principal='app-reader', secrets_file='$G/client-secrets.yaml') as c:
    assert c.wait_connected(20), c.auth_error()
    assert c.get('py-key') == b'v' * 10000   # same tenant: the writer's object
    try:
        c.put('py-key', b'x'); raise SystemExit('reader could PUT')
    except rdmagate.Forbidden as e:
        print('reader put forbidden:', e)
    try:
        c.delete('py-key'); raise SystemExit('reader could DELETE')
    except rdmagate.Forbidden as e:
        print('reader delete forbidden:', e)
    print('stats', c.stats())
with rdmagate.Client(gateways=['$ADDR']) as c:
    try:
        c.wait_connected(20); raise SystemExit('no AuthRequired')
    except rdmagate.AuthRequired as e:
        print('no credentials:', e)
with rdmagate.Client(gateways=['$ADDR'], principal='app-writer', secret=bytes.fromhex('$R')) as c:
    try:
        c.wait_connected(20); raise SystemExit('no AuthDenied')
    except rdmagate.AuthDenied as e:
        print('denied:', e)
print('python ok')"
else
  echo "SKIP python (no python3 in the guest)"
fi
echo "== gateway metrics (auth)"
(exec 3<>/dev/tcp/127.0.0.1/9464 && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3) 2>/dev/null | grep -E "^rdmagate_auth|^rdmagate_connection_rejects_total|^rdmagate_object_refusals" | grep -v " 0$"
kill -TERM $GW; wait $GW; echo "gateway exit $?"
# The same daemon without authentication: the connect rate in the same boot.
gw_yaml 7471 9465 off > gw-off.yaml
"$B/daemon/rdmagate" --config gw-off.yaml > gw-off.log 2>&1 &
GW=$!
for i in $(seq 1 120); do
  (exec 3<>/dev/tcp/127.0.0.1/9465 && printf 'GET /readyz HTTP/1.0\r\n\r\n' >&3 && grep -q " 200" <&3) 2>/dev/null && break
  sleep 1
done
check connect_noauth ok "first echo" $BENCH connect $ADDR --yield -n 50
check put_creds_authoff ok "" $BENCH put $ADDR $CW $KV -s 64 --keys 16
kill -TERM $GW; wait $GW; echo "gateway exit $?"
echo "== connect, auth on:";  grep -E "connect|setup|conn/s|auth \+ echo|full" connect_auth.out | head -12
echo "== connect, auth off:"; grep -E "connect|setup|conn/s|first echo|full" connect_noauth.out | head -12
echo "== RESULT pass=$pass fail=$fail"
[ $fail -eq 0 ]

#!/usr/bin/env python3
"""The rdmagate Python package against a real gateway (run by client_examples_test in the rxe guest).

A plain script rather than pytest: the guest image carries python3 and the few standard modules the
package needs (tools/rxe-vm/python-guest-files), not pytest and its dependencies. Each check raises on
failure; the last line says all passed.

    python_client_check.py GATEWAY_ADDR PORT
"""
import time

T0 = time.perf_counter()
import array  # noqa: E402  (after T0: the imports' time is reported)
import select  # noqa: E402
import sys  # noqa: E402

import rdmagate  # noqa: E402

T_IMPORT = time.perf_counter() - T0


def expect_error(cls, status, fn, *args):
    try:
        fn(*args)
    except cls as e:
        if e.status != status:
            raise AssertionError(f"{fn.__name__}{args!r}: status {e.status!r}, want {status!r}") from e
        return e
    raise AssertionError(f"{fn.__name__}: no {cls.__name__} raised")


def sleep_until_idle(client):
    """The event-loop pattern: progress until arm() succeeds, then sleep on the fd (select)."""
    for _ in range(1000):
        if client.arm():
            select.select([client], [], [], 0.05)
            client.progress()
            return
        client.progress()
    raise AssertionError("arm() never succeeded in 1000 progress() calls on an idle client")


def main():
    addr, port = sys.argv[1], int(sys.argv[2])
    print(f"import rdmagate: {T_IMPORT:.2f} s")
    t = time.perf_counter()
    with rdmagate.Client(gateways=[f"{addr}:{port}"], request_timeout_ms=20000) as c:
        fd = c.event_fd()
        if fd < 0 or c.fileno() != fd:
            raise AssertionError(f"event_fd() {fd}, fileno() {c.fileno()}: the default progress mode has an fd")
        if not c.wait_connected(30):
            raise AssertionError("wait_connected: no connection in 30 s")
        print(f"create and connect: {time.perf_counter() - t:.2f} s")
        # The default mode needs no EAL and no hugepages: none is mapped into this process.
        with open("/proc/self/maps") as f:
            huge = [line.strip() for line in f if "rtemap" in line or "hugepages" in line]
        if huge:
            raise AssertionError(f"hugepage mappings in the default (caller) progress mode: {huge[:3]}")

        sizes = [10, 4096, 65537, 1 << 20, 2 << 20]
        for n in sizes:
            t = time.perf_counter()
            base = (bytes(range(256)) * (n // 256 + 1))[:n]
            for kind, value in (("bytes", base), ("bytearray", bytearray(base)), ("memoryview", memoryview(base)),
                                ("memoryview-rw", memoryview(bytearray(base)))):
                key = f"pycheck-{kind}-{n}"
                c.put(key, value)
                sleep_until_idle(c)
                got = c.get(key)
                if got != base:
                    raise AssertionError(f"{key}: GET returned {len(got)} bytes differing from the {n} put")
                out = bytearray(n + 7)
                if c.get_into(key.encode(), out) != n or out[:n] != base:
                    raise AssertionError(f"{key}: get_into differs")
                if n > 1:
                    e = expect_error(rdmagate.TooSmall, rdmagate.Status.TOO_SMALL, c.get_into, key, bytearray(n - 1))
                    print(f"{key}: too small buffer -> {e}")
                c.delete(key)
                expect_error(rdmagate.NotFound, rdmagate.Status.NOT_FOUND, c.get, key)
                expect_error(rdmagate.NotFound, rdmagate.Status.NOT_FOUND, c.delete, key)
            print(f"pycheck {n} bytes: bytes, bytearray, memoryview values put, read back, get_into, deleted "
                  f"in {time.perf_counter() - t:.2f} s")

        # Non-byte item formats travel as their bytes.
        words = array.array("I", range(1000))
        c.put(b"pycheck-array", words)
        if c.get(b"pycheck-array") != words.tobytes():
            raise AssertionError("array('I') value differs")
        c.delete(b"pycheck-array")

        expect_error(rdmagate.BadRequest, rdmagate.Status.BAD_REQUEST, c.put, "", b"x")
        expect_error(rdmagate.BadRequest, rdmagate.Status.BAD_REQUEST, c.get, "k" * 251)

        stats = c.stats()
        ops = len(sizes) * 4 * 5 + 3
        if stats["submitted"] < ops or stats["connections_up"] < 1:
            raise AssertionError(f"stats {stats}: want submitted >= {ops} and a connection up")
        print(f"stats: {stats}")
    expect_error(rdmagate.Shutdown, rdmagate.Status.SHUTDOWN, c.get, "after-close")
    print("python_client_check: all checks passed")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PUT, GET (verified) and DELETE of 10 B .. 2 MiB values. Usage: put_get_delete.py GATEWAY_ADDR [PORT]

A gateway that requires authentication (the shipped config does): set RDMAGATE_PRINCIPAL and
RDMAGATE_SECRETS_FILE (the gateway's secrets file format, mode 0600)."""
import os
import sys

import rdmagate

addr, port = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 7471
credentials = {}
if os.environ.get("RDMAGATE_PRINCIPAL"):
    credentials = {"principal": os.environ["RDMAGATE_PRINCIPAL"],
                   "secrets_file": os.environ.get("RDMAGATE_SECRETS_FILE", "")}
with rdmagate.Client(gateways=[(addr, port)], **credentials) as client:
    for n in (10, 4096, 65537, 1 << 20, 2 << 20):
        key = f"example-py-{n}"
        value = (bytes((j * 31 + n) & 0xFF for j in range(256)) * (n // 256 + 1))[:n]
        client.put(key, value)
        if client.get(key) != value:
            sys.exit(f"{key}: GET differs from PUT")
        client.delete(key)
        try:
            client.get(key)
            sys.exit(f"{key}: still there after DELETE")
        except rdmagate.NotFound:
            print(f"{key}: {n} bytes put, read back equal, deleted")

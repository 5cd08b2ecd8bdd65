"""Which gateway holds a key: rendezvous hashing over XXH64, as specified in docs/placement.md.

Written in plain Python on purpose (no C extension, no call into the client library): the tests check
this module and the C++ one (client/placement.cpp, which uses the xxHash library) against the same test
vectors, so two independent implementations have to agree. python3-xxhash's ``xxh64_intdigest`` computes
the same XXH64 faster, where that matters.
"""

from __future__ import annotations

import ipaddress
from typing import Iterable, Sequence, Union

Key = Union[bytes, bytearray, memoryview, str]

_MASK = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5

def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _MASK
    return (_rotl(acc, 31) * _P1) & _MASK


def _merge(acc: int, v: int) -> int:
    acc ^= _round(0, v)
    return (acc * _P1 + _P4) & _MASK


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 (xxHash specification, 64-bit variant) of ``data``; input words are read little-endian."""
    n = len(data)
    p = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _MASK
        v2 = (seed + _P2) & _MASK
        v3 = seed & _MASK
        v4 = (seed - _P1) & _MASK
        while p + 32 <= n:
            v1 = _round(v1, int.from_bytes(data[p : p + 8], "little"))
            v2 = _round(v2, int.from_bytes(data[p + 8 : p + 16], "little"))
            v3 = _round(v3, int.from_bytes(data[p + 16 : p + 24], "little"))
            v4 = _round(v4, int.from_bytes(data[p + 24 : p + 32], "little"))
            p += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = (seed + _P5) & _MASK
    h = (h + n) & _MASK
    while p + 8 <= n:
        h ^= _round(0, int.from_bytes(data[p : p + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _MASK
        p += 8
    if p + 4 <= n:
        h ^= (int.from_bytes(data[p : p + 4], "little") * _P1) & _MASK
        h = (_rotl(h, 23) * _P2 + _P3) & _MASK
        p += 4
    while p < n:
        h ^= (data[p] * _P5) & _MASK
        h = (_rotl(h, 11) * _P1) & _MASK
        p += 1
    h ^= h >> 33
    h = (h * _P2) & _MASK
    h ^= h >> 29
    h = (h * _P3) & _MASK
    h ^= h >> 32
    return h


def _key_bytes(key: Key) -> bytes:
    # A str key is the UTF-8 bytes the client sends on the wire.
    return key.encode() if isinstance(key, str) else bytes(key)


def key_hash(key: Key) -> int:
    return xxh64(_key_bytes(key))


def weight(key_hash_: int, gateway_hash: int) -> int:
    """MurmurHash3's fmix64 of key_hash XOR gateway_hash: a gateway's score for a key."""
    x = key_hash_ ^ gateway_hash
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & _MASK
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & _MASK
    x ^= x >> 33
    return x


def _ipv6_text(packed: bytes) -> str:
    # RFC 5952 section 4: lowercase, no leading zeros, the longest run (first on a tie) of two or more
    # zero groups as "::". Written out instead of str(IPv6Address) because that form changes between
    # Python versions (IPv4-mapped addresses print dotted from 3.13 on).
    groups = [int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2)]
    best_at, best_len, at = -1, 0, 0
    while at < 8:
        if groups[at] != 0:
            at += 1
            continue
        end = at
        while end < 8 and groups[end] == 0:
            end += 1
        if end - at > best_len:
            best_at, best_len = at, end - at
        at = end
    if best_len < 2:
        return ":".join(f"{g:x}" for g in groups)
    head = ":".join(f"{g:x}" for g in groups[:best_at])
    tail = ":".join(f"{g:x}" for g in groups[best_at + best_len :])
    return f"{head}::{tail}"


def gateway_identity(address: str, port: int) -> str:
    """The canonical "address:port" string that names a gateway (docs/placement.md, "Gateway identity").

    Raises ValueError for anything but an IPv4 dotted quad or an IPv6 literal without a zone, and for a
    port outside 0..65535.
    """
    if not isinstance(address, str):
        raise TypeError(f"gateway address {address!r}: a str is expected")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 0xFFFF:
        raise ValueError(f"gateway port {port!r}: not an integer in 0..65535")
    if "%" in address:
        raise ValueError(f"gateway address {address!r}: a zone index (%...) is not accepted")
    try:
        v4 = ipaddress.IPv4Address(address)
    except ValueError:
        v4 = None
    if v4 is not None:
        return f"{v4}:{port}"
    try:
        v6 = ipaddress.IPv6Address(address)
    except ValueError:
        raise ValueError(f"gateway address {address!r}: not an IPv4 or IPv6 literal") from None
    if v6.ipv4_mapped is not None:
        return f"{v6.ipv4_mapped}:{port}"
    return f"[{_ipv6_text(v6.packed)}]:{port}"


def _better(w: int, ident: bytes, best_w: int, best_ident: bytes) -> bool:
    return w > best_w or (w == best_w and ident < best_ident)


class Placement:
    """A fixed list of gateways (canonical identities, in configured order), hashed once."""

    def __init__(self, identities: Iterable[str]):
        self.identities: Sequence[str] = tuple(identities)
        if not self.identities:
            raise ValueError("placement: the gateway list is empty")
        seen: dict[str, int] = {}
        for i, ident in enumerate(self.identities):
            if ident in seen:
                raise ValueError(f"placement: gateways {seen[ident]} and {i} are the same gateway ({ident})")
            seen[ident] = i
        self._encoded = tuple(i.encode() for i in self.identities)
        self.hashes = tuple(xxh64(e) for e in self._encoded)

    def __len__(self) -> int:
        return len(self.identities)

    def pick_hash(self, kh: int) -> int:
        """The index of the gateway for a key whose XXH64 is ``kh``."""
        best, best_w = 0, -1
        enc = self._encoded
        for i, gh in enumerate(self.hashes):
            # weight() inlined: this loop is the whole cost of placing a key.
            x = kh ^ gh
            x ^= x >> 33
            x = (x * 0xFF51AFD7ED558CCD) & _MASK
            x ^= x >> 33
            x = (x * 0xC4CEB9FE1A85EC53) & _MASK
            x ^= x >> 33
            if x > best_w or (x == best_w and enc[i] < enc[best]):
                best, best_w = i, x
        return best

    def pick(self, key: Key) -> int:
        return self.pick_hash(key_hash(key))


def pick(key: Key, identities: Sequence[str]) -> int:
    """The index in ``identities`` of the gateway that holds ``key``.

    Unlike Placement, accepts a list with duplicates: identical identities tie and the lowest index wins.
    """
    if not identities:
        raise ValueError("placement: the gateway list is empty")
    kh = key_hash(key)
    best, best_w, best_ident = 0, -1, b""
    for i, ident in enumerate(identities):
        enc = ident.encode()
        w = weight(kh, xxh64(enc))
        if _better(w, enc, best_w, best_ident):
            best, best_w, best_ident = i, w, enc
    return best

"""client/python/rdmagate/placement.py against docs/placement.md: the same vectors, read from the document,
that tests/client/placement_test.cpp checks the C++ implementation against, then the remap property."""

import importlib.util
import math
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "placement.md"

# Loaded from its file, not as rdmagate.placement: the package's __init__ loads the C library, and this
# module must stand on its own (and the test must not depend on a build).
_spec = importlib.util.spec_from_file_location(
    "rdmagate_placement", ROOT / "client" / "python" / "rdmagate" / "placement.py")
placement = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(placement)

def cell(raw):
    """A table cell: the text of a single code span verbatim (spaces included), else the trimmed text."""
    t = raw.strip(" ")
    return t[1:-1] if len(t) >= 2 and t[0] == t[-1] == "`" and t.count("`") == 2 else t


def table(name):
    """The rows (lists of cells) between "<!-- placement-vectors: name -->" and the closing marker."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    opening = f"<!-- placement-vectors: {name} -->"
    assert opening in lines, f"no table {opening} in {DOC}"
    rows = []
    for line in lines[lines.index(opening) + 1 :]:
        if line == "<!-- /placement-vectors -->":
            break
        if line.startswith("|"):
            # Split on "|" outside backticks: the address " 10.0.0.1" keeps its space.
            cells, start, tick = [], 1, False
            for i, ch in enumerate(line):
                tick = not tick if ch == "`" else tick
                if ch == "|" and not tick and i > 0:
                    cells.append(cell(line[start:i]))
                    start = i + 1
            rows.append(cells)
    return rows[2:]  # without the header and separator rows


def byte_string(s):
    if len(s) >= 2 and s[0] == s[-1] == '"':
        return s[1:-1].encode("ascii")
    if s.startswith("hex:"):
        return bytes.fromhex(s[4:])
    if s.startswith("seq:"):
        return bytes(i & 0xFF for i in range(int(s[4:])))
    raise AssertionError(f"unknown byte-string notation: {s}")


def identities(s):
    """A list's cell: identities in backticks separated by spaces (one alone has lost its backticks)."""
    return [t.strip("`") for t in s.split()]


def hex64(s):
    assert len(s) == 16, s
    return int(s, 16)


def test_xxh64_vectors():
    rows = table("xxh64")
    assert len(rows) >= 10
    for data, length, want in rows:
        b = byte_string(data)
        assert len(b) == int(length), data
        assert placement.xxh64(b) == hex64(want), data


def test_weight_vectors():
    rows = table("weight")
    assert len(rows) >= 4
    for kh, gh, want in rows:
        assert placement.weight(hex64(kh), hex64(gh)) == hex64(want), (kh, gh)


def test_identity_vectors():
    rows = table("identity")
    assert len(rows) >= 10
    for address, port, ident, want in rows:
        got = placement.gateway_identity(address, int(port))
        assert got == ident, address
        assert placement.xxh64(got.encode("ascii")) == hex64(want), ident


def test_rejected_addresses():
    rows = table("rejected")
    assert len(rows) >= 5
    for address, _why in rows:
        address = "" if address == '""' else address
        with pytest.raises(ValueError, match=re.escape(repr(address))):
            placement.gateway_identity(address, 7471)


def test_placement_vectors():
    lists = {name: identities(ids) for name, ids in table("lists")}
    assert len(lists) >= 3
    rows = table("placement")
    assert len(rows) >= 20
    for key, name, kh, index, ident, w in rows:
        gateways = lists[name]
        b = byte_string(key)
        assert placement.key_hash(b) == hex64(kh), key
        assert placement.pick(b, gateways) == int(index), (key, name)
        assert placement.Placement(gateways).pick(b) == int(index), (key, name)
        assert gateways[int(index)] == ident, (key, name)
        assert placement.weight(hex64(kh), placement.xxh64(ident.encode())) == hex64(w), (key, name)


def test_str_keys_are_their_utf8_bytes():
    gateways = identities(table("lists")[-1][1])
    for text in ("hello", "€", "ключ/1"):
        assert placement.pick(text, gateways) == placement.pick(text.encode("utf-8"), gateways)


def test_duplicates_and_empty_list():
    dup = ["10.0.0.1:7471", "10.0.0.2:7471", "10.0.0.1:7471"]
    with pytest.raises(ValueError, match=r"gateways 0 and 2 are the same gateway \(10\.0\.0\.1:7471\)"):
        placement.Placement(dup)
    picks = [placement.pick(f"key-{i}".encode(), dup) for i in range(1000)]
    assert 2 not in picks  # identical entries tie: the lower index answers
    assert 0 in picks
    with pytest.raises(ValueError):
        placement.pick(b"k", [])
    with pytest.raises(ValueError):
        placement.Placement([])


# The remap property (docs/placement.md): gateways 10.0.0.1.. and keys key-0..key-99999.
KEYS = 100_000
MAX_GATEWAYS = 17
GATEWAYS = [f"10.0.0.{g + 1}:7471" for g in range(MAX_GATEWAYS)]


def tolerance(p):
    # A correct placement's count of moved keys is binomial(KEYS, p): allow 5 standard deviations.
    return 5 * math.sqrt(p * (1 - p) / KEYS)


@pytest.fixture(scope="module")
def key_hashes():
    return [placement.key_hash(f"key-{k}".encode()) for k in range(KEYS)]


_owners = {}


def owners(members, key_hashes):
    """Owner of every key, as an index into GATEWAYS, for the gateways `members` in that order."""
    members = tuple(members)
    if members not in _owners:  # the tests share lists, and placing 100,000 keys takes a while in Python
        table_ = placement.Placement([GATEWAYS[m] for m in members])
        _owners[members] = [members[table_.pick_hash(h)] for h in key_hashes]
    return _owners[members]


def test_adding_one_gateway_moves_about_one_in_n_plus_one_keys_all_to_it(key_hashes):
    before = owners([0], key_hashes)
    print("adding gateway N+1 to N (100000 keys):\n   N  moved     expected  |diff|/tolerance")
    for n in range(1, MAX_GATEWAYS):
        after = owners(list(range(n + 1)), key_hashes)
        moved = [k for k in range(KEYS) if after[k] != before[k]]
        assert all(after[k] == n for k in moved), f"N={n}: keys moved between old gateways"
        p = 1 / (n + 1)
        f = len(moved) / KEYS
        print(f"  {n:2d}  {f:.5f}  {p:.5f}   {abs(f - p) / tolerance(p):.2f}")
        assert abs(f - p) <= tolerance(p), f"N={n}: moved {f:.5f}, expected {p:.5f}"
        before = after


def test_removing_one_gateway_moves_only_its_keys(key_hashes):
    for n in range(2, MAX_GATEWAYS + 1):
        gone = n // 2  # the middle one: a position-based placement would renumber every gateway after it
        before = owners(list(range(n)), key_hashes)
        after = owners([m for m in range(n) if m != gone], key_hashes)
        moved = [k for k in range(KEYS) if after[k] != before[k]]
        assert all(before[k] == gone for k in moved), f"n={n}: keys moved off a gateway that stayed"
        assert len(moved) == before.count(gone)
        assert gone not in after
        p = 1 / n
        assert abs(len(moved) / KEYS - p) <= tolerance(p), f"n={n}"


def test_reordering_moves_no_key_and_every_gateway_gets_its_share(key_hashes):
    for n in range(1, MAX_GATEWAYS + 1):
        a = owners(list(range(n)), key_hashes)
        assert owners(list(reversed(range(n))), key_hashes) == a, f"n={n}"
        p = 1 / n
        for g in range(n):
            assert abs(a.count(g) / KEYS - p) <= tolerance(p), f"n={n} gateway {g}"

"""Host tests of the rdmagate Python package (no RDMA needed): import, the status codes against the C
library's, exceptions, argument checks, and the message when the library cannot be loaded. The guest half
(a real gateway) is tests/rdma/python_client_check.py.

RDMAGATE_CLIENT_LIB names the library of the build under test (ctest sets it)."""
import array
import os
import subprocess
import sys

import pytest

import rdmagate
from rdmagate import client as client_mod


def test_status_numbers_and_names_match_the_c_library():
    lib = rdmagate._lib.load()
    for status in rdmagate.Status:
        assert lib.rdmagate_status_name(int(status)).decode() == status.name
        assert rdmagate.strerror(status) == lib.rdmagate_strerror(int(status)).decode()
    # The C library knows no code this package does not.
    names = {lib.rdmagate_status_name(code).decode() for code in list(range(0, 64)) + list(range(1000, 1064))}
    assert names - {"UNKNOWN"} == {s.name for s in rdmagate.Status}


def test_every_status_has_its_exception_class():
    for status in rdmagate.Status:
        if status == rdmagate.Status.OK:
            continue
        e = rdmagate._status.error_for(status, "msg")
        assert isinstance(e, rdmagate.Error) and type(e) is not rdmagate.Error, status
        assert e.status is status and str(e) == "msg"
    assert isinstance(rdmagate._status.error_for(rdmagate.Status.NOT_FOUND, ""), rdmagate.NotFound)
    unknown = rdmagate._status.error_for(77, "later code")
    assert type(unknown) is rdmagate.Error and unknown.status == 77


def test_create_without_gateways_names_the_problem():
    with pytest.raises(rdmagate.InvalidArgument) as e:
        rdmagate.Client(gateways=[])
    assert e.value.status == rdmagate.Status.INVALID_ARGUMENT
    assert "no gateway configured" in str(e.value)


@pytest.mark.parametrize("gateway", ["not-an-ip", "10.0.0.1:0", "10.0.0.1:99999", "[fe80::1"])
def test_bad_gateway_address_names_it(gateway):
    with pytest.raises(rdmagate.InvalidArgument, match=r"gateway = \"" + gateway.replace("[", r"\[")):
        rdmagate.Client(gateways=[gateway])


def test_bad_option_names_it():
    with pytest.raises(rdmagate.InvalidArgument, match='unknown option "colour"'):
        rdmagate.Client(gateways=["10.0.0.1"], colour="blue")
    with pytest.raises(rdmagate.InvalidArgument, match='progress = "fast"'):
        rdmagate.Client(gateways=["10.0.0.1"], progress="fast")


def test_setup_failure_is_setup_failed_with_a_message():
    # No RDMA on this host, or no device of that name where there is: either way setup fails and says why.
    with pytest.raises(rdmagate.SetupFailed) as e:
        rdmagate.Client(gateways=[("10.0.0.1", 7471)], device="no_such_rdma_device0", progress=rdmagate.Progress.CALLER)
    assert e.value.status == rdmagate.Status.SETUP_FAILED
    assert "no RDMA device" in str(e.value) or "no_such_rdma_device0" in str(e.value)


def test_credentials_are_checked_before_the_device_and_name_the_problem(tmp_path):
    gw = ["10.0.0.1"]
    dev = {"device": "no_such_rdma_device0"}
    with pytest.raises(rdmagate.SetupFailed, match=r"principal \"bad name\" is not 1..64 bytes"):
        rdmagate.Client(gateways=gw, principal="bad name", secret=b"0123456789abcdef", **dev)
    with pytest.raises(rdmagate.SetupFailed, match="is 15 bytes, want 16..64"):
        rdmagate.Client(gateways=gw, principal="app", secret=b"0123456789abcde", **dev)
    with pytest.raises(TypeError, match="secret must be bytes"):
        rdmagate.Client(gateways=gw, principal="app", secret="text", **dev)
    secrets = tmp_path / "secrets.yaml"
    secrets.write_text('secrets:\n  other: "hex:000102030405060708090a0b0c0d0e0f"\n')
    secrets.chmod(0o600)
    with pytest.raises(rdmagate.SetupFailed, match="has no secret for principal app"):
        rdmagate.Client(gateways=gw, principal="app", secrets_file=str(secrets), **dev)
    secrets.chmod(0o640)
    with pytest.raises(rdmagate.SetupFailed, match="has mode"):
        rdmagate.Client(gateways=gw, principal="other", secrets_file=str(secrets), **dev)
    with pytest.raises(rdmagate.InvalidArgument, match="secret: want"):
        _set_option("secret", "00")


def _set_option(name, value):
    lib = rdmagate._lib.load()
    cfg = lib.rdmagate_config_new()
    try:
        rc = lib.rdmagate_config_set(cfg, name.encode(), value.encode())
        raise rdmagate._status.error_for(rc, lib.rdmagate_config_error(cfg).decode())
    finally:
        lib.rdmagate_config_free(cfg)


def test_auth_statuses_have_their_classes():
    assert isinstance(rdmagate._status.error_for(rdmagate.Status.AUTH_DENIED, ""), rdmagate.AuthDenied)
    assert isinstance(rdmagate._status.error_for(rdmagate.Status.FORBIDDEN, ""), rdmagate.Forbidden)
    assert isinstance(rdmagate._status.error_for(rdmagate.Status.QUOTA_EXCEEDED, ""), rdmagate.QuotaExceeded)


def test_gateways_must_be_a_list():
    with pytest.raises(TypeError, match="list of addresses"):
        rdmagate.Client(gateways="10.0.0.1")
    with pytest.raises(TypeError, match="ADDR"):
        rdmagate.Client(gateways=[7471])


def test_key_types():
    assert client_mod._key_bytes("k\u00e9") == "k\u00e9".encode()
    assert client_mod._key_bytes(b"k") == b"k"
    assert client_mod._key_bytes(bytearray(b"k")) == b"k"
    assert client_mod._key_bytes(memoryview(b"k")) == b"k"
    with pytest.raises(TypeError, match="key must be str or bytes-like, not int"):
        client_mod._key_bytes(5)


def test_value_types():
    for value in (b"abc", bytearray(b"abc"), memoryview(b"abc"), array.array("B", b"abc")):
        assert client_mod._readable(value).tobytes() == b"abc"
    assert client_mod._readable(array.array("I", [1, 2])).nbytes == 8
    with pytest.raises(TypeError, match="not str"):
        client_mod._readable("abc")
    with pytest.raises(TypeError, match="buffer protocol, not int"):
        client_mod._readable(3)
    with pytest.raises(TypeError, match="C-contiguous"):
        client_mod._readable(memoryview(b"abcdef")[::2])
    assert not client_mod._writable(bytearray(3)).readonly
    with pytest.raises(TypeError, match="writable buffer, not a read-only bytes"):
        client_mod._writable(b"abc")


def test_library_not_found_says_where_it_looked(tmp_path):
    missing = tmp_path / "librdmagate-client.so.1"
    env = dict(os.environ, RDMAGATE_CLIENT_LIB=str(missing))
    code = "import rdmagate\ntry:\n    rdmagate.Client(gateways=['10.0.0.1'])\nexcept rdmagate.LibraryNotFound as e:\n    print(e)\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "cannot load the client library librdmagate-client.so.1" in out
    assert "RDMAGATE_CLIENT_LIB" in out and str(missing) in out

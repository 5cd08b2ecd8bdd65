"""rdmagate.Client: PUT / GET / DELETE over the C API."""

import ctypes
import threading

from . import _lib
from ._status import Progress, Status, error_for

_INITIAL_STAGING = 64 << 10


def _key_bytes(key):
    """Keys are str (UTF-8) or bytes-like, 1..250 bytes (the gateway refuses others: BadRequest)."""
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    raise TypeError(f"rdmagate: key must be str or bytes-like, not {type(key).__name__}")


def _readable(value):
    """A C-contiguous byte view of any buffer-protocol object (bytes, bytearray, memoryview, array, numpy...)."""
    if isinstance(value, str):
        raise TypeError("rdmagate: value must be bytes-like, not str (encode it)")
    try:
        view = memoryview(value)
    except TypeError:
        raise TypeError(f"rdmagate: value must support the buffer protocol, not {type(value).__name__}") from None
    if not view.c_contiguous:
        raise TypeError("rdmagate: value must be a C-contiguous buffer")
    return view.cast("B")


def _writable(buffer):
    view = _readable(buffer)
    if view.readonly:
        raise TypeError(f"rdmagate: get_into needs a writable buffer, not a read-only {type(buffer).__name__}")
    return view


def _option_text(name, value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Progress):
        return value.name.lower()
    return str(value)


class Client:
    """A connection to rdmagate gateways.

    Client(gateways=["198.18.0.1:7471", ...], progress="caller", device="rxe0", request_timeout_ms=...):
    gateways are "ADDR", "ADDR:PORT", "[V6]:PORT" or (ADDR, PORT) pairs; any other keyword is an option of
    rdmagate_config_set() (rdmagate/client.h). Use as a context manager, or call close().

    Authentication (docs/client.md): principal="app-writer" with secret=bytes (16..64 bytes) or
    secrets_file="/path/secrets.yaml" (the gateway's format, mode 0600). A gateway that refuses them raises
    AuthDenied, AuthConnectionLimit, AuthGatewayUnproven or, without credentials, AuthRequired from
    wait_connected() and from requests; auth_error() says which gateway and why.

    Values are copied through a registered staging buffer: Python memory can be freed and its pages unmapped
    at any time, and a buffer registered with the device must not be (rdmagate/client.h, "Buffers"). One
    thread at a time uses the client (a lock enforces it; in the default progress mode the C client is
    single-threaded).
    """

    def __init__(self, gateways, **options):
        self._lib = _lib.load()
        self._handle = None
        self._lock = threading.Lock()
        self._staging = None
        self._staging_size = 0
        if isinstance(gateways, (str, bytes)):
            raise TypeError("rdmagate: gateways must be a list of addresses, not one string")
        cfg = self._lib.rdmagate_config_new()
        if not cfg:
            raise error_for(Status.NO_MEMORY, "rdmagate_config_new: out of memory")
        try:
            secret = options.pop("secret", None)
            if secret is not None:
                if not isinstance(secret, (bytes, bytearray)):
                    raise TypeError(f"rdmagate: secret must be bytes, not {type(secret).__name__}")
                principal = options.pop("principal", "")
                rc = self._lib.rdmagate_config_set_credentials(cfg, str(principal).encode(), bytes(secret),
                                                               len(secret))
                if rc != Status.OK:
                    raise error_for(rc, self._lib.rdmagate_config_error(cfg).decode())
            settings = [("gateway", self._gateway_text(g)) for g in gateways]
            settings += [(name, _option_text(name, value)) for name, value in options.items()]
            for name, text in settings:
                rc = self._lib.rdmagate_config_set(cfg, name.encode(), text.encode())
                if rc != Status.OK:
                    raise error_for(rc, self._lib.rdmagate_config_error(cfg).decode())
            handle = ctypes.c_void_p()
            err = ctypes.create_string_buffer(512)
            rc = self._lib.rdmagate_client_create(cfg, ctypes.byref(handle), err, len(err))
            if rc != Status.OK:
                raise error_for(rc, err.value.decode(errors="replace") or self._strerror(rc))
            self._handle = handle.value
        finally:
            self._lib.rdmagate_config_free(cfg)

    @staticmethod
    def _gateway_text(g):
        if isinstance(g, str):
            return g
        if isinstance(g, tuple) and len(g) == 2:
            addr, port = g
            return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
        raise TypeError(f"rdmagate: a gateway is \"ADDR[:PORT]\" or (ADDR, PORT), not {g!r}")

    def _strerror(self, rc):
        return self._lib.rdmagate_strerror(rc).decode()

    def _check(self, rc, what):
        if rc != Status.OK:
            raise error_for(rc, f"{what}: {self._strerror(rc)}")

    def _live(self):
        if self._handle is None:
            raise error_for(Status.SHUTDOWN, "rdmagate: the client is closed")
        return self._handle

    def _stage(self, size):
        """The staging buffer, grown (to a power of two) to hold size bytes."""
        if size <= self._staging_size:
            return self._staging
        want = max(_INITIAL_STAGING, 1 << (max(size, 1) - 1).bit_length())
        buf = self._lib.rdmagate_buffer_alloc(self._handle, want)
        if not buf:
            raise error_for(Status.NO_MEMORY, f"rdmagate_buffer_alloc({want}): the buffer pool is exhausted "
                                              "(raise the pool_bytes option)")
        if self._staging:
            self._lib.rdmagate_buffer_free(self._handle, self._staging, self._staging_size)
        self._staging, self._staging_size = buf, want
        return buf

    def close(self):
        with self._lock:
            if self._handle is not None:
                if self._staging:
                    self._lib.rdmagate_buffer_free(self._handle, self._staging, self._staging_size)
                self._lib.rdmagate_client_destroy(self._handle)
                self._handle = None
                self._staging = None
                self._staging_size = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.close()

    def wait_connected(self, timeout=10.0):
        """True once every gateway has a connection up (authenticated when it asks), False at the timeout
        (seconds); raises the Auth* error at once when a gateway refused our authentication."""
        with self._lock:
            rc = self._lib.rdmagate_client_wait_connected(self._live(), int(timeout * 1000))
        if rc in (Status.OK, Status.UNAVAILABLE):
            return rc == Status.OK
        raise error_for(rc, self.auth_error() or self._strerror(rc))

    def auth_error(self):
        """Why the latest authentication failure happened, naming the gateway ("" when none failed)."""
        buf = ctypes.create_string_buffer(512)
        self._lib.rdmagate_client_auth_error(self._live(), buf, len(buf))
        return buf.value.decode(errors="replace")

    def put(self, key, value):
        k = _key_bytes(key)
        view = _readable(value)
        n = view.nbytes
        with self._lock:
            handle = self._live()
            buf = self._stage(n)
            # bytes pass by address; another read-only buffer (whose address ctypes cannot take) is copied once.
            if isinstance(value, bytes):
                src = value
            elif view.readonly:
                src = view.tobytes()
            else:
                src = (ctypes.c_char * n).from_buffer(view)
            ctypes.memmove(buf, src, n)
            self._check(self._lib.rdmagate_put(handle, k, len(k), buf, n), f"put {k!r}")

    def _get_staged(self, k):
        """GETs into the staging buffer, growing it when the value is larger; returns the value's size."""
        size = ctypes.c_uint64()
        handle = self._live()
        self._stage(_INITIAL_STAGING)
        while True:
            rc = self._lib.rdmagate_get(handle, k, len(k), self._staging, self._staging_size, ctypes.byref(size))
            if rc != Status.TOO_SMALL:
                self._check(rc, f"get {k!r}")
                return size.value
            self._stage(size.value)  # the value grew between the two GETs at most a few times

    def get(self, key):
        """The value as bytes; NotFound when there is no such key."""
        k = _key_bytes(key)
        with self._lock:
            n = self._get_staged(k)
            return ctypes.string_at(self._staging, n)

    def get_into(self, key, buffer):
        """Reads the value into a writable buffer-protocol object; returns its size. TooSmall (with nothing
        written) when the buffer cannot hold it."""
        k = _key_bytes(key)
        view = _writable(buffer)
        with self._lock:
            n = self._get_staged(k)
            if n > view.nbytes:
                raise error_for(Status.TOO_SMALL, f"get {k!r}: the value has {n} bytes, the buffer {view.nbytes}")
            ctypes.memmove((ctypes.c_char * view.nbytes).from_buffer(view), self._staging, n)
            return n

    def delete(self, key):
        k = _key_bytes(key)
        with self._lock:
            self._check(self._lib.rdmagate_delete(self._live(), k, len(k)), f"delete {k!r}")

    def progress(self):
        """Polls once (progress="caller"); the number of completions run."""
        with self._lock:
            return self._lib.rdmagate_progress(self._live())

    def event_fd(self):
        """A file descriptor that becomes readable when progress() has work (progress="caller"); -1 otherwise.
        Wait for it only after arm() returned True; never read it."""
        with self._lock:
            return self._lib.rdmagate_event_fd(self._live())

    fileno = event_fd

    def arm(self):
        """True: armed, safe to wait on event_fd(). False: work is pending, call progress() first."""
        with self._lock:
            rc = self._lib.rdmagate_arm(self._live())
        if rc == Status.BUSY:
            return False
        self._check(rc, "arm")
        return True

    def stats(self):
        """Counters as a dict (rdmagate_stats in rdmagate/client.h)."""
        s = _lib.Stats(struct_size=ctypes.sizeof(_lib.Stats))
        with self._lock:
            self._check(self._lib.rdmagate_client_stats(self._live(), ctypes.byref(s)), "stats")
        return {name: getattr(s, name) for name, _ in _lib.Stats._fields_ if name not in ("struct_size", "reserved0")}


def strerror(status):
    """The C library's description of a status code."""
    return _lib.load().rdmagate_strerror(int(status)).decode()

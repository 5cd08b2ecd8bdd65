"""Finds and loads librdmagate-client and declares the C API's prototypes (ctypes: in every python3, nothing
to build or install beside the library)."""

import ctypes
import os
import threading

_lock = threading.Lock()
_lib = None

class LibraryNotFound(OSError):
    """librdmagate-client could not be loaded."""


class Stats(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("submitted", ctypes.c_uint64),
        ("completed", ctypes.c_uint64),
        ("timeouts", ctypes.c_uint64),
        ("connection_lost", ctypes.c_uint64),
        ("busy", ctypes.c_uint64),
        ("reconnects", ctypes.c_uint64),
        ("registrations", ctypes.c_uint64),
        ("connections_up", ctypes.c_uint32),
        ("reserved0", ctypes.c_uint32),
        ("auth_ok", ctypes.c_uint64),
        ("auth_failures", ctypes.c_uint64),
        ("window_requests", ctypes.c_uint64),
        ("unscoped_requests", ctypes.c_uint64),
    ]


def _candidates():
    """Where to look, in order: $RDMAGATE_CLIENT_LIB, the linker's search (find_library), the SONAME."""
    explicit = os.environ.get("RDMAGATE_CLIENT_LIB")
    if explicit:
        return [("$RDMAGATE_CLIENT_LIB", explicit)]
    import ctypes.util  # here: it imports subprocess and friends, needed only for this search

    found = ctypes.util.find_library("rdmagate-client")
    tried = [("find_library('rdmagate-client')", found)] if found else []
    return tried + [("SONAME", "librdmagate-client.so.1")]


def _declare(lib):
    c_int, c_uint, c_size, c_void_p, c_char_p = ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
    protos = {
        "rdmagate_strerror": (c_char_p, [c_int]),
        "rdmagate_status_name": (c_char_p, [c_int]),
        "rdmagate_config_new": (c_void_p, []),
        "rdmagate_config_free": (None, [c_void_p]),
        "rdmagate_config_set": (c_int, [c_void_p, c_char_p, c_char_p]),
        "rdmagate_config_error": (c_char_p, [c_void_p]),
        "rdmagate_config_set_credentials": (c_int, [c_void_p, c_char_p, c_void_p, c_size]),
        "rdmagate_client_create": (c_int, [c_void_p, ctypes.POINTER(c_void_p), c_char_p, c_size]),
        "rdmagate_client_destroy": (None, [c_void_p]),
        "rdmagate_client_wait_connected": (c_int, [c_void_p, ctypes.c_uint32]),
        "rdmagate_client_auth_error": (c_int, [c_void_p, c_char_p, c_size]),
        "rdmagate_put": (c_int, [c_void_p, c_char_p, c_size, c_void_p, c_size]),
        "rdmagate_get": (c_int, [c_void_p, c_char_p, c_size, c_void_p, c_size, ctypes.POINTER(ctypes.c_uint64)]),
        "rdmagate_delete": (c_int, [c_void_p, c_char_p, c_size]),
        "rdmagate_buffer_alloc": (c_void_p, [c_void_p, c_size]),
        "rdmagate_buffer_free": (None, [c_void_p, c_void_p, c_size]),
        "rdmagate_progress": (c_uint, [c_void_p]),
        "rdmagate_event_fd": (c_int, [c_void_p]),
        "rdmagate_arm": (c_int, [c_void_p]),
        "rdmagate_client_stats": (c_int, [c_void_p, ctypes.POINTER(Stats)]),
    }
    for name, (restype, argtypes) in protos.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def load():
    """The loaded library (loaded once per process); LibraryNotFound names every place tried."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for how, name in _candidates():
            try:
                _lib = _declare(ctypes.CDLL(name))
                return _lib
            except (OSError, AttributeError) as e:
                errors.append(f"{how}: {name}: {e}")
        raise LibraryNotFound(
            "rdmagate: cannot load the client library librdmagate-client.so.1 (install the shared library, or set "
            "RDMAGATE_CLIENT_LIB to its path); tried " + "; ".join(errors))

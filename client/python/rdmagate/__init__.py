"""rdmagate: the Python client of the rdmagate RDMA object gateway (over the C API, librdmagate-client.so.1).

    import rdmagate
    with rdmagate.Client(gateways=["198.18.0.1:7471"]) as c:
        c.put("key", b"value")
        assert c.get("key") == b"value"
        c.delete("key")

Errors raise rdmagate.Error (its .status an rdmagate.Status) or a subclass such as rdmagate.NotFound.
The library is loaded from $RDMAGATE_CLIENT_LIB, else where ctypes.util.find_library("rdmagate-client") finds
it, else by its SONAME; rdmagate.LibraryNotFound when none loads. rdmagate.placement computes which gateway a
key lives on, as every rdmagate client does.
"""

from . import placement
from ._lib import LibraryNotFound
from ._status import (AuthConnectionLimit, AuthDenied, AuthGatewayUnproven, AuthRequired, BadRequest,
                      BulkFailed, ConnectionLost, Corrupt, Error, Forbidden, InternalError, InvalidArgument,
                      NoMemory, NoResources, NoSpace, NotFound, Progress, ProtocolError, QuotaExceeded,
                      RegistrationFailed, SetupFailed, Shutdown, Status, StoreUnavailable, TooLarge, TooSmall,
                      Timeout, Unavailable, Busy)
from .client import Client, strerror

__all__ = [
    "Client", "strerror", "placement", "Status", "Progress", "Error", "LibraryNotFound", "NotFound", "TooLarge",
    "NoSpace", "BadRequest", "TooSmall", "NoResources", "BulkFailed", "ConnectionLost", "Unavailable", "Timeout",
    "Busy", "RegistrationFailed", "Shutdown", "ProtocolError", "StoreUnavailable", "Corrupt", "InvalidArgument",
    "SetupFailed", "NoMemory", "InternalError", "AuthRequired", "AuthDenied", "AuthConnectionLimit",
    "AuthGatewayUnproven", "Forbidden", "QuotaExceeded",
]
__version__ = "0.1.0"

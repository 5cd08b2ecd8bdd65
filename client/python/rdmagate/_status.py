"""Status codes and exceptions: the numbers of the C API (rdmagate/client.h), which are C++ client::Status's."""

import enum


class Status(enum.IntEnum):
    OK = 0
    NOT_FOUND = 1
    TOO_LARGE = 2
    NO_SPACE = 3
    BAD_REQUEST = 4
    TOO_SMALL = 5
    NO_RESOURCES = 6
    BULK_FAILED = 7
    CONNECTION_LOST = 8
    UNAVAILABLE = 9
    TIMEOUT = 10
    BUSY = 11
    REGISTRATION = 12
    SHUTDOWN = 13
    PROTOCOL = 14
    STORE_UNAVAILABLE = 15
    CORRUPT = 16
    AUTH_REQUIRED = 17
    AUTH_DENIED = 18
    AUTH_CONNECTION_LIMIT = 19
    AUTH_GATEWAY_UNPROVEN = 20
    FORBIDDEN = 21
    QUOTA_EXCEEDED = 22
    INVALID_ARGUMENT = 1000
    SETUP_FAILED = 1001
    NO_MEMORY = 1002
    INTERNAL = 1003


class Progress(enum.IntEnum):
    CALLER = 1
    THREAD = 2
    EAL_LCORES = 3


class Error(Exception):
    """A request or call failed; .status is the Status (an int for a code this package does not know)."""

    def __init__(self, status, message):
        try:
            status = Status(status)
        except ValueError:
            status = int(status)
        super().__init__(message)
        self.status = status


class NotFound(Error): pass
class TooLarge(Error): pass
class NoSpace(Error): pass
class BadRequest(Error): pass
class TooSmall(Error): pass
class NoResources(Error): pass
class BulkFailed(Error): pass
class ConnectionLost(Error): pass
class Unavailable(Error): pass
class Timeout(Error): pass
class Busy(Error): pass
class RegistrationFailed(Error): pass
class Shutdown(Error): pass
class ProtocolError(Error): pass
class StoreUnavailable(Error): pass
class Corrupt(Error): pass
class AuthRequired(Error): pass
class AuthDenied(Error): pass
class AuthConnectionLimit(Error): pass
class AuthGatewayUnproven(Error): pass
class Forbidden(Error): pass
class QuotaExceeded(Error): pass
class InvalidArgument(Error): pass
class SetupFailed(Error): pass
class NoMemory(Error): pass
class InternalError(Error): pass


_CLASSES = {
    Status.NOT_FOUND: NotFound,
    Status.TOO_LARGE: TooLarge,
    Status.NO_SPACE: NoSpace,
    Status.BAD_REQUEST: BadRequest,
    Status.TOO_SMALL: TooSmall,
    Status.NO_RESOURCES: NoResources,
    Status.BULK_FAILED: BulkFailed,
    Status.CONNECTION_LOST: ConnectionLost,
    Status.UNAVAILABLE: Unavailable,
    Status.TIMEOUT: Timeout,
    Status.BUSY: Busy,
    Status.REGISTRATION: RegistrationFailed,
    Status.SHUTDOWN: Shutdown,
    Status.PROTOCOL: ProtocolError,
    Status.STORE_UNAVAILABLE: StoreUnavailable,
    Status.CORRUPT: Corrupt,
    Status.AUTH_REQUIRED: AuthRequired,
    Status.AUTH_DENIED: AuthDenied,
    Status.AUTH_CONNECTION_LIMIT: AuthConnectionLimit,
    Status.AUTH_GATEWAY_UNPROVEN: AuthGatewayUnproven,
    Status.FORBIDDEN: Forbidden,
    Status.QUOTA_EXCEEDED: QuotaExceeded,
    Status.INVALID_ARGUMENT: InvalidArgument,
    Status.SETUP_FAILED: SetupFailed,
    Status.NO_MEMORY: NoMemory,
    Status.INTERNAL: InternalError,
}


def error_for(status, message):
    """The exception for a non-OK status: its subclass when there is one, else Error."""
    return _CLASSES.get(status, Error)(status, message)

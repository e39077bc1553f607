"""One exception tree and one status table for every frontend.

    OpenInferError                 (code)
     ├── InternalError             INTERNAL        500  INTERNAL
     ├── NotFoundError             NOT_FOUND       404  NOT_FOUND
     ├── InvalidArgumentError      INVALID_ARG     400  INVALID_ARGUMENT
     │    └── UnsupportedEncodingError  ENCODING   415  INVALID_ARGUMENT
     ├── UnavailableError          UNAVAILABLE     503  UNAVAILABLE
     ├── UnsupportedError          UNSUPPORTED     501  UNIMPLEMENTED
     ├── UnknownError              UNKNOWN         400  UNKNOWN
     ├── AlreadyExistsError        ALREADY_EXISTS  400  ALREADY_EXISTS
     └── CancelledError            CANCELLED       400  CANCELLED

The HTTP and gRPC columns are Triton's (`HttpCodeFromError`, `GrpcStatusUtil::CodeToStatus`);
415 is what Triton's HTTP server answers a body in an encoding it cannot inflate. The last
column is the code's number in `TRITONSERVER_Error_Code`, which models raise (`TritonError`).
gRPC codes are kept as names so the core never imports grpc; each frontend resolves them.

A client's mistake is never answered 5xx: whatever the client could have done differently
(a malformed body, a wrong type, a value out of range, an unknown name) is INVALID_ARG or
NOT_FOUND, even where Triton blames itself with a 500.
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class ErrorCode(enum.Enum):
    INTERNAL = "INTERNAL"
    NOT_FOUND = "NOT_FOUND"
    INVALID_ARG = "INVALID_ARG"
    UNAVAILABLE = "UNAVAILABLE"
    UNSUPPORTED = "UNSUPPORTED"
    UNKNOWN = "UNKNOWN"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    CANCELLED = "CANCELLED"
    ENCODING = "ENCODING"


class Status(NamedTuple):
    http: int
    grpc: str
    openai_type: str
    triton: int  # TRITONSERVER_Error_Code
    words: str  # how Triton writes the code before a message (a model's load failure in the index)


STATUS_TABLE: dict[ErrorCode, Status] = {
    ErrorCode.INTERNAL: Status(500, "INTERNAL", "internal_server_error", 1, "Internal"),
    ErrorCode.NOT_FOUND: Status(404, "NOT_FOUND", "not_found_error", 2, "Not found"),
    ErrorCode.INVALID_ARG: Status(400, "INVALID_ARGUMENT", "invalid_request_error", 3, "Invalid argument"),
    ErrorCode.UNAVAILABLE: Status(503, "UNAVAILABLE", "service_unavailable_error", 4, "Unavailable"),
    ErrorCode.UNSUPPORTED: Status(501, "UNIMPLEMENTED", "not_implemented_error", 5, "Unsupported"),
    ErrorCode.UNKNOWN: Status(400, "UNKNOWN", "invalid_request_error", 0, "Unknown"),
    ErrorCode.ALREADY_EXISTS: Status(400, "ALREADY_EXISTS", "invalid_request_error", 6, "Already exists"),
    ErrorCode.CANCELLED: Status(400, "CANCELLED", "cancelled_error", 7, "Cancelled"),
    ErrorCode.ENCODING: Status(415, "INVALID_ARGUMENT", "invalid_request_error", 3, "Invalid argument"),
}


class OpenInferError(Exception):
    """Root of every error the core raises; `code` selects the wire status."""

    code: ErrorCode = ErrorCode.INTERNAL
    #: Raised while the request was admitted, before it was queued (a BLS call words these
    #: errors as Triton's Python backend does).
    before_queue = False
    #: The id of the request it failed, where a frontend knows it before the core does (its
    #: log line names it).
    request_id: str | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def status(self) -> Status:
        return STATUS_TABLE[self.code]

    def __reduce__(self) -> tuple[type[OpenInferError], tuple[str]]:  # picklable across worker processes
        return (type(self), (self.message,))


class InternalError(OpenInferError):
    """The server or a model failed in a way the client could not have prevented."""

    code = ErrorCode.INTERNAL


class NotFoundError(OpenInferError):
    """A model, version or shared-memory region does not exist."""

    code = ErrorCode.NOT_FOUND


class InvalidArgumentError(OpenInferError):
    """The request is malformed or does not fit the model."""

    code = ErrorCode.INVALID_ARG


class UnsupportedEncodingError(InvalidArgumentError):
    """A request body in a content encoding the server cannot inflate (HTTP 415)."""

    code = ErrorCode.ENCODING


class UnavailableError(OpenInferError):
    """The server or model cannot take the request now (not ready, queue full, timeout)."""

    code = ErrorCode.UNAVAILABLE


class UnsupportedError(OpenInferError):
    """The operation exists in the protocol but is not possible here."""

    code = ErrorCode.UNSUPPORTED


class UnknownError(OpenInferError):
    """An error whose cause is not known; Triton maps it to 400."""

    code = ErrorCode.UNKNOWN


class AlreadyExistsError(OpenInferError):
    """Something with that name is already registered."""

    code = ErrorCode.ALREADY_EXISTS


class CancelledError(OpenInferError):
    """The request was cancelled (client gone, shutdown)."""

    code = ErrorCode.CANCELLED


_BY_CODE: dict[ErrorCode, type[OpenInferError]] = {
    cls.code: cls
    for cls in (
        InternalError,
        NotFoundError,
        InvalidArgumentError,
        UnavailableError,
        UnsupportedError,
        UnknownError,
        AlreadyExistsError,
        CancelledError,
        UnsupportedEncodingError,
    )
}


#: TRITONSERVER_Error_Code numbers -> codes (the codes Triton has; ENCODING is ours).
_BY_TRITON: dict[int, ErrorCode] = {
    status.triton: code for code, status in STATUS_TABLE.items() if code is not ErrorCode.ENCODING
}


def error_from_triton(number: int, message: str) -> OpenInferError:
    """A model's `TritonError` (code number) as a core error; an unknown number is INTERNAL."""
    return _BY_CODE[_BY_TRITON.get(number, ErrorCode.INTERNAL)](message)


def error_from_code(code: ErrorCode | str, message: str) -> OpenInferError:
    """Build the error class for a code (used when errors cross a process boundary)."""
    return _BY_CODE[ErrorCode(code)](message)


def status_of(exc: BaseException) -> Status:
    """The wire status for any exception: unknown exceptions are INTERNAL (never blame the client)."""
    if isinstance(exc, OpenInferError):
        return exc.status
    return STATUS_TABLE[ErrorCode.INTERNAL]


def request_label(request_id: str | None) -> str:
    """Triton's prefix for errors about one request: `[request id: <id>] `."""
    return f"[request id: {request_id or '<id_unknown>'}] "


def status_string(exc: BaseException) -> str:
    """An error as Triton writes a status: `Invalid argument: <message>` (repr for a bug)."""
    if isinstance(exc, OpenInferError):
        return f"{exc.status.words}: {exc.message}"
    return repr(exc)

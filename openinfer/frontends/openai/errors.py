"""The one OpenAI error envelope: `{"error": {"message", "type", "param", "code"}}`.

Core errors keep their status from the core's table (`openai_type` column); the frontend only adds
`param` / `code` where a client can act on them (`model`, `model_not_found`). Statuses outside the
table (401 unauthenticated, 413 too large) are built here by the middleware that produces them.
"""

from __future__ import annotations

from typing import Any

import orjson

from ...core.errors import (
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OpenInferError,
    UnavailableError,
    UnsupportedError,
    status_of,
)


def with_details(exc: OpenInferError, param: str | None = None, code: str | None = None) -> OpenInferError:
    """Attach the OpenAI `param` / `code` fields to a core error."""
    exc.param = param  # type: ignore[attr-defined]
    exc.openai_code = code  # type: ignore[attr-defined]
    return exc


def invalid(message: str, param: str | None = None, code: str | None = None) -> OpenInferError:
    return with_details(InvalidArgumentError(message), param, code)


def not_found(message: str, param: str | None = None, code: str | None = None) -> OpenInferError:
    return with_details(NotFoundError(message), param, code)


def unsupported(message: str, param: str | None = None) -> OpenInferError:
    return with_details(UnsupportedError(message), param)


def internal(message: str) -> OpenInferError:
    return InternalError(message)


def unavailable(message: str) -> OpenInferError:
    return UnavailableError(message)


def model_not_found(name: str) -> OpenInferError:
    return not_found(f"The model `{name}` does not exist.", "model", "model_not_found")


def envelope(message: str, type_: str, param: str | None = None, code: Any = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def error_payload(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """HTTP status and envelope for any exception (unknown ones are 500: never blame the client)."""
    status = status_of(exc)
    if isinstance(exc, OpenInferError):
        message = exc.message
    else:
        message = f"internal error: {type(exc).__name__}: {exc}"
    code = getattr(exc, "openai_code", None)
    return status.http, envelope(
        message, status.openai_type, getattr(exc, "param", None), code if code is not None else status.http
    )


def error_bytes(exc: BaseException) -> tuple[int, bytes]:
    status, payload = error_payload(exc)
    return status, orjson.dumps(payload)

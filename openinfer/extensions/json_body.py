"""Reading the small JSON bodies of the extension endpoints (settings, registrations).

Triton answers a body of the wrong JSON type with 500; it is the client's mistake, so these
raise InvalidArgumentError (400), with Triton's wording.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import InvalidArgumentError
from ..frontends.http.app import HttpRequest
from ..frontends.http.codec import loads_object

_JSON_TYPE = {bool: "boolean", int: "unsigned-integer", str: "string"}


def body_object(req: HttpRequest) -> dict[str, Any]:
    """The request body as a JSON object (an empty or non-object body is Triton's parse error)."""
    if not req.body.strip():
        raise InvalidArgumentError("failed to parse the request JSON buffer: The document is empty.")
    return loads_object(req.body)


def typed(
    doc: dict[str, Any], key: str, kind: type[Any], *, required: str | None = None,
    named: bool = True,
) -> Any:
    """A member of the expected JSON type (Triton answers a wrong type 500; it is the client's: 400).
    `named`: the message starts `Unable to parse '<key>': `, as Triton's does on most endpoints."""
    if key not in doc:
        if required is not None:
            raise InvalidArgumentError(required)
        return None
    value = doc[key]
    ok = isinstance(value, kind) and not (kind is int and (isinstance(value, bool) or value < 0))
    if not ok:
        name = _JSON_TYPE[kind]
        message = f"attempt to access JSON non-{name} as {name}"
        raise InvalidArgumentError(f"Unable to parse '{key}': {message}" if named else message)
    return value


def nullable(doc: dict[str, Any], key: str, kind: type, *, named: bool = True) -> Any:
    """`typed`, where JSON null means "not given"."""
    if doc.get(key) is None:
        return None
    return typed(doc, key, kind, named=named)

"""Request parameters with built-in meaning (sequence, priority, timeout) and reserved keys.

Both frontends hand the request's parameters here after turning them into Python values,
so the rules (and Triton's messages) exist once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import InvalidArgumentError
from ..types import InferRequest

RESERVED = frozenset(
    {"sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "headers", "binary_data_output"}
)
_MAX_STRING_ID = 128


def forward_pattern(text: str | None) -> re.Pattern[str] | None:
    """`--http-header-forward-pattern` / `--grpc-header-forward-pattern`: matched anywhere in a
    header's name, without regard to case as Triton matches it, unless it starts with `(?-i)`."""
    if not text:
        return None
    if text.startswith("(?-i)"):
        return re.compile(text[len("(?-i)"):])
    return re.compile(text, re.IGNORECASE)


def forward_headers(pattern: re.Pattern[str], headers: Iterable[tuple[str, object]], request: InferRequest) -> None:
    """Headers (HTTP) or metadata (gRPC) whose names match become request parameters; one that
    names a parameter with a meaning of its own is refused."""
    for key, value in headers:
        if not isinstance(value, str) or not pattern.search(key):
            continue  # binary gRPC metadata (`-bin`) carries no text to forward
        if key in RESERVED or key.startswith("triton_"):
            raise InvalidArgumentError(f"Header '{key}' is reserved for Triton usage and cannot be forwarded.")
        request.parameters[key] = value


def apply_reserved(request: InferRequest, *, allowed_triton_keys: frozenset[str] = frozenset()) -> None:
    """Move the scheduling keys out of `request.parameters` into the request's fields."""
    params = request.parameters
    if not params:
        return
    for key in params:
        if key.startswith("triton_") and key not in allowed_triton_keys:
            if allowed_triton_keys:
                raise InvalidArgumentError(
                    f"parameter keys starting with 'triton_' are reserved for Triton usage. Only the "
                    f"following keys starting with 'triton_' are allowed: "
                    f"{', '.join(sorted(allowed_triton_keys))}"
                )
            raise InvalidArgumentError(
                "parameter keys starting with 'triton_' are reserved for Triton usage and should not "
                "be specified."
            )
    if "sequence_id" in params:
        value = params.pop("sequence_id")
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise InvalidArgumentError(
                "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."
            )
        if isinstance(value, str) and len(value) > _MAX_STRING_ID:
            raise InvalidArgumentError(
                f"sequence_id string must be at most {_MAX_STRING_ID} characters"
            )
        if isinstance(value, int) and value < 0:
            value &= (1 << 64) - 1
        request.sequence_id = value
    for key in ("sequence_start", "sequence_end"):
        if key in params:
            value = params.pop(key)
            if not isinstance(value, bool):
                raise InvalidArgumentError(f"invalid value type for '{key}' parameter, expected bool_param.")
            setattr(request, key, value)
    if "priority" in params:
        value = params.pop("priority")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(
                "invalid value type for 'priority' parameter, expected a non-negative integer."
            )
        request.priority = value
    if "timeout" in params:
        value = params.pop("timeout")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError("invalid value type for 'timeout' parameter, expected int64_param.")
        request.timeout_us = value
    params.pop("headers", None)

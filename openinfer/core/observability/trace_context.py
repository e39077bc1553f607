"""The W3C trace context a request carries: from a client's headers, from an ensemble step's or a
BLS call's calling model, and back as the JSON a Python model's `request.trace().get_context()`
gives. Frontends and backends carry it whether or not tracing is on; the trace extension's
OpenTelemetry spans (`extensions/trace/otel.py`) are what hang from it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_W3C = ("traceparent", "tracestate")


def carrier(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> dict[str, str] | None:
    """The W3C trace context of a client's request (HTTP headers, gRPC metadata), if any."""
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    found = {k.lower(): v for k, v in items if isinstance(k, str) and k.lower() in _W3C}
    return found if "traceparent" in found else None


@dataclass(frozen=True)
class ChildOf:
    """What a composing (ensemble step) or BLS request carries: the calling model's span."""

    carrier: dict[str, str]
    parent_id: int = 0


def child_of(trace: Any) -> ChildOf | None:
    """The link an ensemble step or a BLS call of a traced request carries (None when the
    calling request is not traced in this mode)."""
    child = getattr(trace, "child", None)  # only OpenTelemetry traces have spans to hang from
    return child() if callable(child) else None


def context_json(trace: Any) -> str | None:
    """`request.trace().get_context()` in a Python model: Triton's JSON of the model's span."""
    link = child_of(trace)
    return json.dumps(link.carrier) if link is not None else None


def from_context_json(text: str | None) -> ChildOf | None:
    """A BLS request's `trace=` context back as the link its spans hang from."""
    if not text:
        return None
    try:
        found = carrier(json.loads(text))
    except (ValueError, TypeError, AttributeError):
        return None
    return ChildOf(found) if found else None

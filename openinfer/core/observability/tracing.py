"""What the core asks of tracing on every infer: whether to trace a request, and a trace that
takes the request's moments as they happen. The trace extension's manager
(`openinfer/extensions/trace/`) answers it from `--trace-config` and `/v2/trace/setting`; without
it nothing is traced."""

from __future__ import annotations

from typing import Any, Protocol

from ..types import InferRequest
from .stats import ExecutionTiming


class RequestTrace(Protocol):
    """One sampled request's trace."""

    def queued(self, request: InferRequest) -> None: ...

    def responded(self, response: Any) -> None: ...

    def compute(self, start_ns: int, timing: ExecutionTiming, end_ns: int | None = None) -> None: ...

    def finish(self, end_ns: int | None = None) -> None: ...


class Tracer(Protocol):
    #: Whether any request may be sampled (checked before `sample`, on every request).
    enabled: bool

    @property
    def propagates_context(self) -> bool:
        """Whether a client's W3C trace context is kept on its requests (OpenTelemetry spans)."""

    def sample(self, request: InferRequest, model: Any) -> RequestTrace | None:
        """A trace for the request when its model's settings sample it (also set on
        `request.trace`)."""

    def close(self) -> None:
        """Flush what is pending (server shutdown)."""


class NoTracing:
    """Tracing switched off."""

    enabled = False
    propagates_context = False

    def sample(self, request: InferRequest, model: Any) -> RequestTrace | None:
        return None

    def close(self) -> None:
        return None

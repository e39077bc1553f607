"""Frontend-neutral request, response and tensor objects.

Every wire format (HTTP JSON, HTTP binary, gRPC, shared memory, OpenAI) becomes these, and
every backend consumes them. A tensor is always a numpy array: a zero-copy view where the
incoming bytes allow it, an object array of `bytes` for BYTES.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ParameterValue = bool | int | float | str | bytes


@dataclass(slots=True)
class Tensor:
    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray | None  # None when the data lives in a shared-memory output region
    parameters: dict[str, ParameterValue] = field(default_factory=dict)


@dataclass(slots=True)
class RequestedOutput:
    """An output the client asked for, with its per-output options."""

    name: str
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    binary: bool | None = None  # HTTP `binary_data`; None = frontend default
    classification: int = 0  # top-K as "value:index[:label]" strings; 0 = off
    shm_region: str | None = None
    shm_byte_size: int = 0
    shm_offset: int = 0


@dataclass(slots=True)
class RequestState:
    """What the core and the backends note on a request while it runs; one typed place, so a
    reader sees every piece of per-request state and who may set it."""

    #: Set when the caller stops listening (or asks the model to stop); backends poll it.
    cancelled: threading.Event | None = None
    #: A streaming caller that keeps reading asks the model to stop (a BLS stream's `cancel()`).
    ask_to_stop: Callable[[], None] | None = None
    #: The statistics' failure label when the request ends in error.
    failure_reason: str = "BACKEND"
    #: Sequence-state outputs the core added to the request; hidden from the client.
    state_only_outputs: set[str] | None = None
    #: The shared-memory regions the request pins, released when it ends.
    shm_holds: list[Any] | None = None
    #: Pinned output regions by output name.
    shm_outputs: dict[str, Any] | None = None
    #: A response-cache miss's lookup time, added to its insert time.
    cache_lookup_ns: int = 0
    #: A null request: it fills a sequence slot without a request; it is not counted.
    null: bool = False

    @property
    def is_cancelled(self) -> bool:
        """Whether the caller stopped listening or asked the model to stop."""
        return self.cancelled is not None and self.cancelled.is_set()

    def cancel_event(self) -> threading.Event:
        """The request's cancellation event, made on first use."""
        if self.cancelled is None:
            self.cancelled = threading.Event()
        return self.cancelled


@dataclass(slots=True)
class InferRequest:
    model_name: str
    model_version: str = ""  # "" = let the server choose the newest READY version
    id: str = ""
    inputs: list[Tensor] = field(default_factory=list)
    outputs: list[RequestedOutput] | None = None  # None = every output of the model
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    # Scheduling fields, parsed once from the reserved parameters.
    priority: int = 0
    timeout_us: int = 0
    sequence_id: int | str = 0
    sequence_start: bool = False
    sequence_end: bool = False
    # Filled by the core.
    batch_size: int = 1
    arrival_ns: int = 0
    queue_ns: int = 0  # arrival to the start of its execution
    compute: Any = None  # the `ExecutionTiming` of the execution that ran it
    state: RequestState = field(default_factory=RequestState)
    #: The request's `core.observability.tracing.RequestTrace` when tracing sampled it; None otherwise (one check to skip).
    trace: Any = None
    #: Where its trace hangs from: a client's W3C headers (`traceparent`, `tracestate`), or a
    #: `core.observability.trace_context.ChildOf` for an ensemble step or a BLS call of a traced request.
    trace_parent: Any = None
    #: An ensemble step's: the ensemble's repository, where `--model-namespacing` looks first.
    namespace: str | None = None

    def input(self, name: str) -> Tensor | None:
        for tensor in self.inputs:
            if tensor.name == name:
                return tensor
        return None


@dataclass(slots=True)
class InferResponse:
    model_name: str
    model_version: str
    id: str = ""
    outputs: list[Tensor] = field(default_factory=list)
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    error: Exception | None = None
    final: bool = True  # the last response for its request (decoupled models send several)
    #: Outputs requested in binary form, by name (set by the core from the request).
    requested: dict[str, RequestedOutput] | None = None


@dataclass(slots=True)
class TensorMetadata:
    name: str
    datatype: str
    shape: list[int]


@dataclass(slots=True)
class ModelMetadata:
    name: str
    versions: list[str]
    platform: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]


@dataclass(slots=True)
class ServerMetadata:
    name: str
    version: str
    extensions: list[str]


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One row of the repository index: a model version and its state, or a model's name alone
    when it has no version (never loaded, or its configuration could not be read)."""

    name: str
    version: str = ""
    state: str = ""
    reason: str = ""

    def as_json(self) -> dict[str, str]:
        """Triton's JSON row: `version` and `state` only for a version, `reason` only when set."""
        row = {"name": self.name}
        if self.version:
            row["version"] = self.version
            row["state"] = self.state
        if self.reason:
            row["reason"] = self.reason
        return row

"""The typed messages between the server and a Python model's worker process.

Both sides import this module; `ipc` pickles the messages (arrays out of band). The in-process
path uses the same request and response records without the channel, so one set of rules
turns core requests into model requests and model answers into core responses.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

#: (name, protocol datatype, array) of one tensor.
WireTensor = tuple[str, str, np.ndarray]


class WireRequest(NamedTuple):
    """A request for `execute`, or a BLS request a model makes (key is -1 there)."""

    key: int
    model_name: str
    model_version: str  # "" means the newest ready version
    id: str
    inputs: list[WireTensor]
    outputs: list[str]
    parameters: dict
    correlation_id: int | str
    flags: int  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_START | _END
    timeout: int  # microseconds, 0 = none
    trace: str | None = None  # the OpenTelemetry context (`request.trace().get_context()`)


class WireResponse(NamedTuple):
    outputs: list[WireTensor]
    parameters: dict
    error: tuple[int, str] | None = None  # (TritonError code, message)


def error_response(code: int, message: str) -> WireResponse:
    return WireResponse([], {}, (code, message))


# ------------------------------------------------------------------ server -> worker
class Load(NamedTuple):
    path: str  # the model file
    model_name: str
    backend_dir: str  # where a Python-based backend's model.py lives ("" for a plain model)
    #: The version folder `pb_utils.get_model_dir()` answers ("" means the model file's folder).
    model_dir: str = ""


class AutoComplete(NamedTuple):
    config: dict


class Initialize(NamedTuple):
    args: dict


class Execute(NamedTuple):
    batch_id: int
    requests: list[WireRequest]


class Cancel(NamedTuple):
    keys: list[int]


class Reply(NamedTuple):
    """The answer to a worker's `Call`; streams send several, the last with `final`."""

    call_id: int
    payload: Any
    final: bool
    error: tuple[int, str] | None = None


class CheckReady(NamedTuple):
    """Ask the model's own `is_ready()`; answered by `Readiness`, not in the control order."""


class Finalize(NamedTuple):
    pass


# ------------------------------------------------------------------ worker -> server
class Done(NamedTuple):
    """A control message (load, initialize, ...) succeeded, with its value."""

    value: Any


class Failed(NamedTuple):
    message: str


class Executed(NamedTuple):
    batch_id: int
    #: One per request, None where a response sender answers instead; None for the whole batch
    #: of a decoupled model.
    responses: list[WireResponse | None] | None
    #: Compute input, infer and output nanoseconds, and when the batch began (perf_counter_ns).
    timing: tuple[int, int, int, int] | None
    #: Keys of requests the model released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE.
    rescheduled: list[int]
    #: An error that fails every request of the batch (the model raised, or broke the contract).
    error: str | None = None


class Readiness(NamedTuple):
    """The answer to `CheckReady`: the model's verdict, or why it could not give one."""

    ready: bool
    error: str | None = None


class Respond(NamedTuple):
    key: int
    response: WireResponse | None
    final: bool


class Call(NamedTuple):
    """A model asks the server for a service (BLS, metrics, model loading)."""

    call_id: int
    kind: str
    args: tuple


class CancelCall(NamedTuple):
    call_id: int


class Log(NamedTuple):
    level: int
    message: str
    filename: str
    line: int

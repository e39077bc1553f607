"""Core objects <-> wire records; TritonError codes come from the core's one status table.

Server side only: the worker never sees core types, and the in-process path uses these same
functions, so a request or response means the same on both paths.
"""

from __future__ import annotations

import json
from typing import Any

from ...core.errors import (
    STATUS_TABLE,
    ErrorCode,
    OpenInferError,
    error_from_code,
    error_from_triton,
)
from ...core.observability import trace_context
from ...core.observability.stats import ExecutionTiming
from ...core.types import InferRequest, InferResponse, RequestedOutput, Tensor
from .wire import WireRequest, WireResponse


def triton_error(error: BaseException) -> tuple[int, str]:
    """A core error as a TritonError's code number and message (the core's table has both)."""
    if isinstance(error, OpenInferError):
        return error.status.triton, error.message
    return STATUS_TABLE[ErrorCode.INTERNAL].triton, str(error)


def wire_request(request: InferRequest, key: int) -> WireRequest:
    """A core request as `execute` will receive it."""
    flags = (1 if request.sequence_start else 0) | (2 if request.sequence_end else 0)
    return WireRequest(
        key,
        request.model_name,
        request.model_version,
        request.id,
        [(t.name, t.datatype, t.data) for t in request.inputs],  # type: ignore[misc]
        [o.name for o in request.outputs] if request.outputs else [],
        request.parameters,
        request.sequence_id,
        flags,
        request.timeout_us,
        trace_context.context_json(request.trace),
    )


def core_request(wire: WireRequest) -> InferRequest:
    """A model's BLS request as a core request."""
    request = InferRequest(
        model_name=wire.model_name,
        model_version=wire.model_version,
        id=wire.id,
        inputs=[Tensor(n, d, tuple(a.shape), a) for n, d, a in wire.inputs],
        outputs=[RequestedOutput(n) for n in wire.outputs] if wire.outputs else None,
        parameters=dict(wire.parameters),
        timeout_us=wire.timeout,
        trace_parent=trace_context.from_context_json(wire.trace),  # a BLS call made with trace=request.trace()
    )
    if wire.correlation_id:
        request.sequence_id = wire.correlation_id
        request.sequence_start = bool(wire.flags & 1)
        request.sequence_end = bool(wire.flags & 2)
    return request


def core_response(wire: WireResponse, request: InferRequest) -> InferResponse:
    """A model's answer as the core response to `request`."""
    if wire.error is not None:
        return InferResponse(request.model_name, "", request.id, error=error_from_triton(*wire.error))
    outputs = [Tensor(name, datatype, array.shape, array) for name, datatype, array in wire.outputs]
    return InferResponse(request.model_name, "", request.id, outputs, dict(wire.parameters) if wire.parameters else {})


def wire_response(response: InferResponse) -> WireResponse:
    """A core response (a BLS answer) as the model will read it."""
    if response.error is not None:
        return WireResponse([], {}, triton_error(response.error))
    return WireResponse([(t.name, t.datatype, t.data) for t in response.outputs], response.parameters)  # type: ignore[misc]


def initialize_args(ctx: Any, spec: Any) -> dict[str, str]:
    """The `args` dict `initialize` receives, with Triton's keys."""
    from ..._proto import model_config_pb2 as mc
    from ...core import config as configs

    kinds = {mc.ModelInstanceGroup.KIND_CPU: "CPU", mc.ModelInstanceGroup.KIND_GPU: "GPU"}
    return {
        "model_config": json.dumps(configs.config_to_json(ctx.config)),
        "model_instance_kind": kinds.get(spec.kind, "CPU"),
        "model_instance_name": spec.name,
        "model_instance_device_id": str(spec.device_id),
        "model_repository": str(ctx.model_dir),
        "model_version": str(ctx.version),
        "model_name": ctx.name,
    }


def to_run(
    requests: list[InferRequest], senders: list[Any], keys: list[int] | None = None, rescheduled: list[int] | None = None
) -> tuple[list[InferRequest], list[Any]]:
    """The requests (with their senders) `execute` gets next: those whose callers still wait
    (one that left while its request sat in a batcher's queue is dropped); given the keys of the
    batch just run and those the model released with RESCHEDULE, only the rescheduled ones."""
    if rescheduled is None:
        if not any(s.closed for s in senders):
            return requests, senders
        kept = [not s.closed for s in senders]
    else:
        again = set(rescheduled)
        kept = [k in again and not s.closed for s, k in zip(senders, keys or ())]
    return [r for r, keep in zip(requests, kept) if keep], [s for s, keep in zip(senders, kept) if keep]


def deliver(executed: Any, keys: list[int], requests: list[InferRequest], senders: list[Any], forget: Any) -> None:
    """Answer a batch as the model's `Executed` says: an error fails every request; a returned
    response ends its request; a None leaves it to the request's response sender (or, when the
    model released it with RESCHEDULE, to the next `execute`). `forget(key)` drops a key's
    sender once nothing more may arrive for it."""
    if executed.error is not None:
        error = error_from_code(ErrorCode.INTERNAL, executed.error)
        for key, sender in zip(keys, senders):
            forget(key)
            sender.fail(error)
        return
    if executed.responses is None:  # decoupled: every answer comes through the senders
        return
    rescheduled = set(executed.rescheduled) if executed.rescheduled else ()
    for key, request, sender, wire in zip(keys, requests, senders, executed.responses):
        if wire is None:
            if key in rescheduled:
                forget(key)
            continue
        forget(key)
        response = core_response(wire, request)
        if response.error is not None:
            sender.fail(response.error)
        else:
            sender.send(response, final=True)


def respond(sender: Any, wire: WireResponse | None, final: bool, decoupled: bool) -> bool:
    """A response a model sent through a request's response sender; True once the request is
    over. A model that is not decoupled has one response: the first ends the request, and
    whatever follows is dropped, as Triton's frontends drop it."""
    if wire is None:
        sender.send(None, final=final)
        return final
    response = core_response(wire, sender.request)
    if decoupled:
        sender.send(response, final=final)
        return final
    if response.error is not None:
        sender.fail(response.error)
    else:
        sender.send(response, final=True)
    return True


def execution_timing(reported: tuple[int, int, int, int], earlier: ExecutionTiming) -> ExecutionTiming:
    """A run's timing as `ModelRunner` reported it. Requests a model released with RESCHEDULE run
    again; they stopped queueing when their first run began, so that start is kept."""
    input_ns, infer_ns, output_ns, start_ns = reported
    return ExecutionTiming(input_ns, infer_ns, output_ns, earlier.start_ns or start_ns)

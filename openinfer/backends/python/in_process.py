"""Python models that opt out of their own process and run on the server's event loop.

`parameters { key: "execution_mode" value { string_value: "in_process" } }` trades Triton's
isolation for latency: no socket crossing and no process wake-ups, which is how MLServer's
`parallel_workers: 0` and KServe run models. `execute` runs on the event loop, so it must be
quick (a slow one delays every other request) and must not block: business logic scripting
works through `await request.async_exec()` in an `async def execute`; the blocking `exec()`
is refused. Decoupled models need their own process.
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from typing import Any

from ...core import config as configs
from ...core.backend import InstanceSpec, ModelContext, ModelInstance
from ...core.errors import InternalError, InvalidArgumentError, OpenInferError
from ...core.responses import ResponseSender
from ...core.stats import ExecutionTiming
from ...core.types import InferRequest, InferResponse, RequestedOutput, Tensor
from . import pb_utils

MODE_KEY = "execution_mode"
IN_PROCESS = "in_process"

def wants_in_process(ctx: ModelContext) -> bool:
    params = ctx.config.parameters
    return MODE_KEY in params and params[MODE_KEY].string_value == IN_PROCESS


def _pb_request(request: InferRequest) -> pb_utils.InferenceRequest:
    flags = (1 if request.sequence_start else 0) | (2 if request.sequence_end else 0)
    return pb_utils.InferenceRequest._of_server(
        request.model_name,
        [pb_utils.Tensor._of_server(t.name, t.data, t.datatype) for t in request.inputs],  # type: ignore[arg-type]
        [o.name for o in request.outputs] if request.outputs else [],
        request.sequence_id,
        request.id,
        flags,
        request.timeout_us,
        dict(request.parameters) if request.parameters else {},
    )


def _core_response(request: InferRequest, response: Any) -> InferResponse:
    if not isinstance(response, pb_utils.InferenceResponse):
        raise InternalError(
            f"execute() must return pb_utils.InferenceResponse objects, got {type(response).__name__}"
        )
    error = response._error
    if error is not None:
        from .backend import _error_from_payload  # the one code table for TritonError codes

        return InferResponse(request.model_name, "", request.id, error=_error_from_payload((error.code(), error.message())))
    outputs = []
    for tensor in response._outputs:
        if not isinstance(tensor, pb_utils.Tensor):
            raise InternalError(f"output tensors must be pb_utils.Tensor, got {type(tensor).__name__}")
        array = tensor._array
        outputs.append(Tensor(tensor._name, tensor._datatype, array.shape, array))
    parameters = response._parameters
    return InferResponse(request.model_name, "", request.id, outputs, dict(parameters) if parameters else {})


def bls_request(payload: dict) -> InferRequest:
    """The core request for a model's BLS call (`pb_utils.InferenceRequest`'s payload), whether
    the calling model runs in a worker process or in the server."""
    request = InferRequest(
        model_name=payload["model_name"],
        model_version=payload["model_version"],
        id=payload["id"],
        inputs=[Tensor(n, d, tuple(a.shape), a) for n, d, a in payload["inputs"]],
        outputs=[RequestedOutput(n) for n in payload["outputs"]] if payload["outputs"] else None,
        parameters=dict(payload["parameters"]),
        timeout_us=payload["timeout"],
    )
    cid = payload["correlation_id"]
    if cid:
        request.sequence_id = cid
        request.sequence_start = bool(payload["flags"] & 1)
        request.sequence_end = bool(payload["flags"] & 2)
    return request


async def bls_in_process(server: Any, payload: dict, decoupled: bool) -> list[dict]:
    """`async_exec` of an in-process model: call the core directly, on the same loop."""
    request = bls_request(payload)

    def as_payload(response: InferResponse) -> dict:
        return {"outputs": [(t.name, t.datatype, t.data) for t in response.outputs], "parameters": response.parameters}

    try:
        if decoupled:
            return [as_payload(r) async for r in server.infer_stream(request)]
        return [as_payload(await server.infer(request))]
    except OpenInferError as exc:
        from .backend import _bls_error

        return [_bls_error(exc)]


class InProcessInstance(ModelInstance):
    """A `TritonPythonModel` object living in the server process."""

    def __init__(self, ctx: ModelContext, spec: InstanceSpec, model_class: type) -> None:
        self.ctx = ctx
        self.spec = spec
        self.model = model_class()
        self._bls = functools.partial(bls_in_process, ctx.server)  # what pb_utils' BLS calls reach

    async def start(self) -> None:
        args = {
            "model_config": json.dumps(configs.config_to_json(self.ctx.config)),
            "model_instance_kind": "CPU",
            "model_instance_name": self.spec.name,
            "model_instance_device_id": str(self.spec.device_id),
            "model_repository": str(self.ctx.model_dir),
            "model_version": str(self.ctx.version),
            "model_name": self.ctx.name,
        }
        init = getattr(self.model, "initialize", None)
        if init is None:
            return
        try:
            result = init(args)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            raise InvalidArgumentError(f"Failed to initialize model '{self.ctx.name}': {type(exc).__name__}: {exc}") from exc

    async def execute(self, requests: list[InferRequest], senders: list[ResponseSender]) -> ExecutionTiming:
        started = time.perf_counter_ns()
        pb_requests = [_pb_request(r) for r in requests]
        input_done = time.perf_counter_ns()
        token = pb_utils._in_process_bls.set(self._bls)
        try:
            result = self.model.execute(pb_requests)
            if type(result) is not list and inspect.isawaitable(result):  # async def execute
                result = await result
        except Exception as exc:
            message = str(exc) if isinstance(exc, pb_utils.TritonModelException) else f"{type(exc).__name__}: {exc}"
            for sender in senders:
                sender.fail(InternalError(message))
            return ExecutionTiming()
        finally:
            pb_utils._in_process_bls.reset(token)
        infer_done = time.perf_counter_ns()
        if not isinstance(result, (list, tuple)) or len(result) != len(requests):
            got = len(result) if isinstance(result, (list, tuple)) else type(result).__name__
            error = InternalError(
                "Number of InferenceResponse objects do not match the number of InferenceRequest "
                f"objects. InferenceRequest(s) size is:{len(requests)}, and InferenceResponse(s) size is:{got}"
            )
            for sender in senders:
                sender.fail(error)
            return ExecutionTiming()
        for request, sender, response in zip(requests, senders, result):
            try:
                core = _core_response(request, response)
            except OpenInferError as exc:
                sender.fail(exc)
                continue
            if core.error is not None:
                sender.fail(core.error)
            else:
                sender.send(core, final=True)
        end = time.perf_counter_ns()
        return ExecutionTiming(input_done - started, infer_done - input_done, end - infer_done)

    async def stop(self) -> None:
        finalize = getattr(self.model, "finalize", None)
        if finalize is not None:
            result = finalize()
            if inspect.isawaitable(result):
                await result

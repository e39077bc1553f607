"""Ensembles (`platform: "ensemble"`): a DAG of steps over other loaded models.

Each step maps ensemble tensors onto a composing model's inputs (`input_map`) and that
model's outputs onto new ensemble tensors (`output_map`). A step starts as soon as every
tensor it reads exists, so independent steps run concurrently. Steps call the composing
models through `InferenceServer.infer`, which gives each composing model its own
scheduling and statistics, exactly as if a client had called it.

The instance never holds a request: `execute` hands each request to its own task and
returns at once, so one ensemble instance serves any number of requests side by side.
"""

from __future__ import annotations

import asyncio
import logging

from .._proto import model_config_pb2 as mc
from ..core.backend import Backend, InstanceSpec, ModelContext, ModelInstance
from ..core.errors import (
    InternalError,
    InvalidArgumentError,
    OpenInferError,
    UnsupportedError,
    error_from_code,
)
from ..core.observability import trace_context
from ..core.observability.stats import ExecutionTiming
from ..core.requests.responses import ResponseSender
from ..core.types import InferRequest, InferResponse, RequestedOutput, Tensor

log = logging.getLogger("openinfer.ensemble")


def composing_models(config: mc.ModelConfig) -> list[str]:
    """The models an ensemble calls, in step order, each once."""
    names: list[str] = []
    for step in config.ensemble_scheduling.step:
        if step.model_name and step.model_name not in names:
            names.append(step.model_name)
    return names


def validate_graph(config: mc.ModelConfig) -> None:
    """Reject ensembles whose steps could never all run or never produce the outputs."""
    name = config.name
    steps = list(config.ensemble_scheduling.step)
    if not steps:
        raise InvalidArgumentError(f"ensemble '{name}' must specify one or more 'step' in 'ensemble_scheduling'")
    if config.model_transaction_policy.decoupled:
        raise UnsupportedError(f"ensemble '{name}': decoupled ensembles are not supported")
    inputs = {t.name for t in config.input}
    written: dict[str, int] = {}
    for index, step in enumerate(steps):
        if not step.model_name:
            raise InvalidArgumentError(f"ensemble '{name}' step {index} must specify 'model_name'")
        if not step.input_map or not step.output_map:
            raise InvalidArgumentError(
                f"ensemble '{name}' step {index} (model '{step.model_name}') must map at least one "
                "input and one output"
            )
        for tensor in step.output_map.values():
            if tensor in written or tensor in inputs:
                raise InvalidArgumentError(
                    f"ensemble '{name}': ensemble tensor '{tensor}' is written more than once "
                    f"(step {index}, model '{step.model_name}')"
                )
            written[tensor] = index
    for index, step in enumerate(steps):
        for tensor in step.input_map.values():
            if tensor not in inputs and tensor not in written:
                raise InvalidArgumentError(
                    f"ensemble '{name}' step {index} (model '{step.model_name}') reads ensemble "
                    f"tensor '{tensor}', which is neither an ensemble input nor written by a step"
                )
    for output in config.output:
        if output.name not in written:
            raise InvalidArgumentError(
                f"ensemble '{name}': output '{output.name}' is not written by any step"
            )
    available = set(inputs)
    remaining = list(range(len(steps)))
    while remaining:
        ready = [i for i in remaining if set(steps[i].input_map.values()) <= available]
        if not ready:
            stuck = ", ".join(f"{i} ('{steps[i].model_name}')" for i in remaining)
            raise InvalidArgumentError(f"ensemble '{name}' has steps that can never run (a cycle): {stuck}")
        for i in ready:
            remaining.remove(i)
            available.update(steps[i].output_map.values())


class EnsembleInstance(ModelInstance):
    def __init__(self, ctx: ModelContext, spec: InstanceSpec) -> None:
        self.ctx = ctx
        self.spec = spec
        self.steps = list(ctx.config.ensemble_scheduling.step)
        self.outputs = [t.name for t in ctx.config.output]
        self._tasks: set[asyncio.Task[None]] = set()

    async def execute(
        self, requests: list[InferRequest], senders: list[ResponseSender]
    ) -> ExecutionTiming:
        for request, sender in zip(requests, senders):
            task = asyncio.ensure_future(self._run(request, sender))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return ExecutionTiming()

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _run(self, request: InferRequest, sender: ResponseSender) -> None:
        try:
            tensors = await self._walk(request)
            wanted = [o.name for o in request.outputs] if request.outputs else self.outputs
            outputs = [tensors[name] for name in wanted if name in tensors]
            response = InferResponse(request.model_name, "", request.id, outputs)
            # Triton's ensembles answer with the request's sequence parameters, set or not.
            response.parameters = {"sequence_id": request.sequence_id, "sequence_start": request.sequence_start,
                                   "sequence_end": request.sequence_end}
            sender.send(response, final=True)
        except OpenInferError as exc:
            sender.fail(exc)
        except asyncio.CancelledError:
            sender.fail(InternalError(f"ensemble '{self.ctx.name}' was unloaded while running"))
            raise
        except Exception as exc:  # a bug must fail the request, not vanish in a task
            log.exception("ensemble '%s' failed", self.ctx.name)
            sender.fail(InternalError(f"ensemble '{self.ctx.name}' failed: {exc}"))

    async def _walk(self, request: InferRequest) -> dict[str, Tensor]:
        """Run every step once its inputs exist; the ensemble tensors by name."""
        tensors: dict[str, Tensor] = {t.name: t for t in request.inputs}
        # Optional ensemble inputs the client left out: steps read them as absent.
        absent = {t.name for t in self.ctx.config.input} - set(tensors)
        pending = list(range(len(self.steps)))
        running: dict[asyncio.Task[InferResponse], int] = {}
        try:
            while pending or running:
                for index in list(pending):
                    sources = set(self.steps[index].input_map.values())
                    if sources <= set(tensors) | absent:
                        pending.remove(index)
                        task = asyncio.ensure_future(self._step(index, request, tensors))
                        running[task] = index
                if not running:
                    raise InternalError(f"ensemble '{self.ctx.name}' cannot make progress")
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    index = running.pop(task)
                    response = task.result()  # raises the step's (already named) error
                    step = self.steps[index]
                    for output in response.outputs:
                        target = step.output_map.get(output.name)
                        if target is not None:
                            tensors[target] = Tensor(target, output.datatype, output.shape, output.data)
        finally:
            for task in running:
                task.cancel()
        return tensors

    async def _step(self, index: int, request: InferRequest, tensors: dict[str, Tensor]) -> InferResponse:
        step = self.steps[index]
        inputs = [
            Tensor(model_input, t.datatype, t.shape, t.data)
            for model_input, source in step.input_map.items()
            if (t := tensors.get(source)) is not None
        ]
        call = InferRequest(
            model_name=step.model_name,
            model_version=str(step.model_version) if step.model_version > 0 else "",
            id=request.id,
            inputs=inputs,
            outputs=[RequestedOutput(name) for name in step.output_map],
            parameters=dict(request.parameters),
            priority=request.priority,
            timeout_us=request.timeout_us,
            trace_parent=trace_context.child_of(request.trace),  # its spans hang under the ensemble's
            namespace=str(self.ctx.model_dir.parent),
        )
        server = self.ctx.server
        if server is None:
            raise InternalError(f"ensemble '{self.ctx.name}' runs outside a server")
        try:
            return await server.infer(call)
        except OpenInferError as exc:
            raise error_from_code(
                exc.code,
                f"in ensemble '{self.ctx.name}', step {index} (model '{step.model_name}') failed: "
                f"{exc.message}",
            ) from exc


class EnsembleBackend(Backend):
    name = "ensemble"

    async def create_instance(self, ctx: ModelContext, spec: InstanceSpec) -> ModelInstance:
        validate_graph(ctx.config)
        return EnsembleInstance(ctx, spec)

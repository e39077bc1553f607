"""A loaded model version: its config, instances, scheduler and statistics.

Request validation lives here so every frontend gets the same checks and Triton's messages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._proto import model_config_pb2 as mc
from . import datatypes
from .backend import Backend, InstanceSpec, ModelContext, ModelInstance
from .config import protocol_dims
from .errors import InvalidArgumentError, request_label
from .observability.stats import ModelStats
from .repository.text_model import TextModel
from .requests.inflight import InFlight
from .scheduling.sequence_state import injected_input_names
from .types import InferRequest, ModelMetadata, RequestedOutput, TensorMetadata

if TYPE_CHECKING:
    from .scheduling.base import Scheduler


@dataclass(slots=True)
class TensorSpec:
    name: str
    datatype: str  # protocol string
    dims: tuple[int, ...]  # config dims, without the batch dimension
    optional: bool = False
    label_file: str = ""
    #: Every dimension is -1: any shape of the right rank matches (checked without a loop).
    any_size: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.any_size = all(d == -1 for d in self.dims)


def _fold(specs: dict[str, Any]) -> dict[str, str]:
    """Case-folded name -> name; "" marks a fold shared by two names (ambiguous)."""
    folded: dict[str, str] = {}
    for name in specs:
        key = name.casefold()
        folded[key] = "" if key in folded else name
    return folded


def _matches(dims: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Same-rank `shape` against config `dims` (-1 matches any size)."""
    for d, s in zip(dims, shape):  # a plain loop: no generator per request
        if d != s and d != -1:
            return False
    return True


def _fmt(shape: tuple[int, ...] | list[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _names(names: list[str]) -> str:
    """Tensor names as Triton lists them in its messages: `['A','B']`."""
    return "[" + ",".join(f"'{n}'" for n in names) + "]"


#: What Triton adds to a batching model's shape error: the batch dimension is the usual miss.
_BATCH_NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be "
    "prepended to each input shape. If you want to specify the full shape including the batch dim "
    "in your input dims config, try setting max_batch_size to zero. See the model configuration "
    "docs for more info on max_batch_size."
)


class LoadedModel:
    """One READY (or draining) version of a model."""

    def __init__(
        self, ctx: ModelContext, backend: Backend, stats_observer: Callable[[ModelStats], Any] | None = None
    ) -> None:
        self.ctx = ctx
        self.backend = backend
        self.name = ctx.name
        self.version = ctx.version
        self.version_str = str(ctx.version)
        #: Its repository with `--model-namespacing` (a metrics label); "" without.
        self.namespace = ""
        self.config: mc.ModelConfig = ctx.config
        self.max_batch_size = ctx.config.max_batch_size
        self.decoupled = ctx.config.model_transaction_policy.decoupled
        self.stats = ModelStats(ctx.name, str(ctx.version))
        if stats_observer is not None:
            self.stats.observer = stats_observer(self.stats)
        ctx.stats = self.stats
        self.instances: list[ModelInstance] = []
        #: What each of `instances` was created from (an instance-count update matches on them).
        self.instance_specs: list[InstanceSpec] = []
        #: Instances an update took out, finishing what they hold before they stop.
        self.retiring: set[asyncio.Task[None]] = set()
        self.scheduler: Scheduler | None = None  # set by the repository once instances exist
        self.inputs: dict[str, TensorSpec] = {}
        self.outputs: dict[str, TensorSpec] = {}
        self.labels: dict[str, list[str]] = {}
        self._inputs_folded: dict[str, str] = {}
        self._outputs_folded: dict[str, str] = {}
        self._required_inputs = 0
        self.injected_inputs: frozenset[str] = frozenset()
        #: Requests admitted and not yet concluded (Triton's pending request count).
        self.inflight = InFlight()
        self._text: TextModel | None = None
        self.refresh_specs()

    @property
    def text(self) -> TextModel:
        """What its backend says of it as a text model (read once, on first use)."""
        if self._text is None:
            self._text = self.backend.describe_text(self.ctx)
        return self._text

    def refresh_specs(self) -> None:
        """Index inputs and outputs (after auto-complete may have filled them)."""
        config = self.config
        self.max_batch_size = config.max_batch_size
        self.inputs = {
            t.name: TensorSpec(
                t.name,
                datatypes.config_to_protocol(mc.DataType.Name(t.data_type)),
                tuple(int(d) for d in t.dims),
                optional=t.optional,
            )
            for t in config.input
        }
        self.outputs = {
            t.name: TensorSpec(
                t.name,
                datatypes.config_to_protocol(mc.DataType.Name(t.data_type)),
                tuple(int(d) for d in t.dims),
                label_file=t.label_filename,
            )
            for t in config.output
        }
        self._inputs_folded = _fold(self.inputs)
        self._outputs_folded = _fold(self.outputs)
        # Sequence control and state inputs come from the sequence batcher, not the client.
        self.injected_inputs = injected_input_names(config)
        self._required_inputs = sum(
            1 for n, s in self.inputs.items() if not s.optional and n not in self.injected_inputs
        )
        self.labels = {}
        for spec in self.outputs.values():
            if spec.label_file:
                path = Path(self.ctx.model_dir) / spec.label_file
                try:
                    self.labels[spec.name] = path.read_text(encoding="utf-8").splitlines()
                except OSError:
                    self.labels[spec.name] = []

    # ----------------------------------------------------------------- metadata
    def metadata(self, versions: list[str]) -> ModelMetadata:
        config = self.config
        return ModelMetadata(
            name=self.name,
            versions=versions,
            platform=config.platform or config.backend,
            inputs=[
                TensorMetadata(t.name, self.inputs[t.name].datatype, protocol_dims(config, t))
                for t in config.input
            ],
            outputs=[
                TensorMetadata(t.name, self.outputs[t.name].datatype, protocol_dims(config, t))
                for t in config.output
            ],
        )

    # --------------------------------------------------------------- validation
    def _error(self, request: InferRequest, message: str) -> InvalidArgumentError:
        return InvalidArgumentError(request_label(request.id) + message)

    def resolve_input_name(self, name: str) -> str | None:
        """Exact name first, then a case-insensitive match when it is unambiguous."""
        if name in self.inputs:
            return name
        return self._inputs_folded.get(name.casefold()) or None

    def resolve_output_name(self, name: str) -> str | None:
        if name in self.outputs:
            return name
        return self._outputs_folded.get(name.casefold()) or None

    def validate(self, request: InferRequest) -> None:
        """Triton's request checks; sets `request.batch_size`. Raises INVALID_ARG."""
        names: set[str] = set()
        max_batch_size = self.max_batch_size
        batch_size = 1 if max_batch_size == 0 else -1
        inputs = self.inputs
        if not self._required_inputs <= len(request.inputs) <= len(inputs):  # first, as in Triton
            given = {t.name if t.name in inputs else self.resolve_input_name(t.name) or t.name for t in request.inputs}
            raise self._count_error(request, given)
        for tensor in request.inputs:
            resolved = tensor.name if tensor.name in inputs else self.resolve_input_name(tensor.name)
            if resolved is None:  # Triton names no request id here
                raise InvalidArgumentError(f"unexpected inference input '{tensor.name}' for model '{self.name}'")
            tensor.name = resolved
            if resolved in names:
                raise self._error(request, f"input '{resolved}' already exists in request")
            names.add(resolved)
            spec = inputs[resolved]
            if tensor.datatype != spec.datatype:
                raise self._error(
                    request,
                    f"inference input '{resolved}' data-type is '{tensor.datatype}', but model "
                    f"'{self.name}' expects '{spec.datatype}'",
                )
            shape = tensor.shape
            rank = len(shape)
            if max_batch_size > 0:
                if not shape:
                    raise self._shape_error(request, resolved, spec, shape)
                if batch_size == -1:
                    batch_size = shape[0]
                elif shape[0] != batch_size:
                    raise self._error(
                        request,
                        f"inference input '{resolved}' batch size {shape[0]} does not match the "
                        f"batch size {batch_size} of the other inputs for model '{self.name}'",
                    )
                rank -= 1
            if rank != len(spec.dims) or not (
                spec.any_size or _matches(spec.dims, shape[1:] if max_batch_size > 0 else shape)
            ):
                raise self._shape_error(request, resolved, spec, shape)
        if len(names) < len(self.inputs) and self._missing(names):  # names are the model's: all there
            raise self._count_error(request, names)
        if self.max_batch_size > 0:
            if batch_size > self.max_batch_size:
                raise self._error(
                    request,
                    f"inference request batch-size must be <= {self.max_batch_size} for "
                    f"'{self.name}'",
                )
        request.batch_size = max(batch_size, 0)
        if request.outputs:
            self._resolve_outputs(request, request.outputs)

    def _resolve_outputs(self, request: InferRequest, asked: list[RequestedOutput]) -> None:
        """The model's names for the requested outputs; an output asked for twice is answered
        once, as Triton answers it."""
        outputs = self.outputs
        wanted: set[str] = set()
        kept = []
        for output in asked:
            if output.name not in outputs:
                resolved_output = self.resolve_output_name(output.name)
                if resolved_output is None:  # Triton names no request id here
                    raise InvalidArgumentError(f"unexpected inference output '{output.name}' for model '{self.name}'")
                output.name = resolved_output
            if output.name not in wanted:
                wanted.add(output.name)
                kept.append(output)
        if len(kept) < len(asked):
            request.outputs = kept

    def _missing(self, names: set[str]) -> list[str]:
        return [n for n, s in self.inputs.items() if not s.optional and n not in names and n not in self.injected_inputs]

    def _count_error(self, request: InferRequest, names: set[str]) -> InvalidArgumentError:
        expected = (f"{self._required_inputs} inputs" if self._required_inputs == len(self.inputs)
                    else f"number of inputs between {self._required_inputs} and {len(self.inputs)}")
        return self._error(
            request,
            f"expected {expected} but got {len(names)} inputs for model "
            f"'{self.name}'. Got input(s) {_names(sorted(names))}, but missing required input(s) "
            f"{_names(self._missing(names))}. Please provide all required input(s).",
        )

    def _shape_error(
        self, request: InferRequest, name: str, spec: TensorSpec, shape: tuple[int, ...]
    ) -> InvalidArgumentError:
        expected = [-1, *spec.dims] if self.max_batch_size > 0 else list(spec.dims)
        return self._error(
            request,
            f"unexpected shape for input '{name}' for model '{self.name}'. Expected "
            f"{_fmt(expected)}, got {_fmt(shape)}. {_BATCH_NOTE if self.max_batch_size > 0 else ''}",
        )

    # ---------------------------------------------------------------- in-flight
    async def drain(self, timeout: float | None = None) -> bool:
        """Wait for in-flight requests to finish; False if the timeout ran out first."""
        return await self.inflight.drained(timeout)

    async def stop(self) -> None:
        if self.scheduler is not None:
            await self.scheduler.stop()
        errors: list[BaseException] = []
        for instance in self.instances:
            try:
                await instance.stop()
            except Exception as exc:  # finalize errors must not block the unload
                errors.append(exc)
        await asyncio.gather(*self.retiring, return_exceptions=True)  # their scheduler has stopped
        try:
            await self.backend.unload(self.ctx)
        except Exception as exc:
            errors.append(exc)
        self.instances = []

"""The seam between the core and every backend.

A backend turns a model directory into instances; an instance executes a batch of requests
and answers each through its ResponseSender (once for ordinary models, any number of times
for decoupled ones). The core owns scheduling, validation and statistics; backends only compute.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .._proto import model_config_pb2 as mc
from .observability.custom_metrics import CustomMetrics
from .observability.stats import ExecutionTiming, ModelStats
from .repository.text_model import TextModel, read_text_model
from .requests.responses import ResponseSender
from .types import InferRequest, InferResponse

_LOADS = itertools.count(1)


class ModelHost(Protocol):
    """What a backend may ask of the server its models run in: BLS and ensemble inference,
    model loading (Triton's Python model API), readiness and the custom metric registry.

    `InferenceServer` is the implementation; backends see only this, so the server can change
    behind it and a backend can be tested against a small stand-in."""

    custom_metrics: CustomMetrics

    async def infer(self, request: InferRequest) -> InferResponse: ...

    def infer_stream(self, request: InferRequest) -> AsyncIterator[InferResponse]: ...

    def check_explicit(self) -> None:
        """Raise UnavailableError unless models may be loaded and unloaded by request."""
        ...

    async def load_model(
        self, name: str, config: str | None = None, files: dict[str, bytes] | None = None
    ) -> None: ...

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None: ...

    def model_ready(self, name: str, version: str = "") -> bool: ...

    async def model_readiness(self, name: str, version: str = "") -> bool: ...


@dataclass
class ModelContext:
    """Everything a backend needs to load one version of one model."""

    name: str
    version: int
    config: mc.ModelConfig
    model_dir: Path  # <repository>/<model>
    version_dir: Path  # <repository>/<model>/<version>
    backend_name: str
    #: The server the model runs in; None for a model loaded on its own (tests, tools).
    server: ModelHost | None = None
    #: `--backend-config <backend>,<key>=<value>` entries for this backend.
    backend_config: Mapping[str, str] = field(default_factory=dict)
    auto_complete: bool = True
    #: The version's statistics, for backends that batch inside and record their own executions.
    stats: ModelStats | None = None
    #: The owner of the custom metric families this load creates (`server.custom_metrics`),
    #: e.g. "add_sub:1#7". Unique to each load, so retiring the copy a reload replaced does
    #: not release the new copy's metrics; the repository releases it when the copy stops.
    metrics_owner: str = ""

    def __post_init__(self) -> None:
        if not self.metrics_owner:
            self.metrics_owner = f"{self.name}:{self.version}#{next(_LOADS)}"

    @property
    def decoupled(self) -> bool:
        return self.config.model_transaction_policy.decoupled


@dataclass
class InstanceSpec:
    """One instance to create: which group it belongs to and where it runs."""

    name: str  # e.g. "add_sub_0_1"
    kind: int  # mc.ModelInstanceGroup.Kind
    device_id: int
    group: mc.ModelInstanceGroup


class ModelInstance(abc.ABC):
    """One copy of a model that executes one batch at a time."""

    spec: InstanceSpec
    #: Batches the scheduler may hand over before the first one finishes. An instance that
    #: runs them strictly one after another (a worker process reading a queue) sets 2, so
    #: the next batch is already waiting when the current one ends.
    pipeline_depth: int = 1
    #: Every batch costs the server's event loop a fixed price (a crossing to a worker
    #: process): while the loop is busy, batchers let a batch fill before sending it.
    costly_dispatch: bool = False

    @abc.abstractmethod
    async def execute(
        self, requests: list[InferRequest], senders: list[ResponseSender]
    ) -> ExecutionTiming | None:
        """Run a batch; answer every request through its sender before or after returning.

        Return None when the instance records executions itself in `ModelContext.stats`
        (an engine that batches requests across calls)."""

    async def stop(self) -> None:
        """Release the instance (finalize the model, end its process)."""

    @property
    def healthy(self) -> bool:
        return True

    async def not_ready_reason(self) -> str | None:
        """Why the instance cannot serve now, or None when it can. Backends whose models run
        a readiness check of their own (a process that may die, a model's `is_ready()`)
        answer here; the model-readiness query asks every instance."""
        return None if self.healthy else f"instance '{self.spec.name}' is not healthy"

    def on_failure(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Register a coroutine to run when the instance dies outside a request."""


class Backend(abc.ABC):
    """Loads models of one kind (python, onnxruntime, pytorch, ...)."""

    name: str = ""

    async def auto_complete(self, ctx: ModelContext) -> None:
        """Fill what the config leaves out (inputs, outputs, max_batch_size) in place."""

    @abc.abstractmethod
    async def create_instance(self, ctx: ModelContext, spec: InstanceSpec) -> ModelInstance:
        """Start one instance; raise an OpenInferError if the model cannot load."""

    async def unload(self, ctx: ModelContext) -> None:
        """Called once after every instance of a model version has stopped."""

    def describe_text(self, ctx: ModelContext) -> TextModel:
        """The model as a text model, for the OpenAI frontend: read from its folder as Triton's
        OpenAI frontend reads it, unless the backend knows better (its own files, its engine)."""
        return read_text_model(ctx)

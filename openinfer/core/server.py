"""InferenceServer: the one API every frontend calls.

HTTP, gRPC, OpenAI and in-process callers (BLS, ensembles) translate their wire formats into
the core types and call these methods; nothing here knows about a wire format.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import TRITON_PROTOCOL_VERSION
from .._proto import model_config_pb2 as mc
from .backend import Backend
from .errors import InvalidArgumentError, OpenInferError, UnavailableError, UnsupportedError
from .memory import heap
from .memory.client_memory import ClientMemory
from .model import LoadedModel
from .observability.custom_metrics import CustomMetrics
from .observability.stats import ModelStatistics, ModelStats
from .observability.tracing import NoTracing, Tracer
from .repository.load_requests import check_repository_name, load_overrides, unload_dependents
from .repository.namespaces import NamespacedRepository
from .repository.repository import ControlMode, ModelRepository, RepositoryOptions
from .repository.version_loader import VersionLoader
from .requests.inflight import InFlight
from .requests.outputs import finish_outputs
from .requests.protocols import Protocol, decoupled_refusal
from .requests.response_cache import ResponseCache, cached_response, remember
from .requests.responses import StreamSender, UnarySender
from .requests.versions import parse_version
from .scheduling import InstancePool, Scheduler, make_scheduler
from .scheduling.overlap import LOAD
from .types import (
    IndexRow,
    InferRequest,
    InferResponse,
    ModelMetadata,
    RequestedOutput,
    ServerMetadata,
    Tensor,
)

log = logging.getLogger("openinfer.server")

@dataclass
class ServerOptions:
    model_repositories: list[Path]
    server_id: str = "triton"
    #: The protocol extensions server metadata names (the composition root lists them).
    extensions: list[str] = field(default_factory=list)
    strict_readiness: bool = True
    #: Control mode, start-up models, backend settings and the exit timeout.
    repository: RepositoryOptions = field(default_factory=RepositoryOptions)
    #: Why the server could not initialize (a repository path that is not there). With
    #: `--exit-on-error=false` it serves anyway, as Triton does: not live, not ready.
    init_error: str = ""


@dataclass
class ServerServices:
    """The optional services the composition root builds from the command line and hands to
    the server when it creates it; each default is the service switched off."""

    #: Shared-memory regions (`/v2/systemsharedmemory`, `/v2/cudasharedmemory`); None: no regions.
    shm: ClientMemory | None = None
    #: Which requests are traced, and their traces (the trace extension's manager); off by default.
    trace: Tracer = field(default_factory=NoTracing)
    #: The response cache (`--cache-config`), used by models with `response_cache.enable`.
    cache: ResponseCache | None = None
    #: Builds each loaded model version's latency observer (`--metrics-config` summaries and
    #: histograms); None: no observer.
    stats_observer: Callable[[ModelStats], Any] | None = None
    #: What the server's features keep for their own endpoints, by feature name. The core only
    #: holds it (`InferenceServer.feature_state`); it never reads it.
    features: Mapping[str, object] = field(default_factory=dict)


class InferenceServer:
    """The composition of repository, schedulers and statistics behind every frontend."""

    def __init__(
        self,
        options: ServerOptions,
        backends: Callable[[str], Backend | None],
        schedulers: Callable[[LoadedModel, InstancePool], Scheduler] = make_scheduler,
        services: ServerServices | None = None,
    ) -> None:
        services = services or ServerServices()
        self.options = options
        loader = VersionLoader(backends, schedulers, options.repository, self, services.stats_observer)
        repository = NamespacedRepository if options.repository.namespacing else ModelRepository
        self.repository = repository(options.model_repositories, options.repository, loader)
        self.started = False
        self.exiting = False
        self.inflight = InFlight()
        self.shm = services.shm
        self.trace = services.trace
        self.cache = services.cache
        self._feature_states = dict(services.features)
        #: Metric families models create (`pb_utils.MetricFamily`); /metrics prints them after
        #: the nv_* families, and a model version's are released when it unloads.
        self.custom_metrics = CustomMetrics()

    def feature_state(self, name: str) -> object:
        """What feature `name` made of the settings (None when it made nothing): how a feature's
        endpoints, which are handed only the server, reach their own state."""
        return self._feature_states.get(name)

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        await self.repository.start()
        heap.settle()
        self.started = True

    def loaded_models(self) -> list[LoadedModel]:
        """Every READY model version, in the repository's order: what /metrics and the OpenAI
        model list walk, without reaching into the repository."""
        return self.repository.loaded_models()

    def in_repository(self, name: str) -> bool:
        """Whether the repository has exactly one folder for `name`, so a load can find it."""
        return self.repository.find_model_dir(name) is not None

    def served_within(self, seconds: float) -> bool:
        """Whether any model answered a request in the last `seconds`: its clients are sending."""
        since_ms = time.time_ns() // 1_000_000 - seconds * 1000
        return any(model.stats.last_inference_ms >= since_ms for model in self.repository.loaded_models())

    async def stop(self) -> None:
        """Refuse new work, let in-flight requests finish (bounded), then unload everything."""
        self.exiting = True
        timeout = self.options.repository.exit_timeout_secs
        if not await self.inflight.drained(timeout):
            log.warning("%d request(s) still in flight after %.0fs", self.inflight.count, timeout)
        await self.repository.stop()
        heap.release()
        self.trace.close()
        if self.shm is not None:
            self.shm.close()

    # -------------------------------------------------------------------- health
    def live(self) -> bool:
        return not self.options.init_error and (self.started or not self.exiting)

    def ready(self) -> bool:
        if not self.started or self.exiting or self.options.init_error:
            return False
        return self.repository.all_ready() if self.options.strict_readiness else True

    def model_ready(self, name: str, version: str = "") -> bool:
        """Triton's ModelIsReady, for every frontend: a model that is unknown, unloaded, failed
        or without that version is not ready, which is an answer and not an error; a version
        that is not a number is an error, and so is asking while the server shuts down."""
        if self.exiting:
            raise UnavailableError("Server not ready")
        try:
            model = self.repository.get(name, version)
        except InvalidArgumentError:
            raise
        except OpenInferError:
            return False
        return all(instance.healthy for instance in model.instances) or bool(model.instances)

    async def model_readiness(self, name: str, version: str = "") -> bool:
        """`model_ready`, with every instance asked as well (a dead worker process, a model's
        own `is_ready()`); a not-ready answer is logged with its reason, as Triton logs it."""
        if not self.model_ready(name, version):
            return False
        model = self.repository.get(name, version)
        for instance in model.instances:
            reason = await instance.not_ready_reason()
            if reason is not None:
                log.error("Model '%s' version %s is not ready: %s", name, model.version_str, reason)
                return False
        return True

    # ------------------------------------------------------------------ metadata
    def metadata(self) -> ServerMetadata:
        return ServerMetadata(self.options.server_id, TRITON_PROTOCOL_VERSION, list(self.options.extensions))

    def model(self, name: str, version: str = "") -> LoadedModel:
        """The model that would serve a request (raises Triton's not-found errors)."""
        return self.repository.get(name, version)

    def model_metadata(self, name: str, version: str = "") -> ModelMetadata:
        model = self.repository.get(name, version)
        if parse_version(version) is not None:
            versions = [model.version_str]
        else:
            versions = [str(v) for v in self.repository.ready_versions(name)]
        return model.metadata(versions)

    def model_config(self, name: str, version: str = "") -> mc.ModelConfig:
        return self.repository.get(name, version).config

    # ----------------------------------------------------------------- inference
    def _admit(
        self, request: InferRequest, protocol: Protocol | None = None, stream: bool = False
    ) -> LoadedModel:
        """The model that serves a request, once every rule has passed: a decoupled model is
        refused a one-response call (in the words of the `protocol` it came through), the inputs
        fit the model, inputs named in shared memory are read, and every region the request
        uses is held until it ends."""
        try:
            if self.exiting:
                self.inflight.refuse()
                raise UnavailableError("Server not ready")
            model = self.repository.get(request.model_name, request.model_version, request.namespace)
            if model.decoupled and not stream:
                raise UnsupportedError(decoupled_refusal(protocol, model.name))
            model.validate(request)
            if self.shm is not None:
                self.shm.pin(request)
            else:
                _refuse_shared_memory(request)
        except OpenInferError as exc:
            exc.before_queue = True
            raise
        return model

    def _enter(self, model: LoadedModel) -> None:
        self.inflight.count += 1
        model.inflight.count += 1
        LOAD.entered(self.inflight.count)

    async def infer(self, request: InferRequest, *, protocol: Protocol | None = None) -> InferResponse:
        """One request, one response. `protocol`: the frontend it came through (None in process),
        which Triton's refusal of a decoupled model names."""
        request.arrival_ns = time.perf_counter_ns()
        model = self._admit(request, protocol)
        cache = self.cache if self.cache is not None and model.config.response_cache.enable else None
        trace = self.trace.sample(request, model) if self.trace.enabled else None
        self._enter(model)
        ok = False
        try:
            response, key = cached_response(cache, model, request) if cache is not None else (None, b"")
            if response is None:
                sender = UnarySender(request)
                if trace is not None:
                    trace.queued(request)
                try:
                    await model.scheduler.schedule(request, sender)  # type: ignore[union-attr]
                    response = sender.result
                    if response is None:
                        response = await sender.future
                except asyncio.CancelledError:  # the caller went away: stop the work, count it
                    _cancel(request, sender)
                    raise
                if trace is not None:
                    trace.responded(response)
                if response.error is not None:
                    raise response.error
                if cache is not None:
                    remember(cache, model, key, request, response)
            # The model answered: a success in the statistics, as in Triton, even where shaping
            # the outputs then fails (a shared-memory region too small for one).
            ok = True
            return self._finish(model, request, response)
        finally:
            self._conclude(model, request, trace, ok)

    async def infer_stream(
        self, request: InferRequest, *, protocol: Protocol | None = None
    ) -> AsyncGenerator[InferResponse, None]:
        """Any number of responses (decoupled models); one for ordinary models. `protocol`:
        the frontend it came through (None in process)."""
        request.arrival_ns = time.perf_counter_ns()
        model = self._admit(request, stream=True)
        trace = self.trace.sample(request, model) if self.trace.enabled else None
        self._enter(model)
        ok = False
        first_ns = 0
        try:
            sender = StreamSender(request)
            if trace is not None:
                trace.queued(request)
            # Set when the caller stops reading early (client gone): backends poll it between steps.
            request.state.cancel_event()
            # A caller that keeps reading may still ask the model to stop (a BLS stream's cancel).
            request.state.ask_to_stop = functools.partial(_ask_to_stop, request, sender)
            schedule = asyncio.ensure_future(model.scheduler.schedule(request, sender))  # type: ignore[union-attr]
            try:
                async for response in sender:
                    if not first_ns:
                        first_ns = time.perf_counter_ns() - request.arrival_ns
                    if trace is not None:
                        trace.responded(response)
                    yield self._finish(model, request, response)
                await schedule
            finally:
                if not schedule.done():
                    schedule.cancel()
                if not sender.closed:
                    _cancel(request, sender)
            ok = True
        finally:
            self._conclude(model, request, trace, ok, first_ns)

    def _finish(self, model: LoadedModel, request: InferRequest, response: InferResponse) -> InferResponse:
        """Name the serving model and shape the outputs as the request asked."""
        response.model_name = model.name
        response.model_version = model.version_str
        response.id = request.id
        if response.error is not None:
            return response
        return finish_outputs(
            request, response, model.labels, model.max_batch_size > 0, self._shm_writer(request), model.outputs
        )

    def _conclude(
        self, model: LoadedModel, request: InferRequest, trace: object, ok: bool, first_ns: int = 0
    ) -> None:
        """Bookkeeping once a request has ended, however it ended."""
        if trace is not None:
            trace.finish()  # type: ignore[attr-defined]
        if self.shm is not None:
            self.shm.release(request)
        model.stats.record_request(
            ok,
            time.perf_counter_ns() - request.arrival_ns,
            request.queue_ns,
            request.state.failure_reason,
            first_ns,
            request.compute,
        )
        self.inflight.leave()
        model.inflight.leave()

    def _shm_writer(self, request: InferRequest) -> Callable[[RequestedOutput, Tensor], None] | None:
        """What writes outputs into their regions; None when no output goes to one (pinning
        found them all)."""
        holds = request.state.shm_outputs
        if self.shm is None or not holds:
            return None
        return functools.partial(self.shm.write_output, holds=holds)

    # ---------------------------------------------------------------- repository
    def repository_index(self, ready_only: bool = False, repository_name: str = "") -> list[IndexRow]:
        check_repository_name(repository_name)
        return self.repository.index(ready_only)

    def check_explicit(self) -> None:
        if self.options.repository.control_mode is not ControlMode.EXPLICIT:
            raise UnavailableError("explicit model load / unload is not allowed if polling is enabled")

    async def load_model(
        self, name: str, config: str | None = None, files: dict[str, bytes] | None = None
    ) -> None:
        self.check_explicit()
        try:
            await self.repository.load(name, config, files)
        finally:
            heap.settle()

    async def load_request(
        self, name: str, parameters: Mapping[str, object], repository_name: str = ""
    ) -> None:
        """A client's load request: its parameters are checked here, for every frontend."""
        check_repository_name(repository_name)
        overrides = load_overrides(parameters)
        await self.load_model(name, overrides.config, overrides.files or None)

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        self.check_explicit()
        try:
            await self.repository.unload(name, unload_dependents)
        finally:
            heap.settle()

    async def unload_request(
        self, name: str, parameters: Mapping[str, object], repository_name: str = ""
    ) -> None:
        """A client's unload request (`unload_dependents` checked here, for every frontend)."""
        check_repository_name(repository_name)
        await self.unload_model(name, unload_dependents(parameters))

    # ---------------------------------------------------------------- statistics
    def statistics(self, name: str = "", version: str = "") -> list[ModelStatistics]:
        if not name:
            return [m.stats.snapshot() for m in self.repository.loaded_models()]
        if version:
            try:
                model = self.repository.get(name, version)
            except OpenInferError:
                raise InvalidArgumentError(
                    f"requested model version is not available for model '{name}'"
                ) from None
            return [model.stats.snapshot()]
        ready = self.repository.ready_versions(name)
        if not ready:
            raise InvalidArgumentError(f"requested model '{name}' is not available")
        return [self.repository.get(name, str(v)).stats.snapshot() for v in ready]


def _refuse_shared_memory(request: InferRequest) -> None:
    """Without a shared-memory service, no tensor can live in a region."""
    if any(t.data is None for t in request.inputs) or any(
        o.shm_region is not None for o in request.outputs or ()
    ):
        raise InvalidArgumentError("shared memory is not available")


def _ask_to_stop(request: InferRequest, sender: StreamSender) -> None:
    """Triton's request cancellation from a caller that keeps reading: the backend is told
    (the model's `is_cancelled()` turns true), and whatever it still sends is delivered."""
    request.state.cancel_event().set()
    hook, sender.on_cancel = sender.on_cancel, None
    if hook is not None:
        hook()


def _cancel(request: InferRequest, sender: UnarySender | StreamSender) -> None:
    """Mark a request whose caller stopped listening: engines poll the event, backends get the hook."""
    request.state.cancel_event().set()
    request.state.failure_reason = "CANCELED"
    sender.cancel()

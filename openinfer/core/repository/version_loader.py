"""Turns one version of a model directory into a READY `LoadedModel`: the backend its config
names, its context, auto-complete and validation, its instances, its scheduler and warm-up.
Whatever fails on the way stops what had started."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._proto import model_config_pb2 as mc
from .. import config as configs
from ..backend import Backend, ModelContext, ModelHost
from ..errors import InvalidArgumentError
from ..memory import gpu_limit
from ..model import LoadedModel
from ..observability.stats import ModelStats
from ..scheduling.base import InstancePool, Scheduler
from .instance_update import instance_specs
from .warmup import run_warmup

if TYPE_CHECKING:
    from .repository import RepositoryOptions

SchedulerFactory = Callable[[LoadedModel, InstancePool], Scheduler]


class VersionLoader:
    """Loads and stops model versions for the repository, which decides which to load."""

    def __init__(
        self,
        backends: Callable[[str], Backend | None],
        schedulers: SchedulerFactory,
        options: RepositoryOptions,
        server: ModelHost | None = None,
        stats_observer: Callable[[ModelStats], Any] | None = None,
    ) -> None:
        self.backends = backends
        self.schedulers = schedulers
        #: The repository's options (backend settings, auto-complete).
        self.options = options
        #: What the backends' models may ask of the server (BLS, model loading, metrics).
        self.server = server
        #: Builds each loaded version's latency observer (`--metrics-config`); None: none.
        self.stats_observer = stats_observer

    async def load(
        self, name: str, version: int, config: mc.ModelConfig, model_dir: Path
    ) -> LoadedModel:
        """Version `version` of model `name` from `model_dir`, READY to serve."""
        version_config = mc.ModelConfig()
        version_config.CopyFrom(config)
        version_dir = model_dir / str(version)
        backend_name = configs.resolve_backend(version_config, version_dir)
        backend = self.backends(backend_name) if backend_name else None
        if backend is None:
            if not backend_name:
                raise InvalidArgumentError(
                    f"unable to find backend (none given and none could be inferred) for model '{name}'"
                )
            # Triton's words when neither a backend library nor `<backend-directory>/<name>/model.py` exists.
            raise InvalidArgumentError(
                f"unable to find backend library for backend '{backend_name}', try specifying runtime on "
                "the model configuration."
            )
        ctx = ModelContext(
            name=name,
            version=version,
            config=version_config,
            model_dir=model_dir,
            version_dir=version_dir,
            backend_name=backend_name,
            server=self.server,
            backend_config={
                **self.options.backend_config.get("", {}),  # global `--backend-config k=v`
                **self.options.backend_config.get(backend_name, {}),
            },
            auto_complete=self.options.auto_complete,
        )
        configs.normalize(version_config, name, backend_name)
        if self.options.auto_complete:
            await backend.auto_complete(ctx)
        configs.normalize(version_config, name, backend_name)
        configs.validate(version_config)
        model = LoadedModel(ctx, backend, self.stats_observer)
        try:
            specs = instance_specs(version_config, name)
            model.instance_specs = specs
            model.instances = list(
                await asyncio.gather(*(backend.create_instance(ctx, spec) for spec in specs))
            )
        except BaseException:
            await self.stop(model)
            raise
        model.refresh_specs()
        try:
            gpu_limit.check(name, version_config, self.options.gpu_limits)
        except BaseException:
            await self.stop(model)
            raise
        try:  # a scheduler refuses a bad batching config; the instances must not outlive it
            model.scheduler = self.schedulers(model, InstancePool(model.instances))
        except BaseException:
            await self.stop(model)
            raise
        try:
            if version_config.model_warmup:
                await run_warmup(model)
            warmup = getattr(model.scheduler, "warmup", None)
            if warmup is not None:
                await warmup()
        except BaseException:
            await self.stop(model)
            raise
        return model

    async def stop(self, model: LoadedModel) -> None:
        """Stop a loaded (or half-loaded) version and release the custom metrics it created,
        so the next load of it starts from zero."""
        try:
            await model.stop()
        finally:
            if self.server is not None:
                self.server.custom_metrics.release_owner(model.ctx.metrics_owner)

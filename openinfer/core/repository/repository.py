"""The model repository: scan, version policy, control modes, load/unload/reload.

Layout as Triton users write it: `<repo>/<model>/config.pbtxt` and numbered version folders.
A model that fails to load is UNAVAILABLE with its reason and never stops the others; one
whose configuration cannot be read (a poll failure) gets no state at all, as in Triton.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._proto import model_config_pb2 as mc
from .. import config as configs
from ..errors import (
    InvalidArgumentError,
    NotFoundError,
    OpenInferError,
    UnavailableError,
    status_string,
)
from ..memory import heap
from ..model import LoadedModel
from ..types import IndexRow
from . import instance_update
from . import model_dir as model_folder
from .entries import ModelEntry, State, VersionRecord, index_rows, serving_model
from .storage import RemoteRepository, StorageError
from .version_loader import VersionLoader

log = logging.getLogger("openinfer.repository")

#: names of the models whose loads are under way in this task (catches ensemble cycles).
_LOADING: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("loading", default=())


class ControlMode(enum.Enum):
    NONE = "none"
    POLL = "poll"
    EXPLICIT = "explicit"


@dataclass
class RepositoryOptions:
    control_mode: ControlMode = ControlMode.NONE
    startup_models: list[str] = field(default_factory=list)
    poll_secs: float = 15.0
    auto_complete: bool = True
    model_config_name: str | None = None
    backend_config: dict[str, dict[str, str]] = field(default_factory=dict)
    #: `--exit-timeout-secs`: how long an unloading version, or the whole server at exit,
    #: waits for the requests it still holds.
    exit_timeout_secs: float = 30.0
    #: Object-storage repositories; each one's local copy is also one of the repository paths.
    remotes: list[RemoteRepository] = field(default_factory=list)
    #: `--model-load-retry-count`: more tries for a version that fails to load.
    load_retry: int = 0
    #: `--model-load-gpu-limit`: the largest used fraction of each GPU's memory after a load.
    gpu_limits: dict[int, float] = field(default_factory=dict)
    #: `--model-namespacing`: each repository a namespace of its own (`namespaced`).
    namespacing: bool = False


class ModelRepository:
    """Owns every model's versions and their states."""

    def __init__(self, paths: list[Path], options: RepositoryOptions, loader: VersionLoader) -> None:
        self.paths = [Path(p).resolve() for p in paths]
        self.options = options
        #: Loads and stops the versions this repository decides on.
        self.loader = loader
        self.entries: dict[str, ModelEntry] = {}
        self._poll_task: asyncio.Task[None] | None = None
        #: With `--model-namespacing` (`namespaced`): this repository's namespace, and where an
        #: ensemble's composing model of a given name is found (here, or in another namespace).
        self.namespace = ""
        self.composing_owner: Callable[[str], ModelRepository] = lambda name: self

    # ------------------------------------------------------------------ lookup
    def find_model_dir(self, name: str) -> Path | None:
        found = self._model_dirs(name)
        return found[0] if len(found) == 1 else None

    def has(self, name: str) -> bool:
        """A model of that name is here: its folder, or a model loaded from files a client sent."""
        entry = self.entries.get(name)
        return bool(self._model_dirs(name)) or (entry is not None and entry.override_dir is not None)

    def _model_dirs(self, name: str) -> list[Path]:
        """Every repository folder of that name (more than one: the model is not unique)."""
        if not name or "/" in name or name in (".", "..") or "\x00" in name:
            return []
        return [p / name for p in self.paths if (p / name).is_dir()]

    def scan(self) -> list[str]:
        names: set[str] = set()
        for path in self.paths:
            try:
                for child in os.listdir(path):
                    if (path / child).is_dir() and not child.startswith("."):
                        names.add(child)
            except OSError as exc:
                log.error("cannot read model repository %s: %s", path, exc)
        for remote in self.options.remotes:
            names.update(remote.names())
        return sorted(names)

    async def _sync_remotes(self, names: list[str] | None = None) -> None:
        """Refresh the local copies of object-storage repositories (off the event loop).
        A store that cannot be read is logged and its copy left as it is, so what is loaded
        keeps serving; with `names` (an explicit load) the error is raised instead."""
        for remote in self.options.remotes:
            try:
                await asyncio.to_thread(remote.sync, names)
            except StorageError as exc:
                if names is not None:
                    raise
                log.error("failed to poll model repository %s: %s", remote.url, exc)

    def get(self, name: str, version: str = "", namespace: str | None = None) -> LoadedModel:
        """The model that serves a request, with Triton's errors for every miss (one
        repository is one namespace: `namespace` changes nothing here)."""
        return serving_model(self.entries.get(name), name, version)

    def ready_versions(self, name: str) -> list[int]:
        entry = self.entries.get(name)
        return entry.ready_versions() if entry else []

    def loaded_models(self) -> list[LoadedModel]:
        models = []
        for name in sorted(self.entries):
            entry = self.entries[name]
            for version in entry.ready_versions():
                model = entry.versions[version].model
                if model is not None:
                    models.append(model)
        return models

    def all_ready(self) -> bool:
        """Triton's strict readiness: every model with a state is READY (unloaded ones aside)."""
        return all(entry.settled() for entry in self.entries.values())

    def index(self, ready_only: bool = False) -> list[IndexRow]:
        return index_rows(set(self.scan()) | set(self.entries), self.entries, ready_only)

    # ------------------------------------------------------------------- start
    async def start(self) -> None:
        mode = self.options.control_mode
        if mode is ControlMode.EXPLICIT:
            wanted = self.options.startup_models
            await self._sync_quietly(None if "*" in wanted else list(wanted))
            names = self.scan() if "*" in wanted else wanted
        else:
            await self._sync_remotes()
            names = self.scan()
        await asyncio.gather(*(self._load_quietly(name) for name in names))
        if mode is ControlMode.POLL and self.options.poll_secs > 0:
            self._poll_task = asyncio.create_task(self._poll_loop())

    async def _sync_quietly(self, names: list[str] | None) -> None:
        try:
            await self._sync_remotes(names)
        except StorageError as exc:
            log.error("failed to poll model repository: %s", exc)

    async def _load_quietly(self, name: str) -> None:
        try:
            await self.load(name)
        except OpenInferError as exc:
            entry = self.entries.get(name)
            if entry is None or not entry.poll_error:  # a poll failure is logged where it happens
                log.error("failed to load '%s': %s", name, exc.message)

    async def _poll_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.poll_secs)
            try:
                await self.poll_once()
            except Exception:
                log.exception("repository poll failed")

    async def poll_once(self) -> None:
        """Load added models, unload removed ones, reload changed ones."""
        await self._sync_remotes()
        on_disk = set(self.scan())
        tasks = []
        for name in on_disk:
            entry = self.entries.get(name)
            model_dir = self.find_model_dir(name)
            if model_dir is None:
                continue
            if entry is None or entry.fingerprint != model_folder.fingerprint(model_dir):
                tasks.append(self._load_quietly(name))
        for name, entry in list(self.entries.items()):
            gone = name not in on_disk and entry.override_dir is None
            if gone and any(r.model is not None or r.reason != "unloaded" for r in entry.versions.values()):
                tasks.append(self.unload(name))
        if tasks:
            await asyncio.gather(*tasks)
            heap.settle()

    # ---------------------------------------------------------------- load
    async def load(
        self,
        name: str,
        config_override: str | None = None,
        files: dict[str, bytes] | None = None,
    ) -> None:
        """Load (or reload) every version the policy selects; blocks until done."""
        if not name or "/" in name or name in (".", ".."):  # a folder name: any other character may do
            raise InvalidArgumentError(f"invalid model name '{name}'")
        entry = self.entries.setdefault(name, ModelEntry(name))
        async with entry.lock:
            await self._load_locked(entry, config_override, files)

    async def _load_locked(
        self, entry: ModelEntry, config_override: str | None, files: dict[str, bytes] | None
    ) -> None:
        name = entry.name
        model_dir: Path | None
        if files:
            try:
                if config_override is None:
                    raise InvalidArgumentError(
                        "Load parameter 'config' must be specified for model file override"
                    )
                model_dir = model_folder.write_override_files(name, files)
            except OpenInferError as exc:
                if not entry.versions and entry.override_dir is None:
                    self.entries.pop(name, None)  # a refused request leaves no trace in the index
                raise type(exc)(f"failed to load '{name}', failed to poll from model repository: {exc.message}") from exc
            entry.override_dir = model_dir
        else:
            try:
                await self._sync_remotes([name])
            except StorageError as exc:
                local = self.find_model_dir(name)
                if local is None or any(local.parent == r.local for r in self.options.remotes):
                    if not entry.versions:
                        self.entries.pop(name, None)
                    raise UnavailableError(
                        f"failed to load '{name}', failed to poll from model repository: {exc}"
                    ) from exc
                log.warning("loading '%s' from %s; %s", name, local.parent, exc)  # a local model
            model_dir = self.find_model_dir(name)
            if model_dir is None:
                if not entry.versions:
                    self.entries.pop(name, None)
                log.error("failed to poll model '%s': %s", name, "not unique across all model repositories"
                          if self._model_dirs(name) else "model not found in any model repository.")
                raise NotFoundError(f"failed to load '{name}', failed to poll from model repository")
            if entry.override_dir is not None:  # back to the repository's files
                shutil.rmtree(entry.override_dir.parent, ignore_errors=True)
                entry.override_dir = None
        retained = config_override is None and not files and entry.config_override is not None
        if retained:  # as Triton: a load without a config keeps the one the last load was given
            config_override = entry.config_override
        fingerprint = model_folder.fingerprint(model_dir) + (config_override or "")
        if (config_override is None or retained) and not files and entry.fingerprint == fingerprint \
                and entry.ready_versions():  # unchanged and loaded: only a composing model may be missing
            await self._load_composing(entry, entry.versions[entry.ready_versions()[0]].model.config)  # type: ignore[union-attr]
            return
        config = self._polled_config(entry, model_dir, config_override, fingerprint)
        versions = model_folder.select_versions(config, model_folder.version_dirs(model_dir))
        if not versions:
            reason = f"at least one version must be available under the version policy of model '{name}'"
            self._mark_failed(entry, [], reason)
            entry.fingerprint = fingerprint
            raise InvalidArgumentError(f"load failed for model '{name}': {reason}\n")
        stamps = model_folder.stamps(model_dir)
        kept = {} if files else await instance_update.keep_versions(entry, config, versions, stamps)
        if set(kept) == set(versions) == set(entry.ready_versions()):  # instances changed at most
            entry.fingerprint, entry.polled, entry.config_override = fingerprint, config, config_override
            return
        await self._load_composing(entry, config)

        loading = [version for version in versions if version not in kept]
        old = {v: r for v, r in entry.versions.items() if r.model is not None and v not in kept}
        for version in loading:
            if version not in entry.versions or entry.versions[version].model is None:
                entry.versions[version] = VersionRecord(version, State.LOADING)
        started = time.monotonic()
        results = await asyncio.gather(
            *(self._load_version(name, version, config, model_dir) for version in loading),
            return_exceptions=True,
        )
        failures = self._settle(entry, loading, results, old, time.monotonic() - started)
        entry.fingerprint = fingerprint
        if failures:
            raise InvalidArgumentError(f"load failed for model '{name}': " + "".join(failures))
        entry.config_override = None if files else config_override
        entry.polled, entry.stamps = config, stamps

    async def _load_version(self, name: str, version: int, config: mc.ModelConfig, model_dir: Path) -> LoadedModel:
        """One version, tried again up to `--model-load-retry-count` times when it fails."""
        tries_left = self.options.load_retry
        while True:
            try:
                model = await self.loader.load(name, version, config, model_dir)
                model.namespace = self.namespace
                return model
            except Exception as exc:
                if tries_left <= 0:
                    raise
                tries_left -= 1
                log.warning("failed to load '%s' version %d, trying again: %s", name, version, exc)

    def _polled_config(
        self, entry: ModelEntry, model_dir: Path, config_override: str | None, fingerprint: str
    ) -> mc.ModelConfig:
        """The configuration a load uses, read and checked before any version loads: what
        Triton does while polling, so a failure here is a poll failure, in Triton's words. It
        changes no version's state: a loaded model keeps serving, a new one stays unknown."""
        name = entry.name
        try:
            config = model_folder.read_config(
                model_dir, config_override, self.options.model_config_name, required=not self.options.auto_complete
            )
            configs.check_name(config, name)
        except OpenInferError as exc:
            log.error("Poll failed for model directory '%s': %s", name, exc.message)
            entry.poll_error, entry.fingerprint = exc.message, fingerprint
            raise InvalidArgumentError(
                f"failed to load '{name}', failed to poll from model repository: {exc.message}"
            ) from exc
        entry.poll_error = ""
        return config

    def poll_failed(self) -> list[str]:
        """The models whose last poll failed (a configuration that does not parse, ...)."""
        return sorted(name for name, entry in self.entries.items() if entry.poll_error)

    def _settle(
        self, entry: ModelEntry, versions: list[int], results: list[Any], old: dict[int, VersionRecord], elapsed: float
    ) -> list[str]:
        """Record a load's outcome, all or nothing as in Triton. When every version loaded they
        are READY, and what they replace or what fell out of the version policy is retired.
        When one failed it is UNAVAILABLE with its reason, the versions that did load are
        unloaded again, and what served before keeps serving. Returns the failures."""
        name = entry.name
        failures = [
            f"version {v} is at UNAVAILABLE state: {status_string(r)};\n"
            for v, r in zip(versions, results) if not isinstance(r, LoadedModel)
        ]
        for version, result in zip(versions, results):
            previous = old.get(version)
            if isinstance(result, LoadedModel) and not failures:
                result.stats.load_duration_s = elapsed
                entry.versions[version] = VersionRecord(version, State.READY, "", result)
                continue
            if isinstance(result, LoadedModel):
                asyncio.ensure_future(self._retire(result))
                reason = "unloaded"
            else:
                reason = status_string(result)
            if previous is not None and previous.model is not None:
                entry.versions[version] = previous  # the failed reload leaves the old one serving
                old.pop(version)
            else:
                entry.versions[version] = VersionRecord(version, State.UNAVAILABLE, reason)
        if failures:
            log.info("failed to load '%s'", name)
            return failures
        for version, record in old.items():  # replaced, or out of the version policy now
            if record.model is not None and entry.versions.get(version) is not record:
                asyncio.ensure_future(self._retire(record.model))
            if version not in versions:
                entry.versions[version] = VersionRecord(version, State.UNAVAILABLE, "unloaded")
                if record.model is not None:
                    asyncio.ensure_future(self._retire(record.model))
        log.info("successfully loaded '%s'", name)
        return failures

    async def _load_composing(self, entry: ModelEntry, config: mc.ModelConfig) -> None:
        """An ensemble's composing models load first, as Triton loads them along with it."""
        stack = _LOADING.get()
        token = _LOADING.set((*stack, entry.name))
        try:
            for step in config.ensemble_scheduling.step:
                dep = step.model_name
                owner = self.composing_owner(dep) if dep else self
                if not dep or owner.ready_versions(dep):
                    continue
                if dep == entry.name or dep in stack:
                    reason = f"ensemble '{entry.name}' depends on itself through model '{dep}'"
                    self._mark_failed(entry, [], reason)
                    raise InvalidArgumentError(f"load failed for model '{entry.name}': {reason}")
                try:
                    await owner.load(dep)
                except OpenInferError as exc:
                    reason = f"composing model '{dep}' is not available: {exc.message}"
                    self._mark_failed(entry, [], reason)
                    raise InvalidArgumentError(f"load failed for model '{entry.name}': {reason}") from exc
                if dep not in entry.composing:
                    entry.composing.append(dep)
        finally:
            _LOADING.reset(token)

    def _mark_failed(self, entry: ModelEntry, versions: list[int], reason: str) -> None:
        if not entry.ready_versions():
            for version in versions or [1]:
                entry.versions[version] = VersionRecord(version, State.UNAVAILABLE, reason)

    # -------------------------------------------------------------- unload
    async def unload(self, name: str, unload_dependents: bool = False) -> None:
        entry = self.entries.get(name)
        if entry is None:
            return
        async with entry.lock:
            models = []
            for record in entry.versions.values():
                if record.model is not None:
                    record.state = State.UNLOADING
                    models.append(record.model)
            await asyncio.gather(*(self._retire(m) for m in models))
            for version, record in list(entry.versions.items()):
                if record.model is not None:
                    log.info("successfully unloaded '%s' version %d", name, version)
                entry.versions[version] = VersionRecord(version, State.UNAVAILABLE, "unloaded")
            entry.fingerprint, entry.config_override = "", None
            if entry.override_dir is not None:
                shutil.rmtree(entry.override_dir.parent, ignore_errors=True)
                entry.override_dir = None
            composing, entry.composing = entry.composing, []
        if unload_dependents:
            for dep in composing:
                await self.unload(dep, unload_dependents=True)
        for other in [n for n, e in self.entries.items() if n != name and name in e.steps()]:
            await self.unload(other)  # as Triton: an ensemble goes with a model it runs

    async def _retire(self, model: LoadedModel) -> None:
        """Let in-flight requests finish, then stop the instances."""
        await model.drain(self.options.exit_timeout_secs)
        await self.loader.stop(model)

    async def stop(self) -> None:
        if self._poll_task is not None:
            self._poll_task.cancel()
        await asyncio.gather(*(self.unload(name) for name in list(self.entries)))
        for remote in self.options.remotes:
            remote.close()

"""The Python backend: turns a model folder with a `model.py` into instances.

Each instance runs in its own worker process (`instance.PythonInstance`), as Triton's stubs
do, unless the model asks for `execution_mode: in_process` (`in_process.InProcessInstance`).
Both reach the server through one `ModelServices` per loaded version.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from ..._proto import model_config_pb2 as mc
from ...core import config as configs
from ...core.backend import Backend, InstanceSpec, ModelContext, ModelInstance
from ...core.errors import InvalidArgumentError, OpenInferError
from . import execution_env, ipc, spin
from .in_process import InProcessInstance, wants_in_process
from .instance import PythonInstance
from .runner import auto_complete, describe, load_model_class
from .services import ModelServices
from .wire import AutoComplete, Done, Failed, Load
from .worker_process import WorkerProcess

log = logging.getLogger("openinfer.python")

#: Characters Triton refuses in a stub's name (the model instance's, or the model's for
#: auto-complete): the name reaches a process's command line.
INVALID_STUB_CHARS = frozenset(";|&$`<>()[]{}\\\"'*?~#!")


def check_stub_name(name: str) -> None:
    if not name or INVALID_STUB_CHARS.intersection(name):
        raise InvalidArgumentError("Invalid stub name: contains invalid characters")


class _AutoCompleteOwner:
    """Owns the worker that runs `auto_complete_config` until instance 0 takes it over."""

    def __init__(self, ctx: ModelContext) -> None:
        self.ctx = ctx
        self.name = ctx.name

    def dispatch(self, worker: WorkerProcess, message: Any) -> None:
        if type(message) in (Done, Failed):
            worker.answered(message)

    def worker_died(self, worker: WorkerProcess, code: int | None) -> None:
        pass


class PythonBackend(Backend):
    name = "python"

    def __init__(self) -> None:
        self._services: dict[int, ModelServices] = {}
        self._in_process_classes: dict[int, type] = {}
        ipc.cleanup_stale()

    def services(self, ctx: ModelContext) -> ModelServices:
        """The one `ModelServices` of a loaded model version."""
        services = self._services.get(id(ctx))
        if services is None:
            services = self._services[id(ctx)] = ModelServices(ctx.server, ctx.metrics_owner)
        return services

    def _model_path(self, ctx: ModelContext) -> Path:
        if wants_in_process(ctx) and execution_env.configured_path(ctx) is not None:
            raise InvalidArgumentError(
                f"model '{ctx.name}': {execution_env.PARAMETER} runs the model on its own interpreter, "
                "in a worker process; the in_process execution mode cannot honour it"
            )
        if ctx.backend_name != self.name:  # a Python-based backend: one model.py for all its models
            backends = ctx.backend_config.get("backend-directory", "/opt/tritonserver/backends")
            path = Path(backends) / ctx.backend_name / "model.py"
            if not path.is_file():
                raise InvalidArgumentError(
                    f"unable to find Python backend based backend library 'model.py' for model "
                    f"'{ctx.name}', searched: '{path}'"
                )
            return path
        filename = configs.model_file(ctx.config, "python")
        path = ctx.version_dir / filename
        if not path.is_file():
            raise InvalidArgumentError(
                f"Failed to preinitialize Python stub: Python model file not found in '{path}'"
            )
        return path

    def _in_process_class(self, ctx: ModelContext) -> type:
        """Import the model into the server process (once per loaded version)."""
        model_class = self._in_process_classes.get(id(ctx))
        if model_class is None:
            try:
                model_class = load_model_class(str(self._model_path(ctx)), f"openinfer_model_{ctx.name}_{ctx.version}")
            except OpenInferError:
                raise
            except Exception as exc:
                raise InvalidArgumentError(describe(exc)) from exc
            self._in_process_classes[id(ctx)] = model_class
        return model_class

    async def start_worker(self, owner: Any) -> WorkerProcess:
        check_stub_name(owner.name)
        ctx = owner.ctx
        path = self._model_path(ctx)
        poll = _poll_variables(ctx)  # checked before an environment is unpacked for nothing
        env = await execution_env.prepare(ctx)  # None: the server's own interpreter
        variables = {**(env.variables if env is not None else {}), **poll}
        worker = WorkerProcess(owner, python=env.python if env is not None else None)
        await worker.spawn(variables)
        backend_dir = str(path.parent) if ctx.backend_name != self.name else ""
        try:
            await worker.call(Load(str(path), ctx.name, backend_dir, str(ctx.version_dir)), timeout=600)
            worker.forget_arena_names()  # both sides have them mapped: nothing can leak now
        except BaseException:
            await worker.kill()
            raise
        return worker

    async def auto_complete(self, ctx: ModelContext) -> None:
        """Run the model's `auto_complete_config`, in a worker of its own that then ends, as
        Triton's auto-complete stub does (each instance's worker carries its own name)."""
        if wants_in_process(ctx):
            try:
                updated = auto_complete(self._in_process_class(ctx), configs.config_to_json(ctx.config))
            except OpenInferError:
                raise
            except Exception as exc:
                raise InvalidArgumentError(describe(exc)) from exc
        else:
            worker = await self.start_worker(_AutoCompleteOwner(ctx))
            try:
                updated = await worker.call(AutoComplete(configs.config_to_json(ctx.config)), timeout=600)
            finally:
                await worker.kill()
        fresh = mc.ModelConfig()
        json_format.ParseDict(updated, fresh, ignore_unknown_fields=True)
        ctx.config.CopyFrom(fresh)

    async def create_instance(self, ctx: ModelContext, spec: InstanceSpec) -> ModelInstance:
        if wants_in_process(ctx):
            in_process = InProcessInstance(ctx, spec, self._in_process_class(ctx), self.services(ctx))
            await in_process.start()
            return in_process
        instance = PythonInstance(ctx, spec, self, self.services(ctx))
        await instance.start()
        return instance

    async def unload(self, ctx: ModelContext) -> None:
        self._in_process_classes.pop(id(ctx), None)
        self._services.pop(id(ctx), None)


def _poll_variables(ctx: ModelContext) -> dict[str, str]:
    """The worker's environment for the model's `worker_poll_us`, if it sets one."""
    entry = ctx.config.parameters.get(spin.POLL_PARAMETER)
    try:
        limit = spin.poll_limit_us(None if entry is None else entry.string_value)
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from None
    return {} if limit is None else {spin.POLL_ENV: str(limit)}

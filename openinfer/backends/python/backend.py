"""The Python backend, server side: one worker process per instance, like Triton's stubs.

Each instance talks to its process over a socketpair (see `ipc`). A process that dies fails
only the requests it held, with a clear error, and is started again; the server and the
other models never notice.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from ..._proto import model_config_pb2 as mc
from ...core import config as configs
from ...core.backend import Backend, InstanceSpec, ModelContext, ModelInstance
from ...core.errors import (
    ErrorCode,
    InternalError,
    InvalidArgumentError,
    OpenInferError,
    UnavailableError,
    error_from_code,
)
from ...core.responses import ResponseSender
from ...core.stats import ExecutionTiming
from ...core.types import InferRequest, InferResponse, Tensor
from . import ipc
from .in_process import InProcessInstance, bls_request, wants_in_process
from .worker import auto_complete, load_model_class

log = logging.getLogger("openinfer.python")

# pb_utils.TritonError codes <-> core codes.
_CODES = [
    ErrorCode.UNKNOWN,
    ErrorCode.INTERNAL,
    ErrorCode.NOT_FOUND,
    ErrorCode.INVALID_ARG,
    ErrorCode.UNAVAILABLE,
    ErrorCode.UNSUPPORTED,
    ErrorCode.ALREADY_EXISTS,
    ErrorCode.CANCELLED,
]
_CODE_NUMBERS = {code: i for i, code in enumerate(_CODES)}
_KIND_NAMES = {mc.ModelInstanceGroup.KIND_CPU: "CPU", mc.ModelInstanceGroup.KIND_GPU: "GPU"}


def _error_from_payload(payload: tuple[int, str]) -> OpenInferError:
    code, message = payload
    return error_from_code(_CODES[code] if 0 <= code < len(_CODES) else ErrorCode.INTERNAL, message)


def _request_payload(request: InferRequest, key: int) -> dict:
    flags = (1 if request.sequence_start else 0) | (2 if request.sequence_end else 0)
    return {
        "key": key,
        "model_name": request.model_name,
        "id": request.id,
        "inputs": [(t.name, t.datatype, t.data) for t in request.inputs],
        "outputs": [o.name for o in request.outputs] if request.outputs else [],
        "parameters": request.parameters,
        "correlation_id": request.sequence_id,
        "flags": flags,
        "timeout": request.timeout_us,
    }


def _response_from_payload(payload: dict, request: InferRequest) -> InferResponse:
    if "error" in payload:
        return InferResponse(
            request.model_name, "", request.id, error=_error_from_payload(payload["error"])
        )
    outputs = [
        Tensor(name, datatype, tuple(array.shape), array) for name, datatype, array in payload["outputs"]
    ]
    return InferResponse(request.model_name, "", request.id, outputs, payload.get("parameters") or {})


class WorkerProcess:
    """One running worker: the process, its channel and the reader that dispatches answers."""

    def __init__(self, owner: PythonInstance) -> None:
        self.owner = owner
        self.process: asyncio.subprocess.Process | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task[None] | None = None
        self.control: asyncio.Future[Any] | None = None
        self.dead = False
        self.exit_code: int | None = None
        #: Set once the death is handled (exit code known, held requests failed).
        self.reaped = asyncio.Event()
        self._outbox: list[bytes] = []
        #: Shared rings for large tensors: one per direction, mapped by both processes.
        self.to_worker: ipc.Arena | None = None
        self.from_worker: ipc.Arena | None = None

    async def spawn(self) -> None:
        parent, child = socket.socketpair()
        self.to_worker = ipc.Arena.create(ipc.shm_prefix())
        self.from_worker = ipc.Arena.create(ipc.shm_prefix())
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "openinfer.backends.python.worker",
            str(child.fileno()),
            self.to_worker.name,
            self.from_worker.name,
            pass_fds=[child.fileno()],
            env=env,
            cwd=str(self.owner.ctx.version_dir) if self.owner.ctx.version_dir.is_dir() else None,
        )
        child.close()
        reader, self.writer = await asyncio.open_connection(sock=parent)
        self.reader_task = asyncio.create_task(self._read_loop(reader))

    async def call(self, *message: Any, timeout: float | None = None) -> Any:
        """A control message (load, auto_complete, initialize, finalize) and its answer."""
        loop = asyncio.get_running_loop()
        self.control = loop.create_future()
        self.send(message)
        answer = await asyncio.wait_for(self.control, timeout)
        if answer[0] == "error":
            raise InvalidArgumentError(answer[1])
        return answer[1]

    def send(self, message: Any) -> None:
        """Queue a message; everything queued in one loop iteration goes out in one write."""
        if self.dead or self.writer is None:
            raise UnavailableError(f"Stub process '{self.owner.spec.name}' is not healthy.")
        if not self._outbox:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outbox.extend(ipc.encode(message, self.to_worker))

    def _flush(self) -> None:
        frames, self._outbox = self._outbox, []
        if self.writer is not None and not self.dead:
            self.writer.write(b"".join(frames))

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        header = ipc._HEADER
        try:
            while True:
                length, count = header.unpack(await reader.readexactly(header.size))
                payload = await reader.readexactly(length)
                buffers = await ipc.read_buffer_names_async(reader, count, self.from_worker) if count else []
                self.owner.dispatch(self, ipc.decode(payload, buffers))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        except Exception:
            log.exception("worker channel of '%s' failed", self.owner.spec.name)
        await self._died()

    async def _died(self) -> None:
        self.dead = True
        code = None
        if self.process is not None:
            try:
                code = await asyncio.wait_for(self.process.wait(), 5)
            except asyncio.TimeoutError:
                self.process.kill()
            ipc.cleanup_leftovers(self.process.pid)
        self._release_arenas()
        if self.control is not None and not self.control.done():
            self.control.set_result(("error", f"worker process exited with code {code}"))
        self.exit_code = code
        try:
            self.owner.worker_died(self, code)
        finally:
            self.reaped.set()

    def forget_arena_names(self) -> None:
        """Unlink the rings' names once both processes hold their mappings."""
        for arena in (self.to_worker, self.from_worker):
            if arena is not None:
                arena.unlink()

    def _release_arenas(self) -> None:
        for arena in (self.to_worker, self.from_worker):
            if arena is not None:
                arena.close(unlink=True)
        self.to_worker = self.from_worker = None

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
        if self.reader_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.reader_task), 5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass

    async def finalize(self, timeout: float) -> None:
        try:
            if not self.dead:
                await self.call("finalize", timeout=timeout)
        except Exception as exc:
            log.warning("finalize of '%s' failed: %s", self.owner.spec.name, exc)
        finally:
            if self.writer is not None:
                self.writer.close()
            if self.process is not None:
                try:
                    await asyncio.wait_for(self.process.wait(), timeout)
                except asyncio.TimeoutError:
                    self.process.kill()


class PythonInstance(ModelInstance):
    """An instance of a Python model; its worker is restarted if it dies.

    The worker runs `execute` calls one at a time, in order, so a second batch can wait in
    its queue: the process never idles between batches (Triton's one-batch-per-instance
    contract holds inside the process).
    """

    pipeline_depth = 2

    def __init__(self, ctx: ModelContext, spec: InstanceSpec, backend: PythonBackend) -> None:
        self.ctx = ctx
        self.spec = spec
        self.backend = backend
        self.worker: WorkerProcess | None = None
        self._keys = itertools.count()
        self._batches: dict[int, tuple[asyncio.Future[Any], list[ResponseSender]]] = {}
        self._senders: dict[int, ResponseSender] = {}
        self._ready = asyncio.Event()
        self._stopping = False
        params = ctx.config.parameters
        timeout = params["execute_timeout_secs"].string_value if "execute_timeout_secs" in params else ""
        self.execute_timeout = float(timeout) if timeout else None

    # --------------------------------------------------------------- lifecycle
    async def start(self, worker: WorkerProcess | None = None) -> None:
        if worker is None:
            worker = await self.backend.start_worker(self)
        worker.owner = self
        args = {
            "model_config": json.dumps(configs.config_to_json(self.ctx.config)),
            "model_instance_kind": _KIND_NAMES.get(self.spec.kind, "CPU"),
            "model_instance_name": self.spec.name,
            "model_instance_device_id": str(self.spec.device_id),
            "model_repository": str(self.ctx.model_dir),
            "model_version": str(self.ctx.version),
            "model_name": self.ctx.name,
        }
        try:
            await worker.call("initialize", args, timeout=600)
        except OpenInferError as exc:
            await worker.kill()
            raise InvalidArgumentError(f"Failed to initialize model '{self.ctx.name}': {exc.message}") from None
        # Only an initialized worker is the instance's: one that dies while initializing must
        # not start a restart of its own (a model that cannot initialize would respawn forever).
        self.worker = worker
        self._ready.set()

    async def stop(self) -> None:
        self._stopping = True
        if self.worker is not None:
            await self.worker.finalize(timeout=30)

    @property
    def healthy(self) -> bool:
        return self.worker is not None and not self.worker.dead

    def worker_died(self, worker: WorkerProcess, code: int | None) -> None:
        if worker is not self.worker:
            return
        self._ready.clear()
        message = self._death_message(code)
        for future, _senders in self._batches.values():
            if not future.done():
                future.set_exception(InternalError(message))
        self._batches.clear()
        for sender in self._senders.values():
            sender.fail(InternalError(message))
        self._senders.clear()
        if not self._stopping:
            log.error("instance '%s' of model '%s' died (exit code %s); restarting", self.spec.name, self.ctx.name, code)
            asyncio.ensure_future(self._restart())

    def _death_message(self, code: int | None) -> str:
        return (
            f"Failed to process the request(s) for model instance '{self.spec.name}', message: "
            f"Stub process '{self.spec.name}' is not healthy (exit code {code})."
        )

    async def _restart(self) -> None:
        delay = 0.1
        while not self._stopping:
            try:
                await self.start()
                log.info("instance '%s' restarted", self.spec.name)
                return
            except Exception as exc:
                log.error("restart of '%s' failed: %s", self.spec.name, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10)

    # ---------------------------------------------------------------- execute
    async def execute(self, requests: list[InferRequest], senders: list[ResponseSender]) -> ExecutionTiming:
        if not self._ready.is_set():
            await asyncio.wait_for(self._ready.wait(), 60)
        worker = self.worker
        assert worker is not None
        if worker.dead:  # it died a moment ago: fail like the requests it held
            await worker.reaped.wait()
            raise InternalError(self._death_message(worker.exit_code))
        # Requests whose caller left while they waited (a batcher's queue) are dropped here.
        live = [(r, s) for r, s in zip(requests, senders) if not s.closed]
        if not live:
            return ExecutionTiming()
        requests, senders = [r for r, _ in live], [s for _, s in live]
        loop = asyncio.get_running_loop()
        batch_id = next(self._keys)
        payloads = []
        for request, sender in zip(requests, senders):
            key = next(self._keys)
            if self.ctx.decoupled:
                self._senders[key] = sender
            sender.on_cancel = functools.partial(self._cancel, worker, key)
            payloads.append(_request_payload(request, key))
        future: asyncio.Future[Any] = loop.create_future()
        self._batches[batch_id] = (future, senders)
        worker.send(("execute", batch_id, payloads))
        try:
            responses, timing = await asyncio.wait_for(future, self.execute_timeout)
        except asyncio.CancelledError:  # the caller went away: the worker skips or flags the work
            self._batches.pop(batch_id, None)
            for sender in senders:
                sender.cancel()
            raise
        except asyncio.TimeoutError:
            self._batches.pop(batch_id, None)
            await worker.kill()  # a hung model: its process goes, the instance restarts
            raise UnavailableError(
                f"model '{self.ctx.name}' instance '{self.spec.name}' did not finish within "
                f"{self.execute_timeout}s; the instance was restarted"
            ) from None
        if responses is not None:
            for request, sender, payload in zip(requests, senders, responses):
                if self.ctx.decoupled:
                    self._senders.pop(payload.get("key", -1), None)
                    sender.fail(_error_from_payload(payload["error"]))
                    continue
                response = _response_from_payload(payload, request)
                if response.error is not None:
                    sender.fail(response.error)
                else:
                    sender.send(response, final=True)
            if self.ctx.decoupled:
                for payload in payloads:
                    self._senders.pop(payload["key"], None)
        if timing is None:
            return ExecutionTiming()
        return ExecutionTiming(*timing)

    def _cancel(self, worker: WorkerProcess, key: int) -> None:
        """Tell the worker a request's caller is gone: queued, it is skipped; running, the
        model's `is_cancelled()` turns true."""
        self._senders.pop(key, None)
        try:
            worker.send(("cancel", [key]))
        except OpenInferError:
            pass  # the worker is gone, and the work with it

    # --------------------------------------------------------------- dispatch
    def dispatch(self, worker: WorkerProcess, message: tuple) -> None:
        kind = message[0]
        if kind == "executed":
            entry = self._batches.pop(message[1], None)
            if entry is not None and not entry[0].done():
                entry[0].set_result((message[2], message[3]))
        elif kind == "response":
            _, key, payload, final = message
            sender = self._senders.get(key)
            if sender is None:
                return
            if final:
                self._senders.pop(key, None)
            if payload is None:
                sender.send(None, final=final)
            elif "error" in payload:
                response = InferResponse(self.ctx.name, "", sender.request.id, error=_error_from_payload(payload["error"]))
                sender.send(response, final=final)
            else:
                sender.send(_response_from_payload(payload, sender.request), final=final)
        elif kind == "bls":
            asyncio.ensure_future(self._bls(worker, message[1], message[2], message[3]))
        elif kind in ("ok", "error"):
            if worker.control is not None and not worker.control.done():
                worker.control.set_result(message)

    async def _bls(self, worker: WorkerProcess, call_id: int, payload: dict, decoupled: bool) -> None:
        """A model calls another model through the core, without a network hop."""
        server = self.ctx.server
        request = bls_request(payload)

        def answer(response: InferResponse | None, final: bool) -> None:
            data = None
            if response is not None:
                if response.error is not None:
                    data = _bls_error(response.error)
                else:
                    data = {
                        "outputs": [(t.name, t.datatype, t.data) for t in response.outputs],
                        "parameters": response.parameters,
                    }
            try:
                worker.send(("bls_result", call_id, data, final))
            except OpenInferError:
                pass

        try:
            if server is None:
                raise UnavailableError("BLS is not available: the model runs outside a server")
            if decoupled:
                async for response in server.infer_stream(request):
                    answer(response, False)
                answer(None, True)
            else:
                answer(await server.infer(request), True)
        except Exception as exc:
            answer(InferResponse(request.model_name, "", error=exc), True)


def _bls_error(error: Exception) -> dict:
    if isinstance(error, OpenInferError):
        return {"error": (_CODE_NUMBERS[error.code], error.message)}
    return {"error": (_CODE_NUMBERS[ErrorCode.INTERNAL], str(error))}


class PythonBackend(Backend):
    name = "python"

    def __init__(self) -> None:
        self._spare: dict[int, WorkerProcess] = {}
        ipc.cleanup_stale()
        self._in_process_classes: dict[int, type] = {}

    def _in_process_class(self, ctx: ModelContext) -> type:
        """Import the model into the server process (once per loaded version)."""
        model_class = self._in_process_classes.get(id(ctx))
        if model_class is None:
            try:
                model_class = load_model_class(
                    str(self._model_path(ctx)), f"openinfer_model_{ctx.name}_{ctx.version}"
                )
            except OpenInferError:
                raise
            except Exception as exc:
                raise InvalidArgumentError(f"{type(exc).__name__}: {exc}") from exc
            self._in_process_classes[id(ctx)] = model_class
        return model_class

    def _model_path(self, ctx: ModelContext) -> Path:
        filename = configs.model_file(ctx.config, "python")
        path = ctx.version_dir / filename
        if not path.is_file():
            raise InvalidArgumentError(
                f"unable to find '{path}' for model '{ctx.name}' version {ctx.version}"
            )
        return path

    async def start_worker(self, instance: PythonInstance | Any) -> WorkerProcess:
        worker = WorkerProcess(instance)
        await worker.spawn()
        try:
            await worker.call("load", str(self._model_path(instance.ctx)), instance.ctx.name, timeout=600)
            worker.forget_arena_names()  # both sides have them mapped: nothing can leak now
        except BaseException:
            await worker.kill()
            raise
        return worker

    async def auto_complete(self, ctx: ModelContext) -> None:
        """Run the model's `auto_complete_config` in a worker that instance 0 then reuses."""
        if wants_in_process(ctx):
            updated = auto_complete(self._in_process_class(ctx), configs.config_to_json(ctx.config))
            fresh = mc.ModelConfig()
            json_format.ParseDict(updated, fresh, ignore_unknown_fields=True)
            ctx.config.CopyFrom(fresh)
            return

        class _Holder:
            def __init__(self) -> None:
                self.ctx = ctx
                self.spec = InstanceSpec(f"{ctx.name}_autocomplete", 0, 0, mc.ModelInstanceGroup())

            def dispatch(self, worker: WorkerProcess, message: tuple) -> None:
                if message[0] in ("ok", "error") and worker.control and not worker.control.done():
                    worker.control.set_result(message)

            def worker_died(self, worker: WorkerProcess, code: int | None) -> None:
                pass

        holder = _Holder()
        worker = await self.start_worker(holder)
        try:
            updated = await worker.call("auto_complete", configs.config_to_json(ctx.config), timeout=600)
            fresh = mc.ModelConfig()
            json_format.ParseDict(updated, fresh, ignore_unknown_fields=True)
            ctx.config.CopyFrom(fresh)
        except BaseException:
            await worker.kill()
            raise
        self._spare[id(ctx)] = worker

    async def create_instance(self, ctx: ModelContext, spec: InstanceSpec) -> ModelInstance:
        if wants_in_process(ctx):
            if ctx.decoupled:
                raise InvalidArgumentError(
                    f"model '{ctx.name}': a decoupled model cannot use execution_mode in_process"
                )
            in_process = InProcessInstance(ctx, spec, self._in_process_class(ctx))
            await in_process.start()
            return in_process
        instance = PythonInstance(ctx, spec, self)
        await instance.start(self._spare.pop(id(ctx), None))
        return instance

    async def unload(self, ctx: ModelContext) -> None:
        self._in_process_classes.pop(id(ctx), None)
        spare = self._spare.pop(id(ctx), None)
        if spare is not None:
            await spare.kill()

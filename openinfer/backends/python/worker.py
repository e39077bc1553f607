"""A Python model's own process: imports `model.py`, runs `execute`, answers over the channel.

Run as `python -m openinfer.backends.python.worker <fd>`; the fd is one end of a socketpair.
The reader thread receives every message; `execute` calls run one at a time on the main
thread (Triton's contract for an instance), while BLS answers are routed to whichever
thread is waiting for them.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import itertools
import json
import os
import queue
import socket
import sys
import threading
import time
import traceback
from typing import Any

from ..._malloc import tune_malloc
from . import ipc, pb_utils


def _error_payload(code: int, message: str) -> dict:
    return {"error": (code, message)}


def load_model_class(path: str, module_name: str = "model") -> type:
    """Import a `model.py` file and return its `TritonPythonModel` class."""
    sys.modules.setdefault("triton_python_backend_utils", pb_utils)  # Triton's module name
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import model file '{path}'")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, os.path.dirname(path))
    spec.loader.exec_module(module)
    if not hasattr(module, "TritonPythonModel"):
        raise AttributeError(f"'{path}' does not define class TritonPythonModel")
    return module.TritonPythonModel


def auto_complete(model_class: type, config: dict) -> dict:
    """The config after the model's own `auto_complete_config`, if it has one."""
    hook = getattr(model_class, "auto_complete_config", None)
    if hook is None:
        return config
    result = hook(pb_utils.ModelConfig(config))
    return result.as_dict() if isinstance(result, pb_utils.ModelConfig) else config


class Worker:
    def __init__(self, channel: ipc.BlockingChannel) -> None:
        self.channel = channel
        self.tasks: queue.Queue[Any] = queue.Queue()
        self.model: Any = None
        self.model_class: Any = None
        self.loop = asyncio.new_event_loop()
        self._bls_ids = itertools.count()
        self._bls_waiting: dict[int, queue.Queue[Any]] = {}
        self._bls_lock = threading.Lock()
        self.decoupled = False
        #: Keys of requests received and not yet finished; a cancel for any other key is stale.
        self._active: set[int] = set()
        self._active_lock = threading.Lock()

    # --------------------------------------------------------------- channel
    def reader(self) -> None:
        try:
            while True:
                message = self.channel.receive()
                kind = message[0]
                if kind == "bls_result":
                    with self._bls_lock:
                        waiting = self._bls_waiting.get(message[1])
                    if waiting is not None:
                        waiting.put(message[2:])
                elif kind == "cancel":  # handled here, so a running execute sees it at once
                    with self._active_lock:
                        pb_utils._cancelled.update(k for k in message[1] if k in self._active)
                else:
                    if kind == "execute":
                        with self._active_lock:
                            self._active.update(p["key"] for p in message[2])
                    self.tasks.put(message)
        except (EOFError, OSError):
            self.tasks.put(("exit",))

    def send(self, message: Any) -> None:
        self.channel.send(message)

    # ------------------------------------------------------------------- BLS
    def bls_call(self, payload: dict, decoupled: bool):
        call_id = next(self._bls_ids)
        answers: queue.Queue[Any] = queue.Queue()
        with self._bls_lock:
            self._bls_waiting[call_id] = answers
        self.send(("bls", call_id, payload, decoupled))

        def results():
            try:
                while True:
                    response, final = answers.get()
                    if response is not None:
                        yield response
                    if final:
                        return
            finally:
                with self._bls_lock:
                    self._bls_waiting.pop(call_id, None)

        if decoupled:
            return results()
        return list(results())

    # --------------------------------------------------------------- lifecycle
    def load_module(self, path: str) -> None:
        self.model_class = load_model_class(path)

    def auto_complete(self, config: dict) -> dict:
        return auto_complete(self.model_class, config)

    def initialize(self, args: dict) -> None:
        self.model = self.model_class()
        self.decoupled = json.loads(args["model_config"]).get("model_transaction_policy", {}).get(
            "decoupled", False
        )
        init = getattr(self.model, "initialize", None)
        if init is not None:
            self._call(init, args)

    def _call(self, fn: Any, *args: Any) -> Any:
        result = fn(*args)
        if inspect.isawaitable(result):
            result = self.loop.run_until_complete(result)
        return result

    # ---------------------------------------------------------------- execute
    def _request(self, payload: dict) -> pb_utils.InferenceRequest:
        request = pb_utils.InferenceRequest._of_server(
            payload["model_name"],
            [pb_utils.Tensor._of_server(n, a, d) for n, d, a in payload["inputs"]],
            list(payload["outputs"] or ()),
            payload["correlation_id"],
            payload["id"],
            payload["flags"],
            payload["timeout"],
            dict(payload["parameters"] or {}),
        )
        request._key = payload["key"]
        return request

    @staticmethod
    def _response(response: pb_utils.InferenceResponse) -> dict:
        if not isinstance(response, pb_utils.InferenceResponse):
            raise TypeError(f"execute() must return pb_utils.InferenceResponse objects, got {type(response).__name__}")
        error = response.error()
        if error is not None:
            return _error_payload(error.code(), error.message())
        outputs = []
        for tensor in response.output_tensors():
            if not isinstance(tensor, pb_utils.Tensor):
                raise TypeError(f"output tensors must be pb_utils.Tensor, got {type(tensor).__name__}")
            outputs.append((tensor.name(), tensor.triton_dtype(), tensor.as_numpy()))
        return {"outputs": outputs, "parameters": response._parameters}

    def send_response(self, key: int, response: pb_utils.InferenceResponse | None, final: bool) -> None:
        payload = None
        if response is not None:
            try:
                payload = self._response(response)
            except Exception as exc:
                payload = _error_payload(pb_utils.TritonError.INTERNAL, str(exc))
        self.send(("response", key, payload, final))
        if final:
            self._forget((key,))

    def execute(self, batch_id: int, payloads: list[dict]) -> None:
        """Run a batch; requests cancelled while they waited in this process are skipped."""
        skipped = {p["key"] for p in payloads if p["key"] in pb_utils._cancelled}
        live = [p for p in payloads if p["key"] not in skipped]
        try:
            responses, timing = self._run_batch(live) if live else ([], None)
        finally:
            self._forget(skipped if self.decoupled else [p["key"] for p in payloads])
        if skipped and responses is not None:
            answers = iter(responses)
            cancelled = _error_payload(pb_utils.TritonError.CANCELLED, "the request was cancelled")
            responses = [cancelled if p["key"] in skipped else next(answers) for p in payloads]
        if self.decoupled and responses is not None:
            self._forget(p["key"] for p in payloads)
        self.send(("executed", batch_id, responses, timing))

    def _forget(self, keys: Any) -> None:
        with self._active_lock:
            for key in keys:
                self._active.discard(key)
                pb_utils._cancelled.discard(key)

    def _run_batch(self, payloads: list[dict]) -> tuple[list[dict] | None, tuple[int, int, int] | None]:
        started = time.perf_counter_ns()
        requests = [self._request(p) for p in payloads]
        input_done = time.perf_counter_ns()
        try:
            result = self._call(self.model.execute, requests)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}" if not isinstance(exc, pb_utils.TritonModelException) else str(exc)
            error = _error_payload(pb_utils.TritonError.INTERNAL, message)
            return [error] * len(payloads), self._timing(started, input_done)
        infer_done = time.perf_counter_ns()
        if self.decoupled:
            if result is not None:
                error = _error_payload(
                    pb_utils.TritonError.INTERNAL,
                    "Python model execute() of a decoupled model must return None",
                )
                return [error] * len(payloads), None
            return None, self._timing(started, input_done, infer_done)
        if not isinstance(result, (list, tuple)) or len(result) != len(requests):
            got = len(result) if isinstance(result, (list, tuple)) else type(result).__name__
            error = _error_payload(
                pb_utils.TritonError.INTERNAL,
                f"Number of InferenceResponse objects do not match the number of InferenceRequest "
                f"objects. InferenceRequest(s) size is:{len(requests)}, and InferenceResponse(s) "
                f"size is:{got}",
            )
            return [error] * len(payloads), None
        responses = []
        for response in result:
            try:
                responses.append(self._response(response))
            except Exception as exc:
                responses.append(_error_payload(pb_utils.TritonError.INTERNAL, str(exc)))
        return responses, self._timing(started, input_done, infer_done)

    @staticmethod
    def _timing(started: int, input_done: int, infer_done: int | None = None) -> tuple[int, int, int]:
        end = time.perf_counter_ns()
        infer_done = infer_done or end
        return (input_done - started, infer_done - input_done, end - infer_done)

    # ------------------------------------------------------------------- loop
    def run(self) -> None:
        threading.Thread(target=self.reader, name="openinfer-reader", daemon=True).start()
        pb_utils._bls_call = self.bls_call
        pb_utils._response_channel = self.send_response
        while True:
            message = self.tasks.get()
            kind = message[0]
            if kind == "exit":
                return
            try:
                if kind == "execute":
                    self.execute(message[1], message[2])
                    continue
                if kind == "load":
                    pb_utils._model_name = message[2]
                    self.load_module(message[1])
                    self.send(("ok", None))
                elif kind == "auto_complete":
                    self.send(("ok", self.auto_complete(message[1])))
                elif kind == "initialize":
                    self.initialize(message[1])
                    self.send(("ok", None))
                elif kind == "finalize":
                    fin = getattr(self.model, "finalize", None)
                    if fin is not None:
                        self._call(fin)
                    self.send(("ok", None))
                    return
            except BaseException as exc:  # report load errors with their traceback's last line
                detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                self.send(("error", detail))


def main() -> None:
    tune_malloc()
    fd = int(sys.argv[1])
    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    inbound, outbound = ipc.Arena(sys.argv[2]), ipc.Arena(sys.argv[3])
    worker = Worker(ipc.BlockingChannel(sock, inbound=inbound, outbound=outbound))
    try:
        worker.run()
    finally:
        try:
            sock.close()
        finally:
            os._exit(0)


if __name__ == "__main__":
    main()

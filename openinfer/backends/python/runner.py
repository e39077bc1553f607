"""The rules of calling a `TritonPythonModel`, written once for both execution paths.

The worker process and the in-process instance both hold a `ModelRunner`: it builds the
requests `execute` receives, calls the model, checks what comes back with Triton's words and
turns it into wire responses. Only the transport around it differs.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import time
import traceback
from typing import Any, NamedTuple

from . import pb_utils
from .pb_utils import _host
from .pb_utils.errors import TritonError
from .wire import Executed, WireRequest, WireResponse, error_response

CANCELLED_MESSAGE = "the request was cancelled"


def load_model_class(path: str, module_name: str = "model") -> type:
    """Import a `model.py` as a package of its folder (so `from . import helper` works) and
    return its `TritonPythonModel` class."""
    sys.modules.setdefault("triton_python_backend_utils", pb_utils)  # Triton's module name
    folder = os.path.dirname(os.path.abspath(path))
    package = f"{module_name}_pkg"
    if package not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            package, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
        )
        assert spec is not None
        holder = importlib.util.module_from_spec(spec)
        sys.modules[package] = holder  # a namespace for the folder; its __init__.py is not run
    stem = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(f"{package}.{stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import model file '{path}'")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec.loader.exec_module(module)
    if not hasattr(module, "TritonPythonModel"):
        raise AttributeError(f"'{path}' does not define class TritonPythonModel")
    return module.TritonPythonModel


def load_worker_model(path: str, backend_dir: str = "") -> type:
    """Import the model as Triton's stub does: `<version>.model` with the version folder and the
    model folder on `sys.path`, or a Python-based backend's `model.py` from its own folder."""
    sys.modules.setdefault("triton_python_backend_utils", pb_utils)
    if backend_dir:
        sys.path.append(backend_dir)
        module_name = "model"
    else:
        version_dir = os.path.dirname(os.path.abspath(path))
        sys.path.append(version_dir)
        sys.path.append(os.path.dirname(version_dir))
        stem = os.path.splitext(os.path.basename(path))[0]
        module_name = f"{os.path.basename(version_dir)}.{stem}"
    module = importlib.import_module(module_name)
    if not hasattr(module, "TritonPythonModel"):
        raise AttributeError(f"'{path}' does not define class TritonPythonModel")
    return module.TritonPythonModel


def auto_complete(model_class: type, config: dict) -> dict:
    """The config after the model's own `auto_complete_config`, if it has one."""
    hook = getattr(model_class, "auto_complete_config", None)
    if hook is None:
        return config
    result = hook(pb_utils.ModelConfig(config))
    if not isinstance(result, pb_utils.ModelConfig):
        raise TypeError(
            f"auto_complete_config function in model '{config.get('name', '')}' must return a valid "
            "pb.ModelConfig object."
        )
    return result.as_dict()


def describe(exc: BaseException) -> str:
    """An exception as Triton's stub words it: the type, then the message."""
    if isinstance(exc, pb_utils.TritonModelException):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


#: Frames of these files are the server's, not the model's (in Triton they are C++ and unseen).
_OWN_FILES = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def raised_by_model(exc: BaseException) -> str:
    """An exception the model's code raised, as Triton's stub words it: the type, the message,
    then the model's frames, innermost first (`At:`), where a client sees where it failed."""
    text = f"{type(exc).__name__}: {exc}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_OWN_FILES)]
    if frames:
        text += "\n\nAt:\n" + "".join(f"  {f.filename}({f.lineno}): {f.name}\n" for f in reversed(frames))
    return text


class Started(NamedTuple):
    """A batch whose `execute` was called; `result` may still be a coroutine."""

    wires: list[WireRequest]
    requests: list[pb_utils.InferenceRequest]
    result: Any
    error: BaseException | None
    started: int
    input_done: int


class ModelRunner:
    """One model object and Triton's contract around its methods."""

    def __init__(self, model_class: type, instance_name: str) -> None:
        self.model_class = model_class
        self.instance_name = instance_name
        self.model: Any = None
        self.decoupled = False

    # ---------------------------------------------------------------- lifecycle
    def initialize(self, args: dict) -> Any:
        """Create the model object and call its `initialize` (maybe a coroutine: await it)."""
        import json

        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"]))
        self.model = self.model_class()
        return self._call_in("initialize", getattr(self.model, "initialize", None), args)

    def finalize(self) -> Any:
        return self._call_in("finalize", getattr(self.model, "finalize", None))

    def is_ready(self) -> Any:
        """The model's own readiness (True when it has no `is_ready`)."""
        check = getattr(self.model, "is_ready", None)
        return True if check is None else check()

    @staticmethod
    def check_ready(result: Any) -> bool:
        if not isinstance(result, bool):
            raise pb_utils.TritonModelException("is_ready() must return a boolean value")
        return result

    @staticmethod
    def _call_in(phase: str, fn: Any, *args: Any) -> Any:
        if fn is None:
            return None
        token = _host.phase.set(phase)
        try:
            return fn(*args)
        finally:
            _host.phase.reset(token)

    # ------------------------------------------------------------------ execute
    def start(self, wires: list[WireRequest]) -> Started:
        """Build the requests and call `execute`; an async `execute` returns its coroutine."""
        started = time.perf_counter_ns()
        requests = [pb_utils.InferenceRequest._of_wire(w, self.decoupled) for w in wires]
        input_done = time.perf_counter_ns()
        try:
            result = self.model.execute(requests)
            error = None
        except (Exception, SystemExit) as exc:  # sys.exit() in a model fails its batch, as in Triton
            result, error = None, exc
        return Started(wires, requests, result, error, started, input_done)

    def conclude(self, batch: Started, result: Any = None, error: BaseException | None = None) -> Executed:
        """Check what `execute` gave back; the wire answer of the whole batch."""
        error = error or batch.error
        # What the model raised carries its frames; the contract's own checks below do not.
        message = raised_by_model(error) if error is not None else ""
        returned = batch.result  # a list, checked first: inspect.isawaitable is two ABC checks
        if returned is not None and (type(returned) is list or not inspect.isawaitable(returned)):
            result = returned
        infer_done = time.perf_counter_ns()
        rescheduled = [
            r._key for r in batch.requests
            if r._release_flags == pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
        ]
        if error is None:
            try:
                responses = self._check(batch.requests, result)
            except Exception as exc:
                error, message = exc, describe(exc)
        if error is not None:
            for request in batch.requests:
                if request._sender is not None:
                    request._sender._close()
            failed = f"Failed to process the request(s) for model '{self.instance_name}', message: {message}"
            return Executed(-1, None, self._timing(batch, infer_done), [], failed)
        return Executed(-1, responses, self._timing(batch, infer_done), rescheduled, None)

    def _check(self, requests: list[pb_utils.InferenceRequest], result: Any) -> list[WireResponse | None] | None:
        if result is None:
            return None if self.decoupled else [self._unanswerable(r) for r in requests]
        if self.decoupled:
            raise pb_utils.TritonModelException(
                f"Python model '{self.instance_name}' is using the decoupled mode and the execute "
                "function must return None."
            )
        if not isinstance(result, list):
            raise pb_utils.TritonModelException(
                f"Expected a list in the execute return, found type '{type(result)}'."
            )
        if len(result) != len(requests):
            raise pb_utils.TritonModelException(
                "Number of InferenceResponse objects do not match the number of InferenceRequest "
                f"objects. InferenceRequest(s) size is:{len(requests)}, and InferenceResponse(s) "
                f"size is:{len(result)}\n"
            )
        answers: list[WireResponse | None] = []
        for request, response in zip(requests, result):
            if response is None:
                answers.append(self._unanswerable(request))
                continue
            if request._release_flags == pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
                raise pb_utils.TritonModelException(
                    "Expected a None object in the execute function return list for reschduled "
                    f"request, found type '{type(response)}'."
                )
            if not isinstance(response, pb_utils.InferenceResponse):
                raise pb_utils.TritonModelException(
                    "Expected an 'InferenceResponse' object in the execute function return list, "
                    f"found type '{type(response)}'."
                )
            try:
                request.get_response_sender()._count(response, pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                answers.append(wire_response(response, request._requested))
            except pb_utils.TritonModelException as exc:
                answers.append(error_response(TritonError.INTERNAL, str(exc)))
        return answers

    def _unanswerable(self, request: pb_utils.InferenceRequest) -> WireResponse | None:
        """None where a response sender will answer (or the request comes back to `execute`);
        an error for a request nothing can answer any more, rather than a caller left waiting."""
        if request._sender is not None or request._release_flags == pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
            return None
        return error_response(
            TritonError.INTERNAL,
            f"Python model '{self.instance_name}' returned no response for a request and did not take "
            "its response sender (get_response_sender()), so no response can follow",
        )

    @staticmethod
    def _timing(batch: Started, infer_done: int) -> tuple[int, int, int, int]:
        end = time.perf_counter_ns()
        return (batch.input_done - batch.started, infer_done - batch.input_done, end - infer_done, batch.started)


def wire_response(response: pb_utils.InferenceResponse, requested: list[str] | None = None) -> WireResponse:
    """A model's response on the wire; outputs the caller did not ask for are left out."""
    error = response._error
    if error is not None:
        if not isinstance(error, TritonError):
            raise pb_utils.TritonModelException(f"error must be a pb_utils.TritonError, got {type(error).__name__}")
        return WireResponse([], response._parameters, (error.code(), error.message()))
    outputs = []
    for tensor in response._outputs:
        if not isinstance(tensor, pb_utils.Tensor):
            raise pb_utils.TritonModelException(f"output tensors must be pb_utils.Tensor, got {type(tensor).__name__}")
        if requested and tensor._name not in requested:
            continue
        outputs.append((tensor._name, tensor._datatype, tensor._array))
    return WireResponse(outputs, response._parameters)


def cancelled_response() -> WireResponse:
    return error_response(TritonError.CANCELLED, CANCELLED_MESSAGE)


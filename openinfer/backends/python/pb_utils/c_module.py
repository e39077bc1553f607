"""`c_python_backend_utils`: the name of Triton's compiled half of the API, which a few models
import directly. It offers the same classes, and the worker's shared memory as `shared_memory`."""

from __future__ import annotations

import types
from typing import Any


class SharedMemory:
    """The worker's side of the tensor rings: `free_memory()` is what they can still take."""

    def __init__(self, free: Any) -> None:
        self._free = free

    def free_memory(self) -> int:
        return int(self._free())


def module(free_memory: Any) -> types.ModuleType:
    """The module a worker registers as `c_python_backend_utils`."""
    from .. import pb_utils

    mod = types.ModuleType("c_python_backend_utils", __doc__)
    for name in ("InferenceRequest", "InferenceResponse", "InferenceResponseSender", "Tensor", "TritonError",
                 "TritonModelException", "Logger", "LogLevel", "MetricFamily", "Metric", "MetricKind",
                 "PreferredMemory", "InferenceTrace", "ResponseIterator", "load_model", "unload_model",
                 "is_model_ready"):
        setattr(mod, name, getattr(pb_utils, name))
    mod.shared_memory = SharedMemory(free_memory)  # type: ignore[attr-defined]
    return mod

"""Backend names -> implementations. Heavy backends are imported only when a model asks for them."""

from __future__ import annotations

import importlib
import logging

from ..core.backend import Backend

log = logging.getLogger("openinfer.backends")

#: backend name -> "module:Class"
KNOWN_BACKENDS: dict[str, str] = {
    "python": "openinfer.backends.python.backend:PythonBackend",
    "onnxruntime": "openinfer.backends.onnxruntime:OnnxRuntimeBackend",
    "pytorch": "openinfer.backends.pytorch:PyTorchBackend",
    "ensemble": "openinfer.backends.ensemble:EnsembleBackend",
    "transformers": "openinfer.backends.llm.transformers_backend:TransformersBackend",
    "vllm": "openinfer.backends.llm.vllm_backend:VllmBackend",
}


class BackendRegistry:
    """Creates each backend once, on first use."""

    def __init__(self, known: dict[str, str] | None = None) -> None:
        self.known = dict(known or KNOWN_BACKENDS)
        self._loaded: dict[str, Backend] = {}

    def __call__(self, name: str) -> Backend | None:
        backend = self._loaded.get(name)
        if backend is not None:
            return backend
        target = self.known.get(name)
        if target is None:
            return None
        module_name, _, class_name = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            log.error("backend '%s' is not available: %s", name, exc)
            return None
        backend = getattr(module, class_name)()
        self._loaded[name] = backend
        return backend

"""openinfer's own backends as features: the `backend` name a model's config gives, and where its
implementation is. Only these strings are read when the server starts; a backend's module is
imported when a model first asks for it (`registry.BackendRegistry`)."""

from __future__ import annotations

from ..features.contract import Feature


def _backend(name: str, target: str) -> Feature:
    return Feature(name=f"{name} backend", backends={name: target})


PYTHON = _backend("python", "openinfer.backends.python.backend:PythonBackend")
ONNXRUNTIME = _backend("onnxruntime", "openinfer.backends.onnxruntime:OnnxRuntimeBackend")
PYTORCH = _backend("pytorch", "openinfer.backends.pytorch:PyTorchBackend")
ENSEMBLE = _backend("ensemble", "openinfer.backends.ensemble:EnsembleBackend")
TRANSFORMERS = _backend("transformers", "openinfer.backends.llm.transformers_backend:TransformersBackend")
VLLM = _backend("vllm", "openinfer.backends.llm.vllm_backend:VllmBackend")

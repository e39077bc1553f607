"""Triton's model-repository extension: list the repository, load and unload models (explicit
model control), with `unload_dependents`.

What may be loaded and how is the core's (`core/repository/repository.py`, `InferenceServer.load_model`);
this package is the extension's endpoints.
"""

from __future__ import annotations

from ...features.contract import Feature
from .grpc import ModelRepositoryRpcs
from .http import install

FEATURE = Feature(
    name="model_repository", extensions=("model_repository", "model_repository(unload_dependents)"), group="model-repository",
    http=install, grpc=ModelRepositoryRpcs,
)

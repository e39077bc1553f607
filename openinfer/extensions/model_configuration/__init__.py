"""Triton's model-configuration extension: a model's configuration as the server runs it
(after auto-completion and defaults, `core/config.py`)."""

from __future__ import annotations

from ...features.contract import Feature
from .grpc import ModelConfigRpcs
from .http import install

FEATURE = Feature(
    name="model_configuration", extensions=("model_configuration",), group="model-config",
    http=install, grpc=ModelConfigRpcs,
)

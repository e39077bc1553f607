"""Triton's model-configuration extension: a model's configuration as the server runs it
(after auto-completion and defaults, `core/config.py`)."""

from __future__ import annotations

from ..spec import ProtocolExtension
from .grpc import ModelConfigRpcs
from .http import install

EXTENSION = ProtocolExtension(
    names=("model_configuration",), group="model-config", http=install, grpc=ModelConfigRpcs
)

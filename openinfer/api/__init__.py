"""In-process use of openinfer, modelled on Triton's `tritonserver` Python package.

`Server` runs the whole server (repository, schedulers, backends, and on request the HTTP,
gRPC, metrics and OpenAI frontends) inside the caller's process; `docs/python-api.md` shows it.
"""

from ..core.errors import (
    InvalidArgumentError,
    NotFoundError,
    OpenInferError,
    UnavailableError,
    UnsupportedError,
)
from .model import AsyncInference, Model
from .responses import AsyncResponseIterator, InferenceResponse, ResponseIterator
from .server import Server

__all__ = [
    "AsyncInference",
    "AsyncResponseIterator",
    "InferenceResponse",
    "InvalidArgumentError",
    "Model",
    "NotFoundError",
    "OpenInferError",
    "ResponseIterator",
    "Server",
    "UnavailableError",
    "UnsupportedError",
]

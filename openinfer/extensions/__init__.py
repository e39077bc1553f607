"""Protocol extensions: the parts of the KServe v2 protocol that Triton adds and names in
`GET /v2` (shared memory, trace, logging, statistics, model repository, ...).

Each extension with endpoints is one package here: its HTTP routes (`http.py`), its gRPC
methods (`grpc.py`, a mixin of the servicer) and, in `__init__.py`, the names `GET /v2`
reports and its restricted-API group. `ALL` is the one list the composition root reads;
the frontends and the core never import this package.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from . import logging as logging_extension
from . import model_configuration, model_repository, shared_memory, statistics, trace
from .infer_features import (
    BINARY_TENSOR_DATA,
    CLASSIFICATION,
    PARAMETERS,
    SCHEDULE_POLICY,
    SEQUENCE,
)
from .spec import ProtocolExtension

#: Every extension, in the order `GET /v2` lists their names (Triton's).
ALL: tuple[ProtocolExtension, ...] = (
    CLASSIFICATION,
    SEQUENCE,
    model_repository.EXTENSION,
    SCHEDULE_POLICY,
    model_configuration.EXTENSION,
    shared_memory.EXTENSION,
    BINARY_TENSOR_DATA,
    PARAMETERS,
    statistics.EXTENSION,
    trace.EXTENSION,
    logging_extension.EXTENSION,
)


def names(extensions: tuple[ProtocolExtension, ...] = ALL) -> list[str]:
    """The extension names of server metadata."""
    return [name for extension in extensions for name in extension.names]


def groups(extensions: tuple[ProtocolExtension, ...] = ALL) -> tuple[str, ...]:
    """The restricted-API groups the extensions add to the protocol's own."""
    return tuple(dict.fromkeys(e.group for e in extensions if e.group is not None))


def http_installers(extensions: tuple[ProtocolExtension, ...] = ALL) -> list[Callable]:
    """`install(app)` for each extension with HTTP routes."""
    return [functools.partial(e.http, group=e.group) for e in extensions if e.http is not None]


def grpc_rpcs(extensions: tuple[ProtocolExtension, ...] = ALL) -> list[tuple[type, str | None]]:
    """(servicer mixin, restricted group) for each extension with gRPC methods."""
    return [(e.grpc, e.group) for e in extensions if e.grpc is not None]


__all__ = ["ALL", "ProtocolExtension", "groups", "grpc_rpcs", "http_installers", "names"]

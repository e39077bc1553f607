"""Every feature of the server, in one list.

A feature (`contract.Feature`) is a protocol extension, a frontend with a listener of its own, a
set of routes, or a backend. Adding one is one folder of its own plus one line in `FEATURES`: the
composition root builds flags, services, routes, RPCs, listeners and the backend table from
what the features declare, in the list's order (which is also the order in which `GET /v2` lists
the protocol extensions, Triton's). Entries are "module:attribute" strings, imported when the
server is composed, so an optional feature whose dependencies are missing is skipped with a
warning instead of breaking the rest.

A package installed beside openinfer adds its features without editing the list: each entry
point of the `openinfer.features` group names one ("module:attribute"), and they follow the
list, in the order of their names.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
from collections.abc import Callable, Iterable

from .contract import Contribution, Feature, HttpInstaller, Listeners
from .flags import FlagGroups

log = logging.getLogger("openinfer.features")

FEATURES: list[str] = [
    # Protocol extensions, in the order GET /v2 names them.
    "openinfer.extensions.infer_features:CLASSIFICATION",
    "openinfer.extensions.infer_features:SEQUENCE",
    "openinfer.extensions.model_repository:FEATURE",
    "openinfer.extensions.infer_features:SCHEDULE_POLICY",
    "openinfer.extensions.model_configuration:FEATURE",
    "openinfer.extensions.shared_memory:FEATURE",
    "openinfer.extensions.infer_features:BINARY_TENSOR_DATA",
    "openinfer.extensions.infer_features:PARAMETERS",
    "openinfer.extensions.statistics:FEATURE",
    "openinfer.extensions.trace:FEATURE",
    "openinfer.extensions.logging:FEATURE",
    # Routes and listeners beside the protocol.
    "openinfer.frontends.metrics_feature:FEATURE",
    "openinfer.frontends.http.generate:FEATURE",
    "openinfer.frontends.openai:FEATURE",
    # Backends.
    "openinfer.backends.catalog:PYTHON",
    "openinfer.backends.catalog:ONNXRUNTIME",
    "openinfer.backends.catalog:PYTORCH",
    "openinfer.backends.catalog:ENSEMBLE",
    "openinfer.backends.catalog:TRANSFORMERS",
    "openinfer.backends.catalog:VLLM",
]


#: The entry-point group through which installed packages add features.
ENTRY_POINT_GROUP = "openinfer.features"


def load(refs: Iterable[str] | None = None) -> tuple[Feature, ...]:
    """The features `refs` names, in order; by default `FEATURES` (as it is now) and then the
    installed packages' entry points."""
    return _load(tuple(FEATURES + installed() if refs is None else refs))


def installed() -> list[str]:
    """The "module:attribute" of every `openinfer.features` entry point, by entry-point name."""
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return [entry.value for entry in sorted(found, key=lambda entry: entry.name)]


@functools.lru_cache(maxsize=8)
def _load(refs: tuple[str, ...]) -> tuple[Feature, ...]:
    found: list[Feature] = []
    for ref in refs:
        module_name, _, attribute = ref.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            log.warning("feature %s unavailable: %s", ref, exc)
            continue
        feature = getattr(module, attribute)
        if not isinstance(feature, Feature):
            raise TypeError(f"{ref} is not a Feature")
        found.append(feature)
    names = [feature.name for feature in found]
    if len(set(names)) != len(names):
        raise ValueError(f"two features share a name: {sorted(n for n in names if names.count(n) > 1)}")
    return tuple(found)


def extension_names(features: Iterable[Feature]) -> list[str]:
    """The protocol extensions of server metadata."""
    return [name for feature in features for name in feature.extensions]


def groups(features: Iterable[Feature]) -> tuple[str, ...]:
    """The restricted-API groups the features add to the protocol's own."""
    return tuple(dict.fromkeys(f.group for f in features if f.group is not None))


def http_installers(features: Iterable[Feature]) -> list[Callable[[object], None]]:
    """`install(app)` for each feature with HTTP routes."""
    return [functools.partial(f.http, group=f.group) for f in features if f.http is not None]


def grpc_rpcs(features: Iterable[Feature]) -> list[tuple[type, str | None]]:
    """(servicer mixin, restricted group) for each feature with gRPC methods."""
    return [(f.grpc, f.group) for f in features if f.grpc is not None]


def backend_table(features: Iterable[Feature]) -> dict[str, str]:
    """Backend name -> "module:Class", over every feature that provides backends."""
    table: dict[str, str] = {}
    for feature in features:
        for name, target in feature.backends.items():
            if name in table:
                raise ValueError(f"backend '{name}' is provided twice")
            table[name] = target
    return table


def add_flags(groups: FlagGroups, features: Iterable[Feature]) -> None:
    """Each feature's flags, in the features' order."""
    for feature in features:
        if feature.flags is not None:
            feature.flags(groups)


__all__ = [
    "ENTRY_POINT_GROUP", "FEATURES", "Contribution", "Feature", "HttpInstaller", "Listeners", "add_flags", "backend_table",
    "extension_names", "groups", "grpc_rpcs", "http_installers", "installed", "load",
]

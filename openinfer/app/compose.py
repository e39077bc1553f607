"""The composition root: settings -> the core with its services and features. Nothing is loaded
and no port is open yet; `openinfer serve` (`serve.py`) and the in-process API (`openinfer.api`)
both start from here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from .. import features as known_features
from ..backends.registry import BackendRegistry
from ..core.errors import InvalidArgumentError
from ..core.requests.response_cache import parse_cache_config
from ..core.server import InferenceServer, ServerServices
from ..features import Contribution, Feature
from .server_options import cache_specs, server_options
from .settings import Settings


@dataclass(frozen=True)
class Composition:
    """The server built from the settings, and what the listeners still need to know."""

    server: InferenceServer
    #: The features it was composed with, in their order.
    features: tuple[Feature, ...] = ()
    #: What each feature's `configure` made of the settings, by feature name.
    contributions: Mapping[str, Contribution] = field(default_factory=dict)

    @property
    def kserve_frontends(self) -> bool:
        """False when a feature serves alone (KServe HTTP, gRPC and metrics stay off)."""
        return all(c.kserve_frontends for c in self.contributions.values())


#: What a feature's contribution may provide: the fields of `ServerServices` but its own states.
_SERVICES = frozenset(f.name for f in fields(ServerServices)) - {"features"}


def configure(features: Sequence[Feature], settings: Settings) -> dict[str, Contribution]:
    """Each feature's reading of the settings, by feature name (a bad flag ends the process)."""
    said = {}
    for feature in features:
        contribution = feature.configure(settings) if feature.configure is not None else None
        if contribution is not None:
            said[feature.name] = contribution
    return said


def compose(args: Settings, features: Sequence[Feature] | None = None,
            states: Mapping[str, object] | None = None) -> Composition:
    """The server with its services (the response cache, then whatever the features provide:
    shared memory, trace, log settings, the latency observers of `--metrics-config`), built
    after every feature (by default every one listed or installed) has read the settings: a bad
    flag anywhere ends the process before anything starts. `states` are features' states the
    caller made already (`openinfer serve` applies the log settings before anything runs), in
    place of what their `configure` made. Nothing is loaded and no port is open yet; `openinfer
    serve` and the in-process API (`openinfer.api`) both start from here."""
    features = tuple(known_features.load() if features is None else features)
    options = server_options(args, features)
    try:
        cache = parse_cache_config(cache_specs(args))
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    except InvalidArgumentError as exc:
        raise SystemExit(f"error: {exc.message}") from None
    said = configure(features, args)
    for name, state in (states or {}).items():
        said[name] = dataclasses.replace(said.get(name, Contribution()), state=state)
    services: dict[str, Any] = {"cache": cache}
    for name, contribution in said.items():
        for service, value in contribution.services.items():
            if service not in _SERVICES:
                raise ValueError(f"feature '{name}' provides '{service}', which is not a service of the core")
            if service in services:
                raise ValueError(f"feature '{name}' provides '{service}', which is provided already")
            services[service] = value
    states = {name: c.state for name, c in said.items() if c.state is not None}
    registry = BackendRegistry(known_features.backend_table(features), backend_directory=args.backend_directory)
    server = InferenceServer(options, registry, services=ServerServices(**services, features=states))
    return Composition(server, features, said)

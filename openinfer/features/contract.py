"""What a feature declares: the one shape in which protocol extensions, the OpenAI frontend, the
generate routes, metrics and backends plug into the server.

A feature names itself, may add flags to `openinfer serve`, may turn the parsed settings into the
core's services and a state of its own (`configure`), and may add HTTP routes, gRPC methods,
listeners of its own and backends. The composition root (`openinfer/app/`) reads the list in
`openinfer/features/__init__.py` and knows nothing else about any of them; the core never sees a
feature, only the services and states it was handed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..app.settings import Settings
    from ..core.server import InferenceServer
    from .flags import FlagGroups


class HttpInstaller(Protocol):
    """`install(app, group)`: adds a feature's routes to the KServe HTTP app, each in `group`."""

    def __call__(self, app: Any, group: str | None) -> None: ...


@dataclass(frozen=True)
class Contribution:
    """What a feature's `configure` made of the settings."""

    #: Services of the core it provides, by `ServerServices` field (`trace`, `shm`, ...).
    services: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    #: Its own state, which the server keeps under the feature's name (`feature_state`) for its
    #: endpoints, and which its `start` is handed.
    state: object = None
    #: False: the feature serves alone; the KServe HTTP, gRPC and metrics listeners stay off.
    kserve_frontends: bool = True


@dataclass(frozen=True)
class Listeners:
    """What a feature's `start` opened: servers to stop at shutdown and the tasks serving them."""

    servers: tuple[Any, ...] = ()
    tasks: tuple[Any, ...] = ()
    #: Lines the server prints once every listener is up (`Started Metrics Service at ...`).
    announce: tuple[str, ...] = ()


#: `start(server, settings, state)`: opens a feature's own listeners once the models are loaded.
Starter = Callable[["InferenceServer", "Settings", object], Awaitable[Listeners]]


@dataclass(frozen=True)
class Feature:
    #: Unique among features; the key of its state on the server.
    name: str
    #: The names `GET /v2` (and gRPC ServerMetadata) lists for it, in Triton's order.
    extensions: tuple[str, ...] = ()
    #: The `--http-restricted-api` / `--grpc-restricted-protocol` group of its endpoints.
    group: str | None = None
    #: Adds its flags to `openinfer serve`, in tritonserver's help groups or one of its own.
    flags: Callable[[FlagGroups], None] | None = None
    #: Reads the parsed settings once, before anything starts; a bad value ends the process
    #: (SystemExit) with what to change.
    configure: Callable[[Settings], Contribution | None] | None = None
    #: Adds its routes to the KServe HTTP app.
    http: HttpInstaller | None = None
    #: A mixin of the gRPC servicer whose capitalised methods are its RPCs.
    grpc: type | None = None
    #: Opens listeners of its own.
    start: Starter | None = None
    #: Its listeners are KServe's (metrics): they stay off when another feature serves alone.
    kserve: bool = False
    #: Backends it provides: `backend` name in a model's config -> "module:Class", imported when
    #: a model first asks for it.
    backends: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def rpc_names(self) -> tuple[str, ...]:
        """The RPCs the gRPC mixin defines (its capitalised methods)."""
        if self.grpc is None:
            return ()
        return tuple(name for name in vars(self.grpc) if name[:1].isupper())

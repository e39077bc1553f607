"""What a protocol extension declares: the names `GET /v2` reports, its restricted-API group,
its HTTP routes and its gRPC methods. The composition root reads these; nothing else needs to
know which extensions exist."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class HttpInstaller(Protocol):
    """`install(app, group)`: adds an extension's routes to the KServe HTTP app."""

    def __call__(self, app: Any, group: str | None) -> None: ...


@dataclass(frozen=True)
class ProtocolExtension:
    #: As `GET /v2` (and gRPC ServerMetadata) lists them, in Triton's order.
    names: tuple[str, ...]
    #: The `--http-restricted-api` / `--grpc-restricted-protocol` group of its endpoints.
    group: str | None = None
    #: Adds its routes to the KServe HTTP app: `install(app, group)`.
    http: HttpInstaller | None = None
    #: A mixin of the gRPC servicer whose capitalised methods are the extension's RPCs.
    grpc: type | None = None

    def rpc_names(self) -> tuple[str, ...]:
        """The RPCs the gRPC mixin defines (its capitalised methods)."""
        if self.grpc is None:
            return ()
        return tuple(name for name in vars(self.grpc) if name[:1].isupper())

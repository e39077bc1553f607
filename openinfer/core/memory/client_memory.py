"""What the core asks of client shared memory on every infer. The registry of regions is the
shared-memory extension's (`openinfer/extensions/shared_memory/`), which the composition hands to
the server; without it, a request that names a region is refused."""

from __future__ import annotations

from typing import Any, Protocol

from ..types import InferRequest, RequestedOutput, Tensor


class ClientMemory(Protocol):
    def pin(self, request: InferRequest) -> None:
        """Read the inputs that name a region into the request, and hold every region it uses
        until `release`; a bad region fails here, before the model runs."""

    def release(self, request: InferRequest) -> None:
        """The request is over: let go of its regions."""

    def write_output(
        self, requested: RequestedOutput, tensor: Tensor, holds: dict[str, Any] | None = None
    ) -> None:
        """Write an output into the region the client named for it."""

    def close(self) -> None:
        """Unmap everything (server shutdown)."""

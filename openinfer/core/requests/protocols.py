"""The frontend a request came through, for the few rules whose answer names it.

Triton's refusal of a decoupled model over a one-response call names the endpoint; the core
words it, and the frontends only say which they are.
"""

from __future__ import annotations

import enum


class Protocol(enum.Enum):
    HTTP = "http"
    GRPC = "grpc"


_DECOUPLED_REFUSAL = {
    Protocol.HTTP: "HTTP end point doesn't support models with decoupled transaction policy",
    Protocol.GRPC: "ModelInfer RPC doesn't support models with decoupled transaction policy",
}


def decoupled_refusal(protocol: Protocol | None, model: str) -> str:
    """Why a decoupled model cannot answer a one-response call (in-process callers: None)."""
    if protocol is None:
        return f"model '{model}' is decoupled and must be called with streaming"
    return _DECOUPLED_REFUSAL[protocol]

"""tritonserver's listeners: its address syntax (`ipv6:[::1]` and `[::]` as hosts to bind, gRPC
targets and the lines the server prints) and how its HTTP listeners answer."""

from __future__ import annotations

from typing import Any

#: uvicorn settings of the KServe and metrics listeners: no Server/Date headers, as Triton.
TRITON_LISTENER: dict[str, Any] = {
    "proxy_headers": False, "server_header": False, "date_header": False,
    "timeout_keep_alive": 30, "h11_max_incomplete_event_size": 64 * 1024,
}


def host_of(address: str) -> str:
    """tritonserver address syntax -> a bindable host: `ipv6:[::1]` and `[::]` become `::1`, `::`."""
    address = address.removeprefix("ipv6:")
    return address.strip("[]")


def grpc_target(address: str, port: int) -> str:
    host = host_of(address)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def display(address: str, port: int) -> str:
    host = host_of(address)
    return f"ipv6:[{host}]:{port}" if ":" in host else f"{host}:{port}"

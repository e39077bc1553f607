"""tritonserver's listener addresses: `ipv6:[::1]` and `[::]` as hosts to bind, gRPC targets and
the lines the server prints."""

from __future__ import annotations


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

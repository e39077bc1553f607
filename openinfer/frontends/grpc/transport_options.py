"""tritonserver's gRPC transport flags as gRPC's own: channel arguments for HTTP/2 keep-alive and
connection age, and TLS credentials (mutual when client certificates are required)."""

from __future__ import annotations

from typing import Any

import grpc

from ...core.errors import InvalidArgumentError

#: flag attribute -> gRPC core channel argument, as Triton's gRPC server sets them.
_CHANNEL_ARGS = {
    "grpc_keepalive_time": "grpc.keepalive_time_ms",
    "grpc_keepalive_timeout": "grpc.keepalive_timeout_ms",
    "grpc_http2_max_pings_without_data": "grpc.http2.max_pings_without_data",
    "grpc_http2_min_recv_ping_interval_without_data": "grpc.http2.min_ping_interval_without_data_ms",
    "grpc_http2_max_ping_strikes": "grpc.http2.max_ping_strikes",
    "grpc_max_connection_age": "grpc.max_connection_age_ms",
    "grpc_max_connection_age_grace": "grpc.max_connection_age_grace_ms",
}


def channel_options(args: Any) -> list[tuple[str, int]]:
    """The keep-alive and connection-age arguments the settings give (unset ones stay gRPC's)."""
    options = [(arg, int(getattr(args, name))) for name, arg in _CHANNEL_ARGS.items()
               if getattr(args, name, None) is not None]
    options.append(("grpc.keepalive_permit_without_calls", int(bool(getattr(args, "grpc_keepalive_permit_without_calls",
                                                                             False)))))
    return options


def server_credentials(args: Any) -> grpc.ServerCredentials | None:
    """TLS credentials when --grpc-use-ssl or --grpc-use-ssl-mutual is on; None for plain text.
    A file that cannot be read is refused at start-up, naming the flag."""
    mutual = bool(getattr(args, "grpc_use_ssl_mutual", False))
    if not (getattr(args, "grpc_use_ssl", False) or mutual):
        return None
    cert = _read(args.grpc_server_cert, "--grpc-server-cert")
    key = _read(args.grpc_server_key, "--grpc-server-key")
    root = _read(args.grpc_root_cert, "--grpc-root-cert") if args.grpc_root_cert or mutual else None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=root, require_client_auth=mutual)


def _read(path: str, flag: str) -> bytes:
    if not path:
        raise InvalidArgumentError(f"gRPC over TLS needs {flag}")
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read {flag} '{path}': {exc.strerror}") from None

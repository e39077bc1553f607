"""`openinfer openai`: Triton's `openai_frontend/main.py` command line, translated into the
`openinfer serve` flags it stands for and served by the same runner."""

from __future__ import annotations

import argparse


def openai_main(argv: list[str]) -> int:
    """`openinfer openai`: Triton's `openai_frontend/main.py` flags; the OpenAI API on port 9000
    alone, KServe v2 HTTP/gRPC beside it with `--enable-kserve-frontends`. Every `openinfer serve`
    flag is accepted too."""
    p = argparse.ArgumentParser(
        prog="openinfer openai",
        description=openai_main.__doc__.split("\n\n")[0] if openai_main.__doc__ else None,
        epilog="All `openinfer serve` flags are accepted as well (see `openinfer serve --help`).",
    )
    p.add_argument("--host", default="0.0.0.0", help="bind address of every frontend")
    p.add_argument("--openai-port", type=int, default=9000)
    p.add_argument("--enable-kserve-frontends", action="store_true", help="also serve KServe v2 HTTP and gRPC")
    p.add_argument("--kserve-http-port", type=int, default=8000)
    p.add_argument("--kserve-grpc-port", type=int, default=8001)
    p.add_argument("--tritonserver-log-verbose-level", type=int, default=0)
    own, rest = p.parse_known_args(argv)
    serve_argv = [
        *rest,
        "--openai-port", str(own.openai_port), "--openai-address", own.host,
        "--http-address", own.host, "--grpc-address", own.host,
        "--http-port", str(own.kserve_http_port), "--grpc-port", str(own.kserve_grpc_port),
        "--log-verbose", str(own.tritonserver_log_verbose_level),
        "--enable-kserve-frontends", "true" if own.enable_kserve_frontends else "false",
    ]
    from .cli import serve_parser
    from .serve import run_server

    return run_server(serve_parser().parse_args(serve_argv))

"""`openinfer serve | bench`: flags mirror tritonserver's names and defaults."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .settings import parse_bool


def parse_cuda_pool(value: str) -> tuple[int, int]:
    """`--cuda-memory-pool-byte-size <GPU device ID>:<pool byte size>`, refused in tritonserver's words."""
    device, sep, size = value.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(
            "Cannot parse pair option due to incorrect number of inputs.--<pair option> argument "
            f"requires format <first>:<second>. Found: {value}"
        )
    try:
        return int(device), int(size)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value '{value}': both sides must be integers") from None


def _flag_bool(parser: argparse.ArgumentParser, name: str, default: bool, help: str) -> None:
    """A tritonserver-style boolean: `--flag`, `--flag true`, `--flag=off`."""
    parser.add_argument(name, type=parse_bool, nargs="?", const=True, default=default, help=help)


def serve_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="openinfer serve", description="Serve a Triton model repository.")
    p.add_argument("--model-repository", "--model-store", action="append", required=True, dest="model_repository")
    p.add_argument("--id", default="triton", help="server id reported by server metadata")
    # HTTP
    _flag_bool(p, "--allow-http", True, "serve KServe v2 over HTTP")
    p.add_argument("--http-address", default="0.0.0.0")
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--http-max-input-size", type=int, default=64 * 1024 * 1024)
    p.add_argument("--http-restricted-api", action="append", default=[])
    p.add_argument("--http-header-forward-pattern", default=None)
    p.add_argument("--http-thread-count", type=int, default=8, help="accepted for compatibility")
    _flag_bool(p, "--reuse-http-port", False, "set SO_REUSEPORT on the HTTP socket")
    p.add_argument("--http-client-timeout-secs", type=float, default=30.0,
                   help="drop HTTP connections whose request headers take longer than this to arrive, "
                   "or whose body stalls this long (slow clients); all HTTP listeners")
    # gRPC
    _flag_bool(p, "--allow-grpc", True, "serve KServe v2 over gRPC")
    p.add_argument("--grpc-address", default="0.0.0.0")
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--grpc-restricted-protocol", action="append", default=[])
    p.add_argument("--grpc-header-forward-pattern", default=None)
    p.add_argument("--grpc-infer-response-compression-level", choices=["none", "low", "medium", "high"], default="none")
    p.add_argument("--grpc-infer-thread-count", type=int, default=2, help="accepted for compatibility")
    # Metrics
    _flag_bool(p, "--allow-metrics", True, "serve Prometheus metrics")
    p.add_argument("--metrics-address", default=None)
    p.add_argument("--metrics-port", type=int, default=8002)
    p.add_argument("--metrics-interval-ms", type=float, default=2000)
    p.add_argument("--metrics-config", action="append", default=[])
    _flag_bool(p, "--allow-gpu-metrics", True, "report GPU metrics (NVML through the `gpu` extra, nvidia-ml-py)")
    _flag_bool(p, "--allow-cpu-metrics", True, "report CPU metrics")
    # Repository
    p.add_argument("--model-control-mode", type=str.lower, choices=["none", "poll", "explicit"], default="none")
    p.add_argument("--load-model", action="append", default=[])
    p.add_argument("--repository-poll-secs", type=float, default=15)
    _flag_bool(p, "--strict-model-config", False, "deprecated: true means --disable-auto-complete-config")
    p.add_argument("--disable-auto-complete-config", action="store_true")
    p.add_argument("--model-config-name", default=None)
    p.add_argument("--backend-config", action="append", default=[])
    p.add_argument("--backend-directory", default="/opt/tritonserver/backends",
                   help="where Python-based backends live: a model with backend: \"<name>\" that is not one of "
                   "openinfer's own backends runs <backend-directory>/<name>/model.py")
    p.add_argument("--model-load-thread-count", type=int, default=4, help="accepted for compatibility")
    _flag_bool(p, "--strict-readiness", True, "ready only when every model is ready")
    _flag_bool(p, "--exit-on-error", True,
               "exit (code 1) when a model fails to load at start-up; false serves the models that loaded")
    p.add_argument("--exit-timeout-secs", type=float, default=30)
    # Memory: accepted as tritonserver takes them; openinfer keeps no pinned or CUDA pool of its
    # own, so they have no effect (nor do Triton's on a host without a GPU).
    p.add_argument("--pinned-memory-pool-byte-size", type=int, default=1 << 28,
                   help="accepted for compatibility: no effect (openinfer keeps no pinned memory pool)")
    p.add_argument("--cuda-memory-pool-byte-size", type=parse_cuda_pool, action="append", default=[],
                   metavar="<GPU device ID>:<pool byte size>",
                   help="accepted for compatibility: no effect (openinfer keeps no CUDA memory pool)")
    # Extensions
    _flag_bool(p, "--allow-client-shm", False, "let clients register shared-memory regions")
    p.add_argument("--cache-config", action="append", default=[])
    p.add_argument("--trace-config", action="append", default=[], help="[<mode>,]<setting>=<value>")
    p.add_argument("--trace-file", default=None, help="deprecated: --trace-config triton,file=<path>")
    p.add_argument("--trace-level", action="append", default=[], help="deprecated: --trace-config level=<level>")
    p.add_argument("--trace-rate", type=int, default=None, help="deprecated: --trace-config rate=<n>")
    p.add_argument("--trace-count", type=int, default=None, help="deprecated: --trace-config count=<n>")
    p.add_argument("--trace-log-frequency", type=int, default=None, help="deprecated: --trace-config triton,log-frequency=<n>")
    # Logging
    p.add_argument("--log-verbose", type=int, default=0)
    _flag_bool(p, "--log-info", True, "log informational messages")
    _flag_bool(p, "--log-warning", True, "log warnings")
    _flag_bool(p, "--log-error", True, "log errors")
    p.add_argument("--log-format", choices=["default", "ISO8601"], default="default")
    p.add_argument("--log-file", default="")
    from .frontends.openai.options import add_flags as add_openai_flags

    add_openai_flags(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: openinfer {serve,openai,bench} [options]\n\n  serve   serve a model repository\n"
              "  openai  the OpenAI API alone, as Triton's openai_frontend/main.py\n  bench   measure a v2 or OpenAI server")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "serve":
        # Model workers are started with fork+exec while gRPC threads run; gRPC's own fork
        # handlers must not touch the server's live connections when that happens.
        os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
        from .runner import run_server

        options = serve_parser().parse_args(rest)
        return run_server(options)
    if command == "openai":
        from .openai_command import openai_main

        return openai_main(rest)
    if command == "bench":
        from .bench.cli import main as bench_main

        return bench_main(rest)
    print(f"openinfer: unknown command '{command}'", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

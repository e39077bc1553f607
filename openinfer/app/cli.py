"""`openinfer serve | openai | new-model | bench`: serve's flags mirror tritonserver's names and defaults."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .. import TRITON_PROTOCOL_VERSION, __version__
from ..features.flags import parse_bool
from .serve_flags import parse_cuda_pool, serve_parser

__all__ = ["main", "parse_bool", "parse_cuda_pool", "serve_parser"]

USAGE = """usage: openinfer {serve,openai,new-model,bench} [options]

  serve      serve a model repository (KServe v2 HTTP/gRPC, metrics, optionally OpenAI)
  openai     the OpenAI API alone, as Triton's openai_frontend/main.py
  new-model  write a model folder that serves at once (python, onnx or pytorch)
  bench      measure a v2 or OpenAI server

  -V, --version  print the version and exit
  -h, --help     print this message

`openinfer <command> --help` describes each command's flags."""


def version_line() -> str:
    return f"openinfer {__version__} (Triton protocol {TRITON_PROTOCOL_VERSION})"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(version_line())
        return 0
    command, rest = args[0], args[1:]
    if command == "serve":
        # Model workers are started with fork+exec while gRPC threads run; gRPC's own fork
        # handlers must not touch the server's live connections when that happens.
        os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
        options = serve_parser().parse_args(rest)
        from .serve import run_server

        return run_server(options)
    if command == "openai":
        from .openai_command import openai_main

        return openai_main(rest)
    if command == "new-model":
        from .scaffold import main as new_model_main

        return new_model_main(rest)
    if command == "bench":
        from ..bench.cli import main as bench_main

        return bench_main(rest)
    print(f"openinfer: unknown command '{command}' (commands: serve, openai, new-model, bench)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

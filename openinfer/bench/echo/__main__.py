"""``python -m openinfer.bench.echo http|grpc|openai --port P``: run one echo server."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m openinfer.bench.echo")
    p.add_argument("kind", choices=["http", "grpc", "openai"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--token-delay-ms", type=float, default=0.0, help="openai: pace per token")
    ns = p.parse_args(argv)
    if ns.kind == "grpc":
        import uvloop

        from .grpc_echo import serve

        uvloop.run(serve(ns.host, ns.port))
        return 0
    import uvicorn

    if ns.kind == "http":
        from .asgi_echo import EchoApp

        app = EchoApp()
    else:
        from .openai_echo import OpenAIEcho

        app = OpenAIEcho(ns.token_delay_ms / 1000.0)  # type: ignore[assignment]
    uvicorn.run(app, host=ns.host, port=ns.port, loop="uvloop", http="httptools",
                access_log=False, log_level="warning", lifespan="on")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

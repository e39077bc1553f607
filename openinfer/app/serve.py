"""`openinfer serve`: one event loop, the server started, the listeners up, and an ordered
shutdown on SIGINT or SIGTERM (refuse new work, drain, unload, then close the listeners)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from ..core.errors import OpenInferError
from ..core.memory.malloc import tune_malloc
from ..extensions.logging.settings import LogSettings
from ..features import load as load_features
from .compose import compose
from .listeners import access_policies, start_frontends
from .settings import Settings
from .startup import model_table, startup_failures


def configure_logging(settings: Settings) -> LogSettings:
    """Triton's log flags; the same settings object then serves `/v2/logging` live."""
    log_settings = LogSettings.from_args(settings)
    log_settings.apply()
    return log_settings


#: At shutdown, how long no request may have been refused before the listeners close.
LINGER_QUIET_SECS = 0.5


async def serve(args: Settings, log_settings: LogSettings | None = None) -> int:
    from ..frontends.grpc import transport_options

    features = load_features()
    try:  # refused before any model loads
        access_policies(args, features)
        if args.allow_grpc:
            transport_options.server_credentials(args)  # TLS files that cannot be read
    except (ValueError, OpenInferError) as exc:
        print(f"error: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 1
    built = compose(args, features, states={"logging": log_settings} if log_settings is not None else None)
    server = built.server
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    await server.start()
    print(model_table(server), file=sys.stderr, flush=True)
    failed = startup_failures(server, args)
    if failed and args.exit_on_error:
        names = ", ".join(f"'{name}'" for name in failed)
        print(
            f"error: creating server: Internal - failed to load all models ({names}; the log above says "
            "why); exiting because --exit-on-error is true, --exit-on-error=false serves the others",
            file=sys.stderr,
            flush=True,
        )
        await server.stop()
        return 1
    try:
        fronts = await start_frontends(built, args)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        await server.stop()
        return 1
    if fronts.failed():
        print("error: a listener failed to start (address in use?); the log above says which", file=sys.stderr,
              flush=True)
        await server.stop()
        await fronts.stop()
        return 1

    await stop.wait()
    print("Shutting down: draining in-flight requests", file=sys.stderr, flush=True)
    sending = server.served_within(LINGER_QUIET_SECS)
    await server.stop()  # refuses new work, waits for in-flight requests, unloads
    await server.inflight.quiet(LINGER_QUIET_SECS, args.exit_linger_secs, sending)
    await fronts.stop()
    return 0


def run_server(parsed: argparse.Namespace) -> int:
    args = Settings.from_args(parsed)
    log_settings = configure_logging(args)
    tune_malloc()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    return asyncio.run(serve(args, log_settings))

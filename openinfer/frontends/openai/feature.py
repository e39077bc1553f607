"""The OpenAI frontend as a feature of `openinfer serve`.

`configure` validates the flags before anything starts (bad flags end the process with Triton's
messages), keeps their parsed form as the feature's state, and says whether the KServe
listeners run beside it; `start` serves the FastAPI app on `--openai-port` in the server's own
event loop.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from ...app.settings import Settings
from ...core.server import InferenceServer
from ...features.contract import Contribution, Feature, Listeners
from ..addresses import host_of
from .options import OpenAIOptions, add_flags

log = logging.getLogger("openinfer.openai")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def configure(args: Settings) -> Contribution | None:
    if args.openai_port is None:
        return None
    if args.chat_template:
        try:
            open(args.chat_template).close()
        except OSError as exc:
            raise SystemExit(f"[ERROR] Failed to initialize FastAPI frontend: cannot read --chat-template: {exc}") from None
    try:
        options = OpenAIOptions.from_settings(args)
    except ValueError as exc:
        raise SystemExit(f"[ERROR] Failed to initialize FastAPI frontend: {exc}") from None
    _say(f"[WARNING] Adding CORS for the following origins: {options.allowed_origins}")
    if options.access.rules:
        summary = {api: rule.key for api, rule in options.access.rules.items()}
        _say(f"[INFO] API restrictions enabled. Restricted API endpoints: {summary}")
    if options.api_keys:
        _say(f"[INFO] API key authentication enabled for /v1 ({len(options.api_keys)} key(s))")
    _say(f"[INFO] HTTP request size limit set to {options.max_input_size} bytes")
    if options.tool_call_parser:
        _say(f"[INFO] Streaming tool-call parse buffer limit set to {options.max_tool_call_parse_bytes} bytes")
    return Contribution(state=options, kserve_frontends=args.enable_kserve_frontends)


async def start(server: InferenceServer, args: Settings, state: object) -> Listeners:
    if not isinstance(state, OpenAIOptions):
        return Listeners()
    from ..asgi.listener import listener
    from .app import build_app
    from .context import FrontendContext

    options = state
    ctx = FrontendContext.create(server, options)
    for info in ctx.catalog.loaded():
        if ctx.tokenizer_path(info) is not None and info.kind != "other":
            asyncio.ensure_future(_warm_tokenizer(ctx, info))

    host = host_of(options.address)
    uv = listener(
        build_app(ctx),
        host,
        options.port,
        client_timeout=args.http_client_timeout_secs,
        access_log=options.log_level in ("debug", "trace"),
        log_level=options.log_level,
        timeout_keep_alive=5,
        service="OpenAI",
    )

    return Listeners(
        servers=(uv,), tasks=(asyncio.ensure_future(uv.serve()),),
        announce=(f"Started OpenAI-compatible frontend at {host}:{options.port}",),
    )


async def _warm_tokenizer(ctx: Any, info: Any) -> None:
    try:
        await ctx.tokenizer(info)
    except Exception as exc:  # noqa: BLE001 - reported again, to the client, on first use
        log.warning("tokenizer for model '%s' not loaded: %s", info.name, exc)


FEATURE = Feature(name="openai", flags=add_flags, configure=configure, start=start)

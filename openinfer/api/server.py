"""`openinfer.Server`: the whole server in the caller's process, modelled on Triton's `tritonserver`.

    with openinfer.Server(model_repository="models") as server:
        response = server.model("add_sub").infer(inputs={"INPUT0": a, "INPUT1": b})

The core, its models and any frontends run on one event loop in a thread of their own (see
`loop.py`), composed exactly as `openinfer serve` composes them (`app.compose`). Every
method may be called from any thread; `Model.async_infer` serves asyncio callers.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import json
import os
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..core.errors import UnavailableError
from ..core.server import InferenceServer
from ..app.compose import Composition
from ..app.settings import Settings
from .loop import LoopThread
from .model import Model

T = TypeVar("T")


def _parsed(flags: dict[str, Any], *, repositories: Sequence[str | Path] = ("-",), who: str) -> argparse.Namespace:
    """`openinfer serve`'s parsed flags: its defaults, then `flags` by their Python names
    (`strict_readiness=False` for `--strict-readiness=false`), parsed and checked by the same
    rules as the command line (a bad value is a ValueError saying which flag and why)."""
    from ..app.serve_flags import serve_parser

    parser = serve_parser()
    parser.raise_errors = True
    known = parser.settings()
    for key in flags:
        if key not in known or key == "model_repository":
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise TypeError(f"{who} got an unknown setting '{key}'{hint} "
                            "(settings are `openinfer serve` flags with underscores)")
    argv = [word for repo in repositories for word in ("--model-repository", str(repo))]
    try:
        return parser.parse_args(argv + parser.command_line(flags))
    except ValueError as exc:
        raise ValueError(f"{who}: {exc}") from None


def _settings(model_repository: str | Path | Sequence[str | Path], flags: dict[str, Any]) -> Settings:
    repos = [model_repository] if isinstance(model_repository, (str, Path)) else list(model_repository)
    args = _parsed(flags, repositories=repos, who="openinfer.Server")
    # In-process, no port is opened until start_frontends() asks for it.
    return Settings.from_args(args).replace(allow_http=False, allow_grpc=False, allow_metrics=False, openai_port=None)


@contextlib.contextmanager
def _refusals_as_errors() -> Iterator[None]:
    """The composition refuses bad settings as the command line does, with SystemExit; on the
    server's loop that would end the loop's thread, so the caller gets a ValueError instead."""
    try:
        yield
    except SystemExit as exc:
        raise ValueError(str(exc.code)) from None


class Server:
    """An openinfer server inside this process.

    `model_repository`: one folder or several. `model_control_mode`: "none" (load everything
    at start), "explicit" (`load`/`unload` decide) or "poll". Any other `openinfer serve` flag
    may be given by its Python name, e.g. `strict_readiness=False`, `exit_on_error=False`.
    """

    def __init__(self, model_repository: str | Path | Sequence[str | Path], model_control_mode: str = "none",
                 **flags: Any) -> None:
        # Model workers start with fork+exec while gRPC threads may run (as `openinfer serve` sets it).
        os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
        self._args = _settings(model_repository, {"model_control_mode": model_control_mode.lower(), **flags})
        self._loop: LoopThread | None = None
        self._core: InferenceServer | None = None
        self._built: Composition | None = None
        self._frontends: list = []

    # ------------------------------------------------------------------ lifecycle
    def start(self, wait_until_ready: bool = True, timeout: float | None = None) -> Server:
        """Loads the models (all of them, or `--load-model`'s in explicit mode). With
        `exit_on_error` (the default) a model that fails to load makes this raise; without it,
        this returns once the loads end, ready or not (strict readiness reports a server with a
        failed model not ready, as Triton does)."""
        if self._core is not None:
            raise UnavailableError("the server is already started")
        from ..app.compose import compose
        from ..app.startup import startup_failures

        self._loop = LoopThread()

        async def start() -> InferenceServer:
            with _refusals_as_errors():
                self._built = compose(self._args)
            await self._built.server.start()
            return self._built.server

        try:
            self._core = self._loop.run(start(), timeout)
        except BaseException:
            self._loop.close()
            self._loop = None
            raise
        failed = self._sync(lambda core: startup_failures(core, self._args))
        if failed and self._args.exit_on_error:
            self.stop()
            raise UnavailableError(f"failed to load all models: {', '.join(failed)} (exit_on_error=False serves the others)")
        if wait_until_ready and not failed:  # with a failed model, strict readiness never comes
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self.ready():
                if deadline is not None and time.monotonic() > deadline:
                    raise UnavailableError("the server did not become ready in time")
                time.sleep(0.05)
        return self

    def stop(self) -> None:
        """Stops the frontends, lets in-flight requests finish, unloads the models."""
        if self._loop is None:
            return
        core, frontends = self._core, self._frontends

        async def stop() -> None:
            for front in frontends:
                await front.stop()
            if core is not None:
                await core.stop()

        try:
            self._loop.run(stop())
        finally:
            self._frontends = []
            self._core = None
            self._loop.close()
            self._loop = None

    def __enter__(self) -> Server:  # noqa: PYI034
        return self if self._core is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Server:  # noqa: PYI034
        import asyncio

        return await asyncio.to_thread(self.__enter__)

    async def __aexit__(self, *exc: object) -> None:
        import asyncio

        await asyncio.to_thread(self.stop)

    def start_frontends(self, *, http_port: int | None = None, grpc_port: int | None = None,
                        metrics_port: int | None = None, openai_port: int | None = None,
                        address: str = "127.0.0.1", **flags: Any) -> None:
        """Serves this server over the network too: KServe v2 HTTP and gRPC, Prometheus
        metrics, the OpenAI API; each on the port given (none when None). `flags` are further
        `openinfer serve` settings of these frontends (e.g. `http_restricted_api=[...]`)."""
        from ..app.compose import configure
        from ..app.listeners import start_frontends

        self._core_or_raise()
        given = vars(_parsed(flags, who="start_frontends"))
        listeners = dict(
            allow_http=http_port is not None, allow_grpc=grpc_port is not None,
            allow_metrics=metrics_port is not None, http_port=http_port or 0, grpc_port=grpc_port or 0,
            metrics_port=metrics_port or 0, openai_port=openai_port, http_address=address,
            grpc_address=address, openai_address=address, metrics_address=address,
        )
        settings = self._args.replace(**{**{key: given[key] for key in flags}, **listeners})
        built = self._built
        assert built is not None

        async def start():
            with _refusals_as_errors():  # features that open a port read their settings now
                said = configure([f for f in built.features if f.start is not None], settings)
            return await start_frontends(dataclasses.replace(built, contributions={**built.contributions, **said}),
                                         settings)

        self._frontends.append(self._run(start()))

    # ------------------------------------------------------------------- state
    def live(self) -> bool:
        return self._core is not None and self._sync(lambda core: core.live())

    def ready(self) -> bool:
        return self._core is not None and self._sync(lambda core: core.ready())

    def metadata(self) -> dict[str, Any]:
        meta = self._sync(lambda core: core.metadata())
        return {"name": meta.name, "version": meta.version, "extensions": list(meta.extensions)}

    def models(self) -> dict[tuple[str, int], dict[str, str]]:
        """Every model of the repositories: (name, version) -> {name, version, state[, reason]};
        version -1 for a model with no version loaded, as in Triton's API."""
        rows = self._sync(lambda core: core.repository_index())
        return {(row.name, int(row.version) if row.version else -1): row.as_json() for row in rows}

    def model(self, name: str, version: int = -1) -> Model:
        return Model(self, name, version)

    def load(self, name: str, config: dict[str, Any] | str | None = None,
             files: dict[str, bytes] | None = None, timeout: float | None = None) -> Model:
        """Loads (or reloads) a model; `config` (a dict or JSON text) replaces its config.pbtxt,
        and `files` ({"1/model.onnx": b"..."}) its files, as Triton's load request does."""
        text = json.dumps(config) if isinstance(config, dict) else config
        self._run(self._core_or_raise().load_model(name, text, files), timeout)
        return Model(self, name)

    def unload(self, name: str, unload_dependents: bool = False, timeout: float | None = None) -> None:
        self._run(self._core_or_raise().unload_model(name, unload_dependents), timeout)

    # ---------------------------------------------------------------- plumbing
    def _core_or_raise(self) -> InferenceServer:
        if self._core is None or self._loop is None:
            raise UnavailableError("the server is not started (call start() or use `with`)")
        return self._core

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if self._loop is None:
            coro.close()
            raise UnavailableError("the server is not started (call start() or use `with`)")
        return self._loop.run(coro, timeout)

    def _sync(self, fn: Callable[[InferenceServer], T]) -> T:
        """Runs a synchronous core method on the core's loop, where its state lives."""
        core = self._core_or_raise()

        async def call() -> T:
            return fn(core)

        return self._run(call())

    def _call(self, fn: Callable[[InferenceServer], Coroutine[Any, Any, T]]) -> T:
        core = self._core_or_raise()
        return self._run(fn(core))

"""Starts the frontend processes, restarts one that dies, and stops them all at the end.

The core process binds the HTTP port, one listening socket per frontend with SO_REUSEPORT, and
each frontend inherits its own: the kernel spreads new connections evenly over the sockets (on one
shared socket, whichever process woke first took them all, and one frontend often served every
connection of a load generator). A replacement inherits the socket of the process it replaces,
whose connections meanwhile wait in its queue. A frontend that dies takes only
its own connections: what it had in flight is cancelled in the core, and another takes its place.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import socket
import sys
import time
from collections.abc import Callable

from ...core.server import InferenceServer
from ..asgi.listener import bound_socket, not_started
from ..http.app import HttpApp
from .channel import frame
from .child import AppliesLogging, FrontendConfig
from .core_link import CoreLink

log = logging.getLogger("openinfer.frontends")

#: A frontend that dies sooner than this after it started waits this long before the next.
RESTART_BACKOFF_SECS = 1.0


class FrontendProcess:
    """One frontend process and the core's link to it."""

    def __init__(self, process: asyncio.subprocess.Process, link: CoreLink, started: float, slot: int) -> None:
        self.process = process
        self.link = link
        self.started = started
        self.slot = slot  # which listening socket it accepts on


class FrontendPool:
    """HTTP frontend processes in front of `server`, one per listening socket."""

    def __init__(
        self, server: InferenceServer, app: Callable, listening: list[socket.socket], config: FrontendConfig
    ) -> None:
        self.server = server
        self.app = app
        self.listening = listening  # one socket per frontend
        self.config = copy.copy(config)
        if config.log_settings is not None:  # a handler does not cross; the child makes its own
            self.config.log_settings = config.log_settings.detached()
        self.members: list[FrontendProcess] = []
        self.started = False
        self._stopping = False
        self._restarts: set[asyncio.Task[None]] = set()

    async def start(self) -> bool:
        """Every frontend started and accepting, or False when one could not start."""
        self.started = all(await asyncio.gather(*(self._spawn(slot) for slot in range(len(self.listening)))))
        return self.started

    @property
    def pids(self) -> list[int]:
        return [member.process.pid for member in self.members]

    async def _spawn(self, slot: int) -> bool:
        ours, theirs = socket.socketpair()
        listening = self.listening[slot].fileno()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "openinfer.frontends.processes.child", str(listening), str(theirs.fileno()),
                pass_fds=(listening, theirs.fileno()),
            )
        finally:
            theirs.close()
        ours.sendall(frame(("config", self.config)))
        link = CoreLink(self.server, self.app, self._lost)
        await link.attach(ours)
        member = FrontendProcess(process, link, time.monotonic(), slot)
        self.members.append(member)
        ready = asyncio.ensure_future(link.ready.wait())
        exited = asyncio.ensure_future(process.wait())
        await asyncio.wait([ready, exited], return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        exited.cancel()
        if not link.ready.is_set():
            log.error("an HTTP frontend process (pid %d) exited before it was ready", process.pid)
            return False
        return True

    def _lost(self, link: CoreLink) -> None:
        member = next((m for m in self.members if m.link is link), None)
        if member is None:
            return
        self.members.remove(member)
        if self._stopping:
            return
        task = asyncio.ensure_future(self._replace(member))
        self._restarts.add(task)
        task.add_done_callback(self._restarts.discard)

    async def _replace(self, member: FrontendProcess) -> None:
        code = await member.process.wait()
        log.warning("HTTP frontend process %d exited (code %s); starting another", member.process.pid, code)
        if time.monotonic() - member.started < RESTART_BACKOFF_SECS:
            await asyncio.sleep(RESTART_BACKOFF_SECS)
        if not self._stopping:
            await self._spawn(member.slot)

    async def stop(self, grace: float = 5.0) -> None:
        """Each frontend finishes the requests it has begun, then exits."""
        self._stopping = True
        for task in list(self._restarts):
            task.cancel()
        members, self.members = self.members, []
        for member in members:
            if member.process.returncode is None:
                member.process.terminate()
        for member in members:
            try:
                await asyncio.wait_for(member.process.wait(), grace)
            except asyncio.TimeoutError:
                member.process.kill()
                await member.process.wait()
            member.link.close()
        for sock in self.listening:
            sock.close()


async def start_http_processes(
    server: InferenceServer, app: HttpApp, count: int, host: str, port: int, *, reuse_port: bool,
    client_timeout: float, listener_settings: dict, log_settings: AppliesLogging | None = None,
) -> FrontendPool:
    """`count` HTTP frontend processes, `app` (the core's own) answering what they forward. The
    pool's `started` says whether the port was bound (else logged in Triton's words) and every
    process came up. Without `reuse_port` the port must be free first: the sockets set
    SO_REUSEPORT among themselves, not to join another server's."""
    try:
        if not reuse_port:
            bound_socket(host, port, reuse_port=False).close()  # taken by anyone: refused here
        listening = [bound_socket(host, port, reuse_port=True) for _ in range(count)]
    except OSError as exc:
        logging.getLogger("openinfer.http").error("%s (%s)", not_started("HTTP", host, port), exc.strerror or exc)
        listening = []
    config = FrontendConfig(
        host, port, app.options, client_timeout, log_settings, propagates_context=server.trace.propagates_context,
        listener_settings=dict(listener_settings),
    )
    pool = FrontendPool(server, app, listening, config)
    if listening:
        await pool.start()
    return pool

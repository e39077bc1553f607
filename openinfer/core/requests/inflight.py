"""A count of requests in flight and a wait for it to reach zero; at shutdown, the requests
refused and a wait for clients to stop sending them."""

from __future__ import annotations

import asyncio
import time


class InFlight:
    """Entering and leaving cost an integer add each: the future a drain waits on exists only
    while somebody drains (shutdown, unload), so the request path never touches an event."""

    __slots__ = ("count", "_drained", "refused_at")

    def __init__(self) -> None:
        self.count = 0
        self._drained: asyncio.Future[None] | None = None
        #: When a request was last refused because the server is stopping (monotonic), or None.
        self.refused_at: float | None = None

    def refuse(self) -> None:
        self.refused_at = time.monotonic()

    def leave(self) -> None:
        self.count -= 1
        if self.count <= 0:
            self.count = 0
            drained, self._drained = self._drained, None
            if drained is not None and not drained.done():
                drained.set_result(None)

    async def drained(self, timeout: float | None = None) -> bool:
        """Wait until nothing is in flight; False if `timeout` (seconds) ran out first."""
        if self.count == 0:
            return True
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._drained), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def quiet(self, period: float, limit: float, sending: bool = False) -> None:
        """Once requests have been refused, wait until none has been for `period` seconds, at
        most `limit`: a load balancer goes on routing to a stopping server until its health
        checks fail, and a listener that closed under it would fail the streams in transit (a
        gRPC stream that crosses the GOAWAY is cancelled, not refused). Clients that were
        `sending` when the shutdown began count as refused now: a shutdown takes milliseconds,
        less than the gap between two of their requests. With neither, nobody is sending: no
        wait."""
        if sending and self.refused_at is None:
            self.refuse()
        deadline = time.monotonic() + limit
        while self.refused_at is not None:
            now = time.monotonic()
            wait = min(self.refused_at + period, deadline) - now
            if wait <= 0:
                return
            await asyncio.sleep(wait)

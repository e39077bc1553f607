"""A count of requests in flight, and a wait for it to reach zero."""

from __future__ import annotations

import asyncio


class InFlight:
    """Entering and leaving cost an integer add each: the future a drain waits on exists only
    while somebody drains (shutdown, unload), so the request path never touches an event."""

    __slots__ = ("count", "_drained")

    def __init__(self) -> None:
        self.count = 0
        self._drained: asyncio.Future[None] | None = None

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

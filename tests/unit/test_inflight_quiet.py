"""At shutdown, the listeners stay open while requests are still being refused."""

from __future__ import annotations

import asyncio
import time

from openinfer.core.inflight import InFlight


def test_nothing_refused_means_no_wait() -> None:
    async def main() -> None:
        await asyncio.wait_for(InFlight().quiet(period=60, limit=60), timeout=5)

    asyncio.run(main())


def test_waits_until_refusals_stop_for_the_period() -> None:
    async def main() -> tuple[float, float]:
        inflight = InFlight()
        inflight.refuse()

        async def client() -> float:
            for _ in range(10):
                await asyncio.sleep(0.03)
                inflight.refuse()
            return time.monotonic()

        sender = asyncio.create_task(client())
        await asyncio.wait_for(inflight.quiet(period=0.2, limit=60), timeout=10)
        returned = time.monotonic()
        return await sender, returned

    last_refusal, returned = asyncio.run(main())
    assert returned >= last_refusal + 0.19  # not while refusals still came, nor right after the last


def test_the_limit_ends_the_wait_even_while_refusals_go_on() -> None:
    async def main() -> None:
        inflight = InFlight()
        stop = asyncio.Event()

        async def client() -> None:
            while not stop.is_set():
                inflight.refuse()
                await asyncio.sleep(0.01)

        sender = asyncio.create_task(client())
        await asyncio.wait_for(inflight.quiet(period=0.2, limit=0.5), timeout=10)
        stop.set()
        await sender

    asyncio.run(main())

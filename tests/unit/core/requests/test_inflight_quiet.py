"""At shutdown, the listeners stay open while requests are still being refused."""

from __future__ import annotations

import asyncio
import time

from openinfer.core.requests.inflight import InFlight


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
    async def main() -> tuple[float, float, float]:
        inflight = InFlight()
        stop = asyncio.Event()

        async def client() -> None:  # refuses on every turn of the loop: never a quiet period
            while not stop.is_set():
                inflight.refuse()
                await asyncio.sleep(0)

        began = time.monotonic()
        sender = asyncio.create_task(client())
        await asyncio.wait_for(inflight.quiet(period=0.2, limit=0.5), timeout=10)
        returned = time.monotonic()
        last_refusal = inflight.refused_at
        stop.set()
        await sender
        assert last_refusal is not None
        return began, returned, last_refusal

    began, returned, last_refusal = asyncio.run(main())
    assert returned >= began + 0.5  # the whole limit was waited
    assert returned - last_refusal < 0.2  # and refusals were still coming when it ended


def test_clients_sending_when_the_shutdown_began_are_waited_for_though_none_was_refused_yet() -> None:
    """A shutdown can finish before the next request of a client that was sending arrives."""

    async def main() -> tuple[float, float, bool]:
        inflight = InFlight()
        began = time.monotonic()

        async def late_client() -> None:  # its next request comes after the unload finished
            await asyncio.sleep(0.1)
            inflight.refuse()

        sender = asyncio.create_task(late_client())
        await asyncio.wait_for(inflight.quiet(period=0.2, limit=60, sending=True), timeout=10)
        await sender
        return began, time.monotonic(), inflight.refused_at is not None

    began, returned, refused = asyncio.run(main())
    assert refused
    assert returned >= began + 0.1 + 0.19  # the late request was refused, then a quiet period

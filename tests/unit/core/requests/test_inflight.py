"""The in-flight count that shutdown and unload drain on."""

from __future__ import annotations

import asyncio

from openinfer.core.requests.inflight import InFlight


async def test_drained_at_once_when_nothing_is_in_flight():
    assert await InFlight().drained(0)


async def test_drain_waits_for_the_last_request_to_leave():
    inflight = InFlight()
    inflight.count += 2
    waiters = [asyncio.create_task(inflight.drained(5)) for _ in range(2)]
    await asyncio.sleep(0)
    inflight.leave()
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    inflight.leave()
    assert await asyncio.gather(*waiters) == [True, True]
    assert inflight.count == 0


async def test_a_drain_that_times_out_says_so_and_a_later_one_still_wakes():
    inflight = InFlight()
    inflight.count += 1
    assert not await inflight.drained(0.01)
    later = asyncio.create_task(inflight.drained(5))
    await asyncio.sleep(0)
    inflight.leave()
    assert await later

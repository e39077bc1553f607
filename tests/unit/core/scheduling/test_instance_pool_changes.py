"""An instance pool whose instances change while requests use it (an instance-count update)."""

from __future__ import annotations

import asyncio

from openinfer.core.scheduling.base import InstancePool


class Instance:
    pipeline_depth = 1
    costly_dispatch = False

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def test_an_added_instance_goes_to_a_request_already_waiting() -> None:
    async def main() -> None:
        first = Instance("first")
        pool = InstancePool([first])
        assert pool.try_acquire() is first
        waiting = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(0)
        second = Instance("second")
        pool.add(second)
        assert await asyncio.wait_for(waiting, 5) is second
        assert pool.size == 2

    asyncio.run(main())


def test_a_retired_instance_finishes_its_work_and_gets_no_more() -> None:
    async def main() -> None:
        busy, other = Instance("busy"), Instance("other")
        pool = InstancePool([busy, other])
        assert pool.try_acquire() is busy
        retiring = asyncio.ensure_future(pool.retire(busy))
        await asyncio.sleep(0.01)
        assert not retiring.done()  # its request still runs
        assert pool.try_acquire() is other  # never handed out again
        assert pool.try_acquire() is None
        waiting = asyncio.ensure_future(pool.acquire())
        pool.release(busy)  # its request ends: it goes, and the waiter does not get it
        await asyncio.wait_for(retiring, 5)
        assert not waiting.done()
        pool.release(other)
        assert await asyncio.wait_for(waiting, 5) is other
        assert pool.size == 1

    asyncio.run(main())


def test_an_idle_instance_retires_at_once() -> None:
    async def main() -> None:
        idle, other = Instance("idle"), Instance("other")
        pool = InstancePool([idle, other])
        await asyncio.wait_for(pool.retire(idle), 5)
        assert pool.try_acquire() is other and pool.try_acquire() is None

    asyncio.run(main())

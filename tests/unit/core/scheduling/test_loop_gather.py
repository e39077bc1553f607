"""Batches held while the event loop is busy, for instances that are costly to reach.

The instance here is the batcher tests' fake one marked `costly_dispatch` (as a worker-process
instance is). A "frontend" coroutine hands requests over one loop iteration at a time and burns
CPU in each, as gRPC's per-call work does; the checks are on which requests ran together.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from openinfer.core.observability.stats import ModelStats
from openinfer.core.scheduling import DynamicBatcher, InstancePool, gather

from .test_batchers import BATCHING, FakeInstance, config, request, settle, submit

pytestmark = pytest.mark.timeout(30)


class CostlyInstance(FakeInstance):
    costly_dispatch = True


def batcher_of(instance: FakeInstance, text: str = BATCHING + "dynamic_batching {}") -> DynamicBatcher:
    return DynamicBatcher(config(text), InstancePool([instance], pipelined=False), ModelStats("m", "1"))


def burn(microseconds: int) -> None:
    end = time.perf_counter_ns() + microseconds * 1000
    while time.perf_counter_ns() < end:
        pass


async def busy_frontend(batcher: DynamicBatcher, count: int, first: int = 0) -> list:
    """Hand over `count` requests, one per loop iteration, each after 200 µs of work."""
    senders = []
    for i in range(first, first + count):
        burn(200)
        senders.append(await submit(batcher, request(f"r{i}", i)))
        await asyncio.sleep(0)
    return senders


@pytest.fixture
def long_hold(monkeypatch):
    """Only idleness or a full batch ends a hold: a slow machine cannot make these tests pass
    by running out the clock."""
    monkeypatch.setattr(gather, "MAX_HOLD_NS", 60 * 10**9)


async def test_a_lone_client_is_never_held(long_hold):
    inst = CostlyInstance()
    batcher = batcher_of(inst)
    for i in range(5):
        response = await (await submit(batcher, request(f"r{i}", i))).future
        assert int(response.outputs[0].data[0, 0]) == i
    assert inst.batches == [[f"r{i}"] for i in range(5)]
    assert batcher.gather is not None and not batcher.gather.active


async def test_overlapping_requests_fill_a_batch_while_the_loop_is_busy(long_hold):
    inst = CostlyInstance()
    batcher = batcher_of(inst)
    inst.gate = asyncio.Event()
    first = await submit(batcher, request("r0", 0))
    await settle()
    assert inst.batches == [["r0"]]  # nothing overlapped yet: it ran at once
    inst.gate.set()
    inst.gate = None
    # r1 arrives while r0 runs: from then on batches are held while the frontend is busy.
    senders = [first, *await busy_frontend(batcher, 16, first=1)]
    responses = await asyncio.gather(*(s.future for s in senders))
    assert [int(r.outputs[0].data[0, 0]) for r in responses] == list(range(17))
    held = inst.batches[1:]
    assert sorted(sum(held, [])) == sorted(f"r{i}" for i in range(1, 17))
    assert max(len(b) for b in held) == 8, held  # a full batch went as soon as it filled


async def test_a_held_batch_goes_when_the_loop_goes_idle(long_hold):
    inst = CostlyInstance()
    batcher = batcher_of(inst)
    batcher.gather.arrival(True)  # requests were seen overlapping a moment ago
    senders = await busy_frontend(batcher, 3)
    # The frontend stopped and the loop idles: the three are sent together, long before the
    # (test-lengthened) hold limit.
    responses = await asyncio.gather(*(s.future for s in senders))
    assert [r.id for r in responses] == ["r0", "r1", "r2"]
    assert inst.batches == [["r0", "r1", "r2"]]


async def test_an_instance_cheap_to_reach_keeps_tritons_rule(long_hold):
    inst = FakeInstance()
    batcher = batcher_of(inst)
    assert batcher.gather is None
    senders = await busy_frontend(batcher, 6)
    await asyncio.gather(*(s.future for s in senders))
    assert inst.batches[0] == ["r0"]
    assert max(len(b) for b in inst.batches) < 6  # sent as instances came free, not held


async def test_a_queue_delay_is_the_configured_rule_instead(long_hold):
    batcher = batcher_of(CostlyInstance(), BATCHING + "dynamic_batching { max_queue_delay_microseconds: 100 }")
    assert batcher.gather is None


async def test_a_cancelled_held_request_leaves_the_batch(long_hold):
    inst = CostlyInstance()
    batcher = batcher_of(inst)
    batcher.gather.arrival(True)
    senders = [await submit(batcher, request(f"r{i}", i)) for i in range(3)]
    await asyncio.sleep(0)
    senders[1].cancel()
    await asyncio.gather(senders[0].future, senders[2].future)
    assert inst.batches == [["r0", "r2"]]


async def test_a_model_slower_than_the_hold_is_never_held(monkeypatch):
    """Where a batch runs longer than a hold would last, requests wait for the instance, not
    for the loop: the batcher goes back to sending at once."""
    monkeypatch.setattr(gather, "MAX_HOLD_NS", 1_000_000)
    inst = CostlyInstance()
    batcher = batcher_of(inst)
    inst.gate = asyncio.Event()
    first = await submit(batcher, request("r0", 0))
    await settle()
    batcher.gather.arrival(True)
    assert batcher.gather.active
    await asyncio.sleep(0.005)  # r0's batch runs 5 ms
    inst.gate.set()
    await first.future
    batcher.gather.arrival(True)  # requests still overlap
    assert not batcher.gather.active
    inst.gate = None
    senders = await busy_frontend(batcher, 6, first=1)
    await asyncio.gather(*(s.future for s in senders))
    assert inst.batches[1] == ["r1"]  # sent as soon as it came, with the instance free

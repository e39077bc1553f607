"""Execution statistics are kept per (batch size, request count) and summed when read: the sums
must not care when."""

from __future__ import annotations

import asyncio

from openinfer.core.observability.stats import ExecutionTiming, ModelStatistics, ModelStats


def test_sums_are_exact_however_reads_interleave():
    """Batches of two sizes are recorded by tasks on one loop, as the schedulers record them,
    while a third reads the statistics between their writes: every read adds up, and reading
    changes nothing."""
    stats = ModelStats("m", "1")
    timing = ExecutionTiming(10, 200, 3)
    reads: list[ModelStatistics] = []

    async def record(batch_size: int) -> None:
        for _ in range(300):
            stats.record_execution(batch_size, batch_size, timing)
            await asyncio.sleep(0)

    async def read() -> None:
        for _ in range(200):
            reads.append(stats.snapshot())
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(record(2), read(), record(3))

    asyncio.run(main())
    assert len({r.execution_count for r in reads}) > 10  # the reads saw the counts move
    for entry in reads:
        by_size = {b.batch_size: b.compute_infer.count for b in entry.batches}
        assert entry.execution_count == sum(by_size.values())
        assert entry.inference_count == sum(size * n for size, n in by_size.items())
        assert (entry.inference.compute_infer.count, entry.inference.compute_infer.ns) == (
            entry.inference_count, entry.inference_count * 200)
        assert entry.as_json()["inference_stats"]["compute_infer"] == {
            "count": entry.inference_count, "ns": entry.inference_count * 200}
    assert stats.execution_count == 600
    assert stats.inference_count == 300 * 2 + 300 * 3
    assert (stats.compute_infer.count, stats.compute_infer.ns) == (1500, 1500 * 200)
    assert (stats.batches[2].compute_input.count, stats.batches[2].compute_input.ns) == (300, 3000)
    assert (stats.batches[3].compute_output.count, stats.batches[3].compute_output.ns) == (300, 900)


def test_a_failed_request_gives_back_its_compute_share():
    stats = ModelStats("m", "1")
    timing = ExecutionTiming(10, 200, 3)
    stats.record_execution(1, 1, timing)
    stats.record_request(False, 1000, 0, compute=timing)
    stats.record_execution(1, 1, timing)
    stats.record_request(True, 1000, 5, compute=timing)
    entry = stats.snapshot()
    assert entry.execution_count == 2 and entry.inference_count == 2
    assert (entry.inference.compute_infer.count, entry.inference.compute_infer.ns) == (1, 200)
    assert entry.inference.success.count == 1
    assert entry.inference.fail.count == 1

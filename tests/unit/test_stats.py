"""Execution statistics are kept per (batch size, request count) and summed when read: the sums
must not care when."""

from __future__ import annotations

from openinfer.core.stats import ExecutionTiming, ModelStats


def test_sums_are_exact_however_reads_interleave():
    stats = ModelStats("m", "1")
    timing = ExecutionTiming(10, 200, 3)
    for i in range(300):
        stats.record_execution(2, 2, timing)
        if i == 100:
            assert stats.execution_count == 101  # a read in the middle sees every execution so far
    assert stats.execution_count == 300
    assert stats.inference_count == 600
    assert (stats.compute_infer.count, stats.compute_infer.ns) == (600, 300 * 2 * 200)
    assert stats.batches[2].compute_input.as_dict() == {"count": 300, "ns": 3000}


def test_a_failed_request_gives_back_its_compute_share():
    stats = ModelStats("m", "1")
    timing = ExecutionTiming(10, 200, 3)
    stats.record_execution(1, 1, timing)
    stats.record_request(False, 1000, 0, compute=timing)
    stats.record_execution(1, 1, timing)
    stats.record_request(True, 1000, 5, compute=timing)
    entry = stats.as_dict()
    assert entry["execution_count"] == 2 and entry["inference_count"] == 2
    assert entry["inference_stats"]["compute_infer"] == {"count": 1, "ns": 200}
    assert entry["inference_stats"]["success"]["count"] == 1
    assert entry["inference_stats"]["fail"]["count"] == 1

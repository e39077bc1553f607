"""A Python model's run timing as the scheduler gets it: requests a model released with RESCHEDULE
run again, and their queue time ends where their first run began."""

from __future__ import annotations

from openinfer.backends.python.convert import execution_timing
from openinfer.core.observability.stats import ExecutionTiming


def test_the_first_run_gives_the_start_and_a_rerun_keeps_it():
    first = execution_timing((1, 20, 3, 5_000), ExecutionTiming())
    assert first == ExecutionTiming(1, 20, 3, 5_000)
    again = execution_timing((2, 40, 6, 9_000), first)
    assert again == ExecutionTiming(2, 40, 6, 5_000)  # compute from the last run, start from the first

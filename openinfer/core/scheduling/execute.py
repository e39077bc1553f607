"""Running one batch on one instance: the step every scheduler ends with.

Kept in one place so the rules hold for all of them: the queue time of each request is
recorded when its batch starts (in the backend, where it reports a later start than the call),
a failing `execute` fails every request of the batch (N in, N answered), and the statistics
count one execution per batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..backend import ModelInstance
from ..errors import InternalError, OpenInferError
from ..observability.stats import ModelStats, record_compute
from ..requests.responses import ResponseSender
from ..types import InferRequest


async def run_batch(
    instance: ModelInstance,
    requests: list[InferRequest],
    senders: list[ResponseSender],
    stats: ModelStats,
    model_name: str,
    release: Callable[[ModelInstance], None] | None = None,
) -> bool:
    """Execute `requests` as one batch; False (and every sender failed) if `execute` raised.
    `release` gets the instance back once `execute` returns, however it ends."""
    started = time.perf_counter_ns()
    size = count = 0
    for request in requests:
        request.queue_ns = started - request.arrival_ns
        if not request.state.null:  # a sequence slot's filler is not an inference
            size += max(request.batch_size, 1)
            count += 1
    try:
        timing = await instance.execute(requests, senders)
    except OpenInferError as exc:
        for sender in senders:
            sender.fail(exc)
        return False
    except Exception as exc:  # noqa: BLE001 (a backend bug must not escape as a bare exception)
        error = InternalError(f"model '{model_name}' failed: {exc}")
        for sender in senders:
            sender.fail(error)
        return False
    finally:
        if release is not None:
            release(instance)
    if timing is not None:  # None: the backend records its own executions
        if timing.start_ns > started:  # it waited in the backend before it began: queue time too
            started = timing.start_ns
            for request in requests:
                request.queue_ns = started - request.arrival_ns
        stats.record_execution(size, count, timing)
        record_compute(requests, started, timing)  # per-request timing for statistics and traces
    return True

"""The default scheduler: each request runs alone on the next free instance."""

from __future__ import annotations

import time

from ..errors import InternalError, OpenInferError
from ..responses import ResponseSender
from ..stats import ModelStats, record_compute
from ..types import InferRequest
from .base import InstancePool, Scheduler


class DirectScheduler(Scheduler):
    def __init__(self, pool: InstancePool, stats: ModelStats, model_name: str) -> None:
        self.pool = pool
        self.stats = stats
        self.model_name = model_name

    async def schedule(self, request: InferRequest, sender: ResponseSender) -> None:
        instance = self.pool.try_acquire() or await self.pool.acquire()
        started = time.perf_counter_ns()
        request.flags["queue_ns"] = started - request.arrival_ns
        try:
            timing = await instance.execute([request], [sender])
        except OpenInferError as exc:
            sender.fail(exc)
            return
        except Exception as exc:  # a backend bug must not escape as a bare exception
            sender.fail(InternalError(f"model '{self.model_name}' failed: {exc}"))
            return
        finally:
            self.pool.release(instance)
        if timing is None:  # the backend records its own executions (LLM engines batch inside)
            return
        self.stats.record_execution(request.batch_size, 1, timing)
        record_compute((request,), started, timing)

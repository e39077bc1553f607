"""The default scheduler: each request runs alone on the next free instance."""

from __future__ import annotations

from ..observability.stats import ModelStats
from ..requests.responses import ResponseSender
from ..types import InferRequest
from .base import InstancePool, Scheduler
from .execute import run_batch


class DirectScheduler(Scheduler):
    pool: InstancePool

    def __init__(self, pool: InstancePool, stats: ModelStats, model_name: str) -> None:
        self.pool = pool
        self.stats = stats
        self.model_name = model_name

    async def schedule(self, request: InferRequest, sender: ResponseSender) -> None:
        instance = self.pool.try_acquire() or await self.pool.acquire()
        await run_batch(instance, [request], [sender], self.stats, self.model_name, self.pool.release)

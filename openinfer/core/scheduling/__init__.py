"""Schedulers sit between a model's requests and its instances (direct, dynamic batcher, sequence).

`overlap.py` says whether requests overlap in this process, which decides how the crossing to a
worker process behaves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import InstancePool, Scheduler
from .direct import DirectScheduler
from .dynamic_batcher import DynamicBatcher
from .sequence_batcher import SequenceBatcher

if TYPE_CHECKING:
    from ..model import LoadedModel


def make_scheduler(model: LoadedModel, pool: InstancePool) -> Scheduler:
    """The scheduler a model's config asks for (`scheduling_choice`), as Triton picks it."""
    config = model.config
    choice = config.WhichOneof("scheduling_choice")
    if choice in ("sequence_batching", "dynamic_batching"):
        # one batch per instance at a time, as Triton's batchers do (see InstancePool)
        pool = InstancePool(list(model.instances), pipelined=False)
    if choice == "sequence_batching":
        return SequenceBatcher(config, list(model.instances), pool, model.stats, model.ctx.model_dir)
    if choice == "dynamic_batching":
        return DynamicBatcher(config, pool, model.stats)
    return DirectScheduler(pool, model.stats, model.name)


__all__ = [
    "DirectScheduler",
    "DynamicBatcher",
    "InstancePool",
    "Scheduler",
    "SequenceBatcher",
    "make_scheduler",
]

"""Schedulers sit between a model's requests and its instances (direct, dynamic batcher, sequence)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import InstancePool, Scheduler
from .direct import DirectScheduler

if TYPE_CHECKING:
    from ..model import LoadedModel


def make_scheduler(model: LoadedModel, pool: InstancePool) -> Scheduler:
    """The scheduler a model's config asks for."""
    return DirectScheduler(pool, model.stats, model.name)


__all__ = ["DirectScheduler", "InstancePool", "Scheduler", "make_scheduler"]

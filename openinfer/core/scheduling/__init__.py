"""Schedulers sit between a model's requests and its instances (direct, dynamic batcher, sequence)."""

from .base import Scheduler
from .direct import DirectScheduler

__all__ = ["DirectScheduler", "Scheduler"]

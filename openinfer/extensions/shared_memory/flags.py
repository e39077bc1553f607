"""`--allow-client-shm` and the registry of client regions it switches on."""

from __future__ import annotations

from ...app.settings import Settings
from .registry import SharedMemoryManager
from ...features.contract import Contribution
from ...features.flags import FlagGroups, bool_flag


def add_flags(groups: FlagGroups) -> None:
    bool_flag(groups["Server"], "--allow-client-shm", False,
              "let clients register system and CUDA shared-memory regions (openinfer's own switch)")


def configure(settings: Settings) -> Contribution:
    return Contribution(services={"shm": SharedMemoryManager(allow_client=settings.allow_client_shm)})

"""Triton's system and CUDA shared-memory extensions: clients register regions, then name them
in inputs and outputs instead of sending tensor data.

The registry of regions (`registry.py`, with `regions.py` and `cuda_ipc.py`) is this feature's:
`--allow-client-shm` makes it, its endpoints register and list regions, and the core's admission
uses it through `core/memory/client_memory.py: ClientMemory` on every infer (read the inputs that
name a region, hold the regions until the request ends, write the outputs), whichever frontend
the request came through.
"""

from __future__ import annotations

from ...features.contract import Feature
from .flags import add_flags, configure
from .grpc import SharedMemoryRpcs
from .http import install

FEATURE = Feature(
    name="shared_memory", extensions=("system_shared_memory", "cuda_shared_memory"), group="shared-memory",
    flags=add_flags, configure=configure, http=install, grpc=SharedMemoryRpcs,
)

"""Triton's system and CUDA shared-memory extensions: clients register regions, then name them
in inputs and outputs instead of sending tensor data.

The regions themselves (registration rules, pinning during a request, reads and writes) are
`core/memory/shm.py`, `core/memory/shm_regions.py` and `core/memory/cuda_ipc.py`: the core's admission pins them on
every infer, whichever frontend it came through. This package is the
extension's flags, the registry they switch on, and its endpoints.
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

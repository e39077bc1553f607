"""Triton's system and CUDA shared-memory extensions: clients register regions, then name them
in inputs and outputs instead of sending tensor data.

The regions themselves (registration rules, pinning during a request, reads and writes) are
`core/memory/shm.py`, `core/memory/shm_regions.py` and `core/memory/cuda_ipc.py`: the core's admission pins them on
every infer, whichever frontend it came through. This package is the extension's endpoints.
"""

from __future__ import annotations

from ..spec import ProtocolExtension
from .grpc import SharedMemoryRpcs
from .http import install

EXTENSION = ProtocolExtension(
    names=("system_shared_memory", "cuda_shared_memory"),
    group="shared-memory",
    http=install,
    grpc=SharedMemoryRpcs,
)

"""Which GPUs this process may use, found without importing CUDA.

Instance groups need the answer at config time (KIND_AUTO becomes KIND_GPU when a GPU is
visible, an empty `gpus` list means all of them), long before any backend loads a CUDA
runtime. The NVIDIA driver lists its devices under /proc; `CUDA_VISIBLE_DEVICES` narrows
them as CUDA would (indices or `GPU-`/`MIG-` UUIDs; an empty value hides every GPU).
"""

from __future__ import annotations

import functools
import os

_DRIVER_GPUS = "/proc/driver/nvidia/gpus"


@functools.lru_cache(maxsize=1)
def visible_gpus() -> tuple[int, ...]:
    try:
        count = len(os.listdir(_DRIVER_GPUS))
    except OSError:
        count = 0
    ids = tuple(range(count))
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    if mask is None:
        return ids
    visible = 0
    for item in mask.split(","):
        item = item.strip()
        by_index = item.isdigit() and int(item) < count
        by_uuid = item.startswith(("GPU-", "MIG-")) and visible < count
        if not (by_index or by_uuid):
            break  # CUDA stops at the first entry it cannot resolve
        visible += 1
    return tuple(range(visible))

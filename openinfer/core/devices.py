"""Which GPUs this process may use, found without importing CUDA.

Instance groups need the answer at config time (KIND_AUTO becomes KIND_GPU when a GPU is
visible, an empty `gpus` list means all of them), long before any backend loads a CUDA
runtime. The NVIDIA driver lists its devices under /proc; `CUDA_VISIBLE_DEVICES` narrows
them as CUDA would (numbers only; an empty value hides every GPU).
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
    visible = []
    for item in mask.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= count:
            break  # CUDA stops at the first invalid entry
        visible.append(int(item))
    return tuple(range(len(visible)))

"""Keep large tensor buffers in glibc's heap instead of a fresh mmap for each one.

By default glibc serves every allocation above 128 KiB with its own mmap and returns it with
munmap on free, so each large request pays system calls and page faults for memory it just
gave back. Raising the mmap and trim thresholds lets those buffers be reused.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: glibc's largest accepted mmap threshold on 64-bit systems (HEAP_MAX_SIZE / 2).
_MMAP_THRESHOLD = 32 * 1024 * 1024
_TRIM_THRESHOLD = 256 * 1024 * 1024


def tune_malloc() -> bool:
    """Raise the thresholds (glibc only); False where the C library has no `mallopt`."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))

"""CUDA IPC for client CUDA shared memory: open a peer's `cudaIpcMemHandle_t` and copy through it.

Found lazily, only when a client registers a CUDA region: cupy's runtime bindings when cupy is
installed, else the CUDA runtime library itself through ctypes (the one torch's CUDA wheels
ship). Without a GPU there is no runtime and registration answers UNSUPPORTED.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys
from typing import Any

import numpy as np

_LAZY_ENABLE_PEER_ACCESS = 1
_HOST_TO_DEVICE = 1
_DEVICE_TO_HOST = 2


def gpu_present() -> bool:
    """An NVIDIA driver is loaded (cheap: no CUDA initialisation)."""
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")


class CupyRuntime:
    """IPC and copies through `cupy.cuda.runtime`."""

    def __init__(self) -> None:
        import cupy  # noqa: F401  (fails fast when cupy is absent)
        from cupy.cuda import runtime

        self.rt = runtime

    def open(self, handle: bytes, device_id: int) -> int:
        self.rt.setDevice(device_id)
        return int(self.rt.ipcOpenMemHandle(bytes(handle), _LAZY_ENABLE_PEER_ACCESS))

    def close(self, pointer: int, device_id: int) -> None:
        self.rt.setDevice(device_id)
        self.rt.ipcCloseMemHandle(pointer)

    def to_host(self, dst: bytearray, src: int, size: int, device_id: int) -> None:
        self.rt.setDevice(device_id)
        host = np.frombuffer(dst, dtype=np.uint8)
        self.rt.memcpy(host.ctypes.data, src, size, _DEVICE_TO_HOST)

    def to_device(self, dst: int, data: bytes | memoryview, device_id: int) -> None:
        self.rt.setDevice(device_id)
        host = np.frombuffer(data, dtype=np.uint8)
        self.rt.memcpy(dst, host.ctypes.data, host.nbytes, _HOST_TO_DEVICE)


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class CtypesRuntime:
    """IPC and copies through libcudart with ctypes (no Python CUDA package needed)."""

    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        lib.cudaSetDevice.argtypes = [ctypes.c_int]
        lib.cudaIpcOpenMemHandle.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            _IpcHandle,
            ctypes.c_uint,
        ]
        lib.cudaIpcCloseMemHandle.argtypes = [ctypes.c_void_p]
        lib.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        lib.cudaGetErrorString.argtypes = [ctypes.c_int]
        lib.cudaGetErrorString.restype = ctypes.c_char_p
        self.lib = lib

    def _check(self, code: int) -> None:
        if code != 0:
            raise RuntimeError(self.lib.cudaGetErrorString(code).decode())

    def open(self, handle: bytes, device_id: int) -> int:
        self._check(self.lib.cudaSetDevice(device_id))
        pointer = ctypes.c_void_p()
        self._check(
            self.lib.cudaIpcOpenMemHandle(
                ctypes.byref(pointer),
                _IpcHandle.from_buffer_copy(bytes(handle)),
                _LAZY_ENABLE_PEER_ACCESS,
            )
        )
        return int(pointer.value or 0)

    def close(self, pointer: int, device_id: int) -> None:
        self._check(self.lib.cudaSetDevice(device_id))
        self._check(self.lib.cudaIpcCloseMemHandle(pointer))

    def to_host(self, dst: bytearray, src: int, size: int, device_id: int) -> None:
        self._check(self.lib.cudaSetDevice(device_id))
        host = (ctypes.c_char * size).from_buffer(dst)
        self._check(self.lib.cudaMemcpy(ctypes.addressof(host), src, size, _DEVICE_TO_HOST))

    def to_device(self, dst: int, data: bytes | memoryview, device_id: int) -> None:
        self._check(self.lib.cudaSetDevice(device_id))
        host = np.frombuffer(data, dtype=np.uint8)
        self._check(self.lib.cudaMemcpy(dst, host.ctypes.data, host.nbytes, _HOST_TO_DEVICE))


def _cudart_candidates() -> list[str]:
    found = []
    name = ctypes.util.find_library("cudart")
    if name:
        found.append(name)
    for root in sys.path:
        for pattern in ("nvidia/cuda_runtime/lib/libcudart.so*", "torch/lib/libcudart*.so*"):
            found.extend(sorted(glob.glob(os.path.join(root, pattern))))
    found.extend(["libcudart.so", "libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0"])
    return found


def find_runtime() -> Any:
    """A runtime adapter, or None when this machine has no usable GPU."""
    if not gpu_present():
        return None
    try:
        return CupyRuntime()
    except Exception:
        pass
    for path in _cudart_candidates():
        try:
            return CtypesRuntime(path)
        except OSError:
            continue
    return None

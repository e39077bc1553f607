"""The regions a client registers: a window of a POSIX shared-memory object mapped into the
server, or a CUDA IPC allocation copied through the CUDA runtime. `shm.SharedMemoryManager`
keeps the registry and the rules; a region only reads, writes and checks its own bounds."""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Any

from ...core.errors import InvalidArgumentError

SHM_DIR = "/dev/shm"


def shm_key_path(key: str) -> str:
    """The /dev/shm path of a POSIX shm key, refusing keys that would leave /dev/shm."""
    name = key.lstrip("/")
    if not name or "/" in name or "\x00" in name or name in (".", ".."):
        raise InvalidArgumentError(
            f"Unable to open shared memory region: '{key}': the key must name an object "
            f"directly in {SHM_DIR} (like '/my_region')"
        )
    return os.path.join(SHM_DIR, name)


@dataclass(frozen=True, slots=True)
class SystemRegionStatus:
    name: str
    key: str
    offset: int
    byte_size: int


@dataclass(frozen=True, slots=True)
class CudaRegionStatus:
    name: str
    device_id: int
    byte_size: int


class Region:
    """One registered region; `users` counts requests that still hold it."""

    kind = "system"

    def __init__(self, name: str, byte_size: int) -> None:
        self.name = name
        self.byte_size = byte_size
        self.users = 0
        self.awaiting_unregister = False

    def check_bounds(self, offset: int, byte_size: int) -> None:
        """Triton's per-request checks, relative to the registered window."""
        end = self.byte_size - 1 if self.byte_size > 0 else 0
        if offset > end:
            raise InvalidArgumentError(f"Invalid offset for shared memory region: '{self.name}'")
        if byte_size > 0 and offset + byte_size - 1 > end:
            raise InvalidArgumentError(
                f"Invalid offset + byte size for shared memory region: '{self.name}'"
            )

    def read(self, offset: int, byte_size: int) -> Any:
        raise NotImplementedError

    def write(self, offset: int, data: bytes | memoryview) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class SystemRegion(Region):
    def __init__(
        self, name: str, key: str, offset: int, byte_size: int, mapping: mmap.mmap | None, fd: int
    ) -> None:
        super().__init__(name, byte_size)
        self.key = key
        self.offset = offset
        self._mapping = mapping
        self._fd = fd  # kept open to see the object's current size
        # The window [offset, offset + byte_size) of the mapping; mmap offsets must be
        # page-aligned, so the mapping starts at 0 and the window is a slice of it.
        self.view = (
            memoryview(mapping)[offset : offset + byte_size]
            if mapping is not None
            else memoryview(b"")
        )

    def _check_pages(self, offset: int, byte_size: int) -> None:
        """Refuse to touch bytes the object cannot back: bytes it no longer has (truncated since
        it was registered), or pages a full /dev/shm cannot give a sparse object (a client's
        `ftruncate` reserves none). Either way the mapping would kill the server with SIGBUS."""
        if self._fd < 0 or byte_size <= 0:
            return
        info = os.fstat(self._fd)
        size = info.st_size
        if size < self.offset + offset + byte_size:
            raise InvalidArgumentError(
                f"shared memory region '{self.name}' is smaller than when it was registered: its "
                f"object '{self.key}' now holds {size} bytes"
            )
        if info.st_blocks * 512 >= size:
            return  # every page is there already (reserving 256 KiB again would cost 10 µs)
        try:  # pages the object already has are left as they are
            os.posix_fallocate(self._fd, self.offset + offset, byte_size)
        except OSError as exc:
            raise InvalidArgumentError(
                f"shared memory region '{self.name}' cannot hold {byte_size} bytes at offset "
                f"{offset}: its object '{self.key}' has no memory for them ({exc.strerror})"
            ) from None

    def read(self, offset: int, byte_size: int) -> memoryview:
        self._check_pages(offset, byte_size)
        return self.view[offset : offset + byte_size]

    def write(self, offset: int, data: bytes | memoryview) -> None:
        size = len(data) if isinstance(data, bytes) else data.nbytes
        self._check_pages(offset, size)
        self.view[offset : offset + size] = data

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        try:
            self.view.release()
        except BufferError:
            pass
        if self._mapping is not None:
            try:
                self._mapping.close()
            except BufferError:
                pass  # a stray view still exports the buffer: the mapping goes when it does
            self._mapping = None

    def status(self) -> SystemRegionStatus:
        return SystemRegionStatus(self.name, self.key, self.offset, self.byte_size)


class CudaRegion(Region):
    kind = "cuda"

    def __init__(
        self, name: str, device_id: int, byte_size: int, pointer: int, runtime: Any
    ) -> None:
        super().__init__(name, byte_size)
        self.device_id = device_id
        self.pointer = pointer
        self.runtime = runtime

    def read(self, offset: int, byte_size: int) -> memoryview:
        host = bytearray(byte_size)
        self.runtime.to_host(host, self.pointer + offset, byte_size, self.device_id)
        return memoryview(host)

    def write(self, offset: int, data: bytes | memoryview) -> None:
        self.runtime.to_device(self.pointer + offset, data, self.device_id)

    def close(self) -> None:
        self.runtime.close(self.pointer, self.device_id)

    def status(self) -> CudaRegionStatus:
        return CudaRegionStatus(self.name, self.device_id, self.byte_size)

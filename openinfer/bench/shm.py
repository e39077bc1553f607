"""System shared-memory regions for ``--shared-memory system``.

A few lines of ``mmap`` over ``/dev/shm`` do what ``shm_open`` does in C; the key is the name a
v2 server passes to ``shm_open`` (with its leading slash). Using our own helper keeps the bench free
of tritonclient's modules, which cannot share a process with our generated protobuf code.
"""

from __future__ import annotations

import mmap
import os
from typing import Any

SHM_DIR = "/dev/shm"


class Region:
    """A shared-memory region this process created, mapped read-write."""

    def __init__(self, key: str, byte_size: int) -> None:
        if not key.startswith("/"):
            key = "/" + key
        self.key, self.byte_size = key, byte_size
        self.path = os.path.join(SHM_DIR, key.lstrip("/"))
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, byte_size)
            self.map = mmap.mmap(fd, byte_size)
        finally:
            os.close(fd)

    def write(self, offset: int, data: bytes) -> None:
        self.map[offset : offset + len(data)] = data

    def read(self, offset: int, size: int) -> memoryview:
        return memoryview(self.map)[offset : offset + size]

    def close(self) -> None:
        """Unmap and unlink; the server must have unregistered the region first."""
        try:
            self.map.close()
        except BufferError:  # a memoryview still points into it; the unlink still matters
            pass
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class RegionSet:
    """One worker's regions: every input row in one region, one output region per slot.

    Inputs are written once and shared by all slots; each slot needs its own outputs because its
    requests are in flight at the same time as the others'.
    """

    def __init__(self, tag: str, rows: list[list[bytes]], output_sizes: list[int], slots: int,
                 control: Any) -> None:
        self.control = control
        self.named: list[tuple[str, Region]] = []
        self.in_name = f"{tag}_in"
        self.in_offsets: list[list[int]] = []
        self.outputs: list[Region] = []
        try:
            inp = Region("/" + self.in_name, max(sum(len(b) for row in rows for b in row), 1))
            self.named.append((self.in_name, inp))
            off = 0
            for row in rows:
                offs = []
                for data in row:
                    inp.write(off, data)
                    offs.append(off)
                    off += len(data)
                self.in_offsets.append(offs)
            control.register_shm(self.in_name, inp.key, inp.byte_size)
            for s in range(slots):
                out = Region(f"/{tag}_out{s}", max(sum(output_sizes), 1))
                self.named.append((self.out_name(s), out))
                self.outputs.append(out)
                control.register_shm(self.out_name(s), out.key, out.byte_size)
        except BaseException:
            self.close()
            raise

    def out_name(self, slot: int) -> str:
        """Names are ``{tag}_in`` and ``{tag}_out{slot}``: the drivers build them the same way."""
        return f"{self.in_name[:-3]}_out{slot}"

    def close(self) -> None:
        """Unregister (errors ignored: the server may be gone) and unlink everything."""
        for name, region in self.named:
            try:
                self.control.unregister_shm(name)
            except Exception:  # noqa: BLE001 - cleanup must reach every region
                pass
            region.close()
        self.named = []

"""System shared-memory regions for the echo server, so ``--shared-memory system`` has a peer."""

from __future__ import annotations

import mmap
import os
from typing import Any

import orjson


class ShmRegions:
    def __init__(self) -> None:
        self.maps: dict[str, tuple[mmap.mmap, int]] = {}

    def handle(self, path: str, body: bytes) -> tuple[int, bytes]:
        """``/v2/systemsharedmemory/region/{name}/register|unregister`` (status: empty list)."""
        parts = path.strip("/").split("/")
        action = parts[-1]
        name = parts[3] if len(parts) >= 5 and parts[2] == "region" else ""
        if action == "register":
            req = orjson.loads(body)
            fd = os.open("/dev/shm/" + req["key"].lstrip("/"), os.O_RDWR)
            try:
                m = mmap.mmap(fd, int(req["byte_size"]) + int(req.get("offset", 0)))
            finally:
                os.close(fd)
            self.maps[name] = (m, int(req.get("offset", 0)))
            return 200, b""
        if action == "unregister":
            for key in [name] if name else list(self.maps):
                entry = self.maps.pop(key, None)
                if entry:
                    entry[0].close()
            return 200, b""
        return 200, b"[]"

    def read(self, params: dict[str, Any]) -> bytes:
        m, base = self.maps[params["shared_memory_region"]]
        off = base + int(params.get("shared_memory_offset", 0))
        return m[off : off + int(params["shared_memory_byte_size"])]

    def write(self, params: dict[str, Any], data: bytes) -> None:
        m, base = self.maps[params["shared_memory_region"]]
        off = base + int(params.get("shared_memory_offset", 0))
        m[off : off + len(data)] = data

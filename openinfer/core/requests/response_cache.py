"""The response cache (`--cache-config local,size=<bytes>`, `response_cache { enable: true }`).

An LRU map from a request's key to the outputs its model produced, bounded by the bytes those
outputs hold. The key hashes what decides a deterministic model's answer: the model name and
the version that served it, each input's name, datatype, shape and bytes, and the requested
outputs (with their classification). Entries keep private read-only copies, so a hit never
shares memory with a request or a backend buffer. Hits and misses go to the model's
statistics (`cache_hit`, `cache_miss`), which the metrics endpoint reads too.
"""

from __future__ import annotations

import hashlib
import struct
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import datatypes
from ..errors import InvalidArgumentError
from ..types import InferRequest, InferResponse, Tensor

if TYPE_CHECKING:
    from ..model import LoadedModel

_ENTRY_OVERHEAD = 64  # bytes counted per entry besides its tensors (key, bookkeeping)


@dataclass(slots=True)
class _Entry:
    outputs: list[Tensor]
    parameters: dict[str, Any]
    size: int


def request_key(request: InferRequest, version: str) -> bytes:
    """A digest of everything that decides the response of a deterministic model."""
    digest = hashlib.blake2b(digest_size=32)

    def field(value: bytes) -> None:
        digest.update(struct.pack("<Q", len(value)))
        digest.update(value)

    field(request.model_name.encode())
    field(version.encode())
    for tensor in sorted(request.inputs, key=lambda t: t.name):
        field(tensor.name.encode())
        field(tensor.datatype.encode())
        field(struct.pack(f"<{len(tensor.shape)}q", *tensor.shape))
        if tensor.data is None:
            field(b"")
        else:
            field(bytes(datatypes.to_wire_bytes(tensor.data, tensor.datatype)))
    if request.outputs is None:
        field(b"*")
    else:
        for output in sorted(request.outputs, key=lambda o: o.name):
            field(f"{output.name}:{output.classification}".encode())
    return digest.digest()


def _frozen(tensor: Tensor) -> tuple[Tensor, int]:
    assert tensor.data is not None
    data = np.array(tensor.data, copy=True)
    data.flags.writeable = False
    size = datatypes.tensor_byte_size(data, tensor.datatype)
    return Tensor(tensor.name, tensor.datatype, tuple(tensor.shape), data, dict(tensor.parameters)), size


class ResponseCache:
    """A byte-bounded LRU of model outputs, safe to share between threads."""

    def __init__(self, size_bytes: int) -> None:
        if size_bytes < 0:
            raise InvalidArgumentError("response cache size must be non-negative")
        self.capacity = size_bytes
        self.used = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: bytes, request: InferRequest) -> InferResponse | None:
        """The cached response for `key` (marked most recent), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
        outputs = [Tensor(t.name, t.datatype, t.shape, t.data, dict(t.parameters)) for t in entry.outputs]
        return InferResponse(request.model_name, "", request.id, outputs, dict(entry.parameters))

    def insert(self, key: bytes, response: InferResponse) -> bool:
        """Keep a copy of the response's outputs; False when it could never fit."""
        if any(t.data is None for t in response.outputs):
            return False
        frozen = [_frozen(t) for t in response.outputs]
        size = _ENTRY_OVERHEAD + len(key) + sum(s for _, s in frozen)
        if size > self.capacity:
            return False
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.used -= old.size
            while self._entries and self.used + size > self.capacity:
                _, evicted = self._entries.popitem(last=False)
                self.used -= evicted.size
                self.evictions += 1
            self._entries[key] = _Entry([t for t, _ in frozen], dict(response.parameters), size)
            self.used += size
        return True


def cached_response(cache: ResponseCache, model: LoadedModel, request: InferRequest) -> tuple[InferResponse | None, bytes]:
    """Look the request up for `model` (a LoadedModel); a hit is counted in its statistics."""
    started = time.perf_counter_ns()
    key = request_key(request, model.version_str)
    response = cache.lookup(key, request)
    elapsed = time.perf_counter_ns() - started
    if response is not None:
        model.stats.cache_hit.add(elapsed)
    else:
        request.state.cache_lookup_ns = elapsed
    return response, key


def remember(cache: ResponseCache, model: LoadedModel, key: bytes, request: InferRequest, response: InferResponse) -> None:
    """Insert a fresh response; the miss is counted with its lookup and insert time."""
    started = time.perf_counter_ns()
    cache.insert(key, response)
    elapsed = time.perf_counter_ns() - started + request.state.cache_lookup_ns
    model.stats.cache_miss.add(elapsed)


def parse_cache_config(specs: list[str]) -> ResponseCache | None:
    """`--cache-config local,size=<bytes>` (repeatable) -> the cache, or None when not asked for."""
    settings: dict[str, dict[str, str]] = {}
    for spec in specs:
        cache, sep, pair = spec.partition(",")
        key, eq, value = pair.partition("=")
        if not sep or not eq or not cache or not key:
            raise InvalidArgumentError(
                f"invalid --cache-config '{spec}': expected <cache>,<key>=<value> (e.g. local,size=1048576)"
            )
        settings.setdefault(cache, {})[key] = value
    if not settings:
        return None
    unknown = sorted(set(settings) - {"local"})
    if unknown:
        raise InvalidArgumentError(f"unsupported cache '{unknown[0]}': only the 'local' cache is available")
    local = settings["local"]
    extra = sorted(set(local) - {"size"})
    if extra:
        raise InvalidArgumentError(f"unknown 'local' cache setting '{extra[0]}' (only 'size' is accepted)")
    try:
        size = int(local.get("size", "0"))
    except ValueError:
        raise InvalidArgumentError(f"invalid 'local' cache size '{local['size']}': expected bytes") from None
    return ResponseCache(size)

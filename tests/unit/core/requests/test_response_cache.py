"""The response cache's key and its byte-bounded LRU, without a server."""

from __future__ import annotations

import numpy as np
import pytest

from openinfer.core.errors import InvalidArgumentError
from openinfer.core.requests.response_cache import ResponseCache, parse_cache_config, request_key
from openinfer.core.types import InferRequest, InferResponse, RequestedOutput, Tensor


def request(values, name="m", datatype="FP32", outputs=None) -> InferRequest:
    data = np.asarray(values, dtype=np.object_ if datatype == "BYTES" else np.float32)
    return InferRequest(name, inputs=[Tensor("IN", datatype, data.shape, data)], outputs=outputs)


def response(nbytes: int) -> InferResponse:
    data = np.zeros(nbytes, dtype=np.uint8)
    return InferResponse("m", "1", outputs=[Tensor("OUT", "UINT8", data.shape, data)])


def test_key_covers_model_version_inputs_and_outputs():
    base = request_key(request([1, 2]), "1")
    assert base == request_key(request([1, 2]), "1")
    assert base != request_key(request([1, 2], name="other"), "1")
    assert base != request_key(request([1, 2]), "2")
    assert base != request_key(request([1, 3]), "1")
    assert base != request_key(request([[1, 2]]), "1")  # same bytes, other shape
    assert base != request_key(request([1, 2], outputs=[RequestedOutput("OUT")]), "1")
    with_class = request([1, 2], outputs=[RequestedOutput("OUT", classification=2)])
    assert request_key(with_class, "1") != request_key(request([1, 2], outputs=[RequestedOutput("OUT")]), "1")
    assert request_key(request([b"ab", b"c"], datatype="BYTES"), "1") != request_key(
        request([b"a", b"bc"], datatype="BYTES"), "1"
    )


def test_lru_is_bounded_by_bytes():
    cache = ResponseCache(1000)
    for key in (b"a", b"b"):
        assert cache.insert(key, response(400))
    assert cache.lookup(b"a", request([0])) is not None  # refresh "a"
    assert cache.insert(b"c", response(400))  # evicts "b", the least recently used
    assert cache.lookup(b"b", request([0])) is None
    assert cache.lookup(b"a", request([0])) is not None
    assert cache.used <= cache.capacity and len(cache) == 2 and cache.evictions == 1
    assert not cache.insert(b"huge", response(5000))  # never fits: not cached, nothing evicted
    assert len(cache) == 2


def test_entries_are_private_read_only_copies():
    cache = ResponseCache(10_000)
    fresh = response(10)
    cache.insert(b"k", fresh)
    fresh.outputs[0].data[:] = 7  # the backend reuses its buffer
    hit = cache.lookup(b"k", request([0]))
    assert hit is not None and hit.outputs[0].data.tolist() == [0] * 10
    with pytest.raises(ValueError):
        hit.outputs[0].data[0] = 1


def test_parse_cache_config():
    assert parse_cache_config([]) is None
    assert parse_cache_config(["local,size=4096"]).capacity == 4096
    for bad in (["local"], ["redis,size=1"], ["local,size=x"], ["local,ttl=3"]):
        with pytest.raises(InvalidArgumentError):
            parse_cache_config(bad)

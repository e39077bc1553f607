"""Large raw tensors beside a message on the wire, not copied through protobuf.

A tensor in `raw_output_contents` costs four copies through upb: the array's `tobytes`, the
`append` into the message, the encoder's growing buffer, and the bytes object gRPC sends. On
the wire, though, a repeated field's entries may follow the rest of the message (a parser
merges them), and `raw_output_contents` has `ModelInferResponse`'s highest field number: the
message serialized without it, followed by its entries, is the very byte string upb would
write. `TailedResponse` writes it with one copy of each tensor: a [1,65536] FP32 response
serializes in 9-10 µs where upb takes 26-44 µs (more under load, when every copy misses the
caches). Below `TAIL_FROM` bytes upb's own path is the quicker one. A stream's reply nests the
response as its field 2, so the same pieces follow that field's key and length.
"""

from __future__ import annotations

from typing import Any, cast

from ..._proto import grpc_service_pb2 as pb

TAIL_FROM = 4 * 1024  # raw bytes in a response from which they follow the message
#: The key of a `raw_output_contents` entry: field 6, length-delimited.
_RAW_OUTPUT_KEY = bytes([pb.ModelInferResponse.RAW_OUTPUT_CONTENTS_FIELD_NUMBER << 3 | 2])
#: A stream reply's `infer_response` key, field 2, length-delimited; its other field (the error
#: message, 1) is empty whenever it carries a response.
_INFER_RESPONSE_KEY = bytes([pb.ModelStreamInferResponse.INFER_RESPONSE_FIELD_NUMBER << 3 | 2])


def varint(value: int) -> bytes:
    """A non-negative integer in protobuf's base-128 form."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class TailedResponse:
    """A `ModelInferResponse` without its raw outputs, and those outputs as buffers."""

    __slots__ = ("message", "raw")

    def __init__(self, message: pb.ModelInferResponse, raw: list[Any]) -> None:
        self.message = message
        self.raw = raw  # bytes-like, C-contiguous, one per output in order

    def parts(self) -> list[Any]:
        """The serialized message's pieces, in order: the message, then each output's entry."""
        parts = [self.message.SerializeToString()]
        for data in self.raw:
            parts += (_RAW_OUTPUT_KEY, varint(memoryview(data).nbytes), data)
        return parts

    def serialize(self) -> bytes:
        return b"".join(self.parts())


class TailedStreamResponse(TailedResponse):
    """A `ModelStreamInferResponse` holding a tailed `infer_response` (its field 2): the inner
    message's pieces after its key and length."""

    def serialize(self) -> bytes:
        parts = self.parts()
        size = sum(memoryview(part).nbytes for part in parts)
        return b"".join([_INFER_RESPONSE_KEY, varint(size), *parts])


def stream_reply(response: pb.ModelInferResponse | TailedResponse) -> Any:
    """A stream's reply carrying `response`, tailed where the response is."""
    if type(response) is TailedResponse:
        return TailedStreamResponse(response.message, response.raw)
    return pb.ModelStreamInferResponse(infer_response=cast(pb.ModelInferResponse, response))


def serializer(write: Any) -> Any:
    """A response serializer that also writes tailed responses."""

    def serialize(message: Any) -> bytes:
        return message.serialize() if isinstance(message, TailedResponse) else write(message)

    return serialize

"""Rules on a request's input tensors that every frontend shares.

The codecs read what their wire format carries (JSON values, binary chunks, protobuf contents);
what a shape may hold and whether every byte the client sent was used is decided here, so the
same mistake gets the same answer over HTTP and gRPC.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError


def negative_dimension(name: str) -> InvalidArgumentError:
    """The error for a shape with a negative dimension (an input's shape is never variable)."""
    return InvalidArgumentError(f"unexpected negative dimension in shape of input '{name}'")


def check_consumed(used: int, given: int, model: str) -> None:
    """Every piece of binary input data the client sent belongs to an input (HTTP: bytes after
    the JSON header; gRPC: `raw_input_contents` entries)."""
    if used != given:
        raise InvalidArgumentError(f"unexpected additional input data for model '{model}'")

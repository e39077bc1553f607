"""What a client may ask of each output, for every frontend.

HTTP (`outputs[].parameters`) and gRPC (`outputs[].parameters`) carry the same options; the
frontends hand over the parameters as Python values and the rules below decide, so the same
request gets the same answer over both protocols.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError
from ..types import RequestedOutput

_SHM_PLACEMENT = ("shared_memory_offset", "shared_memory_byte_size")


def requested_output(name: str, params: dict[str, Any]) -> RequestedOutput:
    """The core's form of one requested output, its options checked."""
    output = RequestedOutput(name, params)
    if not params:
        return output
    binary = params.get("binary_data")
    if binary is not None:
        if not isinstance(binary, bool):
            raise InvalidArgumentError("Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean")
        output.binary = binary
    k = params.get("classification")
    if k is not None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidArgumentError("invalid value for 'classification' parameter, expected >= 0")
        output.classification = k
    region = params.get("shared_memory_region")
    if region is None:
        if any(key in params for key in _SHM_PLACEMENT):
            raise InvalidArgumentError(
                f"'shared_memory_region' must be specified along with 'shared_memory_offset' or "
                f"'shared_memory_byte_size' for output '{name}'"
            )
        return output
    if output.binary:
        raise InvalidArgumentError("Output can't set both 'shared_memory_region' and 'binary_data'")
    if output.classification:
        raise InvalidArgumentError("Output can't set both 'shared_memory_region' and 'classification'")
    output.shm_region, output.shm_offset, output.shm_byte_size = shm_placement(params, name)
    return output


def shm_placement(params: dict[str, Any], tensor: str) -> tuple[str, int, int]:
    """Region, offset and byte size of a tensor in shared memory (input or output)."""
    region = params.get("shared_memory_region")
    if not isinstance(region, str):
        raise InvalidArgumentError(
            f"Unable to parse 'shared_memory_region' of tensor '{tensor}': expected a string"
        )
    return (
        region,
        _uint(params, "shared_memory_offset", 0, tensor),
        _uint(params, "shared_memory_byte_size", None, tensor),
    )


def _uint(params: dict[str, Any], key: str, default: int | None, tensor: str) -> int:
    value = params.get(key, default)
    if value is None:
        raise InvalidArgumentError(
            f"'{key}' must be specified along with 'shared_memory_region' parameter for tensor '{tensor}'"
        )
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(
            f"Unable to parse '{key}' of tensor '{tensor}': expected an unsigned integer"
        )
    return int(value)

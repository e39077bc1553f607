"""What happens to a model's outputs before they leave the core.

Only the requested outputs are returned, classification turns an output into its top-K
"value:index[:label]" strings, and outputs bound to a shared-memory region are written there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InternalError, InvalidArgumentError
from ..types import InferRequest, InferResponse, RequestedOutput, Tensor

_CLASSIFIABLE = {"UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP32", "FP64"}
_MAX_CLASSIFICATION_ELEMENTS = 1_000_000


def _format_value(value: np.generic, datatype: str) -> str:
    if datatype in ("FP32", "FP64"):
        return f"{float(value):.6f}"
    return str(int(value))


def classify(tensor: Tensor, k: int, batching: bool, labels: list[str]) -> Tensor:
    """Top-k of each batch item (or of the whole tensor), highest value first."""
    if tensor.datatype not in _CLASSIFIABLE:
        raise InvalidArgumentError(
            f"class result not available for output due to unsupported type '{tensor.datatype}'"
        )
    data = tensor.data
    assert data is not None
    if data.size > _MAX_CLASSIFICATION_ELEMENTS:
        raise InvalidArgumentError("classification output tensor too large")
    rows = data.reshape(data.shape[0], -1) if batching and data.ndim > 0 else data.reshape(1, -1)
    k = min(k, rows.shape[1]) if rows.size else 0
    result = np.empty((rows.shape[0], k), dtype=np.object_)
    for r, row in enumerate(rows):
        order = np.argsort(-row.astype(np.float64), kind="stable")[:k]
        for c, index in enumerate(order):
            text = f"{_format_value(row[index], tensor.datatype)}:{int(index)}"
            if 0 <= index < len(labels) and labels[index]:
                text += f":{labels[index]}"
            result[r, c] = text.encode()
    shape = (rows.shape[0], k) if batching else (k,)
    return Tensor(tensor.name, "BYTES", shape, result.reshape(shape))


def finish_outputs(
    request: InferRequest,
    response: InferResponse,
    labels: dict[str, list[str]],
    batching: bool,
    write_shm: Callable[[RequestedOutput, Tensor], None] | None = None,
    declared: dict[str, Any] | None = None,
) -> InferResponse:
    """Select, classify and place outputs as the request asked. Asked for none, the client gets
    the outputs the config `declared` (when it declares any): what else the model sends is
    dropped, as Triton's backends drop it."""
    wanted = request.outputs
    if wanted is None:
        if declared:
            for tensor in response.outputs:
                if tensor.name not in declared:
                    response.outputs = [t for t in response.outputs if t.name in declared]
                    break
        return response
    if len(wanted) == 1 and len(response.outputs) == 1:  # the common case, in a few steps
        only = wanted[0]
        if (only.name == response.outputs[0].name and not only.classification
                and only.shm_region is None):
            response.requested = {only.name: only}
            return response
    by_name: dict[str, RequestedOutput] = {o.name: o for o in wanted}
    outputs: list[Tensor] = []
    for tensor in response.outputs:
        requested = by_name.get(tensor.name)
        if requested is None:
            continue
        if requested.classification:
            tensor = classify(tensor, requested.classification, batching, labels.get(tensor.name, []))
        if requested.shm_region is not None:
            if write_shm is None:
                raise InternalError("shared memory outputs are not available")
            write_shm(requested, tensor)
            tensor = Tensor(tensor.name, tensor.datatype, tensor.shape, None, tensor.parameters)
        outputs.append(tensor)
    produced = {t.name for t in outputs}
    missing = [name for name in by_name if name not in produced]
    if missing:
        raise InternalError(
            f"model '{request.model_name}' did not produce requested output(s) {missing}"
        )
    response.outputs = outputs
    response.requested = by_name
    return response

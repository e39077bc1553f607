"""A raw inference request: a body with no JSON header (`Inference-Header-Content-Length: 0`)
is the data of the model's only input, as Triton's binary extension allows. Its shape comes from
the model's configuration, so the rule lives beside the model, not in the HTTP codec."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import datatypes
from ..errors import InvalidArgumentError, request_label
from ..types import InferRequest, Tensor

if TYPE_CHECKING:
    from ..model import LoadedModel


def raw_request(model: LoadedModel, body: bytes, version: str) -> InferRequest:
    """The request of a body that is all data: the model's only input, its shape deduced from
    the configuration and the body's length."""
    name = model.name
    if len(model.inputs) != 1:
        raise InvalidArgumentError(
            f"{request_label(None)}Raw request must only have 1 input (found 1) to be deduced but got "
            f"{len(model.inputs)} inputs in '{name}' model configuration"
        )
    spec = next(iter(model.inputs.values()))
    dims = list(spec.dims)
    known = datatypes.element_count([d for d in dims if d != -1])
    variable = dims.count(-1)
    if variable > 1:
        raise InvalidArgumentError(
            f"{request_label(None)}The shape of the raw input '{spec.name}' can not be deduced because there "
            "are more than one variable-sized dimension"
        )
    if spec.datatype == "BYTES":  # the whole body is the one element, as Triton takes it
        if variable or known != 1:
            raise InvalidArgumentError(
                f"{request_label(None)}For BYTE datatype raw input '{spec.name}', the model must have input "
                "shape [1]"
            )
        body = len(body).to_bytes(4, "little") + body
    elif variable == 1:
        dims[dims.index(-1)] = len(body) // datatypes.lookup(spec.datatype).size // max(known, 1)
    shape = [1, *dims] if model.max_batch_size > 0 else dims
    array = datatypes.from_wire_bytes(memoryview(body), spec.datatype, tuple(shape), name=spec.name, model=name)
    return InferRequest(model_name=name, model_version=version, inputs=[Tensor(spec.name, spec.datatype, tuple(shape), array)])

"""`pb_utils.Tensor`: a named array, exchanged with other frameworks through DLPack.

BF16 has no numpy type: such tensors keep their uint16 bit patterns and are reached through
DLPack (with torch), as Triton's own `as_numpy()` refuses them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....core import datatypes
from .errors import TritonModelException, require

_DLPACK_CPU = 1
_NOT_CONTIGUOUS = (
    "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in C-Order "
    "are supported."
)


class Tensor:
    """A named tensor backed by a numpy array."""

    __slots__ = ("_array", "_datatype", "_name")

    def __init__(self, name: str, tensor: Any, dtype: str | None = None) -> None:
        require(name, str, "name")
        if tensor is None:
            raise TypeError("incompatible function arguments: the tensor cannot be None")
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        array = tensor if type(tensor) is np.ndarray else np.asarray(tensor)
        datatype = dtype or datatypes.protocol_of_array(array)
        if datatype == "BYTES" and array.dtype.kind in ("U", "S"):
            array = datatypes.to_bytes_array(array)
        self._name = name
        self._array = array
        self._datatype = datatype

    @classmethod
    def _of_server(cls, name: str, array: np.ndarray, datatype: str) -> Tensor:
        """An input the server hands to `execute`: already an array of the stated datatype."""
        tensor = cls.__new__(cls)
        tensor._name, tensor._array, tensor._datatype = name, array, datatype
        return tensor

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        if self._datatype == "BF16":
            raise TritonModelException(
                "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and "
                "from_dlpack() instead."
            )
        return self._array

    def triton_dtype(self) -> int:
        """The TRITONSERVER_DataType number, as Triton's binding returns it."""
        from .dtypes import _PROTOCOL_NAMES

        return _PROTOCOL_NAMES.index(self._datatype)

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def is_cpu(self) -> bool:
        return True

    # -- DLPack
    def __dlpack__(self, stream: Any = None) -> Any:
        return self.to_dlpack()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_DLPACK_CPU, 0)

    def to_dlpack(self) -> Any:
        if self._datatype == "BYTES":
            raise TritonModelException("DLPack does not have support for string tensors.")
        array = np.ascontiguousarray(self._array)
        if self._datatype == "BF16":
            import torch  # numpy has no bfloat16: torch carries the bits

            return torch.utils.dlpack.to_dlpack(torch.from_numpy(array.view(np.int16)).view(torch.bfloat16))
        if array.dtype == np.bool_:  # numpy exports bool only through its own protocol
            import torch

            return torch.utils.dlpack.to_dlpack(torch.from_numpy(array))
        return array.__dlpack__()

    @staticmethod
    def from_dlpack(name: str, tensor: Any) -> Tensor:
        """A tensor from a DLPack capsule or any object with `__dlpack__`/`__dlpack_device__`."""
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        if isinstance(tensor, Tensor):
            return Tensor._of_server(name, tensor._array, tensor._datatype)
        is_capsule = type(tensor).__name__ == "PyCapsule"
        if not is_capsule and not (hasattr(tensor, "__dlpack__") and hasattr(tensor, "__dlpack_device__")):
            raise TritonModelException(
                "Provided tensor is not supported. Tensor must be a DLPack capsule or have "
                "`__dlpack__` and `__dlpack_device__` attributes"
            )
        if is_capsule or _is_torch(tensor):
            return _from_torch(name, tensor)
        array = np.from_dlpack(tensor)
        if not array.flags.c_contiguous:
            raise TritonModelException(_NOT_CONTIGUOUS)
        return Tensor(name, array)

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, {self._datatype}, {list(self._array.shape)})"


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch")


def _from_torch(name: str, source: Any) -> Tensor:
    import torch
    import torch.utils.dlpack

    tensor = torch.utils.dlpack.from_dlpack(source) if not isinstance(source, torch.Tensor) else source
    if not tensor.is_contiguous():
        raise TritonModelException(_NOT_CONTIGUOUS)
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        return Tensor._of_server(name, tensor.view(torch.int16).numpy().view(np.uint16), "BF16")
    return Tensor(name, tensor.numpy())

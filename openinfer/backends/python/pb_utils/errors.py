"""`TritonError` (what a response carries) and `TritonModelException` (what the API raises)."""

from __future__ import annotations


class TritonError:
    """An error a model puts in a response; the codes are TRITONSERVER_Error_Code's numbers."""

    __slots__ = ("_code", "_message")

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    _NAMES = ("UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED",
              "ALREADY_EXISTS", "CANCELLED")

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        if message is None or code is None:
            raise TypeError("TritonError(message, code): neither may be None")
        self._message = str(message)
        self._code = int(code)

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def code_name(self) -> str:
        return self._NAMES[self._code] if 0 <= self._code < len(self._NAMES) else "INTERNAL"

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, {self.code_name()})"

    def __str__(self) -> str:
        return self._message


class TritonModelException(Exception):
    """Raised by the API when a call cannot be carried out (Triton's binding raises the same)."""

    def message(self) -> str:
        return str(self)


def require(value: object, kind: type | tuple[type, ...], what: str) -> None:
    """Triton's binding refuses an argument of the wrong type with a TypeError before it runs."""
    if not isinstance(value, kind):
        raise TypeError(f"incompatible function arguments: {what} cannot be {type(value).__name__}")


def require_list_of(value: object, kind: type, what: str, none_error: type[Exception] = TypeError) -> list:
    """A list argument whose items must be `kind`. A None item of a tensor list passes Triton's
    binding and fails inside it, hence `none_error`."""
    require(value, list, what)
    for item in value:  # type: ignore[attr-defined]
        if item is None:
            raise none_error(f"{what} cannot hold None")
        require(item, kind, f"an item of {what}")
    return value  # type: ignore[return-value]

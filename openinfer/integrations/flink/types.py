"""Flink column types <-> KServe v2 tensors: the provider's type table, shapes and coercions.

| Flink             | v2 datatype |
|-------------------|-------------|
| BOOLEAN           | BOOL        |
| TINYINT           | INT8        |
| SMALLINT          | INT16       |
| INT               | INT32       |
| BIGINT            | INT64       |
| FLOAT             | FP32        |
| DOUBLE            | FP64        |
| STRING / VARCHAR  | BYTES       |
| ARRAY<T>          | T's type, one-dimensional only |

Anything else (DECIMAL, TIMESTAMP, ROW, MAP, CHAR, nested arrays...) is rejected when the model is
registered, with the same suggestions the Java provider gives.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any, NoReturn

from openinfer.integrations.flink.errors import TritonConfigError

_SCALARS = {
    "BOOLEAN": "BOOL",
    "TINYINT": "INT8",
    "SMALLINT": "INT16",
    "INT": "INT32",
    "INTEGER": "INT32",
    "BIGINT": "INT64",
    "FLOAT": "FP32",
    "DOUBLE": "FP64",
    "VARCHAR": "BYTES",
    "STRING": "BYTES",
}
_INT_BITS = {"INT8": 8, "INT16": 16, "INT32": 32, "INT64": 64}
_SUGGESTIONS = (
    ("MAP", "use ARRAY<T> instead of MAP, or serialize to a JSON STRING"),
    ("ROW", "flatten the ROW into one column, pack it into ARRAY<T>, or serialize to JSON STRING"),
    ("TIME", "convert timestamps and dates to BIGINT (epoch milliseconds) or STRING (ISO-8601)"),
    ("DATE", "convert timestamps and dates to BIGINT (epoch milliseconds) or STRING (ISO-8601)"),
    ("DECIMAL", "use DOUBLE for numeric precision or STRING for an exact decimal"),
    ("BINARY", "use STRING (VARCHAR), which maps to Triton BYTES"),
    ("CHAR", "use STRING (VARCHAR), which maps to Triton BYTES"),
)


@dataclass(frozen=True)
class FlinkType:
    """A supported column type: a scalar, or a one-dimensional array of a scalar."""

    #: The Flink type as written in the catalog, e.g. `ARRAY<FLOAT>` or `VARCHAR(2147483647)`.
    text: str
    #: The v2 datatype of the scalar or of the array's elements.
    datatype: str
    is_array: bool

    @property
    def is_string(self) -> bool:
        return self.datatype == "BYTES"


def parse_flink_type(text: str, *, column: str = "?", role: str = "input") -> FlinkType:
    """Parse a Flink logical type string (as `LogicalType.asSummaryString()` prints it).

    Raises `TritonConfigError` for types the provider does not support.
    """
    body = _strip_not_null(text.strip())
    upper = body.upper()
    if upper.startswith("ARRAY<") and upper.endswith(">"):
        element = _strip_not_null(body[6:-1].strip())
        if element.upper().startswith("ARRAY<"):
            raise TritonConfigError(
                f"{role} column '{column}' has nested array type {text}: multi-dimensional "
                "tensors are not supported; flatten to a 1-D ARRAY<T> with size rows * cols"
            )
        datatype = _scalar_datatype(element)
        if datatype is None:
            _unsupported(text, column, role)
        return FlinkType(text=text.strip(), datatype=datatype, is_array=True)
    datatype = _scalar_datatype(body)
    if datatype is None:
        _unsupported(text, column, role)
    return FlinkType(text=text.strip(), datatype=datatype, is_array=False)


def _strip_not_null(text: str) -> str:
    if text.upper().endswith(" NOT NULL"):
        return text[: -len(" NOT NULL")].strip()
    return text


def _scalar_datatype(text: str) -> str | None:
    name = text.split("(", 1)[0].strip().upper()
    if name == "CHAR" or (name == "VARCHAR" and "CHARACTER" in text.upper()):
        return None
    return _SCALARS.get(name)


def _unsupported(text: str, column: str, role: str) -> NoReturn:
    hint = next((h for key, h in _SUGGESTIONS if key in text.upper()), "")
    raise TritonConfigError(
        f"{role} column '{column}' has unsupported type {text} for Triton. Supported: BOOLEAN, "
        "TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, STRING/VARCHAR and ARRAY<T> of those"
        + (f". Suggestion: {hint}" if hint else "")
    )


# -- values going to the server -------------------------------------------------------------


def encode_value(value: Any, ftype: FlinkType) -> list[Any]:
    """The flat `data` list for one row's value, exactly as the provider writes it.

    A NULL scalar or NULL array becomes `[None]`; NULL array elements stay `None`.
    """
    if value is None:
        return [None]
    if ftype.is_array:
        return [None if v is None else _encode_scalar(v, ftype.datatype) for v in value]
    return [_encode_scalar(value, ftype.datatype)]


def row_shape(value: Any, ftype: FlinkType, flatten_batch_dim: bool) -> list[int]:
    """The provider's shape rule: `[1]` for scalars, `[1, N]` (or `[N]` flattened) for arrays."""
    if not ftype.is_array:
        return [1]
    length = 0 if value is None else len(value)
    return [length] if flatten_batch_dim else [1, length]


def _encode_scalar(value: Any, datatype: str) -> Any:
    if datatype == "BOOL":
        return bool(value)
    if datatype in _INT_BITS:
        return int(value)
    if datatype == "FP32":
        return shortest_float32(float(value))
    if datatype == "FP64":
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def shortest_float32(value: float) -> float:
    """The double whose shortest repr round-trips the float32 `value` (`0.1f` -> `0.1`).

    PyFlink widens FLOAT columns to doubles such as 0.10000000149011612; the provider writes
    Java's `Float.toString`, so we send the same short decimal (same float32 on the server).
    """
    if not math.isfinite(value):
        return value
    try:
        target = float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return value
    for digits in range(6, 10):
        candidate = float(f"{target:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", candidate))[0] == target:
            return candidate
    return target


# -- values coming back -----------------------------------------------------------------------


def decode_value(data: list[Any], ftype: FlinkType) -> Any:
    """The output column's value from one output's flat `data`: `data[0]`, or all of it for
    an ARRAY column; numbers are coerced to the column's type as the provider does."""
    if ftype.is_array:
        return [None if v is None else _coerce(v, ftype.datatype) for v in data]
    first = data[0]
    return None if first is None else _coerce(first, ftype.datatype)


def _coerce(value: Any, datatype: str) -> Any:
    if datatype == "BOOL":
        if isinstance(value, str):
            return value.strip().lower() == "true"
        return bool(value)
    if datatype in _INT_BITS:
        return _wrap(_to_int(value), _INT_BITS[datatype])
    if datatype == "FP32":
        return struct.unpack("<f", struct.pack("<f", _to_float(value)))[0]
    if datatype == "FP64":
        return _to_float(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def _to_int(value: Any) -> int:
    if isinstance(value, (bool, int)):
        return int(value)
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else 0
    try:
        return int(str(value).strip())
    except ValueError:
        return 0


def _to_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _wrap(value: int, bits: int) -> int:
    """Two's-complement narrowing, like Java's `(byte)` / `(short)` casts."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def empty_result(ftype: FlinkType) -> Any:
    """What the provider emits when the response has no output data: `''` for STRING."""
    return "" if ftype.is_string and not ftype.is_array else None


def parse_default(text: str | None, ftype: FlinkType, *, model: str = "<model>") -> Any:
    """Parse `default-value` once, at registration: `null` is SQL NULL, STRING is verbatim,
    numbers and booleans are JSON scalars, ARRAY values are JSON arrays."""
    if text is None or text == "null":
        return None
    if ftype.is_string and not ftype.is_array:
        return text
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise TritonConfigError(_default_error(text, ftype, model)) from exc
    if ftype.is_array:
        if not isinstance(parsed, list):
            raise TritonConfigError(_default_error(text, ftype, model))
        return decode_value(parsed, ftype)
    if isinstance(parsed, (list, dict)):
        raise TritonConfigError(_default_error(text, ftype, model))
    return decode_value([parsed], ftype)


def _default_error(text: str, ftype: FlinkType, model: str) -> str:
    return (
        f"model '{model}': cannot parse default-value '{text}' for output type {ftype.text}. "
        "Expected: STRING -> plain text; numeric -> e.g. '-1'; ARRAY -> JSON array such as "
        "'[0.0, 0.0]'; SQL NULL -> 'null'"
    )

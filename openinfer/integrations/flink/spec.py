"""One `CREATE MODEL ... WITH ('provider'='triton', ...)` definition, validated once.

A `TritonModelSpec` is everything a Python worker needs to call the server for that model. It is
built from catalog metadata (column names, type strings, option map), so it is plain data:
picklable, and testable without a JVM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openinfer.integrations.flink.errors import TritonConfigError
from openinfer.integrations.flink.options import TritonOptions, parse_options
from openinfer.integrations.flink.types import FlinkType, parse_default, parse_flink_type


@dataclass(frozen=True)
class TritonModelSpec:
    """A catalog model ready to be called: its single input, single output and options."""

    name: str
    input_column: str
    input_type: FlinkType
    output_column: str
    output_type: FlinkType
    options: TritonOptions
    #: The parsed `default-value` (None also when it is SQL NULL: see `has_default`).
    default: Any = None
    has_default: bool = False

    @property
    def input_tensor(self) -> str:
        """The input tensor's name: the column's, upper-cased only in provider-compatible mode."""
        return _tensor_name(self.input_column, self.options)

    @property
    def output_tensor(self) -> str:
        return _tensor_name(self.output_column, self.options)


def _tensor_name(column: str, options: TritonOptions) -> str:
    return column.upper() if options.tensor_name_case == "upper" else column


def build_spec(
    name: str,
    inputs: Sequence[tuple[str, str]],
    outputs: Sequence[tuple[str, str]],
    raw_options: Mapping[str, str],
    **overrides: str,
) -> TritonModelSpec:
    """Validate one model from its `(column, flink type string)` lists and option map.

    `overrides` replace options (e.g. `mode='pandas'` from `register_triton_models`).
    """
    merged = {**raw_options, **{k.replace("_", "-"): v for k, v in overrides.items()}}
    options = parse_options(merged, model=name)
    input_column, input_text = _single(inputs, "input", name)
    output_column, output_text = _single(outputs, "output", name)
    input_type = parse_flink_type(input_text, column=input_column, role="input")
    output_type = parse_flink_type(output_text, column=output_column, role="output")
    has_default = options.default_value is not None
    default = parse_default(options.default_value, output_type, model=name)
    return TritonModelSpec(
        name=name,
        input_column=input_column,
        input_type=input_type,
        output_column=output_column,
        output_type=output_type,
        options=options,
        default=default,
        has_default=has_default,
    )


def _single(columns: Sequence[tuple[str, str]], role: str, model: str) -> tuple[str, str]:
    if len(columns) != 1:
        names = [c[0] for c in columns]
        raise TritonConfigError(
            f"model '{model}' should have exactly one {role} column, but has {len(columns)}: "
            f"{names}. Only single input/output is supported: pack several features into one "
            "ARRAY<T>, or encode them as a JSON STRING"
        )
    return columns[0]

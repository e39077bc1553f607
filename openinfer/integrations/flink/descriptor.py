"""Triton models through PyFlink 2.3's Model API (`ModelDescriptor`), without SQL strings.

`create_triton_model(t_env, "scorer", ("features", "ARRAY<FLOAT>"), ("score", "FLOAT"),
{"endpoint": ..., "model-name": ...})` stores the same catalog model as the `CREATE MODEL`
statement would, after checking the options and column types here, so a mistake is reported
with the model's name before the catalog holds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openinfer.integrations.flink.options import PROVIDER
from openinfer.integrations.flink.spec import TritonModelSpec, build_spec

Column = tuple[str, str]


def triton_model_descriptor(
    input_column: Column, output_column: Column, options: Mapping[str, str], *, name: str = ""
) -> Any:
    """A `pyflink.table.ModelDescriptor` for provider `triton`; columns are `(name, SQL type)`."""
    from pyflink.table import Schema
    from pyflink.table.model_descriptor import ModelDescriptor

    raw = {k: str(v) for k, v in options.items() if k != "provider"}
    checked = {"provider": PROVIDER, **raw}
    build_spec(name or "<descriptor>", [input_column], [output_column], checked)
    builder = (
        ModelDescriptor.for_provider(PROVIDER)
        .input_schema(Schema.new_builder().column(*input_column).build())
        .output_schema(Schema.new_builder().column(*output_column).build())
    )
    for key, value in raw.items():
        builder = builder.option(key, value)
    return builder.build()


def create_triton_model(
    t_env: Any,
    name: str,
    input_column: Column,
    output_column: Column,
    options: Mapping[str, str],
    *,
    temporary: bool = True,
    ignore_if_exists: bool = False,
) -> TritonModelSpec:
    """Register a triton model in the catalog (temporary by default); returns its checked spec."""
    raw = {k: str(v) for k, v in options.items() if k != "provider"}
    spec = build_spec(name, [input_column], [output_column], {"provider": PROVIDER, **raw})
    descriptor = triton_model_descriptor(input_column, output_column, raw, name=name)
    if temporary:
        t_env.create_temporary_model(name, descriptor, ignore_if_exists)
    else:
        t_env.create_model(name, descriptor, ignore_if_exists)
    return spec

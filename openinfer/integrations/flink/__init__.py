"""ML_PREDICT for PyFlink: call `'provider'='triton'` catalog models as Python functions.

PyFlink 2.3 accepts `CREATE MODEL ... WITH ('provider'='triton', ...)` but cannot run
`ML_PREDICT` without Flink's Java provider jar, and a Python package cannot be a provider. This
package reads those catalog models back and registers one Python function per model, with the
provider's option names, type mapping, wire format and failure rules::

    t_env.execute_sql('''
        CREATE TEMPORARY MODEL classifier
        INPUT (features ARRAY<FLOAT>) OUTPUT (score FLOAT)
        WITH ('provider' = 'triton', 'endpoint' = 'http://localhost:8000',
              'model-name' = 'classifier', 'max-retries' = '3')''')
    register_triton_models(t_env)                       # or mode='pandas' for batches
    t_env.execute_sql('SELECT t.*, classifier(features) AS score FROM t')
    ml_predict(t_env, t_env.from_path('t'), 'classifier', 'features')   # ML_PREDICT's shape

PyFlink 2.3's Model API takes the same model without SQL: `create_triton_model(t_env,
'classifier', ('features', 'ARRAY<FLOAT>'), ('score', 'FLOAT'), {'endpoint': ..., ...})`.

Extensions (WITH keys): `mode` (`async` | `pandas` | `row`), `batch-size` (rows per request in
pandas mode) and `tensor-name-case` (`preserve` | `upper`, the Java provider's upper-casing).

The pure modules (`options`, `types`, `spec`, `wire`, `client`, ...) need only the standard
library; PyFlink is imported only by the functions that need it.
"""

from __future__ import annotations

from typing import Any

from openinfer.integrations.flink.descriptor import create_triton_model, triton_model_descriptor
from openinfer.integrations.flink.errors import (
    TritonCircuitBreakerOpenError,
    TritonClientError,
    TritonConfigError,
    TritonError,
    TritonNetworkError,
    TritonSchemaError,
    TritonServerError,
)
from openinfer.integrations.flink.options import TritonOptions, parse_options
from openinfer.integrations.flink.spec import TritonModelSpec, build_spec

__all__ = [
    "TritonCircuitBreakerOpenError",
    "TritonClientError",
    "TritonConfigError",
    "TritonError",
    "TritonModelSpec",
    "TritonNetworkError",
    "TritonOptions",
    "TritonSchemaError",
    "TritonServerError",
    "build_spec",
    "create_triton_model",
    "ml_predict",
    "parse_options",
    "register_triton_models",
    "triton_model_descriptor",
]


def register_triton_models(
    t_env: Any, *, mode: str | None = None, models: list[str] | None = None
) -> dict[str, TritonModelSpec]:
    """Register a temporary function named after every `'provider'='triton'` model.

    Looks at the current catalog and database (permanent and temporary models), or only at
    `models`. `mode` overrides each model's `mode` option. Every model is validated first, so a
    bad option or column type raises `TritonConfigError` before anything is registered. Returns
    the registered specs by function name.
    """
    from openinfer.integrations.flink.catalog import list_catalog_models
    from openinfer.integrations.flink.functions import triton_function

    overrides = {"mode": mode} if mode is not None else {}
    specs = {
        m.name: build_spec(m.name, m.inputs, m.outputs, m.options, **overrides)
        for m in list_catalog_models(t_env, models)
        if m.options.get("provider", "").strip().lower() == "triton"
    }
    for name, spec in specs.items():
        t_env.drop_temporary_function(name)  # re-registering (e.g. another mode) replaces it
        t_env.create_temporary_function(name, triton_function(spec))
    return specs


def ml_predict(t_env: Any, table: Any, model: str, column: str | None = None) -> Any:
    """`ML_PREDICT(TABLE t, MODEL m, DESCRIPTOR(column))` as a Table API call.

    Returns `table` with the model's output column appended. `column` defaults to the model's
    input column name. The model must have been registered by `register_triton_models`.
    """
    from pyflink.table.expressions import call, col

    from openinfer.integrations.flink.catalog import list_catalog_models

    (found,) = list_catalog_models(t_env, [model])
    column = column or found.inputs[0][0]
    return table.add_columns(call(model, col(column)).alias(found.outputs[0][0]))

"""PyFlink functions that call a model, one class per execution mode.

* `async` (default): an `AsyncScalarFunction`; one request per row, with as many rows in flight
  as `table.exec.async-scalar.max-concurrent-operations` allows. The provider's own model.
* `pandas`: a vectorized function; one request per Arrow batch (`[B]` / `[B, N]`), for models
  with `max_batch_size > 0`. Batch size follows `python.fn-execution.arrow.batch.size`.
* `row`: a plain scalar function, one blocking request per row (for thread mode, or debugging).

Importing this module (which PyFlink's worker does when it unpickles one of these functions)
applies the async-row work-around in `_pyflink_compat`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pyflink.table import DataTypes
from pyflink.table.udf import AsyncScalarFunction, FunctionContext, ScalarFunction, udf

from openinfer.integrations.flink._pyflink_compat import apply_async_row_snapshot_fix
from openinfer.integrations.flink.client import TritonModelClient, run_sync
from openinfer.integrations.flink.spec import TritonModelSpec
from openinfer.integrations.flink.types import FlinkType

apply_async_row_snapshot_fix()

_DATA_TYPES = {
    "BOOL": DataTypes.BOOLEAN,
    "INT8": DataTypes.TINYINT,
    "INT16": DataTypes.SMALLINT,
    "INT32": DataTypes.INT,
    "INT64": DataTypes.BIGINT,
    "FP32": DataTypes.FLOAT,
    "FP64": DataTypes.DOUBLE,
    "BYTES": DataTypes.STRING,
}


def result_type(ftype: FlinkType) -> Any:
    """The PyFlink `DataType` of a model's output column."""
    scalar = _DATA_TYPES[ftype.datatype]()
    return DataTypes.ARRAY(scalar) if ftype.is_array else scalar


def _subtask(context: FunctionContext) -> int:
    return context.get_index_of_this_subtask() or 0


class AsyncTritonFunction(AsyncScalarFunction):
    """`m(col)` in async mode: awaits one inference request per row."""

    def __init__(self, spec: TritonModelSpec) -> None:
        self.spec = spec
        self._client: TritonModelClient | None = None

    def open(self, function_context: FunctionContext) -> None:
        self._client = TritonModelClient(self.spec, subtask_index=_subtask(function_context))
        self._client.open()

    async def eval(self, value: Any) -> Any:
        assert self._client is not None
        return await self._client.predict(value)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class _BlockingTritonFunction(ScalarFunction):
    """Shared lifecycle of the blocking modes: a private event loop per function instance."""

    def __init__(self, spec: TritonModelSpec) -> None:
        self.spec = spec
        self._client: TritonModelClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def open(self, function_context: FunctionContext) -> None:
        self._loop = asyncio.new_event_loop()
        self._client = TritonModelClient(self.spec, subtask_index=_subtask(function_context))
        self._client.open()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._loop is not None:
            self._loop.close()


class RowTritonFunction(_BlockingTritonFunction):
    """`m(col)` in row mode: one blocking request per row."""

    def eval(self, value: Any) -> Any:
        assert self._client is not None and self._loop is not None
        return run_sync(self._loop, self._client.predict(_plain(value)))


class PandasTritonFunction(_BlockingTritonFunction):
    """`m(col)` in pandas mode: the rows of one Arrow batch go out as one stacked request."""

    def eval(self, series: Any) -> Any:
        import pandas as pd

        assert self._client is not None and self._loop is not None
        values = [None if _is_null(v) else _plain(v) for v in series]
        results = run_sync(self._loop, self._client.predict_batch(values))
        return pd.Series(results, dtype=object)


def _plain(value: Any) -> Any:
    """Numpy arrays and scalars (pandas mode) as Python lists and numbers."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _is_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return value != value
    try:
        import pandas as pd

        return value is pd.NA or value is pd.NaT
    except ImportError:  # pragma: no cover - pandas ships with PyFlink
        return False


def triton_function(spec: TritonModelSpec) -> Any:
    """The PyFlink user-defined function for `spec` in its configured mode."""
    mode = spec.options.mode
    out = result_type(spec.output_type)
    if mode == "pandas":
        return udf(PandasTritonFunction(spec), result_type=out, func_type="pandas", name=spec.name)
    if mode == "row":
        return udf(RowTritonFunction(spec), result_type=out, name=spec.name)
    return udf(AsyncTritonFunction(spec), result_type=out, name=spec.name)

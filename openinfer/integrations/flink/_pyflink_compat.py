"""Work-around for a PyFlink 2.3.0 bug in async scalar functions (FLINK-39532).

PyFlink's Cython row decoder reuses one list for every row, and
`AsyncScalarFunctionOperation.process_element` hands that list to a coroutine that runs later,
so a coroutine reads the arguments of a *later* row (`alpha -> f(beta)`). Snapshotting the row
before it is queued fixes it. The patch is applied in the Python worker when this package is
imported there (unpickling our functions imports it), and steps aside when PyFlink's own fix
(which introduces `_input_is_flatten_row`) is present.
"""

from __future__ import annotations

from typing import Any

_MARK = "_openinfer_row_snapshot"


def _snapshot(value: Any) -> Any:
    if isinstance(value, list):
        return [list(v) if isinstance(v, list) else v for v in value]
    return value


def apply_async_row_snapshot_fix() -> bool:
    """Patch the async operation once; returns whether a patch is in place."""
    try:
        from pyflink.fn_execution.table.async_function import operations
    except ImportError:
        return False
    cls = operations.AsyncScalarFunctionOperation
    if hasattr(cls, "_input_is_flatten_row"):
        return False
    original = cls.process_element
    if getattr(original, _MARK, False):
        return True

    def process_element(self: Any, value: Any) -> Any:
        if getattr(self, "_input_is_flatten_row", None) is not None:
            return original(self, value)
        return original(self, _snapshot(value))

    setattr(process_element, _MARK, True)
    cls.process_element = process_element
    return True

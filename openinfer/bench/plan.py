"""What every worker sends: the concrete input rows and what each row must produce.

Built identically in the parent (to fail early on a bad ``--shape`` or data file) and in every
worker (so that nothing large crosses the process boundary).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .control import ModelInfo
from .options import Options
from .tensors import NUMPY, DataSet, Tensor, TensorSpec, generate, load_file, resolve_shape


@dataclass
class Plan:
    rows: list[list[Tensor]]
    expected: list[list[Tensor]]  # per row; empty list: structure checks only
    outputs: list[TensorSpec]
    output_sizes: list[int]  # bytes to reserve per output (shared memory)

    def expected_for(self, row: int) -> list[Tensor] | None:
        return self.expected[row % len(self.expected)] if self.expected else None


def build(opts: Options, info: ModelInfo) -> Plan:
    batching = None if info.max_batch_size is None else info.max_batch_size > 0
    if info.max_batch_size and opts.batch_size > info.max_batch_size:
        raise ValueError(f"-b {opts.batch_size} exceeds the model's max_batch_size "
                         f"{info.max_batch_size}")
    if info.max_batch_size == 0 and opts.batch_size > 1:
        raise ValueError(f"model {info.name!r} does not batch (max_batch_size 0); use -b 1")
    from_file = opts.input_data not in ("random", "zero")
    shapes = {}
    for spec in info.inputs:
        try:
            shapes[spec.name] = resolve_shape(spec, opts.shapes.get(spec.name), opts.batch_size,
                                              batching)
        except ValueError:
            if not from_file or spec.name in opts.shapes:
                raise
            # A data file may carry the shape, or its length fills the last variable dimension.
            dims = [max(d, 1) for d in spec.shape]
            if batching or (batching is None and spec.shape and spec.shape[0] == -1):
                dims[0] = opts.batch_size
            shapes[spec.name] = dims
    unknown = set(opts.shapes) - set(shapes)
    if unknown:
        raise ValueError(f"--shape names unknown inputs {sorted(unknown)}; "
                         f"the model has {sorted(shapes)}")
    if opts.input_data in ("random", "zero"):
        row = [generate(s, shapes[s.name], opts.input_data, seed=i)
               for i, s in enumerate(info.inputs)]
        data = DataSet([row])
    else:
        data = load_file(opts.input_data, info.inputs, info.outputs, shapes)
    sizes = [_output_size(o, info, data, opts, batching) for o in info.outputs]
    return Plan(data.inputs, data.expected, list(info.outputs), sizes)


def _output_size(
    spec: TensorSpec, info: ModelInfo, data: DataSet, opts: Options, batching: bool | None
) -> int:
    """Bytes an output needs: from its shape when fixed, else the best evidence available."""
    for row in data.expected:
        for t in row:
            if t.name == spec.name:
                return max(len(t.raw()), 1)
    if spec.datatype != "BYTES":
        dims = list(spec.shape)
        if batching or (batching is None and dims and dims[0] == -1):
            dims = [opts.batch_size] + dims[1:]
        if dims and all(d >= 0 for d in dims):
            return max(int(np.prod(dims)) * np.dtype(NUMPY[spec.datatype]).itemsize, 1)
        # An output shaped like an input of the same type (identity, add_sub) is as large.
        for s, t in zip(info.inputs, data.inputs[0]):
            if s.datatype == spec.datatype and len(s.shape) == len(spec.shape):
                return max(len(t.raw()), 1)
    return opts.output_shm_size

"""Writes `classifier_onnx/1/model.onnx`: the tiny ONNX classifier of the example pipeline.

    python examples/build_onnx.py

FEATURES [batch, 4] (FP32) -> PROBS [batch, 3] = softmax(FEATURES @ W + B), with fixed
weights so the pipeline's answers are known in advance (class i wins when feature i is the
largest of the first three). The graph is built with the `onnx` package; its batch
dimension is symbolic, which lets the server auto-complete `max_batch_size` and the tensors.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
TARGET = HERE / "model_repository" / "classifier_onnx" / "1" / "model.onnx"

WEIGHTS = np.array(
    [[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0], [0.5, 0.5, 0.5]], dtype=np.float32
)
BIAS = np.array([0.0, 0.0, 0.0], dtype=np.float32)


def build() -> onnx.ModelProto:
    features = helper.make_tensor_value_info("FEATURES", TensorProto.FLOAT, ["batch", 4])
    probs = helper.make_tensor_value_info("PROBS", TensorProto.FLOAT, ["batch", 3])
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["FEATURES", "W", "B"], ["LOGITS"]),
            helper.make_node("Softmax", ["LOGITS"], ["PROBS"], axis=-1),
        ],
        "classifier",
        [features],
        [probs],
        initializer=[numpy_helper.from_array(WEIGHTS, "W"), numpy_helper.from_array(BIAS, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="openinfer")
    model.ir_version = 8  # readable by every onnxruntime of the last years
    onnx.checker.check_model(model)
    return model


def main() -> int:
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(build(), str(TARGET))
    print(f"wrote {TARGET} ({TARGET.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

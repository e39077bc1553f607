"""The one model repository both servers serve: Python models only, since the Triton build the
comparison runs (the CPU build in the nvidia-pytriton wheel) has the Python backend alone."""

from __future__ import annotations

from pathlib import Path

from tests.hardening.models import copy_examples
from tests.helpers import write_model


ECHO = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """OUTPUT0 is INPUT0 (as FP32), whatever else the request brings."""

    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            value = tensor.as_numpy() if tensor is not None else np.zeros([1], np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", value.astype(np.float32))]))
        return responses
'''

MODELS = {
    # Batching: the batch dimension comes first and is bounded by max_batch_size.
    "batched": """
name: "batched"
backend: "python"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
""",
    # Classification reads the labels beside the config.
    "labelled": """
name: "labelled"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" } ]
""",
    # A sequence model: the batcher adds START and END, the client sends INPUT0 with its flags.
    "sequence": """
name: "sequence"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] } ] }
  ]
}
""",
    # Declares no inputs; its warm-up sample names two the config does not declare.
    "no_inputs": """
name: "no_inputs"
backend: "python"
max_batch_size: 0
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
model_warmup [
  {
    name: "undeclared"
    batch_size: 1
    inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } }
    inputs { key: "INPUT1" value: { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } }
  }
]
""",
    # Two inputs whose names differ in case alone.
    "two_cases": """
name: "two_cases"
backend: "python"
max_batch_size: 0
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] optional: true },
  { name: "input0" data_type: TYPE_FP32 dims: [ 1 ] optional: true }
]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
""",
    # Loaded and unloaded by the repository cases.
    "spare": """
name: "spare"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
""",
}


def write(repo: Path) -> Path:
    """The bundled examples (they run on Triton unchanged) and the models above, each with the echo model."""
    copy_examples(repo)
    for name, config in MODELS.items():
        write_model(repo, name, config, ECHO)
    (repo / "labelled" / "labels.txt").write_text("zero\none\ntwo\nthree\n")
    return repo

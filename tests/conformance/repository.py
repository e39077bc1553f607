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

# Misbehaves as INPUT0[0] asks: what a Python model's mistakes look like to the client.
FAULTY = '''
import numpy as np
import triton_python_backend_utils as pb_utils


def _inner():
    raise KeyError("deep inside")


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            how = int(pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()[0])
            if how == 0:
                raise ValueError("the model raised")
            if how == 1:
                error = pb_utils.TritonError("refused by the model", pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
            elif how == 2:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("no code given")))
            elif how == 3:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("EXTRA", np.ones([1], np.float32))]))
            elif how == 4:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.ones([1], np.int32))]))
            elif how == 5:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.ones([2, 2], np.float32))]))
            elif how == 6:
                error = pb_utils.TritonError("not there", pb_utils.TritonError.NOT_FOUND)
                responses.append(pb_utils.InferenceResponse(error=error))
            elif how == 7:
                responses.append(pb_utils.InferenceResponse([]))
            elif how == 9:
                raise pb_utils.TritonModelException("the model gave up")
            elif how == 10:
                _inner()
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.ones([1], np.float32))]))
        if any(int(pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()[0]) == 8 for r in requests):
            return responses[:0]
        return responses
'''

# Calls another model as INPUT0[0] asks and answers with what it got back (BLS).
BLS = '''
import numpy as np
import triton_python_backend_utils as pb_utils

CALLS = {
    0: ("add_sub", [("INPUT0", [4]), ("INPUT1", [4])]),
    1: ("nope", [("INPUT0", [4])]),
    2: ("add_sub", [("INPUT0", [2]), ("INPUT1", [4])]),
    3: ("add_sub", [("INPUT0", [4])]),
}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            how = int(pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()[0])
            model, tensors = CALLS[how]
            call = pb_utils.InferenceRequest(
                model_name=model, requested_output_names=["OUTPUT0"],
                inputs=[pb_utils.Tensor(n, np.ones(shape, np.float32)) for n, shape in tensors])
            reply = call.exec()
            if reply.has_error():
                text = reply.error().message()
                out = np.array([text.encode()], dtype=np.object_)
            else:
                value = pb_utils.get_output_tensor_by_name(reply, "OUTPUT0").as_numpy()
                out = np.array([str(value.tolist()).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out)]))
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
    # An ensemble of two steps over add_sub: (IN + IN) + (IN + IN).
    "ensemble": """
name: "ensemble"
platform: "ensemble"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [
    { model_name: "add_sub" model_version: -1
      input_map { key: "INPUT0" value: "IN" } input_map { key: "INPUT1" value: "IN" }
      output_map { key: "OUTPUT0" value: "twice" } },
    { model_name: "add_sub" model_version: -1
      input_map { key: "INPUT0" value: "twice" } input_map { key: "INPUT1" value: "twice" }
      output_map { key: "OUTPUT0" value: "OUT" } }
  ]
}
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


ONE_IN_ONE_OUT = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: {out} dims: [ 1 ] }} ]
"""


def write(repo: Path) -> Path:
    """The bundled examples (they run on Triton unchanged), the models above with the echo model
    (the ensemble without one), and the faulty and BLS models."""
    copy_examples(repo)
    for name, config in MODELS.items():
        write_model(repo, name, config, None if "ensemble_scheduling" in config else ECHO)
    write_model(repo, "faulty", ONE_IN_ONE_OUT.format(name="faulty", out="TYPE_FP32"), FAULTY)
    write_model(repo, "bls", ONE_IN_ONE_OUT.format(name="bls", out="TYPE_STRING"), BLS)
    (repo / "labelled" / "labels.txt").write_text("zero\none\ntwo\nthree\n")
    return repo


#: Written once both servers run (with every model loaded at start, a broken one would stop
#: them); the repository cases load them.
LATER = {
    "broken_config": ("this is { not a config", ECHO),
    "broken_code": (ONE_IN_ONE_OUT.format(name="broken_code", out="TYPE_FP32"), "def oops(:\n"),
    "broken_init": (ONE_IN_ONE_OUT.format(name="broken_init", out="TYPE_FP32"),
                    "class TritonPythonModel:\n    def initialize(self, args):\n        raise ValueError('no')\n"),
    "broken_warmup": (ONE_IN_ONE_OUT.format(name="broken_warmup", out="TYPE_FP32") + """
model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } } ]
""", ECHO),
    "skipped_warmup": (ONE_IN_ONE_OUT.format(name="skipped_warmup", out="TYPE_FP32") + """
model_warmup [ { name: "w" inputs { key: "INPUT0" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } } ]
""", ECHO),
    "wrong_name": (ONE_IN_ONE_OUT.format(name="another_name", out="TYPE_FP32"), ECHO),
    "no_versions": (ONE_IN_ONE_OUT.format(name="no_versions", out="TYPE_FP32"), None),
    "versioned": (ONE_IN_ONE_OUT.format(name="versioned", out="TYPE_FP32")
                  + "version_policy: { specific: { versions: [ 1, 3 ] } }\n", ECHO),
}


def write_later(repo: Path) -> None:
    """The models of LATER; `versioned` has versions 1 to 3, `no_versions` none."""
    for name, (config, model_py) in LATER.items():
        if model_py is None:
            (repo / name).mkdir()
            (repo / name / "config.pbtxt").write_text(config)
            continue
        for version in (1, 2, 3) if name == "versioned" else (1,):
            write_model(repo, name, config, model_py, version=version)

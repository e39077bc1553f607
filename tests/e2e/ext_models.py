"""Tiny Python models for the protocol-extension tests, written as Triton users write them."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import write_model

#: Appended to a config: the model runs on the server's event loop (fast to load in tests).
IN_PROCESS = '\nparameters { key: "execution_mode" value { string_value: "in_process" } }\n'

ADD_SUB_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
"""

ADD_SUB = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]))
        return responses
"""

IDENTITY_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: {max_batch}
input [ {{ name: "INPUT0" data_type: {dtype} dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: {dtype} dims: [ -1 ] }} ]
"""

IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests]
"""

#: Sleeps INPUT0[0] milliseconds, then echoes INPUT0: keeps a request in flight on purpose.
SLOW_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]
"""

SLOW = """
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            time.sleep(int(data[0]) / 1000.0)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", data)]))
        return responses
"""

#: Echoes the request parameters as JSON in OUTPUT0 and answers with response parameters.
PARAMS_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]
"""

PARAMS = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            params = request.parameters()
            text = np.array([params.encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("OUTPUT0", text)],
                parameters={"echo_count": len(json.loads(params)), "flag": True, "label": "ok", "ratio": "0.5"}))
        return responses
"""

#: Scores for 5 classes; labels come from labels.txt through `label_filename`.
CLASSIFIER_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: {max_batch}
input [ {{ name: "INPUT0" data_type: {dtype} dims: [ 5 ] }} ]
output [ {{ name: "OUTPUT0" data_type: {dtype} dims: [ 5 ] label_filename: "labels.txt" }} ]
"""

LABELS = b"cat\ndog\nbird\n\nfish\n"


def add_sub(repo: Path, name: str = "add_sub") -> Path:
    return write_model(repo, name, ADD_SUB_CONFIG.format(name=name), ADD_SUB)


def identity(repo: Path, name: str, dtype: str = "TYPE_FP32", max_batch: int = 0) -> Path:
    return write_model(
        repo, name, IDENTITY_CONFIG.format(name=name, dtype=dtype, max_batch=max_batch), IDENTITY
    )


def slow(repo: Path, name: str = "slow") -> Path:
    return write_model(repo, name, SLOW_CONFIG.replace("{name}", name), SLOW)


def params(repo: Path, name: str = "params") -> Path:
    return write_model(repo, name, PARAMS_CONFIG.replace("{name}", name), PARAMS)


def classifier(repo: Path, name: str, dtype: str = "TYPE_FP32", max_batch: int = 0) -> Path:
    config = CLASSIFIER_CONFIG.format(name=name, dtype=dtype, max_batch=max_batch)
    return write_model(repo, name, config, IDENTITY, files={"labels.txt": LABELS})

"""Triton's iterative sequences: with `sequence_batching { iterative_sequence: true }` a request
without a correlation ID is a sequence of its own, and a model that releases it with
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE sees it again until it answers."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import InProcessServer, write_model

CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] } ]
sequence_batching { %s }
"""

# Reschedules every request twice, then answers with what it saw on each pass.
MODEL = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.passes = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            seen = self.passes.setdefault(request.correlation_id(), [])
            seen.append(request.flags())
            if len(seen) < 3:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                responses.append(None)
                continue
            report = {"correlation_id": request.correlation_id(), "flags": seen}
            out = np.array([json.dumps(report).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        return responses
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("iterative")
    write_model(repo, "iterative", CONFIG % "iterative_sequence: true", MODEL)
    write_model(repo, "plain_sequence", CONFIG % "", MODEL)
    with InProcessServer(repo) as running:
        yield running


def _ask(module, url: str, model: str) -> dict:
    client = module.InferenceServerClient(url)
    tensor = module.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.array([1.0], np.float32))
    return json.loads(client.infer(model, [tensor]).as_numpy("OUT")[0])


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_a_request_without_correlation_id_is_a_sequence_of_its_own(server, module):
    url = server.http_url if module is httpclient else server.grpc_url
    first, second = _ask(module, url, "iterative"), _ask(module, url, "iterative")
    # Three passes through execute, each with the START flag the sequencer set.
    assert first["flags"] == second["flags"] == [1, 1, 1]
    assert first["correlation_id"] != second["correlation_id"]
    assert first["correlation_id"] > 0


def test_other_sequence_models_still_require_a_correlation_id(server):
    with pytest.raises(InferenceServerException) as info:
        _ask(httpclient, server.http_url, "plain_sequence")
    assert "must specify a non-zero or non-empty correlation ID" in info.value.message()

"""Request rules Triton's HTTP QA suite checks, in its words: a raw (header-less) BYTES body is the
one element of a [1] input, an output asked for twice is refused on both protocols, and the
input-count message names the range when some inputs are optional."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.e2e import ext_models
from tests.e2e.ext_models import IN_PROCESS
from tests.helpers import InProcessServer, write_model

ONE_STRING = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]
""" + IN_PROCESS
TWO_VARIABLE = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
""" + IN_PROCESS
OPTIONAL = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1 ] },
        { name: "EXTRA" data_type: TYPE_FP32 dims: [ -1 ] optional: true } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
""" + IN_PROCESS


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    write_model(repo, "one_string", ONE_STRING, ext_models.IDENTITY)
    write_model(repo, "many_strings", ONE_STRING.replace("dims: [ 1 ]", "dims: [ -1 ]"), ext_models.IDENTITY)
    write_model(repo, "two_variable", TWO_VARIABLE, ext_models.IDENTITY)
    write_model(repo, "optional", OPTIONAL, ext_models.IDENTITY)
    write_model(repo, "identity", ext_models.IDENTITY_CONFIG.format(name="identity", dtype="TYPE_FP32", max_batch=0)
                + IN_PROCESS, ext_models.IDENTITY)
    with InProcessServer(repo) as running:
        yield running


def _raw(server, model: str, body: bytes) -> tuple[int, bytes, dict]:
    request = urllib.request.Request(f"http://{server.http_url}/v2/models/{model}/infer", data=body, method="POST",
                                     headers={"Inference-Header-Content-Length": "0"})
    try:
        with urllib.request.urlopen(request) as reply:
            return reply.status, reply.read(), {k.lower(): v for k, v in reply.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), {k.lower(): v for k, v in exc.headers.items()}


def test_a_raw_bytes_body_is_the_one_element_of_its_input(server):
    status, body, headers = _raw(server, "one_string", b"427")
    assert status == 200
    header = int(headers["inference-header-content-length"])
    assert body[header:] == (3).to_bytes(4, "little") + b"427"  # answered with its length, as Triton does
    status, body, _ = _raw(server, "many_strings", b"427")
    assert status == 400 and b"For BYTE datatype raw input 'INPUT0', the model must have input shape [1]" in body
    status, body, _ = _raw(server, "two_variable", np.ones(4, np.float32).tobytes())
    assert status == 400 and (b"The shape of the raw input 'INPUT0' can not be deduced because there are more "
                              b"than one variable-sized dimension") in body


def test_an_output_asked_for_twice_is_answered_once(server):
    for module, client in ((httpclient, httpclient.InferenceServerClient(server.http_url)),
                           (grpcclient, grpcclient.InferenceServerClient(server.grpc_url))):
        tensor = module.InferInput("INPUT0", [2], "FP32")
        tensor.set_data_from_numpy(np.ones(2, np.float32))
        outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT0")]
        result = client.infer("identity", [tensor], outputs=outputs).get_response()
        answered = result["outputs"] if isinstance(result, dict) else result.outputs
        assert len(answered) == 1


def test_the_input_count_message_names_the_range_with_optional_inputs(server):
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("INPUT0", [2], "FP32")
    tensor.set_data_from_numpy(np.ones(2, np.float32))
    with pytest.raises(InferenceServerException, match="expected number of inputs between 2 and 3 but got 1 inputs"):
        client.infer("optional", [tensor])


def test_json_data_nested_past_tritons_bound_is_refused_in_its_words(server):
    def nested(depth: int):
        value = "hello"
        for _ in range(depth):
            value = [value]
        return value

    for depth, status in ((50, 200), (120, 400)):
        body = {"inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1], "data": nested(depth)}]}
        request = urllib.request.Request(f"http://{server.http_url}/v2/models/one_string/infer",
                                         data=json.dumps(body).encode(), method="POST")
        try:
            with urllib.request.urlopen(request) as reply:
                got, text = reply.status, reply.read()
        except urllib.error.HTTPError as exc:
            got, text = exc.code, exc.read()
        assert got == status, text
        if status == 400:
            assert json.loads(text)["error"] == "JSON nesting depth exceeds maximum allowed limit (100)"


def test_bytes_that_are_not_utf8_are_never_altered_in_a_json_answer(server):
    """JSON cannot carry them: a JSON output of such bytes is refused; as binary data they come
    back as sent."""
    client = httpclient.InferenceServerClient(server.http_url)
    raw = np.array([b"\xfa\x03\x94\xff"], dtype=np.object_)
    tensor = httpclient.InferInput("INPUT0", [1], "BYTES")
    tensor.set_data_from_numpy(raw, binary_data=True)
    binary = client.infer("one_string", [tensor], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)])
    assert binary.as_numpy("OUTPUT0").tolist() == [b"\xfa\x03\x94\xff"]
    with pytest.raises(InferenceServerException) as info:
        client.infer("one_string", [tensor], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)])
    assert "output 'OUTPUT0' holds bytes that are not UTF-8 text" in info.value.message()
    assert info.value.status() == "400"

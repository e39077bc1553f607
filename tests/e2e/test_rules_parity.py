"""The v2 rules the core decides give the same answer over HTTP and gRPC.

Each case is sent over both protocols to one server: the status must be the same (400 is
INVALID_ARGUMENT, 404 NOT_FOUND, 501 UNIMPLEMENTED) and so must the message, because one rule in
the core wrote it.
"""

from __future__ import annotations

import json
import uuid

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.utils.shared_memory as shm

from openinfer._proto import grpc_service_pb2 as pb
from openinfer._proto import grpc_service_pb2_grpc as pb_grpc
from openinfer.frontends.grpc.convert import set_param
from tests.hardening import models
from tests.helpers import Server

GRPC_STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 501: "UNIMPLEMENTED"}
ONES = np.ones(4, np.float32)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = models.copy_examples(tmp_path_factory.mktemp("parity") / "repo")
    server = Server(
        repo, ["--model-control-mode", "explicit", "--load-model", "*", "--allow-client-shm", "true"]
    ).start(wait_for="ready")
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=f"http://127.0.0.1:{server.http_port}", timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def stub(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        yield pb_grpc.GRPCInferenceServiceStub(channel)


@pytest.fixture(scope="module")
def region(http):
    """A registered 8-byte region: too small for add_sub's 16-byte outputs."""
    key = f"/oi_parity_{uuid.uuid4().hex[:8]}"
    handle = shm.create_shared_memory_region("parity", key, 8)
    reply = http.post("/v2/systemsharedmemory/region/parity/register", json={"key": key, "byte_size": 8})
    assert reply.status_code == 200, reply.text
    yield "parity"
    http.post("/v2/systemsharedmemory/region/parity/unregister")
    shm.destroy_shared_memory_region(handle)


def _http_outcome(reply) -> tuple:
    """(status, error message) of an HTTP reply; no message for a success."""
    return reply.status_code, reply.json().get("error") if reply.status_code != 200 else None


def _grpc_outcome(rpc, message) -> tuple:
    """(status name, details) of one gRPC call; ("OK", None) for a success."""
    try:
        rpc(message, timeout=60)
    except grpc.RpcError as exc:
        return exc.code().name, exc.details()
    return "OK", None


def _both(http, stub, *, model="add_sub", version="", outputs=(), extra_raw=False, shape=(4,),
          input_params=None):
    """The (status, message) of one infer request over HTTP, and over gRPC."""
    inputs = [{"name": n, "datatype": "FP32", "shape": list(shape), "parameters": {"binary_data_size": 16}}
              for n in ("INPUT0", "INPUT1")]
    if input_params is not None:
        inputs[0]["parameters"] = input_params
    doc = {"inputs": inputs}
    if outputs:
        doc["outputs"] = [{"name": name, "parameters": params} for name, params in outputs]
    header = json.dumps(doc).encode()
    binary = ONES.tobytes() * (1 if input_params is not None else 2) + (b"\0" * 4 if extra_raw else b"")
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    reply = http.post(path, content=header + binary, headers={"Inference-Header-Content-Length": str(len(header))})
    over_http = _http_outcome(reply)

    message = pb.ModelInferRequest(model_name=model, model_version=version)
    for i, name in enumerate(("INPUT0", "INPUT1")):
        tensor = message.inputs.add(name=name, datatype="FP32", shape=list(shape))
        if i == 0 and input_params is not None:
            for key, value in input_params.items():
                set_param(tensor.parameters[key], value)
        else:
            message.raw_input_contents.append(ONES.tobytes())
    if extra_raw:
        message.raw_input_contents.append(b"\0" * 4)
    for name, params in outputs:
        out = message.outputs.add(name=name)
        for key, value in params.items():
            set_param(out.parameters[key], value)
    return over_http, _grpc_outcome(stub.ModelInfer, message)


INFER_CASES = [
    # (label, request, HTTP status, message fragment)
    ("classification negative", {"outputs": [("OUTPUT0", {"classification": -1})]}, 400,
     "invalid value for 'classification' parameter, expected >= 0"),
    ("classification a string", {"outputs": [("OUTPUT0", {"classification": "3"})]}, 400,
     "invalid value for 'classification' parameter, expected >= 0"),
    ("binary_data a string", {"outputs": [("OUTPUT0", {"binary_data": "yes"})]}, 400,
     "Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean"),
    ("region and classification", {"outputs": [("OUTPUT0", {"shared_memory_region": "parity", "shared_memory_byte_size": 8, "classification": 2})]},
     400, "Output can't set both 'shared_memory_region' and 'classification'"),
    ("offset without region", {"outputs": [("OUTPUT0", {"shared_memory_offset": 0})]}, 400, "'shared_memory_region' must be specified along with"),
    ("output region without size", {"outputs": [("OUTPUT0", {"shared_memory_region": "parity"})]}, 400, "'shared_memory_byte_size' must be specified"),
    ("output region unknown", {"outputs": [("OUTPUT0", {"shared_memory_region": "nope", "shared_memory_byte_size": 16})]}, 404, "Unable to find shared memory region: 'nope'"),
    ("output region too small", {"outputs": [("OUTPUT0", {"shared_memory_region": "parity", "shared_memory_byte_size": 8})]}, 400, "should be at least 16 bytes"),
    ("input region without size", {"input_params": {"shared_memory_region": "parity"}}, 400, "'shared_memory_byte_size' must be specified"),
    ("input region unknown", {"input_params": {"shared_memory_region": "nope", "shared_memory_byte_size": 16}}, 404, "Unable to find shared memory region: 'nope'"),
    ("input beyond its region", {"input_params": {"shared_memory_region": "parity", "shared_memory_byte_size": 16}}, 400, "Invalid offset + byte size"),
    ("additional input data", {"extra_raw": True}, 400, "unexpected additional input data for model 'add_sub'"),
    ("negative dimension", {"shape": (-4,)}, 400, "unexpected negative dimension in shape of input 'INPUT0'"),
    ("version absent", {"version": "7"}, 404, "'add_sub' version 7 is not found"),
]


@pytest.mark.parametrize("label,kwargs,status,fragment", INFER_CASES, ids=[c[0] for c in INFER_CASES])
def test_infer_rules_answer_alike(http, stub, region, label, kwargs, status, fragment):
    over_http, over_grpc = _both(http, stub, **kwargs)
    assert over_http[0] == status, over_http
    assert over_grpc == (GRPC_STATUS[status], over_http[1]), (over_http, over_grpc)
    assert fragment in over_http[1]


@pytest.mark.parametrize("version,message", [
    ("abc", "failed to get model version from specified version string 'abc'"),
    ("-1", "invalid model version specified '-1'"),
])
def test_a_version_that_is_not_a_number_is_refused_over_grpc_and_unrouted_over_http(http, stub, version, message):
    over_http, over_grpc = _both(http, stub, version=version)
    assert over_http == (404, "Not Found")  # Triton's HTTP routes take digits only
    assert over_grpc[0] == "INVALID_ARGUMENT" and message in over_grpc[1]


def test_latest_names_the_newest_version_over_both(http, stub):
    assert _both(http, stub, version="latest") == ((200, None), ("OK", None))


def test_decoupled_refusal_names_the_endpoint(http, stub):
    """The one rule whose text differs: Triton's refusal names the endpoint."""
    over_http, over_grpc = _both(http, stub, model="repeat")
    assert over_http == (501, "HTTP end point doesn't support models with decoupled transaction policy")
    assert over_grpc == ("UNIMPLEMENTED", "ModelInfer RPC doesn't support models with decoupled transaction policy")


def _load_both(http, stub, name, http_params, grpc_params, repository=""):
    prefix = f"/v2/repository/{repository}" if repository else "/v2/repository"
    reply = http.post(f"{prefix}/models/{name}/load", json={"parameters": http_params})
    over_http = _http_outcome(reply)
    request = pb.RepositoryModelLoadRequest(model_name=name, repository_name=repository)
    for key, (kind, value) in grpc_params.items():
        setattr(request.parameters[key], kind, value)
    return over_http, _grpc_outcome(stub.RepositoryModelLoad, request)


LOAD_CASES = [
    ("unknown parameter", "add_sub", {"colour": "red"}, {"colour": ("string_param", "red")}, "", 400,
     "unrecognized load parameter 'colour'."),
    ("config not a string", "add_sub", {"config": 5}, {"config": ("int64_param", 5)}, "", 400,
     "invalid value type for load parameter 'config', expected string_param."),
    ("file not bytes", "add_sub", {"config": "{}", "file:1/model.py": 5}, {"config": ("string_param", "{}"), "file:1/model.py": ("int64_param", 5)}, "", 400,
     "invalid value type for load parameter 'file:1/model.py', expected bytes_param."),
    ("unknown model", "no_such_model", {}, {}, "", 404, "failed to load 'no_such_model', failed to poll from model repository"),
    ("repository named", "add_sub", {}, {}, "elsewhere", 501, "'repository_name' specification is not supported"),
]


@pytest.mark.parametrize("label,name,http_params,grpc_params,repository,status,message", LOAD_CASES, ids=[c[0] for c in LOAD_CASES])
def test_load_rules_answer_alike(http, stub, label, name, http_params, grpc_params, repository, status, message):
    over_http, over_grpc = _load_both(http, stub, name, http_params, grpc_params, repository)
    assert over_http == (status, message)
    assert over_grpc == (GRPC_STATUS[status], message)


def test_settings_rules_answer_alike(http, stub):
    reply = http.post("/v2/trace/setting", json={"trace_level": ["EVIL"]})
    request = pb.TraceSettingRequest()
    request.settings["trace_level"].value.append("EVIL")
    with pytest.raises(grpc.RpcError) as info:
        stub.TraceSetting(request, timeout=60)
    assert (reply.status_code, reply.json()["error"]) == (400, info.value.details())
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    reply = http.post("/v2/logging", json={"log_format": "xml"})
    request = pb.LogSettingsRequest()
    request.settings["log_format"].string_param = "xml"
    with pytest.raises(grpc.RpcError) as info:
        stub.LogSettings(request, timeout=60)
    # One rule, each protocol in its Triton's words: the HTTP frontend names the flag.
    assert (reply.status_code, reply.json()["error"]) == (400, "invalid argument for --log_format, got: xml")
    assert info.value.details() == "invalid argument for log_format, got: xml"
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT

"""`--http-header-forward-pattern` and `--grpc-header-forward-pattern`: request headers (HTTP) and
metadata (gRPC) whose names match become request parameters the model reads; the match ignores
case as Triton's does unless the pattern starts with `(?-i)`; a reserved name is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.e2e import ext_models
from tests.e2e.ext_models import IN_PROCESS
from tests.helpers import Server, write_model

HEADERS = {"header_1": "value_1", "my_header_1": "my_value_1", "my_header_2": 'a "quoted" value\\ '}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    write_model(repo, "params", ext_models.PARAMS_CONFIG.replace("{name}", "params") + IN_PROCESS, ext_models.PARAMS)
    return repo


def _parameters(module, client, **options) -> dict:
    tensor = module.InferInput("INPUT0", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], dtype=np.int32))
    result = client.infer("params", [tensor], **options)
    return json.loads(result.as_numpy("OUTPUT0")[0])


def test_matching_headers_and_metadata_become_parameters(repo):
    with Server(repo, ["--http-header-forward-pattern", "MY_HEADER.*",
                       "--grpc-header-forward-pattern", "MY_HEADER.*"]) as server:
        for module, client in ((httpclient, httpclient.InferenceServerClient(server.http_url)),
                               (grpcclient, grpcclient.InferenceServerClient(server.grpc_url))):
            seen = _parameters(module, client, headers=dict(HEADERS), parameters={"mine": 1})  # clients add to it
            assert seen == {"mine": 1, "my_header_1": "my_value_1", "my_header_2": 'a "quoted" value\\ '}, module


def test_a_pattern_can_ask_for_case(repo):
    with Server(repo, ["--grpc-header-forward-pattern", "(?-i)MY_HEADER.*"]) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)  # gRPC metadata keys are lower case
        assert _parameters(grpcclient, client, headers=dict(HEADERS)) == {}


def test_a_reserved_name_is_refused(repo):
    with Server(repo, ["--http-header-forward-pattern", ".*", "--grpc-header-forward-pattern", ".*"]) as server:
        for module, client in ((httpclient, httpclient.InferenceServerClient(server.http_url)),
                               (grpcclient, grpcclient.InferenceServerClient(server.grpc_url))):
            for name in ("priority", "sequence_id", "triton_anything"):
                with pytest.raises(InferenceServerException) as info:
                    _parameters(module, client, headers={name: "1"})
                assert f"Header '{name}' is reserved for Triton usage" in info.value.message()
                assert info.value.status() in ("400", "StatusCode.INVALID_ARGUMENT")

"""Model life-cycle rules as Triton's QA suite (L0_lifecycle) checks them: a load is all or
nothing across versions, an ensemble goes when a model it runs is unloaded, a repository path
given twice is one repository, config overrides are read as leniently as Triton reads them, and
the log lines its drivers grep for."""

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

ENSEMBLE = """
name: "twice"
platform: "ensemble"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling { step [ { model_name: "identity" model_version: -1
  input_map { key: "INPUT0" value: "IN" } output_map { key: "OUTPUT0" value: "OUT" } } ] }
"""


def _identity(repo, name: str, versions=(1,), policy: str = "") -> None:
    config = ext_models.IDENTITY_CONFIG.format(name=name, dtype="TYPE_FP32", max_batch=0) + IN_PROCESS + policy
    for version in versions:
        write_model(repo, name, config, ext_models.IDENTITY, version=version)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    _identity(repo, "identity")
    write_model(repo, "twice", ENSEMBLE)
    # Version 1 loads, version 3 cannot: the load fails whole.
    _identity(repo, "half", versions=(1, 3), policy="version_policy { all { } }\n")
    (repo / "half" / "3" / "model.py").write_text("def broken(:\n")
    # Folders that are not versions, with Triton's warnings.
    _identity(repo, "odd_folders")
    (repo / "odd_folders" / "003").mkdir()
    (repo / "odd_folders" / "abc").mkdir()
    return repo


@pytest.fixture(scope="module")
def server(repo):
    # The same repository twice: one repository, not every model in "two repositories".
    args = ["--model-repository", str(repo), "--model-control-mode=explicit", "--load-model=*",
            "--exit-on-error=false", "--strict-readiness=false"]
    with Server(repo, args).start(wait_for="live") as running:
        yield running


def _index(client) -> dict[tuple[str, str], dict]:
    return {(row["name"], row.get("version", "")): row for row in client.get_model_repository_index()}


def test_a_version_that_fails_fails_the_whole_load(server):
    client = httpclient.InferenceServerClient(server.http_url)
    index = _index(client)
    assert index[("half", "3")]["state"] == "UNAVAILABLE" and "SyntaxError" in index[("half", "3")]["reason"]
    assert index[("half", "1")] == {"name": "half", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}
    assert not client.is_model_ready("half", "1") and not client.is_model_ready("half")
    assert "failed to load 'half'" in server.log()
    assert "successfully loaded 'half'" not in server.log()


def test_one_load_is_logged_once_and_odd_folders_are_named(server):
    log = server.log()
    assert log.count("successfully loaded 'odd_folders'") == 1
    assert "ignore version directory '003' which contains leading zeros in its directory name" in log
    assert "ignore version directory 'abc' which fails to convert to integral number" in log


def test_a_model_given_twice_is_one_model(server):
    client = httpclient.InferenceServerClient(server.http_url)
    assert client.is_model_ready("identity")
    assert "two or more repositories" not in json.dumps(client.get_model_repository_index())


def test_unloading_a_model_unloads_the_ensembles_that_run_it(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    assert client.is_model_ready("twice")
    client.unload_model("identity")
    assert not client.is_model_ready("identity") and not client.is_model_ready("twice")
    assert {"name": "twice", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"} in \
        httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
    client.load_model("twice")  # loads what it runs again
    assert client.is_model_ready("twice") and client.is_model_ready("identity")


def test_a_config_override_is_read_as_leniently_as_triton_reads_it(server):
    """One object where a list is due, enum names in any case (Triton's QA suite sends these)."""
    client = httpclient.InferenceServerClient(server.http_url)
    config = {"name": "identity", "backend": "python", "max_batch_size": 0,
              "input": {"name": "INPUT0", "data_type": "type_fp32", "dims": [-1]},
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
              "instance_group": {"kind": "kind_cpu", "count": 2},
              "parameters": {"execution_mode": {"string_value": "in_process"}}}
    client.load_model("identity", config=json.dumps(config))
    assert client.get_model_config("identity")["instance_group"][0]["count"] == 2
    tensor = httpclient.InferInput("INPUT0", [2], "FP32")
    tensor.set_data_from_numpy(np.array([1, 2], dtype=np.float32))
    assert client.infer("identity", [tensor]).as_numpy("OUTPUT0").tolist() == [1, 2]
    # A load without a config keeps the one given before (and reloads nothing); an unload forgets it.
    loads = server.log().count("successfully loaded 'identity'")
    client.load_model("identity")
    assert client.get_model_config("identity")["instance_group"][0]["count"] == 2
    assert server.log().count("successfully loaded 'identity'") == loads
    with pytest.raises(InferenceServerException, match="must be a JSON object"):
        client.load_model("identity", config="[1]")
    client.unload_model("identity")
    client.load_model("identity")
    assert client.get_model_config("identity")["instance_group"][0]["count"] == 1


def test_a_missing_model_is_logged_in_tritons_words(server):
    client = httpclient.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException, match="failed to poll from model repository"):
        client.load_model("does-not-exist")
    assert "failed to poll model 'does-not-exist': model not found in any model repository." in server.log()

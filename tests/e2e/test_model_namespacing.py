"""`--model-namespacing`: two repositories with a model of the same name, each with an ensemble
that runs it. Each ensemble runs its own repository's model, the shared name alone is refused as
ambiguous, a composing model that leaves one repository is found in the other and found at home
again when it comes back, and the metrics carry each model's repository as `namespace`."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.hardening.oracle import wait_until
from tests.helpers import Server

X = np.arange(16, dtype=np.int32)
Y = np.full(16, 3, dtype=np.int32)
ADD_FIRST = {"OUTPUT0": X + Y, "OUTPUT1": X - Y}
SUB_FIRST = {"OUTPUT0": X - Y, "OUTPUT1": X + Y}

IO = """
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
"""

COMPOSING_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils

ADD_FIRST = {add_first}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            first, second = (a + b, a - b) if ADD_FIRST else (a - b, a + b)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", first.astype(np.int32)),
                pb_utils.Tensor("OUTPUT1", second.astype(np.int32)),
            ]))
        return responses
"""

ENSEMBLE_STEP = """
ensemble_scheduling { step [ {
  model_name: "shared_model"
  model_version: -1
  input_map { key: "INPUT0" value: "INPUT0" }
  input_map { key: "INPUT1" value: "INPUT1" }
  output_map { key: "OUTPUT0" value: "OUTPUT0" }
  output_map { key: "OUTPUT1" value: "OUTPUT1" }
} ] }
"""


def _repository(root: Path, ensemble: str, add_first: bool) -> Path:
    composing = root / "shared_model"
    (composing / "1").mkdir(parents=True)
    (composing / "config.pbtxt").write_text(
        'name: "shared_model"\nbackend: "python"\nmax_batch_size: 0\n' + IO
        + 'parameters { key: "execution_mode" value { string_value: "in_process" } }\n'
    )
    (composing / "1" / "model.py").write_text(COMPOSING_MODEL.format(add_first=add_first))
    (root / ensemble / "1").mkdir(parents=True)
    (root / ensemble / "config.pbtxt").write_text(
        f'name: "{ensemble}"\nplatform: "ensemble"\nmax_batch_size: 0\n' + IO + ENSEMBLE_STEP
    )
    return root


@pytest.fixture
def repositories(tmp_path: Path) -> tuple[Path, Path]:
    return (_repository(tmp_path / "addsub_repo", "ensemble_addsub", True),
            _repository(tmp_path / "subadd_repo", "ensemble_subadd", False))


def _server(repositories: tuple[Path, Path], *args: str) -> Server:
    first, second = repositories
    return Server(first, ["--model-repository", str(second), "--model-namespacing=true", *args])


def _answer(client, protocol, model: str) -> dict[str, list[int]]:
    inputs = [protocol.InferInput("INPUT0", [16], "INT32"), protocol.InferInput("INPUT1", [16], "INT32")]
    inputs[0].set_data_from_numpy(X)
    inputs[1].set_data_from_numpy(Y)
    result = client.infer(model, inputs)
    return {name: result.as_numpy(name).tolist() for name in ("OUTPUT0", "OUTPUT1")}


def _expect(semantics: dict[str, np.ndarray]) -> dict[str, list[int]]:
    return {name: value.tolist() for name, value in semantics.items()}


def _ambiguous(client, protocol) -> str:
    with pytest.raises(InferenceServerException) as info:
        _answer(client, protocol, "shared_model")
    return f"{info.value.status()}: {info.value.message()}"


def test_each_ensemble_runs_its_own_repositorys_model_and_the_shared_name_is_ambiguous(repositories):
    with _server(repositories).start(wait_for="ready") as server:
        http = httpclient.InferenceServerClient(server.http_url)
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        for client, protocol in ((http, httpclient), (grpc, grpcclient)):
            assert _answer(client, protocol, "ensemble_addsub") == _expect(ADD_FIRST)
            assert _answer(client, protocol, "ensemble_subadd") == _expect(SUB_FIRST)
        assert _ambiguous(http, httpclient) == (
            "400: There are 2 identifiers of model 'shared_model' in global map, model namespace must be "
            "provided to resolve ambiguity."
        )
        assert _ambiguous(grpc, grpcclient).startswith("StatusCode.INVALID_ARGUMENT: There are 2 identifiers")
        with pytest.raises(InferenceServerException, match="ambiguity"):
            http.get_model_metadata("shared_model")
        index = [row["name"] for row in http.get_model_repository_index()]
        assert index.count("shared_model") == 2 and "ensemble_addsub" in index

        metrics = requests.get(server.metrics_url, timeout=10).text
        first, second = repositories
        for repository in (first, second):
            line = f'nv_inference_count{{model="shared_model",namespace="{repository}",version="1"}} 2'
            assert line in metrics, metrics
        assert f'nv_inference_count{{model="ensemble_addsub",namespace="{first}",version="1"}} 2' in metrics


def test_a_composing_model_that_leaves_is_found_elsewhere_and_at_home_again(repositories, tmp_path):
    """Explicit mode: each load of an ensemble looks for its composing model again."""
    home = repositories[0] / "shared_model"
    away = tmp_path / "shared_model_away"
    shutil.move(home, away)
    with _server(repositories, "--model-control-mode=explicit").start(wait_for="ready") as server:
        http = httpclient.InferenceServerClient(server.http_url)
        http.load_model("ensemble_addsub")  # only the other repository has the model now
        assert _answer(http, httpclient, "ensemble_addsub") == _expect(SUB_FIRST)
        assert _answer(http, httpclient, "shared_model") == _expect(SUB_FIRST)  # one namespace: by name

        shutil.move(away, home)
        http.load_model("ensemble_addsub")  # unchanged itself, its own composing model is back
        assert _answer(http, httpclient, "ensemble_addsub") == _expect(ADD_FIRST)
        assert "ambiguity" in _ambiguous(http, httpclient)


def test_polling_follows_a_composing_model_out_of_its_repository_and_back(repositories, tmp_path):
    home = repositories[0] / "shared_model"
    away = tmp_path / "shared_model_away"
    with _server(repositories, "--model-control-mode=poll", "--repository-poll-secs=0.5").start(
        wait_for="ready"
    ) as server:
        http = httpclient.InferenceServerClient(server.http_url)
        assert _answer(http, httpclient, "ensemble_addsub") == _expect(ADD_FIRST)

        def answers(semantics: dict[str, np.ndarray]) -> bool:
            try:
                return _answer(http, httpclient, "ensemble_addsub") == _expect(semantics)
            except InferenceServerException:
                return False  # between the polls that unload and reload it

        shutil.move(home, away)
        wait_until(lambda: answers(SUB_FIRST))
        shutil.move(away, home)
        wait_until(lambda: answers(ADD_FIRST))
        assert _answer(http, httpclient, "ensemble_subadd") == _expect(SUB_FIRST)


def test_without_namespacing_the_shared_name_is_refused_and_metrics_have_no_namespace(repositories):
    first, second = repositories
    with Server(first, ["--model-repository", str(second), "--exit-on-error=false"]).start() as server:
        http = httpclient.InferenceServerClient(server.http_url)
        assert not http.is_model_ready("shared_model")
        assert "not unique across all model repositories" in server.log()
        assert 'namespace="' not in requests.get(server.metrics_url, timeout=10).text

"""Model repositories in S3 (moto's server): Triton's paths, poll and explicit mode, incomplete
uploads, and a store that goes away while models serve."""

from __future__ import annotations

import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import Server
from tests.storage.emulators import ADD_CONFIG, S3_ENV, add_model_files, write_tree

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)


def _infer(client: httpclient.InferenceServerClient, model: str) -> np.ndarray:
    x = np.arange(4, dtype=np.float32)
    inputs = [httpclient.InferInput("INPUT0", [4], "FP32")]
    inputs[0].set_data_from_numpy(x)
    return client.infer(model, inputs).as_numpy("OUTPUT0") - x


def _wait(predicate, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting until {what}")


def _states(client: httpclient.InferenceServerClient) -> dict[str, str]:
    return {row["name"]: row.get("state", "") for row in client.get_model_repository_index()}


def test_poll_mode_mixes_local_and_s3_sees_changes_and_survives_an_outage(moto_s3, tmp_path) -> None:
    moto_s3.client().create_bucket(Bucket="models")
    moto_s3.put("models", "repo", add_model_files("remote_add", 1))
    local = tmp_path / "local"
    write_tree(local, add_model_files("local_add", 10))
    url = f"s3://127.0.0.1:{moto_s3.port}/models/repo"
    args = ["--model-repository", str(local), "--model-control-mode", "poll", "--repository-poll-secs", "1"]
    with Server(url, args) as server:  # type: ignore[arg-type]
        client = httpclient.InferenceServerClient(server.http_url)
        _wait(lambda: client.is_server_ready(), "the server is ready")
        assert _infer(client, "remote_add").tolist() == [1] * 4
        assert _infer(client, "local_add").tolist() == [10] * 4

        # Half an upload: a config and no version yet is not a model to load.
        moto_s3.put("models", "repo", {"late/config.pbtxt": add_model_files("late", 3)["late/config.pbtxt"]})
        time.sleep(3)  # several polls
        assert _states(client).get("late", "") == ""  # listed at most, never loaded
        moto_s3.put("models", "repo", {"late/1/model.py": add_model_files("late", 3)["late/1/model.py"]})
        _wait(lambda: _states(client).get("late") == "READY", "the completed upload loads")
        assert _infer(client, "late").tolist() == [3] * 4

        # A changed object (new ETag) reloads the model.
        moto_s3.put("models", "repo", {"remote_add/1/model.py": add_model_files("remote_add", 2)["remote_add/1/model.py"]})
        _wait(lambda: _infer(client, "remote_add").tolist() == [2] * 4, "the changed model is reloaded")

        # A deleted model is unloaded, as a local one is.
        moto_s3.client().delete_object(Bucket="models", Key="repo/late/1/model.py")
        moto_s3.client().delete_object(Bucket="models", Key="repo/late/config.pbtxt")
        _wait(lambda: _states(client).get("late") == "UNAVAILABLE", "the deleted model is unloaded")

        # The store goes away: polls fail and are logged, and nothing that is loaded unloads.
        moto_s3.stop()
        _wait(lambda: "failed to poll model repository" in server.log(), "a failed poll is logged", 90)
        time.sleep(2)
        assert _states(client)["remote_add"] == "READY"
        assert _infer(client, "remote_add").tolist() == [2] * 4
        assert _infer(client, "local_add").tolist() == [10] * 4
        assert client.is_server_ready()


def test_explicit_load_fetches_the_current_objects_and_refuses_an_incomplete_model(moto_s3, tmp_path) -> None:
    moto_s3.client().create_bucket(Bucket="bucket")
    moto_s3.put("bucket", "", add_model_files("adder", 5))  # the repository is the bucket's root
    moto_s3.put("bucket", "", {"empty/config.pbtxt": ADD_CONFIG.format(name="empty").encode()})
    url = f"s3://127.0.0.1:{moto_s3.port}/bucket"
    with Server(url, ["--model-control-mode", "explicit"]) as server:  # type: ignore[arg-type]
        client = httpclient.InferenceServerClient(server.http_url)
        assert {"adder", "empty"} <= set(_states(client))  # listed before any is loaded
        client.load_model("adder")
        assert _infer(client, "adder").tolist() == [5] * 4
        moto_s3.put("bucket", "", {"adder/1/model.py": add_model_files("adder", 6)["adder/1/model.py"]})
        client.load_model("adder")
        assert _infer(client, "adder").tolist() == [6] * 4
        with pytest.raises(InferenceServerException, match="failed to poll from model repository"):
            client.load_model("empty")  # no version with files: incomplete, never loaded
        with pytest.raises(InferenceServerException, match="failed to poll from model repository"):
            client.load_model("missing")
        # A load while the store is down fails, and the loaded version keeps serving.
        moto_s3.stop()
        with pytest.raises(InferenceServerException, match="failed to poll from model repository"):
            client.load_model("adder")
        assert _infer(client, "adder").tolist() == [6] * 4


def test_malformed_and_unreachable_urls_are_refused_at_startup(tmp_path) -> None:
    import subprocess
    import sys

    from tests.helpers import ROOT, free_port, free_ports

    def serve(url: str) -> subprocess.CompletedProcess:
        ports = [str(port) for port in free_ports(3)]
        return subprocess.run(
            [sys.executable, "-m", "openinfer", "serve", "--model-repository", url, "--http-port", ports[0],
             "--grpc-port", ports[1], "--metrics-port", ports[2]],
            check=False, capture_output=True, text=True, cwd=ROOT, timeout=120,
        )

    result = serve("s3://")
    assert result.returncode != 0
    assert "names no bucket" in result.stderr
    nobody = f"s3://127.0.0.1:{free_port()}/bucket/repo"  # nothing listens there
    result = serve(nobody)
    assert result.returncode == 1
    assert f"model repository {nobody}" in result.stderr
    assert "failed to poll model repository" in result.stderr

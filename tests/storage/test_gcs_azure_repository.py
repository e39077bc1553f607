"""Model repositories in Google Cloud Storage and Azure Blob Storage, against emulators started
here: the model loads from its copy, a changed object reloads it, half an upload never loads."""

from __future__ import annotations

import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import Server
from tests.storage.emulators import Azurite, GcsEmulator, add_model_files, azurite_command

pytestmark = pytest.mark.timeout(240)


def _store(kind: str, tmp_path):
    if kind == "gs":
        pytest.importorskip("gcsfs", reason="gcsfs is not installed (the storage extra)")
        pytest.importorskip("gcp_storage_emulator", reason="gcp-storage-emulator is not installed (the test extra)")
        return GcsEmulator()
    pytest.importorskip("adlfs", reason="adlfs is not installed (the storage extra)")
    command = azurite_command()
    if command is None:
        pytest.skip("Azurite is not installed (npm install azurite; .ci/run installs it under .cache/azurite)")
    return Azurite(command, tmp_path / "azurite")


def _add(client: httpclient.InferenceServerClient, model: str) -> list[float]:
    x = np.zeros(4, dtype=np.float32)
    inputs = [httpclient.InferInput("INPUT0", [4], "FP32")]
    inputs[0].set_data_from_numpy(x)
    return client.infer(model, inputs).as_numpy("OUTPUT0").tolist()


def _until(predicate, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (OSError, ValueError, InferenceServerException):  # not there yet: ask again
            time.sleep(0.2)
            continue
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting until {what}")


@pytest.mark.parametrize("kind", ["gs", "as"])
def test_poll_mode_over_an_emulated_store(kind: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(kind, tmp_path)
    try:
        for key, value in store.env.items():
            monkeypatch.setenv(key, value)
        store.put(add_model_files("adder", 1))
        args = ["--model-control-mode", "poll", "--repository-poll-secs", "1"]
        with Server(store.url, args) as server:  # type: ignore[arg-type]
            client = httpclient.InferenceServerClient(server.http_url)
            _until(client.is_server_ready, "the server is ready")
            assert _add(client, "adder") == [1] * 4
            store.put({"late/config.pbtxt": add_model_files("late", 3)["late/config.pbtxt"]})
            time.sleep(3)
            assert not client.is_model_ready("late")  # a config alone is half an upload
            store.put({"late/1/model.py": add_model_files("late", 3)["late/1/model.py"]})
            _until(lambda: client.is_model_ready("late"), "the completed upload loads")
            store.put({"adder/1/model.py": add_model_files("adder", 2)["adder/1/model.py"]})
            _until(lambda: _add(client, "adder") == [2] * 4, "the changed model is reloaded")
    finally:
        store.stop()

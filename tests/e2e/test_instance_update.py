"""A new configuration that changes only `instance_group` changes the loaded model's instances in
place, as Triton does: new instances start, surplus ones finish their work and finalize, the
others are left alone, and the model serves throughout. Anything else reloads the model."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.hardening.oracle import wait_until
from tests.helpers import Server

MODEL = """
import os
import time

import triton_python_backend_utils as pb_utils

EVENTS = {events!r}


def _event(what):
    with open(EVENTS, "a") as out:
        out.write(what + "\\n")


class TritonPythonModel:
    def initialize(self, args):
        _event("init " + args["model_instance_name"])

    def execute(self, requests):
        time.sleep(0.002)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 2)])
                for r in requests]

    def finalize(self):
        _event("fini")
"""

HEAD = """name: "counted"
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""


def _write_config(model: Path, groups: str, extra: str = "") -> None:
    (model / "config.pbtxt").write_text(HEAD + f"instance_group [ {groups} ]\n" + extra)


def _counts(events: Path) -> tuple[int, int]:
    lines = events.read_text().splitlines() if events.exists() else []
    return sum(line.startswith("init") for line in lines), lines.count("fini")


@pytest.fixture
def counted(tmp_path: Path):
    events = tmp_path / "events.txt"
    model = tmp_path / "repo" / "counted"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(MODEL.format(events=str(events)))
    _write_config(model, "{ count: 3 kind: KIND_CPU }")
    with Server(tmp_path / "repo", ["--model-control-mode=explicit", "--load-model=counted"]).start(
        wait_for="ready"
    ) as server:
        yield server, model, events


class Callers:
    """Callers that never stop while the instances change: every answer must be right."""

    def __init__(self, server: Server, threads: int = 3) -> None:
        self.stop = threading.Event()
        self.answers = 0
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._call, args=(server.grpc_url,)) for _ in range(threads)]

    def _call(self, url: str) -> None:
        client = grpcclient.InferenceServerClient(url)
        tensor = grpcclient.InferInput("IN", [2], "FP32")
        tensor.set_data_from_numpy(np.array([1.5, -2.0], np.float32))
        while not self.stop.is_set():
            try:
                out = client.infer("counted", [tensor]).as_numpy("OUT").tolist()
                if out != [3.0, -4.0]:
                    self.errors.append(f"wrong answer {out}")
                self.answers += 1
            except InferenceServerException as exc:
                self.errors.append(exc.message())

    def __enter__(self) -> Callers:
        for thread in self.threads:
            thread.start()
        wait_until(lambda: self.answers > 10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


def _count_in_config(client: grpcclient.InferenceServerClient) -> list[int]:
    config = client.get_model_config("counted", as_json=True)["config"]
    return [group["count"] for group in config["instance_group"]]


def test_instances_are_added_and_removed_under_load_without_a_reload(counted):
    server, model, events = counted
    client = grpcclient.InferenceServerClient(server.grpc_url)
    assert _counts(events) == (3, 0)
    with Callers(server) as callers:
        _write_config(model, "{ count: 4 kind: KIND_CPU }")
        client.load_model("counted")
        assert _counts(events) == (4, 0)  # one more started; the three running ones untouched
        assert _count_in_config(client) == [4]
        _write_config(model, "{ count: 2 kind: KIND_CPU }")
        client.load_model("counted")
        assert _counts(events) == (4, 2)  # two finished their work and finalized
        answers_before = callers.answers
        wait_until(lambda: callers.answers > answers_before + 10)
    assert callers.errors == []
    assert client.is_model_ready("counted") and _count_in_config(client) == [2]


def test_regrouping_the_same_instances_or_rewriting_the_same_config_changes_nothing(counted):
    server, model, events = counted
    client = grpcclient.InferenceServerClient(server.grpc_url)
    _write_config(model, '{ name: "first" count: 1 kind: KIND_CPU }, { name: "rest" count: 2 kind: KIND_CPU }')
    client.load_model("counted")
    assert _counts(events) == (3, 0)
    assert _count_in_config(client) == [1, 2]
    _write_config(model, '{ name: "first" count: 1 kind: KIND_CPU }, { name: "rest" count: 2 kind: KIND_CPU }')
    client.load_model("counted")
    assert _counts(events) == (3, 0)


def test_a_config_sent_with_the_load_request_updates_instances_too(counted):
    server, _model, events = counted
    client = grpcclient.InferenceServerClient(server.grpc_url)
    config = client.get_model_config("counted", as_json=True)["config"]
    config["instance_group"][0]["count"] += 1
    client.load_model("counted", config=json.dumps(config))
    assert _counts(events) == (4, 0)


def test_any_other_change_reloads_every_instance(counted):
    server, model, events = counted
    client = grpcclient.InferenceServerClient(server.grpc_url)
    _write_config(model, "{ count: 2 kind: KIND_CPU }", 'parameters { key: "k" value { string_value: "v" } }\n')
    client.load_model("counted")
    wait_until(lambda: _counts(events) == (5, 3))  # a new copy with two; the old three finalize


def test_an_instance_taken_out_keeps_its_sequences_until_they_end(counted):
    server, model, events = counted
    client = grpcclient.InferenceServerClient(server.grpc_url)
    sequences = "sequence_batching { direct { } }\n"
    _write_config(model, "{ count: 3 kind: KIND_CPU }", sequences)
    client.load_model("counted")  # sequence batching is more than an instance change: a reload
    wait_until(lambda: _counts(events) == (6, 3))
    tensor = grpcclient.InferInput("IN", [2], "FP32")
    tensor.set_data_from_numpy(np.array([1.0, 2.0], np.float32))

    def step(sequence: int, **flags: bool) -> list[float]:
        return client.infer("counted", [tensor], sequence_id=sequence, **flags).as_numpy("OUT").tolist()

    assert step(1, sequence_start=True) == step(2, sequence_start=True) == [2.0, 4.0]
    # Another host policy: none of the three matches the one new instance.
    _write_config(model, '{ count: 1 kind: KIND_CPU host_policy: "elsewhere" }', sequences)
    client.load_model("counted")
    assert _counts(events)[0] == 7
    wait_until(lambda: _counts(events)[1] == 4)  # the instance without a sequence goes at once
    assert step(1) == step(2) == [2.0, 4.0]  # the other two keep theirs
    assert step(3, sequence_start=True) == [2.0, 4.0]  # a new one starts on the new instance
    assert _counts(events) == (7, 4)
    step(1, sequence_end=True)
    step(2, sequence_end=True)
    wait_until(lambda: _counts(events) == (7, 6))
    assert step(3, sequence_end=True) == [2.0, 4.0]


VERSIONED = """
import triton_python_backend_utils as pb_utils

EVENTS = {events!r}
ANSWER = {answer}


class TritonPythonModel:
    def initialize(self, args):
        with open(EVENTS, "a") as out:
            out.write("init v" + args["model_version"] + "\\n")

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 0 + ANSWER)])
                for r in requests]
"""


def test_a_reload_keeps_the_versions_whose_files_did_not_change(tmp_path):
    events = tmp_path / "events.txt"
    model = tmp_path / "repo" / "counted"
    for version in (1, 2):
        (model / str(version)).mkdir(parents=True)
        (model / str(version) / "model.py").write_text(VERSIONED.format(events=str(events), answer=version))
    policy_all = "version_policy { all { } }\n"
    _write_config(model, "{ count: 1 kind: KIND_CPU }", policy_all)
    with Server(tmp_path / "repo", ["--model-control-mode=explicit", "--load-model=counted"]).start(
        wait_for="ready"
    ) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        tensor = grpcclient.InferInput("IN", [2], "FP32")
        tensor.set_data_from_numpy(np.zeros(2, np.float32))

        def answer(version: str) -> float:
            return float(client.infer("counted", [tensor], model_version=version).as_numpy("OUT")[0])

        def started() -> list[str]:
            return sorted(events.read_text().split("\n")[:-1])

        assert started() == ["init v1", "init v2"]
        (model / "2" / "model.py").write_text(VERSIONED.format(events=str(events), answer=20))
        client.load_model("counted")
        assert started() == ["init v1", "init v2", "init v2"]  # version 1 kept
        assert (answer("1"), answer("2")) == (1.0, 20.0)

        _write_config(model, "{ count: 2 kind: KIND_CPU }", policy_all)  # instances only
        client.load_model("counted")
        assert started() == ["init v1", "init v1", "init v2", "init v2", "init v2"]  # one more each

        _write_config(model, "{ count: 2 kind: KIND_CPU }", "version_policy { latest { num_versions: 1 } }\n")
        client.load_model("counted")
        assert len(started()) == 5  # version 2 kept, version 1 unloaded
        assert answer("2") == 20.0
        with pytest.raises(InferenceServerException):
            answer("1")
        assert client.get_model_config("counted", as_json=True)["config"]["version_policy"] == {
            "latest": {"num_versions": 1}
        }

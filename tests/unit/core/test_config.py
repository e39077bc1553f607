"""Unit tests for config.pbtxt parsing, Triton's normalisation and the config JSON form."""

from __future__ import annotations

import pytest

from openinfer.core import config as configs
from openinfer.core.errors import InvalidArgumentError

TEXT = """
name: "m"
backend: "python"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1, 3 ] } ]
output [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] label_filename: "labels.txt" } ]
dynamic_batching { max_queue_delay_microseconds: 100 }
"""


def test_parse_normalise_and_json():
    config = configs.parse_config_text(TEXT)
    configs.normalize(config, "m", "python")
    data = configs.config_to_json(config)
    assert data["name"] == "m" and data["max_batch_size"] == 8
    assert data["input"][0]["dims"] == [-1, 3]  # numbers, not protobuf's int64 strings
    assert data["input"][0]["data_type"] == "TYPE_FP32"
    assert data["output"][0]["label_filename"] == "labels.txt"
    assert data["version_policy"] == {"latest": {"num_versions": 1}}
    assert data["dynamic_batching"]["preferred_batch_size"] == [8]
    assert data["dynamic_batching"]["max_queue_delay_microseconds"] == 100
    assert data["instance_group"][0]["name"] == "m"  # the group Triton adds bears the model's name
    assert data["instance_group"][0]["kind"] == "KIND_CPU" and data["instance_group"][0]["count"] == 1
    assert data["platform"] == "" and data["parameters"] == {}  # defaults printed, as Triton does
    assert configs.protocol_dims(config, config.input[0]) == [-1, -1, 3]


def test_onnxruntime_cpu_groups_default_to_two_instances():
    config = configs.parse_config_text('platform: "onnxruntime_onnx"')
    configs.normalize(config, "o", "onnxruntime")
    assert config.instance_group[0].count == 2


def test_errors_name_the_problem():
    with pytest.raises(InvalidArgumentError, match="failed to parse model configuration"):
        configs.parse_config_text("max_batch_size: banana")
    config = configs.parse_config_text('name: "other"')
    with pytest.raises(InvalidArgumentError, match="unexpected directory name 'm' for model 'other'"):
        configs.normalize(config, "m", "python")
    with pytest.raises(InvalidArgumentError, match="Invalid config override"):
        configs.parse_config_json('{"no_such_field": 1}')


def test_backend_resolution(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"")
    assert configs.resolve_backend(configs.parse_config_text('platform: "pytorch_libtorch"'), None) == "pytorch"
    assert configs.resolve_backend(configs.parse_config_text(""), tmp_path) == "onnxruntime"


@pytest.mark.parametrize(
    ("text", "backend", "expected"),
    [
        # (backend, platform, default_model_filename) after Triton's server-side completion
        ('backend: "onnxruntime"', "onnxruntime", ("onnxruntime", "onnxruntime_onnx", "model.onnx")),
        ('platform: "onnxruntime_onnx"', "onnxruntime", ("onnxruntime", "onnxruntime_onnx", "model.onnx")),
        ("", "onnxruntime", ("onnxruntime", "onnxruntime_onnx", "model.onnx")),
        ('backend: "pytorch"', "pytorch", ("pytorch", "pytorch_libtorch", "model.pt")),
        ('platform: "pytorch_libtorch"', "pytorch", ("pytorch", "pytorch_libtorch", "")),
        ('backend: "python"', "python", ("python", "", "model.py")),
        ('backend: "onnxruntime" default_model_filename: "m.onnx"', "onnxruntime", ("onnxruntime", "onnxruntime_onnx", "m.onnx")),
        ('platform: "ensemble"', "ensemble", ("", "ensemble", "")),
        ('backend: "transformers"', "transformers", ("transformers", "", "")),
    ],
)
def test_backend_fields_are_completed_as_triton_does(text, backend, expected):
    config = configs.parse_config_text(text)
    configs.normalize(config, "m", backend)
    assert (config.backend, config.platform, config.default_model_filename) == expected

"""Unit tests for the datatype table, BYTES framing and the HTTP JSON/binary codec (no sockets)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from openinfer.core import datatypes
from openinfer.core.errors import InternalError, InvalidArgumentError
from openinfer.core.types import InferResponse, RequestedOutput, Tensor
from openinfer.frontends.http.codec import decode_request, encode_response


def test_bytes_round_trip_and_framing():
    array = np.array([b"ab", b"", "\u00e9".encode()], dtype=np.object_)
    wire = datatypes.serialize_bytes(array)
    assert wire == struct.pack("<I", 2) + b"ab" + struct.pack("<I", 0) + struct.pack("<I", 2) + "\u00e9".encode()
    assert datatypes.deserialize_bytes(wire, 3).tolist() == array.tolist()


@pytest.mark.parametrize(
    "wire, count, message",
    [
        (b"\x05\x00\x00\x00ab", 1, "incomplete string"),
        (b"\x01\x00", 1, "incomplete string length indicator"),
        (b"\x01\x00\x00\x00a\x00\x00\x00\x00", 1, "unexpected number of string elements"),
    ],
)
def test_bytes_prefixes_that_lie_are_rejected(wire, count, message):
    with pytest.raises(InvalidArgumentError, match=message):
        datatypes.deserialize_bytes(wire, count, name="x")


def test_fixed_width_views_are_zero_copy_and_size_checked():
    raw = bytearray(np.arange(6, dtype=np.int32).tobytes())
    view = datatypes.from_wire_bytes(memoryview(raw), "INT32", (2, 3))
    raw[0] = 9
    assert view[0, 0] == 9  # a view over the request bytes, not a copy
    with pytest.raises(InvalidArgumentError, match="Expected 24, got 20"):
        datatypes.from_wire_bytes(bytes(20), "INT32", (2, 3), name="x", model="m")


def test_config_names_map_both_ways():
    assert datatypes.config_to_protocol("TYPE_STRING") == "BYTES"
    assert datatypes.lookup("BF16").size == 2
    with pytest.raises(InvalidArgumentError):
        datatypes.lookup("STRING")


def test_json_request_nested_flat_and_binary_mixed():
    header = json.dumps(
        {
            "id": "7",
            "parameters": {"binary_data_output": True, "sequence_id": 5, "sequence_start": True, "x": 1.5},
            "inputs": [
                {"name": "A", "datatype": "INT64", "shape": [2, 2], "data": [[1, 2], [3, 4]]},
                {"name": "B", "datatype": "FP32", "shape": [3], "parameters": {"binary_data_size": 12}},
                {"name": "C", "datatype": "BYTES", "shape": [1], "data": ["hi"]},
            ],
            "outputs": [{"name": "Y", "parameters": {"classification": 2}}],
        }
    ).encode()
    body = header + np.array([1, 2, 3], dtype=np.float32).tobytes()
    request, binary_default = decode_request(body, len(header), "m", "")
    assert binary_default is True
    assert request.id == "7" and request.sequence_id == 5 and request.sequence_start
    assert request.parameters == {"x": 1.5}
    a, b, c = request.inputs
    assert a.data.tolist() == [[1, 2], [3, 4]] and a.data.dtype == np.int64
    assert b.data.tolist() == [1, 2, 3]
    assert c.data.tolist() == [b"hi"]
    assert request.outputs[0].classification == 2


@pytest.mark.parametrize(
    "doc, error, message",
    [
        ({"inputs": [{"name": "A", "datatype": "BOOL", "shape": [1], "data": [1]}]}, InvalidArgumentError, "non-boolean"),
        ({"inputs": [{"name": "A", "datatype": "INT32", "shape": [1], "data": [1.5]}]}, InvalidArgumentError, "non-integer"),
        ({"inputs": [{"name": "A", "datatype": "FP16", "shape": [1], "data": [1]}]}, InvalidArgumentError, "FP16 data via JSON"),
        ({"inputs": [{"name": "A", "datatype": "FP32", "shape": [-1], "data": [1]}]}, InternalError, "non-unsigned-integer"),
        ({"inputs": [{"name": "A", "datatype": "FP32", "shape": [2]}]}, InvalidArgumentError, "no field is set"),
        ({"inputs": [], "parameters": {"triton_x": 1}}, InvalidArgumentError, "reserved for Triton"),
        ({"inputs": [{"name": "A", "datatype": "INT32", "shape": [1, 0], "data": [None]}]}, InvalidArgumentError, "Shape"),
        ({"inputs": [{"name": "A", "datatype": "INT32", "shape": [2], "data": [1, None]}]}, InvalidArgumentError, "non-integer"),
    ],
)
def test_bad_json_requests(doc, error, message):
    with pytest.raises(error, match=message):
        decode_request(json.dumps(doc).encode(), None, "m", "")


def test_binary_sizes_must_add_up():
    header = json.dumps({"inputs": [{"name": "A", "datatype": "INT8", "shape": [2], "parameters": {"binary_data_size": 2}}]}).encode()
    with pytest.raises(InvalidArgumentError, match="unexpected additional input data"):
        decode_request(header + b"abc", len(header), "m", "")
    with pytest.raises(InvalidArgumentError, match="expecting 2 additional bytes"):
        decode_request(header + b"a", len(header), "m", "")


def test_response_json_and_binary():
    response = InferResponse(
        "m", "1", "rid",
        [Tensor("J", "INT32", (2,), np.array([1, 2], dtype=np.int32)),
         Tensor("B", "FP32", (2,), np.array([0.5, 1.5], dtype=np.float32))],
        requested={"J": RequestedOutput("J", binary=False), "B": RequestedOutput("B", binary=True)},
    )
    body, json_length = encode_response(response, False)
    doc = json.loads(body[:json_length])
    assert doc == {
        "id": "rid", "model_name": "m", "model_version": "1",
        "outputs": [
            {"name": "J", "datatype": "INT32", "shape": [2], "data": [1, 2]},
            {"name": "B", "datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 8}},
        ],
    }
    assert np.frombuffer(body[json_length:], dtype=np.float32).tolist() == [0.5, 1.5]
    response.requested = None
    body, json_length = encode_response(response, False)
    assert json_length is None and json.loads(body)["outputs"][1]["data"] == [0.5, 1.5]

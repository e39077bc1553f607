"""Unit tests for the datatype table, BYTES framing and the HTTP JSON/binary codec (no sockets)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from openinfer.core import datatypes
from openinfer.core.errors import InvalidArgumentError
from openinfer.core.types import InferResponse, RequestedOutput, Tensor
from openinfer.frontends.http import bulk_json
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


BAD_DOCS = [
        ({"inputs": [{"name": "A", "datatype": "BOOL", "shape": [1], "data": [1]}]}, InvalidArgumentError, "non-boolean"),
        ({"inputs": [{"name": "A", "datatype": "INT32", "shape": [1], "data": [1.5]}]}, InvalidArgumentError, "non-integer"),
        ({"inputs": [{"name": "A", "datatype": "FP16", "shape": [1], "data": [1]}]}, InvalidArgumentError, "FP16 data via JSON"),
        ({"inputs": [{"name": "A", "datatype": "FP32", "shape": [-1], "data": [1]}]}, InvalidArgumentError, "negative dimension"),
        ({"inputs": [{"name": "A", "datatype": "FP32", "shape": [2]}]}, InvalidArgumentError, "no field is set"),
        ({"inputs": [], "parameters": {"triton_x": 1}}, InvalidArgumentError, "reserved for Triton"),
        ({"inputs": [{"name": "A", "datatype": "INT32", "shape": [1, 0], "data": [1, None]}]}, InvalidArgumentError, "Shape"),
        ({"inputs": [{"name": "A", "datatype": "INT32", "shape": [2], "data": [1, None]}]}, InvalidArgumentError, "non-integer"),
    ]


@pytest.mark.parametrize("doc, error, message", BAD_DOCS)
def test_bad_json_requests(doc, error, message):
    with pytest.raises(error, match=message):
        decode_request(json.dumps(doc).encode(), None, "m", "")


def _padded(doc: dict) -> bytes:
    """The same request made large enough for the bulk parser (padding in a pass-through parameter)."""
    doc = dict(doc, parameters={**doc.get("parameters", {}), "padding": "x" * bulk_json.MIN_BODY_BYTES})
    return json.dumps(doc).encode()


@pytest.mark.parametrize("doc, error, message", BAD_DOCS)
def test_bad_large_json_requests_fail_alike(doc, error, message):
    with pytest.raises(error, match=message):
        decode_request(_padded(doc), None, "m", "")


@pytest.mark.parametrize(
    "datatype, values",
    [
        ("FP32", np.random.default_rng(0).random(20000, dtype=np.float32).tolist()),
        ("FP64", [0.1, -2.5e300, 3, 7.25] * 5000),
        ("INT8", [-128, 127, 0, 5] * 5000),
        ("INT64", [-(2**63), 2**63 - 1, 0, 1] * 5000),
        ("UINT32", [0, 2**32 - 1, 7, 9] * 5000),
        ("UINT64", [0, 2**64 - 1, 2**63, 1] * 5000),
        ("BOOL", [True, False] * 10000),
        ("BYTES", ["ab", "c"] * 10000),
    ],
)
def test_large_bodies_decode_as_small_ones_do(monkeypatch, datatype, values):
    """The bulk parser yields the values and dtypes the ordinary parse does, nested or flat."""
    nested = [values[: len(values) // 2], values[len(values) // 2 :]]
    body = json.dumps(
        {"inputs": [
            {"name": "A", "datatype": datatype, "shape": [len(values)], "data": values},
            {"name": "B", "datatype": datatype, "shape": [2, len(values) // 2], "data": nested},
        ]}
    ).encode()
    parsed = bulk_json.parse(body)
    typed = datatype not in ("BOOL", "BYTES")  # numeric data skips Python objects altogether
    assert all(isinstance(item["data"], np.ndarray) == typed for item in parsed["inputs"])
    bulk, _ = decode_request(body, None, "m", "")
    monkeypatch.setattr(bulk_json, "MIN_BODY_BYTES", len(body) + 1)
    plain, _ = decode_request(body, None, "m", "")
    for got, want in zip(bulk.inputs, plain.inputs):
        assert got.data.dtype == want.data.dtype and got.data.shape == want.data.shape
        assert np.array_equal(got.data, want.data)


@pytest.mark.parametrize("count", [1, 5000])  # a small body, and a large one (bulk parser)
def test_nan_and_infinity_tokens_are_refused(count):
    values = ["NaN", "Infinity", "-Infinity", "1.5"] * count
    body = ('{"inputs":[{"name":"A","datatype":"FP32","shape":[%d],"data":[%s]}]}' % (4 * count, ",".join(values))).encode()
    with pytest.raises(InvalidArgumentError, match="'NaN' is not a JSON number"):
        decode_request(body, None, "m", "")


@pytest.mark.parametrize(
    "body",
    [b'{"id": "\\ud800", "inputs": []}', b'{"inputs": [], "id": "\xff"}', b"null", b"[]", b"3", b"",
     b"[" * 100_000 + b"]" * 100_000, b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [1], "data": [1e999]}]}'],
)
def test_bodies_that_are_not_strict_json_objects_are_the_clients_mistake(body):
    with pytest.raises(InvalidArgumentError):
        decode_request(body, None, "m", "")


def test_binary_sizes_must_add_up():
    header = json.dumps({"inputs": [{"name": "A", "datatype": "INT8", "shape": [2], "parameters": {"binary_data_size": 2}}]}).encode()
    with pytest.raises(InvalidArgumentError, match="unexpected additional input data"):
        decode_request(header + b"abc", len(header), "m", "")
    with pytest.raises(InvalidArgumentError, match="expecting 1 additional bytes"):
        decode_request(header + b"a", len(header), "m", "")


def test_response_json_and_binary():
    response = InferResponse(
        "m", "1", "rid",
        [Tensor("J", "INT32", (2,), np.array([1, 2], dtype=np.int32)),
         Tensor("B", "FP32", (2,), np.array([0.5, 1.5], dtype=np.float32))],
        requested={"J": RequestedOutput("J", binary=False), "B": RequestedOutput("B", binary=True)},
    )
    header, blobs, json_length = encode_response(response, False)
    assert json_length == len(header)
    doc = json.loads(header)
    assert doc == {
        "id": "rid", "model_name": "m", "model_version": "1",
        "outputs": [
            {"name": "J", "datatype": "INT32", "shape": [2], "data": [1, 2]},
            {"name": "B", "datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 8}},
        ],
    }
    assert np.frombuffer(b"".join(blobs), dtype=np.float32).tolist() == [0.5, 1.5]
    response.requested = None
    body, blobs, json_length = encode_response(response, False)
    assert json_length is None and not blobs and json.loads(body)["outputs"][1]["data"] == [0.5, 1.5]


def test_nonfinite_outputs_are_written_as_triton_writes_them():
    data = np.array([np.nan, np.inf, -np.inf, 0.5], dtype=np.float32)
    response = InferResponse(model_name="m", model_version="1", outputs=[Tensor("Y", "FP32", (4,), data)])
    body, _, _ = encode_response(response, False)
    assert b'"data":[NaN,Infinity,-Infinity,0.5]' in body
    finite = InferResponse(model_name="m", model_version="1", outputs=[Tensor("Y", "FP32", (1,), data[3:])])
    assert b'"data":[0.5]' in encode_response(finite, False)[0]


def test_nonfinite_values_in_a_large_output_are_written_too():
    data = np.zeros(20000, dtype=np.float32)
    data[-1] = np.nan
    response = InferResponse(model_name="m", model_version="1", outputs=[Tensor("Y", "FP32", (20000,), data)])
    body, _, _ = encode_response(response, False)
    assert body.endswith(b",0.0,NaN]}]}")

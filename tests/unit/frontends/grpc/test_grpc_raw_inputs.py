"""Large raw inputs read where they lie in the request's bytes: the same request upb parses."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from openinfer._proto import grpc_service_pb2 as pb
from openinfer.frontends.grpc import convert, raw_inputs


def _request(*arrays: np.ndarray, parameters: bool = True) -> pb.ModelInferRequest:
    message = pb.ModelInferRequest(model_name="identity", model_version="1", id="req-9")
    for i, array in enumerate(arrays):
        message.inputs.add(name=f"IN{i}", datatype="FP32", shape=array.shape)
        message.raw_input_contents.append(array.tobytes())
    message.outputs.add(name="OUT0")
    if parameters:
        message.parameters["priority"].uint64_param = 2
        message.inputs[0].parameters["note"].string_param = "x"
    return message


def _same_request(data: bytes) -> None:
    """`parse` reads `data` as upb does, and the core request is the same either way."""
    parsed, whole = raw_inputs.parse(data), pb.ModelInferRequest.FromString(data)
    assert isinstance(parsed, raw_inputs.RawInputsRequest)
    assert [bytes(raw) for raw in parsed.raw] == list(whole.raw_input_contents)
    assert not parsed.message.raw_input_contents
    rest = pb.ModelInferRequest()
    rest.CopyFrom(whole)
    del rest.raw_input_contents[:]
    assert parsed.message == rest
    assert parsed.model_name == whole.model_name and parsed.id == whole.id  # read through
    ours, theirs = convert.to_request(parsed), convert.to_request(whole)
    assert [t.name for t in ours.inputs] == [t.name for t in theirs.inputs]
    for mine, upbs in zip(ours.inputs, theirs.inputs):
        assert mine.shape == upbs.shape and mine.parameters == upbs.parameters
        np.testing.assert_array_equal(mine.data, upbs.data)
        assert mine.data.flags.aligned
    assert ours.parameters == theirs.parameters


@pytest.mark.parametrize("elements", [raw_inputs.SPLIT_FROM // 4, 65536, 1 << 20])  # varint widths
def test_a_large_request_is_the_request_upb_parses(elements):
    rng = np.random.default_rng(elements)
    data = _request(rng.random((1, elements), dtype=np.float32), rng.random((2, 3), dtype=np.float32)).SerializeToString()
    _same_request(data)


def test_fields_after_and_between_the_raw_inputs_are_read():
    """A parser merges fields in any order: raw entries first, names after, split in two."""
    big = np.arange(65536, dtype=np.float32)
    message = _request(big, big[:7])
    head = pb.ModelInferRequest(model_name=message.model_name)
    head.inputs.extend(message.inputs)
    tail = pb.ModelInferRequest(id=message.id, model_version=message.model_version)
    tail.outputs.extend(message.outputs)
    tail.parameters["priority"].uint64_param = 2
    raw = pb.ModelInferRequest()
    raw.raw_input_contents.extend(message.raw_input_contents)
    first, second = (pb.ModelInferRequest(), pb.ModelInferRequest())
    first.raw_input_contents.append(message.raw_input_contents[0])
    second.raw_input_contents.append(message.raw_input_contents[1])
    for pieces in ([raw, head, tail], [first, head, second, tail], [head, first, tail, second]):
        _same_request(b"".join(piece.SerializeToString() for piece in pieces))


def test_empty_raw_inputs_and_a_request_of_raw_inputs_only():
    message = pb.ModelInferRequest()
    message.raw_input_contents.extend([b"", b"\x01" * raw_inputs.SPLIT_FROM, b""])
    parsed = raw_inputs.parse(message.SerializeToString())
    assert [bytes(raw) for raw in parsed.raw] == list(message.raw_input_contents)
    assert parsed.message == pb.ModelInferRequest()


def test_small_requests_and_requests_without_raw_inputs_are_plain_messages():
    small = _request(np.ones(16, np.float32)).SerializeToString()
    assert type(raw_inputs.parse(small)) is pb.ModelInferRequest
    typed = pb.ModelInferRequest(model_name="m")
    typed.inputs.add(name="IN", datatype="FP32", shape=[65536]).contents.fp32_contents.extend([1.0] * 65536)
    parsed = raw_inputs.parse(typed.SerializeToString())
    assert type(parsed) is pb.ModelInferRequest and parsed == typed


_LARGE = _request(np.arange(8192, dtype=np.float32), np.ones(3, np.float32)).SerializeToString()


@settings(max_examples=300, deadline=None)
@given(
    cut=st.integers(0, len(_LARGE)),
    flips=st.lists(st.tuples(st.integers(0, len(_LARGE) - 1), st.integers(0, 255)), max_size=4),
    extra=st.binary(max_size=24),
)
def test_damaged_large_requests_fail_or_parse_exactly_as_upb(cut, flips, extra):
    data = bytearray(_LARGE)
    for position, value in flips:
        data[position] = value
    data = bytes(data[:cut]) + extra
    try:
        whole = pb.ModelInferRequest.FromString(data)
    except DecodeError:
        with pytest.raises(DecodeError):
            raw_inputs.parse(data)
        return
    parsed = raw_inputs.parse(data)
    if isinstance(parsed, raw_inputs.RawInputsRequest):
        assert [bytes(raw) for raw in parsed.raw] == list(whole.raw_input_contents)
        del whole.raw_input_contents[:]
        assert parsed.message == whole
    else:
        assert parsed == whole

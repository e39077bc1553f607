"""Large raw outputs written after the serialized response: the same bytes upb writes."""

from __future__ import annotations

import numpy as np
import pytest

from openinfer._proto import grpc_service_pb2 as pb
from openinfer.core.types import InferResponse, Tensor
from openinfer.frontends.grpc import convert, raw_tail


def _response(*arrays: tuple[str, np.ndarray]) -> InferResponse:
    outputs = [Tensor(f"OUT{i}", datatype, array.shape, array) for i, (datatype, array) in enumerate(arrays)]
    outputs[0].parameters = {"note": "first"}
    return InferResponse("model", "1", "req-7", outputs, {"triton_final_response": True, "count": 3})


def _without_maps(data: bytes) -> bytes:
    """A response's bytes re-serialized with its parameters cleared (upb orders maps freely)."""
    message = pb.ModelInferResponse.FromString(data)
    message.parameters.clear()
    for output in message.outputs:
        output.parameters.clear()
    return message.SerializeToString()


@pytest.mark.parametrize(
    "elements",
    [raw_tail.TAIL_FROM // 4, 4095, 4096 * 4, 65536],  # around the threshold and the varint widths
)
def test_a_tailed_response_is_the_bytes_upb_writes(elements):
    rng = np.random.default_rng(elements)
    response = _response(
        ("FP32", rng.random((1, elements), dtype=np.float32)),
        ("BYTES", np.array([b"ab", b"", b"\xff" * 300], dtype=np.object_)),
        ("INT64", np.arange(12, dtype=np.int64).reshape(3, 4).T),  # not C-contiguous
        ("FP16", np.zeros((0, 3), np.float16)),  # empty
    )
    tailed = convert.to_response(response, tail=True)
    whole = convert.to_response(response)
    assert isinstance(tailed, raw_tail.TailedResponse) and isinstance(whole, pb.ModelInferResponse)
    # upb writes map entries in no fixed order: the bytes compare with the parameters removed
    assert _without_maps(tailed.serialize()) == _without_maps(whole.SerializeToString())
    back = pb.ModelInferResponse.FromString(tailed.serialize())
    assert back == whole
    assert np.array_equal(np.frombuffer(back.raw_output_contents[2], np.int64).reshape(4, 3), np.arange(12).reshape(3, 4).T)


def test_small_responses_stay_whole_messages():
    response = _response(("FP32", np.ones((1, 16), np.float32)))
    message = convert.to_response(response, tail=True)
    assert isinstance(message, pb.ModelInferResponse)
    assert np.array_equal(np.frombuffer(message.raw_output_contents[0], np.float32), np.ones(16, np.float32))


def test_the_serializer_writes_tailed_responses_and_passes_messages_through():
    serialize = raw_tail.serializer(pb.ModelInferResponse.SerializeToString)
    response = _response(("UINT8", np.arange(raw_tail.TAIL_FROM, dtype=np.uint64).astype(np.uint8)))
    tailed = convert.to_response(response, tail=True)
    whole = convert.to_response(response)
    assert _without_maps(serialize(tailed)) == _without_maps(serialize(whole))


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**35])
def test_varint_is_protobufs_base_128(value):
    message = pb.InferParameter(uint64_param=value)
    key = bytes([pb.InferParameter.UINT64_PARAM_FIELD_NUMBER << 3])  # wire type 0: varint
    assert message.SerializeToString() == key + raw_tail.varint(value)


def test_a_stream_reply_with_a_tailed_response_is_the_bytes_upb_writes():
    response = _response(("FP32", np.arange(65536, dtype=np.float32).reshape(1, -1)))
    tailed, whole = convert.to_response(response, tail=True), convert.to_response(response)
    for message in (tailed.message, whole):
        message.parameters["triton_final_response"].bool_param = True
    reply = raw_tail.stream_reply(tailed)
    expected = pb.ModelStreamInferResponse(infer_response=whole)
    written = raw_tail.serializer(pb.ModelStreamInferResponse.SerializeToString)(reply)
    assert pb.ModelStreamInferResponse.FromString(written) == expected
    assert written.endswith(whole.raw_output_contents[0])
    small = raw_tail.stream_reply(convert.to_response(_response(("FP32", np.ones((1, 4), np.float32))), tail=True))
    assert isinstance(small, pb.ModelStreamInferResponse)
    assert np.frombuffer(small.infer_response.raw_output_contents[0], np.float32).tolist() == [1.0] * 4

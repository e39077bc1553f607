"""The frontend processes' channel: frames cut right wherever the stream splits them, and
requests and answers cross whole, whichever codec carries them."""

from __future__ import annotations

import numpy as np

from openinfer.core.errors import InvalidArgumentError
from openinfer.core.types import InferRequest, InferResponse, RequestedOutput, Tensor
from openinfer.frontends.processes.channel import Frames, frame
from openinfer.frontends.processes.messages import (
    pack_request,
    pack_response,
    unpack_request,
    unpack_response,
)


def test_frames_split_anywhere_come_out_whole_and_in_order():
    messages = [("infer", i, b"x" * (i * 37), {"k": i}) for i in range(20)]
    stream = b"".join(frame(m) for m in messages)
    for step in (1, 3, 64, 1000, len(stream)):
        frames, out = Frames(), []
        for start in range(0, len(stream), step):
            out += frames.feed(stream[start : start + step])
        assert out == messages


def test_what_marshal_cannot_carry_is_pickled():
    error = InvalidArgumentError("bad input")
    [(kind, key, carried)] = Frames().feed(frame(("fail", 7, error)))
    assert (kind, key) == ("fail", 7)
    assert type(carried) is InvalidArgumentError and carried.message == "bad input"


def test_a_request_crosses_with_what_the_frontend_set():
    request = InferRequest(
        model_name="m", model_version="2", id="r-1",
        inputs=[
            Tensor("A", "FP32", (2, 3), np.arange(6, dtype=np.float32).reshape(2, 3)),
            Tensor("B", "BYTES", (1, 2), np.array([[b"x", b"\x00y"]], dtype=object)),
            Tensor("C", "INT64", (1,), None, {"shared_memory_region": "in", "shared_memory_byte_size": 8}),
        ],
        outputs=[RequestedOutput("OUT", {"p": 1}, binary=True, classification=2, shm_region="r", shm_byte_size=4)],
        parameters={"flag": True, "n": 3, "x": 0.5, "s": "v"}, priority=2, timeout_us=100, sequence_id="seq",
        sequence_start=True, sequence_end=False, trace_parent={"traceparent": "00-ab-cd-01"},
    )
    [(_, _, packed)] = Frames().feed(frame(("infer", 1, pack_request(request))))
    got = unpack_request(packed)
    assert got.inputs[0].data.tolist() == request.inputs[0].data.tolist()
    assert got.inputs[0].data.dtype == np.float32 and got.inputs[0].shape == (2, 3)
    assert got.inputs[1].data.tolist() == [[b"x", b"\x00y"]] and got.inputs[1].data.dtype == object
    assert got.inputs[2].data is None and got.inputs[2].parameters == request.inputs[2].parameters
    assert got.outputs == request.outputs
    for field in ("model_name", "model_version", "id", "parameters", "priority", "timeout_us", "sequence_id",
                  "sequence_start", "sequence_end", "trace_parent"):
        assert getattr(got, field) == getattr(request, field), field


def test_a_response_crosses_with_its_requested_outputs():
    response = InferResponse(
        "m", "1", "r-1",
        outputs=[Tensor("OUT", "INT32", (1, 2), np.array([[1, 2]], dtype=np.int32)),
                 Tensor("SHM", "FP32", (1, 4), None, {"shared_memory_region": "out"})],
        parameters={"sequence_id": 4}, final=True, requested={"OUT": RequestedOutput("OUT", binary=True)},
    )
    [(_, _, packed)] = Frames().feed(frame(("done", 1, pack_response(response))))
    got = unpack_response(packed)
    assert got.outputs[0].data.tolist() == [[1, 2]] and got.outputs[0].data.dtype == np.int32
    assert got.outputs[1].data is None and got.outputs[1].parameters == {"shared_memory_region": "out"}
    assert got.requested == response.requested
    assert (got.model_name, got.model_version, got.id, got.parameters, got.final) == ("m", "1", "r-1", {"sequence_id": 4}, True)


def test_tensors_of_every_layout_cross_unchanged():
    arrays = [np.zeros((1, 0), np.float32), np.array([[True, False]]), np.arange(6, dtype=np.float16).reshape(2, 3),
              np.arange(12, dtype=">i4").reshape(3, 4)[:, ::2], np.float64(2.5).reshape(()), np.arange(3, dtype=np.uint8)]
    for array in arrays:
        tensor = Tensor("T", "X", array.shape, array)
        request = InferRequest(model_name="m", inputs=[tensor])
        [(_, _, packed)] = Frames().feed(frame(("infer", 1, pack_request(request))))
        got = unpack_request(packed).inputs[0].data
        assert got.dtype == array.dtype and got.shape == array.shape and got.tolist() == array.tolist()

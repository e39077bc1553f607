"""A frontend process decodes an infer request itself and sends the core only the inference;
the core's app sees whole HTTP requests only where the core alone can decode them.

Each test drives the frontend's infer route over a real channel (a socketpair) and plays the
core at the other end: it reads the frame the frontend wrote and answers it. A request the
frontend could decode but forwarded still gets a right answer from the core, so only the
frame's kind shows which way it went.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import numpy as np
import orjson
import pytest

from openinfer.core.types import InferResponse, Tensor
from openinfer.frontends.http.app import HttpOptions, HttpRequest, HttpResponse
from openinfer.frontends.processes.channel import Channel, Frames, frame
from openinfer.frontends.processes.child import CoreClient, FrontendConfig, build_app, infer
from openinfer.frontends.processes.messages import pack_response, unpack_request

PATH = "/v2/models/identity/infer"
VALUES = np.arange(4, dtype=np.float32).reshape(1, 4)
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class CoreEnd:
    """The test's end of the channel: what the frontend sent, and the core's answers."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.frames = Frames()

    async def next_message(self) -> tuple:
        loop = asyncio.get_running_loop()
        while True:
            messages = self.frames.feed(await loop.sock_recv(self.sock, 65536))
            if messages:
                assert len(messages) == 1
                return messages[0]

    async def answer(self, message: tuple) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, frame(message))


@contextlib.asynccontextmanager
async def _frontend(propagates_context: bool = False) -> AsyncIterator[tuple]:
    """The frontend's app and core client over one end of a socketpair, the test's `CoreEnd`
    over the other; both ends are closed after the test."""
    ours, theirs = socket.socketpair()
    for sock in (ours, theirs):
        sock.setblocking(False)
    config = FrontendConfig("127.0.0.1", 0, HttpOptions(), 5.0, None, propagates_context=propagates_context)
    core = CoreClient()
    app = build_app(config, core)
    core.channel = await Channel.over(ours, core.receive, core.lost)
    try:
        yield app, core, CoreEnd(theirs)
    finally:
        core.channel.close()
        theirs.close()
        await asyncio.sleep(0)  # the transport closes its socket on the loop's next turn


def _request(app, body: bytes, headers: dict[str, str]) -> HttpRequest:
    route = app.routes[0]
    return HttpRequest("POST", PATH, headers, bytearray(body), route.pattern.match(PATH))


def _json_body() -> bytes:
    return orjson.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                     "data": VALUES.ravel().tolist()}]})


def _binary_body() -> tuple[bytes, int]:
    header = orjson.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                       "parameters": {"binary_data_size": VALUES.nbytes}}],
                           "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]})
    return header + VALUES.tobytes(), len(header)


async def _run_as_core(app, core, end: CoreEnd, request: HttpRequest) -> tuple[tuple, HttpResponse]:
    """The frontend's handling of `request`, the core answering the inference it receives."""
    handled = asyncio.ensure_future(infer(app, core, request))
    message = await end.next_message()
    if message[0] == "infer":
        sent = unpack_request(message[2])
        response = InferResponse(
            model_name="identity", model_version="1",
            outputs=[Tensor("OUTPUT0", "FP32", sent.inputs[0].shape, sent.inputs[0].data)],
            requested=None if sent.outputs is None else {o.name: o for o in sent.outputs},  # as the core fills it
        )
        await end.answer(("done", message[1], pack_response(response)))
    return message, await handled


@pytest.mark.parametrize("propagates_context", [False, True])
async def test_a_json_request_is_decoded_in_the_frontend(propagates_context):
    async with _frontend(propagates_context) as (app, core, end):
        request = _request(app, _json_body(), {"content-type": "application/json", "traceparent": TRACEPARENT})
        message, response = await _run_as_core(app, core, end, request)
    assert message[0] == "infer"
    sent = unpack_request(message[2])
    assert sent.model_name == "identity" and sent.inputs[0].data.tolist() == VALUES.tolist()
    assert sent.trace_parent == ({"traceparent": TRACEPARENT} if propagates_context else None)
    assert response.status == 200
    assert orjson.loads(response.body)["outputs"][0]["data"] == VALUES.ravel().tolist()


async def test_a_binary_request_is_decoded_in_the_frontend_and_answered_in_binary():
    body, header_length = _binary_body()
    async with _frontend() as (app, core, end):
        request = _request(app, body, {"inference-header-content-length": str(header_length)})
        message, response = await _run_as_core(app, core, end, request)
    assert message[0] == "infer"
    assert unpack_request(message[2]).inputs[0].data.tolist() == VALUES.tolist()
    assert response.status == 200 and b"".join(response.tail) == VALUES.tobytes()


async def test_a_raw_body_goes_to_the_core_whole():
    """Its shape is the model's, which only the core knows."""
    async with _frontend() as (app, core, end):
        request = _request(app, VALUES.tobytes(), {"inference-header-content-length": "0"})
        message, response = await _run_as_core(app, core, end, request)
    assert message[0] == "http" and message[2:4] == ("POST", PATH)
    assert message[5] == VALUES.tobytes()
    assert response.stream is not None  # the core's own answer is relayed as it comes

"""Security defaults: restricted APIs checked in constant time on every frontend, no secrets
in logs, client shared memory off unless asked for, and bind addresses named at start-up.
"""

from __future__ import annotations

import asyncio
import hmac
import json

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from openinfer._proto import grpc_service_pb2 as pb
from openinfer._proto import grpc_service_pb2_grpc as pb_grpc
from openinfer.backends.registry import BackendRegistry
from openinfer.core.server import InferenceServer, ServerOptions
from openinfer.frontends.access import AccessPolicy
from openinfer.frontends.grpc.service import Binding, start_grpc
from openinfer.frontends.http import handlers
from openinfer.frontends.http.app import HttpApp, HttpOptions
from openinfer.frontends.openai.middleware import Access
from tests.hardening import models
from tests.helpers import Server, free_port

HTTP_SECRET = "http-s3cret-value"
GRPC_SECRET = "grpc-s3cret-value"
OPENAI_SECRET = "openai-s3cret-value"
API_KEY = "sk-hardening-api-key"


# ------------------------------------------------------------------- constant-time comparison
@pytest.fixture
def compare_calls(monkeypatch):
    """Every hmac.compare_digest call made in this process, with its arguments."""
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    return calls


async def _asgi(app, path: str, headers: list[tuple[bytes, bytes]], method: str = "GET") -> int:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app({"type": "http", "method": method, "path": path, "headers": headers, "query_string": b""}, receive, send)
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def test_every_frontend_compares_restricted_values_in_constant_time(tmp_path, compare_calls):
    """The KServe HTTP app, the gRPC guard and the OpenAI middleware all decide through
    hmac.compare_digest on the presented value; a near miss is refused."""

    async def scenario() -> dict[str, list]:
        core = InferenceServer(ServerOptions(model_repositories=[tmp_path]), BackendRegistry())
        await core.start()
        results: dict[str, list] = {}
        # KServe HTTP
        app = HttpApp(core, HttpOptions(access=AccessPolicy.parse([f"health:key={HTTP_SECRET}"])))
        handlers.install(app)
        results["http"] = [await _asgi(app, "/v2/health/live", [(b"key", v.encode())]) for v in (HTTP_SECRET, HTTP_SECRET[:-1] + "X")]
        # gRPC, through a real server on a free port
        port = free_port()
        grpc_server = await start_grpc(core, Binding(f"127.0.0.1:{port}"), AccessPolicy.parse([f"health:key={GRPC_SECRET}"]))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            outcomes = []
            for value in (GRPC_SECRET, GRPC_SECRET.upper()):
                try:
                    await stub.ServerLive(pb.ServerLiveRequest(), metadata=(("triton-grpc-protocol-key", value),))
                    outcomes.append("OK")
                except grpc.aio.AioRpcError as exc:
                    outcomes.append(exc.code().name)
            results["grpc"] = outcomes
        await grpc_server.stop(None)
        # OpenAI middleware in front of a trivial app

        async def inner(scope, receive, send):
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        access = Access(inner, AccessPolicy({"health": AccessPolicy.parse([f"health:key={OPENAI_SECRET}"]).restriction("health")}), [API_KEY])
        results["openai"] = [await _asgi(access, "/health/ready", [(b"key", v.encode())]) for v in (OPENAI_SECRET, OPENAI_SECRET + " ")]
        results["api_key"] = [await _asgi(access, "/v1/models", [(b"authorization", f"Bearer {v}".encode())]) for v in (API_KEY, API_KEY[:-2])]
        await core.stop()
        return results

    results = asyncio.run(scenario())
    assert results == {"http": [200, 403], "grpc": ["OK", "UNAVAILABLE"], "openai": [200, 401], "api_key": [200, 401]}
    compared = {bytes(b) for _, b in compare_calls}
    assert {HTTP_SECRET.encode(), GRPC_SECRET.encode(), OPENAI_SECRET.encode(), API_KEY.encode()} <= compared


# --------------------------------------------------------------------------- a default server
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Default addresses (no --*-address flags), verbose logs, every frontend restricted."""
    repo = models.copy_examples(tmp_path_factory.mktemp("security") / "repo", ("add_sub",))
    openai_port = free_port()
    server = Server(repo, [
        "--log-verbose", "1",
        "--http-restricted-api", f"inference,model-repository:x-admin-key={HTTP_SECRET}",
        "--grpc-restricted-protocol", f"inference,model-repository:x-admin-key={GRPC_SECRET}",
        "--openai-port", str(openai_port),
        "--openai-restricted-api", "model-repository", "x-admin-key", OPENAI_SECRET,
        "--api-key", API_KEY,
    ])
    server.host = "localhost"  # leave the bind addresses at their defaults
    server.start(wait_for="ready")
    server.openai_port = openai_port
    yield server
    assert server.stop() == 0, server.log()


def _add_sub_inputs(protocol):
    inputs = [protocol.InferInput("INPUT0", [4], "FP32"), protocol.InferInput("INPUT1", [4], "FP32")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones(4, np.float32))
    return inputs


def test_restricted_groups_on_every_frontend(server):
    http = httpclient.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as info:
        http.infer("add_sub", _add_sub_inputs(httpclient), headers={"x-admin-key": "wrong"})
    assert info.value.status() == "403" and "expecting header 'x-admin-key'" in info.value.message()
    assert http.infer("add_sub", _add_sub_inputs(httpclient), headers={"x-admin-key": HTTP_SECRET}).as_numpy("OUTPUT0").tolist() == [2] * 4
    assert http.is_server_live()  # health is not restricted
    grpc_client = grpcclient.InferenceServerClient(server.grpc_url)
    with pytest.raises(InferenceServerException) as info:
        grpc_client.infer("add_sub", _add_sub_inputs(grpcclient), headers={"x-admin-key": GRPC_SECRET})
    assert "triton-grpc-protocol-x-admin-key" in info.value.message()
    out = grpc_client.infer("add_sub", _add_sub_inputs(grpcclient), headers={"triton-grpc-protocol-x-admin-key": GRPC_SECRET})
    assert out.as_numpy("OUTPUT0").tolist() == [2] * 4
    base = f"http://127.0.0.1:{server.openai_port}"
    assert httpx.get(f"{base}/v1/models", headers={"authorization": f"Bearer {API_KEY}"}).status_code == 401
    assert httpx.get(f"{base}/v1/models", headers={"authorization": f"Bearer {API_KEY}", "x-admin-key": OPENAI_SECRET}).status_code == 200
    assert httpx.get(f"{base}/v1/models", headers={"authorization": "Bearer nope", "x-admin-key": OPENAI_SECRET}).status_code == 401


def test_client_shared_memory_is_off_by_default(server):
    http = httpclient.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as info:
        http.register_system_shared_memory("r", "/r", 16)
    assert info.value.status() == "501" and "--allow-client-shm=true" in info.value.message()
    with pytest.raises(InferenceServerException) as info:
        grpcclient.InferenceServerClient(server.grpc_url).register_system_shared_memory("r", "/r", 16)
    assert info.value.status() == "StatusCode.UNIMPLEMENTED"


def test_start_up_banner_names_every_bind_address(server):
    log = server.log()
    assert f"Started HTTPService at 0.0.0.0:{server.http_port}" in log
    assert f"Started GRPCInferenceService at 0.0.0.0:{server.grpc_port}" in log
    assert f"Started Metrics Service at 0.0.0.0:{server.metrics_port}" in log
    assert f"Started OpenAI-compatible frontend at 0.0.0.0:{server.openai_port}" in log


def test_no_secret_reaches_the_log(server):
    """Wrong and right keys, bearer tokens and auth headers are used; none is ever logged."""
    test_restricted_groups_on_every_frontend(server)
    http = httpx.Client(base_url=f"http://{server.http_url}")
    http.post("/v2/repository/index", headers={"x-admin-key": HTTP_SECRET + "-wrong", "authorization": f"Bearer {API_KEY}"})
    http.post("/v2/models/nope/infer", content=b"{", headers={"x-admin-key": HTTP_SECRET})
    httpx.post(f"http://127.0.0.1:{server.openai_port}/v1/chat/completions", content=json.dumps({"model": "nope"}),
               headers={"authorization": f"Bearer {API_KEY}-wrong", "x-admin-key": OPENAI_SECRET})
    log = server.log()
    for secret in (HTTP_SECRET, GRPC_SECRET, OPENAI_SECRET, API_KEY):
        assert secret not in log, f"'{secret}' appears in the server log"
    assert "x-admin-key" in log  # the header's name may be logged; its value may not

"""The OpenAI port as a server: models and LoRA names, explicit load/unload, restricted APIs,
API keys, the body-size limit, CORS, health/metrics/version/tokenize, and start-up failures."""

from __future__ import annotations

import asyncio
import http.client
import json
import urllib.request

import openai
import pytest

from tests.openai.conftest import OpenAIServer, raw_post

MSG = [{"role": "user", "content": "#say:ok#"}]


def request(server, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request(method, path, body=body, headers=headers or {})
    reply = conn.getresponse()
    data = reply.read()
    conn.close()
    return reply.status, dict(reply.getheaders()), data


# ------------------------------------------------------------------------- main server
def test_models_list_and_lora_names(llama3_server):
    client = llama3_server.client()
    ids = sorted(m.id for m in client.models.list())
    assert ids == ["identity_fp32", "mock_embed", "mock_llm", "mock_llm_lora_doll", "mock_llm_lora_sheep"]
    card = client.models.retrieve("mock_llm_lora_sheep")
    assert card.id == "mock_llm_lora_sheep" and card.object == "model" and card.created > 0 and card.owned_by
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("mock_llm_lora_unknown")
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("unknown")
    # an alias that names two separators is a plain (unknown) model name
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="mock_llm_lora_a_lora_b", messages=MSG)


async def test_async_models_list(llama3_server):
    models = [m.id async for m in llama3_server.async_client().models.list()]
    assert "mock_llm" in models


def test_load_unload_need_explicit_mode(llama3_server):
    for action in ("load", "unload"):
        status, _, raw = raw_post(f"{llama3_server.base_url}/models/mock_llm/{action}", b"")
        assert status == 400
        assert json.loads(raw)["error"]["message"] == "Model load/unload requires --model-control-mode=explicit"


def test_health_version_metrics_tokenize(llama3_server, tokenizer):
    assert llama3_server.status("/health/ready") == 200
    assert llama3_server.status("/health") == 200
    with urllib.request.urlopen(llama3_server.url + "/version") as reply:
        assert json.loads(reply.read())["version"]
    with urllib.request.urlopen(llama3_server.url + "/metrics") as reply:
        text = reply.read().decode()
        assert reply.headers["content-type"].startswith("text/plain")
    assert 'nv_inference_request_success{model="mock_llm",version="1"}' in text
    status, _, raw = raw_post(llama3_server.url + "/tokenize", {"model": "mock_llm", "prompt": "hello world", "return_token_strs": True})
    body = json.loads(raw)
    expected = tokenizer("hello world")["input_ids"]
    assert status == 200 and body["tokens"] == expected and body["count"] == len(expected) and len(body["token_strs"]) == len(expected)
    status, _, raw = raw_post(llama3_server.url + "/tokenize", {"model": "mock_llm", "messages": [{"role": "user", "content": "hi"}]})
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert json.loads(raw)["tokens"] == tokenizer(rendered, add_special_tokens=False)["input_ids"]
    status, _, raw = raw_post(llama3_server.url + "/detokenize", {"model": "mock_llm", "tokens": expected})
    assert status == 200 and json.loads(raw)["prompt"] == tokenizer.decode(expected)


def test_routes_cors_and_methods(llama3_server):
    status, _, raw = request(llama3_server, "GET", "/does-not-exist")
    assert status == 404 and json.loads(raw)["error"]["code"] == 404
    status, _, _ = request(llama3_server, "GET", "/v1/chat/completions")
    assert status == 405
    preflight = {"Origin": "http://localhost", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    status, headers, _ = request(llama3_server, "OPTIONS", "/v1/chat/completions", headers=preflight)
    headers = {k.lower(): v for k, v in headers.items()}
    assert status == 200 and headers["access-control-allow-origin"] == "http://localhost"
    assert headers["access-control-allow-credentials"] == "true"
    status, headers, _ = request(llama3_server, "OPTIONS", "/v1/chat/completions", headers={**preflight, "Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in {k.lower() for k in headers}


# ---------------------------------------------------- explicit mode, restrictions, size limit
LIMIT = 4096
ADMIN = {"admin-key": "admin-value"}
INFER = {"infer-key": "infer-value"}


@pytest.fixture(scope="module")
def explicit_server(mock_repo):
    server = OpenAIServer(
        mock_repo,
        [
            "--model-control-mode", "explicit", "--load-model", "mock_llm",
            "--openai-restricted-api", "model-repository", "admin-key", "admin-value",
            "--openai-restricted-api", "inference", "infer-key", "infer-value",
            "--http-max-input-size", str(LIMIT),
        ],
    ).start()
    yield server
    assert server.stop() == 0, server.log()


def test_restrictions_logged_without_values(explicit_server):
    log = explicit_server.log()
    assert "API restrictions enabled. Restricted API endpoints: {'model-repository': 'admin-key', 'inference': 'infer-key'}" in log
    assert "admin-value" not in log and "infer-value" not in log
    assert f"HTTP request size limit set to {LIMIT} bytes" in log


def test_restricted_groups(explicit_server):
    base = explicit_server.base_url
    expected = {
        "error": {
            "message": "This API is restricted, expecting header 'admin-key' with valid value",
            "type": "authentication_error",
            "param": None,
            "code": "invalid_auth",
        }
    }
    for headers in ({}, {"admin-key": "wrong"}, {"wrong-key": "admin-value"}, INFER):
        status, _, raw = request(explicit_server, "GET", "/v1/models", headers=headers)
        assert status == 401 and json.loads(raw) == expected
    assert request(explicit_server, "GET", "/v1/models", headers={"Admin-Key": "admin-value"})[0] == 200
    chat = {"model": "mock_llm", "messages": MSG}
    assert raw_post(base + "/chat/completions", chat)[0] == 401
    assert raw_post(base + "/chat/completions", chat, ADMIN)[0] == 401
    assert raw_post(base + "/chat/completions", chat, INFER)[0] == 200
    assert raw_post(base + "/completions", {"model": "mock_llm", "prompt": "#say:x#"}, INFER)[0] == 200
    assert raw_post(base + "/responses", {"model": "mock_llm", "input": "#say:x#"})[0] == 401
    status, _, raw = raw_post(base + "/responses", {"model": "mock_llm", "input": "#say:x#"}, INFER)
    assert status == 200
    stored = json.loads(raw)["id"]
    assert request(explicit_server, "GET", f"/v1/responses/{stored}")[0] == 401
    assert request(explicit_server, "GET", f"/v1/responses/{stored}", headers=INFER)[0] == 200
    assert request(explicit_server, "DELETE", f"/v1/responses/{stored}")[0] == 401
    assert request(explicit_server, "DELETE", f"/v1/responses/{stored}", headers=INFER)[0] == 200
    # embeddings fall under `inference` when no `embedding` group is configured
    assert raw_post(base + "/embeddings", {"model": "mock_embed", "input": "x"})[0] == 401
    assert explicit_server.status("/metrics") == 200 and explicit_server.status("/health/ready") == 200
    client = explicit_server.client(default_headers=INFER)
    assert client.chat.completions.create(model="mock_llm", messages=MSG).choices[0].message.content == "ok"


def test_explicit_load_unload(explicit_server):
    client = explicit_server.client(default_headers=ADMIN)
    assert [m.id for m in client.models.list()] == ["mock_llm"]
    base = explicit_server.base_url
    status, _, raw = raw_post(base + "/models/mock_embed/load", b"", ADMIN)
    card = json.loads(raw)
    assert status == 200 and card["id"] == "mock_embed" and card["object"] == "model" and card["created"] > 0
    assert sorted(m.id for m in client.models.list()) == ["mock_embed", "mock_llm"]
    status, _, raw = raw_post(base + "/models/mock_embed/load", b"", ADMIN)
    assert status == 400 and json.loads(raw)["error"]["message"] == "Model 'mock_embed' is already loaded"
    status, _, raw = raw_post(base + "/models/mock_embed/unload", b"", ADMIN)
    assert status == 200 and json.loads(raw) == {"status": "success", "model": "mock_embed"}
    assert [m.id for m in client.models.list()] == ["mock_llm"]
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("mock_embed")
    status, _, raw = raw_post(base + "/embeddings", {"model": "mock_embed", "input": "x"}, INFER)
    assert status == 404
    status, _, raw = raw_post(base + "/models/mock_embed/unload", b"", ADMIN)
    assert status == 404 and "Unknown model: mock_embed" in json.loads(raw)["error"]["message"]
    status, _, raw = raw_post(base + "/models/unknown_model/load", b"", ADMIN)
    assert status == 404 and "failed to poll from model repository" in json.loads(raw)["error"]["message"]
    for path, code in (("/v1/models/../load", 400), ("/v1/models/%20%20/load", 400), ("/v1/models/a/b/load", 404)):
        assert request(explicit_server, "POST", path, b"", ADMIN)[0] == code, path


async def test_concurrent_loads_have_one_winner(explicit_server):
    client = explicit_server.async_client(default_headers=ADMIN)

    async def call(action: str) -> int:
        response = await client.post(f"/models/identity_fp32/{action}", cast_to=object, body=None, options={})
        return 200 if response is not None else 0

    async def status(action: str) -> int:
        try:
            return await call(action)
        except openai.APIStatusError as exc:
            return exc.status_code

    codes = sorted(await asyncio.gather(*(status("load") for _ in range(5))))
    assert codes == [200, 400, 400, 400, 400]
    codes = sorted(await asyncio.gather(*(status("unload") for _ in range(5))))
    assert codes == [200, 404, 404, 404, 404]


def test_body_size_limit(explicit_server):
    def exactly(size: int) -> bytes:
        return b"x" * size

    status, _, raw = request(explicit_server, "POST", "/v1/chat/completions", exactly(LIMIT), INFER)
    assert status == 400 and json.loads(raw)["error"]["code"] == "invalid_json"  # read, then refused as JSON
    expected = {
        "error": {
            "message": f"Request content size exceeds the maximum allowed input size of {LIMIT} bytes. "
            "Use --http-max-input-size to increase the limit.",
            "type": "invalid_request_error",
            "param": None,
            "code": "content_too_large",
        }
    }
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models/mock_llm/load"):
        status, _, raw = request(explicit_server, "POST", path, exactly(LIMIT + 1))  # no auth: size is checked first
        assert status == 413 and json.loads(raw) == expected, path
    conn = http.client.HTTPConnection("127.0.0.1", explicit_server.port, timeout=30)
    conn.putrequest("POST", "/v1/completions")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for chunk in (exactly(LIMIT), exactly(1)):
        conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
    conn.send(b"0\r\n\r\n")
    reply = conn.getresponse()
    assert reply.status == 413 and json.loads(reply.read()) == expected
    conn.close()
    # uvicorn itself refuses a malformed Content-Length (400) before any app runs
    for value in ("not-a-number", "-1"):
        conn = http.client.HTTPConnection("127.0.0.1", explicit_server.port, timeout=30)
        conn.putrequest("POST", "/v1/completions", skip_accept_encoding=True)
        conn.putheader("Content-Length", value)
        conn.endheaders()
        assert conn.getresponse().status == 400
        conn.close()


async def test_size_middleware_checks_content_length_in_process():
    """Servers other than uvicorn may pass a bad Content-Length through: the middleware answers."""
    from openinfer.frontends.openai.middleware import BodySizeLimit

    async def app(scope, receive, send):  # must never run
        raise AssertionError("the app was called")

    async def receive():
        raise AssertionError("the body was read")

    for value, words in ((b"not-a-number", "not an integer"), (b"", "not an integer"), (b"-1024", "non-negative")):
        sent: list[dict] = []

        async def send(message, sent=sent):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": [(b"content-length", value)]}
        await BodySizeLimit(app, 10)(scope, receive, send)
        error = json.loads(sent[1]["body"])["error"]
        assert sent[0]["status"] == 400 and error["code"] == "invalid_content_length" and words in error["message"]


# ----------------------------------------------------------- API keys, OpenAI-only, template
TEMPLATE = "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}[assistant]"


@pytest.fixture(scope="module")
def keyed_server(mock_repo, tmp_path_factory):
    template = tmp_path_factory.mktemp("template") / "chat.jinja"
    template.write_text(TEMPLATE)
    server = OpenAIServer(
        mock_repo,
        ["--api-key", "sekrit", "--openai-allowed-origins", "http://example.com", "--chat-template", str(template)],
        kserve=False,
    ).start()
    yield server
    assert server.stop() == 0, server.log()


def test_api_key(keyed_server):
    with pytest.raises(openai.AuthenticationError) as info:
        keyed_server.client(api_key="wrong").chat.completions.create(model="mock_llm", messages=MSG)
    assert info.value.status_code == 401 and info.value.body["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        keyed_server.client(api_key="wrong").models.list()
    reply = keyed_server.client(api_key="sekrit").chat.completions.create(
        model="mock_llm", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == "[user]hi[assistant]"  # --chat-template replaced the tokenizer's
    assert keyed_server.status("/health/ready") == 200 and keyed_server.status("/metrics") == 200


def test_openai_only_and_cors_origins(keyed_server):
    status = 0
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{keyed_server.http_port}/v2/health/ready", timeout=2)
    except OSError:
        status = -1
    assert status == -1  # --enable-kserve-frontends false: no KServe HTTP listener
    preflight = {"Origin": "http://example.com", "Access-Control-Request-Method": "POST"}
    status, headers, _ = request(keyed_server, "OPTIONS", "/v1/chat/completions", headers=preflight)
    assert status == 200 and {k.lower(): v for k, v in headers.items()}["access-control-allow-origin"] == "http://example.com"
    assert "Adding CORS for the following origins: ['http://example.com']" in keyed_server.log()


# --------------------------------------------------------------------------- start-up failures
@pytest.mark.parametrize(
    "args, message",
    [
        (["--openai-restricted-api", "unknown-endpoint", "k", "v"], "Unknown API 'unknown-endpoint'"),
        (["--openai-restricted-api", "inference,inference", "k", "v"], "restricted api 'inference' can not be specified in multiple config groups"),
        (["--openai-restricted-api", "inference", "a", "b", "--openai-restricted-api", "health,inference", "c", "d"], "can not be specified in multiple config groups"),
        (["--tool-call-parser", "bogus"], "invalid choice: 'bogus'"),
        (["--reasoning-parser", "bogus"], "argument --reasoning-parser: invalid choice: 'bogus'"),
        (["--http-max-input-size", "0"], "Error: --http-max-input-size must be greater than 0."),
        (["--max-tool-call-parse-bytes", "x"], "value is not an integer"),
    ],
)
def test_bad_flags_stop_the_server(mock_repo, args, message):
    code, log = OpenAIServer(mock_repo, args).run_to_exit()
    assert code != 0 and message in log, log


def test_openai_command_runs_the_frontend_alone(mock_repo):
    """`openinfer openai` takes Triton's main.py flags: OpenAI on --openai-port, no KServe."""
    import sys

    from tests.helpers import free_port

    class MainPy(OpenAIServer):
        def command(self) -> list[str]:
            self.port, self.http_port = free_port(), free_port()
            return [
                sys.executable, "-m", "openinfer", "openai", "--model-repository", str(self.repository),
                "--openai-port", str(self.port), "--host", "127.0.0.1", "--kserve-http-port", str(self.http_port),
                "--tool-call-parser", "mistral",
            ]

    server = MainPy(mock_repo).start()
    try:
        assert "mock_llm" in [m.id for m in server.client().models.list()]
        assert "Streaming tool-call parse buffer limit set to 131072 bytes" in server.log()
        assert "Started HTTPService" not in server.log()
    finally:
        assert server.stop() == 0

"""Hostile input over the OpenAI-compatible frontend: every bad request gets the OpenAI error
envelope with a 4xx status, nothing goes unhandled, a client that leaves mid-stream cancels
its generation, and a healthy completion right after succeeds.

The models are deterministic mocks behind the Python backend with a tokenizer trained here.
"""

from __future__ import annotations

import json
import socket

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hardening.oracle import rss_mib, wait_until
from tests.helpers import Server, free_port, write_model
from tests.llm_fixtures import build_tokenizer
from tests.openai import mock_models

LIMIT = 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("openai_corpus")
    tokenizer = build_tokenizer(root / "tokenizer")
    repo = root / "repo"
    write_model(repo, "mock_llm", mock_models.llm_config("mock_llm"), mock_models.LLM_MODEL)
    write_model(repo, "mock_embed", mock_models.embed_config("mock_embed"), mock_models.EMBED_MODEL)
    (repo / "mock_llm" / "1" / "model.json").write_text(json.dumps({"model": str(tokenizer)}))
    port = free_port()
    server = Server(repo, ["--openai-port", str(port), "--openai-address", "127.0.0.1",
                           "--http-max-input-size", str(LIMIT), "--http-client-timeout-secs", "2"])
    server.start(wait_for="ready")
    server.openai_port = port
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        healthy(client)  # warm-up: the tokenizer (and transformers) load on first use
        client.post("/v1/completions", json={"model": "mock_llm", "prompt": "warm"})
        client.post("/v1/embeddings", json={"model": "mock_embed", "input": "warm"})
    server.baseline_rss = rss_mib(server.process.pid)
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=f"http://127.0.0.1:{server.openai_port}", timeout=60) as client:
        yield client


def check_openai_answer(reply: httpx.Response, *, allow_ok: bool = True) -> dict | None:
    """200 with a completion, or a 4xx/5xx carrying {"error": {"message", "type", ...}}."""
    if reply.status_code == 200 and allow_ok:
        return None
    assert 400 <= reply.status_code < 600 and reply.status_code != 500, (reply.status_code, reply.text[:300])
    doc = reply.json()
    error = doc["error"]
    assert isinstance(error["message"], str) and error["message"], doc
    assert isinstance(error["type"], str), doc
    return error


def healthy(http: httpx.Client) -> None:
    reply = http.post("/v1/chat/completions", json={
        "model": "mock_llm", "messages": [{"role": "user", "content": "#say:all good#"}]})
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == "all good"


# ------------------------------------------------------------------------------ strategies
leaf = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
        | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8))
value = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
content = st.text(max_size=20) | st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "x"]) | leaf}, optional={"text": value}), max_size=2) | value
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "system", "assistant", "tool", "developer", "robot"]) | leaf},
    optional={"content": content, "name": value, "tool_calls": value, "tool_call_id": value},
)
sampling = {
    "temperature": value, "top_p": value, "top_k": value, "max_tokens": value, "max_completion_tokens": value,
    "n": st.integers(min_value=-2, max_value=10**9) | value, "stop": value, "seed": value,
    "frequency_penalty": value, "presence_penalty": value, "logprobs": value, "top_logprobs": value,
    "stream": st.booleans() | value, "stream_options": value, "tools": value, "tool_choice": value,
    "response_format": value, "user": value, "logit_bias": value, "echo": value, "suffix": value,
}
chat_requests = st.fixed_dictionaries(
    {"model": st.sampled_from(["mock_llm", "mock_embed", "nope", ""]) | leaf},
    optional={"messages": st.lists(message, max_size=3) | value, **sampling},
)
completion_requests = st.fixed_dictionaries(
    {"model": st.sampled_from(["mock_llm", "nope"]) | leaf},
    optional={"prompt": st.text(max_size=20) | st.lists(st.integers(min_value=-5, max_value=10**6), max_size=4) | value,
              **sampling},
)

text_part = st.fixed_dictionaries({"type": st.sampled_from(["input_text", "output_text", "input_image"]) | leaf},
                                  optional={"text": value})
responses_item = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["message", "function_call", "function_call_output", "reasoning"]) | leaf,
    "role": st.sampled_from(["user", "assistant", "developer", "system", "tool"]) | leaf,
    "content": st.text(max_size=20) | st.lists(text_part, max_size=2) | value,
    "call_id": value, "name": value, "arguments": value, "output": value,
})
responses_tool = st.fixed_dictionaries({"type": st.sampled_from(["function", "web_search"]) | leaf},
                                       optional={"name": value, "parameters": value})
responses_requests = st.fixed_dictionaries(
    {"model": st.sampled_from(["mock_llm", "mock_embed", "nope"]) | leaf},
    optional={
        "input": st.text(max_size=20) | st.lists(responses_item, max_size=3) | value,
        "instructions": value, "max_output_tokens": value, "temperature": value, "top_p": value,
        "stream": st.booleans() | value, "store": value, "previous_response_id": value,
        "tools": st.lists(responses_tool, max_size=2) | value, "tool_choice": value, "text": value,
        "include": value, "background": value, "reasoning": value, "truncation": value, "metadata": value,
    },
)


def _bounded(doc: dict) -> dict:
    # Keep generation itself short: the corpus is about the request, not a long answer.
    for key in ("max_tokens", "max_output_tokens"):
        if isinstance(doc.get(key), int) and doc[key] > 16:
            doc[key] = 16
    return doc


@settings(max_examples=150)
@given(doc=chat_requests)
def test_hostile_chat_requests(http, doc):
    check_openai_answer(http.post("/v1/chat/completions", content=json.dumps(_bounded(doc))))


@settings(max_examples=80)
@given(doc=completion_requests)
def test_hostile_completion_requests(http, doc):
    check_openai_answer(http.post("/v1/completions", content=json.dumps(_bounded(doc))))


@settings(max_examples=100)
@given(doc=responses_requests)
def test_hostile_responses_requests(http, doc):
    check_openai_answer(http.post("/v1/responses", content=json.dumps(_bounded(doc))))


@settings(max_examples=40)
@given(doc=st.fixed_dictionaries({"model": st.sampled_from(["mock_embed", "mock_llm"]) | leaf},
                                 optional={"input": value, "encoding_format": value, "dimensions": value}))
def test_hostile_embedding_requests(http, doc):
    check_openai_answer(http.post("/v1/embeddings", content=json.dumps(doc)))


@settings(max_examples=40)
@given(body=st.binary(max_size=300), path=st.sampled_from(["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"]))
def test_arbitrary_bytes(http, body, path):
    check_openai_answer(http.post(path, content=body), allow_ok=False)


HAND = [
    ("malformed json", b'{"model": "mock_llm", "messages": ['),
    ("not an object", b"[1, 2]"),
    ("empty body", b""),
    ("deep nesting", b'{"model":"mock_llm","messages":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ("huge number", b'{"model":"mock_llm","messages":[{"role":"user","content":"x"}],"max_tokens":' + b"9" * 5000 + b"}"),
    ("NaN temperature", b'{"model":"mock_llm","messages":[{"role":"user","content":"x"}],"temperature":NaN}'),
    ("Infinity top_p", b'{"model":"mock_llm","messages":[{"role":"user","content":"x"}],"top_p":Infinity}'),
    ("negative max_tokens", json.dumps({"model": "mock_llm", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}).encode()),
    ("absurd n", json.dumps({"model": "mock_llm", "messages": [{"role": "user", "content": "x"}], "n": 10**9}).encode()),
    ("messages not a list", json.dumps({"model": "mock_llm", "messages": "hello"}).encode()),
    ("unknown model", json.dumps({"model": "nope", "messages": [{"role": "user", "content": "x"}]}).encode()),
    ("model not a string", json.dumps({"model": ["mock_llm"], "messages": [{"role": "user", "content": "x"}]}).encode()),
    ("unknown role", json.dumps({"model": "mock_llm", "messages": [{"role": "robot", "content": "x"}]}).encode()),
    ("tools not a list", json.dumps({"model": "mock_llm", "messages": [{"role": "user", "content": "x"}], "tools": 7}).encode()),
    ("body over the limit", json.dumps({"model": "mock_llm", "messages": [{"role": "user", "content": "x" * (LIMIT + 10)}]}).encode()),
]


@pytest.mark.parametrize("label,body", HAND, ids=[c[0] for c in HAND])
def test_hand_written_hostile_requests(http, label, body):
    reply = http.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert 400 <= reply.status_code < 500, (reply.status_code, reply.text[:300])
    check_openai_answer(reply, allow_ok=False)


def _canceled(server: Server) -> float:
    text = httpx.get(server.metrics_url).text
    for line in text.splitlines():
        if line.startswith("nv_inference_request_failure{") and 'model="mock_llm"' in line and 'reason="CANCELED"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_client_leaving_mid_stream_cancels_generation(server, http):
    """A streamed chat whose client disconnects after a few chunks is cancelled in the model."""
    before = _canceled(server)
    body = json.dumps({"model": "mock_llm", "stream": True,
                       "messages": [{"role": "user", "content": "#long#"}]}).encode()
    with socket.create_connection(("127.0.0.1", server.openai_port), timeout=30) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        seen = b""
        while seen.count(b"data: ") < 3:
            seen += sock.recv(4096)
    wait_until(lambda: _canceled(server) > before, timeout=30)
    healthy(http)


def test_memory_stayed_bounded_and_nothing_went_unhandled(server, http):
    grown = rss_mib(server.process.pid) - server.baseline_rss
    assert grown < 150, f"server RSS grew by {grown:.0f} MiB over the hostile corpus"
    healthy(http)
    log = server.log()
    assert "unhandled error" not in log and "Traceback" not in log, log[-3000:]

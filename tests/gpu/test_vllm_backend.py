"""The vllm backend end to end on a GPU: the same tensor interface as the transformers backend.

Tiny random models are built here with head_dim 64 (GPU attention kernels want >= 32), so
nothing is downloaded. Run with tests/gpu/run_gpu_checks.sh on a machine with a GPU.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import tritonclient.grpc as grpcclient

from tests.helpers import Server
from tests.llm.tools import ALL_RETURNS, Stream, tensor, text
from tests.llm_fixtures import (
    build_lora_adapter,
    build_tiny_bert,
    build_tiny_llama,
    build_tokenizer,
    write_llm_model,
)

pytestmark = pytest.mark.gpu

SIZES = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2}
GREEDY = {"temperature": 0}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Dallas", "Austin"]}, "days": {"type": "integer", "minimum": 1, "maximum": 9}},
    "required": ["city", "days"],
    "additionalProperties": False,
}


def _embedding_args() -> dict:
    from vllm.engine.arg_utils import AsyncEngineArgs

    fields = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    return {"runner": "pooling"} if "runner" in fields else {"task": "embed"}


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm-assets")
    tokenizer = build_tokenizer(root / "tokenizer")
    llama = build_tiny_llama(root / "llama", tokenizer, **SIZES)
    bert = build_tiny_bert(root / "bert", tokenizer, hidden_size=256, intermediate_size=512, num_attention_heads=4)
    lora = build_lora_adapter(root / "lora-doll", llama, seed=1)
    repo = root / "models"
    engine = {"gpu_memory_utilization": 0.25, "enforce_eager": True, "max_model_len": 512}
    write_llm_model(repo, "vllm_llama", llama, backend="vllm", lora={"doll": lora},
                    model_json={**engine, "max_lora_rank": 8})
    write_llm_model(repo, "vllm_bert", bert, backend="vllm", model_json={**engine, **_embedding_args()})
    server = Server(repo).start(wait_for="ready", timeout=600)
    yield server
    server.stop()


def test_streaming_deltas_add_up_to_the_full_text(vllm_server):
    stream = Stream(vllm_server.grpc_url)
    try:
        stream.send("vllm_llama", "Hello world", {"max_tokens": 12, "ignore_eos": True, **GREEDY}, stream=True, **ALL_RETURNS)
        items = stream.collect(timeout=120)
        stream.send("vllm_llama", "Hello world", {"max_tokens": 12, "ignore_eos": True, **GREEDY}, exclude_input_in_output=True,
                    **ALL_RETURNS)
        whole = stream.collect(timeout=120)
    finally:
        stream.close()
    assert sum(int(i["num_output_tokens"][0]) for i in items) == 12
    assert text(items[-1]["finish_reason"]) == "length"
    assert "".join(text(i["text_output"]) for i in items) == text(whole[-1]["text_output"])


def test_concurrent_requests_and_lora(vllm_server):
    stream = Stream(vllm_server.grpc_url)
    try:
        for i, name in enumerate([None, "doll"] * 4):
            params = {"max_tokens": 8, **GREEDY, **({"lora_name": name} if name else {})}
            stream.send("vllm_llama", "Tell me a story", params, request_id=f"{i}-{name}", exclude_input_in_output=True)
        outputs: dict[str, set] = {"None": set(), "doll": set()}
        for _ in range(8):
            result, error = stream.next(timeout=120)
            assert error is None
            outputs[result.get_response().id.split("-", 1)[1]].add(text(result.as_numpy("text_output")))
    finally:
        stream.close()
    assert len(outputs["None"]) == 1 and len(outputs["doll"]) == 1  # greedy: same text in a batch
    assert outputs["None"] != outputs["doll"]


def test_guided_json_is_valid(vllm_server):
    stream = Stream(vllm_server.grpc_url)
    try:
        stream.send("vllm_llama", "Weather?", {"max_tokens": 48, "guided_json": SCHEMA, **GREEDY}, exclude_input_in_output=True)
        value = json.loads(text(stream.collect(timeout=120)[-1]["text_output"]))
    finally:
        stream.close()
    assert value["city"] in ("Dallas", "Austin") and 1 <= value["days"] <= 9


def test_cancelled_stream_keeps_the_engine_serving(vllm_server):
    stream = Stream(vllm_server.grpc_url)
    stream.send("vllm_llama", "Hello", {"max_tokens": 400, "ignore_eos": True}, stream=True)
    for _ in range(3):
        assert stream.next(timeout=120)[1] is None
    stream.close(cancel=True)
    stream = Stream(vllm_server.grpc_url)
    try:
        stream.send("vllm_llama", "Hello", {"max_tokens": 2}, exclude_input_in_output=True)
        assert stream.collect(timeout=120)[-1]["text_output"].shape == (1,)
    finally:
        stream.close()


def test_embeddings(vllm_server):
    stream = Stream(vllm_server.grpc_url)
    try:
        body = {"input": "Hello world", "pooling_params": {"dimensions": [16]}}
        stream.client.async_stream_infer("vllm_bert", [tensor(grpcclient, "embedding_request", json.dumps(body))])
        result, error = stream.next(timeout=120)
    finally:
        stream.close()
    assert error is None
    vector = json.loads(text(result.as_numpy("text_output")))
    assert len(vector) == 16
    assert abs(sum(v * v for v in vector) - 1.0) < 1e-3


def test_unknown_lora_message(vllm_server):
    stream = Stream(vllm_server.grpc_url)
    try:
        stream.send("vllm_llama", "x", {"lora_name": "goat"})
        _, error = stream.next(timeout=120)
    finally:
        stream.close()
    assert "LoRA goat is not supported, we currently support ['doll']" in str(error)

"""The transformers backend end to end: the real server, tritonclient over HTTP and gRPC.

Expected texts come from transformers' own `generate` on the same tiny weights, so these
tests check the engine (continuous batching, KV-cache joins, LoRA, sampling) against the
reference implementation, not against itself.
"""

from __future__ import annotations

import json
import re
import socket
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.llm.tools import (
    ALL_RETURNS,
    Stream,
    generate_inputs,
    http_generate,
    reference_greedy,
    tensor,
    text,
    token_count,
)

PROMPTS = [
    "Hello world",
    "The quick brown fox jumps",
    "Machine learning is",
    "Tell me a story about a cat.",
    "What is the weather in Dallas?",
    "Numbers: 1 2 3",
]
GREEDY = {"temperature": 0}


def same(a: str, b: str) -> bool:
    """Equal up to a trailing partial character (a stream holds back incomplete UTF-8)."""
    return a.rstrip("\ufffd") == b.rstrip("\ufffd")


@pytest.fixture(scope="module")
def http(llm_server):
    client = httpclient.InferenceServerClient(llm_server.http_url, concurrency=8, network_timeout=120)
    yield client
    client.close()


def stats(client, model: str) -> dict:
    return client.get_inference_statistics(model)["model_stats"][0]


# ------------------------------------------------------------------------- config
def test_config_is_auto_completed_like_triton_vllm(http):
    config = http.get_model_config("tiny_llama")
    assert [t["name"] for t in config["input"]] == [
        "text_input", "image", "stream", "sampling_parameters", "exclude_input_in_output",
        "return_finish_reason", "return_cumulative_logprob", "return_logprobs",
        "return_num_input_tokens", "return_num_output_tokens", "embedding_request",
    ]
    assert [t["name"] for t in config["output"]] == [
        "text_output", "finish_reason", "cumulative_logprob", "logprobs", "num_input_tokens",
        "num_output_tokens",
    ]
    assert config["model_transaction_policy"]["decoupled"] is True
    assert config.get("max_batch_size", 0) == 0
    assert http.get_model_config("tiny_llama_unary")["model_transaction_policy"].get("decoupled", False) is False
    # an encoder offers the embedding interface only, `embedding_request` required
    bert = http.get_model_config("tiny_bert")
    assert [(t["name"], t.get("optional", False)) for t in bert["input"]] == [
        ("return_num_input_tokens", True), ("return_num_output_tokens", True), ("embedding_request", False),
    ]
    assert [t["name"] for t in bert["output"]] == ["text_output", "num_input_tokens", "num_output_tokens"]


# --------------------------------------------------------------------- generation
def test_http_generation_matches_transformers(http, assets):
    prompt = PROMPTS[0]
    expected, count = reference_greedy(assets.llama, prompt, 12)
    out = http_generate(http, "tiny_llama_unary", prompt, {"max_tokens": 12, **GREEDY}, **ALL_RETURNS)
    # Triton's rule: without exclude_input_in_output the prompt is prepended
    assert same(text(out["text_output"]), prompt + expected)
    assert out["num_input_tokens"].tolist() == [token_count(assets.llama, prompt)]
    assert out["num_output_tokens"].tolist() == [count]
    assert text(out["finish_reason"]) == ("length" if count == 12 else "stop")
    out = http_generate(http, "tiny_llama_unary", prompt, {"max_tokens": 12, **GREEDY}, exclude_input_in_output=True)
    assert same(text(out["text_output"]), expected)
    assert set(out) == {"text_output"}  # only the outputs asked for


def test_grpc_stream_sends_token_deltas(llm_server, assets):
    prompt = PROMPTS[1]
    expected, count = reference_greedy(assets.llama, prompt, 10)
    stream = Stream(llm_server.grpc_url)
    try:
        stream.send("tiny_llama", prompt, {"max_tokens": 10, **GREEDY}, stream=True, **ALL_RETURNS)
        items = stream.collect()
    finally:
        stream.close()
    # one response per token, unless the loop lagged and merged some (counts add up either way)
    assert 2 <= len(items) <= count
    assert sum(int(i["num_output_tokens"][0]) for i in items) == count
    assert all(int(i["num_input_tokens"][0]) == token_count(assets.llama, prompt) for i in items)
    reasons = [text(i["finish_reason"]) for i in items]
    assert reasons[:-1] == ["None"] * (len(items) - 1) and reasons[-1] == "length"
    assert same("".join(text(i["text_output"]) for i in items), expected)


def test_decoupled_model_without_stream_sends_one_response(llm_server, assets):
    expected, _ = reference_greedy(assets.llama, PROMPTS[2], 8)
    stream = Stream(llm_server.grpc_url)
    try:
        stream.send("tiny_llama", PROMPTS[2], {"max_tokens": 8, **GREEDY}, exclude_input_in_output=True)
        items = stream.collect()
    finally:
        stream.close()
    assert len(items) == 1 and same(text(items[0]["text_output"]), expected)


def test_concurrent_requests_are_batched_and_stay_correct(http, assets):
    before = stats(http, "tiny_llama_unary")
    futures = [
        http.async_infer(
            "tiny_llama_unary",
            generate_inputs(httpclient, prompt, {"max_tokens": 24, "ignore_eos": True, **GREEDY}, exclude_input_in_output=True),
        )
        for prompt in PROMPTS
    ]
    results = [f.get_result() for f in futures]
    for prompt, result in zip(PROMPTS, results):
        expected, _ = reference_greedy(assets.llama, prompt, 24)  # stops at EOS; we ignore it
        assert text(result.as_numpy("text_output")).startswith(expected.rstrip("\ufffd"))
    after = stats(http, "tiny_llama_unary")
    tokens = after["inference_count"] - before["inference_count"]
    passes = after["execution_count"] - before["execution_count"]
    assert tokens == len(PROMPTS) * 24  # every token is one row of one forward pass
    # Without batching every token would need a pass of its own; how much the requests overlap
    # depends on when each arrives, so only "fewer passes than tokens" is certain.
    assert passes < tokens, (passes, tokens)
    sizes = {b["batch_size"] for b in after["batch_stats"]}
    assert max(sizes) >= 2


def test_ignore_eos_greedy_outputs_match_reference_exactly(http, assets):
    # the reference stops at EOS; with no EOS in the first 24 greedy tokens the two must agree
    for prompt in PROMPTS[:3]:
        expected, count = reference_greedy(assets.llama, prompt, 24)
        if count < 24:
            continue
        out = http_generate(http, "tiny_llama_unary", prompt, {"max_tokens": 24, "ignore_eos": True, **GREEDY},
                            exclude_input_in_output=True)
        assert same(text(out["text_output"]), expected)


def test_cancelled_stream_stops_generating(llm_server, http):
    before = stats(http, "tiny_llama")["inference_count"]
    stream = Stream(llm_server.grpc_url)
    stream.send("tiny_llama", PROMPTS[3], {"max_tokens": 480, "ignore_eos": True, **GREEDY}, stream=True)
    for _ in range(3):
        _, error = stream.next()
        assert error is None
    stream.close(cancel=True)
    # the count settles once the engine has dropped the sequence
    previous, current = -1, stats(http, "tiny_llama")["inference_count"]
    for _ in range(100):
        if current == previous:
            break
        time.sleep(0.3)
        previous, current = current, stats(http, "tiny_llama")["inference_count"]
    assert current - before < 240, current - before
    # and the model keeps serving
    out = http_generate(http, "tiny_llama_unary", PROMPTS[0], {"max_tokens": 2, **GREEDY})
    assert out["text_output"].shape == (1,)


def _settled_count(http, model: str) -> int:
    """The model's inference count once it stops moving (generation has ended)."""
    previous, current = -1, stats(http, model)["inference_count"]
    for _ in range(100):
        if current == previous:
            break
        time.sleep(0.3)
        previous, current = current, stats(http, model)["inference_count"]
    return current


def test_http_disconnect_cancels_generation(llm_server, http):
    before = _settled_count(http, "tiny_llama_unary")
    body = json.dumps({"text_input": PROMPTS[5], "exclude_input_in_output": True,
                       "parameters": {"max_tokens": 480, "ignore_eos": True, **GREEDY}}).encode()
    sock = socket.create_connection(("127.0.0.1", llm_server.http_port))
    sock.sendall(b"POST /v2/models/tiny_llama_unary/generate HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    for _ in range(200):  # generation has started
        if stats(http, "tiny_llama_unary")["inference_count"] - before >= 3:
            break
        time.sleep(0.05)
    sock.close()
    assert _settled_count(http, "tiny_llama_unary") - before < 240


def test_finish_reason_stop_at_stop_string(http, assets):
    expected, _ = reference_greedy(assets.llama, PROMPTS[4], 20)
    index = next(i for i in range(2, len(expected) - 2) if expected[i : i + 2].isprintable()
                 and expected.find(expected[i : i + 2]) == i)
    stop = expected[index : index + 2]
    params = {"max_tokens": 20, "stop": [stop], **GREEDY}
    out = http_generate(http, "tiny_llama_unary", PROMPTS[4], params, exclude_input_in_output=True, return_finish_reason=True)
    assert text(out["text_output"]) == expected[:index]
    assert text(out["finish_reason"]) == "stop"
    params["include_stop_str_in_output"] = True
    out = http_generate(http, "tiny_llama_unary", PROMPTS[4], params, exclude_input_in_output=True)
    assert text(out["text_output"]) == expected[: index + 2]


def test_n_samples_are_seeded_and_distinct(http):
    params = {"n": 3, "max_tokens": 8, "temperature": 1.0, "seed": 7}
    first = http_generate(http, "tiny_llama_unary", PROMPTS[0], params, exclude_input_in_output=True, **ALL_RETURNS)
    assert first["text_output"].shape == (3,)
    assert first["num_output_tokens"].tolist() == [8, 8, 8] or min(first["num_output_tokens"]) >= 1
    assert len(first["finish_reason"]) == 3
    assert len(set(first["text_output"].tolist())) > 1
    again = http_generate(http, "tiny_llama_unary", PROMPTS[0], params, exclude_input_in_output=True)
    assert again["text_output"].tolist() == first["text_output"].tolist()


def test_generation_config_defaults_apply(http):
    out = http_generate(http, "tiny_llama_tuned", PROMPTS[2], {}, exclude_input_in_output=True, **ALL_RETURNS)
    assert out["num_output_tokens"].tolist() == [5]  # max_new_tokens from generation_config.json
    assert text(out["finish_reason"]) == "length"
    again = http_generate(http, "tiny_llama_tuned", PROMPTS[2], {}, exclude_input_in_output=True)
    assert again["text_output"].tolist() == out["text_output"].tolist()  # temperature 0 default
    out = http_generate(http, "tiny_llama_tuned", PROMPTS[2], {"max_tokens": 3}, exclude_input_in_output=True,
                        return_num_output_tokens=True)
    assert out["num_output_tokens"].tolist() == [3]


def test_logprobs_are_reported_per_token(http):
    params = {"max_tokens": 4, "logprobs": 2, **GREEDY}
    out = http_generate(http, "tiny_llama_unary", PROMPTS[0], params, exclude_input_in_output=True,
                        return_logprobs=True, return_cumulative_logprob=True)
    entries = json.loads(text(out["logprobs"]))
    assert len(entries) == 4
    for entry in entries:
        first = next(iter(entry.values()))
        assert first["rank"] == 1  # greedy: the sampled token (listed first) is the best one
        assert len(entry) == 2 and all(v["logprob"] <= 0 for v in entry.values())
    chosen = sum(next(iter(e.values()))["logprob"] for e in entries)
    assert out["cumulative_logprob"][0] == pytest.approx(chosen, abs=1e-4)


# --------------------------------------------------------------------------- LoRA
def test_lora_selection_changes_output(llm_server, assets):
    prompt = PROMPTS[0]
    stream = Stream(llm_server.grpc_url)
    try:
        outputs = {}
        for name in (None, "doll", "sheep"):  # sent together: one batch with mixed adapters
            params = {"max_tokens": 8, **GREEDY, **({"lora_name": name} if name else {})}
            stream.send("tiny_llama", prompt, params, request_id=str(name), exclude_input_in_output=True)
        for _ in range(3):
            result, error = stream.next()
            assert error is None
            outputs[result.get_response().id] = text(result.as_numpy("text_output"))
    finally:
        stream.close()
    assert len(set(outputs.values())) == 3
    assert same(outputs["None"], reference_greedy(assets.llama, prompt, 8)[0])
    assert same(outputs["doll"], reference_greedy(assets.llama, prompt, 8, adapter=assets.lora_doll)[0])
    assert same(outputs["sheep"], reference_greedy(assets.llama, prompt, 8, adapter=assets.lora_sheep)[0])


def test_unknown_lora_is_refused_with_tritons_message(llm_server, http):
    stream = Stream(llm_server.grpc_url)
    try:
        stream.send("tiny_llama", PROMPTS[0], {"lora_name": "goat"})
        _, error = stream.next()
    finally:
        stream.close()
    assert "LoRA goat is not supported, we currently support ['doll', 'sheep']" in str(error)
    with pytest.raises(InferenceServerException, match="LoRA feature is not enabled."):
        http_generate(http, "tiny_llama_unary", PROMPTS[0], {"lora_name": "doll"})


# ---------------------------------------------------------------- guided decoding
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Dallas", "Austin", "Houston"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "days", "unit"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("sampling", [GREEDY, {"temperature": 1.0, "seed": 11}])
def test_guided_json_produces_valid_json(http, sampling):
    params = {"max_tokens": 64, "guided_json": SCHEMA, **sampling}
    out = http_generate(http, "tiny_llama_unary", PROMPTS[4], params, exclude_input_in_output=True, return_finish_reason=True)
    value = json.loads(text(out["text_output"]))
    assert set(value) == {"city", "days", "unit"}
    assert value["city"] in SCHEMA["properties"]["city"]["enum"]
    assert 1 <= value["days"] <= 14 and value["unit"] in ("celsius", "fahrenheit")
    assert text(out["finish_reason"]) == "stop"


def test_guided_choice_regex_and_structured_outputs(http):
    out = http_generate(http, "tiny_llama_unary", "Yes or no?", {"max_tokens": 8, "guided_choice": ["yes", "no", "maybe"], **GREEDY},
                        exclude_input_in_output=True)
    assert text(out["text_output"]) in ("yes", "no", "maybe")
    out = http_generate(http, "tiny_llama_unary", "Code:", {"max_tokens": 16, "guided_regex": "[0-9]{3}-[a-z]{2}", **GREEDY},
                        exclude_input_in_output=True)
    assert re.fullmatch("[0-9]{3}-[a-z]{2}", text(out["text_output"]))
    # Triton's own spelling: a JSON-encoded StructuredOutputsParams
    params = {"max_tokens": 64, "structured_outputs": json.dumps({"json": json.dumps(SCHEMA)}), **GREEDY}
    out = http_generate(http, "tiny_llama_unary", PROMPTS[4], params, exclude_input_in_output=True)
    assert json.loads(text(out["text_output"]))["unit"] in ("celsius", "fahrenheit")


# --------------------------------------------------------------------- embeddings
def _embed(http, body: dict) -> tuple[list[float], int]:
    result = http.infer("tiny_bert", [tensor(httpclient, "embedding_request", json.dumps(body)),
                                      tensor(httpclient, "return_num_input_tokens", True)])
    return json.loads(text(result.as_numpy("text_output"))), int(result.as_numpy("num_input_tokens")[0])


def _reference_embedding(assets, prompt: str) -> np.ndarray:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(assets.bert)
    model = AutoModel.from_pretrained(assets.bert).eval()
    batch = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state[0]
    vector = hidden.mean(dim=0).numpy()
    return vector / np.linalg.norm(vector)


def test_embeddings_match_mean_pooling(http, assets):
    vector, tokens = _embed(http, {"input": "Hello world", "pooling_params": {}})
    reference = _reference_embedding(assets, "Hello world")
    assert len(vector) == 32 and tokens == token_count(assets.bert, "Hello world")
    assert np.allclose(vector, reference, atol=1e-4)
    short, _ = _embed(http, {"input": "Hello world", "pooling_params": {"dimensions": [8]}})
    assert np.allclose(short, reference[:8] / np.linalg.norm(reference[:8]), atol=1e-4)
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(assets.bert)("Hello world").input_ids
    by_ids, _ = _embed(http, {"input": ids})
    assert np.allclose(by_ids, vector, atol=1e-5)


def test_concurrent_embeddings_are_batched(http, assets):
    before = stats(http, "tiny_bert")
    texts = [f"{p} number {i}" for i, p in enumerate(PROMPTS * 2)]
    futures = [http.async_infer("tiny_bert", [tensor(httpclient, "embedding_request", json.dumps({"input": t}))]) for t in texts]
    vectors = [json.loads(text(f.get_result().as_numpy("text_output"))) for f in futures]
    for t, vector in zip(texts[:3], vectors[:3]):  # padding inside a batch must not change a vector
        assert np.allclose(vector, _reference_embedding(assets, t), atol=1e-4)
    after = stats(http, "tiny_bert")
    assert after["inference_count"] - before["inference_count"] == len(texts)
    assert after["execution_count"] - before["execution_count"] <= len(texts)


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"temperature": -1}, "temperature must be non-negative, got -1.0."),
        ({"max_tokens": 0}, "max_tokens must be at least 1, got 0."),
        ({"top_p": 1.5}, "top_p must be in (0, 1], got 1.5."),
        ({"max_tokens": "many"}, "sampling parameter 'max_tokens' must be an integer"),
        ("{not json", "'sampling_parameters' is not valid JSON"),
        ({"guided_regex": "[0-9"}, "invalid guided decoding regex"),
        ({"guided_regex": "a", "guided_choice": ["a"]}, "only use one kind of structured outputs"),
    ],
)
def test_bad_sampling_parameters_are_400_and_server_keeps_serving(http, params, message):
    with pytest.raises(InferenceServerException) as error:
        http_generate(http, "tiny_llama_unary", PROMPTS[0], params)
    assert error.value.status() == "400" and message in error.value.message()
    assert http_generate(http, "tiny_llama_unary", PROMPTS[0], {"max_tokens": 1})["text_output"].shape == (1,)


def test_wrong_task_long_prompt_and_stream_rules(http, llm_server):
    with pytest.raises(InferenceServerException, match="Model tiny_llama_unary does not support 'embed' request"):
        http.infer("tiny_llama_unary", [tensor(httpclient, "text_input", "x"),
                                        tensor(httpclient, "embedding_request", json.dumps({"input": "x"}))])
    with pytest.raises(InferenceServerException, match="unexpected inference input 'text_input' for model 'tiny_bert'"):
        http.infer("tiny_bert", [tensor(httpclient, "text_input", "x"),
                                 tensor(httpclient, "embedding_request", json.dumps({"input": "x"}))])
    with pytest.raises(InferenceServerException, match="longer than the maximum model length of 512"):
        http_generate(http, "tiny_llama_unary", "Hello world " * 400, {"max_tokens": 1})
    with pytest.raises(InferenceServerException, match="streaming needs"):
        http_generate(http, "tiny_llama_unary", "Hi", {"max_tokens": 1}, stream=True, exclude_input_in_output=True)
    stream = Stream(llm_server.grpc_url)
    try:
        stream.send("tiny_llama", "Hi", {"max_tokens": 1}, stream=True, exclude_input_in_output=False)
        _, error = stream.next()
    finally:
        stream.close()
    assert "When streaming, `exclude_input_in_output` = False is not allowed." in str(error)


def test_vllm_model_is_unavailable_with_a_reason_here(http):
    try:
        import torch
        import vllm  # noqa: F401

        if torch.cuda.is_available():
            pytest.skip("vLLM and a GPU are present: covered by tests/gpu")
    except ImportError:
        pass
    with pytest.raises(InferenceServerException) as error:
        http.load_model("tiny_llama_vllm")
    assert "vllm" in error.value.message().lower()
    rows = {row["name"]: row for row in http.get_model_repository_index()}
    assert rows["tiny_llama_vllm"]["state"] == "UNAVAILABLE"
    assert "vllm" in rows["tiny_llama_vllm"]["reason"].lower()


def test_grpc_client_reads_config_like_http(llm_server):
    client = grpcclient.InferenceServerClient(llm_server.grpc_url)
    config = client.get_model_config("tiny_llama", as_json=True)["config"]
    assert config["model_transaction_policy"]["decoupled"] is True
    assert config["backend"] == "transformers"

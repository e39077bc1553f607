"""Frontend pieces without a server: chat-template errors, LoRA names, token budgets, schema errors."""

from __future__ import annotations

import json
import shutil

import pytest

from openinfer.core.errors import InternalError, InvalidArgumentError
from openinfer.core.repository.text_model import adapter_names
from openinfer.frontends.openai.catalog import ModelInfo
from openinfer.frontends.openai.chat.protocol import ChatCompletionRequest
from openinfer.frontends.openai.lora import split_name
from openinfer.frontends.openai.protocol import parse_request
from openinfer.frontends.openai.sampling import build_sampling, token_limit
from openinfer.frontends.openai.tokenizer import render_chat


def _info(**kwargs) -> ModelInfo:
    base = {"name": "m", "version": "1", "backend": "python", "kind": "generate", "created": 1, "inputs": {},
            "outputs": set(), "batched": False, "decoupled": True, "source_dir": None, "tokenizer_dir": None}
    base.update(kwargs)
    return ModelInfo(**base)


def test_tokenizer_without_template_is_a_server_error(tokenizer_dir, tmp_path):
    from transformers import AutoTokenizer

    bare = tmp_path / "bare"
    shutil.copytree(tokenizer_dir, bare)
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    for extra in bare.glob("chat_template*"):
        extra.unlink()
    tokenizer = AutoTokenizer.from_pretrained(str(bare))
    with pytest.raises(InternalError, match="chat template|chat_template"):
        render_chat(tokenizer, [{"role": "user", "content": "hi"}], tools=None, add_generation_prompt=True,
                    continue_final_message=False, template=None, kwargs=None)
    text = render_chat(tokenizer, [{"role": "user", "content": "hi"}], tools=None, add_generation_prompt=True,
                       continue_final_message=False, template="{{ messages[0]['content'] }}!", kwargs=None)
    assert text == "hi!"
    with pytest.raises(InvalidArgumentError, match="template"):
        render_chat(tokenizer, [{"role": "user", "content": "hi"}], tools=None, add_generation_prompt=True,
                    continue_final_message=False, template="{{ raise_exception('nope') }}", kwargs=None)


def test_lora_names(tmp_path):
    assert split_name("base_lora_doll", "_lora_") == ("base", "doll")
    assert split_name("base_lora_doll", None) == ("base_lora_doll", None)
    assert split_name("a_lora_b_lora_c", "_lora_") == ("a_lora_b_lora_c", None)
    assert split_name("_lora_x", "_lora_") == ("_lora_x", None)
    (tmp_path / "multi_lora.json").write_text(json.dumps({"doll": "d", "sheep": "s"}))
    assert adapter_names(tmp_path) == ("doll", "sheep")
    (tmp_path / "model.json").write_text(json.dumps({"enable_lora": "FALSE"}))
    assert adapter_names(tmp_path) == ()
    (tmp_path / "model.json").write_text("{not json")
    assert adapter_names(tmp_path) == ("doll", "sheep")


def test_token_limit():
    info = _info(max_model_len=100, generation_defaults={"max_tokens": 30})
    assert token_limit(None, None, info, 10, "prompt") == 30  # generation_config
    assert token_limit(None, 50, info, 10, "prompt") == 50  # --default-max-tokens
    assert token_limit(None, None, info, 80, "prompt") == 20  # capped by the context
    assert token_limit(90, None, info, 10, "prompt") == 90
    with pytest.raises(InvalidArgumentError, match=r"\(91 > 100 - 10\)"):
        token_limit(91, None, info, 10, "prompt")
    with pytest.raises(InvalidArgumentError, match="maximum context length is 100 tokens"):
        token_limit(None, None, info, 100, "prompt")
    assert token_limit(None, None, _info(), None, "prompt") is None  # unknown context: the backend decides


def test_sampling_parameters():
    req = ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": "a", "seed": 4, "top_p": 0.5}
    )
    info = _info(generation_defaults={"temperature": 0.3, "top_p": 0.9})
    params = build_sampling(req, info, max_tokens=7, lora="doll", logprobs=2, seed_offset=1,
                            guided={"guided_regex": "x+"})
    assert params == {"temperature": 0.3, "top_p": 0.5, "max_tokens": 7, "stop": ["a"], "seed": 5,
                      "logprobs": 2, "lora_name": "doll", "guided_regex": "x+"}


def test_schema_errors_name_the_field_and_truncate_inputs():
    with pytest.raises(InvalidArgumentError) as info:
        parse_request(ChatCompletionRequest, {"model": "m", "messages": [{"role": "robot", "content": "x" * 500}]})
    error = info.value
    assert error.param == "messages" and "1 validation error" in error.message and len(error.message) < 600
    with pytest.raises(InvalidArgumentError) as info:
        parse_request(ChatCompletionRequest, ["not", "an", "object"])
    assert "JSON object" in info.value.message


async def test_embedding_group_and_bearer_keys_in_process():
    """`embedding` restricts /v1/embeddings on its own; without it `inference` covers embeddings."""
    from openinfer.frontends.access import AccessPolicy, Restriction
    from openinfer.frontends.openai.middleware import Access

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def status(middleware, path: str, headers: dict[str, str]) -> int:
        sent: list[dict] = []

        async def send(message, sent=sent):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": path,
                 "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
        await middleware(scope, None, send)
        return sent[0]["status"]

    both = Access(app, AccessPolicy({"embedding": Restriction("e-key", "e"), "inference": Restriction("i-key", "i")}), [])
    assert await status(both, "/v1/embeddings", {"e-key": "e"}) == 200
    assert await status(both, "/v1/embeddings", {"i-key": "i"}) == 401
    assert await status(both, "/v1/completions", {"i-key": "i"}) == 200
    inference_only = Access(app, AccessPolicy({"inference": Restriction("i-key", "i")}), [])
    assert await status(inference_only, "/v1/embeddings", {}) == 401
    assert await status(inference_only, "/v1/embeddings", {"i-key": "i"}) == 200
    keyed = Access(app, AccessPolicy(), ["k1", "k2"])
    assert await status(keyed, "/v1/completions", {"authorization": "Bearer k2"}) == 200
    assert await status(keyed, "/v1/completions", {"authorization": "Bearer k3"}) == 401
    assert await status(keyed, "/tokenize", {}) == 401
    assert await status(keyed, "/health/ready", {}) == 200


def test_request_formats():
    """vLLM layout: one JSON `sampling_parameters`; TensorRT-LLM layout: a tensor per knob."""
    from openinfer.frontends.openai.catalog import TensorShape
    from openinfer.frontends.openai.engine import GenerateCall, build_request

    call = GenerateCall("hi", {"max_tokens": 5, "temperature": 0.5, "stop": ["x"], "guided_json": {"type": "object"}}, stream=True)
    vllm = _info(inputs={name: TensorShape(t, [1]) for name, t in (
        ("text_input", "BYTES"), ("stream", "BOOL"), ("sampling_parameters", "BYTES"), ("exclude_input_in_output", "BOOL"))})
    request = build_request(vllm, call)
    tensors = {t.name: t for t in request.inputs}
    assert set(tensors) == {"text_input", "stream", "sampling_parameters", "exclude_input_in_output"}
    assert json.loads(tensors["sampling_parameters"].data[0]) == call.sampling
    assert tensors["stream"].data.tolist() == [True] and tensors["exclude_input_in_output"].data.tolist() == [True]
    trt = _info(request_format="tensorrtllm", batched=True, inputs={name: TensorShape(t, [1]) for name, t in (
        ("text_input", "BYTES"), ("max_tokens", "INT32"), ("temperature", "FP32"), ("stop_words", "BYTES"),
        ("stream", "BOOL"), ("guided_decoding_guide_type", "BYTES"), ("guided_decoding_guide", "BYTES"))})
    tensors = {t.name: t for t in build_request(trt, call).inputs}
    assert tensors["text_input"].shape == (1, 1) and tensors["max_tokens"].data.tolist() == [[5]]
    assert tensors["max_tokens"].data.dtype.name == "int32" and tensors["stop_words"].data.tolist() == [[b"x"]]
    assert tensors["guided_decoding_guide_type"].data.tolist() == [[b"json_schema"]]
    assert json.loads(tensors["guided_decoding_guide"].data[0][0]) == {"type": "object"}


def test_restricted_api_flag_forms():
    """Three arguments (Triton's argparse) or one quoted string (Triton's README examples)."""
    from openinfer.app.cli import serve_parser
    from openinfer.frontends.openai.options import parse_restrictions

    args = serve_parser().parse_args([
        "--model-repository", "r",
        "--openai-restricted-api", "inference api-key my-secret-key",
        "--openai-restricted-api", "model-repository,metrics", "admin-key", "admin-value",
    ])
    rules = parse_restrictions(args.openai_restricted_api).rules
    assert {api: (r.key, r.value) for api, r in rules.items()} == {
        "inference": ("api-key", "my-secret-key"),
        "model-repository": ("admin-key", "admin-value"),
        "metrics": ("admin-key", "admin-value"),
    }
    with pytest.raises(ValueError, match="got 2 word") as info:
        parse_restrictions([["inference", "secret-value"]])
    assert "secret-value" not in str(info.value)

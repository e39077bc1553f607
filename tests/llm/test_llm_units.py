"""The LLM backends' pure parts, without a server: sampling parameters, tensor rules, text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from openinfer._proto import model_config_pb2 as mc
from openinfer.backends.llm import interface
from openinfer.backends.llm.detokenizer import IncrementalDetokenizer, find_stop
from openinfer.backends.llm.sampling import load_parameters, parse_sampling
from openinfer.core.errors import InvalidArgumentError
from openinfer.core.repository.text_model import generation_defaults
from openinfer.core.types import InferRequest, Tensor


def _request(**inputs) -> InferRequest:
    tensors = []
    for name, value in inputs.items():
        if isinstance(value, str):
            tensors.append(Tensor(name, "BYTES", (1,), np.array([value.encode()], dtype=object)))
        else:
            tensors.append(Tensor(name, "BOOL", (1,), np.array([value])))
    return InferRequest("m", inputs=tensors)


# ----------------------------------------------------------------------- sampling
def test_sampling_defaults_are_vllms_and_generation_config_fills_gaps():
    params = parse_sampling({})
    assert (params.max_tokens, params.temperature, params.top_p, params.top_k, params.n) == (16, 1.0, 1.0, 0, 1)
    defaults = generation_defaults({"temperature": 0.3, "max_new_tokens": 7, "do_sample": True, "top_k": 20})
    assert defaults == {"temperature": 0.3, "max_tokens": 7, "top_k": 20}
    params = parse_sampling({"temperature": 0.9}, defaults)
    assert (params.temperature, params.max_tokens, params.top_k) == (0.9, 7, 20)


def test_sampling_values_are_coerced_like_tritons_backend():
    params = parse_sampling({"max_tokens": "12", "temperature": "0", "ignore_eos": "true", "stop": "END",
                             "seed": 3.0, "top_k": -1, "unknown_key": [1, 2]})
    assert (params.max_tokens, params.temperature, params.ignore_eos, params.stop, params.seed, params.top_k) == (
        12, 0.0, True, ["END"], 3, 0)
    assert params.greedy


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n": 0}, "n must be at least 1, got 0."),
        ({"min_p": 2}, "min_p must be in [0, 1], got 2.0."),
        ({"presence_penalty": 3}, "presence_penalty must be in [-2, 2], got 3.0."),
        ({"repetition_penalty": 0}, "repetition_penalty must be greater than zero, got 0.0."),
        ({"min_tokens": 5, "max_tokens": 2}, "min_tokens must be less than or equal to max_tokens=2, got 5."),
        ({"top_k": -3}, "top_k must be 0 (disable), or at least 1, got -3."),
        ({"stop": 5}, "sampling parameter 'stop' must be a string or a list of strings, got 5"),
        ({"guided_choice": []}, "sampling parameter 'guided_choice' must be a non-empty list of strings"),
        ({"structured_outputs": "{bad"}, "sampling parameter 'structured_outputs' is not valid JSON"),
    ],
)
def test_sampling_rejects_bad_values_with_vllms_messages(params, message):
    with pytest.raises(InvalidArgumentError) as error:
        parse_sampling(params)
    assert message in error.value.message


def test_guided_spellings_all_lead_to_one_constraint():
    schema = {"type": "object"}
    assert parse_sampling({"guided_json": schema}).guided.value == schema
    assert parse_sampling({"guided_json": json.dumps(schema)}).guided.value == schema
    spec = parse_sampling({"structured_outputs": json.dumps({"json": json.dumps(schema)})}).guided
    assert spec.kind == "json" and json.loads(spec.schema_text()) == schema
    assert parse_sampling({"guided_decoding": {"regex": "a+"}}).guided.kind == "regex"
    assert parse_sampling({"structured_outputs": {"json_object": True}}).guided.schema_text() == '{"type": "object"}'
    assert parse_sampling({"guided_choice": ["a", "b"]}).guided.value == ["a", "b"]


def test_parameters_come_from_the_tensor_or_the_request():
    assert load_parameters(b'{"max_tokens": 3}') == {"max_tokens": 3}
    assert load_parameters({"max_tokens": 3}) == {"max_tokens": 3}
    assert load_parameters("") == {}
    with pytest.raises(InvalidArgumentError, match="must be a JSON object"):
        load_parameters("[1]")


# ------------------------------------------------------------------------ tensors
def test_prompt_prepended_only_when_not_streaming():
    assert interface.parse_generate(_request(text_input="hi")).prepend_input is True
    assert interface.parse_generate(_request(text_input="hi", stream=True)).prepend_input is False
    assert interface.parse_generate(_request(text_input="hi", exclude_input_in_output=True)).prepend_input is False
    with pytest.raises(InvalidArgumentError, match="When streaming, `exclude_input_in_output` = False"):
        interface.parse_generate(_request(text_input="hi", stream=True, exclude_input_in_output=False))


def test_request_parameters_stand_in_for_the_sampling_tensor():
    request = _request(text_input="hi")
    request.parameters = {"max_tokens": 4}
    assert interface.parse_generate(request).parameters == {"max_tokens": 4}


def test_embedding_request_parsing():
    parsed = interface.parse_embed(_request(embedding_request=json.dumps({"input": [1, 2], "pooling_params": {"dimensions": [4]}})))
    assert (parsed.input, parsed.dimensions) == ([1, 2], 4)
    for body in ({"input": ""}, {"input": []}, {"nothing": 1}, {"input": "x", "pooling_params": {"dimensions": 0}}):
        with pytest.raises(InvalidArgumentError):
            interface.parse_embed(_request(embedding_request=json.dumps(body)))


def test_auto_complete_keeps_what_the_user_wrote():
    config = mc.ModelConfig(backend="transformers")
    config.input.add(name="text_input", data_type=mc.TYPE_STRING, dims=[1])
    config.model_transaction_policy.decoupled = False
    interface.auto_complete(config, force_decoupled=False)
    assert [t.name for t in config.input].count("text_input") == 1
    assert len(config.input) == len(interface.INPUTS) and len(config.output) == len(interface.OUTPUTS)
    assert config.model_transaction_policy.decoupled is False
    interface.auto_complete(config, force_decoupled=True)
    assert config.model_transaction_policy.decoupled is True


def test_outputs_have_one_element_per_sequence():
    returns = interface.Returns(finish_reason=True, num_input_tokens=True, num_output_tokens=True)
    outputs = interface.generation_outputs(returns, ["a", "bc"], finish_reasons=[None, "stop"],
                                           num_input_tokens=3, num_output_tokens=[1, 2])
    by_name = {t.name: t for t in outputs}
    assert by_name["finish_reason"].data.tolist() == [b"None", b"stop"]
    assert by_name["num_output_tokens"].data.dtype == np.uint32 and by_name["num_output_tokens"].shape == (2,)
    assert by_name["num_input_tokens"].data.tolist() == [3]


# --------------------------------------------------------------------------- text
class _Bytes:
    """A tokenizer whose tokens are single bytes: multi-byte characters span tokens."""

    def decode(self, ids, **_):
        return bytes(ids).decode("utf-8", errors="replace")


def test_detokenizer_waits_for_whole_characters():
    detok = IncrementalDetokenizer(_Bytes(), list(b"ab"))
    pieces = [detok.add(b) for b in "é€!".encode()]
    assert pieces == ["", "é", "", "", "€", "!"]


def test_stop_strings_found_across_deltas():
    assert find_stop("hello wor", 7, ["wor"]) == (6, "wor")
    assert find_stop("hello", 3, ["xyz"]) is None
    assert find_stop("a stop b end", 0, ["end", "stop"]) == (2, "stop")


# ------------------------------------------------------------------------ sampler
class _Row:
    def __init__(self, params, generated=(), seed=None, logprobs=False):
        import torch

        self.params = params
        self.generator = torch.Generator().manual_seed(seed) if seed is not None else None
        self.matcher = None
        self.prompt_ids = [0]
        self.generated = list(generated)
        self.wants_logprobs = logprobs


def test_sampler_filters_and_seeds():
    import torch

    from openinfer.backends.llm.sampler import sample

    logits = torch.tensor([[0.0, 3.0, 2.9, -1.0, 1.0]])
    assert sample(logits, [_Row(parse_sampling({"temperature": 0}))], [4])[0].token == 1
    # top_p keeps the smallest set reaching p: only tokens 1 and 2 can come out
    drawn = {sample(logits, [_Row(parse_sampling({"temperature": 1.0, "top_p": 0.6}), seed=s)], [4])[0].token
             for s in range(40)}
    assert drawn == {1, 2}
    drawn = {sample(logits, [_Row(parse_sampling({"temperature": 5.0, "top_k": 2}), seed=s)], [4])[0].token
             for s in range(40)}
    assert drawn == {1, 2}
    same = [sample(logits, [_Row(parse_sampling({"temperature": 1.0}), seed=7)], [4])[0].token for _ in range(5)]
    assert len(set(same)) == 1  # a seed fixes the draw


def test_sampler_penalties_min_tokens_bias_and_logprobs():
    import torch

    from openinfer.backends.llm.sampler import sample

    logits = torch.tensor([[0.0, 3.0, 2.9, -1.0, 1.0]])
    # token 1 was generated before: a presence penalty lets token 2 win
    row = _Row(parse_sampling({"temperature": 0, "presence_penalty": 1.0}), generated=[1])
    assert sample(logits, [row], [4])[0].token == 2
    row = _Row(parse_sampling({"temperature": 0, "logit_bias": {"4": 10}}))
    assert sample(logits, [row], [4])[0].token == 4
    # EOS (token 1 here) is blocked until min_tokens are out
    row = _Row(parse_sampling({"temperature": 0, "min_tokens": 2, "max_tokens": 4}), generated=[3])
    assert sample(logits, [row], [1])[0].token == 2
    row = _Row(parse_sampling({"temperature": 0, "logprobs": 2}), logprobs=True)
    choice = sample(logits, [row], [4])[0]
    expected = torch.log_softmax(logits[0], dim=-1)
    assert choice.rank == 1 and choice.logprob == pytest.approx(float(expected[1]))
    assert [t for t, _, _ in choice.top] == [1, 2]


def test_min_tokens_blocks_inside_the_shared_greedy_argmax():
    import torch

    from openinfer.backends.llm.sampler import sample

    logits = torch.tensor([[0.0, 3.0, 2.9, -1.0, 1.0]]).expand(3, -1)  # a prefill's n rows share one
    blocked = _Row(parse_sampling({"temperature": 0, "min_tokens": 2, "max_tokens": 4}))
    done = _Row(parse_sampling({"temperature": 0, "min_tokens": 1, "max_tokens": 4}), generated=[3])
    stop_ids = _Row(
        parse_sampling({"temperature": 0, "min_tokens": 3, "stop_token_ids": [2], "max_tokens": 4})
    )
    # EOS (1) and the request's stop ids stay out until min_tokens; the model's output is untouched
    assert [c.token for c in sample(logits, [blocked, done, stop_ids], [1])] == [2, 1, 4]
    assert logits[0, 1] == 3.0
    plain = _Row(parse_sampling({"temperature": 0}))
    assert [c.token for c in sample(logits[:2], [plain, blocked], [1])] == [1, 2]


# ----------------------------------------------------------------------- KV cache
def _cache(rows: int, length: int, fill: float):
    import torch
    from transformers import DynamicCache

    cache = DynamicCache()
    cache.update(torch.full((rows, 2, length, 4), fill), torch.full((rows, 2, length, 4), fill), 0)
    return cache


def test_kv_cache_has_a_mask_only_while_rows_are_padded():
    from openinfer.backends.llm import kv_cache

    cache, mask = kv_cache.merge(None, None, _cache(1, 5, 1.0), None)
    cache, mask = kv_cache.merge(cache, mask, _cache(1, 5, 2.0), None)
    assert mask is None and cache.layers[0].keys.shape[:3] == (2, 2, 5)  # equal lengths: no padding
    cache, mask = kv_cache.merge(cache, mask, _cache(1, 3, 3.0), None)
    assert mask.tolist() == [[1] * 5, [1] * 5, [0, 0, 1, 1, 1]]
    assert float(cache.layers[0].keys[2, 0, 0, 0]) == 0.0  # padded columns are zeros, left of the row
    cache, padded = kv_cache.select(cache, mask, [0, 2])
    assert padded.tolist() == [[1] * 5, [0, 0, 1, 1, 1]]
    cache, mask = kv_cache.select(cache, padded, [1])
    assert mask is None and cache.layers[0].keys.shape[2] == 3  # padding trimmed away with the mask
    cache, mask = kv_cache.select(cache, mask, [0, 0, 0])  # n > 1: copies of one prefill
    assert mask is None and cache.layers[0].keys.shape[0] == 3


def test_kv_cache_settles_a_padded_prefill_into_left_padding():
    import torch

    from openinfer.backends.llm import kv_cache

    cache = _cache(2, 5, 1.0)
    cache.layers[0].keys[1] = torch.arange(5.0)[None, :, None]  # row 1: a gap at columns 2-3
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 0, 0, 1]])
    cache, mask = kv_cache.settle(cache, mask)
    assert mask is None  # both rows end with their 3 columns; the padding columns are dropped
    assert cache.layers[0].keys[1, 0, :, 0].tolist() == [0.0, 1.0, 4.0]  # in their order
    cache = _cache(2, 5, 1.0)
    cache, mask = kv_cache.settle(cache, torch.tensor([[0, 1, 1, 1, 1], [1, 0, 0, 1, 1]]))
    assert mask.tolist() == [[1, 1, 1, 1], [0, 1, 1, 1]]
    assert cache.layers[0].values[1, 0, :, 0].tolist() == [0.0, 1.0, 1.0, 1.0]  # padding zeroed


def test_fast_detokenizer_decodes_like_the_tokenizer():
    from transformers import AutoTokenizer

    from tests.llm_fixtures import llm_assets

    tokenizer = AutoTokenizer.from_pretrained(llm_assets().llama)
    text = '<|start_header_id|>Hello world! {"name": 3.14} é€<|eot_id|> done'
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    for skip in (True, False):
        fast = IncrementalDetokenizer(tokenizer, ids[:2], skip_special_tokens=skip)
        slow = IncrementalDetokenizer(tokenizer, ids[:2], skip_special_tokens=skip)
        slow.backend = None  # through the Python wrapper
        assert fast.backend is not None
        assert [fast.add(i) for i in ids[2:]] == [slow.add(i) for i in ids[2:]]

"""The engine's own Llama decode step against transformers' forward, on the tiny Llama.

The tiny Llama has grouped-query attention (4 heads over 2 key/value heads), so the shared heads
are covered. Each comparison runs the same steps through two caches that start from one prefill,
one per path, with rows of different lengths (a padded batch, as the engine runs it).
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, DynamicCache  # noqa: E402

from openinfer.backends.llm import hf_model, llama_decode  # noqa: E402
from openinfer.backends.llm.model_files import ModelFiles  # noqa: E402
from tests.llm.test_engine_prefill import GREEDY, PROMPTS, Run  # noqa: E402
from tests.llm_fixtures import llm_assets  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return AutoModelForCausalLM.from_pretrained(str(llm_assets().llama), dtype=torch.float32).eval()


def _prefill(model, prompts: list[list[int]]) -> tuple[DynamicCache, torch.Tensor, torch.Tensor]:
    """The prompts left-padded into one batch: its cache, attention mask and next tokens."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True)
    return cache, mask, out.logits[:, -1, :].argmax(-1, keepdim=True)


def test_a_plain_llama_gets_the_decoder_and_a_wrapped_one_does_not(model):
    assert isinstance(llama_decode.decoder_for(model), llama_decode.LlamaDecoder)
    wrapped = copy.deepcopy(model)
    wrapped.model.layers[1].mlp = torch.nn.Sequential(wrapped.model.layers[1].mlp)
    assert llama_decode.decoder_for(wrapped) is None  # a module it does not know: transformers' forward
    silu = copy.deepcopy(model)
    silu.config.hidden_act = "gelu"
    assert llama_decode.decoder_for(silu) is None
    assert llama_decode.decoder_for(torch.nn.Linear(2, 2)) is None


def test_decode_steps_give_transformers_logits_over_a_padded_batch(model):
    decoder = llama_decode.decoder_for(model)
    prompts = [[5, 9, 11], [7, 3, 8, 12, 30, 4, 2], [14, 15]]
    with torch.inference_mode():
        theirs, mask, token = _prefill(model, prompts)
        ours = copy.deepcopy(theirs)
        our_token = token
        positions = torch.tensor([[len(p)] for p in prompts])
        for _ in range(6):
            mask = torch.cat([mask, torch.ones(len(prompts), 1, dtype=torch.long)], dim=1)
            expected = model(input_ids=token, position_ids=positions, attention_mask=mask, cache=theirs,
                             use_cache=True).logits[:, -1, :]
            got = decoder(our_token, positions, ours, mask)
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
            token, our_token = expected.argmax(-1, keepdim=True), got.argmax(-1, keepdim=True)
            assert torch.equal(token, our_token)
            positions = positions + 1
        for layer in range(len(model.model.layers)):  # the same keys and values were cached
            torch.testing.assert_close(ours.layers[layer].keys, theirs.layers[layer].keys)
            torch.testing.assert_close(ours.layers[layer].values, theirs.layers[layer].values)


def test_a_prefill_of_prompts_of_one_length_gives_transformers_logits_and_cache(model):
    decoder = llama_decode.decoder_for(model)
    ids = torch.tensor([[5, 9, 11, 40, 41], [7, 3, 8, 12, 30]])
    with torch.inference_mode():
        theirs, ours = DynamicCache(), DynamicCache()
        expected = model(input_ids=ids, cache=theirs, use_cache=True).logits[:, -1, :]
        torch.testing.assert_close(decoder.prefill(ids, ours), expected, rtol=1e-5, atol=1e-5)
        for layer in range(len(model.model.layers)):
            torch.testing.assert_close(ours.layers[layer].keys, theirs.layers[layer].keys)
            torch.testing.assert_close(ours.layers[layer].values, theirs.layers[layer].values)


def _tiny(family: str, **extra):
    """A random two-layer model of `family` (Llama's layer shape), grouped-query heads."""
    import transformers

    config = getattr(transformers, f"{family}Config")(
        vocab_size=120, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, **extra,
    )
    torch.manual_seed(0)
    return getattr(transformers, f"{family}ForCausalLM")(config).eval()


@pytest.mark.parametrize("family, extra", [("Mistral", {"sliding_window": None}), ("Qwen2", {})])
def test_mistral_and_qwen2_without_a_sliding_window_compute_as_transformers(family, extra):
    model = _tiny(family, **extra)
    decoder = llama_decode.decoder_for(model)
    assert decoder is not None
    if family == "Qwen2":
        assert model.model.layers[0].self_attn.q_proj.bias is not None  # its biases are used
    prompts = [[5, 9, 11], [7, 3, 8, 12, 30]]
    with torch.inference_mode():
        theirs, mask, token = _prefill(model, prompts)
        ours = copy.deepcopy(theirs)
        positions = torch.tensor([[len(p)] for p in prompts])
        mask = torch.cat([mask, torch.ones(len(prompts), 1, dtype=torch.long)], dim=1)
        expected = model(input_ids=token, position_ids=positions, attention_mask=mask, cache=theirs,
                         use_cache=True).logits[:, -1, :]
        torch.testing.assert_close(decoder(token, positions, ours, mask), expected, rtol=1e-5, atol=1e-5)
        ids = torch.tensor([[5, 9, 11, 40]])
        expected = model(input_ids=ids, cache=DynamicCache(), use_cache=True).logits[:, -1, :]
        torch.testing.assert_close(decoder.prefill(ids, DynamicCache()), expected, rtol=1e-5, atol=1e-5)


def test_a_sliding_window_keeps_transformers_forward():
    assert llama_decode.decoder_for(_tiny("Mistral", sliding_window=16)) is None
    assert llama_decode.decoder_for(_tiny("Qwen2", use_sliding_window=True, sliding_window=16)) is None


def test_rows_of_one_length_need_no_mask(model):
    decoder = llama_decode.decoder_for(model)
    with torch.inference_mode():
        theirs, mask, token = _prefill(model, [[5, 9, 11], [7, 3, 8]])
        ours = copy.deepcopy(theirs)
        positions = torch.tensor([[3], [3]])
        expected = model(input_ids=token, position_ids=positions, cache=theirs, use_cache=True).logits[:, -1, :]
        torch.testing.assert_close(decoder(token, positions, ours, None), expected, rtol=1e-5, atol=1e-5)


async def test_the_engine_gives_the_same_tokens_with_transformers_decode():
    path = str(llm_assets().llama)

    def load(**extra):
        lm = hf_model.load(ModelFiles(path, path, {"model": path, "cpu_threads": 1, **extra}), "tiny_llama")
        hf_model.warm_up(lm)
        return lm

    ours, theirs = load(), load(llama_decode=False)
    assert ours.decoder is not None and theirs.decoder is None
    steps: list[int] = []  # rows of each decode step through the decoder
    prefills: list[int] = []  # rows of each prefill through it

    class Counting:
        def __init__(self, decoder: llama_decode.LlamaDecoder) -> None:
            self.decoder = decoder

        def __call__(self, ids, *rest):
            steps.append(len(ids))
            return self.decoder(ids, *rest)

        def prefill(self, ids, cache):
            prefills.append(len(ids))
            return self.decoder.prefill(ids, cache)

    ours.decoder = Counting(ours.decoder)

    params = {**GREEDY, "max_tokens": 12}
    mine = await Run(ours, prefix_cache=None).together(PROMPTS, params)
    assert mine == await Run(theirs, prefix_cache=None).together(PROMPTS, params)
    assert all(len(tokens) == 12 for tokens in mine)
    assert steps and max(steps) == len(PROMPTS)  # the decode steps of the whole batch ran through it
    assert not prefills  # prompts of different lengths: a padded prefill, transformers' forward
    alone = await Run(ours, prefix_cache=None).one_by_one(PROMPTS, params)
    assert alone == await Run(theirs, prefix_cache=None).one_by_one(PROMPTS, params)
    assert prefills == [1] * len(PROMPTS)  # one prompt at a time: each through the decoder

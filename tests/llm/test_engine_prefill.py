"""The generation engine in process, on the tiny Llama: batched prefill and the prefix cache.

Each test compares greedy tokens between two paths of the real engine (one request at a time
against several at once, the prefix cache against none), so what is checked is that batching and
reuse change nothing but the work done. The execution records the engine hands the loop (one per
forward pass, with its row count) show which passes ran.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from openinfer.backends.llm import hf_model  # noqa: E402
from openinfer.backends.llm.engine import GenerationEngine, Group  # noqa: E402
from openinfer.backends.llm.interface import parse_generate  # noqa: E402
from openinfer.backends.llm.model_files import ModelFiles  # noqa: E402
from openinfer.backends.llm.prefix_cache import BLOCK_TOKENS, PrefixCache  # noqa: E402
from openinfer.backends.llm.sampling import parse_sampling  # noqa: E402
from openinfer.core.requests.responses import StreamSender  # noqa: E402
from openinfer.core.types import InferRequest, Tensor  # noqa: E402
from tests.llm_fixtures import llm_assets  # noqa: E402

PROMPTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog. Machine learning is a field of study.",
    "Numbers: 1 2 3",
    "Tell me a story about a cat.",
]
SYSTEM = (
    "You are a helpful assistant of an inference server. Inference servers answer requests from "
    "many clients at once, batching them together. The wheel was invented in Mesopotamia. "
)
GREEDY = {"temperature": 0, "ignore_eos": True, "max_tokens": 6}


@pytest.fixture(scope="module")
def lm():
    path = str(llm_assets().llama)
    model = hf_model.load(ModelFiles(path, path, {"model": path, "cpu_threads": 1}), "tiny_llama")
    hf_model.warm_up(model)
    return model


def _tensor(name: str, value: object) -> Tensor:
    if isinstance(value, str):
        return Tensor(name, "BYTES", (1,), np.array([value.encode()], dtype=object))
    return Tensor(name, "BOOL", (1,), np.array([value]))


def _group(prompt: str, params: dict) -> Group:
    request = InferRequest("tiny_llama", inputs=[
        _tensor("text_input", prompt),
        _tensor("stream", True),
        _tensor("sampling_parameters", json.dumps(params)),
        _tensor("return_num_input_tokens", True),
    ])
    return Group(request.id, parse_generate(request), parse_sampling(params), StreamSender(request), None)


class Run:
    """One engine over `lm`: requests submitted together (before its thread starts, so its
    first step sees them all) or one after the other."""

    def __init__(self, lm, **options) -> None:
        self.engine = GenerationEngine("tiny_llama", lm, asyncio.get_running_loop(), None, **options)
        self.passes: list[int] = []  # rows of every forward pass, in order
        self.engine.on_step = lambda outbox: self.passes.extend(rows for rows, _ in outbox.executions)
        self.cached: dict[int, int] = {}  # request index -> num_cached_tokens reported

    async def _finish(self, index: int, group: Group) -> list[int]:
        async for response in group.sender:
            if "num_cached_tokens" in response.parameters:
                self.cached.setdefault(index, int(response.parameters["num_cached_tokens"]))
        return group.sequences[0].generated

    async def together(self, prompts: list[str], params: dict = GREEDY) -> list[list[int]]:
        groups = [_group(p, params) for p in prompts]
        for group in groups:
            self.engine.submit(group)
        self.engine.start()
        try:
            return list(await asyncio.gather(*(self._finish(i, g) for i, g in enumerate(groups))))
        finally:
            await self.engine.stop()

    async def one_by_one(self, prompts: list[str], params: dict = GREEDY) -> list[list[int]]:
        self.engine.start()
        try:
            tokens = []
            for index, prompt in enumerate(prompts):
                group = _group(prompt, params)
                self.engine.submit(group)
                tokens.append(await self._finish(index, group))
            return tokens
        finally:
            await self.engine.stop()


# ----------------------------------------------------------------------- batched prefill
async def test_a_burst_is_prefilled_in_one_pass_with_the_tokens_of_lone_requests(lm):
    alone = await Run(lm, prefix_cache=None).one_by_one(PROMPTS)
    burst = Run(lm, prefix_cache=None)
    together = await burst.together(PROMPTS)
    assert together == alone
    assert all(len(tokens) == GREEDY["max_tokens"] for tokens in together)
    # one prefill of every prompt, then decode steps of the whole batch
    assert burst.passes[:3] == [len(PROMPTS), len(PROMPTS), len(PROMPTS)]


def _record_turns(engine: GenerationEngine, asked: list[tuple[int, bool]]) -> None:
    """Note, at every hand-over to the loop, how many sequences ran and whether the engine waited."""
    decide = engine.takes_turns

    def takes_turns() -> bool:
        asked.append((len(engine._rows), decide()))
        return asked[-1][1]

    engine.takes_turns = takes_turns


async def test_the_engine_waits_for_the_loops_turn_only_after_a_step_of_one_sequence(lm):
    asked: list[tuple[int, bool]] = []
    burst, alone = Run(lm, prefix_cache=None), Run(lm, prefix_cache=None)
    _record_turns(burst.engine, asked)
    _record_turns(alone.engine, asked)
    assert await burst.together(PROMPTS) == await alone.one_by_one(PROMPTS)  # the same tokens either way
    assert {waited for rows, waited in asked if rows > 1} == {False}  # several streams: the loop delivers meanwhile
    assert {waited for rows, waited in asked if rows <= 1} == {True}


async def test_the_token_budget_splits_a_burst_into_several_prefills(lm):
    budget = Run(lm, prefix_cache=None, max_num_batched_tokens=1)
    tokens = await budget.together(PROMPTS)
    assert tokens == await Run(lm, prefix_cache=None).one_by_one(PROMPTS)
    # a budget below any prompt: one prompt per prefill pass, all of them before the first decode
    assert budget.passes[:6] == [1, 1, 1, 1, len(PROMPTS), len(PROMPTS)]


async def test_n_samples_and_a_mixed_burst_share_one_prefill(lm):
    seeded = {"temperature": 1.0, "seed": 7, "max_tokens": 5, "ignore_eos": True, "n": 3}
    runs = Run(lm, prefix_cache=None)
    groups = [_group(PROMPTS[1], seeded), _group(PROMPTS[0], GREEDY)]
    for group in groups:
        runs.engine.submit(group)
    runs.engine.start()
    try:
        for group in groups:
            async for _ in group.sender:
                pass
    finally:
        await runs.engine.stop()
    assert runs.passes[:2] == [2, 4]  # two prompts in one prefill, then 3 + 1 rows decoding
    samples = [seq.generated for seq in groups[0].sequences]
    assert len({tuple(s) for s in samples}) > 1  # seeds seed + i, as when prefilled alone
    alone = Run(lm, prefix_cache=None)
    again = _group(PROMPTS[1], seeded)
    alone.engine.submit(again)
    alone.engine.start()
    try:
        async for _ in again.sender:
            pass
    finally:
        await alone.engine.stop()
    assert [seq.generated for seq in again.sequences] == samples
    assert groups[1].sequences[0].generated == (await Run(lm, prefix_cache=None).one_by_one(PROMPTS[:1]))[0]


# -------------------------------------------------------------------------- prefix cache
async def test_a_shared_prefix_is_reused_with_the_same_tokens(lm):
    prompts = [SYSTEM + "Hello world", SYSTEM + "Numbers: 1 2 3", SYSTEM + "Tell me a story."]
    cache = PrefixCache(1 << 30)
    reuse = Run(lm, prefix_cache=cache)
    with_cache = await reuse.one_by_one(prompts)
    without = Run(lm, prefix_cache=None)
    assert with_cache == await without.one_by_one(prompts)
    assert without.cached == {0: 0, 1: 0, 2: 0}
    assert reuse.cached[0] == 0  # nothing seen yet
    shared = len(lm.tokenizer(SYSTEM)["input_ids"]) // BLOCK_TOKENS * BLOCK_TOKENS
    assert shared >= 2 * BLOCK_TOKENS
    for index in (1, 2):  # the system prompt's whole blocks, maybe one more if the texts agree
        assert shared <= reuse.cached[index] < len(lm.tokenizer(prompts[index])["input_ids"])
        assert reuse.cached[index] % BLOCK_TOKENS == 0


async def test_a_repeated_prompt_prefills_only_its_last_block_and_mixes_with_misses(lm):
    prompt = SYSTEM + "Hello world"
    length = len(lm.tokenizer(prompt)["input_ids"])
    cache = PrefixCache(1 << 30)
    first = Run(lm, prefix_cache=cache)
    expected = await first.one_by_one([prompt])
    # a hit and a miss in the same prefill: rows with a cached prefix and rows without
    mixed = Run(lm, prefix_cache=cache)
    tokens = await mixed.together([prompt, PROMPTS[1], PROMPTS[2]])
    assert tokens[0] == expected[0]
    assert tokens[1:] == await Run(lm, prefix_cache=None).one_by_one(PROMPTS[1:3])
    assert mixed.cached == {0: (length - 1) // BLOCK_TOKENS * BLOCK_TOKENS, 1: 0, 2: 0}
    assert mixed.passes[0] == 3


async def test_a_cache_too_small_for_a_block_keeps_nothing(lm):
    prompt = SYSTEM + "Hello world"
    run = Run(lm, prefix_cache=PrefixCache(0))  # no room: every block is refused
    await run.one_by_one([prompt, prompt])
    assert run.cached == {0: 0, 1: 0}
    assert len(run.engine.prefix_cache) == 0


def test_prefix_cache_evicts_least_recent_prefixes_from_their_end():
    import torch

    from openinfer.backends.llm.prefix_cache import block_names

    def states(tokens: int, fill: float):
        return [(torch.full((2, tokens, 4), fill), torch.full((2, tokens, 4), fill))]

    block_bytes = 2 * 2 * BLOCK_TOKENS * 4 * 4  # keys + values, float32
    cache = PrefixCache(5 * block_bytes)
    a = list(range(3 * BLOCK_TOKENS))
    b = list(range(1000, 1000 + 3 * BLOCK_TOKENS))
    names_a, names_b = block_names("base", a), block_names("base", b)
    assert block_names("base", a[:BLOCK_TOKENS + 3]) == names_a[:1]  # only whole blocks
    assert block_names("doll", a) != names_a  # an adapter's states are its own
    cache.store(names_a, states(len(a), 1.0))
    cache.store(names_b, states(len(b), 2.0))  # 6 blocks > 5: a's last block goes first
    assert len(cache) == 5 and cache.nbytes == 5 * block_bytes
    assert len(cache.match(names_a, len(a) + 1)) == 2
    assert len(cache.match(names_b, len(b) + 1)) == 3
    hit = cache.match(names_b, len(b))  # the prompt's last token is never served from the cache
    assert len(hit) == 2 and float(hit[0].states[0][0][0, 0, 0]) == 2.0
    cache.store(block_names("base", list(range(2000, 2000 + BLOCK_TOKENS))), states(BLOCK_TOKENS, 3.0))
    assert len(cache.match(names_a, len(a) + 1)) == 1  # a, least recent, lost its end again

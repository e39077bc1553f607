"""Pure functions of the bench: option parsing, shapes, validation, statistics, reports."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from openinfer.bench.openai.client import Record
from openinfer.bench.openai.metrics import compute, table
from openinfer.bench.options import parse_range
from openinfer.bench.report import to_csv
from openinfer.bench.runner import LevelResult, split
from openinfer.bench.stats import is_stable, summarize_ns
from openinfer.bench.tensors import Tensor, TensorSpec, parse_shapes, resolve_shape
from openinfer.bench.validate import Received, ValidationError, check


def test_ranges_follow_perf_analyzer() -> None:
    assert parse_range("1:16:5") == [1, 6, 11, 16]
    assert parse_range("4") == [4]
    assert parse_range("1:4") == [1, 2, 3, 4]
    assert parse_range("10:20:5", integer=False) == [10.0, 15.0, 20.0]
    with pytest.raises(ValueError):
        parse_range("5:1")


def test_shapes() -> None:
    assert parse_shapes(["INPUT0:1,16", "x:y:3"]) == {"INPUT0": [1, 16], "x:y": [3]}
    spec = TensorSpec("INPUT0", "FP32", (-1, -1))
    # Batching model: --shape leaves out the batch dimension, -b fills it.
    assert resolve_shape(spec, [16], 4, True) == [4, 16]
    # No config extension: a --shape one shorter than metadata means the same.
    assert resolve_shape(spec, [16], 1, None) == [1, 16]
    assert resolve_shape(spec, [2, 16], 1, None) == [2, 16]
    with pytest.raises(ValueError, match="variable"):
        resolve_shape(spec, None, 1, True)
    assert resolve_shape(TensorSpec("a", "INT32", (3,)), None, 1, False) == [3]


def test_validation() -> None:
    specs = [TensorSpec("OUTPUT0", "FP32", (-1, -1))]
    arr = np.arange(4, dtype=np.float32).reshape(1, 4)
    exp = [Tensor("OUTPUT0", "FP32", arr)]
    check([Received("OUTPUT0", "FP32", [1, 4], raw=arr.tobytes())], specs, exp)
    check([Received("OUTPUT0", "FP32", [1, 4], data=[0.0, 1.0, 2.0, 3.0])], specs, exp)
    with pytest.raises(ValidationError, match="differs"):
        check([Received("OUTPUT0", "FP32", [1, 4], data=[0.0, 1.0, 2.0, 9.0])], specs, exp)
    # A large JSON body's data arrives as a flat numpy array (float64, as JSON numbers parse).
    check([Received("OUTPUT0", "FP32", [1, 4], data=np.arange(4, dtype=np.float64))], specs, exp)
    with pytest.raises(ValidationError, match="differs"):
        check([Received("OUTPUT0", "FP32", [1, 4], data=np.array([0.0, 1.0, 2.0, 9.0]))], specs, exp)
    with pytest.raises(ValidationError, match="elements"):
        check([Received("OUTPUT0", "FP32", [1, 5], data=np.arange(4, dtype=np.float64))], specs, None)
    with pytest.raises(ValidationError, match="missing"):
        check([], specs, None)
    with pytest.raises(ValidationError, match="elements"):
        check([Received("OUTPUT0", "FP32", [1, 5], raw=arr.tobytes())], specs, None)


def test_validation_takes_both_spellings_of_float32_answers() -> None:
    """Triton writes an FP32 value as its double, orjson (openinfer) as the float32's shortest
    decimal; both are exact, and both must be taken by the cheap list comparison, or the load
    generator spends more on one server's answers than on another's."""
    specs = [TensorSpec("OUTPUT0", "FP32", (-1, -1))]
    arr = np.array([[0.5385743, 0.021654963, 1e-08, 3.4e38]], dtype=np.float32)
    expected = Tensor("OUTPUT0", "FP32", arr)
    as_doubles = arr.reshape(-1).tolist()
    as_shortest = orjson.loads(orjson.dumps(arr.reshape(-1), option=orjson.OPT_SERIALIZE_NUMPY))
    assert as_doubles != as_shortest
    assert as_doubles in expected.json_spellings and as_shortest in expected.json_spellings
    for data in (as_doubles, as_shortest):
        check([Received("OUTPUT0", "FP32", [1, 4], data=data)], specs, [expected])
    with pytest.raises(ValidationError, match="differs"):
        check([Received("OUTPUT0", "FP32", [1, 4], data=[*as_shortest[:3], 3.3e38])], specs, [expected])
    # Values a double spells exactly have one spelling; other datatypes keep theirs.
    assert Tensor("OUTPUT0", "FP32", np.arange(4, dtype=np.float32)).json_spellings == ([0.0, 1.0, 2.0, 3.0],)
    assert Tensor("OUTPUT0", "INT32", np.arange(4, dtype=np.int32)).json_spellings == ([0, 1, 2, 3],)


def test_stability_and_summary() -> None:
    assert is_stable([100, 104, 98], 10)
    assert not is_stable([100, 130, 98], 10)
    assert not is_stable([100, 100], 10)
    s = summarize_ns(np.array([1000, 2000, 3000, 4000], dtype=np.int64))
    assert s["avg"] == 2.5 and s["min"] == 1.0 and s["max"] == 4.0
    assert split(16, 3) == [6, 5, 5] and split(1, 2) == [1, 0]


def test_csv_has_perf_analyzer_columns() -> None:
    r = LevelResult("concurrency", 4, throughput=100.0, latency_us={"avg": 50.0, "p50": 40.0},
                    server={"queue_us": 10.0, "compute_infer_us": 20.0})
    head, row = to_csv([r]).splitlines()
    assert head.startswith("Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv")
    assert row.split(",")[:4] == ["4", "100.00", "0", "20"]


def test_genai_perf_metrics() -> None:
    recs = [Record(first_ns=10_000_000, end_ns=40_000_000, chunk_ns=[1] * 4, text="a b c d",
                   usage={"completion_tokens": 4, "prompt_tokens": 7}, input_tokens=7)
            for _ in range(3)]
    doc = compute(recs, 2.0, None, "chat", True)
    m = doc["metrics"]
    assert m["time_to_first_token"]["avg"] == pytest.approx(10.0)
    assert m["inter_token_latency"]["avg"] == pytest.approx(10.0)  # (40 - 10) / (4 - 1)
    assert m["output_token_throughput"]["avg"] == pytest.approx(6.0)
    assert m["request_throughput"]["avg"] == pytest.approx(1.5)
    assert m["input_sequence_length"]["avg"] == 7
    text = table({**doc, "model": "m", "endpoint_type": "chat", "streaming": True})
    for row in ("Time to first token (ms)", "Inter token latency (ms)", "Request latency (ms)",
                "Output sequence length", "Input sequence length",
                "Output token throughput (per sec)", "Request throughput (per sec)"):
        assert row in text


def test_tokenizer_file_counts_tokens(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tokenizers = pytest.importorskip("tokenizers")
    from openinfer.bench.openai.prompts import WORDS, load_tokenizer, synthetic_prompt

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(sorted(set(WORDS)))}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    count, source = load_tokenizer(str(tmp_path))
    assert source.endswith("tokenizer.json")
    assert count("the quick brown fox") == 4
    import random

    assert count(synthetic_prompt(random.Random(0), 30, count)) == 30


def test_soak_memory_baseline_waits_for_every_kind_of_traffic():
    from benchmarks import soak

    def window(t: float, *kinds: str) -> soak.Window:
        return soak.Window(t, {k: 5 for k in kinds}, {}, 0, {}, 300.0 + t, 400.0)

    everything = soak.KINDS
    no_openai = tuple(k for k in soak.KINDS if k != "openai")
    late = [window(5, *no_openai), window(10, *everything), window(15, *everything)]
    assert soak._warm_up_end(late, 1) == 1  # the OpenAI path's first answer came in window 2
    assert soak._warm_up_end(late, 3) == 2  # never before the warm-up windows end
    early = [window(5, *everything), window(10, *everything)]
    assert soak._warm_up_end(early, 1) == 0
    assert soak._warm_up_end([window(5, *no_openai)], 1) == 0  # too short to tell: the last one

"""Reasoning parsers on literal model output (no server), whole and streamed cut at every
position, alone and in front of a tool-call parser as chat completions use them."""

from __future__ import annotations

import json

import pytest

from openinfer.frontends.openai.chat.output import ChoiceStream, parse_choice
from openinfer.frontends.openai.reasoning import get_reasoning_parser
from openinfer.frontends.openai.tool_parsers import ParsedOutput, get_parser
from tests.openai.test_parsers import cuts

# DeepSeek-R1's template ends the prompt with `<｜Assistant｜><think>\n`: the model writes the rest.
R1 = "The user asks for 2 + 2. That is 4.\n</think>\n\nThe answer is 4."
R1_0528 = "<think>\nThe user asks for 2 + 2. That is 4.\n</think>\n\nThe answer is 4."
QWEN3 = "<think>\nThe user asks for 2 + 2.\n</think>\n\nThe answer is 4."
QWEN3_TOOL = (
    "<think>\nI need the weather tool.\n</think>\n\n<tool_call>\n"
    '{"name": "get_current_weather", "arguments": {"city": "Dallas"}}\n</tool_call>'
)


def stream_split(parser: str, pieces: list[str]) -> tuple[str, str, bool]:
    stream = get_reasoning_parser(parser).stream()
    splits = [stream.feed(piece) for piece in pieces] + [stream.finish()]
    return "".join(s.reasoning for s in splits), "".join(s.content for s in splits), stream.reasoned


@pytest.mark.parametrize(
    "parser, text, reasoning, content",
    [
        ("deepseek_r1", R1, "The user asks for 2 + 2. That is 4.\n", "\n\nThe answer is 4."),
        ("deepseek_r1", R1_0528, "\nThe user asks for 2 + 2. That is 4.\n", "\n\nThe answer is 4."),
        ("deepseek_r1", "Still thinking when cut short", "Still thinking when cut short", ""),
        ("deepseek_r1", "</think>Straight to it.", "", "Straight to it."),
        ("qwen3", QWEN3, "\nThe user asks for 2 + 2.\n", "\n\nThe answer is 4."),
        ("qwen3", "<think>\ncut short", "\ncut short", ""),
        ("qwen3", "Well: <think>hmm</think>4", "hmm", "Well: 4"),
        ("qwen3", "<think>\n\n</think>\n\nEmpty thoughts.", "\n\n", "\n\nEmpty thoughts."),
    ],
)
def test_reasoning_is_split_alike_whole_and_streamed(parser, text, reasoning, content):
    whole = get_reasoning_parser(parser).split(text)
    assert (whole.reasoning, whole.content) == (reasoning, content)
    for pieces in cuts(text):
        assert stream_split(parser, pieces) == (reasoning, content, True), pieces


@pytest.mark.parametrize("text", ["The answer is 4.", "A <thin tag and </think> alone", "ends with <thi"])
def test_qwen3_without_an_opening_tag_is_all_content(text):
    """What Qwen3 writes with `enable_thinking: false` (its template closed the think block)."""
    whole = get_reasoning_parser("qwen3").split(text)
    assert whole.reasoning is None and whole.content == text
    for pieces in cuts(text):
        assert stream_split("qwen3", pieces) == ("", text, False), pieces


def test_streamed_reasoning_is_sent_as_it_arrives():
    stream = get_reasoning_parser("deepseek_r1").stream()
    assert stream.feed("<th").reasoning == ""  # may be the opening tag: held
    assert stream.feed("ink>Adding").reasoning == "Adding"
    split = stream.feed(" up.</thi")
    assert (split.reasoning, split.content) == (" up.", "")  # `</thi` held
    split = stream.feed("nk>It is 4.")
    assert (split.reasoning, split.content) == ("", "It is 4.")


def test_unknown_reasoning_parser():
    with pytest.raises(ValueError, match="reasoning parser: 'bogus' not found"):
        get_reasoning_parser("bogus")


# ------------------------------------------------------------------ reasoning, then tool calls
def fold_choice(pieces: list[str], limit: int | None = None) -> tuple[str, str, dict[int, dict], list[str]]:
    stream = ChoiceStream(get_reasoning_parser("qwen3").stream(), get_parser("hermes").stream(), limit)
    deltas = [stream.feed(piece) for piece in pieces]
    assert None not in deltas
    deltas.append(stream.finish())
    reasoning, content, calls, order = "", "", {}, []
    for delta in deltas:
        reasoning += delta.reasoning
        content += delta.content
        order += ["reasoning"] * bool(delta.reasoning) + ["content"] * bool(delta.content)
        order += ["call"] * bool(delta.tool_calls)
        for call in delta.tool_calls:
            entry = calls.setdefault(call.index, {"name": None, "arguments": ""})
            entry["name"] = entry["name"] or call.name
            entry["arguments"] += call.arguments or ""
    return reasoning, content, calls, order


def test_the_answer_after_reasoning_goes_to_the_tool_parser():
    whole = parse_choice(QWEN3_TOOL, get_reasoning_parser("qwen3"), get_parser("hermes").parse)
    assert whole.reasoning == "\nI need the weather tool.\n" and whole.content is None
    (call,) = whole.tool_calls
    assert call.name == "get_current_weather" and json.loads(call.arguments) == {"city": "Dallas"}
    for pieces in cuts(QWEN3_TOOL):
        reasoning, content, calls, order = fold_choice(pieces)
        assert reasoning == whole.reasoning and content.strip() == "", pieces
        assert calls[0]["name"] == "get_current_weather" and json.loads(calls[0]["arguments"]) == {"city": "Dallas"}
        assert order.index("call") > max(i for i, kind in enumerate(order) if kind == "reasoning")


def test_reasoning_does_not_count_against_the_tool_parse_cap():
    thinking = "<think>" + "pondering " * 50 + "</think>"
    reasoning, _, calls, _ = fold_choice([thinking, QWEN3_TOOL.split("</think>")[1]], limit=100)
    assert len(reasoning) == 500 and calls[0]["name"] == "get_current_weather"
    stream = ChoiceStream(None, get_parser("hermes").stream(), 100)
    assert stream.feed("x" * 60) is not None and stream.feed("x" * 60) is None


def test_whole_answers_without_content_are_none():
    parsed = parse_choice(R1.split("</think>")[0], get_reasoning_parser("deepseek_r1"), ParsedOutput)
    assert parsed.reasoning == "The user asks for 2 + 2. That is 4.\n" and parsed.content is None
    parsed = parse_choice("The answer.", None, ParsedOutput)
    assert parsed.reasoning is None and parsed.content == "The answer."

"""Tool-call parsers on literal model output (no server): whole outputs and streamed pieces."""

from __future__ import annotations

import json
import re

import pytest

from openinfer.frontends.openai.tool_parsers import get_parser

WEATHER = '{"name": "get_current_weather", "parameters": {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}}'
DALLAS = {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}


def stream(parser_name: str, text: str, size: int) -> tuple[str, dict[int, dict], bool]:
    """Feed `text` in `size`-character pieces; fold content and calls, checking delta shapes."""
    parser = get_parser(parser_name).stream()
    content, calls = "", {}
    deltas = []
    for start in range(0, len(text), size):
        deltas.append(parser.feed(text[start : start + size]))
    deltas.append(parser.finish())
    for delta in deltas:
        content += delta.content
        for call in delta.tool_calls:
            entry = calls.setdefault(call.index, {"id": None, "name": None, "arguments": ""})
            if call.id is not None:
                assert entry["id"] is None, "id sent twice"
                entry["id"] = call.id
            if call.name is not None:
                assert entry["name"] is None, "name sent twice"
                entry["name"] = call.name
            entry["arguments"] += call.arguments or ""
    return content, calls, parser.called


@pytest.mark.parametrize("size", [1, 3, 8, 1000])
@pytest.mark.parametrize(
    "parser, text, names",
    [
        ("llama3", WEATHER, ["get_current_weather"]),
        ("llama3", "<|python_tag|>" + WEATHER.replace('"parameters"', '"arguments"'), ["get_current_weather"]),
        ("llama3", '{"name": "a", "parameters": {"x": {"name": "in", "y": [1, "}"]}}}; {"name": "b", "parameters": {"y": 2}}', ["a", "b"]),
        ("llama3", '  {"parameters": {"k": "v"}, "name": "late"}', ["late"]),
        ("mistral", "[TOOL_CALLS][" + WEATHER.replace('"parameters"', '"arguments"') + "]", ["get_current_weather"]),
        ("mistral", '[{"name": "a", "arguments": {"k": "v"}}, {"name": "b", "arguments": {"z": 1}}]', ["a", "b"]),
        ("mistral", '[TOOL_CALLS][{"name": "a", "arguments": {"k": "ü"}}]', ["a"]),
    ],
)
def test_stream_matches_whole_parse(parser, text, names, size):
    whole = get_parser(parser).parse(text)
    assert [c.name for c in whole.tool_calls] == names and whole.content is None
    content, calls, called = stream(parser, text, size)
    assert called and content == ""
    assert [calls[i]["name"] for i in range(len(names))] == names
    for index, call in enumerate(whole.tool_calls):
        assert json.loads(calls[index]["arguments"]) == json.loads(call.arguments)
        assert calls[index]["id"]


@pytest.mark.parametrize("size", [1, 4, 1000])
@pytest.mark.parametrize(
    "parser, text",
    [
        ("llama3", "Sure! " + WEATHER),
        ("llama3", '{"foo": 1} is JSON'),
        ("llama3", "plain words only"),
        ("mistral", "see [1] and [2], then [TOOL]"),
        ("mistral", "no calls here"),
    ],
)
def test_text_stays_text(parser, text, size):
    assert get_parser(parser).parse(text).content == text and not get_parser(parser).parse(text).tool_calls
    content, calls, called = stream(parser, text, size)
    assert content == text and not calls and not called


def test_llama3_details():
    parsed = get_parser("llama3").parse('{"name": "a", "parameters": {"c": "é"}}')
    assert parsed.tool_calls[0].arguments == '{"c": "\\u00e9"}'  # json.dumps default, as Triton
    assert parsed.tool_calls[0].id.startswith("chatcmpl-tool-")
    assert get_parser("llama3").parse('{"name": "a", "parameters": {').content == '{"name": "a", "parameters": {'


def test_mistral_details():
    parser = get_parser("mistral")
    parsed = parser.parse('[TOOL_CALLS][{"name": "a", "arguments": {"k": "v"}}] trailing words')
    assert [c.name for c in parsed.tool_calls] == ["a"]  # the regex fallback finds the array
    assert re.fullmatch(r"[A-Za-z0-9]{9}", parsed.tool_calls[0].id)
    parsed = parser.parse('Sure. [TOOL_CALLS][{"name": "a", "arguments": {"q": "ü"}}]')
    assert parsed.content == "Sure." and parsed.tool_calls[0].arguments == '{"q": "ü"}'
    content, calls, _ = stream("mistral", 'Sure. [TOOL_CALLS][{"name": "a", "arguments": {"q": 1}}]', 2)
    assert content == "Sure. " and calls[0]["name"] == "a" and json.loads(calls[0]["arguments"]) == {"q": 1}
    delta = get_parser("mistral").stream().feed("[TOOL_CALLS]")
    assert not delta  # the control token alone sends nothing


def test_unknown_parser():
    with pytest.raises(ValueError, match="tool parser: 'bogus' not found"):
        get_parser("bogus")

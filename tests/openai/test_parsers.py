"""Tool-call parsers on literal model output (no server): whole outputs and streamed pieces.

The outputs are written as each family's chat template writes an assistant's calls (Llama 3.1
JSON, Mistral `[TOOL_CALLS]`, Qwen/Hermes `<tool_call>` blocks, Llama 3.2/4 pythonic lists,
DeepSeek V3's `<｜tool▁calls▁begin｜>` section), and are streamed cut at every position.
"""

from __future__ import annotations

import json
import re

import pytest

from openinfer.frontends.openai.tool_parsers import get_parser

WEATHER = '{"name": "get_current_weather", "parameters": {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}}'
DALLAS = {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}
HERMES_WEATHER = WEATHER.replace('"parameters"', '"arguments"')
HERMES_TWO = (
    f"<tool_call>\n{HERMES_WEATHER}\n</tool_call>\n"
    '<tool_call>\n{"name": "get_n_day_weather_forecast", "arguments": {"city": "Dallas", "num_days": 2}}\n</tool_call>'
)
PYTHONIC_TWO = (
    "[get_current_weather(city='Dallas', state='TX', unit='fahrenheit'), "
    'get_n_day_weather_forecast(city="Dallas", num_days=2, days=[1, (2, 3)], note="""a "quoted", [odd] (one)""")]'
)
DS_BEGIN, DS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"


def deepseek_call(name: str, arguments: str) -> str:
    """One call as DeepSeek V3's chat template writes it."""
    return f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{arguments}\n```<｜tool▁call▁end｜>"


DEEPSEEK_TWO = (
    DS_BEGIN
    + deepseek_call("get_current_weather", json.dumps(DALLAS))
    + "\n"
    + deepseek_call("get_n_day_weather_forecast", '{"city": "Dallas", "num_days": 2, "nested": {"a": "}```"}}')
    + DS_END
)


def cuts(text: str) -> list[list[str]]:
    """The text in equal pieces of several sizes, and cut in two at every position."""
    ways = [[text[i : i + size] for i in range(0, len(text), size)] for size in (1, 2, 3, 5, 8, 1000)]
    return ways + [[text[:i], text[i:]] for i in range(1, len(text))]


def stream(parser_name: str, text: str, size: int) -> tuple[str, dict[int, dict], bool]:
    """Feed `text` in `size`-character pieces; fold content and calls, checking delta shapes."""
    return stream_pieces(parser_name, [text[start : start + size] for start in range(0, len(text), size)])


def stream_pieces(parser_name: str, pieces: list[str]) -> tuple[str, dict[int, dict], bool]:
    """Feed the pieces; fold content and calls, checking that each call's id and name come once,
    before or with its first arguments."""
    parser = get_parser(parser_name).stream()
    content, calls = "", {}
    deltas = [parser.feed(piece) for piece in pieces]
    deltas.append(parser.finish())
    for delta in deltas:
        content += delta.content
        for call in delta.tool_calls:
            entry = calls.setdefault(call.index, {"id": None, "name": None, "arguments": ""})
            if call.id is not None:
                assert entry["id"] is None, "id sent twice"
                assert call.name, "the id comes with the name"
                entry["id"] = call.id
            assert entry["id"] is not None, "arguments before the call's id and name"
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


# ------------------------------------------------------------------- hermes, pythonic, deepseek_v3
@pytest.mark.parametrize(
    "parser, text, names",
    [
        ("hermes", f"<tool_call>\n{HERMES_WEATHER}\n</tool_call>", ["get_current_weather"]),
        ("hermes", HERMES_TWO, ["get_current_weather", "get_n_day_weather_forecast"]),
        ("hermes", '<tool_call>\n{"arguments": {"x": "<tool_call>{}"}, "name": "late"}\n</tool_call>', ["late"]),
        ("hermes", '<tool_call>\n{"name": "unclosed", "arguments": {"k": "ü"}}', ["unclosed"]),
        ("pythonic", "[get_current_weather(city='Dallas', state='TX', unit='fahrenheit')]", ["get_current_weather"]),
        ("pythonic", PYTHONIC_TWO, ["get_current_weather", "get_n_day_weather_forecast"]),
        ("pythonic", "<|python_start|>[get_time(), lookup(q='ü', flag=True, none=None)]<|python_end|>", ["get_time", "lookup"]),
        ("pythonic", "  [ns.tool(x=-1.5, d={'k': [1, 2]},)]", ["ns.tool"]),
        ("deepseek_v3", DEEPSEEK_TWO, ["get_current_weather", "get_n_day_weather_forecast"]),
        ("deepseek_v3", DS_BEGIN + deepseek_call("get_time", "{}") + DS_END, ["get_time"]),
    ],
)
def test_new_parsers_stream_as_they_parse(parser, text, names):
    whole = get_parser(parser).parse(text)
    assert [c.name for c in whole.tool_calls] == names and whole.content is None
    assert len({c.id for c in whole.tool_calls}) == len(names)
    for pieces in cuts(text):
        content, calls, called = stream_pieces(parser, pieces)
        assert called and content == "", pieces
        assert [calls[i]["name"] for i in range(len(names))] == names, pieces
        for index, call in enumerate(whole.tool_calls):
            assert json.loads(calls[index]["arguments"]) == json.loads(call.arguments), pieces


def test_new_parsers_arguments():
    calls = get_parser("hermes").parse(HERMES_TWO).tool_calls
    assert json.loads(calls[0].arguments) == DALLAS
    assert json.loads(calls[1].arguments) == {"city": "Dallas", "num_days": 2}
    calls = get_parser("pythonic").parse(PYTHONIC_TWO).tool_calls
    assert json.loads(calls[0].arguments) == DALLAS
    assert json.loads(calls[1].arguments) == {
        "city": "Dallas", "num_days": 2, "days": [1, [2, 3]], "note": 'a "quoted", [odd] (one)'
    }
    calls = get_parser("pythonic").parse("<|python_start|>[get_time(), lookup(q='ü', flag=True, none=None)]<|python_end|>").tool_calls
    assert calls[0].arguments == "{}" and calls[1].arguments == '{"q": "ü", "flag": true, "none": null}'
    calls = get_parser("deepseek_v3").parse(DEEPSEEK_TWO).tool_calls
    assert json.loads(calls[0].arguments) == DALLAS
    assert json.loads(calls[1].arguments) == {"city": "Dallas", "num_days": 2, "nested": {"a": "}```"}}
    assert all(c.id.startswith("chatcmpl-tool-") for c in calls)


@pytest.mark.parametrize(
    "parser, before, calls_text",
    [
        ("hermes", "Let me look that up.\n", HERMES_TWO),
        ("deepseek_v3", "Let me look that up.", DEEPSEEK_TWO),
    ],
)
def test_text_before_the_calls_is_content(parser, before, calls_text):
    whole = get_parser(parser).parse(before + calls_text)
    assert whole.content == before.strip() and len(whole.tool_calls) == 2
    for pieces in cuts(before + calls_text)[:6]:
        content, calls, _ = stream_pieces(parser, pieces)
        assert content == before and len(calls) == 2


def test_pythonic_streams_each_argument_once_complete():
    parser = get_parser("pythonic").stream()
    assert not parser.feed("[get_weather(city='Par")
    delta = parser.feed("is', days=")
    (first,) = delta.tool_calls
    assert (first.index, first.name, first.arguments) == (0, "get_weather", '{"city": "Paris"')
    assert first.id and first.id.startswith("chatcmpl-tool-")
    assert [c.arguments for c in parser.feed("2)").tool_calls] == [', "days": 2}']
    assert not parser.feed("]<|python_end|>") and not parser.finish() and parser.called


@pytest.mark.parametrize("size", [1, 3, 1000])
@pytest.mark.parametrize(
    "parser, text",
    [
        ("hermes", "no calls here"),
        ("hermes", "I like <tool_call>\nnot json\n</tool_call> as a tag"),
        ("hermes", '<tool_call>{"foo": 1}</tool_call>'),
        ("hermes", "ends on a partial tag <tool_ca"),
        ("pythonic", "[1, 2, 3]"),
        ("pythonic", "[see the docs](http://example.com)"),
        ("pythonic", "Sure: [get_weather(city='Paris')]"),
        ("pythonic", "[get_weather('Paris')]"),
        ("pythonic", "[get_weather(city=open('/etc/passwd'))]"),
        ("pythonic", "[get_weather(city={1, 2})]"),
        ("pythonic", "[]"),
        ("pythonic", "<|python_st"),
        ("deepseek_v3", "no calls here"),
        ("deepseek_v3", DS_BEGIN + "garbage"),
    ],
)
def test_new_parsers_leave_text_alone(parser, text, size):
    whole = get_parser(parser).parse(text)
    assert whole.content == text and not whole.tool_calls
    content, calls, called = stream(parser, text, size)
    assert content == text and not calls and not called


@pytest.mark.parametrize(
    "parser, text",
    [
        ("hermes", '<tool_call>\n{"name": "a", "arguments": {"k": '),
        ("pythonic", "[get_weather(city='Paris'"),
        ("deepseek_v3", DS_BEGIN + deepseek_call("a", '{"k": 1}').split("1}")[0]),
    ],
)
def test_an_output_cut_short_is_text_when_whole(parser, text):
    assert get_parser(parser).parse(text).content == text

"""Triton Python models served as OpenAI models: the example `echo_llm` as shipped, and Python
models with the tensor interface of Triton's vLLM backend, through the real `openinfer serve
--openai-port` and the `openai` SDK. Chat templates come from `--tokenizer`, a tokenizer in the
model's folder, or a `chat_template.jinja` alone; streams are the model's own responses;
closing a stream reaches the model's `request.is_cancelled()` in both execution modes."""

from __future__ import annotations

import contextlib
import io
import json
import re

import openai
import pytest

from openinfer.core.errors import InternalError, InvalidArgumentError
from openinfer.frontends.openai.catalog import ModelInfo
from openinfer.frontends.openai.context import FrontendContext
from openinfer.frontends.openai.options import OpenAIOptions
from openinfer.frontends.openai.tokenizer import TokenizerCache, render_chat
from tests.hardening.oracle import wait_until
from tests.helpers import ROOT, write_model
from tests.openai import mock_models
from tests.openai.conftest import OpenAIServer, raw_post
from tests.openai.python_llm_models import events, write_python_llms

OPENAI_EXAMPLES = ROOT / "examples" / "openai_repository"
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
#: CHAT through echo_llm's chat_template.jinja.
ECHO_RENDERED = "<|system|> Be brief.\n<|user|> Hello there\n<|assistant|>"


def words(text: str) -> list[str]:
    """The example's tokens: each word with the whitespace before it."""
    return re.findall(r"\s*\S+|\s+", text)


@pytest.fixture(scope="module")
def events_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("events")


@pytest.fixture(scope="module")
def python_server(tmp_path_factory, tokenizer_dir, events_dir):
    """The example repository as shipped, and a repository of test models beside it."""
    repo = tmp_path_factory.mktemp("python_llms") / "repo"
    write_python_llms(repo, events_dir, tokenizer_dir)
    model_dir = write_model(repo, "tokenized_llm", mock_models.llm_config("tokenized_llm"), mock_models.LLM_MODEL)
    for path in tokenizer_dir.iterdir():  # the tokenizer in the model's folder
        (model_dir / path.name).write_bytes(path.read_bytes())
    server = OpenAIServer(repo, ["--model-repository", str(OPENAI_EXAMPLES)]).start()
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def tokenizer_flag_server(tokenizer_dir):
    """`--tokenizer DIR`: its chat template serves every model, echo_llm's own included."""
    server = OpenAIServer(OPENAI_EXAMPLES, ["--tokenizer", str(tokenizer_dir)]).start()
    yield server
    assert server.stop() == 0, server.log()


def test_example_chat_applies_its_template(python_server):
    client = python_server.client()
    reply = client.chat.completions.create(model="echo_llm", messages=CHAT)
    assert reply.choices[0].message.content == ECHO_RENDERED  # the model reads its prompt back
    assert reply.choices[0].finish_reason == "stop"
    count = len(words(ECHO_RENDERED))
    assert reply.usage.model_dump(include={"prompt_tokens", "completion_tokens"}) == {
        "prompt_tokens": count, "completion_tokens": count
    }


def test_example_streams_one_chunk_per_model_response(python_server):
    client = python_server.client()
    chunks = list(
        client.chat.completions.create(
            model="echo_llm", messages=CHAT, stream=True, stream_options={"include_usage": True}
        )
    )
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert pieces == words(ECHO_RENDERED)  # one response per word, one chunk per response
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].usage.completion_tokens == len(pieces)


def test_example_completions_honour_max_tokens_stop_and_echo(python_server):
    client = python_server.client()
    reply = client.completions.create(model="echo_llm", prompt="one two three four", max_tokens=2)
    assert (reply.choices[0].text, reply.choices[0].finish_reason) == ("one two", "length")
    reply = client.completions.create(model="echo_llm", prompt="one two three four", stop=[" thr"], echo=True)
    assert (reply.choices[0].text, reply.choices[0].finish_reason) == ("one two three four" + "one two", "stop")
    streamed = client.completions.create(model="echo_llm", prompt="one two three four", max_tokens=3, stream=True)
    chunks = list(streamed)
    assert [c.choices[0].text for c in chunks if c.choices[0].text] == ["one", " two", " three"]
    assert chunks[-1].choices[0].finish_reason == "length"


def test_tokenizer_in_the_model_folder_renders_chat(python_server, tokenizer):
    reply = python_server.client().chat.completions.create(model="tokenized_llm", messages=CHAT)
    expected = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert reply.choices[0].message.content == expected


def test_tokenizer_flag_renders_chat_for_every_model(tokenizer_flag_server, tokenizer):
    reply = tokenizer_flag_server.client().chat.completions.create(model="echo_llm", messages=CHAT)
    expected = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert reply.choices[0].message.content == expected != ECHO_RENDERED


def test_sampling_parameters_reach_the_model(python_server):
    """In `sampling_parameters` (vLLM's names) when the model declares it..."""
    client = python_server.client()
    reply = client.completions.create(
        model="tokenized_llm",
        prompt="#params#",
        temperature=0.7,
        top_p=0.9,
        max_tokens=300,
        stop=["zz", "yy"],
        seed=42,
        frequency_penalty=0.5,
        presence_penalty=0.25,
        extra_body={"top_k": 5, "repetition_penalty": 1.2, "min_tokens": 1},
    )
    assert json.loads(reply.choices[0].text) == {
        "temperature": 0.7, "top_p": 0.9, "max_tokens": 300, "stop": ["zz", "yy"], "seed": 42,
        "frequency_penalty": 0.5, "presence_penalty": 0.25, "top_k": 5, "repetition_penalty": 1.2, "min_tokens": 1,
    }
    reply = client.chat.completions.create(
        model="tokenized_llm", messages=[{"role": "user", "content": "#params#"}], temperature=0, seed=3, stop="zz"
    )
    assert json.loads(reply.choices[0].message.content) == {"temperature": 0, "seed": 3, "stop": ["zz"]}


def test_sampling_parameters_without_the_input_are_request_parameters(python_server):
    """...and as request parameters (lists as JSON text) when it does not, as for Triton's vLLM backend."""
    client = python_server.client()
    reply = client.completions.create(model="bare_llm", prompt="#params#", temperature=0.5, seed=7, stop=["zz"])
    assert json.loads(reply.choices[0].text) == {"temperature": 0.5, "seed": 7, "stop": '["zz"]'}


def test_triton_mock_layout_streams_and_counts_with_the_tokenizer(python_server, tokenizer):
    """Triton's mock layout: `[1, 1]` tensors, a required `stream`, `text_output` only. The
    tokenizer in its version folder renders the chat and counts the usage, streamed or not."""
    client = python_server.client()
    plain = client.chat.completions.create(model="bare_llm", messages=CHAT)
    prompt = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert plain.choices[0].message.content == prompt
    chunks = list(
        client.chat.completions.create(
            model="bare_llm", messages=CHAT, stream=True, stream_options={"include_usage": True}
        )
    )
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert pieces == words(prompt)
    counted = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert plain.usage.completion_tokens == plain.usage.prompt_tokens == counted
    assert chunks[-1].usage.model_dump() == plain.usage.model_dump()


def _close_after_three_chunks(stream) -> str:
    """Read three chunks, close the stream; the generation's id (the model's request id)."""
    ids = []
    for chunk in stream:
        ids.append(chunk.id)
        if len(ids) == 3:
            break
    stream.close()
    return ids[0]


@pytest.mark.parametrize("model", ["slow_llm", "slow_llm_in_process"])
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_closing_the_stream_cancels_the_model(python_server, events_dir, model, endpoint):
    client = python_server.client()
    if endpoint == "chat":
        stream = client.chat.completions.create(model=model, messages=CHAT, stream=True)
    else:
        stream = client.completions.create(model=model, prompt="go", stream=True)
    rid = _close_after_three_chunks(stream)
    assert f"start {rid}" in events(events_dir, model)
    seen = wait_until(lambda: re.search(rf"cancelled {rid} after (\d+)", events(events_dir, model)))
    assert int(seen.group(1)) < 3000 and f"done {rid}" not in events(events_dir, model)
    # the model is free again and answers the next request
    again = client.completions.create(model=model, prompt="go", stream=True)
    assert _close_after_three_chunks(again) != rid


def test_example_stops_when_its_stream_is_closed(python_server):
    """echo_llm logs the cancellation it saw (through pb_utils.Logger, into the server's log)."""
    prompt = " ".join(f"w{i}" for i in range(400))  # 20 s of words
    stream = python_server.client().completions.create(model="echo_llm", prompt=prompt, stream=True)
    rid = _close_after_three_chunks(stream)
    seen = wait_until(lambda: re.search(rf"echo_llm: request '{rid}' cancelled after (\d+) words", python_server.log()))
    assert 3 <= int(seen.group(1)) < 400


@pytest.mark.parametrize("model", ["raising_llm", "raising_llm_in_process"])
def test_a_model_that_raises_is_an_openai_error(python_server, model):
    client = python_server.client()
    with pytest.raises(openai.InternalServerError) as info:
        client.completions.create(model=model, prompt="hi")
    assert info.value.status_code == 500
    assert set(info.value.body) == {"message", "type", "param", "code"}
    assert "RuntimeError: the model exploded" in info.value.body["message"]
    with pytest.raises(openai.InternalServerError, match="the model exploded"):
        client.chat.completions.create(model=model, messages=CHAT)
    with pytest.raises(openai.APIError, match="the model exploded") as info:  # an error event mid-stream
        list(client.chat.completions.create(model=model, messages=CHAT, stream=True))
    assert info.value.body["type"] == "internal_server_error"
    assert client.chat.completions.create(model="echo_llm", messages=CHAT).choices[0].finish_reason == "stop"


def test_templates_without_a_tokenizer_render_and_report_errors():
    conversation = [{"role": "user", "content": "hi"}]
    options = {"tools": None, "add_generation_prompt": True, "continue_final_message": False, "kwargs": None}
    template = (OPENAI_EXAMPLES / "echo_llm" / "chat_template.jinja").read_text()
    assert render_chat(None, conversation, template=template, **options) == "<|user|> hi\n<|assistant|>"
    with pytest.raises(InvalidArgumentError, match="chat template error: nope"):
        render_chat(None, conversation, template="{{ raise_exception('nope') }}", **options)


async def test_which_template_a_model_without_tokenizer_gets():
    """`--chat-template` first, then the model's own chat_template.jinja; neither: the 500."""
    fields = {"version": "1", "backend": "python", "kind": "generate", "created": 1, "inputs": {}, "outputs": set(),
              "batched": False, "decoupled": True, "source_dir": None, "tokenizer_dir": None}
    own = ModelInfo(name="own", chat_template="own template", **fields)
    bare = ModelInfo(name="bare", **fields)
    flagged = FrontendContext(None, OpenAIOptions(port=0), None, TokenizerCache(), "flag template")  # type: ignore[arg-type]
    plain = FrontendContext(None, OpenAIOptions(port=0), None, TokenizerCache())  # type: ignore[arg-type]
    assert await flagged.chat_renderer(own) == (None, "flag template")
    assert await plain.chat_renderer(own) == (None, "own template")
    with pytest.raises(InternalError, match="chat_template.jinja next to model 'bare'"):
        await plain.chat_renderer(bare)


def test_chat_without_tokenizer_or_template_names_the_fix(python_server):
    status, _, raw = raw_post(
        python_server.base_url + "/chat/completions", {"model": "plain_llm", "messages": CHAT}
    )
    error = json.loads(raw)["error"]
    assert status == 500 and error["type"] == "internal_server_error"
    assert "--tokenizer" in error["message"] and "chat_template.jinja" in error["message"]
    # completions need no tokenizer
    stream = python_server.client().completions.create(model="plain_llm", prompt="go", stream=True)
    assert _close_after_three_chunks(stream).startswith("cmpl-")



def _python_blocks(path, heading: str) -> list[str]:
    section = (ROOT / path).read_text().split(heading, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def _run_snippet(code: str, server: OpenAIServer) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code.replace("http://localhost:9000/v1", server.base_url), {})  # noqa: S102 - our own docs
    return out.getvalue()


def test_the_documented_snippets_print_what_they_say(python_server):
    (readme,) = _python_blocks("README.md", "## Triton Python models as OpenAI models")
    assert _run_snippet(readme, python_server) == "<|user|> Hi there\n<|assistant|>\n"
    (docs,) = _python_blocks("docs/llm.md", "## Triton Python models as OpenAI models")
    assert _run_snippet(docs, python_server).splitlines() == ["'one'", "' two'", "' three'", "''"]

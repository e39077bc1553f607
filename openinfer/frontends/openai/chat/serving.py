"""Chat completions: template the conversation, generate, parse reasoning and tool calls, shape
the answer.

Tool paths (as Triton, with OpenAI's shapes): `tool_choice` naming a function forces its
arguments with guided JSON; `required` forces a JSON array of calls over every tool; `auto` (or
tools without a choice) runs the `--tool-call-parser`; `none` answers in text. The
`--reasoning-parser` takes the reasoning out first (`reasoning_content`), except under guided
decoding: the backends constrain the whole output, so a guided answer has no reasoning part.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from ..catalog import ResolvedModel
from ..context import CompletionTally, FrontendContext, count_tokens, now, request_id, usage
from ..engine import GenerateCall, Outcome, generate_all, merge
from ..errors import invalid
from ..logprobs import chat_logprobs
from ..protocol import parse_request
from ..reasoning import ReasoningParser
from ..sampling import build_sampling, check_output_options, guided_from_request, token_limit
from ..tokenizer import render_chat
from ..tool_parsers import ParsedOutput, StreamDelta, StreamParser, ToolCall, ToolParser
from ..tool_parsers.base import openai_call_id
from ..tool_parsers.forced import NamedStream, RequiredStream, required_schema
from .output import ChoiceStream, parse_choice
from .protocol import ChatCompletionRequest, ChatMessage

log = logging.getLogger("openinfer.openai")

PLAIN, AUTO, NAMED, REQUIRED = "plain", "auto", "named", "required"


def _content(message: ChatMessage) -> str | list[dict[str, str]] | None:
    if message.content is None or isinstance(message.content, str):
        return message.content
    parts = []
    for part in message.content:
        if part.type != "text":
            raise invalid(f"only text message is supported, but got {part.type}", "messages")
        parts.append({"type": "text", "text": part.text or ""})
    return parts


def conversation(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Messages as chat templates expect them (tool-call arguments decoded into objects)."""
    out = []
    for message in messages:
        role = "system" if message.role == "developer" else message.role
        item: dict[str, Any] = {"role": role, "content": _content(message)}
        if message.name is not None:
            item["name"] = message.name
        if message.tool_call_id is not None:
            item["tool_call_id"] = message.tool_call_id
        if message.tool_calls:
            calls = []
            for call in message.tool_calls:
                arguments = call.function.arguments
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments) if arguments.strip() else {}
                    except ValueError:
                        raise invalid(
                            f"tool call '{call.function.name}' has arguments that are not JSON", "messages"
                        ) from None
                calls.append(
                    {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": arguments}}
                )
            item["tool_calls"] = calls
        out.append(item)
    return out


class ChatServing:
    def __init__(self, ctx: FrontendContext) -> None:
        self.ctx = ctx
        self.parser: ToolParser | None = ctx.tool_parser()
        self.reasoning: ReasoningParser | None = ctx.reasoning_parser()

    # ------------------------------------------------------------------ validation
    def _mode(self, req: ChatCompletionRequest) -> tuple[str, str | None]:
        tools = req.tools or []
        choice = req.tool_choice
        if choice == "required" and not tools:
            raise invalid('"required" tool choice requires CreateChatCompletionRequest.tools to be provided', "tool_choice")
        if choice is not None and not isinstance(choice, str):
            if not tools:
                raise invalid("Named tool choice requires CreateChatCompletionRequest.tools to be provided", "tool_choice")
            name = choice.function.name
            if name not in {t.function.name for t in tools}:
                raise invalid(f"Tool '{name}' has not been passed in `tools`.", "tool_choice")
            return NAMED, name
        if choice == "required":
            return REQUIRED, None
        if choice == "none" or not tools:
            return PLAIN, None
        if self.parser is None:
            if choice == "auto":
                raise invalid('"auto" tool choice requires --tool-call-parser to be set', "tool_choice")
            raise invalid("having tools in the request requires --tool-call-parser to be set", "tools")
        return AUTO, None

    def _validate(self, req: ChatCompletionRequest, resolved: ResolvedModel) -> None:
        if req.logit_bias:
            raise invalid("logit bias is not currently supported", "logit_bias")
        if req.top_logprobs is not None and not req.logprobs:
            raise invalid("`top_logprobs` can only be used when `logprobs` is True", "top_logprobs")
        check_output_options(req, resolved.info)

    # -------------------------------------------------------------------- request
    async def create(self, body: Any) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        req: ChatCompletionRequest = parse_request(ChatCompletionRequest, body)
        resolved = self.ctx.catalog.resolve(req.model)
        self._validate(req, resolved)
        mode, forced = self._mode(req)
        info = resolved.info
        tokenizer, template = await self.ctx.chat_renderer(info)
        tools = [t.model_dump(exclude_none=True) for t in req.tools] if req.tools else None
        prompt = render_chat(
            tokenizer,
            conversation(req.messages),
            tools=tools,
            add_generation_prompt=req.add_generation_prompt,
            continue_final_message=req.continue_final_message,
            template=template,
            kwargs=req.chat_template_kwargs,
        )
        guided = guided_from_request(req)
        if mode in (NAMED, REQUIRED):
            if guided:
                raise invalid("response_format cannot be combined with a forced tool choice", "response_format")
            if mode == NAMED:
                tool = next(t for t in req.tools or [] if t.function.name == forced)
                guided = {"guided_json": tool.function.parameters or {"type": "object"}}
            else:
                guided = {"guided_json": required_schema(req.tools or [])}
        top = req.top_logprobs or 0
        rid = request_id("chatcmpl")
        requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        limit = token_limit(
            requested,
            self.ctx.options.default_max_tokens,
            info,
            count_tokens(tokenizer, prompt) if info.max_model_len is not None else None,
            "messages",
        )
        calls = [
            GenerateCall(
                prompt,
                build_sampling(
                    req,
                    info,
                    max_tokens=limit,
                    lora=resolved.lora,
                    logprobs=top if req.logprobs else None,
                    guided=guided,
                    seed_offset=i,
                ),
                stream=bool(req.stream),
                logprobs=bool(req.logprobs),
                request_id=rid if req.n == 1 else f"{rid}-{i}",
            )
            for i in range(req.n)
        ]
        reasoning = None if guided else self.reasoning
        shape = _Shape(rid, now(), req.model, mode, forced, top if req.logprobs else None, reasoning)
        if req.stream:
            include_usage = bool(req.stream_options and req.stream_options.include_usage)
            continuous = bool(req.stream_options and req.stream_options.continuous_usage_stats)
            return self._stream(shape, calls, resolved, tokenizer, prompt, include_usage, continuous)
        outcomes = await asyncio.gather(*(generate_all(self.ctx.server, info, c) for c in calls))
        return self._response(shape, outcomes, tokenizer, prompt)

    # ------------------------------------------------------------- non-streaming
    def _parse(self, shape: _Shape, text: str) -> ParsedOutput:
        if shape.mode == AUTO and self.parser is not None:
            return self.parser.parse(text)
        if shape.mode == NAMED:
            return ParsedOutput(None, [ToolCall(openai_call_id(), shape.forced or "", text.strip())])
        if shape.mode == REQUIRED:
            try:
                items = json.loads(text)
            except ValueError:
                return ParsedOutput(text)
            if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
                return ParsedOutput(text)
            return ParsedOutput(
                None,
                [ToolCall(openai_call_id(), i["name"], json.dumps(i.get("parameters", {}), ensure_ascii=False)) for i in items],
            )
        return ParsedOutput(text)

    def _response(self, shape: _Shape, outcomes: list[Outcome], tokenizer: Any, prompt: str) -> dict[str, Any]:
        choices = []
        for index, outcome in enumerate(outcomes):
            parsed = parse_choice(outcome.text, shape.reasoning, lambda text: self._parse(shape, text))
            reason = shape.finish_reason(outcome.finish_reason, bool(parsed.tool_calls))
            message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
            if self.reasoning is not None:
                message["reasoning_content"] = parsed.reasoning
            message["tool_calls"] = [c.as_dict() for c in parsed.tool_calls] or None
            message["function_call"] = None
            choices.append(
                {
                    "index": index,
                    "message": message,
                    "logprobs": shape.logprobs(outcome.logprobs),
                    "finish_reason": reason,
                }
            )
        prompt_tokens = outcomes[0].prompt_tokens
        if prompt_tokens is None:
            prompt_tokens = count_tokens(tokenizer, prompt)
        completion = None
        if all(o.completion_tokens is not None for o in outcomes):
            completion = sum(o.completion_tokens or 0 for o in outcomes)
        elif tokenizer is not None:
            completion = sum(count_tokens(tokenizer, o.text) or 0 for o in outcomes)
        return {
            "id": shape.id,
            "object": "chat.completion",
            "created": shape.created,
            "model": shape.model,
            "system_fingerprint": None,
            "choices": choices,
            "usage": usage(prompt_tokens, completion, outcomes[0].cached_tokens),
        }

    # ----------------------------------------------------------------- streaming
    def _stream_parser(self, shape: _Shape) -> StreamParser | None:
        if shape.mode == AUTO and self.parser is not None:
            return self.parser.stream()
        if shape.mode == NAMED:
            return NamedStream(shape.forced or "")
        if shape.mode == REQUIRED:
            return RequiredStream()
        return None

    async def _stream(
        self,
        shape: _Shape,
        calls: list[GenerateCall],
        resolved: ResolvedModel,
        tokenizer: Any,
        prompt: str,
        include_usage: bool,
        continuous: bool,
    ) -> AsyncIterator[dict[str, Any]]:
        """The chunks of every choice, interleaved as their responses arrive. Long because the
        per-choice state (tool-call parsers, bytes parsed, token counts, finish reasons) lives
        in this one generator's locals, which the chunk and usage helpers close over."""
        info = resolved.info
        server = self.ctx.server
        limit = self.ctx.options.max_tool_call_parse_bytes
        n = len(calls)
        cap = limit if shape.mode == AUTO else None
        parsers = [
            ChoiceStream(shape.reasoning.stream() if shape.reasoning else None, self._stream_parser(shape), cap)
            for _ in range(n)
        ]
        reasons: list[str | None] = [None] * n
        done = [False] * n
        prompt_tokens: int | None = None
        cached_tokens: int | None = None
        completion = CompletionTally(n, info, tokenizer)

        def usage_now() -> dict[str, Any] | None:
            prompt_count = prompt_tokens if prompt_tokens is not None else count_tokens(tokenizer, prompt)
            return usage(prompt_count, completion.total(), cached_tokens)

        def chunk(index: int, delta: dict[str, Any], reason: str | None = None, logprobs: Any = None) -> dict[str, Any]:
            return {
                "id": shape.id,
                "object": "chat.completion.chunk",
                "created": shape.created,
                "model": shape.model,
                "system_fingerprint": None,
                "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": reason}],
                "usage": usage_now() if continuous else None,
            }

        for index in range(n):
            yield chunk(index, {"role": "assistant", "content": ""})
        merged = merge(server, info, calls)
        async for index, step in merged:
            if done[index]:
                continue
            if step is None:  # this choice's stream ended
                parser = parsers[index]
                tail = parser.finish()
                done[index] = True
                yield chunk(index, _delta_dict(tail, final=True), shape.finish_reason(reasons[index] or "stop", parser.called))
                continue
            if prompt_tokens is None and step.prompt_tokens is not None:
                prompt_tokens = step.prompt_tokens
            if cached_tokens is None and step.cached_tokens is not None:
                cached_tokens = step.cached_tokens
            completion.add(index, step.completion_tokens, step.text)
            if step.finish_reason:
                reasons[index] = step.finish_reason
            delta = parsers[index].feed(step.text)
            if delta is None:
                log.warning(
                    "Streaming tool-call parse buffer exceeded %d bytes (request %s); truncating response "
                    "and cancelling backend inference.",
                    limit,
                    shape.id,
                )
                done[index] = True
                merged.cancel(index)
                yield chunk(index, {"content": ""}, "length")
                continue
            logprobs = shape.logprobs(step.logprobs)
            if delta or logprobs is not None:
                yield chunk(index, _delta_dict(delta), None, logprobs)
        if include_usage:
            yield {
                "id": shape.id,
                "object": "chat.completion.chunk",
                "created": shape.created,
                "model": shape.model,
                "system_fingerprint": None,
                "choices": [],
                "usage": usage_now(),
            }


def _delta_dict(delta: StreamDelta, final: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if delta.reasoning:
        out["reasoning_content"] = delta.reasoning
    if delta.content or (final and not out and not delta.tool_calls):
        out["content"] = delta.content
    if delta.tool_calls:
        out["tool_calls"] = [c.as_dict() for c in delta.tool_calls]
    return out


class _Shape:
    """Per-request facts every choice and chunk repeats."""

    def __init__(
        self,
        id_: str,
        created: int,
        model: str,
        mode: str,
        forced: str | None,
        top: int | None,
        reasoning: ReasoningParser | None,
    ) -> None:
        self.id = id_
        self.created = created
        self.model = model
        self.mode = mode
        self.forced = forced
        self.top = top
        self.reasoning = reasoning  # None under guided decoding

    def finish_reason(self, backend_reason: str, called: bool) -> str:
        if backend_reason == "length":
            return "length"
        if called and self.mode in (AUTO, REQUIRED):
            return "tool_calls"
        return backend_reason or "stop"

    def logprobs(self, entries: list[dict[str, Any]] | None) -> dict[str, Any] | None:
        if self.top is None or entries is None:
            return None
        return {"content": chat_logprobs(entries, self.top)}

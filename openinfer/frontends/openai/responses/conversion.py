"""A Responses request as the body of a chat completion: messages, tools, tool choice, format.

The chat-completions schema then validates and serves it, so every sampling, template and
tool-call rule stays written once. Features with no chat counterpart are refused here with a
400 naming the field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import invalid
from .protocol import (
    FunctionCallItem,
    FunctionTool,
    Item,
    MessageItem,
    ResponsesRequest,
    TextConfig,
    TextPart,
)

#: (field, is it asked for, what the client is told): features this server does not have.
_REFUSED: list[tuple[str, Callable[[ResponsesRequest], bool], str]] = [
    ("background", lambda r: bool(r.background), "Background responses are not supported; omit 'background'."),
    ("conversation", lambda r: r.conversation is not None,
     "Conversations are not supported; continue a conversation with 'previous_response_id'."),
    ("prompt", lambda r: r.prompt is not None, "Stored prompt templates are not supported; send 'input'."),
    ("include", lambda r: bool(r.include), "No 'include' values are supported."),
    ("reasoning", lambda r: r.reasoning is not None and any(r.reasoning.model_dump(exclude_none=True).values()),
     "Reasoning options are not supported by this server."),
    ("truncation", lambda r: r.truncation == "auto", "truncation 'auto' is not supported; use 'disabled'."),
    ("max_tool_calls", lambda r: r.max_tool_calls is not None, "'max_tool_calls' is not supported."),
    ("top_logprobs", lambda r: bool(r.top_logprobs), "'top_logprobs' is not supported."),
    ("context_management", lambda r: r.context_management is not None, "'context_management' is not supported."),
    ("text", lambda r: r.text is not None and r.text.verbosity is not None, "'text.verbosity' is not supported."),
]

def refuse_unsupported(req: ResponsesRequest) -> None:
    for field, asked, message in _REFUSED:
        if asked(req):
            raise invalid(message, field)


def input_items(req: ResponsesRequest) -> list[Item]:
    if isinstance(req.input, str):
        return [MessageItem(role="user", content=req.input)]
    return list(req.input)


def _text(content: str | list[TextPart]) -> str:
    return content if isinstance(content, str) else "\n".join(part.text for part in content)


def chat_messages(instructions: str | None, items: Sequence[Item]) -> list[dict[str, Any]]:
    """Chat messages in order: the instructions as a system message, then one message per item,
    a function call joining the assistant message just before it."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    for item in items:
        if isinstance(item, MessageItem):
            messages.append({"role": item.role, "content": _text(item.content)})
        elif isinstance(item, FunctionCallItem):
            call = {"id": item.call_id, "type": "function", "function": {"name": item.name, "arguments": item.arguments}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": _text(item.output)})
    return messages


def chat_tool(tool: FunctionTool) -> dict[str, Any]:
    if tool.type != "function":
        raise invalid(f"Tool type '{tool.type}' is not supported: only function tools are.", "tools")
    if not tool.name:
        raise invalid("A function tool needs a 'name'.", "tools")
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters, "strict": tool.strict}
    return {"type": "function", "function": {k: v for k, v in function.items() if v is not None}}


def chat_tool_choice(choice: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
    if choice is None or isinstance(choice, str):
        return choice
    if choice.get("type") != "function":
        raise invalid(f"tool_choice of type '{choice.get('type')}' is not supported: name a function.", "tool_choice")
    if not isinstance(choice.get("name"), str):
        raise invalid("A function tool_choice needs a 'name'.", "tool_choice")
    return {"type": "function", "function": {"name": choice["name"]}}


def chat_response_format(text: TextConfig | None) -> dict[str, Any] | None:
    fmt = text.format if text is not None else None
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return {"type": "json_object"}
    schema = {"name": fmt.name, "description": fmt.description, "schema": fmt.json_schema, "strict": fmt.strict}
    return {"type": "json_schema", "json_schema": {k: v for k, v in schema.items() if v is not None}}


def chat_body(req: ResponsesRequest, items: Sequence[Item]) -> dict[str, Any]:
    """The chat-completions body that generates this response."""
    body: dict[str, Any] = {
        "model": req.model,
        "messages": chat_messages(req.instructions, items),
        "stream": bool(req.stream),
    }
    if req.stream:
        body["stream_options"] = {"include_usage": True}
    optional = {
        "temperature": req.temperature,
        "top_p": req.top_p,
        "max_completion_tokens": req.max_output_tokens,
        "tools": [chat_tool(t) for t in req.tools] if req.tools else None,
        "tool_choice": chat_tool_choice(req.tool_choice),
        "parallel_tool_calls": req.parallel_tool_calls,
        "response_format": chat_response_format(req.text),
        "user": req.user,
    }
    body.update({key: value for key, value in optional.items() if value is not None})
    return body

"""The Response object and its output items, built from what the chat machinery answered.

`ResponseShape` holds what every form of one response repeats (id, creation time, the
request's settings echoed back); the item builders are shared by whole and streamed answers so
both end in the same object.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from .protocol import ResponsesRequest

COMPLETED, INCOMPLETE, IN_PROGRESS, FAILED = "completed", "incomplete", "in_progress", "failed"


def item_id(prefix: str) -> str:
    """OpenAI's id style: `resp_...`, `msg_...`, `fc_...`."""
    return f"{prefix}_{uuid.uuid4().hex}"


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(id_: str, text: str | None, status: str) -> dict[str, Any]:
    content = [] if text is None else [text_part(text)]
    return {"id": id_, "type": "message", "role": "assistant", "status": status, "content": content}


def function_call_item(id_: str, call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {"id": id_, "type": "function_call", "call_id": call_id, "name": name, "arguments": arguments,
            "status": status}


def output_items(message: dict[str, Any], status: str) -> list[dict[str, Any]]:
    """A chat answer's message as output items: its text (when any, or when nothing else was
    said), then one item per tool call."""
    calls = message.get("tool_calls") or []
    items = []
    text = message.get("content")
    if text or not calls:
        items.append(message_item(item_id("msg"), text or "", status))
    for call in calls:
        function = call["function"]
        items.append(function_call_item(item_id("fc"), call["id"], function["name"], function["arguments"], status))
    return items


def usage(chat_usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Chat token counts under the Responses names: the prompt tokens the model's prefix cache
    served when it says (0 otherwise); the cache-write and reasoning details are zero."""
    if chat_usage is None:
        return None
    cached = (chat_usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return {
        "input_tokens": chat_usage["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": chat_usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": chat_usage["total_tokens"],
    }


def status_of(finish_reason: str | None) -> str:
    return INCOMPLETE if finish_reason == "length" else COMPLETED


@dataclass
class ResponseShape:
    id: str
    created_at: int
    request: ResponsesRequest

    def response(
        self,
        status: str,
        output: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        req = self.request
        text = req.text.model_dump(by_alias=True, exclude_none=True) if req.text and req.text.format else None
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "model": req.model,
            "status": status,
            "output": output,
            "usage": usage,
            "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if status == INCOMPLETE else None,
            "instructions": req.instructions,
            "max_output_tokens": req.max_output_tokens,
            "metadata": req.metadata or {},
            "parallel_tool_calls": req.parallel_tool_calls if req.parallel_tool_calls is not None else True,
            "previous_response_id": req.previous_response_id,
            "temperature": req.temperature,
            "top_p": req.top_p,
            "tool_choice": req.tool_choice if req.tool_choice is not None else "auto",
            "tools": [t.model_dump(exclude_none=True) for t in req.tools or []],
            "text": text or {"format": {"type": "text"}},
            "truncation": "disabled",
            "store": req.store is not False,
            "background": False,
            "reasoning": None,
            "user": req.user,
        }

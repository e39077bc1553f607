"""`POST /v1/responses` request schema: the parts of OpenAI's that map onto a chat completion.

Input items are told apart by `type`; a message may leave it out (OpenAI's "easy" input
message). Item and content types outside these models are schema errors (400), so a feature
the server lacks is refused, never dropped.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator

from ..protocol import OpenAIBaseModel, RequestModel


class TextPart(OpenAIBaseModel):
    """`input_text` (what users and instructions say) or `output_text` (an earlier answer)."""

    type: Literal["input_text", "output_text"]
    text: str


class MessageItem(OpenAIBaseModel):
    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[TextPart]
    id: str | None = None
    status: str | None = None


class FunctionCallItem(OpenAIBaseModel):
    """A call the model made earlier, replayed by the client."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: str | None = None


class FunctionCallOutputItem(OpenAIBaseModel):
    """A tool's result, fed back for the call named by `call_id`."""

    type: Literal["function_call_output"]
    call_id: str
    output: str | list[TextPart]
    id: str | None = None
    status: str | None = None


ITEM_TYPES = ("message", "function_call", "function_call_output")


def _item_type(value: Any) -> str:
    found = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return found or "message"


Item = MessageItem | FunctionCallItem | FunctionCallOutputItem

InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")],
    Discriminator(_item_type),
]


class FunctionTool(OpenAIBaseModel):
    """Responses' flat function tool; any other `type` (built-in tools) is refused by `conversion`."""

    type: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class TextFormat(OpenAIBaseModel):
    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    description: str | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextConfig(OpenAIBaseModel):
    format: TextFormat | None = None
    verbosity: str | None = None


class Reasoning(OpenAIBaseModel):
    effort: str | None = None
    summary: str | None = None
    generate_summary: str | None = None


class ResponsesRequest(RequestModel):
    model: str
    input: str | list[InputItem]
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = None
    top_p: float | None = None
    stream: bool | None = False
    store: bool | None = True
    previous_response_id: str | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    # Fields of features the server does not have: accepted when unset, refused when set.
    background: bool | None = None
    conversation: str | dict[str, Any] | None = None
    prompt: dict[str, Any] | None = None
    include: list[str] | None = None
    reasoning: Reasoning | None = None
    truncation: Literal["auto", "disabled"] | None = None
    max_tool_calls: int | None = None
    top_logprobs: int | None = None
    context_management: Any = None

    @field_validator("input", mode="before")
    @classmethod
    def _known_item_types(cls, value: Any) -> Any:
        """One clear sentence for an item type the server lacks, rather than a union's errors."""
        for item in value if isinstance(value, list) else ():
            kind = _item_type(item)
            if kind not in ITEM_TYPES:
                raise ValueError(f"input items of type '{kind}' are not supported (supported: {', '.join(ITEM_TYPES)})")
        return value

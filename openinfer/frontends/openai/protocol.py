"""Shared request pieces: the lenient base model, stream options, sampling knobs, schema errors.

Requests accept unknown fields (OpenAI adds fields faster than servers follow) and log them so
operators see what was ignored. Schema violations become 400 with the OpenAI envelope, `param`
naming the first offending field.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import invalid

log = logging.getLogger("openinfer.openai")

#: How much of an offending input a schema error echoes back (avoid amplification).
_MAX_ECHO = 200
_MAX_ERRORS = 10


class OpenAIBaseModel(BaseModel):
    """Extra fields allowed everywhere; request models log the ones they ignore."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class RequestModel(OpenAIBaseModel):
    @model_validator(mode="wrap")
    @classmethod
    def _log_ignored(cls, data: Any, handler: Any) -> Any:
        result = handler(data)
        if result.model_extra:
            log.warning(
                "%s: fields were present in the request but ignored: %s",
                cls.__name__,
                sorted(result.model_extra),
            )
        return result


class StreamOptions(OpenAIBaseModel):
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


class JsonSchemaFormat(OpenAIBaseModel):
    name: str | None = None
    description: str | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(OpenAIBaseModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class SamplingFields(RequestModel):
    """Knobs shared by chat and completions (OpenAI's plus the vLLM extensions users rely on)."""

    model: str
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    n: int = Field(default=1, ge=1, le=128)
    seed: int | None = Field(default=None, ge=-(2**63), le=2**64 - 1)
    stop: str | list[str] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    logit_bias: dict[str, float] | None = None
    user: str | None = None
    response_format: ResponseFormat | None = None
    # vLLM extensions
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0)
    min_tokens: int | None = Field(default=None, ge=0)
    ignore_eos: bool | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool | None = None
    skip_special_tokens: bool | None = None
    guided_json: str | dict[str, Any] | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None


def _loc(entry: dict[str, Any]) -> str:
    parts = [str(p) for p in entry.get("loc", ()) if p not in ("body",)]
    return ".".join(parts)


def validation_message(errors: list[dict[str, Any]]) -> tuple[str, str | None]:
    """`N validation error(s): ...` from pydantic errors, and the first offending field."""
    lines = []
    for entry in errors[:_MAX_ERRORS]:
        where = _loc(entry)
        text = entry.get("msg", "invalid value")
        if "input" in entry and entry.get("type") not in ("missing",):
            shown = repr(entry["input"])
            if len(shown) > _MAX_ECHO:
                shown = shown[:_MAX_ECHO] + "..."
            text = f"{text} (input: {shown})"
        lines.append(f"{where}: {text}" if where else text)
    count = len(errors)
    head = f"{count} validation error{'s' if count != 1 else ''}"
    first = _loc(errors[0]).split(".")[0] if errors else None  # the top-level field
    return f"{head}: " + "; ".join(lines), first or None


def parse_request(model: type[BaseModel], body: Any) -> Any:
    """Validate a JSON body into `model`; schema errors become one 400 envelope."""
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object", None, "invalid_request_body")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        message, param = validation_message(exc.errors(include_url=False))  # type: ignore[arg-type]
        raise invalid(message, param) from None

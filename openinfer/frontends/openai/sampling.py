"""Request fields -> the `sampling_parameters` JSON of INTERFACE.md (vLLM `SamplingParams` names).

Unset fields fall back to the model's `generation_config.json` (as vLLM's `--generation-config
auto`), then are left out so the backend applies its own defaults. Guided decoding keys come from
`response_format`, forced tool choices and the vLLM `guided_*` extensions.
"""

from __future__ import annotations

import json
from typing import Any

from .catalog import ModelInfo
from .errors import invalid
from .protocol import SamplingFields

_PASS_THROUGH = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "min_tokens",
    "ignore_eos",
    "stop_token_ids",
    "include_stop_str_in_output",
    "skip_special_tokens",
)


def stop_list(stop: str | list[str] | None) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else [s for s in stop if s]


def guided_from_request(request: SamplingFields) -> dict[str, Any]:
    """`response_format` and the `guided_*` extensions as guided-decoding keys."""
    guided: dict[str, Any] = {}
    fmt = request.response_format
    if fmt is not None and fmt.type == "json_object":
        guided["guided_json"] = {"type": "object"}
    elif fmt is not None and fmt.type == "json_schema":
        schema = fmt.json_schema.json_schema if fmt.json_schema is not None else None
        if not isinstance(schema, dict):
            raise invalid("response_format json_schema requires a 'schema' object", "response_format")
        guided["guided_json"] = schema
    if request.guided_json is not None:
        value = request.guided_json
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise invalid("guided_json must be a JSON schema", "guided_json") from None
        guided["guided_json"] = value
    if request.guided_regex is not None:
        guided["guided_regex"] = request.guided_regex
    if request.guided_choice is not None:
        guided["guided_choice"] = list(request.guided_choice)
    if request.guided_grammar is not None:
        guided["guided_grammar"] = request.guided_grammar
    if len(guided) > 1:
        raise invalid("only one kind of guided decoding may be requested at a time", "response_format")
    return guided


def token_limit(
    requested: int | None, flag: int | None, info: ModelInfo, prompt_tokens: int | None, param: str
) -> int | None:
    """max_tokens to send: the client's (checked against the context), else `--default-max-tokens`,
    else the model's generation_config, capped by (or else) what is left of the context."""
    room = None
    total = info.max_model_len
    if total is not None and prompt_tokens is not None:
        room = total - prompt_tokens
        if room <= 0:
            raise invalid(
                f"This model's maximum context length is {total} tokens. However, your request has "
                f"{prompt_tokens} input tokens. Please reduce the length of the input.",
                param,
            )
        if requested is not None and requested > room:
            raise invalid(
                f"'max_tokens' or 'max_completion_tokens' is too large: {requested}. This model's maximum "
                f"context length is {total} tokens and your request has {prompt_tokens} input tokens "
                f"({requested} > {total} - {prompt_tokens}).",
                "max_tokens",
            )
    if requested is not None:
        return requested
    fallback = flag if flag is not None else info.generation_defaults.get("max_tokens")
    if room is not None:
        fallback = room if fallback is None else min(int(fallback), room)
    return fallback


def build_sampling(
    request: SamplingFields,
    info: ModelInfo,
    *,
    max_tokens: int | None,
    lora: str | None,
    logprobs: int | None = None,
    guided: dict[str, Any] | None = None,
    seed_offset: int = 0,
) -> dict[str, Any]:
    defaults = info.generation_defaults
    params: dict[str, Any] = {}
    for key in _PASS_THROUGH:
        value = getattr(request, key)
        if value is None:
            value = defaults.get(key)
        if value is not None:
            params[key] = value
    if max_tokens is not None:
        params["max_tokens"] = int(max_tokens)
    stops = stop_list(request.stop)
    if stops:
        params["stop"] = stops
    if request.seed is not None:
        params["seed"] = request.seed + seed_offset
    if logprobs is not None:
        params["logprobs"] = logprobs
    if lora is not None:
        params["lora_name"] = lora
    params.update(guided or {})
    return params


def check_output_options(request: SamplingFields, info: ModelInfo) -> None:
    """What chat and completions both refuse: logprobs the model cannot return, stream
    options without a stream."""
    if getattr(request, "logprobs", None) and not info.has_input("return_logprobs"):
        raise invalid(
            f"logprobs are not available for model '{info.name}' (it has no 'return_logprobs' input)",
            "logprobs",
        )
    if request.stream_options is not None and not request.stream:
        raise invalid("`stream_options` can only be used when `stream` is True", "stream_options")

"""Sampling parameters: vLLM's names and defaults, parsed once for every LLM backend.

The `sampling_parameters` input (or the request parameters) is a JSON object with vLLM
`SamplingParams` keys. Values arrive loosely typed (Triton's own backend casts strings), so
each key is coerced to its type and range-checked with a message naming the key. Keys the
client leaves out fall back to the model's `generation_config.json` (as vLLM's
`--generation-config auto` does), then to vLLM's defaults. Unknown keys are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import InvalidArgumentError

_GUIDED_KINDS = ("json", "regex", "choice", "grammar", "json_object")


@dataclass(frozen=True)
class GuidedSpec:
    """One structured-output constraint: kind in json|regex|choice|grammar|json_object."""

    kind: str
    value: Any

    def schema_text(self) -> str:
        if self.kind == "json_object":
            return '{"type": "object"}'
        return self.value if isinstance(self.value, str) else json.dumps(self.value)


@dataclass
class SamplingParams:
    n: int = 1
    max_tokens: int = 16
    min_tokens: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: disabled
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    logprobs: int | None = None
    logit_bias: dict[int, float] = field(default_factory=dict)
    allowed_token_ids: list[int] | None = None
    lora_name: str | None = None
    guided: GuidedSpec | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature < 1e-5 or self.top_k == 1

    @property
    def has_penalties(self) -> bool:
        return (
            self.presence_penalty != 0.0
            or self.frequency_penalty != 0.0
            or self.repetition_penalty != 1.0
        )


# ---------------------------------------------------------------------------- coercion
def _bad(key: str, expected: str, value: Any) -> InvalidArgumentError:
    return InvalidArgumentError(f"sampling parameter '{key}' must be {expected}, got {value!r}")


def _int(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise _bad(key, "an integer", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise _bad(key, "an integer", value)


def _float(key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise _bad(key, "a number", value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise _bad(key, "a number", value)


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise _bad(key, "a boolean", value)


def _str_list(key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v]
    raise _bad(key, "a string or a list of strings", value)


def _int_list(key: str, value: Any) -> list[int]:
    if isinstance(value, list):
        return [_int(key, v) for v in value]
    raise _bad(key, "a list of integers", value)


def _json_value(key: str, value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"sampling parameter '{key}' is not valid JSON: {exc}") from None
    return value


# ------------------------------------------------------------------------------ guided
def _guided(params: dict[str, Any]) -> GuidedSpec | None:
    """Collect the constraint from vLLM's three spellings; more than one kind is an error."""
    found: dict[str, Any] = {}
    for key in ("structured_outputs", "guided_decoding"):
        if params.get(key) is None:
            continue
        block = _json_value(key, params[key])
        if not isinstance(block, dict):
            raise _bad(key, "a JSON object", block)
        for kind in _GUIDED_KINDS:
            if block.get(kind) not in (None, False):
                found[kind] = block[kind]
        if block.get("structural_tag") is not None:
            raise InvalidArgumentError(f"'{key}.structural_tag' is not supported by this backend")
    for kind in ("json", "regex", "choice", "grammar"):
        value = params.get(f"guided_{kind}")
        if value is not None:
            found[kind] = value
    if params.get("guided_json_object") not in (None, False):
        found["json_object"] = True
    if not found:
        return None
    if len(found) > 1:
        raise InvalidArgumentError(
            "You can only use one kind of structured outputs constraint but multiple are "
            f"specified: {sorted(found)}"
        )
    kind, value = next(iter(found.items()))
    if kind == "json":
        if isinstance(value, str):
            value = _json_value("guided_json", value)
        if not isinstance(value, (dict, bool)):
            raise _bad("guided_json", "a JSON schema object", value)
    elif kind == "choice":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise _bad("guided_choice", "a non-empty list of strings", value)
    elif kind in ("regex", "grammar") and (not isinstance(value, str) or not value):
        raise _bad(f"guided_{kind}", "a non-empty string", value)
    return GuidedSpec(kind, value)


# ------------------------------------------------------------------------------- parse
def load_parameters(text: str | bytes | dict | None) -> dict[str, Any]:
    """The JSON object a request carries (tensor or request parameters)."""
    if text is None:
        return {}
    if isinstance(text, dict):
        return dict(text)
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"'sampling_parameters' is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgumentError("'sampling_parameters' must be a JSON object")
    return value


def parse_sampling(params: dict[str, Any], defaults: dict[str, Any] | None = None) -> SamplingParams:
    """Typed, validated parameters; `defaults` are the model's generation-config values."""
    merged = dict(defaults or {})
    merged.update({k: v for k, v in params.items() if v is not None})
    sp = SamplingParams()
    ints = ("n", "max_tokens", "min_tokens", "top_k", "seed", "logprobs")
    floats = ("temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty",
              "repetition_penalty")
    bools = ("include_stop_str_in_output", "ignore_eos", "skip_special_tokens",
             "spaces_between_special_tokens")
    for key in ints:
        if key in merged:
            setattr(sp, key, _int(key, merged[key]))
    for key in floats:
        if key in merged:
            setattr(sp, key, _float(key, merged[key]))
    for key in bools:
        if key in merged:
            setattr(sp, key, _bool(key, merged[key]))
    if "stop" in merged:
        sp.stop = _str_list("stop", merged["stop"])
    if "stop_token_ids" in merged:
        sp.stop_token_ids = _int_list("stop_token_ids", merged["stop_token_ids"])
    if merged.get("allowed_token_ids") is not None:
        sp.allowed_token_ids = _int_list("allowed_token_ids", merged["allowed_token_ids"])
    if merged.get("logit_bias") is not None:
        bias = _json_value("logit_bias", merged["logit_bias"])
        if not isinstance(bias, dict):
            raise _bad("logit_bias", "an object of token id -> bias", bias)
        sp.logit_bias = {_int("logit_bias", k): _float("logit_bias", v) for k, v in bias.items()}
    if merged.get("lora_name") is not None:
        if not isinstance(merged["lora_name"], str):
            raise _bad("lora_name", "a string", merged["lora_name"])
        sp.lora_name = merged["lora_name"]
    sp.guided = _guided(merged)
    _validate(sp)
    return sp


def _validate(sp: SamplingParams) -> None:
    """vLLM's range checks and messages."""
    def fail(message: str) -> None:
        raise InvalidArgumentError(message)

    if sp.n < 1:
        fail(f"n must be at least 1, got {sp.n}.")
    if sp.temperature < 0.0:
        fail(f"temperature must be non-negative, got {sp.temperature}.")
    if not 0.0 < sp.top_p <= 1.0:
        fail(f"top_p must be in (0, 1], got {sp.top_p}.")
    if sp.top_k < -1:
        fail(f"top_k must be 0 (disable), or at least 1, got {sp.top_k}.")
    if sp.top_k == -1:
        sp.top_k = 0
    if not 0.0 <= sp.min_p <= 1.0:
        fail(f"min_p must be in [0, 1], got {sp.min_p}.")
    if not -2.0 <= sp.presence_penalty <= 2.0:
        fail(f"presence_penalty must be in [-2, 2], got {sp.presence_penalty}.")
    if not -2.0 <= sp.frequency_penalty <= 2.0:
        fail(f"frequency_penalty must be in [-2, 2], got {sp.frequency_penalty}.")
    if sp.repetition_penalty <= 0.0:
        fail(f"repetition_penalty must be greater than zero, got {sp.repetition_penalty}.")
    if sp.max_tokens < 1:
        fail(f"max_tokens must be at least 1, got {sp.max_tokens}.")
    if sp.min_tokens < 0:
        fail(f"min_tokens must be greater than or equal to 0, got {sp.min_tokens}.")
    if sp.min_tokens > sp.max_tokens:
        fail(
            f"min_tokens must be less than or equal to max_tokens={sp.max_tokens}, "
            f"got {sp.min_tokens}."
        )
    if sp.logprobs is not None and sp.logprobs < 0:
        fail(f"logprobs must be non-negative, got {sp.logprobs}.")
    if sp.seed is not None and not -(2**63) <= sp.seed < 2**64:
        fail(f"seed must fit in 64 bits, got {sp.seed}.")


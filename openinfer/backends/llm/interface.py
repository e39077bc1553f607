"""The tensor interface of Triton's vLLM backend: config auto-complete, request parsing, responses.

Every LLM backend reads its requests and writes its responses through this module, so the
names, types and the small rules (prompt prepended only when not streaming, counts as
deltas when streaming) exist once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._proto import model_config_pb2 as mc
from ...core.errors import InvalidArgumentError
from ...core.types import InferRequest, Tensor

GENERATE = "generate"
EMBED = "embed"

#: (name, config type, dims, optional) — Triton's vLLM backend's inputs, in its order.
INPUTS: list[tuple[str, int, list[int], bool]] = [
    ("text_input", mc.TYPE_STRING, [1], False),
    ("image", mc.TYPE_STRING, [-1], True),
    ("stream", mc.TYPE_BOOL, [1], True),
    ("sampling_parameters", mc.TYPE_STRING, [1], True),
    ("exclude_input_in_output", mc.TYPE_BOOL, [1], True),
    ("return_finish_reason", mc.TYPE_BOOL, [1], True),
    ("return_cumulative_logprob", mc.TYPE_BOOL, [1], True),
    ("return_logprobs", mc.TYPE_BOOL, [1], True),
    ("return_num_input_tokens", mc.TYPE_BOOL, [1], True),
    ("return_num_output_tokens", mc.TYPE_BOOL, [1], True),
    ("embedding_request", mc.TYPE_STRING, [1], True),
]
OUTPUTS: list[tuple[str, int, list[int]]] = [
    ("text_output", mc.TYPE_STRING, [-1]),
    ("finish_reason", mc.TYPE_STRING, [-1]),
    ("cumulative_logprob", mc.TYPE_FP32, [-1]),
    ("logprobs", mc.TYPE_STRING, [-1]),
    ("num_input_tokens", mc.TYPE_UINT32, [1]),
    ("num_output_tokens", mc.TYPE_UINT32, [-1]),
]
_RETURN_FLAGS = (
    "return_finish_reason",
    "return_cumulative_logprob",
    "return_logprobs",
    "return_num_input_tokens",
    "return_num_output_tokens",
)


EMBED_INPUTS = {"embedding_request", "return_num_input_tokens", "return_num_output_tokens"}
EMBED_OUTPUTS = {"text_output", "num_input_tokens", "num_output_tokens"}


def auto_complete(config: mc.ModelConfig, *, force_decoupled: bool, only_embed: bool = False) -> None:
    """Add the missing inputs/outputs; no Triton batching (the engine batches); decoupled
    unless the config says otherwise (vLLM insists on it). `only_embed`: an encoder model gets
    just the embedding inputs and outputs (with `embedding_request` required), since it cannot
    generate; Triton's vLLM layout (every model with both) is kept for vllm."""
    have_in = {t.name for t in config.input}
    for name, data_type, dims, optional in INPUTS:
        if only_embed and name not in EMBED_INPUTS:
            continue
        if name not in have_in:
            tensor = config.input.add(name=name, data_type=data_type, dims=dims)
            tensor.optional = optional and not (only_embed and name == "embedding_request")
    have_out = {t.name for t in config.output}
    for name, data_type, dims in OUTPUTS:
        if only_embed and name not in EMBED_OUTPUTS:
            continue
        if name not in have_out:
            config.output.add(name=name, data_type=data_type, dims=dims)
    config.max_batch_size = 0
    if force_decoupled or not config.HasField("model_transaction_policy"):
        config.model_transaction_policy.decoupled = True


# ------------------------------------------------------------------------------ inputs
def _first(request: InferRequest, name: str) -> Any:
    tensor = request.input(name)
    if tensor is None or tensor.data is None or tensor.data.size == 0:
        return None
    return tensor.data.reshape(-1)[0]


def _text(value: Any) -> str:
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def _flag(request: InferRequest, name: str) -> bool:
    value = _first(request, name)
    return bool(value) if value is not None else False


@dataclass
class Returns:
    finish_reason: bool = False
    cumulative_logprob: bool = False
    logprobs: bool = False
    num_input_tokens: bool = False
    num_output_tokens: bool = False


def _returns(request: InferRequest) -> Returns:
    return Returns(*(_flag(request, name) for name in _RETURN_FLAGS))


def task_of(request: InferRequest) -> str:
    return EMBED if request.input("embedding_request") is not None else GENERATE


@dataclass
class GenerateInputs:
    prompt: str
    stream: bool
    prepend_input: bool
    parameters: dict[str, Any] | str | bytes  # JSON text or the request's parameters
    returns: Returns


def parse_generate(request: InferRequest) -> GenerateInputs:
    """Triton's rules: `exclude_input_in_output` absent means the prompt is prepended when not
    streaming; streaming with the prompt prepended is refused."""
    prompt = _first(request, "text_input")
    if prompt is None:
        raise InvalidArgumentError("input 'text_input' is required for generation requests")
    if request.input("image") is not None:
        raise InvalidArgumentError("input 'image' is not supported by this backend")
    stream = _flag(request, "stream")
    exclude = _first(request, "exclude_input_in_output")
    if exclude is not None:
        prepend = not bool(exclude)
    else:
        prepend = not stream
    if prepend and stream:
        raise InvalidArgumentError(
            "When streaming, `exclude_input_in_output` = False is not allowed."
        )
    sampling = _first(request, "sampling_parameters")
    parameters: dict[str, Any] | str | bytes
    if sampling is not None:
        parameters = bytes(sampling) if isinstance(sampling, (bytes, np.bytes_)) else str(sampling)
    else:
        parameters = dict(request.parameters)
    return GenerateInputs(_text(prompt), stream, prepend, parameters, _returns(request))


@dataclass
class EmbedInputs:
    input: str | list[int]
    dimensions: int | None
    returns: Returns


def parse_embed(request: InferRequest) -> EmbedInputs:
    """`embedding_request` = {"input": str | [token ids], "pooling_params": {"dimensions": d | [d]}}."""
    raw = _first(request, "embedding_request")
    try:
        body = json.loads(_text(raw))
    except (json.JSONDecodeError, TypeError) as exc:
        raise InvalidArgumentError(f"'embedding_request' is not valid JSON: {exc}") from None
    if not isinstance(body, dict) or "input" not in body:
        raise InvalidArgumentError("'embedding_request' must be a JSON object with an \"input\"")
    value = body["input"]
    if isinstance(value, str):
        if not value:
            raise InvalidArgumentError("embedding input must be a non-empty string")
    elif isinstance(value, list) and value and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        pass
    else:
        raise InvalidArgumentError(
            "embedding input must be a non-empty string or a non-empty list of token ids"
        )
    pooling = body.get("pooling_params") or {}
    if not isinstance(pooling, dict):
        raise InvalidArgumentError("'pooling_params' must be a JSON object")
    dims = pooling.get("dimensions")
    if isinstance(dims, list):  # Triton's frontend wraps it in a list
        dims = dims[0] if dims else None
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims < 1):
        raise InvalidArgumentError(f"'dimensions' must be a positive integer, got {dims!r}")
    return EmbedInputs(value, dims, _returns(request))


# ----------------------------------------------------------------------------- outputs
def _bytes_tensor(name: str, values: list[str]) -> Tensor:
    data = np.empty(len(values), dtype=np.object_)
    for i, value in enumerate(values):
        data[i] = value.encode("utf-8")
    return Tensor(name, "BYTES", (len(values),), data)


def _uint32(name: str, values: list[int]) -> Tensor:
    return Tensor(name, "UINT32", (len(values),), np.asarray(values, dtype=np.uint32))


def generation_outputs(
    returns: Returns,
    texts: list[str],
    *,
    finish_reasons: list[str | None],
    num_input_tokens: int,
    num_output_tokens: list[int],
    logprobs: Sequence[list[dict[str, Any]] | None] | None = None,
    cumulative_logprobs: list[float] | None = None,
) -> list[Tensor]:
    """One element per sequence (n > 1 gives n). Unfinished sequences report "None", as
    Triton's backend does with `str(finish_reason)`."""
    outputs = [_bytes_tensor("text_output", texts)]
    if returns.finish_reason:
        outputs.append(_bytes_tensor("finish_reason", [str(r) for r in finish_reasons]))
    if returns.cumulative_logprob:
        values = cumulative_logprobs or [0.0] * len(texts)
        outputs.append(
            Tensor("cumulative_logprob", "FP32", (len(values),), np.asarray(values, dtype=np.float32))
        )
    if returns.logprobs:
        entries = logprobs or [None] * len(texts)
        outputs.append(
            _bytes_tensor("logprobs", ["null" if e is None else json.dumps(e) for e in entries])
        )
    if returns.num_input_tokens:
        outputs.append(_uint32("num_input_tokens", [num_input_tokens]))
    if returns.num_output_tokens:
        outputs.append(_uint32("num_output_tokens", num_output_tokens))
    return outputs


def generation_parameters(returns: Returns, num_cached_tokens: int | None) -> dict[str, Any]:
    """Response parameters beside the outputs: `num_cached_tokens` (prompt tokens whose keys and
    values came from the prefix cache) comes with `num_input_tokens`. A parameter, not an output,
    so the model's config stays exactly Triton's."""
    if returns.num_input_tokens and num_cached_tokens is not None:
        return {"num_cached_tokens": num_cached_tokens}
    return {}


def embedding_outputs(returns: Returns, embedding: list[float], num_input_tokens: int) -> list[Tensor]:
    """Triton's layout: the vector as a JSON array in `text_output`."""
    outputs = [_bytes_tensor("text_output", [json.dumps(embedding)])]
    if returns.num_input_tokens:
        outputs.append(_uint32("num_input_tokens", [num_input_tokens]))
    if returns.num_output_tokens:
        outputs.append(_uint32("num_output_tokens", [0]))
    return outputs

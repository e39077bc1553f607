"""Generation and embedding calls into the core, in the tensor interface of INTERFACE.md.

The serving modules describe what to generate (`GenerateCall`); this module builds the
`InferRequest` for the model's request format, runs `InferenceServer.infer_stream` and digests
each response into a `Step` (text, finish reason, token counts, logprobs). Closing a step
iterator closes the core stream, which cancels the backend's work.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.errors import InternalError
from ...core.server import InferenceServer
from ...core.types import InferRequest, InferResponse, Tensor
from ..json_tensors import as_text, first_int, make_tensor, output_array, texts
from .catalog import ModelInfo


@dataclass
class GenerateCall:
    prompt: str
    sampling: dict[str, Any]
    stream: bool
    logprobs: bool = False
    request_id: str = ""


@dataclass
class Step:
    """One backend response, digested."""

    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None  # of the prompt's, served from the model's prefix cache
    logprobs: list[dict[str, Any]] | None = None
    final: bool = False


@dataclass
class Outcome:
    """A whole non-streamed generation."""

    text: str = ""
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    logprobs: list[dict[str, Any]] | None = None

    def add(self, step: Step) -> None:
        self.text += step.text
        if step.finish_reason:
            self.finish_reason = step.finish_reason
        if self.prompt_tokens is None:
            self.prompt_tokens = step.prompt_tokens
        if self.cached_tokens is None:
            self.cached_tokens = step.cached_tokens
        if step.completion_tokens is not None:
            self.completion_tokens = (self.completion_tokens or 0) + step.completion_tokens
        if step.logprobs is not None:
            self.logprobs = (self.logprobs or []) + step.logprobs


def _tensor(info: ModelInfo, name: str, value: Any) -> Tensor | None:
    spec = info.inputs.get(name)
    if spec is None:
        return None
    return make_tensor(name, spec.datatype, spec.dims, info.batched, value)


def _vllm_request(info: ModelInfo, call: GenerateCall) -> InferRequest:
    flags = {
        "stream": call.stream and info.decoupled,  # a unary model answers once: streamed as one chunk
        "exclude_input_in_output": True,
        "return_finish_reason": True,
        "return_num_input_tokens": True,
        "return_num_output_tokens": True,
    }
    if call.logprobs:
        flags["return_logprobs"] = True
    inputs = [_tensor(info, "text_input", call.prompt)]
    parameters: dict[str, Any] = {}
    if info.has_input("sampling_parameters"):
        inputs.append(_tensor(info, "sampling_parameters", json.dumps(call.sampling, ensure_ascii=False)))
    else:  # Triton's vLLM backend reads request parameters when the tensor is absent
        for key, value in call.sampling.items():
            parameters[key] = value if isinstance(value, (bool, int, float, str)) else json.dumps(value)
    inputs += [_tensor(info, name, value) for name, value in flags.items()]
    return InferRequest(
        model_name=info.name,
        model_version=info.version,
        id=call.request_id,
        inputs=[t for t in inputs if t is not None],
        parameters=parameters,
    )


#: TensorRT-LLM layout: sampling keys that travel as their own tensors.
_TRT_INPUTS = ("max_tokens", "top_p", "top_k", "temperature", "frequency_penalty", "presence_penalty", "seed")


def _trtllm_request(info: ModelInfo, call: GenerateCall) -> InferRequest:
    values: dict[str, Any] = {"text_input": call.prompt, "stream": call.stream and info.decoupled}
    for key in _TRT_INPUTS:
        if call.sampling.get(key) is not None:
            values[key] = call.sampling[key]
    if call.sampling.get("stop"):
        values["stop_words"] = list(call.sampling["stop"])
    values["exclude_input_in_output"] = True
    guide = call.sampling.get("guided_json")
    if guide is not None:
        values["guided_decoding_guide_type"] = "json_schema"
        values["guided_decoding_guide"] = json.dumps(guide)
    elif call.sampling.get("guided_regex") is not None:
        values["guided_decoding_guide_type"] = "regex"
        values["guided_decoding_guide"] = call.sampling["guided_regex"]
    values["return_num_input_tokens"] = True
    values["return_num_output_tokens"] = True
    values["return_finish_reason"] = True
    inputs = [_tensor(info, name, value) for name, value in values.items()]
    return InferRequest(
        model_name=info.name,
        model_version=info.version,
        id=call.request_id,
        inputs=[t for t in inputs if t is not None],
    )


def build_request(info: ModelInfo, call: GenerateCall) -> InferRequest:
    if info.request_format == "tensorrtllm":
        return _trtllm_request(info, call)
    return _vllm_request(info, call)


def _text(data: np.ndarray) -> str:
    if data.size == 1:  # one sequence per request: skip the list
        return as_text(data.item())
    return "".join(texts(data))


def digest(response: InferResponse) -> Step:
    """One pass over the outputs: this runs once per streamed token."""
    if response.error is not None:
        raise response.error
    step = Step(final=response.final)
    for tensor in response.outputs:
        name, data = tensor.name, tensor.data
        if data is None:
            continue
        if name == "text_output":
            step.text = _text(data)
        elif name == "finish_reason":
            if data.size:
                value = as_text(data.flat[0])
                step.finish_reason = value if value and value != "None" else None  # "None": not finished yet
        elif name == "num_input_tokens":
            step.prompt_tokens = int(data.flat[0]) if data.size else None
        elif name == "num_output_tokens":
            step.completion_tokens = int(data.flat[0]) if data.size else None
        elif name == "logprobs" and data.size:
            raw = as_text(data.flat[0])
            if raw:
                try:
                    parsed = json.loads(raw)
                except ValueError as exc:
                    raise InternalError(
                        f"model '{response.model_name}' returned invalid logprobs JSON: {exc}"
                    ) from exc
                step.logprobs = parsed if isinstance(parsed, list) else None
    parameters = response.parameters
    if parameters:
        if step.finish_reason is None:
            reason = parameters.get("finish_reason")
            if isinstance(reason, (str, bytes)) and reason:
                step.finish_reason = reason.decode() if isinstance(reason, bytes) else reason
        cached = parameters.get("num_cached_tokens")
        if isinstance(cached, int) and not isinstance(cached, bool):
            step.cached_tokens = cached
    return step


async def generate(server: InferenceServer, info: ModelInfo, call: GenerateCall) -> AsyncIterator[Step]:
    """Every response of one generation, digested; closing this iterator cancels the backend."""
    stream = server.infer_stream(build_request(info, call))
    try:
        async for response in stream:
            yield digest(response)
    finally:
        await stream.aclose()


async def generate_all(server: InferenceServer, info: ModelInfo, call: GenerateCall) -> Outcome:
    outcome = Outcome()
    async for step in generate(server, info, call):
        outcome.add(step)
    return outcome


class _Single:
    """`Merged` for one generation (n = 1): reads the core's stream itself, so a token passes no
    task, queue or extra generator on its way to the client."""

    def __init__(self, stream: AsyncIterator[InferResponse]) -> None:
        self._stream = stream
        self._cancelled = False

    def cancel(self, index: int) -> None:
        self._cancelled = True

    async def __aiter__(self) -> AsyncIterator[tuple[int, Step | None]]:
        stream = self._stream
        try:
            while not self._cancelled:
                try:
                    response = await stream.__anext__()
                except StopAsyncIteration:
                    break
                yield 0, digest(response)
            yield 0, None
        finally:
            await stream.aclose()  # type: ignore[attr-defined]


class Merged:
    """Interleaves several step streams (n > 1): yields `(index, step)`, and `(index, None)` when
    stream `index` ends. `cancel(index)` stops one stream (its backend work is cancelled)."""

    def __init__(self, streams: Sequence[AsyncIterator[Step]]) -> None:
        self._queue: asyncio.Queue[tuple[int, Step | BaseException | None]] = asyncio.Queue()
        self._tasks = [asyncio.ensure_future(self._pump(i, s)) for i, s in enumerate(streams)]

    async def _pump(self, index: int, stream: AsyncIterator[Step]) -> None:
        try:
            async for step in stream:
                await self._queue.put((index, step))
            await self._queue.put((index, None))
        except asyncio.CancelledError:
            await self._queue.put((index, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, which re-raises it
            await self._queue.put((index, exc))
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    def cancel(self, index: int) -> None:
        self._tasks[index].cancel()

    async def __aiter__(self) -> AsyncIterator[tuple[int, Step | None]]:
        remaining = len(self._tasks)
        try:
            while remaining:
                index, item = await self._queue.get()
                if isinstance(item, BaseException):
                    raise item
                if item is None:
                    remaining -= 1
                yield index, item
        finally:
            await self.close()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def merge(server: InferenceServer, info: ModelInfo, calls: Sequence[GenerateCall]) -> Merged | _Single:
    """The generations of `calls` (a request's choices) as one iterator of `(index, step | None)`."""
    if len(calls) == 1:
        return _Single(server.infer_stream(build_request(info, calls[0])))
    return Merged([generate(server, info, call) for call in calls])


# ------------------------------------------------------------------------------ embeddings
@dataclass
class Embedding:
    vector: np.ndarray
    prompt_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


async def embed(
    server: InferenceServer, info: ModelInfo, item: str | list[int], dimensions: int | None, request_id: str
) -> Embedding:
    payload: dict[str, Any] = {"input": item, "pooling_params": {} if dimensions is None else {"dimensions": dimensions}}
    inputs = [
        _tensor(info, "embedding_request", json.dumps(payload)),
        _tensor(info, "return_num_input_tokens", True),
    ]
    request = InferRequest(
        model_name=info.name, model_version=info.version, id=request_id, inputs=[t for t in inputs if t is not None]
    )
    vector: np.ndarray | None = None
    tokens = None
    async for response in server.infer_stream(request):
        if response.error is not None:
            raise response.error
        for name in ("embedding_response", "text_output"):
            array = output_array(response, name)
            if array is None:
                continue
            if array.dtype == np.object_:
                vector = np.asarray(json.loads(texts(array)[0]), dtype=np.float32).reshape(-1)
            else:
                vector = np.asarray(array, dtype=np.float32).reshape(-1)
            break
        tokens = first_int(output_array(response, "num_input_tokens")) if tokens is None else tokens
    if vector is None:
        raise InternalError(f"model '{info.name}' returned no 'embedding_response' output")
    if dimensions is not None and vector.size > dimensions:  # the backend ignored `dimensions`
        vector = vector[:dimensions]
        norm = float(np.linalg.norm(vector))
        if norm > 0:
            vector = vector / norm
    return Embedding(vector, tokens)

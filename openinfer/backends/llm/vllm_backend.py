"""`backend: "vllm"`: vLLM's async engine behind the same tensor interface, where vLLM and a GPU are.

As in Triton's vLLM backend, `1/model.json` holds vLLM's engine arguments as they are
(`model`, `gpu_memory_utilization`, `enable_lora`, `max_model_len`, ...), the model is always
decoupled, and `multi_lora.json` names the adapters. vLLM batches by itself; each request
runs as a task on the server's loop that reads vLLM's outputs (the engine core computes in
its own process) and answers through the request's sender. Without vLLM or a GPU the model
fails to load with an UNAVAILABLE reason that says which is missing.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from ...core.backend import Backend, InstanceSpec, ModelContext, ModelInstance
from ...core.errors import InternalError, InvalidArgumentError, OpenInferError, UnavailableError
from ...core.observability.stats import ExecutionTiming
from ...core.repository.text_model import TextModel
from ...core.requests.responses import ResponseSender
from ...core.types import InferRequest, InferResponse
from . import interface
from .model_files import ModelFiles, check_lora, describe_text, read_model_files
from .sampling import SamplingParams, load_parameters, parse_sampling

log = logging.getLogger("openinfer.llm")

#: model.json keys that are ours, not vLLM engine arguments
_OUR_KEYS = {"cpu_threads", "llama_decode", "normalize", "pooling"}


def unavailable_reason() -> str | None:
    """Why vLLM cannot run here, or None."""
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        return f"the 'vllm' package is not installed ({exc})"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible"
    return None


def _structured(guided: Any) -> tuple[str, Any]:
    """Our constraint as vLLM's parameter object (the name changed across vLLM versions)."""
    kwargs = {guided.kind: True if guided.kind == "json_object" else guided.value}
    try:
        from vllm.sampling_params import StructuredOutputsParams

        return "structured_outputs", StructuredOutputsParams(**kwargs)
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        return "guided_decoding", GuidedDecodingParams(**kwargs)


def to_vllm(params: SamplingParams) -> Any:
    from vllm import SamplingParams as VllmSamplingParams

    kwargs: dict[str, Any] = {
        "n": params.n,
        "max_tokens": params.max_tokens,
        "min_tokens": params.min_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,
        "min_p": params.min_p,
        "presence_penalty": params.presence_penalty,
        "frequency_penalty": params.frequency_penalty,
        "repetition_penalty": params.repetition_penalty,
        "seed": params.seed,
        "stop": params.stop or None,
        "stop_token_ids": params.stop_token_ids or None,
        "include_stop_str_in_output": params.include_stop_str_in_output,
        "ignore_eos": params.ignore_eos,
        "skip_special_tokens": params.skip_special_tokens,
        "spaces_between_special_tokens": params.spaces_between_special_tokens,
        "logprobs": params.logprobs,
    }
    if params.logit_bias:
        kwargs["logit_bias"] = params.logit_bias
    if params.allowed_token_ids is not None:
        kwargs["allowed_token_ids"] = params.allowed_token_ids
    if params.guided is not None:
        key, value = _structured(params.guided)
        kwargs[key] = value
    try:
        return VllmSamplingParams(**kwargs)
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError(str(exc)) from None


def _logprobs(entries: Any) -> list[dict[str, Any]]:
    result = []
    for position in entries or []:
        result.append({
            str(token): {"logprob": lp.logprob, "rank": lp.rank, "decoded_token": lp.decoded_token}
            for token, lp in position.items()
        })
    return result


class VllmInstance(ModelInstance):
    def __init__(self, ctx: ModelContext, spec: InstanceSpec, engine: Any, files: ModelFiles) -> None:
        self.ctx = ctx
        self.spec = spec
        self.engine = engine
        self.files = files
        self.loras = list(files.loras)
        self.tasks: set[asyncio.Task[None]] = set()
        self.ids = itertools.count(1)
        self.defaults: dict[str, Any] = {}
        model_config = getattr(engine, "model_config", None)
        getter = getattr(model_config, "get_diff_sampling_param", None)
        if callable(getter):
            self.defaults = dict(getter())

    async def execute(self, requests: list[InferRequest], senders: list[ResponseSender]) -> ExecutionTiming:
        for request, sender in zip(requests, senders):
            try:
                coroutine = self._embed(request, sender) if interface.task_of(request) == interface.EMBED \
                    else self._generate(request, sender)
            except OpenInferError as exc:
                sender.fail(exc)
                continue
            task = asyncio.ensure_future(coroutine)
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return ExecutionTiming()  # vLLM batches out of sight: one execution per request, as Triton counts

    def _response(self, sender: ResponseSender, outputs: list) -> InferResponse:
        return InferResponse(sender.request.model_name, "", sender.request.id, outputs=outputs)

    def _generate(self, request: InferRequest, sender: ResponseSender) -> Any:
        inputs = interface.parse_generate(request)
        params = parse_sampling(load_parameters(inputs.parameters), self.defaults)
        check_lora(params.lora_name, self.files, self.loras)
        sampling = to_vllm(params)
        lora = None
        if params.lora_name is not None:
            from vllm.lora.request import LoRARequest

            index = self.loras.index(params.lora_name) + 1
            lora = LoRARequest(params.lora_name, index, self.files.loras[params.lora_name])
        return self._run_generate(request, sender, inputs, params, sampling, lora)

    async def _run_generate(self, request, sender, inputs, params, sampling, lora) -> None:
        request_id = f"{request.id or 'req'}-{next(self.ids)}"
        cancelled = request.state.cancel_event()
        sent_text: list[int] = []
        sent_tokens: list[int] = []
        sent_logprobs: list[int] = []
        last = None
        try:
            async for output in self.engine.generate({"prompt": inputs.prompt}, sampling, request_id, lora_request=lora):
                last = output
                if cancelled is not None and cancelled.is_set():
                    await self.engine.abort(request_id)
                    sender.send(None, final=True)
                    return
                if not inputs.stream:
                    continue
                if not sent_text:
                    sent_text = [0] * len(output.outputs)
                    sent_tokens = [0] * len(output.outputs)
                    sent_logprobs = [0] * len(output.outputs)
                texts, counts, logprobs = [], [], []
                for i, choice in enumerate(output.outputs):
                    texts.append(choice.text[sent_text[i]:])
                    counts.append(len(choice.token_ids) - sent_tokens[i])
                    logprobs.append(_logprobs((choice.logprobs or [])[sent_logprobs[i]:]))
                    sent_text[i], sent_tokens[i] = len(choice.text), len(choice.token_ids)
                    sent_logprobs[i] = len(choice.logprobs or [])
                sender.send(self._response(sender, self._outputs(inputs, output, texts, counts, logprobs)),
                            final=output.finished)
            if last is None:
                raise InternalError(f"model '{self.ctx.name}': vLLM returned no output")
            if not inputs.stream:
                prefix = last.prompt if inputs.prepend_input and last.prompt else ""
                texts = [prefix + c.text for c in last.outputs]
                counts = [len(c.token_ids) for c in last.outputs]
                logprobs = [_logprobs(c.logprobs) for c in last.outputs]
                sender.send(self._response(sender, self._outputs(inputs, last, texts, counts, logprobs)), final=True)
            elif not sender.closed:
                sender.send(None, final=True)
        except OpenInferError as exc:
            sender.fail(exc)
        except asyncio.CancelledError:
            await self.engine.abort(request_id)
            raise
        except Exception as exc:
            log.exception("vLLM request failed")
            sender.fail(InternalError(f"Error generating stream: {exc}"))

    def _outputs(self, inputs, output, texts, counts, logprobs) -> list:
        want_logprobs = inputs.returns.logprobs
        return interface.generation_outputs(
            inputs.returns,
            texts,
            finish_reasons=[c.finish_reason for c in output.outputs],
            num_input_tokens=len(output.prompt_token_ids or []),
            num_output_tokens=counts,
            logprobs=logprobs if want_logprobs else None,
            cumulative_logprobs=[float(c.cumulative_logprob or 0.0) for c in output.outputs],
        )

    def _embed(self, request: InferRequest, sender: ResponseSender) -> Any:
        inputs = interface.parse_embed(request)
        return self._run_embed(request, sender, inputs)

    async def _run_embed(self, request, sender, inputs) -> None:
        from vllm import PoolingParams

        request_id = f"{request.id or 'emb'}-{next(self.ids)}"
        prompt = {"prompt": inputs.input} if isinstance(inputs.input, str) else {"prompt_token_ids": inputs.input}
        try:
            try:
                pooling = PoolingParams(task="embed", dimensions=inputs.dimensions)
            except TypeError:
                pooling = PoolingParams(dimensions=inputs.dimensions)
            last = None
            async for output in self.engine.encode(prompt, pooling, request_id):
                last = output
            if last is None:
                raise InternalError(f"model '{self.ctx.name}': vLLM returned no embedding")
            data = last.outputs.data if hasattr(last.outputs, "data") else last.outputs.embedding
            vector = data.tolist() if hasattr(data, "tolist") else list(data)
            outputs = interface.embedding_outputs(inputs.returns, vector, len(last.prompt_token_ids or []))
            sender.send(self._response(sender, outputs), final=True)
        except OpenInferError as exc:
            sender.fail(exc)
        except Exception as exc:
            log.exception("vLLM embedding failed")
            sender.fail(InternalError(f"Error generating embedding: {exc}"))

    async def stop(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        shutdown = getattr(self.engine, "shutdown", None)
        if callable(shutdown):
            shutdown()


class VllmBackend(Backend):
    name = "vllm"

    def describe_text(self, ctx: ModelContext) -> TextModel:
        return describe_text(ctx)

    async def auto_complete(self, ctx: ModelContext) -> None:
        read_model_files(ctx)  # model.json must exist, as Triton requires
        interface.auto_complete(ctx.config, force_decoupled=True)

    async def create_instance(self, ctx: ModelContext, spec: InstanceSpec) -> ModelInstance:
        reason = unavailable_reason()
        if reason is not None:
            raise UnavailableError(f"model '{ctx.name}': the vllm backend is unavailable: {reason}")
        files = read_model_files(ctx)
        args = {k: v for k, v in files.engine_args.items() if k not in _OUR_KEYS}
        args["model"] = files.model
        if files.tokenizer != files.model:
            args["tokenizer"] = files.tokenizer
        if files.lora_enabled:
            args["enable_lora"] = True
            args.setdefault("max_loras", max(1, len(files.loras)))
        else:
            args.pop("enable_lora", None)
        loop = asyncio.get_running_loop()
        try:
            engine = await loop.run_in_executor(None, _start_engine, args)
        except OpenInferError:
            raise
        except Exception as exc:
            raise UnavailableError(f"model '{ctx.name}': vLLM failed to start: {exc}") from exc
        return VllmInstance(ctx, spec, engine, files)


def _start_engine(args: dict[str, Any]) -> Any:
    from vllm.engine.arg_utils import AsyncEngineArgs

    try:
        engine_args = AsyncEngineArgs(**args)
    except TypeError as exc:
        raise InvalidArgumentError(f"invalid vLLM engine argument in model.json: {exc}") from None
    try:
        from vllm.v1.engine.async_llm import AsyncLLM

        return AsyncLLM.from_engine_args(engine_args)
    except ImportError:
        from vllm.engine.async_llm_engine import AsyncLLMEngine

        return AsyncLLMEngine.from_engine_args(engine_args)

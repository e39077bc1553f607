"""`backend: "transformers"`: Hugging Face models on the CPU behind Triton's vLLM interface.

A model directory needs only `config.pbtxt` with the backend name and `1/model.json` naming
the weights; inputs and outputs are auto-completed. `execute` parses and checks a request on
the loop, hands it to the instance's engine thread and returns at once, so concurrent
requests meet in the engine and are batched there (each forward pass is one execution in
the model's statistics, with its real batch size).

model.json keys read here: `model`, `tokenizer`, `dtype`, `max_model_len`, `max_num_seqs`,
`max_num_batched_tokens` (one prefill's budget), `enable_prefix_caching` (default true) and
`prefix_cache_mb` (its memory, default 256), `cpu_threads`, `task`/`runner` ("embed" for
encoders), `enable_lora`, `trust_remote_code`.
"""

from __future__ import annotations

import asyncio
import logging

from ..._proto import model_config_pb2 as mc
from ...core.backend import Backend, InstanceSpec, ModelContext, ModelInstance
from ...core.errors import InvalidArgumentError, OpenInferError
from ...core.repository.text_model import TextModel
from ...core.requests.responses import ResponseSender
from ...core.types import InferRequest
from . import hf_model, interface
from .embeddings import EmbeddingEngine, EmbedJob
from .engine import BASE_ADAPTER, MAX_NUM_BATCHED_TOKENS, GenerationEngine, Group
from .engine_thread import EngineThread
from .model_files import ModelFiles, check_lora, describe_text, flag, read_model_files
from .prefix_cache import PrefixCache
from .sampling import load_parameters, parse_sampling

log = logging.getLogger("openinfer.llm")


class TransformersInstance(ModelInstance):
    def __init__(
        self, ctx: ModelContext, spec: InstanceSpec, lm: hf_model.HFModel, files: ModelFiles
    ) -> None:
        self.ctx = ctx
        self.spec = spec
        self.lm = lm
        self.files = files
        loop = asyncio.get_running_loop()
        seqs = int(files.engine_args.get("max_num_seqs", 16 if lm.task == interface.GENERATE else 32))
        self.engine: EngineThread
        if lm.task == interface.GENERATE:
            args = files.engine_args
            prefix_cache = None
            if flag(args, "enable_prefix_caching", True):
                prefix_cache = PrefixCache(int(float(args.get("prefix_cache_mb", 256)) * (1 << 20)))
            self.engine = GenerationEngine(
                ctx.name, lm, loop, ctx.stats, max_num_seqs=seqs, prefix_cache=prefix_cache,
                max_num_batched_tokens=int(args.get("max_num_batched_tokens", MAX_NUM_BATCHED_TOKENS)),
            )
        else:
            self.engine = EmbeddingEngine(ctx.name, lm, loop, ctx.stats, max_num_seqs=seqs)
        self.engine.start()

    async def execute(self, requests: list[InferRequest], senders: list[ResponseSender]) -> None:
        for request, sender in zip(requests, senders):
            try:
                self.engine.submit(self._job(request, sender))
            except OpenInferError as exc:
                sender.fail(exc)
        # None: the engine records one execution per forward pass

    def _job(self, request: InferRequest, sender: ResponseSender) -> Group | EmbedJob:
        task = interface.task_of(request)
        if task != self.lm.task:
            raise InvalidArgumentError(f"Model {self.ctx.name} does not support '{task}' request")
        if task == interface.EMBED:
            return EmbedJob(request.id, interface.parse_embed(request), sender)
        inputs = interface.parse_generate(request)
        if inputs.stream and not self.ctx.decoupled:
            raise InvalidArgumentError(
                f"model '{self.ctx.name}' is not decoupled: streaming needs "
                "model_transaction_policy { decoupled: true }"
            )
        params = parse_sampling(load_parameters(inputs.parameters), self.lm.defaults)
        check_lora(params.lora_name, self.files, self.lm.loras)
        limit = getattr(self.engine, "max_num_seqs", 1)
        if params.n > limit:
            raise InvalidArgumentError(f"n must be at most max_num_seqs={limit}, got {params.n}.")
        return Group(
            request_id=request.id,
            inputs=inputs,
            params=params,
            sender=sender,
            # the core sets this event when the caller goes away (stream closed, HTTP disconnect)
            cancelled=request.state.cancel_event(),
            adapter=params.lora_name or BASE_ADAPTER,
        )

    async def stop(self) -> None:
        await self.engine.stop()


class TransformersBackend(Backend):
    name = "transformers"

    def describe_text(self, ctx: ModelContext) -> TextModel:
        return describe_text(ctx)

    async def auto_complete(self, ctx: ModelContext) -> None:
        task = hf_model.detect_task(read_model_files(ctx))
        interface.auto_complete(ctx.config, force_decoupled=False, only_embed=task == interface.EMBED)

    async def create_instance(self, ctx: ModelContext, spec: InstanceSpec) -> ModelInstance:
        if spec.kind == mc.ModelInstanceGroup.KIND_GPU:
            log.warning("model '%s': the transformers backend runs on the CPU (use the vllm backend "
                        "for GPUs); instance '%s' ignores KIND_GPU", ctx.name, spec.name)
        files = read_model_files(ctx)
        loop = asyncio.get_running_loop()
        lm = await loop.run_in_executor(None, hf_model.load, files, ctx.name)
        await loop.run_in_executor(None, hf_model.warm_up, lm)
        log.info(
            "model '%s' instance '%s': %s, %s, max_model_len %d%s",
            ctx.name, spec.name, lm.task, type(lm.model).__name__, lm.max_model_len,
            f", LoRA {lm.loras}" if lm.loras else "",
        )
        return TransformersInstance(ctx, spec, lm, files)

"""Client-side helpers for the LLM tests: build vLLM-interface inputs, read streams, references."""

from __future__ import annotations

import json
import queue
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import np_to_triton_dtype


def tensor(module: Any, name: str, value: Any) -> Any:
    array = np.array([value.encode() if isinstance(value, str) else value], dtype=object if isinstance(value, str) else None)
    item = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
    item.set_data_from_numpy(array)
    return item


def generate_inputs(module: Any, prompt: str, params: dict | str | None = None, **flags: Any) -> list:
    """text_input + sampling_parameters (JSON) + boolean flags (stream=..., return_*=...)."""
    inputs = [tensor(module, "text_input", prompt)]
    if params is not None:
        raw = params if isinstance(params, str) else json.dumps(params)
        inputs.append(tensor(module, "sampling_parameters", raw))
    for name, value in flags.items():
        inputs.append(tensor(module, name, bool(value)))
    return inputs


ALL_RETURNS = {
    "return_finish_reason": True,
    "return_num_input_tokens": True,
    "return_num_output_tokens": True,
}


def http_generate(client: httpclient.InferenceServerClient, model: str, prompt: str, params: dict, **flags: Any) -> dict:
    result = client.infer(model, generate_inputs(httpclient, prompt, params, **flags))
    return {o["name"]: result.as_numpy(o["name"]) for o in result.get_response()["outputs"]}


class Stream:
    """A gRPC bidirectional stream whose responses are read in order."""

    def __init__(self, url: str) -> None:
        self.client = grpcclient.InferenceServerClient(url)
        self.responses: queue.Queue = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self.responses.put((result, error)))

    def send(self, model: str, prompt: str, params: dict, request_id: str = "", **flags: Any) -> None:
        self.client.async_stream_infer(
            model, generate_inputs(grpcclient, prompt, params, **flags), request_id=request_id,
            enable_empty_final_response=True,
        )

    def next(self, timeout: float = 60) -> tuple[Any, Any]:
        return self.responses.get(timeout=timeout)

    def collect(self, timeout: float = 60) -> list[dict]:
        """Responses of one request until its final flag; each as {output name: array}."""
        items = []
        while True:
            result, error = self.next(timeout)
            if error is not None:
                raise error
            response = result.get_response()
            outputs = {o.name: result.as_numpy(o.name) for o in response.outputs}
            items.append(outputs)
            if response.parameters["triton_final_response"].bool_param:
                return items

    def close(self, cancel: bool = False) -> None:
        self.client.stop_stream(cancel_requests=cancel)
        self.client.close()


def text(array: np.ndarray, index: int = 0) -> str:
    return array[index].decode("utf-8", errors="replace")


@lru_cache(maxsize=4)
def _reference_model(path: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def reference_greedy(model_dir: Path, prompt: str, max_tokens: int, adapter: Path | None = None) -> tuple[str, int]:
    """What transformers' own `generate` produces greedily: (text, number of new tokens)."""
    import torch

    model, tokenizer = _reference_model(str(model_dir))
    if adapter is not None:  # a fresh base: peft injects its layers into the model it wraps
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        base = AutoModelForCausalLM.from_pretrained(str(model_dir))
        model = PeftModel.from_pretrained(base, str(adapter)).eval()
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=max_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    new = out[0, ids.shape[1]:].tolist()
    return tokenizer.decode(new, skip_special_tokens=True), len(new)


def token_count(model_dir: Path, prompt: str) -> int:
    return len(_reference_model(str(model_dir))[1](prompt).input_ids)

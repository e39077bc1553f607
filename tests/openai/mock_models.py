"""Deterministic Python-backend models with the LLM tensor interface (INTERFACE.md), for
exact-text assertions through the OpenAI frontend.

`mock_llm` answers with the prompt itself, or with what the prompt asks for:
  `#say:<text>#`      answer <text>
  `#tool:<name>#`     answer the scripted tool-call text SCRIPTS[<name>]
  `#think:<name>#`    answer SCRIPTS[<name>] as a Qwen3 model does: without its `<think>` block
                      when the prompt already closed one (the template's `enable_thinking: false`)
  `#chars:<n>#`       stream the answer in pieces of n characters instead of words
  `#relay#`           once the prompt holds a tool turn (a tool's result fed back), answer that
                      result's text; until then the other directives apply (a tool round trip)
  `#params#`          answer the sampling parameters it received, as sorted JSON
  `#fail#`            stream two tokens, then fail the request
  `#slow#`            sleep 20 ms before each token
  `#long#`            answer 150 tokens, one every 20 ms
A guided_json schema makes it answer a value that fits the schema (first enum value, "x"
strings, 1 for numbers). Tokens are whitespace-separated words; `max_tokens` and `stop` are
honoured with finish reasons "length" / "stop".
"""

from __future__ import annotations

import json

LLM_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [
  {{ name: "text_input" data_type: TYPE_STRING dims: [ 1 ] }},
  {{ name: "stream" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "sampling_parameters" data_type: TYPE_STRING dims: [ 1 ] optional: true }},
  {{ name: "exclude_input_in_output" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "return_finish_reason" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "return_num_input_tokens" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "return_num_output_tokens" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "return_logprobs" data_type: TYPE_BOOL dims: [ 1 ] optional: true }}
]
output [
  {{ name: "text_output" data_type: TYPE_STRING dims: [ -1 ] }},
  {{ name: "finish_reason" data_type: TYPE_STRING dims: [ -1 ] }},
  {{ name: "num_input_tokens" data_type: TYPE_UINT32 dims: [ 1 ] }},
  {{ name: "num_output_tokens" data_type: TYPE_UINT32 dims: [ 1 ] }},
  {{ name: "logprobs" data_type: TYPE_STRING dims: [ -1 ] }}
]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""

SCRIPTS = {
    "llama3": '{"name": "get_current_weather", "parameters": {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}}',
    "llama3_two": '<|python_tag|>{"name": "get_current_weather", "parameters": {"city": "Dallas", "state": "TX", '
    '"unit": "fahrenheit"}}; {"name": "get_n_day_weather_forecast", "parameters": {"city": "Dallas", "state": "TX", '
    '"unit": "fahrenheit", "num_days": 2}}',
    "mistral": '[TOOL_CALLS][{"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX", '
    '"unit": "fahrenheit"}}]',
    "mistral_big": '[TOOL_CALLS][{"name": "get_current_weather", "arguments": {"city": "' + "A" * 2000 + '"}}]',
    "mistral_small": '[TOOL_CALLS][{"name": "get_current_weather", "arguments": {"city": "' + "A" * 5 + '"}}]',
    "text": "The weather is sunny today.",
    # reasoning models, as their chat templates leave them to write
    "qwen3_think": "<think>\nThe user asks about Dallas. Sunny, I recall.\n</think>\n\nIt is sunny in Dallas.",
    "qwen3_tool": '<think>\nI need the weather tool.\n</think>\n\n<tool_call>\n{"name": "get_current_weather", '
    '"arguments": {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}}\n</tool_call>',
    "r1": "The user asks for 2 + 2. That is 4.\n</think>\n\nThe answer is 4.",
    "r1_tool": "Let me think about which tool fits. " * 20 + "\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
    'function<｜tool▁sep｜>get_current_weather\n```json\n{"city": "Dallas", "state": "TX", "unit": "fahrenheit"}\n```'
    "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_n_day_weather_forecast\n```json\n"
    '{"city": "Dallas", "state": "TX", "unit": "fahrenheit", "num_days": 2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    # tool-call formats, as each family's chat template writes an assistant's calls
    "hermes_two": 'Let me check both.\n<tool_call>\n{"name": "get_current_weather", "arguments": {"city": "Dallas", '
    '"state": "TX", "unit": "fahrenheit"}}\n</tool_call>\n<tool_call>\n{"name": "get_n_day_weather_forecast", '
    '"arguments": {"city": "Dallas", "state": "TX", "unit": "fahrenheit", "num_days": 2}}\n</tool_call>',
    "pythonic_two": "[get_current_weather(city='Dallas', state='TX', unit='fahrenheit'), "
    "get_n_day_weather_forecast(city='Dallas', state='TX', unit='fahrenheit', num_days=2)]",
}

LLM_MODEL = '''
import json
import re
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

SCRIPTS = __SCRIPTS__
WORD = re.compile(r"\\s*\\S+|\\s+")
TOOL_TURN = "<|start_header_id|>tool<|end_header_id|>"


def fill(schema):
    """A value that satisfies a (simple) JSON schema."""
    if not isinstance(schema, dict):
        return "x"
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return fill(schema["anyOf"][0])
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties", {})
        return {key: fill(value) for key, value in props.items()}
    if kind == "array":
        return [fill(schema.get("items", {}))]
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    return "x"


class TritonPythonModel:
    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for request in requests:
            thread = threading.Thread(target=self.run, args=(request,), daemon=True)
            thread.start()
            self.threads = [t for t in self.threads if t.is_alive()]  # finished ones would pile up
            self.threads.append(thread)
        return None

    def flag(self, request, name, default=False):
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        return bool(tensor.as_numpy().reshape(-1)[0]) if tensor is not None else default

    def run(self, request):
        sender = request.get_response_sender()
        prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0].decode()
        raw = pb_utils.get_input_tensor_by_name(request, "sampling_parameters")
        params = json.loads(raw.as_numpy().reshape(-1)[0].decode()) if raw is not None else json.loads(request.parameters() or "{}")
        stream = self.flag(request, "stream")
        exclude = self.flag(request, "exclude_input_in_output", False)
        want_logprobs = self.flag(request, "return_logprobs")
        if "guided_json" in params:
            text = json.dumps(fill(params["guided_json"]))
        elif "#params#" in prompt:
            text = json.dumps(params, sort_keys=True)
        elif "#relay#" in prompt and TOOL_TURN in prompt:
            text = prompt.rsplit(TOOL_TURN, 1)[1].split("<|eot_id|>", 1)[0].strip()
        elif "#tool:" in prompt:
            text = SCRIPTS[prompt.split("#tool:", 1)[1].split("#", 1)[0]]
        elif "#think:" in prompt:
            text = SCRIPTS[prompt.split("#think:", 1)[1].split("#", 1)[0]]
            if prompt.rstrip().endswith("</think>"):
                text = text.split("</think>", 1)[1].lstrip()
        elif "#say:" in prompt:
            text = prompt.split("#say:", 1)[1].split("#", 1)[0]
        elif "#long#" in prompt:
            text = " tick" * 150
        else:
            text = prompt
        tokens = WORD.findall(text)
        if "#chars:" in prompt:
            size = int(prompt.split("#chars:", 1)[1].split("#", 1)[0])
            tokens = [text[i : i + size] for i in range(0, len(text), size)]
        reason = "stop"
        limit = params.get("max_tokens")
        if limit is not None and len(tokens) > limit:
            tokens, reason = tokens[:limit], "length"
        for stop in [] if "#params#" in prompt else params.get("stop", []):
            joined = "".join(tokens)
            if stop in joined:
                cut = joined.index(stop)
                tokens = WORD.findall(joined[:cut])
                reason = "stop"
        prompt_tokens = len(WORD.findall(prompt))
        delay = 0.02 if ("#slow#" in prompt or "#long#" in prompt) else 0.0

        def response(pieces, finish, count):
            outputs = [
                pb_utils.Tensor("text_output", np.array(["".join(pieces).encode()], dtype=np.object_)),
                pb_utils.Tensor("finish_reason", np.array([(finish or "").encode()], dtype=np.object_)),
                pb_utils.Tensor("num_input_tokens", np.array([prompt_tokens], dtype=np.uint32)),
                pb_utils.Tensor("num_output_tokens", np.array([count], dtype=np.uint32)),
            ]
            if want_logprobs:
                entries = [
                    {str(10 + i): {"logprob": -0.25, "rank": 1, "decoded_token": piece},
                     "7": {"logprob": -2.0, "rank": 2, "decoded_token": "?"}}
                    for i, piece in enumerate(pieces)
                ]
                outputs.append(pb_utils.Tensor("logprobs", np.array([json.dumps(entries).encode()], dtype=np.object_)))
            return pb_utils.InferenceResponse(output_tensors=outputs)

        if not stream:
            pieces = ([prompt] if not exclude else []) + tokens
            if "#fail#" in prompt:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("mock failure")),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            sender.send(response(pieces, reason, len(tokens)), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        for index, token in enumerate(tokens):
            if delay:
                time.sleep(delay)
            if "#fail#" in prompt and index == 2:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("mock failure mid-stream")),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            if request.is_cancelled():
                sender.send(response([], "abort", 0), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            sender.send(response([token], None, 1))
        sender.send(response([], reason, 0), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join(timeout=5)
'''.replace("__SCRIPTS__", repr(SCRIPTS))

EMBED_CONFIG = """
name: "__NAME__"
backend: "python"
max_batch_size: 0
input [
  { name: "embedding_request" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "return_num_input_tokens" data_type: TYPE_BOOL dims: [ 1 ] optional: true }
]
output [
  { name: "embedding_response" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "num_input_tokens" data_type: TYPE_UINT32 dims: [ 1 ] }
]
"""

EMBED_MODEL = '''
import json

import numpy as np
import triton_python_backend_utils as pb_utils

DIM = 8


def vector(item):
    """A deterministic unit vector: text -> from its characters, token ids -> from the ids."""
    codes = [ord(c) for c in item] if isinstance(item, str) else list(item)
    values = np.array([sum((c * (i + 1)) % 97 for c in codes) % 89 + 1 for i in range(DIM)], dtype=np.float32)
    return values / np.linalg.norm(values)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            doc = json.loads(pb_utils.get_input_tensor_by_name(request, "embedding_request").as_numpy()[0].decode())
            item = doc["input"]
            count = len(item.split()) if isinstance(item, str) else len(item)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("embedding_response", vector(item)),
                pb_utils.Tensor("num_input_tokens", np.array([count], dtype=np.uint32)),
            ]))
        return responses
'''

IDENTITY_CONFIG = """
name: "identity_fp32"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

IDENTITY_MODEL = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
'''


def embed_config(name: str) -> str:
    return EMBED_CONFIG.replace("__NAME__", name)


def llm_config(name: str) -> str:
    return LLM_CONFIG.format(name=name)


def vector(item: str | list[int], dim: int = 8) -> list[float]:
    """The mock embedding model's vector, computed here for assertions."""
    import numpy as np

    codes = [ord(c) for c in item] if isinstance(item, str) else list(item)
    values = np.array([sum((c * (i + 1)) % 97 for c in codes) % 89 + 1 for i in range(dim)], dtype=np.float32)
    return (values / np.linalg.norm(values)).tolist()


def script(name: str) -> str:
    return SCRIPTS[name]


def dumps_params(params: dict) -> str:
    return json.dumps(params, sort_keys=True)

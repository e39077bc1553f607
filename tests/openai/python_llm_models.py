"""Python-backend models for the "Triton Python models as OpenAI models" tests, each proving one
part of the contract (INTERFACE.md) that the example `echo_llm` does not show on its own.

* `bare_llm`: Triton's OpenAI-frontend mock layout (`text_input` and `stream` `[1, 1]`, `stream`
  required, `text_output` only): no `sampling_parameters` input, so the sampling parameters
  arrive as request parameters; no token counts, so the frontend counts with the tokenizer.
* `slow_llm`: streams a word every 20 ms for a minute and writes to `<events_dir>/<model>.log`
  what it saw: `start <id>`, then `cancelled <id> after <n>` or `done <id>`.
* `raising_llm`: its `execute` raises.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import write_model

IN_PROCESS = 'parameters { key: "execution_mode" value { string_value: "in_process" } }'

BARE_CONFIG = """
name: "__NAME__"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [
  { name: "text_input" data_type: TYPE_STRING dims: [ 1, 1 ] },
  { name: "stream" data_type: TYPE_BOOL dims: [ 1, 1 ] }
]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ 1, -1 ] } ]
"""

# Streaming: one response per word of its answer; otherwise one response. `#params#` answers
# the request parameters it was given, as sorted JSON.
BARE_MODEL = '''
import json
import re

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0].decode()
            stream = bool(pb_utils.get_input_tensor_by_name(request, "stream").as_numpy().reshape(-1)[0])
            text = json.dumps(json.loads(request.parameters()), sort_keys=True) if "#params#" in prompt else prompt
            pieces = re.findall(r"\\s*\\S+|\\s+", text) if stream else [text]
            sender = request.get_response_sender()
            for piece in pieces:
                out = pb_utils.Tensor("text_output", np.array([[piece.encode()]], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse([out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''

SLOW_CONFIG = """
name: "__NAME__"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [
  { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "stream" data_type: TYPE_BOOL dims: [ 1 ] optional: true },
  { name: "sampling_parameters" data_type: TYPE_STRING dims: [ 1 ] optional: true },
  { name: "exclude_input_in_output" data_type: TYPE_BOOL dims: [ 1 ] optional: true }
]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] } ]
parameters { key: "events_dir" value { string_value: "__EVENTS__" } }
__EXTRA__
"""

SLOW_MODEL = '''
import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        folder = json.loads(args["model_config"])["parameters"]["events_dir"]["string_value"]
        self.log = os.path.join(folder, args["model_name"] + ".log")

    def note(self, line):
        with open(self.log, "a") as f:
            f.write(line + "\\n")

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.run, args=(request,), daemon=True).start()
        return None

    def run(self, request):
        sender = request.get_response_sender()
        rid = request.request_id()
        self.note("start " + rid)
        for sent in range(3000):
            if request.is_cancelled():
                self.note(f"cancelled {rid} after {sent}")
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            word = pb_utils.Tensor("text_output", np.array([f" w{sent}".encode()], dtype=np.object_))
            sender.send(pb_utils.InferenceResponse([word]))
            time.sleep(0.02)
        self.note("done " + rid)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''

RAISING_MODEL = '''
class TritonPythonModel:
    def execute(self, requests):
        raise RuntimeError("the model exploded")
'''

#: The chat template of the test models that have no tokenizer.
PLAIN_TEMPLATE = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"


def events(folder: Path, model: str) -> str:
    path = folder / f"{model}.log"
    return path.read_text() if path.exists() else ""


def write_python_llms(repo: Path, events_dir: Path, tokenizer_dir: Path) -> None:
    """bare_llm (tokenizer in its version folder); slow_llm and raising_llm in both execution
    modes (chat template only, no tokenizer); plain_llm: a model with neither."""
    bare = write_model(repo, "bare_llm", BARE_CONFIG.replace("__NAME__", "bare_llm"), BARE_MODEL)
    for path in tokenizer_dir.iterdir():
        (bare / "1" / path.name).write_bytes(path.read_bytes())
    for suffix, extra in (("", ""), ("_in_process", IN_PROCESS)):
        name = "slow_llm" + suffix
        config = SLOW_CONFIG.replace("__NAME__", name).replace("__EVENTS__", str(events_dir)).replace("__EXTRA__", extra)
        write_model(repo, name, config, SLOW_MODEL, files={"chat_template.jinja": PLAIN_TEMPLATE.encode()})
        name = "raising_llm" + suffix
        config = SLOW_CONFIG.replace("__NAME__", name).replace("__EVENTS__", str(events_dir)).replace("__EXTRA__", extra)
        write_model(repo, name, config, RAISING_MODEL, files={"1/chat_template.jinja": PLAIN_TEMPLATE.encode()})
    config = SLOW_CONFIG.replace("__NAME__", "plain_llm").replace("__EVENTS__", str(events_dir)).replace("__EXTRA__", "")
    write_model(repo, "plain_llm", config, SLOW_MODEL)

"""A dependency-free decoupled "LLM" that the OpenAI frontend serves: it reads the prompt back
one word at a time. Replace `words_of` with a real model; the rest is the contract every
generation model keeps (openinfer/frontends/openai/INTERFACE.md):

* inputs: `text_input` (the prompt; for chat, the rendered chat template), `stream`,
  `sampling_parameters` (JSON with vLLM's names: max_tokens, stop, temperature, seed, ...),
  `exclude_input_in_output`, and `return_*` flags asking for the optional outputs;
* streaming: one response per generated word, holding only the new text; otherwise one
  response with the whole text;
* the last response carries the FINAL flag and the finish reason ("stop" or "length");
* cancellation: when the client goes away `request.is_cancelled()` turns true, and the
  generation stops;
* failures are sent to the client as an error response, never left hanging.
"""

import json
import re
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

#: A "token" is a word with the whitespace before it, so the tokens join back into the text.
WORD = re.compile(r"\s*\S+|\s+")


def words_of(prompt):
    """What this model generates for a prompt: the prompt itself, word by word."""
    return WORD.findall(prompt)


def scalar(request, name, default=None):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return default
    value = tensor.as_numpy().reshape(-1)[0]
    return value.decode() if isinstance(value, bytes) else value


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {})
        self.word_delay_s = float(parameters.get("word_delay_s", {}).get("string_value") or 0)
        self.threads = []

    def execute(self, requests):
        # Decoupled: answer from a thread per request and return at once, so requests overlap.
        for request in requests:
            thread = threading.Thread(target=self.answer, args=(request,), daemon=True)
            thread.start()
            self.threads = [t for t in self.threads if t.is_alive()]
            self.threads.append(thread)
        return None

    def answer(self, request):
        sender = request.get_response_sender()
        try:
            self.generate(request, sender)
        except Exception as exc:  # the client gets the error instead of waiting forever
            error = pb_utils.TritonError(f"echo_llm failed: {exc}")
            sender.send(pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def generate(self, request, sender):
        prompt = scalar(request, "text_input")
        params = json.loads(scalar(request, "sampling_parameters") or request.parameters() or "{}")
        stream = bool(scalar(request, "stream", False))
        wants = {name: bool(scalar(request, "return_" + name, False))
                 for name in ("finish_reason", "num_input_tokens", "num_output_tokens")}
        prompt_tokens = len(words_of(prompt))

        def response(piece, count, finish_reason=None):
            outputs = [pb_utils.Tensor("text_output", np.array([piece.encode()], dtype=np.object_))]
            if wants["finish_reason"]:
                outputs.append(pb_utils.Tensor("finish_reason", np.array([str(finish_reason).encode()], dtype=np.object_)))
            if wants["num_input_tokens"]:
                outputs.append(pb_utils.Tensor("num_input_tokens", np.array([prompt_tokens], dtype=np.uint32)))
            if wants["num_output_tokens"]:
                outputs.append(pb_utils.Tensor("num_output_tokens", np.array([count], dtype=np.uint32)))
            return pb_utils.InferenceResponse(output_tensors=outputs)

        limit = params.get("max_tokens")
        stops = params.get("stop") or []
        text, count, reason = "", 0, "stop"
        for word in words_of(prompt):
            if request.is_cancelled():
                pb_utils.Logger.log_info(f"echo_llm: request '{request.request_id()}' cancelled after {count} words")
                sender.send(response("", 0, "abort"), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            if limit is not None and count >= limit:
                reason = "length"
                break
            time.sleep(self.word_delay_s)  # the "forward pass"
            longer = text + word
            stop = next((s for s in stops if s in longer), None)
            if stop is not None:  # the answer ends before the stop string (words already streamed stay sent)
                longer = longer[: longer.index(stop)]
            new, text = longer[len(text):], longer
            if new:
                count += 1
                if stream:
                    sender.send(response(new, 1))
            if stop is not None:
                break
        if stream:
            final = response("", 0, reason)
        else:
            echo = not scalar(request, "exclude_input_in_output", False)
            final = response((prompt if echo else "") + text, count, reason)
        sender.send(final, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join(timeout=5)

"""Streams one response per input element from a background thread, as decoupled models do."""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS")
            delay_s = float(delay.as_numpy()[0]) / 1000.0 if delay is not None else 0.0
            thread = threading.Thread(
                target=self._stream, args=(request.get_response_sender(), values, delay_s), daemon=True
            )
            thread.start()
            # Keep only live threads (for finalize): finished ones would pile up forever.
            self.threads = [t for t in self.threads if t.is_alive()]
            self.threads.append(thread)
        return None

    def _stream(self, sender, values, delay_s):
        for index, value in enumerate(values):
            if delay_s:
                time.sleep(delay_s)
            sender.send(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("OUT", np.array([value], dtype=np.int32)),
                        pb_utils.Tensor("IDX", np.array([index], dtype=np.uint32)),
                    ]
                )
            )
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join(timeout=5)

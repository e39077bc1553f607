"""LABEL = the name of the most probable class, SCORE = its probability (per batch item)."""

import numpy as np
import triton_python_backend_utils as pb_utils

LABELS = [b"cat", b"dog", b"bird"]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            probs = pb_utils.get_input_tensor_by_name(request, "PROBS").as_numpy()
            best = probs.argmax(axis=1)
            labels = np.array([[LABELS[i]] for i in best], dtype=np.object_)
            scores = probs[np.arange(len(best)), best].reshape(-1, 1).astype(np.float32)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("LABEL", labels), pb_utils.Tensor("SCORE", scores)]
                )
            )
        return responses

"""FEATURES = (RAW - MEAN) / SCALE, per feature: the preprocessing step of `pipeline`."""

import numpy as np
import triton_python_backend_utils as pb_utils

MEAN = np.array([10.0, 10.0, 10.0, 0.0], dtype=np.float32)
SCALE = np.array([5.0, 5.0, 5.0, 1.0], dtype=np.float32)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "RAW").as_numpy()
            features = ((raw - MEAN) / SCALE).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("FEATURES", features)]))
        return responses

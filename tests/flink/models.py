"""Python-backend models used by the Flink tests, written into a temporary model repository."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import write_model

#: `model.py` sources by the short names the golden fixtures use.
SOURCES = {
    # Returns the (single) input under every output name of the config.
    "echo": """
        import json

        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def initialize(self, args):
                config = json.loads(args["model_config"])
                self.input = config["input"][0]["name"]
                self.outputs = [o["name"] for o in config["output"]]

            def execute(self, requests):
                responses = []
                for request in requests:
                    data = pb_utils.get_input_tensor_by_name(request, self.input).as_numpy()
                    tensors = [pb_utils.Tensor(name, data) for name in self.outputs]
                    responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
                return responses
    """,
    # Two outputs whose names differ only in case: OUTPUT__0 echoes, output__0 is -1.
    "exact": """
        import numpy as np
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def execute(self, requests):
                responses = []
                for request in requests:
                    data = pb_utils.get_input_tensor_by_name(request, "INPUT__0").as_numpy()
                    tensors = [
                        pb_utils.Tensor("OUTPUT__0", data),
                        pb_utils.Tensor("output__0", np.full_like(data, -1)),
                    ]
                    responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
                return responses
    """,
    # A running sum over every request it serves (one sequence per test run).
    "accumulate": """
        import numpy as np
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def initialize(self, args):
                self.total = 0

            def execute(self, requests):
                responses = []
                for request in requests:
                    data = pb_utils.get_input_tensor_by_name(request, "input").as_numpy()
                    self.total += int(data.sum())
                    out = np.array([[self.total]], dtype=np.int32)
                    responses.append(
                        pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("output", out)])
                    )
                return responses
    """,
    # y = 2 * x, element-wise, any shape and numeric dtype.
    "double": """
        import json

        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def initialize(self, args):
                config = json.loads(args["model_config"])
                self.input = config["input"][0]["name"]
                self.output = config["output"][0]["name"]

            def execute(self, requests):
                responses = []
                for request in requests:
                    data = pb_utils.get_input_tensor_by_name(request, self.input).as_numpy()
                    out = pb_utils.Tensor(self.output, data * 2)
                    responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
                return responses
    """,
    # score = sum(features) per row: [B, N] -> [B, 1].
    "sum": """
        import numpy as np
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def execute(self, requests):
                responses = []
                for request in requests:
                    data = pb_utils.get_input_tensor_by_name(request, "features").as_numpy()
                    score = data.sum(axis=1, keepdims=True).astype(np.float32)
                    out = pb_utils.Tensor("score", score)
                    responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
                return responses
    """,
    # Fails (500, or 503 for keys starting with "busy") the first N times it sees a key
    # "<name>:<N>", then upper-cases it; "slow:<seconds>" sleeps first.
    "flaky": """
        import time
        from collections import Counter

        import numpy as np
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def initialize(self, args):
                self.seen = Counter()

            def execute(self, requests):
                responses = []
                for request in requests:
                    key = pb_utils.get_input_tensor_by_name(request, "key").as_numpy().reshape(-1)
                    text = key[0].decode() if isinstance(key[0], bytes) else str(key[0])
                    name, _, count = text.partition(":")
                    if name == "slow":
                        time.sleep(float(count))
                    elif count.isdigit() and self.seen[text] < int(count):
                        self.seen[text] += 1
                        code = (
                            pb_utils.TritonError.UNAVAILABLE
                            if name.startswith("busy")
                            else pb_utils.TritonError.INTERNAL
                        )
                        error = pb_utils.TritonError(f"flaky failure for {text}", code)
                        responses.append(pb_utils.InferenceResponse(error=error))
                        continue
                    out = np.array([text.upper().encode()], dtype=object).reshape(key.shape)
                    responses.append(
                        pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("value", out)])
                    )
                return responses
    """,
    # One running sum per sequence (keyed by correlation id), reset by the START flag.
    "sequence": """
        import json

        import numpy as np
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def initialize(self, args):
                config = json.loads(args["model_config"])
                self.input = config["input"][0]["name"]
                self.output = config["output"][0]["name"]
                self.totals = {}

            def execute(self, requests):
                responses = []
                for request in requests:
                    key = request.correlation_id()
                    if request.flags() & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
                        self.totals[key] = 0
                    data = pb_utils.get_input_tensor_by_name(request, self.input).as_numpy()
                    self.totals[key] = self.totals.get(key, 0) + int(data.sum())
                    out = np.array([[self.totals[key]]], dtype=np.int32)
                    tensor = pb_utils.Tensor(self.output, out)
                    responses.append(pb_utils.InferenceResponse(output_tensors=[tensor]))
                return responses
    """,
    # output = input + 1000 * version, so a row shows which version answered.
    "versioned": """
        import json

        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def initialize(self, args):
                config = json.loads(args["model_config"])
                self.input = config["input"][0]["name"]
                self.output = config["output"][0]["name"]
                self.offset = 1000 * int(args["model_version"])

            def execute(self, requests):
                responses = []
                for request in requests:
                    data = pb_utils.get_input_tensor_by_name(request, self.input).as_numpy()
                    out = pb_utils.Tensor(self.output, data + self.offset)
                    responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
                return responses
    """,
    # Sleeps as many seconds as its (FP64) input says, then echoes it: a slow server.
    "sleepy": """
        import json
        import time

        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def initialize(self, args):
                config = json.loads(args["model_config"])
                self.input = config["input"][0]["name"]
                self.output = config["output"][0]["name"]

            def execute(self, requests):
                responses = []
                for request in requests:
                    data = pb_utils.get_input_tensor_by_name(request, self.input).as_numpy()
                    time.sleep(float(data.reshape(-1)[0]))
                    out = pb_utils.Tensor(self.output, data)
                    responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
                return responses
    """,
    # Every request fails inside the model: the server's 5xx path.
    "broken": """
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def execute(self, requests):
                error = pb_utils.TritonError("the model failed on purpose")
                return [pb_utils.InferenceResponse(error=error) for _ in requests]
    """,
}


def write_models(repo: Path, models: dict[str, dict]) -> None:
    """Write `{name: {"config": pbtxt, "model_py": source name, "versions": [...]}}`."""
    for name, model in models.items():
        for version in model.get("versions", [1]):
            write_model(repo, name, model["config"], SOURCES[model["model_py"]], version=version)

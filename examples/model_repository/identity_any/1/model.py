"""Echoes every INPUT_<type> it receives as OUTPUT_<type>: one model covers every datatype."""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.types = {i["name"]: i["data_type"] for i in config["input"]}

    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for tensor in request.inputs():
                kind = tensor.name()[len("INPUT_"):]
                # BF16 has no numpy type: keep its declared type so it is not taken for UINT16.
                dtype = "BF16" if kind == "BF16" else None
                outputs.append(pb_utils.Tensor(f"OUTPUT_{kind}", tensor.as_numpy(), dtype) if dtype else pb_utils.Tensor(f"OUTPUT_{kind}", tensor.as_numpy()))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses

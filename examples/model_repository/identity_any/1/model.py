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
                name = "OUTPUT_" + tensor.name()[len("INPUT_"):]
                if self.types[tensor.name()] == "TYPE_STRING":  # DLPack has no strings
                    outputs.append(pb_utils.Tensor(name, tensor.as_numpy()))
                else:  # BF16 has no numpy type: DLPack carries every other type as it is
                    outputs.append(pb_utils.Tensor.from_dlpack(name, tensor))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses

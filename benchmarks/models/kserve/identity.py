"""FP32 identity for KServe's Python model server, as its custom-model docs write one.

Run: ``python identity.py --model_name identity_fp32 --http_port P --grpc_port P``.
"""

import argparse

from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer, model_server
from kserve.utils.utils import generate_uuid


class Identity(Model):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.ready = True

    def get_input_types(self):
        return [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, -1]}]

    def get_output_types(self):
        return [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, -1]}]

    async def predict(self, payload: InferRequest, headers=None, response_headers=None):
        outputs = []
        for inp in payload.inputs:
            arr = inp.as_numpy()
            name = "OUTPUT" + inp.name[5:] if inp.name.startswith("INPUT") else inp.name
            out = InferOutput(name=name, shape=list(arr.shape), datatype=inp.datatype)
            # Raw (binary) outputs are what KServe's gRPC path needs; JSON for REST.
            out.set_data_from_numpy(arr, binary_data=payload.from_grpc)
            outputs.append(out)
        return InferResponse(model_name=self.name, infer_outputs=outputs,
                             response_id=payload.id or generate_uuid())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(parents=[model_server.parser])
    args, _ = parser.parse_known_args()
    ModelServer().start([Identity(args.model_name)])

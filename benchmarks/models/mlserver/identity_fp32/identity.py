"""FP32 identity for MLServer, written the way its docs write a custom runtime."""

from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class Identity(MLModel):
    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        outputs = []
        for inp in payload.inputs:
            arr = NumpyCodec.decode_input(inp)
            name = "OUTPUT" + inp.name[5:] if inp.name.startswith("INPUT") else inp.name
            outputs.append(NumpyCodec.encode_output(name=name, payload=arr))
        return InferenceResponse(model_name=self.name, id=payload.id, outputs=outputs)

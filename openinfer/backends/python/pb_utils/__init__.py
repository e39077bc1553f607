"""`triton_python_backend_utils`: Triton's Python model API, as `model.py` files import it.

The worker process (and the server, for in-process models) registers this package under
Triton's module name, so an unmodified `import triton_python_backend_utils as pb_utils`
finds it. Each module holds one part of the API; what reaches the server goes through the
host that whoever runs the model installs (`_host`).
"""

from . import _host
from .dtypes import (
    TRITON_STRING_TO_NUMPY,
    deserialize_bytes_tensor,
    numpy_to_triton_type,
    serialize_byte_tensor,
    triton_string_to_numpy,
    triton_to_numpy_type,
)
from .errors import TritonError, TritonModelException
from .loading import is_model_ready, load_model, unload_model
from .logger import Logger, LogLevel
from .metrics import Metric, MetricFamily, MetricKind
from .model_config import (
    ModelConfig,
    get_input_config_by_name,
    get_output_config_by_name,
    using_decoupled_model_transaction_policy,
)
from .request import (
    TRITONSERVER_MEMORY_CPU,
    TRITONSERVER_MEMORY_GPU,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
    TRITONSERVER_REQUEST_RELEASE_ALL,
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    InferenceRequest,
    InferenceTrace,
    PreferredMemory,
)
from .response import (
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    InferenceResponse,
    InferenceResponseSender,
    ResponseIterator,
)
from .tensor import Tensor


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    for tensor in inference_request._inputs:  # every model calls this for every input: no method calls
        if tensor._name == name:
            return tensor
    return None


def get_model_dir() -> str:
    """The model's version folder (`<repository>/<model>/<version>`), also for a model that runs a
    Python-based backend's `model.py`."""
    model_dir = getattr(_host.current(), "model_dir", None)
    if not model_dir:
        raise TritonModelException("get_model_dir() needs a running server: the model is not being served")
    return model_dir


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    for tensor in inference_response._outputs:
        if tensor._name == name:
            return tensor
    return None


__all__ = [
    "TRITON_STRING_TO_NUMPY", "TRITONSERVER_MEMORY_CPU", "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END", "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL", "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL", "InferenceRequest", "InferenceResponse",
    "InferenceResponseSender", "InferenceTrace", "LogLevel", "Logger", "Metric", "MetricFamily",
    "MetricKind", "ModelConfig", "PreferredMemory", "ResponseIterator", "Tensor", "TritonError",
    "TritonModelException", "deserialize_bytes_tensor", "get_input_config_by_name",
    "get_input_tensor_by_name", "get_model_dir", "get_output_config_by_name",
    "get_output_tensor_by_name", "is_model_ready", "load_model", "numpy_to_triton_type",
    "serialize_byte_tensor", "triton_string_to_numpy", "triton_to_numpy_type", "unload_model",
    "using_decoupled_model_transaction_policy",
]

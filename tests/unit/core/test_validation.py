"""Request validation and output selection: the shape rules and the one-output shortcut."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

from openinfer._proto import model_config_pb2 as mc
from openinfer.core.backend import ModelContext
from openinfer.core.errors import InternalError, InvalidArgumentError
from openinfer.core.model import LoadedModel, TensorSpec
from openinfer.core.requests.outputs import finish_outputs
from openinfer.core.types import InferRequest, InferResponse, RequestedOutput, Tensor

CONFIG = """
name: "m"
max_batch_size: {mbs}
input {{ name: "ANY" data_type: TYPE_FP32 dims: [ -1, -1 ] }}
input {{ name: "FIXED" data_type: TYPE_FP32 dims: [ 2, -1 ] }}
output {{ name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }}
output {{ name: "OTHER" data_type: TYPE_FP32 dims: [ -1 ] }}
"""


def model(mbs: int = 0) -> LoadedModel:
    cfg = mc.ModelConfig()
    text_format.Parse(CONFIG.format(mbs=mbs), cfg)
    return LoadedModel(ModelContext("m", 1, cfg, Path("."), Path("1"), "fake"), backend=None)  # type: ignore[arg-type]


def request(any_shape: tuple[int, ...], fixed_shape: tuple[int, ...]) -> InferRequest:
    return InferRequest("m", inputs=[
        Tensor("ANY", "FP32", any_shape, np.zeros(any_shape, np.float32)),
        Tensor("FIXED", "FP32", fixed_shape, np.zeros(fixed_shape, np.float32)),
    ])


def test_specs_know_when_every_dimension_is_variable():
    assert TensorSpec("a", "FP32", (-1, -1)).any_size
    assert not TensorSpec("a", "FP32", (2, -1)).any_size
    assert TensorSpec("a", "FP32", ()).any_size  # a scalar spec: only the rank is checked


def test_variable_dimensions_take_any_size_but_not_any_rank():
    m = model()
    m.validate(request((7, 9), (2, 5)))
    with pytest.raises(InvalidArgumentError, match=r"unexpected shape for input 'ANY'.*Expected \[-1,-1\], got \[7\]"):
        m.validate(request((7,), (2, 5)))
    with pytest.raises(InvalidArgumentError, match=r"unexpected shape for input 'ANY'"):
        m.validate(request((1, 7, 9), (2, 5)))


def test_fixed_dimensions_must_match():
    m = model()
    with pytest.raises(InvalidArgumentError, match=r"unexpected shape for input 'FIXED'.*Expected \[2,-1\], got \[3,5\]"):
        m.validate(request((1, 1), (3, 5)))


def test_the_number_of_inputs_is_checked_before_each_input():
    """As Triton orders its checks: one input of the wrong type, the other missing, is a count error."""
    m = model()
    lone = InferRequest("m", inputs=[Tensor("ANY", "FP64", (1, 1), np.zeros((1, 1)))])
    with pytest.raises(InvalidArgumentError) as info:
        m.validate(lone)
    assert info.value.message == (
        "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'm'. Got input(s) ['ANY'], "
        "but missing required input(s) ['FIXED']. Please provide all required input(s)."
    )
    both = request((1, 1), (2, 1))
    both.inputs[0].datatype = "FP64"
    with pytest.raises(InvalidArgumentError, match="data-type is 'FP64'"):
        m.validate(both)


def test_batched_shapes_are_checked_after_the_batch_dimension():
    m = model(mbs=4)
    req = request((3, 7, 9), (3, 2, 5))
    m.validate(req)
    assert req.batch_size == 3
    with pytest.raises(InvalidArgumentError, match=r"Expected \[-1,-1,-1\], got \[3,7\]"):
        m.validate(request((3, 7), (3, 2, 5)))
    with pytest.raises(InvalidArgumentError, match=r"Expected \[-1,2,-1\], got \[3,4,5\]"):
        m.validate(request((3, 7, 9), (3, 4, 5)))


def _response(*names: str) -> InferResponse:
    data = np.arange(4, dtype=np.float32)
    return InferResponse("m", "1", outputs=[Tensor(n, "FP32", data.shape, data) for n in names])


def test_one_requested_output_that_the_model_produced_passes_through():
    wanted = RequestedOutput("OUT")
    req = InferRequest("m", outputs=[wanted])
    response = finish_outputs(req, _response("OUT"), {}, False)
    assert [t.name for t in response.outputs] == ["OUT"]
    assert response.requested == {"OUT": wanted}


def test_one_requested_output_is_still_selected_classified_or_missed():
    req = InferRequest("m", outputs=[RequestedOutput("OUT")])
    assert [t.name for t in finish_outputs(req, _response("OTHER", "OUT"), {}, False).outputs] == ["OUT"]
    with pytest.raises(InternalError, match=r"did not produce requested output\(s\) \['OUT'\]"):
        finish_outputs(req, _response("OTHER"), {}, False)
    top = RequestedOutput("OUT")
    top.classification = 2
    classified = finish_outputs(InferRequest("m", outputs=[top]), _response("OUT"), {}, False).outputs[0]
    assert classified.datatype == "BYTES"
    assert list(classified.data) == [b"3.000000:3", b"2.000000:2"]


FOLDED = """
name: "f"
max_batch_size: 0
input { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] optional: true }
input { name: "input0" data_type: TYPE_FP32 dims: [ 1 ] optional: true }
input { name: "Single" data_type: TYPE_FP32 dims: [ 1 ] optional: true }
output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] }
"""


def folded_model() -> LoadedModel:
    cfg = mc.ModelConfig()
    text_format.Parse(FOLDED, cfg)
    return LoadedModel(ModelContext("f", 1, cfg, Path("."), Path("1"), "fake"), backend=None)  # type: ignore[arg-type]


def one_input(name: str) -> InferRequest:
    return InferRequest("f", inputs=[Tensor(name, "FP32", (1,), np.zeros(1, np.float32))])


@pytest.mark.parametrize("sent,taken", [("INPUT0", "INPUT0"), ("input0", "input0"), ("SINGLE", "Single"),
                                        ("single", "Single")])
def test_an_exact_name_wins_and_a_single_case_insensitive_match_is_taken(sent, taken):
    request = one_input(sent)
    folded_model().validate(request)
    assert request.inputs[0].name == taken


def test_a_name_matching_several_inputs_but_for_case_is_refused_as_unknown():
    with pytest.raises(InvalidArgumentError) as info:
        folded_model().validate(one_input("Input0"))
    assert info.value.message == "unexpected inference input 'Input0' for model 'f'"  # Triton's words


def test_an_output_in_the_wrong_case_is_taken_when_one_output_matches():
    request = one_input("INPUT0")
    request.outputs = [RequestedOutput("output0")]
    folded_model().validate(request)
    assert [o.name for o in request.outputs] == ["OUTPUT0"]

"""Ensemble graph checks at load time, without a server."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from openinfer._proto import model_config_pb2 as mc
from openinfer.backends.ensemble import composing_models, validate_graph
from openinfer.core.errors import InvalidArgumentError

HEAD = """
name: "e"
platform: "ensemble"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


def config(steps: str) -> mc.ModelConfig:
    return text_format.Parse(HEAD + "ensemble_scheduling { step [ " + steps + " ] }", mc.ModelConfig())


def step(model: str, reads: str, writes: str) -> str:
    return (
        f'{{ model_name: "{model}" input_map {{ key: "X" value: "{reads}" }} '
        f'output_map {{ key: "Y" value: "{writes}" }} }}'
    )


def test_a_chain_is_valid_in_any_step_order():
    good = config(", ".join([step("b", "mid", "OUT"), step("a", "IN", "mid")]))
    validate_graph(good)
    assert composing_models(good) == ["b", "a"]


@pytest.mark.parametrize(
    "steps, message",
    [
        ([step("a", "IN", "mid")], "output 'OUT' is not written by any step"),
        ([step("a", "nowhere", "OUT")], "reads ensemble tensor 'nowhere'"),
        ([step("a", "IN", "OUT"), step("b", "IN", "OUT")], "'OUT' is written more than once"),
        ([step("a", "IN", "x"), step("b", "y", "OUT"), step("c", "OUT", "y")], "can never run (a cycle)"),
    ],
)
def test_broken_graphs_are_refused(steps, message):
    with pytest.raises(InvalidArgumentError) as info:
        validate_graph(config(", ".join(steps)))
    assert message in info.value.message


def test_an_ensemble_needs_steps():
    with pytest.raises(InvalidArgumentError, match="must specify one or more 'step'"):
        validate_graph(text_format.Parse(HEAD, mc.ModelConfig()))

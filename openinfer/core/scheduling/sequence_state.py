"""What the sequence batcher adds to each request: control tensors and implicit state.

`control_input` entries name tensors the server fills per request (Triton's
`CONTROL_SEQUENCE_START/READY/END/CORRID`, with their `*_false_true` values or CORRID's
`data_type`). `state` entries name an input the model reads and an output it writes: the
server keeps the output of one request and feeds it back as the input of the next request of
the same sequence, starting from `initial_state` (zeros when none is given). Neither kind of
tensor is a client input or output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..._proto import model_config_pb2 as mc
from .. import datatypes
from ..errors import InvalidArgumentError
from ..types import InferRequest, InferResponse, RequestedOutput, Tensor

Kind = mc.ModelSequenceBatching.Control.Kind
_CORRID_TYPES = {"UINT64", "INT64", "UINT32", "INT32", "BYTES"}


@dataclass(slots=True)
class Control:
    name: str
    kind: int
    datatype: str
    values: tuple[object, object] = (0, 1)  # false, true (not used by CORRID)


@dataclass(slots=True)
class StateSpec:
    input_name: str
    output_name: str
    initial: Tensor


def injected_input_names(config: mc.ModelConfig) -> frozenset[str]:
    """Inputs the sequence batcher provides, which clients must not be asked for."""
    if not config.HasField("sequence_batching"):
        return frozenset()
    sb = config.sequence_batching
    return frozenset([c.name for c in sb.control_input] + [s.input_name for s in sb.state])


def _control(model: str, name: str, control: mc.ModelSequenceBatching.Control) -> Control:
    kind_name = Kind.Name(control.kind)
    if control.kind == Kind.CONTROL_SEQUENCE_CORRID:
        datatype = datatypes.config_to_protocol(mc.DataType.Name(control.data_type))
        if datatype not in _CORRID_TYPES:
            raise InvalidArgumentError(
                f"sequence batching control tensor '{name}' for model '{model}' of kind "
                f"{kind_name} must have data type UINT64, INT64, UINT32, INT32 or STRING"
            )
        return Control(name, control.kind, datatype)
    choices = [
        ("INT32", list(control.int32_false_true)),
        ("FP32", list(control.fp32_false_true)),
        ("BOOL", list(control.bool_false_true)),
    ]
    given = [(dtype, values) for dtype, values in choices if values]
    if len(given) != 1 or len(given[0][1]) != 2:
        raise InvalidArgumentError(
            f"sequence batching control tensor '{name}' for model '{model}' of kind {kind_name} "
            f"must specify exactly one of 'int32_false_true', 'fp32_false_true' or "
            f"'bool_false_true', with two values (false, true)"
        )
    dtype, values = given[0]
    return Control(name, control.kind, dtype, (values[0], values[1]))


def _initial_state(model: str, state: mc.ModelSequenceBatching.State, model_dir: Path, batching: bool) -> Tensor:
    datatype = datatypes.config_to_protocol(mc.DataType.Name(state.data_type))
    dt = datatypes.lookup(datatype)
    if state.initial_state:
        init = state.initial_state[0]
        dims = [int(d) for d in init.dims]
        if any(d < 0 for d in dims):
            raise InvalidArgumentError(
                f"initial state '{init.name}' of state '{state.input_name}' for model '{model}' "
                f"must have fully specified dims"
            )
        shape = tuple([1, *dims] if batching else dims)
        if init.HasField("data_file"):
            path = model_dir / "initial_state" / init.data_file
            try:
                raw = path.read_bytes()
            except OSError as exc:
                raise InvalidArgumentError(
                    f"failed to read initial state file '{path}' for model '{model}': {exc}"
                ) from None
            data = datatypes.from_wire_bytes(raw, datatype, shape)
        else:
            data = np.zeros(shape, dtype=dt.numpy) if datatype != "BYTES" else np.full(shape, b"", dtype=object)
    else:
        dims = [1 if d < 0 else int(d) for d in state.dims]
        shape = tuple([1, *dims] if batching else dims)
        data = np.zeros(shape, dtype=dt.numpy) if datatype != "BYTES" else np.full(shape, b"", dtype=object)
    return Tensor(state.input_name, datatype, shape, data)


class SequenceTensors:
    """Builds the injected tensors of one model and keeps state outputs out of responses."""

    def __init__(self, config: mc.ModelConfig, model_dir: Path) -> None:
        sb = config.sequence_batching
        self.model_name = config.name
        self.batching = config.max_batch_size > 0
        self.controls: list[Control] = []
        seen: set[int] = set()
        for control_input in sb.control_input:
            for control in control_input.control:
                if control.kind in seen:
                    raise InvalidArgumentError(
                        f"sequence batching specifies multiple {Kind.Name(control.kind)} tensors "
                        f"for model '{config.name}'"
                    )
                seen.add(control.kind)
                self.controls.append(_control(config.name, control_input.name, control))
        self.states = [
            StateSpec(s.input_name, s.output_name, _initial_state(config.name, s, model_dir, self.batching))
            for s in sb.state
        ]
        self.client_outputs = {t.name for t in config.output}
        self._shape = (1, 1) if self.batching else (1,)
        self.injected = injected_input_names(config)

    def check_correlation_id(self, request: InferRequest, sequence_id: int | str) -> None:
        """A string id cannot fill a numeric CORRID tensor (and the reverse)."""
        for control in self.controls:
            if control.kind != Kind.CONTROL_SEQUENCE_CORRID:
                continue
            if isinstance(sequence_id, str) != (control.datatype == "BYTES"):
                expected = "string" if control.datatype == "BYTES" else "unsigned integer"
                raise InvalidArgumentError(
                    f"sequence batching control '{control.name}' of model '{self.model_name}' "
                    f"expects a {expected} correlation ID, got {sequence_id!r}"
                )

    def inject(self, request: InferRequest, sequence_id: int | str, state: dict[str, Tensor]) -> None:
        """Add the control and state inputs to a request about to execute."""
        added: list[Tensor] = []
        for control in self.controls:
            added.append(self._control_tensor(control, request, sequence_id))
        for spec in self.states:
            current = state.get(spec.input_name) or spec.initial
            added.append(Tensor(spec.input_name, current.datatype, current.shape, current.data))
        if not added:
            return
        names = {t.name for t in added}
        request.inputs = [t for t in request.inputs if t.name not in names] + added
        if request.outputs is not None:
            wanted = {o.name for o in request.outputs}
            for spec in self.states:
                if spec.output_name not in wanted:
                    request.outputs.append(RequestedOutput(spec.output_name))
                    if request.state.state_only_outputs is None:
                        request.state.state_only_outputs = set()
                    request.state.state_only_outputs.add(spec.output_name)

    def null_request(self, template: InferRequest) -> InferRequest:
        """A filler for a slot without a request: the template's inputs by name, type and shape,
        zeros for data; every control false, CORRID 0 (READY false tells the model that nothing
        in it means anything) and the states' initial values, not any sequence's."""
        inputs = [
            Tensor(t.name, t.datatype, t.shape,
                   np.full(t.shape, b"", dtype=object) if t.datatype == "BYTES"
                   else np.zeros(t.shape, dtype=datatypes.lookup(t.datatype).numpy))
            for t in template.inputs if t.name not in self.injected
        ]
        request = InferRequest(template.model_name, template.model_version, inputs=inputs,
                               batch_size=template.batch_size, arrival_ns=template.arrival_ns)
        request.state.null = True
        for control in self.controls:
            if control.kind == Kind.CONTROL_SEQUENCE_CORRID:
                value: object = b"" if control.datatype == "BYTES" else 0
            else:
                value = control.values[0]
            data = np.full(self._shape, value, dtype=datatypes.lookup(control.datatype).numpy)
            request.inputs.append(Tensor(control.name, control.datatype, self._shape, data))
        for spec in self.states:
            initial = spec.initial
            request.inputs.append(Tensor(spec.input_name, initial.datatype, initial.shape, initial.data))
        return request

    def _control_tensor(self, control: Control, request: InferRequest, sequence_id: int | str) -> Tensor:
        dt = datatypes.lookup(control.datatype)
        if control.kind == Kind.CONTROL_SEQUENCE_CORRID:
            value: object = sequence_id.encode() if isinstance(sequence_id, str) else sequence_id
        elif control.kind == Kind.CONTROL_SEQUENCE_START:
            value = control.values[int(request.sequence_start)]
        elif control.kind == Kind.CONTROL_SEQUENCE_END:
            value = control.values[int(request.sequence_end)]
        else:  # READY: every request the batcher sends carries data
            value = control.values[1]
        data = np.full(self._shape, value, dtype=dt.numpy)
        return Tensor(control.name, control.datatype, self._shape, data)

    def capture(self, request: InferRequest, response: InferResponse, state: dict[str, Tensor]) -> None:
        """Keep the model's state outputs for the next request; hide them from the client."""
        if not self.states or response.error is not None:
            return
        hidden = request.state.state_only_outputs or set()
        requested = None if request.outputs is None else {o.name for o in request.outputs}
        by_name = {t.name: t for t in response.outputs}
        for spec in self.states:
            tensor = by_name.get(spec.output_name)
            if tensor is not None and tensor.data is not None:
                state[spec.input_name] = Tensor(spec.input_name, tensor.datatype, tensor.shape, tensor.data)
        keep = []
        for tensor in response.outputs:
            if tensor.name in {s.output_name for s in self.states}:
                visible = tensor.name in self.client_outputs and tensor.name not in hidden
                if not visible or (requested is not None and tensor.name not in requested):
                    continue
            keep.append(tensor)
        response.outputs = keep
        if hidden and request.outputs is not None:
            request.outputs = [o for o in request.outputs if o.name not in hidden]

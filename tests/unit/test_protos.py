"""Tests for openinfer's protobuf definitions.

Two things are checked:

* real-world ``config.pbtxt`` text parses into our ``ModelConfig`` with
  ``google.protobuf.text_format`` and lands in the expected fields;
* our ``inference`` messages are wire-identical to the ones in
  ``tritonclient.grpc`` (same names, numbers, types, labels, oneofs, maps,
  enum values and RPCs).

tritonclient's generated modules register the same proto package
(``inference``) in the default descriptor pool, so everything that needs
tritonclient runs in a subprocess and reports back as JSON; this process
only ever imports openinfer's modules.
"""

from __future__ import annotations

import binascii
import importlib.util
import json
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest
from google.protobuf import descriptor_pb2, json_format, text_format

from openinfer._proto import grpc_service_pb2 as service_pb2
from openinfer._proto import grpc_service_pb2_grpc as service_pb2_grpc
from openinfer._proto import health_pb2, health_pb2_grpc
from openinfer._proto import model_config_pb2 as mc

# ---------------------------------------------------------------------------
# Descriptor dumping, shared by this process and the tritonclient subprocess.
# The same source text is exec'd in both so both sides are walked the same way.
# ---------------------------------------------------------------------------

_DUMP_SOURCE = textwrap.dedent(
    '''
    from google.protobuf import descriptor_pb2

    def dump_descriptors(file_descriptor):
        """Walk every message/enum reachable from a file's top-level types.

        Returns {"messages": {full_name: {...}}, "enums": {full_name: [...]},
        "services": {full_name: [...]}, "files": {name: serialized hex}}.
        """
        messages = {}
        enums = {}
        files = {}

        def visit_enum(enum):
            if enum.full_name in enums:
                return
            enums[enum.full_name] = [[v.name, v.number] for v in enum.values]

        def visit_message(desc):
            if desc.full_name in messages:
                return
            proto = descriptor_pb2.DescriptorProto()
            desc.CopyToProto(proto)
            fields = []
            for fp in proto.field:
                oneof = (
                    proto.oneof_decl[fp.oneof_index].name
                    if fp.HasField("oneof_index")
                    else ""
                )
                fields.append(
                    [fp.name, fp.number, fp.type, fp.label, fp.type_name, oneof]
                )
            fields.sort(key=lambda f: f[1])
            messages[desc.full_name] = {
                "fields": fields,
                "map_entry": bool(proto.options.map_entry),
                "oneofs": sorted(o.name for o in proto.oneof_decl),
            }
            for nested in desc.nested_types:
                visit_message(nested)
            for enum in desc.enum_types:
                visit_enum(enum)
            for field in desc.fields:
                if field.message_type is not None:
                    visit_message(field.message_type)
                if field.enum_type is not None:
                    visit_enum(field.enum_type)

        def visit_file(fd):
            if fd.name in files:
                return
            proto = descriptor_pb2.FileDescriptorProto()
            fd.CopyToProto(proto)
            files[fd.name] = proto.SerializeToString(deterministic=True).hex()
            for dep in fd.dependencies:
                visit_file(dep)

        visit_file(file_descriptor)
        for desc in file_descriptor.message_types_by_name.values():
            visit_message(desc)
        for enum in file_descriptor.enum_types_by_name.values():
            visit_enum(enum)
        for dep in file_descriptor.dependencies:
            for desc in dep.message_types_by_name.values():
                visit_message(desc)
            for enum in dep.enum_types_by_name.values():
                visit_enum(enum)

        services = {}
        for svc in file_descriptor.services_by_name.values():
            methods = []
            for m in svc.methods:
                mp = descriptor_pb2.MethodDescriptorProto()
                m.CopyToProto(mp)
                methods.append(
                    [
                        m.name,
                        m.input_type.full_name,
                        m.output_type.full_name,
                        bool(mp.client_streaming),
                        bool(mp.server_streaming),
                    ]
                )
            services[svc.full_name] = methods

        return {
            "messages": messages,
            "enums": enums,
            "services": services,
            "files": files,
        }
    '''
)

_namespace: dict = {}
exec(_DUMP_SOURCE, _namespace)
dump_descriptors = _namespace["dump_descriptors"]

_TRITON_SCRIPT = (
    _DUMP_SOURCE
    + textwrap.dedent(
        """
        import json, sys
        from google.protobuf import text_format
        from tritonclient.grpc import service_pb2, model_config_pb2

        result = dump_descriptors(service_pb2.DESCRIPTOR)
        # Wire check: decode bytes serialised by openinfer with tritonclient.
        payloads = json.loads(sys.stdin.read())
        decoded = {}
        for name, (type_name, hex_bytes) in payloads.items():
            module = model_config_pb2 if type_name == "ModelConfig" else service_pb2
            msg = getattr(module, type_name)()
            msg.ParseFromString(bytes.fromhex(hex_bytes))
            decoded[name] = text_format.MessageToString(msg)
        result["decoded"] = decoded
        json.dump(result, sys.stdout)
        """
    )
)

_HAVE_TRITONCLIENT = importlib.util.find_spec("tritonclient") is not None

# ---------------------------------------------------------------------------
# Realistic model configurations
# ---------------------------------------------------------------------------

ADD_SUB_PBTXT = r"""
# Python backend model with most of the knobs turned.
name: "add_sub"
backend: "python"
max_batch_size: 8
version_policy: { specific: { versions: [ 1, 3 ] } }

input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_FP32
    dims: [ 4 ]
    optional: true
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_FP32
    dims: [ 4 ]
    label_filename: "labels.txt"
  }
]

instance_group [
  {
    name: "add_sub_cpu"
    count: 2
    kind: KIND_CPU
  },
  {
    count: 1
    kind: KIND_GPU
    gpus: [ 0, 1 ]
    rate_limiter {
      resources [ { name: "R1" count: 4 }, { name: "R2" global: true count: 1 } ]
      priority: 2
    }
  }
]

dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  preserve_ordering: true
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy {
    timeout_action: DELAY
    default_timeout_microseconds: 5000
    allow_timeout_override: true
    max_queue_size: 16
  }
  priority_queue_policy {
    key: 1
    value: { timeout_action: REJECT max_queue_size: 4 }
  }
}

optimization {
  execution_accelerators {
    gpu_execution_accelerator : [ {
      name : "tensorrt"
      parameters { key: "precision_mode" value: "FP16" }
      parameters { key: "max_workspace_size_bytes" value: "1073741824" }
    } ]
    cpu_execution_accelerator : [ { name : "openvino" } ]
  }
  cuda {
    graphs: true
    busy_wait_events: true
    graph_spec [
      {
        batch_size: 4
        input { key: "INPUT0" value { dim: [ 4 ] } }
        graph_lower_bound {
          batch_size: 1
          input { key: "INPUT0" value { dim: [ 2 ] } }
        }
      }
    ]
    output_copy_stream: true
  }
  graph { level: 1 }
  priority: PRIORITY_MAX
  input_pinned_memory { enable: false }
  output_pinned_memory { enable: true }
  gather_kernel_buffer_threshold: 2
  eager_batching: true
}

parameters: {
  key: "EXECUTION_ENV_PATH"
  value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" }
}
parameters [ { key: "shm-default-byte-size" value { string_value: "1048576" } } ]

model_warmup [
  {
    name: "warmup_zeros"
    batch_size: 2
    count: 3
    inputs {
      key: "INPUT0"
      value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true }
    }
    inputs {
      key: "INPUT1"
      value: { data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "raw_input1" }
    }
  }
]

batch_input [
  {
    kind: BATCH_ACCUMULATED_ELEMENT_COUNT
    target_name: "INDEX"
    data_type: TYPE_FP32
    source_input: "INPUT0"
  }
]
batch_output [
  {
    target_name: "OUTPUT0"
    kind: BATCH_SCATTER_WITH_INPUT_SHAPE
    source_input: "INPUT0"
  }
]

metric_tags { key: "team" value: "search" }
model_repository_agents {
  agents [ { name: "checksum" parameters { key: "MD5:1/model.py" value: "0123abcd" } } ]
}
model_metrics {
  metric_control [
    {
      metric_identifier { family: "nv_inference_first_response_histogram_ms" }
      histogram_options { buckets: [ 0.5, 1, 10, 100 ] }
    }
  ]
}
response_cache { enable: true }
model_transaction_policy { decoupled: false }
"""

SEQUENCE_PBTXT = r"""
name: "accumulate"
backend: "python"
max_batch_size: 4
version_policy: { latest: { num_versions: 2 } }
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest {
    max_candidate_sequences: 4
    preferred_batch_size: [ 2, 4 ]
    max_queue_delay_microseconds: 100
    preserve_ordering: true
  }
  control_input [
    {
      name: "START"
      control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ]
    },
    {
      name: "READY"
      control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ]
    },
    {
      name: "END"
      control [ { kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] } ]
    },
    {
      name: "CORRID"
      control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ]
    }
  ]
  state [
    {
      input_name: "INPUT_STATE"
      output_name: "OUTPUT_STATE"
      data_type: TYPE_INT32
      dims: [ -1 ]
      initial_state: {
        name: "initial"
        data_type: TYPE_INT32
        dims: [ 1 ]
        zero_data: true
      }
      use_same_buffer_for_input_output: true
      use_growable_memory: true
    }
  ]
  iterative_sequence: false
}
instance_group [ { kind: KIND_CPU count: 1 } ]
model_transaction_policy { decoupled: True }
"""

ENSEMBLE_PBTXT = r"""
name: "ensemble_add_sub"
platform: "ensemble"
max_batch_size: 8
input [
  { name: "RAW" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "preprocess"
      model_version: -1
      input_map { key: "RAW" value: "RAW" }
      output_map { key: "PREPROCESSED" value: "prep_out" }
    },
    {
      model_name: "add_sub"
      model_version: 1
      input_map { key: "INPUT0" value: "prep_out" }
      input_map { key: "INPUT1" value: "INPUT1" }
      output_map { key: "OUTPUT0" value: "OUTPUT0" }
    }
  ]
  max_inflight_requests: 16
}
"""


def _parse(text: str) -> mc.ModelConfig:
    return text_format.Parse(text, mc.ModelConfig())


# ---------------------------------------------------------------------------
# (a) config.pbtxt parsing
# ---------------------------------------------------------------------------


def test_add_sub_config_basics():
    cfg = _parse(ADD_SUB_PBTXT)
    assert cfg.name == "add_sub"
    assert cfg.backend == "python"
    assert cfg.platform == ""
    assert cfg.max_batch_size == 8
    assert cfg.version_policy.WhichOneof("policy_choice") == "specific"
    assert list(cfg.version_policy.specific.versions) == [1, 3]

    assert [i.name for i in cfg.input] == ["INPUT0", "INPUT1"]
    assert cfg.input[0].data_type == mc.TYPE_FP32
    assert list(cfg.input[0].dims) == [4]
    assert not cfg.input[0].optional and cfg.input[1].optional
    assert cfg.output[1].label_filename == "labels.txt"

    cpu, gpu = cfg.instance_group
    assert (cpu.name, cpu.count, cpu.kind) == (
        "add_sub_cpu",
        2,
        mc.ModelInstanceGroup.KIND_CPU,
    )
    assert gpu.kind == mc.ModelInstanceGroup.KIND_GPU
    assert list(gpu.gpus) == [0, 1]
    assert gpu.rate_limiter.priority == 2
    # `global` is a Python keyword, so the field is reached with getattr.
    resources = [(r.name, getattr(r, "global"), r.count) for r in gpu.rate_limiter.resources]
    assert resources == [("R1", False, 4), ("R2", True, 1)]


def test_add_sub_dynamic_batching():
    cfg = _parse(ADD_SUB_PBTXT)
    assert cfg.WhichOneof("scheduling_choice") == "dynamic_batching"
    db = cfg.dynamic_batching
    assert list(db.preferred_batch_size) == [4, 8]
    assert db.max_queue_delay_microseconds == 100
    assert db.preserve_ordering
    assert db.priority_levels == 3
    assert db.default_priority_level == 2
    qp = db.default_queue_policy
    assert qp.timeout_action == mc.ModelQueuePolicy.DELAY
    assert qp.default_timeout_microseconds == 5000
    assert qp.allow_timeout_override
    assert qp.max_queue_size == 16
    assert set(db.priority_queue_policy) == {1}
    assert db.priority_queue_policy[1].timeout_action == mc.ModelQueuePolicy.REJECT
    assert db.priority_queue_policy[1].max_queue_size == 4


def test_add_sub_optimization():
    opt = _parse(ADD_SUB_PBTXT).optimization
    (trt,) = opt.execution_accelerators.gpu_execution_accelerator
    assert trt.name == "tensorrt"
    assert dict(trt.parameters) == {
        "precision_mode": "FP16",
        "max_workspace_size_bytes": "1073741824",
    }
    assert [a.name for a in opt.execution_accelerators.cpu_execution_accelerator] == [
        "openvino"
    ]
    assert opt.cuda.graphs and opt.cuda.busy_wait_events and opt.cuda.output_copy_stream
    (spec,) = opt.cuda.graph_spec
    assert spec.batch_size == 4
    assert list(spec.input["INPUT0"].dim) == [4]
    assert spec.graph_lower_bound.batch_size == 1
    assert list(spec.graph_lower_bound.input["INPUT0"].dim) == [2]
    assert opt.graph.level == 1
    assert opt.priority == mc.ModelOptimizationPolicy.PRIORITY_MAX
    assert opt.HasField("input_pinned_memory") and not opt.input_pinned_memory.enable
    assert opt.output_pinned_memory.enable
    assert opt.gather_kernel_buffer_threshold == 2
    assert opt.eager_batching


def test_add_sub_misc_sections():
    cfg = _parse(ADD_SUB_PBTXT)
    assert {k: v.string_value for k, v in cfg.parameters.items()} == {
        "EXECUTION_ENV_PATH": "$$TRITON_MODEL_DIRECTORY/env.tar.gz",
        "shm-default-byte-size": "1048576",
    }
    (warmup,) = cfg.model_warmup
    assert (warmup.name, warmup.batch_size, warmup.count) == ("warmup_zeros", 2, 3)
    in0 = warmup.inputs["INPUT0"]
    assert in0.WhichOneof("input_data_type") == "zero_data"
    assert in0.data_type == mc.TYPE_FP32 and list(in0.dims) == [4]
    assert warmup.inputs["INPUT1"].input_data_file == "raw_input1"

    (bi,) = cfg.batch_input
    assert bi.kind == mc.BatchInput.BATCH_ACCUMULATED_ELEMENT_COUNT
    assert list(bi.target_name) == ["INDEX"] and list(bi.source_input) == ["INPUT0"]
    (bo,) = cfg.batch_output
    assert bo.kind == mc.BatchOutput.BATCH_SCATTER_WITH_INPUT_SHAPE

    assert dict(cfg.metric_tags) == {"team": "search"}
    (agent,) = cfg.model_repository_agents.agents
    assert agent.name == "checksum"
    assert dict(agent.parameters) == {"MD5:1/model.py": "0123abcd"}
    (ctl,) = cfg.model_metrics.metric_control
    assert ctl.metric_identifier.family == "nv_inference_first_response_histogram_ms"
    assert ctl.WhichOneof("metric_options") == "histogram_options"
    assert list(ctl.histogram_options.buckets) == [0.5, 1.0, 10.0, 100.0]

    assert cfg.response_cache.enable
    assert cfg.HasField("model_transaction_policy")
    assert not cfg.model_transaction_policy.decoupled


def test_sequence_config():
    cfg = _parse(SEQUENCE_PBTXT)
    assert cfg.version_policy.latest.num_versions == 2
    assert cfg.WhichOneof("scheduling_choice") == "sequence_batching"
    sb = cfg.sequence_batching
    assert sb.max_sequence_idle_microseconds == 5_000_000
    assert sb.WhichOneof("strategy_choice") == "oldest"
    assert sb.oldest.max_candidate_sequences == 4
    assert list(sb.oldest.preferred_batch_size) == [2, 4]
    assert sb.oldest.max_queue_delay_microseconds == 100
    assert sb.oldest.preserve_ordering

    controls = {ci.name: ci.control[0] for ci in sb.control_input}
    Kind = mc.ModelSequenceBatching.Control
    assert controls["START"].kind == Kind.CONTROL_SEQUENCE_START
    assert list(controls["START"].fp32_false_true) == [0.0, 1.0]
    assert controls["READY"].kind == Kind.CONTROL_SEQUENCE_READY
    assert list(controls["READY"].int32_false_true) == [0, 1]
    assert controls["END"].kind == Kind.CONTROL_SEQUENCE_END
    assert list(controls["END"].bool_false_true) == [False, True]
    assert controls["CORRID"].kind == Kind.CONTROL_SEQUENCE_CORRID
    assert controls["CORRID"].data_type == mc.TYPE_UINT64

    (state,) = sb.state
    assert (state.input_name, state.output_name) == ("INPUT_STATE", "OUTPUT_STATE")
    assert state.data_type == mc.TYPE_INT32 and list(state.dims) == [-1]
    (init,) = state.initial_state
    assert init.name == "initial" and init.WhichOneof("state_data") == "zero_data"
    assert state.use_same_buffer_for_input_output and state.use_growable_memory
    assert not sb.iterative_sequence
    assert cfg.model_transaction_policy.decoupled


def test_ensemble_config():
    cfg = _parse(ENSEMBLE_PBTXT)
    assert cfg.platform == "ensemble"
    assert cfg.input[0].data_type == mc.TYPE_STRING
    assert cfg.WhichOneof("scheduling_choice") == "ensemble_scheduling"
    es = cfg.ensemble_scheduling
    assert es.max_inflight_requests == 16
    pre, add = es.step
    assert (pre.model_name, pre.model_version) == ("preprocess", -1)
    assert dict(pre.input_map) == {"RAW": "RAW"}
    assert dict(pre.output_map) == {"PREPROCESSED": "prep_out"}
    assert (add.model_name, add.model_version) == ("add_sub", 1)
    assert dict(add.input_map) == {"INPUT0": "prep_out", "INPUT1": "INPUT1"}
    assert dict(add.output_map) == {"OUTPUT0": "OUTPUT0"}


def test_scheduling_choice_is_exclusive():
    with pytest.raises(text_format.ParseError):
        _parse("dynamic_batching {} sequence_batching {}")


def test_version_policy_all_and_json_round_trip():
    cfg = _parse('name: "m" version_policy { all {} } instance_group { kind: KIND_MODEL }')
    assert cfg.version_policy.WhichOneof("policy_choice") == "all"
    assert cfg.instance_group[0].kind == mc.ModelInstanceGroup.KIND_MODEL

    full = _parse(ADD_SUB_PBTXT)
    as_json = json_format.MessageToJson(full)
    assert json_format.Parse(as_json, mc.ModelConfig()) == full
    assert text_format.Parse(text_format.MessageToString(full), mc.ModelConfig()) == full


def test_data_type_enum():
    expected = [
        "TYPE_INVALID", "TYPE_BOOL", "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32",
        "TYPE_UINT64", "TYPE_INT8", "TYPE_INT16", "TYPE_INT32", "TYPE_INT64",
        "TYPE_FP16", "TYPE_FP32", "TYPE_FP64", "TYPE_STRING", "TYPE_BF16",
    ]  # fmt: skip
    values = mc.DataType.DESCRIPTOR.values
    assert [(v.name, v.number) for v in values] == [
        (name, i) for i, name in enumerate(expected)
    ]


# ---------------------------------------------------------------------------
# Generated code layout
# ---------------------------------------------------------------------------


def test_generated_modules_use_package_relative_imports():
    # protoc emits `import model_config_pb2 as ...`; generate.sh rewrites
    # such lines to `from . import model_config_pb2 as ...`.
    proto_dir = pathlib.Path(mc.__file__).parent
    generated = sorted(proto_dir.glob("*_pb2*.py*"))
    assert {p.name for p in generated} >= {
        "model_config_pb2.py",
        "model_config_pb2.pyi",
        "grpc_service_pb2.py",
        "grpc_service_pb2.pyi",
        "grpc_service_pb2_grpc.py",
        "health_pb2.py",
        "health_pb2.pyi",
        "health_pb2_grpc.py",
    }
    for path in generated:
        for line in path.read_text().splitlines():
            assert not re.match(r"import \w+_pb2", line), (path.name, line)
    assert service_pb2.DESCRIPTOR.dependencies[0] is mc.DESCRIPTOR
    assert mc.DESCRIPTOR.name == "model_config.proto"
    assert service_pb2.DESCRIPTOR.name == "grpc_service.proto"
    assert health_pb2.DESCRIPTOR.name == "health.proto"


_EXPECTED_RPCS = [
    ("ServerLive", False),
    ("ServerReady", False),
    ("ModelReady", False),
    ("ServerMetadata", False),
    ("ModelMetadata", False),
    ("ModelInfer", False),
    ("ModelStreamInfer", True),
    ("ModelConfig", False),
    ("ModelStatistics", False),
    ("RepositoryIndex", False),
    ("RepositoryModelLoad", False),
    ("RepositoryModelUnload", False),
    ("SystemSharedMemoryStatus", False),
    ("SystemSharedMemoryRegister", False),
    ("SystemSharedMemoryUnregister", False),
    ("CudaSharedMemoryStatus", False),
    ("CudaSharedMemoryRegister", False),
    ("CudaSharedMemoryUnregister", False),
    ("TraceSetting", False),
    ("LogSettings", False),
]


def test_inference_service_rpcs():
    svc = service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    assert svc.full_name == "inference.GRPCInferenceService"
    got = []
    for m in svc.methods:
        mp = descriptor_pb2.MethodDescriptorProto()
        m.CopyToProto(mp)
        assert mp.client_streaming == mp.server_streaming
        got.append((m.name, mp.server_streaming))
    assert got == _EXPECTED_RPCS
    for name, _ in _EXPECTED_RPCS:
        assert callable(getattr(service_pb2_grpc.GRPCInferenceServiceServicer, name))
    assert callable(service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server)


def test_health_proto():
    assert health_pb2.DESCRIPTOR.package == "grpc.health.v1"
    req = health_pb2.HealthCheckRequest.DESCRIPTOR
    assert [(f.name, f.number) for f in req.fields] == [("service", 1)]
    resp = health_pb2.HealthCheckResponse.DESCRIPTOR
    assert [(f.name, f.number) for f in resp.fields] == [("status", 1)]
    status = health_pb2.HealthCheckResponse.ServingStatus.DESCRIPTOR
    assert [(v.name, v.number) for v in status.values] == [
        ("UNKNOWN", 0),
        ("SERVING", 1),
        ("NOT_SERVING", 2),
        ("SERVICE_UNKNOWN", 3),
    ]
    svc = health_pb2.DESCRIPTOR.services_by_name["Health"]
    assert svc.full_name == "grpc.health.v1.Health"
    assert [m.name for m in svc.methods] == ["Check", "Watch"]
    assert callable(health_pb2_grpc.add_HealthServicer_to_server)
    # The wire encoding of a status is the standard one.
    assert health_pb2.HealthCheckResponse(
        status=health_pb2.HealthCheckResponse.SERVING
    ).SerializeToString() == b"\x08\x01"


def test_infer_numbering_is_triton_not_kserve():
    # Triton numbering: model_name=1, model_version=2, id=3 in the response;
    # contents start with bool_contents=1; InferParameter has double/uint64.
    resp = service_pb2.ModelInferResponse(model_name="m", model_version="1", id="x")
    assert resp.SerializeToString() == b"\n\x01m\x12\x011\x1a\x01x"
    contents = service_pb2.InferTensorContents(bool_contents=[True])
    assert contents.SerializeToString() == b"\n\x01\x01"
    fields = service_pb2.InferParameter.DESCRIPTOR.fields_by_name
    assert fields["double_param"].number == 4
    assert fields["uint64_param"].number == 5


# ---------------------------------------------------------------------------
# (b) comparison with tritonclient's descriptors
# ---------------------------------------------------------------------------


def _wire_payloads() -> dict:
    req = service_pb2.ModelInferRequest(
        model_name="add_sub", model_version="1", id="req-7"
    )
    req.parameters["sequence_id"].string_param = "abc"
    req.parameters["priority"].uint64_param = 2
    req.parameters["f"].double_param = 1.5
    tensor = req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 4])
    tensor.parameters["shared_memory_region"].string_param = "r0"
    tensor.contents.fp32_contents.extend([1.0, 2.0])
    req.outputs.add(name="OUTPUT0").parameters["classification"].int64_param = 3
    req.raw_input_contents.append(b"\x00\x01\x02\x03")

    stats = service_pb2.ModelStatisticsResponse()
    s = stats.model_stats.add(name="m", version="1", inference_count=5)
    s.inference_stats.success.count = 5
    s.response_stats["0"].empty_response.ns = 9
    s.memory_usage.add(type="GPU", id=0, byte_size=10)

    log = service_pb2.LogSettingsRequest()
    log.settings["log_verbose_level"].uint32_param = 1
    log.settings["log_format"].string_param = "ISO8601"

    objects = {
        "config_add_sub": _parse(ADD_SUB_PBTXT),
        "config_sequence": _parse(SEQUENCE_PBTXT),
        "config_ensemble": _parse(ENSEMBLE_PBTXT),
        "infer_request": req,
        "statistics": stats,
        "log_settings": log,
    }
    return {
        key: (
            msg.DESCRIPTOR.name,
            binascii.hexlify(msg.SerializeToString(deterministic=True)).decode(),
            text_format.MessageToString(msg),
        )
        for key, msg in objects.items()
    }


@pytest.fixture(scope="module")
def triton():
    if not _HAVE_TRITONCLIENT:
        pytest.skip("tritonclient is not installed")
    payloads = _wire_payloads()
    proc = subprocess.run(
        [sys.executable, "-c", _TRITON_SCRIPT],
        input=json.dumps({k: [t, h] for k, (t, h, _) in payloads.items()}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    result["expected_text"] = {k: txt for k, (_, _, txt) in payloads.items()}
    return result


@pytest.fixture(scope="module")
def ours():
    return json.loads(json.dumps(dump_descriptors(service_pb2.DESCRIPTOR)))


def test_same_reachable_messages(triton, ours):
    theirs = set(triton["messages"])
    mine = set(ours["messages"])
    assert len(theirs) > 100
    assert sorted(theirs - mine) == [], "messages missing from openinfer"
    assert sorted(mine - theirs) == [], "messages not in tritonclient"


def test_every_field_matches(triton, ours):
    mismatches = []
    for name, theirs in sorted(triton["messages"].items()):
        mine = ours["messages"].get(name)
        if mine != theirs:
            mismatches.append((name, theirs, mine))
    assert mismatches == []


def test_every_enum_matches(triton, ours):
    assert ours["enums"] == triton["enums"]


def test_service_matches(triton, ours):
    assert ours["services"] == triton["services"]
    assert list(ours["services"]) == ["inference.GRPCInferenceService"]


def test_file_descriptors_identical(triton, ours):
    # Identical serialized descriptors let openinfer's modules and
    # tritonclient's share one process (the descriptor pool accepts an
    # identical re-registration of a file).
    assert set(triton["files"]) == {"grpc_service.proto", "model_config.proto"}
    for name, hex_proto in triton["files"].items():
        assert ours["files"][name] == hex_proto, name


def test_tritonclient_decodes_our_bytes(triton):
    assert triton["decoded"] == triton["expected_text"]

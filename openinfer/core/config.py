"""Model configuration: config.pbtxt parsed with protobuf text_format into our own messages.

Also Triton's normalisation (what `GET .../config` shows after load), its JSON form, and the
checks that make a broken config an UNAVAILABLE model with a readable reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format

from .._proto import model_config_pb2 as mc
from .errors import InvalidArgumentError
from .memory.gpus import visible_gpus

ModelConfig = mc.ModelConfig

#: platform -> backend, as Triton resolves them.
PLATFORM_BACKENDS = {
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "ensemble": "ensemble",
}
#: backend -> the platform Triton fills in when a config names only the backend.
BACKEND_PLATFORMS = {
    "onnxruntime": "onnxruntime_onnx",
    "pytorch": "pytorch_libtorch",
}
#: default model file per backend (`default_model_filename` overrides it).
DEFAULT_MODEL_FILES = {
    "python": "model.py",
    "onnxruntime": "model.onnx",
    "pytorch": "model.pt",
}
#: backends whose CPU instance groups default to two instances (Triton's rule).
_TWO_CPU_INSTANCE_BACKENDS = {"onnxruntime", "tensorflow"}


def read_config_text(model_dir: Path, config_name: str | None = None) -> str | None:
    """The text of a model's config file, honouring `--model-config-name`; None if absent."""
    candidates = []
    if config_name:
        candidates.append(model_dir / "configs" / f"{config_name}.pbtxt")
    candidates.append(model_dir / "config.pbtxt")
    for path in candidates:
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return None


def parse_config_text(text: str) -> mc.ModelConfig:
    config = mc.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise InvalidArgumentError(f"failed to parse model configuration: {exc}") from exc
    return config


def parse_config_json(text: str) -> mc.ModelConfig:
    """A config override sent with a load request (protobuf JSON, unknown fields refused).
    As leniently as Triton's C++ parser reads it: one object where a list is due is a list of
    one, and enum names match in any case (`"kind": "kind_cpu"`)."""
    config = mc.ModelConfig()
    try:
        document = json.loads(text)
        if not isinstance(document, dict):
            raise ValueError("the configuration must be a JSON object")
        json_format.ParseDict(_lenient(document, config.DESCRIPTOR), config, ignore_unknown_fields=False)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise InvalidArgumentError(f"Invalid config override: {exc}") from exc
    return config


def _repeated(field: Any) -> bool:
    if hasattr(field, "is_repeated"):  # protobuf 6 and later (`label` is deprecated there)
        return bool(field.is_repeated)
    return bool(field.label == field.LABEL_REPEATED)


def _lenient(document: dict[str, Any], descriptor: Any) -> dict[str, Any]:
    out = {}
    for key, value in document.items():
        field = descriptor.fields_by_name.get(key) or descriptor.fields_by_camelcase_name.get(key)
        if field is None:
            out[key] = value  # refused by the parser, with its words
            continue
        is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
        if _repeated(field) and not is_map and not isinstance(value, list):
            value = [value]
        items = value if isinstance(value, list) else [value]
        if field.message_type is not None and not is_map:
            items = [_lenient(v, field.message_type) if isinstance(v, dict) else v for v in items]
        elif field.enum_type is not None:
            names = {n.lower(): n for n in field.enum_type.values_by_name}
            items = [names.get(v.lower(), v) if isinstance(v, str) else v for v in items]
        out[key] = items if isinstance(value, list) else items[0]
    return out


def resolve_backend(config: mc.ModelConfig, version_dir: Path | None) -> str:
    """The backend a model runs on: `backend`, else from `platform`, else from its files."""
    if config.backend:
        return config.backend
    if config.platform:
        return PLATFORM_BACKENDS.get(config.platform, config.platform)
    if version_dir is not None and version_dir.is_dir():
        names = set(os.listdir(version_dir))
        for backend, filename in DEFAULT_MODEL_FILES.items():
            if filename in names:
                return backend
    return ""


def model_file(config: mc.ModelConfig, backend: str) -> str:
    return config.default_model_filename or DEFAULT_MODEL_FILES.get(backend, "")


def complete_backend_fields(config: mc.ModelConfig, backend: str) -> None:
    """Triton's server-side completion of `backend`, `platform` and `default_model_filename`.

    It runs even with auto-complete disabled: a known platform or model file names the
    backend, the onnxruntime and pytorch backends name their platform (`onnxruntime_onnx`,
    `pytorch_libtorch`, which model metadata then reports), and the onnxruntime, pytorch and
    python backends name their model file. An ensemble keeps `platform` and no backend.
    """
    if backend == "ensemble":
        config.platform = config.platform or "ensemble"
        return
    if not backend:
        return
    platform_was_empty = not config.platform
    if not config.backend and (platform_was_empty or config.platform in PLATFORM_BACKENDS):
        config.backend = backend
    if config.backend != backend:
        return
    platform = BACKEND_PLATFORMS.get(backend)
    if platform and platform_was_empty:
        config.platform = platform
    # Triton leaves pytorch's file empty when the config named its platform itself.
    names_file = backend in ("onnxruntime", "python") or backend == "pytorch" and platform_was_empty
    if names_file and not config.default_model_filename:
        config.default_model_filename = DEFAULT_MODEL_FILES[backend]


def check_name(config: mc.ModelConfig, model_name: str) -> None:
    """A configuration's `name`, when it has one, must be its model's (folder) name."""
    if config.name and config.name != model_name:
        raise InvalidArgumentError(
            f"unexpected directory name '{model_name}' for model '{config.name}', "
            "directory name must equal model name"
        )


def normalize(config: mc.ModelConfig, model_name: str, backend: str) -> None:
    """Fill the defaults Triton fills before a model is served (in place)."""
    check_name(config, model_name)
    config.name = model_name
    complete_backend_fields(config, backend)
    if not config.HasField("version_policy"):
        config.version_policy.latest.num_versions = 1
    if backend == "ensemble":  # Triton states every ensemble's transaction policy
        config.model_transaction_policy.SetInParent()
    if config.HasField("dynamic_batching"):
        db = config.dynamic_batching
        if not db.preferred_batch_size and config.max_batch_size > 0:
            db.preferred_batch_size.append(config.max_batch_size)
    if config.HasField("sequence_batching"):
        sb = config.sequence_batching
        if sb.max_sequence_idle_microseconds == 0:
            sb.max_sequence_idle_microseconds = 1_000_000
        if sb.HasField("oldest") and not sb.oldest.preferred_batch_size and config.max_batch_size > 0:
            sb.oldest.preferred_batch_size.append(config.max_batch_size)
    if backend != "ensemble":
        opt = config.optimization
        if not opt.HasField("input_pinned_memory"):
            opt.input_pinned_memory.enable = True
        if not opt.HasField("output_pinned_memory"):
            opt.output_pinned_memory.enable = True
        if not config.instance_group:  # the group Triton adds is named after the model
            config.instance_group.add(name=model_name)
        for index, group in enumerate(config.instance_group):
            if not group.name:
                group.name = f"{model_name}_{index}"
            if group.kind == mc.ModelInstanceGroup.KIND_AUTO:
                gpus = visible_gpus()
                group.kind = mc.ModelInstanceGroup.KIND_GPU if gpus else mc.ModelInstanceGroup.KIND_CPU
                if gpus and not group.gpus:
                    group.gpus.extend(gpus)
            elif group.kind == mc.ModelInstanceGroup.KIND_GPU and not group.gpus:
                group.gpus.extend(visible_gpus())
            if group.count == 0:
                two = group.kind == mc.ModelInstanceGroup.KIND_CPU and backend in _TWO_CPU_INSTANCE_BACKENDS
                group.count = 2 if two else 1


def validate(config: mc.ModelConfig) -> None:
    """Reject configs Triton would refuse, with a message naming the field."""
    if config.max_batch_size < 0:
        raise InvalidArgumentError(f"'max_batch_size' must be non-negative for model '{config.name}'")
    for group in config.instance_group:
        if group.kind != mc.ModelInstanceGroup.KIND_GPU:
            continue
        if not group.gpus:
            raise InvalidArgumentError(
                f"instance group {group.name} of model {config.name} has kind KIND_GPU but no GPUs are available"
            )
        supported = visible_gpus()
        for gpu in group.gpus:
            if gpu not in supported:
                raise InvalidArgumentError(
                    f"instance group {group.name} of model {config.name} specifies invalid or unsupported "
                    f"gpu id {gpu}. GPUs with at least the minimum required CUDA compute compatibility "
                    f"of 6.0 are: {' '.join(str(g) for g in supported)}"
                )
    seen: set[str] = set()
    for kind, tensors in (("input", config.input), ("output", config.output)):
        for tensor in tensors:
            if not tensor.name:
                raise InvalidArgumentError(f"model '{config.name}' has an {kind} with no name")
            if tensor.name in seen and kind == "input":
                raise InvalidArgumentError(f"duplicate input name '{tensor.name}' in model '{config.name}'")
            seen.add(tensor.name)
            if tensor.data_type == mc.TYPE_INVALID:
                raise InvalidArgumentError(
                    f"model '{config.name}' {kind} '{tensor.name}' must specify 'data_type'"
                )
            for dim in tensor.dims:
                if dim < -1 or dim == 0 and not tensor.HasField("reshape"):
                    if dim < -1:
                        raise InvalidArgumentError(
                            f"model '{config.name}' {kind} '{tensor.name}' dimension must be "
                            f"integer >= 1, or -1 to indicate a variable-size dimension"
                        )
        seen = set() if kind == "input" else seen


_INT_PATHS = (
    ("input", "*", "dims"),
    ("input", "*", "reshape", "shape"),
    ("output", "*", "dims"),
    ("output", "*", "reshape", "shape"),
    ("version_policy", "specific", "versions"),
    ("dynamic_batching", "max_queue_delay_microseconds"),
    ("dynamic_batching", "priority_levels"),
    ("dynamic_batching", "default_priority_level"),
    ("dynamic_batching", "default_queue_policy", "default_timeout_microseconds"),
    ("dynamic_batching", "priority_queue_policy", "{}", "default_timeout_microseconds"),
    ("sequence_batching", "max_sequence_idle_microseconds"),
    ("sequence_batching", "oldest", "max_queue_delay_microseconds"),
    ("sequence_batching", "direct", "max_queue_delay_microseconds"),
    ("sequence_batching", "state", "*", "dims"),
    ("ensemble_scheduling", "step", "*", "model_version"),
    ("model_warmup", "*", "inputs", "{}", "dims"),
)


def _ints(node: Any, path: tuple[str, ...]) -> None:
    """Turn the 64-bit fields Triton prints as numbers back from protobuf's JSON strings."""
    if not path or node is None:
        return
    head, rest = path[0], path[1:]
    if head == "*":
        for item in node if isinstance(node, list) else []:
            _ints(item, rest)
        return
    if head == "{}":
        for item in node.values() if isinstance(node, dict) else []:
            _ints(item, rest)
        return
    if not isinstance(node, dict) or head not in node:
        return
    if not rest:
        value = node[head]
        node[head] = [int(v) for v in value] if isinstance(value, list) else int(value)
        return
    _ints(node[head], rest)


def config_to_json(config: mc.ModelConfig) -> dict[str, Any]:
    """The JSON Triton serves for a config: proto field names, defaults printed, enums by name."""
    data: dict[str, Any] = json_format.MessageToDict(
        config,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
    )
    for path in _INT_PATHS:
        _ints(data, path)
    return data


def protocol_dims(config: mc.ModelConfig, tensor: mc.ModelInput | mc.ModelOutput) -> list[int]:
    """The shape a client sees: the batch dimension (-1) first when the model batches."""
    dims = [int(d) for d in tensor.dims]
    return [-1, *dims] if config.max_batch_size > 0 else dims

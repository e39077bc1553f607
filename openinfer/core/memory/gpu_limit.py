"""`--model-load-gpu-limit <device_id>:<fraction>`: as Triton, once a model's GPU instances are
created, a device whose memory is more used than its fraction allows refuses the model (its
instances are stopped again), so a load cannot starve what already runs there."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..._proto import model_config_pb2 as mc
from ..errors import UnavailableError


def split_pair(value: str) -> tuple[str, str]:
    """tritonserver's `<first>:<second>` option values (`--cuda-memory-pool-byte-size`,
    `--model-load-gpu-limit`), refused in its words."""
    first, sep, second = value.partition(":")
    if not sep:
        raise ValueError(
            "Cannot parse pair option due to incorrect number of inputs.--<pair option> argument "
            f"requires format <first>:<second>. Found: {value}"
        )
    return first, second


#: (free, total) bytes of a CUDA device.
MemoryInfo = Callable[[int], "tuple[int, int] | None"]


def parse(values: Iterable[str]) -> dict[int, float]:
    """The limits by device, refused in tritonserver's words."""
    limits: dict[int, float] = {}
    for value in values:
        device, fraction = split_pair(value)
        try:
            device_id, limit = int(device), float(fraction)
        except ValueError:
            raise ValueError(f"invalid --model-load-gpu-limit '{value}': expected <device_id>:<fraction>") from None
        if device_id < 0:
            raise ValueError(f"expects device ID >= 0, got {device_id}")
        if not 0.0 <= limit <= 1.0:
            raise ValueError(f"expects limit fraction to be in range [0.0, 1.0], got {limit:f}")
        limits[device_id] = limit
    return limits


def gpu_devices(config: mc.ModelConfig) -> set[int]:
    return {int(d) for g in config.instance_group if g.kind == mc.ModelInstanceGroup.KIND_GPU for d in g.gpus}


def check(name: str, config: mc.ModelConfig, limits: dict[int, float], memory: MemoryInfo | None = None) -> None:
    """UnavailableError when one of the model's GPUs is past its limit now."""
    for device in sorted(gpu_devices(config) & set(limits)):
        info = (memory or cuda_memory)(device)
        if info is None:
            continue  # no way to read this device: nothing to hold the load against
        free, total = info
        if total - free > total * limits[device]:
            raise UnavailableError(
                f"can not create model '{name}': memory limit set for GPU {device} has exceeded, "
                "model loading is rejected."
            )


def cuda_memory(device: int) -> tuple[int, int] | None:
    """The device's free and total memory from NVML (the `gpu` extra), None without it."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device)
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return int(info.free), int(info.total)
    except Exception:  # noqa: BLE001 (no NVML, no driver, no such device: nothing to check)
        return None

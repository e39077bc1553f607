"""`--allow-gpu-metrics`: Triton's per-GPU families, read through NVML (`nvidia-ml-py`).

Triton reports, for each GPU it can use, `nv_gpu_utilization`, `nv_gpu_memory_total_bytes`,
`nv_gpu_memory_used_bytes`, `nv_gpu_power_usage`, `nv_gpu_power_limit` (gauges) and
`nv_energy_consumption` (a counter, joules since the server started), each labelled
`gpu_uuid="GPU-..."`. Without the `gpu` extra, without a driver or without a GPU there is nothing to
report and the families are left out, as Triton leaves them out on a CPU-only host. A reading the
device does not support (power on some boards) is skipped rather than reported as zero.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

GAUGES = (
    ("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)"),
    ("nv_gpu_memory_total_bytes", "GPU total memory, in bytes"),
    ("nv_gpu_memory_used_bytes", "GPU used memory, in bytes"),
    ("nv_gpu_power_usage", "GPU power usage in watts"),
    ("nv_gpu_power_limit", "GPU power management limit in watts"),
)
ENERGY = ("nv_energy_consumption", "GPU energy consumption in joules since the Triton Server started")
FAMILY_NAMES = tuple(name for name, _ in GAUGES) + (ENERGY[0],)


@dataclass
class _Device:
    uuid: str
    handle: Any
    #: NVML's energy counter (mJ since the driver loaded) when the server started; None if unsupported.
    energy_start_mj: int | None


def _visible(index: int, uuid: str, spec: str | None) -> bool:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: indices or (prefixes of) UUIDs; unset means all."""
    if spec is None:
        return True
    for item in (part.strip() for part in spec.split(",")):
        if item.isdigit() and int(item) == index:
            return True
        if item.startswith("GPU-") and uuid.startswith(item):
            return True
    return False


class GpuSampler:
    """Reads every visible GPU at scrape time; `open()` answers None where NVML has nothing."""

    def __init__(self, nvml: Any, devices: list[_Device]) -> None:
        self.nvml = nvml
        self.devices = devices
        self.lock = threading.Lock()

    @classmethod
    def open(cls) -> GpuSampler | None:
        try:
            import pynvml
        except ImportError:  # the `gpu` extra is not installed
            return None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError:  # no driver (libnvidia-ml) on this host
            return None
        try:
            devices = []
            spec = os.environ.get("CUDA_VISIBLE_DEVICES")
            for index in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                uuid = pynvml.nvmlDeviceGetUUID(handle)
                uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
                if _visible(index, uuid, spec):
                    devices.append(_Device(uuid, handle, _read(pynvml, pynvml.nvmlDeviceGetTotalEnergyConsumption, handle)))
        except pynvml.NVMLError:
            devices = []
        if not devices:
            pynvml.nvmlShutdown()
            return None
        return cls(pynvml, devices)

    def collect(self) -> Iterator[Metric]:
        nvml = self.nvml
        families = {name: Metric(name, doc, "gauge") for name, doc in GAUGES}
        energy = Metric(ENERGY[0], ENERGY[1], "counter")
        with self.lock:
            for device in self.devices:
                labels = {"gpu_uuid": device.uuid}
                utilization = _read(nvml, nvml.nvmlDeviceGetUtilizationRates, device.handle)
                memory = _read(nvml, nvml.nvmlDeviceGetMemoryInfo, device.handle)
                power_mw = _read(nvml, nvml.nvmlDeviceGetPowerUsage, device.handle)
                limit_mw = _read(nvml, nvml.nvmlDeviceGetPowerManagementLimit, device.handle)
                values = {
                    "nv_gpu_utilization": None if utilization is None else utilization.gpu / 100,
                    "nv_gpu_memory_total_bytes": None if memory is None else memory.total,
                    "nv_gpu_memory_used_bytes": None if memory is None else memory.used,
                    "nv_gpu_power_usage": None if power_mw is None else power_mw / 1000,
                    "nv_gpu_power_limit": None if limit_mw is None else limit_mw / 1000,
                }
                for name, value in values.items():
                    if value is not None:
                        families[name].samples.append(Sample(name, labels, value))
                if device.energy_start_mj is not None:
                    now_mj = _read(nvml, nvml.nvmlDeviceGetTotalEnergyConsumption, device.handle)
                    if now_mj is not None:
                        joules = max(0, now_mj - device.energy_start_mj) / 1000
                        energy.samples.append(Sample(ENERGY[0], labels, joules))
        yield from families.values()
        yield energy


def _read(nvml: Any, query: Callable[[Any], Any], handle: Any) -> Any:
    """One NVML reading, or None where the device does not support it or fails to answer."""
    try:
        return query(handle)
    except nvml.NVMLError:
        return None

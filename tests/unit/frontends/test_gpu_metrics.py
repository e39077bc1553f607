"""GPU families from NVML readings: units, labels, unsupported readings, CUDA_VISIBLE_DEVICES.

No NVIDIA driver runs on the development machines, so the readings come from a stand-in with
NVML's call signatures and units; tests/e2e/test_gpu_metrics.py checks a real GPU where one is.
"""

from __future__ import annotations

from types import SimpleNamespace

from openinfer.frontends.gpu_metrics import GpuSampler, _Device, _visible
from openinfer.frontends.metrics import render


class _StandInNvml:
    """NVML's units: utilisation in percent, memory in bytes, power in mW, energy in mJ."""

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.energy_mj = {"a": 5_000_000, "b": 0}

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=37, memory=10)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=80 * 2**30, used=3 * 2**30, free=77 * 2**30)

    def nvmlDeviceGetPowerUsage(self, handle):
        if handle == "b":
            raise self.NVMLError("Not Supported")
        return 123_456

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        if handle == "b":
            raise self.NVMLError("Not Supported")
        return 700_000

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if handle == "b":
            raise self.NVMLError("Not Supported")
        return self.energy_mj[handle]


def _samples(sampler: GpuSampler) -> dict[tuple[str, str], float]:
    return {
        (sample.name, sample.labels["gpu_uuid"]): sample.value
        for family in sampler.collect()
        for sample in family.samples
    }


def test_readings_in_triton_units_per_gpu_uuid():
    nvml = _StandInNvml()
    sampler = GpuSampler(nvml, [_Device("GPU-aaaa", "a", 5_000_000), _Device("GPU-bbbb", "b", None)])
    nvml.energy_mj["a"] += 2_500  # 2.5 J since the server started
    samples = _samples(sampler)
    assert samples[("nv_gpu_utilization", "GPU-aaaa")] == 0.37
    assert samples[("nv_gpu_memory_total_bytes", "GPU-aaaa")] == 80 * 2**30
    assert samples[("nv_gpu_memory_used_bytes", "GPU-aaaa")] == 3 * 2**30
    assert samples[("nv_gpu_power_usage", "GPU-aaaa")] == 123.456
    assert samples[("nv_gpu_power_limit", "GPU-aaaa")] == 700.0
    assert samples[("nv_energy_consumption", "GPU-aaaa")] == 2.5
    # A board without power management reports memory and utilisation, nothing made up.
    assert ("nv_gpu_utilization", "GPU-bbbb") in samples
    assert {name for name, uuid in samples if uuid == "GPU-bbbb"} == {
        "nv_gpu_utilization",
        "nv_gpu_memory_total_bytes",
        "nv_gpu_memory_used_bytes",
    }


def test_exposition_types_and_labels():
    sampler = GpuSampler(_StandInNvml(), [_Device("GPU-aaaa", "a", 5_000_000)])
    text = render(sampler.collect()).decode()
    assert "# TYPE nv_gpu_utilization gauge" in text
    assert "# TYPE nv_energy_consumption counter" in text
    assert 'nv_gpu_memory_used_bytes{gpu_uuid="GPU-aaaa"} 3221225472' in text
    assert 'nv_energy_consumption{gpu_uuid="GPU-aaaa"} 0' in text


def test_cuda_visible_devices_as_cuda_reads_it():
    assert _visible(0, "GPU-1234", None)
    assert _visible(1, "GPU-1234", "1,2") and not _visible(0, "GPU-1234", "1,2")
    assert _visible(3, "GPU-1234-5678", "GPU-1234") and not _visible(3, "GPU-9999", "GPU-1234")
    assert not _visible(0, "GPU-1234", "")

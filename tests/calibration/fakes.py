"""A fake `torch.cuda` namespace for the CUDA backend: the device boundary is faked, nothing else.

Tensors stay on the CPU (the backend is built with tensor_device="cpu"), so every torch op the GPU path
issues really runs; only the calls that would reach a GPU driver answer from here: availability, device
name and capability, Event timing (on a real clock), synchronize, mem_get_info, memory_reserved /
memory_allocated, max_memory_allocated / reset_peak_memory_stats, empty_cache, NCCL version.
"""

from __future__ import annotations

import time
from collections import Counter
from types import SimpleNamespace

import torch

GIB = 1 << 30


class FakeEvent:
    def __init__(self, cuda: FakeCuda, enable_timing: bool = False):
        self.cuda, self.enable_timing, self.t = cuda, enable_timing, None

    def record(self, stream=None) -> None:
        self.cuda.calls["Event.record"] += 1
        self.t = self.cuda.clock()

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.enable_timing and end.enable_timing, "elapsed_time needs enable_timing=True events"
        self.cuda.calls["Event.elapsed_time"] += 1
        return (end.t - self.t) * 1e3  # milliseconds, as CUDA reports

    def synchronize(self) -> None:
        self.cuda.calls["Event.synchronize"] += 1


class FakeCuda:
    """Answers like torch.cuda on a machine with `devices` GPUs named `name`."""

    OutOfMemoryError = torch.OutOfMemoryError

    def __init__(
        self,
        name="NVIDIA H100 80GB HBM3",
        capability=(9, 0),
        total=80 * GIB,
        free=2 * GIB,
        reserved=77 * GIB,
        allocated=70 * GIB,
        peak=3 * GIB,
        devices=1,
        available=True,
        bf16=True,
        oom_on_reset=None,
        clock=time.perf_counter,
    ):
        self.name, self.capability, self.total, self.free = name, capability, total, free
        self.reserved, self.allocated, self.peak = reserved, allocated, peak
        self.devices, self.available, self.bf16 = devices, available, bf16
        self.oom_on_reset = oom_on_reset  # raise OutOfMemoryError on this reset_peak_memory_stats call (1-based)
        self.clock = clock
        self.calls: Counter = Counter()
        self.nccl = SimpleNamespace(version=lambda: (2, 21, 5))

    def _count(self, name: str) -> None:
        self.calls[name] += 1

    def is_available(self) -> bool:
        self._count("is_available")
        return self.available

    def device_count(self) -> int:
        return self.devices

    def get_device_name(self, index=0) -> str:
        return self.name

    def get_device_capability(self, index=0):
        return self.capability

    def get_device_properties(self, index=0):
        return SimpleNamespace(total_memory=self.total, name=self.name)

    def is_bf16_supported(self) -> bool:
        return self.bf16

    def set_device(self, index) -> None:
        self._count("set_device")

    def synchronize(self, device=None) -> None:
        self._count("synchronize")

    def Event(self, enable_timing: bool = False) -> FakeEvent:
        return FakeEvent(self, enable_timing)

    def mem_get_info(self, index=0):
        self._count("mem_get_info")
        return self.free, self.total

    def memory_reserved(self, index=0) -> int:
        return self.reserved

    def memory_allocated(self, index=0) -> int:
        return self.allocated

    def max_memory_allocated(self, index=0) -> int:
        self._count("max_memory_allocated")
        return self.peak

    def reset_peak_memory_stats(self, index=0) -> None:
        self._count("reset_peak_memory_stats")
        if self.oom_on_reset is not None and self.calls["reset_peak_memory_stats"] >= self.oom_on_reset:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (fake)")

    def empty_cache(self) -> None:
        self._count("empty_cache")


def fake_backend(**kwargs):
    from planner.calibration.device import CudaBackend

    cuda = FakeCuda(**kwargs)
    return CudaBackend(torch, cuda=cuda, tensor_device="cpu"), cuda

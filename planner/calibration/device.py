"""The device boundary: everything the profile asks of a CPU or a CUDA GPU goes through one small
interface (`Backend`), so the GPU path runs in CI against a fake `torch.cuda` namespace.

torch is imported lazily (inside functions), so `import planner.calibration` works without it.
A CUDA backend takes its `cuda` namespace as an argument (default `torch.cuda`): synchronize, Event
timing, max_memory_allocated / reset_peak_memory_stats, mem_get_info, memory_reserved, device
properties. `tensor_device` is where tensors are made (default `cuda:<index>`; tests use "cpu").
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import time
from collections.abc import Callable
from typing import Protocol

from planner.calibration.errors import ProfileUnavailable
from planner.calibration_record import DeviceInfo, ProxyComputeDType

TORCH_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}
BYTES_PER_ELEMENT = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}

# Device name (as CUDA/ROCm report it, lowercased) -> catalog accelerator id. First match wins.
CATALOG_NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"h100.*pcie", "h100-pcie"),
    (r"h100", "h100-sxm"),
    (r"h200", "h200"),
    (r"b200", "b200"),
    (r"a100.*40\s*gb|a100-(sxm4|pcie)-40", "a100-40gb"),
    (r"a100", "a100-80gb"),
    (r"l40s", "l40s"),
    (r"\bl4\b", "l4"),
    (r"a10g", "a10g"),
    (r"4090", "rtx-4090"),
    (r"mi300x", "mi300x"),
)


def torch_available() -> bool:
    """Whether torch can be imported (without importing it)."""
    return importlib.util.find_spec("torch") is not None


def import_torch():
    """torch, or a clear message saying how to install it."""
    try:
        import torch
    except ImportError:
        raise ProfileUnavailable(
            "profiling needs PyTorch, which is not installed: pip install 'headroom[profile]' "
            "(or install the torch build for your GPU first)"
        ) from None
    return torch


def catalog_id_for_device(name: str) -> str | None:
    """The catalog accelerator a reported device name corresponds to, if any."""
    lowered = name.lower()
    for pattern, accel_id in CATALOG_NAME_PATTERNS:
        if re.search(pattern, lowered):
            return accel_id
    return None


class Marks(Protocol):
    """Timestamps taken between pieces of work; `intervals()` gives the seconds between consecutive marks."""

    def mark(self) -> None: ...

    def intervals(self) -> list[float]: ...


class _CpuMarks:
    """Wall-clock marks (the CPU runs ops synchronously)."""

    def __init__(self):
        self._t: list[float] = []

    def mark(self) -> None:
        self._t.append(time.perf_counter())

    def intervals(self) -> list[float]:
        return [b - a for a, b in zip(self._t, self._t[1:])]


class _CudaMarks:
    """CUDA events recorded on the current stream; read after one synchronize."""

    def __init__(self, cuda):
        self._cuda = cuda
        self._events: list = []

    def mark(self) -> None:
        event = self._cuda.Event(enable_timing=True)
        event.record()
        self._events.append(event)

    def intervals(self) -> list[float]:
        if not self._events:
            return []
        self._cuda.synchronize()
        return [a.elapsed_time(b) / 1e3 for a, b in zip(self._events, self._events[1:])]


class Backend:
    """One device as the profile sees it. Subclasses: CpuBackend, CudaBackend."""

    kind: str = "cpu"

    def __init__(self, torch_module, tensor_device: str):
        self.torch = torch_module
        self.tensor_device = tensor_device

    # ---- dtypes
    def dtype(self, name: str):
        return getattr(self.torch, TORCH_DTYPE_NAMES[name])

    def supported_dtypes(self) -> tuple[str, ...]:
        raise NotImplementedError

    def default_dtype(self) -> ProxyComputeDType:
        raise NotImplementedError

    # ---- timing
    def synchronize(self) -> None:
        """Wait for queued work (no-op on the CPU)."""

    def marks(self) -> Marks:
        return _CpuMarks()

    def time_call(self, fn: Callable[[], object], inner: int = 1) -> float:
        """Seconds per call of `fn`, timing `inner` back-to-back calls together."""
        marks = self.marks()
        self.synchronize()
        marks.mark()
        for _ in range(inner):
            fn()
        marks.mark()
        return marks.intervals()[0] / inner

    # ---- memory
    def memory_info(self) -> tuple[int, int]:
        """(free, total) bytes of the memory the profile allocates from."""
        raise NotImplementedError

    def reset_peak_memory(self) -> None:
        """Start a new peak-memory window (no-op where the allocator keeps no peak)."""

    def peak_allocated_bytes(self) -> int | None:
        """Allocator peak since the last reset; None where not measurable (CPU)."""
        return None

    def allocated_bytes(self) -> int | None:
        return None

    def runtime_overhead_bytes(self) -> int | None:
        """Device memory the process uses outside the tensor allocator (context, library workspaces)."""
        return None

    def allocator_slack_bytes(self) -> int | None:
        """Memory the caching allocator holds beyond live tensors (reserved - allocated)."""
        return None

    def empty_cache(self) -> None:
        """Return cached blocks to the device."""

    def device_count(self) -> int:
        return 1

    def is_oom(self, exc: BaseException) -> bool:
        oom = getattr(self.torch, "OutOfMemoryError", None)
        if oom is not None and isinstance(exc, oom):
            return True
        text = str(exc).lower()
        return "out of memory" in text or "can't allocate memory" in text or isinstance(exc, MemoryError)

    def info(self) -> DeviceInfo:
        raise NotImplementedError

    def catalog_id(self) -> str | None:
        raise NotImplementedError


class CpuBackend(Backend):
    kind = "cpu"

    def __init__(self, torch_module):
        super().__init__(torch_module, "cpu")

    def supported_dtypes(self) -> tuple[str, ...]:
        # fp8 GEMMs on a CPU are emulated; they say nothing about a serving deployment.
        return ("fp32", "bf16", "fp16")

    def default_dtype(self) -> ProxyComputeDType:
        return "fp32"

    def memory_info(self) -> tuple[int, int]:
        return host_memory_info()

    def info(self) -> DeviceInfo:
        free, total = self.memory_info()
        return DeviceInfo(
            kind="cpu",
            name=cpu_name(),
            memory_bytes=total,
            free_memory_bytes=free,
            device_count=1,
            torch_version=str(self.torch.__version__),
            cuda_version=None,
            cpu_threads=int(self.torch.get_num_threads()),
            platform=f"{platform.system()} {platform.machine()}",
        )

    def catalog_id(self) -> str | None:
        return "cpu"


class CudaBackend(Backend):
    """A CUDA (or ROCm, which torch exposes as torch.cuda) device. Every device call goes through `cuda`."""

    kind = "cuda"

    def __init__(self, torch_module, cuda=None, tensor_device: str | None = None, index: int = 0):
        super().__init__(torch_module, tensor_device or f"cuda:{index}")
        self.cuda = cuda if cuda is not None else torch_module.cuda
        self.index = index
        if hasattr(self.cuda, "set_device") and self.tensor_device.startswith("cuda"):
            self.cuda.set_device(index)

    def capability(self) -> tuple[int, int]:
        major, minor = self.cuda.get_device_capability(self.index)
        return int(major), int(minor)

    def supported_dtypes(self) -> tuple[str, ...]:
        out = ["fp32", "fp16"]
        if self.cuda.is_bf16_supported():
            out.insert(1, "bf16")
        if self.fp8_supported():
            out.append("fp8")
        return tuple(out)

    def fp8_supported(self) -> bool:
        """fp8 tensor cores: compute capability 8.9 (Ada) or 9.0+ (Hopper, Blackwell), and torch._scaled_mm."""
        return (
            self.capability() >= (8, 9) and hasattr(self.torch, "float8_e4m3fn") and hasattr(self.torch, "_scaled_mm")
        )

    def fp8_unsupported_reason(self) -> str:
        major, minor = self.capability()
        if (major, minor) < (8, 9):
            return f"no fp8 tensor cores on compute capability {major}.{minor} (needs 8.9 or newer)"
        return f"torch {self.torch.__version__} has no torch._scaled_mm / float8_e4m3fn"

    def default_dtype(self) -> ProxyComputeDType:
        return "bf16" if self.cuda.is_bf16_supported() else "fp16"

    def synchronize(self) -> None:
        self.cuda.synchronize()

    def marks(self) -> Marks:
        return _CudaMarks(self.cuda)

    def memory_info(self) -> tuple[int, int]:
        free, total = self.cuda.mem_get_info(self.index)
        return int(free), int(total)

    def reset_peak_memory(self) -> None:
        self.cuda.reset_peak_memory_stats(self.index)

    def peak_allocated_bytes(self) -> int | None:
        return int(self.cuda.max_memory_allocated(self.index))

    def allocated_bytes(self) -> int | None:
        return int(self.cuda.memory_allocated(self.index))

    def runtime_overhead_bytes(self) -> int | None:
        """used (total - free, from the driver) - reserved by torch's caching allocator: the CUDA context,
        cuBLAS/cuDNN workspaces and library code. Other processes on the same GPU inflate it."""
        free, total = self.memory_info()
        return max(int(total - free - self.cuda.memory_reserved(self.index)), 0)

    def allocator_slack_bytes(self) -> int | None:
        return max(int(self.cuda.memory_reserved(self.index) - self.cuda.memory_allocated(self.index)), 0)

    def empty_cache(self) -> None:
        self.cuda.empty_cache()

    def device_count(self) -> int:
        return int(self.cuda.device_count())

    def is_oom(self, exc: BaseException) -> bool:
        oom = getattr(self.cuda, "OutOfMemoryError", None)
        if isinstance(oom, type) and isinstance(exc, oom):
            return True
        return super().is_oom(exc)

    def info(self) -> DeviceInfo:
        free, total = self.memory_info()
        nccl = None
        try:
            version = self.cuda.nccl.version()
            nccl = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
        except Exception:
            nccl = None
        major, minor = self.capability()
        torch_version = getattr(self.torch, "version", None)
        return DeviceInfo(
            kind="cuda",
            name=str(self.cuda.get_device_name(self.index)),
            memory_bytes=total,
            free_memory_bytes=free,
            device_count=self.device_count(),
            torch_version=str(self.torch.__version__),
            cuda_version=getattr(torch_version, "cuda", None) or getattr(torch_version, "hip", None),
            nccl_version=nccl,
            compute_capability=f"{major}.{minor}",
            platform=f"{platform.system()} {platform.machine()}",
        )

    def catalog_id(self) -> str | None:
        return catalog_id_for_device(str(self.cuda.get_device_name(self.index)))


def make_backend(device: str = "auto", *, torch_module=None, cuda=None, tensor_device: str | None = None) -> Backend:
    """The backend for `device` ('auto', 'cpu' or 'cuda'); 'auto' picks CUDA when a GPU is visible."""
    torch = torch_module if torch_module is not None else import_torch()
    cuda_ns = cuda if cuda is not None else torch.cuda
    if device == "cpu":
        return CpuBackend(torch)
    available = bool(cuda_ns.is_available())
    if device == "auto":
        return CudaBackend(torch, cuda_ns, tensor_device) if available else CpuBackend(torch)
    if device == "cuda":
        if not available:
            build = getattr(getattr(torch, "version", None), "cuda", None)
            why = (
                "this torch is a CPU-only build"
                if not build
                else "no GPU is visible (check CUDA_VISIBLE_DEVICES and the driver)"
            )
            raise ProfileUnavailable(
                f"--device cuda: CUDA is not available to torch {torch.__version__}: {why}. "
                "Use --device cpu, or install the CUDA build of torch."
            )
        return CudaBackend(torch, cuda_ns, tensor_device)
    raise ProfileUnavailable(f"unknown device '{device}'; use auto, cpu or cuda")


# ---------------------------------------------------------------------------------------------
# host facts (no torch)


def host_memory_info() -> tuple[int, int]:
    """(available, total) host RAM in bytes: /proc/meminfo on Linux, sysconf elsewhere."""
    try:
        fields = {}
        with open("/proc/meminfo") as handle:
            for line in handle:
                key, _, rest = line.partition(":")
                fields[key] = int(rest.split()[0]) * 1024
        return fields.get("MemAvailable", fields["MemFree"]), fields["MemTotal"]
    except (OSError, KeyError, ValueError, IndexError):
        pass
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        total = os.sysconf("SC_PHYS_PAGES") * page
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * page
        except (ValueError, OSError):
            free = total // 2
        return int(free), int(total)
    except (ValueError, OSError, AttributeError):
        return 4 << 30, 8 << 30


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


__all__ = [
    "BYTES_PER_ELEMENT",
    "Backend",
    "CpuBackend",
    "CudaBackend",
    "Marks",
    "catalog_id_for_device",
    "cpu_name",
    "host_memory_info",
    "import_torch",
    "make_backend",
]

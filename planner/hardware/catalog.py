"""Accelerator specifications: the catalog file and user-defined custom accelerators."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from planner.dtypes import FORMATS, high_precision_dtype
from planner.errors import PlanningError, did_you_mean, explain

HARDWARE_FILE = Path(__file__).with_name("accelerators.json")
# Tensor-core formats a peak can be given for: tf32 plus every number format's compute format.
PEAK_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")
# Without an interconnect domain in the data: GPUs that share a fast link in a typical server (HGX baseboard).
DEFAULT_GPUS_PER_NODE = 8


class Link(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str = "link"
    bandwidth_bytes_per_second: float = Field(gt=0, le=1e15)
    latency_seconds: float = Field(default=5e-6, ge=0, le=1.0)
    # GPUs this link joins: the scale-up domain (8 on an HGX baseboard, 72 in a GB200/GB300 NVL72 rack).
    domain_size_gpus: int | None = Field(default=None, ge=1, le=100_000)


class Accelerator(BaseModel):
    """One device. Memory is in bytes as the device reports them; FLOP/s are dense (no 2:4 sparsity)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1, max_length=200)
    vendor: str = "custom"
    memory_bytes: int = Field(gt=0, le=1 << 50)
    memory_bandwidth_bytes_per_second: float = Field(gt=0, le=1e15)
    peak_flops_per_second: dict[str, float]
    # The vendor's 2:4-sparse headline figures, kept only to check the dense ones against (never planned with).
    sparse_peak_flops_per_second: dict[str, float] = Field(default_factory=dict)
    interconnect: Link | None = None
    host_link: Link | None = None
    scale_out: Link | None = None  # the network between nodes, per GPU
    reference_usd_per_hour: float = Field(default=0.0, ge=0, le=10_000)
    # Power per GPU (watts): the datasheet's board power (TDP / TBP / max power) and the draw of an idle device
    # (nvidia-smi in P0, nothing running); optional, so a custom accelerator without them validates (planner.physics.energy then states
    # what it assumed). power_source cites both.
    board_power_watts: float | None = Field(default=None, gt=0, le=20_000)
    idle_power_watts: float | None = Field(default=None, ge=0, le=20_000)
    power_source: str = ""
    source: str = ""
    notes: str = ""

    @field_validator("peak_flops_per_second")
    @classmethod
    def _known_dtypes(cls, peaks: dict[str, float]) -> dict[str, float]:
        _check_peaks(peaks)
        if not peaks.get("bf16") and not peaks.get("fp16") and not peaks.get("fp32"):
            raise ValueError("give at least one of the bf16, fp16 or fp32 peak FLOP/s")
        return peaks

    @field_validator("sparse_peak_flops_per_second")
    @classmethod
    def _known_sparse_dtypes(cls, peaks: dict[str, float]) -> dict[str, float]:
        _check_peaks(peaks)
        return peaks

    @model_validator(mode="after")
    def _idle_below_board(self) -> Accelerator:
        if (
            self.board_power_watts is not None
            and self.idle_power_watts is not None
            and self.idle_power_watts >= self.board_power_watts
        ):
            raise ValueError(
                f"idle_power_watts {self.idle_power_watts:g} W must be below board_power_watts "
                f"{self.board_power_watts:g} W"
            )
        return self

    @model_validator(mode="after")
    def _dense_within_sparse(self) -> Accelerator:
        """A dense peak above the sparse one means a sparse figure was entered as dense (the usual slip:
        datasheet headlines are 2:4-sparse)."""
        for dtype, sparse in self.sparse_peak_flops_per_second.items():
            dense = self.peak_flops_per_second.get(dtype)
            if dense is not None and dense > sparse:
                raise ValueError(
                    f"dense {dtype} peak {dense:.4g} FLOP/s exceeds the sparse one {sparse:.4g}: "
                    "peak_flops_per_second takes dense (no 2:4 sparsity) figures"
                )
        return self

    def supports(self, dtype: str) -> bool:
        """Whether the device has native tensor-core support for `dtype` matmuls (a catalog peak key)."""
        return bool(self.peak_flops_per_second.get(dtype))

    def computes_in(self, dtype: str) -> bool:
        """Whether kernels over the number format `dtype` run on this device's tensor cores for it (fp8 on
        Hopper, nvfp4/mxfp4 on Blackwell), rather than dequantizing it to 16 bits first."""
        core = FORMATS[dtype].tensor_core
        return core is not None and self.supports(core)

    def dequantizes(self, dtype: str) -> bool:
        """Whether `dtype` has tensor cores on some GPUs but not on this one, so its kernels dequantize it to
        16 bits here: a memory and bandwidth saving only (fp8 on Ampere, nvfp4/mxfp4 before Blackwell).
        Weight-only formats (int4) dequantize everywhere by design and are not counted."""
        return FORMATS[dtype].tensor_core is not None and not self.computes_in(dtype)

    def gemm_dtype(self, weight_dtype: str) -> str:
        """Tensor-core format the GEMMs over `weight_dtype` weights run in on this device: the format's own
        where the device has it, else the 16-bit format the kernels dequantize to (vLLM's Marlin W4A16 / W8A16
        kernels). The one rule every precision follows; the peak FLOP/s of a plan is `peak_flops` of this."""
        core = FORMATS[weight_dtype].tensor_core
        return core if core is not None and self.supports(core) else high_precision_dtype(weight_dtype)

    def peak_flops(self, dtype: str) -> float:
        """Dense peak for a compute dtype, falling back to the closest format the device has.

        fp8 or fp4 on a device without them runs as bf16 (weight-only kernels upcast); int4 runs as int8 or bf16.
        """
        fallbacks = {
            "fp8": ("fp8", "bf16", "fp16", "fp32"),
            "int8": ("int8", "bf16", "fp16", "fp32"),
            "int4": ("int4", "int8", "bf16", "fp16", "fp32"),
            "fp4": ("fp4", "bf16", "fp16", "fp32"),
            "bf16": ("bf16", "fp16", "fp32"),
            "fp16": ("fp16", "bf16", "fp32"),
            "fp32": ("fp32",),
            "tf32": ("tf32", "fp32"),
        }
        for candidate in fallbacks.get(dtype, (dtype, "bf16", "fp32")):
            if self.peak_flops_per_second.get(candidate):
                return self.peak_flops_per_second[candidate]
        return max(self.peak_flops_per_second.values())

    @property
    def interconnect_bandwidth_bytes_per_second(self) -> float:
        link = self.interconnect or self.host_link
        return link.bandwidth_bytes_per_second if link else 16e9

    @property
    def interconnect_latency_seconds(self) -> float:
        link = self.interconnect or self.host_link
        return link.latency_seconds if link else 10e-6

    @property
    def gpus_per_node(self) -> int:
        """GPUs that share the fast interconnect (the scale-up domain: 8 on HGX, 72 in an NVL72 rack);
        collectives spanning more use the scale-out network."""
        if self.interconnect is not None and self.interconnect.domain_size_gpus:
            return self.interconnect.domain_size_gpus
        return DEFAULT_GPUS_PER_NODE

    @property
    def scale_out_bandwidth_bytes_per_second(self) -> float:
        return self.scale_out.bandwidth_bytes_per_second if self.scale_out else 12.5e9

    @property
    def scale_out_latency_seconds(self) -> float:
        return self.scale_out.latency_seconds if self.scale_out else 10e-6

    @property
    def host_link_bandwidth_bytes_per_second(self) -> float:
        return self.host_link.bandwidth_bytes_per_second if self.host_link else 16e9


def _check_peaks(peaks: dict[str, float]) -> None:
    unknown = set(peaks) - set(PEAK_DTYPES)
    if unknown:
        raise ValueError(f"unknown dtype(s) {sorted(unknown)}; use {', '.join(PEAK_DTYPES)}")
    for dtype, value in peaks.items():
        if not 0 < value <= 1e18:
            raise ValueError(f"peak FLOP/s for {dtype} must be positive and below 1e18, got {value}")


@lru_cache(maxsize=1)
def _load() -> tuple[dict[str, Accelerator], tuple[str, ...]]:
    """The valid entries, and a sentence for each entry (or the whole file) that could not be read.

    One broken entry must not take the others down: it is left out and reported by name.
    """
    try:
        raw = json.loads(HARDWARE_FILE.read_text())
        entries = raw["accelerators"]
        if not isinstance(entries, list):
            raise TypeError("'accelerators' is not a list")
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        return {}, (f"hardware catalog {HARDWARE_FILE} is unreadable: {exc}",)
    catalog: dict[str, Accelerator] = {}
    problems = []
    for index, entry in enumerate(entries):
        try:
            accelerator = Accelerator.model_validate(entry)
        except ValidationError as exc:
            name = entry.get("id", f"entry {index}") if isinstance(entry, dict) else f"entry {index}"
            problems.append(f"hardware catalog {HARDWARE_FILE}: '{name}' is invalid and was left out ({explain(exc)})")
            continue
        catalog[accelerator.id] = accelerator
    return catalog, tuple(problems)


def _catalog() -> dict[str, Accelerator]:
    catalog, problems = _load()
    if not catalog:
        raise PlanningError(problems[0] if problems else f"hardware catalog {HARDWARE_FILE} has no accelerators")
    return catalog


def catalog_problems() -> tuple[str, ...]:
    """Sentences naming catalog entries that could not be loaded (shown by the UI, empty when healthy)."""
    return _load()[1]


def list_accelerators() -> list[Accelerator]:
    return list(_catalog().values())


def get_accelerator(accelerator_id: str) -> Accelerator:
    catalog = _catalog()
    if accelerator_id not in catalog:
        raise PlanningError(
            f"unknown GPU '{accelerator_id}'{did_you_mean(accelerator_id, catalog)}; choose one of "
            f"{', '.join(catalog)}, or describe a custom one as a JSON object "
            '("gpu": {"memory_bytes": ..., "memory_bandwidth_bytes_per_second": ..., '
            '"peak_flops_per_second": {"bf16": ...}})'
        )
    return catalog[accelerator_id]


def resolve_accelerator(spec: str | dict[str, Any] | Accelerator) -> Accelerator:
    """Catalog id, an inline spec (dict), or an Accelerator."""
    if isinstance(spec, Accelerator):
        return spec
    if isinstance(spec, str):
        return get_accelerator(spec)
    if isinstance(spec, dict):
        try:
            return Accelerator.model_validate({"id": "custom", "name": "Custom accelerator", **spec})
        except ValidationError as exc:
            raise PlanningError(f"custom GPU: {explain(exc)}") from None
    raise PlanningError("gpu must be a catalog id or an object describing the accelerator")

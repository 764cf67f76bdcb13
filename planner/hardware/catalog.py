"""Accelerator specifications: the catalog file and user-defined custom accelerators."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from planner.errors import PlanningError, did_you_mean, explain

HARDWARE_FILE = Path(__file__).with_name("accelerators.json")
PEAK_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")


class Link(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str = "link"
    bandwidth_bytes_per_second: float = Field(gt=0, le=1e15)
    latency_seconds: float = Field(default=5e-6, ge=0, le=1.0)
    domain_size_gpus: int | None = Field(default=None, ge=1, le=100_000)  # GPUs this link joins (a node)


class Accelerator(BaseModel):
    """One device. Memory is in bytes as the device reports them; FLOP/s are dense (no 2:4 sparsity)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1, max_length=200)
    vendor: str = "custom"
    memory_bytes: int = Field(gt=0, le=1 << 50)
    memory_bandwidth_bytes_per_second: float = Field(gt=0, le=1e15)
    peak_flops_per_second: dict[str, float]
    interconnect: Link | None = None
    host_link: Link | None = None
    scale_out: Link | None = None  # the network between nodes, per GPU
    reference_usd_per_hour: float = Field(default=0.0, ge=0, le=10_000)
    source: str = ""
    notes: str = ""

    @field_validator("peak_flops_per_second")
    @classmethod
    def _known_dtypes(cls, peaks: dict[str, float]) -> dict[str, float]:
        unknown = set(peaks) - set(PEAK_DTYPES)
        if unknown:
            raise ValueError(f"unknown dtype(s) {sorted(unknown)}; use {', '.join(PEAK_DTYPES)}")
        if not peaks.get("bf16") and not peaks.get("fp16") and not peaks.get("fp32"):
            raise ValueError("give at least one of the bf16, fp16 or fp32 peak FLOP/s")
        for dtype, value in peaks.items():
            if not 0 < value <= 1e18:
                raise ValueError(f"peak FLOP/s for {dtype} must be positive and below 1e18, got {value}")
        return peaks

    def supports(self, dtype: str) -> bool:
        """Whether the device has native tensor-core support for `dtype` matmuls."""
        return bool(self.peak_flops_per_second.get(dtype))

    def peak_flops(self, dtype: str) -> float:
        """Dense peak for a compute dtype, falling back to the closest format the device has.

        fp8 on a device without fp8 runs as bf16 (weight-only fp8 kernels upcast); int4 runs as int8 or bf16.
        """
        fallbacks = {
            "fp8": ("fp8", "bf16", "fp16", "fp32"),
            "int8": ("int8", "bf16", "fp16", "fp32"),
            "int4": ("int4", "int8", "bf16", "fp16", "fp32"),
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
        """GPUs that share the fast interconnect; collectives spanning more use the scale-out network."""
        if self.interconnect is not None and self.interconnect.domain_size_gpus:
            return self.interconnect.domain_size_gpus
        return 8

    @property
    def scale_out_bandwidth_bytes_per_second(self) -> float:
        return self.scale_out.bandwidth_bytes_per_second if self.scale_out else 12.5e9

    @property
    def scale_out_latency_seconds(self) -> float:
        return self.scale_out.latency_seconds if self.scale_out else 10e-6

    @property
    def host_link_bandwidth_bytes_per_second(self) -> float:
        return self.host_link.bandwidth_bytes_per_second if self.host_link else 16e9


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

"""The calibration record: a small, versioned, frozen description of one profile run.

`plan(scenario, calibration=record)` reads three fields (`efficiency`, `runtime_overhead_correction_bytes`,
`label`), and on the GPU the record measured two more: the link's fitted per-step latency (`link_latency_seconds`)
and the device's fitted GEMM ceiling and fixed time per kernel (`gemm_shapes`; see `device_terms_apply`).
Everything else says where those numbers came from: the device, the measured ceilings, the
proxy model and its phase timings, and a predicted-vs-measured table with the error of each quantity.
No torch here: records load, validate and plot on machines without it. The record lives below `inference/`
and `training/`, which read it; `planner.calibration` (profile, fit, store) sits above them and writes it.
"""

from __future__ import annotations

import re
import types
from datetime import UTC, datetime
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, computed_field, model_serializer

from planner.model.architecture import ModelArchitecture
from planner.physics.efficiency import Efficiency
from planner.scenario_base import revised

CALIBRATION_FORMAT = "headroom-calibration"
CALIBRATION_VERSION = 1

DeviceKind = Literal["cpu", "cuda"]
ProxyDType = Literal["auto", "fp32", "bf16", "fp16"]
ProxyComputeDType = Literal["fp32", "bf16", "fp16"]  # what a proxy runs in: ProxyDType once "auto" is resolved
MatmulShape = Literal["square", "skinny"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProfileSettings(_Frozen):
    """What the user asked for (CLI flags / Calibrate page widgets)."""

    device: Literal["auto", "cpu", "cuda"] = "auto"
    seconds: float = Field(default=60.0, gt=0, le=3600, description="total time budget of the profile")
    model: str = Field(default="llama-3.1-8b", min_length=1, max_length=200, description="catalog or size id")
    layers: int | None = Field(default=None, ge=1, le=64, description="proxy layers (None: 4 on GPU, 2 on CPU)")
    memory_share: float = Field(default=0.5, gt=0, le=0.9, description="most of the free memory the profile may use")
    reference_gpu: str | None = Field(default=None, description="catalog accelerator the efficiencies refer to")
    dtype: ProxyDType = "auto"
    allreduce: bool = True
    label: str | None = Field(default=None, max_length=200)


class DeviceInfo(_Frozen):
    kind: DeviceKind
    name: str
    memory_bytes: int = Field(ge=0, description="total device memory (host RAM for the CPU)")
    free_memory_bytes: int = Field(ge=0, description="free when the profile started")
    device_count: int = Field(default=1, ge=1)
    torch_version: str
    cuda_version: str | None = None
    nccl_version: str | None = None
    compute_capability: str | None = None
    cpu_threads: int | None = None
    platform: str = ""


class MatmulMeasurement(_Frozen):
    """C[m,n] = A[m,k] B[k,n] in `dtype`; `square` is prefill-like, `skinny` (small m) is decode-like."""

    dtype: str
    shape: MatmulShape
    m: int
    n: int
    k: int
    seconds: float = Field(gt=0)
    reps: int = Field(ge=1)

    @computed_field
    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @computed_field
    @property
    def flops_per_second(self) -> float:
        return self.flops / self.seconds


class BandwidthMeasurement(_Frozen):
    """One device-to-device copy of `buffer_bytes`: it reads and writes the buffer (2 x bytes moved)."""

    buffer_bytes: int = Field(gt=0)
    seconds: float = Field(gt=0)
    reps: int = Field(ge=1)

    @computed_field
    @property
    def bytes_moved(self) -> float:
        return 2.0 * self.buffer_bytes

    @computed_field
    @property
    def bytes_per_second(self) -> float:
        return self.bytes_moved / self.seconds


class AllReduceMeasurement(_Frozen):
    """One all-reduce of `message_bytes` over `world_size` ranks. Bus bandwidth follows nccl-tests:
    algorithm bandwidth (bytes / time) x 2(n-1)/n, the per-link traffic of a ring all-reduce."""

    backend: str
    world_size: int = Field(ge=2)
    message_bytes: int = Field(gt=0)
    seconds: float = Field(gt=0)
    reps: int = Field(ge=1)

    @computed_field
    @property
    def algorithm_bytes_per_second(self) -> float:
        return self.message_bytes / self.seconds

    @computed_field
    @property
    def bus_bytes_per_second(self) -> float:
        n = self.world_size
        return self.algorithm_bytes_per_second * 2 * (n - 1) / n


class Ceilings(_Frozen):
    """Measured device ceilings; `skipped` says why a dtype or benchmark was not measured."""

    matmul: list[MatmulMeasurement] = []
    bandwidth: list[BandwidthMeasurement] = []
    allreduce: list[AllReduceMeasurement] = []
    skipped: dict[str, str] = {}

    def best_matmul_flops_per_second(self, dtype: str, shape: str) -> float | None:
        rates = [m.flops_per_second for m in self.matmul if m.dtype == dtype and m.shape == shape]
        return max(rates) if rates else None

    def bandwidth_bytes_per_second(self) -> float | None:
        """The fastest copy among buffers of at least 64 MiB that were timed more than once (smaller ones
        may run from a CPU's caches; a single timing is the warm-up, page faults included). Falls back to
        whatever was measured."""
        if not self.bandwidth:
            return None
        credible = [b for b in self.bandwidth if b.buffer_bytes >= 64 << 20 and b.reps > 1]
        pool = credible or [b for b in self.bandwidth if b.reps > 1] or self.bandwidth
        return max(b.bytes_per_second for b in pool)

    def bus_bytes_per_second(self) -> float | None:
        """Bus bandwidth of the largest all-reduce message measured (bandwidth-bound, latency amortized)."""
        if not self.allreduce:
            return None
        return max(self.allreduce, key=lambda a: (a.message_bytes, a.bus_bytes_per_second)).bus_bytes_per_second


class GemmShapeFit(_Frozen):
    """This device's GEMM curve in one dtype, fitted to its timed square matmuls (two unknowns, two or more sizes):

        t = 2 M N K / (ceiling x peak) + tail_seconds,

    the model of `planner.physics.gemm_efficiency.gemm_fraction`. `ceiling` is a fraction of the reference
    accelerator's catalog dense peak at `dtype` (the table's MAMF / peak, measured); `tail_seconds` the fixed time
    per GEMM kernel (the table's t0, measured)."""

    dtype: str
    ceiling: float = Field(gt=0, description="achievable matmul FLOP/s / catalog dense peak")
    tail_seconds: float = Field(ge=0, description="fixed time per GEMM kernel, seconds")
    sizes: list[int] = Field(default=[], description="the square sizes (M = N = K) the fit used")


class ProxySpec(_Frozen):
    """The proxy model actually run: a few layers of the chosen model (its architecture, with
    `num_layers` = the proxy's layers), the operating points, and every cap applied to fit the budget."""

    model_id: str
    model_name: str
    architecture: ModelArchitecture
    source_num_layers: int
    source_hidden_size: int
    width_divisor: int = Field(default=1, ge=1, description="1 = the model's real width")
    dtype: ProxyComputeDType
    prefill_tokens: int = Field(ge=1)
    holdout_prefill_tokens: int = Field(ge=1)
    decode_batch: int = Field(ge=1)
    decode_context_tokens: int = Field(ge=1)
    holdout_decode_batch: int = Field(ge=1)
    holdout_decode_context_tokens: int = Field(ge=1)
    train_micro_batch: int = Field(ge=1)
    train_tokens: int = Field(ge=1, description="sequence length of the training micro-batch")
    caps: list[str] = []


class PhaseMeasurement(_Frozen):
    """One proxy phase at one operating point. `seconds` is the fastest repetition over all proxy layers
    (interference only adds time), `seconds_per_layer` that repetition layer by layer, `median_seconds`
    the median repetition (the spread). `flops`/`bytes` are the engine's counts for this step. `tensor_bytes` are
    the exact bytes of live tensors by component; `peak_memory_bytes` is the allocator peak (GPU only)."""

    name: str
    phase: Literal["prefill", "decode", "train"]
    layers: int = Field(ge=1)
    batch: int = Field(ge=1)
    tokens: int = Field(ge=1, description="new tokens per step, all sequences")
    context_tokens: int = Field(ge=0)
    seconds: float = Field(gt=0)
    seconds_per_layer: list[float] = []
    median_seconds: float | None = None
    reps: int = Field(ge=1)
    flops: float = Field(ge=0)
    bytes: float = Field(ge=0)
    peak_memory_bytes: float | None = None
    tensor_bytes: dict[str, float] = {}
    breakdown_seconds: dict[str, float] = {}

    @computed_field
    @property
    def mean_seconds_per_layer(self) -> float:
        return self.seconds / self.layers


Role = Literal["ceiling", "fit", "holdout", "memory"]
CalibrationSource = Literal["profile", "benchmark"]


class ComparisonRow(_Frozen):
    """One measured quantity against the engine's prediction of it.

    `predicted` uses the documented default efficiencies and the reference accelerator's catalog
    peaks (what an uncalibrated plan assumes); `predicted_calibrated` uses this record's fitted
    efficiencies and memory correction. Rows with role `fit` were used to fit an efficiency (their
    calibrated error is ~0 by construction); `holdout` rows were not (their error is the real test).
    """

    quantity: str
    phase: str
    unit: str
    role: Role
    measured: float
    predicted: float
    predicted_calibrated: float | None = None
    note: str = ""

    @computed_field
    @property
    def error_fraction(self) -> float:
        """(predicted - measured) / measured: +0.10 means the engine predicts 10 % too much."""
        return _error(self.predicted, self.measured)

    @computed_field
    @property
    def calibrated_error_fraction(self) -> float | None:
        if self.predicted_calibrated is None:
            return None
        return _error(self.predicted_calibrated, self.measured)


def _error(predicted: float, measured: float) -> float:
    if measured == 0:
        return 0.0 if predicted == 0 else float("inf")
    return (predicted - measured) / measured


class FittedFactor(_Frozen):
    """One named factor a benchmark calibration fitted: a multiplier on one or more `Efficiency` fields (moved
    together), in log space, pulled toward the runtime profile's value (`prior_values`) by a prior of width
    `prior_sigma` (log units). `separated` says whether the results pinned it down (its posterior width under
    half the prior's) or it stayed near the profile's value for want of evidence."""

    name: str = Field(min_length=1, max_length=60)
    fields: list[str] = Field(min_length=1, max_length=8)
    multiplier: float = Field(gt=0, allow_inf_nan=False)
    prior_values: dict[str, float] = {}
    values: dict[str, float] = {}
    prior_sigma: float = Field(gt=0, allow_inf_nan=False)
    posterior_sigma: float | None = Field(default=None, ge=0)
    separated: bool = True
    note: str = Field(default="", max_length=400)


class BenchmarkPoint(_Frozen):
    """One benchmark run a benchmark calibration read: its `key` is the `phase` of its predicted-vs-measured
    rows; `role` says whether the fit used it or held it out."""

    key: str = Field(min_length=1, max_length=20)
    source: str = Field(min_length=1, max_length=300)
    client: str = Field(max_length=40)
    role: Literal["fit", "holdout"]
    load: str = Field(max_length=120, description="the traffic in words: 'c=16, 3200/800 tokens'")
    max_concurrency: int | None = Field(default=None, ge=1)
    request_rate_per_second: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    num_requests: int = Field(ge=1)
    prompt_tokens: float = Field(gt=0)
    output_tokens: float = Field(gt=0)


class BenchmarkScope(_Frozen):
    """What a benchmark calibration describes: the deployment's serving stack (runtime and release, model and its
    family), the points it read and the factors it fitted. Plans for another runtime or model family refuse it
    unless mapped explicitly (`scope_mismatch`, read by `planner.plan.check_calibration`)."""

    runtime: str = Field(min_length=1, max_length=60)
    model: str = Field(min_length=1, max_length=200)
    model_family: str = Field(min_length=1, max_length=100, description="the config's model_type")
    num_gpus: int = Field(ge=1)
    tensor_parallel: int = Field(ge=1)
    clients: list[str] = []
    hold_out: str = Field(default="", max_length=200, description="which points were held out, in words")
    factors: list[FittedFactor] = []
    points: list[BenchmarkPoint] = []
    fit_seconds: float = Field(default=0.0, ge=0)
    simulations: int = Field(default=0, ge=0)

    def scope_mismatch(self, runtime: str | None, model_family: str | None) -> str | None:
        """What differs between this stack and a plan's ('runtime sglang, not vllm'), or None."""
        differences = []
        if runtime is not None and runtime != self.runtime:
            differences.append(f"runtime '{runtime}', not '{self.runtime}'")
        if model_family is not None and model_family != self.model_family:
            differences.append(f"model family '{model_family}', not '{self.model_family}' ({self.model})")
        if runtime is None and model_family is None:
            differences.append("a training plan, not serving")
        return "; ".join(differences) or None


class CalibrationRecord(_Frozen):
    """A stored calibration. JSON on disk; `plan()` takes it as its `calibration` argument."""

    format: Literal["headroom-calibration"] = CALIBRATION_FORMAT
    version: Literal[1] = CALIBRATION_VERSION
    id: str = Field(min_length=1, max_length=120, pattern=r"^[A-Za-z0-9._-]+$")
    label: str = Field(min_length=1, max_length=200)
    created_at: datetime
    complete: bool = True
    stopped_reason: str = ""
    device: DeviceInfo
    reference_gpu: str = Field(description="catalog accelerator whose peaks the efficiencies are relative to")
    reference_peak_flops_per_second: float = Field(gt=0, description="catalog dense peak at the proxy's dtype")
    reference_bandwidth_bytes_per_second: float = Field(gt=0)
    reference_link_bytes_per_second: float = Field(gt=0)
    settings: ProfileSettings
    dtype: str
    ceilings: Ceilings
    proxy: ProxySpec | None = None
    phases: list[PhaseMeasurement] = []
    efficiency: Efficiency
    efficiency_notes: dict[str, str] = {}
    runtime_overhead_correction_bytes: float = 0.0
    memory_correction_note: str = ""
    predicted_vs_measured: list[ComparisonRow] = []
    notes: list[str] = []
    elapsed_seconds: float = Field(default=0.0, ge=0)
    # Device terms (absent on records written before they were fitted; see `device_terms_apply`).
    link_latency_seconds: float | None = Field(
        default=None,
        ge=0,
        description="the link's per-step latency alpha fitted to the all-reduce timings (>= 2 GPUs, >= 2 sizes)",
    )
    gemm_shapes: list[GemmShapeFit] = Field(
        default=[], description="per dtype: the device's GEMM ceiling and fixed time per kernel, fitted"
    )
    # A calibration fitted to serving-benchmark results rather than a torch profile (absent on profile records).
    source: CalibrationSource = Field(default="profile", description="what measured it: a torch profile or a benchmark")
    benchmark: BenchmarkScope | None = Field(default=None, description="a benchmark calibration's stack and fit")
    mapped_to_any_gpu: bool = Field(
        default=False,
        description="the caller's explicit choice to apply this record to plans for other accelerators too "
        "(plan() then warns); never stored in a file or a link: see for_any_gpu()",
    )

    @model_serializer(mode="wrap")
    def _omit_absent_device_terms(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Files and links leave the device terms out while they are absent, so a record written before they
        existed serializes (and fingerprints: `planner.share.calibration_fingerprint`) exactly as it did."""
        data = handler(self)
        for name in _DEVICE_TERMS:
            if name in data and data[name] in (None, []):
                del data[name]
        for name, absent in _SOURCE_DEFAULTS.items():
            if name in data and data[name] == absent:
                del data[name]
        return data

    @classmethod
    def from_json_data(cls, data: dict) -> CalibrationRecord:
        """Validate exported JSON: derived values (computed fields such as `error_fraction`, written for
        readers of the file) are dropped first, since they are recomputed from the stored inputs."""
        return cls.model_validate(strip_computed_fields(cls, data))

    def applies_to(self, gpu_id) -> bool:
        """Whether a scenario on catalog accelerator `gpu_id` is the hardware this record measured."""
        return isinstance(gpu_id, str) and gpu_id == self.reference_gpu

    def device_terms_apply(self, gpu_id) -> bool:
        """Whether the fitted device terms (link latency, GEMM ceiling and kernel time) apply to a plan on
        catalog accelerator `gpu_id`: only on the GPU this record measured, and only when it measured a GPU.

        A mapping to other GPUs (`for_any_gpu`) carries the efficiencies, which are ratios to the catalog's
        peaks, but never these absolute terms: a CPU's "link" latency or matmul overhead says nothing about an
        H100's NVLink or cuBLAS kernels, and one GPU type's about another's. A record with no fitted term (an
        older one, a single GPU, one all-reduce size, one matmul size) leaves the catalog and table values."""
        return self.device.kind == "cuda" and self.applies_to(gpu_id)

    def link_latency_for(self, gpu_id) -> float | None:
        """The fitted per-step link latency for a plan on `gpu_id`, or None (the catalog's stays)."""
        return self.link_latency_seconds if self.device_terms_apply(gpu_id) else None

    def gemm_shape_for(self, gpu_id, compute_dtype: str) -> GemmShapeFit | None:
        """The fitted GEMM ceiling and kernel time for GEMMs in `compute_dtype` on `gpu_id`, or None (the
        published table's stay): only a dtype this record timed."""
        if not self.device_terms_apply(gpu_id):
            return None
        return next((g for g in self.gemm_shapes if g.dtype == compute_dtype), None)

    def for_any_gpu(self) -> CalibrationRecord:
        """This record, mapped explicitly to plans for every accelerator (the measurement is unchanged)."""
        if self.mapped_to_any_gpu:
            return self
        return revised(self, mapped_to_any_gpu=True)

    def as_measured(self) -> CalibrationRecord:
        """This record without the caller's mapping: what files and links carry."""
        return revised(self, mapped_to_any_gpu=False) if self.mapped_to_any_gpu else self

    @property
    def measured_on(self) -> str:
        """The device in words, e.g. 'NVIDIA H100 80GB HBM3 (cuda)' or 'AMD EPYC (cpu)'."""
        return f"{self.device.name} ({self.device.kind})"

    @property
    def residual_error(self) -> float | None:
        """Largest |error| of the calibrated timing predictions this record did not fit (held-out rows):
        the spread `planner.uncertainty` uses for error bands while this calibration is active."""
        errors = [
            abs(row.calibrated_error_fraction)
            for row in self.predicted_vs_measured
            if row.role == "holdout" and row.calibrated_error_fraction is not None
        ]
        return max(errors) if errors else None

    def phase(self, name: str) -> PhaseMeasurement | None:
        return next((p for p in self.phases if p.name == name), None)

    def summary(self) -> str:
        e = self.efficiency
        state = "" if self.complete else " (partial)"
        if self.benchmark is not None:
            b = self.benchmark
            factors = ", ".join(f"{f.name} x{f.multiplier:.3g}" for f in b.factors) or "nothing fitted"
            return (
                f"{self.label}: {len(b.points)} benchmark runs of {b.model} on {b.num_gpus}x '{self.reference_gpu}' "
                f"(TP{b.tensor_parallel}) under {b.runtime}; fitted {factors}"
            )
        return (
            f"{self.label}{state}: {self.device.name}, relative to '{self.reference_gpu}': prefill "
            f"{e.prefill_compute:.3g}, decode {e.decode_compute:.3g}, training {e.training_compute:.3g} of peak "
            f"FLOP/s; memory bandwidth {e.memory_bandwidth:.3g}; communication {e.communication:.3g}"
        )


_DEVICE_TERMS = ("link_latency_seconds", "gemm_shapes")
# Left out of files and links at these values, so a profile record serializes (and fingerprints) as before.
_SOURCE_DEFAULTS: dict[str, Any] = {"source": "profile", "benchmark": None}


def device_terms_for(calibration: Any, gpu_id: str, compute_dtype: str) -> tuple[float | None, GemmShapeFit | None]:
    """(fitted link latency, fitted GEMM curve) a plan on `gpu_id` with GEMMs in `compute_dtype` takes from
    `calibration`; (None, None) without one, off its GPU, and for a stand-in that carries efficiencies only (a
    sensitivity study's duck-typed calibration, as in benchmarks/accuracy.py)."""
    if not isinstance(calibration, CalibrationRecord):
        return None, None
    return calibration.link_latency_for(gpu_id), calibration.gemm_shape_for(gpu_id, compute_dtype)


def strip_computed_fields(model: type[BaseModel], data: Any) -> Any:
    """`data` without the computed fields of `model` and of the models nested in it."""
    if not isinstance(data, dict):
        return data
    out = {k: v for k, v in data.items() if k not in model.model_computed_fields}
    for name, field in model.model_fields.items():
        if name in out:
            out[name] = _strip_value(field.annotation, out[name])
    return out


def _strip_value(annotation: Any, value: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return strip_computed_fields(annotation, value)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (list, tuple) and isinstance(value, list) and args:
        return [_strip_value(args[0], item) for item in value]
    if origin in (Union, types.UnionType):
        for option in args:
            if isinstance(option, type) and issubclass(option, BaseModel) and isinstance(value, dict):
                return strip_computed_fields(option, value)
    return value


def make_record_id(device_name: str, created_at: datetime) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")[:40] or "device"
    return f"{slug}-{created_at.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}"


__all__ = [
    "CALIBRATION_FORMAT",
    "CALIBRATION_VERSION",
    "AllReduceMeasurement",
    "BandwidthMeasurement",
    "BenchmarkPoint",
    "BenchmarkScope",
    "CalibrationRecord",
    "Ceilings",
    "ComparisonRow",
    "DeviceInfo",
    "FittedFactor",
    "GemmShapeFit",
    "device_terms_for",
    "MatmulMeasurement",
    "PhaseMeasurement",
    "ProfileSettings",
    "ProxySpec",
    "make_record_id",
    "strip_computed_fields",
]

"""The reference accelerator a calibration's efficiencies refer to, and the device terms fitted against it: the
GEMM curve (ceiling and fixed time per kernel, `fit_gemm_shape`) and the link's alpha and beta (`fit_allreduce`).

The device's GEMM curve (`fit_gemm_shape`): its ceiling (MAMF / peak) and fixed time per GEMM kernel t0 from the
square matmuls timed at two or more sizes, the two numbers `planner.physics.gemm_efficiency` otherwise reads from
published tables. On a GPU that the catalog knows, the profile fits them (`device_reference`) and the phase
efficiencies are fitted through them, as plans on that GPU then apply them (`CalibrationRecord.device_terms_apply`);
alpha is carried into those plans the same way. No torch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from planner.calibration_record import Ceilings, GemmShapeFit, MatmulMeasurement
from planner.hardware.catalog import Accelerator, get_accelerator
from planner.physics import collectives, communication, gemm_efficiency

MIN_EFFICIENCY = 1e-6


def clamp(value: float) -> float:
    return float(min(max(value, MIN_EFFICIENCY), 1.0))


# ---------------------------------------------------------------------------------------------
# the reference accelerator


@dataclass(frozen=True)
class Reference:
    """The catalog accelerator (or, for an unknown device, the measured ceilings) efficiencies refer to."""

    gpu_id: str
    peaks: dict  # dtype -> dense peak FLOP/s
    bandwidth_bytes_per_second: float
    link_bytes_per_second: float
    link_latency_seconds: float
    is_accelerator: bool
    accelerator: Accelerator | None = None
    # This device's fitted GEMM curves (`device_reference`): they replace the published ceiling and t0, as in
    # plans on this GPU. Empty: the tables' (a CPU, an unknown device, one matmul size).
    gemm_shapes: tuple[GemmShapeFit, ...] = ()

    def fitted_gemm(self, dtype: str) -> GemmShapeFit | None:
        return next((g for g in self.gemm_shapes if g.dtype == dtype), None)

    def gemm_ceiling_ratio(self, dtype: str) -> float:
        """The device's GEMM ceiling relative to the reference GPU (`physics.gemm_efficiency.ceiling_ratio`),
        as `plan()` applies it (the fitted one when there is one); 1.0 for a device the catalog does not know
        (its own ceilings are its peaks)."""
        if self.accelerator is None:
            return 1.0
        fitted = self.fitted_gemm(dtype)
        return gemm_efficiency.ceiling_ratio(
            self.gpu_id, self.accelerator.gemm_dtype(dtype), fitted.ceiling if fitted else None
        )

    def training_ceiling_ratio(self, dtype: str) -> float:
        """The device's GEMM ceiling relative to the training reference (`gemm_efficiency.training_ceiling_ratio`),
        as the training plan applies it; 1.0 for a device the catalog does not know."""
        if self.accelerator is None:
            return 1.0
        fitted = self.fitted_gemm(dtype)
        return gemm_efficiency.training_ceiling_ratio(
            self.gpu_id, self.accelerator.gemm_dtype(dtype), fitted.ceiling if fitted else None
        )

    @property
    def gemm_tail_seconds(self) -> float:
        """The fixed time per GEMM kernel `plan()` adds on this device by default (`physics.gemm_efficiency`)."""
        return gemm_efficiency.gemm_tail_seconds(self.is_accelerator)

    def tail_seconds(self, dtype: str) -> float:
        """The fixed time per GEMM kernel in `dtype` as `plan()` applies it: the fitted one when there is one."""
        fitted = self.fitted_gemm(dtype)
        return gemm_efficiency.gemm_tail_seconds(self.is_accelerator, fitted.tail_seconds if fitted else None)

    def peak_flops(self, dtype: str) -> float:
        """Catalog dense peak for `dtype` (with the catalog's fallbacks), or the measured ceiling."""
        if self.accelerator is not None:
            return self.accelerator.peak_flops(dtype)
        return self.peaks.get(dtype) or max(self.peaks.values())

    @classmethod
    def from_catalog(cls, gpu_id: str) -> Reference:
        accel = get_accelerator(gpu_id)
        return cls(
            gpu_id=gpu_id,
            peaks=dict(accel.peak_flops_per_second),
            bandwidth_bytes_per_second=accel.memory_bandwidth_bytes_per_second,
            link_bytes_per_second=accel.interconnect_bandwidth_bytes_per_second,
            link_latency_seconds=accel.interconnect_latency_seconds,
            is_accelerator=accel.vendor != "cpu",
            accelerator=accel,
        )

    @classmethod
    def from_ceilings(cls, ceilings: Ceilings, is_accelerator: bool) -> Reference:
        """For a device the catalog does not know: its own measured ceilings are the peaks."""
        peaks = {}
        for m in ceilings.matmul:
            peaks[m.dtype] = max(peaks.get(m.dtype, 0.0), m.flops_per_second)
        bandwidth = ceilings.bandwidth_bytes_per_second() or 1e11
        return cls(
            gpu_id="custom",
            peaks=peaks or {"fp32": 1e12},
            bandwidth_bytes_per_second=bandwidth,
            link_bytes_per_second=ceilings.bus_bytes_per_second() or 16e9,
            link_latency_seconds=10e-6,
            is_accelerator=is_accelerator,
        )


# ---------------------------------------------------------------------------------------------
# the GEMM curve: ceiling and t0


# Smallest square GEMM the curve is fitted to. The microbenchmark times calls back to back from Python, so a
# GEMM shorter than torch's launch cost (~5-10 us per torch.matmul on the CPU side) measures the launch, not the
# kernel; at 2048^3 a GPU kernel takes >= 20 us (the published t0 comes from 2048^3 and 4096^3 too).
MIN_CURVE_SIZE = 2048


def fit_gemm_shape(matmuls: list[MatmulMeasurement], dtype: str, peak: float) -> GemmShapeFit | None:
    """The ceiling and fixed time per kernel of `planner.physics.gemm_efficiency.gemm_fraction` from the square
    `dtype` matmuls of at least `MIN_CURVE_SIZE` (the fastest timing per size), None with fewer than two sizes:

        t_i = W_i / (ceiling x peak) + t0,  W_i = 2 M N K,

    linear in (1 / (ceiling x peak), t0), solved by least squares on the relative error (each size counts alike,
    the smallest pins t0, the largest the ceiling; two sizes solve it exactly). A t0 that comes out negative
    (noise on a device whose small GEMMs carry no fixed cost) is 0 and the ceiling refitted alone. Skinny
    matmuls are left out: at 16 rows they stream weights, a memory roofline rather than this curve."""
    fastest: dict[int, float] = {}
    for m in matmuls:
        if m.dtype == dtype and m.shape == "square" and m.m >= MIN_CURVE_SIZE:
            fastest[m.m] = min(fastest.get(m.m, math.inf), m.seconds)
    if len(fastest) < 2:
        return None
    sizes = sorted(fastest)
    # Scaled rows of the weighted problem: (W_i / t_i) a + (1 / t_i) t0 = 1.
    xs = [2.0 * n**3 / fastest[n] for n in sizes]
    ys = [1.0 / fastest[n] for n in sizes]
    sxx, sxy, syy = sum(x * x for x in xs), sum(x * y for x, y in zip(xs, ys)), sum(y * y for y in ys)
    sx, sy = sum(xs), sum(ys)
    det = sxx * syy - sxy * sxy
    a, t0 = ((sx * syy - sy * sxy) / det, (sxx * sy - sxy * sx) / det) if det > 0 else (0.0, -1.0)
    if t0 < 0:
        a, t0 = sx / sxx, 0.0
    if a <= 0:
        return None
    return GemmShapeFit(dtype=dtype, ceiling=1.0 / (a * peak), tail_seconds=t0, sizes=sizes)


def device_reference(ref: Reference, ceilings: Ceilings) -> Reference:
    """`ref` with this device's GEMM curves fitted (`fit_gemm_shape`) for every dtype timed at two or more square
    sizes: the reference a GPU profile fits through, since plans on that GPU apply the same curves. Only for a
    catalog GPU (a device the catalog does not know has no plans of its own) and a dtype the GPU runs in its own
    format (`Accelerator.gemm_dtype`), the key plans look the curve up by."""
    if ref.accelerator is None or not ref.is_accelerator:
        return ref
    accel = ref.accelerator
    fits = []
    for dtype in sorted({m.dtype for m in ceilings.matmul}):
        if accel.gemm_dtype(dtype) != dtype:
            continue
        fitted = fit_gemm_shape(ceilings.matmul, dtype, ref.peak_flops(dtype))
        if fitted is not None:
            fits.append(fitted)
    return dataclasses.replace(ref, gemm_shapes=tuple(fits))


def gemm_note(fit: GemmShapeFit, ref: Reference) -> str:
    """The fitted curve next to the published one it replaces, in words."""
    table = gemm_efficiency.gemm_ceiling(ref.gpu_id, fit.dtype)
    sizes = ", ".join(str(n) for n in fit.sizes)
    return (
        f"{fit.dtype} GEMM ceiling {fit.ceiling:.1%} of the catalog peak and t0 {fit.tail_seconds * 1e6:.2f} us per "
        f"kernel, fitted to the square matmuls ({sizes}); the published table says {table:.1%} and "
        f"{ref.gemm_tail_seconds * 1e6:.2f} us"
    )


# ---------------------------------------------------------------------------------------------
# the all-reduce: alpha and beta


@dataclass(frozen=True)
class AllReduceFit:
    """The link's alpha-beta parameters fitted to the all-reduce microbenchmark (NCCL: ring and tree only)."""

    efficiency: float  # beta: achieved / catalog link bandwidth
    latency_seconds: float  # alpha: per-step latency of the link
    note: str
    latency_fitted: bool = False  # False: one message size, alpha is the catalog's


def fit_allreduce(measurements, ref: Reference, default_efficiency: float) -> AllReduceFit:
    """alpha and beta of `planner.physics.collectives` from the all-reduce timings of one group size.

    beta (the bandwidth efficiency) from the slope between the two largest messages, where NCCL's ring is
    bandwidth-bound: dt / dM = 2(n-1)/n / (link x eff). alpha from the smallest message: the per-step latency
    at which the engine's fastest NCCL algorithm (ring or tree, each with its fixed kernel cost) takes the
    measured time, found by bisection (0 when the message ran faster than the fixed costs alone). With one
    message size only beta is fitted, with the catalog's alpha subtracted."""
    ordered = sorted(measurements, key=lambda a: a.message_bytes)
    largest, n = ordered[-1], ordered[-1].world_size
    crossing = 2 * (n - 1) / n
    alpha = ref.link_latency_seconds
    efficiency = None
    if len(ordered) >= 2 and ordered[-2].message_bytes < largest.message_bytes:
        slope = (largest.seconds - ordered[-2].seconds) / (largest.message_bytes - ordered[-2].message_bytes)
        if slope > 0:
            efficiency = clamp(crossing / (ref.link_bytes_per_second * slope))
    if efficiency is None:
        fixed = collectives.RING_BASE_SECONDS + 2 * (n - 1) * alpha
        bandwidth_time = largest.seconds - fixed if largest.seconds > fixed else largest.seconds
        efficiency = clamp(crossing * largest.message_bytes / (ref.link_bytes_per_second * bandwidth_time))
    how = f"beta from the {len(ordered)} message sizes' slope"
    if len(ordered) >= 2:
        smallest = ordered[0]

        def predicted(latency: float) -> float:
            return float(
                communication.allreduce_seconds(
                    smallest.message_bytes, n, communication.Link(ref.link_bytes_per_second, latency), efficiency
                )
            )

        lo, hi = 0.0, max(smallest.seconds, 1e-9)
        if predicted(lo) >= smallest.seconds:
            alpha = 0.0
        else:
            for _ in range(60):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if predicted(mid) < smallest.seconds else (lo, mid)
            alpha = (lo + hi) / 2
        how += f"; alpha {alpha * 1e6:.2f} us per step from the {_size(smallest.message_bytes)} message"
    else:
        how = f"beta from one message size, the catalog's alpha {alpha * 1e6:.2f} us subtracted"
    note = (
        f"all-reduce over {n} GPUs ({largest.backend}, {_size(ordered[0].message_bytes)} to "
        f"{_size(largest.message_bytes)}; bus bandwidth {largest.bus_bytes_per_second / 1e9:.1f} GB/s at the largest): "
        f"{how} (catalog alpha {ref.link_latency_seconds * 1e6:.2f} us)"
    )
    return AllReduceFit(efficiency, alpha, note, latency_fitted=len(ordered) >= 2)


def _size(message_bytes: int) -> str:
    return f"{message_bytes >> 20} MiB" if message_bytes >= 1 << 20 else f"{message_bytes >> 10} KiB"


__all__ = [
    "MIN_CURVE_SIZE",
    "AllReduceFit",
    "Reference",
    "clamp",
    "device_reference",
    "fit_allreduce",
    "fit_gemm_shape",
    "gemm_note",
]

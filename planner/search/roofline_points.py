"""Where a plan's steps sit on its GPU's roofline: each phase (prefill, decode, the speculative verify step) at
its achieved rate per GPU against the roof min(peak, bandwidth x intensity), and the roof itself sampled over
a range of intensities (Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4)). What the Inference page's
roofline chart, the Trade-offs page's roofline moves and `python -m planner diagnose` read.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, computed_field

ROOF_SAMPLES = 48


class PhasePoint(BaseModel):
    """One step of one phase on one GPU, on the roofline."""

    model_config = ConfigDict(frozen=True)

    phase: str
    arithmetic_intensity_flops_per_byte: float
    achieved_flops_per_second: float
    roof_flops_per_second: float  # min(peak, bandwidth x intensity) at this intensity
    seconds: float
    binding: str  # compute | memory_bandwidth | communication

    @computed_field
    @property
    def fraction_of_roof(self) -> float:
        return self.achieved_flops_per_second / self.roof_flops_per_second


class Roof(BaseModel):
    """The GPU's roof sampled at `intensities` (log-spaced, the ridge included)."""

    model_config = ConfigDict(frozen=True)

    peak_flops_per_second: float
    bandwidth_bytes_per_second: float
    intensities_flops_per_byte: list[float]
    attainable_flops_per_second: list[float]

    @computed_field
    @property
    def ridge_flops_per_byte(self) -> float:
        return ridge(self.peak_flops_per_second, self.bandwidth_bytes_per_second)


class PlanRoofline(BaseModel):
    """A plan's phases and the roof around them."""

    model_config = ConfigDict(frozen=True)

    phases: list[PhasePoint]
    roof: Roof


def ridge(peak_flops_per_second: float, bandwidth_bytes_per_second: float) -> float:
    """The ridge point: the intensity where the bandwidth roof meets the compute roof (FLOP per byte)."""
    return peak_flops_per_second / bandwidth_bytes_per_second


def attainable(peak_flops_per_second: float, bandwidth_bytes_per_second: float, intensity):
    """The roof at `intensity` (FLOP per byte; a float or an array): min(peak, bandwidth x intensity)."""
    return np.minimum(peak_flops_per_second, bandwidth_bytes_per_second * intensity)


def roof(
    peak_flops_per_second: float,
    bandwidth_bytes_per_second: float,
    intensities: list[float],
    margin: float = 4.0,
    whole_decades: bool = True,
) -> Roof:
    """The roof over the intensities to show (the ridge is added), widened by `margin` on both sides and, with
    `whole_decades`, out to whole powers of ten; never below 0.01 FLOP/B."""
    top = ridge(peak_flops_per_second, bandwidth_bytes_per_second)
    points = [*intensities, top]
    low, high = max(min(points) / margin, 1e-2), max(points) * margin
    if whole_decades:
        low, high = 10 ** math.floor(math.log10(low)), 10 ** math.ceil(math.log10(high))
    xs = np.unique(np.concatenate([np.geomspace(low, high, ROOF_SAMPLES), [top]]))
    return Roof(
        peak_flops_per_second=peak_flops_per_second,
        bandwidth_bytes_per_second=bandwidth_bytes_per_second,
        intensities_flops_per_byte=xs.tolist(),
        attainable_flops_per_second=attainable(peak_flops_per_second, bandwidth_bytes_per_second, xs).tolist(),
    )


def phase_point(phase, peak_flops_per_second: float, bandwidth_bytes_per_second: float) -> PhasePoint | None:
    """A plan's phase (a `PhaseRoofline`) on the roofline; None when it has no work, bytes or time."""
    if not (phase.flops and phase.bytes and phase.seconds):
        return None
    intensity = phase.flops / phase.bytes
    return PhasePoint(
        phase=phase.phase,
        arithmetic_intensity_flops_per_byte=intensity,
        achieved_flops_per_second=phase.flops / phase.seconds,
        roof_flops_per_second=float(attainable(peak_flops_per_second, bandwidth_bytes_per_second, intensity)),
        seconds=phase.seconds,
        binding=phase.binding,
    )


def plan_roofline(plan) -> PlanRoofline:
    """An inference plan's prefill and decode steps (and the verify step of speculative decoding) on its GPU's
    roofline, per GPU, with the roof around them."""
    perf, hw = plan.performance, plan.hardware
    peak, bandwidth = hw.peak_flops_per_second, hw.memory_bandwidth_bytes_per_second
    steps = (perf.prefill, perf.decode, *([perf.speculative.verify] if perf.speculative else []))
    phases = [p for p in (phase_point(s, peak, bandwidth) for s in steps) if p is not None]
    return PlanRoofline(
        phases=phases, roof=roof(peak, bandwidth, [p.arithmetic_intensity_flops_per_byte for p in phases])
    )

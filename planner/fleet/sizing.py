"""Each hour's replicas of one deployment on one candidate (layout x pool), looked up from its simulated capacity.

replicas(h) = max(min_replicas, ceil(rate(h) / (capacity x (1 - headroom_share)))), rounded up to whole scale units
(an expert-parallel group spanning replicas adds them together). `capacity` is the per-replica rate that meets every
SLO target (`TrafficEngine.capacity`, simulated once); the hour's SLO attainment is read off the candidate's load curve
at its rate per replica (linear between the curve's points, its last point's beyond them: a lower bound would need a
longer run). Busy share, for the power model, is the rate per replica over the static plan's saturated rate (the
traffic result gives no busy time of its own), at most 1, times the static plan's own busy share at full batch
(memory-bound time weighted, `planner.physics.energy`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from planner.fleet.capacity import CurveResult
from planner.fleet.scenario import Deployment, Layout, Pool

SLACK = 1e-9  # rounding slack: a rate exactly at capacity needs exactly rate / capacity replicas


@dataclass(frozen=True)
class Candidate:
    """One way to serve a deployment: a layout on a pool, with its simulated curve and the capacity planned with
    (the curve's, or less after a peak-hour verification needed more replicas)."""

    deployment: Deployment
    layout: Layout
    pool: Pool
    curve: CurveResult
    capacity: float
    verified: bool | None = None
    verification: str = "not simulated at the peak"

    @property
    def key(self) -> str:
        return self.curve.key

    @property
    def unit_gpus(self) -> int:
        return self.layout.unit_gpus

    @property
    def gpus_per_replica(self) -> int:
        return self.layout.tensor_parallel * self.layout.pipeline_parallel


@dataclass(frozen=True)
class HourSizing:
    """One hour of one deployment."""

    hour: int
    requests_per_second: float
    replicas: int
    gpus: int
    requests_per_second_per_replica: float
    slo_met: bool
    slo_attainment: float
    busy_share: float


def replicas_for(rate: float, capacity: float, headroom: float, replicas_per_unit: int, minimum: int) -> int:
    """Replicas serving `rate` with `headroom` of their SLO capacity spare, at least `minimum`, in whole units."""
    need = math.ceil(rate / (capacity * (1 - headroom)) - SLACK) if rate > 0 else 0
    need = max(need, minimum)
    return math.ceil(need / replicas_per_unit) * replicas_per_unit


def attainment_at(curve: tuple[tuple[float, float], ...], rate_per_replica: float) -> float:
    """Share of requests meeting the SLO at `rate_per_replica`, from the load curve (module docstring)."""
    if not curve:
        return 0.0
    if rate_per_replica <= curve[0][0]:
        return curve[0][1]
    for (r0, a0), (r1, a1) in zip(curve, curve[1:]):
        if rate_per_replica <= r1:
            return a0 + (a1 - a0) * (rate_per_replica - r0) / (r1 - r0) if r1 > r0 else a1
    return curve[-1][1]


def size_hour(candidate: Candidate, hour: int, rate: float, replicas: int) -> HourSizing:
    """The hour on `replicas` replicas: its rate per replica, SLO, attainment and busy share."""
    per_replica = rate / replicas if replicas else (math.inf if rate > 0 else 0.0)
    met = rate <= 0 or (replicas > 0 and per_replica <= candidate.capacity * (1 + SLACK))
    saturated = candidate.curve.saturated_requests_per_second_per_replica
    return HourSizing(
        hour=hour,
        requests_per_second=rate,
        replicas=replicas,
        gpus=replicas * candidate.gpus_per_replica,
        requests_per_second_per_replica=per_replica if replicas else 0.0,
        slo_met=met,
        slo_attainment=attainment_at(candidate.curve.curve, per_replica) if rate > 0 and replicas else float(rate <= 0),
        # the load's share of the saturated rate, times the static plan's busy share at full batch
        busy_share=min(1.0, per_replica / saturated) * candidate.curve.saturated_busy_share
        if replicas and saturated > 0
        else 0.0,
    )


def size_day(
    candidate: Candidate, rates: tuple[float, ...], headroom: float, minimum: int, gpu_limits: Sequence[int | None]
) -> list[HourSizing]:
    """Every hour's sizing; an hour with a GPU limit (what the pool has left) gets at most that many GPUs, in units."""
    hours = []
    rpu = candidate.layout.replicas_per_unit
    for hour, rate in enumerate(rates):
        replicas = replicas_for(rate, candidate.capacity, headroom, rpu, minimum)
        limit = gpu_limits[hour]
        if limit is not None and replicas * candidate.gpus_per_replica > limit:
            replicas = (max(limit, 0) // candidate.unit_gpus) * rpu
        hours.append(size_hour(candidate, hour, rate, replicas))
    return hours


def units_at_peak(candidate: Candidate, peak_rate: float, headroom: float, minimum: int) -> tuple[int, int]:
    """Scale units at the peak hour as planned, and the fewest that still meet the SLO there (no headroom): their
    difference is how many failed groups the headroom already absorbs."""
    rpu = candidate.layout.replicas_per_unit
    planned = replicas_for(peak_rate, candidate.capacity, headroom, rpu, minimum) // rpu
    bare = replicas_for(peak_rate, candidate.capacity, 0.0, rpu, 0) // rpu
    return planned, bare

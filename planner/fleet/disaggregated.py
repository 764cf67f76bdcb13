"""A deployment disaggregated (a prefill pool and a decode pool) against colocated, at its peak hour.

Opt-in (`FleetScenario.compare_disaggregation`): for each deployment whose peak holds 2 to MAX_UNITS replicas, the
fewest GPUs (whole replicas) on which some prefill/decode split meets every SLO target at the peak's rate over
(1 - headroom_share) (the spare share the colocated plan keeps), searched by
bisection between 2 replicas and the colocated plan's peak (more GPUs are assumed never to serve worse). Each count's
splits are `planner.inference.disaggregation.best_split`'s (every split into whole prefill and decode replicas of the
deployment's layout, the same simulated engine and step costs, the KV transfer priced on the link between them). The
comparison then scales every hour's GPUs by the peak's ratio (disaggregated / colocated GPUs) — an extrapolation from
the peak, said so — and prices the fleet again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, ValidationError

from planner.calibration_record import CalibrationRecord
from planner.errors import PlanningError, explain
from planner.fleet.allocation import Allocation, Placement, minimum_replicas
from planner.fleet.answer import Comparison
from planner.fleet.capacity import candidate_scenario
from planner.fleet.comparisons import rebilled
from planner.fleet.pricing import Usage
from planner.fleet.scenario import FleetScenario
from planner.inference.disaggregation import best_split
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import CAPACITY_MAX_REQUESTS, VERIFY_MAX_REQUESTS
from planner.scenario_base import revised

MAX_UNITS = 16  # at most this many replicas at the peak: the search costs about replicas x log2(replicas) simulations
HOURS = 24


class SplitResult(BaseModel):
    """The fewest GPUs a disaggregated deployment meets its SLO on at the peak (None: none up to the colocated count)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    colocated_gpus: int
    disaggregated_gpus: int | None = None
    prefill_gpus: int | None = None
    why: str = ""


@dataclass(frozen=True)
class SplitTask:
    """The search of one deployment at its peak (picklable, like the other tasks)."""

    key: str
    scenario: InferenceScenario  # the deployment on its colocated peak GPUs, the stream at the peak's rate
    calibration: CalibrationRecord | None = None

    def _at(self, gpus: int) -> tuple[bool, int | None, str]:
        s = self.scenario
        replicas = gpus // (s.tensor_parallel * s.pipeline_parallel)
        cap = s.concurrency // s.replicas
        comparison = best_split(revised(s, num_gpus=gpus, concurrency=cap * replicas), self.calibration)
        best = comparison.best
        if best is None or not best.traffic.slo or not all(c.met for c in best.traffic.slo):
            return False, None, comparison.reason
        return True, best.layout.prefill_gpus, comparison.reason

    def run(self) -> SplitResult:
        s = self.scenario
        unit = s.tensor_parallel * s.pipeline_parallel
        low, high = 2, s.num_gpus // unit  # in replicas; `high` is the colocated peak
        try:
            ok, prefill, why = self._at(high * unit)
            if not ok:
                return SplitResult(
                    key=self.key,
                    colocated_gpus=s.num_gpus,
                    why=f"no split of the peak's GPUs meets the SLO at the peak's rate ({why})",
                )
            while low < high:
                mid = (low + high) // 2
                found, mid_prefill, _ = self._at(mid * unit)
                if found:
                    high, prefill = mid, mid_prefill
                else:
                    low = mid + 1
        except (PlanningError, ValidationError) as exc:
            return SplitResult(key=self.key, colocated_gpus=s.num_gpus, why=explain(exc))
        return SplitResult(
            key=self.key, colocated_gpus=s.num_gpus, disaggregated_gpus=high * unit, prefill_gpus=prefill
        )


def split_task(
    p: Placement, rates: tuple[float, ...], headroom: float, calibration: CalibrationRecord | None
) -> SplitTask | str:
    """The search task for a placement, or why it is not compared. The split must serve the peak's rate over
    (1 - headroom), so that it keeps the spare share the colocated plan keeps."""
    c = p.candidate
    peak = max(range(HOURS), key=lambda h: rates[h])
    replicas = p.hours[peak].replicas
    if c.layout.replicas_per_unit != 1:
        return "its experts span replicas (a split would break its expert-parallel group)"
    if not 2 <= replicas <= MAX_UNITS:
        return f"{replicas} replica(s) at the peak (compared from 2 to {MAX_UNITS})"
    s = candidate_scenario(c.deployment, c.layout, c.pool)
    assert s.traffic is not None
    per_replica = min(s.traffic.num_requests, CAPACITY_MAX_REQUESTS)
    requests = min(per_replica * replicas, VERIFY_MAX_REQUESTS)
    traffic = revised(s.traffic, requests_per_second=rates[peak] / (1 - headroom), num_requests=requests)
    scenario = revised(
        s,
        num_gpus=replicas * c.gpus_per_replica,
        concurrency=c.curve.max_num_seqs_per_replica * replicas,
        traffic=traffic,
    )
    return SplitTask(c.key, scenario, calibration)


def disaggregated(
    fleet: FleetScenario, plan: Allocation, p: Placement, result: SplitResult, days_per_month: float
) -> Comparison:
    """The fleet with this deployment disaggregated: every hour's GPUs scaled by the peak's ratio, priced again."""
    name = p.candidate.deployment.name
    if result.disaggregated_gpus is None:
        return not_compared(name, plan, days_per_month, f"colocated stays: {result.why}")
    ratio = result.disaggregated_gpus / result.colocated_gpus
    unit = p.candidate.gpus_per_replica
    floor = minimum_replicas(fleet, name) * unit
    scaled = tuple(max(math.ceil(h.gpus * ratio / unit - 1e-9) * unit, floor) if h.gpus else 0 for h in p.hours)
    usage = p.usage()
    mine = Usage(usage.name, scaled, usage.spare_gpus, usage.group_gpus, usage.scale_up_hours)
    return rebilled(
        plan,
        p.candidate.pool,
        [p],
        mine,
        name=f"disaggregated:{name}",
        label=f"'{name}' disaggregated: {result.disaggregated_gpus} GPUs at the peak ({result.prefill_gpus} prefill) "
        f"instead of {result.colocated_gpus}",
        days_per_month=days_per_month,
        note="the fewest GPUs on which a prefill/decode split meets every SLO target at the peak's rate "
        "(planner.inference.disaggregation); other hours scaled by the peak's ratio, an extrapolation",
    )


def not_compared(name: str, plan: Allocation, days: float, note: str) -> Comparison:
    return Comparison(
        name=f"disaggregated:{name}",
        label=f"'{name}' disaggregated",
        usd_per_day=plan.usd_per_day,
        usd_per_month=plan.usd_per_day * days,
        gpu_hours_per_day=plan.gpu_hours_per_day,
        peak_gpus=plan.peak_gpus,
        feasible=False,
        delta_usd_per_month=0.0,
        note=note,
    )

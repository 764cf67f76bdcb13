"""Calibration from benchmark results: replay each run through the traffic simulator on the deployment it measured,
fit a few named factors of that serving stack, and write the same kind of record the torch profile writes.

    runs = load_benchmark_paths(["c4.json", "c16.json", "c64.json"])
    record = calibrate_from_benchmark(deployment, runs, hold_out="middle")
    plan(scenario, calibration=record)

Each run becomes the deployment scenario with the run's mean lengths and a `Traffic` of the run's own stream (rate
or closed-loop concurrency, arrivals, length range, number of requests; `replay`). The factors (`FACTORS`) multiply
fields of `Efficiency`: dense GEMMs (prefill and decode compute together), memory bandwidth, the fused-MoE kernel
rates (MoE models only), the engine's per-step host time and the API server's per-request time. They are fitted in
log space to the runs' TTFT, TPOT and output throughput (`benchmark_fit`), each pulled toward the runtime profile's
value (the documented `Efficiency` defaults the plan would use) by a prior, so a factor the results cannot separate
stays where it was. Held-out runs (`hold_out`) are predicted, not fitted: their error is the honest one, and a
calibration that makes one worse says so in the record's notes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np

from planner.calibration.benchmark_fit import fit_log_multipliers
from planner.calibration.benchmark_record import BenchmarkFit, build_record, stand_in
from planner.calibration.benchmark_replay import (
    OBSERVATION_SIGMA,
    Point,
    efficiency_with,
    factors_for,
    held_out_indices,
    log_bounds,
    prepare_points,
)
from planner.calibration.benchmark_run import BenchmarkRun
from planner.calibration_record import CalibrationRecord
from planner.inference.scenario import InferenceScenario
from planner.physics.efficiency import DEFAULT_EFFICIENCY, Efficiency
from planner.scenario_base import revised


def fit_points(
    deployment: InferenceScenario,
    points: Sequence[Point],
    held_out: Sequence[int],
    base: Efficiency = DEFAULT_EFFICIENCY,
) -> BenchmarkFit:
    """Fit the deployment's factors to the points not held out; predict every point before and after."""
    started = time.perf_counter()
    factors = factors_for(deployment)
    fitted = [p for i, p in enumerate(points) if i not in set(held_out)]
    template = stand_in(deployment, base)
    simulations = {"count": 0}

    def residuals(x: np.ndarray) -> np.ndarray:
        record = revised(template, efficiency=efficiency_with(factors, x, base))
        out = []
        for point in fitted:
            prediction = point.predict(record)
            simulations["count"] += 1
            out.extend(
                math.log(max(prediction.of(m), 1e-12) / value) / OBSERVATION_SIGMA
                for m, value in point.measured().items()
            )
        return np.asarray(out)

    lower, upper = log_bounds(factors, base)
    result = fit_log_multipliers(residuals, [f.sigma for f in factors], lower, upper)
    efficiency = efficiency_with(factors, result.x, base)
    calibrated = revised(template, efficiency=efficiency)
    before = [p.predict(None if base == DEFAULT_EFFICIENCY else revised(template, efficiency=base)) for p in points]
    after = [p.predict(calibrated) for p in points]
    return BenchmarkFit(
        factors=factors,
        log_multipliers=result.x,
        posterior_sigma=result.posterior_sigma,
        efficiency=efficiency,
        before=before,
        after=after,
        held_out=list(held_out),
        seconds=time.perf_counter() - started,
        simulations=simulations["count"] + 2 * len(points),
    )


def calibrate_from_benchmark(
    deployment: InferenceScenario,
    runs: Sequence[BenchmarkRun],
    *,
    hold_out: str | Sequence[int] = "middle",
    label: str | None = None,
    allow_other_model: bool = False,
    created_at: datetime | None = None,
) -> CalibrationRecord:
    """A calibration record fitted to `runs` of `deployment` (see the module docstring)."""
    points = prepare_points(deployment, runs, allow_other_model)
    held_out = held_out_indices(runs, hold_out)
    fit = fit_points(deployment, points, held_out)
    return build_record(deployment, points, fit, hold_out, label, created_at or datetime.now(UTC))


__all__ = ["calibrate_from_benchmark", "fit_points"]

"""A benchmark calibration as a `CalibrationRecord`: the same kind the torch profile writes (device, what was
fitted, predicted vs measured per point), with `source` "benchmark" and a `BenchmarkScope` naming the serving
stack (runtime and release, model and its family), the runs read and the factors fitted.

The device is the deployment's accelerator (the efficiencies are fractions of its catalog peaks, as a plan applies
them), so `plan()` applies the record to plans for that GPU only unless it is mapped explicitly; the scope's
runtime and model family are checked the same way (`planner.plan.check_calibration`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from planner.calibration.benchmark_replay import MAX_REPLAYED, Factor, Point, Prediction
from planner.calibration_record import (
    BenchmarkPoint,
    BenchmarkScope,
    CalibrationRecord,
    Ceilings,
    ComparisonRow,
    DeviceInfo,
    FittedFactor,
    ProfileSettings,
    make_record_id,
)
from planner.inference.scenario import InferenceScenario
from planner.physics.efficiency import DEFAULT_EFFICIENCY, ENGINE_COST_FIELDS, Efficiency

METRIC_WORDS = {"ttft": "TTFT", "tpot": "TPOT", "throughput": "output throughput"}
METRIC_UNITS = {"ttft": "s", "tpot": "s", "throughput": "tokens/s"}
WORSE_MARGIN = 0.005  # a held-out error that grows by more than half a percentage point is "worse"
SERVING_FIELDS = ("prefill_compute", "decode_compute", "memory_bandwidth", *ENGINE_COST_FIELDS)


@dataclass(frozen=True)
class BenchmarkFit:
    """What the fit produced (`from_benchmark.fit_points`), before it becomes a record."""

    factors: tuple[Factor, ...]
    log_multipliers: np.ndarray
    posterior_sigma: np.ndarray
    efficiency: Efficiency
    before: list[Prediction]
    after: list[Prediction]
    held_out: list[int]
    seconds: float
    simulations: int


def _link_bytes_per_second(deployment: InferenceScenario) -> float:
    accel = deployment.accelerator()
    link = accel.interconnect or accel.host_link
    return link.bandwidth_bytes_per_second if link is not None else accel.memory_bandwidth_bytes_per_second


def _peak(deployment: InferenceScenario) -> float:
    accel = deployment.accelerator()
    for dtype in (deployment.weight_dtype, "bf16", "fp16"):
        try:
            return accel.peak_flops(dtype)
        except (KeyError, ValueError):
            continue
    return max(accel.peak_flops_per_second.values(), default=1.0)


def stand_in(
    deployment: InferenceScenario,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    label: str | None = None,
    created_at: datetime | None = None,
) -> CalibrationRecord:
    """A record on the deployment's accelerator carrying `efficiency` only: what the fit simulates with."""
    created = created_at or datetime(2000, 1, 1).astimezone()
    accel = deployment.accelerator()
    gpu = deployment.gpu_id()
    name = label or f"{deployment.model_id()} on {deployment.num_gpus}x {gpu} ({deployment.runtime}), benchmark"
    return CalibrationRecord(
        id=make_record_id(f"benchmark-{gpu}-{deployment.model_id()}", created),
        label=name[:200],
        created_at=created,
        device=DeviceInfo(
            kind="cuda",
            name=accel.name,
            memory_bytes=accel.memory_bytes,
            free_memory_bytes=0,
            device_count=deployment.num_gpus,
            torch_version="",
            platform="a serving benchmark's result files (not measured by Headroom)",
        ),
        reference_gpu=gpu,
        reference_peak_flops_per_second=_peak(deployment),
        reference_bandwidth_bytes_per_second=accel.memory_bandwidth_bytes_per_second,
        reference_link_bytes_per_second=_link_bytes_per_second(deployment),
        settings=ProfileSettings(device="cuda", model=deployment.model_id()[:200], reference_gpu=gpu, label=name[:200]),
        dtype=deployment.weight_dtype,
        ceilings=Ceilings(),
        efficiency=efficiency,
        source="benchmark",
    )


def _rows(points: Sequence[Point], fit: BenchmarkFit, keys: list[str]) -> list[ComparisonRow]:
    rows = []
    for i, point in enumerate(points):
        role = "holdout" if i in fit.held_out else "fit"
        for metric, measured in point.measured().items():
            statistic = getattr(point.run, metric).central_statistic if metric != "throughput" else "mean"
            rows.append(
                ComparisonRow(
                    quantity=f"{statistic} {METRIC_WORDS[metric]}",
                    phase=keys[i],
                    unit=METRIC_UNITS[metric],
                    role=role,
                    measured=measured,
                    predicted=fit.before[i].of(metric),
                    predicted_calibrated=fit.after[i].of(metric),
                    note=f"{point.run.describe()} ({point.run.source})"[:300],
                )
            )
    return rows


def _factors(fit: BenchmarkFit) -> tuple[list[FittedFactor], dict[str, str]]:
    factors, notes = [], {}
    for factor, x, sigma in zip(fit.factors, fit.log_multipliers, fit.posterior_sigma, strict=True):
        separated = bool(sigma < 0.5 * factor.sigma)
        multiplier = math.exp(float(x))
        why = (
            f"fitted to the benchmark runs: x{multiplier:.3g} of the runtime profile's value"
            if separated
            else f"kept near the runtime profile's value (x{multiplier:.3g}): these runs do not separate it"
        )
        factors.append(
            FittedFactor(
                name=factor.name,
                fields=list(factor.fields),
                multiplier=multiplier,
                prior_values={f: getattr(DEFAULT_EFFICIENCY, f) for f in factor.fields},
                values={f: getattr(fit.efficiency, f) for f in factor.fields},
                prior_sigma=factor.sigma,
                posterior_sigma=float(sigma),
                separated=separated,
                note=f"{factor.what}; {why}"[:400],
            )
        )
        for name in factor.fields:
            notes[name] = f"{factor.name}: {why}"
    for name in SERVING_FIELDS:
        notes.setdefault(name, "default (not fitted: a benchmark run's aggregates do not reach it)")
    notes.setdefault("training_compute", "default (a serving benchmark does not measure training)")
    notes.setdefault("communication", "default (not separated from the GEMM and bandwidth factors)")
    return factors, notes


def _worse_notes(points: Sequence[Point], fit: BenchmarkFit, keys: list[str]) -> list[str]:
    notes = []
    for i in fit.held_out:
        point = points[i]
        for metric, measured in point.measured().items():
            before = (fit.before[i].of(metric) - measured) / measured
            after = (fit.after[i].of(metric) - measured) / measured
            if abs(after) > abs(before) + WORSE_MARGIN:
                notes.append(
                    f"The calibration makes held-out point {keys[i]} ({point.run.describe()}) worse on "
                    f"{METRIC_WORDS[metric]}: error {before:+.1%} before, {after:+.1%} after."
                )
    return notes


def _hold_out_words(points: Sequence[Point], fit: BenchmarkFit, keys: list[str]) -> str:
    if not fit.held_out:
        return "none (every run fitted)"
    return ", ".join(f"{keys[i]} ({points[i].run.describe()})" for i in fit.held_out)


def _notes(points: Sequence[Point], fit: BenchmarkFit, keys: list[str]) -> list[str]:
    fitted = [keys[i] for i in range(len(points)) if i not in fit.held_out]
    notes = [
        f"Fitted on {len(fitted)} of {len(points)} benchmark runs ({', '.join(fitted)}); held out: "
        f"{_hold_out_words(points, fit, keys)}. {fit.simulations} traffic simulations, {fit.seconds:.1f} s."
    ]
    if not fit.held_out:
        notes.append(
            "No run was held out, so the error on loads the fit did not see is unknown: give three or more runs of a "
            "sweep with hold-out 'middle' (the default) to measure it."
        )
    notes += _worse_notes(points, fit, keys)
    for key, point in zip(keys, points, strict=True):
        run = point.run
        if run.model is None:
            notes.append(f"{key}: {run.source} names no model ({run.client}); taken to be the deployment's.")
        if run.num_prompts > MAX_REPLAYED:
            notes.append(f"{key}: {run.num_prompts:,} requests; the simulation replays the first {MAX_REPLAYED:,}.")
        if run.failed:
            notes.append(f"{key}: {run.failed} of its requests failed; the fit uses what the successful ones measured.")
    return notes


def build_record(
    deployment: InferenceScenario,
    points: Sequence[Point],
    fit: BenchmarkFit,
    hold_out: str | Sequence[int],
    label: str | None,
    created_at: datetime,
) -> CalibrationRecord:
    """The calibration record of a benchmark fit."""
    keys = [f"p{i + 1}" for i in range(len(points))]
    factors, efficiency_notes = _factors(fit)
    scope = BenchmarkScope(
        runtime=str(deployment.runtime),
        model=deployment.model_id()[:200],
        model_family=deployment.architecture().model_type[:100],
        num_gpus=deployment.num_gpus,
        tensor_parallel=deployment.tensor_parallel,
        clients=sorted({p.run.client for p in points}),
        hold_out=(hold_out if isinstance(hold_out, str) else "runs " + ", ".join(keys[i] for i in fit.held_out))[:200],
        factors=factors,
        points=[
            BenchmarkPoint(
                key=key,
                source=p.run.source,
                client=p.run.client,
                role="holdout" if i in fit.held_out else "fit",
                load=p.run.describe()[:120],
                max_concurrency=p.run.max_concurrency,
                request_rate_per_second=p.run.request_rate_per_second,
                num_requests=p.traffic.num_requests,
                prompt_tokens=p.run.prompt_tokens_mean,
                output_tokens=p.run.output_tokens_mean,
            )
            for i, (key, p) in enumerate(zip(keys, points, strict=True))
        ],
        fit_seconds=fit.seconds,
        simulations=fit.simulations,
    )
    base = stand_in(deployment, fit.efficiency, label, created_at)
    return CalibrationRecord.model_validate(
        {
            **{name: getattr(base, name) for name in CalibrationRecord.model_fields},
            "efficiency_notes": efficiency_notes,
            "predicted_vs_measured": _rows(points, fit, keys),
            "notes": _notes(points, fit, keys),
            "elapsed_seconds": fit.seconds,
            "benchmark": scope,
        }
    )


__all__ = ["BenchmarkFit", "build_record", "stand_in"]

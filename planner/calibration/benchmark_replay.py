"""A benchmark run on the deployment it measured: the checks that it can be that deployment's, the scenario and
request stream the simulator replays (`replay`), the factors a benchmark calibration fits (`FACTORS`) and the
efficiency they make (`efficiency_with`), and which runs are held out (`held_out_indices`). The fit itself is
`planner.calibration.from_benchmark`; the record `planner.calibration.benchmark_record`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.calibration.benchmark_results import BenchmarkResultError
from planner.calibration.benchmark_run import BenchmarkRun
from planner.calibration_record import CalibrationRecord
from planner.errors import PlanningError
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import Traffic
from planner.physics.efficiency import Efficiency
from planner.scenario_base import revised

MAX_REPLAYED = 5000  # requests simulated per run (a longer run is replayed at its first 5,000: same rate, lengths)
OBSERVATION_SIGMA = 0.10  # log units: what one point's metric is trusted to (run-to-run spread, the model's own)
METRICS = ("ttft", "tpot", "throughput")


@dataclass(frozen=True)
class Factor:
    """A multiplier on `fields` of `Efficiency`, moved together; `sigma` is its prior's width in log units."""

    name: str
    fields: tuple[str, ...]
    sigma: float
    what: str
    moe_only: bool = False


# Priors: the kernels' efficiencies are known to within a factor of ~1.5 (sigma 0.4); the host costs are
# engine-, release- and CPU-specific (sigma 1.0: a factor of ~2.7).
FACTORS = (
    Factor("dense_gemm", ("prefill_compute", "decode_compute"), 0.4, "dense GEMM efficiency (prefill and decode)"),
    Factor("memory_bandwidth", ("memory_bandwidth",), 0.4, "HBM bandwidth efficiency (weights and KV reads)"),
    Factor(
        "fused_moe",
        ("moe_expert_bandwidth", "moe_expert_compute"),
        0.4,
        "fused-MoE expert kernels (their bandwidth and compute efficiencies)",
        moe_only=True,
    ),
    Factor("step_host", ("step_host_seconds",), 1.0, "the engine's host time per step"),
    Factor("request_overhead", ("request_overhead_seconds",), 1.0, "the API server's time per request"),
)
_UPPER = {"step_host_seconds": 0.1, "request_overhead_seconds": 1.0, "layer_overhead_seconds": 1e-2}
_LOG_FLOOR = -4.0  # a multiplier never goes below e^-4 = 0.018 of the profile's value


class BenchmarkMismatch(BenchmarkResultError):
    """A result that contradicts the deployment it is said to measure (model, lengths)."""


# ---------------------------------------------------------------------------------------------
# a run on the deployment


def _normalised(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def model_matches(deployment: InferenceScenario, model: str) -> bool:
    """Whether a client's model name (a Hugging Face id, a served name) names the deployment's model: its catalog
    id or its architecture's name, letters and digits only, is part of the name's last path segment (or the
    reverse): 'meta-llama/Llama-3.1-8B-Instruct' is 'llama-3.1-8b', not 'llama-3.1-70b'."""
    served = _normalised(model.rstrip("/").rsplit("/", 1)[-1])
    candidates = {_normalised(deployment.model_id()), _normalised(deployment.architecture().name)}
    return any(len(c) >= 3 and (c in served or served in c) for c in candidates if c)


def check_run(deployment: InferenceScenario, run: BenchmarkRun, allow_other_model: bool = False) -> None:
    """BenchmarkMismatch (one sentence naming the run) when the run cannot have measured this deployment."""
    if run.model and not allow_other_model and not model_matches(deployment, run.model):
        raise BenchmarkMismatch(
            f"{run.source}: it benchmarked model '{run.model}', but the deployment serves '{deployment.model_id()}' "
            f"({deployment.architecture().name}); give the deployment it measured (or allow another model "
            "explicitly: --any-model)"
        )
    context = deployment.architecture().max_context_tokens
    longest = (run.prompt_tokens_max or run.prompt_tokens_mean) + (run.output_tokens_max or run.output_tokens_mean)
    if longest > context:
        raise BenchmarkMismatch(
            f"{run.source}: its requests reach {longest:,.0f} tokens (prompt + output), more than the deployment's "
            f"model context of {context:,}; these lengths cannot be this deployment's"
        )


def _range_ratio(run: BenchmarkRun) -> float:
    """The ± share of the mean the run's lengths spread over (0: fixed lengths)."""
    if run.range_ratio is not None:
        return min(run.range_ratio, 0.95)
    spreads = []
    for mean, low, high in (
        (run.prompt_tokens_mean, run.prompt_tokens_min, run.prompt_tokens_max),
        (run.output_tokens_mean, run.output_tokens_min, run.output_tokens_max),
    ):
        if low is not None and high is not None and high > low:
            spreads.append(max(mean - low, high - mean) / mean)
    return min(max(spreads, default=0.0), 0.95)


def replay(deployment: InferenceScenario, run: BenchmarkRun) -> tuple[InferenceScenario, Traffic]:
    """The deployment serving the run's lengths, and the run's request stream as the simulator takes it."""
    base = deployment.traffic
    scenario = revised(
        deployment,
        prompt_tokens=max(1, round(run.prompt_tokens_mean)),
        output_tokens=max(1, round(run.output_tokens_mean)),
        traffic=None,
    )
    ratio = _range_ratio(run)
    traffic = Traffic(
        requests_per_second=run.request_rate_per_second,
        arrival=run.arrival,
        burstiness=run.burstiness,
        num_requests=min(run.num_prompts, MAX_REPLAYED),
        max_concurrency=run.max_concurrency,
        max_num_seqs=base.max_num_seqs if base is not None else None,
        chunked_prefill=base.chunked_prefill if base is not None else True,
        seed=0,
        lengths="uniform" if ratio > 0 else "fixed",
        range_ratio=ratio,
    )
    return scenario, traffic


# ---------------------------------------------------------------------------------------------
# factors -> efficiency -> predictions


def factors_for(deployment: InferenceScenario) -> tuple[Factor, ...]:
    """The factors fitted for this deployment: the fused-MoE one only for a mixture-of-experts model."""
    moe = deployment.architecture().is_moe
    return tuple(f for f in FACTORS if moe or not f.moe_only)


def efficiency_with(
    factors: Sequence[Factor], log_multipliers: Sequence[float] | np.ndarray, base: Efficiency
) -> Efficiency:
    """`base` with each factor's fields multiplied by e^x (clamped to the field's range)."""
    values = base.model_dump()
    for factor, x in zip(factors, log_multipliers, strict=True):
        for name in factor.fields:
            values[name] = min(values[name] * math.exp(float(x)), _UPPER.get(name, 1.0))
    values["source"] = "benchmark calibration"
    return Efficiency.model_validate(values)


def log_bounds(factors: Sequence[Factor], base: Efficiency) -> tuple[list[float], list[float]]:
    """Per factor, the log multipliers that keep every field of it in range (its upper limit, e^-4 below)."""
    upper = [
        min(math.log(_UPPER.get(name, 1.0) / max(getattr(base, name), 1e-12)) for name in factor.fields)
        for factor in factors
    ]
    return [_LOG_FLOOR] * len(factors), upper


@dataclass(frozen=True)
class Prediction:
    """A simulated run's TTFT and TPOT (the run's own statistic of each: mean or median) and output tokens/s."""

    ttft: float
    tpot: float
    throughput: float

    def of(self, metric: str) -> float:
        return float(getattr(self, metric))


@dataclass(frozen=True)
class Point:
    """A run, replayed: the scenario and stream the simulator runs, and what it measured."""

    run: BenchmarkRun
    scenario: InferenceScenario
    traffic: Traffic

    def measured(self) -> dict[str, float]:
        values = {"ttft": self.run.ttft.central_seconds, "tpot": self.run.tpot.central_seconds}
        values["throughput"] = self.run.throughput
        return {k: float(v) for k, v in values.items() if v is not None and v > 0}

    def predict(self, calibration: CalibrationRecord | None) -> Prediction:
        result = TrafficEngine.of(self.scenario, calibration, self.traffic).simulate()
        mean_ttft = self.run.ttft.mean_seconds is not None or self.run.ttft.median_seconds is None
        mean_tpot = self.run.tpot.mean_seconds is not None or self.run.tpot.median_seconds is None
        return Prediction(
            ttft=result.ttft_seconds.mean if mean_ttft else result.ttft_seconds.p50,
            tpot=result.tpot_seconds.mean if mean_tpot else result.tpot_seconds.p50,
            throughput=result.output_tokens_per_second,
        )


def prepare_points(
    deployment: InferenceScenario, runs: Sequence[BenchmarkRun], allow_other_model: bool = False
) -> list[Point]:
    """Each run checked against the deployment and replayed on it, in the order given."""
    if not runs:
        raise BenchmarkResultError("no benchmark runs to calibrate on")
    points = []
    for run in runs:
        check_run(deployment, run, allow_other_model)
        try:
            scenario, traffic = replay(deployment, run)
        except (PlanningError, ValueError) as exc:
            raise BenchmarkMismatch(f"{run.source}: its traffic cannot be replayed on the deployment: {exc}") from None
        points.append(Point(run, scenario, traffic))
    return points


# ---------------------------------------------------------------------------------------------
# which runs are held out


def held_out_indices(runs: Sequence[BenchmarkRun], hold_out: str | Sequence[int]) -> list[int]:
    """Indices (into `runs`) of the runs the fit does not use.

    "middle": with three or more runs, all but the lightest and the heaviest load (a sweep's end points are fitted,
    its middle predicted); "none": every run is fitted; a list: those indices. At least one run is always fitted."""
    n = len(runs)
    if isinstance(hold_out, str):
        if hold_out == "none":
            return []
        if hold_out != "middle":
            raise PlanningError(f"hold_out '{hold_out}' is not 'middle', 'none' or a list of run indices")
        if n < 3:
            return []
        order = sorted(range(n), key=lambda i: (runs[i].load, i))
        return sorted(order[1:-1])
    chosen = sorted(set(int(i) for i in hold_out))
    if any(i < 0 or i >= n for i in chosen):
        raise PlanningError(f"hold-out indices {chosen} are not all among the {n} runs (0-{n - 1})")
    if len(chosen) == n:
        raise PlanningError("every run is held out: at least one must be fitted")
    return chosen


__all__ = [
    "FACTORS",
    "MAX_REPLAYED",
    "METRICS",
    "BenchmarkMismatch",
    "Factor",
    "Point",
    "Prediction",
    "check_run",
    "efficiency_with",
    "factors_for",
    "held_out_indices",
    "log_bounds",
    "model_matches",
    "prepare_points",
    "replay",
]

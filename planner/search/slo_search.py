"""Search under latency-percentile targets of a request stream (`p99_ttft_seconds<=2`), best first.

The vectorized sweep ranks every configuration by the objective in one pass; the traffic simulation
(~0.1-1 s each) then runs only on the best candidates, in order, until `top` of them meet every
percentile target or the simulation budget is spent. Two static facts prune before any simulation, both
exact bounds: a request's TTFT is never below the idle TTFT (queueing only adds), and a deployment
whose saturated request rate is below the offered rate cannot keep up (its queue grows without bound).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from planner.calibration_record import CalibrationRecord
from planner.errors import PlanningError
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.inference.traffic_results import TrafficResult
from planner.inference.workload import Slo, Traffic
from planner.scenario_base import revised
from planner.search import grid_search, sweep
from planner.search.constraints import OPERATORS, parse_constraint, search
from planner.search.sweep import scenario_for_row

SLO_COLUMN = re.compile(r"^p(50|90|95|99)_(ttft|tpot|itl|e2e_latency|queue)_seconds$")
DEFAULT_MAX_SIMULATIONS = 40
Constraint = tuple[str, str, float]
# Every simulated row reports these besides its constrained percentiles (the SLO's own answer per request).
REPORTED_PERCENTILES = ("p99_ttft_seconds", "p99_tpot_seconds")
REPORTED_RESULTS = ("slo_attainment", "goodput_requests_per_second")
ASSUMPTIONS = (
    "Candidates are ranked by the objective from their static plans and simulated best first; the search stops "
    "once enough of them meet every target or its simulation budget is spent, so a layout ranked lower may meet "
    "the targets too.",
    "Two exact static bounds skip a candidate without simulating it: its idle TTFT is above a TTFT target "
    "(queueing only adds), or its saturated request rate is below the offered rate (its queue grows without bound).",
    "Each candidate serves the scenario's whole request stream (same arrivals, lengths and seed), routed round "
    "robin over its replicas, with its own concurrency as the batch cap.",
)


def is_slo_column(column: str) -> bool:
    return SLO_COLUMN.match(column) is not None


def split_constraints(constraints: Iterable[str | Constraint]) -> tuple[list[Constraint], list[Constraint]]:
    """(static constraints on sweep columns, percentile constraints on simulated traffic)."""
    static, slo = [], []
    for constraint in constraints:
        parsed = parse_constraint(constraint) if isinstance(constraint, str) else constraint
        (slo if is_slo_column(parsed[0]) else static).append(parsed)
    return static, slo


def percentile_value(result: TrafficResult, column: str) -> float:
    """`p99_ttft_seconds` -> result.ttft_seconds.p99."""
    match = SLO_COLUMN.match(column)
    if match is None:
        raise PlanningError(
            f"'{column}' is not a traffic percentile (p50|p90|p95|p99 _ ttft|tpot|itl|e2e_latency|queue)"
        )
    percentile, metric = match.groups()
    return getattr(result, f"{metric}_seconds").at(int(percentile))


def slo_search(
    base: InferenceScenario,
    frame: pd.DataFrame,
    static_constraints: list[Constraint],
    slo_constraints: list[Constraint],
    minimize: str,
    top: int,
    traffic: Traffic,
    calibration: CalibrationRecord | None = None,
    max_simulations: int = DEFAULT_MAX_SIMULATIONS,
) -> tuple[pd.DataFrame, int]:
    """The best `top` rows (by `minimize`) that meet the static constraints and, simulated under `traffic`
    (the whole deployment's stream), every percentile constraint. Returns the rows with their simulated
    percentiles and SLO attainment, and the number of simulations run."""
    if traffic.requests_per_second is None:
        raise PlanningError("an SLO search needs a request rate (traffic.requests_per_second), not 'all at once'")
    ranked = search(frame, static_constraints, minimize, top=len(frame))
    candidates = ranked[_within_bounds(ranked, slo_constraints, traffic.requests_per_second)]
    rows, simulations = [], 0
    for _, row in candidates.iterrows():
        if len(rows) >= top or simulations >= max_simulations:
            break
        scenario = revised(scenario_for_row(base, row), traffic=traffic)
        result = TrafficEngine.of(scenario, calibration).simulate()
        simulations += 1
        percentiles = dict.fromkeys([*(c for c, _, _ in slo_constraints), *REPORTED_PERCENTILES])
        values = {column: percentile_value(result, column) for column in percentiles}
        if all(OPERATORS[op](values[column], value) for column, op, value in slo_constraints):
            extra = {
                "slo_attainment": result.slo_attainment,
                "goodput_requests_per_second": result.goodput_requests_per_second,
            }
            rows.append({**row.to_dict(), **values, **extra})
    columns = [*ranked.columns, *(c for c, _, _ in slo_constraints)]
    columns += [c for c in (*REPORTED_PERCENTILES, *REPORTED_RESULTS) if c not in columns]
    return pd.DataFrame(rows, columns=columns), simulations


def slo_constraints(slo: Slo) -> list[Constraint]:
    """An SLO's targets as percentile constraints: p99 TTFT <= 2 s -> ('p99_ttft_seconds', '<=', 2.0)."""
    return [(f"p{slo.percentile_of(metric)}_{metric}", "<=", float(target)) for metric, target in slo.targets.items()]


@dataclass(frozen=True)
class SloSearchResult:
    """The layouts of a search space that meet an SLO under a request stream, best first."""

    rows: pd.DataFrame  # one row per layout meeting every target: the sweep's columns, percentiles, attainment
    traffic: Traffic  # the stream every candidate served, with the SLO searched for
    configurations: int  # evaluated by the static sweep
    candidates: int  # left after the static constraints and the two exact bounds
    simulations: int
    error: str | None = None  # why nothing was searched


def run_slo_search(
    scenario: InferenceScenario,
    spec: grid_search.InferenceSearchSpec,
    slo: Slo,
    calibration: CalibrationRecord | None = None,
    max_simulations: int = DEFAULT_MAX_SIMULATIONS,
) -> SloSearchResult:
    """The Trade-offs page's search space (`spec`: GPU types and counts, layouts, formats, concurrency, static
    constraints, objective, `top`) under the scenario's request stream with `slo` as its SLO."""
    if scenario.traffic is None:
        raise PlanningError("an SLO search needs a request stream: the scenario has no traffic")
    if not slo.targets:
        raise PlanningError("an SLO search needs at least one target (TTFT, TPOT or end-to-end latency)")
    traffic = Traffic.model_validate({**scenario.traffic.model_dump(), "slo": slo.model_dump()})
    axes = grid_search.inference_axes(scenario, spec)
    if not all(axes.values()):
        return SloSearchResult(
            pd.DataFrame(), traffic, 0, 0, 0, "pick at least one GPU type, weight format and KV format"
        )
    grid = sweep.inference_grid(scenario, **axes)
    if len(grid) > grid_search.MAX_SEARCH_ROWS:
        return SloSearchResult(
            pd.DataFrame(), traffic, len(grid), 0, 0, f"{len(grid):,} configurations is too many; narrow the search"
        )
    frame = sweep.evaluate_inference(scenario, grid, calibration)
    targets = slo_constraints(slo)
    rows, simulations = slo_search(
        scenario, frame, spec.constraints(), targets, spec.objective, spec.top, traffic, calibration, max_simulations
    )
    ranked = search(frame, spec.constraints(), spec.objective, top=len(frame))
    rate = traffic.requests_per_second or 0.0  # never 0 here: slo_search above refused a stream without a rate
    candidates = int(_within_bounds(ranked, targets, rate).sum())
    return SloSearchResult(rows, traffic, len(frame), candidates, simulations)


def _within_bounds(ranked: pd.DataFrame, slo_constraints: list[Constraint], rate: float):
    """The rows the two exact static bounds keep: saturated rate >= offered rate, idle TTFT <= a TTFT target."""
    keep = ranked["requests_per_second"].to_numpy(float) >= rate
    for column, op, value in slo_constraints:
        if column.endswith("_ttft_seconds") and op in ("<=", "<"):
            keep &= ranked["ttft_seconds"].to_numpy(float) <= value
    return keep

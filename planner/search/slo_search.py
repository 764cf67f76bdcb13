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

import pandas as pd

from planner.calibration.record import CalibrationRecord
from planner.errors import PlanningError
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.inference.traffic_results import TrafficResult
from planner.inference.workload import Traffic
from planner.search.constraints import OPERATORS, parse_constraint, search
from planner.search.sweep import scenario_for_row

SLO_COLUMN = re.compile(r"^p(50|90|95|99)_(ttft|tpot|itl|e2e_latency|queue)_seconds$")
DEFAULT_MAX_SIMULATIONS = 40
Constraint = tuple[str, str, float]


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
    rate = traffic.requests_per_second
    keep = ranked["requests_per_second"].to_numpy(float) >= rate
    for column, op, value in slo_constraints:
        if column.endswith("_ttft_seconds") and op in ("<=", "<"):
            keep &= ranked["ttft_seconds"].to_numpy(float) <= value
    candidates = ranked[keep]
    rows, simulations = [], 0
    for _, row in candidates.iterrows():
        if len(rows) >= top or simulations >= max_simulations:
            break
        scenario = scenario_for_row(base, row).model_copy(update={"traffic": traffic})
        result = TrafficEngine.of(scenario, calibration).simulate()
        simulations += 1
        values = {column: percentile_value(result, column) for column, _, _ in slo_constraints}
        if all(OPERATORS[op](values[column], value) for column, op, value in slo_constraints):
            rows.append({**row.to_dict(), **values})
    columns = [*ranked.columns, *(c for c, _, _ in slo_constraints)]
    return pd.DataFrame(rows, columns=columns), simulations

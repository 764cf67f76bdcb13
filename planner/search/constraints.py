"""Constrained search over sweep results and their Pareto frontier."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from planner.errors import PlanningError

OPERATORS: dict[str, Callable] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "==": operator.eq,
}
_CONSTRAINT = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*(<=|>=|==|<|>)\s*([-+0-9.eE]+)\s*$")


def parse_constraint(text: str) -> tuple[str, str, float]:
    """'ttft_seconds<=0.5' -> ('ttft_seconds', '<=', 0.5)."""
    match = _CONSTRAINT.match(text)
    if not match:
        raise PlanningError(f"constraint '{text}' must look like column<=number, e.g. ttft_seconds<=0.5")
    column, op, number = match.groups()
    try:
        return column, op, float(number)
    except ValueError:
        raise PlanningError(f"constraint '{text}': '{number}' is not a number") from None


def apply_constraints(frame: pd.DataFrame, constraints: Iterable[str | tuple[str, str, float]]) -> pd.DataFrame:
    """Rows that fit and satisfy every constraint."""
    mask = frame["fits"].to_numpy(bool).copy()
    for constraint in constraints:
        column, op, value = parse_constraint(constraint) if isinstance(constraint, str) else constraint
        if column not in frame:
            raise PlanningError(f"unknown constraint column '{column}'; choose from {', '.join(_numeric(frame))}")
        mask &= OPERATORS[op](frame[column].to_numpy(float), value)
    return frame[mask]


def _numeric(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c]) and c != "valid"]


def pareto_front(frame: pd.DataFrame, minimize: Iterable[str] = (), maximize: Iterable[str] = ()) -> pd.DataFrame:
    """Non-dominated rows: no other row is at least as good on every objective and better on one."""
    columns = list(minimize) + list(maximize)
    if frame.empty or not columns:
        return frame.iloc[0:0] if not columns else frame
    values = np.column_stack(
        [frame[c].to_numpy(float) for c in minimize] + [-frame[c].to_numpy(float) for c in maximize]
    )
    order = np.lexsort(values.T[::-1])
    front: list[int] = []
    best: np.ndarray | None = None
    kept = values[order]
    for position, index in enumerate(order):
        candidate = kept[position]
        if best is not None:
            dominated = np.all(best <= candidate, axis=1) & np.any(best < candidate, axis=1)
            if dominated.any() or np.any(np.all(best == candidate, axis=1)):
                continue
        front.append(index)
        best = candidate[None, :] if best is None else np.vstack([best, candidate])
    return frame.iloc[sorted(front)]


# Rows that agree on these columns (outputs to 9 significant digits) are one configuration for a reader:
# inference, the same GPU and per-replica layout with the same latency, $ per token and memory per GPU
# (the same layout at more replicas, or fp8 and int8 weights on a GPU that runs both at the same speed);
# training, the same GPUs and layout with the same step, run time, cost and memory (ZeRO stages at DP 1).
INFERENCE_EQUIVALENCE = (
    ("gpu", "tensor_parallel", "pipeline_parallel", "expert_parallel"),
    ("ttft_seconds", "tpot_seconds", "usd_per_million_output_tokens", "total_bytes"),
)
TRAINING_EQUIVALENCE = (
    ("gpu", "num_gpus", "tensor_parallel", "pipeline_parallel"),
    ("step_seconds", "time_to_train_seconds", "usd_total", "total_bytes"),
)
SIGNIFICANT_DIGITS = 9


def _significant(values: np.ndarray, digits: int = SIGNIFICANT_DIGITS) -> np.ndarray:
    """Values rounded to `digits` significant digits (zeros, NaN and infinities unchanged)."""
    v = np.asarray(values, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = 10.0 ** (digits - 1 - np.floor(np.log10(np.abs(v))))
    scale = np.where(np.isfinite(scale), scale, 1.0)
    return np.where(np.isfinite(v), np.round(v * scale) / scale, v)


def equivalence_for(frame: pd.DataFrame) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The (layout, outputs) columns that define duplicates in a sweep frame of either kind; None if neither."""
    for layout, outputs in (INFERENCE_EQUIVALENCE, TRAINING_EQUIVALENCE):
        if all(c in frame for c in layout + outputs):
            return layout, outputs
    return None


def collapse_equivalent(frame: pd.DataFrame, layout: Iterable[str], outputs: Iterable[str]) -> pd.DataFrame:
    """The first row (in the frame's order: sort first) of each group that agrees on `layout` and, to
    SIGNIFICANT_DIGITS, on `outputs`; column `equivalent_rows` says how many rows it stands for (itself
    included)."""
    layout, outputs = list(layout), list(outputs)
    if frame.empty:
        return frame.assign(equivalent_rows=pd.Series(dtype=int))
    keys = pd.DataFrame(
        {**{c: frame[c].to_numpy() for c in layout}, **{c: _significant(frame[c].to_numpy()) for c in outputs}}
    )
    group = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy()
    sizes = np.bincount(group)[group]
    first = ~keys.duplicated().to_numpy()
    return frame[first].assign(equivalent_rows=sizes[first])


def search(
    frame: pd.DataFrame,
    constraints: Iterable[str | tuple[str, str, float]] = (),
    minimize: str = "usd_per_million_output_tokens",
    top: int = 10,
    collapse: bool = True,
) -> pd.DataFrame:
    """The `top` feasible rows by `minimize` (ties broken by fewer GPUs).

    With `collapse`, equivalent rows (see `equivalence_for`) count once: the best of each group stands for
    it, so the list is not padded with the same layout at more replicas or with formats that change
    nothing.
    """
    feasible = apply_constraints(frame, constraints)
    if minimize not in feasible:
        raise PlanningError(f"unknown objective '{minimize}'")
    ranked = feasible.sort_values([minimize, "num_gpus"], kind="stable")
    equivalence = equivalence_for(ranked) if collapse else None
    if equivalence is not None:
        ranked = collapse_equivalent(ranked, *equivalence)
    return ranked.head(top)

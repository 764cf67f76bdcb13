"""Constrained search over sweep results and their Pareto frontier."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from planner.errors import PlanningError

_OPERATORS: dict[str, Callable] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "==": operator.eq,
}
_CONSTRAINT = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|==|<|>)\s*([-+0-9.eE]+)\s*$")


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
        mask &= _OPERATORS[op](frame[column].to_numpy(float), value)
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


def search(
    frame: pd.DataFrame, constraints: Iterable[str] = (), minimize: str = "usd_per_million_output_tokens", top: int = 10
) -> pd.DataFrame:
    """The `top` feasible rows by `minimize` (ties broken by fewer GPUs)."""
    feasible = apply_constraints(frame, constraints)
    if minimize not in feasible:
        raise PlanningError(f"unknown objective '{minimize}'")
    return feasible.sort_values([minimize, "num_gpus"], kind="stable").head(top)

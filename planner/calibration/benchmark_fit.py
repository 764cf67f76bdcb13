"""Regularised least squares in log space: a few Levenberg-Marquardt steps with a forward-difference Jacobian.

The unknowns are log multipliers x (0 = the runtime profile's value); the cost is

    sum_j r_j(x)^2 + sum_k (x_k / sigma_k)^2,

r_j = log(predicted_j / measured_j) / sigma_obs for each measured point and metric, sigma_k the prior's width of
factor k. The prior keeps a factor the results cannot separate near its profile value (a ridge, not a hard
constraint). Each residual evaluation is a traffic simulation per fitted point, so the step count is small and
results are cached by x (the simulation is deterministic: seeded arrivals). No numpy-heavy machinery: k <= 6.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

STEP = 0.08  # forward-difference step in log units (~8 %): the simulator's steps are discrete, so not smaller
MAX_ITERATIONS = 8
MAX_MOVE = 0.7  # largest change of one log multiplier per step (a factor of 2)
TOLERANCE = 0.005  # stop when no log multiplier moves more than this


@dataclass(frozen=True)
class FitOutput:
    x: np.ndarray  # fitted log multipliers
    posterior_sigma: np.ndarray  # sqrt(diag((J^T J + P)^-1)) at the optimum (log units)
    cost: float
    evaluations: int
    iterations: int


def fit_log_multipliers(
    residuals: Callable[[np.ndarray], np.ndarray],
    prior_sigma: Sequence[float],
    lower: Sequence[float],
    upper: Sequence[float],
) -> FitOutput:
    """Minimise |residuals(x)|^2 + |x / prior_sigma|^2 within [lower, upper] (log multipliers, 0 inside)."""
    k = len(prior_sigma)
    precision = np.diag(1.0 / np.asarray(prior_sigma, dtype=float) ** 2)
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    cache: dict[tuple, np.ndarray] = {}

    def r(x: np.ndarray) -> np.ndarray:
        key = tuple(np.round(x, 6))
        if key not in cache:
            cache[key] = np.asarray(residuals(x), dtype=float)
        return cache[key]

    def cost(x: np.ndarray) -> float:
        return float(r(x) @ r(x) + x @ precision @ x)

    x = np.zeros(k)
    damping, iterations = 1e-2, 0
    jacobian = _jacobian(r, x, lo, hi)
    for iterations in range(1, MAX_ITERATIONS + 1):  # noqa: B007 - reported after the loop
        r0 = r(x)
        a = jacobian.T @ jacobian + precision
        g = jacobian.T @ r0 + precision @ x
        step = np.linalg.solve(a + damping * np.diag(np.diag(a)), -g)
        step = np.clip(step, -MAX_MOVE, MAX_MOVE)
        trial = np.clip(x + step, lo, hi)
        if cost(trial) < cost(x):
            moved = np.abs(trial - x).max()
            x, damping = trial, max(damping / 3, 1e-4)
            if moved < TOLERANCE:
                break
            jacobian = _jacobian(r, x, lo, hi)
        else:
            damping *= 4
            if damping > 1e3:
                break
    a = jacobian.T @ jacobian + precision
    posterior = np.sqrt(np.clip(np.diag(np.linalg.inv(a)), 0.0, None))
    return FitOutput(x=x, posterior_sigma=posterior, cost=cost(x), evaluations=len(cache), iterations=iterations)


def _jacobian(r: Callable[[np.ndarray], np.ndarray], x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """d r / d x by forward (backward at an upper bound) differences."""
    r0 = r(x)
    columns = []
    for i in range(x.size):
        h = STEP if x[i] + STEP <= hi[i] else -STEP
        shifted = x.copy()
        shifted[i] += h
        columns.append((r(shifted) - r0) / h)
    return np.stack(columns, axis=1) if columns else np.zeros((r0.size, 0))


__all__ = ["FitOutput", "fit_log_multipliers"]

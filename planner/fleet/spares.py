"""Spare replica groups against GPU failures, per deployment, sized at its peak hour.

The blast radius of one failed GPU is its whole group (`Layout.unit_gpus`: TP x PP, or the expert-parallel group when
experts span replicas). With `n_plus_k`, k spare groups. From failure rates: a group of G GPUs fails G / MTBF times an
hour and stays down `repair_hours` R, so it is down a share q = (G R / MTBF) / (1 + G R / MTBF) of the time
(alternating renewal); groups fail independently, so with N + k groups the number down at once is Binomial(N + k, q).
k is the fewest spares with P(down <= slack + k) >= probability, where `slack` is the groups the peak's autoscaling
headroom already leaves spare. Spares are hot (weights loaded, idle), held all day, on the deployment's pool.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from planner.fleet import defaults
from planner.fleet.scenario import Spares

MAX_SPARE_GROUPS = 10_000


class SpareAnswer(BaseModel):
    """How many spare groups a deployment keeps, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str  # "n_plus_k", "failures" or "none"
    groups: int
    gpus: int
    gpus_per_group: int  # the blast radius of one failed GPU
    groups_at_peak: int
    headroom_groups: int  # failed groups the peak's headroom absorbs without spares
    probability: float | None = None
    gpu_mtbf_hours: float | None = None
    repair_hours: float | None = None
    group_down_share: float | None = None
    why: str


def binomial_cdf(k: int, n: int, q: float) -> float:
    """P(X <= k) for X ~ Binomial(n, q), summed in log space (n up to tens of thousands)."""
    if k >= n or q <= 0:
        return 1.0
    if q >= 1:
        return 0.0
    total = 0.0
    log_q, log_p = math.log(q), math.log1p(-q)
    for j in range(k + 1):
        log_term = math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * log_q + (n - j) * log_p
        total += math.exp(log_term)
    return min(total, 1.0)


def spare_groups(policy: Spares, groups_at_peak: int, gpus_per_group: int, headroom_groups: int) -> SpareAnswer:
    """The deployment's spares under `policy` (module docstring)."""
    base = {"gpus_per_group": gpus_per_group, "groups_at_peak": groups_at_peak, "headroom_groups": headroom_groups}
    if policy.n_plus_k is not None:
        k = policy.n_plus_k
        return SpareAnswer(
            rule="n_plus_k", groups=k, gpus=k * gpus_per_group, why=f"N+{k}: {k} spare group(s) as asked", **base
        )
    if groups_at_peak <= 0:
        return SpareAnswer(rule="none", groups=0, gpus=0, why="no replicas at the peak, nothing to keep spare", **base)
    mtbf = policy.gpu_mtbf_hours or defaults.GPU_MTBF_HOURS
    repair = policy.repair_hours or defaults.REPAIR_HOURS
    ratio = gpus_per_group * repair / mtbf
    q = ratio / (1 + ratio)
    k = 0
    while k < MAX_SPARE_GROUPS and binomial_cdf(headroom_groups + k, groups_at_peak + k, q) < policy.probability:
        k += 1
    held = binomial_cdf(headroom_groups + k, groups_at_peak + k, q)
    why = (
        f"{groups_at_peak} group(s) of {gpus_per_group} GPU(s) at the peak, each down {q:.2%} of the time "
        f"(MTBF {mtbf:,.0f} GPU-hours, repair {repair:g} h); the headroom absorbs {headroom_groups} failed group(s), "
        f"{k} spare(s) keep the peak within the SLO {held:.3%} of the time (target {policy.probability:.2%})"
    )
    return SpareAnswer(
        rule="failures",
        groups=k,
        gpus=k * gpus_per_group,
        probability=policy.probability,
        gpu_mtbf_hours=mtbf,
        repair_hours=repair,
        group_down_share=q,
        why=why,
        **base,
    )

"""The fleet planned other ways, beside the plan: one GPU kind instead of the mix, and deployments packed on shared
GPUs instead of dedicated ones.

- One GPU kind: the same allocation with every deployment restricted to the pools of that kind.
- Packed: deployments that the plan puts on the same pool with the same group size share every group: each engine
  gets 1/k of the memory its scenario gives it (k engines per GPU; vLLM's gpu_memory_utilization split), and its
  capacity is simulated again at that memory (smaller KV pool). The engines then share each group's time: an hour
  needs ceil(sum over engines of rate / (capacity at its memory share x (1 - headroom))) groups, at least every
  engine's minimum. What is not modelled: the engines' interference within a step (they are simulated alone, so the
  packed latencies are optimistic) and the memory one engine frees when another is idle. Packing only pays where
  the dedicated plan holds groups that are mostly idle (minimum replicas at night, small deployments).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.fleet.allocation import Allocation, Placement, allocate, minimum_replicas
from planner.fleet.answer import Comparison
from planner.fleet.capacity import CurveResult, CurveTask, candidate_key, candidate_scenario
from planner.fleet.pricing import Usage, bill_pool
from planner.fleet.scenario import FleetScenario
from planner.fleet.sizing import SLACK, Candidate

HOURS = 24


def one_kind(
    fleet: FleetScenario,
    rates: dict[str, tuple[float, ...]],
    candidates: dict[str, list[Candidate]],
    plan: Allocation,
    days_per_month: float,
) -> list[Comparison]:
    """The fleet on each GPU kind alone (only where the pools hold more than one kind)."""
    kinds: dict[str, set[str]] = {}
    for pool in fleet.pools:
        kinds.setdefault(pool.gpu_kind, set()).add(pool.name)
    if len(kinds) < 2:
        return []
    found = []
    for kind, names in kinds.items():
        alt = allocate(fleet, rates, candidates, names)
        found.append(
            _comparison(
                f"one_kind:{kind}",
                f"every deployment on {kind} only",
                alt,
                plan,
                days_per_month,
                sorted(alt.infeasible) + [f"{n} (its pool is too small at its peak)" for n in alt.capped],
                "the same sizing and pricing with each deployment restricted to the "
                f"{kind} pool(s) {', '.join(sorted(names))}; capacities not re-verified at the peak",
            )
        )
    return found


def _comparison(
    name: str, label: str, alt: Allocation, plan: Allocation, days: float, infeasible: list[str], note: str
) -> Comparison:
    return Comparison(
        name=name,
        label=label,
        usd_per_day=alt.usd_per_day,
        usd_per_month=alt.usd_per_day * days,
        gpu_hours_per_day=alt.gpu_hours_per_day,
        peak_gpus=alt.peak_gpus,
        feasible=not infeasible,
        infeasible=infeasible,
        delta_usd_per_month=(alt.usd_per_day - plan.usd_per_day) * days,
        note=note,
    )


@dataclass(frozen=True)
class PackingSet:
    """Deployments the plan puts on one pool with one group size: the candidates to pack."""

    pool: str
    members: tuple[Placement, ...]

    @property
    def share(self) -> float:
        return 1.0 / len(self.members)

    def tasks(self, calibration=None) -> list[CurveTask]:
        """Each member's capacity at its memory share (picklable tasks for the runner)."""
        found = []
        for p in self.members:
            c = p.candidate
            key = candidate_key(c.deployment.name, c.layout, c.pool.name, self.share)
            try:
                scenario = candidate_scenario(c.deployment, c.layout, c.pool, self.share)
            except ValueError:
                continue  # reported by `packed` as a missing result
            found.append(CurveTask(key, scenario, calibration))
        return found


def packing_sets(plan: Allocation) -> list[PackingSet]:
    groups: dict[tuple[str, int], list[Placement]] = {}
    for p in plan.placements.values():
        c = p.candidate
        if c.layout.replicas_per_unit == 1 and not p.capped_hours:
            groups.setdefault((c.pool.name, c.unit_gpus), []).append(p)
    return [PackingSet(pool, tuple(ms)) for (pool, _), ms in groups.items() if len(ms) > 1]


def packed(
    fleet: FleetScenario,
    rates: dict[str, tuple[float, ...]],
    plan: Allocation,
    group: PackingSet,
    results: dict[str, CurveResult],
    days_per_month: float,
) -> Comparison:
    """The fleet with `group` packed on shared GPUs (module docstring)."""
    names = [p.candidate.deployment.name for p in group.members]
    label = f"{' and '.join(names)} packed on shared GPUs of pool '{group.pool}'"
    capacities, refused = [], []
    for p in group.members:
        c = p.candidate
        r = results.get(candidate_key(c.deployment.name, c.layout, c.pool.name, group.share))
        if r is None or not r.feasible:
            why = r.why if r is not None else "its layout is invalid at that memory"
            refused.append(f"'{c.deployment.name}' at {group.share:.0%} of its memory: {why}")
        else:
            capacities.append(min(r.capacity_requests_per_second_per_replica, c.capacity))
    if refused:
        return _refused(
            f"packed:{group.pool}", label, plan, days_per_month, "memory does not allow it: " + "; ".join(refused)
        )
    headroom = fleet.autoscaling.headroom_share
    minimum = max(minimum_replicas(fleet, n) for n in names)
    unit = group.members[0].candidate.unit_gpus
    groups_by_hour = []
    for h in range(HOURS):
        load = sum(rates[n][h] / cap for n, cap in zip(names, capacities))
        groups_by_hour.append(max(math.ceil(load / (1 - headroom) - SLACK), minimum))
    shared = Usage(
        name=" + ".join(names),
        gpus_by_hour=tuple(g * unit for g in groups_by_hour),
        spare_gpus=max(p.spares.gpus for p in group.members),
        group_gpus=unit,
        scale_up_hours=max(p.scale_up_seconds for p in group.members) / 3600,
    )
    pool = group.members[0].candidate.pool
    return rebilled(
        plan,
        pool,
        list(group.members),
        shared,
        name=f"packed:{group.pool}",
        label=label,
        days_per_month=days_per_month,
        note=f"each engine at {group.share:.0%} of its memory, simulated alone; the groups' time shared in "
        "proportion to each engine's load; interference between the engines is not modelled (optimistic latencies)",
    )


def rebilled(plan: Allocation, pool, replaced: list[Placement], usage: Usage, **comparison) -> Comparison:
    """The fleet with `replaced` (placements on `pool`) served by `usage` instead: the pool billed again with its
    other placements, the day's $, GPU-hours and busiest hour recomputed (every other pool as planned).
    `comparison`: name, label, days_per_month and note of the answer."""
    days_per_month = comparison.pop("days_per_month")
    others = [p.usage() for p in plan.placements.values() if p.candidate.pool.name == pool.name and p not in replaced]
    bill = bill_pool(pool, [*others, usage])
    usd = plan.usd_per_day - plan.bills[pool.name].cost.usd_per_day + bill.cost.usd_per_day
    gpu_hours = plan.gpu_hours_per_day - plan.bills[pool.name].gpu_hours + bill.gpu_hours
    peak = max(
        sum(b.gpus_by_hour[h] for n, b in plan.bills.items() if n != pool.name) + bill.gpus_by_hour[h]
        for h in range(HOURS)
    )
    return Comparison(
        usd_per_day=usd,
        usd_per_month=usd * days_per_month,
        gpu_hours_per_day=gpu_hours,
        peak_gpus=peak,
        feasible=True,
        delta_usd_per_month=(usd - plan.usd_per_day) * days_per_month,
        **comparison,
    )


def _refused(name: str, label: str, plan: Allocation, days: float, note: str) -> Comparison:
    return Comparison(
        name=name,
        label=label,
        usd_per_day=plan.usd_per_day,
        usd_per_month=plan.usd_per_day * days,
        gpu_hours_per_day=plan.gpu_hours_per_day,
        peak_gpus=plan.peak_gpus,
        feasible=False,
        delta_usd_per_month=0.0,
        note=note,
    )

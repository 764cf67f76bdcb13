"""Which candidate each deployment runs on, within the pools' GPU limits, and what the pools then cost.

Each deployment's feasible candidates (layout x pool) are ranked by what the deployment would cost alone on them
(`pricing.bill_pool` of its hours and spares). Deployments are placed largest first (by the peak GPUs of their best
candidate), each on its cheapest candidate whose pool still has room for its GPUs and spares at every hour. When no
candidate fits, it takes its cheapest one with what that pool has left: those hours hold fewer replicas than the SLO
needs, and the answer says so. A deployment is never split across pools.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.fleet import defaults
from planner.fleet.pricing import PoolBill, Usage, bill_pool
from planner.fleet.scenario import FleetScenario
from planner.fleet.sizing import Candidate, HourSizing, size_day, units_at_peak
from planner.fleet.spares import SpareAnswer, spare_groups

HOURS = 24


@dataclass(frozen=True)
class Placement:
    """One deployment's day on its chosen candidate."""

    candidate: Candidate
    hours: list[HourSizing]
    spares: SpareAnswer
    scale_up_seconds: float
    scale_up_source: str
    capped_hours: tuple[int, ...] = ()

    def usage(self) -> Usage:
        return Usage(
            name=self.candidate.deployment.name,
            gpus_by_hour=tuple(h.gpus for h in self.hours),
            spare_gpus=self.spares.gpus,
            group_gpus=self.candidate.unit_gpus,
            scale_up_hours=self.scale_up_seconds / 3600,
        )


@dataclass(frozen=True)
class Allocation:
    placements: dict[str, Placement]  # by deployment name, in the fleet's order
    infeasible: dict[str, str]  # deployment name -> why, one sentence
    warnings: list[str] = field(default_factory=list)
    bills: dict[str, PoolBill] = field(default_factory=dict)  # by pool name

    @property
    def usd_per_day(self) -> float:
        return sum(b.cost.usd_per_day for b in self.bills.values())

    @property
    def gpu_hours_per_day(self) -> float:
        return sum(b.gpu_hours for b in self.bills.values())

    @property
    def capped(self) -> list[str]:
        """Deployments holding fewer replicas than their SLO needs in some hour (their pool was too small)."""
        return [n for n, p in self.placements.items() if p.capped_hours]

    @property
    def peak_gpus(self) -> int:
        return max((sum(b.gpus_by_hour[h] for b in self.bills.values()) for h in range(HOURS)), default=0)


def scale_up_delay(fleet: FleetScenario, candidate: Candidate) -> tuple[float, str]:
    """Seconds a new replica takes to serve: the fleet's figure, or its weights over the storage bandwidth plus the
    engine's start-up (sources in `defaults`)."""
    a = fleet.autoscaling
    if a.scale_up_delay_seconds is not None:
        return a.scale_up_delay_seconds, "autoscaling.scale_up_delay_seconds"
    bandwidth = a.storage_bytes_per_second or defaults.STORAGE_BYTES_PER_SECOND
    startup = a.engine_startup_seconds if a.engine_startup_seconds is not None else defaults.ENGINE_STARTUP_SECONDS
    weights = candidate.curve.weights_bytes_per_replica
    return (
        weights / bandwidth + startup,
        f"{weights / 1e9:,.1f} GB of weights at {bandwidth / 1e9:g} GB/s + {startup:g} s engine start-up (sources in "
        "the assumptions)",
    )


def minimum_replicas(fleet: FleetScenario, name: str) -> int:
    d = next(d for d in fleet.deployments if d.name == name)
    return d.min_replicas if d.min_replicas is not None else fleet.autoscaling.min_replicas


def place(
    fleet: FleetScenario, candidate: Candidate, rates: tuple[float, ...], gpu_limits: list[int | None] | None = None
) -> Placement:
    """The deployment's day on `candidate` (at most `gpu_limits` GPUs an hour, spares included)."""
    headroom = fleet.autoscaling.headroom_share
    minimum = minimum_replicas(fleet, candidate.deployment.name)
    planned, bare = units_at_peak(candidate, max(rates), headroom, minimum)
    spares = spare_groups(fleet.spares, planned, candidate.unit_gpus, max(0, planned - bare))
    limits = [None] * HOURS if gpu_limits is None else [None if g is None else g - spares.gpus for g in gpu_limits]
    hours = size_day(candidate, rates, headroom, minimum, limits)
    delay, source = scale_up_delay(fleet, candidate)
    full = size_day(candidate, rates, headroom, minimum, [None] * HOURS)
    capped = tuple(h.hour for h, f in zip(hours, full) if h.replicas < f.replicas)
    return Placement(candidate, hours, spares, delay, source, capped)


def _peak_gpus(p: Placement) -> int:
    return max(h.gpus for h in p.hours) + p.spares.gpus


def allocate(
    fleet: FleetScenario,
    rates: dict[str, tuple[float, ...]],
    candidates: dict[str, list[Candidate]],
    pools: set[str] | None = None,
) -> Allocation:
    """Every deployment placed (module docstring); `pools` restricts the choice (a comparison's)."""
    ranked: dict[str, list[Placement]] = {}
    infeasible: dict[str, str] = {}
    for d in fleet.deployments:
        mine = [c for c in candidates.get(d.name, []) if pools is None or c.pool.name in pools]
        usable = [c for c in mine if c.curve.feasible]
        if not usable:
            infeasible[d.name] = _why_infeasible(d.name, mine, pools)
            continue
        alone = [place(fleet, c, rates[d.name]) for c in usable]
        ranked[d.name] = sorted(alone, key=lambda p: bill_pool(p.candidate.pool, [p.usage()]).cost.usd_per_day)
    used: dict[str, list[int]] = {p.name: [0] * HOURS for p in fleet.pools}
    chosen: dict[str, Placement] = {}
    warnings: list[str] = []
    for name in sorted(ranked, key=lambda n: -_peak_gpus(ranked[n][0])):
        fit = next((p for p in ranked[name] if _fits(p, used[p.candidate.pool.name])), None)
        if fit is None:
            best = ranked[name][0]
            pool = best.candidate.pool
            assert pool.max_gpus is not None  # an unlimited pool always fits
            limits: list[int | None] = [pool.max_gpus - u for u in used[pool.name]]
            fit = place(fleet, best.candidate, rates[name], limits)
            warnings.append(_capped_sentence(fit, best, used[pool.name]))
        chosen[name] = fit
        for h, sized in enumerate(fit.hours):
            used[fit.candidate.pool.name][h] += sized.gpus + fit.spares.gpus
    placements = {d.name: chosen[d.name] for d in fleet.deployments if d.name in chosen}
    return Allocation(placements, infeasible, warnings, _bills(fleet, placements))


def _fits(p: Placement, used: list[int]) -> bool:
    limit = p.candidate.pool.max_gpus
    return limit is None or all(u + h.gpus + p.spares.gpus <= limit for u, h in zip(used, p.hours))


def _bills(fleet: FleetScenario, placements: dict[str, Placement]) -> dict[str, PoolBill]:
    by_pool: dict[str, list[Usage]] = {}
    for p in placements.values():
        by_pool.setdefault(p.candidate.pool.name, []).append(p.usage())
    return {pool.name: bill_pool(pool, by_pool[pool.name]) for pool in fleet.pools if pool.name in by_pool}


def _why_infeasible(name: str, candidates: list[Candidate], pools: set[str] | None) -> str:
    if not candidates:
        where = f" among pools {', '.join(sorted(pools))}" if pools is not None else ""
        return f"deployment '{name}' has no pool to run on{where}"
    reasons = "; ".join(f"on '{c.pool.name}' with {c.layout.label}: {c.curve.why}" for c in candidates)
    return f"deployment '{name}' cannot meet its SLO on any allowed pool ({reasons})"


def _capped_sentence(fit: Placement, wanted: Placement, used: list[int]) -> str:
    pool = fit.candidate.pool
    worst = max(fit.capped_hours, key=lambda h: wanted.hours[h].gpus - fit.hours[h].gpus, default=0)
    need = wanted.hours[worst].gpus + wanted.spares.gpus
    return (
        f"pool '{pool.name}' ({pool.max_gpus} GPUs at most) is too small for deployment "
        f"'{fit.candidate.deployment.name}' at its peak: at {worst:02d}:00 it needs {need} GPUs with spares and "
        f"{(pool.max_gpus or 0) - used[worst]} are left, so {len(fit.capped_hours)} hour(s) hold fewer replicas than its SLO "
        "needs (slo_met false there)"
    )

"""Plan a fleet: one scenario (or its JSON object) in, one frozen `FleetAnswer` out.

1. Each deployment x candidate layout x allowed pool is simulated once (`capacity.CurveTask`: SLO capacity per replica
   and the load curve) — independent tasks, run here, on a process pool or on Ray (`runner`), same answers.
2. Each hour's replicas are looked up from that capacity (`sizing`); deployments are placed on pools within their
   limits (`allocation`), with spares (`spares`), priced (`pricing`) and their energy summed (`power`).
3. The chosen candidates are spot-checked at their peak hour (`capacity.VerifyTask`: `TrafficEngine.verified`, the
   peak's stream on that many replicas simulated directly); one that needed more replicas has its capacity lowered to
   match, and the fleet is placed again (at most VERIFY_ROUNDS times).
4. Comparisons: one GPU kind against the mix, deployments packed on shared GPUs against dedicated ones.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from planner.calibration_record import CalibrationRecord
from planner.errors import PlanningError
from planner.fleet import defaults
from planner.fleet.allocation import Allocation, Placement, allocate
from planner.fleet.answer import Comparison, FleetAnswer, Rejected
from planner.fleet.capacity import CurveResult, CurveTask, VerifyResult, VerifyTask, candidate_key, candidate_scenario
from planner.fleet.comparisons import one_kind, packed, packing_sets
from planner.fleet.disaggregated import SplitResult, SplitTask, disaggregated, not_compared, split_task
from planner.fleet.intake import parse_fleet
from planner.fleet.power import pool_power
from planner.fleet.pricing import CostSplit
from planner.fleet.report import Context, deployment_answer, hour_answers, pool_answers
from planner.fleet.runner import Backend, TaskRunner
from planner.fleet.scenario import FleetScenario
from planner.fleet.sizing import Candidate
from planner.physics.cost import HOURS_PER_MONTH
from planner.physics.energy import DEFAULT_CARBON_KG_PER_KWH, DEFAULT_ELECTRICITY_USD_PER_KWH, POWER_MODEL

DAYS_PER_MONTH = HOURS_PER_MONTH / 24  # 365 / 12
VERIFY_ROUNDS = 2


def plan_fleet(
    fleet: FleetScenario | dict[str, Any],
    *,
    workers: int = 1,
    ray_address: str | None = None,
    calibration: CalibrationRecord | None = None,
) -> FleetAnswer:
    """The fleet's day (module docstring). A dict is read leniently (`intake.parse_fleet`): a bad deployment or pool
    is left out and named in `rejected`. `workers` > 1 runs the simulations on that many local processes,
    `ray_address` as Ray tasks ("auto", "ray://...", "local"); the answer is the same. Local processes start from a
    fork server, so a script calling this with `workers` > 1 needs the usual `if __name__ == "__main__":` guard."""
    rejected: list[Rejected] = []
    if not isinstance(fleet, FleetScenario):
        fleet, rejected = parse_fleet(fleet)
    rates = {d.name: d.hourly_rates(fleet.rate_scale) for d in fleet.deployments}
    with TaskRunner(Backend(workers=max(1, workers), ray_address=ray_address)) as runner:
        candidates = simulate_candidates(fleet, runner, calibration)
        allocation = allocate(fleet, rates, candidates)
        for _ in range(VERIFY_ROUNDS):
            todo = [p for p in allocation.placements.values() if p.candidate.verified is None]
            tasks = [t for t in (verify_task(p, rates, calibration) for p in todo) if t is not None]
            if not tasks:
                break
            results = [r for r in runner.run(tasks) if isinstance(r, VerifyResult)]
            candidates = apply_verification(candidates, results, fleet.autoscaling.headroom_share)
            allocation = allocate(fleet, rates, candidates)
        comparisons = one_kind(fleet, rates, candidates, allocation, DAYS_PER_MONTH)
        comparisons += packed_comparisons(fleet, rates, allocation, runner, calibration)
        if fleet.compare_disaggregation:
            comparisons += disaggregated_comparisons(fleet, rates, allocation, runner, calibration)
    return answer(fleet, allocation, candidates, rates, comparisons, rejected)


def simulate_candidates(
    fleet: FleetScenario, runner: TaskRunner, calibration: CalibrationRecord | None = None
) -> dict[str, list[Candidate]]:
    """Every deployment's candidates, each simulated once (on `runner`)."""
    tasks: list[CurveTask] = []
    planned: list[tuple[Any, Any, Any, str]] = []
    refused: dict[str, CurveResult] = {}
    for d in fleet.deployments:
        for pool in fleet.pools_for(d):
            for layout in d.candidate_layouts:
                key = candidate_key(d.name, layout, pool.name)
                planned.append((d, layout, pool, key))
                try:
                    tasks.append(CurveTask(key, candidate_scenario(d, layout, pool), calibration))
                except PlanningError as exc:
                    refused[key] = CurveResult(key=key, feasible=False, why=str(exc))
    results = {r.key: r for r in runner.run(tasks) if isinstance(r, CurveResult)}
    results.update(refused)
    candidates: dict[str, list[Candidate]] = {d.name: [] for d in fleet.deployments}
    for d, layout, pool, key in planned:
        curve = results[key]
        candidates[d.name].append(Candidate(d, layout, pool, curve, curve.capacity_requests_per_second_per_replica))
    return candidates


def verify_task(
    p: Placement, rates: dict[str, tuple[float, ...]], calibration: CalibrationRecord | None
) -> VerifyTask | None:
    """The spot check of a placement at its peak hour (None: nothing to check there)."""
    c = p.candidate
    peak = max(range(24), key=lambda h: rates[c.deployment.name][h])
    hour = p.hours[peak]
    if hour.requests_per_second <= 0 or hour.replicas <= 0 or peak in p.capped_hours:
        return None
    scenario = candidate_scenario(c.deployment, c.layout, c.pool)
    return VerifyTask(c.key, scenario, c.capacity, hour.requests_per_second, hour.replicas, calibration)


def apply_verification(
    candidates: dict[str, list[Candidate]], results: list[VerifyResult], headroom: float
) -> dict[str, list[Candidate]]:
    """Candidates with their peak checks: verified as planned, or with the capacity lowered so that every hour is sized
    as the peak's direct simulation needed, or marked not verified."""
    by_key = {r.key: r for r in results}
    updated: dict[str, list[Candidate]] = {}
    for name, mine in candidates.items():
        updated[name] = [c if c.key not in by_key else _verified(c, by_key[c.key], headroom) for c in mine]
    return updated


def _verified(c: Candidate, r: VerifyResult, headroom: float) -> Candidate:
    rate, planned = r.requests_per_second, r.planned_replicas
    if r.replicas is None:
        why = f": {r.why}" if r.why else ""
        return replace(
            c,
            verified=False,
            verification=f"the peak ({rate:.3g} requests/s) missed the SLO when simulated directly on {planned} replicas "
            f"and up to 8 steps of 10% more{why}; its hours are sized from the capacity search alone",
        )
    if r.replicas <= planned:
        return replace(
            c,
            verified=True,
            verification=f"the peak ({rate:.3g} requests/s) on {planned} replicas met every SLO target when simulated "
            "directly",
        )
    lowered = rate / (r.replicas * (1 - headroom))
    return replace(
        c,
        capacity=min(c.capacity, lowered),
        verified=True,
        verification=f"the peak ({rate:.3g} requests/s) needed {r.replicas} replicas, not {planned}, when simulated "
        f"directly; capacity lowered from {c.capacity:.3g} to {lowered:.3g} requests/s per replica for every hour",
    )


def packed_comparisons(
    fleet: FleetScenario,
    rates: dict[str, tuple[float, ...]],
    allocation: Allocation,
    runner: TaskRunner,
    calibration: CalibrationRecord | None,
) -> list[Comparison]:
    sets = packing_sets(allocation)
    tasks = [t for s in sets for t in s.tasks(calibration)]
    results = {r.key: r for r in runner.run(tasks) if isinstance(r, CurveResult)}
    return [packed(fleet, rates, allocation, s, results, DAYS_PER_MONTH) for s in sets]


def disaggregated_comparisons(
    fleet: FleetScenario,
    rates: dict[str, tuple[float, ...]],
    allocation: Allocation,
    runner: TaskRunner,
    calibration: CalibrationRecord | None,
) -> list[Comparison]:
    placements = list(allocation.placements.values())
    headroom = fleet.autoscaling.headroom_share
    tasks = [split_task(p, rates[p.candidate.deployment.name], headroom, calibration) for p in placements]
    done = iter(runner.run([t for t in tasks if isinstance(t, SplitTask)]))
    found = []
    for p, task in zip(placements, tasks):
        name = p.candidate.deployment.name
        if isinstance(task, str):
            found.append(not_compared(name, allocation, DAYS_PER_MONTH, f"not compared: {task}"))
            continue
        result = next(done)
        assert isinstance(result, SplitResult)
        found.append(disaggregated(fleet, allocation, p, result, DAYS_PER_MONTH))
    return found


def answer(
    fleet: FleetScenario,
    allocation: Allocation,
    candidates: dict[str, list[Candidate]],
    rates: dict[str, tuple[float, ...]],
    comparisons: list[Comparison],
    rejected: list[Rejected],
) -> FleetAnswer:
    price = fleet.electricity_usd_per_kwh
    price = DEFAULT_ELECTRICITY_USD_PER_KWH if price is None else price
    carbon = DEFAULT_CARBON_KG_PER_KWH if fleet.carbon_kg_per_kwh is None else fleet.carbon_kg_per_kwh
    power = {p.name: pool_power(p) for p in fleet.pools}
    ctx = Context(fleet, allocation, candidates, rates, power, carbon)
    deployments = [deployment_answer(ctx, d) for d in fleet.deployments]
    hours = hour_answers(ctx)
    cost = CostSplit()
    for bill in allocation.bills.values():
        cost = cost.plus(bill.cost)
    energy = sum(d.energy_kwh_per_day for d in deployments)
    offered = sum(sum(r) for r in rates.values())
    met = sum(sum(r * h.slo_attainment for r, h in zip(rates[n], p.hours)) for n, p in allocation.placements.items())
    # the busiest hour: the most GPUs, ties broken by the most requests sent (replicas round up, so several hours
    # can hold the peak's GPUs; the one the load peaks in is the one a reader expects)
    sent = [sum(r[h] for r in rates.values()) for h in range(24)]
    peak = max(range(24), key=lambda h: (hours[h].gpus, sent[h]))
    return FleetAnswer(
        scenario=fleet,
        hours=hours,
        deployments=deployments,
        pools=pool_answers(ctx),
        cost=cost,
        usd_per_day=cost.usd_per_day,
        usd_per_month=cost.usd_per_day * DAYS_PER_MONTH,
        days_per_month=DAYS_PER_MONTH,
        gpu_hours_per_day=allocation.gpu_hours_per_day,
        peak_gpus=hours[peak].gpus,
        peak_hour=peak,
        trough_gpus=min(h.gpus for h in hours),
        spare_gpus=sum(p.spares.gpus for p in allocation.placements.values()),
        energy_kwh_per_day=energy,
        co2e_kg_per_day=energy * carbon,
        electricity_usd_per_day=energy * price,
        electricity_usd_per_kwh=price,
        carbon_kg_per_kwh=carbon,
        slo_attainment=met / offered if offered > 0 else None,
        hours_every_slo_met=sum(h.slo_met for h in hours),
        comparisons=comparisons,
        rejected=rejected,
        warnings=_warnings(allocation, deployments),
        assumptions=assumptions(fleet),
    )


def _warnings(allocation: Allocation, deployments) -> list[str]:
    found = list(allocation.infeasible.values()) + list(allocation.warnings)
    for d in deployments:
        if d.feasible and d.verified_at_peak is False:
            found.append(f"deployment '{d.name}': {d.verification}")
        found += [f"deployment '{d.name}': {w}" for w in d.warnings]
    return found


def assumptions(fleet: FleetScenario) -> list[str]:
    a, s = fleet.autoscaling, fleet.spares
    lines = [
        "Each hour is planned at its mean rate; swings within an hour are left to the autoscaling headroom "
        f"({a.headroom_share:.0%} of each replica's SLO capacity kept spare).",
        "Per-replica SLO capacity: the traffic simulation's (TrafficEngine.capacity, vLLM V1-like continuous batching, "
        "Poisson-like arrivals of each deployment's lengths, round robin over identical replicas), simulated once "
        "per deployment, layout and pool and looked up for every hour; the chosen ones are simulated again at their "
        "peak hour on the planned replicas.",
        "SLO attainment per hour: the load curve's share of requests meeting every target at that rate per replica.",
        f"Power: {POWER_MODEL}; busy share here = rate per replica / the static plan's saturated rate (the traffic "
        "result gives no busy time) x the static plan's busy share at full batch; spares and starting replicas at "
        "idle power.",
        "Pricing: reserved GPUs = each pool's daily trough (spares included) for 24 h; above it, spot_share on spot "
        "and the rest on demand; a reclaimed spot GPU takes its group down and the group is re-served on demand "
        f"for {defaults.SPOT_RESERVE_HOURS:g} h plus its scale-up delay; a month is {DAYS_PER_MONTH:.2f} days.",
        "Electricity is not added to the GPU bill (cloud GPU-hour prices include power); it is electricity_usd_per_day.",
        "A deployment runs on one pool and one layout all day; deployments are placed largest first on their cheapest "
        "candidate with room.",
        "Not modelled: LoRA adapters on a shared base, requests lost when a spot group is reclaimed; disaggregated "
        "prefill/decode pools only as a comparison at each deployment's peak (compare_disaggregation).",
    ]
    if a.scale_up_delay_seconds is None:
        storage = "its own storage_bytes_per_second" if a.storage_bytes_per_second else defaults.STORAGE_SOURCE
        startup = (
            f"{a.engine_startup_seconds:g} s (given)"
            if a.engine_startup_seconds is not None
            else defaults.ENGINE_STARTUP_SOURCE
        )
        lines.append(f"Scale-up delay: weights over {storage}, plus engine start-up {startup}.")
    if s.n_plus_k is None:
        mtbf = f"{s.gpu_mtbf_hours:,.0f} GPU-hours (given)" if s.gpu_mtbf_hours else defaults.GPU_MTBF_SOURCE
        repair = f"{s.repair_hours:g} h (given)" if s.repair_hours else defaults.REPAIR_SOURCE
        lines.append(f"Spares from failures: GPU MTBF {mtbf}; repair {repair}.")
    if fleet.electricity_usd_per_kwh is None or fleet.carbon_kg_per_kwh is None:
        lines.append(
            "Electricity price and carbon intensity left empty: planner.physics.energy's defaults (US commercial "
            "average price, EIA 2024; US grid average, EPA eGRID2022)."
        )
    return lines

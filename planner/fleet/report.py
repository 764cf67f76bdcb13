"""An allocation's numbers as the answer's records: per deployment, per pool and per hour."""

from __future__ import annotations

from dataclasses import dataclass

from planner.fleet.allocation import Allocation, Placement, place
from planner.fleet.answer import CandidateAnswer, DeploymentAnswer, FleetHour, HourDeployment, PoolAnswer
from planner.fleet.power import DayEnergy, PoolPower, day_energy
from planner.fleet.pricing import bill_pool
from planner.fleet.scenario import Deployment, FleetScenario
from planner.fleet.sizing import Candidate

HOURS = 24


@dataclass(frozen=True)
class Context:
    """What every record is read from."""

    fleet: FleetScenario
    allocation: Allocation
    candidates: dict[str, list[Candidate]]
    rates: dict[str, tuple[float, ...]]
    power: dict[str, PoolPower]  # by pool name
    carbon_kg_per_kwh: float

    def energy(self, name: str) -> DayEnergy:
        p = self.allocation.placements[name]
        bill = self.allocation.bills[p.candidate.pool.name]
        scale_up = bill.scale_up_gpu_hours_by_deployment.get(name, 0.0)
        return day_energy(p.hours, p.spares.gpus, scale_up, self.power[p.candidate.pool.name])


def _candidates(ctx: Context, d: Deployment, chosen: Placement | None) -> list[CandidateAnswer]:
    answers = []
    for c in ctx.candidates.get(d.name, []):
        alone = None
        if c.curve.feasible:
            mine = chosen is not None and chosen.candidate.key == c.key and not chosen.capped_hours
            placement = chosen if mine and chosen is not None else place(ctx.fleet, c, ctx.rates[d.name])
            alone = bill_pool(c.pool, [placement.usage()]).cost.usd_per_day
        answers.append(
            CandidateAnswer(
                pool=c.pool.name,
                gpu=c.pool.gpu_kind,
                layout=c.layout.label,
                feasible=c.curve.feasible,
                why=c.curve.why,
                capacity_requests_per_second_per_replica=c.capacity,
                usd_per_day_alone=alone,
                chosen=chosen is not None and chosen.candidate.key == c.key,
            )
        )
    return answers


def deployment_answer(ctx: Context, d: Deployment) -> DeploymentAnswer:
    p = ctx.allocation.placements.get(d.name)
    name, model, load = d.name, d.scenario.model_id(), d.load_source
    if p is None:
        why = ctx.allocation.infeasible.get(d.name, "not planned")
        return DeploymentAnswer(
            name=name, model=model, load=load, feasible=False, why=why, candidates=_candidates(ctx, d, None)
        )
    c = p.candidate
    rates = ctx.rates[d.name]
    peak = max(range(HOURS), key=lambda h: rates[h])
    energy = ctx.energy(d.name)
    bill = ctx.allocation.bills[c.pool.name]
    usd = bill.usd_by_deployment[d.name]
    requests = sum(rates) * 3600
    tokens = requests * c.curve.output_tokens_per_request
    gpu_hours = sum(h.gpus for h in p.hours) + HOURS * p.spares.gpus + bill.scale_up_gpu_hours_by_deployment[d.name]
    weighted = sum(r * h.slo_attainment for r, h in zip(rates, p.hours))
    per_million = 1e6 / tokens if tokens > 0 else None
    return DeploymentAnswer(
        name=name,
        model=model,
        load=load,
        feasible=True,
        pool=c.pool.name,
        gpu=c.pool.gpu_kind,
        layout=c.layout.label,
        gpus_per_replica=c.gpus_per_replica,
        gpus_per_group=c.unit_gpus,
        max_num_seqs_per_replica=c.curve.max_num_seqs_per_replica,
        adapters=c.curve.adapters,
        capacity_requests_per_second_per_replica=c.capacity,
        saturated_requests_per_second_per_replica=c.curve.saturated_requests_per_second_per_replica,
        verified_at_peak=c.verified,
        verification=c.verification,
        peak_hour=peak,
        peak_requests_per_second=rates[peak],
        peak_replicas=max(h.replicas for h in p.hours),
        trough_replicas=min(h.replicas for h in p.hours),
        scale_up_delay_seconds=p.scale_up_seconds,
        scale_up_delay_source=p.scale_up_source,
        spares=p.spares,
        gpu_hours_per_day=gpu_hours,
        requests_per_day=requests,
        output_tokens_per_day=tokens,
        usd_per_day=usd,
        usd_per_million_output_tokens=usd * per_million if per_million else None,
        energy_kwh_per_day=energy.kwh,
        kwh_per_million_output_tokens=energy.kwh * per_million if per_million else None,
        co2e_kg_per_million_output_tokens=energy.kwh * ctx.carbon_kg_per_kwh * per_million if per_million else None,
        slo_attainment=weighted / sum(rates) if sum(rates) > 0 else None,
        hours_slo_met=sum(h.slo_met for h in p.hours),
        candidates=_candidates(ctx, d, p),
        warnings=list(c.curve.warnings),
    )


def pool_answers(ctx: Context) -> list[PoolAnswer]:
    answers = []
    for name, bill in ctx.allocation.bills.items():
        pool, power = bill.pool, ctx.power[name]
        mine = [n for n, p in ctx.allocation.placements.items() if p.candidate.pool.name == name]
        answers.append(
            PoolAnswer(
                name=name,
                gpu=pool.gpu_kind,
                max_gpus=pool.max_gpus,
                deployments=mine,
                peak_gpus=max(bill.gpus_by_hour),
                peak_hour=max(range(HOURS), key=lambda h: bill.gpus_by_hour[h]),
                trough_gpus=min(bill.gpus_by_hour),
                reserved_gpus=bill.reserved_gpus,
                spare_gpus=sum(ctx.allocation.placements[n].spares.gpus for n in mine),
                gpu_hours_per_day=bill.gpu_hours,
                spot_reserve_gpu_hours_per_day=bill.spot_reserve_gpu_hours,
                scale_up_gpu_hours_per_day=bill.scale_up_gpu_hours,
                cost=bill.cost,
                board_watts=power.board_watts,
                idle_watts=power.idle_watts,
                pue=power.pue,
                power_source=power.source,
                energy_kwh_per_day=sum(ctx.energy(n).kwh for n in mine),
            )
        )
    return answers


def hour_answers(ctx: Context) -> list[FleetHour]:
    energies = {n: ctx.energy(n) for n in ctx.allocation.placements}
    hours = []
    for h in range(HOURS):
        rows = []
        for name, p in ctx.allocation.placements.items():
            s = p.hours[h]
            rows.append(
                HourDeployment(
                    deployment=name,
                    pool=p.candidate.pool.name,
                    requests_per_second=s.requests_per_second,
                    replicas=s.replicas,
                    gpus=s.gpus,
                    requests_per_second_per_replica=s.requests_per_second_per_replica,
                    slo_met=s.slo_met,
                    slo_attainment=s.slo_attainment,
                    busy_share=s.busy_share,
                    energy_kwh=energies[name].serving_kwh_by_hour[h],
                )
            )
        bills = ctx.allocation.bills
        spares = sum(p.spares.gpus for p in ctx.allocation.placements.values())
        serving = sum(r.gpus for r in rows)
        pricing = {
            "reserved": float(sum(b.reserved_gpus for b in bills.values())),
            "on_demand": sum(b.on_demand_gpus_by_hour[h] for b in bills.values()),
            "spot": sum(b.spot_gpus_by_hour[h] for b in bills.values()),
        }
        idle = sum((e.spare_kwh + e.scale_up_kwh) / HOURS for e in energies.values())
        hours.append(
            FleetHour(
                hour=h,
                deployments=rows,
                serving_gpus=serving,
                spare_gpus=spares,
                gpus=serving + spares,
                gpus_by_pool={name: b.gpus_by_hour[h] for name, b in bills.items()},
                gpus_by_pricing=pricing,
                slo_met=all(r.slo_met for r in rows) and not ctx.allocation.infeasible,
                energy_kwh=sum(r.energy_kwh for r in rows) + idle,
            )
        )
    return hours

"""The fleet's answer: a frozen pydantic record a page renders, the CLI prints and a test reads.

Units live in the names (requests per second, GPUs, GPU-hours, usd, kWh, kg); hours are 0-23, local to the load's
clock. `manager_summary` is the one sentence a capacity review reads first.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner import units
from planner.fleet.pricing import CostSplit
from planner.fleet.scenario import FleetScenario
from planner.fleet.spares import SpareAnswer


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class HourDeployment(Frozen):
    """One deployment in one hour."""

    deployment: str
    pool: str
    requests_per_second: float
    replicas: int
    gpus: int  # serving (spares are the deployment's `spares`)
    requests_per_second_per_replica: float
    slo_met: bool
    slo_attainment: float  # share of requests meeting every target, from the load curve
    busy_share: float  # rate per replica over the saturated rate (the power model's utilisation)
    energy_kwh: float


class FleetHour(Frozen):
    """One hour of the day, every deployment and pool."""

    hour: int
    deployments: list[HourDeployment]
    serving_gpus: int
    spare_gpus: int
    gpus: int  # serving + spares
    gpus_by_pool: dict[str, int]  # serving + spares
    gpus_by_pricing: dict[str, float]  # reserved, on_demand, spot
    slo_met: bool  # every deployment's
    energy_kwh: float


class CandidateAnswer(Frozen):
    """One way a deployment could run, simulated."""

    pool: str
    gpu: str
    layout: str
    feasible: bool
    why: str | None = None
    capacity_requests_per_second_per_replica: float
    usd_per_day_alone: float | None = None  # its cost on this candidate by itself
    chosen: bool = False


class DeploymentAnswer(Frozen):
    """One deployment's day."""

    name: str
    model: str
    feasible: bool
    why: str | None = None  # when infeasible: why, one sentence
    load: str  # how its load was given
    pool: str | None = None
    gpu: str | None = None
    layout: str | None = None
    gpus_per_replica: int = 0
    gpus_per_group: int = 0  # one failure's blast radius and one scale step
    max_num_seqs_per_replica: int = 0
    adapters: str | None = None  # the LoRA adapters each replica serves (None without)
    capacity_requests_per_second_per_replica: float = 0.0
    saturated_requests_per_second_per_replica: float = 0.0
    verified_at_peak: bool | None = None
    verification: str = ""
    peak_hour: int = 0
    peak_requests_per_second: float = 0.0
    peak_replicas: int = 0
    trough_replicas: int = 0
    scale_up_delay_seconds: float = 0.0
    scale_up_delay_source: str = ""
    spares: SpareAnswer | None = None
    gpu_hours_per_day: float = 0.0
    requests_per_day: float = 0.0
    output_tokens_per_day: float = 0.0
    usd_per_day: float = 0.0
    usd_per_million_output_tokens: float | None = None
    energy_kwh_per_day: float = 0.0
    kwh_per_million_output_tokens: float | None = None
    co2e_kg_per_million_output_tokens: float | None = None
    slo_attainment: float | None = None  # request-weighted over the day
    hours_slo_met: int = 0
    candidates: list[CandidateAnswer] = []
    warnings: list[str] = []


class PoolAnswer(Frozen):
    """One pool's day."""

    name: str
    gpu: str
    max_gpus: int | None
    deployments: list[str]
    peak_gpus: int
    peak_hour: int
    trough_gpus: int
    reserved_gpus: int
    spare_gpus: int
    gpu_hours_per_day: float  # serving + spares + scale-up + spot re-serving
    spot_reserve_gpu_hours_per_day: float  # on demand, replacing reclaimed spot GPUs (no extra energy)
    scale_up_gpu_hours_per_day: float
    cost: CostSplit
    board_watts: float
    idle_watts: float
    pue: float
    power_source: str
    energy_kwh_per_day: float


class Comparison(Frozen):
    """The fleet planned another way, beside this plan."""

    name: str
    label: str
    usd_per_day: float
    usd_per_month: float
    gpu_hours_per_day: float
    peak_gpus: int
    feasible: bool  # every deployment planned
    infeasible: list[str] = []
    delta_usd_per_month: float  # against this plan (negative: cheaper)
    note: str


class Rejected(Frozen):
    """An input left out of the plan, and why."""

    what: str  # "deployment" or "pool"
    name: str
    why: str


class FleetAnswer(Frozen):
    """The whole fleet over one day, and per month."""

    scenario: FleetScenario
    hours: list[FleetHour]  # 24
    deployments: list[DeploymentAnswer]
    pools: list[PoolAnswer]
    cost: CostSplit
    usd_per_day: float
    usd_per_month: float
    days_per_month: float
    gpu_hours_per_day: float
    peak_gpus: int
    peak_hour: int
    trough_gpus: int
    spare_gpus: int
    energy_kwh_per_day: float
    co2e_kg_per_day: float
    electricity_usd_per_day: float  # not in usd_per_day (cloud GPU prices include power)
    electricity_usd_per_kwh: float
    carbon_kg_per_kwh: float
    slo_attainment: float | None  # request-weighted over deployments and hours
    hours_every_slo_met: int
    comparisons: list[Comparison]
    rejected: list[Rejected]
    warnings: list[str]
    assumptions: list[str]


def _share(fraction: float) -> str:
    """'100%', '99.2%', '87%': a tenth of a percent only near all (where it tells 99.9 % from 99 %)."""
    if fraction >= 1 - 1e-12:
        return "100%"
    return f"{fraction:.1%}" if fraction >= 0.99 else f"{fraction:.0%}"


def _energy(kwh: float) -> str:
    return f"{kwh / 1e3:,.1f} MWh" if kwh >= 1e3 else f"{kwh:,.0f} kWh"


def manager_summary(answer: FleetAnswer) -> str:
    """One sentence: models, peak GPUs by kind and when, trough, the monthly bill and its reserved share, energy and
    how much of the day meets the SLOs."""
    planned = [d for d in answer.deployments if d.feasible]
    models = len({d.model for d in planned})
    peak = answer.hours[answer.peak_hour] if answer.hours else None
    by_kind: dict[str, int] = {}
    for pool in answer.pools:
        if peak is not None and peak.gpus_by_pool.get(pool.name):
            by_kind[pool.gpu] = by_kind.get(pool.gpu, 0) + peak.gpus_by_pool[pool.name]
    kinds = " + ".join(f"{n} {kind}" for kind, n in sorted(by_kind.items(), key=lambda kv: -kv[1])) or "0 GPUs"
    reserved = answer.cost.reserved_usd_per_day / answer.usd_per_day if answer.usd_per_day else 0.0
    attainment = (
        f"{_share(answer.slo_attainment)} of requests meet their SLO, every SLO met in {answer.hours_every_slo_met} of 24 "
        "hours"
        if answer.slo_attainment is not None
        else "no traffic to meet an SLO for"
    )
    missing = [d.name for d in answer.deployments if not d.feasible]
    left_out = f"; not planned: {', '.join(missing)}" if missing else ""
    return (
        f"{models} model{'s' if models != 1 else ''} in {len(planned)} deployment{'s' if len(planned) != 1 else ''}, "
        f"peak {kinds} at {answer.peak_hour:02d}:00, trough {answer.trough_gpus}; "
        f"{units.usd_compact(answer.usd_per_month)}/month of which {reserved:.0%} reserved; "
        f"{_energy(answer.energy_kwh_per_day * answer.days_per_month)}/month; {attainment}{left_out}"
    )

"""The fleet scenario: several deployments over a day on GPU pools, validated at the edge.

A fleet is `kind: "fleet"`: `deployments` (each a full inference scenario and its load over the day), `pools` (a GPU
kind, how many at most, its prices and power), `autoscaling`, `spares`, the price and carbon of electricity and a
`rate_scale` for growth what-ifs. Everything a number rests on is a field here with its unit in its name; figures the
planner assumes when a field is left empty are named in `planner.fleet.defaults` with their sources.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.errors import PlanningError
from planner.fleet.demand import MAX_RATE_REQUESTS_PER_SECOND, check_rate_trace, diurnal_rates, trace_rates
from planner.hardware.catalog import Accelerator, resolve_accelerator
from planner.inference.scenario import InferenceScenario
from planner.scenario_base import MAX_GPUS, GpuRef

MAX_DEPLOYMENTS = 200
MAX_POOLS = 32
MAX_LAYOUTS = 64
Name = Annotated[str, Field(min_length=1, max_length=100)]
Rate = Annotated[float, Field(ge=0, le=MAX_RATE_REQUESTS_PER_SECOND, allow_inf_nan=False)]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Diurnal(Frozen):
    """A day's load as one smooth wave: `peak` at `peak_hour`, `trough` twelve hours later (a raised cosine)."""

    peak_requests_per_second: float = Field(gt=0, le=MAX_RATE_REQUESTS_PER_SECOND, allow_inf_nan=False)
    trough_requests_per_second: float = Field(ge=0, le=MAX_RATE_REQUESTS_PER_SECOND, allow_inf_nan=False)
    peak_hour: float = Field(default=14.0, ge=0, lt=24, allow_inf_nan=False, description="hour of day, 0-24")

    @model_validator(mode="after")
    def _ordered(self) -> Diurnal:
        if self.trough_requests_per_second > self.peak_requests_per_second:
            raise PlanningError(
                f"diurnal trough {self.trough_requests_per_second:g} requests/s is above its peak "
                f"{self.peak_requests_per_second:g}"
            )
        return self


class Layout(Frozen):
    """One candidate parallel layout of a replica (its GPUs: tensor x pipeline, experts spread over `expert_parallel`)."""

    tensor_parallel: int = Field(ge=1, le=1024)
    pipeline_parallel: int = Field(default=1, ge=1, le=1024)
    expert_parallel: int = Field(default=1, ge=1, le=65_536)

    @property
    def label(self) -> str:
        ep = f" EP{self.expert_parallel}" if self.expert_parallel > 1 else ""
        return f"TP{self.tensor_parallel} PP{self.pipeline_parallel}{ep}"

    @property
    def unit_gpus(self) -> int:
        """GPUs one failure takes down and one scale step adds: the TP x PP group, or the expert-parallel group
        when experts span replicas (EP > TP)."""
        return max(self.tensor_parallel, self.expert_parallel) * self.pipeline_parallel

    @property
    def replicas_per_unit(self) -> int:
        return max(1, self.expert_parallel // self.tensor_parallel)


class Deployment(Frozen):
    """One model serving one traffic class: its inference scenario and its load over the day (exactly one of
    `rate_by_hour`, `diurnal`, `rate_trace_csv`)."""

    name: Name
    scenario: InferenceScenario = Field(
        description="the deployment as one replica serves it: model, layout, runtime, lengths, batch cap "
        "(traffic.max_num_seqs, else concurrency over the scenario's replicas) and traffic.slo, which is required. "
        "Its gpu and num_gpus are replaced by each pool's GPU and one replica; traffic's rate by the hour's"
    )
    rate_by_hour: tuple[Rate, ...] | None = Field(
        default=None, description="requests per second in each hour of the day, 00:00 first (24 numbers)"
    )
    diurnal: Diurnal | None = None
    rate_trace_csv: str | None = Field(
        default=None,
        description="a rate-over-time trace, CSV with columns seconds,requests_per_second (seconds since a midnight; "
        "each hour of day is the mean of its samples, days folded)",
    )
    layouts: tuple[Layout, ...] = Field(
        default=(),
        max_length=MAX_LAYOUTS,
        description="candidate layouts to compare (each sized and priced); empty: the scenario's own",
    )
    pools: tuple[Name, ...] = Field(default=(), description="pools this deployment may run on; empty: every pool")
    min_replicas: int | None = Field(default=None, ge=0, le=MAX_GPUS, description="overrides autoscaling's")

    @model_validator(mode="after")
    def _one_load(self) -> Deployment:
        given = [n for n in ("rate_by_hour", "diurnal", "rate_trace_csv") if getattr(self, n) is not None]
        if len(given) != 1:
            raise PlanningError(
                f"deployment '{self.name}' needs exactly one load: rate_by_hour (24 numbers), diurnal or "
                f"rate_trace_csv; it has {', '.join(given) if given else 'none'}"
            )
        if self.rate_by_hour is not None and len(self.rate_by_hour) != 24:
            raise PlanningError(
                f"deployment '{self.name}': rate_by_hour needs 24 numbers (00:00 to 23:00), got {len(self.rate_by_hour)}"
            )
        if self.rate_trace_csv is not None:
            check_rate_trace(self.rate_trace_csv, f"deployment '{self.name}'")
        traffic = self.scenario.traffic
        if traffic is None or traffic.slo is None or not traffic.slo.targets:
            raise PlanningError(
                f"deployment '{self.name}' has no SLO to size for: set scenario.traffic.slo (ttft_seconds, "
                "tpot_seconds or e2e_latency_seconds)"
            )
        return self

    def hourly_rates(self, rate_scale: float = 1.0) -> tuple[float, ...]:
        """The 24 hourly rates (requests per second, 00:00 first), times the fleet's `rate_scale`."""
        if self.rate_by_hour is not None:
            base = tuple(float(r) for r in self.rate_by_hour)
        elif self.diurnal is not None:
            d = self.diurnal
            base = diurnal_rates(d.peak_requests_per_second, d.trough_requests_per_second, d.peak_hour)
        else:
            assert self.rate_trace_csv is not None  # the validator requires one load
            base = trace_rates(self.rate_trace_csv)
        return tuple(r * rate_scale for r in base)

    @property
    def load_source(self) -> str:
        """How the load was given, in words."""
        if self.diurnal is not None:
            d = self.diurnal
            return (
                f"diurnal: {d.peak_requests_per_second:g} requests/s at {d.peak_hour:g}:00, "
                f"{d.trough_requests_per_second:g} twelve hours later (raised cosine)"
            )
        if self.rate_trace_csv is not None:
            return "rate trace: each hour of day the mean of its samples"
        return "rate_by_hour"

    @property
    def own_layout(self) -> Layout:
        s = self.scenario
        return Layout(
            tensor_parallel=s.tensor_parallel, pipeline_parallel=s.pipeline_parallel, expert_parallel=s.expert_parallel
        )

    @property
    def candidate_layouts(self) -> tuple[Layout, ...]:
        return self.layouts or (self.own_layout,)

    @property
    def max_num_seqs_per_replica(self) -> int:
        """The engine's batch cap on every replica: the stream's, else the scenario's concurrency over its
        replicas (what `inputs.engine_concurrency` gives the scenario itself)."""
        traffic = self.scenario.traffic
        if traffic is not None and traffic.max_num_seqs is not None:
            return traffic.max_num_seqs
        return max(1, self.scenario.concurrency // max(self.scenario.replicas, 1))


class Pool(Frozen):
    """GPUs of one kind that deployments may run on, their prices and power."""

    name: Name
    gpu: GpuRef = Field(description="catalog id or an inline accelerator spec")
    max_gpus: int | None = Field(default=None, ge=1, le=MAX_GPUS, description="at most this many; empty: no limit")
    on_demand_usd_per_hour: float | None = Field(
        default=None, ge=0, le=10_000, description="per GPU; empty: the catalog's reference price"
    )
    reserved_usd_per_hour: float | None = Field(
        default=None, ge=0, le=10_000, description="per GPU, committed for the whole day; empty: none reserved"
    )
    spot_usd_per_hour: float | None = Field(default=None, ge=0, le=10_000, description="per GPU; empty: no spot")
    spot_interruptions_per_day: float = Field(
        default=0.0,
        ge=0,
        le=1000,
        allow_inf_nan=False,
        description="expected reclaims per spot GPU per day; each takes its whole replica group down",
    )
    spot_share: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="share of the GPUs above the reserved base bought as spot; empty: all of them when "
        "spot_usd_per_hour is set, else none",
    )
    board_watts: float | None = Field(default=None, gt=0, le=20_000, description="per GPU; empty: the catalog's")
    idle_watts: float | None = Field(default=None, ge=0, le=20_000, description="per GPU; empty: the catalog's")
    pue: float | None = Field(
        default=None, ge=1, le=3, description="facility power over IT power; empty: planner.physics.energy's default"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Pool:
        accelerator = self.accelerator()
        if self.on_demand_usd_per_hour is None and accelerator.reference_usd_per_hour <= 0:
            raise PlanningError(
                f"pool '{self.name}': {accelerator.name} has no reference price; give on_demand_usd_per_hour"
            )
        if self.spot_share and self.spot_usd_per_hour is None:
            raise PlanningError(f"pool '{self.name}': spot_share needs spot_usd_per_hour")
        if self.board_watts is not None and self.idle_watts is not None and self.idle_watts >= self.board_watts:
            raise PlanningError(
                f"pool '{self.name}': idle_watts {self.idle_watts:g} must be below board_watts {self.board_watts:g}"
            )
        return self

    def accelerator(self) -> Accelerator:
        try:
            return resolve_accelerator(self.gpu)
        except PlanningError as exc:
            raise PlanningError(f"pool '{self.name}': {exc}") from None

    @property
    def gpu_kind(self) -> str:
        return self.gpu if isinstance(self.gpu, str) else self.accelerator().name

    @property
    def on_demand_price(self) -> float:
        if self.on_demand_usd_per_hour is not None:
            return self.on_demand_usd_per_hour
        return self.accelerator().reference_usd_per_hour

    @property
    def spot_fraction(self) -> float:
        if self.spot_usd_per_hour is None:
            return 0.0
        return 1.0 if self.spot_share is None else self.spot_share


class Autoscaling(Frozen):
    """How replicas follow the load: each hour's replicas serve its rate with `headroom_share` of their SLO capacity
    to spare; new replicas take `scale_up_delay_seconds` to start (empty: weights over storage bandwidth plus the
    engine's start-up)."""

    headroom_share: float = Field(
        default=0.1,
        ge=0,
        lt=1,
        description="capacity kept spare at every hour (a policy: 0.1 runs replicas at most at 90% of their SLO "
        "capacity)",
    )
    min_replicas: int = Field(default=1, ge=0, le=MAX_GPUS, description="per deployment, at every hour")
    scale_up_delay_seconds: float | None = Field(default=None, ge=0, le=86_400, allow_inf_nan=False)
    storage_bytes_per_second: float | None = Field(
        default=None, gt=0, le=1e13, description="where weights load from, per replica; empty: planner.fleet.defaults"
    )
    engine_startup_seconds: float | None = Field(
        default=None, ge=0, le=86_400, description="engine start after the weights load; empty: planner.fleet.defaults"
    )


class Spares(Frozen):
    """Spare replica groups kept loaded so that failures do not break the SLO: `n_plus_k` groups per deployment, or
    as many as keep the peak within the SLO with `probability` given GPU failures (`gpu_mtbf_hours`, `repair_hours`;
    empty: planner.fleet.defaults). One failed GPU takes its whole TP x PP (x EP) group down."""

    n_plus_k: int | None = Field(default=None, ge=0, le=10_000, description="spare groups per deployment")
    gpu_mtbf_hours: float | None = Field(default=None, gt=0, le=1e8, allow_inf_nan=False)
    repair_hours: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False)
    probability: float = Field(default=0.99, gt=0, lt=1, description="share of time the peak still meets its SLO")

    @model_validator(mode="after")
    def _one_rule(self) -> Spares:
        if self.n_plus_k is not None and (self.gpu_mtbf_hours is not None or self.repair_hours is not None):
            raise PlanningError("spares: give n_plus_k or failure rates (gpu_mtbf_hours, repair_hours), not both")
        return self


class FleetScenario(Frozen):
    """Several deployments over one day on GPU pools."""

    kind: Literal["fleet"] = "fleet"
    label: str = Field(default="", max_length=200)
    deployments: tuple[Deployment, ...] = Field(min_length=1, max_length=MAX_DEPLOYMENTS)
    pools: tuple[Pool, ...] = Field(min_length=1, max_length=MAX_POOLS)
    autoscaling: Autoscaling = Autoscaling()
    spares: Spares = Spares()
    electricity_usd_per_kwh: float | None = Field(
        default=None, ge=0, le=100, description="empty: planner.physics.energy's default (cited there)"
    )
    carbon_kg_per_kwh: float | None = Field(
        default=None, ge=0, le=10, description="empty: planner.physics.energy's default (cited there)"
    )
    rate_scale: float = Field(
        default=1.0, gt=0, le=1000, allow_inf_nan=False, description="multiplies every deployment's load (growth)"
    )
    compare_disaggregation: bool = Field(
        default=False,
        description="also compare each deployment with prefill/decode pools at its peak (the fewest GPUs a split "
        "meets the SLO on; about replicas x log2(replicas) more simulations per deployment)",
    )

    @model_validator(mode="after")
    def _names(self) -> FleetScenario:
        for what, names in (("deployment", [d.name for d in self.deployments]), ("pool", [p.name for p in self.pools])):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise PlanningError(f"{what} names must be unique; {', '.join(repr(n) for n in twice)} repeats")
        known = {p.name for p in self.pools}
        for d in self.deployments:
            unknown = [p for p in d.pools if p not in known]
            if unknown:
                raise PlanningError(
                    f"deployment '{d.name}' names unknown pool(s) {', '.join(repr(p) for p in unknown)}; "
                    f"the pools are {', '.join(repr(p) for p in sorted(known))}"
                )
        return self

    def pools_for(self, deployment: Deployment) -> tuple[Pool, ...]:
        allowed = set(deployment.pools)
        return tuple(p for p in self.pools if not allowed or p.name in allowed)

    def pool(self, name: str) -> Pool:
        return next(p for p in self.pools if p.name == name)

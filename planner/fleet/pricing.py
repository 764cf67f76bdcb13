"""What a pool's GPUs cost over the day, split by how they are bought.

Per pool, with the GPUs its deployments hold each hour (serving) plus their spares (held all day):

- reserved: the daily trough of that need (the fewest GPUs held in any hour, spares included), for all 24 hours,
  when the pool offers a reserved price; none otherwise;
- above the base, each hour: `spot_share` of the GPUs on spot (when priced), the rest on demand;
- spot re-served: a reclaimed spot GPU takes its whole group down; the group is re-served on demand for the rest
  of that hour (`defaults.SPOT_RESERVE_HOURS` on average) plus its scale-up delay. Expected on-demand GPU-hours an
  hour = spot GPUs x interruptions per day / 24 x group GPUs x (0.5 h + delay);
- scale-up: GPUs added at an hour boundary start `delay` earlier and are billed on demand meanwhile (the day repeats:
  00:00 follows 23:00).

Each deployment is charged the pool's blended price for its GPU-hours plus its own spot re-serving and scale-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field, model_validator

from planner.fleet import defaults
from planner.fleet.scenario import Pool

HOURS = 24


class CostSplit(BaseModel):
    """Dollars per day by how the GPUs are bought."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reserved_usd_per_day: float = 0.0
    on_demand_usd_per_day: float = 0.0
    spot_usd_per_day: float = 0.0
    spot_reserve_usd_per_day: float = 0.0  # on demand, re-serving interrupted spot groups
    scale_up_usd_per_day: float = 0.0  # on demand, replicas starting before their hour

    @model_validator(mode="before")
    @classmethod
    def _derived(cls, data: Any) -> Any:
        """The total is derived: a written answer read back drops it (and derives it again)."""
        if isinstance(data, dict) and "usd_per_day" in data:
            return {k: v for k, v in data.items() if k != "usd_per_day"}
        return data

    @computed_field
    @property
    def usd_per_day(self) -> float:
        return (
            self.reserved_usd_per_day
            + self.on_demand_usd_per_day
            + self.spot_usd_per_day
            + self.spot_reserve_usd_per_day
            + self.scale_up_usd_per_day
        )

    def plus(self, other: CostSplit) -> CostSplit:
        return CostSplit(
            reserved_usd_per_day=self.reserved_usd_per_day + other.reserved_usd_per_day,
            on_demand_usd_per_day=self.on_demand_usd_per_day + other.on_demand_usd_per_day,
            spot_usd_per_day=self.spot_usd_per_day + other.spot_usd_per_day,
            spot_reserve_usd_per_day=self.spot_reserve_usd_per_day + other.spot_reserve_usd_per_day,
            scale_up_usd_per_day=self.scale_up_usd_per_day + other.scale_up_usd_per_day,
        )


@dataclass(frozen=True)
class Usage:
    """One deployment's GPUs on a pool: serving each hour, spares all day."""

    name: str
    gpus_by_hour: tuple[int, ...]
    spare_gpus: int
    group_gpus: int
    scale_up_hours: float  # its scale-up delay, in hours


@dataclass(frozen=True)
class PoolBill:
    """A pool's day: its GPUs by pricing, the split in dollars and each deployment's share."""

    pool: Pool
    gpus_by_hour: tuple[int, ...]  # serving + spares
    reserved_gpus: int
    spot_gpus_by_hour: tuple[float, ...]
    on_demand_gpus_by_hour: tuple[float, ...]
    spot_reserve_gpu_hours: float
    scale_up_gpu_hours: float
    cost: CostSplit
    usd_by_deployment: dict[str, float]
    scale_up_gpu_hours_by_deployment: dict[str, float]

    @property
    def gpu_hours(self) -> float:
        return float(sum(self.gpus_by_hour)) + self.spot_reserve_gpu_hours + self.scale_up_gpu_hours


def scale_up_gpu_hours(gpus_by_hour: tuple[int, ...], delay_hours: float) -> float:
    """GPU-hours of replicas starting before the hour they are added for (the day repeats)."""
    added = sum(max(0, gpus_by_hour[h] - gpus_by_hour[h - 1]) for h in range(len(gpus_by_hour)))
    return added * delay_hours


def bill_pool(pool: Pool, usages: list[Usage]) -> PoolBill:
    """The pool's day under the module docstring's rules."""
    serving = [sum(u.gpus_by_hour[h] for u in usages) for h in range(HOURS)]
    spares = sum(u.spare_gpus for u in usages)
    held = tuple(s + spares for s in serving)
    reserved = min(held) if pool.reserved_usd_per_hour is not None and held else 0
    above = [g - reserved for g in held]
    spot = tuple(pool.spot_fraction * a for a in above)
    on_demand = tuple(a - s for a, s in zip(above, spot))
    od_price = pool.on_demand_price
    reserve_by, scale_by = {}, {}
    for u in usages:
        share = [u.gpus_by_hour[h] / serving[h] if serving[h] else 0.0 for h in range(HOURS)]
        spot_hours = sum(spot[h] * share[h] for h in range(HOURS))
        reserve_by[u.name] = (
            spot_hours
            * pool.spot_interruptions_per_day
            / HOURS
            * u.group_gpus
            * (defaults.SPOT_RESERVE_HOURS + u.scale_up_hours)
        )
        scale_by[u.name] = scale_up_gpu_hours(u.gpus_by_hour, u.scale_up_hours)
    cost = CostSplit(
        reserved_usd_per_day=reserved * HOURS * (pool.reserved_usd_per_hour or 0.0),
        on_demand_usd_per_day=sum(on_demand) * od_price,
        spot_usd_per_day=sum(spot) * (pool.spot_usd_per_hour or 0.0),
        spot_reserve_usd_per_day=sum(reserve_by.values()) * od_price,
        scale_up_usd_per_day=sum(scale_by.values()) * od_price,
    )
    base_hours = float(sum(held))
    blended = (
        (cost.reserved_usd_per_day + cost.on_demand_usd_per_day + cost.spot_usd_per_day) / base_hours
        if base_hours
        else 0.0
    )
    usd_by = {
        u.name: blended * (sum(u.gpus_by_hour) + HOURS * u.spare_gpus)
        + (reserve_by[u.name] + scale_by[u.name]) * od_price
        for u in usages
    }
    return PoolBill(
        pool=pool,
        gpus_by_hour=held,
        reserved_gpus=reserved,
        spot_gpus_by_hour=spot,
        on_demand_gpus_by_hour=on_demand,
        spot_reserve_gpu_hours=sum(reserve_by.values()),
        scale_up_gpu_hours=sum(scale_by.values()),
        cost=cost,
        usd_by_deployment=usd_by,
        scale_up_gpu_hours_by_deployment=scale_by,
    )

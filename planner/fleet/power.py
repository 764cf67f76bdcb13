"""Energy over the day: each hour's GPUs at their power, spares at idle, through the pool's PUE.

The power model is `planner.physics.energy`'s (idle + busy share x (board - idle) per GPU; board and idle power from
the GPU catalog unless the pool overrides them). A serving GPU's busy share is its hour's rate per replica over the
static plan's saturated rate (`sizing`); spare groups (loaded, no traffic) and replicas starting up draw idle power;
GPUs re-serving an interrupted spot group replace the reclaimed ones, so they add no energy.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.fleet.scenario import Pool
from planner.fleet.sizing import HourSizing
from planner.physics.energy import DEFAULT_PUE, accelerator_power, energy_kwh, gpu_power_watts


@dataclass(frozen=True)
class PoolPower:
    """A pool's power figures per GPU, and where they came from."""

    board_watts: float
    idle_watts: float
    pue: float
    source: str


def pool_power(pool: Pool) -> PoolPower:
    spec = accelerator_power(pool.accelerator())
    board = pool.board_watts if pool.board_watts is not None else spec.board_watts
    idle = pool.idle_watts if pool.idle_watts is not None else spec.idle_watts
    overridden = [n for n, v in (("board", pool.board_watts), ("idle", pool.idle_watts)) if v is not None]
    source = f"pool '{pool.name}' gives {' and '.join(overridden)} power" if overridden else ""
    if len(overridden) < 2:
        source = "; ".join(s for s in (source, spec.source or "the GPU catalog") if s)
    return PoolPower(
        board_watts=board,
        idle_watts=min(idle, board),
        pue=pool.pue if pool.pue is not None else DEFAULT_PUE,
        source=source,
    )


@dataclass(frozen=True)
class DayEnergy:
    """One deployment's kWh over the day (grid side, PUE included), and the hours' kWh."""

    serving_kwh_by_hour: tuple[float, ...]
    spare_kwh: float
    scale_up_kwh: float

    @property
    def kwh(self) -> float:
        return sum(self.serving_kwh_by_hour) + self.spare_kwh + self.scale_up_kwh


def day_energy(hours: list[HourSizing], spare_gpus: int, scale_up_gpu_hours: float, power: PoolPower) -> DayEnergy:
    by_hour = tuple(
        float(energy_kwh(gpu_power_watts(power.board_watts, power.idle_watts, h.busy_share), h.gpus, power.pue))
        for h in hours
    )
    return DayEnergy(
        serving_kwh_by_hour=by_hour,
        spare_kwh=float(energy_kwh(power.idle_watts, spare_gpus * 24.0, power.pue)),
        scale_up_kwh=float(energy_kwh(power.idle_watts, scale_up_gpu_hours, power.pue)),
    )

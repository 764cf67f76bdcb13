"""Energy: the power a GPU draws while it serves or trains, and the kWh, $ and CO2e that follow.

The power model (one line, stated wherever a plan shows energy):

    watts per GPU = idle + busy_share x (board - idle)

`board` is the device's board power (the datasheet's TDP / TBP / max power; what a GPU draws when it is
busy all the time), `idle` what it draws when it holds its model and does nothing (nvidia-smi's reading of
a loaded, idle GPU), and `busy_share` the share of the step the device spends computing or moving
memory (roofline terms), as opposed to waiting on the host, the scheduler or nothing. A linear
interpolation between idle and full power is the usual first-order model of a GPU's power against
utilisation (e.g. the ML.ENERGY / Zeus line of work measures power per phase; Patel et al.,
"Characterizing Power Management Opportunities for LLMs in the Cloud", ASPLOS 2024, report inference
drawing well below TDP and training near it). It ignores the dependence of power on *what* is busy
(a memory-bound decode step draws less than a compute-bound GEMM at the same busy share), so it is an
upper estimate for memory-bound serving; the plans say so.

Facility overhead is a PUE factor (the datacenter's total power over its IT power; 1.0 = none counted).
Per-GPU figures only: host CPUs, NICs and switches are not counted except where an entry says its board
figure is a share of a larger unit (GB200/GB300 NVL72 superchips, Apple packages, the generic CPU).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from planner.hardware.catalog import Accelerator

# --- stated fall-backs for an accelerator without power figures (a user's custom dict) ----------------------
# Idle as a share of board power, the rule used for every catalog entry that has no published idle reading:
# the measured idle readings the catalog holds (H100 SXM ~70 W of 700 W, A100 SXM ~55 W of 400 W, L4 ~16 W
# of 72 W, MI300X ~140 W of 750 W; see accelerators.json) span about 10-22 % of board power; 0.15 is the
# middle of that span. ASSUMED.
IDLE_SHARE_OF_BOARD = 0.15
# Board power of a custom device with none given: its dense bf16 peak at the H100 SXM's ratio
# (700 W / 989.4 dense TFLOP/s = 0.71 W per TFLOP/s), clipped to 50-1,500 W. An order-of-magnitude guess,
# ASSUMED: later generations do more FLOP/s per watt (B200: 0.44 W, A100: 1.28 W per TFLOP/s).
WATTS_PER_DENSE_BF16_FLOP_PER_SECOND = 700.0 / 989.4e12
ASSUMED_BOARD_WATTS_RANGE = (50.0, 1500.0)

# --- defaults for price and carbon of electricity (the scenario can override them) --------------------------
# US average retail electricity price to the commercial sector, 2024: 12.7 cents/kWh (EIA, Electric Power
# Monthly, Table 5.3 / Electric Power Annual 2024, "Average Price of Electricity to Ultimate Customers",
# commercial sector). A datacenter's contract is often lower (industrial 2024: ~8.1 cents/kWh); edit it.
DEFAULT_ELECTRICITY_USD_PER_KWH = 0.127
# US grid average CO2e emission rate: 0.37 kg CO2e per kWh (EPA eGRID2022, released 2024: US total output
# emission rate 823.1 lb CO2/MWh = 0.373 kg CO2/kWh; CO2e ~0.5 % higher). Location-based, not market-based.
DEFAULT_CARBON_KG_PER_KWH = 0.37
# Power usage effectiveness: 1.0 counts the GPUs alone. Uptime Institute's 2024 survey reports an industry
# average PUE of 1.56; hyperscale sites report ~1.1 (Google 2024 fleet average 1.09). The user states it.
DEFAULT_PUE = 1.0

POWER_MODEL = (
    "power per GPU = idle + busy share x (board - idle): board power is the datasheet's (TDP/TBP), idle a "
    f"published reading of a loaded idle GPU or, where none is cited, {IDLE_SHARE_OF_BOARD:.0%} of board power "
    "(assumed); busy share = the step's roofline time (compute, memory, communication) over its wall time, "
    "host and scheduler time counted idle; a memory-bound step draws less than this at the same busy share, "
    "so serving energy is an upper estimate"
)


class PowerSpec(BaseModel):
    """One device's power figures and where they came from (per GPU, watts)."""

    model_config = ConfigDict(frozen=True)

    board_watts: float = Field(gt=0)
    idle_watts: float = Field(ge=0)
    source: str
    assumed: bool


def accelerator_power(acc: Accelerator) -> PowerSpec:
    """The device's board and idle power per GPU: the catalog's figures, or a stated assumption where the
    accelerator gives none (board from the bf16 peak, idle = IDLE_SHARE_OF_BOARD of board)."""
    board = acc.board_power_watts
    idle = acc.idle_power_watts
    notes = []
    assumed = False
    if board is None:
        peak = acc.peak_flops("bf16")
        low, high = ASSUMED_BOARD_WATTS_RANGE
        board = float(np.clip(peak * WATTS_PER_DENSE_BF16_FLOP_PER_SECOND, low, high))
        notes.append(
            f"ASSUMED board power {board:.0f} W: no board_power_watts given, scaled from the bf16 peak at the "
            "H100 SXM's 0.71 W per dense TFLOP/s"
        )
        assumed = True
    if idle is None or idle >= board:
        idle = IDLE_SHARE_OF_BOARD * board
        notes.append(f"ASSUMED idle power {idle:.0f} W = {IDLE_SHARE_OF_BOARD:.0%} of board power")
        assumed = True
    source = "; ".join(notes + ([acc.power_source] if acc.power_source else []))
    return PowerSpec(board_watts=float(board), idle_watts=float(idle), source=source, assumed=assumed)


def gpu_power_watts(board_watts, idle_watts, busy_share):
    """Average power per GPU over a step: idle + busy share x (board - idle), busy share clipped to [0, 1].
    Scalars or numpy arrays alike (the sweep passes arrays). Linear idle-to-board model; module docstring."""
    share = np.clip(busy_share, 0.0, 1.0)
    watts = idle_watts + share * (board_watts - idle_watts)
    return float(watts) if np.ndim(watts) == 0 else watts


def energy_kwh(watts_per_gpu, gpu_hours, pue):
    """Energy drawn from the grid: watts per GPU x GPU-hours x PUE / 1000 (kWh). Broadcasts."""
    return watts_per_gpu * gpu_hours * pue / 1000.0

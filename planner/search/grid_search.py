"""The constrained search of the Trade-offs page as engine calls: a typed search space (what to vary, the
constraints, the objective), the vectorized sweep over it, the feasible set, the best `top` rows (duplicates
collapsed) and the Pareto frontier. Inference varies GPU type and count, TP/PP/EP, weight and KV formats and
concurrency; training varies GPU type and count, TP, PP, ZeRO stage, recomputation and micro-batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from planner.search import constraints, sweep
from planner.search.sweep import powers_of_two, unique
from planner.units import gib, seconds, usd

MAX_SEARCH_ROWS = 300_000
Constraint = tuple[str, str, float]

InferenceObjective = Literal[
    "usd_per_million_output_tokens", "tpot_seconds", "ttft_seconds", "usd_per_hour", "num_gpus"
]
TrainingObjective = Literal["usd_total", "time_to_train_seconds"]


class InferenceSearchSpec(BaseModel):
    """What the inference search varies, its constraints (None: no limit) and what it minimizes."""

    model_config = ConfigDict(frozen=True)

    gpus: tuple[str, ...]
    max_gpus: int = Field(ge=1, le=4096)
    weight_dtypes: tuple[str, ...]
    kv_cache_dtypes: tuple[str, ...]
    concurrency: tuple[int, int]  # lowest and highest sequences in flight (powers of two between)
    max_ttft_seconds: float | None = None
    max_tpot_seconds: float | None = None
    max_memory_bytes: float | None = None  # per GPU, on top of each GPU's own budget
    max_usd_per_hour: float | None = None
    objective: InferenceObjective = "usd_per_million_output_tokens"
    top: int = Field(default=10, ge=1, le=1000)

    def constraints(self) -> list[Constraint]:
        out: list[Constraint] = [("num_gpus", "<=", float(self.max_gpus))]
        for column, value in (
            ("ttft_seconds", self.max_ttft_seconds),
            ("tpot_seconds", self.max_tpot_seconds),
            ("total_bytes", self.max_memory_bytes),
            ("usd_per_hour", self.max_usd_per_hour),
        ):
            if value is not None:
                out.append((column, "<=", float(value)))
        return out

    def describe(self) -> str:
        """'GPUs ≤ 8, TPOT ≤ 60.0 ms, memory per GPU ≤ 70.0 GiB'."""
        return describe_constraints(self.constraints())


class TrainingSearchSpec(BaseModel):
    """What the training search varies, its constraints (None: no limit) and what it minimizes."""

    model_config = ConfigDict(frozen=True)

    gpus: tuple[str, ...]
    max_gpus: int = Field(ge=1, le=4096)
    zero_stages: tuple[int, ...]
    checkpointing: tuple[str, ...]
    micro_batch_sizes: tuple[int, ...]
    max_time_to_train_seconds: float | None = None
    max_memory_bytes: float | None = None
    max_usd_total: float | None = None
    objective: TrainingObjective = "usd_total"
    top: int = Field(default=10, ge=1, le=1000)

    def constraints(self) -> list[Constraint]:
        out: list[Constraint] = [("num_gpus", "<=", float(self.max_gpus))]
        for column, value in (
            ("time_to_train_seconds", self.max_time_to_train_seconds),
            ("total_bytes", self.max_memory_bytes),
            ("usd_total", self.max_usd_total),
        ):
            if value is not None:
                out.append((column, "<=", float(value)))
        return out

    def describe(self) -> str:
        return describe_constraints(self.constraints())


_CONSTRAINT_WORDS = {
    "num_gpus": ("GPUs", lambda v: f"{v:g}"),
    "ttft_seconds": ("TTFT", seconds),
    "tpot_seconds": ("TPOT", seconds),
    "total_bytes": ("memory per GPU", gib),
    "usd_per_hour": ("$/hour", usd),
    "time_to_train_seconds": ("time to train", seconds),
    "usd_total": ("cost to train", usd),
}


def describe_constraints(items: list[Constraint]) -> str:
    out = []
    for column, op, value in items:
        word, show = _CONSTRAINT_WORDS.get(column, (column, lambda v: f"{v:g}"))
        out.append(f"{word} {op.replace('<=', '≤').replace('>=', '≥')} {show(value)}")
    return ", ".join(out)


@dataclass(frozen=True)
class SearchResult:
    rows: int  # configurations evaluated
    valid: int  # valid layouts among them
    fitting: int  # valid and fit in memory
    feasible: pd.DataFrame  # fit and meet every constraint (every row, duplicates included)
    top: pd.DataFrame  # the best `top` by the objective, equivalent rows collapsed (`equivalent_rows`)
    frontier: pd.DataFrame  # Pareto frontier of the two headline objectives, equivalent rows collapsed
    error: str | None = None  # why nothing was evaluated


def _refused(rows: int, error: str) -> SearchResult:
    empty = pd.DataFrame()
    return SearchResult(rows, 0, 0, empty, empty, empty, error)


def inference_axes(scenario, spec: InferenceSearchSpec) -> dict[str, list]:
    """The knobs of sweep.inference_grid: GPU counts and TP/PP (EP for MoE) in powers of two (TP up to 16, or
    the widest NVLink domain searched), the
    concurrency range in powers of two plus its ends, each with this scenario's own value where in range."""
    arch = scenario.architecture()
    num_gpus = unique(
        powers_of_two(spec.max_gpus) + ([scenario.num_gpus] if scenario.num_gpus <= spec.max_gpus else [])
    )
    tp = powers_of_two(min(spec.max_gpus, sweep.tensor_parallel_limit(scenario, spec.gpus, floor=16)))
    pp = powers_of_two(min(spec.max_gpus, 8, arch.num_layers))
    ep = unique([1] + tp) if arch.is_moe else [1]
    lo, hi = spec.concurrency
    concurrency = unique(
        [c for c in powers_of_two(hi) if c >= lo]
        + [lo, hi]
        + ([scenario.concurrency] if lo <= scenario.concurrency <= hi else [])
    )
    return {
        "gpus": list(spec.gpus),
        "num_gpus": sorted(num_gpus),
        "tensor_parallel": tp,
        "pipeline_parallel": pp,
        "expert_parallel": ep,
        "weight_dtypes": list(spec.weight_dtypes),
        "kv_cache_dtypes": list(spec.kv_cache_dtypes),
        "concurrency": sorted(concurrency),
    }


def _finish(frame: pd.DataFrame, spec, frontier_columns: list[str]) -> SearchResult:
    feasible = constraints.apply_constraints(frame, spec.constraints())
    # Every feasible row ranked with equivalent rows collapsed: the top and the frontier are distinct configurations.
    distinct = constraints.search(feasible, [], minimize=spec.objective, top=len(feasible))
    frontier = constraints.pareto_front(distinct, minimize=frontier_columns).sort_values(frontier_columns[1])
    return SearchResult(
        rows=len(frame),
        valid=int(frame["valid"].sum()),
        fitting=int(frame["fits"].sum()),
        feasible=feasible,
        top=distinct.head(spec.top),
        frontier=frontier,
    )


def run_inference_search(scenario, spec: InferenceSearchSpec, calibration=None) -> SearchResult:
    """Every combination of the spec's knobs for this model and workload, planned in one vectorized pass."""
    axes = inference_axes(scenario, spec)
    if not all(axes.values()):
        return _refused(0, "pick at least one GPU type, weight format and KV format")
    size = math.prod(len(v) for v in axes.values())
    if size > MAX_SEARCH_ROWS:
        return _refused(
            size,
            f"{size:,} configurations is too many (limit {MAX_SEARCH_ROWS:,}); pick fewer GPU types, formats or a "
            "smaller concurrency range",
        )
    frame = sweep.evaluate_inference(scenario, sweep.inference_grid(scenario, **axes), calibration)
    return _finish(frame, spec, ["usd_per_million_output_tokens", "tpot_seconds"])


def run_training_search(scenario, spec: TrainingSearchSpec, calibration=None) -> SearchResult:
    """GPU type and count (powers of two), TP up to the widest NVLink domain searched (8 on HGX, 72 on NVL72),
    PP ≤ 16 (and the layer count), ZeRO, recomputation and micro-batch for this training job, planned in one
    vectorized pass; frontier: cost vs time to train."""
    if not (spec.gpus and spec.zero_stages and spec.checkpointing and spec.micro_batch_sizes):
        return _refused(0, "pick at least one GPU type, ZeRO stage, recompute level and micro-batch size")
    arch = scenario.architecture()
    grid = sweep.training_grid(
        scenario,
        gpus=list(spec.gpus),
        num_gpus=powers_of_two(spec.max_gpus),
        tensor_parallel=powers_of_two(min(sweep.tensor_parallel_limit(scenario, spec.gpus), spec.max_gpus)),
        pipeline_parallel=[p for p in powers_of_two(min(16, spec.max_gpus)) if p <= arch.num_layers],
        zero_stages=list(spec.zero_stages),
        checkpointing=list(spec.checkpointing),
        micro_batch_sizes=list(spec.micro_batch_sizes),
    )
    if len(grid) > MAX_SEARCH_ROWS:
        return _refused(
            len(grid), f"{len(grid):,} configurations is too many (limit {MAX_SEARCH_ROWS:,}); pick fewer options"
        )
    frame = sweep.evaluate_training(scenario, grid, calibration)
    return _finish(frame, spec, ["usd_total", "time_to_train_seconds"])


Fixed = Literal["latency", "cost", "memory"]


def best_at(result: SearchResult, fixed: Fixed, value: float | None, objective: str) -> pd.Series | None:
    """Inference: the best feasible row at a fixed latency (TPOT ≤ value seconds: the cheapest), a fixed cost
    ($ per 1M output tokens ≤ value: the fastest) or a fixed memory (bytes per GPU ≤ value: the best by the
    objective). None when no row qualifies."""
    feasible = result.feasible
    if feasible.empty or value is None:
        return None
    if fixed == "latency":
        rows = feasible[feasible["tpot_seconds"] <= value].sort_values(
            ["usd_per_million_output_tokens", "tpot_seconds", "num_gpus"]
        )
    elif fixed == "cost":
        rows = feasible[feasible["usd_per_million_output_tokens"] <= value].sort_values(
            ["tpot_seconds", "usd_per_million_output_tokens", "num_gpus"]
        )
    else:
        rows = feasible[feasible["total_bytes"] <= value].sort_values([objective, "num_gpus"])
    return None if rows.empty else rows.iloc[0]

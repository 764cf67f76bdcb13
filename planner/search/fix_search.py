"""The searches behind the suggestions that fix a plan (`planner.search.fixes`): another layout on the same GPUs,
the fewest GPUs of the kind chosen that fit, the next GPU up, a narrower number format and fewer users.

Layouts are searched with the vectorized sweep (`planner.search.sweep`: the same formulas plan() runs, every
layout validated by the scenario's own validator), then the chosen row is planned in full, so every answer is a
validated scenario whose full plan fits. Each search returns (changed scenario, its plan) or None.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import pandas as pd
from pydantic import ValidationError

from planner.dtypes import BYTES_PER_ELEMENT, FORMATS, KV_DTYPES, kv_format_served
from planner.errors import PlanningError
from planner.hardware.catalog import DEFAULT_GPUS_PER_NODE, Accelerator, list_accelerators
from planner.plan import static_plan
from planner.search import sweep
from planner.search.sweep import powers_of_two, unique
from planner.search.techniques import variant_of

# "The next GPU up", as a rule: the catalog accelerator of the same vendor with at least this much more memory and
# no less dense BF16 peak, memory bandwidth, scale-up interconnect bandwidth or scale-up domain; of those the
# smallest memory tier (the least memory, and any within the same step of it), the cheapest of that tier.
NEXT_GPU_MEMORY_STEP = 1.10
NEXT_GPU_RULE = (
    "the catalog accelerator of the same vendor with at least 10% more memory and no less BF16 peak, memory "
    "bandwidth, scale-up bandwidth or scale-up domain (GPUs per node); of those, the one with the least memory, "
    "any within 10% of it counting as a tie that the lower reference $/hour breaks"
)
MORE_GPUS_FACTOR = 16  # more GPUs: counts up to 16x the current (at least 64 GPUs)
MORE_GPUS_FLOOR = 64
MAX_SUGGESTED_GPUS = 8192
MAX_PIPELINE_STAGES = 32
MAX_CONTEXT_PARALLEL = 8
COUNTS_PER_PASS = 4  # GPU counts evaluated per sweep pass, fewest first: a pass that fits ends the search
PLANS_PER_PICK = 6  # rows the sweep ranks first that are planned in full before a search gives up

Planned = tuple[Any, Any]  # (changed scenario, its full static plan)


CostBasis = Literal["usd_per_million_output_tokens", "usd_total"]


def cost_column(scenario) -> CostBasis:
    """The sweep column suggestions are ranked by: $ per 1M output tokens (inference), $ for the run (training)."""
    return "usd_per_million_output_tokens" if scenario.kind == "inference" else "usd_total"


def plan_cost(scenario, result) -> float:
    """The same figure read off a full plan."""
    return result.cost.usd_per_million_output_tokens if scenario.kind == "inference" else result.cost.usd_total


def planned(scenario, calibration, changes: dict[str, Any]) -> Planned | None:
    """(scenario with `changes`, its static plan) when it is valid and fits; None otherwise."""
    try:
        changed = variant_of(scenario, **changes)
        result = static_plan(changed, calibration)
    except (ValidationError, PlanningError):
        return None
    return (changed, result) if result.memory.fits else None


# ------------------------------------------------------------------------------------------- next GPU up


def next_gpu_up(accel: Accelerator, catalog: Iterable[Accelerator] | None = None) -> Accelerator | None:
    """The next GPU up from `accel` under NEXT_GPU_RULE; None when the catalog has none (or `accel` is custom)."""
    if accel.vendor == "custom":
        return None

    def no_less(other: Accelerator) -> bool:
        return (
            other.peak_flops("bf16") >= accel.peak_flops("bf16")
            and other.memory_bandwidth_bytes_per_second >= accel.memory_bandwidth_bytes_per_second
            and other.interconnect_bandwidth_bytes_per_second >= accel.interconnect_bandwidth_bytes_per_second
            and other.gpus_per_node >= accel.gpus_per_node
        )

    larger = [
        a
        for a in (catalog if catalog is not None else list_accelerators())
        if a.vendor == accel.vendor and a.memory_bytes >= NEXT_GPU_MEMORY_STEP * accel.memory_bytes and no_less(a)
    ]
    if not larger:
        return None
    least = min(a.memory_bytes for a in larger)
    tier = [a for a in larger if a.memory_bytes <= NEXT_GPU_MEMORY_STEP * least]
    return min(tier, key=lambda a: (a.reference_usd_per_hour, a.memory_bytes))


# ------------------------------------------------------------------------------------------- layouts


def larger_counts(num_gpus: int) -> list[int]:
    """GPU counts above `num_gpus`, fewest first: every multiple up to 8x, and powers of two up to
    max(16x, 64) (capped at MAX_SUGGESTED_GPUS)."""
    limit = min(max(MORE_GPUS_FACTOR * num_gpus, MORE_GPUS_FLOOR), MAX_SUGGESTED_GPUS)
    multiples = [num_gpus * k for k in range(2, 9)]
    return sorted({n for n in multiples + powers_of_two(limit) if num_gpus < n <= limit})


def _degrees(upto: int, extra: int) -> list[int]:
    """Powers of two up to `upto`, plus `extra` (the scenario's own degree) when it is within reach."""
    return sorted(set(powers_of_two(max(upto, 1))) | ({extra} if extra <= upto else set()))


def _expert_degrees(arch, upto: int, current: int) -> list[int]:
    if not arch.is_moe:
        return [1]
    return [e for e in _degrees(upto, current) if arch.num_experts % e == 0]


def layout_frame(scenario, gpu_id: str, accel: Accelerator, counts: Iterable[int]) -> pd.DataFrame:
    """Every TP x PP (x EP for MoE; x CP and interleaved stages for training) layout that tiles each count.

    TP up to the GPU's scale-up domain (at least DEFAULT_GPUS_PER_NODE), PP up to MAX_PIPELINE_STAGES and the
    model's layers, CP up to MAX_CONTEXT_PARALLEL, EP over the experts; powers of two plus the scenario's own
    degrees. Combinations the validator refuses are left to the sweep to flag.
    """
    arch = scenario.architecture()
    training = scenario.kind == "training"
    tp_limit = max(DEFAULT_GPUS_PER_NODE, accel.gpus_per_node)
    rows = []
    for n in counts:
        for tp in _degrees(min(n, tp_limit), scenario.tensor_parallel):
            for pp in _degrees(min(n // tp, arch.num_layers, MAX_PIPELINE_STAGES), scenario.pipeline_parallel):
                cps = (
                    _degrees(min(n // (tp * pp), MAX_CONTEXT_PARALLEL), scenario.context_parallel) if training else [1]
                )
                for cp in cps:
                    if n % (tp * pp * cp):
                        continue
                    # Inference: experts span a pipeline stage's GPUs; training: they are carved out of DP.
                    reach = n // (tp * pp * cp) if training else n // pp
                    for ep in _expert_degrees(arch, reach, scenario.expert_parallel):
                        row = dict(gpu=gpu_id, num_gpus=n, tensor_parallel=tp, pipeline_parallel=pp, expert_parallel=ep)
                        if not training:
                            rows.append(row)
                            continue
                        for vpp in unique([1, scenario.virtual_pipeline_stages] if pp > 1 else [1]):
                            rows.append({**row, "context_parallel": cp, "virtual_pipeline_stages": vpp})
    return pd.DataFrame(rows)


def _evaluate(scenario, frame: pd.DataFrame, calibration) -> pd.DataFrame:
    if scenario.kind == "inference":
        return sweep.evaluate_inference(scenario, frame, calibration)
    return sweep.evaluate_training(scenario, frame, calibration)


def _row_changes(scenario, row: pd.Series) -> dict[str, Any]:
    """The scenario fields a sweep row sets (training: data parallelism follows the GPU count)."""
    columns = ["num_gpus", "tensor_parallel", "pipeline_parallel", "expert_parallel"]
    changes: dict[str, Any] = {c: int(row[c]) for c in columns}
    if scenario.kind == "training":
        changes |= {c: int(row[c]) for c in ("context_parallel", "virtual_pipeline_stages")}
        changes["data_parallel"] = None
    return changes


def best_layout(scenario, frame: pd.DataFrame, calibration, *, exclude: dict[str, Any] | None = None) -> Planned | None:
    """The fitting row with the fewest GPUs, then the lowest cost, planned in full (the next rows if the full
    plan disagrees); `exclude`: a layout not to answer with (the scenario's own)."""
    if frame.empty:
        return None
    result = _evaluate(scenario, frame, calibration)
    fitting = result[result["valid"] & result["fits"]].sort_values(["num_gpus", cost_column(scenario)], kind="stable")
    for _, row in fitting.head(PLANS_PER_PICK).iterrows():
        changes = _row_changes(scenario, row)
        if exclude is not None and all(changes.get(k) == v for k, v in exclude.items()):
            continue
        found = planned(scenario, calibration, changes)
        if found is not None:
            return found
    return None


def _current_layout(scenario) -> dict[str, Any]:
    keys = ["num_gpus", "tensor_parallel", "pipeline_parallel", "expert_parallel"]
    if scenario.kind == "training":
        keys += ["context_parallel", "virtual_pipeline_stages"]
    return {k: getattr(scenario, k) for k in keys}


def layout_on_same_gpus(scenario, calibration=None) -> Planned | None:
    """The cheapest other layout (TP/PP/EP, and CP for training) that fits on the same GPUs."""
    accel = scenario.accelerator()
    frame = layout_frame(scenario, scenario.gpu_id(), accel, [scenario.num_gpus])
    # Same count: sort by cost only (num_gpus is constant), the scenario's own layout left out.
    return best_layout(scenario, frame, calibration, exclude=_current_layout(scenario))


def fewest_gpus(scenario, counts: list[int], calibration=None) -> Planned | None:
    """The fewest GPUs of the scenario's kind among `counts` with a layout that fits, the cheapest such layout;
    counts are swept COUNTS_PER_PASS at a time, fewest first."""
    accel = scenario.accelerator()
    for start in range(0, len(counts), COUNTS_PER_PASS):
        chunk = counts[start : start + COUNTS_PER_PASS]
        found = best_layout(scenario, layout_frame(scenario, scenario.gpu_id(), accel, chunk), calibration)
        if found is not None:
            return found
    return None


def more_gpus(scenario, calibration=None) -> Planned | None:
    """More GPUs of the kind chosen: the fewest above today's count that fit with some layout."""
    return fewest_gpus(scenario, larger_counts(scenario.num_gpus), calibration)


def on_next_gpu(scenario, calibration=None) -> tuple[Accelerator | None, Planned | None]:
    """The next GPU up (NEXT_GPU_RULE) and the cheapest layout of it on the same count of GPUs, else on the
    fewest more that fit (the more-GPUs counts); priced at its catalog reference (a $/GPU-hour override was for
    the other GPU)."""
    if not isinstance(scenario.gpu, str):
        return None, None
    target = next_gpu_up(scenario.accelerator())
    if target is None:
        return None, None
    try:
        moved = variant_of(scenario, gpu=target.id, usd_per_gpu_hour=None)
    except (ValidationError, PlanningError):
        return target, None
    return target, fewest_gpus(moved, [scenario.num_gpus, *larger_counts(scenario.num_gpus)], calibration)


# ------------------------------------------------------------------------------------------- precision


def narrower_formats(current: str, choices: Iterable[str]) -> list[str]:
    """Formats with fewer bytes per value than `current`, mildest first (the dtype table's order: fp8, int8,
    then the 4-bit formats nvfp4, mxfp4, int4)."""
    return [d for d in FORMATS if d in choices and BYTES_PER_ELEMENT[d] < BYTES_PER_ELEMENT[current]]


def format_rank(dtype: str) -> int:
    """Position in the dtype table, widest first: how much a format gives up (higher: lossier)."""
    return list(FORMATS).index(dtype)


def precision_variants(scenario, calibration=None) -> list[Planned]:
    """Inference: narrower weight and KV-cache formats that fit, swept together, each answer planned in full.

    Offered (KV formats read by FP4 tensor cores only on a GPU that has them): the mildest weight format that fits alone; the cheapest one that fits alone, when it is another;
    the mildest KV format that fits alone; and when neither fits alone, the mildest pair that fits.
    """
    if scenario.kind != "inference":
        return []
    accel = scenario.accelerator()
    weights = narrower_formats(scenario.weight_dtype, FORMATS)
    # A KV format read by FP4 tensor cores (nvfp4: TensorRT-LLM on Blackwell only) is offered only on a GPU with them.
    # Only KV formats the scenario's engine caches K/V in (int4 KV is LMDeploy's and llama.cpp's, not vLLM's).
    caches = [
        k
        for k in narrower_formats(scenario.kv_cache_dtype, KV_DTYPES)
        if (FORMATS[k].tensor_core != "fp4" or accel.supports("fp4")) and kv_format_served(k, str(scenario.runtime))
    ]
    pairs = [(w, k) for w in [scenario.weight_dtype, *weights] for k in [scenario.kv_cache_dtype, *caches]][1:]
    if not pairs:
        return []
    frame = pd.DataFrame(pairs, columns=["weight_dtype", "kv_cache_dtype"])
    result = sweep.evaluate_inference(scenario, frame, calibration)
    fitting = result[result["valid"] & result["fits"]]
    weight_only = fitting[fitting["kv_cache_dtype"] == scenario.kv_cache_dtype]
    kv_only = fitting[fitting["weight_dtype"] == scenario.weight_dtype]
    picks: list[tuple[str, str]] = []
    if not weight_only.empty:
        picks.append((weight_only.iloc[0]["weight_dtype"], scenario.kv_cache_dtype))  # rows are mildest first
        cheapest = weight_only.sort_values("usd_per_million_output_tokens", kind="stable").iloc[0]
        picks.append((cheapest["weight_dtype"], scenario.kv_cache_dtype))
    if not kv_only.empty:
        picks.append((scenario.weight_dtype, kv_only.iloc[0]["kv_cache_dtype"]))
    if not picks and not fitting.empty:
        ranked = fitting.assign(
            loss=[format_rank(w) + format_rank(k) for w, k in zip(fitting["weight_dtype"], fitting["kv_cache_dtype"])]
        )
        mildest = ranked.sort_values(["loss", "usd_per_million_output_tokens"], kind="stable").iloc[0]
        picks.append((mildest["weight_dtype"], mildest["kv_cache_dtype"]))
    found = (planned(scenario, calibration, {"weight_dtype": w, "kv_cache_dtype": k}) for w, k in unique(picks))
    return [f for f in found if f is not None]


# ------------------------------------------------------------------------------------------- fewer users


def fewer_users(scenario, base, calibration=None) -> Planned | None:
    """Inference: the most sequences in flight that fit on the same GPUs (the plan's own `max_concurrency`,
    stepped down until the full plan fits)."""
    if scenario.kind != "inference":
        return None
    most = min(base.memory.max_concurrency or 0, scenario.concurrency - 1)
    while most >= 1:
        found = planned(scenario, calibration, {"concurrency": most})
        if found is not None:
            return found
        most = most * 9 // 10 if most > 10 else most - 1
    return None

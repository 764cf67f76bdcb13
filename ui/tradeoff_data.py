"""The Trade-offs page's tables and chart data, built from engine results (planner.search: technique effects,
diagnosis, checklist, alternatives, grid search). Presentation only: display units (GiB, ms), column names,
chart labels. No Streamlit here, and nothing is planned here: every number is an engine output.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from planner import units
from planner.search.constraints import pareto_front
from planner.search.grid_search import Fixed, InferenceObjective, TrainingObjective
from planner.search.techniques import decode_point
from planner.search.words import signed
from planner.units import GIB
from ui.text import resource_label

COST_TEXT = "Δ cost"  # the cost delta as money text beside the numeric column

# Charts label at most this many points (the lower-left frontier first); the rest say who they are on hover.
MAX_LABELS = 6

# ---------------------------------------------------------------------------------------------
# technique table


def time_unit(kind: str) -> tuple[str, float]:
    """(label, seconds -> display factor) of the 'time' of a technique: TPOT in ms or step time in s."""
    return ("TPOT (ms)", 1e3) if kind == "inference" else ("step time (s)", 1.0)


def columns(kind: str) -> dict[str, str]:
    """Display column names of the technique table (units in the names)."""
    time_label, _ = time_unit(kind)
    return {
        "memory": "Δ memory per GPU (GiB)",
        "time": f"Δ {time_label}",
        "ttft": "Δ TTFT (ms)",
        "throughput": "Δ output tokens/s" if kind == "inference" else "Δ tokens/s",
        "cost": "Δ $ per 1M output tokens" if kind == "inference" else "Δ cost to train ($)",
    }


def technique_frame(kind: str, effects, link_for) -> pd.DataFrame:
    """One row per applicable technique; numbers are the engine's deltas in display units.

    `link_for(scenario_dict) -> url` turns an effect's full alternative scenario into a share link.
    """
    names = columns(kind)
    _, factor = time_unit(kind)
    rows = []
    for e in effects:
        if not e.applicable:
            continue
        row = {
            "Technique": e.technique,
            "Variant": e.variant,
            names["memory"]: e.delta_memory_bytes / GIB,
            names["time"]: e.delta_time_seconds * factor,
        }
        if kind == "inference":
            row[names["ttft"]] = e.delta_ttft_seconds * 1e3
        row[names["throughput"]] = e.delta_throughput
        row[names["cost"]] = e.delta_cost
        row[COST_TEXT] = signed(e.delta_cost, units.usd)
        row.update(
            {
                "Changes numerics?": e.changes_numerics,
                "Fits after?": "n/a" if e.fits_after is None else ("yes" if e.fits_after else "no"),
                "Estimate": "derived from this plan's terms" if e.derived else "full plan",
                "Relieves": e.relieves,
                "Costs": e.costs,
                "Watch": e.watch,
                "Open as plan": link_for(e.scenario) if e.scenario else None,
            }
        )
        rows.append(row)
    return pd.DataFrame(rows)


def inapplicable(effects) -> list[tuple[str, str, str]]:
    return [(e.technique, e.variant, e.reason) for e in effects if not e.applicable]


def relief_parts(kind: str, effect) -> list[str]:
    """'memory −15.9 GiB', 'TPOT −13.9 ms', ... for one relief line."""
    time_label, _ = time_unit(kind)
    return [
        f"memory {signed(effect.delta_memory_bytes, units.gib)}",
        f"{time_label.split(' (')[0]} {signed(effect.delta_time_seconds, units.seconds)}",
        f"throughput {signed(effect.delta_throughput, units.count)} tokens/s",
        f"cost {signed(effect.delta_cost, units.usd)}",
    ]


# ---------------------------------------------------------------------------------------------
# chart data


def _group_labels(frame: pd.DataFrame, x: str, y: str, label: str, chosen: pd.Series) -> pd.Series:
    """The label of each chosen point; points at the same position (fp8 and int8 weights) share one: 'a / b'."""
    keys = list(zip(frame[x].round(6), frame[y].round(9)))
    first: dict[Any, int] = {}
    joined: dict[Any, list[str]] = {}
    for index, (key, text) in enumerate(zip(keys, frame[label])):
        first.setdefault(key, index)
        joined.setdefault(key, []).append(text)
    return pd.Series(
        [" / ".join(joined[k]) if first[k] == i and chosen.iloc[i] else "" for i, k in enumerate(keys)],
        index=frame.index,
    )


def _frontier_mask(frame: pd.DataFrame, minimize: list[str], limit: int = MAX_LABELS) -> pd.Series:
    """True for the points worth a label: the Pareto frontier of `minimize`, at most `limit` of them
    (the first by the first column)."""
    front = pareto_front(frame, minimize=minimize).sort_values(minimize[0]).head(limit)
    return pd.Series(frame.index.isin(front.index), index=frame.index)


def short_label(e) -> str:
    """A chart label: the variant without its explanation in parentheses; 'weights bf16 → fp8' -> 'weights fp8'."""
    text = e.variant.split(" (")[0]
    for prefix in ("weights ", "KV "):
        if text.startswith(prefix) and " → " in text:
            text = prefix + text.rsplit(" → ", 1)[1]
    return text if len(text) <= 34 else text[:32] + "…"


def technique_points(kind: str, effects, base_plan) -> pd.DataFrame:
    """Chart data: each applicable technique's deltas and the absolute position it moves the plan to.

    Only the lower-left frontier (less memory and less time than any other point) is labelled; every point
    has a tooltip.
    """
    _, factor = time_unit(kind)
    base_memory = base_plan.memory.total_bytes
    base_time = base_plan.performance.tpot_seconds if kind == "inference" else base_plan.performance.step_seconds
    rows = []
    for e in effects:
        if not e.applicable:
            continue
        rows.append(
            {
                "technique": e.technique,
                "variant": e.variant,
                "short": short_label(e),
                "numerics": "changes numerics" if e.changes_numerics else "resource use only",
                "estimate": "derived" if e.derived else "full plan",
                "d_memory_gib": e.delta_memory_bytes / GIB,
                "d_time": e.delta_time_seconds * factor,
                "d_time_pct": e.delta_time_seconds / base_time * 100 if base_time else 0.0,
                "memory_gib": (base_memory + e.delta_memory_bytes) / GIB,
                "time": (base_time + e.delta_time_seconds) * factor,
                "base_memory_gib": base_memory / GIB,
                "base_time": base_time * factor,
                "d_memory_text": signed(e.delta_memory_bytes, units.gib),
                "d_time_text": signed(e.delta_time_seconds, units.seconds),
                "time_text": units.seconds(base_time + e.delta_time_seconds),
                "d_cost_text": signed(e.delta_cost, units.usd),
                "fits": "n/a" if e.fits_after is None else ("yes" if e.fits_after else "no"),
            }
        )
    frame = pd.DataFrame(rows)
    if len(frame):
        chosen = _frontier_mask(frame, ["d_memory_gib", "d_time"])
        frame["label"] = _group_labels(frame, "d_memory_gib", "d_time", "short", chosen)
        frame["position_label"] = _group_labels(frame, "memory_gib", "time", "short", chosen)
    return frame


def roofline_moves(effects, base_plan) -> tuple[dict, pd.DataFrame]:
    """Inference: this plan's decode step and each planned technique's (the engine's `decode_after`) on the
    roofline. Derived techniques have no alternative plan and are left out; the fastest few are labelled."""

    def point(r) -> dict:
        return {
            "intensity": r.arithmetic_intensity_flops_per_byte,
            "tflops": r.achieved_flops_per_second / 1e12,
            "binding": resource_label(r.binding),
        }

    here = decode_point(base_plan)
    base = point(here) if here is not None else {"intensity": float("nan"), "tflops": float("nan"), "binding": ""}
    rows = []
    for e in effects:
        if not e.applicable or e.decode_after is None:
            continue
        rows.append(
            {
                **point(e.decode_after),
                "variant": e.variant,
                "short": short_label(e),
                "numerics": "changes numerics" if e.changes_numerics else "resource use only",
                "base_intensity": base["intensity"],
                "base_tflops": base["tflops"],
            }
        )
    frame = pd.DataFrame(rows)
    if len(frame):
        chosen = pd.Series(frame.index.isin(frame["tflops"].nlargest(MAX_LABELS).index), index=frame.index)
        frame["label"] = _group_labels(frame, "intensity", "tflops", "short", chosen)
    return base, frame


# ---------------------------------------------------------------------------------------------
# constrained search: words and tables (the search itself is planner.search.grid_search)


OBJECTIVES: dict[InferenceObjective, str] = {
    "usd_per_million_output_tokens": "lowest $ per 1M output tokens",
    "tpot_seconds": "lowest time per output token",
    "ttft_seconds": "lowest time to first token",
    "usd_per_hour": "lowest $ per hour",
    "num_gpus": "fewest GPUs",
}
TRAINING_OBJECTIVES: dict[TrainingObjective, str] = {
    "usd_total": "cost to train",
    "time_to_train_seconds": "time to train",
}
FIXED: dict[Fixed, str] = {"latency": "fixed latency", "cost": "fixed cost", "memory": "fixed memory"}
FIXED_BOUND = {"latency": "TPOT ≤ (ms)", "cost": "$ per 1M ≤", "memory": "GiB per GPU ≤"}
# A bound typed in FIXED_BOUND's display unit -> the engine's unit (seconds, $ per 1M, bytes).
FIXED_TO_ENGINE = {"latency": 1e-3, "cost": 1.0, "memory": GIB}


def powers_of_two(lo: int, hi: int) -> list[int]:
    """Widget stops: lo..hi in powers of two."""
    values, v = [], 1
    while v <= hi:
        if v >= lo:
            values.append(v)
        v *= 2
    return values


def row_label(row) -> str:
    layout = f"TP{int(row['tensor_parallel'])}"
    if int(row["pipeline_parallel"]) > 1:
        layout += f" PP{int(row['pipeline_parallel'])}"
    if int(row["expert_parallel"]) > 1:
        layout += f" EP{int(row['expert_parallel'])}"
    return (
        f"{int(row['num_gpus'])}× {row['gpu']} {layout}, weights {row['weight_dtype']}, KV {row['kv_cache_dtype']}, "
        f"{int(row['concurrency']):,} in flight"
    )


def _same_as(frame: pd.DataFrame) -> list[str]:
    """'' or '+3 equivalent': how many configurations with identical outputs a row stands for."""
    counts = frame["equivalent_rows"] if "equivalent_rows" in frame else pd.Series(1, index=frame.index)
    return [f"+{int(n) - 1} equivalent" if n > 1 else "" for n in counts]


def result_table(frame: pd.DataFrame, link_for_row) -> pd.DataFrame:
    """Display rows (units in the column names) with a link that opens each configuration as a full plan."""
    out = pd.DataFrame(
        {
            "GPU": frame["gpu"],
            "GPUs": frame["num_gpus"].astype(int),
            "TP": frame["tensor_parallel"].astype(int),
            "PP": frame["pipeline_parallel"].astype(int),
            "EP": frame["expert_parallel"].astype(int),
            "Weights": frame["weight_dtype"],
            "KV cache": frame["kv_cache_dtype"],
            "Concurrency": frame["concurrency"].astype(int),
            "Memory per GPU (GiB)": frame["total_bytes"] / GIB,
            "TTFT (ms)": frame["ttft_seconds"] * 1e3,
            "TPOT (ms)": frame["tpot_seconds"] * 1e3,
            "Output tokens/s": frame["output_tokens_per_second"],
            "$ per hour": frame["usd_per_hour"],
            "$ per 1M output tokens": frame["usd_per_million_output_tokens"],
            "Same outputs as": _same_as(frame),
        }
    )
    out["Open as plan"] = [link_for_row(row) for _, row in frame.iterrows()]
    return out.reset_index(drop=True)


SLO_METRIC_WORDS = {"ttft": ("TTFT", "ms", 1e3), "tpot": ("TPOT", "ms", 1e3), "itl": ("ITL", "ms", 1e3),
                    "e2e_latency": ("end-to-end", "s", 1.0), "queue": ("queue", "s", 1.0)}  # fmt: skip


def slo_column_label(column: str) -> tuple[str, float]:
    """'p99_ttft_seconds' -> ('p99 TTFT (ms)', 1e3): the column's display name and the factor from seconds."""
    percentile, metric = column.removesuffix("_seconds").split("_", 1)
    word, unit, factor = SLO_METRIC_WORDS[metric]
    return f"{percentile} {word} ({unit})", factor


def slo_result_table(frame: pd.DataFrame, slo, link_for_row) -> pd.DataFrame:
    """The SLO search's answers: layout, GPUs, $ per hour, the simulated p99 TTFT/TPOT (and every other percentile
    the SLO targets), SLO attainment, goodput, and a link that opens each as a full plan with the stream."""
    out = pd.DataFrame(
        {
            "Layout": [row_label(r) for _, r in frame.iterrows()],
            "GPUs": frame["num_gpus"].astype(int),
            "$ per hour": frame["usd_per_hour"].astype(float),
        }
    )
    percentiles = dict.fromkeys(
        ["p99_ttft_seconds", "p99_tpot_seconds", *(f"p{slo.percentile_of(m)}_{m}" for m in slo.targets)]
    )
    for column in percentiles:
        label, factor = slo_column_label(column)
        out[label] = frame[column].astype(float) * factor
    out["SLO attainment (%)"] = frame["slo_attainment"].astype(float) * 100
    out["Goodput (req/s)"] = frame["goodput_requests_per_second"].astype(float)
    out["Open as plan"] = [link_for_row(row) for _, row in frame.iterrows()]
    return out.reset_index(drop=True)


def frontier_points(result, best: pd.Series | None, sample: int = 1500) -> dict[str, pd.DataFrame]:
    """Chart data for the Pareto chart: feasible cloud (sampled), frontier, best point."""

    def points(frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty:
            return pd.DataFrame(columns=["tpot_ms", "usd_per_million", "gpu", "config", "memory", "ttft", "tps"])
        return pd.DataFrame(
            {
                "tpot_ms": frame["tpot_seconds"] * 1e3,
                "usd_per_million": frame["usd_per_million_output_tokens"],
                "gpu": frame["gpu"],
                "config": [row_label(r) for _, r in frame.iterrows()],
                "memory": [units.gib(v) for v in frame["total_bytes"]],
                "ttft": [units.seconds(v) for v in frame["ttft_seconds"]],
                "tps": [units.count(v) for v in frame["output_tokens_per_second"]],
            }
        )

    cloud = result.feasible
    if len(cloud) > sample:
        cloud = cloud.sample(sample, random_state=0)
    best_frame = points(best.to_frame().T) if best is not None else points(pd.DataFrame())
    return {"cloud": points(cloud), "frontier": points(result.frontier), "best": best_frame}


def training_result_table(frame: pd.DataFrame, link_for_row) -> pd.DataFrame:
    out = pd.DataFrame(
        {
            "GPU": frame["gpu"],
            "GPUs": frame["num_gpus"].astype(int),
            "TP": frame["tensor_parallel"].astype(int),
            "PP": frame["pipeline_parallel"].astype(int),
            "DP": frame["data_parallel"].astype(int),
            "ZeRO": frame["zero_stage"].astype(int),
            "Recompute": frame["activation_checkpointing"],
            "Micro-batch": frame["micro_batch_size"].astype(int),
            "Memory per GPU (GiB)": frame["total_bytes"] / GIB,
            "Step (s)": frame["step_seconds"],
            "MFU (%)": frame["mfu"] * 100,
            "Time to train (days)": frame["time_to_train_seconds"] / 86400,
            "Cost to train ($)": frame["usd_total"],
            "Cost to train": [units.usd(v) for v in frame["usd_total"]],
            "Same outputs as": _same_as(frame),
        }
    )
    out["Open as plan"] = [link_for_row(row) for _, row in frame.iterrows()]
    return out.reset_index(drop=True)

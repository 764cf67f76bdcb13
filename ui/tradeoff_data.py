"""The Trade-offs page's data: technique tables, the checklist in words, simpler alternatives, the search grid.

Pure functions over planner.tradeoffs / planner.sweep results (no Streamlit; ``ui.state`` caches the
expensive ones). Nothing here re-derives physics: every number is an engine output, converted to display
units (GiB, ms) or put into a sentence through planner.units.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import pandas as pd
from pydantic import ValidationError

from planner import PlanningError, plan, units
from planner.model.architecture import parameter_counts
from planner.model.catalog import catalog_model_ids, model_metadata, resolve_model
from planner.search import constraints, sweep
from planner.search.sweep import unique
from planner.units import GIB
from ui.text import component_label, resource_label

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


def _group_labels(frame: pd.DataFrame, x: str, y: str, label: str) -> pd.Series:
    """Points at the same position (e.g. fp8 and int8 weights) share one label: 'a / b'."""
    keys = list(zip(frame[x].round(6), frame[y].round(9)))
    first: dict[Any, int] = {}
    joined: dict[Any, list[str]] = {}
    for index, (key, text) in enumerate(zip(keys, frame[label])):
        first.setdefault(key, index)
        joined.setdefault(key, []).append(text)
    return pd.Series([" / ".join(joined[k]) if first[k] == i else "" for i, k in enumerate(keys)], index=frame.index)


def short_label(e) -> str:
    """A chart label: the variant without its explanation in parentheses; 'weights bf16 → fp8' -> 'weights fp8'."""
    text = re.sub(r"^(weights|KV) \S+ → (\S+)$", r"\1 \2", e.variant.split(" (")[0])
    return text if len(text) <= 34 else text[:32] + "…"


def technique_points(kind: str, effects, base_plan) -> pd.DataFrame:
    """Chart data: each applicable technique's deltas and the absolute position it moves the plan to."""
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
        frame["label"] = _group_labels(frame, "d_memory_gib", "d_time", "short")
        frame["position_label"] = _group_labels(frame, "memory_gib", "time", "short")
    return frame


def signed(value: float, formatter) -> str:
    """'+1.2 GiB' / '−3.4 ms' / '0'."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if value == 0:
        return "±0"
    return ("+" if value > 0 else "−") + formatter(abs(value))


def roofline_moves(effects, base_plan, plan_for) -> tuple[dict, pd.DataFrame]:
    """Inference: this plan's decode step and each technique's (from its full alternative plan) on the roofline.

    `plan_for(scenario_dict) -> Plan` plans an alternative (cached by the caller). Derived techniques have no
    alternative plan and are left out.
    """

    def point(p) -> dict:
        d = p.performance.decode
        return {
            "intensity": d.flops / d.bytes,
            "tflops": d.flops / d.seconds / 1e12,
            "binding": resource_label(d.binding),
        }

    base = point(base_plan)
    rows = []
    for e in effects:
        if not e.applicable or e.derived or not e.scenario:
            continue
        try:
            alt_plan = plan_for(e.scenario)
        except (ValidationError, PlanningError):
            continue
        d = alt_plan.performance.decode
        if not (d.flops and d.bytes and d.seconds):
            continue
        rows.append(
            {
                **point(alt_plan),
                "variant": e.variant,
                "short": short_label(e),
                "numerics": "changes numerics" if e.changes_numerics else "resource use only",
                "base_intensity": base["intensity"],
                "base_tflops": base["tflops"],
            }
        )
    frame = pd.DataFrame(rows)
    if len(frame):
        frame["label"] = _group_labels(frame, "intensity", "tflops", "short")
    return base, frame


# ---------------------------------------------------------------------------------------------
# diagnosis and checklist


MEMORY_WORDS = {
    "weights": "parameters (weights)",
    "gradients": "gradients",
    "gradient_accumulation": "gradient accumulation buffer",
    "optimizer_states": "optimizer state",
    "master_weights": "fp32 master weights",
    "sharding_buffers": "ZeRO/FSDP buffers",
    "activations": "activations",
    "kv_cache": "KV cache",
    "logits": "logits",
    "runtime_overhead": "runtime overhead (CUDA context, allocator)",
    "lora": "LoRA adapters and their optimizer state",
}


def memory_words(name: str) -> str:
    key = name.removesuffix("_bytes")
    return MEMORY_WORDS.get(key, component_label(key).lower())


def share_rows(shares: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(
        ((k.removesuffix("_bytes").removesuffix("_seconds"), v) for k, v in shares.items() if v > 0),
        key=lambda kv: -kv[1],
    )


def kv_exceeds_weights(plan) -> tuple[float, float] | None:
    """(kv bytes, weight bytes) per GPU when a serving plan's KV cache is larger than its weights."""
    if plan.kind != "inference":
        return None
    kv = plan.memory.components.get("kv_cache_bytes", 0.0)
    weights = plan.memory.components.get("weights_bytes", 0.0)
    return (kv, weights) if kv > weights > 0 else None


@dataclass(frozen=True)
class Answer:
    question: str
    answer: str
    level: str = "info"  # info | warning


@dataclass(frozen=True)
class Simpler:
    """What a smaller catalog model or a shorter context would do on the same GPUs and layout."""

    current_params: int
    smaller_tried: int = 0
    largest_fitting: tuple[str, str, int, float] | None = None  # id, name, params, headroom fraction
    smallest: tuple[str, str, int, bool] | None = None  # id, name, params, fits
    longest_context: int | None = None  # tokens per sequence (inference) / sequence length (training) that fits
    context_note: str = ""
    notes: list[str] = field(default_factory=list)


@lru_cache(maxsize=1)
def catalog_sizes() -> tuple[tuple[str, str, int], ...]:
    """(id, display name, total parameters) of every catalog model, smallest first."""

    out = []
    for model_id in catalog_model_ids():
        try:
            arch = resolve_model(model_id)
        except PlanningError:
            continue
        out.append((model_id, model_metadata(model_id).get("display_name", model_id), parameter_counts(arch).total))
    return tuple(sorted(out, key=lambda t: t[2]))


def _variant(scenario, **changes):
    return type(scenario).model_validate({**scenario.model_dump(), **changes})


def simpler_alternatives(scenario, calibration=None, base=None) -> Simpler:
    """The largest smaller catalog model that fits on the same GPUs and layout (same workload), the
    smallest catalog model, and the longest context that fits. A few plan() calls; cache the result."""
    base = base if base is not None else plan(scenario, calibration)
    current = base.model.params_total
    smaller = [m for m in catalog_sizes() if m[2] < current and m[0] != scenario.model]
    tried = 0
    largest = None
    for model_id, name, params in reversed(smaller):
        try:
            result = plan(_variant(scenario, model=model_id), calibration)
        except (ValidationError, PlanningError):
            continue
        tried += 1
        if result.memory.fits:
            largest = (model_id, name, params, result.memory.headroom_fraction)
            break
    smallest = None
    if catalog_sizes():
        model_id, name, params = catalog_sizes()[0]
        try:
            fits = plan(_variant(scenario, model=model_id), calibration).memory.fits
        except (ValidationError, PlanningError):
            fits = False
        smallest = (model_id, name, params, fits)
    if scenario.kind == "inference":
        longest = base.memory.max_context_tokens
        note = (
            f"at {scenario.concurrency:,} sequences in flight (engine's max context per sequence, capped at the "
            f"model's {base.model.max_context_tokens:,})"
        )
    else:
        longest, note = _longest_sequence(scenario, calibration, base)
    return Simpler(
        current_params=current,
        smaller_tried=tried,
        largest_fitting=largest,
        smallest=smallest,
        longest_context=longest,
        context_note=note,
    )


def _longest_sequence(scenario, calibration, base) -> tuple[int | None, str]:
    """Training: the longest power-of-two sequence length (same batch, same layout) that fits."""
    limit = base.model.max_context_tokens
    candidates = []
    length = 128
    while length <= limit:
        candidates.append(length)
        length *= 2
    if scenario.sequence_length not in candidates and scenario.sequence_length <= limit:
        candidates.append(scenario.sequence_length)
    best = None
    for length in sorted(candidates):
        try:
            result = plan(_variant(scenario, sequence_length=length), calibration)
        except (ValidationError, PlanningError):
            continue
        if not result.memory.fits:
            break
        best = length
    return best, (
        f"with the same global batch of {scenario.global_batch_size:,} sequences and this layout "
        "(powers of two up to the model's context)"
    )


def checklist(scenario, plan_, diagnosis, effects, simpler: Simpler) -> list[Answer]:
    """The trade-off checklist answered in plain words, with this plan's numbers."""
    kind = plan_.kind
    mem = plan_.memory
    out: list[Answer] = []

    # 1. the bottleneck
    shares = ", ".join(
        f"{component_label(k).lower() if k not in ('memory_bandwidth',) else 'memory traffic'} {units.percent(v)}"
        for k, v in share_rows(diagnosis.time_shares)
    )
    binding = resource_label(diagnosis.binding)
    text = f"**{binding.capitalize()}.** {diagnosis.evidence[0]}"
    if (
        kind == "inference"
        and math.isfinite(diagnosis.arithmetic_intensity_flops_per_byte)
        and "ridge" not in diagnosis.evidence[0]
    ):
        ratio = diagnosis.arithmetic_intensity_flops_per_byte / diagnosis.ridge_point_flops_per_byte
        text += (
            f" Arithmetic intensity {diagnosis.arithmetic_intensity_flops_per_byte:,.0f} FLOP/B is "
            f"{'below' if ratio < 1 else 'above'} the ridge point "
            f"({diagnosis.ridge_point_flops_per_byte:,.0f} FLOP/B)."
        )
    if shares:
        text += f" Time shares: {shares}."
    out.append(Answer("Is the bottleneck capacity, bandwidth, compute or communication?", text))

    # 2. what dominates memory
    ranked = share_rows(diagnosis.memory_shares)
    top, top_share = ranked[0]
    rest = "; ".join(f"{memory_words(k)} {units.percent(v)}" for k, v in ranked[1:4])
    out.append(
        Answer(
            "Which of parameters, gradients, optimizer state, activations or KV cache dominates memory?",
            f"**{memory_words(top).capitalize()}**: {units.percent(top_share)} of {units.gib(mem.total_bytes)} per GPU "
            f"({units.gib(mem.components.get(top + '_bytes', top_share * mem.total_bytes))})."
            + (f" Then {rest}." if rest else ""),
        )
    )

    # 3. numerics vs resource use
    applicable = [e for e in effects if e.applicable]
    numerics = sorted({e.technique for e in applicable if e.changes_numerics})
    resource = sorted({e.technique for e in applicable if not e.changes_numerics})
    out.append(
        Answer(
            "Which proposed techniques change numerics, and which only resource use?",
            (
                f"**Change numerics** (check quality on your evals): {', '.join(numerics)}. "
                if numerics
                else "**None of the proposed techniques changes numerics.** "
            )
            + (f"**Only resource use** (same outputs): {', '.join(resource)}." if resource else ""),
        )
    )

    # 4. the real constraint
    out.append(
        Answer("Is wall time, cost or the maximum problem size the real constraint?", _real_constraint(scenario, plan_))
    )

    # 5. simpler alternatives
    out.append(
        Answer(
            "Would a smaller catalog model or a shorter context solve it more simply?",
            _simpler_text(scenario, plan_, simpler),
        )
    )

    # 6. fixed quantity
    if kind == "inference":
        fixed = (
            f"Every technique row keeps the model, the workload ({scenario.prompt_tokens:,} prompt + "
            f"{scenario.output_tokens:,} output tokens) and the concurrency ({scenario.concurrency:,} sequences in "
            f"flight) fixed, on {scenario.num_gpus} GPUs unless the technique adds GPUs (TP/PP doubling, a "
            "replica: their extra GPUs show in Δ cost). Memory is per GPU, time is TPOT, cost is $ per 1M output "
            "tokens. The search below compares at the fixed latency, cost or memory you choose."
        )
    else:
        fixed = (
            f"Every technique row keeps the model, the global batch ({scenario.global_batch_size:,} sequences × "
            f"{scenario.sequence_length:,} tokens), the tokens to train ({units.count(scenario.training_tokens)}) "
            f"and the {scenario.num_gpus} GPUs fixed (TP/PP variants trade data parallelism for model "
            "parallelism). Memory is per GPU, time is the optimizer step, cost is $ for the whole run."
        )
    out.append(Answer("At which fixed quantity are the alternatives compared?", fixed))

    # 7. the decision
    decision = (scenario.decision or "").strip()
    page = "Inference" if kind == "inference" else "Training"
    out.append(
        Answer(
            "Which trade-off did you choose?",
            f"“{decision}”"
            if decision
            else f"No decision recorded yet. Write it in **Decision** (sidebar, *Notes for the review*) on the "
            f"{page} page: it travels with the share link, the CSV and the Review page.",
            "info" if decision else "warning",
        )
    )
    return out


def _real_constraint(scenario, p) -> str:
    mem, perf, cost = p.memory, p.performance, p.cost
    if p.kind == "inference":
        timing = (
            f"first token {units.seconds(perf.ttft_seconds)}, then {units.seconds(perf.tpot_seconds)} per token "
            f"({units.count(perf.output_tokens_per_second)} output tokens/s)"
        )
        money = f"{units.usd(cost.usd_per_million_output_tokens)} per 1M output tokens, {units.usd(cost.usd_per_month)}/month"
        if not mem.fits:
            return (
                f"**Maximum problem size.** The plan does not fit: {units.gib(mem.total_bytes)} per GPU against "
                f"{units.gib(mem.budget_bytes)} usable; at most {mem.max_concurrency or 0:,} sequences of this "
                f"length fit (you asked for {scenario.concurrency:,}). Latency ({timing}) and cost ({money}) only "
                "matter once it fits."
            )
        if mem.headroom_fraction < 0.10:
            return (
                f"**Maximum problem size, nearly.** It fits with only {units.percent(mem.headroom_fraction)} headroom "
                f"(max {mem.max_concurrency or 0:,} sequences). Latency: {timing}; cost: {money}."
            )
        target = ""
        if cost.gpus_needed is not None:
            target = (
                f" To serve {scenario.target_requests_per_second:g} requests/s it needs {cost.gpus_needed} GPUs "
                f"(you plan {scenario.num_gpus}), so throughput — i.e. cost — is the constraint."
                if cost.gpus_needed > scenario.num_gpus
                else f" The target of {scenario.target_requests_per_second:g} requests/s needs {cost.gpus_needed} GPUs "
                f"of the {scenario.num_gpus} planned."
            )
        return (
            f"**Not memory**: {units.percent(mem.headroom_fraction)} headroom, room for "
            f"{mem.max_concurrency or 0:,} sequences. So it is **latency or cost**: {timing}, limited by "
            f"{resource_label(p.bottleneck)}; {money}.{target} Set latency and budget targets on the Review page "
            "to get a verdict."
        )
    timing = f"{units.seconds(perf.time_to_train_seconds)} to train at {units.seconds(perf.step_seconds)} per step"
    money = f"{units.usd(cost.usd_total)} ({cost.gpu_hours:,.0f} GPU-hours)"
    if not mem.fits:
        return (
            f"**Maximum problem size.** Each GPU needs {units.gib(mem.total_bytes)} of "
            f"{units.gib(mem.budget_bytes)}; the largest micro-batch that fits is {mem.max_micro_batch_size or 0}. "
            f"Wall time ({timing}) and cost ({money}) only matter once it fits."
        )
    return (
        f"**Not memory** ({units.percent(mem.headroom_fraction)} headroom, micro-batch up to "
        f"{mem.max_micro_batch_size or 0}). **Wall time and cost move together** at a fixed GPU count: {timing}, "
        f"{money}, MFU {units.percent(perf.mfu, 1)}. More GPUs shorten the run at about the same cost while MFU "
        "holds; a higher MFU (the binding resource above) lowers both."
    )


def _simpler_text(scenario, p, simpler: Simpler) -> str:
    parts = []
    fits = p.memory.fits
    if simpler.largest_fitting is not None:
        model_id, name, params, headroom = simpler.largest_fitting
        parts.append(
            f"**{name}** ({units.count(params)} parameters, vs {units.count(simpler.current_params)}) is the "
            f"largest smaller catalog model that fits on the same {scenario.num_gpus} GPUs and layout with "
            f"this workload ({units.percent(headroom)} headroom)."
        )
    elif simpler.smallest is not None:
        model_id, name, params, smallest_fits = simpler.smallest
        parts.append(
            f"No smaller catalog model fits this layout and workload (tried {simpler.smaller_tried})"
            + ("." if not smallest_fits else f"; even so, {name} would.")
        )
    if simpler.longest_context is None and scenario.kind == "training":
        parts.append(f"No sequence length fits: even 128-token sequences do not fit {simpler.context_note}.")
    if simpler.longest_context is not None:
        if scenario.kind == "inference":
            wanted = scenario.prompt_tokens + scenario.output_tokens
            word = "context per sequence"
        else:
            wanted = scenario.sequence_length
            word = "sequence length"
        if simpler.longest_context <= 0:
            parts.append(f"No {word} fits: the weights alone do not fit ({simpler.context_note}).")
        else:
            parts.append(
                f"Longest {word} that fits: **{simpler.longest_context:,} tokens** {simpler.context_note}; "
                f"you asked for {wanted:,}."
            )
    if fits:
        return (
            f"**Not needed: it already fits** ({units.percent(p.memory.headroom_fraction)} headroom); a smaller "
            "model or context would only trade quality for cost. For reference: " + " ".join(parts)
        )
    return " ".join(parts + ["Either is a simpler fix than a technique, if the product can accept it."])


# ---------------------------------------------------------------------------------------------
# constrained search (inference)


OBJECTIVES = {
    "usd_per_million_output_tokens": "lowest $ per 1M output tokens",
    "tpot_seconds": "lowest time per output token",
    "ttft_seconds": "lowest time to first token",
    "usd_per_hour": "lowest $ per hour",
    "num_gpus": "fewest GPUs",
}
FIXED = {"latency": "fixed latency", "cost": "fixed cost", "memory": "fixed memory"}
FIXED_BOUND = {"latency": "TPOT ≤ (ms)", "cost": "$ per 1M ≤", "memory": "GiB per GPU ≤"}
MAX_SEARCH_ROWS = 300_000


@dataclass(frozen=True)
class SearchSpec:
    gpus: tuple[str, ...]
    max_gpus: int
    weight_dtypes: tuple[str, ...]
    kv_cache_dtypes: tuple[str, ...]
    concurrency: tuple[int, int]
    max_ttft_seconds: float | None = None
    max_tpot_seconds: float | None = None
    max_memory_bytes: float | None = None
    max_usd_per_hour: float | None = None
    objective: str = "usd_per_million_output_tokens"
    top: int = 10

    def constraints(self) -> list[tuple[str, str, float]]:
        out = [("num_gpus", "<=", float(self.max_gpus))]
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
        words = {
            "num_gpus": "GPUs",
            "ttft_seconds": "TTFT",
            "tpot_seconds": "TPOT",
            "total_bytes": "memory per GPU",
            "usd_per_hour": "$/hour",
        }
        show = {
            "ttft_seconds": units.seconds,
            "tpot_seconds": units.seconds,
            "total_bytes": units.gib,
            "usd_per_hour": units.usd,
            "num_gpus": lambda v: f"{v:g}",
        }
        return ", ".join(f"{words[c]} ≤ {show[c](v)}" for c, _, v in self.constraints())


def powers_of_two(lo: int, hi: int) -> list[int]:
    values, v = [], 1
    while v <= hi:
        if v >= lo:
            values.append(v)
        v *= 2
    return values


def search_axes(scenario, spec: SearchSpec) -> dict[str, list]:
    """The knobs of planner.sweep.inference_grid for this search."""

    arch = scenario.architecture()
    num_gpus = unique(
        powers_of_two(1, spec.max_gpus) + ([scenario.num_gpus] if scenario.num_gpus <= spec.max_gpus else [])
    )
    tp = powers_of_two(1, min(spec.max_gpus, 16))
    pp = powers_of_two(1, min(spec.max_gpus, 8, arch.num_layers))
    ep = unique([1] + tp) if arch.is_moe else [1]
    lo, hi = spec.concurrency
    concurrency = unique(
        powers_of_two(lo, hi) + [lo, hi] + ([scenario.concurrency] if lo <= scenario.concurrency <= hi else [])
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


def grid_size(axes: dict[str, list]) -> int:
    return math.prod(len(v) for v in axes.values())


@dataclass(frozen=True)
class SearchResult:
    rows: int  # configurations evaluated
    valid: int
    fitting: int
    feasible: pd.DataFrame  # fits and meets every constraint
    top: pd.DataFrame
    frontier: pd.DataFrame  # Pareto: $ per 1M output tokens vs TPOT
    error: str | None = None


def run_search(scenario, spec: SearchSpec, calibration=None) -> SearchResult:
    """Evaluate the grid with planner.sweep, filter with planner.tradeoffs, rank and take the frontier."""

    axes = search_axes(scenario, spec)
    size = grid_size(axes)
    empty = pd.DataFrame()
    if not all(axes.values()):
        return SearchResult(0, 0, 0, empty, empty, empty, "pick at least one GPU type, weight format and KV format")
    if size > MAX_SEARCH_ROWS:
        return SearchResult(
            size,
            0,
            0,
            empty,
            empty,
            empty,
            f"{size:,} configurations is too many (limit {MAX_SEARCH_ROWS:,}); pick fewer GPU types, "
            "formats or a smaller concurrency range",
        )
    grid = sweep.inference_grid(scenario, **axes)
    frame = sweep.evaluate_inference(scenario, grid, calibration)
    feasible = constraints.apply_constraints(frame, spec.constraints())
    top = constraints.search(frame, spec.constraints(), minimize=spec.objective, top=spec.top)
    frontier = constraints.pareto_front(feasible, minimize=["usd_per_million_output_tokens", "tpot_seconds"])
    frontier = frontier.sort_values("tpot_seconds")
    return SearchResult(
        rows=len(frame),
        valid=int(frame["valid"].sum()),
        fitting=int(frame["fits"].sum()),
        feasible=feasible,
        top=top,
        frontier=frontier,
    )


def best_at(result: SearchResult, fixed: str, value: float | None, objective: str) -> pd.Series | None:
    """The best feasible row at a fixed latency (TPOT ≤ value, cheapest), cost ($/1M ≤ value, fastest) or
    memory (GiB per GPU ≤ value, best by the objective)."""
    feasible = result.feasible
    if feasible.empty or value is None:
        return None
    if fixed == "latency":
        rows = feasible[feasible["tpot_seconds"] <= value / 1e3].sort_values(
            ["usd_per_million_output_tokens", "tpot_seconds"]
        )
    elif fixed == "cost":
        rows = feasible[feasible["usd_per_million_output_tokens"] <= value].sort_values(
            ["tpot_seconds", "usd_per_million_output_tokens"]
        )
    else:
        rows = feasible[feasible["total_bytes"] <= value * GIB].sort_values([objective, "num_gpus"])
    return None if rows.empty else rows.iloc[0]


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
        }
    )
    out["Open as plan"] = [link_for_row(row) for _, row in frame.iterrows()]
    return out.reset_index(drop=True)


def frontier_points(result: SearchResult, best: pd.Series | None, sample: int = 1500) -> dict[str, pd.DataFrame]:
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


# --------------------------------------------------------------------------------------------- training search

TRAINING_OBJECTIVES = {"usd_total": "cost to train", "time_to_train_seconds": "time to train"}


@dataclass(frozen=True)
class TrainingSearchSpec:
    gpus: tuple[str, ...]
    max_gpus: int
    zero_stages: tuple[int, ...]
    checkpointing: tuple[str, ...]
    micro_batch_sizes: tuple[int, ...]
    max_days: float | None = None
    max_memory_bytes: float | None = None
    max_usd_total: float | None = None
    objective: str = "usd_total"
    top: int = 10

    def constraints(self) -> list[tuple[str, str, float]]:
        out = [("num_gpus", "<=", float(self.max_gpus))]
        for column, value in (
            ("time_to_train_seconds", None if self.max_days is None else self.max_days * 86400),
            ("total_bytes", self.max_memory_bytes),
            ("usd_total", self.max_usd_total),
        ):
            if value is not None:
                out.append((column, "<=", float(value)))
        return out


def run_training_search(scenario, spec: TrainingSearchSpec, calibration=None) -> SearchResult:
    """planner.search.sweep's training grid (layout x ZeRO x recompute x micro-batch), filtered, ranked, and the
    Pareto frontier of cost to train vs time to train."""

    empty = pd.DataFrame()
    if not (spec.gpus and spec.zero_stages and spec.checkpointing and spec.micro_batch_sizes):
        return SearchResult(
            0, 0, 0, empty, empty, empty, "pick at least one GPU type, ZeRO stage, recompute level and micro-batch size"
        )
    arch = scenario.architecture()
    grid = sweep.training_grid(
        scenario,
        gpus=list(spec.gpus),
        num_gpus=powers_of_two(1, spec.max_gpus),
        tensor_parallel=powers_of_two(1, min(8, spec.max_gpus)),
        pipeline_parallel=[p for p in powers_of_two(1, min(16, spec.max_gpus)) if p <= arch.num_layers],
        zero_stages=list(spec.zero_stages),
        checkpointing=list(spec.checkpointing),
        micro_batch_sizes=list(spec.micro_batch_sizes),
    )
    if len(grid) > MAX_SEARCH_ROWS:
        return SearchResult(
            len(grid),
            0,
            0,
            empty,
            empty,
            empty,
            f"{len(grid):,} configurations is too many (limit {MAX_SEARCH_ROWS:,}); pick fewer options",
        )
    frame = sweep.evaluate_training(scenario, grid, calibration)
    feasible = constraints.apply_constraints(frame, spec.constraints())
    top = constraints.search(frame, spec.constraints(), minimize=spec.objective, top=spec.top)
    frontier = constraints.pareto_front(feasible, minimize=["usd_total", "time_to_train_seconds"])
    return SearchResult(
        rows=len(frame),
        valid=int(frame["valid"].sum()),
        fitting=int(frame["fits"].sum()),
        feasible=feasible,
        top=top,
        frontier=frontier.sort_values("time_to_train_seconds"),
    )


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
        }
    )
    out["Open as plan"] = [link_for_row(row) for _, row in frame.iterrows()]
    return out.reset_index(drop=True)

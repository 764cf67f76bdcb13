"""Suggestions that fix a plan that does not fit, ranked by cost, each a full scenario that validates and fits and
the dashboard link that opens it.

Kinds: another layout on the same GPUs (TP/PP/EP, and CP for training), more GPUs of the kind chosen (the fewest
that fit with some layout), the next GPU up (`fix_search.NEXT_GPU_RULE`, the fewest of it that fit), a narrower
number format (inference: fp8 before int8 before the 4-bit formats), fewer users (inference: sequences in flight),
a shorter context, the techniques of `planner.search.diagnosis` that fit alone (layout and number-format techniques
are left to the searches, which cover them), the training plan's largest micro-batch that fits, and a smaller
catalog model.

Ranking (stated in `Suggestions.ranked_by`): by cost, in two tiers. First the changes that keep the model and
the workload (layout, GPUs, number format, techniques), then those that change what is served (fewer users, a
shorter context, a smaller model). Cost: inference $ per 1M output tokens (the GPUs' $/hour over the output
tokens/s the plan serves: what serving the same load costs); training the $ of the whole run. Within the ranking
a lossier number format never comes before a milder one that also fits.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from planner.plan import static_plan, without_traffic
from planner.scenario_base import revised
from planner.search import fix_search
from planner.search.alternatives import Alternative, alternatives
from planner.search.diagnosis import is_absurd, techniques
from planner.search.nearest import alternative_label, fitting_techniques, micro_batch_what_if
from planner.search.techniques import TechniqueEffect
from planner.share import share_url
from planner.units import count, gib, seconds, usd

FixKind = Literal[
    "layout",
    "more_gpus",
    "next_gpu",
    "precision",
    "fewer_users",
    "shorter_context",
    "technique",
    "smaller_model",
]
# Kinds that change what is served (the second tier of the ranking).
CHANGES_WORKLOAD = ("fewer_users", "shorter_context", "smaller_model")
MAX_TECHNIQUES = 3
DEFAULT_APP_URL = "http://localhost:8501"
# Fields the layout and GPU searches and the number-format sweep own: a technique that only changes these is
# answered by them already.
SEARCHED_FIELDS = frozenset(
    {
        "num_gpus",
        "tensor_parallel",
        "pipeline_parallel",
        "expert_parallel",
        "context_parallel",
        "data_parallel",
        "weight_dtype",
        "kv_cache_dtype",
    }
)
IGNORED_FIELDS = ("label", "decision", "traffic")
FIELD_WORDS = {
    "num_gpus": "GPUs",
    "gpu": "GPU",
    "tensor_parallel": "TP",
    "pipeline_parallel": "PP",
    "expert_parallel": "EP",
    "context_parallel": "CP",
    "data_parallel": "DP",
    "virtual_pipeline_stages": "interleaved stages",
    "weight_dtype": "weights",
    "kv_cache_dtype": "KV cache",
    "concurrency": "users (sequences in flight)",
    "prompt_tokens": "prompt tokens",
    "sequence_length": "sequence length",
    "micro_batch_size": "micro-batch",
    "usd_per_gpu_hour": "$/GPU-hour",
    "zero_stage": "ZeRO stage",
}
RANKED_BY = {
    "inference": "$ per 1M output tokens (the GPUs' $/hour over the output tokens/s each plan serves: what serving "
    "the same load costs)",
    "training": "the cost of the whole run ($/hour x the time to train the same tokens)",
}
TIERS = (
    "; changes that keep the model and the workload come first, those that change what is served (fewer users, "
    "a shorter context, a smaller model) after; a lossier number format never ranks above a milder one that fits"
)


class Suggestion(BaseModel):
    """One change that makes the plan fit: what it changes, what it costs, its headline, its scenario and link."""

    model_config = ConfigDict(frozen=True)

    kind: FixKind
    label: str
    summary: str  # what changes, in words
    changes: dict[str, tuple[Any, Any]]  # field -> (before, after); training DP is the plan's derived degree
    cost: float  # in `Suggestions.cost_basis`
    usd_per_hour: float
    headroom_bytes: float  # free per GPU under the plan's memory budget
    headline: str  # fits: memory of budget (X free); tokens/s and TPOT (inference) or step and time to train; the cost
    output_tokens_per_second: float | None = None
    tpot_seconds: float | None = None
    step_seconds: float | None = None
    time_to_train_seconds: float | None = None
    scenario: dict[str, Any]  # the full scenario (JSON mode; the request stream kept): open it as its own plan
    link: str  # the dashboard's share link for it


class Suggestions(BaseModel):
    """The ranked suggestions for one scenario that does not fit, how they are ranked, and what found nothing."""

    model_config = ConfigDict(frozen=True)

    cost_basis: fix_search.CostBasis
    ranked_by: str
    next_gpu_rule: str
    next_gpu: str | None  # the catalog id the rule picks for this scenario's GPU
    items: list[Suggestion]
    not_found: list[str]  # one sentence per search that found nothing that fits


# ------------------------------------------------------------------------------------------- building one


def _changes(before, after) -> dict[str, tuple[Any, Any]]:
    old, new = before.model_dump(mode="json"), after.model_dump(mode="json")
    out = {k: (old[k], new[k]) for k in new if k not in IGNORED_FIELDS and old.get(k) != new[k]}
    if before.kind == "training":
        out.pop("data_parallel", None)
        if before.dp != after.dp:
            out["data_parallel"] = (before.dp, after.dp)
    return out


def changes_words(changes: dict[str, tuple[Any, Any]]) -> str:
    """'TP 1 → 8, PP 1 → 4, DP 256 → 8' (None reads as 'catalog')."""

    def text(value: Any) -> str:
        if value is None:
            return "catalog"
        return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)

    parts = [
        f"{FIELD_WORDS.get(k, k.replace('_', ' '))} {text(a)} → {text(b)}"
        for k, (a, b) in changes.items()
        if not isinstance(a, dict) and not isinstance(b, dict)
    ]
    return ", ".join(parts) or "the model or GPU (inline config)"


def headline(kind: str, result) -> str:
    """'fits: 28.6 GiB of 79.6 GiB per GPU (51.1 GiB free); …' with the plan's speed and cost."""
    mem = result.memory
    free = f"fits: {gib(mem.total_bytes)} of {gib(mem.budget_bytes)} per GPU ({gib(mem.headroom_bytes)} free)"
    if kind == "inference":
        perf, cost = result.performance, result.cost
        return (
            f"{free}; {count(perf.output_tokens_per_second)} output tokens/s, TPOT {seconds(perf.tpot_seconds)}; "
            f"{usd(cost.usd_per_million_output_tokens)} per 1M output tokens ({usd(cost.usd_per_hour)}/h)"
        )
    perf, cost = result.performance, result.cost
    return (
        f"{free}; step {seconds(perf.step_seconds)}, {seconds(perf.time_to_train_seconds)} to train; "
        f"{usd(cost.usd_total)} for the run ({usd(cost.usd_per_hour)}/h)"
    )


def _with_stream(original, changed):
    """The changed static scenario with the original's request stream put back (validated)."""
    if getattr(original, "traffic", None) is None:
        return changed
    return type(changed).model_validate({**changed.model_dump(), "traffic": original.traffic})


def suggestion(kind: FixKind, label: str, original, changed, result, app_url: str = DEFAULT_APP_URL) -> Suggestion:
    """One suggestion from a changed static scenario and its full plan (which fits)."""
    full = _with_stream(original, changed)
    changes = _changes(without_traffic(original), changed)
    perf = result.performance
    inference = original.kind == "inference"
    return Suggestion(
        kind=kind,
        label=label,
        summary=changes_words(changes),
        changes=changes,
        cost=fix_search.plan_cost(changed, result),
        usd_per_hour=result.cost.usd_per_hour,
        headroom_bytes=result.memory.headroom_bytes,
        headline=headline(original.kind, result),
        output_tokens_per_second=perf.output_tokens_per_second if inference else None,
        tpot_seconds=perf.tpot_seconds if inference else None,
        step_seconds=None if inference else perf.step_seconds,
        time_to_train_seconds=None if inference else perf.time_to_train_seconds,
        scenario=full.model_dump(mode="json"),
        link=share_url(full, app_url),
    )


# ------------------------------------------------------------------------------------------- labels


def layout_words(scenario) -> str:
    """'TP 8 · PP 4' (EP, CP and interleaved stages when above 1; training adds DP; inference its replicas)."""
    parts = [f"TP {scenario.tensor_parallel}", f"PP {scenario.pipeline_parallel}"]
    if scenario.expert_parallel > 1:
        parts.append(f"EP {scenario.expert_parallel}")
    if scenario.kind == "training":
        if scenario.context_parallel > 1:
            parts.append(f"CP {scenario.context_parallel}")
        if scenario.virtual_pipeline_stages > 1:
            parts.append(f"{scenario.virtual_pipeline_stages} interleaved stages")
        parts.append(f"DP {scenario.dp}")
    elif scenario.replicas > 1:
        parts.append(f"{scenario.replicas} replicas")
    return " · ".join(parts)


def _gpu_name(scenario) -> str:
    return scenario.accelerator().name


def _precision_label(before, after) -> str:
    parts = []
    if after.weight_dtype != before.weight_dtype:
        parts.append(f"weights {before.weight_dtype} → {after.weight_dtype}")
    if after.kv_cache_dtype != before.kv_cache_dtype:
        parts.append(f"KV {before.kv_cache_dtype} → {after.kv_cache_dtype}")
    return " + ".join(parts)


# ------------------------------------------------------------------------------------------- the searches


def _search_suggestions(original, static, base, calibration, app_url: str) -> tuple[list[Suggestion], list[str]]:
    """Layout on the same GPUs, more GPUs, the next GPU up, number formats and fewer users."""
    found: list[Suggestion] = []
    missing: list[str] = []
    gpus = f"{static.num_gpus:,} × {_gpu_name(static)}"

    def add(kind: FixKind, label: str, answer) -> None:
        found.append(suggestion(kind, label, original, *answer, app_url=app_url))

    layout = fix_search.layout_on_same_gpus(static, calibration)
    if layout is not None:
        add("layout", f"{layout_words(layout[0])} on the same {gpus}", layout)
    else:
        missing.append(f"No other layout fits on the same {gpus}.")
    more = fix_search.more_gpus(static, calibration)
    if more is not None:
        add("more_gpus", f"{more[0].num_gpus:,} × {_gpu_name(static)} ({layout_words(more[0])})", more)
    else:
        largest = fix_search.larger_counts(static.num_gpus)[-1:] or [static.num_gpus]
        missing.append(f"No layout fits on up to {largest[0]:,} × {_gpu_name(static)}.")
    target, moved = fix_search.on_next_gpu(static, calibration)
    if moved is not None:
        add("next_gpu", f"{moved[0].num_gpus:,} × {_gpu_name(moved[0])} ({layout_words(moved[0])})", moved)
    elif target is None:
        missing.append(f"No next GPU up from {_gpu_name(static)} in the catalog ({fix_search.NEXT_GPU_RULE}).")
    else:
        missing.append(f"The next GPU up, {target.name}, fits with no layout the search tried.")
    for answer in fix_search.precision_variants(static, calibration):
        add("precision", _precision_label(static, answer[0]), answer)
    fewer = fix_search.fewer_users(static, base, calibration)
    if fewer is not None:
        add("fewer_users", f"{fewer[0].concurrency:,} users instead of {static.concurrency:,}", fewer)
    return found, missing


def _technique_suggestions(
    original, static, base, effects: list[TechniqueEffect], calibration, app_url: str
) -> list[Suggestion]:
    """The training plan's largest micro-batch that fits, then the techniques that fit alone (not absurdly
    slower; those that only change searched fields are left to the searches), cheapest first."""
    time = base.performance.tpot_seconds if static.kind == "inference" else base.performance.step_seconds
    answers: list[tuple[FixKind, str, Any]] = []
    micro = micro_batch_what_if(static, base)
    if micro is not None:
        answers.append(("technique", micro.label, micro.scenario))
    before = static.model_dump(mode="json")
    for e in fitting_techniques(effects):
        changed = {k for k, v in (e.scenario or {}).items() if before.get(k) != v and k not in IGNORED_FIELDS}
        if is_absurd(e, time) or not changed or changed <= SEARCHED_FIELDS:
            continue
        answers.append(("precision" if "precision" in changed else "technique", e.variant, e.scenario))
    out = []
    for kind, label, data in answers:
        found = fix_search.planned(static, calibration, _field_changes(static, data))
        if found is not None:
            out.append(suggestion(kind, label, original, *found, app_url=app_url))
    return sorted(out, key=_cost_key)[: MAX_TECHNIQUES + (micro is not None)]


def _alternative_suggestions(original, static, simpler: list[Alternative], calibration, app_url: str):
    out = []
    for a in simpler:
        if not a.fits:
            continue
        found = fix_search.planned(static, calibration, _field_changes(static, a.scenario))
        kind: FixKind = "smaller_model" if a.kind == "smaller_model" else "shorter_context"
        if found is not None:
            out.append(suggestion(kind, alternative_label(static, a), original, *found, app_url=app_url))
    return out


def _field_changes(static, data: dict[str, Any]) -> dict[str, Any]:
    """The fields of a JSON-mode scenario that differ from `static`'s (so `variant_of` keeps the rest typed)."""
    before = static.model_dump(mode="json")
    return {k: v for k, v in data.items() if k not in IGNORED_FIELDS and before.get(k) != v}


# ------------------------------------------------------------------------------------------- ranking


def _cost_key(s: Suggestion) -> tuple[float, float]:
    return (s.cost if math.isfinite(s.cost) else math.inf), -s.headroom_bytes


def _format_loss(s: Suggestion) -> int:
    data = s.scenario
    if data.get("kind") != "inference":
        return 0
    return fix_search.format_rank(data["weight_dtype"]) + fix_search.format_rank(data["kv_cache_dtype"])


def rank(items: list[Suggestion]) -> list[Suggestion]:
    """Two tiers by cost (see the module docstring), number formats milder first among their own places, and
    the same scenario only once (its first place)."""
    ranked = sorted(items, key=lambda s: (s.kind in CHANGES_WORKLOAD, *_cost_key(s)))
    slots = [i for i, s in enumerate(ranked) if s.kind == "precision"]
    for i, s in zip(slots, sorted((ranked[i] for i in slots), key=_format_loss)):
        ranked[i] = s
    seen: set[str] = set()
    out = []
    for s in ranked:
        key = repr(sorted((k, repr(v)) for k, v in s.scenario.items() if k not in IGNORED_FIELDS))
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def suggest_fixes(
    scenario,
    calibration=None,
    *,
    base=None,
    effects: list[TechniqueEffect] | None = None,
    simpler: list[Alternative] | None = None,
    app_url: str = DEFAULT_APP_URL,
) -> Suggestions:
    """The suggestions that make `scenario` fit (static plans: its request stream is kept in each answer but not
    simulated), ranked. `base`, `effects`, `simpler`: the static plan, technique effects and alternatives when
    the caller has them; `app_url`: the dashboard the links open. A plan that fits gets no suggestions."""
    static = without_traffic(scenario)
    base = base if base is not None else static_plan(static, calibration)
    target = fix_search.next_gpu_up(static.accelerator()) if isinstance(static.gpu, str) else None
    none = Suggestions(
        cost_basis=fix_search.cost_column(static),
        ranked_by=f"Ranked by {RANKED_BY[static.kind]}{TIERS}.",
        next_gpu_rule=fix_search.NEXT_GPU_RULE,
        next_gpu=target.id if target is not None else None,
        items=[],
        not_found=["The plan fits: nothing to fix."],
    )
    if base.memory.fits:
        return none
    effects = effects if effects is not None else techniques(static, calibration)
    simpler = simpler if simpler is not None else alternatives(static, calibration, base=base)
    searched, missing = _search_suggestions(scenario, static, base, calibration, app_url)
    items = [
        *searched,
        *_technique_suggestions(scenario, static, base, effects, calibration, app_url),
        *_alternative_suggestions(scenario, static, simpler, calibration, app_url),
    ]
    return revised(none, items=rank(items), not_found=missing)

"""The trade-off checklist answered for one scenario, in plain words with the plan's numbers.

Seven questions (the bottleneck, what dominates memory, which techniques change numerics, the real
constraint, simpler alternatives, the fixed quantity of the comparison, the decision). Each answer is
a short headline plus the sentences behind it, so a UI can set the headline in bold and a CLI can
print both as they are. Every number is an output of `plan()`, `diagnose()`, the technique effects
or `alternatives()`.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

from planner.plan import static_plan as make_plan
from planner.search.alternatives import SHORTEST_SEQUENCE_TOKENS, Alternative
from planner.search.alternatives import alternatives as find_alternatives
from planner.search.diagnosis import Diagnosis, diagnose, techniques
from planner.search.techniques import TechniqueEffect
from planner.search.words import capitalized, component_words, ranked_shares, resource_words
from planner.units import count, gib, percent, seconds, usd

Topic = Literal["bottleneck", "memory", "numerics", "constraint", "simpler", "fixed_quantity", "decision"]

QUESTIONS: dict[str, str] = {
    "bottleneck": "Is the bottleneck capacity, bandwidth, compute or communication?",
    "memory": "Which of parameters, gradients, optimizer state, activations or KV cache dominates memory?",
    "numerics": "Which proposed techniques change numerics, and which only resource use?",
    "constraint": "Is wall time, cost or the maximum problem size the real constraint?",
    "simpler": "Would a smaller catalog model or a shorter context solve it more simply?",
    "fixed_quantity": "At which fixed quantity are the alternatives compared?",
    "decision": "Which trade-off did you choose?",
}


class ChecklistItem(BaseModel):
    model_config = ConfigDict(frozen=True)

    topic: Topic
    question: str
    headline: str  # the answer in a few words
    detail: str = ""  # the numbers behind it
    level: Literal["info", "warning"] = "info"  # warning: the reviewer still has to act


class Checklist(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["inference", "training"]
    items: list[ChecklistItem]


def checklist(
    scenario,
    calibration=None,
    *,
    base=None,
    effects: list[TechniqueEffect] | None = None,
    diagnosis: Diagnosis | None = None,
    alternatives: list[Alternative] | None = None,
) -> Checklist:
    """The checklist for `scenario`. The keyword arguments take results the caller has already computed
    (this scenario's plan, technique effects, diagnosis, alternatives); missing ones are computed here."""
    base = base if base is not None else make_plan(scenario, calibration)
    effects = effects if effects is not None else techniques(scenario, calibration)
    diagnosis = diagnosis if diagnosis is not None else diagnose(scenario, calibration, effects=effects)
    alternatives = alternatives if alternatives is not None else find_alternatives(scenario, calibration, base)
    answers = [
        _bottleneck(base, diagnosis),
        _memory(base, diagnosis),
        _numerics(effects),
        _constraint(scenario, base),
        _simpler(scenario, base, alternatives),
        _fixed_quantity(scenario),
        _decision(scenario),
    ]
    items = [
        ChecklistItem(topic=topic, question=QUESTIONS[topic], headline=headline, detail=detail, level=level)
        for topic, headline, detail, level in answers
    ]
    return Checklist(kind=scenario.kind, items=items)


Answer = tuple[Topic, str, str, Literal["info", "warning"]]


def _bottleneck(p, diagnosis: Diagnosis) -> Answer:
    detail = diagnosis.evidence[0]
    intensity, ridge = diagnosis.arithmetic_intensity_flops_per_byte, diagnosis.ridge_point_flops_per_byte
    if p.kind == "inference" and math.isfinite(intensity) and ridge > 0 and "ridge" not in detail:
        side = "below" if intensity < ridge else "above"
        detail += f" Arithmetic intensity {intensity:,.0f} FLOP/B is {side} the ridge point ({ridge:,.0f} FLOP/B) of this GPU."
    shares = ", ".join(f"{component_words(k)} {percent(v)}" for k, v in ranked_shares(diagnosis.time_shares))
    if shares:
        detail += f" Time shares: {shares}."
    return "bottleneck", f"{capitalized(resource_words(diagnosis.binding))}.", detail, "info"


def _memory(p, diagnosis: Diagnosis) -> Answer:
    mem = p.memory
    ranked = ranked_shares(diagnosis.memory_shares)
    top, share = ranked[0]
    rest = "; ".join(f"{component_words(k)} {percent(v)}" for k, v in ranked[1:4])
    detail = f"{percent(share)} of {gib(mem.total_bytes)} per GPU ({gib(mem.components[top + '_bytes'])})."
    if rest:
        detail += f" Then {rest}."
    return "memory", f"{capitalized(component_words(top))}.", detail, "info"


def _numerics(effects: list[TechniqueEffect]) -> Answer:
    applicable = [e for e in effects if e.applicable]
    numerics = sorted({e.technique for e in applicable if e.changes_numerics})
    resource = sorted({e.technique for e in applicable if not e.changes_numerics})
    headline = (
        f"Change numerics (check quality on your evals): {', '.join(numerics)}."
        if numerics
        else "None of the proposed techniques changes numerics."
    )
    detail = f"Only resource use (same outputs): {', '.join(resource)}." if resource else ""
    return "numerics", headline, detail, "info"


def _constraint(scenario, p) -> Answer:
    mem, perf, cost = p.memory, p.performance, p.cost
    if p.kind == "inference":
        timing = (
            f"first token {seconds(perf.ttft_seconds)}, then {seconds(perf.tpot_seconds)} per token "
            f"({count(perf.output_tokens_per_second)} output tokens/s)"
        )
        money = f"{usd(cost.usd_per_million_output_tokens)} per 1M output tokens, {usd(cost.usd_per_month)}/month"
        if not mem.fits:
            return (
                "constraint",
                "Maximum problem size.",
                f"The plan does not fit: {gib(mem.total_bytes)} per GPU against {gib(mem.budget_bytes)} usable; at "
                f"most {mem.max_concurrency or 0:,} sequences of this length fit (you asked for "
                f"{scenario.concurrency:,}). Latency ({timing}) and cost ({money}) only matter once it fits.",
                "info",
            )
        if mem.headroom_fraction < 0.10:
            return (
                "constraint",
                "Maximum problem size, nearly.",
                f"It fits with only {percent(mem.headroom_fraction)} headroom (max {mem.max_concurrency or 0:,} "
                f"sequences). Latency: {timing}; cost: {money}.",
                "info",
            )
        target = ""
        if cost.gpus_needed is not None:
            rps = scenario.target_requests_per_second
            target = (
                f" To serve {rps:g} requests/s it needs {cost.gpus_needed} GPUs (you plan {scenario.num_gpus}), so "
                "throughput, that is cost, is the constraint."
                if cost.gpus_needed > scenario.num_gpus
                else f" The target of {rps:g} requests/s needs {cost.gpus_needed} GPUs of the {scenario.num_gpus} "
                "planned."
            )
        return (
            "constraint",
            "Not memory: latency or cost.",
            f"{percent(mem.headroom_fraction)} headroom, room for {mem.max_concurrency or 0:,} sequences. "
            f"Latency: {timing}, limited by {resource_words(p.bottleneck)}; cost: {money}.{target} Set latency and "
            "budget targets to get a verdict.",
            "info",
        )
    timing = f"{seconds(perf.time_to_train_seconds)} to train at {seconds(perf.step_seconds)} per step"
    money = f"{usd(cost.usd_total)} ({cost.gpu_hours:,.0f} GPU-hours)"
    if not mem.fits:
        return (
            "constraint",
            "Maximum problem size.",
            f"Each GPU needs {gib(mem.total_bytes)} of {gib(mem.budget_bytes)}; the largest micro-batch that fits "
            f"is {mem.max_micro_batch_size or 0}. Wall time ({timing}) and cost ({money}) only matter once it fits.",
            "info",
        )
    return (
        "constraint",
        "Not memory: wall time and cost, which move together at a fixed GPU count.",
        f"{percent(mem.headroom_fraction)} headroom, micro-batch up to {mem.max_micro_batch_size or 0}. {timing}, "
        f"{money}, MFU {percent(perf.mfu, 1)}. More GPUs shorten the run at about the same cost while MFU holds; a "
        "higher MFU (relieve the binding resource) lowers both.",
        "info",
    )


def _simpler(scenario, p, alternatives: list[Alternative]) -> Answer:
    by_kind = {a.kind: a for a in alternatives}
    parts = []
    smaller = by_kind.get("smaller_model")
    parts.append(
        smaller.summary if smaller else "No smaller catalog model fits on the same GPUs and layout with this workload."
    )
    context = by_kind.get("longest_context")
    if context is not None:
        parts.append(context.summary)
    elif scenario.kind == "inference":
        parts.append(
            f"No context with {scenario.output_tokens:,} output tokens fits at {scenario.concurrency:,} sequences in "
            f"flight (the largest context per sequence is {p.memory.max_context_tokens or 0:,} tokens)."
        )
    else:
        parts.append(
            f"No sequence length fits, not even {SHORTEST_SEQUENCE_TOKENS:,} tokens, with the same global batch and "
            "layout."
        )
    if p.memory.fits:
        return (
            "simpler",
            f"Not needed: it already fits ({percent(p.memory.headroom_fraction)} headroom).",
            "A smaller model or context would only trade quality for cost. For reference: " + " ".join(parts),
            "info",
        )
    found = smaller is not None or context is not None
    headline = "Yes, if the product can accept it." if found else "No: neither fits."
    tail = " Either is a simpler fix than a technique." if smaller is not None and context is not None else ""
    return "simpler", headline, " ".join(parts) + tail, "info"


def _fixed_quantity(scenario) -> Answer:
    if scenario.kind == "inference":
        return (
            "fixed_quantity",
            "The model, the workload and the concurrency.",
            f"Every technique keeps the model, the workload ({scenario.prompt_tokens:,} prompt + "
            f"{scenario.output_tokens:,} output tokens) and the concurrency ({scenario.concurrency:,} sequences in "
            f"flight) fixed, on {scenario.num_gpus} GPUs unless the technique adds GPUs (TP/PP doubling, a replica: "
            "their extra GPUs show in the cost delta). Memory is per GPU, time is TPOT, cost is $ per 1M output "
            "tokens. A constrained search compares at a fixed latency, cost or memory instead.",
            "info",
        )
    return (
        "fixed_quantity",
        "The model, the global batch, the tokens to train and the GPU count.",
        f"Every technique keeps the model, the global batch ({scenario.global_batch_size:,} sequences × "
        f"{scenario.sequence_length:,} tokens), the tokens to train ({count(scenario.training_tokens)}) and the "
        f"{scenario.num_gpus} GPUs fixed (TP/PP variants trade data parallelism for model parallelism). Memory is per "
        "GPU, time is the optimizer step, cost is $ for the whole run.",
        "info",
    )


def _decision(scenario) -> Answer:
    decision = (scenario.decision or "").strip()
    if decision:
        return "decision", f"“{decision}”", "", "info"
    return (
        "decision",
        "No decision recorded yet.",
        "Write it in the scenario's decision: it travels with the share link, the CSV export and the review.",
        "warning",
    )

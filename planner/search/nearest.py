"""The nearest plans that fit, for a plan that does not: the single techniques that make it fit (each a full
plan, least extra cost first), the training plan's own largest micro-batch that fits (same global batch), then
the simpler alternatives that fit (a smaller model, the longest context: `planner.search.alternatives`).

Each answer carries its whole scenario (JSON mode) so a UI can open it as a plan and the CLI can print it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from planner.plan import static_plan
from planner.search.alternatives import Alternative, alternatives
from planner.search.diagnosis import techniques
from planner.search.techniques import TechniqueEffect, variant_of

NEAREST_MAX = 4  # answers in all; the simpler alternatives always stay, techniques fill the rest


class NearestPlan(BaseModel):
    """One nearby plan that fits: a short label, what it changes, and the changed scenario."""

    model_config = ConfigDict(frozen=True)

    kind: str  # "technique", "micro_batch", "smaller_model" or "longest_context"
    label: str
    summary: str
    scenario: dict[str, Any]


def fitting_techniques(effects: list[TechniqueEffect]) -> list[TechniqueEffect]:
    """The techniques whose full plan fits, least extra cost first, then least extra time (derived estimates,
    which have no plan to open, are left out)."""
    fitting = [e for e in effects if e.applicable and e.fits_after and e.scenario and not e.derived]
    return sorted(fitting, key=lambda e: (e.delta_cost, e.delta_time_seconds))


def micro_batch_what_if(scenario, base) -> NearestPlan | None:
    """Training: the largest micro-batch the plan's own table found to fit, with the same global batch (more
    gradient-accumulation steps); None for inference or when no micro-batch fits."""
    fitting = [o for o in getattr(base, "micro_batch_options", []) if o.fits]
    if not fitting:
        return None
    best = max(fitting, key=lambda o: o.micro_batch_size)
    return NearestPlan(
        kind="micro_batch",
        label=f"micro-batch {best.micro_batch_size}",
        summary=f"Gradient accumulation: {best.gradient_accumulation_steps} steps of {best.micro_batch_size} for the "
        "same global batch",
        scenario=variant_of(scenario, micro_batch_size=best.micro_batch_size).model_dump(mode="json"),
    )


def alternative_label(scenario, a: Alternative) -> str:
    """'Mistral 7B v0.1 instead' / '912-token context' / 'sequence length 2,048'."""
    if a.kind == "smaller_model":
        return f"{a.model_name} instead"
    if scenario.kind == "inference":
        return f"{a.context_tokens:,}-token context"
    return f"sequence length {a.context_tokens:,}"


def nearest_fitting(
    scenario,
    calibration=None,
    *,
    base=None,
    effects: list[TechniqueEffect] | None = None,
    simpler: list[Alternative] | None = None,
    limit: int = NEAREST_MAX,
) -> list[NearestPlan]:
    """The nearest plans that fit (static plans: a request stream is left out), at most `limit`: techniques
    (the micro-batch what-if first), then every simpler alternative that fits. `base`, `effects` and `simpler`:
    the scenario's static plan, technique effects and alternatives when the caller has them already."""
    base = base if base is not None else static_plan(scenario, calibration)
    effects = effects if effects is not None else techniques(scenario, calibration)
    simpler = simpler if simpler is not None else alternatives(scenario, calibration, base=base)
    found = [
        NearestPlan(kind="technique", label=e.variant, summary=e.technique, scenario=e.scenario or {})
        for e in fitting_techniques(effects)
    ]
    micro = micro_batch_what_if(scenario, base)
    if micro is not None:
        found.insert(0, micro)
    others = [
        NearestPlan(kind=a.kind, label=alternative_label(scenario, a), summary=a.summary, scenario=a.scenario)
        for a in simpler
        if a.fits
    ]
    return found[: limit - len(others)] + others

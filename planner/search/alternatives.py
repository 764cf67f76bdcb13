"""Simpler alternatives to a technique: a smaller catalog model, or a different context, on the same GPUs and
layout with the same workload. Each is a full `plan()` of a changed scenario (built with `model_validate`),
returned with that scenario so a UI can open it and a CLI can print it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from planner.errors import PlanningError
from planner.model.architecture import parameter_counts
from planner.model.catalog import catalog_model_ids, model_metadata, resolve_model
from planner.plan import static_plan as make_plan
from planner.search.techniques import variant_of
from planner.units import count, percent

# Training sequence lengths tried: powers of two from here up to the model's context.
SHORTEST_SEQUENCE_TOKENS = 128


class Alternative(BaseModel):
    """One simpler change and what the full plan of it says (memory per GPU against the same budget)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["smaller_model", "longest_context"]
    summary: str  # one sentence with the numbers
    model: str  # catalog id of the alternative's model ('custom' for an inline config)
    model_name: str
    params_total: int
    context_tokens: int  # inference: prompt + output tokens per sequence; training: sequence length
    fits: bool
    headroom_fraction: float
    scenario: dict[str, Any]  # the changed scenario (JSON mode): open it as its own plan


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


def _context_of(scenario) -> int:
    if scenario.kind == "inference":
        return scenario.prompt_tokens + scenario.output_tokens
    return scenario.sequence_length


def _planned(scenario, calibration, changes: dict[str, Any]):
    """(changed scenario, its plan), or None when the change is not a valid scenario or cannot be planned."""
    try:
        changed = variant_of(scenario, **changes)
        return changed, make_plan(changed, calibration)
    except (ValidationError, PlanningError):
        return None


def _alternative(kind, summary: str, changed, result) -> Alternative:
    return Alternative(
        kind=kind,
        summary=summary,
        model=changed.model_id(),
        model_name=result.model.name,
        params_total=result.model.params_total,
        context_tokens=_context_of(changed),
        fits=result.memory.fits,
        headroom_fraction=result.memory.headroom_fraction,
        scenario=changed.model_dump(mode="json"),
    )


def largest_smaller_model(scenario, calibration=None, base=None) -> Alternative | None:
    """The largest catalog model with fewer parameters that fits on the same GPUs and layout (same workload)."""
    base = base if base is not None else make_plan(scenario, calibration)
    current = base.model.params_total
    for model_id, name, params in reversed(catalog_sizes()):
        if params >= current or model_id == scenario.model_id():
            continue
        planned = _planned(scenario, calibration, {"model": model_id})
        if planned is None or not planned[1].memory.fits:
            continue
        changed, result = planned
        return _alternative(
            "smaller_model",
            f"{name} ({count(params)} parameters, vs {count(current)}) is the largest smaller catalog model that "
            f"fits on the same {scenario.num_gpus} GPUs and layout with this workload "
            f"({percent(result.memory.headroom_fraction)} headroom).",
            changed,
            result,
        )
    return None


def longest_context(scenario, calibration=None, base=None) -> Alternative | None:
    """The longest context that fits on the same GPUs, layout and model.

    Inference: the engine's largest context per sequence at this concurrency (`memory.max_context_tokens`,
    capped at the model's), with the output length kept and the prompt taking the rest. Training: the
    longest power-of-two sequence length (128 up to the model's context, plus the current one) with the
    same global batch. None when no context fits.
    """
    base = base if base is not None else make_plan(scenario, calibration)
    if scenario.kind == "inference":
        longest = base.memory.max_context_tokens or 0
        prompt = longest - scenario.output_tokens
        planned = _planned(scenario, calibration, {"prompt_tokens": prompt}) if prompt >= 1 else None
        if planned is None:
            return None
        changed, result = planned
        return _alternative(
            "longest_context",
            f"Longest context per sequence that fits: {longest:,} tokens ({prompt:,} prompt + "
            f"{scenario.output_tokens:,} output) at {scenario.concurrency:,} sequences in flight, capped at the "
            f"model's {base.model.max_context_tokens:,}; you asked for {_context_of(scenario):,}.",
            changed,
            result,
        )
    limit = base.model.max_context_tokens
    lengths = {scenario.sequence_length} if scenario.sequence_length <= limit else set()
    length = SHORTEST_SEQUENCE_TOKENS
    while length <= limit:
        lengths.add(length)
        length *= 2
    best = None
    for length in sorted(lengths):
        planned = _planned(scenario, calibration, {"sequence_length": length})
        if planned is None:
            continue
        if not planned[1].memory.fits:
            break
        best = (length, *planned)
    if best is None:
        return None
    length, changed, result = best
    return _alternative(
        "longest_context",
        f"Longest sequence length that fits: {length:,} tokens with the same global batch of "
        f"{scenario.global_batch_size:,} sequences and this layout (powers of two up to the model's "
        f"{limit:,}); you asked for {scenario.sequence_length:,}.",
        changed,
        result,
    )


def alternatives(scenario, calibration=None, base=None) -> list[Alternative]:
    """The largest smaller catalog model that fits, then the longest context that fits (each when one exists).

    `base`: this scenario's plan when the caller has it already (saves one plan() call).
    """
    base = base if base is not None else make_plan(scenario, calibration)
    found = [largest_smaller_model(scenario, calibration, base), longest_context(scenario, calibration, base)]
    return [a for a in found if a is not None]

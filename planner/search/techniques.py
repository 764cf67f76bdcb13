"""A technique's effect on one scenario: the difference of two full plans (shared by inference and
training trade-offs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from planner.errors import PlanningError, explain
from planner.plan import plan as make_plan

RESOURCES = ("capacity", "memory_bandwidth", "compute", "communication")


class TechniqueEffect(BaseModel):
    """One technique applied to the scenario: deltas are (with technique) - (without), per GPU."""

    model_config = ConfigDict(frozen=True)

    technique: str
    variant: str
    applicable: bool
    reason: str = ""  # why it does not apply
    changes_numerics: bool  # quantization, lower-precision communication: the model's outputs change
    relieves: str  # which resource it relieves
    costs: str  # what it pays
    watch: str
    derived: bool = False  # True when computed from the base plan's terms rather than a second full plan
    delta_memory_bytes: float = 0.0
    delta_time_seconds: float = 0.0  # inference: TPOT; training: step time
    delta_ttft_seconds: float = 0.0
    delta_throughput: float = 0.0  # inference: output tokens/s; training: tokens/s
    delta_cost: float = 0.0  # inference: $ per 1M output tokens; training: $ total
    fits_after: bool | None = None
    scenario: dict[str, Any] | None = None


# ---------------------------------------------------------------------------------------------
# helpers


def _variant_of(scenario, **changes):
    """The scenario with `changes`, validated (never model_copy: it would skip validation)."""
    data = scenario.model_dump()
    data.update(changes)
    return type(scenario).model_validate(data)


def _inference_numbers(p) -> dict[str, float]:
    return dict(
        memory=p.memory.total_bytes,
        time=p.performance.tpot_seconds,
        ttft=p.performance.ttft_seconds,
        throughput=p.performance.output_tokens_per_second,
        cost=p.cost.usd_per_million_output_tokens,
        fits=p.memory.fits,
    )


def _effect_from_plans(name, variant, base_numbers, alt_plan, alt_scenario, numbers, **info) -> TechniqueEffect:
    alt = numbers(alt_plan)
    return TechniqueEffect(
        technique=name,
        variant=variant,
        applicable=True,
        delta_memory_bytes=alt["memory"] - base_numbers["memory"],
        delta_time_seconds=alt["time"] - base_numbers["time"],
        delta_ttft_seconds=alt.get("ttft", 0.0) - base_numbers.get("ttft", 0.0),
        delta_throughput=alt["throughput"] - base_numbers["throughput"],
        delta_cost=alt["cost"] - base_numbers["cost"],
        fits_after=alt["fits"],
        scenario=alt_scenario.model_dump(mode="json"),
        **info,
    )


def _try_variant(name, variant, scenario, base_numbers, numbers, changes, calibration, **info) -> TechniqueEffect:
    try:
        alt_scenario = _variant_of(scenario, **changes)
        alt_plan = make_plan(alt_scenario, calibration)
    except (ValidationError, PlanningError) as exc:
        return TechniqueEffect(technique=name, variant=variant, applicable=False, reason=explain(exc), **info)
    return _effect_from_plans(name, variant, base_numbers, alt_plan, alt_scenario, numbers, **info)

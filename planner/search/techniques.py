"""A technique's effect on one scenario: the difference of two full plans (shared by inference and
training trade-offs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from planner.errors import PlanningError, explain
from planner.plan import static_plan as make_plan
from planner.units import seconds

RESOURCES = ("capacity", "memory_bandwidth", "compute", "communication")


class RooflinePoint(BaseModel):
    """Where one step sits on its GPU's roofline (per GPU)."""

    model_config = ConfigDict(frozen=True)

    arithmetic_intensity_flops_per_byte: float
    achieved_flops_per_second: float
    binding: str  # compute | memory_bandwidth | communication


def decode_point(p) -> RooflinePoint | None:
    """An inference plan's decode step on the roofline; None when the step has no work or no time."""
    d = p.performance.decode
    if not (d.flops and d.bytes and d.seconds):
        return None
    return RooflinePoint(
        arithmetic_intensity_flops_per_byte=d.flops / d.bytes,
        achieved_flops_per_second=d.flops / d.seconds,
        binding=d.binding,
    )


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
    scenario: dict[str, Any] | None = None  # the full alternative scenario (JSON mode) for planned effects
    # Inference, planned effects: the alternative plan's decode step (where it sits on the roofline).
    decode_after: RooflinePoint | None = None


# ---------------------------------------------------------------------------------------------
# helpers


def variant_of(scenario, **changes):
    """The scenario with `changes`, validated (never model_copy: it would skip validation)."""
    data = scenario.model_dump()
    data.update(changes)
    return type(scenario).model_validate(data)


def _inference_numbers(p) -> dict[str, Any]:
    return dict(
        decode=decode_point(p),
        memory=p.memory.total_bytes,
        time=p.performance.tpot_seconds,
        ttft=p.performance.ttft_seconds,
        throughput=p.performance.output_tokens_per_second,
        cost=p.cost.usd_per_million_output_tokens,
        fits=p.memory.fits,
    )


def time_change_words(delta_seconds: float, what: str) -> str:
    """'per-token latency improves by 2.61 ms' / 'rises by ...' / 'does not change': the sentence follows the
    sign of the delta it describes, so the words and the number shown beside them always agree."""
    if delta_seconds < 0:
        return f"{what} improves by {seconds(-delta_seconds)}"
    if delta_seconds > 0:
        return f"{what} rises by {seconds(delta_seconds)}"
    return f"{what} does not change"


@dataclass(frozen=True)
class Baseline:
    """What every technique of one scenario is measured against: the scenario, the calibration its variants are
    planned with, its own plan's numbers, and how to read the same numbers off a variant's plan."""

    scenario: Any
    calibration: Any
    numbers: dict[str, Any]
    numbers_of: Callable[[Any], dict[str, Any]]

    def effect(
        self, name: str, variant: str, changes: dict[str, Any], *, costs: str, time_words: str = "", **info
    ) -> TechniqueEffect:
        """The technique as the difference of two full plans: the scenario with `changes` minus the scenario; not
        applicable (with the reason) when the changed scenario is invalid or cannot be planned. `time_words`
        ('per-token latency'), when given, appends what the two plans say about the time to `costs`."""
        try:
            alt_scenario = variant_of(self.scenario, **changes)
            alt_plan = make_plan(alt_scenario, self.calibration)
        except (ValidationError, PlanningError) as exc:
            # No second plan, so no time delta to put into words.
            return TechniqueEffect(
                technique=name, variant=variant, applicable=False, reason=explain(exc), costs=costs, **info
            )
        base, alt = self.numbers, self.numbers_of(alt_plan)
        delta_time = alt["time"] - base["time"]
        return TechniqueEffect(
            technique=name,
            variant=variant,
            applicable=True,
            costs=f"{costs}; {time_change_words(delta_time, time_words)}" if time_words else costs,
            delta_memory_bytes=alt["memory"] - base["memory"],
            delta_time_seconds=delta_time,
            delta_ttft_seconds=alt.get("ttft", 0.0) - base.get("ttft", 0.0),
            delta_throughput=alt["throughput"] - base["throughput"],
            delta_cost=alt["cost"] - base["cost"],
            fits_after=alt["fits"],
            scenario=alt_scenario.model_dump(mode="json"),
            decode_after=alt.get("decode"),
            **info,
        )

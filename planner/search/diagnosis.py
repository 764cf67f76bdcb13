"""Diagnosis: which resource binds this plan, with its evidence, and the techniques that relieve it
best first."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from planner.plan import static_plan as make_plan
from planner.search.inference_tradeoffs import inference_techniques
from planner.search.techniques import TechniqueEffect
from planner.search.training_tradeoffs import training_techniques
from planner.search.words import component_words
from planner.units import gib, percent


class Diagnosis(BaseModel):
    model_config = ConfigDict(frozen=True)

    binding: str
    evidence: list[str]
    memory_shares: dict[str, float]
    time_shares: dict[str, float]
    arithmetic_intensity_flops_per_byte: float
    ridge_point_flops_per_byte: float
    relief: list[TechniqueEffect]  # techniques that relieve the binding resource, best first


def diagnose(scenario, calibration=None, effects: list[TechniqueEffect] | None = None) -> Diagnosis:
    p = make_plan(scenario, calibration)
    effects = effects if effects is not None else techniques(scenario, calibration)
    total = p.memory.total_bytes
    memory_shares = {k.removesuffix("_bytes"): v / total for k, v in p.memory.components.items()}
    evidence = [p.bottleneck_reason]
    if p.kind == "inference":
        phase = p.performance.decode if p.performance.prefill_share_of_time <= 0.5 else p.performance.prefill
        step = phase.compute_bound_seconds + phase.memory_bound_seconds + phase.communication_seconds
        time_shares = {
            "compute": phase.compute_bound_seconds / step,
            "memory_bandwidth": phase.memory_bound_seconds / step,
            "communication": phase.communication_seconds / step,
        }
        intensity = phase.arithmetic_intensity_flops_per_byte
        ridge = p.performance.ridge_point_flops_per_byte
    else:
        breakdown = p.performance.step_breakdown_seconds
        step = sum(breakdown.values()) or 1.0
        time_shares = {k.removesuffix("_seconds"): v / step for k, v in breakdown.items()}
        # A training step is one forward+backward per micro-batch: its roofline point is that phase's.
        intensity = p.performance.forward_backward.arithmetic_intensity_flops_per_byte
        ridge = p.hardware.peak_flops_per_second / p.hardware.memory_bandwidth_bytes_per_second
    dominant = max(p.memory.components, key=p.memory.components.__getitem__)
    evidence.append(
        f"Memory: the largest component is {component_words(dominant)} "
        f"({percent(memory_shares[dominant.removesuffix('_bytes')])} of {gib(total)} per GPU)."
    )
    base_time = p.performance.tpot_seconds if p.kind == "inference" else p.performance.step_seconds
    base_cost = p.cost.usd_per_million_output_tokens if p.kind == "inference" else p.cost.usd_total
    ranked = rank_relief(effects, p.bottleneck, base_time, base_cost)
    return Diagnosis(
        binding=p.bottleneck,
        evidence=evidence,
        memory_shares=memory_shares,
        time_shares=time_shares,
        arithmetic_intensity_flops_per_byte=intensity,
        ridge_point_flops_per_byte=ridge,
        relief=ranked,
    )


# A relief that makes each step this many times slower is a different product, not a fix: it goes last.
ABSURD_SLOWDOWN = 10.0


def relative_penalty(effect: TechniqueEffect, base_time_seconds: float, base_cost: float) -> float:
    """What a technique costs, as fractions of this plan's time and cost added together (negative: it gains).

    Inference: TPOT and $ per 1M output tokens; training: step time and $ total. A zero base counts as no change.
    """
    time = effect.delta_time_seconds / base_time_seconds if base_time_seconds > 0 else 0.0
    cost = effect.delta_cost / base_cost if base_cost > 0 else 0.0
    penalty = time + cost
    return penalty if math.isfinite(penalty) else math.inf


def is_absurd(effect: TechniqueEffect, base_time_seconds: float) -> bool:
    """True when the technique multiplies the step time by ABSURD_SLOWDOWN or more."""
    return base_time_seconds > 0 and effect.delta_time_seconds >= (ABSURD_SLOWDOWN - 1) * base_time_seconds


def rank_relief(
    effects: list[TechniqueEffect], binding: str, base_time_seconds: float, base_cost: float, limit: int = 5
) -> list[TechniqueEffect]:
    """The techniques that relieve the binding resource, best first.

    Capacity: every technique that frees memory, ordered by (not absurdly slower, fits after, smallest
    time + cost penalty, most memory freed): a cheap move that makes the plan fit comes first, and one
    that frees everything at 1000x the latency (dropping the KV cache) comes last even when it is the
    only one that fits. Bandwidth, compute or communication: techniques that keep
    the plan fitting and raise throughput, ordered by (not absurdly slower, no extra cost, smallest
    penalty, largest throughput gain).
    """
    applicable = [e for e in effects if e.applicable]
    if binding == "capacity":
        candidates = [e for e in applicable if e.delta_memory_bytes < 0]

        def key(e: TechniqueEffect) -> tuple:
            return (
                is_absurd(e, base_time_seconds),
                not e.fits_after,
                relative_penalty(e, base_time_seconds, base_cost),
                e.delta_memory_bytes,
            )

    else:
        candidates = [e for e in applicable if e.fits_after is not False and e.delta_throughput > 0]

        def key(e: TechniqueEffect) -> tuple:
            return (
                is_absurd(e, base_time_seconds),
                e.delta_cost > 0,
                relative_penalty(e, base_time_seconds, base_cost),
                -e.delta_throughput,
            )

    return sorted(candidates, key=key)[:limit]


def techniques(scenario, calibration=None) -> list[TechniqueEffect]:
    if scenario.kind == "inference":
        return inference_techniques(scenario, calibration)
    return training_techniques(scenario, calibration)

"""Diagnosis: which resource binds this plan, with its evidence, and the techniques that relieve it
best first."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner.plan import plan as make_plan
from planner.search.inference_tradeoffs import inference_techniques
from planner.search.techniques import TechniqueEffect
from planner.search.training_tradeoffs import training_techniques
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
        step = phase.compute_seconds + phase.memory_seconds + phase.communication_seconds
        time_shares = {
            "compute": phase.compute_seconds / step,
            "memory_bandwidth": phase.memory_seconds / step,
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
        f"Memory: the largest component is {dominant.removesuffix('_bytes').replace('_', ' ')} "
        f"({percent(memory_shares[dominant.removesuffix('_bytes')])} of {gib(total)} per GPU)."
    )
    usable = [e for e in effects if e.applicable and (e.fits_after or e.fits_after is None)]
    if p.bottleneck == "capacity":
        ranked = sorted(
            (e for e in effects if e.applicable and e.delta_memory_bytes < 0), key=lambda e: e.delta_memory_bytes
        )
    else:
        ranked = sorted(
            (e for e in usable if e.delta_throughput > 0 and e.delta_cost <= 0), key=lambda e: -e.delta_throughput
        )
        ranked += sorted(
            (e for e in usable if e.delta_throughput > 0 and e.delta_cost > 0 and e not in ranked),
            key=lambda e: -e.delta_throughput,
        )
    return Diagnosis(
        binding=p.bottleneck,
        evidence=evidence,
        memory_shares=memory_shares,
        time_shares=time_shares,
        arithmetic_intensity_flops_per_byte=intensity,
        ridge_point_flops_per_byte=ridge,
        relief=ranked[:5],
    )


def techniques(scenario, calibration=None) -> list[TechniqueEffect]:
    if scenario.kind == "inference":
        return inference_techniques(scenario, calibration)
    return training_techniques(scenario, calibration)

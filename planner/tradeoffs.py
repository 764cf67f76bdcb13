"""Trade-offs: what each technique buys and costs for *this* scenario, which resource binds, and the
best configuration under constraints.

Every technique effect is the difference of two full plans (the scenario and the scenario with the
technique applied, built with `model_validate`), except the few techniques the engine has no switch
for (dropping the KV cache, host offload during serving), which are derived from the base plan's own
terms and say so.
"""

from __future__ import annotations

import operator
import re
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError

from planner.errors import PlanningError, explain
from planner.plan import plan as make_plan
from planner.units import gib, percent

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
        technique=name, variant=variant, applicable=True,
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


# ---------------------------------------------------------------------------------------------
# inference techniques

_PRECISION_ORDER = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}


def inference_techniques(scenario, calibration=None) -> list[TechniqueEffect]:
    from planner.inference import plan_inference

    base = plan_inference(scenario, calibration)
    numbers = _inference_numbers(base)
    arch = scenario.architecture()
    accel = scenario.accelerator()
    effects: list[TechniqueEffect] = []

    for dtype in ("fp8", "int8", "int4"):
        if _PRECISION_ORDER[dtype] >= _PRECISION_ORDER[scenario.weight_dtype]:
            continue
        native = accel.supports(dtype) or dtype == "int4"
        effects.append(_try_variant(
            "Weight quantization", f"weights {scenario.weight_dtype} → {dtype}", scenario, numbers,
            _inference_numbers, {"weight_dtype": dtype}, calibration,
            changes_numerics=True, relieves="capacity, memory bandwidth" + (", compute" if dtype != "int4" else ""),
            costs="accuracy risk; needs a calibrated checkpoint" + ("" if native else
                                                                   f"; {accel.name} has no native {dtype}"),
            watch=("int4 weight-only kernels dequantize on the fly: prefill does not get faster"
                   if dtype == "int4" else f"{dtype} GEMMs need per-channel/block scales; check eval quality"),
        ))
    for dtype in ("fp8", "int8", "int4"):
        if _PRECISION_ORDER[dtype] >= _PRECISION_ORDER[scenario.kv_cache_dtype]:
            continue
        effects.append(_try_variant(
            "KV cache quantization", f"KV {scenario.kv_cache_dtype} → {dtype}", scenario, numbers,
            _inference_numbers, {"kv_cache_dtype": dtype}, calibration,
            changes_numerics=True, relieves="capacity, memory bandwidth (long contexts)",
            costs="accuracy risk on long contexts",
            watch="attention kernels must support the cache format (fp8 KV is widely supported; int4 KV is not)",
        ))
    if scenario.prefix_cache_hit_rate < 0.5:
        effects.append(_try_variant(
            "Prefix / prompt caching", "50% of prompt tokens hit the cache", scenario, numbers,
            _inference_numbers, {"prefix_cache_hit_rate": 0.5}, calibration,
            changes_numerics=False, relieves="compute (prefill), TTFT",
            costs="memory: cached prefix blocks stay resident and compete with running sequences",
            watch="the hit rate must hold in production traffic (shared system prompts, multi-turn chat)",
        ))
    per_replica = scenario.tensor_parallel * scenario.pipeline_parallel
    effects.append(_try_variant(
        "Tensor parallelism", f"TP {scenario.tensor_parallel} → {scenario.tensor_parallel * 2} (same replicas)",
        scenario, numbers, _inference_numbers,
        {"tensor_parallel": scenario.tensor_parallel * 2, "num_gpus": scenario.num_gpus * 2}, calibration,
        changes_numerics=False, relieves="capacity and bandwidth per GPU, latency",
        costs="twice the GPUs; two all-reduces per layer per step",
        watch="needs a fast interconnect (NVLink); beyond 8 GPUs it crosses nodes",
    ))
    effects.append(_try_variant(
        "Pipeline parallelism", f"PP {scenario.pipeline_parallel} → {scenario.pipeline_parallel * 2} (same replicas)",
        scenario, numbers, _inference_numbers,
        {"pipeline_parallel": scenario.pipeline_parallel * 2, "num_gpus": scenario.num_gpus * 2}, calibration,
        changes_numerics=False, relieves="capacity per GPU",
        costs="twice the GPUs; per-token latency does not improve; hand-offs between stages",
        watch="works over slow links (only activations cross), but micro-batches must keep stages busy",
    ))
    if arch.is_moe and scenario.expert_parallel < scenario.tensor_parallel:
        effects.append(_try_variant(
            "Expert parallelism", f"EP {scenario.expert_parallel} → {scenario.tensor_parallel}", scenario, numbers,
            _inference_numbers, {"expert_parallel": scenario.tensor_parallel}, calibration,
            changes_numerics=False, relieves="expert weights per GPU stay the same; kernels run whole experts",
            costs="all-to-all token dispatch when EP exceeds the TP group",
            watch="load imbalance: hot experts make one GPU the straggler",
        ))
    effects.append(_try_variant(
        "Add a replica", f"{scenario.replicas} → {scenario.replicas + 1} replicas (same concurrency)", scenario,
        numbers, _inference_numbers, {"num_gpus": scenario.num_gpus + per_replica}, calibration,
        changes_numerics=False, relieves="capacity (fewer sequences per replica), throughput at fixed latency",
        costs=f"{per_replica} more GPUs", watch="only helps when sequences can be spread over replicas",
    ))
    effects.extend(_derived_inference_effects(scenario, base, numbers, calibration))
    return effects


def _derived_inference_effects(scenario, base, numbers, calibration=None) -> list[TechniqueEffect]:
    """Techniques the engine has no scenario switch for, computed from the base plan's own terms."""
    from planner import memory as mem
    from planner import performance as perf
    from planner.architecture import parameter_counts
    from planner.dtypes import kv_bytes_per_element

    arch = scenario.architecture()
    accel = scenario.accelerator()
    counts = parameter_counts(arch)
    kv = base.memory.components["kv_cache_bytes"]
    weights = base.memory.components["weights_bytes"]
    decode = base.performance.decode
    output = scenario.output_tokens
    sequences = -(-scenario.concurrency // scenario.replicas)
    micro = -(-sequences // scenario.pipeline_parallel)
    efficiency = calibration.efficiency if calibration is not None else perf.DEFAULT_EFFICIENCY
    host = accel.host_link_bandwidth_bytes_per_second * efficiency.host_link
    effects = []

    # Without a KV cache every decode step re-runs the forward pass over the whole context.
    mean_context = scenario.prompt_tokens + output / 2
    recompute_flops = perf.prefill_flops(counts, arch, mean_context, micro) / (
        scenario.tensor_parallel * scenario.pipeline_parallel)
    # The weights are still streamed every step, so the step is at least the current memory time.
    recompute_step = scenario.pipeline_parallel * max(
        perf.compute_seconds(recompute_flops, base.hardware.peak_flops_per_second, efficiency.prefill_compute),
        decode.memory_seconds,
    )
    effects.append(_derived(
        "KV cache vs recompute", "drop the KV cache, recompute attention state each step", base, numbers,
        delta_memory=-kv, new_step=recompute_step, sequences=sequences, output=output,
        changes_numerics=False, relieves="capacity (no KV cache at all)",
        costs=f"each decode step re-runs the prompt: {perf.prefill_flops(counts, arch, mean_context, 1):.3g} "
              "FLOPs per token instead of ~2 x active parameters",
        watch="only sensible for very short outputs; the KV cache is what makes decode cheap",
    ))
    # Offload half the KV cache to host memory: those bytes cross the host link every decode step.
    kv_stream = float(mem.kv_cache_bytes(arch, scenario.tensor_parallel, scenario.pipeline_parallel, micro,
                                         mean_context, kv_bytes_per_element(scenario.kv_cache_dtype), 1,
                                         scenario.honor_sliding_window))
    effects.append(_derived(
        "Offload to host", "half of the KV cache in host memory", base, numbers,
        delta_memory=-kv / 2, new_step=base.performance.decode_step_seconds
        + scenario.pipeline_parallel * (kv_stream / 2) / host, sequences=sequences, output=output,
        changes_numerics=False, relieves="capacity",
        costs=f"{gib(kv_stream / 2)} per decode step over the host link "
              f"({accel.host_link_bandwidth_bytes_per_second / 1e9:.0f} GB/s)",
        watch="decode becomes host-link bound; worthwhile only for idle or preempted sequences",
    ))
    effects.append(_derived(
        "Offload to host", "half of the weights in host memory (streamed each step)", base, numbers,
        delta_memory=-weights / 2, new_step=base.performance.decode_step_seconds
        + scenario.pipeline_parallel * (weights / 2) / host, sequences=sequences, output=output,
        changes_numerics=False, relieves="capacity",
        costs=f"{gib(weights / 2)} per decode step over the host link",
        watch="orders of magnitude slower decode; a last resort to run at all",
    ))
    return effects


def _derived(name, variant, base, numbers, *, delta_memory, new_step, sequences, output, **info) -> TechniqueEffect:
    prefill_per_request = base.performance.prefill_share_of_time * base.performance.tpot_seconds * output / sequences
    cycle = sequences * prefill_per_request + output * new_step
    new_tpot = cycle / output
    replicas = base.performance.output_tokens_per_second / base.performance.output_tokens_per_second_per_replica
    throughput = sequences * output / cycle * replicas
    cost = base.cost.usd_per_hour * 1e6 / (throughput * 3600)
    new_memory = numbers["memory"] + delta_memory
    return TechniqueEffect(
        technique=name, variant=variant, applicable=True, derived=True,
        delta_memory_bytes=delta_memory, delta_time_seconds=new_tpot - numbers["time"],
        delta_throughput=throughput - numbers["throughput"], delta_cost=cost - numbers["cost"],
        fits_after=bool(new_memory <= base.memory.budget_bytes), **info,
    )


# ---------------------------------------------------------------------------------------------
# diagnosis


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
        time_shares = {"compute": phase.compute_seconds / step, "memory_bandwidth": phase.memory_seconds / step,
                       "communication": phase.communication_seconds / step}
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
    evidence.append(f"Memory: the largest component is {dominant.removesuffix('_bytes').replace('_', ' ')} "
                    f"({percent(memory_shares[dominant.removesuffix('_bytes')])} of {gib(total)} per GPU).")
    usable = [e for e in effects if e.applicable and (e.fits_after or e.fits_after is None)]
    if p.bottleneck == "capacity":
        ranked = sorted((e for e in effects if e.applicable and e.delta_memory_bytes < 0),
                        key=lambda e: e.delta_memory_bytes)
    else:
        ranked = sorted((e for e in usable if e.delta_throughput > 0 and e.delta_cost <= 0),
                        key=lambda e: -e.delta_throughput)
        ranked += sorted((e for e in usable if e.delta_throughput > 0 and e.delta_cost > 0 and e not in ranked),
                         key=lambda e: -e.delta_throughput)
    return Diagnosis(binding=p.bottleneck, evidence=evidence, memory_shares=memory_shares, time_shares=time_shares,
                     arithmetic_intensity_flops_per_byte=intensity, ridge_point_flops_per_byte=ridge,
                     relief=ranked[:5])


def techniques(scenario, calibration=None) -> list[TechniqueEffect]:
    if scenario.kind == "inference":
        return inference_techniques(scenario, calibration)
    from planner.training.tradeoffs import training_techniques

    return training_techniques(scenario, calibration)


# ---------------------------------------------------------------------------------------------
# constrained search and Pareto frontier

_OPERATORS: dict[str, Callable] = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt,
                                   "==": operator.eq}
_CONSTRAINT = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|==|<|>)\s*([-+0-9.eE]+)\s*$")


def parse_constraint(text: str) -> tuple[str, str, float]:
    """'ttft_seconds<=0.5' -> ('ttft_seconds', '<=', 0.5)."""
    match = _CONSTRAINT.match(text)
    if not match:
        raise PlanningError(f"constraint '{text}' must look like column<=number, e.g. ttft_seconds<=0.5")
    column, op, number = match.groups()
    try:
        return column, op, float(number)
    except ValueError:
        raise PlanningError(f"constraint '{text}': '{number}' is not a number") from None


def apply_constraints(frame: pd.DataFrame, constraints: Iterable[str | tuple[str, str, float]]) -> pd.DataFrame:
    """Rows that fit and satisfy every constraint."""
    mask = frame["fits"].to_numpy(bool).copy()
    for constraint in constraints:
        column, op, value = parse_constraint(constraint) if isinstance(constraint, str) else constraint
        if column not in frame:
            raise PlanningError(f"unknown constraint column '{column}'; choose from {', '.join(_numeric(frame))}")
        mask &= _OPERATORS[op](frame[column].to_numpy(float), value)
    return frame[mask]


def _numeric(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c]) and c != "valid"]


def pareto_front(frame: pd.DataFrame, minimize: Iterable[str] = (), maximize: Iterable[str] = ()) -> pd.DataFrame:
    """Non-dominated rows: no other row is at least as good on every objective and better on one."""
    columns = list(minimize) + list(maximize)
    if frame.empty or not columns:
        return frame.iloc[0:0] if not columns else frame
    values = np.column_stack([frame[c].to_numpy(float) for c in minimize]
                             + [-frame[c].to_numpy(float) for c in maximize])
    order = np.lexsort(values.T[::-1])
    front: list[int] = []
    best: np.ndarray | None = None
    kept = values[order]
    for position, index in enumerate(order):
        candidate = kept[position]
        if best is not None:
            dominated = np.all(best <= candidate, axis=1) & np.any(best < candidate, axis=1)
            if dominated.any() or np.any(np.all(best == candidate, axis=1)):
                continue
        front.append(index)
        best = candidate[None, :] if best is None else np.vstack([best, candidate])
    return frame.iloc[sorted(front)]


def search(frame: pd.DataFrame, constraints: Iterable[str] = (), minimize: str = "usd_per_million_output_tokens",
           top: int = 10) -> pd.DataFrame:
    """The `top` feasible rows by `minimize` (ties broken by fewer GPUs)."""
    feasible = apply_constraints(frame, constraints)
    if minimize not in feasible:
        raise PlanningError(f"unknown objective '{minimize}'")
    return feasible.sort_values([minimize, "num_gpus"], kind="stable").head(top)


__all__ = [
    "TechniqueEffect", "Diagnosis", "inference_techniques", "techniques", "diagnose", "parse_constraint",
    "apply_constraints", "pareto_front", "search", "RESOURCES",
]

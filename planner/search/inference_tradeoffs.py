"""Inference trade-offs: what each technique buys and costs for *this* scenario, which resource binds, and the
best configuration under constraints.

Every technique effect is the difference of two full plans (the scenario and the scenario with the
technique applied, built with `model_validate`), except the few techniques the engine has no switch
for (dropping the KV cache, host offload during serving), which are derived from the base plan's own
terms and say so.
"""

from __future__ import annotations

from planner.dtypes import BYTES_PER_ELEMENT, FORMATS, QUANTIZED_DTYPES, QUANTIZED_KV_DTYPES, kv_bytes_per_element
from planner.inference.draft import DEFAULT_ACCEPTANCE
from planner.inference.plan import plan_inference
from planner.model.architecture import parameter_counts
from planner.physics import memory as mem
from planner.physics import roofline
from planner.physics.efficiency import DEFAULT_EFFICIENCY
from planner.physics.flops import prefill_flops
from planner.plan import without_traffic
from planner.search.techniques import (
    Baseline,
    TechniqueEffect,
    _inference_numbers,
)
from planner.units import gib


def inference_techniques(scenario, calibration=None) -> list[TechniqueEffect]:
    """Each technique's effect on the scenario's static plan, in a fixed order: narrower weight and KV formats and
    prefix caching, then layouts (TP, PP, EP, a replica), speculative decoding, then the derived techniques."""
    base = plan_inference(without_traffic(scenario), calibration)  # variants are compared as static plans
    numbers = _inference_numbers(base)
    baseline = Baseline(scenario, calibration, numbers, _inference_numbers)
    effects = [*_format_and_cache_effects(baseline), *_layout_effects(baseline)]
    if scenario.speculative is None:
        effects.extend(_speculative_effects(baseline))
    effects.extend(_derived_inference_effects(scenario, base, numbers, calibration))
    return effects


def _format_and_cache_effects(baseline: Baseline) -> list[TechniqueEffect]:
    """Every narrower weight and KV-cache format the dtype table has, and a 50% prefix-cache hit rate."""
    scenario = baseline.scenario
    accel = scenario.accelerator()
    effects: list[TechniqueEffect] = []
    # Every narrower format in the dtype table; what it relieves follows Accelerator.gemm_dtype, the rule the
    # plan itself uses (compute only where the GPU's tensor cores run the narrower format faster).
    current_peak = accel.peak_flops(accel.gemm_dtype(scenario.weight_dtype))
    for dtype in QUANTIZED_DTYPES:
        if BYTES_PER_ELEMENT[dtype] >= BYTES_PER_ELEMENT[scenario.weight_dtype]:
            continue
        faster = accel.peak_flops(accel.gemm_dtype(dtype)) > current_peak
        effects.append(
            baseline.effect(
                "Weight quantization",
                f"weights {scenario.weight_dtype} → {dtype}",
                {"weight_dtype": dtype},
                changes_numerics=True,
                relieves="capacity, memory bandwidth" + (", compute" if faster else ""),
                costs="accuracy risk; needs a calibrated checkpoint"
                + (f"; {accel.name} has no native {dtype}" if accel.dequantizes(dtype) else ""),
                watch=(
                    f"{dtype} GEMMs need their block scales; check eval quality"
                    if accel.computes_in(dtype)
                    else f"{dtype} weights are dequantized to {accel.gemm_dtype(dtype)} on the fly: prefill does not "
                    "get faster"
                ),
            )
        )
    for dtype in QUANTIZED_KV_DTYPES:
        if BYTES_PER_ELEMENT[dtype] >= BYTES_PER_ELEMENT[scenario.kv_cache_dtype]:
            continue
        effects.append(
            baseline.effect(
                "KV cache quantization",
                f"KV {scenario.kv_cache_dtype} → {dtype}",
                {"kv_cache_dtype": dtype},
                changes_numerics=True,
                relieves="capacity, memory bandwidth (long contexts)",
                costs="accuracy risk on long contexts",
                watch=f"attention kernels must support the cache format; {dtype} KV: {FORMATS[dtype].kv_engines}",
            )
        )
    if scenario.prefix_cache_hit_rate < 0.5:
        effects.append(
            baseline.effect(
                "Prefix / prompt caching",
                "50% of prompt tokens hit the cache",
                {"prefix_cache_hit_rate": 0.5},
                changes_numerics=False,
                relieves="compute (prefill), TTFT",
                costs="memory: cached prefix blocks stay resident and compete with running sequences",
                watch="the hit rate must hold in production traffic (shared system prompts, multi-turn chat)",
            )
        )
    return effects


def _layout_effects(baseline: Baseline) -> list[TechniqueEffect]:
    """TP and PP doubled with the same replicas, EP up to the TP group (MoE), one more replica."""
    scenario = baseline.scenario
    accel = scenario.accelerator()
    effects: list[TechniqueEffect] = []
    arch = scenario.architecture()
    per_replica = scenario.tensor_parallel * scenario.pipeline_parallel
    effects.append(
        baseline.effect(
            "Tensor parallelism",
            f"TP {scenario.tensor_parallel} → {scenario.tensor_parallel * 2} (same replicas)",
            {"tensor_parallel": scenario.tensor_parallel * 2, "num_gpus": scenario.num_gpus * 2},
            changes_numerics=False,
            relieves="capacity and bandwidth per GPU, latency",
            costs="twice the GPUs; two all-reduces per layer per step",
            watch=f"needs a fast interconnect (NVLink); beyond {accel.gpus_per_node} GPUs it crosses nodes",
        )
    )
    effects.append(
        baseline.effect(
            "Pipeline parallelism",
            f"PP {scenario.pipeline_parallel} → {scenario.pipeline_parallel * 2} (same replicas)",
            {"pipeline_parallel": scenario.pipeline_parallel * 2, "num_gpus": scenario.num_gpus * 2},
            changes_numerics=False,
            relieves="capacity per GPU",
            costs="twice the GPUs; hand-offs between stages",
            time_words="per-token latency",
            watch="works over slow links (only activations cross), but micro-batches must keep stages busy",
        )
    )
    if arch.is_moe and scenario.expert_parallel < scenario.tensor_parallel:
        effects.append(
            baseline.effect(
                "Expert parallelism",
                f"EP {scenario.expert_parallel} → {scenario.tensor_parallel}",
                {"expert_parallel": scenario.tensor_parallel},
                changes_numerics=False,
                relieves="expert weights per GPU stay the same; kernels run whole experts",
                costs="all-to-all token dispatch when EP exceeds the TP group",
                watch="load imbalance: hot experts make one GPU the straggler",
            )
        )
    effects.append(
        baseline.effect(
            "Add a replica",
            f"{scenario.replicas} → {scenario.replicas + 1} replicas (same concurrency)",
            {"num_gpus": scenario.num_gpus + per_replica},
            changes_numerics=False,
            relieves="capacity (fewer sequences per replica), throughput at fixed latency",
            costs=f"{per_replica} more GPUs",
            watch="only helps when sequences can be spread over replicas",
        )
    )
    return effects


def _speculative_effects(baseline: Baseline) -> list[TechniqueEffect]:
    """Speculative decoding with a head the model can have (EAGLE) or ships (MTP), planned as a variant."""
    scenario = baseline.scenario
    drafts = [("EAGLE-style head, 3 drafted tokens", {"method": "eagle", "num_speculative_tokens": 3})]
    mtp_layers = scenario.architecture().mtp_layers
    if mtp_layers:
        drafts.append(
            (
                f"the checkpoint's MTP module, {mtp_layers} drafted token(s)",
                {"method": "mtp", "num_speculative_tokens": mtp_layers},
            )
        )
    return [
        baseline.effect(
            "Speculative decoding",
            variant,
            {"speculative": option},
            changes_numerics=False,
            relieves="memory bandwidth (decode): k + 1 tokens per sequence for one read of the weights",
            costs="draft weights and KV cache; verify compute grows k + 1 times, so it stops paying once decode is "
            "compute-bound (large batches)",
            time_words="per-token latency",
            watch=f"acceptance is assumed ({DEFAULT_ACCEPTANCE[option['method']]:.2f}) and depends on the workload: "
            "measure it before sizing on it",
        )
        for variant, option in drafts
    ]


def _derived_inference_effects(scenario, base, numbers, calibration=None) -> list[TechniqueEffect]:
    """Techniques the engine has no scenario switch for, computed from the base plan's own terms: dropping the KV
    cache (recompute it every step), then host offload (`_offload_effects`)."""
    arch = scenario.architecture()
    accel = scenario.accelerator()
    counts = parameter_counts(arch)
    kv = base.memory.components["kv_cache_bytes"]
    decode = base.performance.decode
    output = scenario.output_tokens
    sequences = -(-scenario.concurrency // scenario.replicas)
    micro = -(-sequences // scenario.pipeline_parallel)
    efficiency = calibration.efficiency if calibration is not None else DEFAULT_EFFICIENCY
    host = accel.host_link_bandwidth_bytes_per_second * efficiency.host_link
    effects = []

    # Without a KV cache every decode step re-runs the forward pass over the whole context.
    mean_context = scenario.prompt_tokens + output / 2
    recompute_flops = prefill_flops(counts, arch, mean_context, micro) / (
        scenario.tensor_parallel * scenario.pipeline_parallel
    )
    # The weights are still streamed every step, so the step is at least the current memory time.
    recompute_step = scenario.pipeline_parallel * max(
        roofline.compute_seconds(recompute_flops, base.hardware.peak_flops_per_second, efficiency.prefill_compute),
        decode.memory_seconds,
    )
    effects.append(
        _derived(
            "KV cache vs recompute",
            "drop the KV cache, recompute attention state each step",
            base,
            numbers,
            delta_memory=-kv,
            new_step=recompute_step,
            sequences=sequences,
            output=output,
            changes_numerics=False,
            relieves="capacity (no KV cache at all)",
            costs=f"each decode step re-runs the prompt: {prefill_flops(counts, arch, mean_context, 1):.3g} "
            "FLOPs per token instead of ~2 x active parameters",
            watch="only sensible for very short outputs; the KV cache is what makes decode cheap",
        )
    )
    effects.extend(_offload_effects(scenario, base, numbers, sequences, micro, host))
    return effects


def _offload_effects(scenario, base, numbers, sequences: int, micro: int, host: float) -> list[TechniqueEffect]:
    """Half the KV cache, or half the weights, in host memory: those bytes cross the host link (`host` bytes per
    second, after its efficiency) every decode step; `micro` sequences per pipeline micro-batch."""
    arch, accel = scenario.architecture(), scenario.accelerator()
    kv = base.memory.components["kv_cache_bytes"]
    weights = base.memory.components["weights_bytes"]
    output = scenario.output_tokens
    mean_context = scenario.prompt_tokens + output / 2
    effects = []
    # Offload half the KV cache to host memory: those bytes cross the host link every decode step.
    kv_stream = float(
        mem.kv_cache_bytes(
            arch,
            scenario.tensor_parallel,
            scenario.pipeline_parallel,
            micro,
            mean_context,
            kv_bytes_per_element(scenario.kv_cache_dtype),
            1,
            scenario.honor_sliding_window,
        )
    )
    effects.append(
        _derived(
            "Offload to host",
            "half of the KV cache in host memory",
            base,
            numbers,
            delta_memory=-kv / 2,
            new_step=base.performance.decode_step_seconds + scenario.pipeline_parallel * (kv_stream / 2) / host,
            sequences=sequences,
            output=output,
            changes_numerics=False,
            relieves="capacity",
            costs=f"{gib(kv_stream / 2)} per decode step over the host link "
            f"({accel.host_link_bandwidth_bytes_per_second / 1e9:.0f} GB/s)",
            watch="decode becomes host-link bound; worthwhile only for idle or preempted sequences",
        )
    )
    effects.append(
        _derived(
            "Offload to host",
            "half of the weights in host memory (streamed each step)",
            base,
            numbers,
            delta_memory=-weights / 2,
            new_step=base.performance.decode_step_seconds + scenario.pipeline_parallel * (weights / 2) / host,
            sequences=sequences,
            output=output,
            changes_numerics=False,
            relieves="capacity",
            costs=f"{gib(weights / 2)} per decode step over the host link",
            watch="orders of magnitude slower decode; a last resort to run at all",
        )
    )
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
        technique=name,
        variant=variant,
        applicable=True,
        derived=True,
        delta_memory_bytes=delta_memory,
        delta_time_seconds=new_tpot - numbers["time"],
        delta_throughput=throughput - numbers["throughput"],
        delta_cost=cost - numbers["cost"],
        fits_after=bool(new_memory <= base.memory.budget_bytes),
        **info,
    )

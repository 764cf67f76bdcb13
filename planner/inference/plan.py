"""Inference: assemble the memory, roofline and cost terms into a plan.

`inference_metrics` is the whole computation over plain numbers; it broadcasts, so `sweep.py` runs
the very same code over numpy arrays of scenarios. `plan_inference` feeds it one scenario and wraps
the numbers into a frozen `InferencePlan` with warnings, assumptions and equations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.arrays import ceil_div, maximum, minimum, where
from planner.dtypes import (
    BYTES_PER_ELEMENT,
    compute_dtype,
    high_precision_dtype,
    kv_bytes_per_element,
    weight_bytes_per_element,
)
from planner.hardware.catalog import Accelerator
from planner.inference.results import InferenceCost, InferencePerformance, InferencePlan
from planner.inference.scenario import InferenceScenario
from planner.model.architecture import (
    ModelArchitecture,
    ParameterCounts,
    kv_cache_bytes_per_token,
    kv_elements_per_token_per_layer,
    parameter_counts,
)
from planner.physics import collectives, roofline
from planner.physics import memory as mem
from planner.physics.cost import HOURS_PER_MONTH, usd_per_hour, usd_per_million_tokens
from planner.physics.efficiency import DEFAULT_EFFICIENCY, Efficiency
from planner.physics.flops import decode_flops, prefill_flops
from planner.results import (
    Equation,
    HardwareSummary,
    MemoryBreakdown,
    ModelSummary,
    PhaseRoofline,
)
from planner.uncertainty import inference_bands
from planner.units import count, gib, percent, rate, seconds, usd


@dataclass(frozen=True)
class HardwareInputs:
    """The accelerator numbers the formulas use (arrays when sweeping several GPU types)."""

    memory_capacity_bytes: object
    bandwidth_bytes_per_second: object
    prefill_peak_flops_per_second: object
    decode_peak_flops_per_second: object
    link_bytes_per_second: object
    link_latency_seconds: object
    inter_node_bytes_per_second: object
    gpus_per_node: object
    is_accelerator: object
    usd_per_gpu_hour: object

    @classmethod
    def from_accelerator(cls, accel: Accelerator, weight_dtype: str, usd_per_gpu_hour: float) -> HardwareInputs:
        peak = accel.peak_flops(compute_dtype(weight_dtype))
        return cls(
            memory_capacity_bytes=float(accel.memory_bytes),
            bandwidth_bytes_per_second=accel.memory_bandwidth_bytes_per_second,
            prefill_peak_flops_per_second=peak,
            decode_peak_flops_per_second=peak,
            link_bytes_per_second=accel.interconnect_bandwidth_bytes_per_second,
            link_latency_seconds=accel.interconnect_latency_seconds,
            inter_node_bytes_per_second=accel.scale_out_bandwidth_bytes_per_second,
            gpus_per_node=accel.gpus_per_node,
            is_accelerator=accel.vendor != "cpu",
            usd_per_gpu_hour=usd_per_gpu_hour,
        )


def inference_metrics(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: HardwareInputs,
    efficiency: Efficiency,
    *,
    tensor_parallel,
    pipeline_parallel,
    expert_parallel,
    num_gpus,
    linear_bytes,
    high_precision_bytes,
    embedding_bytes,
    kv_bytes,
    activation_bytes,
    prompt_tokens,
    output_tokens,
    concurrency,
    block_tokens,
    memory_utilization,
    prefill_chunk_tokens,
    prefix_cache_hit_rate,
    honor_sliding_window=True,
    runtime_overhead_correction_bytes=0.0,
) -> dict:
    """Every number of an inference plan, per GPU unless named otherwise. Broadcasts over arrays."""
    tp, pp, ep = tensor_parallel, pipeline_parallel, expert_parallel
    replicas = num_gpus // (tp * pp)
    sequences = ceil_div(concurrency, replicas)  # per replica
    context = prompt_tokens + output_tokens
    # Pipeline-parallel decode keeps every stage busy with pp micro-batches in flight (vLLM virtual engines).
    micro_batch = ceil_div(sequences, pp)
    stage_layers = mem.stage_layers(arch, pp)
    h = arch.hidden_size
    # TP groups are innermost (consecutive GPUs); a pipeline hand-off crosses nodes once a replica does;
    # an expert-parallel group spans `ep` GPUs.
    tp_bw = collectives.link_bandwidth(tp, hw.gpus_per_node, hw.link_bytes_per_second, hw.inter_node_bytes_per_second)
    tp_lat = collectives.link_latency(tp, hw.gpus_per_node, hw.link_latency_seconds)
    pp_bw = collectives.link_bandwidth(
        tp * pp, hw.gpus_per_node, hw.link_bytes_per_second, hw.inter_node_bytes_per_second
    )
    pp_lat = collectives.link_latency(tp * pp, hw.gpus_per_node, hw.link_latency_seconds)
    ep_bw = collectives.link_bandwidth(ep, hw.gpus_per_node, hw.link_bytes_per_second, hw.inter_node_bytes_per_second)
    ep_lat = collectives.link_latency(ep, hw.gpus_per_node, hw.link_latency_seconds)

    # ---- memory, per GPU
    weights = mem.weight_bytes(counts, arch, tp, pp, ep, linear_bytes, high_precision_bytes, embedding_bytes)
    kv = mem.kv_cache_bytes(arch, tp, pp, sequences, context, kv_bytes, block_tokens, honor_sliding_window)
    prefill_tokens_per_step = minimum(prefill_chunk_tokens, sequences * prompt_tokens)
    activations = maximum(
        mem.inference_activation_bytes(arch, tp, prefill_tokens_per_step, activation_bytes),
        mem.inference_activation_bytes(arch, tp, micro_batch, activation_bytes),
    )
    logits = mem.logits_bytes(arch, micro_batch)
    runtime = mem.runtime_overhead_bytes(hw.is_accelerator, tp * pp) + runtime_overhead_correction_bytes
    total = weights + kv + activations + logits + runtime
    budget = hw.memory_capacity_bytes * memory_utilization

    # ---- what else would fit
    kv_room = maximum(budget - (total - kv), 0.0)
    per_sequence = mem.kv_cache_bytes_per_sequence(arch, tp, pp, context, kv_bytes, block_tokens, honor_sliding_window)
    max_concurrency = np.floor(kv_room / per_sequence) * replicas
    max_context = max_context_tokens(arch, tp, pp, kv_bytes, kv_room / sequences, block_tokens, honor_sliding_window)
    kv_blocks = np.floor(kv_room / mem.kv_block_bytes(arch, tp, pp, kv_bytes, block_tokens))

    # ---- prefill (TTFT): one request's uncached prompt through every stage of one replica
    new_tokens = maximum(np.ceil(prompt_tokens * (1 - prefix_cache_hit_rate)), 1)

    def prefill_step(tokens_per_sequence, batch):
        flops = prefill_flops(counts, arch, prompt_tokens, batch, new_tokens=tokens_per_sequence) / (tp * pp)
        tokens = tokens_per_sequence * batch
        chunks = np.ceil(tokens / prefill_chunk_tokens)
        bytes_moved = chunks * weights + mem.kv_cache_bytes(arch, tp, pp, batch, prompt_tokens, kv_bytes)
        compute_s = roofline.compute_seconds(flops, hw.prefill_peak_flops_per_second, efficiency.prefill_compute)
        memory_s = roofline.memory_seconds(bytes_moved, hw.bandwidth_bytes_per_second, efficiency.memory_bandwidth)
        message = tokens * h * activation_bytes
        comm_s = stage_layers * 2 * collectives.allreduce_seconds(message, tp, tp_bw, tp_lat, efficiency.communication)
        handoff = (pp - 1) * collectives.p2p_seconds(message, pp_bw, pp_lat, efficiency.communication)
        overhead = stage_layers * efficiency.layer_overhead_seconds
        step = pp * (maximum(compute_s, memory_s) + comm_s + overhead) + handoff
        return dict(
            flops=flops,
            bytes=bytes_moved,
            compute=compute_s,
            memory=memory_s,
            comm=comm_s + handoff / pp,
            seconds=step,
            tokens=tokens,
        )

    ttft_step = prefill_step(new_tokens, 1)
    # Under load, prompts are prefilled in full chunks: the per-request cost is a chunk's time shared
    # by the prompts in it (a chunk reads the weights once for all of them).
    prompts_per_chunk = maximum(np.floor(prefill_chunk_tokens / new_tokens), 1)
    batch_prompts = minimum(prompts_per_chunk, sequences)
    batched = prefill_step(new_tokens, batch_prompts)
    prefill_seconds_per_request = batched["seconds"] / batch_prompts

    # ---- decode (TPOT): one step for a micro-batch on one stage, times the stages
    mean_context = prompt_tokens + output_tokens / 2
    decode_step_flops = decode_flops(counts, arch, micro_batch, mean_context) / (tp * pp)
    routed = counts.moe_layer.experts_routed if counts.moe_layer else 0
    stage_routed_bytes = mem.stage_moe_layers(arch, pp) * routed / maximum(tp, ep) * linear_bytes
    weight_reads = roofline.decode_weight_read_bytes(
        weights, stage_routed_bytes, arch.num_experts, arch.experts_per_token, micro_batch
    )
    kv_reads = mem.kv_cache_bytes(arch, tp, pp, micro_batch, mean_context, kv_bytes, 1, honor_sliding_window)
    decode_bytes = weight_reads + kv_reads
    decode_compute = roofline.compute_seconds(
        decode_step_flops, hw.decode_peak_flops_per_second, efficiency.decode_compute
    )
    decode_memory = roofline.memory_seconds(decode_bytes, hw.bandwidth_bytes_per_second, efficiency.memory_bandwidth)
    message = micro_batch * h * activation_bytes
    decode_comm = stage_layers * 2 * collectives.allreduce_seconds(message, tp, tp_bw, tp_lat, efficiency.communication)
    if arch.is_moe:
        # Experts spread beyond the TP group: tokens travel to their experts and back (2 all-to-alls).
        dispatch = micro_batch * arch.experts_per_token * h * activation_bytes
        all_to_all = (
            2
            * mem.stage_moe_layers(arch, pp)
            * collectives.allgather_seconds(dispatch, ep, ep_bw, ep_lat, efficiency.communication)
        )
        decode_comm = decode_comm + where(ep > tp, all_to_all, 0.0)
    handoff = (pp - 1) * collectives.p2p_seconds(message, pp_bw, pp_lat, efficiency.communication)
    decode_overhead = stage_layers * efficiency.layer_overhead_seconds
    decode_step = pp * (maximum(decode_compute, decode_memory) + decode_comm + decode_overhead) + handoff

    # ---- steady state with continuous batching: each request costs its prefill share once and a
    # decode slot for output_tokens steps; a replica produces `sequences` tokens per decode step.
    cycle = sequences * prefill_seconds_per_request + output_tokens * decode_step
    tpot = cycle / output_tokens
    per_replica = sequences * output_tokens / cycle
    tokens_per_second = per_replica * replicas
    cluster_usd_per_hour = usd_per_hour(num_gpus, hw.usd_per_gpu_hour)
    return dict(
        replicas=replicas,
        sequences_per_replica=sequences,
        micro_batch=micro_batch,
        weights_bytes=weights,
        kv_cache_bytes=kv,
        activations_bytes=activations,
        logits_bytes=logits,
        runtime_overhead_bytes=runtime,
        total_bytes=total,
        budget_bytes=budget,
        fits=total <= budget,
        max_concurrency=max_concurrency,
        max_context_tokens=max_context,
        kv_blocks=kv_blocks,
        prefill=ttft_step,
        ttft_seconds=ttft_step["seconds"],
        burst_ttft_seconds=maximum(sequences * prefill_seconds_per_request, ttft_step["seconds"]),
        prefill_seconds_per_request=prefill_seconds_per_request,
        decode=dict(
            flops=decode_step_flops,
            bytes=decode_bytes,
            compute=decode_compute,
            memory=decode_memory,
            comm=decode_comm + handoff / pp,
            seconds=decode_step,
            tokens=micro_batch,
        ),
        decode_step_seconds=decode_step,
        tpot_seconds=tpot,
        e2e_latency_seconds=ttft_step["seconds"] + (output_tokens - 1) * tpot,
        output_tokens_per_second=tokens_per_second,
        output_tokens_per_second_per_replica=per_replica,
        output_tokens_per_second_per_gpu=tokens_per_second / num_gpus,
        requests_per_second=tokens_per_second / output_tokens,
        prefill_share_of_time=sequences * prefill_seconds_per_request / cycle,
        usd_per_hour=cluster_usd_per_hour,
        usd_per_million_output_tokens=usd_per_million_tokens(cluster_usd_per_hour, tokens_per_second),
    )


def max_context_tokens(
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    kv_bytes,
    kv_budget_per_sequence,
    block_tokens=1,
    honor_sliding_window=True,
):
    """Longest context one sequence can hold in `kv_budget_per_sequence` bytes on one GPU.

    Inverts `kv_cache_bytes_per_sequence`: full-attention layers grow with every token; sliding-window
    layers stop growing at the window. Capped at the model's maximum context. Rounded down to a block.
    """
    per_token_layer = kv_elements_per_token_per_layer(arch, tensor_parallel) * kv_bytes
    layers = mem.stage_layers(arch, pipeline_parallel)
    sliding_share = (
        arch.sliding_window_layers / arch.num_layers if (honor_sliding_window and arch.sliding_window) else 0.0
    )
    full_rate = layers * (1 - sliding_share) * per_token_layer
    all_rate = layers * per_token_layer
    window = arch.sliding_window or 0
    below_window = kv_budget_per_sequence / all_rate
    # With every layer sliding, memory never limits the context (only the model's maximum does).
    safe_rate = where(full_rate > 0, full_rate, 1.0)
    beyond = where(full_rate > 0, window + (kv_budget_per_sequence - all_rate * window) / safe_rate, np.inf)
    tokens = where(below_window <= window, below_window, beyond) if window else below_window
    tokens = minimum(tokens, float(arch.max_context_tokens))
    return np.floor(np.floor(tokens) / block_tokens) * block_tokens


# ---------------------------------------------------------------------------------------------


def _phase(name: str, step: dict) -> PhaseRoofline:
    return PhaseRoofline(
        phase=name,
        tokens=float(step["tokens"]),
        flops=float(step["flops"]),
        bytes=float(step["bytes"]),
        compute_seconds=float(step["compute"]),
        memory_seconds=float(step["memory"]),
        communication_seconds=float(step["comm"]),
        seconds=float(step["seconds"]),
    )


RESOURCE_WORDS = {
    "compute": "compute",
    "memory_bandwidth": "memory bandwidth",
    "communication": "communication",
}


def _bottleneck(
    fits: bool,
    total: float,
    budget: float,
    prefill: PhaseRoofline,
    decode: PhaseRoofline,
    prefill_share: float,
    ridge: float,
) -> tuple[str, str]:
    if not fits:
        return "capacity", (
            f"The plan needs {gib(total)} per GPU but the engine may use {gib(budget)}: "
            "memory capacity binds before anything else."
        )
    phase = prefill if prefill_share > 0.5 else decode
    share = prefill_share if phase is prefill else 1 - prefill_share
    times = {
        "compute": phase.compute_seconds,
        "memory_bandwidth": phase.memory_seconds,
        "communication": phase.communication_seconds,
    }
    binding = max(times, key=times.__getitem__)
    intensity = phase.arithmetic_intensity_flops_per_byte
    side = "below" if intensity < ridge else "above"
    reason = (
        f"{phase.phase.capitalize()} takes {percent(share)} of the time; its step needs "
        f"{seconds(phase.compute_seconds)} of compute, {seconds(phase.memory_seconds)} of memory traffic and "
        f"{seconds(phase.communication_seconds)} of communication, so {RESOURCE_WORDS[binding]} binds "
        f"(arithmetic intensity {intensity:,.0f} FLOP/B, {side} the GPU's ridge point of {ridge:,.0f} FLOP/B)."
    )
    return binding, reason


def plan_inference(scenario: InferenceScenario, calibration=None) -> InferencePlan:
    arch = scenario.architecture()
    accel = scenario.accelerator()
    counts = parameter_counts(arch)
    efficiency = calibration.efficiency if calibration is not None else DEFAULT_EFFICIENCY
    correction = calibration.runtime_overhead_correction_bytes if calibration is not None else 0.0
    price = scenario.usd_per_gpu_hour if scenario.usd_per_gpu_hour is not None else accel.reference_usd_per_hour
    hw = HardwareInputs.from_accelerator(accel, scenario.weight_dtype, price)

    linear_b = weight_bytes_per_element(scenario.weight_dtype, scenario.weight_group_size)
    hp_b = BYTES_PER_ELEMENT[high_precision_dtype(scenario.weight_dtype)]
    emb_b = linear_b if scenario.quantize_embeddings else hp_b
    kv_b = kv_bytes_per_element(scenario.kv_cache_dtype)
    act_b = 4.0 if scenario.weight_dtype == "fp32" else 2.0
    m = inference_metrics(
        arch,
        counts,
        hw,
        efficiency,
        tensor_parallel=scenario.tensor_parallel,
        pipeline_parallel=scenario.pipeline_parallel,
        expert_parallel=scenario.expert_parallel,
        num_gpus=scenario.num_gpus,
        linear_bytes=linear_b,
        high_precision_bytes=hp_b,
        embedding_bytes=emb_b,
        kv_bytes=kv_b,
        activation_bytes=act_b,
        prompt_tokens=scenario.prompt_tokens,
        output_tokens=scenario.output_tokens,
        concurrency=scenario.concurrency,
        block_tokens=scenario.kv_block_tokens,
        memory_utilization=scenario.gpu_memory_utilization,
        prefill_chunk_tokens=scenario.prefill_chunk_tokens,
        prefix_cache_hit_rate=scenario.prefix_cache_hit_rate,
        honor_sliding_window=scenario.honor_sliding_window,
        runtime_overhead_correction_bytes=correction,
    )
    memory = MemoryBreakdown(
        components={
            key: float(m[key])
            for key in (
                "weights_bytes",
                "kv_cache_bytes",
                "activations_bytes",
                "logits_bytes",
                "runtime_overhead_bytes",
            )
        },
        capacity_bytes=float(accel.memory_bytes),
        budget_bytes=float(m["budget_bytes"]),
        max_concurrency=int(m["max_concurrency"]),
        max_context_tokens=int(m["max_context_tokens"]),
        kv_blocks=int(m["kv_blocks"]),
    )
    prefill, decode = _phase("prefill", m["prefill"]), _phase("decode", m["decode"])
    ridge = roofline.ridge_point_flops_per_byte(hw.decode_peak_flops_per_second, hw.bandwidth_bytes_per_second)
    performance = InferencePerformance(
        ttft_seconds=float(m["ttft_seconds"]),
        burst_ttft_seconds=float(m["burst_ttft_seconds"]),
        tpot_seconds=float(m["tpot_seconds"]),
        decode_step_seconds=float(m["decode_step_seconds"]),
        e2e_latency_seconds=float(m["e2e_latency_seconds"]),
        output_tokens_per_second=float(m["output_tokens_per_second"]),
        output_tokens_per_second_per_gpu=float(m["output_tokens_per_second_per_gpu"]),
        output_tokens_per_second_per_replica=float(m["output_tokens_per_second_per_replica"]),
        requests_per_second=float(m["requests_per_second"]),
        prefill_share_of_time=float(m["prefill_share_of_time"]),
        prefill=prefill,
        decode=decode,
        ridge_point_flops_per_byte=float(ridge),
    )
    replicas_needed = gpus_needed = None
    if scenario.target_requests_per_second:
        per_replica_rps = performance.requests_per_second / m["replicas"]
        replicas_needed = int(math.ceil(scenario.target_requests_per_second / per_replica_rps))
        gpus_needed = replicas_needed * scenario.tensor_parallel * scenario.pipeline_parallel
    cost = InferenceCost(
        num_gpus=scenario.num_gpus,
        usd_per_gpu_hour=price,
        usd_per_hour=float(m["usd_per_hour"]),
        usd_per_month=float(m["usd_per_hour"]) * HOURS_PER_MONTH,
        usd_per_million_output_tokens=float(m["usd_per_million_output_tokens"]),
        replicas_needed=replicas_needed,
        gpus_needed=gpus_needed,
    )
    bottleneck, reason = _bottleneck(
        memory.fits, memory.total_bytes, memory.budget_bytes, prefill, decode, performance.prefill_share_of_time, ridge
    )
    kv_per_token = kv_cache_bytes_per_token(arch, kv_b)
    summary = ModelSummary(
        name=arch.name,
        model_id=scenario.model_id(),
        model_type=arch.model_type,
        params_total=counts.total,
        params_active=counts.active,
        kv_cache_bytes_per_token=kv_per_token,
        num_layers=arch.num_layers,
        hidden_size=arch.hidden_size,
        max_context_tokens=arch.max_context_tokens,
        parameter_breakdown=counts.as_dict(),
    )
    hardware = HardwareSummary(
        id=scenario.gpu_id(),
        name=accel.name,
        memory_bytes=accel.memory_bytes,
        memory_bandwidth_bytes_per_second=accel.memory_bandwidth_bytes_per_second,
        peak_flops_per_second=hw.decode_peak_flops_per_second,
        compute_dtype=compute_dtype(scenario.weight_dtype),
        usd_per_gpu_hour=price,
        usd_per_gpu_hour_is_reference=scenario.usd_per_gpu_hour is None,
    )
    return InferencePlan(
        scenario=scenario.model_dump(mode="json"),
        model=summary,
        hardware=hardware,
        memory=memory,
        performance=performance,
        cost=cost,
        bottleneck=bottleneck,
        bottleneck_reason=reason,
        warnings=_warnings(scenario, arch, accel, memory, m),
        assumptions=_assumptions(scenario, arch, efficiency, calibration),
        equations=_equations(scenario, arch, counts, hw, efficiency, m, linear_b, kv_b, kv_per_token),
        uncertainty=inference_bands(
            memory.total_bytes,
            performance.ttft_seconds,
            performance.tpot_seconds,
            performance.output_tokens_per_second,
            calibration,
        ),
        calibration=getattr(calibration, "label", None),
    )


def _warnings(
    s: InferenceScenario, arch: ModelArchitecture, accel: Accelerator, memory: MemoryBreakdown, m: dict
) -> list[str]:
    out = []
    if s.context_tokens > arch.max_context_tokens:
        out.append(
            f"prompt + output = {s.context_tokens:,} tokens exceeds {arch.name}'s maximum context of "
            f"{arch.max_context_tokens:,} tokens; the engine will refuse such requests."
        )
    if not memory.fits:
        out.append(
            f"Does not fit: {gib(memory.total_bytes)} needed per GPU, {gib(memory.budget_bytes)} available "
            f"({percent(s.gpu_memory_utilization)} of {gib(memory.capacity_bytes)})."
        )
    elif memory.headroom_fraction < 0.10:
        out.append(
            f"Headroom is only {percent(memory.headroom_fraction)} of the memory budget: "
            "a longer prompt or a traffic burst will preempt sequences."
        )
    if memory.components["kv_cache_bytes"] > memory.components["weights_bytes"]:
        out.append(
            f"KV cache ({gib(memory.components['kv_cache_bytes'])}) is larger than the weights "
            f"({gib(memory.components['weights_bytes'])}) at this concurrency and context: a cluster sized for "
            "the weights alone runs out of memory long before it runs out of compute."
        )
    for label, dtype in (("weights", s.weight_dtype), ("KV cache", s.kv_cache_dtype)):
        if (
            dtype in ("fp8", "int8", "int4")
            and not accel.supports(dtype)
            and not (dtype == "int4" and label == "weights")
        ):
            out.append(
                f"{accel.name} has no native {dtype} tensor cores: {label} in {dtype} only save memory; "
                "kernels upcast and compute at the 16-bit rate (untested dtype on this GPU)."
            )
    link = accel.interconnect.name if accel.interconnect else "PCIe"
    if s.tensor_parallel > 1 and "PCIe" in link:
        out.append(f"{accel.name} has no NVLink-class interconnect: tensor-parallel all-reduces run over {link}.")
    if s.tensor_parallel > accel.gpus_per_node:
        out.append(
            f"tensor_parallel={s.tensor_parallel} spans more than the {accel.gpus_per_node} GPUs of a node: "
            "its all-reduces cross the network "
            f"({rate(accel.scale_out_bandwidth_bytes_per_second, 'B/s')} per GPU), every layer, every step."
        )
    if s.concurrency % m["replicas"]:
        out.append(
            f"concurrency {s.concurrency} does not split evenly over {m['replicas']} replicas; "
            "the busiest replica is planned."
        )
    if s.prefix_cache_hit_rate > 0:
        out.append(
            f"A {percent(s.prefix_cache_hit_rate)} prefix-cache hit rate is assumed; TTFT and prefill "
            "throughput depend on it holding in production."
        )
    if s.weight_dtype == "int4" and s.weight_group_size < 64:
        out.append(
            f"int4 group size {s.weight_group_size} adds {percent(2.5 / s.weight_group_size / 0.5)} "
            "metadata over the packed weights."
        )
    return out


def _assumptions(s: InferenceScenario, arch: ModelArchitecture, efficiency: Efficiency, calibration) -> list[str]:
    out = [
        "Memory is per GPU on the most loaded pipeline stage; memory.total_bytes is what the scenario needs, "
        "not what an engine pre-reserves.",
        f"Serving engine budget = {percent(s.gpu_memory_utilization)} of device memory (vLLM-style "
        "gpu_memory_utilization); KV cache in paged blocks of "
        f"{s.kv_block_tokens} tokens, every sequence held at its full prompt + output length.",
        f"Efficiencies ({efficiency.source}): prefill GEMMs at {percent(efficiency.prefill_compute)} and decode at "
        f"{percent(efficiency.decode_compute)} of dense peak FLOP/s, HBM at {percent(efficiency.memory_bandwidth)} "
        f"of peak bandwidth, collectives at {percent(efficiency.communication)} of link bandwidth, plus "
        f"{efficiency.layer_overhead_seconds * 1e6:g} µs of launch/synchronisation overhead per layer per step.",
        "Roofline per step: time = max(FLOPs / achieved FLOP/s, bytes / achieved bandwidth) + non-overlapped "
        "communication (2 tensor-parallel all-reduces per layer, pipeline hand-offs).",
        "Continuous batching: each request costs its share of a batched prefill chunk plus output_tokens decode "
        "steps; TPOT includes that prefill interference. Queueing delay is not modelled (TTFT = idle replica).",
        "Runtime overhead: CUDA context and workspaces 0.5 GiB, CUDA graphs 0.25 GiB, NCCL buffers 0.25 GiB when "
        "GPUs communicate.",
    ]
    if arch.model_type == "synthetic":
        out.append(
            f"{arch.name}: architecture derived from size alone (Llama-3 / Qwen3-MoE proportions: "
            f"{arch.num_layers} layers, hidden {arch.hidden_size}, {arch.num_attention_heads} heads, "
            f"{arch.num_kv_heads} KV heads); parameter count within 2% of the requested size."
        )
    if arch.is_moe:
        out.append(
            "MoE: uniform top-k routing; a decode step reads only the experts its tokens are routed to "
            "(expected distinct experts E(1-(1-k/E)^T)); routed experts split over max(TP, EP) GPUs."
        )
    if arch.sliding_window and s.honor_sliding_window:
        out.append(
            f"Sliding-window layers ({arch.sliding_window_layers} of {arch.num_layers}) cache at most "
            f"{arch.sliding_window:,} tokens, as engines that support sliding windows do."
        )
    if s.weight_dtype == "int4":
        out.append(
            f"int4 weights: group-wise (group {s.weight_group_size}) with an fp16 scale and 4-bit zero per "
            "group (GPTQ/AWQ layout); matmuls dequantize to bf16."
        )
    if not s.quantize_embeddings and s.weight_dtype not in ("bf16", "fp16", "fp32"):
        out.append("Embedding, lm_head, norms and routers stay in 16-bit; only linear layers are quantized.")
    if calibration is not None:
        out.append(f"Calibrated with '{calibration.label}': efficiencies and runtime overhead from a measured profile.")
    return out


def _equations(
    s: InferenceScenario,
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: HardwareInputs,
    eff: Efficiency,
    m: dict,
    linear_b: float,
    kv_b: float,
    kv_per_token: float,
) -> list[Equation]:
    kv_formula = (
        "layers x (kv_lora_rank + rope_dim) x bytes" if arch.uses_mla else "2 x layers x kv_heads x head_dim x bytes"
    )
    kv_sub = (
        f"{arch.num_layers} x ({arch.kv_lora_rank} + {arch.qk_rope_head_dim}) x {kv_b:g}"
        if arch.uses_mla
        else f"2 x {arch.num_layers} x {arch.num_kv_heads} x {arch.head_dim} x {kv_b:g}"
    )
    decode = m["decode"]
    return [
        Equation(
            name="Parameters",
            formula="embedding + layers x (attention + MLP/experts + norms) + lm_head",
            substituted=" + ".join(f"{k} {count(v)}" for k, v in counts.as_dict().items() if v),
            value=counts.total,
            unit="parameters",
        ),
        Equation(
            name="KV cache per token",
            formula=kv_formula,
            substituted=kv_sub,
            value=kv_per_token,
            unit="bytes",
            source="vLLM paper Sec. 3 (MHA); DeepSeek-V2 Sec. 2.1 (MLA)",
        ),
        Equation(
            name="Weights per GPU",
            formula="stage layers x (sharded / TP + replicated) x bytes + embedding/head on the edge stage",
            substituted=f"{mem.stage_layers(arch, s.pipeline_parallel)} layers, TP {s.tensor_parallel}, "
            f"{s.weight_dtype} ({linear_b:g} B/param)",
            value=float(m["weights_bytes"]),
            unit="bytes",
        ),
        Equation(
            name="KV cache per GPU",
            formula="sequences per replica x context (rounded to blocks) x stage layers x KV elements per "
            "layer per rank x bytes",
            substituted=f"{int(m['sequences_per_replica'])} x {s.context_tokens:,} tokens x "
            f"{mem.stage_layers(arch, s.pipeline_parallel)} layers x "
            f"{kv_elements_per_token_per_layer(arch, s.tensor_parallel):g} x {kv_b:g} B",
            value=float(m["kv_cache_bytes"]),
            unit="bytes",
        ),
        Equation(
            name="TTFT",
            formula="PP x max(FLOPs / (peak x eff), bytes / (BW x eff)) + all-reduces + hand-offs",
            substituted=f"{s.pipeline_parallel} x max({count(m['prefill']['flops'])}FLOP / "
            f"({rate(hw.prefill_peak_flops_per_second, 'FLOP/s')} x {eff.prefill_compute:g}), "
            f"{gib(m['prefill']['bytes'])} / ({rate(hw.bandwidth_bytes_per_second, 'B/s')} x "
            f"{eff.memory_bandwidth:g})) + {seconds(m['prefill']['comm'])}",
            value=float(m["ttft_seconds"]),
            unit="seconds",
        ),
        Equation(
            name="Decode step",
            formula="PP x (max(FLOPs / (peak x eff), (weights read + KV read) / (BW x eff)) "
            "+ all-reduces + layers x overhead)",
            substituted=f"{s.pipeline_parallel} x max({count(decode['flops'])}FLOP / "
            f"({rate(hw.decode_peak_flops_per_second, 'FLOP/s')} x {eff.decode_compute:g}), "
            f"{gib(decode['bytes'])} / ({rate(hw.bandwidth_bytes_per_second, 'B/s')} x "
            f"{eff.memory_bandwidth:g})) + {seconds(decode['comm'])} + "
            f"{mem.stage_layers(arch, s.pipeline_parallel)} x {seconds(eff.layer_overhead_seconds)}",
            value=float(m["decode_step_seconds"]),
            unit="seconds",
        ),
        Equation(
            name="TPOT",
            formula="(sequences x prefill per request + output x decode step) / output",
            substituted=f"({int(m['sequences_per_replica'])} x {seconds(m['prefill_seconds_per_request'])} + "
            f"{s.output_tokens} x {seconds(m['decode_step_seconds'])}) / {s.output_tokens}",
            value=float(m["tpot_seconds"]),
            unit="seconds",
        ),
        Equation(
            name="Output tokens/s",
            formula="replicas x sequences per replica / TPOT",
            substituted=f"{int(m['replicas'])} x {int(m['sequences_per_replica'])} / {seconds(m['tpot_seconds'])}",
            value=float(m["output_tokens_per_second"]),
            unit="tokens/s",
        ),
        Equation(
            name="$ per 1M output tokens",
            formula="GPUs x $/GPU-hour / (tokens/s x 3600) x 1e6",
            substituted=f"{s.num_gpus} x {usd(hw.usd_per_gpu_hour)} / "
            f"({m['output_tokens_per_second']:,.0f} x 3600) x 1e6",
            value=float(m["usd_per_million_output_tokens"]),
            unit="USD",
        ),
    ]

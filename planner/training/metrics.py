"""The whole training computation over plain numbers: memory per GPU, step time, throughput and cost.

`training_memory` and `training_metrics` broadcast over numpy arrays of the numeric scenario inputs
(layout degrees, batch sizes, sequence length, bytes per element, 0/1 flags, `recompute` 0/1/2), so
`sweep.py` and the micro-batch table run the very same code as `plan()`. Categorical choices that pick a
formula (optimizer, LoRA targets) are fixed per call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.arrays import maximum, where
from planner.hardware.catalog import Accelerator
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.physics import flops, roofline
from planner.physics import memory as base_memory
from planner.physics.cost import (
    gpu_hours,
    usd_for,
    usd_per_hour,
    usd_per_million_tokens,
)
from planner.physics.efficiency import Efficiency
from planner.training import memory as tmem
from planner.training import step_time

RECOMPUTE_LEVEL = {"none": 0, "selective": 1, "full": 2}
MEMORY_COMPONENTS = (
    "weights_bytes",
    "gradients_bytes",
    "gradient_accumulation_bytes",
    "optimizer_states_bytes",
    "sharding_buffers_bytes",
    "activations_bytes",
    "logits_bytes",
    "runtime_overhead_bytes",
)


@dataclass(frozen=True)
class TrainingHardware:
    """Accelerator and cluster numbers the formulas use (arrays when sweeping several GPU types)."""

    memory_capacity_bytes: object
    bandwidth_bytes_per_second: object
    peak_flops_per_second: object
    intra_node_bytes_per_second: object
    intra_node_latency_seconds: object
    inter_node_bytes_per_second: object
    host_link_bytes_per_second: object
    gpus_per_node: object
    is_accelerator: object
    usd_per_gpu_hour: object

    @classmethod
    def from_accelerator(
        cls,
        accel: Accelerator,
        compute_dtype: str,
        usd_per_gpu_hour: float,
        gpus_per_node: int,
        inter_node_bytes_per_second: float,
    ) -> TrainingHardware:
        return cls(
            memory_capacity_bytes=float(accel.memory_bytes),
            bandwidth_bytes_per_second=accel.memory_bandwidth_bytes_per_second,
            peak_flops_per_second=accel.peak_flops(compute_dtype),
            intra_node_bytes_per_second=accel.interconnect_bandwidth_bytes_per_second,
            intra_node_latency_seconds=accel.interconnect_latency_seconds,
            inter_node_bytes_per_second=inter_node_bytes_per_second,
            host_link_bytes_per_second=accel.host_link_bandwidth_bytes_per_second,
            gpus_per_node=gpus_per_node,
            is_accelerator=accel.vendor != "cpu",
            usd_per_gpu_hour=usd_per_gpu_hour,
        )


@dataclass(frozen=True)
class LoraInputs:
    rank: int
    target_modules: tuple[str, ...]
    quantize_base: bool
    double_quantization: bool


def _model_state_inputs(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    tp,
    pp,
    ep,
    first_stage: bool,
    optimizer: str,
    param_b,
    grad_b,
    master_b,
    state_b,
    activation_b,
    lora: LoraInputs | None,
):
    """Per-GPU (before data-parallel sharding) parameter bytes, trainable elements and optimizer-state bytes,
    split into the dense part (sharded over DP x CP) and the routed-expert part (sharded over DP x CP / EP)."""
    layer_elements = tmem.stage_layer_parameter_elements(counts, arch, tp, pp, ep)
    expert_elements = tmem.stage_expert_parameter_elements(counts, arch, tp, pp, ep)
    edge_elements = tmem.edge_parameter_elements(counts, tp, pp, first_stage)
    # One FSDP unit: the largest layer (a MoE layer when there is one) or the embedding/head matrix.
    unit_layer_elements = tmem.stage_layer_parameter_elements(counts, arch, tp, arch.num_layers, ep)
    unit_edge_elements = arch.vocab_size * arch.hidden_size / tp
    if lora is None:
        trainable_dense = layer_elements - expert_elements + edge_elements
        trainable_expert = expert_elements
        param_dense = trainable_dense * param_b
        param_expert = trainable_expert * param_b
        unit_param = maximum(unit_layer_elements, unit_edge_elements) * param_b
        layer_param = unit_layer_elements * param_b
        unit_grad = maximum(unit_layer_elements, unit_edge_elements) * grad_b
        factored = None
        if optimizer == "adafactor":
            factored = tmem.adafactor_state_elements(counts, arch, tp, pp, ep, first_stage)
    else:
        # The frozen base is loaded in the activation dtype (bf16; fp32 only for fp32 recipes); QLoRA: NF4 linears.
        other_b = activation_b
        linear_b = tmem.nf4_bytes_per_element(lora.double_quantization) if lora.quantize_base else other_b
        base_layers = tmem.stage_layer_parameter_elements(counts, arch, tp, pp, ep, linear_b, other_b)
        base_expert = expert_elements * linear_b
        adapters = tmem.lora_adapter_elements(arch, lora.rank, lora.target_modules, tp, pp, ep)
        adapters_expert = tmem.lora_adapter_elements(
            arch, lora.rank, lora.target_modules, tp, pp, ep, experts_only=True
        )
        trainable_dense = adapters - adapters_expert
        trainable_expert = adapters_expert
        param_dense = base_layers - base_expert + edge_elements * other_b + trainable_dense * param_b
        param_expert = base_expert + trainable_expert * param_b
        unit_adapters = tmem.lora_adapter_elements(arch, lora.rank, lora.target_modules, tp, arch.num_layers, ep)
        unit_base = tmem.stage_layer_parameter_elements(counts, arch, tp, arch.num_layers, ep, linear_b, other_b)
        layer_param = unit_base + unit_adapters * param_b
        unit_param = maximum(layer_param, unit_edge_elements * other_b)
        unit_grad = unit_adapters * grad_b
        factored = None
        if optimizer == "adafactor":
            factored = tmem.adafactor_state_elements(
                counts, arch, tp, pp, ep, first_stage, lora.rank, lora.target_modules
            )
    if factored is None:
        per_element = master_b + tmem.optimizer_state_bytes_per_element(optimizer, state_b)
        state_dense = trainable_dense * per_element
        state_expert = trainable_expert * per_element
    else:
        state_dense = trainable_dense * master_b + factored * state_b
        state_expert = trainable_expert * master_b
    return dict(
        param_dense=param_dense,
        param_expert=param_expert,
        trainable_dense=trainable_dense,
        trainable_expert=trainable_expert,
        state_dense=state_dense,
        state_expert=state_expert,
        unit_param=unit_param,
        layer_param=layer_param,
        unit_grad=unit_grad,
    )


def training_memory(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: TrainingHardware,
    *,
    tensor_parallel,
    pipeline_parallel,
    data_parallel,
    context_parallel,
    expert_parallel,
    virtual_stages,
    sequence_parallel,
    zero_stage,
    offload_optimizer,
    offload_parameters,
    optimizer: str,
    param_bytes,
    grad_bytes,
    master_bytes,
    state_bytes,
    activation_bytes,
    grad_accumulation_fp32,
    micro_batch_size,
    global_batch_size,
    sequence_length,
    recompute,
    flash_attention,
    dropout,
    num_gpus,
    lora: LoraInputs | None = None,
    runtime_overhead_correction_bytes=0.0,
    overlap_grad_reduce=True,
) -> dict:
    """Memory per GPU on the most loaded pipeline stage: every component, the host bytes, which stage."""
    tp, pp, dp, cp, ep = tensor_parallel, pipeline_parallel, data_parallel, context_parallel, expert_parallel
    dense_group = dp * cp
    expert_group = dp * cp / ep
    microbatches = global_batch_size / (micro_batch_size * dp)
    tokens = micro_batch_size * sequence_length / cp
    lora_rank = lora.rank if lora else 0
    lora_targets = lora.target_modules if lora else ()
    runtime = base_memory.runtime_overhead_bytes(hw.is_accelerator, num_gpus) + runtime_overhead_correction_bytes

    stages = {}
    for name, first in (("first", True), ("last", False)):
        s = _model_state_inputs(
            arch,
            counts,
            tp,
            pp,
            ep,
            first,
            optimizer,
            param_bytes,
            grad_bytes,
            master_bytes,
            state_bytes,
            activation_bytes,
            lora,
        )
        weights = tmem.weights_bytes(
            s["param_dense"], s["param_expert"], zero_stage, dense_group, expert_group, offload_parameters
        )
        gradients = tmem.gradients_bytes(
            s["trainable_dense"] * grad_bytes, s["trainable_expert"] * grad_bytes, zero_stage, dense_group, expert_group
        )
        accumulation = tmem.gradient_accumulation_bytes(
            s["trainable_dense"],
            s["trainable_expert"],
            zero_stage,
            dense_group,
            expert_group,
            grad_accumulation_fp32,
            grad_bytes,
        )
        optimizer_states = tmem.optimizer_states_bytes(
            s["state_dense"], s["state_expert"], zero_stage, dense_group, expert_group, offload_optimizer
        )
        buffers = tmem.sharding_buffer_bytes(zero_stage, dense_group, s["unit_param"], s["layer_param"], s["unit_grad"])
        activations = tmem.stage_activation_bytes(
            arch,
            tp,
            pp,
            cp,
            micro_batch_size,
            sequence_length,
            microbatches,
            virtual_stages,
            sequence_parallel,
            flash_attention,
            recompute,
            dropout,
            first,
            activation_bytes,
            lora_rank,
            lora_targets,
        )
        is_last = where(pp == 1, True, not first)
        logits = tmem.logits_bytes(arch, tp, tokens, is_last)
        host = where(
            offload_optimizer,
            tmem.optimizer_states_bytes(s["state_dense"], s["state_expert"], zero_stage, dense_group, expert_group),
            0.0,
        ) + where(
            offload_parameters,
            tmem.weights_bytes(s["param_dense"], s["param_expert"], zero_stage, dense_group, expert_group),
            0.0,
        )
        components = dict(
            weights_bytes=weights,
            gradients_bytes=gradients,
            gradient_accumulation_bytes=accumulation,
            optimizer_states_bytes=optimizer_states,
            sharding_buffers_bytes=buffers,
            activations_bytes=activations,
            logits_bytes=logits,
            runtime_overhead_bytes=runtime,
        )
        stages[name] = dict(components=components, host=host, total=sum(components.values()), inputs=s)

    first_heavier = stages["first"]["total"] >= stages["last"]["total"]
    components = {
        key: where(first_heavier, stages["first"]["components"][key], stages["last"]["components"][key])
        for key in MEMORY_COMPONENTS
    }
    total = where(first_heavier, stages["first"]["total"], stages["last"]["total"])
    return dict(
        components=components,
        total_bytes=total,
        capacity_bytes=hw.memory_capacity_bytes,
        budget_bytes=hw.memory_capacity_bytes,
        fits=total <= hw.memory_capacity_bytes,
        host_bytes=where(first_heavier, stages["first"]["host"], stages["last"]["host"]),
        first_stage_is_heaviest=first_heavier,
        first_stage_total_bytes=stages["first"]["total"],
        last_stage_total_bytes=stages["last"]["total"],
        last_stage_inputs=stages["last"]["inputs"],
        microbatches=microbatches,
        tokens_per_microbatch=tokens,
    )


def training_metrics(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: TrainingHardware,
    efficiency: Efficiency,
    *,
    tensor_parallel,
    pipeline_parallel,
    data_parallel,
    context_parallel,
    expert_parallel,
    virtual_stages,
    sequence_parallel,
    zero_stage,
    offload_optimizer,
    offload_parameters,
    optimizer: str,
    param_bytes,
    grad_bytes,
    master_bytes,
    state_bytes,
    activation_bytes,
    grad_accumulation_fp32,
    micro_batch_size,
    global_batch_size,
    sequence_length,
    recompute,
    flash_attention,
    dropout,
    num_gpus,
    training_tokens,
    lora: LoraInputs | None = None,
    runtime_overhead_correction_bytes=0.0,
    overlap_grad_reduce=True,
) -> dict:
    """Every number of a training plan, per GPU unless named otherwise. Broadcasts over arrays."""
    tp, pp, dp, cp, ep, v = (
        tensor_parallel,
        pipeline_parallel,
        data_parallel,
        context_parallel,
        expert_parallel,
        virtual_stages,
    )
    memory = training_memory(
        arch,
        counts,
        hw,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        data_parallel=dp,
        context_parallel=cp,
        expert_parallel=ep,
        virtual_stages=v,
        sequence_parallel=sequence_parallel,
        zero_stage=zero_stage,
        offload_optimizer=offload_optimizer,
        offload_parameters=offload_parameters,
        optimizer=optimizer,
        param_bytes=param_bytes,
        grad_bytes=grad_bytes,
        master_bytes=master_bytes,
        state_bytes=state_bytes,
        activation_bytes=activation_bytes,
        grad_accumulation_fp32=grad_accumulation_fp32,
        micro_batch_size=micro_batch_size,
        global_batch_size=global_batch_size,
        sequence_length=sequence_length,
        recompute=recompute,
        flash_attention=flash_attention,
        dropout=dropout,
        num_gpus=num_gpus,
        lora=lora,
        runtime_overhead_correction_bytes=runtime_overhead_correction_bytes,
    )
    m = memory["microbatches"]
    tokens = memory["tokens_per_microbatch"]
    h = arch.hidden_size
    frozen = lora is not None
    lora_rank = lora.rank if lora else 0
    lora_targets = lora.target_modules if lora else ()
    s_last = memory["last_stage_inputs"]
    dense_group = dp * cp
    expert_group = dp * cp / ep

    # ---- FLOPs: the last stage is the slowest (its layers plus the output head)
    flop_args = (sequence_length, flash_attention, recompute, frozen, lora_rank, lora_targets)
    model_per_token, hardware_per_token = step_time.model_training_flops_per_token(counts, arch, *flop_args)
    dense_model, dense_hw = step_time.layer_training_flops_per_token(counts, arch, False, *flop_args)
    moe_layers = step_time.stage_moe_layers(arch, pp)
    dense_layers = step_time.stage_layers(arch, pp) - moe_layers
    stage_hw_per_token = dense_layers * dense_hw + step_time.head_training_flops_per_token(counts, frozen)
    fwd_share_numerator = dense_layers * (
        2 * flops.layer_matmul_parameters(counts, False)
        + step_time.attention_forward_flops_per_token(arch, sequence_length, flash_attention)
    )
    if arch.is_moe:
        _, moe_hw = step_time.layer_training_flops_per_token(counts, arch, True, *flop_args)
        stage_hw_per_token = stage_hw_per_token + moe_layers * moe_hw
        fwd_share_numerator = fwd_share_numerator + moe_layers * (
            2 * flops.layer_matmul_parameters(counts, True)
            + step_time.attention_forward_flops_per_token(arch, sequence_length, flash_attention)
        )
    stage_flops_mb = tokens * stage_hw_per_token / tp
    backward_share = 1 - (fwd_share_numerator + flops.head_forward_flops_per_token(counts)) / stage_hw_per_token

    compute_mb = roofline.compute_seconds(stage_flops_mb, hw.peak_flops_per_second, efficiency.training_compute)
    stage_param_bytes = s_last["param_dense"] + s_last["param_expert"]
    trainable_local = s_last["trainable_dense"] + s_last["trainable_expert"]
    stored_mb = tmem.stage_activation_bytes(
        arch,
        tp,
        pp,
        cp,
        micro_batch_size,
        sequence_length,
        m,
        v,
        sequence_parallel,
        flash_attention,
        recompute,
        dropout,
        False,
        activation_bytes,
        lora_rank,
        lora_targets,
    )
    bytes_mb = step_time.microbatch_memory_bytes(stage_param_bytes, stored_mb, trainable_local * grad_bytes, recompute)
    memory_mb = roofline.memory_seconds(bytes_mb, hw.bandwidth_bytes_per_second, efficiency.memory_bandwidth)

    # ---- links
    comm_eff = efficiency.communication
    gpn = hw.gpus_per_node

    def link(span):
        return (
            step_time.link_bandwidth(span, gpn, hw.intra_node_bytes_per_second, hw.inter_node_bytes_per_second),
            step_time.link_latency(span, gpn, hw.intra_node_latency_seconds),
        )

    tp_bw, tp_lat = link(tp)
    cp_bw, cp_lat = link(tp * cp)
    dp_bw, dp_lat = link(tp * cp * dp)
    ep_bw, ep_lat = link(tp * cp * ep)
    pp_bw, pp_lat = link(where(pp > 1, tp * cp * dp * 2, 1))

    # ---- per micro-batch communication
    layers = step_time.stage_layers(arch, pp)
    tp_comm = step_time.tensor_parallel_comm_seconds(
        layers, tokens, h, activation_bytes, tp, recompute, tp_bw, tp_lat, comm_eff
    )
    ep_comm = 0.0
    if arch.is_moe:
        ep_comm = step_time.expert_all_to_all_seconds(
            moe_layers, tokens, arch.experts_per_token, h, activation_bytes, ep, recompute, ep_bw, ep_lat, comm_eff
        )
    cp_comm = step_time.context_parallel_comm_seconds(
        layers,
        tokens,
        step_time.kv_elements_per_token_for_cp(arch, tp),
        activation_bytes,
        cp,
        recompute,
        cp_bw,
        cp_lat,
        comm_eff,
    )
    p2p = step_time.pipeline_p2p_seconds(
        tokens, h, activation_bytes, tp, sequence_parallel, pp, v, pp_bw, pp_lat, comm_eff
    )

    reduce_b = where(grad_accumulation_fp32, maximum(grad_bytes, 4.0), grad_bytes)
    grads_dense = s_last["trainable_dense"] * reduce_b
    grads_expert = s_last["trainable_expert"] * reduce_b
    params_dense, params_expert = s_last["param_dense"], s_last["param_expert"]
    trainable_params_dense = s_last["trainable_dense"] * param_bytes
    trainable_params_expert = s_last["trainable_expert"] * param_bytes

    def rs(dense, expert):
        return step_time.gradient_reduce_scatter_seconds(
            dense, dense_group, dp_bw, dp_lat, comm_eff
        ) + step_time.gradient_reduce_scatter_seconds(expert, expert_group, dp_bw, dp_lat, comm_eff)

    def ag(dense, expert):
        return step_time.parameter_allgather_seconds(
            dense, dense_group, dp_bw, dp_lat, comm_eff
        ) + step_time.parameter_allgather_seconds(expert, expert_group, dp_bw, dp_lat, comm_eff)

    allreduce_step = step_time.gradient_allreduce_seconds(
        grads_dense, dense_group, dp_bw, dp_lat, comm_eff
    ) + step_time.gradient_allreduce_seconds(grads_expert, expert_group, dp_bw, dp_lat, comm_eff)
    reduce_scatter = rs(grads_dense, grads_expert)
    gather_trainable = ag(trainable_params_dense, trainable_params_expert)
    gather_all = ag(params_dense, params_expert)
    # ZeRO-2 reduce-scatters every micro-batch; ZeRO-3 also gathers the parameters for forward and backward.
    zero_mb = where(zero_stage >= 3, 2 * gather_all + reduce_scatter, where(zero_stage == 2, reduce_scatter, 0.0))
    # Parameter offload: each micro-batch fetches the GPU's parameter shard over PCIe for forward and backward.
    param_shard_bytes = params_dense / dense_group + params_expert / expert_group
    offload_params_mb = where(
        offload_parameters,
        step_time.host_transfer_seconds(2 * param_shard_bytes, hw.host_link_bytes_per_second, efficiency.host_link),
        0.0,
    )
    overlapped_mb = cp_comm + zero_mb + offload_params_mb
    overlapped_exposed_mb = maximum(overlapped_mb - compute_mb, 0.0)

    slot = maximum(compute_mb, memory_mb) + tp_comm + ep_comm + p2p + overlapped_exposed_mb
    bubble = slot * (pp - 1) / v
    pipeline_seconds = slot * m + bubble

    # ---- end of step: gradient synchronisation (ZeRO 0/1) overlaps the last micro-batch's backward (unless
    # overlap_grad_reduce is off, as in Megatron-LM 2021, which all-reduced after the pipeline flush);
    # the parameter all-gather after a sharded update (ZeRO 1/2) does not.
    grad_sync = where(zero_stage == 0, allreduce_step, where(zero_stage == 1, reduce_scatter, 0.0))
    grad_sync_exposed = maximum(grad_sync - where(overlap_grad_reduce, backward_share * compute_mb, 0.0), 0.0)
    param_gather = where((zero_stage == 1) | (zero_stage == 2), gather_trainable, 0.0)
    opt_shard = zero_stage >= 1
    trainable_shard = s_last["trainable_dense"] / where(opt_shard, dense_group, 1) + s_last["trainable_expert"] / where(
        opt_shard, expert_group, 1
    )
    states_shard = s_last["state_dense"] / where(opt_shard, dense_group, 1) + s_last["state_expert"] / where(
        opt_shard, expert_group, 1
    )
    optimizer_bytes = step_time.optimizer_step_bytes(
        states_shard, trainable_shard, grad_bytes, param_bytes, master_bytes
    )
    optimizer_seconds = where(
        offload_optimizer,
        0.0,
        roofline.memory_seconds(optimizer_bytes, hw.bandwidth_bytes_per_second, efficiency.memory_bandwidth),
    )
    offload_step = where(
        offload_optimizer,
        step_time.host_transfer_seconds(
            trainable_shard * (grad_bytes + param_bytes), hw.host_link_bytes_per_second, efficiency.host_link
        ),
        0.0,
    )

    step = pipeline_seconds + grad_sync_exposed + param_gather + optimizer_seconds + offload_step
    breakdown = dict(
        forward_backward_seconds=m * maximum(compute_mb, memory_mb),
        pipeline_bubble_seconds=bubble,
        tensor_parallel_seconds=m * tp_comm,
        expert_parallel_seconds=m * ep_comm,
        pipeline_p2p_seconds=m * p2p,
        overlapped_communication_exposed_seconds=m * overlapped_exposed_mb,
        data_parallel_seconds=grad_sync_exposed + param_gather,
        optimizer_step_seconds=optimizer_seconds,
        offload_transfer_seconds=offload_step,
    )

    tokens_per_step = global_batch_size * sequence_length
    tokens_per_second = tokens_per_step / step
    model_flops_step = model_per_token * tokens_per_step
    hardware_flops_step = hardware_per_token * tokens_per_step
    cluster_peak = num_gpus * hw.peak_flops_per_second
    time_to_train = training_tokens / tokens_per_second
    cluster_usd_per_hour = usd_per_hour(num_gpus, hw.usd_per_gpu_hour)
    return dict(
        memory=memory,
        microbatches=m,
        tokens_per_microbatch=tokens,
        model_flops_per_token=model_per_token,
        hardware_flops_per_token=hardware_per_token,
        model_flops_per_step=model_flops_step,
        hardware_flops_per_step=hardware_flops_step,
        stage_flops_per_microbatch=stage_flops_mb,
        stage_bytes_per_microbatch=bytes_mb,
        compute_seconds_per_microbatch=compute_mb,
        memory_seconds_per_microbatch=memory_mb,
        communication_seconds_per_microbatch=tp_comm + ep_comm + p2p + overlapped_exposed_mb,
        slot_seconds=slot,
        communication_totals=dict(
            tensor_parallel_seconds=m * tp_comm,
            expert_parallel_seconds=m * ep_comm,
            context_parallel_seconds=m * cp_comm,
            pipeline_p2p_seconds=m * p2p,
            sharded_data_parallel_seconds=m * zero_mb,
            parameter_offload_seconds=m * offload_params_mb,
            gradient_sync_seconds=grad_sync,
            parameter_gather_seconds=param_gather,
        ),
        step_breakdown_seconds=breakdown,
        optimizer_step_bytes=optimizer_bytes,
        step_seconds=step,
        flops_roofline_seconds=hardware_flops_step / cluster_peak,
        pipeline_bubble_fraction=step_time.pipeline_bubble_fraction(pp, m, v),
        tokens_per_step=tokens_per_step,
        tokens_per_second=tokens_per_second,
        tokens_per_second_per_gpu=tokens_per_second / num_gpus,
        mfu=model_flops_step / (step * cluster_peak),
        hfu=hardware_flops_step / (step * cluster_peak),
        time_to_train_seconds=time_to_train,
        steps_to_train=training_tokens / tokens_per_step,
        usd_per_hour=cluster_usd_per_hour,
        gpu_hours=gpu_hours(num_gpus, time_to_train),
        usd_total=usd_for(num_gpus, time_to_train, hw.usd_per_gpu_hour),
        usd_per_million_tokens=usd_per_million_tokens(cluster_usd_per_hour, tokens_per_second),
    )


def largest_fitting_micro_batch(memory_fn, upper: int) -> int:
    """Largest micro-batch in 1..upper whose memory fits (0 when none), `memory_fn(array) -> (total, budget)`.
    Memory grows with the micro-batch, so the fitting set is a prefix; evaluated in one broadcast call."""
    candidates = np.arange(1, max(int(upper), 1) + 1)
    total, budget = memory_fn(candidates)
    fitting = candidates[np.asarray(total) <= np.asarray(budget)]
    return int(fitting.max()) if fitting.size else 0

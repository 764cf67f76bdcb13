"""One optimizer step of a training job: the terms of `planner.training.step_time` assembled into the time of
one micro-batch on the slowest (last) pipeline stage, the pipeline schedule, and the end-of-step
synchronisation and optimizer update.

The step is a sum of named parts (`TrainingStep`): micro-batch compute (or memory) time, exposed
communication of each kind, the pipeline bubble, the optimizer step and host transfers. Overlap rules:
tensor-parallel (less the backward's share hidden under the weight-gradient GEMMs with `overlap_tp_backward`),
expert all-to-all and pipeline sends are exposed; ring-attention K/V exchange, ZeRO-2/3
per-micro-batch collectives and parameter-offload fetches hide behind the micro-batch's compute; gradient
synchronisation (ZeRO 0/1) hides behind the last micro-batch's backward when `overlap_grad_reduce`; the
parameter all-gather after a sharded update and optimizer-offload transfers are exposed.
Broadcasts over numpy arrays of the numeric inputs (DESIGN rule 4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

from planner.arrays import Flag, Number, maximum, minimum, where
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.physics import collectives, communication, gemm_efficiency, roofline
from planner.physics.communication import Link

# what collectives launched beside compute add to it (the compute slows; what outlasts it waits)
from planner.physics.communication import overlapped_exposed_seconds as overlapped_exposed
from planner.physics.efficiency import EfficiencyFigures
from planner.physics.memory import stage_layers, stage_moe_layers
from planner.physics.projections import stage_layer_split
from planner.training import elementwise_kernels, step_time
from planner.training import memory as tmem
from planner.training import named_kernels as kernels
from planner.training.footprint import ModelStateShard, TrainingMemory, stage_layer_counts
from planner.training.inputs import TrainingHardware, TrainingInputs
from planner.training.recompute import full_recompute_fraction, recomputed_forwards


@dataclass(frozen=True, slots=True)
class TrainingFlops:
    """FLOPs per trained token: whole model (model and hardware FLOPs, see step_time), and what one GPU of
    the last stage executes (before the TP split), with the backward's share of it."""

    model_flops_per_token: Number
    hardware_flops_per_token: Number
    stage_hardware_flops_per_token: Number
    stage_backward_share: Number
    stage_gemm_flops_per_token: Number = 0.0  # the slowest stage's layer GEMMs (what FP8 speeds up)
    recompute_fraction: Number = 1.0  # share of layers full recomputation repeats (block method: fewer)
    stage_layers: Number = 0.0  # layers of the stage the step time runs on (the slowest)
    stage_attention_flops_per_token: Number = 0.0  # its softmax attention (what a named fused kernel runs)
    stage_moe_layers: Number = 0.0  # MoE layers of that stage
    routed_expert_forward_passes: Number = 1.0  # forwards of the routed experts per micro-batch (recomputation)
    expert_load_imbalance: Number = 1.0  # the busiest expert-parallel rank's routed tokens over the mean


@dataclass(frozen=True, slots=True)
class MicrobatchCommunication:
    """Seconds of each collective for one micro-batch on one GPU, before overlap."""

    tensor_parallel_seconds: Number
    expert_parallel_seconds: Number
    context_parallel_seconds: Number
    pipeline_p2p_seconds: Number
    sharded_data_parallel_seconds: Number  # ZeRO-2 reduce-scatter, ZeRO-3 also the parameter all-gathers
    parameter_offload_seconds: Number  # parameter shard fetched over the host link (ZeRO-Infinity)

    @property
    def overlapped_seconds(self) -> Number:
        """The collectives that run alongside the micro-batch's compute."""
        return self.context_parallel_seconds + self.sharded_data_parallel_seconds + self.parameter_offload_seconds


@dataclass(frozen=True, slots=True)
class MicrobatchTime:
    """One micro-batch's forward and backward on one GPU of the last stage: its roofline and pipeline slot."""

    tokens: Number
    flops: Number
    bytes: Number
    compute_seconds: Number
    memory_seconds: Number
    communication: MicrobatchCommunication
    overlapped_exposed_seconds: Number  # what the overlapped collectives add beyond the compute
    # the backward's tensor-parallel collectives hidden under the weight-gradient GEMMs (`overlap_tp_backward`)
    tensor_parallel_hidden_seconds: Number = 0.0
    # expert dispatch/combine hidden under another micro-batch's compute (`overlap_expert_all_to_all`)
    expert_parallel_hidden_seconds: Number = 0.0

    @property
    def tensor_parallel_exposed_seconds(self) -> Number:
        return self.communication.tensor_parallel_seconds - self.tensor_parallel_hidden_seconds

    @property
    def expert_parallel_exposed_seconds(self) -> Number:
        return self.communication.expert_parallel_seconds - self.expert_parallel_hidden_seconds

    @property
    def exposed_communication_seconds(self) -> Number:
        c = self.communication
        return (
            self.tensor_parallel_exposed_seconds
            + self.expert_parallel_exposed_seconds
            + c.pipeline_p2p_seconds
            + self.overlapped_exposed_seconds
        )

    @property
    def slot_seconds(self) -> Number:
        """The micro-batch's slot in the schedule: the slower roofline plus its exposed communication."""
        return maximum(self.compute_seconds, self.memory_seconds) + self.exposed_communication_seconds


@dataclass(frozen=True, slots=True)
class DataParallelCollectives:
    """Seconds of each data-parallel collective over this GPU's dense and expert shards (each over its own
    group), before overlap; which ones run, and how often, depends on the ZeRO stage."""

    gradient_allreduce_seconds: Number
    gradient_reduce_scatter_seconds: Number
    trainable_allgather_seconds: Number  # updated trainable shards after a sharded optimizer step
    parameter_allgather_seconds: Number  # every parameter (ZeRO-3, twice per micro-batch)


@dataclass(frozen=True, slots=True)
class OptimizerStep:
    bytes: Number  # HBM traffic of the update on this GPU's shard
    seconds: Number  # on the GPU; zero when the optimizer runs on the host
    offload_transfer_seconds: Number  # gradients down and parameters up over the host link


@dataclass(frozen=True, slots=True)
class CommunicationTotals:
    """Seconds per step of each kind of communication, before overlap (the plan's `communication_totals`)."""

    tensor_parallel_seconds: Number
    expert_parallel_seconds: Number
    context_parallel_seconds: Number
    pipeline_p2p_seconds: Number
    sharded_data_parallel_seconds: Number
    parameter_offload_seconds: Number
    gradient_sync_seconds: Number
    parameter_gather_seconds: Number

    def as_dict(self) -> dict[str, Number]:
        return {name: getattr(self, name) for name in _COMMUNICATION_KINDS}


_COMMUNICATION_KINDS = tuple(f.name for f in fields(CommunicationTotals))


@dataclass(frozen=True, slots=True)
class TrainingStep:
    """Seconds of one optimizer step on the slowest GPU, by part, summing to `step_seconds` (its breakdown)."""

    forward_backward_seconds: Number  # m micro-batches at the slower of compute and memory
    pipeline_bubble_seconds: Number
    tensor_parallel_seconds: Number
    expert_parallel_seconds: Number
    pipeline_p2p_seconds: Number
    overlapped_communication_exposed_seconds: Number
    data_parallel_seconds: Number  # exposed gradient sync + parameter all-gather after the update
    optimizer_step_seconds: Number
    offload_transfer_seconds: Number
    step_seconds: Number = field(init=False)  # the sum, computed on construction

    def __post_init__(self) -> None:
        object.__setattr__(self, "step_seconds", sum(self.as_dict().values()))

    def as_dict(self) -> dict[str, Number]:
        """The parts by name (the total left out)."""
        return {name: getattr(self, name) for name in _STEP_PARTS}


_STEP_PARTS = tuple(f.name for f in fields(TrainingStep) if f.init)


@dataclass(frozen=True, slots=True)
class StepTime:
    flops: TrainingFlops
    microbatch: MicrobatchTime
    optimizer: OptimizerStep
    communication: CommunicationTotals
    step: TrainingStep


def recompute_fraction_of(arch: ModelArchitecture, inputs: TrainingInputs) -> Number:
    """Share of the most loaded stage's layers full recomputation repeats (`recompute.full_recompute_fraction`)."""
    recipe, lay = inputs.recipe, inputs.layout
    return full_recompute_fraction(
        stage_layers(arch, lay.pipeline_parallel),
        recipe.recompute_method,
        recipe.recompute_num_layers,
        lay.virtual_stages,
    )


def flops_inputs(inputs: TrainingInputs, recompute_fraction: Number = 1.0) -> step_time.FlopsInputs:
    """What the FLOPs per token read of a plan's inputs (`recompute_fraction`: `recompute_fraction_of`)."""
    recipe = inputs.recipe
    return step_time.FlopsInputs(
        sequence_length=inputs.batch.sequence_length,
        flash_attention=recipe.flash_attention,
        recompute=recipe.recompute,
        frozen_base=inputs.lora is not None,
        lora_rank=inputs.lora_rank,
        lora_targets=inputs.lora_targets,
        recompute_modules=recipe.recompute_modules,
        recompute_fraction=recompute_fraction,
        # one rank holding every expert (EP 1) runs all routed tokens whatever their split
        expert_load_imbalance=where(inputs.layout.expert_parallel > 1, recipe.expert_load_imbalance, 1.0),
    )


def training_flops(arch: ModelArchitecture, counts: ParameterCounts, inputs: TrainingInputs) -> TrainingFlops:
    """FLOPs per token: the whole model, and the slowest stage (the last, with the output head; with uneven
    stages the stage with the most work among the first, a middle and the last)."""
    recipe, lay = inputs.recipe, inputs.layout
    fraction = recompute_fraction_of(arch, inputs)
    work = flops_inputs(inputs, fraction)
    model, hardware = step_time.model_training_flops_per_token(counts, arch, work)
    pp = lay.pipeline_parallel
    seq, flash = inputs.batch.sequence_length, recipe.flash_attention
    uneven = stage_layer_counts(arch, inputs)
    if uneven is None:
        stage_hardware = step_time.stage_hardware_flops_per_token(counts, arch, pp, work)
        stage_forward = step_time.stage_forward_flops_per_token(counts, arch, pp, seq, flash)
        stage_gemm = step_time.stage_gemm_flops_per_token(counts, arch, pp, work)
        stage_attention = step_time.stage_attention_flops_per_token(arch, pp, work)
        layers = stage_layers(arch, pp)
    else:
        first, middle, last = uneven
        candidates = [
            (step_time.stage_hardware_flops_per_token(counts, arch, pp, work, layers=n, head=head), n)
            for n, head in ((last, True), (first, False), (middle, False))
        ]
        stage_hardware, layers = candidates[0]
        for work_flops, n in candidates[1:]:
            slower = work_flops > stage_hardware
            stage_hardware, layers = where(slower, work_flops, stage_hardware), where(slower, n, layers)
        stage_forward = step_time.stage_forward_flops_per_token(counts, arch, pp, seq, flash, layers=layers)
        stage_gemm = step_time.stage_gemm_flops_per_token(counts, arch, pp, work, layers=layers)
        stage_attention = step_time.stage_attention_flops_per_token(arch, pp, work, layers=layers)
    return TrainingFlops(
        model_flops_per_token=model,
        hardware_flops_per_token=hardware,
        stage_hardware_flops_per_token=stage_hardware,
        stage_backward_share=1 - stage_forward / stage_hardware,
        stage_gemm_flops_per_token=stage_gemm,
        recompute_fraction=fraction,
        stage_layers=layers,
        stage_attention_flops_per_token=stage_attention,
        stage_moe_layers=stage_layer_split(arch, pp, None if uneven is None else layers)[1],
        routed_expert_forward_passes=step_time.routed_expert_forward_passes(work),
        expert_load_imbalance=work.expert_load_imbalance,
    )


def group_link(hw: TrainingHardware, group_span_gpus, participants: Number = 1, all_to_all: Flag = False) -> Link:
    """The link a group of `participants` GPUs over `group_span_gpus` consecutive ranks talks over: the
    interconnect inside a node, the network across nodes over as many NICs as the group has members per node
    (`communication.Link.spanning`; NCCL alone, no peer-access kernels). `participants` 1: one GPU's NIC (a
    point-to-point send, a ring of sends)."""
    return Link.spanning(
        group_span_gpus,
        hw.gpus_per_node,
        hw.intra_node_bytes_per_second,
        hw.inter_node_bytes_per_second,
        hw.intra_node_latency_seconds,
        participants=participants,
        all_to_all=all_to_all,
    )


def _over_both_groups(
    collective: Callable, dense_bytes, expert_bytes, inputs: TrainingInputs, hw: TrainingHardware, eff
):
    """A data-parallel collective of the dense shard over DP x CP plus one of the expert shard over DP x CP / EP,
    each across nodes over as many NICs as its group has members per node (`group_link` with the group as
    participants: NCCL puts one ring per channel on each NIC; 192 GB/s multi-node busBW on DGX A100 with 8 x 25
    GB/s, `collectives.link_bandwidth`). It was one GPU's NIC for every group until 2026-12-02, which matched
    DeepSpeed ZeRO-3's 2021 runs on Selene (Narayanan et al. 2021 Table 2: ~16 GB/s per GPU of parameter
    gathers) but not NCCL's own figures nor Composer FSDP on H100 (llm-foundry's MPT-70B on 32 GPUs at 882
    tokens/s per GPU needs >= 85 GB/s per GPU of gathers). DeepSpeed's 2021 implementation is not modelled: its
    rows are unmapped in benchmarks/accuracy.py and strict xfails in tests/training/validation."""
    lay = inputs.layout
    span = lay.tensor_parallel * lay.context_parallel * lay.data_parallel
    dense_link = group_link(hw, span, lay.dense_group)
    expert_link = group_link(hw, span, lay.expert_group)
    return collective(dense_bytes, lay.dense_group, dense_link, eff) + collective(
        expert_bytes, lay.expert_group, expert_link, eff
    )


def data_parallel_collectives(
    hw: TrainingHardware, efficiency: EfficiencyFigures, inputs: TrainingInputs, states: ModelStateShard
) -> DataParallelCollectives:
    p = inputs.precision
    eff = efficiency.communication
    # An fp32 accumulation buffer is what gets reduced.
    reduce_b = where(inputs.recipe.grad_accumulation_fp32, maximum(p.grad, 4.0), p.grad)
    grads_dense = states.trainable_dense_elements * reduce_b
    grads_expert = states.trainable_expert_elements * reduce_b
    return DataParallelCollectives(
        gradient_allreduce_seconds=_over_both_groups(
            step_time.gradient_allreduce_seconds, grads_dense, grads_expert, inputs, hw, eff
        ),
        gradient_reduce_scatter_seconds=_over_both_groups(
            step_time.gradient_reduce_scatter_seconds, grads_dense, grads_expert, inputs, hw, eff
        ),
        trainable_allgather_seconds=_over_both_groups(
            step_time.parameter_allgather_seconds,
            states.trainable_dense_elements * p.param,
            states.trainable_expert_elements * p.param,
            inputs,
            hw,
            eff,
        ),
        parameter_allgather_seconds=_over_both_groups(
            step_time.parameter_allgather_seconds,
            states.param_dense_bytes,
            states.param_expert_bytes,
            inputs,
            hw,
            eff,
        ),
    )


def _stage_layers_communicating(arch: ModelArchitecture, inputs: TrainingInputs, flops: TrainingFlops | None):
    """(layers, MoE layers) of the stage whose collectives the step waits on: the slowest stage when stages are
    uneven, else the most loaded stage of the even split."""
    pp = inputs.layout.pipeline_parallel
    if flops is not None and stage_layer_counts(arch, inputs) is not None:
        return flops.stage_layers, minimum(flops.stage_layers, arch.num_moe_layers)
    return stage_layers(arch, pp), stage_moe_layers(arch, pp)


def _layer_collectives_seconds(
    arch: ModelArchitecture, hw: TrainingHardware, efficiency: EfficiencyFigures, inputs: TrainingInputs, flops
) -> tuple[Number, Number, Number]:
    """(tensor-parallel, expert all-to-all, ring-attention) seconds of one micro-batch on the stage: each
    parallelism's collectives per layer, recomputed ones included, over its own group's link."""
    lay, recipe = inputs.layout, inputs.recipe
    tp, cp, ep = lay.tensor_parallel, lay.context_parallel, lay.expert_parallel
    tokens, bytes_per_element, eff = inputs.tokens_per_microbatch, inputs.precision.activation, efficiency.communication
    fraction = flops.recompute_fraction if flops is not None else 1.0
    tp_again, ep_again, cp_again = step_time.recomputed_collectives(
        recipe.recompute, recipe.recompute_modules, fraction
    )
    layers, moe_layers = _stage_layers_communicating(arch, inputs, flops)
    hidden_states = communication.hidden_state_message_bytes(tokens, arch.hidden_size, bytes_per_element)
    # Training prices the TP all-reduce's tree as one node's, even where TP spans nodes.
    tp_link = replace(group_link(hw, tp, tp), nodes=1)
    tensor_parallel = step_time.tensor_parallel_comm_seconds(layers, hidden_states, tp, tp_link, eff, tp_again)
    expert_parallel = 0.0
    if arch.is_moe:
        # the busiest rank receives (and returns) its imbalance x the mean share of the routed tokens
        dispatched = communication.hidden_state_message_bytes(
            tokens * arch.experts_per_token * recipe.expert_load_imbalance, arch.hidden_size, bytes_per_element
        )
        span = tp * cp * ep
        nodes = minimum(collectives.group_nodes(span, hw.gpus_per_node), ep)
        # DeepEP: one RDMA copy per remote node (the cross-node bytes bound the all-to-all across nodes)
        dispatched = dispatched * where(
            recipe.node_deduplicated_dispatch,
            communication.node_deduplicated_dispatch_share(arch.experts_per_token, nodes),
            1.0,
        )
        expert_parallel = step_time.expert_all_to_all_seconds(
            moe_layers, dispatched, ep, group_link(hw, span, ep, all_to_all=True), eff, ep_again
        )
    kv = step_time.ring_attention_message_bytes(
        tokens, cp, step_time.kv_elements_per_token_for_cp(arch, tp), bytes_per_element
    )
    # Ring attention passes K/V around one ring of sends: its boundary rank's one NIC (participants 1).
    context_parallel = step_time.context_parallel_comm_seconds(layers, kv, cp, group_link(hw, tp * cp), eff, cp_again)
    return tensor_parallel, expert_parallel, context_parallel


def microbatch_communication(
    arch: ModelArchitecture,
    hw: TrainingHardware,
    efficiency: EfficiencyFigures,
    inputs: TrainingInputs,
    states: ModelStateShard,
    data_parallel: DataParallelCollectives,
    flops: TrainingFlops | None = None,
) -> MicrobatchCommunication:
    lay, recipe = inputs.layout, inputs.recipe
    tp, pp, cp = lay.tensor_parallel, lay.pipeline_parallel, lay.context_parallel
    zero = recipe.zero_stage
    tensor_parallel, expert_parallel, context_parallel = _layer_collectives_seconds(arch, hw, efficiency, inputs, flops)
    # The next stage sits a whole TP x CP x DP block away.
    pp_link = group_link(hw, where(pp > 1, tp * cp * lay.data_parallel * 2, 1))
    message = step_time.pipeline_message_bytes(
        inputs.tokens_per_microbatch, arch.hidden_size, inputs.precision.activation, tp, lay.sequence_parallel
    )
    p2p = step_time.pipeline_p2p_seconds(message, pp, lay.virtual_stages, pp_link, efficiency.communication)
    reduce_scatter = data_parallel.gradient_reduce_scatter_seconds
    sharded = where(
        zero >= 3,
        2 * data_parallel.parameter_allgather_seconds + reduce_scatter,
        where(zero == 2, reduce_scatter, 0.0),
    )
    # Forward and backward each fetch the GPU's parameter shard.
    shard_bytes = states.param_dense_bytes / lay.dense_group + states.param_expert_bytes / lay.expert_group
    offload = where(
        recipe.offload_parameters,
        step_time.host_transfer_seconds(2 * shard_bytes, hw.host_link_bytes_per_second, efficiency.host_link),
        0.0,
    )
    return MicrobatchCommunication(
        tensor_parallel_seconds=tensor_parallel,
        expert_parallel_seconds=expert_parallel,
        context_parallel_seconds=context_parallel,
        pipeline_p2p_seconds=p2p,
        sharded_data_parallel_seconds=sharded,
        parameter_offload_seconds=offload,
    )


def microbatch_time(
    arch: ModelArchitecture,
    hw: TrainingHardware,
    efficiency: EfficiencyFigures,
    inputs: TrainingInputs,
    memory: TrainingMemory,
    flops: TrainingFlops,
    communication: MicrobatchCommunication,
) -> MicrobatchTime:
    """The last stage's micro-batch: its layers and the head, its stored activations and weights."""
    tokens = inputs.tokens_per_microbatch
    states = memory.last_stage.states
    tp = inputs.layout.tensor_parallel
    stage_flops = tokens * flops.stage_hardware_flops_per_token / tp
    attention = tokens * flops.stage_attention_flops_per_token / tp
    attention_flops, attention_seconds = kernels.named_kernel_attention(hw, attention)
    experts = (flops.stage_moe_layers, flops.routed_expert_forward_passes, flops.expert_load_imbalance)
    expert_flops, expert_seconds = kernels.routed_expert_grouped_gemms(arch, hw, inputs, *experts)
    compute = (
        roofline.shaped_compute_seconds(
            kernels.fp8_equivalent_flops(
                stage_flops - attention_flops - expert_flops,
                tokens * flops.stage_gemm_flops_per_token / tp - expert_flops,
                hw,
            ),
            hw.peak_flops_per_second,
            efficiency.training_compute,
            hw.gemm_ceiling_ratio,
            microbatch_gemm_kernels(flops.stage_layers, inputs.recipe.recompute, flops.recompute_fraction),
            hw.gemm_tail_seconds,
        )
        + attention_seconds
        + expert_seconds
        + kernels.routed_token_copy_seconds(arch, hw, efficiency, inputs, *experts)
        + kernels.fp8_cast_seconds(arch, hw, efficiency, inputs, flops)
        + elementwise_kernels.elementwise_seconds(arch, hw, efficiency, inputs, flops)
    )
    stage_bytes = step_time.microbatch_memory_bytes(
        states.param_bytes,
        memory.last_stage.components.activations_bytes,
        states.trainable_elements * inputs.precision.grad,
        inputs.recipe.recompute,
        flops.recompute_fraction,
    )
    return MicrobatchTime(
        tokens=tokens,
        flops=stage_flops,
        bytes=stage_bytes,
        compute_seconds=compute,
        memory_seconds=roofline.memory_seconds(stage_bytes, hw.bandwidth_bytes_per_second, efficiency.memory_bandwidth),
        communication=communication,
        overlapped_exposed_seconds=overlapped_exposed(compute, communication.overlapped_seconds),
        tensor_parallel_hidden_seconds=tensor_parallel_hidden_seconds(inputs, flops, communication, compute),
        expert_parallel_hidden_seconds=where(
            inputs.recipe.overlap_expert_all_to_all,
            communication.expert_parallel_seconds - overlapped_exposed(compute, communication.expert_parallel_seconds),
            0.0,
        ),
    )


def tensor_parallel_hidden_seconds(inputs: TrainingInputs, flops: TrainingFlops, communication, compute_seconds):
    """The tensor-parallel collectives hidden under GEMMs. Megatron-core (`overlap_tp_backward`) launches the
    backward's input-gradient all-reduce (reduce-scatter under SP) asynchronously beside the weight-gradient GEMM
    (Korthikanti et al. 2022 Sec. 6.2): at most those 2 of the layer's collectives and that GEMM pass's time (one
    of forward, input and weight gradient, and the recomputed forward). With `tp_comm_overlap` (TE userbuffers,
    torchtitan's async TP) every collective is split into TP chunks pipelined with its GEMM's: all but one chunk
    hide under the layer GEMMs. Both net of the GEMMs' slowdown beside them (`overlapped_exposed`)."""
    recipe = inputs.recipe
    again_tp, _, _ = step_time.recomputed_collectives(
        recipe.recompute, recipe.recompute_modules, flops.recompute_fraction
    )
    collectives = communication.tensor_parallel_seconds
    backward = collectives * 2 / (step_time.TENSOR_PARALLEL_COLLECTIVES_PER_LAYER + again_tp)
    weight_gradient = weight_gradient_seconds(inputs, flops, compute_seconds)
    async_backward = where(recipe.overlap_tp_backward, backward - overlapped_exposed(weight_gradient, backward), 0.0)
    chunked = collectives * (1 - 1 / inputs.layout.tensor_parallel)
    gemms = compute_seconds * flops.stage_gemm_flops_per_token / flops.stage_hardware_flops_per_token
    pipelined = chunked - overlapped_exposed(gemms, chunked)
    return where(recipe.tp_comm_overlap, maximum(pipelined, async_backward), async_backward)


def weight_gradient_seconds(inputs: TrainingInputs, flops: TrainingFlops, compute_seconds):
    """The weight-gradient GEMMs' share of a micro-batch's compute: one of its GEMM passes (forward, input
    gradient, weight gradient, and the forward again for the share full recomputation repeats) of the stage's GEMM
    share. What async TP hides collectives under, and what ZB-H1 defers into the bubble."""
    gemm_share = flops.stage_gemm_flops_per_token / flops.stage_hardware_flops_per_token
    passes = 3 + recomputed_forwards(inputs.recipe.recompute, flops.recompute_fraction)
    return compute_seconds * gemm_share / passes


def microbatch_gemm_kernels(layers, recompute, recompute_fraction):
    """GEMM kernels one micro-batch launches on the stage: per layer the forward's `GEMMS_PER_LAYER`, each run
    three times (forward, input gradient, weight gradient), plus the forward again for the layers full
    recomputation repeats. Each pays the fixed kernel time of `physics.gemm_efficiency` (small per-GPU GEMMs
    reach less of the peak)."""
    passes = gemm_efficiency.TRAINING_GEMMS_PER_FORWARD_GEMM + recomputed_forwards(recompute, recompute_fraction)
    return layers * gemm_efficiency.GEMMS_PER_LAYER * passes


def optimizer_step(
    hw: TrainingHardware, efficiency: EfficiencyFigures, inputs: TrainingInputs, states: ModelStateShard
) -> OptimizerStep:
    """The update of this GPU's optimizer shard (ZeRO >= 1 shards it over the data-parallel groups), on the GPU
    or, offloaded, on the host with gradients and parameters crossing the host link."""
    lay, p, recipe = inputs.layout, inputs.precision, inputs.recipe
    sharded = recipe.zero_stage >= 1
    dense_shards, expert_shards = where(sharded, lay.dense_group, 1), where(sharded, lay.expert_group, 1)
    trainable = states.trainable_dense_elements / dense_shards + states.trainable_expert_elements / expert_shards
    state_bytes = states.state_dense_bytes / dense_shards + states.state_expert_bytes / expert_shards
    grad_bytes = tmem.gradient_bytes_per_element(p.grad, recipe.grad_accumulation_fp32, recipe.megatron_gradient_buffer)
    traffic = step_time.optimizer_step_bytes(state_bytes, trainable, grad_bytes, p.param, p.master)
    on_gpu = roofline.memory_seconds(traffic, hw.bandwidth_bytes_per_second, efficiency.memory_bandwidth)
    transfer = step_time.host_transfer_seconds(
        trainable * (p.grad + p.param), hw.host_link_bytes_per_second, efficiency.host_link
    )
    return OptimizerStep(
        bytes=traffic,
        seconds=where(recipe.offload_optimizer, 0.0, on_gpu),
        offload_transfer_seconds=where(recipe.offload_optimizer, transfer, 0.0),
    )


def training_step(
    arch: ModelArchitecture,
    counts: ParameterCounts,
    hw: TrainingHardware,
    efficiency: EfficiencyFigures,
    inputs: TrainingInputs,
    memory: TrainingMemory,
) -> StepTime:
    """Step time on one GPU of the last stage: m micro-batch slots plus the bubble, then the end of the step."""
    lay, recipe = inputs.layout, inputs.recipe
    zero, m = recipe.zero_stage, inputs.microbatches
    states = memory.last_stage.states
    flops = training_flops(arch, counts, inputs)
    dp = data_parallel_collectives(hw, efficiency, inputs, states)
    per_microbatch = microbatch_communication(arch, hw, efficiency, inputs, states, dp, flops)
    microbatch = microbatch_time(arch, hw, efficiency, inputs, memory, flops, per_microbatch)
    optimizer = optimizer_step(hw, efficiency, inputs, states)

    grad_sync = where(
        zero == 0, dp.gradient_allreduce_seconds, where(zero == 1, dp.gradient_reduce_scatter_seconds, 0.0)
    )
    hidden_behind = where(recipe.overlap_grad_reduce, flops.stage_backward_share * microbatch.compute_seconds, 0.0)
    grad_sync_exposed = overlapped_exposed(hidden_behind, grad_sync)
    param_gather = where((zero == 1) | (zero == 2), dp.trainable_allgather_seconds, 0.0)
    step = TrainingStep(
        forward_backward_seconds=m * maximum(microbatch.compute_seconds, microbatch.memory_seconds),
        pipeline_bubble_seconds=step_time.pipeline_bubble_seconds(
            microbatch.slot_seconds,
            lay.pipeline_parallel,
            lay.virtual_stages,
            weight_gradient_seconds(inputs, flops, microbatch.compute_seconds),
            recipe.zero_bubble,
        ),
        tensor_parallel_seconds=m * microbatch.tensor_parallel_exposed_seconds,
        expert_parallel_seconds=m * microbatch.expert_parallel_exposed_seconds,
        pipeline_p2p_seconds=m * per_microbatch.pipeline_p2p_seconds,
        overlapped_communication_exposed_seconds=m * microbatch.overlapped_exposed_seconds,
        data_parallel_seconds=grad_sync_exposed + param_gather,
        optimizer_step_seconds=optimizer.seconds,
        offload_transfer_seconds=optimizer.offload_transfer_seconds,
    )
    communication = CommunicationTotals(
        tensor_parallel_seconds=m * per_microbatch.tensor_parallel_seconds,
        expert_parallel_seconds=m * per_microbatch.expert_parallel_seconds,
        context_parallel_seconds=m * per_microbatch.context_parallel_seconds,
        pipeline_p2p_seconds=m * per_microbatch.pipeline_p2p_seconds,
        sharded_data_parallel_seconds=m * per_microbatch.sharded_data_parallel_seconds,
        parameter_offload_seconds=m * per_microbatch.parameter_offload_seconds,
        gradient_sync_seconds=grad_sync,
        parameter_gather_seconds=param_gather,
    )
    return StepTime(flops=flops, microbatch=microbatch, optimizer=optimizer, communication=communication, step=step)

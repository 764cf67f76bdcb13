"""Training step time: FLOPs of forward, backward and recomputation, the pipeline schedule, and the
communication of each parallelism, one function per term.

Conventions: FLOPs count 2 per multiply-add. "Model FLOPs" are the work the model needs (causal
attention: s(s+1)/2 query-key pairs per sequence), the numerator of MFU; "hardware FLOPs" are what the
kernels execute (without FlashAttention the masked score matrix is computed in full; recomputation adds
a forward), the numerator of HFU (Chowdhery et al. 2022, PaLM, App. B; Korthikanti et al. 2022, Sec. 6).
Times are seconds on one GPU. All functions broadcast over numpy arrays of scenario numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.arrays import Flag, Number, maximum, where
from planner.model.architecture import (
    ModelArchitecture,
    ParameterCounts,
    attention_score_flops_per_token,
    prefill_attention_flops,
    recurrent_mixer_flops_per_token,
)
from planner.physics import communication
from planner.physics.communication import Link
from planner.physics.flops import head_forward_flops_per_token, layer_matmul_parameters
from planner.physics.lora import lora_forward_flops_per_token
from planner.physics.projections import layer_matrices, over_layers, stage_layer_split, stage_layers_total
from planner.training.activations import op_recomputed_matrices
from planner.training.recompute import Recompute, recomputed_forwards

# ---------------------------------------------------------------------------------------------
# FLOPs per token


def attention_forward_flops_per_token(arch: ModelArchitecture, sequence_length, causal):
    """Token-mixing FLOPs of one layer for one token, averaged over the sequence's positions and the model's
    layers. Attention layers: causal (FlashAttention skips masked blocks): (s + 1)/2 keys on average,
    sliding-window layers capped; dense (unfused attention computes the whole masked score matrix): s keys;
    4 x heads x head_dim per key (QK^T and attention x V). Linear-attention and Mamba layers: their state
    updates (`recurrent_mixer_flops_per_token`), the same either way."""
    layers = arch.num_layers
    recurrent = recurrent_mixer_flops_per_token(arch) / layers
    causal_flops = prefill_attention_flops(arch, sequence_length) / (layers * sequence_length)
    full_flops = attention_score_flops_per_token(arch, sequence_length, "prefill")
    if arch.is_hybrid:  # only the softmax-attention layers compute scores
        full_flops = full_flops * arch.num_attention_layers / layers
    return where(causal, causal_flops, full_flops) + recurrent


def matrices_forward_flops_per_token(arch: ModelArchitecture, moe_layer: bool, matrices) -> float:
    """Forward FLOPs of the given projections of one layer for one token: 2 x d_in x d_out each (a token runs
    k of the routed experts)."""
    total = 0.0
    for m in matrices:
        copies = arch.experts_per_token if m.expert else m.count
        total += 2 * copies * m.d_in * m.d_out
    return total


def selective_recompute_matmul_flops_per_token(arch: ModelArchitecture, moe_layer: bool, recompute_modules) -> float:
    """Matmul FLOPs per token that Megatron-core's selective modules repeat in one layer: mlp the dense MLP's
    projections, moe the router, routed (k per token) and shared experts, shared_experts the shared experts,
    mla_up_proj MLA's q and kv up-projections. core_attn repeats attention (`attention_forward_flops_per_token`);
    layernorm and moe_act repeat elementwise kernels only (memory-bound, not counted as FLOPs)."""
    modules = set(recompute_modules)
    matrices = layer_matrices(arch, moe_layer)
    mlp_names = ("gate", "up", "down", "router")
    chosen = []
    if moe_layer and "moe" in modules:
        chosen += [m for m in matrices if m.module in mlp_names]
    elif moe_layer and "shared_experts" in modules:
        chosen += [m for m in matrices if m.module in mlp_names and not m.expert and m.module != "router"]
    if not moe_layer and "mlp" in modules:
        chosen += [m for m in matrices if m.module in mlp_names]
    if "mla_up_proj" in modules and arch.uses_mla:
        chosen += [m for m in matrices if m.module in ("q", "v") and m.split == "column"]
    return matrices_forward_flops_per_token(arch, moe_layer, chosen)


@dataclass(frozen=True, slots=True)
class FlopsInputs:
    """What a layer's training FLOPs per token depend on beside the model: the sequence, the attention kernel,
    the recomputation (level, Megatron-core modules, the share of layers full recomputation repeats) and a
    frozen base with LoRA adapters. Fields may be numpy arrays of one shape (the sweep); the tuples stay scalars."""

    sequence_length: Number
    flash_attention: Flag
    recompute: Recompute | Number = Recompute.NONE
    frozen_base: Flag = False  # LoRA: the base gets no weight gradient
    lora_rank: int = 0
    lora_targets: tuple[str, ...] = ()
    recompute_modules: tuple[str, ...] = ("core_attn",)
    recompute_fraction: Number = 1.0  # share of layers full recomputation repeats (block method: fewer)
    expert_load_imbalance: Number = 1.0  # MoE: busiest expert-parallel rank's routed tokens over the mean


def routed_expert_forward_flops_per_token(counts: ParameterCounts, moe_layer: bool):
    """Forward FLOPs per token of the k routed experts of one MoE layer (uniform top-k: 2 x the routed expert
    parameters x k / E); 0 for a dense layer."""
    if not moe_layer or counts.moe_layer is None:
        return 0.0
    return 2 * counts.moe_layer.experts_routed * counts.experts_per_token / max(counts.num_experts, 1)


def busiest_rank_extra_expert_flops_per_token(counts: ParameterCounts, moe_layer: bool, work: FlopsInputs, passes):
    """What the busiest expert-parallel rank executes beyond the mean in one MoE layer, per token: (imbalance - 1)
    x the routed experts' forward FLOPs x `passes` (forward, backward GEMMs, and the forward again where full
    recomputation repeats it). The step waits for that rank; model FLOPs (the useful work) do not change."""
    full_again = recomputed_forwards(work.recompute, work.recompute_fraction)
    extra = work.expert_load_imbalance - 1.0
    return extra * routed_expert_forward_flops_per_token(counts, moe_layer) * (passes + full_again)


def layer_recompute_flops_per_token(
    counts: ParameterCounts, arch: ModelArchitecture, moe_layer: bool, work: FlopsInputs
):
    """(matmul, attention) FLOPs per token that recomputation repeats in one layer's backward.

    Full: the layer's forward (matmuls with adapters, and the attention the kernels execute) for the
    `recompute_fraction` of layers recomputed. Selective (Megatron-core modules): core_attn repeats the
    attention forward, FlashAttention included (Megatron checkpoints the fused kernel and runs it again);
    the other modules their matmuls (`selective_recompute_matmul_flops_per_token`). Op (torchtitan): every
    second matmul (`op_recomputed_matrices`); fused attention is saved, not repeated."""
    adapters = lora_forward_flops_per_token(arch, work.lora_rank, work.lora_targets, moe_layer)
    return _recompute_flops_per_token(counts, arch, moe_layer, work, adapters)


def _recompute_flops_per_token(
    counts: ParameterCounts, arch: ModelArchitecture, moe_layer: bool, work: FlopsInputs, adapters
):
    """`layer_recompute_flops_per_token` with the adapters' forward FLOPs per token given (0: the base GEMMs)."""
    recompute, modules, fraction = work.recompute, work.recompute_modules, work.recompute_fraction
    executed_attention = attention_forward_flops_per_token(arch, work.sequence_length, work.flash_attention)
    full_matmul = 2 * layer_matmul_parameters(counts, moe_layer) + adapters
    selective_matmul = selective_recompute_matmul_flops_per_token(arch, moe_layer, modules)
    op_matmul = matrices_forward_flops_per_token(arch, moe_layer, op_recomputed_matrices(arch, moe_layer))
    matmul = where(
        recompute == Recompute.FULL,
        full_matmul * fraction,
        where(recompute == Recompute.SELECTIVE, selective_matmul, where(recompute == Recompute.OP, op_matmul, 0.0)),
    )
    return matmul, executed_attention * attention_recompute_passes(work)


def attention_recompute_passes(work: FlopsInputs):
    """Attention forwards recomputation repeats per layer: the recomputed share of layers under full
    recomputation, one under selective recomputation with core_attn, none otherwise (op-level saves it)."""
    selective = 1.0 if "core_attn" in work.recompute_modules else 0.0
    return where(
        work.recompute == Recompute.FULL,
        work.recompute_fraction,
        where(work.recompute == Recompute.SELECTIVE, selective, 0.0),
    )


def routed_expert_forward_passes(work: FlopsInputs):
    """Forwards the routed experts' GEMMs run per micro-batch: one, plus the recomputed share of layers under full
    recomputation, or one more under selective recomputation with the moe module; op-level recomputation keeps the
    expert block (`op_recomputed_matrices`). The same repeats `layer_recompute_flops_per_token` counts."""
    selective = 1.0 if "moe" in work.recompute_modules else 0.0
    return 1.0 + where(
        work.recompute == Recompute.FULL,
        work.recompute_fraction,
        where(work.recompute == Recompute.SELECTIVE, selective, 0.0),
    )


def layer_training_flops_per_token(
    counts: ParameterCounts, arch: ModelArchitecture, moe_layer: bool, work: FlopsInputs
):
    """(model FLOPs, hardware FLOPs) of one layer for one token over forward + backward (+ recomputation).

    Backward = 2 x forward for trained matrices (input and weight gradients); a frozen base (LoRA) needs only
    the input gradient (1 x forward). Attention's backward is 2 x its forward either way. Recomputation adds
    `layer_recompute_flops_per_token` (FlashAttention's own backward recomputation of the scores is inside its
    kernel and counted in neither). Model FLOPs use causal attention, hardware FLOPs the attention the kernels
    execute."""
    matmul = 2 * layer_matmul_parameters(counts, moe_layer)
    matmul_passes = where(work.frozen_base, 2, 3)
    adapters = lora_forward_flops_per_token(arch, work.lora_rank, work.lora_targets, moe_layer)
    useful_attention = attention_forward_flops_per_token(arch, work.sequence_length, True)
    executed_attention = attention_forward_flops_per_token(arch, work.sequence_length, work.flash_attention)
    model = matmul_passes * matmul + 3 * useful_attention + 3 * adapters
    recomputed_matmul, recomputed_attention = _recompute_flops_per_token(counts, arch, moe_layer, work, adapters)
    hardware = (
        matmul_passes * matmul
        + 3 * executed_attention
        + 3 * adapters
        + (recomputed_matmul + recomputed_attention)
        + busiest_rank_extra_expert_flops_per_token(counts, moe_layer, work, matmul_passes)
    )
    return model, hardware


def layer_attention_flops_per_token(arch: ModelArchitecture, work: FlopsInputs):
    """Hardware FLOPs per token of one layer's softmax attention (QK^T and attention x V): its forward, the
    backward's 2 x, and the share recomputation repeats; what a named fused-attention kernel runs
    (`planner.physics.attention_efficiency`). Linear-attention and Mamba state updates are not in it."""
    executed = attention_forward_flops_per_token(arch, work.sequence_length, work.flash_attention)
    softmax = executed - recurrent_mixer_flops_per_token(arch) / arch.num_layers
    return softmax * (3 + attention_recompute_passes(work))


def layer_gemm_flops_per_token(counts: ParameterCounts, arch: ModelArchitecture, moe_layer: bool, work: FlopsInputs):
    """Hardware FLOPs per token of one layer's weight GEMMs (forward, both backward GEMMs, recomputed ones): the
    part an FP8 recipe runs at the FP8 peak. Attention scores and the adapters stay in 16 bits."""
    matmul = 2 * layer_matmul_parameters(counts, moe_layer)
    recomputed, _ = _recompute_flops_per_token(counts, arch, moe_layer, work, 0.0)
    return 3 * matmul + recomputed + busiest_rank_extra_expert_flops_per_token(counts, moe_layer, work, 3)


def head_training_flops_per_token(counts: ParameterCounts, frozen_base: Flag = False):
    """Output projection over forward and backward (never recomputed): 3 x forward, 2 x when frozen."""
    return where(frozen_base, 2, 3) * head_forward_flops_per_token(counts)


def layers_training_flops_per_token(
    counts: ParameterCounts, arch: ModelArchitecture, dense_layers, moe_layers, work: FlopsInputs
):
    """(model, hardware) FLOPs per token of `dense_layers` dense and `moe_layers` MoE layers over forward and
    backward (+ recomputation): `layer_training_flops_per_token` summed, without the output head."""
    return over_layers(
        arch,
        dense_layers,
        moe_layers,
        lambda moe_layer: layer_training_flops_per_token(counts, arch, moe_layer, work),
    )


def model_training_flops_per_token(counts: ParameterCounts, arch: ModelArchitecture, work: FlopsInputs):
    """(model, hardware) FLOPs per trained token, whole model. For a dense model without recomputation
    this is 6 N + 6 x causal attention (Kaplan et al. 2020's 6N plus attention)."""
    model, hardware = layers_training_flops_per_token(counts, arch, arch.num_dense_layers, arch.num_moe_layers, work)
    head = head_training_flops_per_token(counts, work.frozen_base)
    return model + head, hardware + head


def stage_hardware_flops_per_token(
    counts: ParameterCounts,
    arch: ModelArchitecture,
    pipeline_parallel,
    work: FlopsInputs,
    layers=None,
    head: bool = True,
):
    """Hardware FLOPs per token of the last pipeline stage (the slowest): its layers, MoE layers counted as
    `stage_moe_layers` places them, plus the output head; before the tensor-parallel split. `layers`: the
    stage's layers when stages are uneven; `head` False for a stage without the output head."""
    dense_layers, moe_layers = stage_layer_split(arch, pipeline_parallel, layers)
    _, total = layers_training_flops_per_token(counts, arch, dense_layers, moe_layers, work)
    return total + (head_training_flops_per_token(counts, work.frozen_base) if head else 0.0)


def stage_gemm_flops_per_token(
    counts: ParameterCounts, arch: ModelArchitecture, pipeline_parallel, work: FlopsInputs, layers=None
):
    """Layer-GEMM hardware FLOPs per token of one stage (no output head: it stays in 16 bits, as Megatron-core's
    non-TE output layer), before the tensor-parallel split: what FP8 runs at the FP8 peak."""
    return stage_layers_total(
        arch, pipeline_parallel, layers, lambda moe_layer: layer_gemm_flops_per_token(counts, arch, moe_layer, work)
    )


def stage_attention_flops_per_token(arch: ModelArchitecture, pipeline_parallel, work: FlopsInputs, layers=None):
    """Softmax-attention hardware FLOPs per token of one stage (`layer_attention_flops_per_token` over its
    layers), before the tensor-parallel split."""
    return stage_layers_total(
        arch,
        pipeline_parallel,
        layers,
        lambda moe_layer: layer_attention_flops_per_token(arch, work),
    )


def stage_forward_flops_per_token(
    counts: ParameterCounts, arch: ModelArchitecture, pipeline_parallel, sequence_length, flash_attention, layers=None
):
    """Forward FLOPs per token of the last stage's layers (matmuls and executed attention, no adapters) and the
    output head: what the backward's share of `stage_hardware_flops_per_token` is measured against."""
    attention = attention_forward_flops_per_token(arch, sequence_length, flash_attention)
    layer_flops = stage_layers_total(
        arch, pipeline_parallel, layers, lambda moe_layer: 2 * layer_matmul_parameters(counts, moe_layer) + attention
    )
    return layer_flops + head_forward_flops_per_token(counts)


# ---------------------------------------------------------------------------------------------
# pipeline schedule


def pipeline_bubble_fraction(pipeline_parallel, microbatches, virtual_stages: Number = 1):
    """Idle share of the ideal time: (p - 1)/m for 1F1B, (p - 1)/(v m) interleaved (Narayanan et al. 2021,
    Sec. 2.2)."""
    return (pipeline_parallel - 1) / (virtual_stages * microbatches)


def pipeline_bubble_seconds(
    slot_seconds,
    pipeline_parallel,
    virtual_stages: Number = 1,
    weight_gradient_seconds: Number = 0.0,
    zero_bubble: Flag = False,
):
    """Idle time of one step: (p - 1)/v micro-batch slots while the pipeline fills and drains, i.e.
    `pipeline_bubble_fraction` of the m slots of work (Narayanan et al. 2021, Sec. 2.2). Zero-bubble ZB-H1 (Qi et
    al., "Zero Bubble Pipeline Parallelism", ICLR 2024; DeepSeek-V3 technical report, Table 2, "ZB1P"): the weight
    gradients W of a slot F + B are deferred into the drain, leaving (p - 1)(F + B - 2W)."""
    zb = (pipeline_parallel - 1) * maximum(slot_seconds - 2 * weight_gradient_seconds, 0.0)
    return where(zero_bubble, zb, slot_seconds * (pipeline_parallel - 1) / virtual_stages)


# ---------------------------------------------------------------------------------------------
# communication per micro-batch, on the critical path unless said otherwise: training's counts and messages,
# priced by the per-layer model of `planner.physics.communication` (links: `Link.spanning`, NCCL ring and tree
# only: training has no peer-access kernels)

# Collectives per layer of one micro-batch's forward and backward, before recomputation repeats some
# (`recomputed_collectives`).
TENSOR_PARALLEL_COLLECTIVES_PER_LAYER = 4  # Megatron TP: two all-reduces in the forward, two in the backward
EXPERT_ALL_TO_ALLS_PER_LAYER = 4  # MoE dispatch and combine, in the forward and in the backward
RING_ATTENTION_EXCHANGES_PER_LAYER = 3  # K and V in the forward; K and V again and their gradients backward


def tensor_parallel_comm_seconds(
    layers, message_bytes, tensor_parallel, link: Link, efficiency, recomputed_per_layer: Number = 0
):
    """Megatron TP: `TENSOR_PARALLEL_COLLECTIVES_PER_LAYER` all-reduces of the layer's hidden states (tokens x h,
    `communication.hidden_state_message_bytes`) per layer, plus the ones recomputation repeats
    (`recomputed_per_layer`, `recomputed_collectives`); with sequence parallelism each becomes an all-gather +
    reduce-scatter of the same volume (Korthikanti Sec. 4.2.2). Not overlapped with compute."""
    per_layer = TENSOR_PARALLEL_COLLECTIVES_PER_LAYER + recomputed_per_layer
    return communication.tensor_parallel_seconds(layers, per_layer, message_bytes, tensor_parallel, link, efficiency)


def expert_all_to_all_seconds(
    moe_layers, message_bytes, expert_parallel, link: Link, efficiency, recomputed_per_layer: Number = 0
):
    """MoE dispatch and combine: `EXPERT_ALL_TO_ALLS_PER_LAYER` all-to-alls of tokens x k x h (`message_bytes`)
    per MoE layer, plus the ones recomputation repeats (`recomputed_per_layer`); (EP - 1)/EP of it leaves the
    GPU. Not overlapped."""
    per_layer = EXPERT_ALL_TO_ALLS_PER_LAYER + recomputed_per_layer
    return communication.expert_all_to_all_seconds(
        moe_layers, per_layer, message_bytes, expert_parallel, link, efficiency
    )


def ring_attention_message_bytes(tokens, context_parallel, kv_elements_per_token, bytes_per_element):
    """The K and V one ring-attention pass gathers: every rank's `tokens` tokens x `kv_elements_per_token`
    (`kv_elements_per_token_for_cp`)."""
    return tokens * context_parallel * kv_elements_per_token * bytes_per_element


def context_parallel_comm_seconds(
    layers, message_bytes, context_parallel, link: Link, efficiency, recomputed_per_layer: Number = 0
):
    """Ring attention (Megatron-core CP): every rank receives the other ranks' K and V
    (`ring_attention_message_bytes`) `RING_ATTENTION_EXCHANGES_PER_LAYER` times per layer, plus a forward's worth
    when recomputed (`recomputed_per_layer`). Runs alongside the attention blocks; the plan hides it behind the
    micro-batch's compute."""
    per_layer = RING_ATTENTION_EXCHANGES_PER_LAYER + recomputed_per_layer
    return communication.context_parallel_seconds(layers, per_layer, message_bytes, context_parallel, link, efficiency)


def pipeline_message_bytes(tokens, hidden, bytes_per_element, tensor_parallel, sequence_parallel):
    """The activations one stage sends the next (tokens x h), split over TP by Megatron's scatter-gather
    optimisation or sequence parallelism."""
    hidden_states = communication.hidden_state_message_bytes(tokens, hidden, bytes_per_element)
    return hidden_states / where(sequence_parallel, tensor_parallel, 1)


def pipeline_p2p_seconds(message_bytes, pipeline_parallel, virtual_stages, link: Link, efficiency):
    """Per micro-batch per stage: send the activations forward and receive their gradient backward
    (`pipeline_message_bytes`); the interleaved schedule crosses v times as many stage boundaries."""
    sends = 2 * virtual_stages
    return where(pipeline_parallel > 1, communication.pipeline_p2p_seconds(sends, message_bytes, link, efficiency), 0.0)


# ---------------------------------------------------------------------------------------------
# data-parallel and sharding collectives


def gradient_allreduce_seconds(grad_bytes, group, link: Link, efficiency):
    """DDP / ZeRO-0: one all-reduce of this GPU's gradients per step over `link.nodes` nodes (NCCL's ring or tree,
    whichever is faster; a ring sends 2 (n-1)/n of them through each link)."""
    return communication.allreduce_seconds(grad_bytes, group, link, efficiency)


def gradient_reduce_scatter_seconds(grad_bytes, group, link: Link, efficiency):
    """ZeRO-1/2/3, FSDP, Megatron's distributed optimizer: reduce-scatter of the gradients ((n-1)/n cross)."""
    return communication.reduce_scatter_seconds(grad_bytes, group, link, efficiency)


def parameter_allgather_seconds(param_bytes, group, link: Link, efficiency):
    """All-gather of the updated (ZeRO-1/2) or needed (ZeRO-3: forward and backward) parameter shards."""
    return communication.allgather_seconds(param_bytes, group, link, efficiency)


def host_transfer_seconds(num_bytes, host_link_bytes_per_second, efficiency):
    """Bytes over the host link (PCIe) for CPU offload."""
    return num_bytes / (host_link_bytes_per_second * efficiency)


def optimizer_step_bytes(
    optimizer_state_bytes,
    trainable_elements,
    grad_bytes_per_element,
    param_bytes_per_element,
    master_bytes_per_element,
):
    """HBM traffic of one optimizer step on one GPU's shard: every state read and written once (master weights
    included), the gradients read twice (clipping norm, update), the working parameters written (read and
    written when they are the master copy). A memory-bound elementwise kernel (fused AdamW)."""
    params = where(master_bytes_per_element > 0, param_bytes_per_element, 2 * param_bytes_per_element)
    return 2 * optimizer_state_bytes + trainable_elements * (2 * grad_bytes_per_element + params)


def microbatch_memory_bytes(
    stage_param_bytes, stored_activation_bytes, grad_bytes, recompute, recompute_fraction: Number = 1.0
):
    """HBM traffic of one micro-batch's forward and backward on one GPU: the stage's weights read three times
    (forward, input gradient, weight gradient; four with full recomputation of the recomputed share), the saved
    activations written and read once, the gradients accumulated (read and written). A lower bound for the
    memory roofline."""
    extra = recomputed_forwards(recompute, recompute_fraction)
    return stage_param_bytes * (3 + extra) + 2 * stored_activation_bytes + 2 * grad_bytes


def recomputed_collectives(recompute, recompute_modules=("core_attn",), recompute_fraction: Number = 1.0):
    """Collectives per layer that recomputation repeats, as (tensor-parallel all-reduces, expert all-to-alls,
    ring-attention K/V rounds). Full: the forward's 2, 2 and 1 for the recomputed share of layers. Selective:
    mlp / moe / shared_experts repeat the MLP's reduction (1; moe also its dispatch and combine, 2), core_attn
    the ring exchange (1). Op: none (torchtitan saves collective outputs)."""
    modules = set(recompute_modules)
    mlp = 1 if modules & {"mlp", "moe", "shared_experts"} else 0
    a2a = 2 if "moe" in modules else 0
    ring = 1 if "core_attn" in modules else 0
    f = recompute_fraction
    full, selective = recompute == Recompute.FULL, recompute == Recompute.SELECTIVE
    tp = where(full, 2 * f, where(selective, mlp, 0))
    ep = where(full, 2 * f, where(selective, a2a, 0))
    cp = where(full, 1 * f, where(selective, ring, 0))
    return tp, ep, cp


def kv_elements_per_token_for_cp(arch: ModelArchitecture, tensor_parallel):
    """K and V elements per token one TP rank exchanges in ring attention."""
    if arch.uses_mla:
        heads = arch.num_attention_heads / tensor_parallel
        return heads * (arch.qk_nope_head_dim + arch.qk_rope_head_dim + arch.v_head_dim)
    return 2 * maximum(arch.num_kv_heads / tensor_parallel, 1) * arch.head_dim

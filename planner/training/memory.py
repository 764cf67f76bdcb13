"""Training memory terms, one function each: the parameter geometry on one GPU and the model states
(parameters, gradients, optimizer states; ZeRO). Number formats: `planner.training.precision`; saved
activations: `planner.training.activations`.

Scope of every term: one GPU on one pipeline stage (the caller evaluates the first and the last stage
and keeps the larger total: the first holds the most in-flight micro-batches, the last the output
head and the logits). Scenario numbers (tensor_parallel, micro-batch, bytes per element, flags, ...)
may be Python numbers or numpy arrays of one shape; the model (`ModelArchitecture`,
`ParameterCounts`) is fixed. Flags are 0/1 (or bools). Memory is bytes; counts are elements.

Sources: ZeRO (Rajbhandari et al. 2020, Sec. 3 and Fig. 1) for model states; Shazeer & Stern 2018 for
Adafactor; PEFT / Megatron for the LoRA layout.
"""

from __future__ import annotations

import dataclasses

from planner.arrays import Flag, Number, maximum, where
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.physics import memory as base_memory
from planner.physics.projections import layer_matrices, local_shape, stage_layer_split, stage_layers_total

# ---------------------------------------------------------------------------------------------
# parameter geometry on one GPU


_last_layers_only: tuple[ParameterCounts | None, ParameterCounts | None] = (None, None)


def _layers_only(counts: ParameterCounts) -> ParameterCounts:
    """The counts without embedding, head, final norm and vision tower. One plan asks a dozen times for the
    same counts object, and `replace` re-runs `__init__` over every field, so the last answer is kept (by
    identity: the counts are frozen; one tuple, read and written whole, so threads never see a mixed pair)."""
    global _last_layers_only
    seen, layers = _last_layers_only
    if seen is counts and layers is not None:
        return layers
    layers = dataclasses.replace(counts, embedding=0, position_embedding=0, lm_head=0, final_norms=0, vision_encoder=0)
    _last_layers_only = (counts, layers)
    return layers


def uneven_stage_layers(num_layers, pipeline_parallel, first_stage_layers, last_stage_layers):
    """(first, middle, last) stage layers with uneven stages (Megatron `--decoder-first-pipeline-num-layers` /
    `--decoder-last-pipeline-num-layers`: the stages not named split the rest evenly); None for the even split."""
    first, last = first_stage_layers, last_stage_layers
    if first is None and last is None:
        return None
    given = (first is not None) + (last is not None)
    rest = num_layers - (first or 0) - (last or 0)
    middle = rest / maximum(pipeline_parallel - given, 1)
    return (middle if first is None else first), middle, (middle if last is None else last)


def stage_layer_parameter_bytes(
    counts: ParameterCounts,
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    expert_parallel,
    linear_bytes_per_element: Number,
    other_bytes_per_element: Number,
    layers=None,
):
    """Bytes of the transformer layers' parameters on one GPU of the most loaded stage, the linear layers at
    `linear_bytes_per_element` and norms and biases at `other_bytes_per_element`. Reuses
    `planner.memory.weight_bytes` with the embedding and head removed; routed experts are split over TP x EP
    (Megatron-core expert-TP = TP). `layers`: a stage of that many layers (uneven stages), priced per layer kind."""

    def weights(stages):
        return base_memory.weight_bytes(
            _layers_only(counts),
            arch,
            tensor_parallel,
            stages,
            tensor_parallel * expert_parallel,
            linear_bytes_per_element,
            other_bytes_per_element,
            other_bytes_per_element,
        )

    if layers is None:
        return weights(pipeline_parallel)
    one = weights(arch.num_layers)  # one layer: a MoE layer when the model has any
    dense_layers, moe_layers = stage_layer_split(arch, pipeline_parallel, layers)
    if not arch.is_moe:
        return layers * one
    dense_one = (weights(1) - arch.num_moe_layers * one) / arch.num_dense_layers if arch.num_dense_layers else 0.0
    return moe_layers * one + dense_layers * dense_one


def stage_layer_parameter_elements(
    counts: ParameterCounts, arch: ModelArchitecture, tensor_parallel, pipeline_parallel, expert_parallel, layers=None
):
    """Parameters (elements) of the transformer layers on one GPU of the most loaded stage: `stage_layer_parameter_bytes`
    at one byte per element."""
    return stage_layer_parameter_bytes(
        counts, arch, tensor_parallel, pipeline_parallel, expert_parallel, 1.0, 1.0, layers
    )


def stage_expert_parameter_elements(
    counts: ParameterCounts, arch: ModelArchitecture, tensor_parallel, pipeline_parallel, expert_parallel, layers=None
):
    """Routed-expert parameters on one GPU of the stage with the most MoE layers (they shard over the
    expert-data-parallel group, DP / EP, instead of DP)."""
    routed = counts.moe_layer.experts_routed if counts.moe_layer else 0
    _, moe_layers = stage_layer_split(arch, pipeline_parallel, layers)
    return moe_layers * routed / (tensor_parallel * expert_parallel)


def stage_gemm_weight_elements(
    counts: ParameterCounts, arch: ModelArchitecture, tensor_parallel, pipeline_parallel, expert_parallel, layers=None
):
    """Elements of the layers' GEMM weights (attention projections, MLP and expert matrices; not norms, biases or
    routers) on one GPU of the stage: what Transformer Engine keeps FP8 copies of."""

    def per_layer(moe_layer: bool):
        total = 0.0
        for m in layer_matrices(arch, moe_layer):
            if m.module == "router":
                continue
            d_in, d_out, copies = local_shape(m, arch, tensor_parallel, expert_parallel)
            total = total + copies * d_in * d_out
        return total

    return stage_layers_total(arch, pipeline_parallel, layers, per_layer)


def edge_parameter_elements(counts: ParameterCounts, tensor_parallel, pipeline_parallel, first_stage: bool):
    """Embedding (first stage) or output head and final norm (last stage) on one GPU; vocabulary-parallel
    over TP. With one stage both live together and a tied head is the embedding itself; with PP > 1 the
    last stage keeps its own copy of a tied head (Megatron). A multimodal checkpoint's vision tower sits
    with the embedding, split across TP (as `physics.memory.weight_bytes` places it)."""
    embedding = (counts.embedding + counts.vision_encoder) / tensor_parallel + counts.position_embedding
    head_matrix = (counts.lm_head if counts.lm_head else counts.embedding) / tensor_parallel
    head = head_matrix + counts.final_norms
    tied_copy = head_matrix if counts.lm_head == 0 else 0.0
    single = embedding + head - tied_copy
    own = embedding if first_stage else head
    return where(pipeline_parallel > 1, own, single)


def adafactor_state_elements(
    counts: ParameterCounts,
    arch: ModelArchitecture,
    tensor_parallel,
    pipeline_parallel,
    expert_parallel,
    first_stage: bool,
    layers=None,
    edges: bool = True,
):
    """Adafactor's factored second moment on one GPU (Shazeer & Stern 2018; torch.optim.Adafactor):
    a row and a column vector (d_out + d_in) per matrix, a full vector per bias/norm; no first moment. With LoRA:
    `lora_adafactor_state_elements`."""
    t, ep = tensor_parallel, expert_parallel

    def per_layer(moe_layer: bool):
        matrices = 0.0
        for m in layer_matrices(arch, moe_layer):
            d_in, d_out, copies = local_shape(m, arch, t, ep)
            matrices = matrices + copies * (d_in + d_out)
        layer = counts.moe_layer if moe_layer and counts.moe_layer is not None else counts.dense_layer
        vectors = (
            layer.norms + (layer.attention_bias + layer.mlp_bias) / t + layer.attention_out_bias + layer.mlp_out_bias
        )
        return matrices + vectors

    total = stage_layers_total(arch, pipeline_parallel, layers, per_layer)
    if edges:
        h = arch.hidden_size
        embedding = (arch.vocab_size / t + h) + (
            arch.learned_position_embeddings + h if counts.position_embedding else 0
        )
        head = (arch.vocab_size / t + h) + counts.final_norms
        tied = counts.lm_head == 0
        single = embedding + head - where(tied, arch.vocab_size / t + h, 0)
        total = total + where(pipeline_parallel > 1, embedding if first_stage else head, single)
    return total


def lora_adafactor_state_elements(
    arch: ModelArchitecture, rank, target_modules, tensor_parallel, pipeline_parallel, expert_parallel, layers=None
):
    """Adafactor's factored states of the LoRA adapters on one GPU: A (r + d_in) and B (d_out + r) of every
    targeted projection (`adafactor_state_elements` for the full model)."""
    t, ep = tensor_parallel, expert_parallel

    def per_layer(moe_layer: bool):
        matrices = 0.0
        for m in layer_matrices(arch, moe_layer):
            if m.module in target_modules:
                d_in, d_out, copies = local_shape(m, arch, t, ep)
                matrices = matrices + copies * (d_in + d_out + 2 * rank)
        return matrices

    return stage_layers_total(arch, pipeline_parallel, layers, per_layer)


# ---------------------------------------------------------------------------------------------
# model states (ZeRO Sec. 3: parameters, gradients, optimizer states)


def zero_shards(zero_stage, group, from_stage):
    """Ways a model state is split by ZeRO: over the data-parallel `group` once `zero_stage` reaches
    `from_stage` (optimizer states: 1, gradients: 2, parameters: 3), else not at all."""
    return where(zero_stage >= from_stage, group, 1)


def weights_bytes(dense_bytes, expert_bytes, zero_stage, dense_group, expert_group, offload_parameters: Flag = False):
    """Parameters resident on one GPU: this GPU's TP/PP/EP shard (`dense_bytes`, `expert_bytes`, already in
    the parameter dtype), further split over the data-parallel group by ZeRO-3 / FSDP full-shard.
    Offloaded parameters live in host RAM (ZeRO-Infinity). ZeRO Fig. 1: 2 Psi (DDP) -> 2 Psi / Nd (P_os+g+p)."""
    resident = dense_bytes / zero_shards(zero_stage, dense_group, 3) + expert_bytes / zero_shards(
        zero_stage, expert_group, 3
    )
    return where(offload_parameters, 0.0, resident)


def gradients_bytes(dense_bytes, expert_bytes, zero_stage, dense_group, expert_group):
    """Gradients of the trainable parameters on one GPU, split by ZeRO-2/3 (FSDP shard-grad-op/full-shard).
    ZeRO Fig. 1: 2 Psi (DDP, ZeRO-1) -> 2 Psi / Nd (P_os+g)."""
    return dense_bytes / zero_shards(zero_stage, dense_group, 2) + expert_bytes / zero_shards(
        zero_stage, expert_group, 2
    )


def gradient_bytes_per_element(grad_bytes, grad_accumulation_fp32, megatron_gradient_buffer):
    """Bytes per trainable element of the gradients. Megatron-core's DistributedDataParallel allocates one grad
    buffer per (param, grad) dtype with `grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype`, points
    each `param.main_grad` into it, and Transformer Engine's fused weight-gradient accumulation writes there
    (megatron/core/distributed/distributed_data_parallel.py): with fp32 reduction the gradients are that fp32
    buffer alone, not 16-bit gradients next to an fp32 accumulator."""
    return where(megatron_gradient_buffer, where(grad_accumulation_fp32, 4.0, grad_bytes), grad_bytes)


def gradient_accumulation_bytes(
    dense_elements, expert_elements, zero_stage, dense_group, expert_group, enabled, grad_bytes
):
    """An fp32 buffer that accumulates micro-batch gradients next to 16-bit gradients (DeepSpeed's bf16
    optimizer, `grad_accumulation_fp32`), sharded like the gradients. Zero when off or when the gradients
    are fp32 already (accumulating in `.grad` itself needs no extra memory; Megatron's fp32 grad buffer is the
    gradients, `gradient_bytes_per_element`)."""
    needed = where(enabled, where(grad_bytes < 4, 1.0, 0.0), 0.0)
    return (
        needed
        * 4
        * (
            dense_elements / zero_shards(zero_stage, dense_group, 2)
            + expert_elements / zero_shards(zero_stage, expert_group, 2)
        )
    )


def optimizer_states_bytes(
    dense_state_bytes, expert_state_bytes, zero_stage, dense_group, expert_group, offload_optimizer: Flag = False
):
    """Optimizer state on one GPU, fp32 master weights included (ZeRO's K: 12 bytes per parameter for
    mixed-precision Adam), split by ZeRO-1 and up (Megatron's distributed optimizer is ZeRO-1). Offloaded
    state lives in host RAM (ZeRO-Offload). ZeRO Fig. 1: K Psi -> K Psi / Nd."""
    resident = dense_state_bytes / zero_shards(zero_stage, dense_group, 1) + expert_state_bytes / zero_shards(
        zero_stage, expert_group, 1
    )
    return where(offload_optimizer, 0.0, resident)


def sharding_buffer_bytes(zero_stage, dense_group, unit_param_bytes, layer_param_bytes, unit_grad_bytes):
    """Transient buffers of sharded data parallelism on one GPU. ZeRO-3 / FSDP full-shard: the gathered
    parameters of the unit being computed (`unit_param_bytes`: the largest unit, a transformer layer or the
    embedding/head matrix) plus the next layer being prefetched (`layer_param_bytes`), and the unsharded
    gradients of one unit before its reduce-scatter; ZeRO-2: that gradient unit only. Nothing is gathered
    when the group is a single GPU. DDP's 25 MB buckets and NCCL staging are left to the runtime overhead."""
    sharded = where(dense_group > 1, 1.0, 0.0)
    zero3 = unit_param_bytes + layer_param_bytes + unit_grad_bytes
    return sharded * where(zero_stage >= 3, zero3, where(zero_stage == 2, unit_grad_bytes, 0.0))
